package dev.idemd.client;

/** NOT_FOUND ({@code OPERATION_NOT_FOUND}): no such operation, or another tenant's. */
public class NotFoundException extends IdemdStatusException {
  private static final long serialVersionUID = 1L;

  NotFoundException(StatusDetails details) {
    super(details);
  }
}
