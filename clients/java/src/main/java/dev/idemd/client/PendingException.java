package dev.idemd.client;

import dev.idemd.idem.v1.PendingReason;
import java.time.Duration;

/**
 * The operation is still in progress elsewhere (or its retry is not yet due) and this call's
 * deadline passed: nothing was executed; try again after {@link #retryAfter()}.
 */
public class PendingException extends ExecuteOnceException {
  private static final long serialVersionUID = 1L;

  private final Duration retryAfter;
  private final PendingReason reason;

  PendingException(String operationId, Duration retryAfter, PendingReason reason) {
    super(
        operationId,
        "operation " + operationId + " is pending (" + reason + "); retry after " + retryAfter,
        null);
    this.retryAfter = retryAfter;
    this.reason = reason;
  }

  public Duration retryAfter() {
    return retryAfter;
  }

  public PendingReason reason() {
    return reason;
  }
}
