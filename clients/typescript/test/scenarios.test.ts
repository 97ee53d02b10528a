// Item 6: end-to-end scenarios against a real server on both stores, counting effects
// at a fake provider: concurrent duplicates, a lost reply, a server SIGKILL and restart
// during the effect, a lost lease, a conflict.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Client, ConflictError, type EffectContext, executeOnce, type Result, RetryPolicy, Success } from "../src/index.js";
import { eachStore, fastRetry, key, Provider, type Server, startServer } from "./harness.js";
import { Proxy } from "./proxy.js";

const OP = "orders.create";
const PAYLOAD = { sku: "book-42", amount: 1999 };
const sleep = (s: number) => new Promise((r) => setTimeout(r, s * 1000));

function creating(provider: Provider, delay = 0) {
  return async (ctx: EffectContext) => {
    await sleep(delay);
    return new Success(provider.effect(ctx.operationId), "application/json");
  };
}

async function events(client: Client, operationId: string): Promise<string[]> {
  const found = await client.lookup({ operationId }, { includeHistory: true });
  return found.history.map((h) => h.event);
}

eachStore("scenarios", (store) => {
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

  /** A proxy in front of the server and a client whose every call goes through it. */
  async function proxied(
    body: (proxy: Proxy, through: Client) => Promise<void>,
    retry: RetryPolicy = fastRetry,
  ): Promise<void> {
    const proxy = await new Proxy(server.port).start();
    const through = new Client(proxy.addr, server.token, { retry });
    try {
      await body(proxy, through);
    } finally {
      through.close();
      await proxy.close();
    }
  }

  test("concurrent duplicates make one effect", async () => {
    const provider = new Provider();
    const k = key();
    const clients = [0, 1, 2].map(() => server.client());
    try {
      const results = await Promise.all(
        Array.from({ length: 10 }, (_, i) => executeOnce(clients[i % 3]!, OP, k, PAYLOAD, creating(provider, 0.3))),
      );
      assert.equal(provider.effects.length, 1);
      assert.equal(new Set(results.map((r) => r.body.toString("hex"))).size, 1);
      assert.equal(new Set(results.map((r) => r.operationId)).size, 1);
      assert.equal(results.filter((r) => !r.replayed).length, 1);
    } finally {
      for (const c of clients) c.close();
    }
  });

  test("concurrent conflicting requests: one effect, the others conflict", async () => {
    const provider = new Provider();
    const k = key();
    const other = { sku: "book-42", amount: 2999 };
    const outcomes = await Promise.allSettled(
      Array.from({ length: 10 }, (_, i) => executeOnce(client, OP, k, i % 2 ? PAYLOAD : other, creating(provider, 0.2))),
    );
    const results = outcomes.filter((o): o is PromiseFulfilledResult<Result> => o.status === "fulfilled").map((o) => o.value);
    const conflicts = outcomes.filter((o) => o.status === "rejected" && o.reason instanceof ConflictError);
    assert.equal(provider.effects.length, 1);
    assert.equal(results.length, 5);
    assert.equal(conflicts.length, 5);
    assert.equal(new Set(results.map((r) => r.body.toString("hex"))).size, 1);
  });

  for (const lost of ["claim", "complete"] as const) {
    test(`a lost reply (${lost}) makes one effect`, async () => {
      const provider = new Provider();
      await proxied(async (proxy, through) => {
        const k = key();
        if (lost === "claim") proxy.dropNextReply();
        const result = await executeOnce(through, OP, k, PAYLOAD, async (ctx) => {
          if (lost === "complete") proxy.dropNextReply(); // the Complete's reply (no Renew is due yet)
          return new Success(provider.effect(ctx.operationId));
        }, { lease: 10 });
        assert.equal(proxy.dropped, 1);
        assert.equal(provider.effects.length, 1);
        assert.equal(result.replayed, false);
        assert.deepEqual(await events(client, result.operationId), ["CLAIMED", "COMPLETED"]);
        const again = await executeOnce(client, OP, k, PAYLOAD, creating(provider));
        assert.ok(again.replayed);
        assert.deepEqual(again.body, result.body);
        assert.equal(provider.effects.length, 1);
      });
    });
  }

  for (const restart of ["during the effect", "before the Complete"] as const) {
    test(`SIGKILL and restart ${restart}: one effect and a stable result`, async () => {
      const provider = new Provider();
      const k = key();
      const startsBefore = server.starts;
      let restarted: Promise<void> | undefined;
      const result = await executeOnce(client, OP, k, PAYLOAD, async (ctx) => {
        const body = provider.effect(ctx.operationId);
        await server.kill(); // SIGKILL: the record holds only what was committed
        if (restart === "during the effect") await server.start();
        // Back only after the effect returned: the Complete is re-sent until then.
        else restarted = sleep(0.3).then(() => server.start());
        return new Success(body);
      }, { lease: 10 });
      await restarted;
      assert.equal(provider.effects.length, 1);
      assert.equal(server.starts, startsBefore + 1);
      const again = await executeOnce(client, OP, k, PAYLOAD, creating(provider));
      assert.ok(again.replayed);
      assert.deepEqual(again.body, result.body);
      assert.equal(provider.effects.length, 1);
      assert.deepEqual((await events(client, result.operationId)).filter((e) => e !== "RENEWED"), ["CLAIMED", "COMPLETED"]);
    });
  }

  test("a lost lease is answered from the record, never redone", async () => {
    // Owner A's effect lands, then A is cut off and its lease lapses; B takes over
    // (ReconcileFirst), finds A's effect at the provider and records it. A is refused
    // (LEASE_LOST), looks the operation up and answers with B's record.
    const provider = new Provider();
    await proxied(async (proxy, through) => {
      const k = key();
      let bDone!: () => void;
      const bFinished = new Promise<void>((r) => (bDone = r));
      const a = executeOnce(through, OP, k, PAYLOAD, async (ctx) => {
        const body = provider.effect(ctx.operationId);
        proxy.cut();
        await bFinished;
        proxy.restore();
        return new Success(body);
      }, { lease: 0.6, attemptDuration: 10 });
      // A's lease lapses (B's Claim long-polls until it has). Not much shorter: a lease
      // a slow store's Claim and Renew leave short is declined, never started on.
      await sleep(0.8);
      const b = await executeOnce(client, OP, k, PAYLOAD, creating(provider), {
        lookup: async (ctx) => {
          const body = provider.records.get(ctx.operationId);
          return body ? new Success(body) : undefined;
        },
        lease: 5,
      });
      bDone();
      const aResult = await a;
      assert.equal(provider.effects.length, 1);
      assert.equal(b.replayed, false);
      assert.equal(b.attempts, 2);
      assert.ok(aResult.replayed);
      assert.deepEqual(aResult.body, b.body);
      const history = await events(client, b.operationId);
      assert.ok(history.includes("TAKEN_OVER") && history.includes("STALE_WRITE_REFUSED"), history.join(","));
    // A's channel saw its connection cut for as long as B took: grpc-js waits out its
    // reconnect backoff (1 s, then longer) before it connects again, and fast-failing
    // sends ("No connection established") until then must not spend A's re-sends.
    }, new RetryPolicy({ initialBackoff: 0.02, maxBackoff: 0.2, callTimeout: 5, maxSends: 100 }));
  });

  test("a conflict: the same key with another payload never runs", async () => {
    const provider = new Provider();
    const k = key();
    const first = await executeOnce(client, OP, k, PAYLOAD, creating(provider));
    const conflict = await executeOnce(client, OP, k, { ...PAYLOAD, amount: 2999 }, creating(provider)).then(
      () => assert.fail("no conflict"),
      (e: unknown) => e,
    );
    assert.ok(conflict instanceof ConflictError);
    assert.equal(conflict.operationId, first.operationId);
    assert.equal(provider.effects.length, 1);
  });
});
