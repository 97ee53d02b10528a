// Item 7: examples/orders.ts runs against a real server and prints one order, one result.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";
import { eachStore, type Server, startServer } from "./harness.js";

const EXAMPLE = join(dirname(dirname(fileURLToPath(import.meta.url))), "examples", "orders.js");

eachStore("example", (store) => {
  let server: Server;
  before(async () => {
    server = await startServer(store);
  });
  after(async () => {
    await server.close();
  });

  test("orders: one order, one stable result, a conflict", () => {
    const done = spawnSync(process.execPath, [EXAMPLE, "--addr", server.addr, "--key", "order-example-1"], {
      env: { ...process.env, IDEMD_TOKEN: server.token },
      encoding: "utf8",
      timeout: 120_000,
    });
    assert.equal(done.status, 0, done.stderr);
    const lines = done.stdout.split("\n");
    assert.match(lines[1]!, /^attempt 1: timed out after the provider created an order/);
    assert.match(lines[2]!, /^10 concurrent retries: 1 distinct result\(s\): /);
    assert.ok(lines[2]!.includes('"order_id":"ord_1"'), lines[2]);
    assert.equal(lines[3]!.trim(), "1 recorded the order found by its client reference, 9 replayed it");
    assert.equal(lines[4], "orders at the provider: 1");
    assert.match(lines[5]!, /^a later retry: replayed /);
    assert.ok(lines[5]!.includes('"ord_1"'), lines[5]);
    assert.match(lines[6]!, /^a retry with amount 2600: refused, IDEMPOTENCY_KEY_REUSED/);
    assert.equal(lines[7], "orders at the provider: 1");
  });
});
