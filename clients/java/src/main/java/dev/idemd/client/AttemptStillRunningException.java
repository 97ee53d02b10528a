package dev.idemd.client;

/** {@code ATTEMPT_STILL_RUNNING}: NOT_APPLIED before the last attempt's deadline. */
public class AttemptStillRunningException extends FailedPreconditionException {
  private static final long serialVersionUID = 1L;

  AttemptStillRunningException(StatusDetails details) {
    super(details);
  }
}
