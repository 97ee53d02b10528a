package dev.idemd.client;

/** INVALID_ARGUMENT ({@code INVALID_REQUEST}): {@link #violations()} names each field. */
public class InvalidArgumentException extends IdemdStatusException {
  private static final long serialVersionUID = 1L;

  InvalidArgumentException(StatusDetails details) {
    super(details);
  }
}
