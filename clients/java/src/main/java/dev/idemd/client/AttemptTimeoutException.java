package dev.idemd.client;

/** The effect was cancelled at the attempt deadline; its outcome is unknown. */
public class AttemptTimeoutException extends OutcomeUnknownException {
  private static final long serialVersionUID = 1L;

  AttemptTimeoutException(String operationId, String message) {
    super(operationId, message, null);
  }
}
