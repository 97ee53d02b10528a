package dev.idemd.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import dev.idemd.idem.v1.ClaimRequest;
import dev.idemd.idem.v1.FailureReason;
import dev.idemd.idem.v1.HistoryEntry;
import dev.idemd.idem.v1.LookupRequest;
import dev.idemd.idem.v1.Operation;
import dev.idemd.idem.v1.OperationState;
import dev.idemd.idem.v1.Ownership;
import dev.idemd.idem.v1.PendingReason;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedClass;
import org.junit.jupiter.params.provider.MethodSource;

/** executeOnce's semantics, one test each, against a real server on each store. */
@ParameterizedClass(name = "[{0}]")
@MethodSource(ServerTest.STORES)
class ExecuteOnceTest extends ServerTest {
  static final String OP = "payments.charge";
  static final String JSON = "{\"amount\":1000,\"currency\":\"EUR\"}";
  static final Payload PAYLOAD = Payload.json(JSON);

  final Provider provider = new Provider();

  Effect charging() {
    return ctx -> Outcome.success(provider.effect(ctx.operationId()), "application/json");
  }

  static ExecuteOptions.Builder options() {
    return ExecuteOptions.builder();
  }

  static Duration ms(long millis) {
    return Duration.ofMillis(millis);
  }

  List<HistoryEntry> history(String operationId) {
    return client
        .lookup(
            LookupRequest.newBuilder().setOperationId(operationId).setIncludeHistory(true).build())
        .getHistoryList();
  }

  List<String> events(String operationId) {
    return history(operationId).stream().map(HistoryEntry::getEvent).collect(Collectors.toList());
  }

  List<String> eventsWithoutRenewals(String operationId) {
    return events(operationId).stream()
        .filter(event -> !event.equals("RENEWED"))
        .collect(Collectors.toList());
  }

  Operation operation(String operationId) {
    return client
        .lookup(LookupRequest.newBuilder().setOperationId(operationId).build())
        .getOperation();
  }

  /** An earlier owner that stalled: its lease (50 ms) runs out, nobody completes. */
  Ownership abandonedAttempt(String key, Duration attempt, int maxAttempts) {
    ClaimRequest request =
        ClientTest.claim(OP, key)
            .setJsonPayload(JSON)
            .setLease(IdemdClient.Durations.of(ms(50)))
            .setMaxAttemptDuration(IdemdClient.Durations.of(attempt))
            .setMaxAttempts(maxAttempts)
            .build();
    Ownership owner = client.claim(request).getAcquired().getOwnership();
    TestServer.sleep(100);
    return owner;
  }

  @Test
  void successIsCompletedAndReplayedWithoutRunning() throws Exception {
    String k = key();
    OperationResult first = client.executeOnce(OP, k, PAYLOAD, charging());
    assertFalse(first.replayed());
    assertEquals(1, first.attempts());
    OperationResult again =
        client.executeOnce(
            OP, k, Payload.json("{\"currency\":\"EUR\",\"amount\":1000}"), charging());
    assertTrue(again.replayed());
    assertArrayEquals(first.body(), again.body());
    assertEquals(first.operationId(), again.operationId());
    assertEquals(1, provider.count());
    assertEquals(List.of("CLAIMED", "COMPLETED"), events(first.operationId()));
  }

  @Test
  void aTerminalErrorIsStoredAndReplayedAsATypedException() {
    String k = key();
    OperationFailedException first =
        assertThrows(
            OperationFailedException.class,
            () ->
                client.executeOnce(
                    OP,
                    k,
                    PAYLOAD,
                    ctx ->
                        Outcome.terminal(
                            "card_declined", "insufficient funds", Map.of("decline_code", "51"))));
    assertEquals("card_declined", first.errorCode());
    assertFalse(first.replayed());
    OperationFailedException replay =
        assertThrows(
            OperationFailedException.class, () -> client.executeOnce(OP, k, PAYLOAD, charging()));
    assertTrue(replay.replayed());
    assertEquals("insufficient funds", replay.error().getMessage());
    assertEquals(Map.of("decline_code", "51"), replay.error().getMetadataMap());
    assertEquals(FailureReason.FAILURE_REASON_TERMINAL, replay.reason());
    assertEquals(0, provider.count());
  }

  @Test
  void aRetryableFailureReleasesForANewAttempt() throws Exception {
    List<Integer> calls = Collections.synchronizedList(new ArrayList<>());
    OperationResult result =
        client.executeOnce(
            OP,
            key(),
            PAYLOAD,
            ctx -> {
              calls.add(ctx.attempt());
              if (calls.size() == 1) {
                return Outcome.retryable("provider_busy", "", ms(50));
              }
              return Outcome.success(provider.effect(ctx.operationId()), "");
            });
    assertEquals(List.of(1, 2), calls);
    assertEquals(2, result.attempts());
    assertEquals(1, provider.count());
    assertEquals(
        List.of("CLAIMED", "RETRY_SCHEDULED", "RETRY_STARTED", "COMPLETED"),
        eventsWithoutRenewals(result.operationId()));
  }

  @Test
  void unknownAndAThrowingEffectAreReportedUnknown() {
    OutcomeUnknownException unknown =
        assertThrows(
            OutcomeUnknownException.class,
            () ->
                client.executeOnce(
                    OP,
                    key(),
                    PAYLOAD,
                    ctx -> Outcome.unknown("timeout", "provider did not answer")));
    assertEquals(
        OperationState.OPERATION_STATE_UNKNOWN,
        operation(unknown.operationId().orElseThrow()).getState());
    OutcomeUnknownException thrown =
        assertThrows(
            OutcomeUnknownException.class,
            () ->
                client.executeOnce(
                    OP,
                    key(),
                    PAYLOAD,
                    ctx -> {
                      throw new java.io.IOException("provider hung up");
                    }));
    assertInstanceOf(java.io.IOException.class, thrown.getCause());
    assertEquals(
        OperationState.OPERATION_STATE_UNKNOWN,
        operation(thrown.operationId().orElseThrow()).getState());
  }

  @Test
  void theLeaseIsRenewedWhileTheEffectRuns() throws Exception {
    OperationResult result =
        client.executeOnce(
            OP,
            key(),
            PAYLOAD,
            options().lease(ms(300)).attemptDuration(Duration.ofSeconds(5)).build(),
            ctx -> {
              Thread.sleep(1_000);
              return Outcome.success(provider.effect(ctx.operationId()), "");
            });
    List<HistoryEntry> history = history(result.operationId());
    assertEquals("CLAIMED", history.get(0).getEvent());
    assertEquals("COMPLETED", history.get(history.size() - 1).getEvent());
    long renewals =
        history.stream()
            .filter(e -> e.getEvent().equals("RENEWED"))
            .mapToLong(HistoryEntry::getCount)
            .sum();
    assertTrue(renewals >= 3, history.toString());
    assertEquals(1, provider.count());
  }

  @Test
  void theEffectIsInterruptedAtTheAttemptDeadlineThenUnknown() {
    CountDownLatch interrupted = new CountDownLatch(1);
    List<EffectContext> contexts = new ArrayList<>();
    long started = Clocks.SYSTEM.getAsLong();
    String k = key();
    AttemptTimeoutException timeout =
        assertThrows(
            AttemptTimeoutException.class,
            () ->
                client.executeOnce(
                    OP,
                    k,
                    PAYLOAD,
                    // A 3 s attempt: the report has its margin (0.3 s) to land before the deadline
                    // even on a loaded machine.
                    options().lease(ms(300)).attemptDuration(Duration.ofSeconds(3)).build(),
                    ctx -> {
                      contexts.add(ctx);
                      try {
                        Thread.sleep(60_000);
                      } catch (InterruptedException stop) {
                        interrupted.countDown();
                        throw stop;
                      }
                      return Outcome.success(new byte[0], "");
                    }));
    assertEquals(0, interrupted.getCount());
    assertTrue(contexts.get(0).isCancelled());
    assertFalse(Thread.currentThread().isInterrupted());
    String operationId = timeout.operationId().orElseThrow();
    assertEquals(OperationState.OPERATION_STATE_UNKNOWN, operation(operationId).getState());
    List<HistoryEntry> history = history(operationId);
    assertEquals("OUTCOME_UNKNOWN", history.get(history.size() - 1).getEvent());
    // Stopped and reported before the attempt deadline: idemd accepted the owner's report
    // (it refuses an owner's writes past its deadline: LATE_WRITE_REFUSED).
    assertEquals("attempt_deadline", history.get(history.size() - 1).getDetail());
    assertFalse(
        history.stream().anyMatch(e -> e.getEvent().equals("LATE_WRITE_REFUSED")),
        history.toString());
    assertTrue(Clocks.SYSTEM.getAsLong() - started < Duration.ofSeconds(30).toNanos());
  }

  @Test
  void anAsyncEffectIsCancelledAtTheAttemptDeadline() {
    CompletableFuture<Outcome> never = new CompletableFuture<>();
    CompletableFuture<OperationResult> call =
        client.executeOnceAsync(
            OP,
            key(),
            PAYLOAD,
            // A 3 s attempt, as in the blocking test above: its 0.3 s margin lets the UNKNOWN
            // report land before the deadline on a loaded CI machine (1 s left 0.1 s, and the
            // report was refused as late under load).
            options().lease(ms(300)).attemptDuration(Duration.ofSeconds(3)).build(),
            ctx -> never);
    ExecutionException failed =
        assertThrows(ExecutionException.class, () -> call.get(10, TimeUnit.SECONDS));
    assertInstanceOf(AttemptTimeoutException.class, failed.getCause());
    assertTrue(never.isCancelled());
    String operationId = ((AttemptTimeoutException) failed.getCause()).operationId().orElseThrow();
    assertEquals(OperationState.OPERATION_STATE_UNKNOWN, operation(operationId).getState());
  }

  @Test
  void theAsyncFormReplaysAndCountsOneEffect() throws Exception {
    String k = key();
    AsyncEffect effect =
        ctx ->
            CompletableFuture.supplyAsync(
                () -> Outcome.success(provider.effect(ctx.operationId()), "application/json"));
    OperationResult first =
        client
            .executeOnceAsync(OP, k, PAYLOAD, ExecuteOptions.defaults(), effect)
            .get(10, TimeUnit.SECONDS);
    OperationResult again =
        client
            .executeOnceAsync(OP, k, PAYLOAD, ExecuteOptions.defaults(), effect)
            .get(10, TimeUnit.SECONDS);
    assertFalse(first.replayed());
    assertTrue(again.replayed());
    assertEquals(first.bodyText(), again.bodyText());
    assertEquals(1, provider.count());
  }

  @Test
  void pendingWaitsForTheRunningAttemptThenReplays() throws Exception {
    String k = key();
    CountDownLatch started = new CountDownLatch(1);
    ExecutorService pool = Executors.newSingleThreadExecutor();
    try {
      Future<OperationResult> first =
          pool.submit(
              () ->
                  client.executeOnce(
                      OP,
                      k,
                      PAYLOAD,
                      ctx -> {
                        started.countDown();
                        Thread.sleep(400);
                        return Outcome.success(provider.effect(ctx.operationId()), "");
                      }));
      assertTrue(started.await(5, TimeUnit.SECONDS));
      OperationResult second = client.executeOnce(OP, k, PAYLOAD, charging());
      assertTrue(second.replayed());
      assertEquals(first.get().bodyText(), second.bodyText());
      assertEquals(1, provider.count());
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void pendingPastTheDeadlineFailsWithoutRunning() throws Exception {
    String k = key();
    CountDownLatch started = new CountDownLatch(1);
    ExecutorService pool = Executors.newSingleThreadExecutor();
    try {
      Future<OperationResult> first =
          pool.submit(
              () ->
                  client.executeOnce(
                      OP,
                      k,
                      PAYLOAD,
                      ctx -> {
                        started.countDown();
                        Thread.sleep(300);
                        return Outcome.success(provider.effect(ctx.operationId()), "");
                      }));
      assertTrue(started.await(5, TimeUnit.SECONDS));
      PendingException pending =
          assertThrows(
              PendingException.class,
              () ->
                  client.executeOnce(
                      OP, k, PAYLOAD, options().deadline(Duration.ZERO).build(), charging()));
      assertTrue(pending.retryAfter().toNanos() > 0);
      assertEquals(PendingReason.PENDING_REASON_IN_PROGRESS, pending.reason());
      first.get();
      assertEquals(1, provider.count());
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void reconcileFirstWithADeduplicatingProviderRunsWithTheContext() throws Exception {
    String k = key();
    Ownership stalled = abandonedAttempt(k, Duration.ofSeconds(2), 0);
    List<EffectContext> seen = new ArrayList<>();
    OperationResult result =
        client.executeOnce(
            OP,
            k,
            PAYLOAD,
            options()
                .lease(Duration.ofSeconds(1))
                .attemptDuration(Duration.ofSeconds(2))
                .providerDeduplicates(true)
                .build(),
            ctx -> {
              seen.add(ctx);
              return Outcome.success(provider.effect(ctx.operationId()), "");
            });
    EffectContext ctx = seen.get(0);
    assertTrue(ctx.previousOutcomeUnknown());
    assertEquals(2, ctx.attempt());
    assertEquals(stalled.getFence(), ctx.previousFence().orElseThrow());
    assertEquals(stalled.getOperationId(), ctx.operationId());
    assertEquals(result.operationId(), ctx.operationId());
    Duration left = ctx.previousAttemptDeadline().orElseThrow();
    assertTrue(left.toNanos() > 0 && left.compareTo(Duration.ofSeconds(2)) <= 0, left.toString());
  }

  @Test
  void reconcileFirstWithoutALookupOrDeduplicationDeclinesAndNeverRuns() {
    String k = key();
    Ownership stalled = abandonedAttempt(k, Duration.ofSeconds(3), 0);
    Operation before = operation(stalled.getOperationId());
    ExecuteOptions neither =
        options().lease(Duration.ofSeconds(1)).attemptDuration(Duration.ofSeconds(3)).build();
    OutcomeUnknownException unknown =
        assertThrows(
            OutcomeUnknownException.class,
            () -> client.executeOnce(OP, k, PAYLOAD, neither, charging()));
    assertEquals(0, provider.count());
    String message = unknown.getMessage();
    assertTrue(
        message.contains("pass a lookup")
            && message.contains("providerDeduplicates")
            && message.contains("reconcile"),
        message);
    List<HistoryEntry> entries =
        history(stalled.getOperationId()).stream()
            .filter(e -> !e.getEvent().equals("RENEWED"))
            .collect(Collectors.toList());
    assertEquals(
        List.of("CLAIMED", "TAKEN_OVER", "OUTCOME_UNKNOWN"),
        entries.stream().map(HistoryEntry::getEvent).collect(Collectors.toList()));
    assertEquals("not_started", entries.get(2).getDetail());
    assertEquals(2, entries.get(2).getAttempt());
    // Handed on as it was: the doubt still ends with the abandoned attempt's deadline.
    assertEquals(
        before.getAttemptDeadlineAt(), operation(stalled.getOperationId()).getAttemptDeadlineAt());
    // The next call, still without either, declines again rather than running.
    assertThrows(
        OutcomeUnknownException.class,
        () -> client.executeOnce(OP, k, PAYLOAD, neither, charging()));
    assertEquals(0, provider.count());
  }

  @Test
  void aNegativeLookupThatBeganBeforeTheEarlierDeadlineIsNotTrusted() throws Exception {
    // Issue 17 item 1, scaled down: a lookup reads the provider as it starts, before the
    // earlier owner's charge lands (0.3 s before that owner's deadline), and answers "nothing"
    // only after the deadline: a lookup slower than the time left to the earlier deadline. Its
    // answer must not count, or the effect would run a second time. Asked again, the lookup
    // finds the earlier charge, which is recorded.
    String k = key();
    Ownership earlier =
        client
            .claim(
                ClientTest.claim(OP, k)
                    .setJsonPayload(JSON)
                    .setLease(IdemdClient.Durations.of(Duration.ofSeconds(2)))
                    .setMaxAttemptDuration(IdemdClient.Durations.of(Duration.ofSeconds(3)))
                    .build())
            .getAcquired()
            .getOwnership();
    long claimedAt = System.nanoTime();
    long[] landed = new long[1];
    ScheduledLanding landing =
        new ScheduledLanding(
            2_700,
            () -> {
              landed[0] = System.nanoTime();
              provider.effect(earlier.getOperationId());
            });
    List<long[]> lookups = Collections.synchronizedList(new ArrayList<>());
    ProviderLookup slowLookup =
        ctx -> {
          long begun = System.nanoTime();
          byte[] body = provider.records.get(ctx.operationId()); // the provider as it is now
          Thread.sleep(1_000);
          lookups.add(new long[] {begun, System.nanoTime(), body != null ? 1 : 0});
          return body == null ? null : Outcome.success(body, "");
        };
    // The takeover claims just after the earlier lease ran out: its own attempt ends 2.2 s
    // after the earlier one, room for a lookup that straddles the earlier deadline and
    // another one after it.
    TestServer.sleep(Math.max(0, (claimedAt + 2_200_000_000L - System.nanoTime()) / 1_000_000));
    OperationResult result =
        client.executeOnce(
            OP,
            k,
            PAYLOAD,
            options()
                .lookup(slowLookup)
                .lease(Duration.ofSeconds(2))
                .attemptDuration(Duration.ofSeconds(3))
                .lookupInterval(ms(100))
                .build(),
            charging());
    landing.join();
    assertEquals(1, provider.count(), "effects: " + provider.effects);
    assertEquals(
        new String(provider.records.get(earlier.getOperationId()), StandardCharsets.UTF_8),
        result.bodyText());
    assertEquals(2, result.attempts());
    assertFalse(result.replayed());
    // The scenario happened as described: the first lookup began before the charge landed
    // and answered "nothing" after it.
    long[] first = lookups.get(0);
    assertTrue(
        first[0] < landed[0] && landed[0] < first[1] && first[2] == 0, "lookups out of order");
    assertEquals(1, lookups.get(lookups.size() - 1)[2]);
  }

  /** Runs {@code action} on a thread of its own after {@code millis}. */
  static final class ScheduledLanding {
    private final Thread thread;

    ScheduledLanding(long millis, Runnable action) {
      thread =
          new Thread(
              () -> {
                TestServer.sleep(millis);
                action.run();
              });
      thread.start();
    }

    void join() throws InterruptedException {
      thread.join(10_000);
    }
  }

  @Test
  void needsReconciliationNeverExecutes() {
    String k = key();
    Ownership stalled = abandonedAttempt(k, Duration.ofSeconds(1), 1);
    NeedsReconciliationException needs =
        assertThrows(
            NeedsReconciliationException.class,
            () -> client.executeOnce(OP, k, PAYLOAD, options().maxAttempts(1).build(), charging()));
    assertEquals(stalled.getOperationId(), needs.operationId().orElseThrow());
    assertEquals(0, provider.count());
  }

  @Test
  void aConflictIsRefusedAndNeverRuns() throws Exception {
    String k = key();
    OperationResult first = client.executeOnce(OP, k, PAYLOAD, charging());
    ConflictException conflict =
        assertThrows(
            ConflictException.class,
            () ->
                client.executeOnce(
                    OP, k, Payload.json("{\"amount\":2000,\"currency\":\"EUR\"}"), charging()));
    assertEquals(first.operationId(), conflict.operationId().orElseThrow());
    assertEquals(1, provider.count());
  }

  @Test
  void renewalsStopOnceTheLeaseReachesTheAttemptDeadline() {
    AttemptTimeoutException timeout =
        assertThrows(
            AttemptTimeoutException.class,
            () ->
                client.executeOnce(
                    OP,
                    key(),
                    PAYLOAD,
                    // Seconds, not tenths: on a loaded machine a Renew due 0.2 s in could
                    // arrive past a 0.8 s deadline.
                    options().lease(ms(3000)).attemptDuration(ms(4000)).build(),
                    ctx -> {
                      Thread.sleep(60_000);
                      return Outcome.success(new byte[0], "");
                    }));
    // The first Renew (a third into the lease) is granted up to the deadline; renewing again
    // could only shrink towards it, call after call.
    List<HistoryEntry> entries = history(timeout.operationId().orElseThrow());
    long renewed =
        entries.stream()
            .filter(entry -> entry.getEvent().equals("RENEWED"))
            .mapToLong(HistoryEntry::getCount)
            .sum();
    // (A second one when the first was granted a hair short of the deadline: the Claim took
    // longer to reach the server than the Renew did. Without the stop, three or more.)
    assertTrue(renewed >= 1 && renewed <= 2, "renewed " + renewed + " times: " + entries);
  }

  @Test
  void aDeclinedTakeoverHandsOnTheEarlierAttemptsDoubt() throws Exception {
    // The long fault run's liveness failure: an attempt that declines because the doubt it
    // took over outlasts it must not push the doubt forward. The next attempt is told the
    // earlier attempt's deadline, waits it out and runs.
    String k = key();
    // Attempt 1 claims with a 2 s lease and crashes: its effect may run until its deadline,
    // 4 s after its Claim.
    client.claim(
        ClientTest.claim(OP, k)
            .setJsonPayload(JSON)
            .setLease(IdemdClient.Durations.of(Duration.ofSeconds(2)))
            .setMaxAttemptDuration(IdemdClient.Durations.of(Duration.ofSeconds(4)))
            .setClaimToken(ByteString.copyFromUtf8("crashed-attempt"))
            .build());
    long firstReplied = Clocks.SYSTEM.getAsLong();
    // This call's Claim waits (long poll) until attempt 1's lease runs out: its attempt (2)
    // would end before attempt 1's doubt does. It declines; attempt 3 is told attempt 1's
    // deadline, not attempt 2's.
    List<long[]> told = Collections.synchronizedList(new ArrayList<>());
    List<Integer> attempts = Collections.synchronizedList(new ArrayList<>());
    OperationResult result =
        client.executeOnce(
            OP,
            k,
            PAYLOAD,
            options()
                .lookup(
                    ctx -> {
                      told.add(new long[] {ctx.attempt(), ctx.previousAttemptSettlesAt()});
                      return provider.lookup(ctx);
                    })
                .lease(Duration.ofSeconds(3))
                .attemptDuration(Duration.ofSeconds(4))
                .build(),
            ctx -> {
              attempts.add(ctx.attempt());
              return Outcome.success(provider.effect(ctx.operationId()), "");
            });
    assertEquals(1, provider.count());
    assertEquals(List.of(3), attempts, events(result.operationId()).toString());
    assertEquals(
        List.of(2L, 3L),
        told.stream().map(t -> t[0]).distinct().sorted().collect(Collectors.toList()));
    for (long[] each : told) {
      // Measured from a reply that came at most a little later.
      assertTrue(
          each[1] <= firstReplied + Duration.ofMillis(4_700).toNanos(),
          "attempt " + each[0] + " was told the doubt lasts past attempt 1's deadline");
    }
    List<HistoryEntry> entries =
        history(result.operationId()).stream()
            .filter(e -> !e.getEvent().equals("RENEWED"))
            .collect(Collectors.toList());
    assertEquals(
        List.of("CLAIMED", "TAKEN_OVER", "OUTCOME_UNKNOWN", "TAKEN_OVER", "COMPLETED"),
        entries.stream().map(HistoryEntry::getEvent).collect(Collectors.toList()));
    assertEquals("not_started", entries.get(2).getDetail());
  }
}
