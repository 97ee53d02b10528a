package dev.idemd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import dev.idemd.idem.v1.ClaimRequest;
import dev.idemd.idem.v1.ClaimResponse;
import dev.idemd.idem.v1.CompleteRequest;
import dev.idemd.idem.v1.FailDisposition;
import dev.idemd.idem.v1.FailRequest;
import dev.idemd.idem.v1.HistoryEntry;
import dev.idemd.idem.v1.ListUnresolvedRequest;
import dev.idemd.idem.v1.LookupRequest;
import dev.idemd.idem.v1.OperationError;
import dev.idemd.idem.v1.OperationState;
import dev.idemd.idem.v1.Ownership;
import dev.idemd.idem.v1.ReconcileRequest;
import dev.idemd.idem.v1.RenewRequest;
import dev.idemd.idem.v1.Result;
import dev.idemd.idem.v1.Scope;
import io.grpc.Status;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletionException;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedClass;
import org.junit.jupiter.params.provider.MethodSource;

/** The typed client over every RPC, against a real server on each store. */
@ParameterizedClass(name = "[{0}]")
@MethodSource(ServerTest.STORES)
class ClientTest extends ServerTest {
  static final String JSON = "{\"amount\":1000,\"currency\":\"EUR\"}";

  @Override
  Map<String, String> serverEnv() {
    return Map.of("IDEMD_SWEEP_INTERVAL", "50ms");
  }

  static ClaimRequest.Builder claim(String operation, String key) {
    return ClaimRequest.newBuilder()
        .setScope(Scope.newBuilder().setOperation(operation).setKey(key));
  }

  static com.google.protobuf.Duration seconds(double seconds) {
    return IdemdClient.Durations.ofNanos((long) (seconds * 1e9));
  }

  @Test
  void everyRpcRoundTrips() {
    String k = key();
    ClaimResponse claimed =
        client.claim(
            claim("payments.charge", k)
                .setJsonPayload(JSON)
                .setLease(seconds(5))
                .setClaimToken(ByteString.copyFromUtf8("t1"))
                .build());
    assertTrue(claimed.hasAcquired());
    Ownership owner = claimed.getAcquired().getOwnership();
    assertEquals(1, owner.getAttempt());
    assertTrue(owner.getFence() > 0);
    var renewed =
        client.renew(
            RenewRequest.newBuilder()
                .setOperationId(owner.getOperationId())
                .setFence(owner.getFence())
                .setLease(seconds(5))
                .build());
    assertTrue(renewed.getLease().getSeconds() <= 5);
    var done =
        client.complete(
            CompleteRequest.newBuilder()
                .setOperationId(owner.getOperationId())
                .setFence(owner.getFence())
                .setResult(
                    Result.newBuilder()
                        .setBody(ByteString.copyFromUtf8("{\"charge\":\"ch_1\"}"))
                        .setContentType("application/json")
                        .putMetadata("provider", "fake"))
                .build());
    assertEquals(OperationState.OPERATION_STATE_SUCCEEDED, done.getState());
    ClaimResponse replay =
        client.claim(
            claim("payments.charge", k)
                .setJsonPayload("{\"currency\":\"EUR\",\"amount\":1000}")
                .build());
    assertTrue(replay.hasCompleted());
    assertEquals(
        "{\"charge\":\"ch_1\"}", replay.getCompleted().getResult().getBody().toStringUtf8());
    assertEquals(Map.of("provider", "fake"), replay.getCompleted().getResult().getMetadataMap());
    var found =
        client.lookup(
            LookupRequest.newBuilder()
                .setScope(Scope.newBuilder().setOperation("payments.charge").setKey(k))
                .setIncludeHistory(true)
                .build());
    assertEquals(owner.getOperationId(), found.getOperation().getOperationId());
    assertEquals(
        List.of("CLAIMED", "RENEWED", "COMPLETED"),
        found.getHistoryList().stream().map(HistoryEntry::getEvent).collect(Collectors.toList()));

    // Fail UNKNOWN, then a reconciler finds it in ListUnresolved and settles it.
    Ownership other =
        client
            .claim(
                claim("payments.charge", key())
                    .setBytesPayload(ByteString.copyFromUtf8("x"))
                    .setLease(seconds(5))
                    .build())
            .getAcquired()
            .getOwnership();
    var failed =
        client.fail(
            FailRequest.newBuilder()
                .setOperationId(other.getOperationId())
                .setFence(other.getFence())
                .setDisposition(FailDisposition.FAIL_DISPOSITION_UNKNOWN)
                .setError(
                    OperationError.newBuilder().setCode("timeout").setMessage("provider timed out"))
                .build());
    assertEquals(OperationState.OPERATION_STATE_UNKNOWN, failed.getState());
    var page =
        client.listUnresolved(
            ListUnresolvedRequest.newBuilder()
                .setOperation("payments.charge")
                .setPageSize(10)
                .build());
    assertTrue(
        page.getOperationsList().stream()
            .anyMatch(op -> op.getOperationId().equals(other.getOperationId())));
    var settled =
        client.reconcile(
            ReconcileRequest.newBuilder()
                .setOperationId(other.getOperationId())
                .setExpectedFence(other.getFence())
                .setSucceeded(Result.newBuilder().setBody(ByteString.copyFromUtf8("found")))
                .build());
    assertEquals(OperationState.OPERATION_STATE_SUCCEEDED, settled.getState());
    assertTrue(settled.getFence() > other.getFence());
  }

  @Test
  void asynchronousCallsAnswerAndFailTyped() {
    String k = key();
    ClaimResponse claimed =
        client
            .claimAsync(
                claim("jobs.run", k).setBytesPayload(ByteString.copyFromUtf8("job")).build())
            .join();
    Ownership owner = claimed.getAcquired().getOwnership();
    CompletionException conflict =
        assertThrows(
            CompletionException.class,
            () ->
                client
                    .claimAsync(
                        claim("jobs.run", k)
                            .setBytesPayload(ByteString.copyFromUtf8("other"))
                            .build())
                    .join());
    assertInstanceOf(ConflictException.class, conflict.getCause());
    assertEquals(
        owner.getOperationId(),
        ((ConflictException) conflict.getCause()).operationId().orElseThrow());
  }

  @Test
  void refusalsAreTypedExceptions() {
    String k = key();
    Ownership first =
        client
            .claim(claim("payments.charge", k).setJsonPayload(JSON).setLease(seconds(0.05)).build())
            .getAcquired()
            .getOwnership();

    ConflictException conflict =
        assertThrows(
            ConflictException.class,
            () ->
                client.claim(
                    claim("payments.charge", k)
                        .setJsonPayload("{\"amount\":2000,\"currency\":\"EUR\"}")
                        .build()));
    assertEquals("IDEMPOTENCY_KEY_REUSED", conflict.reason().orElseThrow());
    assertEquals(first.getOperationId(), conflict.operationId().orElseThrow());
    assertEquals(Status.Code.FAILED_PRECONDITION, conflict.code());

    TestServer.sleep(100); // the first owner's lease runs out
    ClaimResponse taken =
        client.claim(claim("payments.charge", k).setJsonPayload(JSON).setLease(seconds(5)).build());
    assertTrue(taken.hasReconcileFirst());
    Ownership second = taken.getReconcileFirst().getOwnership();
    LeaseLostException lost = assertThrows(LeaseLostException.class, () -> complete(first, "late"));
    assertEquals(second.getFence(), lost.currentFence().orElseThrow());
    assertEquals("IN_PROGRESS", lost.state().orElseThrow());
    assertEquals(first.getOperationId(), lost.operationId().orElseThrow());

    complete(second, "one");
    assertThrows(RequestMismatchException.class, () -> complete(second, "two"));
    OperationTerminalException terminal =
        assertThrows(
            OperationTerminalException.class,
            () ->
                client.renew(
                    RenewRequest.newBuilder()
                        .setOperationId(second.getOperationId())
                        .setFence(second.getFence())
                        .build()));
    assertEquals("SUCCEEDED", terminal.state().orElseThrow());

    InvalidArgumentException invalid =
        assertThrows(
            InvalidArgumentException.class,
            () -> client.claim(claim("payments charge!", "").setJsonPayload("{").build()));
    Set<String> fields =
        invalid.violations().stream()
            .map(IdemdStatusException.FieldViolation::field)
            .collect(Collectors.toSet());
    assertTrue(fields.containsAll(Set.of("scope.key", "scope.operation")), fields.toString());
    assertEquals("INVALID_REQUEST", invalid.reason().orElseThrow());

    NotFoundException missing =
        assertThrows(
            NotFoundException.class,
            () ->
                client.lookup(
                    LookupRequest.newBuilder()
                        .setOperationId("01a2269b-92ba-727d-ab2a-b74a6876d78e")
                        .build()));
    assertEquals("OPERATION_NOT_FOUND", missing.reason().orElseThrow());
  }

  private void complete(Ownership owner, String body) {
    client.complete(
        CompleteRequest.newBuilder()
            .setOperationId(owner.getOperationId())
            .setFence(owner.getFence())
            .setResult(Result.newBuilder().setBody(ByteString.copyFromUtf8(body)))
            .build());
  }

  @Test
  void theBearerTokenGoesOnEveryCall() {
    try (IdemdClient stranger =
        IdemdClient.builder().address(server.address()).token("idem_" + "0".repeat(64)).build()) {
      UnauthenticatedException refused =
          assertThrows(
              UnauthenticatedException.class,
              () -> stranger.claim(claim("payments.charge", key()).setJsonPayload(JSON).build()));
      assertEquals("INVALID_CREDENTIALS", refused.reason().orElseThrow());
      assertThrows(
          UnauthenticatedException.class,
          () -> stranger.listUnresolved(ListUnresolvedRequest.getDefaultInstance()));
    }
    client.listUnresolved(ListUnresolvedRequest.getDefaultInstance());
  }

  @Test
  void theAddressAndTokenComeFromTheEnvironmentAndHttpIsPlaintext() {
    try (IdemdClient fromEnv =
        IdemdClient.builder()
            .environment(
                Map.of("IDEMD_ADDR", "http://" + server.address(), "IDEMD_TOKEN", server.token))
            .build()) {
      assertTrue(
          fromEnv.claim(claim("env.check", key()).setJsonPayload(JSON).build()).hasAcquired());
    }
  }

  @Test
  void aResultPastRetentionIsExpired() {
    String k = key();
    Ownership owner =
        client
            .claim(
                claim("reports.send", k)
                    .setBytesPayload(ByteString.copyFromUtf8("r"))
                    // As short as the server allows: never below the retry window
                    // (one attempt of two seconds).
                    .setLease(seconds(1))
                    .setMaxAttemptDuration(seconds(2))
                    .setMaxAttempts(1)
                    .setRetention(seconds(2))
                    .build())
            .getAcquired()
            .getOwnership();
    complete(owner, "sent");
    long end = System.nanoTime() + Duration.ofSeconds(10).toNanos();
    while (true) {
      try {
        client.claim(
            claim("reports.send", k).setBytesPayload(ByteString.copyFromUtf8("r")).build());
      } catch (ResultExpiredException expired) {
        assertEquals(owner.getOperationId(), expired.operationId().orElseThrow());
        return;
      }
      assertTrue(System.nanoTime() < end, "the sweeper never made a tombstone");
      TestServer.sleep(50);
    }
  }

  @Test
  void aDeadAddressIsUnavailableWithoutAReason() {
    RetryPolicy policy =
        RetryPolicy.builder()
            .maxSends(2)
            .initialBackoff(Duration.ofMillis(10))
            .callTimeout(Duration.ofSeconds(2))
            .build();
    try (IdemdClient nowhere = server.client(policy, "127.0.0.1:1")) {
      UnavailableException unavailable =
          assertThrows(
              UnavailableException.class,
              () -> nowhere.lookup(LookupRequest.newBuilder().setOperationId("x").build()));
      assertFalse(unavailable.reason().isPresent());
    }
  }
}
