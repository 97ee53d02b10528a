package dev.idemd.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import dev.idemd.idem.v1.ClaimRequest;
import dev.idemd.idem.v1.CompleteRequest;
import dev.idemd.idem.v1.HistoryEntry;
import dev.idemd.idem.v1.LookupRequest;
import dev.idemd.idem.v1.Operation;
import dev.idemd.idem.v1.Ownership;
import dev.idemd.idem.v1.Result;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedClass;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * A rolling deployment that changes how a request is normalised (docs/api.md, "Changing the
 * normalisation while operations are in flight"), through executeOnce against a real server on each
 * store. The old version sends {@code {"amount":N}}; the new one writes the default currency out,
 * {@code {"amount":N,"currency":"EUR"}}: the same intent, another fingerprint. With the old
 * normalisation's fingerprint in {@code previousFingerprints}, the new version's retries replay,
 * wait for or take over what the old version started; without it they conflict; another amount
 * conflicts either way. Effects are counted at the provider.
 */
@ParameterizedClass(name = "[{0}]")
@MethodSource(ServerTest.STORES)
class MigrationWindowTest extends ServerTest {
  static final String OP = "payments.charge";

  final Provider provider = new Provider();

  /** The old version's request. */
  static String oldJson(int amount) {
    return "{\"amount\":" + amount + "}";
  }

  /** The new version's normalisation of the same intent: the default currency written out. */
  static String newJson(int amount) {
    return "{\"amount\":" + amount + ",\"currency\":\"EUR\"}";
  }

  /** The new version inside the window: the old normalisation's fingerprint rides along. */
  static ExecuteOptions.Builder inWindow(int amount) {
    return ExecuteOptions.builder().previousFingerprints(Fingerprints.json(oldJson(amount)));
  }

  Effect charging() {
    return ctx -> Outcome.success(provider.effect(ctx.operationId()), "application/json");
  }

  OperationResult newVersion(String key, int amount, ExecuteOptions options)
      throws ExecuteOnceException {
    return client.executeOnce(OP, key, Payload.json(newJson(amount)), options, charging());
  }

  /** The old version's Claim, sent as it sent it: the server fingerprints its JSON. */
  Ownership oldVersionClaims(String key, int amount, Duration lease, Duration attempt) {
    ClaimRequest request =
        ClientTest.claim(OP, key)
            .setJsonPayload(oldJson(amount))
            .setClaimToken(ByteString.copyFrom(IdemdClient.claimToken()))
            .setLease(IdemdClient.Durations.of(lease))
            .setMaxAttemptDuration(IdemdClient.Durations.of(attempt))
            .build();
    return client.claim(request).getAcquired().getOwnership();
  }

  void oldVersionCompletes(Ownership owner) {
    client.complete(
        CompleteRequest.newBuilder()
            .setOperationId(owner.getOperationId())
            .setFence(owner.getFence())
            .setResult(
                Result.newBuilder()
                    .setBody(ByteString.copyFrom(provider.effect(owner.getOperationId())))
                    .setContentType("application/json"))
            .build());
  }

  List<HistoryEntry> history(String operationId) {
    return client
        .lookup(
            LookupRequest.newBuilder().setOperationId(operationId).setIncludeHistory(true).build())
        .getHistoryList();
  }

  Operation operation(String operationId) {
    return client
        .lookup(LookupRequest.newBuilder().setOperationId(operationId).build())
        .getOperation();
  }

  @Test
  void aCompletedOperationOfTheOldVersionReplaysToTheNewOne() throws Exception {
    String k = key();
    OperationResult old =
        client.executeOnce(
            OP, k, Payload.json(oldJson(100)), ExecuteOptions.defaults(), charging());
    assertEquals(1, provider.count());

    // Outside the window the new version's retry is a conflict: what the window is for.
    ConflictException without =
        assertThrows(ConflictException.class, () -> newVersion(k, 100, ExecuteOptions.defaults()));
    assertEquals("IDEMPOTENCY_KEY_REUSED", without.reason().orElseThrow());

    OperationResult replayed = newVersion(k, 100, inWindow(100).build());
    assertTrue(replayed.replayed());
    assertEquals(old.operationId(), replayed.operationId());
    assertArrayEquals(old.body(), replayed.body());
    OperationResult async =
        client
            .executeOnceAsync(
                OP,
                k,
                Payload.json(newJson(100)),
                inWindow(100).build(),
                ctx -> CompletableFuture.failedFuture(new AssertionError("must not run")))
            .get(10, TimeUnit.SECONDS);
    assertTrue(async.replayed());

    // Another amount is another request, with or without its own previous fingerprint.
    assertThrows(ConflictException.class, () -> newVersion(k, 999, inWindow(999).build()));
    assertEquals(1, provider.count(), "the effect ran once in all");
    assertEquals(old.operationId(), provider.effects.get(0));
    assertEquals(2, operation(old.operationId()).getConflicts(), "the two refused above");
    // The stored fingerprint stays the old version's: the window changes what matches it only.
    assertArrayEquals(
        Fingerprints.json(oldJson(100)),
        operation(old.operationId()).getFingerprint().toByteArray());
  }

  @Test
  void anAbandonedAttemptOfTheOldVersionIsTakenOverNotAConflict() throws Exception {
    String k = key();
    Ownership stalled = oldVersionClaims(k, 200, Duration.ofMillis(50), Duration.ofSeconds(2));
    TestServer.sleep(100); // its lease runs out; the effect's outcome is unknown

    assertThrows(ConflictException.class, () -> newVersion(k, 200, ExecuteOptions.defaults()));
    assertThrows(ConflictException.class, () -> newVersion(k, 999, inWindow(999).build()));
    assertEquals(0, provider.count());

    OperationResult taken =
        newVersion(
            k,
            200,
            inWindow(200)
                .lease(Duration.ofSeconds(1))
                .attemptDuration(Duration.ofSeconds(2))
                .providerDeduplicates(true)
                .build());
    assertFalse(taken.replayed());
    assertEquals(stalled.getOperationId(), taken.operationId());
    assertEquals(List.of(stalled.getOperationId()), provider.effects);
    HistoryEntry takeover =
        history(stalled.getOperationId()).stream()
            .filter(entry -> entry.getEvent().equals("TAKEN_OVER"))
            .findFirst()
            .orElseThrow();
    assertTrue(
        takeover.getDetail().endsWith("request matched by previous_fingerprints[0]"),
        takeover.getDetail());
    assertEquals(2, operation(stalled.getOperationId()).getConflicts(), "the two refused above");
  }

  @Test
  void anOperationTheOldVersionStillRunsIsWaitedForAndReplayed() throws Exception {
    String k = key();
    Ownership running = oldVersionClaims(k, 300, Duration.ofSeconds(30), Duration.ofMinutes(1));

    // Not a conflict: Pending, so a call that does not wait says so.
    assertThrows(
        PendingException.class,
        () -> newVersion(k, 300, inWindow(300).deadline(Duration.ZERO).build()));

    // A call that waits gets the old version's result once it lands: its later Claims (the
    // long polls after Pending) carry the previous fingerprint too.
    CompletableFuture<OperationResult> waiting =
        CompletableFuture.supplyAsync(
            () -> {
              try {
                return newVersion(k, 300, inWindow(300).deadline(Duration.ofSeconds(20)).build());
              } catch (ExecuteOnceException failed) {
                throw new IllegalStateException(failed);
              }
            });
    TestServer.sleep(300);
    oldVersionCompletes(running);
    OperationResult replayed = waiting.get(20, TimeUnit.SECONDS);
    assertTrue(replayed.replayed());
    assertEquals(running.getOperationId(), replayed.operationId());
    assertEquals(List.of(running.getOperationId()), provider.effects);
  }
}
