package dev.idemd.client;

import dev.idemd.idem.v1.RenewResponse;

/**
 * An attempt's lease renewals, run alongside its effect: renew when a third of the lease is gone,
 * until the lease reaches the attempt deadline (Renew cannot extend it further) or is lost. A state
 * machine like {@link ExecuteOnceProtocol}: {@link #start()}, then {@link #next(Answer)} with the
 * answer to each step, until {@link Step.Finish}.
 */
final class Renewals {
  private final Attempt attempt;
  private boolean sending;

  Renewals(Attempt attempt) {
    this.attempt = attempt;
  }

  Step start() {
    return due();
  }

  Step next(Answer answer) {
    if (!sending) {
      sending = true;
      return attempt.renew(); // the pause is over
    }
    sending = false;
    if (answer instanceof Answer.Replied) {
      Answer.Replied replied = (Answer.Replied) answer;
      attempt.renewed((RenewResponse) replied.response(), replied.sentAt());
      return due();
    }
    IdemdStatusException error = ((Answer.Refused) answer).error();
    if (error instanceof LeaseLostException || error instanceof AttemptDeadlinePassedException) {
      attempt.markLost(error);
      return new Step.Finish(null);
    }
    if (error instanceof StateForbidsException) {
      // Marked UNKNOWN by a Claim: no renewals, but the owner's writes are still allowed.
      return new Step.Finish(null);
    }
    // Transient failures outlasted the retry policy: try again shortly. The lease may lapse,
    // in which case a new owner reconciles first.
    long granted = attempt.granted();
    return pause(Math.min(1_000_000_000L, Math.max(50_000_000L, granted / 10)));
  }

  private Step due() {
    if (attempt.lost() || attempt.leaseExpiresAt() >= attempt.deadlineAt() - 1_000_000L) {
      return new Step.Finish(null);
    }
    long due = attempt.leaseExpiresAt() - attempt.granted() * 2 / 3;
    return pause(Math.max(0, due - attempt.now()));
  }

  private Step pause(long nanos) {
    return new Step.Sleep(nanos);
  }
}
