/**
 * The client protocol of executeOnce (docs/client-protocol.md), as a core that performs
 * no I/O: a generator that yields the steps it needs (a send, a pause, running the
 * effect or the lookup under the attempt's guard, starting and stopping the lease's
 * renewals) and is handed each step's answer back, or has its error thrown in.
 * execute.ts drives it with the client, timers and AbortSignals; the shared protocol
 * vectors (testdata/protocol/) drive it with a scripted world and clock. The decisions
 * are the Python client's (clients/python/src/idemd/protocol.py, the reference):
 *
 * - A fresh random claim_token per attempt, re-sent unchanged (with the whole Claim)
 *   after UNAVAILABLE or a lost reply (the client's retry layer does the re-sends).
 * - The lease and the attempt deadline count from the start of the send of the Claim
 *   (or Renew) that was answered. The effect is never started while the lease may be
 *   running out (it is renewed first, once) nor with too little of the attempt or the
 *   lease left: the attempt declines instead (Fail NOT_STARTED) and claims again
 *   within `deadline`. Once started, the effect is renewed while it runs and aborted
 *   (`ctx.signal`) at the attempt deadline, then Fail UNKNOWN.
 * - The effect's outcome maps to Complete / Fail TERMINAL / RETRYABLE / UNKNOWN.
 * - Completed replays without running the effect; Pending waits (Claim `wait`,
 *   retry_after); NeedsReconciliation or an outcome this client does not know never
 *   executes; LEASE_LOST looks the operation up and answers with what is stored, never
 *   redoing the effect.
 * - ReconcileFirst: with a `lookup` the provider is asked first; a positive answer is
 *   recorded at once, a negative one counts only if that lookup was started once the
 *   earlier attempt had settled (previous_attempt_deadline, counted from the reply;
 *   when the server leaves it out, a whole attempt duration from the reply). An attempt
 *   that ends before the doubt does declines once no further lookup could start before
 *   its cancel point (NOT_STARTED hands the doubt on with the earlier deadline). With
 *   `providerDeduplicates` (and no lookup) the effect runs with
 *   `ctx.previousOutcomeUnknown` set. With neither, or when the lookup throws, nothing
 *   runs: the attempt declines and the call throws OutcomeUnknownError.
 *
 * Times are seconds; instants are readings of the clock the core is given.
 */
import {
  AttemptDeadlinePassedError, AttemptTimeoutError, IdemError, LeaseLostError, NeedsReconciliationError,
  OperationFailedError, OutcomeUnknownError, PendingError, StateForbidsError, StatusError, SupersededError,
  UnrecognisedOutcomeError,
} from "./errors.js";
import { type EffectContext, type Outcome, type Result, Retryable, Success, Terminal, Unknown } from "./outcome.js";
import { seconds } from "./proto.js";
import { claimRequest } from "./requests.js";
import { isRetryable } from "./retry.js";
import type * as pb from "./types.js";

// The protocol's constants (docs/client-protocol.md, "The constants"), the same in
// every idemd client.

/** The longest `wait` one Claim asks for while the operation is pending. */
export const MAX_CLAIM_WAIT = 20;
/** With this little (or less) of the caller's deadline left, Pending is final; the
 *  `wait` asked for is what is left less this. */
export const PENDING_SLACK = 0.05;
/** A Claim's sends get at least this long, whatever is left of the caller's deadline. */
export const MIN_CLAIM_TIME = 1;
/** The longest pause before a Claim after a Pending the server did not wait on. */
export const NO_SPIN_PAUSE = 1;

/** Why a ReconcileFirst without a lookup or a deduplicating provider runs nothing. */
export const UNCHECKABLE =
  "an earlier attempt may have taken effect and this call cannot check it: pass a lookup, "
  + "or declare provider deduplication (providerDeduplicates: true) if the provider honours the key, "
  + "or reconcile the operation";

/** What an attempt stopped at its deadline reports (Fail UNKNOWN). */
const ATTEMPT_DEADLINE_REPORT = ["attempt_deadline", "the effect was cancelled at the attempt deadline"] as const;
/** What an attempt that never started the effect reports (Fail NOT_STARTED). */
const NOT_STARTED_REPORT = [
  "not_started",
  "the effect was not started: too little of the lease or attempt was left, or an earlier attempt may still be running",
] as const;

/** (the server's previous_attempt_deadline, the instant it ends), counted from the
 *  Claim's reply (`receivedAt`), the late end: the server counts it at its reply's
 *  clock, which for a long-polled or re-sent Claim is long after the send. Absent, the
 *  earlier attempt may have started just before this Claim was answered, so it may run
 *  a whole attempt duration from then. */
export function previousAttemptSettlesAt(
  outcome: pb.ReconcileFirst,
  receivedAt: number,
): [number | undefined, number] {
  if (outcome.previous_attempt_deadline) {
    const given = seconds(outcome.previous_attempt_deadline);
    return [given, receivedAt + given];
  }
  return [undefined, receivedAt + seconds(outcome.ownership?.attempt_deadline)];
}

// ---- the steps a driver performs ----------------------------------------------------

/** Call the client's method with these arguments (re-sent as its retry layer decides):
 *  its answer is handed back, its StatusError thrown in. sendClaim and sendRenew answer
 *  [response, the instant the answered send began]. */
export class Call {
  constructor(
    readonly method: "sendClaim" | "sendRenew" | "complete" | "fail" | "lookup",
    readonly args: unknown[],
  ) {}
}

/** Pause outside an attempt. */
export class Sleep {
  constructor(readonly seconds: number) {}
}

/** Run the effect, the provider lookup, or a pause (`seconds`) within the attempt: its
 *  answer (or error) is handed back; when the lease is lost or the attempt's time is up
 *  first, `attempt.interruption()` (or Stopped) is thrown in instead. */
export class Guarded {
  constructor(
    readonly attempt: Attempt,
    readonly what: "effect" | "lookup" | "sleep",
    readonly seconds = 0,
  ) {}
}

/** Run `attempt.keepRenewing()` alongside, until StopRenewing. */
export class StartRenewing {
  constructor(readonly attempt: Attempt) {}
}

export class StopRenewing {
  constructor(readonly attempt: Attempt) {}
}

export type Step = Call | Sleep | Guarded | StartRenewing | StopRenewing;
export type Steps<T> = Generator<Step, T, unknown>;

/** Thrown into an attempt when its fence was refused (another owner took over). */
export class Lost extends Error {}
/** Thrown into an attempt when its time is up: before the effect started, it declines
 *  (Fail NOT_STARTED); after, the effect is given up (Fail UNKNOWN). */
export class Stopped extends Error {}

export interface ProtocolOptions {
  lease: number;
  attemptDuration: number;
  deadline: number;
  hasLookup: boolean;
  providerDeduplicates: boolean;
  lookupInterval: number;
  maxAttempts: number;
  retention?: number | undefined;
  operationDeadline?: number | undefined;
  /** Sent in every Claim (docs/api.md, "Changing the normalisation while operations are
   *  in flight"); empty outside a migration window. */
  previousFingerprints?: readonly Uint8Array[] | undefined;
  /** The monotonic clock, seconds. */
  clock: () => number;
  newClaimToken: () => Uint8Array;
}

export type RequestIdentity = { jsonPayload: string } | { bytesPayload: Uint8Array } | { fingerprint: Uint8Array };

function emptyError(): pb.OperationError {
  return { reason: "FAILURE_REASON_UNSPECIFIED", code: "", message: "", metadata: {} };
}

function replayed(completed: pb.Completed): Result {
  if (completed.outcome === "error" || completed.state === "OPERATION_STATE_FAILED") {
    throw new OperationFailedError(completed.operation_id, completed.error ?? emptyError(), true);
  }
  return {
    operationId: completed.operation_id,
    body: Buffer.from(completed.result?.body ?? new Uint8Array()),
    contentType: completed.result?.content_type ?? "",
    metadata: { ...(completed.result?.metadata ?? {}) },
    attempts: completed.attempts,
    replayed: true,
  };
}

/** The whole of executeOnce (execute.ts). */
export function* executeOnceSteps(
  operation: string,
  key: string,
  identity: RequestIdentity,
  options: ProtocolOptions,
): Steps<Result> {
  const clock = options.clock;
  const end = clock() + options.deadline;
  let wait: number | undefined;
  for (;;) {
    const request = claimRequest(operation, key, {
      ...identity,
      claimToken: options.newClaimToken(),
      lease: options.lease,
      maxAttemptDuration: options.attemptDuration,
      maxAttempts: options.maxAttempts,
      ...(options.retention !== undefined ? { retention: options.retention } : {}),
      ...(options.operationDeadline !== undefined ? { operationDeadline: options.operationDeadline } : {}),
      ...(wait !== undefined ? { wait } : {}),
      ...(options.previousFingerprints !== undefined ? { previousFingerprints: options.previousFingerprints } : {}),
    });
    const [response, sentAt] = (yield new Call("sendClaim", [
      request,
      { deadline: Math.max(end, clock() + MIN_CLAIM_TIME) },
    ])) as [pb.ClaimResponse, number];
    const receivedAt = clock();
    const outcome = response.outcome;
    const first = outcome === "reconcile_first" ? (response.reconcile_first ?? undefined) : undefined;
    const ownership = outcome === "acquired" ? response.acquired?.ownership : first?.ownership;
    if ((outcome === "acquired" || outcome === "reconcile_first") && ownership) {
      const attempt = new Attempt(ownership, [sentAt, receivedAt], first, options);
      const result = yield* attempt.run();
      if (result !== undefined) return result;
      // Retryable, or declined before the effect: claim again for the next attempt,
      // within the caller's deadline.
      if (clock() >= end) {
        throw new PendingError(attempt.operationId, attempt.reclaimAfter, attempt.reclaimReason);
      }
      wait = undefined;
    } else if (outcome === "completed" && response.completed) {
      return replayed(response.completed);
    } else if (outcome === "pending" && response.pending) {
      const pending = response.pending;
      const retryAfter = seconds(pending.retry_after);
      const remaining = end - clock();
      if (remaining <= PENDING_SLACK) throw new PendingError(pending.operation_id, retryAfter, String(pending.reason));
      const waited = clock() - sentAt;
      if (wait !== undefined && waited < Math.min(PENDING_SLACK, wait)) {
        // The server did not wait (clamped): do not spin.
        yield new Sleep(Math.min(retryAfter, remaining, NO_SPIN_PAUSE));
      }
      wait = Math.max(0, Math.min(MAX_CLAIM_WAIT, remaining - PENDING_SLACK));
    } else if (outcome === "needs_reconciliation" && response.needs_reconciliation) {
      const needs = response.needs_reconciliation;
      throw new NeedsReconciliationError(needs.operation_id, needs.fence, needs.attempts);
    } else {
      throw new UnrecognisedOutcomeError(`Claim answered ${JSON.stringify(outcome)}; nothing was executed`);
    }
  }
}

/** One owned attempt: renews the lease, runs the effect within the deadline and the
 *  lease, records the outcome. Its state is shared with the renewals, which run
 *  alongside (each field is written whole). */
export class Attempt {
  readonly operationId: string;
  readonly fence: string;
  readonly attempt: number;
  readonly lease: number;
  granted: number;
  leaseExpiresAt: number;
  deadlineAt: number;
  /** Room left before the deadline to stop the effect and report it; the effect is
   *  not started with less than this of the attempt left. */
  readonly margin: number;
  /** The effect is not started with less than this of the lease left, even after a
   *  Renew: judged against the lease asked for, not the one granted (a re-sent Claim
   *  is granted only what was left of it, and half of a remnant is no margin). */
  readonly leaseMargin: number;
  readonly cancelAt: number;
  readonly ctx: EffectContext;
  /** Set just before the effect starts: until then nothing ran, and an attempt that
   *  cannot go on declines (Fail NOT_STARTED) instead of reporting UNKNOWN. */
  started = false;
  /** When run() answers undefined (claim again): when the next attempt is due, and
   *  why, should the caller's deadline pass first. */
  reclaimAfter = 0;
  reclaimReason = "PENDING_REASON_RETRY_SCHEDULED";
  lost = false;
  lostError: StatusError | undefined;
  /** Set by a driver whose guard saw the attempt's time run out. */
  timedOut = false;
  /** The driver's hook, called once when the lease is lost (wakes the guard). */
  notifyLost: () => void = () => undefined;
  /** Aborted when the effect must stop (ctx.signal): the driver aborts it when its
   *  guard stops the work, the core when a Renew is refused. */
  readonly cancel = new AbortController();
  private readonly clock: () => number;
  private readonly hasLookup: boolean;
  private readonly providerDeduplicates: boolean;
  private readonly lookupInterval: number;

  /** `sentAt`: when the Claim's answered send began (the lease and the attempt
   *  deadline count from it); `receivedAt`: when its reply came (the earlier
   *  attempt's deadline counts from it). */
  constructor(
    ownership: pb.Ownership,
    [sentAt, receivedAt]: [number, number],
    reconcileFirst: pb.ReconcileFirst | undefined,
    options: ProtocolOptions,
  ) {
    this.clock = options.clock;
    this.operationId = ownership.operation_id;
    this.fence = ownership.fence;
    this.attempt = ownership.attempt;
    this.lease = options.lease;
    this.granted = seconds(ownership.lease);
    this.leaseExpiresAt = sentAt + this.granted;
    const duration = seconds(ownership.attempt_deadline);
    this.deadlineAt = sentAt + duration;
    this.margin = Math.max(0.05, Math.min(1, duration / 10));
    this.leaseMargin = Math.min(this.margin, this.lease / 3);
    this.cancelAt = this.deadlineAt - this.margin;
    this.hasLookup = options.hasLookup;
    this.providerDeduplicates = options.providerDeduplicates;
    this.lookupInterval = options.lookupInterval;
    let given: number | undefined;
    let settlesAt: number | undefined;
    if (reconcileFirst !== undefined) [given, settlesAt] = previousAttemptSettlesAt(reconcileFirst, receivedAt);
    const clock = this.clock;
    this.ctx = {
      operationId: ownership.operation_id,
      fence: ownership.fence,
      attempt: ownership.attempt,
      maxAttempts: ownership.max_attempts,
      previousOutcomeUnknown: reconcileFirst !== undefined,
      previousFence: reconcileFirst?.previous_fence,
      previousAttemptDeadline: given,
      previousAttemptSettlesAt: settlesAt,
      cancelAt: this.cancelAt,
      signal: this.cancel.signal,
      previousAttemptSettled: () => settlesAt === undefined || clock() >= settlesAt,
    };
  }

  /** Why the attempt must stop now, if it must. */
  interruption(): Lost | Stopped | undefined {
    if (this.lost) {
      if (this.lostError instanceof AttemptDeadlinePassedError) return new Stopped(); // nobody took over: time is up
      return new Lost();
    }
    if (this.timedOut || this.clock() >= this.cancelAt) return new Stopped();
    return undefined;
  }

  // ---- the lease ---------------------------------------------------------------

  /** Renews once (re-sent after transient failures); a refusal marks the lease lost. */
  *renew(): Steps<void> {
    let response: pb.RenewResponse;
    let sentAt: number;
    try {
      [response, sentAt] = (yield new Call("sendRenew", [
        this.operationId,
        this.fence,
        { lease: this.lease, deadline: this.cancelAt },
      ])) as [pb.RenewResponse, number];
    } catch (error) {
      if (error instanceof LeaseLostError || error instanceof AttemptDeadlinePassedError) {
        this.lostError = error;
        this.lost = true;
        this.cancel.abort();
        this.notifyLost();
        return;
      }
      throw error;
    }
    this.granted = seconds(response.lease);
    this.leaseExpiresAt = sentAt + this.granted;
    this.deadlineAt = Math.min(this.deadlineAt, sentAt + seconds(response.attempt_deadline));
  }

  /** A third into each grant, until the lease is lost or reaches the attempt deadline
   *  (Renew cannot extend it further). */
  *keepRenewing(): Steps<void> {
    while (!this.lost && this.leaseExpiresAt < this.deadlineAt - 0.001) {
      const due = this.leaseExpiresAt - (this.granted * 2) / 3;
      yield new Sleep(Math.max(0, due - this.clock()));
      try {
        yield* this.renew();
      } catch (error) {
        if (error instanceof StateForbidsError) return; // marked UNKNOWN by a Claim: writes still allowed
        if (!(error instanceof StatusError)) throw error;
        // Transient failures outlasted the retry policy: try again shortly; the lease
        // may lapse, in which case a new owner reconciles first.
        yield new Sleep(Math.min(1, Math.max(0.05, this.granted / 10)));
      }
    }
  }

  // ---- the attempt -------------------------------------------------------------

  /** The attempt's answer, or undefined when a retry was scheduled or the attempt
   *  declined before the effect (claim again). */
  *run(): Steps<Result | undefined> {
    yield new StartRenewing(this);
    try {
      return yield* this.body();
    } catch (error) {
      if (error instanceof Lost) {
        if (!this.started) {
          // Nothing ran here: another owner has the operation; claim again.
          this.reclaimReason = "PENDING_REASON_IN_PROGRESS";
          return undefined;
        }
        return yield* this.answerStored();
      }
      if (error instanceof Stopped) {
        if (!this.started) return yield* this.decline();
        yield* this.failUnknown(...ATTEMPT_DEADLINE_REPORT);
        throw new AttemptTimeoutError(
          this.operationId,
          "the effect was cancelled at the attempt deadline; its outcome is unknown",
        );
      }
      throw error;
    } finally {
      yield new StopRenewing(this);
    }
  }

  private *body(): Steps<Result | undefined> {
    if (this.ctx.previousOutcomeUnknown) {
      if (this.hasLookup) {
        const found = yield* this.lookUpProvider();
        if (found !== undefined) return yield* this.record(found);
      } else if (!this.providerDeduplicates) {
        // Running the effect again could repeat the earlier one, and nothing here can
        // tell whether it happened. NOT_STARTED hands the doubt on with the earlier
        // attempt's deadline, for a caller (or reconciler) that can check.
        yield* this.sendDecline();
        throw new OutcomeUnknownError(this.operationId, UNCHECKABLE);
      }
    }
    // Never start the effect so close to the cancel point that it would be aborted as
    // it started (checked before renewing too: a Renew bounded by a deadline all but
    // gone fails), nor on a lease that may be running out: renew it once, counted from
    // the Renew's answered send, and decline only if too little is left even then.
    if (this.cancelAt - this.clock() < this.margin) return yield* this.decline();
    if (this.leaseExpiresAt - this.clock() < this.lease / 2) {
      try {
        yield* this.renew();
      } catch (error) {
        // Transient failures outlasted the re-sends, or STATE_FORBIDS (the lease ran
        // out and a Claim marked the attempt): the re-check below decides.
        if (!(error instanceof StateForbidsError || (error instanceof StatusError && isRetryable(error)))) throw error;
      }
      const interrupted = this.lost ? this.interruption() : undefined;
      if (interrupted !== undefined) throw interrupted; // LEASE_LOST: claim again; ATTEMPT_DEADLINE_PASSED: decline
      const now = this.clock();
      if (this.leaseExpiresAt - now < this.leaseMargin || this.cancelAt - now < this.margin) {
        return yield* this.decline();
      }
    }
    this.started = true;
    let outcome: Outcome;
    try {
      outcome = (yield new Guarded(this, "effect")) as Outcome;
    } catch (error) {
      if (error instanceof Lost || error instanceof Stopped) throw error;
      // The effect failed in a way nobody can tell.
      const name = error instanceof Error ? error.name : typeof error;
      yield* this.failUnknown("effect_raised", name);
      throw new OutcomeUnknownError(this.operationId, `the effect threw ${name}; its outcome is unknown`, { cause: error });
    }
    return yield* this.record(outcome);
  }

  private *lookUpProvider(): Steps<Success | Terminal | undefined> {
    for (;;) {
      // Taken before the lookup starts: it may read the provider at any moment up to
      // its answer, so only its start is known to precede the read.
      const startedAt = this.clock();
      let found: Success | Terminal | undefined;
      try {
        found = (yield new Guarded(this, "lookup")) as Success | Terminal | undefined;
      } catch (error) {
        if (error instanceof Lost || error instanceof Stopped) throw error;
        // Nothing ran here: hand the doubt on as it is (NOT_STARTED keeps the earlier
        // attempt's deadline), but this call cannot tell the outcome.
        yield* this.sendDecline();
        throw new OutcomeUnknownError(
          this.operationId,
          "the provider lookup failed; the earlier attempt's outcome is unknown",
          { cause: error },
        );
      }
      const settlesAt = this.ctx.previousAttemptSettlesAt ?? 0;
      if (found !== undefined || startedAt >= settlesAt) return found;
      // Nothing found proves nothing if the lookup began while the earlier attempt
      // could still run (even when it answered after that): its read may precede an
      // effect that landed before the earlier deadline.
      const now = this.clock();
      if (settlesAt >= this.cancelAt && now + this.lookupInterval >= this.cancelAt) {
        // This attempt ends before the doubt does (its Claim took long enough,
        // re-sent or long-polled, to eat the gap between the two deadlines): having
        // looked until now, hand the doubt on as it is; the next attempt, told the
        // earlier deadline and ending later, waits it out.
        throw new Stopped();
      }
      yield new Guarded(this, "sleep", Math.max(0, Math.min(this.lookupInterval, settlesAt - now)));
    }
  }

  private *record(outcome: Outcome): Steps<Result | undefined> {
    try {
      if (outcome instanceof Success) {
        yield new Call("complete", [
          this.operationId,
          this.fence,
          outcome.body,
          { contentType: outcome.contentType, metadata: outcome.metadata, deadline: this.deadlineAt },
        ]);
        return {
          operationId: this.operationId,
          body: Buffer.from(outcome.body),
          contentType: outcome.contentType,
          metadata: { ...outcome.metadata },
          attempts: this.attempt,
          replayed: false,
        };
      }
      if (outcome instanceof Terminal) {
        yield this.fail("FAIL_DISPOSITION_TERMINAL", outcome.code, outcome.message, outcome.metadata);
        throw new OperationFailedError(
          this.operationId,
          { reason: "FAILURE_REASON_TERMINAL", code: outcome.code, message: outcome.message, metadata: outcome.metadata },
          false,
        );
      }
      if (outcome instanceof Retryable) {
        const failed = (yield this.fail(
          "FAIL_DISPOSITION_RETRYABLE",
          outcome.code,
          outcome.message,
          outcome.metadata,
          outcome.retryAfter,
        )) as pb.FailResponse;
        if (failed.state === "OPERATION_STATE_RETRY_WAIT") {
          this.reclaimAfter = seconds(failed.retry_after);
          return undefined;
        }
        throw new OperationFailedError(
          this.operationId,
          { reason: failed.reason, code: outcome.code, message: outcome.message, metadata: outcome.metadata },
          false,
        );
      }
      if (outcome instanceof Unknown) {
        yield* this.failUnknown(outcome.code, outcome.message);
        throw new OutcomeUnknownError(this.operationId, "the effect's outcome is unknown");
      }
      throw new TypeError(`an effect returns Success, Terminal, Retryable or Unknown, not ${String(outcome)}`);
    } catch (error) {
      if (error instanceof LeaseLostError) return yield* this.answerStored();
      if (error instanceof AttemptDeadlinePassedError) {
        throw new OutcomeUnknownError(
          this.operationId,
          "the attempt deadline passed before the outcome was recorded; a reconciler must settle it",
        );
      }
      throw error;
    }
  }

  private fail(
    disposition: pb.FailDisposition,
    code: string,
    message: string,
    metadata?: Record<string, string>,
    retryAfter?: number,
  ): Call {
    return new Call("fail", [
      this.operationId,
      this.fence,
      disposition,
      {
        code,
        message,
        ...(metadata !== undefined ? { metadata } : {}),
        ...(retryAfter !== undefined ? { retryAfter } : {}),
        deadline: this.deadlineAt,
      },
    ]);
  }

  /** Best effort: an attempt whose outcome is unknown says so; if it cannot, its lease
   *  runs out and the next owner reconciles first all the same. */
  private *failUnknown(code: string, message: string): Steps<void> {
    try {
      yield this.fail("FAIL_DISPOSITION_UNKNOWN", code, message);
    } catch (error) {
      if (!(error instanceof IdemError)) throw error;
    }
  }

  /** Fail NOT_STARTED (no retry_after: with NOT_STARTED it is INVALID_ARGUMENT). */
  private declineCall(): Call {
    return this.fail("FAIL_DISPOSITION_NOT_STARTED", ...NOT_STARTED_REPORT);
  }

  /** Best effort decline before the call gives up: if it cannot be sent, the lease runs
   *  out and the next owner is handed the same doubt all the same. */
  private *sendDecline(): Steps<void> {
    try {
      yield this.declineCall();
    } catch (error) {
      if (!(error instanceof IdemError)) throw error;
    }
  }

  /** The effect is not started: Fail NOT_STARTED, which hands the operation on as it
   *  was before this attempt (released, or still in the doubt it took over, ending with
   *  that attempt's deadline), then claim again. FAILED (the budget or the operation
   *  deadline is spent): answer with what is stored. */
  private *decline(): Steps<Result | undefined> {
    let failed: pb.FailResponse;
    try {
      failed = (yield this.declineCall()) as pb.FailResponse;
    } catch (error) {
      // Taken over meanwhile, too late to say so, or not answered in time: nothing
      // ran here, and the next Claim learns where things stand.
      if (
        error instanceof LeaseLostError || error instanceof AttemptDeadlinePassedError
        || (error instanceof StatusError && isRetryable(error))
      ) {
        return undefined;
      }
      throw error;
    }
    if (failed.state === "OPERATION_STATE_FAILED") return yield* this.answerStored();
    this.reclaimAfter = seconds(failed.retry_after);
    return undefined;
  }

  /** LEASE_LOST (or a decline that ended the operation): answer with what is stored;
   *  never redo the effect. */
  private *answerStored(): Steps<Result> {
    const found = (yield new Call("lookup", [{ operationId: this.operationId }])) as pb.LookupResponse;
    const operation = found.operation;
    if (operation?.state === "OPERATION_STATE_SUCCEEDED") {
      return {
        operationId: operation.operation_id,
        body: Buffer.from(operation.result?.body ?? new Uint8Array()),
        contentType: operation.result?.content_type ?? "",
        metadata: { ...(operation.result?.metadata ?? {}) },
        attempts: operation.attempt,
        replayed: true,
      };
    }
    if (operation?.state === "OPERATION_STATE_FAILED") {
      throw new OperationFailedError(operation.operation_id, operation.error ?? emptyError(), true);
    }
    throw new SupersededError(operation ?? undefined);
  }
}
