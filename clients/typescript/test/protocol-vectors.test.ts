// The shared protocol vectors (../../testdata/protocol/vectors.json, described in its
// README) driving this client's protocol core (src/protocol.ts) without a server. Each
// step the core takes (a send, the effect, a provider lookup) must be the vector's next
// step, and is answered as the vector says; the clock moves only by what the vector
// says each step takes. Sends go through the client's own re-send decisions
// (callWithRetryAnswered, with no jitter). Background renewals run while a guarded step
// takes its time, from the attempt's first guarded step on.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import {
  AttemptTimeoutError, Code, NeedsReconciliationError, OperationFailedError, OutcomeUnknownError, PendingError,
  Retryable, StatusError, Success, SupersededError, Terminal, Unknown, UnrecognisedOutcomeError,
} from "../src/index.js";
import { ClaimRequest } from "../src/gen/idem/v1/idempotency.js";
import {
  type Attempt, Call, executeOnceSteps, Guarded, Sleep, StartRenewing, type Step, type Steps, Stopped, StopRenewing,
} from "../src/protocol.js";
import { duration, seconds } from "../src/proto.js";
import { callWithRetryAnswered, DEFAULT_RETRY } from "../src/retry.js";
import type * as pb from "../src/types.js";
import { serviceError } from "./details.js";

// The shared vectors are JSON read field by field as each step needs (their schema is
// testdata/protocol/README.md); a field that is missing fails the assertion reading it.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = Record<string, any>;

// From dist/test/ (compiled) or test/: the repository root holds testdata/.
const here = dirname(fileURLToPath(import.meta.url));
const root = here.includes(`${join("dist", "test")}`) ? join(here, "..", "..", "..", "..") : join(here, "..", "..", "..");
const scenarios = (JSON.parse(readFileSync(join(root, "testdata", "protocol", "vectors.json"), "utf8")) as Json).scenarios as Json[];

/** The clock at the call's start; the vectors count from there. */
const ORIGIN = 1000;
const TOLERANCE = 1e-6;

const ERRORS: Record<string, [Code, string | undefined]> = {
  UNAVAILABLE: [Code.UNAVAILABLE, undefined],
  LOST_REPLY: [Code.DEADLINE_EXCEEDED, undefined],
  LEASE_LOST: [Code.ABORTED, "LEASE_LOST"],
  ATTEMPT_DEADLINE_PASSED: [Code.FAILED_PRECONDITION, "ATTEMPT_DEADLINE_PASSED"],
  STATE_FORBIDS: [Code.FAILED_PRECONDITION, "STATE_FORBIDS"],
  IDEMPOTENCY_KEY_REUSED: [Code.FAILED_PRECONDITION, "IDEMPOTENCY_KEY_REUSED"],
  RESULT_EXPIRED: [Code.FAILED_PRECONDITION, "RESULT_EXPIRED"],
  INVALID_REQUEST: [Code.INVALID_ARGUMENT, "INVALID_REQUEST"],
};

function ownership(fields: Json): pb.Ownership {
  return {
    operation_id: "op-1",
    fence: String(10 + fields.attempt),
    attempt: fields.attempt,
    max_attempts: 5,
    lease: duration(fields.lease),
    attempt_deadline: duration(fields.attempt_deadline),
  };
}

function claimResponse(answer: Json): pb.ClaimResponse {
  const [kind, fields] = Object.entries(answer)[0] as [string, Json];
  switch (kind) {
    case "acquired":
      return { outcome: "acquired", acquired: { ownership: ownership(fields) } } as never;
    case "reconcile_first":
      return {
        outcome: "reconcile_first",
        reconcile_first: {
          ownership: ownership(fields),
          previous_state: "OPERATION_STATE_IN_PROGRESS",
          previous_fence: String(9 + fields.attempt),
          previous_attempt_deadline: "previous_attempt_deadline" in fields ? duration(fields.previous_attempt_deadline) : null,
        },
      } as never;
    case "completed":
      return {
        outcome: "completed",
        completed: "error" in fields
          ? {
            operation_id: "op-1", state: "OPERATION_STATE_FAILED", outcome: "error", attempts: fields.attempts,
            error: { reason: "FAILURE_REASON_TERMINAL", code: fields.error, message: "", metadata: {} },
          }
          : {
            operation_id: "op-1", state: "OPERATION_STATE_SUCCEEDED", outcome: "result", attempts: fields.attempts,
            result: { body: Buffer.from(fields.body), content_type: "", metadata: {} },
          },
      } as never;
    case "pending":
      return {
        outcome: "pending",
        pending: {
          operation_id: "op-1", reason: `PENDING_REASON_${fields.reason}`, retry_after: duration(fields.retry_after), attempt: 1,
        },
      } as never;
    case "needs_reconciliation":
      return {
        outcome: "needs_reconciliation",
        needs_reconciliation: { operation_id: "op-1", fence: "14", attempts: fields.attempts },
      } as never;
  }
  return {} as never; // "unrecognised": an outcome added later decodes as none
}

function outcome(returns: Json | null | undefined): Success | Terminal | Retryable | Unknown | undefined {
  if (returns === null || returns === undefined) return undefined;
  if ("success" in returns) return new Success(Buffer.from(returns.success));
  if ("terminal" in returns) return new Terminal(returns.terminal);
  if ("retryable" in returns) return new Retryable(returns.retryable, "", returns.retry_after);
  return new Unknown(returns.unknown);
}

/** The scripted server, provider and clock of one scenario. */
class World {
  readonly name: string;
  readonly call: Json;
  readonly steps: Json[];
  taken = 0;
  now = ORIGIN;
  readonly tokens: Buffer[] = [];
  readonly firstSends = new Map<number, Buffer>();
  attempt: Attempt | undefined;
  renewals: Steps<void> | undefined;
  renewalsStarted = false;
  renewalsWakeAt: number | undefined;
  /** The first departure from the script: the protocol may catch what a step throws
   *  (an effect that threw is its outcome, a send's error is a status), so it is kept
   *  and reported. */
  failure: unknown;

  constructor(scenario: Json) {
    this.name = scenario.name;
    this.call = { lease: 30, attempt_duration: 300, deadline: 60, lookup: false, provider_deduplicates: false, lookup_interval: 1, ...scenario.call };
    this.steps = [...scenario.steps];
  }

  where(): string {
    return `'${this.name}', step ${this.taken + 1}`;
  }

  expect(action: string): Json {
    return this.noted(() => this.expectStep(action));
  }

  noted<T>(check: () => T): T {
    try {
      return check();
    } catch (failure) {
      this.failure ??= failure;
      throw failure;
    }
  }

  expectStep(action: string): Json {
    const step = this.steps[0];
    assert.ok(step !== undefined && "do" in step, `${this.where()}: the client does ${action}, the vector expects the call to end`);
    assert.equal(step.do, action, `${this.where()}: the client does ${action}`);
    if ("at" in step) {
      assert.ok(Math.abs(this.now - ORIGIN - step.at) < TOLERANCE, `${this.where()}: ${action} at ${this.now - ORIGIN}, the vector says ${step.at}`);
    }
    this.steps.shift();
    this.taken += 1;
    return step;
  }

  /** One call, re-sent as the client's retry layer decides: each send is a step. */
  async send(action: string, deadline: number | undefined, check: (step: Json) => void, extraTimeout = 0): Promise<[Json, number]> {
    return await callWithRetryAnswered(
      async () => {
        const step = this.expect(action);
        this.noted(() => check(step));
        this.now += step.takes ?? 0;
        if ("error" in step) {
          const [code, reason] = ERRORS[step.error as string]!;
          throw serviceError(code, reason, step.retry_after);
        }
        return step.answer as Json;
      },
      DEFAULT_RETRY,
      {
        deadline, extraTimeout, clock: () => this.now, uniform: (low) => low,
        sleep: async (delay) => {
          this.now += delay;
        },
      },
    );
  }

  async perform(step: Step): Promise<unknown> {
    if (step instanceof Call) return await this.sendCall(step);
    if (step instanceof Sleep) {
      this.now += step.seconds;
      return undefined;
    }
    if (step instanceof Guarded) return await this.guarded(step);
    if (step instanceof StartRenewing) {
      this.attempt = step.attempt;
      this.renewals = step.attempt.keepRenewing();
      this.renewalsStarted = false;
      this.renewalsWakeAt = undefined;
      return undefined;
    }
    if (step instanceof StopRenewing) {
      this.renewals?.return(undefined);
      this.renewals = undefined;
      return undefined;
    }
    throw new Error(`not a protocol step: ${String(step)}`);
  }

  async sendCall(call: Call): Promise<unknown> {
    // Each method's own arguments, read below per method.
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const args = call.args as any[];
    switch (call.method) {
      case "sendClaim": {
        const request = args[0] as pb.ClaimRequest;
        const [answer, sentAt] = await this.send("claim", args[1].deadline, (step) => {
          const number = this.tokens.findIndex((token) => token.equals(Buffer.from(request.claim_token))) + 1;
          assert.equal(number, step.token, `${this.where()}: the Claim's token`);
          const sent = Buffer.from(ClaimRequest.encode(request).finish());
          if (!this.firstSends.has(number)) this.firstSends.set(number, sent);
          assert.ok(this.firstSends.get(number)!.equals(sent), `${this.where()}: a re-sent Claim changed`);
          if ("wait" in step) {
            assert.ok(request.wait, `${this.where()}: a Claim without wait`);
            assert.ok(Math.abs(seconds(request.wait) - step.wait) < TOLERANCE, `${this.where()}: wait ${seconds(request.wait)}`);
          } else {
            assert.ok(!request.wait, `${this.where()}: a Claim with wait ${seconds(request.wait)}`);
          }
          assert.equal(seconds(request.lease), this.call.lease);
          assert.equal(seconds(request.max_attempt_duration), this.call.attempt_duration);
        }, request.wait ? seconds(request.wait) : 0);
        return [claimResponse(answer), sentAt];
      }
      case "sendRenew": {
        const [answer, sentAt] = await this.send("renew", args[2].deadline, () => {
          assert.equal(args[1], this.attempt?.fence, `${this.where()}: the Renew's fence`);
          assert.equal(args[2].lease, this.call.lease, `${this.where()}: the Renew's lease`);
        });
        return [{ lease: duration(answer.lease), attempt_deadline: duration(answer.attempt_deadline) }, sentAt];
      }
      case "complete":
        await this.send("complete", args[3].deadline, (step) => {
          assert.equal(Buffer.from(args[2]).toString(), step.body, `${this.where()}: the Complete's body`);
        });
        return { state: "OPERATION_STATE_SUCCEEDED" };
      case "fail": {
        const options = args[3];
        const [answer] = await this.send("fail", options.deadline, (step) => {
          assert.equal(args[2], `FAIL_DISPOSITION_${step.disposition}`, `${this.where()}: the Fail's disposition`);
          if ("code" in step) assert.equal(options.code, step.code, this.where());
          assert.equal(options.retryAfter, step.retry_after, `${this.where()}: the Fail's retry_after`);
        });
        return {
          state: `OPERATION_STATE_${answer.state}`,
          reason: answer.reason !== undefined ? `FAILURE_REASON_${answer.reason}` : "FAILURE_REASON_UNSPECIFIED",
          retry_after: answer.retry_after !== undefined ? duration(answer.retry_after) : null,
        };
      }
      case "lookup": {
        const [answer] = await this.send("lookup", undefined, () => undefined);
        return {
          operation: {
            operation_id: "op-1",
            state: `OPERATION_STATE_${answer.state}`,
            attempt: answer.attempt,
            result: "body" in answer ? { body: Buffer.from(answer.body), content_type: "", metadata: {} } : null,
            error: "error" in answer ? { reason: `FAILURE_REASON_${answer.reason}`, code: answer.error, message: "", metadata: {} } : null,
          },
        };
      }
    }
  }

  /** Runs the renewals up to their next pause, performing their sends. */
  async advanceRenewals(): Promise<void> {
    let answer: unknown;
    let error: unknown;
    let failed = false;
    for (;;) {
      const next = failed ? this.renewals!.throw(error) : this.renewals!.next(answer);
      if (next.done) {
        this.renewalsWakeAt = undefined;
        return;
      }
      if (next.value instanceof Sleep) {
        this.renewalsWakeAt = this.now + next.value.seconds;
        return;
      }
      failed = false;
      answer = undefined;
      try {
        answer = await this.perform(next.value);
      } catch (caught) {
        if (!(caught instanceof StatusError)) throw caught;
        error = caught;
        failed = true;
      }
    }
  }

  async guarded(step: Guarded): Promise<unknown> {
    const attempt = step.attempt;
    let script: Json = {};
    let takes = step.seconds;
    if (step.what !== "sleep") {
      script = this.expect(step.what === "effect" ? "effect" : "provider_lookup");
      if ("previous_outcome_unknown" in script) assert.equal(attempt.ctx.previousOutcomeUnknown, script.previous_outcome_unknown);
      takes = script.takes ?? 0;
    }
    if (this.renewals !== undefined && !this.renewalsStarted) {
      this.renewalsStarted = true;
      await this.advanceRenewals();
    }
    const ends = this.now + takes;
    for (;;) {
      const stop = Math.min(ends, attempt.cancelAt);
      if (this.renewalsWakeAt !== undefined && this.renewalsWakeAt < stop) {
        this.now = Math.max(this.now, this.renewalsWakeAt);
        this.renewalsWakeAt = undefined;
        await this.advanceRenewals();
        if (attempt.lost) throw attempt.interruption() ?? new Stopped();
        continue;
      }
      if (ends > attempt.cancelAt) {
        this.now = Math.max(this.now, attempt.cancelAt);
        throw attempt.interruption() ?? new Stopped();
      }
      this.now = ends;
      break;
    }
    if (script.raises) throw new Error("the scripted effect or lookup raised");
    return step.what === "sleep" ? undefined : outcome(script.returns);
  }

  async run(): Promise<[unknown, unknown]> {
    const steps = executeOnceSteps("payments.charge", "order-1", { jsonPayload: '{"amount":1000,"currency":"EUR"}' }, {
      lease: this.call.lease,
      attemptDuration: this.call.attempt_duration,
      deadline: this.call.deadline,
      hasLookup: this.call.lookup,
      providerDeduplicates: this.call.provider_deduplicates,
      lookupInterval: this.call.lookup_interval,
      maxAttempts: 0,
      clock: () => this.now,
      newClaimToken: () => {
        this.tokens.push(Buffer.from(`claim-token-${String(this.tokens.length + 1).padStart(4, "0")}`));
        return this.tokens[this.tokens.length - 1]!;
      },
    });
    let answer: unknown;
    let error: unknown;
    let failed = false;
    try {
      for (;;) {
        const next = failed ? steps.throw(error) : steps.next(answer);
        if (next.done) return [next.value, undefined];
        failed = false;
        answer = undefined;
        try {
          answer = await this.perform(next.value);
        } catch (caught) {
          error = caught;
          failed = true;
        }
      }
    } catch (raised) {
      return [undefined, raised];
    }
  }
}

function kind(error: unknown): string {
  if (error instanceof AttemptTimeoutError) return "ATTEMPT_TIMEOUT";
  if (error instanceof OutcomeUnknownError) return "OUTCOME_UNKNOWN";
  if (error instanceof OperationFailedError) return "OPERATION_FAILED";
  if (error instanceof PendingError) return "PENDING";
  if (error instanceof NeedsReconciliationError) return "NEEDS_RECONCILIATION";
  if (error instanceof SupersededError) return "SUPERSEDED";
  if (error instanceof UnrecognisedOutcomeError) return "UNRECOGNISED_OUTCOME";
  if (error instanceof StatusError) return "STATUS";
  throw error;
}

for (const scenario of scenarios) {
  test(`protocol vector: ${scenario.name}`, async () => {
    const world = new World(scenario);
    const [result, error] = await world.run();
    if (world.failure !== undefined) throw world.failure;
    if (error instanceof assert.AssertionError) throw error;
    assert.equal(world.steps.length, 1, `${world.where()}: the call ended (${String(error ?? JSON.stringify(result))}) before the vector's step ${JSON.stringify(world.steps[0])}`);
    const last = world.steps[0]!;
    if ("result" in last) {
      assert.equal(error, undefined, `'${world.name}': raised ${String(error)}, the vector expects a result`);
      const got = result as { body: Buffer; replayed: boolean; attempts: number };
      assert.deepEqual(
        { body: got.body.toString(), replayed: got.replayed, attempts: got.attempts },
        last.result,
        world.name,
      );
      return;
    }
    const expected = last.raises as Json;
    assert.notEqual(error, undefined, `'${world.name}': returned, the vector expects ${JSON.stringify(expected)}`);
    assert.equal(kind(error), expected.kind, `'${world.name}': raised ${String(error)}`);
    if (error instanceof OperationFailedError) {
      assert.equal(error.error.reason, `FAILURE_REASON_${expected.reason}`, world.name);
      assert.equal(error.replayed, expected.replayed, world.name);
    }
    if (error instanceof StatusError) {
      if ("reason" in expected) assert.equal(error.reason, expected.reason, world.name);
      if ("code" in expected) assert.equal(Code[error.code], expected.code, world.name);
    }
  });
}
