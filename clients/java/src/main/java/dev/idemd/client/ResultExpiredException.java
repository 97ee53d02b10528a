package dev.idemd.client;

/** {@code RESULT_EXPIRED}: the key's result passed retention; it is never executed again. */
public class ResultExpiredException extends FailedPreconditionException {
  private static final long serialVersionUID = 1L;

  ResultExpiredException(StatusDetails details) {
    super(details);
  }
}
