package dev.idemd.client;

import com.google.protobuf.ByteString;
import dev.idemd.idem.v1.ClaimRequest;
import dev.idemd.idem.v1.ClaimResponse;
import dev.idemd.idem.v1.CompleteRequest;
import dev.idemd.idem.v1.Completed;
import dev.idemd.idem.v1.FailDisposition;
import dev.idemd.idem.v1.FailResponse;
import dev.idemd.idem.v1.FailureReason;
import dev.idemd.idem.v1.LookupRequest;
import dev.idemd.idem.v1.LookupResponse;
import dev.idemd.idem.v1.NeedsReconciliation;
import dev.idemd.idem.v1.Operation;
import dev.idemd.idem.v1.OperationError;
import dev.idemd.idem.v1.OperationState;
import dev.idemd.idem.v1.Ownership;
import dev.idemd.idem.v1.Pending;
import dev.idemd.idem.v1.PendingReason;
import dev.idemd.idem.v1.ReconcileFirst;
import dev.idemd.idem.v1.Scope;
import java.time.Duration;
import java.util.function.Function;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

/**
 * The client protocol of {@code executeOnce}, written once for the blocking and the asynchronous
 * driver: a state machine with no I/O. {@link #start()} gives the first {@link Step}; each {@link
 * #next(Answer)} takes the answer to the last step and gives the next, until {@link Step.Finish} or
 * {@link Step.Raise}. Its inputs are the server's answers and the clock; its outputs say what to
 * send, whether to start the effect, and what the call answers.
 *
 * <ul>
 *   <li>A fresh random claim_token per attempt, re-sent unchanged (with the whole Claim) after
 *       UNAVAILABLE or a lost reply (the driver's sends do the re-sending).
 *   <li>The lease and the attempt deadline count from the start of the answered send of the Claim
 *       (or Renew); the effect never starts while the lease may be running out (it is renewed
 *       first), is renewed while it runs, and is stopped at the attempt deadline (then Fail
 *       UNKNOWN).
 *   <li>An attempt that does not start the effect (too little of the attempt left, or of the lease
 *       even after one Renew, or an earlier attempt's doubt that outlasts it) declines: Fail
 *       NOT_STARTED, which hands the operation on as it was, and claims again within the caller's
 *       deadline.
 *   <li>The effect's outcome maps to Complete / Fail TERMINAL / RETRYABLE / UNKNOWN.
 *   <li>Completed replays without running the effect; Pending waits (Claim {@code wait},
 *       retry_after); NeedsReconciliation or an outcome this client does not know never executes;
 *       LEASE_LOST looks the operation up and answers with what is stored.
 *   <li>ReconcileFirst: with a lookup, the provider is asked first; a positive answer is recorded
 *       at once, a negative one counts only if the lookup <em>started</em> at or after the earlier
 *       attempt settles. With provider deduplication declared (and no lookup) the effect runs with
 *       {@link EffectContext#previousOutcomeUnknown()} set. With neither, the effect never runs:
 *       the attempt declines and the call fails {@link OutcomeUnknownException}.
 * </ul>
 */
final class ExecuteOnceProtocol {
  /** The longest {@code wait} one Claim asks for while the operation is pending. */
  static final long MAX_CLAIM_WAIT = 20_000_000_000L;

  private static final long MS = 1_000_000L;

  /**
   * MIN_CLAIM_TIME of docs/client-protocol.md, in nanoseconds: the least time a Claim's sends get,
   * whatever is left of the caller's deadline, so that a deadline of zero means "do not wait for
   * another attempt", not "fail if idemd takes more than a moment". The same second in every
   * client; a send's own timeout (RetryPolicy.callTimeout) still caps each send.
   */
  static final long MIN_CLAIM_TIME = 1_000_000_000L;

  /** Why a ReconcileFirst without a lookup or a deduplicating provider never runs the effect. */
  static final String CANNOT_CHECK_EARLIER_ATTEMPT =
      "an earlier attempt may have taken effect and this call cannot check it: pass a lookup"
          + " (ExecuteOptions.lookup), or declare provider deduplication"
          + " (providerDeduplicates(true)) if the provider honours the key, or reconcile the"
          + " operation";

  private final String operation;
  private final String key;
  private final Payload payload;
  private final ExecuteOptions options;
  private final LongSupplier clock;
  private final Supplier<byte[]> claimTokens;

  private long end;

  /** The Claim's {@code wait} in nanoseconds, or -1 for none. */
  private long wait = -1;

  private Attempt attempt;
  private long reclaimAfter;
  private PendingReason reclaimReason = PendingReason.PENDING_REASON_RETRY_SCHEDULED;
  private Function<Answer, Step> then;
  private boolean finished;

  ExecuteOnceProtocol(
      String operation,
      String key,
      Payload payload,
      ExecuteOptions options,
      LongSupplier clock,
      Supplier<byte[]> claimTokens) {
    this.operation = operation;
    this.key = key;
    this.payload = payload;
    this.options = options;
    this.clock = clock;
    this.claimTokens = claimTokens;
  }

  /** The first step. */
  Step start() {
    end = Clocks.plus(now(), options.deadline().toNanos());
    return claim();
  }

  /** The step after {@code answer}, the answer to the last step. */
  Step next(Answer answer) {
    if (finished || then == null) {
      throw new IllegalStateException("the protocol is not waiting for an answer");
    }
    Function<Answer, Step> continuation = then;
    then = null;
    Step step = continuation.apply(answer);
    if (step instanceof Step.Finish || step instanceof Step.Raise) {
      finished = true;
    }
    return step;
  }

  private long now() {
    return clock.getAsLong();
  }

  private Step ask(Step step, Function<Answer, Step> continuation) {
    then = continuation;
    return step;
  }

  // ---- claiming ---------------------------------------------------------------------------

  private Step claim() {
    ClaimRequest.Builder request =
        ClaimRequest.newBuilder()
            .setScope(Scope.newBuilder().setOperation(operation).setKey(key))
            .setClaimToken(ByteString.copyFrom(claimTokens.get()))
            .setLease(IdemdClient.Durations.of(options.lease()))
            .setMaxAttemptDuration(IdemdClient.Durations.of(options.attemptDuration()))
            .setMaxAttempts(options.maxAttempts())
            // Every Claim of the call, not only the first: a later attempt (after a retryable
            // failure, a decline or Pending) meets the same stored fingerprint.
            .addAllPreviousFingerprints(options.previousFingerprintBytes());
    payload.setOn(request);
    if (options.retention() != null) {
      request.setRetention(IdemdClient.Durations.of(options.retention()));
    }
    if (options.operationDeadline() != null) {
      request.setOperationDeadline(IdemdClient.Durations.of(options.operationDeadline()));
    }
    if (wait >= 0) {
      request.setWait(IdemdClient.Durations.ofNanos(wait));
    }
    // The caller's deadline bounds waiting for another attempt, not one Claim: a Claim gets at
    // least one send's whole timeout (a cold channel, a loaded machine), so that a deadline of
    // zero means "do not wait", never "fail if idemd answers in more than a moment".
    long callDeadline = Math.max(end, Clocks.plus(now(), MIN_CLAIM_TIME));
    return ask(
        new Step.Send<>(Rpc.CLAIM, request.build(), callDeadline, Math.max(0, wait)),
        this::claimed);
  }

  private Step claimed(Answer answer) {
    if (answer instanceof Answer.Refused) {
      return new Step.Raise(((Answer.Refused) answer).error());
    }
    Answer.Replied replied = (Answer.Replied) answer;
    ClaimResponse response = (ClaimResponse) replied.response();
    long receivedAt = now();
    switch (response.getOutcomeCase()) {
      case ACQUIRED:
        return own(response.getAcquired().getOwnership(), null, replied.sentAt(), receivedAt);
      case RECONCILE_FIRST:
        ReconcileFirst first = response.getReconcileFirst();
        return own(first.getOwnership(), first, replied.sentAt(), receivedAt);
      case COMPLETED:
        return replayed(response.getCompleted());
      case PENDING:
        return pending(response.getPending(), replied.sentAt());
      case NEEDS_RECONCILIATION:
        NeedsReconciliation needs = response.getNeedsReconciliation();
        return new Step.Raise(
            new NeedsReconciliationException(
                needs.getOperationId(), needs.getFence(), needs.getAttempts()));
      default:
        return new Step.Raise(
            new UnrecognisedOutcomeException(
                "Claim answered an outcome this client does not know ("
                    + response.getOutcomeCase()
                    + "); nothing was executed"));
    }
  }

  private Step replayed(Completed completed) {
    if (completed.hasError() || completed.getState() == OperationState.OPERATION_STATE_FAILED) {
      return new Step.Raise(
          new OperationFailedException(completed.getOperationId(), completed.getError(), true));
    }
    dev.idemd.idem.v1.Result result = completed.getResult();
    return new Step.Finish(
        new OperationResult(
            completed.getOperationId(),
            result.getBody().toByteArray(),
            result.getContentType(),
            result.getMetadataMap(),
            completed.getAttempts(),
            true));
  }

  private Step pending(Pending pending, long sentAt) {
    long retryAfter = IdemdClient.Durations.toNanos(pending.getRetryAfter());
    long now = now();
    long remaining = end - now;
    if (remaining <= 50 * MS) {
      return new Step.Raise(
          new PendingException(
              pending.getOperationId(), Duration.ofNanos(retryAfter), pending.getReason()));
    }
    long waited = now - sentAt;
    long previousWait = wait;
    wait = Math.max(0, Math.min(MAX_CLAIM_WAIT, remaining - 50 * MS));
    if (previousWait >= 0 && waited < Math.min(50 * MS, previousWait)) {
      // The server did not wait (clamped, or too many waiters): do not spin.
      long pause = Math.min(retryAfter, Math.min(remaining, 1_000 * MS));
      return ask(new Step.Sleep(pause), done -> claim());
    }
    return claim();
  }

  // ---- an owned attempt -------------------------------------------------------------------

  private Step own(Ownership ownership, ReconcileFirst first, long sentAt, long receivedAt) {
    attempt = new Attempt(ownership, sentAt, receivedAt, options.lease(), first, clock);
    reclaimAfter = 0;
    reclaimReason = PendingReason.PENDING_REASON_RETRY_SCHEDULED;
    return ask(new Step.StartRenewing(attempt), done -> attemptBody());
  }

  /** Every way out of an attempt: renewals stop first. A null result and error: claim again. */
  private Step endAttempt(OperationResult result, Throwable error) {
    return ask(new Step.StopRenewing(attempt), done -> afterAttempt(result, error));
  }

  private Step afterAttempt(OperationResult result, Throwable error) {
    if (error != null) {
      return new Step.Raise(error);
    }
    if (result != null) {
      return new Step.Finish(result);
    }
    // Retryable, or declined before the effect: claim again for the next attempt, within the
    // caller's deadline.
    if (now() >= end) {
      return new Step.Raise(
          new PendingException(attempt.operationId, Duration.ofNanos(reclaimAfter), reclaimReason));
    }
    wait = -1;
    return claim();
  }

  private Step attemptBody() {
    if (attempt.context.previousOutcomeUnknown()) {
      if (options.hasLookup()) {
        return lookUpProvider();
      }
      if (!options.providerDeduplicates()) {
        // Running the effect again could repeat the earlier one, and nothing here can tell
        // whether it happened. NOT_STARTED hands the doubt on with the earlier attempt's
        // deadline, for a caller (or reconciler) that can check.
        return bestEffort(
            attempt.decline(),
            () ->
                endAttempt(
                    null,
                    new OutcomeUnknownException(
                        attempt.operationId, CANNOT_CHECK_EARLIER_ATTEMPT, null)));
      }
    }
    return beforeEffect();
  }

  /** The lease was lost or the attempt's time is up. */
  private Step interrupted(Attempt.Interruption why) {
    if (why == Attempt.Interruption.LOST) {
      if (!attempt.started()) {
        // Nothing ran here: another owner has the operation; claim again.
        reclaimReason = PendingReason.PENDING_REASON_IN_PROGRESS;
        return endAttempt(null, null);
      }
      return answerStored();
    }
    if (!attempt.started()) {
      return decline();
    }
    return bestEffort(
        attempt.timeUpReport(),
        () ->
            endAttempt(
                null,
                new AttemptTimeoutException(
                    attempt.operationId,
                    "the effect was cancelled at the attempt deadline; its outcome is unknown")));
  }

  private Attempt.Interruption why() {
    Attempt.Interruption why = attempt.interruption();
    return why != null ? why : Attempt.Interruption.STOPPED;
  }

  private Step lookUpProvider() {
    // Taken before the lookup starts: it may read the provider at any moment up to its
    // answer, so only its start is known to precede the read.
    long startedAt = now();
    return ask(
        new Step.Guarded(attempt, Step.Work.LOOKUP, 0),
        answer -> {
          if (answer instanceof Answer.Interrupted) {
            return interrupted(why());
          }
          if (answer instanceof Answer.Raised) {
            Throwable cause = ((Answer.Raised) answer).error();
            // Nothing ran here: hand the doubt on as it is (NOT_STARTED keeps the earlier
            // attempt's deadline), but this call cannot tell the outcome.
            return bestEffort(
                attempt.decline(),
                () ->
                    endAttempt(
                        null,
                        new OutcomeUnknownException(
                            attempt.operationId,
                            "the provider lookup failed; the earlier attempt's outcome is unknown",
                            cause)));
          }
          Object found = ((Answer.Returned) answer).value();
          if (found != null) {
            return record((Outcome) found);
          }
          if (attempt.context.previousAttemptSettledAt(startedAt)) {
            return beforeEffect();
          }
          // Nothing found proves nothing if the lookup began while the earlier attempt could
          // still run (even when it answered after that): its read may precede an effect that
          // landed before the earlier deadline.
          long settlesAt = attempt.context.previousAttemptSettlesAt();
          long now = now();
          long interval = options.lookupInterval().toNanos();
          if (settlesAt >= attempt.cancelAt && now + interval >= attempt.cancelAt) {
            // This attempt ends before the doubt does (its Claim took long enough, re-sent or
            // long-polled, to eat the gap between the two deadlines): hand the doubt on as it
            // is; the next attempt, told the earlier deadline and ending later, waits it out.
            return interrupted(Attempt.Interruption.STOPPED);
          }
          long pause = Math.max(0, Math.min(interval, settlesAt - now));
          return ask(
              new Step.Guarded(attempt, Step.Work.PAUSE, pause),
              paused ->
                  paused instanceof Answer.Interrupted ? interrupted(why()) : lookUpProvider());
        });
  }

  private Step beforeEffect() {
    // Never start the effect so close to the attempt deadline that it would be cancelled as
    // soon as it started (checked before renewing too: a Renew bounded by a deadline that is
    // all but gone fails), nor on a lease that may be running out. The lease counts from the
    // Claim's answered send, which a long-polled Claim (or the wait for an earlier attempt)
    // may have left far behind, and a re-sent Claim is answered with what was left of it by
    // then: renew it once, counted from the Renew's answered send, and decline only if too
    // little is left even then.
    long now = now();
    if (attempt.cancelAt - now < attempt.margin) {
      return decline();
    }
    if (attempt.leaseExpiresAt() - now < attempt.leaseAsked / 2) {
      return ask(attempt.renew(), this::renewedBeforeEffect);
    }
    return startEffect();
  }

  private Step renewedBeforeEffect(Answer answer) {
    if (answer instanceof Answer.Replied) {
      Answer.Replied replied = (Answer.Replied) answer;
      attempt.renewed((dev.idemd.idem.v1.RenewResponse) replied.response(), replied.sentAt());
    } else {
      IdemdStatusException error = ((Answer.Refused) answer).error();
      if (error instanceof LeaseLostException || error instanceof AttemptDeadlinePassedException) {
        attempt.markLost(error);
      } else if (!(RetryPlan.isRetryable(error) || error instanceof StateForbidsException)) {
        return endAttempt(null, error);
      }
      // Transient failures outlasted the re-sends, or STATE_FORBIDS (the lease ran out and a
      // Claim marked the attempt): the re-check below decides.
    }
    if (attempt.lost()) {
      Attempt.Interruption why = attempt.interruption();
      if (why != null) {
        return interrupted(why); // LEASE_LOST: claim again; ATTEMPT_DEADLINE_PASSED: decline
      }
    }
    long now = now();
    if (attempt.leaseExpiresAt() - now < attempt.leaseMargin
        || attempt.cancelAt - now < attempt.margin) {
      return decline();
    }
    return startEffect();
  }

  private Step startEffect() {
    attempt.markStarted();
    return ask(
        new Step.Guarded(attempt, Step.Work.EFFECT, 0),
        answer -> {
          if (answer instanceof Answer.Interrupted) {
            return interrupted(why());
          }
          Object value =
              answer instanceof Answer.Returned ? ((Answer.Returned) answer).value() : null;
          if (value instanceof Outcome) {
            return record((Outcome) value);
          }
          Throwable cause =
              answer instanceof Answer.Raised
                  ? ((Answer.Raised) answer).error()
                  : new IllegalStateException("the effect returned null instead of an Outcome");
          // The effect failed in a way nobody can tell.
          String name = cause.getClass().getSimpleName();
          return bestEffort(
              attempt.fail(
                  FailDisposition.FAIL_DISPOSITION_UNKNOWN,
                  "effect_raised",
                  name,
                  java.util.Map.of(),
                  null),
              () ->
                  endAttempt(
                      null,
                      new OutcomeUnknownException(
                          attempt.operationId,
                          "the effect raised " + name + "; its outcome is unknown",
                          cause)));
        });
  }

  // ---- recording the outcome ------------------------------------------------------------

  private Step record(Outcome outcome) {
    if (outcome instanceof Outcome.Success) {
      Outcome.Success success = (Outcome.Success) outcome;
      CompleteRequest request =
          CompleteRequest.newBuilder()
              .setOperationId(attempt.operationId)
              .setFence(attempt.fence)
              .setResult(
                  dev.idemd.idem.v1.Result.newBuilder()
                      .setBody(ByteString.copyFrom(success.body()))
                      .setContentType(success.contentType())
                      .putAllMetadata(success.metadata()))
              .build();
      return ask(
          new Step.Send<>(Rpc.COMPLETE, request, attempt.deadlineAt(), 0),
          answer ->
              recorded(
                  answer,
                  () ->
                      endAttempt(
                          new OperationResult(
                              attempt.operationId,
                              success.body(),
                              success.contentType(),
                              success.metadata(),
                              attempt.number,
                              false),
                          null)));
    }
    if (outcome instanceof Outcome.Terminal) {
      Outcome.Terminal terminal = (Outcome.Terminal) outcome;
      return ask(
          attempt.fail(
              FailDisposition.FAIL_DISPOSITION_TERMINAL,
              terminal.code(),
              terminal.message(),
              terminal.metadata(),
              null),
          answer ->
              recorded(
                  answer,
                  () ->
                      endAttempt(
                          null,
                          failed(
                              FailureReason.FAILURE_REASON_TERMINAL,
                              terminal.code(),
                              terminal.message(),
                              terminal.metadata()))));
    }
    if (outcome instanceof Outcome.Retryable) {
      Outcome.Retryable retryable = (Outcome.Retryable) outcome;
      return ask(
          attempt.fail(
              FailDisposition.FAIL_DISPOSITION_RETRYABLE,
              retryable.code(),
              retryable.message(),
              retryable.metadata(),
              retryable.retryAfter()),
          answer ->
              recorded(
                  answer,
                  () -> {
                    FailResponse response = (FailResponse) ((Answer.Replied) answer).response();
                    if (response.getState() == OperationState.OPERATION_STATE_RETRY_WAIT) {
                      reclaimAfter = IdemdClient.Durations.toNanos(response.getRetryAfter());
                      return endAttempt(null, null);
                    }
                    return endAttempt(
                        null,
                        failed(
                            response.getReason(),
                            retryable.code(),
                            retryable.message(),
                            retryable.metadata()));
                  }));
    }
    Outcome.Unknown unknown = (Outcome.Unknown) outcome;
    return bestEffort(
        attempt.fail(
            FailDisposition.FAIL_DISPOSITION_UNKNOWN,
            unknown.code(),
            unknown.message(),
            java.util.Map.of(),
            null),
        () ->
            endAttempt(
                null,
                new OutcomeUnknownException(
                    attempt.operationId, "the effect's outcome is unknown", null)));
  }

  /** The answer to an owner write that records the outcome. */
  private Step recorded(Answer answer, Supplier<Step> onReplied) {
    if (answer instanceof Answer.Replied) {
      return onReplied.get();
    }
    IdemdStatusException error = ((Answer.Refused) answer).error();
    if (error instanceof LeaseLostException) {
      return answerStored();
    }
    if (error instanceof AttemptDeadlinePassedException) {
      return endAttempt(
          null,
          new OutcomeUnknownException(
              attempt.operationId,
              "the attempt deadline passed before the outcome was recorded; a reconciler must"
                  + " settle it",
              error));
    }
    return endAttempt(null, error);
  }

  private OperationFailedException failed(
      FailureReason reason, String code, String message, java.util.Map<String, String> metadata) {
    return new OperationFailedException(
        attempt.operationId,
        OperationError.newBuilder()
            .setReason(reason)
            .setCode(code)
            .setMessage(message)
            .putAllMetadata(metadata)
            .build(),
        false);
  }

  /** Sends {@code step}, whatever its answer (the lease runs out otherwise, all the same). */
  private Step bestEffort(Step step, Supplier<Step> after) {
    return ask(step, answer -> after.get());
  }

  /**
   * The effect is not started: Fail NOT_STARTED, which hands the operation on as it was before this
   * attempt (released for the next attempt at once, or, after a takeover, still in the doubt it
   * took over, ending with that attempt's deadline). Then claim again; or, when the decline ended
   * the operation (the budget or the operation deadline is spent), answer with what is stored.
   */
  private Step decline() {
    return ask(
        attempt.decline(),
        answer -> {
          if (answer instanceof Answer.Refused) {
            IdemdStatusException error = ((Answer.Refused) answer).error();
            if (error instanceof LeaseLostException
                || error instanceof AttemptDeadlinePassedException
                || RetryPlan.isRetryable(error)) {
              // Taken over meanwhile, too late to say so, or not answered in time: nothing ran
              // here, and the next Claim learns where it stands.
              return endAttempt(null, null);
            }
            return endAttempt(null, error);
          }
          FailResponse response = (FailResponse) ((Answer.Replied) answer).response();
          if (response.getState() == OperationState.OPERATION_STATE_FAILED) {
            return answerStored();
          }
          reclaimAfter = IdemdClient.Durations.toNanos(response.getRetryAfter());
          return endAttempt(null, null);
        });
  }

  /** LEASE_LOST (or a decline that ended the operation): what is stored; never the effect. */
  private Step answerStored() {
    LookupRequest request = LookupRequest.newBuilder().setOperationId(attempt.operationId).build();
    return ask(
        new Step.Send<>(Rpc.LOOKUP, request, Clocks.plus(now(), 30_000 * MS), 0),
        answer -> {
          if (answer instanceof Answer.Refused) {
            return endAttempt(null, ((Answer.Refused) answer).error());
          }
          Operation stored = ((LookupResponse) ((Answer.Replied) answer).response()).getOperation();
          if (stored.getState() == OperationState.OPERATION_STATE_SUCCEEDED) {
            dev.idemd.idem.v1.Result result = stored.getResult();
            return endAttempt(
                new OperationResult(
                    stored.getOperationId(),
                    result.getBody().toByteArray(),
                    result.getContentType(),
                    result.getMetadataMap(),
                    stored.getAttempt(),
                    true),
                null);
          }
          if (stored.getState() == OperationState.OPERATION_STATE_FAILED) {
            return endAttempt(
                null,
                new OperationFailedException(stored.getOperationId(), stored.getError(), true));
          }
          return endAttempt(null, new SupersededException(stored));
        });
  }
}
