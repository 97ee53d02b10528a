package dev.idemd.client;

/** ABORTED. */
public class AbortedException extends IdemdStatusException {
  private static final long serialVersionUID = 1L;

  AbortedException(StatusDetails details) {
    super(details);
  }
}
