package dev.idemd.client;

import io.grpc.Status;
import java.util.EnumSet;
import java.util.Set;
import java.util.function.DoubleUnaryOperator;
import java.util.function.LongSupplier;

/**
 * The re-send decisions for one call, with no I/O: how long each send may take and, after a
 * failure, whether (and after how long) it is sent again. The blocking and the asynchronous paths
 * of {@link IdemdClient} make the same decisions through it. Times are instants of the given clock
 * in nanoseconds ({@link Clocks}); {@code Long.MAX_VALUE} is no deadline.
 */
final class RetryPlan {
  static final Set<Status.Code> RETRIED_CODES =
      EnumSet.of(
          Status.Code.UNAVAILABLE, Status.Code.DEADLINE_EXCEEDED, Status.Code.RESOURCE_EXHAUSTED);
  static final Set<Status.Code> NEVER_RETRIED_CODES =
      EnumSet.of(
          Status.Code.INVALID_ARGUMENT,
          Status.Code.FAILED_PRECONDITION,
          Status.Code.PERMISSION_DENIED,
          Status.Code.UNAUTHENTICATED,
          Status.Code.NOT_FOUND,
          Status.Code.ABORTED);
  // What the transport itself reports when a connection breaks mid-call; from idemd these
  // carry an ErrorInfo (INTERNAL) and are not re-sent.
  private static final Set<Status.Code> TRANSPORT_CODES =
      EnumSet.of(Status.Code.UNKNOWN, Status.Code.INTERNAL);

  private final RetryPolicy policy;
  private final long extraTimeoutNanos;
  private final LongSupplier clock;

  /** Draws the backoff: given the ceiling in nanoseconds, a value in [0, ceiling]. */
  private final DoubleUnaryOperator jitter;

  private final long end;
  private int sends;
  private long sentAt;

  RetryPlan(
      RetryPolicy policy,
      long deadline,
      long extraTimeoutNanos,
      LongSupplier clock,
      DoubleUnaryOperator jitter) {
    this.policy = policy;
    this.extraTimeoutNanos = extraTimeoutNanos;
    this.clock = clock;
    this.jitter = jitter;
    long now = clock.getAsLong();
    this.end = Math.min(deadline, Clocks.plus(now, policy.totalTimeout().toNanos()));
    this.sentAt = now;
  }

  /** Whether a failure with this status may be re-sent unchanged. */
  static boolean isRetryable(IdemdStatusException error) {
    if (error instanceof RequestTooLargeException) {
      return false;
    }
    if (RETRIED_CODES.contains(error.code())) {
      return true;
    }
    return TRANSPORT_CODES.contains(error.code()) && error.reason().isEmpty();
  }

  /**
   * The timeout of the next send, which the caller makes at once (its start becomes {@link
   * #sentAt()}); throws DEADLINE_EXCEEDED when no time is left to make one.
   */
  long nextTimeoutNanos() {
    long now = clock.getAsLong();
    long remaining = end - now;
    if (remaining <= 0) {
      throw StatusDetails.local(
          Status.Code.DEADLINE_EXCEEDED, "no time left to send the call", null);
    }
    sends++;
    sentAt = now;
    return Math.min(policy.callTimeout().toNanos() + extraTimeoutNanos, remaining);
  }

  /** When the latest send began: the instant its answer's durations count from. */
  long sentAt() {
    return sentAt;
  }

  int sends() {
    return sends;
  }

  /**
   * How long to wait before re-sending after {@code error}, in nanoseconds; throws {@code error}
   * when it is not re-sent.
   */
  long delayAfter(IdemdStatusException error) {
    if (!isRetryable(error) || sends >= policy.maxSends()) {
      throw error;
    }
    long delay = (long) jitter.applyAsDouble(policy.backoffCapNanos(sends));
    if (error.retryAfter().isPresent()) {
      delay = Math.max(delay, error.retryAfter().get().toNanos());
    }
    if (Clocks.plus(clock.getAsLong(), delay) >= end) {
      throw error;
    }
    return delay;
  }
}
