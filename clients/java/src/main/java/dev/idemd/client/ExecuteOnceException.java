package dev.idemd.client;

import java.util.Optional;

/**
 * An outcome of {@link IdemdClient#executeOnce} other than a result: the operation failed, its
 * outcome is unknown, it is still pending, or only a reconciler can settle it. Checked, because
 * every call site must decide what each means for its caller (none of them is a bug to let
 * propagate); protocol refusals and transport failures are the unchecked {@link
 * IdemdStatusException}s.
 */
public abstract class ExecuteOnceException extends Exception {
  private static final long serialVersionUID = 1L;

  private final String operationId;

  ExecuteOnceException(String operationId, String message, Throwable cause) {
    super(message, cause);
    this.operationId = operationId;
  }

  /** The operation, when one was reached. */
  public Optional<String> operationId() {
    return Optional.ofNullable(operationId);
  }
}
