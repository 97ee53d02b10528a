// A rolling deployment that changes how a request is normalised (docs/api.md, "Changing
// the normalisation while operations are in flight"), against a real idemd on each
// store: the old version claims operations under one fingerprint; the new one, which
// computes another for the same intent, sends the old one as previous_fingerprints, and
// its retries replay or take over instead of conflicting. A genuinely different request
// still conflicts, and without the previous fingerprints the same retry conflicts.
import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import type { Server as HttpServer } from "node:http";
import { after, before, test } from "node:test";
import express from "express";
import {
  checkPreviousFingerprints, type Client, ConflictError, type EffectContext, executeOnce, fingerprintJson,
  idempotency, type IdempotencyOptions, InvalidArgumentError, MAX_PREVIOUS_FINGERPRINTS, scopedKey, Selector,
  type SelectorFields, Success,
} from "../src/index.js";
import { eachStore, key, type Server, startServer } from "./harness.js";
import { Proxy } from "./proxy.js";

const OP = "payments.charge";

/** The old version's request: the currency was implied. */
const oldPayload = (amount: number): Record<string, unknown> => ({ amount });
/** The new version writes the default currency out: the same intent, another document. */
const newPayload = (amount: number): Record<string, unknown> => ({ amount, currency: "EUR" });
/** What the new version sends as previous_fingerprints: the old normalisation's. */
const previousOf = (amount: number): Buffer[] => [fingerprintJson(JSON.stringify(oldPayload(amount)))];

const sleep = (s: number): Promise<void> => new Promise((r) => setTimeout(r, s * 1000));

function refusalOf(error: unknown): string[] {
  assert.ok(error instanceof InvalidArgumentError, String(error));
  return error.violations.map((violation) => violation.field);
}

test("previous fingerprints are checked locally as the server checks them", () => {
  const good = Buffer.alloc(32, 7);
  assert.deepEqual(checkPreviousFingerprints([]), []);
  assert.deepEqual(checkPreviousFingerprints(Array(MAX_PREVIOUS_FINGERPRINTS).fill(good)).length, 4);
  const fields = (previous: Uint8Array[]): string[] => {
    try {
      checkPreviousFingerprints(previous);
    } catch (error) {
      return refusalOf(error);
    }
    return assert.fail("accepted");
  };
  assert.deepEqual(fields(Array(5).fill(good)), ["previous_fingerprints"]);
  assert.deepEqual(fields([good, Buffer.alloc(31)]), ["previous_fingerprints[1]"]);
  assert.deepEqual(fields([Buffer.alloc(33)]), ["previous_fingerprints[0]"]);
});

test("more than four previous selectors are refused when the middleware is made", () => {
  const client = {} as Client; // never called: idempotency() refuses first
  assert.throws(() => idempotency({ client, previousSelectors: Array(5).fill({ include: ["/amount"] }) }), RangeError);
  assert.throws(() => idempotency({ client, previousSelectors: [{ include: ["amount"] }] }), /does not start with/);
});

eachStore("migration window", (store) => {
  let server: Server;
  let client: Client;
  before(async () => {
    server = await startServer(store);
    client = server.client();
  });
  after(async () => {
    client.close();
    await server.close();
  });

  /** Counts charges, the business effect. */
  const charges: string[] = [];
  const charge = async (ctx: EffectContext): Promise<Success> => {
    charges.push(ctx.operationId);
    return new Success(Buffer.from(`ch_${charges.length}`), "text/plain");
  };

  test("executeOnce: the old version's operations replay or are taken over by the new one", async () => {
    charges.length = 0;
    // The old version completes one operation...
    const done = key();
    const first = await executeOnce(client, OP, done, oldPayload(100), charge);
    assert.equal(first.replayed, false);
    // ...and claims another, then stalls: its lease runs out, nobody completes it.
    const doubted = key();
    const stalled = await client.claim(OP, doubted, {
      jsonPayload: JSON.stringify(oldPayload(200)), lease: 0.05, maxAttemptDuration: 1,
    });
    const stalledId = stalled.acquired!.ownership!.operation_id;
    await sleep(0.1);

    // The new version without previous fingerprints: its retry is a key reuse. (This is
    // what the window prevents; it shows the checks below can fail.)
    await assert.rejects(executeOnce(client, OP, done, newPayload(100), charge), ConflictError);
    await assert.rejects(
      executeOnce(client, OP, doubted, newPayload(200), charge, { providerDeduplicates: true }),
      ConflictError,
    );

    // With them: the completed operation replays, without a second charge.
    const replayed = await executeOnce(client, OP, done, newPayload(100), charge, { previousFingerprints: previousOf(100) });
    assert.equal(replayed.replayed, true);
    assert.equal(replayed.operationId, first.operationId);
    assert.equal(replayed.body.toString(), "ch_1");

    // The stalled one is taken over (its provider deduplicates by the operation id), not
    // refused; the history says the previous fingerprint matched.
    let previousOutcomeUnknown: boolean | undefined;
    const resumed = await executeOnce(client, OP, doubted, newPayload(200), async (ctx) => {
      previousOutcomeUnknown = ctx.previousOutcomeUnknown;
      return await charge(ctx);
    }, { previousFingerprints: previousOf(200), providerDeduplicates: true });
    assert.equal(resumed.replayed, false);
    assert.equal(resumed.operationId, stalledId);
    assert.equal(previousOutcomeUnknown, true);
    const looked = await client.lookup({ operationId: stalledId }, { includeHistory: true });
    const takeover = looked.history.find((entry) => entry.event === "TAKEN_OVER");
    assert.ok(takeover?.detail.endsWith("request matched by previous_fingerprints[0]"), JSON.stringify(takeover));
    // The stored fingerprint stays the old version's.
    assert.deepEqual(Buffer.from(looked.operation!.fingerprint), previousOf(200)[0]);

    // A genuinely different request under the same key still conflicts.
    await assert.rejects(
      executeOnce(client, OP, done, newPayload(999), charge, { previousFingerprints: previousOf(999) }),
      ConflictError,
    );
    // One charge per intent, in all.
    assert.deepEqual(charges, [first.operationId, stalledId]);
  });

  test("executeOnce: a retry while the old version still runs waits for its result, Claim after Claim", async () => {
    charges.length = 0;
    const k = key();
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    // The old version's attempt is running (its lease live) when the new version retries.
    const old = executeOnce(client, OP, k, oldPayload(400), async (ctx) => {
      started();
      await released;
      return await charge(ctx);
    });
    await running;
    setTimeout(release, 300);
    // Pending first; the next Claim (waiting on the server) must carry the previous
    // fingerprint too, or it is a key reuse instead of the replay.
    const retrying = executeOnce(client, OP, k, newPayload(400), charge, {
      previousFingerprints: previousOf(400),
      deadline: 10,
    });
    // Both settle before the checks, so that a failure leaves nothing running.
    const [first, retried] = await Promise.all([old, retrying]);
    assert.equal(retried.replayed, true);
    assert.equal(retried.operationId, first.operationId);
    assert.deepEqual(charges, [first.operationId]);
  });

  test("executeOnce: the old selector's fingerprint is an easy previous fingerprint", async () => {
    charges.length = 0;
    const oldSelector = new Selector({ include: ["/amount"] });
    const newSelector = new Selector({ include: ["/amount", "/currency"] });
    const body = { amount: 300, currency: "EUR", trace: "t1" };
    const k = key();
    const first = await executeOnce(client, OP, k, body, charge, { selector: oldSelector });
    const again = await executeOnce(client, OP, k, { ...body, trace: "t2" }, charge, {
      selector: newSelector,
      previousFingerprints: [oldSelector.fingerprint(JSON.stringify({ ...body, trace: "t2" }))],
    });
    assert.equal(again.replayed, true);
    assert.equal(again.operationId, first.operationId);
    await assert.rejects(executeOnce(client, OP, k, body, charge, { selector: newSelector }), ConflictError);
    assert.equal(charges.length, 1);
  });

  test("executeOnce: a wrong list is refused before any RPC, in every form", async () => {
    const proxy = await new Proxy(server.port).start();
    const proxied = server.client(undefined, proxy.addr);
    try {
      charges.length = 0;
      const k = key();
      for (const [previous, field] of [
        [Array(5).fill(Buffer.alloc(32)), "previous_fingerprints"],
        [[Buffer.alloc(31)], "previous_fingerprints[0]"],
      ] as const) {
        const error = await executeOnce(proxied, OP, k, newPayload(1), charge, { previousFingerprints: previous }).then(
          () => assert.fail("accepted"),
          (caught: unknown) => caught,
        );
        assert.deepEqual(refusalOf(error), [field]);
        await assert.rejects(
          proxied.claim(OP, k, { jsonPayload: "{}", previousFingerprints: previous }),
          InvalidArgumentError,
        );
      }
      assert.equal(proxy.replies, 0, "no call reached idemd");
      assert.deepEqual(charges, []);
      // Nothing was claimed: the key is still free, for any request.
      const fresh = await executeOnce(proxied, OP, k, { amount: 2 }, charge);
      assert.equal(fresh.replayed, false);
      assert.equal(proxy.replies, 2, "its Claim and its Complete");
    } finally {
      proxied.close();
      await proxy.close();
    }
  });

  test("the middleware: previous selectors keep the old version's requests from conflicting", async () => {
    const shop = new Shop();
    const oldSelector: SelectorFields = { include: ["/amount"] };
    const newSelector: SelectorFields = { include: ["/amount", "/currency"] };
    const oldVersion = await shop.serve(client, { selector: oldSelector });
    const newVersion = await shop.serve(client, { selector: newSelector, previousSelectors: [oldSelector], reconcileFirst: "run" });
    const unprepared = await shop.serve(client, { selector: newSelector, reconcileFirst: "run" });
    try {
      // The same intent: the old selector takes the amount; the new one the currency too.
      const order = { amount: 100, currency: "EUR" };
      const done = key();
      const created = await post(oldVersion.url, order, done);
      assert.equal(created.status, 201);
      const createdBody = await created.text();

      // The old version's route failed after it may have acted: the outcome is unknown.
      const doubted = key();
      shop.failNext = true;
      assert.equal((await post(oldVersion.url, { amount: 200, currency: "EUR" }, doubted)).status, 503);

      // A new version without the window: both retries are key reuses.
      assert.equal((await post(unprepared.url, order, done)).status, 422);
      assert.equal((await post(unprepared.url, { amount: 200, currency: "EUR" }, doubted)).status, 422);

      // With it: the completed request replays, the doubted one is taken over and runs.
      const replayed = await post(newVersion.url, order, done);
      assert.equal(replayed.status, 201);
      assert.equal(replayed.headers.get("idempotent-replayed"), "true");
      assert.equal(await replayed.text(), createdBody);
      const resumed = await post(newVersion.url, { amount: 200, currency: "EUR" }, doubted);
      assert.equal(resumed.status, 201);
      assert.equal(resumed.headers.get("idempotent-replayed"), null);

      // Another amount under the same key is another request.
      assert.equal((await post(newVersion.url, { amount: 999, currency: "EUR" }, done)).status, 422);
      // One order per intent (the doubted one's first attempt created none).
      assert.deepEqual(shop.orders.map((o) => o.amount), [100, 200]);
      const stored = await client.lookup({ operation: "http.post/orders", key: scopedKey(ALICE, doubted) }, { includeHistory: true });
      assert.ok(stored.history.some((entry) => entry.detail.endsWith("request matched by previous_fingerprints[0]")));
    } finally {
      await Promise.all([oldVersion.close(), newVersion.close(), unprepared.close()]);
    }
  });

  test("the middleware: a null or empty previous selector is a version that had none", async () => {
    const shop = new Shop();
    const wholeRequest = await shop.serve(client, {});
    const selecting = await shop.serve(client, { selector: { include: ["/amount"] }, previousSelectors: [{}] });
    const selectingNull = await shop.serve(client, { selector: { include: ["/amount"] }, previousSelectors: [null] });
    try {
      for (const [version, amount] of [[selecting, 5], [selectingNull, 7]] as const) {
        const k = key();
        assert.equal((await post(wholeRequest.url, { amount }, k)).status, 201);
        const replayed = await post(version.url, { amount }, k);
        assert.equal(replayed.status, 201);
        assert.equal(replayed.headers.get("idempotent-replayed"), "true");
        assert.equal((await post(version.url, { amount: amount + 1 }, k)).status, 422);
      }
      assert.deepEqual(shop.orders.map((o) => o.amount), [5, 7]);
    } finally {
      await Promise.all([wholeRequest.close(), selecting.close(), selectingNull.close()]);
    }
  });
});

const ALICE = "Bearer alice";

function post(url: string, body: unknown, idempotencyKey: string): Promise<Response> {
  return fetch(`${url}/orders`, {
    method: "POST",
    body: JSON.stringify(body),
    headers: { "content-type": "application/json", authorization: ALICE, "idempotency-key": idempotencyKey },
  });
}

/** One shop behind several versions of its app: it counts the orders it creates. */
class Shop {
  orders: Array<Record<string, unknown>> = [];
  /** The next request fails (503) before creating anything, as a broken dependency would. */
  failNext = false;

  async serve(client: Client, options: Partial<IdempotencyOptions>): Promise<{ url: string; close: () => Promise<void> }> {
    const app = express();
    app.set("env", "test");
    app.use(express.json());
    app.use(idempotency({ client, ...options }));
    app.post("/orders", (req, res) => {
      if (this.failNext) {
        this.failNext = false;
        res.status(503).json({ error: "the payment provider did not answer" });
        return;
      }
      const order = { id: `ord_${this.orders.length + 1}`, ...(req.body as Record<string, unknown>) };
      this.orders.push(order);
      res.status(201).json(order);
    });
    const listening: HttpServer = await new Promise((resolve) => {
      const s = app.listen(0, "127.0.0.1", () => resolve(s));
    });
    const { port } = listening.address() as AddressInfo;
    return {
      url: `http://127.0.0.1:${port}`,
      close: () => new Promise((resolve) => listening.close(() => resolve())),
    };
  }
}
