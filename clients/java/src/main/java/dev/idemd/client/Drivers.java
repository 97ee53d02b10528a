package dev.idemd.client;

import com.google.protobuf.Message;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/** What both drivers of the protocol share: sends, and running an attempt's renewals. */
final class Drivers {
  private Drivers() {}

  /** Performs a {@link Step.Send}: its answer, never a failed future. */
  static <Q extends Message, R extends Message> CompletableFuture<Answer> send(
      IdemdClient client, Step.Send<Q, R> send) {
    CompletableFuture<Answered<R>> sent;
    try {
      sent = client.send(send.rpc(), send.request(), send.deadline(), send.extraTimeoutNanos());
    } catch (RuntimeException failed) {
      return CompletableFuture.completedFuture(new Answer.Refused(asStatus(failed)));
    }
    return sent.handle(
        (answered, failure) ->
            failure == null
                ? new Answer.Replied(answered.response(), answered.sentAt())
                : new Answer.Refused(asStatus(unwrap(failure))));
  }

  static Throwable unwrap(Throwable failure) {
    Throwable cause = failure;
    while ((cause instanceof CompletionException || cause instanceof ExecutionException)
        && cause.getCause() != null) {
      cause = cause.getCause();
    }
    return cause;
  }

  private static IdemdStatusException asStatus(Throwable failure) {
    if (failure instanceof IdemdStatusException) {
      return (IdemdStatusException) failure;
    }
    return StatusDetails.exceptionOf(failure);
  }

  /**
   * Runs {@link Renewals} of one attempt on the client's timer and its asynchronous sends (no
   * thread of its own), until stopped or done.
   */
  static final class RenewalRunner {
    private final IdemdClient client;
    private final Renewals renewals;
    private boolean stopped;
    private ScheduledFuture<?> pause;

    RenewalRunner(IdemdClient client, Attempt attempt) {
      this.client = client;
      this.renewals = new Renewals(attempt);
    }

    void start() {
      advance(renewals.start());
    }

    synchronized void stop() {
      stopped = true;
      if (pause != null) {
        pause.cancel(false);
      }
    }

    private synchronized void advance(Step step) {
      if (stopped || step instanceof Step.Finish) {
        return;
      }
      if (step instanceof Step.Sleep) {
        try {
          pause =
              client
                  .scheduler()
                  .schedule(
                      () -> resume(Answer.DONE), ((Step.Sleep) step).nanos(), TimeUnit.NANOSECONDS);
        } catch (java.util.concurrent.RejectedExecutionException closed) {
          stopped = true; // the client was closed under it: the lease lapses
        }
        return;
      }
      send(client, (Step.Send<?, ?>) step).thenAccept(this::resume);
    }

    private void resume(Answer answer) {
      Step next;
      synchronized (this) {
        if (stopped) {
          return;
        }
        next = renewals.next(answer);
      }
      advance(next);
    }
  }
}
