// Item 4: executeOnce's semantics, one test each, against a real server on each store.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import {
  AttemptTimeoutError, Client, Code, ConflictError, DeadlineExceededError, duration, type EffectContext, executeOnce,
  LeaseLostError, monotonic, NeedsReconciliationError, OperationFailedError, OutcomeUnknownError, PendingError,
  previousAttemptSettlesAt, Retryable, RetryPolicy, seconds, Success, Terminal, Unknown, UnrecognisedOutcomeError,
} from "../src/index.js";
import type { ClaimRequest, ClaimResponse, HistoryEntry, Ownership } from "../src/types.js";
import { eachStore, fastRetry, key, Provider, reconnectingRetry, type Server, startServer } from "./harness.js";
import { Proxy } from "./proxy.js";

const OP = "payments.charge";
const PAYLOAD = { amount: 1000, currency: "EUR" };
const sleep = (s: number) => new Promise((r) => setTimeout(r, s * 1000));

function charging(provider: Provider, seen?: EffectContext[], delay = 0) {
  return async (ctx: EffectContext) => {
    seen?.push(ctx);
    await sleep(delay);
    return new Success(provider.effect(ctx.operationId), "application/json");
  };
}

async function history(client: Client, operationId: string): Promise<string[]> {
  return (await historyEntries(client, operationId)).map((entry) => entry.event);
}

async function historyEntries(client: Client, operationId: string): Promise<HistoryEntry[]> {
  return (await client.lookup({ operationId }, { includeHistory: true })).history;
}

/** A fake Client whose Claims answer `answers` in turn, each as if sent `age` seconds
 *  before it returned, and whose Fails are recorded in `fails`. */
function fakeClient(
  answers: { response: Partial<ClaimResponse>; age?: number }[],
  rest: Record<string, unknown> = {},
  fails: { disposition: string; code: string; retryAfter: number | undefined }[] = [],
): Client {
  let next = 0;
  return {
    sendClaim: async () => {
      const answer = answers[Math.min(next++, answers.length - 1)]!;
      return [answer.response, monotonic() - (answer.age ?? 0)];
    },
    fail: async (_id: string, _fence: string, disposition: string, options: { code: string; retryAfter?: number }) => {
      fails.push({ disposition, code: options.code, retryAfter: options.retryAfter });
      return { state: "OPERATION_STATE_UNKNOWN", reason: "FAILURE_REASON_UNSPECIFIED", retry_after: null };
    },
    sendRenew: async () => {
      throw new DeadlineExceededError(Code.DEADLINE_EXCEEDED, "no time left to send the call");
    },
    ...rest,
  } as unknown as Client;
}

function ownership(lease: number, attempt: number, fence = "2"): Ownership {
  return { operation_id: "o", fence, attempt: Number(fence), max_attempts: 5, lease: duration(lease), attempt_deadline: duration(attempt) };
}

const COMPLETED: Partial<ClaimResponse> = {
  outcome: "completed",
  completed: {
    operation_id: "o", outcome: "result", result: { body: Buffer.from("stored"), content_type: "", metadata: {} },
    error: null, attempts: 3, state: "OPERATION_STATE_SUCCEEDED", completed_at: null,
  } as unknown as ClaimResponse["completed"],
};

/** An earlier owner that stalled: its lease (50 ms) runs out, nobody completes. */
async function abandonedAttempt(client: Client, k: string, attempt = 1.0, maxAttempts = 0): Promise<Ownership> {
  const claimed = await client.claim(OP, k, {
    jsonPayload: '{"amount":1000,"currency":"EUR"}', lease: 0.05, maxAttemptDuration: attempt, maxAttempts,
  });
  await sleep(0.1);
  return claimed.acquired!.ownership!;
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(() => assert.fail("resolved"), (e: unknown) => e);
}

test("previous_attempt_deadline counts from the Claim's reply", () => {
  const first = {
    ownership: { operation_id: "o", fence: "1", attempt: 2, max_attempts: 5, lease: null, attempt_deadline: duration(300) },
    previous_state: "OPERATION_STATE_UNKNOWN" as const, previous_fence: "1", previous_attempt_deadline: null,
  };
  assert.deepEqual(previousAttemptSettlesAt(first, 100), [undefined, 400]);
  assert.deepEqual(previousAttemptSettlesAt({ ...first, previous_attempt_deadline: duration(2.5) }, 100), [2.5, 102.5]);
});

test("an outcome this client does not know never executes", async () => {
  const provider = new Provider();
  const fake = { sendClaim: async () => [{}, monotonic()] } as unknown as Client;
  await assert.rejects(executeOnce(fake, OP, key(), PAYLOAD, charging(provider)), UnrecognisedOutcomeError);
  assert.deepEqual(provider.effects, []);
});

test("a Renew that fails transiently before the effect: the re-check declines NOT_STARTED and claims again", async () => {
  // A takeover whose earlier attempt settles just before this one's deadline: the
  // negative lookup is trusted then, but the Renew due before the effect finds no time
  // left to send. The lease is short, so the effect never starts: the attempt declines
  // (not UNKNOWN, which would push the doubt forward) and the next Claim answers.
  const provider = new Provider();
  const fails: { disposition: string; code: string; retryAfter: number | undefined }[] = [];
  const fake = fakeClient([
    {
      response: {
        outcome: "reconcile_first",
        reconcile_first: {
          ownership: ownership(0.2, 0.5),
          previous_state: "OPERATION_STATE_UNKNOWN", previous_fence: "1", previous_attempt_deadline: duration(0.3),
        },
      },
    },
    { response: COMPLETED },
  ], {}, fails);
  const result = await executeOnce(fake, OP, key(), PAYLOAD, charging(provider), {
    lookup: async () => undefined, lookupInterval: 0.1,
  });
  assert.ok(result.replayed);
  assert.equal(result.body.toString(), "stored");
  assert.deepEqual(provider.effects, []);
  assert.deepEqual(fails, [{ disposition: "FAIL_DISPOSITION_NOT_STARTED", code: "not_started", retryAfter: undefined }]);
});

test("too little of the attempt left on arrival: declines without renewing or running", async () => {
  const provider = new Provider();
  const fails: { disposition: string; code: string; retryAfter: number | undefined }[] = [];
  let renewed = 0;
  // A 2 s attempt (margin 0.2 s) whose Claim reply came 1.7 s after its send.
  const fake = fakeClient(
    [{ response: { outcome: "acquired", acquired: { ownership: ownership(30, 2, "1") } }, age: 1.7 }, { response: COMPLETED }],
    { sendRenew: async () => (renewed++, assert.fail("no Renew for an attempt that is over")) },
    fails,
  );
  const result = await executeOnce(fake, OP, key(), PAYLOAD, charging(provider));
  assert.ok(result.replayed);
  assert.deepEqual(provider.effects, []);
  assert.equal(renewed, 0);
  assert.deepEqual(fails.map((f) => f.disposition), ["FAIL_DISPOSITION_NOT_STARTED"]);
});

test("LEASE_LOST on the Renew before the effect claims again (nothing ran)", async () => {
  const provider = new Provider();
  const fails: { disposition: string; code: string; retryAfter: number | undefined }[] = [];
  // A 1 s lease whose Claim reply came 0.8 s after its send: renewed first, refused.
  const fake = fakeClient(
    [{ response: { outcome: "acquired", acquired: { ownership: ownership(1, 300, "1") } }, age: 0.8 }, { response: COMPLETED }],
    {
      sendRenew: async () => {
        throw new LeaseLostError(Code.ABORTED, "lease lost", { reason: "LEASE_LOST", metadata: { current_fence: "2" } });
      },
    },
    fails,
  );
  const result = await executeOnce(fake, OP, key(), PAYLOAD, charging(provider));
  assert.ok(result.replayed);
  assert.equal(result.body.toString(), "stored");
  assert.deepEqual(provider.effects, []);
  assert.deepEqual(fails, []);
});

test("a decline past the caller's deadline claims no more: PendingError", async () => {
  const provider = new Provider();
  const claims: number[] = [];
  const fake = fakeClient([{ response: { outcome: "acquired", acquired: { ownership: ownership(30, 2, "1") } }, age: 1.7 }]);
  const sendClaim = fake.sendClaim.bind(fake);
  fake.sendClaim = (request, options) => (claims.push(monotonic()), sendClaim(request, options));
  const pending = await rejection(executeOnce(fake, OP, key(), PAYLOAD, charging(provider), { deadline: 0 }));
  assert.ok(pending instanceof PendingError, String(pending));
  assert.equal(claims.length, 1);
  assert.deepEqual(provider.effects, []);
});

test("a decline the server answers FAILED replays what is stored", async () => {
  const provider = new Provider();
  const stored = { reason: "FAILURE_REASON_ATTEMPTS_EXHAUSTED", code: "not_started", message: "", metadata: {} };
  const fake = fakeClient([{ response: { outcome: "acquired", acquired: { ownership: ownership(30, 2, "5") } }, age: 1.7 }], {
    fail: async () => ({ state: "OPERATION_STATE_FAILED", reason: "FAILURE_REASON_ATTEMPTS_EXHAUSTED", retry_after: null }),
    lookup: async () => ({ operation: { operation_id: "o", state: "OPERATION_STATE_FAILED", error: stored, attempt: 5 }, history: [] }),
  });
  const failed = await rejection(executeOnce(fake, OP, key(), PAYLOAD, charging(provider)));
  assert.ok(failed instanceof OperationFailedError, String(failed));
  assert.ok(failed.replayed);
  assert.equal(failed.reason, "FAILURE_REASON_ATTEMPTS_EXHAUSTED");
  assert.deepEqual(provider.effects, []);
});

test("a negative lookup started before the earlier attempt settled is asked again", async () => {
  // The earlier attempt settles 0.3 s after the reply; the first lookup starts before
  // that and answers after it: its "nothing" proves nothing, so the provider is asked
  // again, and the second lookup finds the effect that landed meanwhile.
  const provider = new Provider();
  const completed: string[] = [];
  const fake = fakeClient([{
    response: {
      outcome: "reconcile_first",
      reconcile_first: {
        ownership: ownership(30, 10),
        previous_state: "OPERATION_STATE_UNKNOWN", previous_fence: "1", previous_attempt_deadline: duration(0.3),
      },
    },
  }], {
    complete: async (_id: string, _fence: string, body: Uint8Array) => (completed.push(Buffer.from(body).toString()), {}),
  });
  const asked: number[] = [];
  let earlier: Buffer | undefined;
  const result = await executeOnce(fake, OP, key(), PAYLOAD, charging(provider), {
    lookup: async () => {
      asked.push(monotonic());
      const seen = earlier;
      earlier ??= Buffer.from("the earlier attempt's charge"); // lands while the first lookup is in flight
      await sleep(0.5);
      return seen ? new Success(seen) : undefined;
    },
  });
  assert.deepEqual(provider.effects, []);
  assert.equal(asked.length, 2);
  assert.equal(result.body.toString(), "the earlier attempt's charge");
  assert.deepEqual(completed, ["the earlier attempt's charge"]);
});

eachStore("executeOnce", (store) => {
  let server: Server;
  let client: Client;
  let provider: Provider;
  before(async () => {
    server = await startServer(store);
    client = server.client();
  });
  after(async () => {
    client.close();
    await server.close();
  });
  const fresh = () => (provider = new Provider());

  test("success is completed and replayed without running", async () => {
    fresh();
    const k = key();
    const first = await executeOnce(client, OP, k, PAYLOAD, charging(provider));
    assert.equal(first.replayed, false);
    assert.equal(first.attempts, 1);
    const again = await client.executeOnce(OP, k, { currency: "EUR", amount: 1000 }, charging(provider));
    assert.ok(again.replayed);
    assert.deepEqual(again.body, first.body);
    assert.equal(again.operationId, first.operationId);
    assert.equal(provider.effects.length, 1);
    assert.deepEqual(await history(client, first.operationId), ["CLAIMED", "COMPLETED"]);
  });

  test("terminal is stored and replayed as a typed error", async () => {
    const k = key();
    const first = await rejection(executeOnce(client, OP, k, PAYLOAD, async () => new Terminal("card_declined", "insufficient funds", { decline_code: "51" })));
    assert.ok(first instanceof OperationFailedError);
    assert.equal(first.code, "card_declined");
    assert.equal(first.replayed, false);
    const ran: EffectContext[] = [];
    const replay = await rejection(executeOnce(client, OP, k, PAYLOAD, async (ctx) => (ran.push(ctx), new Success(Buffer.from("no")))));
    assert.ok(replay instanceof OperationFailedError);
    assert.ok(replay.replayed);
    assert.equal(replay.error.message, "insufficient funds");
    assert.deepEqual({ ...replay.error.metadata }, { decline_code: "51" });
    assert.equal(replay.reason, "FAILURE_REASON_TERMINAL");
    assert.deepEqual(ran, []);
  });

  test("retryable releases for a new attempt with a fresh claim_token", async () => {
    fresh();
    const tokens: Buffer[] = [];
    const spied = server.client();
    const sendClaim = spied.sendClaim.bind(spied);
    spied.sendClaim = (request: ClaimRequest, options) => (tokens.push(request.claim_token), sendClaim(request, options));
    const calls: number[] = [];
    try {
      const result = await executeOnce(spied, OP, key(), PAYLOAD, async (ctx) => {
        calls.push(ctx.attempt);
        if (calls.length === 1) return new Retryable("provider_busy", "", 0.05);
        return new Success(provider.effect(ctx.operationId));
      });
      assert.deepEqual(calls, [1, 2]);
      assert.equal(result.attempts, 2);
      assert.equal(provider.effects.length, 1);
      assert.ok(tokens.length >= 2);
      assert.equal(new Set(tokens.map((t) => t.toString("hex"))).size, tokens.length);
      assert.ok(tokens.every((t) => t.length === 16));
    } finally {
      spied.close();
    }
  });

  test("unknown and a throwing effect are reported unknown", async () => {
    const unknown = await rejection(executeOnce(client, OP, key(), PAYLOAD, async () => new Unknown("timeout", "provider did not answer")));
    assert.ok(unknown instanceof OutcomeUnknownError);
    assert.equal((await client.lookup({ operationId: unknown.operationId })).operation!.state, "OPERATION_STATE_UNKNOWN");
    const cause = new Error("provider hung up");
    const raised = await rejection(executeOnce(client, OP, key(), PAYLOAD, async () => { throw cause; }));
    assert.ok(raised instanceof OutcomeUnknownError);
    assert.equal(raised.cause, cause);
    assert.equal((await client.lookup({ operationId: raised.operationId })).operation!.state, "OPERATION_STATE_UNKNOWN");
  });

  test("renews while the effect runs", async () => {
    fresh();
    const result = await executeOnce(client, OP, key(), PAYLOAD, charging(provider, undefined, 0.5), { lease: 0.15, attemptDuration: 5 });
    const events = await history(client, result.operationId);
    assert.equal(events[0], "CLAIMED");
    assert.equal(events.at(-1), "COMPLETED");
    // Renewals of one fence coalesce into one entry with a count.
    const found = await client.lookup({ operationId: result.operationId }, { includeHistory: true });
    const renewed = found.history.filter((h) => h.event === "RENEWED").reduce((n, h) => n + Number(h.count), 0);
    assert.ok(renewed >= 3, `${renewed} renewals: ${events.join(",")}`);
    assert.ok(!events.includes("TAKEN_OVER"));
    assert.equal(provider.effects.length, 1);
  });

  test("the effect is aborted at the attempt deadline, then UNKNOWN", async () => {
    const contexts: EffectContext[] = [];
    let aborted = false;
    const started = monotonic();
    const timeout = await rejection(executeOnce(client, OP, key(), PAYLOAD, (ctx) => {
      contexts.push(ctx);
      return new Promise((_, reject) => {
        const timer = setTimeout(() => reject(new Error("never")), 60_000);
        ctx.signal.addEventListener("abort", () => {
          aborted = true;
          clearTimeout(timer);
          reject(new Error("aborted"));
        });
      });
      // A 3 s attempt leaves a 0.3 s margin (a tenth) to report UNKNOWN before the
      // deadline: 0.1 s (of a 1 s attempt) was missed on a loaded machine.
    }, { lease: 0.6, attemptDuration: 3.0 }));
    assert.ok(timeout instanceof AttemptTimeoutError, String(timeout));
    assert.ok(aborted);
    assert.ok(monotonic() - started < 3.0, "aborted before the deadline, to report it");
    assert.ok(contexts[0]!.cancelAt <= started + 3.0);
    const found = await client.lookup({ operationId: timeout.operationId }, { includeHistory: true });
    assert.equal(found.operation!.state, "OPERATION_STATE_UNKNOWN");
    assert.equal(found.history.at(-1)!.event, "OUTCOME_UNKNOWN");
  });

  test("a re-sent Claim whose lease is short on arrival renews before the effect", async () => {
    fresh();
    const proxy = await new Proxy(server.port).start();
    const proxied = new Client(proxy.addr, server.token, { retry: fastRetry });
    try {
      const seen: EffectContext[] = [];
      // Re-sent after 1.3 s of a 2 s lease: under half is left, 0.7 s of slack.
      const lease = 2.0;
      const attempt = 5.0;
      proxy.dropNextReply();
      proxy.connectDelay = 1.3;
      const started = monotonic();
      const result = await executeOnce(proxied, OP, key(), PAYLOAD, async (ctx) => {
        seen.push(ctx);
        const events = await history(client, ctx.operationId);
        assert.equal(events[0], "CLAIMED");
        assert.ok(events.includes("RENEWED"), `renewed before starting: ${events.join(",")}`);
        return new Success(provider.effect(ctx.operationId));
      }, { lease, attemptDuration: attempt });
      assert.equal(proxy.dropped, 1);
      assert.equal(provider.effects.length, 1);
      // The re-sent Claim (same claim_token) got the same ownership: one attempt.
      assert.equal(result.attempts, 1);
      // Counted from the answered send, which began after this call did.
      assert.ok(seen[0]!.cancelAt <= started + attempt);
    } finally {
      proxied.close();
      await proxy.close();
    }
  });

  test("a re-sent Claim counts its attempt from the answered send", async () => {
    fresh();
    const proxy = await new Proxy(server.port).start();
    const proxied = new Client(proxy.addr, server.token, {
      retry: new RetryPolicy({ initialBackoff: 0.02, maxBackoff: 0.2, callTimeout: 0.8 }),
    });
    try {
      // The first send's reply is held for 2 s, and with it every reply behind it on
      // that connection (this proxy holds the connection's frames in order, as the Rust
      // suite's byte relay does): the sends at 0 and ~0.8 s time out after 800 ms, and
      // the one at ~1.65 s is answered at ~2 s with what is left of the 3.5 s attempt at
      // its handling (~1.85 s) and of the 3 s lease (~1.35 s). Counted from that send,
      // the attempt ends at ~3.5 s and the lease at ~3 s: attempt 1 runs. Counted from
      // the first send, the attempt would end at ~1.85 s, before the answer even
      // arrived: attempt 1 would be declined and attempt 2 would run.
      proxy.delayNextReply(2);
      const attempts: number[] = [];
      const result = await executeOnce(proxied, OP, key(), PAYLOAD, async (ctx) => {
        attempts.push(ctx.attempt);
        return new Success(provider.effect(ctx.operationId));
      }, { lease: 3, attemptDuration: 3.5 });
      assert.equal(proxy.delayed, 1);
      assert.ok(proxy.replies >= 3, `the Claim was re-sent: ${proxy.replies} replies`);
      assert.deepEqual(attempts, [1], "attempt 1 ran");
      assert.equal(result.attempts, 1);
      assert.equal(provider.effects.length, 1);
      const events = (await history(client, result.operationId)).filter((event) => event !== "RENEWED");
      assert.deepEqual(events, ["CLAIMED", "COMPLETED"]);
    } finally {
      proxied.close();
      await proxy.close();
    }
  });

  test("a lease nearly spent on arrival is renewed before the effect", async () => {
    fresh();
    const proxy = await new Proxy(server.port).start();
    const proxied = new Client(proxy.addr, server.token, { retry: fastRetry });
    try {
      // The Claim's reply arrives 0.8 s after its send, with 0.2 s of a 1 s lease left:
      // renewed (the Renew's lease counts from the Renew's send), attempt 1 runs.
      proxy.delayNextReply(0.8);
      const attempts: number[] = [];
      const result = await executeOnce(proxied, OP, key(), PAYLOAD, async (ctx) => {
        attempts.push(ctx.attempt);
        return new Success(provider.effect(ctx.operationId));
      }, { lease: 1, attemptDuration: 10 });
      assert.equal(proxy.delayed, 1);
      assert.deepEqual(attempts, [1], "no attempt given up");
      assert.equal(result.attempts, 1);
      assert.equal(provider.effects.length, 1);
      assert.deepEqual(await history(client, result.operationId), ["CLAIMED", "RENEWED", "COMPLETED"]);
    } finally {
      proxied.close();
      await proxy.close();
    }
  });

  test("too little lease left never starts the effect", async () => {
    fresh();
    const proxy = await new Proxy(server.port).start();
    const proxied = new Client(proxy.addr, server.token, { retry: fastRetry });
    try {
      // The Claim's reply and then the Renew's both arrive 0.8 s after their sends, with
      // 0.2 s of a 1 s lease left: attempt 1 declines (Fail NOT_STARTED: released at
      // once), attempt 2 runs.
      proxy.delayNextReply(0.8);
      proxy.delayNextReply(0.8);
      const attempts: number[] = [];
      const result = await executeOnce(proxied, OP, key(), PAYLOAD, async (ctx) => {
        attempts.push(ctx.attempt);
        return new Success(provider.effect(ctx.operationId));
      }, { lease: 1, attemptDuration: 10 });
      assert.equal(proxy.delayed, 2);
      assert.deepEqual(attempts, [2], "attempt 1 never started");
      assert.equal(result.attempts, 2);
      assert.equal(provider.effects.length, 1);
      const entries = await historyEntries(client, result.operationId);
      // A Renew of attempt 1 still in flight when it declined lands refused, harmlessly.
      assert.deepEqual(
        entries
          .filter((e) => !(e.event === "STALE_WRITE_REFUSED" && e.detail === "renew"))
          .map((e) => e.event),
        ["CLAIMED", "RENEWED", "RETRY_SCHEDULED", "RETRY_STARTED", "COMPLETED"],
      );
      assert.equal(entries[2]!.detail, "not_started");
    } finally {
      proxied.close();
      await proxy.close();
    }
  });

  test("a declined takeover hands on the earlier attempt's doubt", async () => {
    // The long fault run's liveness failure: an attempt that declines because the doubt
    // it took over outlasts it must not push the doubt forward. The next attempt is told
    // the earlier attempt's deadline, waits it out and runs.
    fresh();
    const k = key();
    const attemptDuration = 4;
    // Attempt 1 claims with a 2 s lease and crashes: its effect may run until its
    // deadline, 4 s after its Claim.
    const first = await client.claim(OP, k, {
      jsonPayload: '{"amount":1000,"currency":"EUR"}', lease: 2, maxAttemptDuration: attemptDuration,
      claimToken: Buffer.from("crashed-attempt"),
    });
    const firstReplied = monotonic();
    assert.equal(first.outcome, "acquired");
    // This call's first Claim is told Pending; its next one waits (long poll, up to the
    // 5 s deadline) until attempt 1's lease runs out, 2 s after it was sent. Attempt 2
    // counts its 4 s from that send, so it would end (less its margin) before attempt
    // 1's doubt does: it declines, and attempt 3 is told attempt 1's deadline.
    const told: [number, number][] = [];
    const attempts: number[] = [];
    let ranAt = 0;
    const result = await executeOnce(client, OP, k, PAYLOAD, async (ctx) => {
      attempts.push(ctx.attempt);
      ranAt = monotonic();
      return new Success(provider.effect(ctx.operationId));
    }, {
      lookup: async (ctx) => {
        if (ctx.previousOutcomeUnknown) told.push([ctx.attempt, ctx.previousAttemptSettlesAt!]);
        const body = provider.records.get(ctx.operationId);
        return body ? new Success(body) : undefined;
      },
      lease: 3,
      attemptDuration,
      deadline: 5,
    });
    assert.equal(provider.effects.length, 1);
    const entries = await historyEntries(client, result.operationId);
    const events = entries.map((e) => `${e.event}/${e.attempt}/${e.detail}`).join(", ");
    assert.deepEqual(attempts, [3], `${events}; told ${JSON.stringify(told)}`);
    assert.deepEqual([...new Set(told.map(([attempt]) => attempt))], [2, 3]);
    const firstDeadline = firstReplied + attemptDuration;
    for (const [attempt, settlesAt] of told) {
      // Measured from a reply that came at most a little later.
      assert.ok(
        settlesAt <= firstDeadline + 0.7,
        `attempt ${attempt} was told the doubt lasts ${(settlesAt - firstDeadline).toFixed(3)}s past attempt 1's deadline`,
      );
    }
    // Attempt 3 waited out attempt 1's doubt (as it was told it) before running.
    assert.ok(ranAt >= told.filter(([attempt]) => attempt === 3).at(-1)![1], "ran before the doubt ended");
    // Attempt 2 renewed while it waited; the rest is one line each.
    const kept = entries.filter((e) => e.event !== "RENEWED");
    assert.deepEqual(kept.map((e) => e.event), ["CLAIMED", "TAKEN_OVER", "OUTCOME_UNKNOWN", "TAKEN_OVER", "COMPLETED"], events);
    assert.equal(kept[2]!.detail, "not_started");
  });

  test("Pending waits for the running attempt, then replays", async () => {
    fresh();
    const k = key();
    let markStarted!: () => void;
    const started = new Promise<void>((r) => (markStarted = r));
    const first = executeOnce(client, OP, k, PAYLOAD, async (ctx) => {
      markStarted();
      await sleep(0.4);
      return new Success(provider.effect(ctx.operationId));
    });
    await started;
    const waits: (number | undefined)[] = [];
    const spied = server.client();
    const sendClaim = spied.sendClaim.bind(spied);
    spied.sendClaim = (request: ClaimRequest, options) => (
      waits.push(request.wait ? seconds(request.wait) : undefined), sendClaim(request, options)
    );
    try {
      const second = await executeOnce(spied, OP, k, PAYLOAD, charging(provider));
      assert.ok(second.replayed);
      assert.deepEqual(second.body, (await first).body);
      assert.equal(provider.effects.length, 1);
      // Told Pending, it claimed again with a server-side wait instead of polling.
      assert.equal(waits.length, 2, String(waits));
      assert.equal(waits[0], undefined);
      assert.ok(waits[1]! > 1, String(waits));
    } finally {
      spied.close();
    }
  });

  test("Pending past the deadline throws without running", async () => {
    fresh();
    const k = key();
    let markStarted!: () => void;
    const started = new Promise<void>((r) => (markStarted = r));
    const first = executeOnce(client, OP, k, PAYLOAD, async (ctx) => {
      markStarted();
      await sleep(0.3);
      return new Success(provider.effect(ctx.operationId));
    });
    await started;
    const pending = await rejection(executeOnce(client, OP, k, PAYLOAD, charging(provider), { deadline: 0 }));
    assert.ok(pending instanceof PendingError);
    assert.ok(pending.retryAfter > 0);
    assert.equal(pending.reason, "PENDING_REASON_IN_PROGRESS");
    await first;
    assert.equal(provider.effects.length, 1);
  });

  test("ReconcileFirst with providerDeduplicates runs the effect with the context", async () => {
    fresh();
    const k = key();
    const stalled = await abandonedAttempt(client, k, 2.0);
    const seen: EffectContext[] = [];
    const result = await executeOnce(client, OP, k, PAYLOAD, charging(provider, seen), {
      providerDeduplicates: true, lease: 1, attemptDuration: 2.0,
    });
    assert.equal(provider.effects.length, 1);
    const ctx = seen[0]!;
    assert.ok(ctx.previousOutcomeUnknown);
    assert.equal(ctx.attempt, 2);
    assert.equal(ctx.previousFence, stalled.fence);
    assert.equal(ctx.operationId, stalled.operation_id); // the provider's key
    assert.equal(result.operationId, stalled.operation_id);
    // What is left of the abandoned attempt (2 s long, its lease long gone).
    assert.ok(ctx.previousAttemptDeadline !== undefined && ctx.previousAttemptDeadline > 0 && ctx.previousAttemptDeadline <= 2.0);
    assert.ok(ctx.previousAttemptSettlesAt !== undefined);
  });

  /** The operation's attempt deadline as stored, and its history without renewals. */
  async function doubt(operationId: string): Promise<[string, string[]]> {
    const found = await client.lookup({ operationId }, { includeHistory: true });
    const deadline = found.operation!.attempt_deadline_at!;
    const events = found.history.filter((e) => e.event !== "RENEWED")
      .map((e) => (e.event === "OUTCOME_UNKNOWN" ? `${e.event}/${e.detail}` : e.event));
    return [`${deadline.seconds}.${String(deadline.nanos).padStart(9, "0")}`, events];
  }

  test("ReconcileFirst without a lookup or providerDeduplicates runs nothing and keeps the doubt", async () => {
    fresh();
    const k = key();
    const stalled = await abandonedAttempt(client, k, 5.0);
    const [deadline] = await doubt(stalled.operation_id);
    const unknown = await rejection(executeOnce(client, OP, k, PAYLOAD, charging(provider), { lease: 1 }));
    assert.ok(unknown instanceof OutcomeUnknownError, String(unknown));
    assert.equal(unknown.operationId, stalled.operation_id);
    assert.match(unknown.message, /cannot check it: pass a lookup, or declare provider deduplication/);
    assert.deepEqual(provider.effects, []);
    // Declined (NOT_STARTED): the earlier attempt's deadline stays the doubt's end; an
    // UNKNOWN would have put this attempt's in its place.
    const [after, events] = await doubt(stalled.operation_id);
    assert.deepEqual(events.slice(1), ["TAKEN_OVER", "OUTCOME_UNKNOWN/not_started"]);
    assert.equal(after, deadline);
  });

  test("a lookup that throws declines NOT_STARTED and keeps the doubt", async () => {
    fresh();
    const k = key();
    const stalled = await abandonedAttempt(client, k, 5.0);
    const [deadline] = await doubt(stalled.operation_id);
    const cause = new Error("the provider's search is down");
    const unknown = await rejection(executeOnce(client, OP, k, PAYLOAD, charging(provider), {
      lookup: async () => { throw cause; },
      lease: 1,
    }));
    assert.ok(unknown instanceof OutcomeUnknownError, String(unknown));
    assert.equal(unknown.cause, cause);
    assert.deepEqual(provider.effects, []);
    const [after, events] = await doubt(stalled.operation_id);
    assert.deepEqual(events.slice(1), ["TAKEN_OVER", "OUTCOME_UNKNOWN/not_started"]);
    assert.equal(after, deadline);
  });

  test("a negative lookup in flight when the earlier effect lands is not trusted", async () => {
    // Issue 17's two charges, scaled down: the earlier owner (a 2.5 s attempt) stalls;
    // the takeover's lookups take 1 s and read the provider as they start. The first
    // reads it before the earlier charge lands (within the earlier attempt) and answers
    // "nothing" after that attempt's deadline. Trusted, it would charge again.
    fresh();
    const k = key();
    const attempt = 2.5;
    const jsonPayload = '{"amount":1000,"currency":"EUR"}';
    await client.claim(OP, key(), { jsonPayload, lease: 1 }); // a warm channel: the timeline below is the server's
    const sentAt = monotonic();
    const first = await client.claim(OP, k, { jsonPayload, lease: 1.5, maxAttemptDuration: attempt });
    const repliedAt = monotonic();
    const earlier = first.acquired!.ownership!;
    // The server counts the earlier attempt from its handling of that Claim, between
    // its send and its reply: it ends no sooner than sentAt + attempt, and no later
    // than repliedAt + attempt.
    await sleep(repliedAt + 1.75 - monotonic()); // its lease has run out
    let landing: Promise<void> | undefined;
    let landedAt = 0;
    const lookups: { askedAt: number; answeredAt: number; found: boolean; settlesAt: number }[] = [];
    const result = await executeOnce(client, OP, k, PAYLOAD, charging(provider), {
      lookup: async (ctx) => {
        const askedAt = monotonic();
        const body = provider.records.get(ctx.operationId);
        landing ??= sleep(0.1).then(() => {
          landedAt = monotonic();
          provider.effect(earlier.operation_id);
        });
        await sleep(1.0);
        lookups.push({ askedAt, answeredAt: monotonic(), found: body !== undefined, settlesAt: ctx.previousAttemptSettlesAt! });
        return body ? new Success(body) : undefined;
      },
      lease: 1,
    });
    await landing;
    const timeline = JSON.stringify(lookups.map((l) => [l.askedAt, l.answeredAt, l.found, l.settlesAt].map(
      (x) => (typeof x === "number" ? +(x - sentAt).toFixed(3) : x),
    )));
    // The scenario happened: the earlier charge landed within the earlier attempt, while
    // a lookup that had read the provider before it was in flight and answered
    // "nothing" once that attempt had settled.
    assert.ok(landedAt > 0 && landedAt < sentAt + attempt, `landed at ${(landedAt - sentAt).toFixed(3)}`);
    const straddling = lookups[0]!;
    assert.ok(!straddling.found && straddling.askedAt < landedAt && straddling.answeredAt >= straddling.settlesAt, timeline);
    assert.equal(provider.effects.length, 1, `two charges: ${timeline}`);
    assert.deepEqual(result.body, provider.records.get(earlier.operation_id));
    assert.equal(JSON.parse(result.body.toString()).charge, "ch_1");
    const again = await executeOnce(client, OP, k, PAYLOAD, charging(provider));
    assert.ok(again.replayed);
    assert.deepEqual(again.body, result.body);
  });

  test("a negative lookup is not trusted while the earlier attempt may run", async () => {
    fresh();
    const k = key();
    const claimedAt = monotonic();
    await abandonedAttempt(client, k, 1.0);
    const lookups: number[] = [];
    const ran: [number, EffectContext][] = [];
    // The takeover's attempt ends about when the abandoned one does: it waits the doubt
    // out and runs, or declines and the next attempt does; never sooner.
    const result = await executeOnce(client, OP, k, PAYLOAD, async (ctx) => {
      ran.push([monotonic(), ctx]);
      return new Success(provider.effect(ctx.operationId));
    }, {
      lookup: async () => (lookups.push(monotonic()), undefined),
      lease: 0.3,
      attemptDuration: 1.0,
      lookupInterval: 0.2,
    });
    assert.equal(provider.effects.length, 1);
    assert.equal(ran.length, 1);
    const [at, ctx] = ran[0]!;
    assert.ok(ctx.previousOutcomeUnknown && at >= ctx.previousAttemptSettlesAt!, "ran before the earlier attempt's deadline");
    assert.ok(at >= claimedAt + 0.95, `ran ${(at - claimedAt).toFixed(3)}s after the abandoned Claim`);
    assert.ok(lookups.length >= 2, String(lookups.length));
    assert.ok(result.attempts >= 2);
  });

  test("a lookup that finds the earlier effect records it", async () => {
    fresh();
    const k = key();
    const stalled = await abandonedAttempt(client, k, 2.0);
    // The stalled owner's effect lands meanwhile.
    const landing = sleep(0.3).then(() => provider.effect(stalled.operation_id));
    const result = await executeOnce(client, OP, k, PAYLOAD, charging(provider), {
      lookup: async (ctx) => {
        const body = provider.records.get(ctx.operationId);
        return body ? new Success(body) : undefined;
      },
      lease: 0.5,
      attemptDuration: 2.0,
      lookupInterval: 0.1,
    });
    await landing;
    assert.equal(provider.effects.length, 1);
    assert.deepEqual(result.body, provider.records.get(stalled.operation_id));
    const again = await executeOnce(client, OP, k, PAYLOAD, charging(provider));
    assert.ok(again.replayed);
    assert.deepEqual(again.body, result.body);
    assert.equal(provider.effects.length, 1);
  });

  test("LEASE_LOST looks up and never redoes", async () => {
    fresh();
    const proxy = await new Proxy(server.port).start();
    // Its Complete goes out just after the cut connection is restored.
    const proxied = new Client(proxy.addr, server.token, { retry: reconnectingRetry });
    try {
      const k = key();
      let takenOver = false;
      const result = await executeOnce(proxied, OP, k, PAYLOAD, async (ctx) => {
        provider.effect(ctx.operationId);
        proxy.cut(); // this owner's renewals fail; its lease lapses
        await sleep(0.8);
        const other = await client.claim(OP, k, { jsonPayload: '{"amount":1000,"currency":"EUR"}', lease: 5 });
        const owner = other.reconcile_first!.ownership!;
        await client.complete(owner.operation_id, owner.fence, Buffer.from("reconciled by another owner"));
        takenOver = true;
        proxy.restore();
        return new Success(Buffer.from("mine"));
      }, { lease: 0.5, attemptDuration: 5 }); // 0.15 s left too little on a loaded machine: declined
      assert.ok(takenOver);
      assert.equal(result.body.toString(), "reconciled by another owner");
      assert.ok(result.replayed);
      assert.equal(provider.effects.length, 1);
      const events = await history(client, result.operationId);
      assert.ok(events.includes("STALE_WRITE_REFUSED"), events.join(","));
    } finally {
      proxied.close();
      await proxy.close();
    }
  });

  test("NeedsReconciliation never executes", async () => {
    fresh();
    const k = key();
    const stalled = await abandonedAttempt(client, k, 1.0, 1);
    const needs = await rejection(executeOnce(client, OP, k, PAYLOAD, charging(provider), { maxAttempts: 1 }));
    assert.ok(needs instanceof NeedsReconciliationError);
    assert.equal(needs.operationId, stalled.operation_id);
    assert.deepEqual(provider.effects, []);
  });

  test("conflict", async () => {
    fresh();
    const k = key();
    const first = await executeOnce(client, OP, k, PAYLOAD, charging(provider));
    const conflict = await rejection(executeOnce(client, OP, k, { amount: 2000, currency: "EUR" }, charging(provider)));
    assert.ok(conflict instanceof ConflictError);
    assert.equal(conflict.operationId, first.operationId);
    assert.equal(provider.effects.length, 1);
  });

  test("renewals stop once the lease reaches the attempt deadline", async () => {
    const timeout = await rejection(executeOnce(client, OP, key(), PAYLOAD, (ctx) =>
      new Promise((_, reject) => ctx.signal.addEventListener("abort", () => reject(new Error("aborted")))),
    { lease: 3, attemptDuration: 4 }));
    assert.ok(timeout instanceof AttemptTimeoutError);
    // Seconds, not tenths: on a loaded machine a Renew due 0.2 s in could arrive past a
    // 0.8 s deadline.
    // The first Renew (a third into the lease) is granted up to the deadline; renewing
    // again could only shrink towards it, call after call.
    const found = await client.lookup({ operationId: timeout.operationId }, { includeHistory: true });
    const renewed = found.history.filter((h) => h.event === "RENEWED").reduce((n, h) => n + Number(h.count), 0);
    // (A second one when the first was granted a hair short of the deadline: the Claim
    // took longer to reach the server than the Renew did. Without the stop, three or more.)
    assert.ok(renewed >= 1 && renewed <= 2, `renewed ${renewed} times: ${found.history.map((h) => h.event).join(",")}`);
  });
});
