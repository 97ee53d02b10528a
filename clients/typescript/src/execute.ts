/**
 * executeOnce: the client protocol (README, "The client protocol"), done right.
 *
 * - A fresh random claim_token per attempt, re-sent unchanged (with the whole Claim)
 *   after UNAVAILABLE or a lost reply.
 * - The lease and the attempt deadline count from the start of the send of the Claim
 *   (or Renew) that granted them, the one that was answered: a re-sent Claim is
 *   answered with what is left at the server's handling of that very send. The effect is never started while the lease may be
 *   running out (it is renewed first, once) nor with too little of the attempt or the
 *   lease left: the attempt is declined instead (Fail NOT_STARTED) and claimed again
 *   within `deadline`. Once started, the effect is renewed while it runs and aborted
 *   (`ctx.signal`) at the attempt deadline, then Fail UNKNOWN.
 * - The effect's outcome maps to Complete / Fail TERMINAL / RETRYABLE / UNKNOWN.
 * - Completed replays without running the effect; Pending waits (Claim `wait`,
 *   retry_after); NeedsReconciliation or an outcome this client does not know never
 *   executes; LEASE_LOST looks the operation up and answers with what is stored, never
 *   redoing the effect.
 * - ReconcileFirst: an earlier attempt may have taken effect, and the call site must
 *   have said how the effect is protected. With a `lookup` the provider is asked
 *   first; a positive answer is recorded at once, a negative one counts only if that
 *   lookup was started once the earlier attempt had settled (previous_attempt_deadline,
 *   counted from the reply; when the server leaves it out, conservatively a whole
 *   attempt duration from the reply), since a lookup reads the provider at some moment
 *   between its start and its answer. An attempt that ends first declines (NOT_STARTED
 *   hands the doubt on with the earlier deadline, and the next attempt waits it out).
 *   With `providerDeduplicates` (and no lookup) the effect runs with
 *   `ctx.previousOutcomeUnknown` set and must pass `ctx.operationId` to the provider as
 *   its idempotency key. With neither, or when the lookup throws, nothing runs: the
 *   attempt declines (NOT_STARTED) and the call throws OutcomeUnknownError.
 *
 * Times are seconds; instants are `monotonic()` seconds.
 */
import {
  AttemptDeadlinePassedError, AttemptTimeoutError, IdemError, LeaseLostError, NeedsReconciliationError,
  OperationFailedError, OutcomeUnknownError, PendingError, StateForbidsError, StatusError, SupersededError,
  UnrecognisedOutcomeError,
} from "./errors.js";
import { type Effect, type EffectContext, type Lookup, type Outcome, type Result, Retryable, Success, Terminal, Unknown } from "./outcome.js";
import {
  claimRequest, type CompleteOptions, type FailOptions, type LookupOptions, type LookupTarget, newClaimToken, seconds,
  type SendOptions,
} from "./requests.js";
import { isRetryable, monotonic } from "./retry.js";
import type * as pb from "./types.js";

// Defined in outcome.ts, which Client shares; exported here as before.
export { Retryable, Success, Terminal, Unknown } from "./outcome.js";
export type { Effect, EffectContext, Lookup, Outcome, Result } from "./outcome.js";

/** The longest `wait` one Claim asks for while the operation is pending. */
export const MAX_CLAIM_WAIT = 20;

/** Why a ReconcileFirst without a lookup or a deduplicating provider runs nothing. */
export const UNCHECKABLE =
  "an earlier attempt may have taken effect and this call cannot check it: pass a lookup, "
  + "or declare provider deduplication (providerDeduplicates: true) if the provider honours the key, "
  + "or reconcile the operation";

/** What executeOnce needs of a client: the calls it makes. Client has them (client.ts
 *  stands above this module: its executeOnce runs this one). */
interface ExecuteClient {
  sendClaim(request: pb.ClaimRequest, options?: SendOptions): Promise<[pb.ClaimResponse, number]>;
  sendRenew(operationId: string, fence: string, options?: SendOptions & { lease?: number }): Promise<[pb.RenewResponse, number]>;
  complete(operationId: string, fence: string, body: Uint8Array, options?: SendOptions & CompleteOptions): Promise<pb.CompleteResponse>;
  fail(operationId: string, fence: string, disposition: pb.FailDisposition, options: SendOptions & FailOptions): Promise<pb.FailResponse>;
  lookup(target: LookupTarget, options?: SendOptions & LookupOptions): Promise<pb.LookupResponse>;
}

export interface ExecuteOptions {
  /** The lease asked for, seconds (default 30). */
  lease?: number;
  /** The attempt duration (max_attempt_duration), seconds, fixed by the scope's first
   *  Claim (default 300). */
  attemptDuration?: number;
  /** Bounds the time spent claiming and waiting for another attempt (default 60; 0:
   *  PendingError at the first Pending, or when an attempt ends without a result).
   *  Once this call owns the operation, its attempt deadline bounds it instead. */
  deadline?: number;
  /** How a ReconcileFirst is settled: the provider is asked for the earlier attempt's
   *  effect before this one runs (see Lookup). */
  lookup?: Lookup;
  /** Declares that the effect's provider deduplicates by the idempotency key it is
   *  given (the effect passes `ctx.operationId`), so running the effect again after an
   *  earlier attempt that may have taken effect is safe. Default false: on
   *  ReconcileFirst without a `lookup`, nothing runs (Fail NOT_STARTED keeps the doubt
   *  for a reconciler) and the call throws OutcomeUnknownError. */
  providerDeduplicates?: boolean;
  /** With payload null: the request's fingerprint (fingerprint.ts). */
  fingerprint?: Uint8Array;
  maxAttempts?: number;
  retention?: number;
  operationDeadline?: number;
  /** Seconds between provider lookups while the earlier attempt may still run (a
   *  lookup that finds the effect ends the wait at once). */
  lookupInterval?: number;
}

export type Payload = string | Uint8Array | Record<string, unknown> | unknown[] | null;

/** (the server's previous_attempt_deadline, the monotonic instant it ends), counted
 *  from the Claim's reply's receipt: the server counts it at its reply's clock, which
 *  for a long-polled Claim is long after the send (counted from that send, the doubt
 *  would seem to end too soon). Absent, the earlier attempt may have
 *  started just before this Claim was answered, so it may run a whole attempt duration
 *  from then. */
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

function replayed(completed: pb.Completed): Result {
  if (completed.outcome === "error" || completed.state === "OPERATION_STATE_FAILED") {
    throw new OperationFailedError(completed.operation_id, completed.error ?? emptyError(), true);
  }
  return {
    operationId: completed.operation_id,
    body: completed.result?.body ?? Buffer.alloc(0),
    contentType: completed.result?.content_type ?? "",
    metadata: { ...(completed.result?.metadata ?? {}) },
    attempts: completed.attempts,
    replayed: true,
  };
}

function emptyError(): pb.OperationError {
  return { reason: "FAILURE_REASON_UNSPECIFIED", code: "", message: "", metadata: {} };
}

function requestIdentity(payload: Exclude<Payload, null>): { jsonPayload: string } | { bytesPayload: Uint8Array } {
  if (typeof payload === "string") return { jsonPayload: payload };
  if (payload instanceof Uint8Array) return { bytesPayload: payload };
  return { jsonPayload: JSON.stringify(payload) };
}

const pause = (s: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, Math.max(0, s * 1000));
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });

/**
 * Runs `effect` at most once for the intent (operation, key, payload).
 *
 * `payload` identifies the request: a string is sent as a JSON document, an object or
 * array is serialised to one, a Uint8Array is opaque; or pass null and a
 * `fingerprint`. `key` must be made once per business intent and persisted before the
 * first call.
 *
 * Resolves to the Result (recorded now or replayed). Rejects with OperationFailedError
 * for a terminal error (recorded now or replayed), OutcomeUnknownError when this
 * attempt's outcome is unknown (AttemptTimeoutError at the attempt deadline) or an
 * earlier attempt's cannot be checked (ReconcileFirst without `lookup` or
 * `providerDeduplicates`, or a lookup that threw: nothing ran),
 * NeedsReconciliationError, PendingError, SupersededError, UnrecognisedOutcomeError, or
 * a StatusError such as ConflictError.
 */
export async function executeOnce(
  client: ExecuteClient,
  operation: string,
  key: string,
  payload: Payload,
  effect: Effect,
  options: ExecuteOptions = {},
): Promise<Result> {
  const lease = options.lease ?? 30;
  let identity: { jsonPayload: string } | { bytesPayload: Uint8Array } | { fingerprint: Uint8Array };
  if (payload === null) {
    if (options.fingerprint === undefined) throw new TypeError("give a payload or a fingerprint");
    identity = { fingerprint: options.fingerprint };
  } else {
    identity = requestIdentity(payload);
  }
  const end = monotonic() + (options.deadline ?? 60);
  let wait: number | undefined;
  for (;;) {
    const request = claimRequest(operation, key, {
      ...identity,
      claimToken: newClaimToken(),
      lease,
      maxAttemptDuration: options.attemptDuration ?? 300,
      maxAttempts: options.maxAttempts ?? 0,
      ...(options.retention !== undefined ? { retention: options.retention } : {}),
      ...(options.operationDeadline !== undefined ? { operationDeadline: options.operationDeadline } : {}),
      ...(wait !== undefined ? { wait } : {}),
    });
    const [response, sentAt] = await client.sendClaim(request, { deadline: Math.max(end, monotonic() + 1) });
    const receivedAt = monotonic();
    const outcome = response.outcome;
    if (outcome === "acquired" && response.acquired?.ownership) {
      const attempt = new Attempt(client, response.acquired.ownership, [sentAt, receivedAt], lease, undefined, options);
      const step = await attempt.run(effect);
      if (!(step instanceof ClaimAgain)) return step;
      claimAgainBy(end, attempt.operationId, step);
      wait = undefined;
    } else if (outcome === "reconcile_first" && response.reconcile_first?.ownership) {
      const first = response.reconcile_first;
      const attempt = new Attempt(client, first.ownership!, [sentAt, receivedAt], lease, first, options);
      const step = await attempt.run(effect);
      if (!(step instanceof ClaimAgain)) return step;
      claimAgainBy(end, attempt.operationId, step);
      wait = undefined;
    } else if (outcome === "completed" && response.completed) {
      return replayed(response.completed);
    } else if (outcome === "pending" && response.pending) {
      const pending = response.pending;
      const retryAfter = seconds(pending.retry_after);
      const remaining = end - monotonic();
      if (remaining <= 0.05) throw new PendingError(pending.operation_id, retryAfter, String(pending.reason));
      const waited = monotonic() - sentAt;
      if (wait !== undefined && waited < Math.min(0.05, wait)) {
        // The server did not wait (clamped): do not spin.
        await pause(Math.min(retryAfter, remaining, 1));
      }
      wait = Math.max(0, Math.min(MAX_CLAIM_WAIT, end - monotonic() - 0.05));
    } else if (outcome === "needs_reconciliation" && response.needs_reconciliation) {
      const needs = response.needs_reconciliation;
      throw new NeedsReconciliationError(needs.operation_id, needs.fence, needs.attempts);
    } else {
      throw new UnrecognisedOutcomeError(`Claim answered ${JSON.stringify(outcome)}; nothing was executed`);
    }
  }
}

/** An attempt ended without an answer (Retryable, or declined before its effect): the
 *  call claims again, the next attempt due after `retryAfter` seconds. */
class ClaimAgain {
  constructor(readonly retryAfter: number) {}
}

/** Claiming again is claiming: it is bounded by the caller's `deadline` (its end). */
function claimAgainBy(end: number, operationId: string, step: ClaimAgain): void {
  if (end - monotonic() <= 0.05) throw new PendingError(operationId, step.retryAfter, "PENDING_REASON_RETRY_SCHEDULED");
}

/** Thrown inside an attempt when its fence was refused (another owner took over). */
class Lost extends Error {}
/** Thrown inside an attempt when its time is up: before the effect started, it is
 *  declined (Fail NOT_STARTED); after, the effect is given up (Fail UNKNOWN). */
class Stopped extends Error {}

/** One owned attempt: renews the lease, races the effect against the deadline and a
 *  lost lease, records the outcome. */
class Attempt {
  readonly operationId: string;
  readonly fence: string;
  readonly attempt: number;
  granted: number;
  leaseExpiresAt: number;
  deadlineAt: number;
  readonly margin: number;
  readonly cancelAt: number;
  readonly ctx: EffectContext;
  /** Aborted when the lease is lost. */
  private readonly lost = new AbortController();
  private lostError: StatusError | undefined;
  /** Aborted when the effect must stop (ctx.signal). */
  private readonly cancel = new AbortController();
  /** Aborted when the attempt is over (stops the renewals). */
  private readonly finished = new AbortController();
  private readonly lookup: Lookup | undefined;
  private readonly providerDeduplicates: boolean;
  private readonly lookupInterval: number;
  /** Set just before the effect is called: from then on its outcome may be unknown. */
  private effectStarted = false;

  /** The lease and the attempt deadline count from the start of the Claim's answered
   *  send (sooner than the server's handling of it); the earlier attempt's deadline
   *  from its reply (later). */
  constructor(
    private readonly client: ExecuteClient,
    ownership: pb.Ownership,
    [sentAt, receivedAt]: [number, number],
    private readonly lease: number,
    reconcileFirst: pb.ReconcileFirst | undefined,
    options: ExecuteOptions,
  ) {
    this.operationId = ownership.operation_id;
    this.fence = ownership.fence;
    this.attempt = ownership.attempt;
    this.granted = seconds(ownership.lease);
    this.leaseExpiresAt = sentAt + this.granted;
    const duration = seconds(ownership.attempt_deadline);
    this.deadlineAt = sentAt + duration;
    // Room left before the deadline to abort the effect and report it.
    this.margin = Math.max(0.05, Math.min(1, duration / 10));
    this.cancelAt = this.deadlineAt - this.margin;
    this.lookup = options.lookup;
    this.providerDeduplicates = options.providerDeduplicates ?? false;
    this.lookupInterval = options.lookupInterval ?? 1;
    let given: number | undefined;
    let settlesAt: number | undefined;
    if (reconcileFirst !== undefined) [given, settlesAt] = previousAttemptSettlesAt(reconcileFirst, receivedAt);
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
      previousAttemptSettled: () => settlesAt === undefined || monotonic() >= settlesAt,
    };
  }

  // ---- the lease -----------------------------------------------------------------

  /** Renews once (re-sent after transient failures); a refusal marks the lease lost. */
  async renew(): Promise<void> {
    let response: pb.RenewResponse;
    let sentAt: number;
    try {
      [response, sentAt] = await this.client.sendRenew(this.operationId, this.fence, {
        lease: this.lease,
        deadline: this.cancelAt,
      });
    } catch (error) {
      if (error instanceof LeaseLostError || error instanceof AttemptDeadlinePassedError) {
        this.lostError = error;
        this.lost.abort();
        return;
      }
      throw error;
    }
    this.granted = seconds(response.lease);
    this.leaseExpiresAt = sentAt + this.granted;
    this.deadlineAt = Math.min(this.deadlineAt, sentAt + seconds(response.attempt_deadline));
  }

  async keepRenewing(): Promise<void> {
    const stop = this.finished.signal;
    // Once the lease reaches the attempt deadline, Renew cannot extend it further.
    while (!stop.aborted && !this.lost.signal.aborted && this.leaseExpiresAt < this.deadlineAt - 0.001) {
      const due = this.leaseExpiresAt - (this.granted * 2) / 3;
      await pause(Math.max(0, due - monotonic()), stop);
      if (stop.aborted) return;
      try {
        await this.renew();
      } catch (error) {
        if (error instanceof StateForbidsError) return; // marked UNKNOWN by a Claim: writes still allowed
        // Transient failures outlasted the retry policy: try again shortly; the lease
        // may lapse, in which case a new owner reconciles first.
        await pause(Math.min(1, Math.max(0.05, this.granted / 10)), stop);
      }
    }
  }

  /** Awaits `work()`, aborting it when the lease is lost (throws Lost) or the attempt's
   *  time is up (throws Stopped). */
  async guarded<T>(work: () => Promise<T>): Promise<T> {
    const task = Promise.resolve().then(work);
    task.catch(() => undefined); // a rejection after the race is lost is not unhandled
    let timer: NodeJS.Timeout | undefined;
    let onLost: (() => void) | undefined;
    const interrupted = new Promise<"interrupted">((resolve) => {
      timer = setTimeout(() => resolve("interrupted"), Math.max(0, (this.cancelAt - monotonic()) * 1000));
      onLost = () => resolve("interrupted");
      if (this.lost.signal.aborted) resolve("interrupted");
      else this.lost.signal.addEventListener("abort", onLost, { once: true });
    });
    const wrapped = task.then((value) => ({ value }));
    let winner: { value: T } | "interrupted";
    try {
      winner = await Promise.race([wrapped, interrupted]);
    } finally {
      clearTimeout(timer);
      if (onLost) this.lost.signal.removeEventListener("abort", onLost);
    }
    if (winner !== "interrupted") return winner.value;
    this.cancel.abort();
    await Promise.race([task.then(() => undefined, () => undefined), pause(this.margin / 2)]);
    this.throwIfLost();
    throw new Stopped();
  }

  private throwIfLost(): void {
    if (this.lost.signal.aborted) {
      if (this.lostError instanceof AttemptDeadlinePassedError) throw new Stopped(); // nobody took over: time is up
      throw new Lost();
    }
  }

  // ---- the attempt -----------------------------------------------------------------

  /** The attempt's answer, or ClaimAgain when it ended without one (a retry was
   *  scheduled, or it declined before starting the effect). */
  async run(effect: Effect): Promise<Result | ClaimAgain> {
    const keeper = this.keepRenewing().catch(() => undefined);
    try {
      return await this.runEffect(effect);
    } catch (error) {
      // Lost before the effect started: nothing ran here, so simply claim again.
      if (error instanceof Lost) return this.effectStarted ? await this.stored() : new ClaimAgain(0);
      if (error instanceof Stopped) {
        if (!this.effectStarted) return await this.decline();
        await this.failUnknown("attempt_deadline", "the effect was cancelled at the attempt deadline");
        throw new AttemptTimeoutError(
          this.operationId,
          "the effect was cancelled at the attempt deadline; its outcome is unknown",
        );
      }
      throw error;
    } finally {
      this.finished.abort();
      this.cancel.abort();
      await keeper;
    }
  }

  private async runEffect(effect: Effect): Promise<Result | ClaimAgain> {
    if (this.ctx.previousOutcomeUnknown) {
      if (this.lookup !== undefined) {
        const found = await this.lookUpProvider(this.lookup);
        if (found !== undefined) return await this.record(found);
      } else if (!this.providerDeduplicates) {
        // Running the effect again could repeat the earlier one, and this call has no
        // way to check: hand the doubt on untouched for whoever can.
        await this.handDoubtOn();
        throw new OutcomeUnknownError(this.operationId, UNCHECKABLE);
      }
    }
    await this.readyToStart();
    this.effectStarted = true;
    let outcome: Outcome;
    try {
      outcome = await this.guarded(() => effect(this.ctx));
    } catch (error) {
      if (error instanceof Lost || error instanceof Stopped) throw error;
      // The effect failed in a way nobody can tell.
      const name = error instanceof Error ? error.name : typeof error;
      await this.failUnknown("effect_raised", name);
      throw new OutcomeUnknownError(this.operationId, `the effect threw ${name}; its outcome is unknown`, { cause: error });
    }
    return await this.record(outcome);
  }

  /** Returns when the effect may start; throws Stopped (decline) or Lost (claim again).
   *  Never on a lease that may be running out (less than half left: renewed first,
   *  once, as a long-polled Claim, or one whose reply was slow, may have left it
   *  short), nor with less
   *  than `margin` of the attempt, or of the lease (at most a third of it), left, where
   *  it would be aborted or lost as it started. The lease is the one asked for, not the
   *  one granted: a re-sent Claim is granted only what was left of it by then, and half
   *  of a remnant is no margin. */
  private async readyToStart(): Promise<void> {
    const attemptShort = () => this.cancelAt - monotonic() < this.margin;
    const leaseShort = () => this.leaseExpiresAt - monotonic() < Math.min(this.margin, this.lease / 3);
    if (attemptShort()) throw new Stopped();
    if (this.leaseExpiresAt - monotonic() < this.lease / 2) {
      try {
        await this.renew(); // the lease granted counts from the Renew's send
      } catch (error) {
        // Not renewed (transient failures outlasted the retry policy, no time was left
        // to send, or a Claim marked it UNKNOWN): the re-check below decides.
        if (!(error instanceof StateForbidsError || (error instanceof StatusError && isRetryable(error)))) throw error;
      }
      this.throwIfLost();
      if (leaseShort() || attemptShort()) throw new Stopped();
    }
  }

  private async lookUpProvider(lookup: Lookup): Promise<Success | Terminal | undefined> {
    const settlesAt = this.ctx.previousAttemptSettlesAt ?? 0;
    for (;;) {
      // A lookup reads the provider at some moment between its start and its answer:
      // "nothing" from one started while the earlier attempt could still land its
      // effect proves nothing, however late that answer comes.
      const askedAt = monotonic();
      let found: Success | Terminal | undefined;
      try {
        found = await this.guarded(() => lookup(this.ctx));
      } catch (error) {
        if (error instanceof Lost || error instanceof Stopped) throw error;
        // Nothing ran here: hand the doubt on as it is (NOT_STARTED keeps the earlier
        // attempt's deadline; UNKNOWN would replace it with this attempt's), but this
        // call cannot tell the outcome.
        await this.handDoubtOn();
        throw new OutcomeUnknownError(
          this.operationId,
          "the provider lookup failed; the earlier attempt's outcome is unknown",
          { cause: error },
        );
      }
      if (found !== undefined || askedAt >= settlesAt) return found;
      // Look again (renewing meanwhile), at the latest once the earlier attempt has
      // settled, up to this attempt's stop point.
      const now = monotonic();
      // This attempt ends before the doubt does (its Claim took long enough, re-sent or
      // long-polled, to eat the gap between the two deadlines): decline. NOT_STARTED
      // hands the doubt on with the earlier attempt's deadline, and the next attempt,
      // which ends later, waits it out. Held until now, duplicates stayed Pending.
      if (now >= this.cancelAt) throw new Stopped();
      const until = Math.min(settlesAt, this.cancelAt);
      if (until > now) await this.guarded(() => pause(Math.min(this.lookupInterval, until - now)));
    }
  }

  private async record(outcome: Outcome): Promise<Result | ClaimAgain> {
    try {
      if (outcome instanceof Success) {
        await this.client.complete(this.operationId, this.fence, outcome.body, {
          contentType: outcome.contentType,
          metadata: outcome.metadata,
          deadline: this.deadlineAt,
        });
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
        await this.client.fail(this.operationId, this.fence, "FAIL_DISPOSITION_TERMINAL", {
          code: outcome.code,
          message: outcome.message,
          metadata: outcome.metadata,
          deadline: this.deadlineAt,
        });
        throw new OperationFailedError(
          this.operationId,
          { reason: "FAILURE_REASON_TERMINAL", code: outcome.code, message: outcome.message, metadata: outcome.metadata },
          false,
        );
      }
      if (outcome instanceof Retryable) {
        const failed = await this.client.fail(this.operationId, this.fence, "FAIL_DISPOSITION_RETRYABLE", {
          code: outcome.code,
          message: outcome.message,
          metadata: outcome.metadata,
          retryAfter: outcome.retryAfter,
          deadline: this.deadlineAt,
        });
        if (failed.state === "OPERATION_STATE_RETRY_WAIT") return new ClaimAgain(seconds(failed.retry_after));
        throw new OperationFailedError(
          this.operationId,
          { reason: failed.reason, code: outcome.code, message: outcome.message, metadata: outcome.metadata },
          false,
        );
      }
      if (outcome instanceof Unknown) {
        await this.failUnknown(outcome.code, outcome.message);
        throw new OutcomeUnknownError(this.operationId, "the effect's outcome is unknown");
      }
      throw new TypeError(`an effect returns Success, Terminal, Retryable or Unknown, not ${String(outcome)}`);
    } catch (error) {
      if (error instanceof LeaseLostError) return await this.stored();
      if (error instanceof AttemptDeadlinePassedError) {
        throw new OutcomeUnknownError(
          this.operationId,
          "the attempt deadline passed before the outcome was recorded; a reconciler must settle it",
        );
      }
      throw error;
    }
  }

  /** Best effort: an attempt whose outcome is unknown says so; if it cannot, its lease
   *  runs out and the next owner reconciles first all the same. */
  private async failUnknown(code: string, message: string): Promise<void> {
    try {
      await this.client.fail(this.operationId, this.fence, "FAIL_DISPOSITION_UNKNOWN", {
        code,
        message,
        deadline: this.deadlineAt,
      });
    } catch (error) {
      if (!(error instanceof IdemError)) throw error;
    }
  }

  /** Fail NOT_STARTED: nothing ran in this attempt. */
  private async sendDecline(): Promise<pb.FailResponse> {
    this.finished.abort(); // no renewal races the Fail
    return await this.client.fail(this.operationId, this.fence, "FAIL_DISPOSITION_NOT_STARTED", {
      code: "not_started",
      message: "the effect was not started: too little of the lease or attempt was left, or an earlier attempt may still be running",
      deadline: this.deadlineAt,
    });
  }

  /** Best effort decline before the call gives up: if it cannot be sent, the lease runs
   *  out and the next owner is handed the same doubt all the same. */
  private async handDoubtOn(): Promise<void> {
    try {
      await this.sendDecline();
    } catch (error) {
      if (!(error instanceof IdemError)) throw error;
    }
  }

  /** The effect was not started (too little of the attempt or the lease left, or an
   *  earlier attempt's doubt outlasts this attempt): Fail NOT_STARTED, which hands the
   *  operation on as it was before this attempt (released at once, or still in the
   *  doubt it took over, ending with that earlier attempt's deadline), then claim again.
   *  FAILED: the budget or the operation deadline is spent, answer with what is stored. */
  private async decline(): Promise<Result | ClaimAgain> {
    let failed: pb.FailResponse;
    try {
      failed = await this.sendDecline();
    } catch (error) {
      // Another owner took over, the attempt is over, or the Fail could not be sent
      // before the attempt deadline (the server then hands the attempt on itself):
      // nothing ran here, claim again.
      if (
        error instanceof LeaseLostError || error instanceof AttemptDeadlinePassedError
        || (error instanceof StatusError && isRetryable(error))
      ) {
        return new ClaimAgain(0);
      }
      throw error;
    }
    if (failed.state === "OPERATION_STATE_FAILED") return await this.stored();
    return new ClaimAgain(seconds(failed.retry_after));
  }

  /** Answers with what is stored (after LEASE_LOST, or a decline that ended the
   *  operation); never redoes the effect. */
  private async stored(): Promise<Result> {
    const found = await this.client.lookup({ operationId: this.operationId });
    const operation = found.operation;
    if (operation?.state === "OPERATION_STATE_SUCCEEDED") {
      return {
        operationId: operation.operation_id,
        body: operation.result?.body ?? Buffer.alloc(0),
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
