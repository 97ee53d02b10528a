package dev.idemd.client;

/** {@code ATTEMPT_DEADLINE_PASSED}: the owner's attempt deadline passed; it may not write. */
public class AttemptDeadlinePassedException extends FailedPreconditionException {
  private static final long serialVersionUID = 1L;

  AttemptDeadlinePassedException(StatusDetails details) {
    super(details);
  }
}
