/**
 * What an effect returns (its Outcome), what executeOnce answers (a Result) and what
 * the effect learns of the attempt it runs in (EffectContext): the values the caller,
 * executeOnce and Client share.
 */

/** The effect happened: `body` is recorded (Complete) and replayed to retries. */
export class Success {
  readonly kind = "success";
  constructor(
    readonly body: Uint8Array,
    readonly contentType = "",
    readonly metadata: Record<string, string> = {},
  ) {}
}

/** The effect ended in a final error: recorded (Fail TERMINAL) and replayed. */
export class Terminal {
  readonly kind = "terminal";
  constructor(
    readonly code: string,
    readonly message = "",
    readonly metadata: Record<string, string> = {},
  ) {}
}

/** The effect certainly did not happen: a later attempt may try again (Fail
 *  RETRYABLE) after `retryAfter` seconds, within the attempt budget. */
export class Retryable {
  readonly kind = "retryable";
  constructor(
    readonly code: string,
    readonly message = "",
    readonly retryAfter = 1.0,
    readonly metadata: Record<string, string> = {},
  ) {}
}

/** The effect may or may not have happened (Fail UNKNOWN): the next owner reconciles
 *  first. An effect that throws counts as Unknown too. */
export class Unknown {
  readonly kind = "unknown";
  constructor(
    readonly code = "outcome_unknown",
    readonly message = "",
  ) {}
}

export type Outcome = Success | Terminal | Retryable | Unknown;

/** The recorded result of the operation, made now or replayed. */
export interface Result {
  operationId: string;
  body: Buffer;
  contentType: string;
  metadata: Record<string, string>;
  /** Attempts the operation took (this one included). */
  attempts: number;
  /** True when the result was stored by an earlier call and nothing ran now. */
  replayed: boolean;
}

/** What the effect (and `lookup`) learn about the attempt they run in. */
export interface EffectContext {
  /** Stable for the whole operation: give it to the provider as its idempotency key. */
  readonly operationId: string;
  readonly fence: string;
  /** 1-based; counts every owner, takeovers included. */
  readonly attempt: number;
  readonly maxAttempts: number;
  /** ReconcileFirst: an earlier attempt may have taken effect. */
  readonly previousOutcomeUnknown: boolean;
  readonly previousFence: string | undefined;
  /** The server's previous_attempt_deadline in seconds (what was left at its reply);
   *  undefined when it left it out. */
  readonly previousAttemptDeadline: number | undefined;
  /** The monotonic() instant after which the earlier attempt's effect is no longer in
   *  flight (conservative when the server sent no deadline). */
  readonly previousAttemptSettlesAt: number | undefined;
  /** The monotonic() instant at which the effect is aborted. */
  readonly cancelAt: number;
  /** Aborted at the attempt deadline or when another owner took over: stop the work
   *  (pass it to fetch and the like). */
  readonly signal: AbortSignal;
  previousAttemptSettled(): boolean;
}

export type Effect = (ctx: EffectContext) => Promise<Outcome>;
/** Asked on ReconcileFirst: the earlier attempt's outcome as the provider has it
 *  (looked up by ctx.operationId or the caller's stable reference), undefined if the
 *  provider has nothing. It must read the provider's current state, not a cache or a
 *  lagging replica: "nothing" is taken to mean that the effect had not happened when
 *  the lookup was started. */
export type Lookup = (ctx: EffectContext) => Promise<Success | Terminal | undefined>;
