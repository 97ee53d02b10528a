package dev.idemd.client;

import dev.idemd.idem.v1.FailureReason;
import dev.idemd.idem.v1.OperationError;

/**
 * The operation ended with a terminal error, stored and replayed (state FAILED): the effect's own
 * {@link Outcome.Terminal}, or a retryable failure past the attempt budget or the operation
 * deadline.
 */
public class OperationFailedException extends ExecuteOnceException {
  private static final long serialVersionUID = 1L;

  private final transient OperationError error;
  private final boolean replayed;

  OperationFailedException(String operationId, OperationError error, boolean replayed) {
    super(
        operationId,
        "operation "
            + operationId
            + " failed: "
            + (error.getCode().isEmpty() ? error.getReason().name() : error.getCode())
            + (error.getMessage().isEmpty() ? "" : ": " + error.getMessage()),
        null);
    this.error = error;
    this.replayed = replayed;
  }

  /** The stored error: code, message, metadata and reason. */
  public OperationError error() {
    return error;
  }

  /** The caller's error code, e.g. {@code card_declined}. */
  public String errorCode() {
    return error.getCode();
  }

  /** TERMINAL, ATTEMPTS_EXHAUSTED or DEADLINE_EXCEEDED. */
  public FailureReason reason() {
    return error.getReason();
  }

  /** True when this call replayed a failure an earlier call stored. */
  public boolean replayed() {
    return replayed;
  }
}
