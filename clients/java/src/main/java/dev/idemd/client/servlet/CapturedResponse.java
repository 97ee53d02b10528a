package dev.idemd.client.servlet;

import jakarta.servlet.ServletOutputStream;
import jakarta.servlet.WriteListener;
import jakarta.servlet.http.HttpServletResponse;
import jakarta.servlet.http.HttpServletResponseWrapper;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The app's response, kept here whole (status, headers, body of at most a limit) instead of being
 * sent: it is stored at idemd before any of it reaches the client, so that a client never sees a
 * response that a retry would not see again. Nothing is committed until the filter sends what idemd
 * recorded.
 */
final class CapturedResponse extends HttpServletResponseWrapper {
  /** The response grew past the filter's limit. */
  static final class TooLarge extends IOException {
    private static final long serialVersionUID = 1L;

    TooLarge() {
      super("the response is larger than maxResponseBytes");
    }
  }

  private final int limit;
  private final Map<String, List<String>> headers = new LinkedHashMap<>();
  private final Map<String, String> names = new LinkedHashMap<>();
  private final Body body = new Body();
  private int status = 200;
  private String contentType;
  private String characterEncoding;
  private PrintWriter writer;
  private boolean usedStream;

  CapturedResponse(HttpServletResponse response, int limit) {
    super(response);
    this.limit = limit;
  }

  int capturedStatus() {
    return status;
  }

  /** The headers as (name, value) pairs, the content type among them. */
  List<Map.Entry<String, String>> capturedHeaders() {
    List<Map.Entry<String, String>> all = new ArrayList<>();
    String type = getContentType();
    if (type != null) {
      all.add(Map.entry("content-type", type));
    }
    headers.forEach(
        (lower, values) -> values.forEach(value -> all.add(Map.entry(names.get(lower), value))));
    return all;
  }

  byte[] capturedBody() throws IOException {
    if (writer != null) {
      writer.flush();
      if (writer.checkError()) {
        throw new TooLarge();
      }
    }
    if (body.tooLarge) {
      throw new TooLarge();
    }
    return body.toByteArray();
  }

  // ---- status ---------------------------------------------------------------------------

  @Override
  public void setStatus(int sc) {
    status = sc;
  }

  @Override
  public int getStatus() {
    return status;
  }

  @Override
  public void sendError(int sc) throws IOException {
    sendError(sc, null);
  }

  @Override
  public void sendError(int sc, String msg) throws IOException {
    resetBuffer();
    status = sc;
    if (msg != null) {
      setContentType("text/plain;charset=UTF-8");
      byte[] text = msg.getBytes(StandardCharsets.UTF_8);
      body.write(text, 0, text.length);
    }
  }

  @Override
  public void sendRedirect(String location) {
    resetBuffer();
    status = 302;
    setHeader("Location", location);
  }

  // ---- headers --------------------------------------------------------------------------

  private static String lower(String name) {
    return name.toLowerCase(Locale.ROOT);
  }

  @Override
  public void setHeader(String name, String value) {
    if (lower(name).equals("content-type")) {
      setContentType(value);
      return;
    }
    headers.remove(lower(name));
    if (value != null) {
      addHeader(name, value);
    }
  }

  @Override
  public void addHeader(String name, String value) {
    if (lower(name).equals("content-type")) {
      setContentType(value);
      return;
    }
    if (lower(name).equals("content-length")) {
      return; // the filter sets it from what it sends
    }
    names.putIfAbsent(lower(name), name);
    headers.computeIfAbsent(lower(name), any -> new ArrayList<>()).add(value);
  }

  @Override
  public void setIntHeader(String name, int value) {
    setHeader(name, Integer.toString(value));
  }

  @Override
  public void addIntHeader(String name, int value) {
    addHeader(name, Integer.toString(value));
  }

  private static String httpDate(long date) {
    return DateTimeFormatter.RFC_1123_DATE_TIME.format(
        Instant.ofEpochMilli(date).atOffset(ZoneOffset.UTC));
  }

  @Override
  public void setDateHeader(String name, long date) {
    setHeader(name, httpDate(date));
  }

  @Override
  public void addDateHeader(String name, long date) {
    addHeader(name, httpDate(date));
  }

  @Override
  public boolean containsHeader(String name) {
    return headers.containsKey(lower(name))
        || (lower(name).equals("content-type") && contentType != null);
  }

  @Override
  public String getHeader(String name) {
    if (lower(name).equals("content-type")) {
      return getContentType();
    }
    List<String> values = headers.get(lower(name));
    return values == null || values.isEmpty() ? null : values.get(0);
  }

  @Override
  public Collection<String> getHeaders(String name) {
    List<String> values = headers.get(lower(name));
    return values == null ? List.of() : List.copyOf(values);
  }

  @Override
  public Collection<String> getHeaderNames() {
    List<String> all = new ArrayList<>(names.values());
    if (contentType != null) {
      all.add("Content-Type");
    }
    return all;
  }

  @Override
  public void setContentType(String type) {
    if (type == null) {
      contentType = null;
      return;
    }
    contentType = type;
    int charset = type.toLowerCase(Locale.ROOT).indexOf("charset=");
    if (charset >= 0 && writer == null) {
      characterEncoding = type.substring(charset + 8).trim().replace("\"", "");
    }
  }

  @Override
  public String getContentType() {
    if (contentType == null) {
      return null;
    }
    if (characterEncoding != null && !contentType.toLowerCase(Locale.ROOT).contains("charset=")) {
      return contentType + ";charset=" + characterEncoding;
    }
    return contentType;
  }

  @Override
  public void setCharacterEncoding(String charset) {
    if (writer == null) {
      characterEncoding = charset;
    }
  }

  @Override
  public String getCharacterEncoding() {
    return characterEncoding != null ? characterEncoding : StandardCharsets.ISO_8859_1.name();
  }

  @Override
  public void setContentLength(int len) {
    // The filter sets Content-Length from what it sends.
  }

  @Override
  public void setContentLengthLong(long len) {
    // The filter sets Content-Length from what it sends.
  }

  @Override
  public void setLocale(Locale locale) {
    if (locale != null) {
      setHeader("Content-Language", locale.toLanguageTag());
    }
  }

  // ---- body -----------------------------------------------------------------------------

  @Override
  public ServletOutputStream getOutputStream() {
    if (writer != null) {
      throw new IllegalStateException("getWriter() was already called");
    }
    usedStream = true;
    return body;
  }

  @Override
  public PrintWriter getWriter() {
    if (usedStream) {
      throw new IllegalStateException("getOutputStream() was already called");
    }
    if (writer == null) {
      writer =
          new PrintWriter(new OutputStreamWriter(body, Charset.forName(getCharacterEncoding())));
    }
    return writer;
  }

  @Override
  public void flushBuffer() {
    if (writer != null) {
      writer.flush();
    }
  }

  @Override
  public boolean isCommitted() {
    return false;
  }

  @Override
  public void reset() {
    resetBuffer();
    headers.clear();
    names.clear();
    status = 200;
    contentType = null;
  }

  @Override
  public void resetBuffer() {
    if (writer != null) {
      writer.flush();
    }
    body.reset();
  }

  @Override
  public void setBufferSize(int size) {
    // Everything is buffered until the filter sends it.
  }

  @Override
  public int getBufferSize() {
    return limit;
  }

  /** The body, never past the limit. */
  private final class Body extends ServletOutputStream {
    private final ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    private boolean tooLarge;

    @Override
    public void write(int b) throws IOException {
      write(new byte[] {(byte) b}, 0, 1);
    }

    @Override
    public void write(byte[] b, int off, int len) throws IOException {
      if (tooLarge || bytes.size() + len > limit) {
        tooLarge = true;
        throw new TooLarge();
      }
      bytes.write(b, off, len);
    }

    void reset() {
      bytes.reset();
    }

    byte[] toByteArray() {
      return bytes.toByteArray();
    }

    @Override
    public boolean isReady() {
      return true;
    }

    @Override
    public void setWriteListener(WriteListener listener) {
      throw new UnsupportedOperationException("the idempotency filter buffers responses whole");
    }
  }
}
