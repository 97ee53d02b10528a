package dev.idemd.client;

/**
 * RESOURCE_EXHAUSTED {@code REQUEST_TOO_LARGE}: longer than any legal request. Never re-sent: the
 * same bytes would be refused again.
 */
public class RequestTooLargeException extends ResourceExhaustedException {
  private static final long serialVersionUID = 1L;

  RequestTooLargeException(StatusDetails details) {
    super(details);
  }
}
