package dev.idemd.client;

import io.grpc.Status;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * A gRPC status from idemd, or from the transport when {@link #reason()} is empty, decoded from its
 * {@code google.rpc} details into the most specific subclass: branch on the class (or on the
 * reason), never on the message.
 *
 * <p>Unchecked, as grpc-java's own {@code StatusRuntimeException}: a status is either a programming
 * error (INVALID_ARGUMENT, a conflicting key), a refusal the protocol handles for you inside {@code
 * executeOnce}, or a transport failure that outlasted the {@link RetryPolicy}. The outcomes of an
 * operation that every call site must decide about are the checked {@link ExecuteOnceException}s
 * instead.
 */
public class IdemdStatusException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** One BadRequest field violation: the field as named in the proto ({@code scope.key}). */
  public record FieldViolation(String field, String description) {}

  private final Status.Code code;
  private final String statusMessage;
  private final String reason;
  private final transient Map<String, String> metadata;
  private final Duration retryAfter;
  private final transient List<FieldViolation> violations;

  IdemdStatusException(StatusDetails details) {
    super(details.describe(), details.cause());
    this.code = details.code();
    this.statusMessage = details.message();
    this.reason = details.reason();
    this.metadata = Map.copyOf(details.metadata());
    this.retryAfter = details.retryAfter();
    this.violations = List.copyOf(details.violations());
  }

  /** The gRPC status code. */
  public Status.Code code() {
    return code;
  }

  /** The status message as the server (or the transport) gave it. */
  public String statusMessage() {
    return statusMessage;
  }

  /**
   * The ErrorInfo reason ({@code LEASE_LOST}, ...), stable API; empty when the status had no
   * ErrorInfo, e.g. a connection that failed before reaching idemd.
   */
  public Optional<String> reason() {
    return Optional.ofNullable(reason);
  }

  /** The ErrorInfo metadata ({@code operation_id}, {@code state}, {@code current_fence}). */
  public Map<String, String> metadata() {
    return metadata;
  }

  /**
   * How long to wait before re-sending: RetryInfo's delay, or the {@code grpc-retry-pushback-ms}
   * trailer's, whichever is longer; empty when the status had neither.
   */
  public Optional<Duration> retryAfter() {
    return Optional.ofNullable(retryAfter);
  }

  /** BadRequest's field violations (INVALID_ARGUMENT). */
  public List<FieldViolation> violations() {
    return violations;
  }

  /** The operation the refusal is about, when the server named it. */
  public Optional<String> operationId() {
    return Optional.ofNullable(metadata.get("operation_id"));
  }

  /** The operation's state as idemd named it ({@code IN_PROGRESS}, {@code SUCCEEDED}...). */
  public Optional<String> state() {
    return Optional.ofNullable(metadata.get("state"));
  }

  /** The operation's current fence, when the server named it (LEASE_LOST). */
  public OptionalLong currentFence() {
    String value = metadata.get("current_fence");
    if (value == null || value.isEmpty() || !value.chars().allMatch(Character::isDigit)) {
      return OptionalLong.empty();
    }
    try {
      return OptionalLong.of(Long.parseUnsignedLong(value));
    } catch (NumberFormatException tooLarge) {
      return OptionalLong.empty();
    }
  }
}
