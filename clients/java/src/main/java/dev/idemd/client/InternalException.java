package dev.idemd.client;

/** INTERNAL, or any code idemd does not send on purpose. */
public class InternalException extends IdemdStatusException {
  private static final long serialVersionUID = 1L;

  InternalException(StatusDetails details) {
    super(details);
  }
}
