// Item 1: a typed wrapper over every RPC, the bearer token on every call, google.rpc
// details decoded into typed errors. Against a real server on each store.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import {
  AttemptDeadlinePassedError, AttemptStillRunningError, Client, Code, ConflictError, fromStatus,
  InternalError, InvalidArgumentError, type ListOperationsOptions, type ListOperationsOrder,
  type ListOperationsResponse, LeaseLostError, LeaseStillLiveError, NotFoundError,
  OperationTerminalError, PermissionDeniedError, RequestMismatchError, ResourceExhaustedError,
  ResultExpiredError, RetryPolicy, StateForbidsError, UnauthenticatedError, UnavailableError,
  type StatusError,
} from "../src/index.js";
import { statusBytes } from "./details.js";
import { eachStore, key, type Server, startServer } from "./harness.js";

const JSON_PAYLOAD = '{"amount":1000,"currency":"EUR"}';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

eachStore("client", (store) => {
  let server: Server;
  let client: Client;
  before(async () => {
    server = await startServer(store, { IDEMD_SWEEP_INTERVAL: "50ms" });
    client = server.client();
  });
  after(async () => {
    client.close();
    await server.close();
  });

  test("every RPC round-trips", async () => {
    const k = key();
    const claimed = await client.claim("payments.charge", k, { jsonPayload: JSON_PAYLOAD, lease: 5, claimToken: Buffer.from("t1") });
    assert.equal(claimed.outcome, "acquired");
    const owner = claimed.acquired!.ownership!;
    assert.equal(owner.attempt, 1);
    assert.ok(BigInt(owner.fence) > 0n);
    const renewed = await client.renew(owner.operation_id, owner.fence, { lease: 5 });
    assert.ok(Number(renewed.lease!.seconds) <= 5);
    const done = await client.complete(owner.operation_id, owner.fence, Buffer.from('{"charge":"ch_1"}'), {
      contentType: "application/json",
      metadata: { provider: "fake" },
    });
    assert.equal(done.state, "OPERATION_STATE_SUCCEEDED");
    const replay = await client.claim("payments.charge", k, { jsonPayload: '{"currency":"EUR","amount":1000}' });
    assert.equal(replay.outcome, "completed");
    assert.equal(replay.completed!.result!.body.toString(), '{"charge":"ch_1"}');
    assert.deepEqual({ ...replay.completed!.result!.metadata }, { provider: "fake" });
    const found = await client.lookup({ operation: "payments.charge", key: k }, { includeHistory: true });
    assert.equal(found.operation!.operation_id, owner.operation_id);
    assert.deepEqual(found.history.map((h) => h.event), ["CLAIMED", "RENEWED", "COMPLETED"]);
    const byId = await client.lookup({ operationId: owner.operation_id });
    assert.equal(byId.operation!.state, "OPERATION_STATE_SUCCEEDED");

    // Fail UNKNOWN, then a reconciler finds it in ListUnresolved and settles it.
    const other = (await client.claim("payments.charge", key(), { bytesPayload: Buffer.from("x"), lease: 5 })).acquired!.ownership!;
    const failed = await client.fail(other.operation_id, other.fence, "FAIL_DISPOSITION_UNKNOWN", {
      code: "timeout",
      message: "provider timed out",
    });
    assert.equal(failed.state, "OPERATION_STATE_UNKNOWN");
    const page = await client.listUnresolved({ operation: "payments.charge", pageSize: 10 });
    assert.ok(page.operations.map((op) => op.operation_id).includes(other.operation_id));
    const settled = await client.reconcile(other.operation_id, other.fence, { succeeded: { body: Buffer.from("found") } });
    assert.equal(settled.state, "OPERATION_STATE_SUCCEEDED");
    assert.ok(BigInt(settled.fence) > BigInt(other.fence));
  });

  test("retryable and terminal failures", async () => {
    const owner = (await client.claim("jobs.run", key(), { bytesPayload: Buffer.from("job") })).acquired!.ownership!;
    const retry = await client.fail(owner.operation_id, owner.fence, "FAIL_DISPOSITION_RETRYABLE", { code: "busy", retryAfter: 0.01 });
    assert.equal(retry.state, "OPERATION_STATE_RETRY_WAIT");
    const second = (await client.claim("jobs.run", key(), { bytesPayload: Buffer.from("job2") })).acquired!.ownership!;
    const final = await client.fail(second.operation_id, second.fence, "FAIL_DISPOSITION_TERMINAL", { code: "card_declined" });
    assert.equal(final.state, "OPERATION_STATE_FAILED");
  });

  test("refusals are typed errors", async () => {
    const k = key();
    const first = (await client.claim("payments.charge", k, { jsonPayload: JSON_PAYLOAD, lease: 0.05 })).acquired!.ownership!;
    const conflict = await client
      .claim("payments.charge", k, { jsonPayload: '{"amount":2000,"currency":"EUR"}' })
      .then(() => assert.fail("no conflict"), (e: unknown) => e);
    assert.ok(conflict instanceof ConflictError);
    assert.equal(conflict.reason, "IDEMPOTENCY_KEY_REUSED");
    assert.equal(conflict.operationId, first.operation_id);
    assert.equal(conflict.code, Code.FAILED_PRECONDITION);

    await sleep(100); // the first owner's lease runs out
    const taken = await client.claim("payments.charge", k, { jsonPayload: JSON_PAYLOAD, lease: 5 });
    assert.equal(taken.outcome, "reconcile_first");
    const second = taken.reconcile_first!.ownership!;
    const lost = await client.complete(first.operation_id, first.fence, Buffer.from("late")).then(() => assert.fail(), (e: unknown) => e);
    assert.ok(lost instanceof LeaseLostError);
    assert.equal(lost.currentFence, second.fence);
    assert.equal(lost.state, "IN_PROGRESS");
    assert.equal(lost.operationId, first.operation_id);

    await client.complete(second.operation_id, second.fence, Buffer.from("one"));
    await assert.rejects(client.complete(second.operation_id, second.fence, Buffer.from("two")), RequestMismatchError);
    const terminal = await client.renew(second.operation_id, second.fence).then(() => assert.fail(), (e: unknown) => e);
    assert.ok(terminal instanceof OperationTerminalError);
    assert.equal(terminal.state, "SUCCEEDED");

    const invalid = await client.claim("payments charge!", "", { jsonPayload: "{" }).then(() => assert.fail(), (e: unknown) => e);
    assert.ok(invalid instanceof InvalidArgumentError);
    const fields = new Set(invalid.violations.map((v) => v.field));
    assert.ok(fields.has("scope.key") && fields.has("scope.operation"), [...fields].join(","));
    assert.equal(invalid.reason, "INVALID_REQUEST");

    const missing = await client.lookup({ operationId: "01a2269b-92ba-727d-ab2a-b74a6876d78e" }).then(() => assert.fail(), (e: unknown) => e);
    assert.ok(missing instanceof NotFoundError);
    assert.equal(missing.reason, "OPERATION_NOT_FOUND");
  });

  test("the bearer token goes on every call", async () => {
    const stranger = new Client(server.addr, "idem_" + "0".repeat(64));
    try {
      const refused = await stranger.claim("payments.charge", key(), { jsonPayload: JSON_PAYLOAD }).then(() => assert.fail(), (e: unknown) => e);
      assert.ok(refused instanceof UnauthenticatedError);
      assert.equal(refused.reason, "INVALID_CREDENTIALS");
      await assert.rejects(stranger.listUnresolved(), UnauthenticatedError);
    } finally {
      stranger.close();
    }
    assert.ok(Array.isArray((await client.listUnresolved()).operations));
  });

  test("listOperations filters, orders and pages", async () => {
    // A tenant of its own: the listing counts every operation it has.
    const own = new Client(server.addr, server.createTenant());
    try {
      const ledger: string[] = [];
      let last: { operation_id: string; fence: string } | undefined;
      for (let n = 0; n < 3; n++) {
        last = (await own.claim("ledger.post", key(), { bytesPayload: Buffer.from(String(n)), lease: 5 })).acquired!.ownership!;
        ledger.push(last.operation_id);
      }
      await own.fail(last!.operation_id, last!.fence, "FAIL_DISPOSITION_UNKNOWN", { code: "timeout" });
      for (let n = 0; n < 2; n++) await own.claim("mail.send", key(), { bytesPayload: Buffer.from(String(n)), lease: 5 });

      const page = await own.listOperations({ filter: "op:ledger.*" });
      assert.deepEqual(page.operations.map((op) => op.operation_id), ledger);
      assert.equal(page.next_page_token, "");
      assert.ok(page.operations.every((op) => op.scope!.operation === "ledger.post"));
      const unknown = await own.listOperations({ filter: "op:ledger.* state:unknown" });
      assert.deepEqual(unknown.operations.map((op) => op.operation_id), [last!.operation_id]);
      assert.equal(unknown.operations[0]!.state, "OPERATION_STATE_UNKNOWN");
      assert.equal((await own.listOperations()).operations.length, 5);
      // The option and message types come from the package entry.
      const order: ListOperationsOrder = "ORDER_NEWEST_FIRST";
      const options: ListOperationsOptions = { filter: "op:ledger.*", order };
      const newest: ListOperationsResponse = await own.listOperations(options);
      assert.deepEqual(newest.operations.map((op) => op.operation_id), [...ledger].reverse());

      // One at a time: each once, in order, and the last page says there is no more.
      const seen: string[] = [];
      let pageToken = "";
      for (let pages = 0; pages < 10; pages++) {
        const one = await own.listOperations({ filter: "op:ledger.*", pageSize: 1, pageToken });
        assert.ok(one.operations.length <= 1);
        seen.push(...one.operations.map((op) => op.operation_id));
        pageToken = one.next_page_token;
        if (pageToken === "") break;
      }
      assert.deepEqual(seen, ledger);
    } finally {
      own.close();
    }
  });

  test("listOperations refuses a bad filter and a token without the reconcile scope", async () => {
    const invalid = await client.listOperations({ filter: "op:ledger.* age:10m" }).then(() => assert.fail(), (e: unknown) => e);
    assert.ok(invalid instanceof InvalidArgumentError);
    assert.equal(invalid.reason, "INVALID_REQUEST");
    assert.equal(invalid.code, Code.INVALID_ARGUMENT);
    assert.equal(invalid.violations.length, 1);
    assert.equal(invalid.violations[0]!.field, "filter");
    assert.ok(invalid.violations[0]!.description.startsWith("at character 16: `age` takes"), invalid.violations[0]!.description);

    // A token of the operations scope alone may claim, not list.
    const operationsOnly = server.run("tenant", "create", `ts-ops-${key().slice(2, 14)}`, "--scopes", "operations");
    const caller = new Client(server.addr, operationsOnly);
    try {
      await caller.claim("ledger.post", key(), { bytesPayload: Buffer.from("x") });
      const denied = await caller.listOperations({ filter: "op:ledger.*" }).then(() => assert.fail(), (e: unknown) => e);
      assert.ok(denied instanceof PermissionDeniedError);
      assert.equal(denied.reason, "MISSING_SCOPE");
      assert.equal(denied.code, Code.PERMISSION_DENIED);
      assert.equal(denied.metadata.scope, "reconcile");
    } finally {
      caller.close();
    }
  });

  test("a claim on a tombstone is ResultExpiredError", async () => {
    const k = key();
    // Retention as short as the server allows: never below the retry window (one attempt of
    // two seconds here).
    const owner = (
      await client.claim("reports.send", k, {
        bytesPayload: Buffer.from("r"),
        lease: 1,
        maxAttemptDuration: 2,
        maxAttempts: 1,
        retention: 2,
      })
    ).acquired!.ownership!;
    await client.complete(owner.operation_id, owner.fence, Buffer.from("sent"));
    const end = Date.now() + 10_000;
    for (;;) {
      const outcome = await client.claim("reports.send", k, { bytesPayload: Buffer.from("r") }).then(() => undefined, (e: unknown) => e);
      if (outcome instanceof ResultExpiredError) {
        assert.equal(outcome.operationId, owner.operation_id);
        break;
      }
      assert.equal(outcome, undefined);
      assert.ok(Date.now() < end, "the sweeper never made a tombstone");
      await sleep(50);
    }
  });
});

test("a dead address is UNAVAILABLE without a reason", async () => {
  const nowhere = new Client("127.0.0.1:1", "t", { retry: new RetryPolicy({ maxSends: 2, initialBackoff: 0.01, callTimeout: 2 }) });
  try {
    const error = await nowhere.lookup({ operationId: "x" }).then(() => assert.fail(), (e: unknown) => e);
    assert.ok(error instanceof UnavailableError, String(error));
    assert.equal(error.reason, undefined);
  } finally {
    nowhere.close();
  }
});

test("RetryInfo, BadRequest and reasons decode without a server", () => {
  const info: [string, object] = ["google.rpc.ErrorInfo", { reason: "STORE_UNAVAILABLE", domain: "idem.v1" }];
  const retry: [string, object] = ["google.rpc.RetryInfo", { retry_delay: { nanos: 200_000_000 } }];
  const unavailable = fromStatus(Code.UNAVAILABLE, "busy", statusBytes(Code.UNAVAILABLE, info, retry));
  assert.ok(unavailable instanceof UnavailableError);
  assert.ok(Math.abs(unavailable.retryAfter! - 0.2) < 1e-9);
  assert.equal(unavailable.reason, "STORE_UNAVAILABLE");
  const exhausted = fromStatus(Code.RESOURCE_EXHAUSTED, "shed", statusBytes(Code.RESOURCE_EXHAUSTED, retry));
  assert.ok(exhausted instanceof ResourceExhaustedError);
  assert.ok(Math.abs(exhausted.retryAfter! - 0.2) < 1e-9);
  const bad = fromStatus(Code.INVALID_ARGUMENT, "bad", statusBytes(Code.INVALID_ARGUMENT, [
    "google.rpc.BadRequest", { field_violations: [{ field: "scope.key", description: "empty" }] },
  ]));
  assert.ok(bad instanceof InvalidArgumentError);
  assert.deepEqual(bad.violations, [{ field: "scope.key", description: "empty" }]);
  const garbage = fromStatus(Code.INTERNAL, "x", Buffer.from("\xff\xff not a status", "latin1"));
  assert.ok(garbage instanceof InternalError);
  assert.equal(garbage.reason, undefined);
  const cases: [string, typeof StatusError][] = [
    ["RESULT_EXPIRED", ResultExpiredError],
    ["LEASE_STILL_LIVE", LeaseStillLiveError],
    ["ATTEMPT_STILL_RUNNING", AttemptStillRunningError],
    ["ATTEMPT_DEADLINE_PASSED", AttemptDeadlinePassedError],
    ["STATE_FORBIDS", StateForbidsError],
  ];
  for (const [reason, cls] of cases) {
    const error = fromStatus(Code.FAILED_PRECONDITION, "", statusBytes(Code.FAILED_PRECONDITION, [
      "google.rpc.ErrorInfo", { reason, domain: "idem.v1", metadata: { operation_id: "o" } },
    ]));
    assert.equal(error.constructor, cls);
    assert.equal(error.operationId, "o");
  }
  assert.equal(fromStatus(Code.PERMISSION_DENIED, "").constructor, PermissionDeniedError);
});
