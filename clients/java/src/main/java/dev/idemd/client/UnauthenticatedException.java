package dev.idemd.client;

/**
 * UNAUTHENTICATED: no token ({@code MISSING_CREDENTIALS}) or a bad one ({@code
 * INVALID_CREDENTIALS}).
 */
public class UnauthenticatedException extends IdemdStatusException {
  private static final long serialVersionUID = 1L;

  UnauthenticatedException(StatusDetails details) {
    super(details);
  }
}
