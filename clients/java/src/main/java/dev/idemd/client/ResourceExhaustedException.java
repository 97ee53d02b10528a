package dev.idemd.client;

/** RESOURCE_EXHAUSTED: overload or a quota; re-sent after {@link #retryAfter()}. */
public class ResourceExhaustedException extends IdemdStatusException {
  private static final long serialVersionUID = 1L;

  ResourceExhaustedException(StatusDetails details) {
    super(details);
  }
}
