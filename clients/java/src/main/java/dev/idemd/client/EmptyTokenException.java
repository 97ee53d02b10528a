package dev.idemd.client;

/**
 * No bearer token, or an empty one: neither {@link IdemdClient.Builder#token(String)} nor {@code
 * IDEMD_TOKEN} gave one. Every RPC needs {@code authorization: Bearer <token>} and the server would
 * refuse each with UNAUTHENTICATED, so the builder refuses at once, before any connection.
 */
public class EmptyTokenException extends InvalidTokenException {
  private static final long serialVersionUID = 1L;

  EmptyTokenException(String message) {
    super(message);
  }
}
