package dev.idemd.client;

/**
 * CANCELLED: the call was abandoned on this side, e.g. its thread was interrupted while it waited;
 * whether the server took it is unknown.
 */
public class CancelledException extends IdemdStatusException {
  private static final long serialVersionUID = 1L;

  CancelledException(StatusDetails details) {
    super(details);
  }
}
