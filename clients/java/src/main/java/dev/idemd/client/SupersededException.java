package dev.idemd.client;

import dev.idemd.idem.v1.Operation;

/**
 * A newer owner or a reconciler took the operation while this call held it, and it has not ended
 * yet: what is stored stands, and the effect is never redone here.
 */
public class SupersededException extends ExecuteOnceException {
  private static final long serialVersionUID = 1L;

  private final transient Operation operation;

  SupersededException(Operation operation) {
    super(
        operation.getOperationId(),
        "operation " + operation.getOperationId() + " was taken over; now " + operation.getState(),
        null);
    this.operation = operation;
  }

  /** The operation as stored when this call looked it up. */
  public Operation operation() {
    return operation;
  }
}
