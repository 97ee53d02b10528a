package dev.idemd.client;

import io.grpc.Deadline;
import java.time.Duration;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;

/** What the effect (and a provider lookup) learn about the attempt they run in. */
public final class EffectContext {
  private final String operationId;
  private final long fence;
  private final int attempt;
  private final int maxAttempts;
  private final boolean previousOutcomeUnknown;
  private final Long previousFence;
  private final Duration previousAttemptDeadline;
  private final long previousAttemptSettlesAt;
  private final long cancelAt;
  private final LongSupplier clock;
  private final CompletableFuture<Void> cancelled = new CompletableFuture<>();

  EffectContext(
      String operationId,
      long fence,
      int attempt,
      int maxAttempts,
      Long previousFence,
      Duration previousAttemptDeadline,
      long previousAttemptSettlesAt,
      long cancelAt,
      LongSupplier clock) {
    this.operationId = operationId;
    this.fence = fence;
    this.attempt = attempt;
    this.maxAttempts = maxAttempts;
    this.previousOutcomeUnknown = previousFence != null;
    this.previousFence = previousFence;
    this.previousAttemptDeadline = previousAttemptDeadline;
    this.previousAttemptSettlesAt = previousAttemptSettlesAt;
    this.cancelAt = cancelAt;
    this.clock = clock;
  }

  /** Stable for the whole operation: give it to the provider as its idempotency key. */
  public String operationId() {
    return operationId;
  }

  public long fence() {
    return fence;
  }

  /** 1-based; counts every owner, takeovers included. */
  public int attempt() {
    return attempt;
  }

  public int maxAttempts() {
    return maxAttempts;
  }

  /** ReconcileFirst: an earlier attempt may have taken effect. */
  public boolean previousOutcomeUnknown() {
    return previousOutcomeUnknown;
  }

  /** The fence of the attempt whose outcome is in doubt (ReconcileFirst). */
  public OptionalLong previousFence() {
    return previousFence == null ? OptionalLong.empty() : OptionalLong.of(previousFence);
  }

  /**
   * The server's {@code previous_attempt_deadline}: what was left of the earlier attempt when it
   * answered; empty when it did not send one (or there is no earlier attempt in doubt).
   */
  public Optional<Duration> previousAttemptDeadline() {
    return Optional.ofNullable(previousAttemptDeadline);
  }

  /**
   * Whether the earlier attempt's effect is no longer in flight now: counted from the Claim's reply
   * (conservatively a whole attempt duration when the server sent no deadline). A provider read
   * that finds nothing proves something only if it started after this.
   */
  public boolean previousAttemptSettled() {
    return previousAttemptSettledAt(clock.getAsLong());
  }

  boolean previousAttemptSettledAt(long instant) {
    return !previousOutcomeUnknown || instant >= previousAttemptSettlesAt;
  }

  /** The {@link Clocks} instant the earlier attempt settles (ReconcileFirst only). */
  long previousAttemptSettlesAt() {
    return previousAttemptSettlesAt;
  }

  /** Time until the effect is cancelled (zero when past): bound provider calls by it. */
  public Duration remaining() {
    return Duration.ofNanos(Math.max(0, cancelAt - clock.getAsLong()));
  }

  /** When the effect is cancelled, as a gRPC deadline for calls the effect makes. */
  public Deadline deadline() {
    return Deadline.after(Math.max(0, cancelAt - clock.getAsLong()), TimeUnit.NANOSECONDS);
  }

  long cancelAt() {
    return cancelAt;
  }

  /** True once the effect must stop: its attempt deadline came or its lease was lost. */
  public boolean isCancelled() {
    return cancelled.isDone();
  }

  /** Completes when the effect must stop (a read-only view). */
  public CompletableFuture<Void> cancelled() {
    return cancelled.copy();
  }

  void cancel() {
    cancelled.complete(null);
  }

  /** Waits up to {@code nanos} for the cancellation; true if it came. */
  boolean awaitCancelled(long nanos) throws InterruptedException {
    try {
      cancelled.get(Math.max(0, nanos), TimeUnit.NANOSECONDS);
      return true;
    } catch (java.util.concurrent.TimeoutException
        | java.util.concurrent.ExecutionException notYet) {
      return cancelled.isDone();
    }
  }

  @Override
  public String toString() {
    return "EffectContext["
        + operationId
        + ", attempt "
        + attempt
        + "/"
        + maxAttempts
        + (previousOutcomeUnknown ? ", previous outcome unknown" : "")
        + "]";
  }
}
