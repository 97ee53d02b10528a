package dev.idemd.client;

/** FAILED_PRECONDITION: a request the operation's state refuses. */
public class FailedPreconditionException extends IdemdStatusException {
  private static final long serialVersionUID = 1L;

  FailedPreconditionException(StatusDetails details) {
    super(details);
  }
}
