package dev.idemd.client.servlet;

import dev.idemd.client.ConflictException;
import dev.idemd.client.Fingerprints;
import dev.idemd.client.IdemdStatusException;
import dev.idemd.client.InvalidArgumentException;
import dev.idemd.client.NeedsReconciliationException;
import dev.idemd.client.OperationFailedException;
import dev.idemd.client.OperationResult;
import dev.idemd.client.Outcome;
import dev.idemd.client.OutcomeUnknownException;
import dev.idemd.client.Payload;
import dev.idemd.client.PendingException;
import dev.idemd.client.ResultExpiredException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The {@code Idempotency-Key} HTTP mapping, as every idemd middleware makes it (the Python {@code
 * idemd.http}, the TypeScript Express middleware): how the key is read and scoped, what identifies
 * a request, how a response is stored in idemd's result and replayed from it, and which answer
 * (status and RFC 9457 problem body) each outcome gets. No servlet API here.
 */
final class HttpMapping {
  /** idemd's bound on a key, in UTF-8 bytes. */
  static final int MAX_KEY_BYTES = 255;

  /** What {@link #scopedKey} puts before the header's key: 32 hex digits and a colon. */
  static final int PRINCIPAL_PREFIX_BYTES = 33;

  /**
   * The status of a key used with another request, or whose response is no longer kept: 422, as
   * draft-ietf-httpapi-idempotency-key-header says.
   */
  static final int DEFAULT_CONFLICT_STATUS = 422;

  /**
   * The status of a key whose first request still runs: 409, as
   * draft-ietf-httpapi-idempotency-key-header says.
   */
  static final int DEFAULT_IN_PROGRESS_STATUS = 409;

  static final List<String> DEFAULT_KEEP_HEADERS =
      List.of("location", "etag", "last-modified", "cache-control", "content-language", "link");

  // json_payload/bytes_payload are bounded by the server (64 KiB by default); larger requests
  // are fingerprinted here, exactly as the server would.
  private static final int MAX_SENT_PAYLOAD = 60 * 1024;
  private static final int METADATA_LIMIT = 256;
  private static final String STATUS = "http.status";
  private static final String HEADER = "http.header.";
  private static final Pattern OPERATION_CHARS = Pattern.compile("[^A-Za-z0-9._/-]");
  private static final Pattern ESCAPE = Pattern.compile("\\\\(.)");

  static final Response MISSING_KEY =
      problem(
          400, "Idempotency-Key missing", "this request requires an Idempotency-Key header", -1);
  static final Response NO_PRINCIPAL =
      problem(
          400,
          "Idempotency-Key without a caller",
          "Idempotency-Keys are scoped per caller and no caller (principal) was found for this"
              + " request: send it with the caller's credentials",
          -1);
  static final Response TOO_LARGE =
      problem(413, "Request too large", "the request body is too large", -1);
  static final Response RESPONSE_TOO_LARGE =
      problem(500, "Response too large", "the response is too large to keep", -1);

  private HttpMapping() {}

  /** A whole response: status, headers as (lower-case name, value) pairs, body. */
  record Response(int status, List<Map.Entry<String, String>> headers, byte[] body) {}

  /** The key of an {@code Idempotency-Key} header: an RFC 8941 sf-string, or a bare token. */
  static String parseKey(String value) {
    String trimmed = value.strip();
    if (trimmed.length() >= 2 && trimmed.startsWith("\"") && trimmed.endsWith("\"")) {
      Matcher escapes = ESCAPE.matcher(trimmed.substring(1, trimmed.length() - 1));
      return escapes.replaceAll(match -> Matcher.quoteReplacement(match.group(1)));
    }
    return trimmed;
  }

  /**
   * The key sent to idemd for {@code key} sent by {@code principal}: the first 16 bytes of SHA-256
   * of the principal's UTF-8, in lower-case hex, then {@code :}, then the key. The principal (often
   * a credential) never reaches idemd in clear, and every idemd client computes the same key:
   * {@code scopedKey("Bearer alice", "k")} is {@code "9d7cce461e4b2f090a3d686b4ae72d25:k"}.
   */
  static String scopedKey(String principal, String key) {
    return HexFormat.of().formatHex(sha256(principal.getBytes(StandardCharsets.UTF_8)), 0, 16)
        + ":"
        + key;
  }

  static boolean validKey(String key, int maxBytes) {
    return !key.isEmpty() && key.getBytes(StandardCharsets.UTF_8).length <= maxBytes;
  }

  /** {@code http.<method><path>} in idemd's operation alphabet, at most 128 characters. */
  static String operationName(String method, String path) {
    String name =
        "http."
            + method.toLowerCase(java.util.Locale.ROOT)
            + OPERATION_CHARS.matcher(path == null || path.isEmpty() ? "/" : path).replaceAll("_");
    if (name.length() > 128) {
      String digest =
          HexFormat.of().formatHex(sha256(name.getBytes(StandardCharsets.UTF_8))).substring(0, 16);
      name = name.substring(0, 111) + "." + digest;
    }
    return name;
  }

  /**
   * What the key must always be used with: method, path, query, content type and body (framed as
   * the other idemd middlewares frame them; fingerprinted when too long to send).
   */
  static Payload requestIdentity(
      String method, String path, String query, String contentType, byte[] body) {
    byte[] framed = framed(method, path, query, contentType, body);
    if (framed.length <= MAX_SENT_PAYLOAD) {
      return Payload.bytes(framed);
    }
    return Payload.fingerprint(Fingerprints.bytes(framed));
  }

  /**
   * The fingerprint idemd computes for {@link #requestIdentity} (mode {@code bytes} of the framed
   * request, whether it was sent or fingerprinted here): the request's fingerprint without a
   * selector.
   */
  static byte[] requestFingerprint(
      String method, String path, String query, String contentType, byte[] body) {
    return Fingerprints.bytes(framed(method, path, query, contentType, body));
  }

  /** {@code ["METHOD","path","query","content type"]}, a newline, the body. */
  static byte[] framed(String method, String path, String query, String contentType, byte[] body) {
    String head =
        "["
            + jsonString(method.toUpperCase(java.util.Locale.ROOT))
            + ","
            + jsonString(path == null || path.isEmpty() ? "/" : path)
            + ","
            + jsonString(query)
            + ","
            + jsonString(contentType)
            + "]";
    byte[] headBytes = head.getBytes(StandardCharsets.UTF_8);
    byte[] framed = new byte[headBytes.length + 1 + body.length];
    System.arraycopy(headBytes, 0, framed, 0, headBytes.length);
    framed[headBytes.length] = '\n';
    System.arraycopy(body, 0, framed, headBytes.length + 1, body.length);
    return framed;
  }

  /**
   * The app's whole response as the result idemd keeps: body and content type, the status and the
   * kept headers in the metadata (within idemd's metadata limits).
   */
  static Outcome.Success stored(
      int status, List<Map.Entry<String, String>> headers, byte[] body, List<String> keepHeaders) {
    String contentType = "";
    Map<String, String> metadata = new LinkedHashMap<>();
    metadata.put(STATUS, Integer.toString(status));
    for (Map.Entry<String, String> header : headers) {
      String name = header.getKey().toLowerCase(java.util.Locale.ROOT);
      String value = header.getValue();
      if (name.equals("content-type")) {
        contentType = value;
      } else if (keepHeaders.contains(name)) {
        String metaKey = HEADER + name;
        if (metadata.containsKey(metaKey)) {
          value = metadata.get(metaKey) + ", " + value;
        }
        if (metaKey.length() + value.getBytes(StandardCharsets.UTF_8).length <= METADATA_LIMIT
            && metadata.size() < 16) {
          metadata.put(metaKey, value);
        }
      }
    }
    return Outcome.success(body, contentType, metadata);
  }

  /** The stored response, as sent to this request (made now or replayed). */
  static Response replayed(OperationResult result) {
    int status = Integer.parseInt(result.metadata().getOrDefault(STATUS, "200"));
    byte[] body = result.body();
    List<Map.Entry<String, String>> headers = new ArrayList<>();
    headers.add(Map.entry("content-length", Integer.toString(body.length)));
    if (!result.contentType().isEmpty()) {
      headers.add(Map.entry("content-type", result.contentType()));
    }
    result.metadata().entrySet().stream()
        .filter(entry -> entry.getKey().startsWith(HEADER))
        .sorted(Map.Entry.comparingByKey())
        .forEach(
            entry ->
                headers.add(
                    Map.entry(entry.getKey().substring(HEADER.length()), entry.getValue())));
    if (result.replayed()) {
      headers.add(Map.entry("idempotent-replayed", "true"));
    }
    return new Response(status, headers, body);
  }

  /** An RFC 9457 problem details response; {@code retryAfterSeconds} below 0 for none. */
  static Response problem(int status, String title, String detail, double retryAfterSeconds) {
    byte[] body =
        ("{\"type\": \"about:blank\", \"title\": "
                + jsonString(title)
                + ", \"status\": "
                + status
                + ", \"detail\": "
                + jsonString(detail)
                + "}")
            .getBytes(StandardCharsets.UTF_8);
    List<Map.Entry<String, String>> headers = new ArrayList<>();
    headers.add(Map.entry("content-type", "application/problem+json"));
    headers.add(Map.entry("content-length", Integer.toString(body.length)));
    if (retryAfterSeconds >= 0) {
      headers.add(
          Map.entry(
              "retry-after", Long.toString(Math.max(1, (long) Math.ceil(retryAfterSeconds)))));
    }
    return new Response(status, headers, body);
  }

  static Response invalidKey(int maxBytes) {
    return problem(
        400, "Invalid Idempotency-Key", "the Idempotency-Key must be 1-" + maxBytes + " bytes", -1);
  }

  /**
   * The answer to an {@code executeOnce} that failed with {@code error}; null when the error is no
   * answer of idemd's (an app's own exception, which the caller re-throws instead). A key used with
   * another request, or whose response is no longer kept, is answered {@code conflictStatus}; a key
   * whose first request still runs, {@code inProgressStatus} (with {@code Retry-After}).
   */
  static Response answerFor(Exception error, int conflictStatus, int inProgressStatus) {
    if (error instanceof ConflictException) {
      return problem(
          conflictStatus,
          "Idempotency-Key reused",
          "this Idempotency-Key was used with a different request",
          -1);
    }
    if (error instanceof ResultExpiredException) {
      return problem(
          conflictStatus,
          "Idempotency-Key expired",
          "this Idempotency-Key's response is no longer kept; use a new key",
          -1);
    }
    if (error instanceof PendingException) {
      return problem(
          inProgressStatus,
          "Request in progress",
          "a request with this Idempotency-Key is still being processed",
          ((PendingException) error).retryAfter().toNanos() / 1e9);
    }
    if (error instanceof InvalidArgumentException) {
      return problem(400, "Invalid request", ((IdemdStatusException) error).statusMessage(), -1);
    }
    if (error instanceof OutcomeUnknownException
        || error instanceof NeedsReconciliationException
        || error instanceof OperationFailedException) {
      return problem(
          500,
          "Outcome unknown",
          "an earlier attempt with this Idempotency-Key may have taken effect",
          -1);
    }
    if (error instanceof IdemdStatusException) {
      IdemdStatusException status = (IdemdStatusException) error;
      double retryAfter = status.retryAfter().map(delay -> delay.toNanos() / 1e9).orElse(1.0);
      return problem(503, "Idempotency service unavailable", status.code().name(), retryAfter);
    }
    return null;
  }

  /** A JSON string as Python's json.dumps writes it (non-ASCII escaped). */
  static String jsonString(String value) {
    StringBuilder out = new StringBuilder("\"");
    for (int i = 0; i < value.length(); i++) {
      char c = value.charAt(i);
      switch (c) {
        case '"':
          out.append("\\\"");
          break;
        case '\\':
          out.append("\\\\");
          break;
        case '\n':
          out.append("\\n");
          break;
        case '\r':
          out.append("\\r");
          break;
        case '\t':
          out.append("\\t");
          break;
        case '\b':
          out.append("\\b");
          break;
        case '\f':
          out.append("\\f");
          break;
        default:
          if (c < 0x20 || c > 0x7f) {
            out.append(String.format("\\u%04x", (int) c));
          } else {
            out.append(c);
          }
      }
    }
    return out.append('"').toString();
  }

  private static byte[] sha256(byte[] bytes) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(bytes);
    } catch (NoSuchAlgorithmException missing) {
      throw new IllegalStateException("every Java platform has SHA-256", missing);
    }
  }
}
