// Item 5: the Express Idempotency-Key middleware, with a real Express app over HTTP
// against a real idemd on each store.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import type { AddressInfo } from "node:net";
import type { Server as HttpServer } from "node:http";
import { after, before, test } from "node:test";
import express from "express";
import {
  type Client, defaultOperation, idempotency, type IdempotencyOptions, parseKey, scopedKey, SelectorError,
} from "../src/index.js";
import { eachStore, key, type Server, startServer } from "./harness.js";

/** An Express app that counts the orders it creates. */
class Shop {
  orders: Record<string, unknown>[] = [];
  hold: Promise<void> | undefined;
  entered: Promise<void>;
  private enter!: () => void;
  private ids = 0;
  constructor() {
    this.entered = new Promise((r) => (this.enter = r));
  }

  async serve(client: Client, options: Partial<IdempotencyOptions> = {}): Promise<{ url: string; close: () => Promise<void> }> {
    const app = express();
    app.set("env", "test"); // finalhandler logs thrown errors otherwise
    app.use(express.json());
    app.use(idempotency({ client, ...options }));
    app.post("/orders", async (req, res) => {
      this.enter();
      if (this.hold) await this.hold;
      this.ids += 1;
      const order = { id: `ord_${this.ids}`, ...(req.body as object) };
      this.orders.push(order);
      res.status(201).set({ Location: `/orders/${order.id}`, "X-Trace": "t1" }).json(order);
    });
    app.get("/orders", (_req, res) => {
      res.json(this.orders);
    });
    app.post("/flaky", (_req, res) => {
      this.ids += 1;
      if (this.ids === 1) throw new Error("the first call fails after its effect may have happened");
      const ctx = res.locals.idempotency as { previousOutcomeUnknown: boolean; operationId: string };
      res.status(201).json({ previousOutcomeUnknown: ctx.previousOutcomeUnknown, operationId: ctx.operationId });
    });
    app.post("/crash", () => {
      this.orders.push({ id: "crashed" });
      throw new Error("the app broke after its effect");
    });
    const server: HttpServer = await new Promise((resolve) => {
      const s = app.listen(0, "127.0.0.1", () => resolve(s));
    });
    const { port } = server.address() as AddressInfo;
    return {
      url: `http://127.0.0.1:${port}`,
      close: () => new Promise((resolve) => server.close(() => resolve())),
    };
  }
}

const ALICE = "Bearer alice";
const BOB = "Bearer bob";
/** hex(SHA-256("Bearer alice"))[0:32]: the same in every idemd client. */
const ALICE_PREFIX = "9d7cce461e4b2f090a3d686b4ae72d25";

function idemKey(): Record<string, string> {
  return { "Idempotency-Key": `"${key()}"` };
}

/** A POST as `caller` (its Authorization header; null: none). */
function post(url: string, body: unknown, headers: Record<string, string> = {}, caller: string | null = ALICE): Promise<Response> {
  return fetch(url, {
    method: "POST",
    body: JSON.stringify(body),
    headers: { "content-type": "application/json", ...(caller === null ? {} : { authorization: caller }), ...headers },
  });
}

test("key and operation forms", () => {
  assert.equal(parseKey('"8e03978e-40d5-43e8-bc93-6894a57f9324"'), "8e03978e-40d5-43e8-bc93-6894a57f9324");
  assert.equal(parseKey('"a\\"b"'), 'a"b');
  assert.equal(parseKey("bare"), "bare");
  assert.equal(defaultOperation({ method: "POST", url: "/orders/{x} y?q=1" }), "http.post/orders/_x__y");
  assert.equal(defaultOperation({ method: "POST", url: "/" + "a".repeat(300) }).length, 128);
});

test("the key sent to idemd is the principal's digest prefix and the caller's key", () => {
  const expected = createHash("sha256").update(ALICE, "utf8").digest("hex").slice(0, 32);
  assert.equal(expected, ALICE_PREFIX);
  assert.equal(scopedKey(ALICE, "order-1"), `${ALICE_PREFIX}:order-1`);
  assert.equal(scopedKey("Bearer émile", "k"), `${createHash("sha256").update("Bearer émile").digest("hex").slice(0, 32)}:k`);
});

test("an out-of-range conflictStatus or inProgressStatus is refused when the middleware is made", () => {
  const lazy = (): Client => assert.fail("never called");
  for (const option of ["conflictStatus", "inProgressStatus"] as const) {
    for (const value of [399, 600, 200, -422, 422.5, NaN, Infinity, "422", true]) {
      assert.throws(
        () => idempotency({ client: lazy, [option]: value as unknown as number }),
        (error: unknown) => error instanceof RangeError
          && error.message.startsWith(`${option} must be an HTTP error status, an integer in 400..599, not `),
        `${option}: ${String(value)}`,
      );
    }
    for (const value of [400, 599, undefined]) {
      assert.equal(typeof idempotency({ client: lazy, [option]: value }), "function");
    }
  }
});

test("a selector that cannot be right is refused when the middleware is made", () => {
  const client = {} as Client;
  assert.throws(() => idempotency({ client, selector: { include: [""] } }), SelectorError);
  assert.throws(() => idempotency({ client, selector: { headers: ["X Tenant"] } }), SelectorError);
});

eachStore("express", (store) => {
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

  test("replays the status, the kept headers and the body", async () => {
    const shop = new Shop();
    const web = await shop.serve(client);
    try {
      const headers = idemKey();
      const first = await post(`${web.url}/orders`, { sku: "a", qty: 1 }, headers);
      const again = await post(`${web.url}/orders`, { sku: "a", qty: 1 }, headers);
      assert.equal(first.status, 201);
      assert.equal(again.status, 201);
      const firstBody = await first.json();
      assert.deepEqual(await again.json(), firstBody);
      assert.equal(shop.orders.length, 1);
      assert.equal(first.headers.get("location"), "/orders/ord_1");
      assert.equal(again.headers.get("location"), "/orders/ord_1");
      assert.match(again.headers.get("content-type") ?? "", /^application\/json/);
      assert.equal(again.headers.get("idempotent-replayed"), "true");
      assert.equal(first.headers.get("idempotent-replayed"), null);
      assert.equal(again.headers.get("x-trace"), null); // not in keepHeaders
    } finally {
      await web.close();
    }
  });

  test("a missing key is 400 where required and passes where not", async () => {
    const shop = new Shop();
    let web = await shop.serve(client);
    try {
      const refused = await post(`${web.url}/orders`, { sku: "a" });
      assert.equal(refused.status, 400);
      assert.equal(refused.headers.get("content-type"), "application/problem+json");
      assert.equal((await post(`${web.url}/orders`, { sku: "a" }, { "Idempotency-Key": '""' })).status, 400);
      assert.deepEqual(shop.orders, []);
    } finally {
      await web.close();
    }
    web = await shop.serve(client, { required: false });
    try {
      assert.equal((await post(`${web.url}/orders`, { sku: "a" })).status, 201);
      assert.equal(shop.orders.length, 1);
    } finally {
      await web.close();
    }
  });

  test("the same key with another body is 422", async () => {
    const shop = new Shop();
    const web = await shop.serve(client);
    try {
      const headers = idemKey();
      assert.equal((await post(`${web.url}/orders`, { sku: "a" }, headers)).status, 201);
      assert.equal((await post(`${web.url}/orders`, { sku: "b" }, headers)).status, 422);
      assert.equal(shop.orders.length, 1);
    } finally {
      await web.close();
    }
  });

  test("a selector: a change outside it replays, one inside it (a field or a header) is 422", async () => {
    const shop = new Shop();
    const web = await shop.serve(client, { selector: { include: ["/sku"], headers: ["X-Tenant"] } });
    try {
      const headers = { ...idemKey(), "X-Tenant": "t1" };
      const first = await post(`${web.url}/orders`, { sku: "a", note: "one" }, headers);
      const outside = await post(`${web.url}/orders?page=2`, { sku: "a", note: "two" }, headers);
      const inside = await post(`${web.url}/orders`, { sku: "b", note: "one" }, headers);
      const otherTenant = await post(`${web.url}/orders`, { sku: "a", note: "one" }, { ...headers, "X-Tenant": "t2" });
      const notAnObject = await post(`${web.url}/orders`, ["a"], idemKey());
      assert.equal(first.status, 201);
      assert.equal(outside.status, 201);
      assert.equal(outside.headers.get("idempotent-replayed"), "true");
      assert.deepEqual(await outside.json(), await first.json());
      assert.equal(inside.status, 422);
      assert.equal(otherTenant.status, 422);
      assert.equal(notAnObject.status, 400);
      assert.equal(notAnObject.headers.get("content-type"), "application/problem+json");
      assert.equal(shop.orders.length, 1);
    } finally {
      await web.close();
    }
  });

  test("a key still in progress is 409 with Retry-After", async () => {
    const shop = new Shop();
    let release!: () => void;
    shop.hold = new Promise((r) => (release = r));
    const web = await shop.serve(client);
    try {
      const headers = idemKey();
      const first = post(`${web.url}/orders`, { sku: "a" }, headers);
      await shop.entered;
      const busy = await post(`${web.url}/orders`, { sku: "a" }, headers);
      release();
      const done = await first;
      assert.equal(busy.status, 409);
      assert.ok(Number(busy.headers.get("retry-after")) >= 1);
      assert.equal(done.status, 201);
      assert.equal(shop.orders.length, 1);
    } finally {
      await web.close();
    }
  });

  test("configured statuses for a conflict and a request in progress (issue 21)", async () => {
    const shop = new Shop();
    let release!: () => void;
    shop.hold = new Promise((r) => (release = r));
    const web = await shop.serve(client, { conflictStatus: 409, inProgressStatus: 429 });
    try {
      const headers = idemKey();
      const first = post(`${web.url}/orders`, { sku: "a" }, headers);
      await shop.entered;
      const busy = await post(`${web.url}/orders`, { sku: "a" }, headers);
      release();
      const done = await first;
      const changed = await post(`${web.url}/orders`, { sku: "b" }, headers);
      assert.equal(done.status, 201);
      assert.equal(shop.orders.length, 1);
      assert.equal(busy.status, 429);
      assert.ok(Number(busy.headers.get("retry-after")) >= 1);
      assert.equal(busy.headers.get("content-type"), "application/problem+json");
      assert.deepEqual(await busy.json(), {
        type: "about:blank", title: "Request in progress", status: 429,
        detail: "a request with this Idempotency-Key is still being processed",
      });
      assert.equal(changed.status, 409);
      assert.equal(changed.headers.get("retry-after"), null);
      assert.equal(changed.headers.get("content-type"), "application/problem+json");
      assert.deepEqual(await changed.json(), {
        type: "about:blank", title: "Idempotency-Key reused", status: 409,
        detail: "this Idempotency-Key was used with a different request",
      });
    } finally {
      await web.close();
    }
  });

  test("only the configured methods", async () => {
    const shop = new Shop();
    let web = await shop.serve(client);
    try {
      assert.equal((await fetch(`${web.url}/orders`)).status, 200); // GET: no key needed
    } finally {
      await web.close();
    }
    web = await shop.serve(client, { methods: ["PATCH"] });
    try {
      assert.equal((await post(`${web.url}/orders`, { sku: "a" })).status, 201);
      assert.equal((await post(`${web.url}/orders`, { sku: "a" })).status, 201);
      assert.equal(shop.orders.length, 2);
    } finally {
      await web.close();
    }
  });

  test("a route that throws is UNKNOWN, and a retry declines NOT_STARTED without running it", async () => {
    const shop = new Shop();
    const web = await shop.serve(client);
    try {
      const k = key();
      const headers = { "Idempotency-Key": k };
      const crashed = await post(`${web.url}/crash`, {}, headers);
      assert.equal(crashed.status, 500);
      const scope = { operation: "http.post/crash", key: scopedKey(ALICE, k) };
      const before = (await client.lookup(scope)).operation!;
      const retried = await post(`${web.url}/crash`, {}, headers);
      assert.equal(retried.status, 500);
      assert.equal(retried.headers.get("content-type"), "application/problem+json");
      assert.deepEqual(shop.orders, [{ id: "crashed" }]);
      // The retry took the operation over and handed the doubt back as it was (NOT_STARTED,
      // the crashed attempt's deadline kept), for a reconciler: not a new UNKNOWN.
      const found = await client.lookup(scope, { includeHistory: true });
      const events = found.history.filter((e) => e.event !== "RENEWED");
      assert.deepEqual(events.map((e) => e.event), ["CLAIMED", "OUTCOME_UNKNOWN", "TAKEN_OVER", "OUTCOME_UNKNOWN"]);
      assert.equal(events.at(-1)!.detail, "not_started");
      assert.equal(found.operation!.state, "OPERATION_STATE_UNKNOWN");
      assert.deepEqual(found.operation!.attempt_deadline_at, before.attempt_deadline_at);
    } finally {
      await web.close();
    }
  });

  test("reconcileFirst: run runs the route again with the context in res.locals", async () => {
    const shop = new Shop();
    const web = await shop.serve(client, { reconcileFirst: "run" });
    try {
      const headers = idemKey();
      assert.equal((await post(`${web.url}/flaky`, {}, headers)).status, 500);
      const retried = await post(`${web.url}/flaky`, {}, headers);
      assert.equal(retried.status, 201);
      const body = (await retried.json()) as { previousOutcomeUnknown: boolean; operationId: string };
      assert.equal(body.previousOutcomeUnknown, true);
      assert.ok(body.operationId.length > 0);
      const replay = await post(`${web.url}/flaky`, {}, headers);
      assert.equal(replay.headers.get("idempotent-replayed"), "true");
      assert.deepEqual(await replay.json(), body);
    } finally {
      await web.close();
    }
  });

  test("keys are scoped per caller: the same key from two callers is two requests", async () => {
    const shop = new Shop();
    const web = await shop.serve(client);
    try {
      const headers = idemKey();
      const alice = await post(`${web.url}/orders`, { sku: "a" }, headers, ALICE);
      const bob = await post(`${web.url}/orders`, { sku: "a" }, headers, BOB);
      assert.equal(alice.status, 201);
      assert.equal(bob.status, 201);
      const aliceOrder = (await alice.json()) as { id: string };
      const bobOrder = (await bob.json()) as { id: string };
      assert.equal(bob.headers.get("idempotent-replayed"), null);
      assert.notEqual(aliceOrder.id, bobOrder.id);
      assert.equal(shop.orders.length, 2);
      // Each caller's retry replays its own response.
      const aliceAgain = await post(`${web.url}/orders`, { sku: "a" }, headers, ALICE);
      const bobAgain = await post(`${web.url}/orders`, { sku: "a" }, headers, BOB);
      assert.equal(aliceAgain.headers.get("idempotent-replayed"), "true");
      assert.equal(bobAgain.headers.get("idempotent-replayed"), "true");
      assert.deepEqual(await aliceAgain.json(), aliceOrder);
      assert.deepEqual(await bobAgain.json(), bobOrder);
      assert.equal(shop.orders.length, 2);
    } finally {
      await web.close();
    }
  });

  test("the key at idemd is the documented formula, never the principal in clear", async () => {
    const shop = new Shop();
    const web = await shop.serve(client);
    try {
      const k = key();
      assert.equal((await post(`${web.url}/orders`, { sku: "a" }, { "Idempotency-Key": k }, ALICE)).status, 201);
      const found = await client.lookup({ operation: "http.post/orders", key: `${ALICE_PREFIX}:${k}` });
      assert.equal(found.operation!.state, "OPERATION_STATE_SUCCEEDED");
      assert.equal(found.operation!.scope!.key, `${ALICE_PREFIX}:${k}`);
    } finally {
      await web.close();
    }
  });

  test("a key without a caller is 400 unless the keys are shared", async () => {
    const shop = new Shop();
    let web = await shop.serve(client);
    try {
      const refused = await post(`${web.url}/orders`, { sku: "a" }, idemKey(), null);
      assert.equal(refused.status, 400);
      assert.equal(refused.headers.get("content-type"), "application/problem+json");
      const problem = (await refused.json()) as { type: string; title: string; detail: string };
      assert.equal(problem.type, "about:blank");
      assert.match(problem.detail, /scoped per caller/);
      assert.match(problem.detail, /no caller \(principal\) was found/);
      assert.deepEqual(shop.orders, []);
    } finally {
      await web.close();
    }
    web = await shop.serve(client, { sharedKeys: true });
    try {
      const k = key();
      const served = await post(`${web.url}/orders`, { sku: "a" }, { "Idempotency-Key": k }, null);
      assert.equal(served.status, 201);
      // Shared: one key space, so another caller with the key gets the replay.
      const other = await post(`${web.url}/orders`, { sku: "a" }, { "Idempotency-Key": k }, BOB);
      assert.equal(other.headers.get("idempotent-replayed"), "true");
      assert.equal(shop.orders.length, 1);
      const found = await client.lookup({ operation: "http.post/orders", key: k });
      assert.equal(found.operation!.state, "OPERATION_STATE_SUCCEEDED");
    } finally {
      await web.close();
    }
  });

  test("a custom principal, and the key bound net of the caller's prefix", async () => {
    const shop = new Shop();
    let web = await shop.serve(client, { principal: (req) => req.headers["x-user"] as string | undefined });
    try {
      const headers = idemKey();
      assert.equal((await post(`${web.url}/orders`, { sku: "a" }, { ...headers, "x-user": "u1" }, null)).status, 201);
      assert.equal((await post(`${web.url}/orders`, { sku: "a" }, { ...headers, "x-user": "u2" }, null)).status, 201);
      assert.equal((await post(`${web.url}/orders`, { sku: "a" }, headers, ALICE)).status, 400); // no x-user
      assert.equal(shop.orders.length, 2);
    } finally {
      await web.close();
    }
    web = await shop.serve(client);
    try {
      const longest = "k".repeat(222);
      assert.equal((await post(`${web.url}/orders`, { sku: "b" }, { "Idempotency-Key": longest })).status, 201);
      const tooLong = await post(`${web.url}/orders`, { sku: "b" }, { "Idempotency-Key": longest + "k" });
      assert.equal(tooLong.status, 400);
      assert.match(((await tooLong.json()) as { detail: string }).detail, /1-222 bytes/);
      assert.equal(shop.orders.length, 3);
    } finally {
      await web.close();
    }
    web = await shop.serve(client, { sharedKeys: true });
    try {
      assert.equal((await post(`${web.url}/orders`, { sku: "c" }, { "Idempotency-Key": "s".repeat(255) })).status, 201);
    } finally {
      await web.close();
    }
  });

  test("a client made on first use", async () => {
    const shop = new Shop();
    let made: Client | undefined;
    const web = await shop.serve(client, { client: () => (made = server.client()) });
    try {
      const headers = idemKey();
      const first = await post(`${web.url}/orders`, { sku: "z" }, headers);
      const again = await post(`${web.url}/orders`, { sku: "z" }, headers);
      assert.equal(first.status, 201);
      assert.equal(again.status, 201);
      assert.deepEqual(await again.json(), await first.json());
      assert.equal(shop.orders.length, 1);
      assert.ok(made !== undefined);
    } finally {
      made?.close();
      await web.close();
    }
  });
});
