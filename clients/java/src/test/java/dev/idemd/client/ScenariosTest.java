package dev.idemd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.idemd.idem.v1.ClaimResponse;
import dev.idemd.idem.v1.CompleteRequest;
import dev.idemd.idem.v1.HistoryEntry;
import dev.idemd.idem.v1.LookupRequest;
import dev.idemd.idem.v1.Ownership;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedClass;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * End-to-end scenarios against a real server on both stores, counting effects at a fake provider:
 * concurrent duplicates, a lost reply, a server restart during the effect, a lost lease, replies so
 * slow that the lease is spent on arrival.
 */
@ParameterizedClass(name = "[{0}]")
@MethodSource(ServerTest.STORES)
class ScenariosTest extends ServerTest {
  static final String OP = "orders.create";
  static final Payload PAYLOAD = Payload.json("{\"sku\":\"book-42\",\"amount\":1999}");

  final Provider provider = new Provider();
  TestProxy proxy;
  IdemdClient proxied;

  @BeforeEach
  void startProxy() throws IOException {
    proxy = new TestProxy(server.port());
    proxied =
        server.client(
            RetryPolicy.builder()
                .initialBackoff(Duration.ofMillis(20))
                .maxBackoff(Duration.ofMillis(200))
                .callTimeout(Duration.ofSeconds(5))
                .build(),
            proxy.address());
  }

  @AfterEach
  void stopProxy() {
    if (proxied != null) {
      proxied.close();
    }
    if (proxy != null) {
      proxy.close();
    }
  }

  Effect creating(long delayMillis) {
    return ctx -> {
      Thread.sleep(delayMillis);
      return Outcome.success(provider.effect(ctx.operationId()), "application/json");
    };
  }

  /** An effect that notes each attempt it runs in. */
  Effect recordingAttempts(List<Integer> attempts) {
    return ctx -> {
      attempts.add(ctx.attempt());
      return Outcome.success(provider.effect(ctx.operationId()), "");
    };
  }

  /** The operation's whole history, as Lookup pages it. */
  List<HistoryEntry> history(String operationId) {
    return client
        .lookup(
            LookupRequest.newBuilder().setOperationId(operationId).setIncludeHistory(true).build())
        .getHistoryList();
  }

  List<String> allEvents(String operationId) {
    return history(operationId).stream().map(HistoryEntry::getEvent).collect(Collectors.toList());
  }

  List<String> events(String operationId) {
    return allEvents(operationId).stream()
        .filter(event -> !event.equals("RENEWED"))
        .collect(Collectors.toList());
  }

  /** Options with this lease and attempt deadline, the rest default. */
  static ExecuteOptions leased(Duration lease, Duration attempt) {
    return ExecuteOptions.builder().lease(lease).attemptDuration(attempt).build();
  }

  @Test
  void concurrentDuplicatesMakeOneEffect() throws Exception {
    String k = key();
    List<IdemdClient> clients = List.of(server.client(), server.client(), server.client());
    ExecutorService pool = Executors.newFixedThreadPool(10);
    try {
      List<Future<OperationResult>> calls = new ArrayList<>();
      for (int i = 0; i < 10; i++) {
        IdemdClient each = clients.get(i % 3);
        calls.add(pool.submit(() -> each.executeOnce(OP, k, PAYLOAD, creating(300))));
      }
      Set<String> bodies = new HashSet<>();
      Set<String> ids = new HashSet<>();
      int made = 0;
      for (Future<OperationResult> call : calls) {
        OperationResult result = call.get(60, TimeUnit.SECONDS);
        bodies.add(result.bodyText());
        ids.add(result.operationId());
        made += result.replayed() ? 0 : 1;
      }
      assertEquals(1, provider.count());
      assertEquals(1, bodies.size());
      assertEquals(1, ids.size());
      assertEquals(1, made);
    } finally {
      pool.shutdownNow();
      clients.forEach(IdemdClient::close);
    }
  }

  @Test
  void concurrentAsyncDuplicatesMakeOneEffect() throws Exception {
    String k = key();
    AsyncEffect effect =
        ctx ->
            CompletableFuture.supplyAsync(
                () -> Outcome.success(provider.effect(ctx.operationId()), "application/json"),
                CompletableFuture.delayedExecutor(300, TimeUnit.MILLISECONDS));
    List<CompletableFuture<OperationResult>> calls = new ArrayList<>();
    for (int i = 0; i < 10; i++) {
      calls.add(client.executeOnceAsync(OP, k, PAYLOAD, ExecuteOptions.defaults(), effect));
    }
    Set<String> bodies = new HashSet<>();
    int made = 0;
    for (CompletableFuture<OperationResult> call : calls) {
      OperationResult result = call.get(60, TimeUnit.SECONDS);
      bodies.add(result.bodyText());
      made += result.replayed() ? 0 : 1;
    }
    assertEquals(1, provider.count());
    assertEquals(1, bodies.size());
    assertEquals(1, made);
  }

  @Test
  void anAsyncLookupFindsTheEarlierEffectAndNothingRunsAgain() throws Exception {
    // Owner A's effect lands and A crashes without a word; the asynchronous call B takes
    // over, finds the effect with its asynchronous lookup and records it.
    String k = key();
    Ownership a =
        client
            .claim(
                ClientTest.claim(OP, k)
                    .setJsonPayload("{\"sku\":\"book-42\",\"amount\":1999}")
                    .setLease(IdemdClient.Durations.of(Duration.ofMillis(50)))
                    .setMaxAttemptDuration(IdemdClient.Durations.of(Duration.ofMillis(300)))
                    .build())
            .getAcquired()
            .getOwnership();
    provider.effect(a.getOperationId());
    TestServer.sleep(100);
    OperationResult b =
        client
            .executeOnceAsync(
                OP,
                k,
                PAYLOAD,
                ExecuteOptions.builder()
                    .asyncLookup(ctx -> CompletableFuture.supplyAsync(() -> provider.lookup(ctx)))
                    .lookupInterval(Duration.ofMillis(50))
                    .build(),
                ctx ->
                    CompletableFuture.completedFuture(
                        Outcome.success(provider.effect(ctx.operationId()), "")))
            .get(30, TimeUnit.SECONDS);
    assertEquals(1, provider.count());
    assertEquals(2, b.attempts());
    assertFalse(b.replayed());
    assertEquals(
        new String(provider.records.get(a.getOperationId()), StandardCharsets.UTF_8), b.bodyText());
  }

  @Test
  void aLostClaimReplyMakesOneEffect() throws Exception {
    String k = key();
    proxy.dropNextReply();
    OperationResult result =
        proxied.executeOnce(
            OP,
            k,
            PAYLOAD,
            ExecuteOptions.builder().lease(Duration.ofSeconds(10)).build(),
            creating(0));
    assertLostReplyMadeOneEffect(k, result);
  }

  @Test
  void aLostCompleteReplyMakesOneEffect() throws Exception {
    String k = key();
    OperationResult result =
        proxied.executeOnce(
            OP,
            k,
            PAYLOAD,
            ExecuteOptions.builder().lease(Duration.ofSeconds(10)).build(),
            ctx -> {
              proxy.dropNextReply(); // the Complete's reply (no Renew is due yet)
              return Outcome.success(provider.effect(ctx.operationId()), "");
            });
    assertLostReplyMadeOneEffect(k, result);
  }

  private void assertLostReplyMadeOneEffect(String k, OperationResult result) throws Exception {
    assertEquals(1, proxy.dropped());
    assertEquals(1, provider.count());
    assertFalse(result.replayed());
    assertEquals(List.of("CLAIMED", "COMPLETED"), events(result.operationId()));
    OperationResult again = client.executeOnce(OP, k, PAYLOAD, creating(0));
    assertTrue(again.replayed());
    assertEquals(result.bodyText(), again.bodyText());
    assertEquals(1, provider.count());
  }

  @Test
  void aServerRestartDuringTheEffectMakesOneEffect() throws Exception {
    restartDuringTheEffect(false);
  }

  @Test
  void aServerBackOnlyAfterTheEffectReturnedMakesOneEffect() throws Exception {
    restartDuringTheEffect(true);
  }

  private void restartDuringTheEffect(boolean backAfterTheEffect) throws Exception {
    String k = key();
    Thread[] restarter = new Thread[1];
    OperationResult result =
        client.executeOnce(
            OP,
            k,
            PAYLOAD,
            ExecuteOptions.builder().lease(Duration.ofSeconds(10)).build(),
            ctx -> {
              byte[] body = provider.effect(ctx.operationId());
              server.kill(); // SIGKILL: the record holds only what was committed
              Runnable start =
                  () -> {
                    try {
                      server.start();
                    } catch (IOException failed) {
                      throw new java.io.UncheckedIOException(failed);
                    }
                  };
              if (backAfterTheEffect) {
                // The Complete is re-sent until the server is back.
                restarter[0] =
                    new Thread(
                        () -> {
                          TestServer.sleep(300);
                          start.run();
                        });
                restarter[0].start();
              } else {
                start.run();
              }
              return Outcome.success(body, "");
            });
    if (restarter[0] != null) {
      restarter[0].join(30_000);
    }
    assertEquals(1, provider.count());
    assertEquals(2, server.starts());
    OperationResult again = client.executeOnce(OP, k, PAYLOAD, creating(0));
    assertTrue(again.replayed());
    assertEquals(result.bodyText(), again.bodyText());
    assertEquals(1, provider.count());
    assertEquals(List.of("CLAIMED", "COMPLETED"), events(result.operationId()));
  }

  @Test
  void aLostLeaseIsAnsweredFromTheRecordNeverRedone() throws Exception {
    // Owner A's effect lands, then A is cut off and its lease lapses; B takes over
    // (ReconcileFirst), finds A's effect at the provider and records it. A is refused
    // (LEASE_LOST), looks the operation up and answers with B's record.
    String k = key();
    CountDownLatch bDone = new CountDownLatch(1);
    CountDownLatch aCut = new CountDownLatch(1);
    int[] aAttempt = new int[1];
    ExecutorService pool = Executors.newSingleThreadExecutor();
    try {
      Future<OperationResult> a =
          pool.submit(
              () ->
                  proxied.executeOnce(
                      OP,
                      k,
                      PAYLOAD,
                      leased(Duration.ofMillis(600), Duration.ofSeconds(10)),
                      ctx -> {
                        aAttempt[0] = ctx.attempt();
                        byte[] body = provider.effect(ctx.operationId());
                        proxy.cut();
                        aCut.countDown();
                        // Waits whatever comes (an interrupt when A learns it lost the lease).
                        while (!bDone.await(10, TimeUnit.MILLISECONDS)) {
                          Thread.onSpinWait();
                        }
                        proxy.restore();
                        return Outcome.success(body, "");
                      }));
      assertTrue(aCut.await(30, TimeUnit.SECONDS));
      // A's last Renew was at most a third of its lease ago: its lease lapses within 0.6 s (B
      // would wait for it all the same, told Pending).
      TestServer.sleep(900);
      OperationResult b =
          client.executeOnce(
              OP,
              k,
              PAYLOAD,
              ExecuteOptions.builder()
                  .lookup(provider::lookup)
                  .lease(Duration.ofSeconds(5))
                  .build(),
              creating(0));
      bDone.countDown();
      OperationResult aResult;
      try {
        aResult = a.get(30, TimeUnit.SECONDS);
      } finally {
        proxy.restore();
      }
      List<String> events =
          history(b.operationId()).stream()
              .map(e -> e.getEvent() + "/" + e.getAttempt() + "/" + e.getDetail())
              .collect(Collectors.toList());
      assertEquals(1, provider.count(), events.toString());
      assertFalse(b.replayed(), events.toString());
      // B took over from A's attempt (the first, unless a loaded machine made A decline one).
      assertEquals(aAttempt[0] + 1, b.attempts(), events.toString());
      assertTrue(aResult.replayed(), events.toString());
      assertEquals(b.bodyText(), aResult.bodyText());
      events = events(b.operationId());
      assertTrue(
          events.contains("TAKEN_OVER") && events.contains("STALE_WRITE_REFUSED"),
          events.toString());
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void aReSentClaimAnsweredWithAShortLeaseRenewsBeforeTheEffect() throws Exception {
    // The first Claim's reply is lost and the re-send is slow: the re-send is answered with
    // what is left of the lease at its handling, too little, so the owner renews before it
    // starts the effect.
    List<List<String>> seen = Collections.synchronizedList(new ArrayList<>());
    // Re-sent after 1.3 s of a 2 s lease: under half is left, 0.7 s of slack.
    proxy.dropNextReply();
    proxy.connectDelay(1300);
    long started = Clocks.SYSTEM.getAsLong();
    List<EffectContext> contexts = new ArrayList<>();
    OperationResult result =
        proxied.executeOnce(
            OP,
            key(),
            PAYLOAD,
            leased(Duration.ofSeconds(2), Duration.ofSeconds(5)),
            ctx -> {
              contexts.add(ctx);
              seen.add(allEvents(ctx.operationId()));
              return Outcome.success(provider.effect(ctx.operationId()), "");
            });
    assertEquals(1, proxy.dropped());
    assertEquals(1, provider.count());
    List<String> before = seen.get(0);
    assertEquals("CLAIMED", before.get(0));
    assertTrue(before.contains("RENEWED"), "renewed before starting: " + before);
    // The re-sent Claim (same claim_token) got the same ownership: one attempt.
    assertEquals(1, result.attempts());
    assertTrue(contexts.get(0).cancelAt() <= started + Duration.ofSeconds(5).toNanos());
  }

  @Test
  void aLeaseNearlySpentOnArrivalIsRenewedBeforeTheEffect() throws Exception {
    // The Claim's reply arrives with 200 ms of a 1 s lease left (counted from its send), less
    // than the least the effect starts with (a third of the lease): the attempt renews, and
    // the Renew's lease counts from the Renew's send.
    proxy.delayReplies(800);
    List<Integer> attempts = Collections.synchronizedList(new ArrayList<>());
    OperationResult result =
        proxied.executeOnce(
            OP,
            key(),
            PAYLOAD,
            leased(Duration.ofSeconds(1), Duration.ofSeconds(5)),
            recordingAttempts(attempts));
    assertEquals(1, proxy.delayed());
    assertEquals(List.of(1), attempts);
    assertEquals(1, provider.count());
    assertEquals(List.of("CLAIMED", "RENEWED", "COMPLETED"), allEvents(result.operationId()));
  }

  @Test
  void tooLittleLeaseLeftNeverStartsTheEffect() throws Exception {
    // The Claim's reply and the Renew's both arrive with 200 ms of a 1 s lease left: attempt 1
    // declines (Fail NOT_STARTED: released at once) and attempt 2 runs.
    proxy.delayReplies(800, 800);
    List<Integer> attempts = Collections.synchronizedList(new ArrayList<>());
    OperationResult result =
        proxied.executeOnce(
            OP,
            key(),
            PAYLOAD,
            leased(Duration.ofSeconds(1), Duration.ofSeconds(5)),
            recordingAttempts(attempts));
    assertEquals(List.of(2), attempts);
    assertEquals(2, result.attempts());
    assertEquals(1, provider.count());
    List<HistoryEntry> entries =
        history(result.operationId()).stream()
            // A Renew of attempt 1 still in flight when it declined lands refused, harmlessly.
            .filter(
                e -> !(e.getEvent().equals("STALE_WRITE_REFUSED") && e.getDetail().equals("renew")))
            .collect(Collectors.toList());
    assertEquals(
        List.of("CLAIMED", "RENEWED", "RETRY_SCHEDULED", "RETRY_STARTED", "COMPLETED"),
        entries.stream().map(HistoryEntry::getEvent).collect(Collectors.toList()));
    assertEquals("not_started", entries.get(2).getDetail());
  }

  @Test
  void aReSentClaimCountsItsAttemptFromTheAnsweredSend() throws Exception {
    // The first send's reply is held for 2 s, and (the proxy relays bytes in order) every
    // reply behind it on that connection: the sends at 0 and ~0.8 s time out after 800 ms,
    // and the one at ~1.6 s is answered at ~2 s with what is left of the 3.5 s attempt at its
    // handling (~1.9 s). Counted from that send, the attempt is cancelled at ~3.15 s: plenty.
    // Counted from the first send, at ~1.55 s, before the answer even arrived: attempt 1 would
    // decline and attempt 2 run.
    proxy.delayReplies(2_000);
    List<Integer> attempts = Collections.synchronizedList(new ArrayList<>());
    long started = System.nanoTime();
    try (IdemdClient resending =
        server.client(
            RetryPolicy.builder()
                .initialBackoff(Duration.ofMillis(20))
                .maxBackoff(Duration.ofMillis(200))
                .callTimeout(Duration.ofMillis(800))
                .build(),
            proxy.address())) {
      OperationResult result =
          resending.executeOnce(
              OP,
              key(),
              PAYLOAD,
              leased(Duration.ofSeconds(3), Duration.ofMillis(3_500)),
              recordingAttempts(attempts));
      assertEquals(1, proxy.delayed());
      assertTrue(System.nanoTime() - started >= Duration.ofSeconds(2).toNanos());
      assertEquals(List.of(1), attempts);
      assertEquals(1, result.attempts());
      assertEquals(1, provider.count());
      assertEquals(List.of("CLAIMED", "COMPLETED"), events(result.operationId()));
    }
  }

  @Test
  void aStaleOwnersCompleteIsRefusedAndItAnswersWhatIsStored() throws Exception {
    // The owner's renewals are cut off and its lease lapses; another owner takes over and
    // records its own result before the first one's Complete arrives.
    String k = key();
    CountDownLatch takenOver = new CountDownLatch(1);
    OperationResult result =
        proxied.executeOnce(
            OP,
            k,
            PAYLOAD,
            // A 0.5 s lease: 0.15 s could leave too little on a loaded machine (declined).
            leased(Duration.ofMillis(500), Duration.ofSeconds(5)),
            ctx -> {
              provider.effect(ctx.operationId());
              proxy.cut(); // this owner's renewals fail; its lease lapses
              TestServer.sleep(800);
              ClaimResponse other =
                  client.claim(
                      ClientTest.claim(OP, k)
                          .setJsonPayload("{\"sku\":\"book-42\",\"amount\":1999}")
                          .setLease(IdemdClient.Durations.of(Duration.ofSeconds(5)))
                          .build());
              Ownership owner = other.getReconcileFirst().getOwnership();
              client.complete(
                  CompleteRequest.newBuilder()
                      .setOperationId(owner.getOperationId())
                      .setFence(owner.getFence())
                      .setResult(
                          dev.idemd.idem.v1.Result.newBuilder()
                              .setBody(
                                  com.google.protobuf.ByteString.copyFromUtf8(
                                      "reconciled by another owner")))
                      .build());
              takenOver.countDown();
              proxy.restore();
              return Outcome.success("mine".getBytes(StandardCharsets.UTF_8), "");
            });
    assertEquals(0, takenOver.getCount());
    assertEquals("reconciled by another owner", result.bodyText());
    assertTrue(result.replayed());
    assertEquals(1, provider.count());
    List<String> events = events(result.operationId());
    assertTrue(events.contains("STALE_WRITE_REFUSED"), events.toString());
  }
}
