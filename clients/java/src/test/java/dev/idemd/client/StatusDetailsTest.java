package dev.idemd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.Any;
import com.google.protobuf.Message;
import com.google.rpc.BadRequest;
import com.google.rpc.ErrorInfo;
import com.google.rpc.RetryInfo;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.protobuf.StatusProto;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Statuses decoded from their google.rpc details, without a server. */
class StatusDetailsTest {
  static StatusRuntimeException status(Status.Code code, Message... details) {
    com.google.rpc.Status.Builder status =
        com.google.rpc.Status.newBuilder().setCode(code.value()).setMessage("m");
    for (Message detail : details) {
      status.addDetails(Any.pack(detail));
    }
    return StatusProto.toStatusRuntimeException(status.build());
  }

  static ErrorInfo info(String reason, Map<String, String> metadata) {
    return ErrorInfo.newBuilder()
        .setReason(reason)
        .setDomain("idem.v1")
        .putAllMetadata(metadata)
        .build();
  }

  static RetryInfo retry(Duration delay) {
    return RetryInfo.newBuilder().setRetryDelay(IdemdClient.Durations.of(delay)).build();
  }

  @Test
  void retryInfoAndReasonsAreDecoded() {
    IdemdStatusException unavailable =
        StatusDetails.exceptionOf(
            status(
                Status.Code.UNAVAILABLE,
                info("STORE_UNAVAILABLE", Map.of()),
                retry(Duration.ofMillis(200))));
    assertTrue(unavailable instanceof UnavailableException);
    assertEquals(Duration.ofMillis(200), unavailable.retryAfter().orElseThrow());
    assertEquals("STORE_UNAVAILABLE", unavailable.reason().orElseThrow());
    IdemdStatusException exhausted =
        StatusDetails.exceptionOf(
            status(Status.Code.RESOURCE_EXHAUSTED, retry(Duration.ofMillis(200))));
    assertTrue(exhausted instanceof ResourceExhaustedException);
    assertTrue(
        StatusDetails.exceptionOf(
                status(Status.Code.RESOURCE_EXHAUSTED, info("REQUEST_TOO_LARGE", Map.of())))
            instanceof RequestTooLargeException);
  }

  @Test
  void everyFailedPreconditionReasonHasItsClass() {
    Map<String, Class<?>> classes =
        Map.of(
            "IDEMPOTENCY_KEY_REUSED", ConflictException.class,
            "RESULT_EXPIRED", ResultExpiredException.class,
            "OPERATION_TERMINAL", OperationTerminalException.class,
            "REQUEST_MISMATCH", RequestMismatchException.class,
            "LEASE_STILL_LIVE", LeaseStillLiveException.class,
            "ATTEMPT_STILL_RUNNING", AttemptStillRunningException.class,
            "ATTEMPT_DEADLINE_PASSED", AttemptDeadlinePassedException.class,
            "STATE_FORBIDS", StateForbidsException.class);
    classes.forEach(
        (reason, type) -> {
          IdemdStatusException error =
              StatusDetails.exceptionOf(
                  status(
                      Status.Code.FAILED_PRECONDITION, info(reason, Map.of("operation_id", "o"))));
          assertSame(type, error.getClass(), reason);
          assertEquals("o", error.operationId().orElseThrow());
        });
    IdemdStatusException lost =
        StatusDetails.exceptionOf(
            status(
                Status.Code.ABORTED,
                info(
                    "LEASE_LOST",
                    Map.of("current_fence", "18446744073709551615", "state", "IN_PROGRESS"))));
    assertSame(LeaseLostException.class, lost.getClass());
    assertEquals(-1L, lost.currentFence().orElseThrow()); // a uint64, as Java's long bits
    assertEquals("IN_PROGRESS", lost.state().orElseThrow());
  }

  @Test
  void badRequestViolationsAndCodesWithoutDetails() {
    IdemdStatusException invalid =
        StatusDetails.exceptionOf(
            status(
                Status.Code.INVALID_ARGUMENT,
                info("INVALID_REQUEST", Map.of()),
                BadRequest.newBuilder()
                    .addFieldViolations(
                        BadRequest.FieldViolation.newBuilder()
                            .setField("scope.key")
                            .setDescription("empty"))
                    .build()));
    assertTrue(invalid instanceof InvalidArgumentException);
    assertEquals(
        List.of(new IdemdStatusException.FieldViolation("scope.key", "empty")),
        invalid.violations());
    assertSame(
        PermissionDeniedException.class,
        StatusDetails.exceptionOf(Status.PERMISSION_DENIED.asRuntimeException()).getClass());
    IdemdStatusException transport =
        StatusDetails.exceptionOf(Status.INTERNAL.asRuntimeException());
    assertSame(InternalException.class, transport.getClass());
    assertFalse(transport.reason().isPresent());
    Metadata garbage = new Metadata();
    garbage.put(
        Metadata.Key.of("grpc-status-details-bin", Metadata.BINARY_BYTE_MARSHALLER),
        new byte[] {(byte) 0xff, (byte) 0xff, 1});
    IdemdStatusException undecodable =
        StatusDetails.exceptionOf(Status.INTERNAL.asRuntimeException(garbage));
    assertSame(InternalException.class, undecodable.getClass());
    assertFalse(undecodable.reason().isPresent());
  }

  @Test
  void thePushbackTrailerIsALeastDelayToo() {
    Metadata trailers = new Metadata();
    trailers.put(StatusDetails.PUSHBACK, "750");
    IdemdStatusException shed =
        StatusDetails.exceptionOf(Status.UNAVAILABLE.asRuntimeException(trailers));
    assertEquals(Duration.ofMillis(750), shed.retryAfter().orElseThrow());
    // With RetryInfo too, the longer of the two.
    StatusRuntimeException both = status(Status.Code.UNAVAILABLE, retry(Duration.ofMillis(100)));
    both.getTrailers().put(StatusDetails.PUSHBACK, "300");
    assertEquals(
        Duration.ofMillis(300), StatusDetails.exceptionOf(both).retryAfter().orElseThrow());
    Metadata malformed = new Metadata();
    malformed.put(StatusDetails.PUSHBACK, "soon");
    assertFalse(
        StatusDetails.exceptionOf(Status.UNAVAILABLE.asRuntimeException(malformed))
            .retryAfter()
            .isPresent());
  }
}
