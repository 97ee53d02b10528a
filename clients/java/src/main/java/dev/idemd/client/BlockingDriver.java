package dev.idemd.client;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * Performs {@link ExecuteOnceProtocol}'s steps on the calling thread: the effect runs there (its
 * thread-locals, transactions and connections are the caller's), the lease is renewed on the
 * client's timer meanwhile, and a watchdog stops the effect at the attempt deadline: it tells idemd
 * UNKNOWN at once (as the asynchronous driver does when it cancels), marks the context cancelled
 * and interrupts the thread; whatever the effect returns after that is never recorded.
 */
final class BlockingDriver {
  private final IdemdClient client;
  private final Effect effect;
  private final ExecuteOptions options;
  private final Map<Attempt, Drivers.RenewalRunner> renewals = new HashMap<>();

  BlockingDriver(IdemdClient client, Effect effect, ExecuteOptions options) {
    this.client = client;
    this.effect = effect;
    this.options = options;
  }

  OperationResult run(ExecuteOnceProtocol protocol) throws ExecuteOnceException {
    try {
      Step step = protocol.start();
      while (true) {
        if (step instanceof Step.Finish) {
          return ((Step.Finish) step).result();
        }
        if (step instanceof Step.Raise) {
          Throwable error = ((Step.Raise) step).error();
          if (error instanceof ExecuteOnceException) {
            throw (ExecuteOnceException) error;
          }
          throw IdemdClient.rethrow(error);
        }
        step = protocol.next(perform(step));
      }
    } finally {
      renewals.values().forEach(Drivers.RenewalRunner::stop);
    }
  }

  private Answer perform(Step step) {
    if (step instanceof Step.Send) {
      return IdemdClient.await(Drivers.send(client, (Step.Send<?, ?>) step));
    }
    if (step instanceof Step.Sleep) {
      sleep(((Step.Sleep) step).nanos());
      return Answer.DONE;
    }
    if (step instanceof Step.Guarded) {
      return guarded((Step.Guarded) step);
    }
    if (step instanceof Step.StartRenewing) {
      Attempt attempt = ((Step.StartRenewing) step).attempt();
      Drivers.RenewalRunner runner = new Drivers.RenewalRunner(client, attempt);
      renewals.put(attempt, runner);
      runner.start();
      return Answer.DONE;
    }
    if (step instanceof Step.StopRenewing) {
      Drivers.RenewalRunner runner = renewals.remove(((Step.StopRenewing) step).attempt());
      if (runner != null) {
        runner.stop();
      }
      return Answer.DONE;
    }
    throw new IllegalStateException("not a step to perform: " + step);
  }

  private static void sleep(long nanos) {
    try {
      TimeUnit.NANOSECONDS.sleep(nanos);
    } catch (InterruptedException interrupted) {
      Thread.currentThread().interrupt();
      throw StatusDetails.local(
          io.grpc.Status.Code.CANCELLED, "interrupted while waiting to claim", interrupted);
    }
  }

  private Answer guarded(Step.Guarded step) {
    Attempt attempt = step.attempt();
    if (attempt.interruption() != null) {
      return Answer.INTERRUPTED;
    }
    if (step.work() == Step.Work.PAUSE) {
      long pause = Math.min(step.nanos(), attempt.cancelAt - attempt.now());
      try {
        attempt.context.awaitCancelled(pause);
      } catch (InterruptedException interrupted) {
        Thread.currentThread().interrupt();
        attempt.markTimedOut(); // the caller gave up: nothing started, so the attempt declines
      }
      return attempt.interruption() != null ? Answer.INTERRUPTED : Answer.DONE;
    }
    Guard guard = new Guard(Thread.currentThread());
    attempt.onLost(guard::stop);
    ScheduledFuture<?> watchdog;
    try {
      watchdog =
          client
              .scheduler()
              .schedule(
                  () -> timeIsUp(attempt, guard),
                  Math.max(0, attempt.cancelAt - attempt.now()),
                  TimeUnit.NANOSECONDS);
    } catch (RejectedExecutionException closed) {
      attempt.onLost(null);
      throw new IllegalStateException("the idemd client is closed", closed);
    }
    Object value = null;
    Exception raised = null;
    try {
      value = step.work() == Step.Work.EFFECT ? effect.run(attempt.context) : lookUp(attempt);
    } catch (Exception failed) {
      raised = failed;
    } finally {
      watchdog.cancel(false);
      attempt.onLost(null);
      guard.finish();
    }
    if (attempt.interruption() != null) {
      return Answer.INTERRUPTED;
    }
    return raised != null ? new Answer.Raised(raised) : new Answer.Returned(value);
  }

  private Object lookUp(Attempt attempt) throws Exception {
    if (options.lookup() != null) {
      return options.lookup().lookup(attempt.context);
    }
    return options.asyncLookup().lookup(attempt.context).toCompletableFuture().get();
  }

  /**
   * The watchdog, at the attempt's cancel point while the effect (or the lookup) still runs: report
   * now, while idemd still accepts this owner's write (UNKNOWN for the effect, NOT_STARTED for a
   * lookup), and stop the work. The protocol sends the same report again once it returns, answered
   * from this one's receipt.
   */
  private void timeIsUp(Attempt attempt, Guard guard) {
    if (attempt.lost()) {
      return;
    }
    attempt.markTimedOut();
    Drivers.send(client, attempt.timeUpReport()); // best effort, not awaited on the timer
    guard.stop();
  }

  /** Interrupts the effect's thread at most once, and only while the effect runs. */
  private static final class Guard {
    private final Thread thread;
    private boolean finished;
    private boolean interrupted;

    Guard(Thread thread) {
      this.thread = thread;
    }

    synchronized void stop() {
      if (!finished && !interrupted) {
        interrupted = true;
        thread.interrupt();
      }
    }

    /** The work returned: clear an interrupt of ours, so the protocol's calls can go on. */
    synchronized void finish() {
      finished = true;
      if (interrupted) {
        Thread.interrupted();
      }
    }
  }
}
