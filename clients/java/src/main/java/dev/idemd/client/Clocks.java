package dev.idemd.client;

import java.util.function.LongSupplier;

/**
 * The monotonic clock of this library: nanoseconds since the class was loaded, so that instants are
 * small positive numbers that compare with {@code <} and {@link Long#MAX_VALUE} can stand for "no
 * deadline". Protocol code takes a {@link LongSupplier} of such instants, so tests (and shared
 * protocol vectors) can drive it with a clock of their own.
 */
final class Clocks {
  private static final long ORIGIN = System.nanoTime();

  /** The system's monotonic clock ({@link System#nanoTime()}), from this library's origin. */
  static final LongSupplier SYSTEM = () -> System.nanoTime() - ORIGIN;

  private Clocks() {}

  /** {@code instant + nanos}, saturating at {@link Long#MAX_VALUE} (no deadline stays none). */
  static long plus(long instant, long nanos) {
    long sum = instant + nanos;
    if (nanos > 0 && sum < instant) {
      return Long.MAX_VALUE;
    }
    return sum;
  }

  static long seconds(double seconds) {
    return (long) (seconds * 1e9);
  }
}
