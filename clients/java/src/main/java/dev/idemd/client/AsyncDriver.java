package dev.idemd.client;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * Performs {@link ExecuteOnceProtocol}'s steps without blocking a thread: sends are gRPC's
 * asynchronous calls, pauses and the attempt deadline are the client's timer, the effect is an
 * {@link AsyncEffect} whose stage is cancelled when the lease is lost or the attempt's time is up
 * (then {@link EffectContext#cancelled()} completes too).
 */
final class AsyncDriver {
  private final IdemdClient client;
  private final AsyncEffect effect;
  private final ExecuteOptions options;
  private final Executor blockingLookups;
  private final Map<Attempt, Drivers.RenewalRunner> renewals = new HashMap<>();
  private final CompletableFuture<OperationResult> result = new CompletableFuture<>();
  private ExecuteOnceProtocol protocol;

  AsyncDriver(
      IdemdClient client, AsyncEffect effect, ExecuteOptions options, Executor blockingLookups) {
    this.client = client;
    this.effect = effect;
    this.options = options;
    this.blockingLookups = blockingLookups;
  }

  CompletableFuture<OperationResult> run(ExecuteOnceProtocol protocol) {
    this.protocol = protocol;
    try {
      advance(protocol.start());
    } catch (RuntimeException | Error failed) {
      finish(null, failed);
    }
    return result;
  }

  /** Performs steps until one is not done at once; its completion resumes here. */
  private void advance(Step first) {
    Step step = first;
    while (true) {
      if (step instanceof Step.Finish) {
        finish(((Step.Finish) step).result(), null);
        return;
      }
      if (step instanceof Step.Raise) {
        finish(null, ((Step.Raise) step).error());
        return;
      }
      CompletableFuture<Answer> answer = perform(step);
      if (!answer.isDone() || answer.isCompletedExceptionally()) {
        answer.whenComplete(
            (value, failure) -> {
              if (failure != null) {
                finish(null, Drivers.unwrap(failure)); // the client was closed under the call
              } else {
                resume(value);
              }
            });
        return;
      }
      step = protocol.next(answer.join());
    }
  }

  private void resume(Answer answer) {
    try {
      advance(protocol.next(answer));
    } catch (RuntimeException | Error failed) {
      finish(null, failed);
    }
  }

  private void finish(OperationResult value, Throwable error) {
    synchronized (renewals) {
      renewals.values().forEach(Drivers.RenewalRunner::stop);
      renewals.clear();
    }
    if (error != null) {
      result.completeExceptionally(error);
    } else {
      result.complete(value);
    }
  }

  private CompletableFuture<Answer> perform(Step step) {
    if (step instanceof Step.Send) {
      return Drivers.send(client, (Step.Send<?, ?>) step);
    }
    if (step instanceof Step.Sleep) {
      return delay(((Step.Sleep) step).nanos());
    }
    if (step instanceof Step.Guarded) {
      return guarded((Step.Guarded) step);
    }
    if (step instanceof Step.StartRenewing) {
      Attempt attempt = ((Step.StartRenewing) step).attempt();
      Drivers.RenewalRunner runner = new Drivers.RenewalRunner(client, attempt);
      synchronized (renewals) {
        renewals.put(attempt, runner);
      }
      runner.start();
      return CompletableFuture.completedFuture(Answer.DONE);
    }
    if (step instanceof Step.StopRenewing) {
      Drivers.RenewalRunner runner;
      synchronized (renewals) {
        runner = renewals.remove(((Step.StopRenewing) step).attempt());
      }
      if (runner != null) {
        runner.stop();
      }
      return CompletableFuture.completedFuture(Answer.DONE);
    }
    throw new IllegalStateException("not a step to perform: " + step);
  }

  private CompletableFuture<Answer> delay(long nanos) {
    CompletableFuture<Answer> done = new CompletableFuture<>();
    try {
      client.scheduler().schedule(() -> done.complete(Answer.DONE), nanos, TimeUnit.NANOSECONDS);
    } catch (RejectedExecutionException closed) {
      done.completeExceptionally(new IllegalStateException("the idemd client is closed", closed));
    }
    return done;
  }

  private CompletableFuture<Answer> guarded(Step.Guarded step) {
    Attempt attempt = step.attempt();
    if (attempt.interruption() != null) {
      return CompletableFuture.completedFuture(Answer.INTERRUPTED);
    }
    CompletableFuture<Answer> answer = new CompletableFuture<>();
    CompletableFuture<?> work = start(step, attempt);
    ScheduledFuture<?> timer;
    long untilCancel = Math.max(0, attempt.cancelAt - attempt.now());
    try {
      timer =
          client
              .scheduler()
              .schedule(
                  () -> {
                    attempt.markTimedOut();
                    answer.complete(Answer.INTERRUPTED);
                  },
                  untilCancel,
                  TimeUnit.NANOSECONDS);
    } catch (RejectedExecutionException closed) {
      work.cancel(true);
      return CompletableFuture.failedFuture(
          new IllegalStateException("the idemd client is closed", closed));
    }
    attempt.onLost(() -> answer.complete(Answer.INTERRUPTED));
    if (attempt.lost()) {
      answer.complete(Answer.INTERRUPTED); // lost before the listener was in place
    }
    work.whenComplete(
        (value, failure) ->
            answer.complete(
                step.work() == Step.Work.PAUSE
                    ? (attempt.interruption() != null ? Answer.INTERRUPTED : Answer.DONE)
                    : failure == null
                        ? new Answer.Returned(value)
                        : new Answer.Raised(Drivers.unwrap(failure))));
    return answer.whenComplete(
        (done, failure) -> {
          timer.cancel(false);
          attempt.onLost(null);
          if (done instanceof Answer.Interrupted) {
            work.cancel(true);
          }
        });
  }

  private CompletableFuture<?> start(Step.Guarded step, Attempt attempt) {
    try {
      switch (step.work()) {
        case EFFECT:
          return effect.run(attempt.context).toCompletableFuture();
        case LOOKUP:
          if (options.asyncLookup() != null) {
            return options.asyncLookup().lookup(attempt.context).toCompletableFuture();
          }
          ProviderLookup lookup = options.lookup();
          return CompletableFuture.supplyAsync(
              () -> {
                try {
                  return lookup.lookup(attempt.context);
                } catch (Exception failed) {
                  throw new java.util.concurrent.CompletionException(failed);
                }
              },
              blockingLookups);
        default:
          CompletableFuture<Object> pause = new CompletableFuture<>();
          long nanos = Math.min(step.nanos(), Math.max(0, attempt.cancelAt - attempt.now()));
          client.scheduler().schedule(() -> pause.complete(null), nanos, TimeUnit.NANOSECONDS);
          attempt.context.cancelled().thenRun(() -> pause.complete(null));
          return pause;
      }
    } catch (RuntimeException thrown) {
      return CompletableFuture.failedFuture(thrown);
    }
  }
}
