package dev.idemd.client;

/** The server answered a Claim outcome this client does not know: nothing was executed. */
public class UnrecognisedOutcomeException extends ExecuteOnceException {
  private static final long serialVersionUID = 1L;

  UnrecognisedOutcomeException(String message) {
    super(null, message, null);
  }
}
