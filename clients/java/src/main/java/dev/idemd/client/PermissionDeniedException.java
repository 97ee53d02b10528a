package dev.idemd.client;

/** PERMISSION_DENIED: the credential lacks the scope the RPC needs. */
public class PermissionDeniedException extends IdemdStatusException {
  private static final long serialVersionUID = 1L;

  PermissionDeniedException(StatusDetails details) {
    super(details);
  }
}
