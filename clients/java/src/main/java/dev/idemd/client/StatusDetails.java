package dev.idemd.client;

import com.google.protobuf.Any;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.rpc.BadRequest;
import com.google.rpc.ErrorInfo;
import com.google.rpc.RetryInfo;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.protobuf.StatusProto;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * A status decoded from its {@code grpc-status-details-bin} trailer (ErrorInfo, RetryInfo,
 * BadRequest) and its {@code grpc-retry-pushback-ms} trailer, and the typed exception it becomes.
 */
record StatusDetails(
    Status.Code code,
    String message,
    String reason,
    Map<String, String> metadata,
    Duration retryAfter,
    List<IdemdStatusException.FieldViolation> violations,
    Throwable cause) {

  static final String DOMAIN = "idem.v1";
  static final Metadata.Key<String> PUSHBACK =
      Metadata.Key.of("grpc-retry-pushback-ms", Metadata.ASCII_STRING_MARSHALLER);

  private static final Map<String, Function<StatusDetails, IdemdStatusException>> BY_REASON =
      Map.of(
          "IDEMPOTENCY_KEY_REUSED", ConflictException::new,
          "RESULT_EXPIRED", ResultExpiredException::new,
          "OPERATION_TERMINAL", OperationTerminalException::new,
          "REQUEST_MISMATCH", RequestMismatchException::new,
          "LEASE_STILL_LIVE", LeaseStillLiveException::new,
          "ATTEMPT_STILL_RUNNING", AttemptStillRunningException::new,
          "ATTEMPT_DEADLINE_PASSED", AttemptDeadlinePassedException::new,
          "STATE_FORBIDS", StateForbidsException::new,
          "LEASE_LOST", LeaseLostException::new,
          "REQUEST_TOO_LARGE", RequestTooLargeException::new);

  String describe() {
    return code + ": " + message + (reason == null ? "" : " (" + reason + ")");
  }

  /** The most specific exception for this status: by its reason, else by its code. */
  IdemdStatusException toException() {
    if (reason != null && BY_REASON.containsKey(reason)) {
      return BY_REASON.get(reason).apply(this);
    }
    switch (code) {
      case INVALID_ARGUMENT:
        return new InvalidArgumentException(this);
      case UNAUTHENTICATED:
        return new UnauthenticatedException(this);
      case PERMISSION_DENIED:
        return new PermissionDeniedException(this);
      case NOT_FOUND:
        return new NotFoundException(this);
      case FAILED_PRECONDITION:
        return new FailedPreconditionException(this);
      case ABORTED:
        return new AbortedException(this);
      case UNAVAILABLE:
        return new UnavailableException(this);
      case DEADLINE_EXCEEDED:
        return new DeadlineExceededException(this);
      case RESOURCE_EXHAUSTED:
        return new ResourceExhaustedException(this);
      case CANCELLED:
        return new CancelledException(this);
      default:
        return new InternalException(this);
    }
  }

  /** The typed exception of a failed call (any throwable a gRPC call completes with). */
  static IdemdStatusException exceptionOf(Throwable failure) {
    Status status = Status.fromThrowable(failure);
    Metadata trailers = Status.trailersFromThrowable(failure);
    return decode(status, trailers, failure).toException();
  }

  /** A status made on this side (no trailers). */
  static IdemdStatusException local(Status.Code code, String message, Throwable cause) {
    return new StatusDetails(code, message, null, Map.of(), null, List.of(), cause).toException();
  }

  static StatusDetails decode(Status status, Metadata trailers, Throwable cause) {
    String reason = null;
    Map<String, String> metadata = Map.of();
    Duration retryAfter = null;
    List<IdemdStatusException.FieldViolation> violations = new ArrayList<>();
    com.google.rpc.Status details = null;
    if (trailers != null) {
      try {
        details = StatusProto.fromStatusAndTrailers(status, trailers);
      } catch (RuntimeException malformed) {
        details = null; // undecodable details: the status code alone decides
      }
    }
    if (details != null) {
      for (Any detail : details.getDetailsList()) {
        try {
          if (detail.is(ErrorInfo.class)) {
            ErrorInfo info = detail.unpack(ErrorInfo.class);
            if (DOMAIN.equals(info.getDomain()) || reason == null) {
              reason = info.getReason();
              metadata = new HashMap<>(info.getMetadataMap());
            }
          } else if (detail.is(RetryInfo.class)) {
            com.google.protobuf.Duration delay = detail.unpack(RetryInfo.class).getRetryDelay();
            retryAfter = longer(retryAfter, nonNegative(delay));
          } else if (detail.is(BadRequest.class)) {
            for (BadRequest.FieldViolation violation :
                detail.unpack(BadRequest.class).getFieldViolationsList()) {
              violations.add(
                  new IdemdStatusException.FieldViolation(
                      violation.getField(), violation.getDescription()));
            }
          }
        } catch (InvalidProtocolBufferException malformed) {
          continue;
        }
      }
    }
    if (trailers != null) {
      String pushback = trailers.get(PUSHBACK);
      if (pushback != null) {
        try {
          long millis = Long.parseLong(pushback.trim());
          if (millis >= 0) {
            retryAfter = longer(retryAfter, Duration.ofMillis(millis));
          }
        } catch (NumberFormatException malformed) {
          // gRPC's retry design (A6) reads a malformed pushback as "no delay given".
        }
      }
    }
    String message = status.getDescription() == null ? "" : status.getDescription();
    return new StatusDetails(
        status.getCode(), message, reason, metadata, retryAfter, violations, cause);
  }

  private static Duration nonNegative(com.google.protobuf.Duration delay) {
    Duration value = Duration.ofSeconds(delay.getSeconds(), delay.getNanos());
    return value.isNegative() ? Duration.ZERO : value;
  }

  private static Duration longer(Duration a, Duration b) {
    if (a == null) {
      return b;
    }
    return a.compareTo(b) >= 0 ? a : b;
  }
}
