package dev.idemd.client;

/**
 * The document is not I-JSON (RFC 7493), or not one JSON document: the server would answer
 * INVALID_ARGUMENT, because canonicalization would merge distinct requests (duplicate keys, lone
 * surrogates, numbers a double cannot tell apart).
 */
public class NotIJsonException extends IllegalArgumentException {
  private static final long serialVersionUID = 1L;

  NotIJsonException(String message) {
    super(message);
  }
}
