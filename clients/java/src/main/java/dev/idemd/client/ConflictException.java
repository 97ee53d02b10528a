package dev.idemd.client;

/**
 * {@code IDEMPOTENCY_KEY_REUSED}: the key was used with a different request; never a replay and
 * never a new execution. {@link #operationId()} names the operation that holds the key.
 */
public class ConflictException extends FailedPreconditionException {
  private static final long serialVersionUID = 1L;

  ConflictException(StatusDetails details) {
    super(details);
  }
}
