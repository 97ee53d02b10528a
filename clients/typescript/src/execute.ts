/**
 * executeOnce: the client protocol (docs/client-protocol.md) driven with the client,
 * timers and AbortSignals. Every decision (what to claim, when to renew, what an answer
 * means, how an outcome is recorded) lives in protocol.ts, a core without I/O that the
 * shared protocol vectors (testdata/protocol/) drive too; this module only performs its
 * steps: the sends, the pauses, the effect and the lookup raced against the attempt's
 * cancel point and a lost lease, and the lease's renewals alongside.
 *
 * Times are seconds; instants are `monotonic()` seconds.
 */
import { type Effect, type Lookup, type Result } from "./outcome.js";
import {
  Call, executeOnceSteps, Guarded, type RequestIdentity, Sleep, StartRenewing, type Step, type Steps, Stopped,
  StopRenewing,
} from "./protocol.js";
import {
  checkPreviousFingerprints, type CompleteOptions, type FailOptions, type LookupOptions, type LookupTarget, newClaimToken,
  type SendOptions,
} from "./requests.js";
import { monotonic } from "./retry.js";
import { Selector, type SelectorFields } from "./selector.js";
import type * as pb from "./types.js";

// Defined in outcome.ts, which Client shares; exported here as before.
export { Retryable, Success, Terminal, Unknown } from "./outcome.js";
export type { Effect, EffectContext, Lookup, Outcome, Result } from "./outcome.js";
export { MAX_CLAIM_WAIT, previousAttemptSettlesAt, UNCHECKABLE } from "./protocol.js";

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
  /** The fields of a JSON payload that define the request (docs/api.md, "Request
   *  selectors"): a change outside them replays, one inside them conflicts. Plain fields
   *  are made into a Selector (SelectorError for one that cannot be right); a payload it
   *  cannot apply to throws InvalidArgumentError, before any RPC. */
  selector?: Selector | SelectorFields;
  /** During a rollout that changes how this request is normalised (a field now written
   *  out with its default, a selector that takes one more field): the request's
   *  fingerprints under the versions being replaced, e.g.
   *  `oldSelector.fingerprint(body)` or `fingerprintJson(oldDocument)`; at most 4, each
   *  32 bytes (else InvalidArgumentError, before any RPC). Sent in every Claim, so an
   *  operation the old version claimed replays, waits or is taken over instead of
   *  conflicting. Empty (the default) outside such a window; see docs/api.md,
   *  "Changing the normalisation while operations are in flight". */
  previousFingerprints?: readonly Uint8Array[];
  maxAttempts?: number;
  retention?: number;
  operationDeadline?: number;
  /** Seconds between provider lookups while the earlier attempt may still run (a
   *  lookup that finds the effect ends the wait at once). */
  lookupInterval?: number;
}

export type Payload = string | Uint8Array | Record<string, unknown> | unknown[] | null;

function requestIdentity(payload: Exclude<Payload, null>): RequestIdentity {
  if (typeof payload === "string") return { jsonPayload: payload };
  if (payload instanceof Uint8Array) return { bytesPayload: payload };
  return { jsonPayload: JSON.stringify(payload) };
}

/** The fingerprint of what `selector` picks from a JSON payload, sent instead of it;
 *  an empty selector is the whole payload, sent as it is. */
function selectedIdentity(payload: Exclude<Payload, null>, given: Selector | SelectorFields): RequestIdentity {
  const selector = given instanceof Selector ? given : new Selector(given);
  if (selector.empty) return requestIdentity(payload);
  if (payload instanceof Uint8Array) {
    throw new TypeError("a selector applies to a JSON payload (a string, object or array), not to bytes");
  }
  return { fingerprint: selector.fingerprint(typeof payload === "string" ? payload : JSON.stringify(payload)) };
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
  // Checked first: a wrong list is the caller's mistake whatever the payload.
  const previousFingerprints = checkPreviousFingerprints(options.previousFingerprints ?? []);
  let identity: RequestIdentity;
  if (payload === null) {
    if (options.fingerprint === undefined) throw new TypeError("give a payload or a fingerprint");
    identity = { fingerprint: options.fingerprint };
  } else if (options.selector !== undefined) {
    identity = selectedIdentity(payload, options.selector);
  } else {
    identity = requestIdentity(payload);
  }
  const steps = executeOnceSteps(operation, key, identity, {
    lease: options.lease ?? 30,
    attemptDuration: options.attemptDuration ?? 300,
    deadline: options.deadline ?? 60,
    hasLookup: options.lookup !== undefined,
    providerDeduplicates: options.providerDeduplicates ?? false,
    lookupInterval: options.lookupInterval ?? 1,
    maxAttempts: options.maxAttempts ?? 0,
    retention: options.retention,
    operationDeadline: options.operationDeadline,
    previousFingerprints,
    clock: monotonic,
    newClaimToken,
  });
  return await new Driver(client, effect, options.lookup).run(steps);
}

/** Performs the protocol's steps with the client, timers and AbortSignals. */
class Driver {
  /** Per attempt: aborted to stop its renewals, and the renewals' task. */
  private readonly renewals = new Map<object, [AbortController, Promise<void>]>();

  constructor(
    private readonly client: ExecuteClient,
    private readonly effect: Effect,
    private readonly lookup: Lookup | undefined,
  ) {}

  /** Runs `steps` to their end: each step's answer is handed back, its error thrown in
   *  (so the protocol's finally clauses, which stop the renewals, run as steps too). */
  async run<T>(steps: Steps<T>, stop?: AbortSignal): Promise<T> {
    let answer: unknown;
    let error: unknown;
    let failed = false;
    for (;;) {
      const next = failed ? steps.throw(error) : steps.next(answer);
      if (next.done) return next.value;
      answer = undefined;
      failed = false;
      try {
        answer = await this.perform(next.value, stop);
      } catch (caught) {
        error = caught;
        failed = true;
      }
    }
  }

  private async perform(step: Step, stop?: AbortSignal): Promise<unknown> {
    if (step instanceof Call) {
      const method = this.client[step.method] as (...args: unknown[]) => Promise<unknown>;
      return await method.apply(this.client, step.args);
    }
    if (step instanceof Sleep) {
      await pause(step.seconds, stop);
      if (stop?.aborted) throw new Stopped(); // the renewals were stopped: end them
      return undefined;
    }
    if (step instanceof Guarded) return await this.guarded(step);
    if (step instanceof StartRenewing) {
      const finished = new AbortController();
      const task = this.run(step.attempt.keepRenewing(), finished.signal).catch(() => undefined);
      this.renewals.set(step.attempt, [finished, task]);
      return undefined;
    }
    if (step instanceof StopRenewing) {
      // The attempt is over: whatever the effect started is told so (ctx.signal).
      step.attempt.cancel.abort();
      const renewals = this.renewals.get(step.attempt);
      this.renewals.delete(step.attempt);
      if (renewals !== undefined) {
        renewals[0].abort();
        await renewals[1];
      }
      return undefined;
    }
    throw new TypeError(`not a protocol step: ${String(step)}`);
  }

  /** Awaits the effect, the lookup or the pause, aborting it when the lease is lost or
   *  the attempt's time is up (then throws the attempt's interruption). */
  private async guarded(step: Guarded): Promise<unknown> {
    const attempt = step.attempt;
    const work = (): Promise<unknown> => {
      if (step.what === "effect") return this.effect(attempt.ctx);
      if (step.what === "lookup") return this.lookup!(attempt.ctx); // asked only when there is one
      return pause(step.seconds);
    };
    const task = Promise.resolve().then(work);
    task.catch(() => undefined); // a rejection after the race is lost is not unhandled
    let timer: NodeJS.Timeout | undefined;
    const interrupted = new Promise<"interrupted">((resolve) => {
      timer = setTimeout(() => resolve("interrupted"), Math.max(0, (attempt.cancelAt - monotonic()) * 1000));
      attempt.notifyLost = () => resolve("interrupted");
      if (attempt.lost) resolve("interrupted");
    });
    let winner: { value: unknown } | "interrupted";
    try {
      winner = await Promise.race([task.then((value) => ({ value })), interrupted]);
    } finally {
      clearTimeout(timer);
      attempt.notifyLost = () => undefined;
    }
    if (winner !== "interrupted") return winner.value;
    attempt.cancel.abort();
    await Promise.race([task.then(() => undefined, () => undefined), pause(attempt.margin / 2)]);
    throw attempt.interruption() ?? new Stopped();
  }
}
