// Item 2: the retry taxonomy, in one place (src/retry.ts). Unit tests with a fake clock.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  callWithRetry, callWithRetryAnswered, Code, InternalError, NEVER_RETRIED_CODES, RequestTooLargeError, RETRIED_CODES, RetryPolicy,
  StatusError, UnavailableError,
} from "../src/index.js";
import { serviceError } from "./details.js";

class Clock {
  now = 0;
  sleeps: number[] = [];
  read = (): number => this.now;
  sleep = async (delay: number): Promise<void> => {
    this.sleeps.push(delay);
    this.now += delay;
  };
}

function script(...failures: Error[]): { timeouts: number[]; send: (timeout: number) => Promise<string> } {
  const timeouts: number[] = [];
  const queue = [...failures];
  return {
    timeouts,
    send: async (timeout: number) => {
      timeouts.push(timeout);
      const next = queue.shift();
      if (next) throw next;
      return "ok";
    },
  };
}

for (const code of RETRIED_CODES) {
  test(`${Code[code]} is re-sent with exponential backoff and full jitter`, async () => {
    const clock = new Clock();
    const draws: [number, number][] = [];
    const uniform = (low: number, high: number) => {
      draws.push([low, high]);
      return high; // the top of the jitter range
    };
    const { timeouts, send } = script(serviceError(code), serviceError(code), serviceError(code));
    const policy = new RetryPolicy({ initialBackoff: 0.1, multiplier: 2, maxBackoff: 0.25, callTimeout: 3 });
    assert.equal(await callWithRetry(send, policy, { sleep: clock.sleep, uniform, clock: clock.read }), "ok");
    assert.equal(timeouts.length, 4);
    // Full jitter: uniform(0, cap), the cap growing exponentially up to maxBackoff.
    assert.deepEqual(draws, [[0, 0.1], [0, 0.2], [0, 0.25]]);
    assert.deepEqual(clock.sleeps, [0.1, 0.2, 0.25]);
  });
}

test("RetryInfo sets the least delay", async () => {
  const clock = new Clock();
  const { send } = script(serviceError(Code.UNAVAILABLE, "STORE_UNAVAILABLE", 0.7));
  await callWithRetry(send, new RetryPolicy(), { sleep: clock.sleep, uniform: () => 0, clock: clock.read });
  assert.equal(clock.sleeps.length, 1);
  assert.ok(Math.abs(clock.sleeps[0]! - 0.7) < 1e-9);
});

for (const code of NEVER_RETRIED_CODES) {
  test(`${Code[code]} is never re-sent`, async () => {
    const clock = new Clock();
    const { timeouts, send } = script(serviceError(code, "SOMETHING"));
    const error = await callWithRetry(send, new RetryPolicy(), { sleep: clock.sleep, clock: clock.read }).then(
      () => assert.fail("resolved"),
      (e: unknown) => e,
    );
    assert.ok(error instanceof StatusError);
    assert.equal(error.code, code);
    assert.equal(timeouts.length, 1);
    assert.deepEqual(clock.sleeps, []);
  });
}

test("REQUEST_TOO_LARGE is never re-sent, but a shed call is", async () => {
  const clock = new Clock();
  const tooLarge = script(serviceError(Code.RESOURCE_EXHAUSTED, "REQUEST_TOO_LARGE"));
  const error = await callWithRetry(tooLarge.send, new RetryPolicy(), { sleep: clock.sleep, clock: clock.read }).then(
    () => assert.fail("resolved"),
    (e: unknown) => e,
  );
  assert.ok(error instanceof RequestTooLargeError);
  assert.equal(tooLarge.timeouts.length, 1);
  const shed = script(
    serviceError(Code.RESOURCE_EXHAUSTED, "TENANT_CONCURRENCY_LIMIT", 0.1),
    serviceError(Code.UNAVAILABLE, "OVERLOADED", 0.1),
  );
  assert.equal(await callWithRetry(shed.send, new RetryPolicy(), { sleep: clock.sleep, clock: clock.read }), "ok");
  assert.equal(shed.timeouts.length, 3);
});

test("idemd's INTERNAL is not re-sent, but a broken transport is", async () => {
  const clock = new Clock();
  let { timeouts, send } = script(serviceError(Code.INTERNAL, "INTERNAL"));
  await assert.rejects(callWithRetry(send, new RetryPolicy(), { sleep: clock.sleep, clock: clock.read }), InternalError);
  assert.equal(timeouts.length, 1);
  ({ timeouts, send } = script(serviceError(Code.INTERNAL), serviceError(Code.UNKNOWN)));
  assert.equal(await callWithRetry(send, new RetryPolicy(), { sleep: clock.sleep, clock: clock.read }), "ok");
  assert.equal(timeouts.length, 3);
});

test("an error that is not a gRPC status counts as a broken transport", async () => {
  const clock = new Clock();
  const { timeouts, send } = script(new Error("socket hang up"));
  assert.equal(await callWithRetry(send, new RetryPolicy(), { sleep: clock.sleep, clock: clock.read }), "ok");
  assert.equal(timeouts.length, 2);
});

test("the count of sends bounds re-sends", async () => {
  const clock = new Clock();
  const { timeouts, send } = script(...Array.from({ length: 10 }, () => serviceError(Code.UNAVAILABLE)));
  await assert.rejects(
    callWithRetry(send, new RetryPolicy({ maxSends: 3 }), { sleep: clock.sleep, clock: clock.read }),
    UnavailableError,
  );
  assert.equal(timeouts.length, 3);
});

test("the total deadline bounds re-sends and each call", async () => {
  const clock = new Clock();
  let { timeouts, send } = script(...Array.from({ length: 10 }, () => serviceError(Code.UNAVAILABLE, undefined, 0.4)));
  const policy = new RetryPolicy({ maxSends: 100, totalTimeout: 1.0, callTimeout: 5.0 });
  await assert.rejects(callWithRetry(send, policy, { sleep: clock.sleep, clock: clock.read }), UnavailableError);
  // Sends at 0, 0.4, 0.8; the next would start after the deadline.
  assert.equal(timeouts.length, 3);
  assert.equal(timeouts[0], 1.0);
  assert.ok(Math.abs(timeouts[1]! - 0.6) < 1e-9 && Math.abs(timeouts[2]! - 0.2) < 1e-9, timeouts.join(","));
  ({ timeouts, send } = script());
  await callWithRetry(send, policy, { deadline: 0.5, sleep: clock.sleep, clock: () => 0 });
  assert.deepEqual(timeouts, [0.5]);
});

test("a Claim's wait is added to each send's timeout", async () => {
  const { timeouts, send } = script();
  await callWithRetry(send, new RetryPolicy({ callTimeout: 2 }), { extraTimeout: 3, clock: () => 0 });
  assert.deepEqual(timeouts, [5]);
});

test("the answer comes with the start of the send it answers, not the first send's", async () => {
  const clock = new Clock();
  const starts: number[] = [];
  const failures = [serviceError(Code.UNAVAILABLE, undefined, 0.5), serviceError(Code.DEADLINE_EXCEEDED)];
  const send = async (timeout: number) => {
    starts.push(clock.now);
    clock.now += 0.25; // each send takes a while, answered or not
    const next = failures.shift();
    if (next) throw next;
    return `answered in ${timeout}`;
  };
  const policy = new RetryPolicy({ initialBackoff: 0.1, callTimeout: 3 });
  const [value, sentAt] = await callWithRetryAnswered(send, policy, { sleep: clock.sleep, uniform: (_, high) => high, clock: clock.read });
  assert.equal(value, "answered in 3");
  // Sends at 0, 0.75 (after 0.25 and RetryInfo's 0.5), 1.2 (after 0.25 and 0.2).
  assert.equal(starts.length, 3);
  assert.ok(Math.abs(sentAt - 1.2) < 1e-9, String(sentAt));
  assert.equal(sentAt, starts[2]);
});
