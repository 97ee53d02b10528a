package dev.idemd.client;

/**
 * UNAVAILABLE: re-sent unchanged after {@link #retryAfter()} or a backoff; seen only once the
 * {@link RetryPolicy} gave up.
 */
public class UnavailableException extends IdemdStatusException {
  private static final long serialVersionUID = 1L;

  UnavailableException(StatusDetails details) {
    super(details);
  }
}
