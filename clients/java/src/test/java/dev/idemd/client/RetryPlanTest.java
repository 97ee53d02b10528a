package dev.idemd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.google.rpc.ErrorInfo;
import io.grpc.Status;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** The retry taxonomy, in one place ({@link RetryPlan}), on a fake clock. */
class RetryPlanTest {
  static final long MS = 1_000_000L;

  /** A clock that moves only when a send or a sleep moves it. */
  static final class FakeClock {
    long now = 1_000 * MS;
    final List<Long> sleeps = new ArrayList<>();

    void sleep(long nanos) {
      sleeps.add(nanos);
      now += nanos;
    }
  }

  static IdemdStatusException error(Status.Code code, String reason, Duration retryAfter) {
    var status = com.google.rpc.Status.newBuilder().setCode(code.value());
    if (reason != null) {
      status.addDetails(
          com.google.protobuf.Any.pack(
              ErrorInfo.newBuilder().setReason(reason).setDomain("idem.v1").build()));
    }
    if (retryAfter != null) {
      status.addDetails(com.google.protobuf.Any.pack(StatusDetailsTest.retry(retryAfter)));
    }
    return StatusDetails.exceptionOf(
        io.grpc.protobuf.StatusProto.toStatusRuntimeException(status.build()));
  }

  /** Runs a plan against failures in turn; returns the timeouts of the sends. */
  static List<Long> run(RetryPlan plan, FakeClock clock, List<IdemdStatusException> failures) {
    List<Long> timeouts = new ArrayList<>();
    for (IdemdStatusException failure : failures) {
      timeouts.add(plan.nextTimeoutNanos());
      clock.sleep(plan.delayAfter(failure));
    }
    timeouts.add(plan.nextTimeoutNanos());
    return timeouts;
  }

  @ParameterizedTest
  @EnumSource(names = {"UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED"})
  void transientCodesAreReSentWithFullJitter(Status.Code code) {
    FakeClock clock = new FakeClock();
    List<Double> ceilings = new ArrayList<>();
    RetryPolicy policy =
        RetryPolicy.builder()
            .initialBackoff(Duration.ofMillis(100))
            .multiplier(2)
            .maxBackoff(Duration.ofMillis(250))
            .callTimeout(Duration.ofSeconds(3))
            .build();
    RetryPlan plan =
        new RetryPlan(
            policy,
            Long.MAX_VALUE,
            0,
            () -> clock.now,
            ceiling -> {
              ceilings.add(ceiling);
              return ceiling;
            });
    List<Long> timeouts =
        run(
            plan,
            clock,
            List.of(error(code, null, null), error(code, null, null), error(code, null, null)));
    assertEquals(4, timeouts.size());
    assertEquals(List.of(100.0 * MS, 200.0 * MS, 250.0 * MS), ceilings);
    assertEquals(List.of(100 * MS, 200 * MS, 250 * MS), clock.sleeps);
  }

  @Test
  void retryInfoSetsTheLeastDelay() {
    FakeClock clock = new FakeClock();
    RetryPlan plan =
        new RetryPlan(RetryPolicy.DEFAULT, Long.MAX_VALUE, 0, () -> clock.now, ceiling -> 0);
    run(
        plan,
        clock,
        List.of(error(Status.Code.UNAVAILABLE, "STORE_UNAVAILABLE", Duration.ofMillis(700))));
    assertEquals(List.of(700 * MS), clock.sleeps);
  }

  @ParameterizedTest
  @EnumSource(
      names = {
        "INVALID_ARGUMENT",
        "FAILED_PRECONDITION",
        "PERMISSION_DENIED",
        "UNAUTHENTICATED",
        "NOT_FOUND",
        "ABORTED"
      })
  void refusalsAreNeverReSent(Status.Code code) {
    FakeClock clock = new FakeClock();
    RetryPlan plan =
        new RetryPlan(RetryPolicy.DEFAULT, Long.MAX_VALUE, 0, () -> clock.now, ceiling -> ceiling);
    plan.nextTimeoutNanos();
    IdemdStatusException refusal = error(code, "SOMETHING", null);
    assertSame(refusal, assertThrows(IdemdStatusException.class, () -> plan.delayAfter(refusal)));
    assertEquals(List.of(), clock.sleeps);
  }

  @Test
  void aRequestTooLargeIsNeverReSentButAShedCallIs() {
    FakeClock clock = new FakeClock();
    RetryPlan plan =
        new RetryPlan(RetryPolicy.DEFAULT, Long.MAX_VALUE, 0, () -> clock.now, ceiling -> ceiling);
    plan.nextTimeoutNanos();
    assertThrows(
        RequestTooLargeException.class,
        () -> plan.delayAfter(error(Status.Code.RESOURCE_EXHAUSTED, "REQUEST_TOO_LARGE", null)));
    RetryPlan shed =
        new RetryPlan(RetryPolicy.DEFAULT, Long.MAX_VALUE, 0, () -> clock.now, ceiling -> ceiling);
    assertEquals(
        3,
        run(
                shed,
                clock,
                List.of(
                    error(
                        Status.Code.RESOURCE_EXHAUSTED,
                        "TENANT_CONCURRENCY_LIMIT",
                        Duration.ofMillis(100)),
                    error(Status.Code.UNAVAILABLE, "OVERLOADED", Duration.ofMillis(100))))
            .size());
  }

  @Test
  void idemdsInternalIsNotReSentButABrokenTransportIs() {
    FakeClock clock = new FakeClock();
    RetryPlan plan =
        new RetryPlan(RetryPolicy.DEFAULT, Long.MAX_VALUE, 0, () -> clock.now, ceiling -> ceiling);
    plan.nextTimeoutNanos();
    assertThrows(
        InternalException.class,
        () -> plan.delayAfter(error(Status.Code.INTERNAL, "INTERNAL", null)));
    RetryPlan transport =
        new RetryPlan(RetryPolicy.DEFAULT, Long.MAX_VALUE, 0, () -> clock.now, ceiling -> ceiling);
    assertEquals(
        3,
        run(
                transport,
                clock,
                List.of(
                    error(Status.Code.INTERNAL, null, null),
                    error(Status.Code.UNKNOWN, null, null)))
            .size());
  }

  @Test
  void theSendCountBoundsReSends() {
    FakeClock clock = new FakeClock();
    RetryPlan plan =
        new RetryPlan(
            RetryPolicy.builder().maxSends(3).build(),
            Long.MAX_VALUE,
            0,
            () -> clock.now,
            ceiling -> ceiling);
    IdemdStatusException unavailable = error(Status.Code.UNAVAILABLE, null, null);
    plan.nextTimeoutNanos();
    plan.delayAfter(unavailable);
    plan.nextTimeoutNanos();
    plan.delayAfter(unavailable);
    plan.nextTimeoutNanos();
    assertThrows(UnavailableException.class, () -> plan.delayAfter(unavailable));
    assertEquals(3, plan.sends());
  }

  @Test
  void theTotalDeadlineBoundsReSendsAndEachSend() {
    FakeClock clock = new FakeClock();
    RetryPolicy policy =
        RetryPolicy.builder()
            .maxSends(100)
            .totalTimeout(Duration.ofSeconds(1))
            .callTimeout(Duration.ofSeconds(5))
            .build();
    RetryPlan plan = new RetryPlan(policy, Long.MAX_VALUE, 0, () -> clock.now, ceiling -> ceiling);
    IdemdStatusException unavailable = error(Status.Code.UNAVAILABLE, null, Duration.ofMillis(400));
    List<Long> timeouts = new ArrayList<>();
    // Sends at 0, 0.4, 0.8; the next would start after the deadline.
    IdemdStatusException last = null;
    while (true) {
      timeouts.add(plan.nextTimeoutNanos());
      try {
        clock.sleep(plan.delayAfter(unavailable));
      } catch (UnavailableException given) {
        last = given;
        break;
      }
    }
    assertSame(unavailable, last);
    assertEquals(List.of(1000 * MS, 600 * MS, 200 * MS), timeouts);
    RetryPlan bounded =
        new RetryPlan(policy, clock.now + 500 * MS, 0, () -> clock.now, ceiling -> ceiling);
    assertEquals(500 * MS, bounded.nextTimeoutNanos());
    RetryPlan spent = new RetryPlan(policy, clock.now, 0, () -> clock.now, ceiling -> ceiling);
    assertThrows(DeadlineExceededException.class, spent::nextTimeoutNanos);
  }

  @Test
  void theAnsweredSendsStartIsReported() {
    // Sends at 0 and 0.85 time out after 0.8 s (0.05 s backoff each); the one at 1.7 is
    // answered: its start, not the first send's, is what the answer counts from.
    FakeClock clock = new FakeClock();
    long start = clock.now;
    RetryPolicy policy =
        RetryPolicy.builder()
            .initialBackoff(Duration.ofMillis(50))
            .maxBackoff(Duration.ofMillis(50))
            .callTimeout(Duration.ofMillis(800))
            .build();
    RetryPlan plan = new RetryPlan(policy, Long.MAX_VALUE, 0, () -> clock.now, ceiling -> ceiling);
    IdemdStatusException lost = error(Status.Code.DEADLINE_EXCEEDED, null, null);
    for (int i = 0; i < 2; i++) {
      clock.now += plan.nextTimeoutNanos();
      clock.sleep(plan.delayAfter(lost));
    }
    plan.nextTimeoutNanos();
    assertEquals(start + 1700 * MS, plan.sentAt());
  }

  @Test
  void aClaimsWaitIsAddedToEachSendsTimeout() {
    FakeClock clock = new FakeClock();
    RetryPolicy policy =
        RetryPolicy.builder()
            .callTimeout(Duration.ofSeconds(2))
            .totalTimeout(Duration.ofSeconds(60))
            .build();
    RetryPlan plan =
        new RetryPlan(policy, Long.MAX_VALUE, 20_000 * MS, () -> clock.now, ceiling -> ceiling);
    assertEquals(22_000 * MS, plan.nextTimeoutNanos());
  }
}
