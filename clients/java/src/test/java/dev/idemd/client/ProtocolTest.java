package dev.idemd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import dev.idemd.idem.v1.Acquired;
import dev.idemd.idem.v1.ClaimRequest;
import dev.idemd.idem.v1.ClaimResponse;
import dev.idemd.idem.v1.CompleteResponse;
import dev.idemd.idem.v1.FailDisposition;
import dev.idemd.idem.v1.FailRequest;
import dev.idemd.idem.v1.FailResponse;
import dev.idemd.idem.v1.LookupRequest;
import dev.idemd.idem.v1.OperationState;
import dev.idemd.idem.v1.Ownership;
import dev.idemd.idem.v1.ReconcileFirst;
import dev.idemd.idem.v1.RenewResponse;
import io.grpc.Status;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * The protocol's pure core, driven step by step without a server: scripted answers and a clock that
 * moves only when the test moves it, as shared protocol vectors will drive it.
 */
class ProtocolTest {
  static final long S = 1_000_000_000L;
  static final long MS = 1_000_000L;

  long now = 100 * S;
  final AtomicInteger tokens = new AtomicInteger();

  ExecuteOnceProtocol protocol(ExecuteOptions options) {
    return new ExecuteOnceProtocol(
        "payments.charge",
        "k",
        Payload.json("{}"),
        options,
        () -> now,
        () -> new byte[] {(byte) tokens.incrementAndGet()});
  }

  static Ownership ownership(int attempt, long leaseNanos, long attemptNanos) {
    return Ownership.newBuilder()
        .setOperationId("op-1")
        .setFence(10 + attempt)
        .setAttempt(attempt)
        .setMaxAttempts(5)
        .setLease(IdemdClient.Durations.ofNanos(leaseNanos))
        .setAttemptDeadline(IdemdClient.Durations.ofNanos(attemptNanos))
        .build();
  }

  static ClaimResponse acquired(int attempt) {
    return ClaimResponse.newBuilder()
        .setAcquired(Acquired.newBuilder().setOwnership(ownership(attempt, 30 * S, 300 * S)))
        .build();
  }

  static <T> T sent(Step step, Class<T> type) {
    assertInstanceOf(Step.Send.class, step, "expected a send, got " + step);
    return type.cast(((Step.Send<?, ?>) step).request());
  }

  static IdemdStatusException refusal(Status.Code code, String reason) {
    return new StatusDetails(code, "", reason, Map.of(), null, List.of(), null).toException();
  }

  @Test
  void anOutcomeThisClientDoesNotKnowNeverExecutes() {
    ExecuteOnceProtocol protocol = protocol(ExecuteOptions.defaults());
    sent(protocol.start(), ClaimRequest.class);
    Step step = protocol.next(new Answer.Replied(ClaimResponse.getDefaultInstance(), now));
    assertInstanceOf(UnrecognisedOutcomeException.class, ((Step.Raise) step).error());
  }

  @Test
  void eachAttemptHasAFreshClaimTokenAndARetryableOutcomeClaimsAgain() {
    ExecuteOnceProtocol protocol = protocol(ExecuteOptions.defaults());
    ClaimRequest first = sent(protocol.start(), ClaimRequest.class);
    assertInstanceOf(Step.StartRenewing.class, protocol.next(new Answer.Replied(acquired(1), now)));
    Step effect = protocol.next(Answer.DONE);
    assertEquals(Step.Work.EFFECT, ((Step.Guarded) effect).work());
    FailRequest fail =
        sent(
            protocol.next(
                new Answer.Returned(Outcome.retryable("busy", "", Duration.ofMillis(10)))),
            FailRequest.class);
    assertEquals(FailDisposition.FAIL_DISPOSITION_RETRYABLE, fail.getDisposition());
    Step stop =
        protocol.next(
            new Answer.Replied(
                FailResponse.newBuilder()
                    .setState(OperationState.OPERATION_STATE_RETRY_WAIT)
                    .build(),
                now));
    assertInstanceOf(Step.StopRenewing.class, stop);
    ClaimRequest second = sent(protocol.next(Answer.DONE), ClaimRequest.class);
    assertNotEquals(first.getClaimToken(), second.getClaimToken());
    assertEquals(ByteString.copyFrom(new byte[] {2}), second.getClaimToken());
  }

  @Test
  void theLeaseCountsFromTheAnsweredSendAndAShortOneIsRenewedBeforeTheEffect() {
    ExecuteOnceProtocol protocol =
        protocol(ExecuteOptions.builder().lease(Duration.ofSeconds(1)).build());
    sent(protocol.start(), ClaimRequest.class);
    long answeredSend = now;
    now += 600 * MS; // the reply arrives 0.6 s after its send: 0.4 s of the 1 s lease left
    ClaimResponse response =
        ClaimResponse.newBuilder()
            .setAcquired(Acquired.newBuilder().setOwnership(ownership(1, S, 300 * S)))
            .build();
    protocol.next(new Answer.Replied(response, answeredSend));
    Step renew = protocol.next(Answer.DONE);
    assertInstanceOf(dev.idemd.idem.v1.RenewRequest.class, ((Step.Send<?, ?>) renew).request());
    long renewSent = now;
    now += 10 * MS;
    Step effect =
        protocol.next(
            new Answer.Replied(
                RenewResponse.newBuilder()
                    .setLease(IdemdClient.Durations.ofNanos(S))
                    .setAttemptDeadline(IdemdClient.Durations.ofNanos(299 * S))
                    .build(),
                renewSent));
    Step.Guarded guarded = (Step.Guarded) effect;
    assertEquals(Step.Work.EFFECT, guarded.work());
    assertEquals(renewSent + S, guarded.attempt().leaseExpiresAt());
  }

  @Test
  void aNegativeLookupCountsOnlyIfItStartedOnceTheEarlierAttemptSettled() {
    ExecuteOnceProtocol protocol =
        protocol(
            ExecuteOptions.builder()
                .lookup(ctx -> null)
                .lookupInterval(Duration.ofMillis(500))
                .build());
    sent(protocol.start(), ClaimRequest.class);
    long sentAt = now;
    now += 5 * S; // a long-polled Claim: the reply comes 5 s after its send
    long repliedAt = now;
    ClaimResponse takeover =
        ClaimResponse.newBuilder()
            .setReconcileFirst(
                ReconcileFirst.newBuilder()
                    .setOwnership(ownership(2, 30 * S, 300 * S))
                    .setPreviousFence(11)
                    .setPreviousState(OperationState.OPERATION_STATE_IN_PROGRESS)
                    .setPreviousAttemptDeadline(IdemdClient.Durations.ofNanos(2 * S)))
            .build();
    protocol.next(new Answer.Replied(takeover, sentAt));
    Step.Guarded lookup = (Step.Guarded) protocol.next(Answer.DONE);
    assertEquals(Step.Work.LOOKUP, lookup.work());
    // Counted from the reply: the earlier attempt may run until 2 s after it, not after the send.
    assertEquals(repliedAt + 2 * S, lookup.attempt().context.previousAttemptSettlesAt());
    // This lookup started 1 s before the earlier attempt settles and answers "nothing" after:
    // it proves nothing, so the protocol pauses and asks again instead of running the effect.
    now += S;
    long lookupStarted = now;
    now += 3 * S;
    Step.Guarded pause = (Step.Guarded) protocol.next(new Answer.Returned(null));
    assertEquals(Step.Work.PAUSE, pause.work());
    assertTrue(lookupStarted < repliedAt + 2 * S);
    Step.Guarded again = (Step.Guarded) protocol.next(Answer.DONE);
    assertEquals(Step.Work.LOOKUP, again.work());
    // Started after the earlier attempt settled: "nothing" now counts, and the effect runs.
    Step.Guarded effect = (Step.Guarded) protocol.next(new Answer.Returned(null));
    assertEquals(Step.Work.EFFECT, effect.work());
  }

  @Test
  void aPositiveLookupIsRecordedAtOnceWithoutTheEffect() {
    ExecuteOnceProtocol protocol = protocol(ExecuteOptions.builder().lookup(ctx -> null).build());
    sent(protocol.start(), ClaimRequest.class);
    protocol.next(
        new Answer.Replied(
            ClaimResponse.newBuilder()
                .setReconcileFirst(
                    ReconcileFirst.newBuilder()
                        .setOwnership(ownership(2, 30 * S, 300 * S))
                        .setPreviousAttemptDeadline(IdemdClient.Durations.ofNanos(60 * S)))
                .build(),
            now));
    protocol.next(Answer.DONE);
    Step complete = protocol.next(new Answer.Returned(Outcome.success(new byte[] {1}, "")));
    assertInstanceOf(
        dev.idemd.idem.v1.CompleteRequest.class, ((Step.Send<?, ?>) complete).request());
    assertInstanceOf(
        Step.StopRenewing.class,
        protocol.next(new Answer.Replied(CompleteResponse.getDefaultInstance(), now)));
    Step.Finish finish = (Step.Finish) protocol.next(Answer.DONE);
    assertEquals(2, finish.result().attempts());
  }

  @Test
  void reconcileFirstWithNeitherALookupNorDeduplicationDeclines() {
    ExecuteOnceProtocol protocol = protocol(ExecuteOptions.defaults());
    sent(protocol.start(), ClaimRequest.class);
    protocol.next(
        new Answer.Replied(
            ClaimResponse.newBuilder()
                .setReconcileFirst(
                    ReconcileFirst.newBuilder().setOwnership(ownership(2, 30 * S, 300 * S)))
                .build(),
            now));
    FailRequest decline = sent(protocol.next(Answer.DONE), FailRequest.class);
    assertEquals(FailDisposition.FAIL_DISPOSITION_NOT_STARTED, decline.getDisposition());
    assertInstanceOf(
        Step.StopRenewing.class,
        protocol.next(new Answer.Replied(FailResponse.getDefaultInstance(), now)));
    Step.Raise raise = (Step.Raise) protocol.next(Answer.DONE);
    assertInstanceOf(OutcomeUnknownException.class, raise.error());
  }

  @Test
  void leaseLostAfterTheEffectLooksTheOperationUpAndNeverRedoesIt() {
    ExecuteOnceProtocol protocol = protocol(ExecuteOptions.defaults());
    sent(protocol.start(), ClaimRequest.class);
    protocol.next(new Answer.Replied(acquired(1), now));
    protocol.next(Answer.DONE);
    protocol.next(new Answer.Returned(Outcome.success(new byte[] {1}, "")));
    Step lookup = protocol.next(new Answer.Refused(refusal(Status.Code.ABORTED, "LEASE_LOST")));
    assertEquals("op-1", sent(lookup, LookupRequest.class).getOperationId());
  }

  @Test
  void tooLittleOfTheAttemptLeftDeclinesWithoutTheEffect() {
    ExecuteOnceProtocol protocol = protocol(ExecuteOptions.defaults());
    sent(protocol.start(), ClaimRequest.class);
    long sentAt = now;
    now += 295 * S; // a 300 s attempt answered after 295 s: within its margin (1 s) of the end
    ClaimResponse late =
        ClaimResponse.newBuilder()
            .setAcquired(Acquired.newBuilder().setOwnership(ownership(1, 300 * S, 296 * S)))
            .build();
    protocol.next(new Answer.Replied(late, sentAt));
    FailRequest decline = sent(protocol.next(Answer.DONE), FailRequest.class);
    assertEquals(FailDisposition.FAIL_DISPOSITION_NOT_STARTED, decline.getDisposition());
    assertEquals("not_started", decline.getError().getCode());
  }
}
