package dev.idemd.client;

/**
 * This attempt's effect may or may not have happened (idemd was told UNKNOWN, or could not be
 * told), or an earlier attempt's may have and this call cannot check it. Nothing is redone: the
 * next owner reconciles first, or a reconciler settles the operation.
 */
public class OutcomeUnknownException extends ExecuteOnceException {
  private static final long serialVersionUID = 1L;

  OutcomeUnknownException(String operationId, String message, Throwable cause) {
    super(operationId, "operation " + operationId + ": " + message, cause);
  }
}
