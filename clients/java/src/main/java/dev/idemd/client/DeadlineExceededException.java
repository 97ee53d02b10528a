package dev.idemd.client;

/** DEADLINE_EXCEEDED: the call's deadline passed; whether it took effect is unknown. */
public class DeadlineExceededException extends IdemdStatusException {
  private static final long serialVersionUID = 1L;

  DeadlineExceededException(StatusDetails details) {
    super(details);
  }
}
