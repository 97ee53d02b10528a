package dev.idemd.client;

/**
 * The bearer token given to {@link IdemdClient.Builder#build()} (or read from {@code IDEMD_TOKEN})
 * cannot authenticate any call: it has whitespace, a control or a non-ASCII character in it (often
 * a newline read from a file). Thrown before any connection is made; an {@link
 * IllegalArgumentException}, as the builder's other refusals.
 */
public class InvalidTokenException extends IllegalArgumentException {
  private static final long serialVersionUID = 1L;

  InvalidTokenException(String message) {
    super(message);
  }
}
