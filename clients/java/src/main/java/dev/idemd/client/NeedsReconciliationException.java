package dev.idemd.client;

/**
 * The attempt budget is spent on unknown outcomes: only Reconcile can resolve the operation.
 * Nothing was executed.
 */
public class NeedsReconciliationException extends ExecuteOnceException {
  private static final long serialVersionUID = 1L;

  private final long fence;
  private final int attempts;

  NeedsReconciliationException(String operationId, long fence, int attempts) {
    super(
        operationId,
        "operation "
            + operationId
            + " needs reconciliation (fence "
            + Long.toUnsignedString(fence)
            + ", "
            + attempts
            + " attempts); nothing was executed",
        null);
    this.fence = fence;
    this.attempts = attempts;
  }

  /** The fence a reconciler passes as expected_fence. */
  public long fence() {
    return fence;
  }

  public int attempts() {
    return attempts;
  }
}
