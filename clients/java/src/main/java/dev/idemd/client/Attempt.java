package dev.idemd.client;

import dev.idemd.idem.v1.FailDisposition;
import dev.idemd.idem.v1.FailRequest;
import dev.idemd.idem.v1.OperationError;
import dev.idemd.idem.v1.Ownership;
import dev.idemd.idem.v1.ReconcileFirst;
import dev.idemd.idem.v1.RenewRequest;
import dev.idemd.idem.v1.RenewResponse;
import java.time.Duration;
import java.util.function.LongSupplier;

/**
 * One owned attempt's state: its lease, its deadlines, whether the effect started, whether the
 * lease was lost. Shared by the protocol, its renewals and the driver's guard, which run on
 * different threads: every field that changes is read and written under the attempt's lock. Times
 * are {@link Clocks} instants in nanoseconds.
 */
final class Attempt {
  /** Why an attempt must stop now. */
  enum Interruption {
    /** Another owner took over (LEASE_LOST). */
    LOST,
    /** The attempt's time is up (its cancel point, or ATTEMPT_DEADLINE_PASSED). */
    STOPPED
  }

  /**
   * What an attempt stopped at its deadline reports (Fail UNKNOWN). One value, so a report sent
   * early (the blocking driver's watchdog) and the one sent when the effect returns are the same
   * request: idemd answers the second from the first's receipt.
   */
  static final String[] ATTEMPT_DEADLINE_REPORT = {
    "attempt_deadline", "the effect was cancelled at the attempt deadline"
  };

  /** What an attempt that never started the effect reports (Fail NOT_STARTED). */
  static final String[] NOT_STARTED_REPORT = {
    "not_started",
    "the effect was not started: too little of the lease or attempt was left, "
        + "or an earlier attempt may still be running"
  };

  final String operationId;
  final long fence;
  final int number;
  final long leaseAsked;

  /** Room before the deadline to stop the effect and report; never started with less. */
  final long margin;

  /**
   * The least lease the effect starts with, even after a Renew: at most a third of the lease asked
   * for. Judged against the lease asked for, not the one granted: a re-sent Claim is granted only
   * what was left of the lease by then, and half of a remnant is no margin.
   */
  final long leaseMargin;

  /** When the effect is cancelled: the attempt deadline less the margin. */
  final long cancelAt;

  final EffectContext context;
  private final LongSupplier clock;

  private long granted;
  private long leaseExpiresAt;
  private long deadlineAt;
  private boolean started;
  private boolean lost;
  private IdemdStatusException lostError;
  private boolean timedOut;
  private Runnable lostListener = () -> {};

  /**
   * @param sentAt when the answered send of the Claim began (lease and deadline count from it)
   * @param receivedAt when its reply arrived (the earlier attempt's deadline counts from it)
   */
  Attempt(
      Ownership ownership,
      long sentAt,
      long receivedAt,
      Duration leaseAsked,
      ReconcileFirst reconcileFirst,
      LongSupplier clock) {
    this.operationId = ownership.getOperationId();
    this.fence = ownership.getFence();
    this.number = ownership.getAttempt();
    this.leaseAsked = leaseAsked.toNanos();
    this.clock = clock;
    this.granted = IdemdClient.Durations.toNanos(ownership.getLease());
    this.leaseExpiresAt = sentAt + granted;
    long duration = IdemdClient.Durations.toNanos(ownership.getAttemptDeadline());
    this.deadlineAt = sentAt + duration;
    this.margin = Math.max(50_000_000L, Math.min(1_000_000_000L, duration / 10));
    this.leaseMargin = Math.min(margin, this.leaseAsked / 3);
    this.cancelAt = deadlineAt - margin;
    Long previousFence = null;
    Duration given = null;
    long settlesAt = 0;
    if (reconcileFirst != null) {
      previousFence = reconcileFirst.getPreviousFence();
      // Counted from the reply (the late end): the server measured what was left somewhere
      // between the answered send and the reply, and a long-polled Claim may have been sent
      // long before. Absent (an older server), the earlier attempt may have started just
      // before this Claim was taken, so it may run a whole attempt duration from then.
      if (reconcileFirst.hasPreviousAttemptDeadline()) {
        long left = IdemdClient.Durations.toNanos(reconcileFirst.getPreviousAttemptDeadline());
        given = Duration.ofNanos(left);
        settlesAt = receivedAt + left;
      } else {
        settlesAt = receivedAt + duration;
      }
    }
    this.context =
        new EffectContext(
            operationId,
            fence,
            number,
            ownership.getMaxAttempts(),
            previousFence,
            given,
            settlesAt,
            cancelAt,
            clock);
  }

  long now() {
    return clock.getAsLong();
  }

  synchronized long granted() {
    return granted;
  }

  synchronized long leaseExpiresAt() {
    return leaseExpiresAt;
  }

  synchronized long deadlineAt() {
    return deadlineAt;
  }

  synchronized boolean started() {
    return started;
  }

  synchronized void markStarted() {
    started = true;
  }

  synchronized boolean lost() {
    return lost;
  }

  synchronized boolean timedOut() {
    return timedOut;
  }

  /** A Renew's answer: the lease counts from the Renew's answered send. */
  synchronized void renewed(RenewResponse response, long sentAt) {
    granted = IdemdClient.Durations.toNanos(response.getLease());
    leaseExpiresAt = sentAt + granted;
    deadlineAt =
        Math.min(deadlineAt, sentAt + IdemdClient.Durations.toNanos(response.getAttemptDeadline()));
  }

  /** The lease is lost (LEASE_LOST) or may no longer be renewed (ATTEMPT_DEADLINE_PASSED). */
  void markLost(IdemdStatusException refusal) {
    Runnable listener;
    synchronized (this) {
      if (lost) {
        return;
      }
      lost = true;
      lostError = refusal;
      listener = lostListener;
    }
    context.cancel();
    listener.run();
  }

  /** The driver's guard saw the attempt's time run out. */
  void markTimedOut() {
    synchronized (this) {
      timedOut = true;
    }
    context.cancel();
  }

  /** The driver's hook, run once when the lease is lost (wakes the guard). */
  synchronized void onLost(Runnable listener) {
    lostListener = listener == null ? () -> {} : listener;
  }

  /** Why the attempt must stop now, or null. */
  synchronized Interruption interruption() {
    if (lost) {
      // Nobody took over when the attempt deadline passed: this attempt's time is up.
      return lostError instanceof AttemptDeadlinePassedException
          ? Interruption.STOPPED
          : Interruption.LOST;
    }
    if (timedOut || clock.getAsLong() >= cancelAt) {
      return Interruption.STOPPED;
    }
    return null;
  }

  Step.Send<RenewRequest, RenewResponse> renew() {
    RenewRequest request =
        RenewRequest.newBuilder()
            .setOperationId(operationId)
            .setFence(fence)
            .setLease(IdemdClient.Durations.ofNanos(leaseAsked))
            .build();
    return new Step.Send<>(Rpc.RENEW, request, cancelAt, 0);
  }

  Step.Send<FailRequest, dev.idemd.idem.v1.FailResponse> fail(
      FailDisposition disposition,
      String code,
      String message,
      java.util.Map<String, String> metadata,
      Duration retryAfter) {
    FailRequest.Builder request =
        FailRequest.newBuilder()
            .setOperationId(operationId)
            .setFence(fence)
            .setDisposition(disposition)
            .setError(
                OperationError.newBuilder()
                    .setCode(code)
                    .setMessage(message)
                    .putAllMetadata(metadata));
    if (retryAfter != null) {
      request.setRetryAfter(IdemdClient.Durations.of(retryAfter));
    }
    return new Step.Send<>(Rpc.FAIL, request.build(), deadlineAt(), 0);
  }

  /** Fail NOT_STARTED (no retry_after: with NOT_STARTED it is INVALID_ARGUMENT). */
  Step.Send<FailRequest, dev.idemd.idem.v1.FailResponse> decline() {
    return fail(
        FailDisposition.FAIL_DISPOSITION_NOT_STARTED,
        NOT_STARTED_REPORT[0],
        NOT_STARTED_REPORT[1],
        java.util.Map.of(),
        null);
  }

  /**
   * What the blocking driver's watchdog sends at the cancel point while the effect (or the lookup)
   * still runs: UNKNOWN once the effect started, NOT_STARTED before. The protocol sends the same
   * request again afterwards, answered from this one's receipt.
   */
  Step.Send<FailRequest, dev.idemd.idem.v1.FailResponse> timeUpReport() {
    if (started()) {
      return fail(
          FailDisposition.FAIL_DISPOSITION_UNKNOWN,
          ATTEMPT_DEADLINE_REPORT[0],
          ATTEMPT_DEADLINE_REPORT[1],
          java.util.Map.of(),
          null);
    }
    return decline();
  }
}
