package dev.idemd.client;

/** {@code REQUEST_MISMATCH}: the same fence re-sent with a different request. */
public class RequestMismatchException extends FailedPreconditionException {
  private static final long serialVersionUID = 1L;

  RequestMismatchException(StatusDetails details) {
    super(details);
  }
}
