package dev.idemd.client.servlet;

import jakarta.servlet.ReadListener;
import jakarta.servlet.ServletInputStream;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletRequestWrapper;
import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.InputStreamReader;
import java.io.UnsupportedEncodingException;
import java.net.URLDecoder;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Enumeration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The request with its body read by the filter (to identify the request) and given to the app
 * again: as a stream, a reader, or form parameters.
 */
final class BufferedRequest extends HttpServletRequestWrapper {
  private final byte[] body;
  private Map<String, String[]> parameters;
  private boolean bodyTaken;

  BufferedRequest(HttpServletRequest request, byte[] body) {
    super(request);
    this.body = body;
  }

  @Override
  public ServletInputStream getInputStream() {
    bodyTaken = true;
    ByteArrayInputStream in = new ByteArrayInputStream(body);
    return new ServletInputStream() {
      @Override
      public int read() {
        return in.read();
      }

      @Override
      public int read(byte[] b, int off, int len) {
        return in.read(b, off, len);
      }

      @Override
      public boolean isFinished() {
        return in.available() == 0;
      }

      @Override
      public boolean isReady() {
        return true;
      }

      @Override
      public void setReadListener(ReadListener listener) {
        throw new UnsupportedOperationException("the idempotency filter reads requests whole");
      }
    };
  }

  @Override
  public BufferedReader getReader() throws UnsupportedEncodingException {
    String encoding = getCharacterEncoding();
    Charset charset = encoding == null ? StandardCharsets.ISO_8859_1 : Charset.forName(encoding);
    bodyTaken = true;
    return new BufferedReader(new InputStreamReader(new ByteArrayInputStream(body), charset));
  }

  @Override
  public int getContentLength() {
    return body.length;
  }

  @Override
  public long getContentLengthLong() {
    return body.length;
  }

  // ---- form parameters, from the query and a form body --------------------------------------

  @Override
  public String getParameter(String name) {
    String[] values = parameters().get(name);
    return values == null || values.length == 0 ? null : values[0];
  }

  @Override
  public Map<String, String[]> getParameterMap() {
    return Collections.unmodifiableMap(parameters());
  }

  @Override
  public Enumeration<String> getParameterNames() {
    return Collections.enumeration(parameters().keySet());
  }

  @Override
  public String[] getParameterValues(String name) {
    String[] values = parameters().get(name);
    return values == null ? null : values.clone();
  }

  private Map<String, String[]> parameters() {
    if (parameters != null) {
      return parameters;
    }
    Map<String, List<String>> all = new LinkedHashMap<>();
    Charset charset =
        getCharacterEncoding() == null
            ? StandardCharsets.UTF_8
            : Charset.forName(getCharacterEncoding());
    parse(getQueryString(), charset, all);
    String type = getContentType();
    if (!bodyTaken
        && type != null
        && type.toLowerCase(Locale.ROOT).startsWith("application/x-www-form-urlencoded")) {
      parse(new String(body, StandardCharsets.ISO_8859_1), charset, all);
    }
    Map<String, String[]> result = new LinkedHashMap<>();
    all.forEach((name, values) -> result.put(name, values.toArray(new String[0])));
    parameters = result;
    return parameters;
  }

  private static void parse(String encoded, Charset charset, Map<String, List<String>> into) {
    if (encoded == null || encoded.isEmpty()) {
      return;
    }
    for (String pair : encoded.split("&")) {
      if (pair.isEmpty()) {
        continue;
      }
      int equals = pair.indexOf('=');
      String name = equals >= 0 ? pair.substring(0, equals) : pair;
      String value = equals >= 0 ? pair.substring(equals + 1) : "";
      into.computeIfAbsent(decode(name, charset), any -> new ArrayList<>())
          .add(decode(value, charset));
    }
  }

  private static String decode(String text, Charset charset) {
    try {
      return URLDecoder.decode(text, charset);
    } catch (IllegalArgumentException malformed) {
      return text;
    }
  }
}
