package dev.idemd.client;

import java.time.Duration;
import java.util.Objects;

/**
 * How a call is re-sent after UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED or a broken
 * transport: unchanged, with exponential backoff and full jitter, never sooner than the server's
 * RetryInfo (or {@code grpc-retry-pushback-ms}) asks, within {@link #maxSends()} and {@link
 * #totalTimeout()}. Every idemd RPC is safe to re-send unchanged (a Claim keeps its claim_token;
 * owner writes are answered from their receipt). INVALID_ARGUMENT, FAILED_PRECONDITION,
 * PERMISSION_DENIED, UNAUTHENTICATED, NOT_FOUND, ABORTED and idemd's own INTERNAL are never
 * re-sent: the answer would be the same.
 */
public final class RetryPolicy {
  /** The default: 10 sends in 30 s, backoff from 50 ms doubling to 2 s, 10 s per send. */
  public static final RetryPolicy DEFAULT = builder().build();

  /** One send, no re-send. */
  public static final RetryPolicy NO_RETRY = builder().maxSends(1).build();

  private final int maxSends;
  private final Duration initialBackoff;
  private final Duration maxBackoff;
  private final double multiplier;
  private final Duration totalTimeout;
  private final Duration callTimeout;

  private RetryPolicy(Builder builder) {
    this.maxSends = builder.maxSends;
    this.initialBackoff = builder.initialBackoff;
    this.maxBackoff = builder.maxBackoff;
    this.multiplier = builder.multiplier;
    this.totalTimeout = builder.totalTimeout;
    this.callTimeout = builder.callTimeout;
  }

  public static Builder builder() {
    return new Builder();
  }

  /** Sends in all, the first included. */
  public int maxSends() {
    return maxSends;
  }

  public Duration initialBackoff() {
    return initialBackoff;
  }

  public Duration maxBackoff() {
    return maxBackoff;
  }

  public double multiplier() {
    return multiplier;
  }

  /** No re-send starts later than this after the first send. */
  public Duration totalTimeout() {
    return totalTimeout;
  }

  /** The gRPC deadline of each send (a Claim's {@code wait} is added to it). */
  public Duration callTimeout() {
    return callTimeout;
  }

  /** The backoff ceiling before re-send number {@code resend} (1-based), in nanoseconds. */
  long backoffCapNanos(int resend) {
    double cap = initialBackoff.toNanos() * Math.pow(multiplier, resend - 1);
    return (long) Math.min((double) maxBackoff.toNanos(), cap);
  }

  /** A builder for a {@link RetryPolicy}. */
  public static final class Builder {
    private int maxSends = 10;
    private Duration initialBackoff = Duration.ofMillis(50);
    private Duration maxBackoff = Duration.ofSeconds(2);
    private double multiplier = 2.0;
    private Duration totalTimeout = Duration.ofSeconds(30);
    private Duration callTimeout = Duration.ofSeconds(10);

    private Builder() {}

    public Builder maxSends(int maxSends) {
      if (maxSends < 1) {
        throw new IllegalArgumentException("maxSends must be at least 1");
      }
      this.maxSends = maxSends;
      return this;
    }

    public Builder initialBackoff(Duration initialBackoff) {
      this.initialBackoff = nonNegative(initialBackoff, "initialBackoff");
      return this;
    }

    public Builder maxBackoff(Duration maxBackoff) {
      this.maxBackoff = nonNegative(maxBackoff, "maxBackoff");
      return this;
    }

    public Builder multiplier(double multiplier) {
      if (!(multiplier >= 1.0)) {
        throw new IllegalArgumentException("multiplier must be at least 1");
      }
      this.multiplier = multiplier;
      return this;
    }

    public Builder totalTimeout(Duration totalTimeout) {
      this.totalTimeout = nonNegative(totalTimeout, "totalTimeout");
      return this;
    }

    public Builder callTimeout(Duration callTimeout) {
      this.callTimeout = nonNegative(callTimeout, "callTimeout");
      return this;
    }

    public RetryPolicy build() {
      return new RetryPolicy(this);
    }

    private static Duration nonNegative(Duration value, String name) {
      Objects.requireNonNull(value, name);
      if (value.isNegative()) {
        throw new IllegalArgumentException(name + " must not be negative");
      }
      return value;
    }
  }
}
