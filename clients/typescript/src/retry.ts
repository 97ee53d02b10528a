/**
 * The one place that decides which failed calls are re-sent, and how.
 *
 * Every idemd RPC is safe to re-send unchanged after UNAVAILABLE or a lost reply (a
 * Claim keeps its claim_token, owner writes are answered from their receipt). So:
 *
 * - re-sent, unchanged, with exponential backoff and full jitter, within a count of
 *   sends and a total deadline, never sooner than the server's RetryInfo asks:
 *   UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, and transport failures (a
 *   status without idemd's ErrorInfo, e.g. a connection reset: UNKNOWN or INTERNAL);
 * - never re-sent: INVALID_ARGUMENT, FAILED_PRECONDITION, PERMISSION_DENIED,
 *   UNAUTHENTICATED, NOT_FOUND, ABORTED, and idemd's own INTERNAL. Re-sending those
 *   cannot change the answer; ABORTED (LEASE_LOST) calls for a Lookup, not a re-send.
 *
 * Times are seconds; instants are `performance.now()`/1000 style monotonic seconds
 * (see `monotonic`).
 */
import { Code, DeadlineExceededError, fromServiceError, RequestTooLargeError, StatusError } from "./errors.js";

export const RETRIED_CODES: ReadonlySet<Code> = new Set([
  Code.UNAVAILABLE,
  Code.DEADLINE_EXCEEDED,
  Code.RESOURCE_EXHAUSTED,
]);
export const NEVER_RETRIED_CODES: ReadonlySet<Code> = new Set([
  Code.INVALID_ARGUMENT,
  Code.FAILED_PRECONDITION,
  Code.PERMISSION_DENIED,
  Code.UNAUTHENTICATED,
  Code.NOT_FOUND,
  Code.ABORTED,
]);
// Codes the transport itself produces when a connection breaks mid-call; from idemd
// they carry an ErrorInfo (INTERNAL) and are not retried.
const TRANSPORT_CODES: ReadonlySet<Code> = new Set([Code.UNKNOWN, Code.INTERNAL]);

/** Monotonic seconds. */
export function monotonic(): number {
  return performance.now() / 1000;
}

export interface RetryPolicyInit {
  /** Sends in all, the first included (default 10). */
  maxSends?: number;
  initialBackoff?: number;
  maxBackoff?: number;
  multiplier?: number;
  /** No re-send starts later than this after the first send (default 30 s). */
  totalTimeout?: number;
  /** The gRPC deadline of each send (a Claim's `wait` is added to it; default 10 s). */
  callTimeout?: number;
}

/** How a call is re-sent. Times are seconds. */
export class RetryPolicy {
  readonly maxSends: number;
  readonly initialBackoff: number;
  readonly maxBackoff: number;
  readonly multiplier: number;
  readonly totalTimeout: number;
  readonly callTimeout: number;

  constructor(init: RetryPolicyInit = {}) {
    this.maxSends = init.maxSends ?? 10;
    this.initialBackoff = init.initialBackoff ?? 0.05;
    this.maxBackoff = init.maxBackoff ?? 2.0;
    this.multiplier = init.multiplier ?? 2.0;
    this.totalTimeout = init.totalTimeout ?? 30.0;
    this.callTimeout = init.callTimeout ?? 10.0;
    if (!(this.maxSends >= 1)) throw new RangeError("maxSends must be at least 1");
  }

  /** The backoff ceiling before re-send number `resend` (1-based). */
  backoffCap(resend: number): number {
    return Math.min(this.maxBackoff, this.initialBackoff * this.multiplier ** (resend - 1));
  }
}

export const DEFAULT_RETRY = new RetryPolicy();
export const NO_RETRY = new RetryPolicy({ maxSends: 1 });

export function isRetryable(error: StatusError): boolean {
  if (error instanceof RequestTooLargeError) return false;
  if (RETRIED_CODES.has(error.code)) return true;
  return TRANSPORT_CODES.has(error.code) && error.reason === undefined;
}

export interface CallOptions {
  /** A `monotonic()` instant that further bounds the total time. */
  deadline?: number | undefined;
  /** Seconds added to each send's timeout (a Claim's `wait`). */
  extraTimeout?: number;
  sleep?: (seconds: number) => Promise<void>;
  /** A uniform draw in [low, high). */
  uniform?: (low: number, high: number) => number;
  clock?: () => number;
}

export const sleep = (seconds: number): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, Math.max(0, seconds * 1000)));

/**
 * Calls `send(timeout)` until it resolves, re-sending the same request after retryable
 * failures. A failure is thrown as its typed StatusError.
 */
export async function callWithRetry<T>(
  send: (timeout: number) => Promise<T>,
  policy: RetryPolicy,
  options: CallOptions = {},
): Promise<T> {
  const [value] = await callWithRetryAnswered(send, policy, options);
  return value;
}

/**
 * callWithRetry, also returning the `clock()` instant at which the send that was
 * answered began. Each send is its own call, and an abandoned one's reply is never
 * read, so the answer belongs to that send: the server counts the durations in it
 * from its own handling of that send, never earlier.
 */
export async function callWithRetryAnswered<T>(
  send: (timeout: number) => Promise<T>,
  policy: RetryPolicy,
  options: CallOptions = {},
): Promise<[T, number]> {
  const clock = options.clock ?? monotonic;
  const pause = options.sleep ?? sleep;
  const uniform = options.uniform ?? ((low: number, high: number) => low + Math.random() * (high - low));
  let end = clock() + policy.totalTimeout;
  if (options.deadline !== undefined) end = Math.min(end, options.deadline);
  let sends = 0;
  for (;;) {
    const remaining = end - clock();
    if (remaining <= 0) {
      throw new DeadlineExceededError(Code.DEADLINE_EXCEEDED, "no time left to send the call");
    }
    sends += 1;
    const sentAt = clock();
    let error: StatusError;
    try {
      return [await send(Math.min(policy.callTimeout + (options.extraTimeout ?? 0), remaining)), sentAt];
    } catch (caught) {
      error = caught instanceof StatusError ? caught : fromServiceError(caught);
    }
    if (!isRetryable(error) || sends >= policy.maxSends) throw error;
    let delay = uniform(0, policy.backoffCap(sends));
    if (error.retryAfter !== undefined) delay = Math.max(delay, error.retryAfter);
    if (clock() + delay >= end) throw error;
    await pause(delay);
  }
}
