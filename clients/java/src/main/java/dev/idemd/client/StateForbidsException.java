package dev.idemd.client;

/** {@code STATE_FORBIDS}: any other write the state forbids. */
public class StateForbidsException extends FailedPreconditionException {
  private static final long serialVersionUID = 1L;

  StateForbidsException(StatusDetails details) {
    super(details);
  }
}
