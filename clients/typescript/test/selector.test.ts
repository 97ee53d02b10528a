// Request selectors (docs/api.md, "Request selectors"): every shared vector in
// testdata/selectors.json, and executeOnce with a selector against a real idemd: a
// change outside the selection replays, one inside it conflicts.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import {
  type Client, ConflictError, type EffectContext, executeOnce, fingerprintJson, InvalidArgumentError, Selector,
  SelectorError, type SelectorFields, Success,
} from "../src/index.js";
import { eachStore, key, REPO, type Server, startServer } from "./harness.js";

interface Vector {
  name: string;
  body: string;
  selector: SelectorFields;
  headers?: Array<[string, string]>;
  canonical?: string;
  fingerprint?: string;
  refused?: string;
  refused_at?: "selector" | "request";
}

const vectors = (JSON.parse(readFileSync(join(REPO, "testdata", "selectors.json"), "utf8")) as { vectors: Vector[] }).vectors;

test("the shared selector vectors are all there", () => {
  assert.ok(vectors.length >= 40, `only ${vectors.length} vectors`);
  assert.ok(vectors.some((v) => v.refused_at === "selector"));
  assert.ok(vectors.some((v) => v.refused_at === "request"));
});

for (const vector of vectors) {
  test(`selector vector: ${vector.name}`, () => {
    if (vector.refused_at === "selector") {
      assert.throws(() => new Selector(vector.selector), SelectorError);
      return;
    }
    const selector = new Selector(vector.selector);
    const headers = vector.headers ?? [];
    if (vector.refused_at === "request") {
      assert.throws(() => selector.canonical(vector.body, headers), InvalidArgumentError);
      return;
    }
    assert.equal(selector.canonical(vector.body, headers).toString("utf8"), vector.canonical);
    assert.equal(selector.fingerprint(Buffer.from(vector.body, "utf8"), headers).toString("hex"), vector.fingerprint);
  });
}

// What a migration window relies on: the fingerprint a Selector computes is the one the
// server computes for the document it selects, so an old selector's fingerprint matches
// what the old version's Claims stored.
test("a selector's fingerprint is the server's fingerprint of the selected canonical document", () => {
  const applied = vectors.filter((v) => v.refused_at === undefined);
  assert.ok(applied.length >= 20, `only ${applied.length} vectors`);
  for (const vector of applied) {
    const selector = new Selector(vector.selector);
    const fingerprint = selector.fingerprint(vector.body, vector.headers ?? []).toString("hex");
    assert.equal(fingerprintJson(vector.canonical ?? "").toString("hex"), vector.fingerprint, vector.name);
    assert.equal(fingerprint, vector.fingerprint, vector.name);
  }
  const documents = (JSON.parse(readFileSync(join(REPO, "testdata", "fingerprints.json"), "utf8")) as {
    vectors: Array<{ name: string; mode: string; input?: string; fingerprint?: string; refused?: string }>;
  }).vectors.filter((v) => v.mode === "json" && v.refused === undefined);
  assert.ok(documents.length >= 20, `only ${documents.length} json vectors`);
  for (const vector of documents) {
    assert.equal(new Selector().fingerprint(vector.input ?? "").toString("hex"), vector.fingerprint, vector.name);
  }
});

test("the empty selector is today's fingerprint", () => {
  const body = '{"currency":"EUR","amount":1000}';
  assert.ok(new Selector().empty);
  assert.deepEqual(new Selector({ include: [] }).fingerprint(body), fingerprintJson(body));
});

test("a list given as one string is refused", () => {
  assert.throws(() => new Selector({ include: "/amount" as unknown as string[] }), SelectorError);
});

eachStore("selector", (store) => {
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

  const OP = "payments.charge";
  const selector = { include: ["/amount", "/currency"] };

  test("executeOnce: a change outside the selection replays, one inside conflicts", async () => {
    const effects: string[] = [];
    const effect = async (ctx: EffectContext): Promise<Success> => {
      effects.push(ctx.operationId);
      return new Success(Buffer.from("charged"), "text/plain");
    };
    const k = key();
    const first = await executeOnce(client, OP, k, { amount: 1000, currency: "EUR", trace: "a" }, effect, { selector });
    const again = await executeOnce(client, OP, k, '{"currency":"EUR","amount":1000,"trace":"b"}', effect, {
      selector: new Selector(selector),
    });
    assert.equal(first.replayed, false);
    assert.equal(again.replayed, true);
    await assert.rejects(
      executeOnce(client, OP, k, { amount: 1001, currency: "EUR", trace: "a" }, effect, { selector }),
      ConflictError,
    );
    assert.equal(effects.length, 1);
  });

  test("executeOnce: a payload the selector cannot apply to is refused before any RPC", async () => {
    const effect = async (): Promise<Success> => {
      throw new Error("never runs");
    };
    await assert.rejects(executeOnce(client, OP, key(), [1, 2], effect, { selector }), InvalidArgumentError);
    await assert.rejects(executeOnce(client, OP, key(), Buffer.from("{}"), effect, { selector }), TypeError);
    await assert.rejects(executeOnce(client, OP, key(), "{}", effect, { selector: { include: ["x"] } }), SelectorError);
  });
});
