package dev.idemd.client;

/** What a driver hands back to the protocol for the {@link Step} it performed. */
sealed interface Answer {
  /** A {@link Step.Send} answered; {@code sentAt} is when the answered send began. */
  record Replied(Object response, long sentAt) implements Answer {}

  /** A {@link Step.Send} failed with this status (after the re-sends the policy allows). */
  record Refused(IdemdStatusException error) implements Answer {}

  /** The effect or the lookup returned {@code value} (null: the lookup found nothing). */
  record Returned(Object value) implements Answer {}

  /** The effect or the lookup threw. */
  record Raised(Throwable error) implements Answer {}

  /** The guard stopped the work: the lease was lost or the attempt's time is up. */
  record Interrupted() implements Answer {}

  /** A pause, or starting or stopping renewals, is done. */
  record Done() implements Answer {}

  Answer DONE = new Done();
  Answer INTERRUPTED = new Interrupted();
}
