// Item 3: the fingerprint function identical to the server's, checked against every
// shared vector in testdata/fingerprints.json (refusals included), and against the
// server itself.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { canonicalJson, type Client, fingerprintBytes, fingerprintJson, InvalidArgumentError, NotIJsonError } from "../src/index.js";
import { eachStore, key, REPO, type Server, startServer } from "./harness.js";

interface Vector {
  name: string;
  mode: "json" | "bytes";
  input?: string;
  input_hex?: string;
  canonical?: string;
  fingerprint?: string;
  refused?: string;
}

const vectors = (JSON.parse(readFileSync(join(REPO, "testdata", "fingerprints.json"), "utf8")) as { vectors: Vector[] }).vectors;

test("the shared vectors are all there", () => {
  assert.ok(vectors.length >= 60, `only ${vectors.length} vectors`);
  assert.ok(vectors.some((v) => v.refused !== undefined));
  assert.ok(vectors.some((v) => v.mode === "bytes"));
});

for (const vector of vectors) {
  test(`vector: ${vector.name}`, () => {
    if (vector.mode === "bytes") {
      assert.equal(fingerprintBytes(Buffer.from(vector.input_hex ?? "", "hex")).toString("hex"), vector.fingerprint);
      return;
    }
    const input = vector.input ?? "";
    if (vector.refused !== undefined) {
      assert.throws(() => canonicalJson(input), NotIJsonError);
      assert.throws(() => fingerprintJson(Buffer.from(input, "utf8")), NotIJsonError);
      return;
    }
    assert.equal(canonicalJson(input).toString("utf8"), vector.canonical);
    assert.equal(fingerprintJson(input).toString("hex"), vector.fingerprint);
    assert.equal(fingerprintJson(Buffer.from(input, "utf8")).toString("hex"), vector.fingerprint);
  });
}

test("bytes that are not UTF-8 are refused", () => {
  assert.throws(() => canonicalJson(Buffer.from([0x22, 0xff, 0x22])), NotIJsonError);
});

test("a lone surrogate in a JavaScript string is refused", () => {
  assert.throws(() => canonicalJson('"\ud800"'), NotIJsonError);
});

eachStore("fingerprint", (store) => {
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

  test("the server computes the same fingerprints", async () => {
    for (const vector of vectors.filter((v) => v.mode === "json" && v.refused === undefined).slice(0, 12)) {
      const k = key();
      const input = vector.input ?? "";
      await client.claim("fp.check", k, { jsonPayload: input });
      // The client's fingerprint claims the same operation: never a conflict.
      const again = await client.claim("fp.check", k, { fingerprint: fingerprintJson(input) });
      assert.equal(again.outcome, "pending", vector.name);
      const found = await client.lookup({ operation: "fp.check", key: k });
      assert.equal(found.operation!.fingerprint.toString("hex"), vector.fingerprint, vector.name);
    }
    const refused = vectors.find((v) => v.name === "refused: duplicate key")!;
    await assert.rejects(client.claim("fp.check", key(), { jsonPayload: refused.input! }), InvalidArgumentError);
  });
});
