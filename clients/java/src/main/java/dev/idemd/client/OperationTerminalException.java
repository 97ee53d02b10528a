package dev.idemd.client;

/** {@code OPERATION_TERMINAL}: the operation already ended. */
public class OperationTerminalException extends FailedPreconditionException {
  private static final long serialVersionUID = 1L;

  OperationTerminalException(StatusDetails details) {
    super(details);
  }
}
