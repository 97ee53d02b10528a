// Calls idemd with Connect-ES (@connectrpc/connect-node, the Connect protocol's
// JSON codec over HTTP/1.1): claims, completes and replays, then reads the
// ErrorInfo reason of a conflict. The service is described at run time from
// the descriptor set the server itself serves by reflection, so no code is
// generated. Run by tests/it/connect.rs with:
//   IDEMD_URL         http://127.0.0.1:PORT
//   IDEMD_TOKEN       a tenant's bearer token
//   IDEMD_DESCRIPTOR  path of the server's file descriptor set (binary)
// Exits non-zero, saying why, when anything differs from what it expects.

import { readFileSync } from "node:fs";
import { createFileRegistry, fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";

function required(name: string): string {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set`);
  }
  return value;
}

function expect(condition: boolean, what: string, actual: unknown): void {
  if (!condition) {
    throw new Error(`${what}; got ${JSON.stringify(actual, (_, v) => (typeof v === "bigint" ? `${v}n` : v))}`);
  }
}

const registry = createFileRegistry(
  fromBinary(FileDescriptorSetSchema, readFileSync(required("IDEMD_DESCRIPTOR"))),
);
const service = registry.getService("idem.v1.IdempotencyService");
const errorInfo = registry.getMessage("google.rpc.ErrorInfo");
if (!service || !errorInfo) {
  throw new Error("the descriptor set lacks idem.v1.IdempotencyService or google.rpc.ErrorInfo");
}

const token = required("IDEMD_TOKEN");
const authorize: Interceptor = (next) => async (request) => {
  request.header.set("Authorization", `Bearer ${token}`);
  return next(request);
};
const transport = createConnectTransport({
  baseUrl: required("IDEMD_URL"),
  httpVersion: "1.1",
  useBinaryFormat: false,
  interceptors: [authorize],
});
// Described at run time, the client's methods are not typed per RPC.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const client: any = createClient(service, transport);

const key = `connect-es-${Date.now()}-${Math.random()}`;
const scope = { operation: "payments.charge", key };
const request = { case: "jsonPayload", value: JSON.stringify({ amount: 100 }) };

const acquired = await client.claim({ scope, requestIdentity: request });
expect(acquired.outcome.case === "acquired", "the first Claim acquires", acquired);
const ownership = acquired.outcome.value.ownership;
expect(ownership.fence === 1n, "the first owner's fence is 1", ownership);

const body = new TextEncoder().encode(JSON.stringify({ charge: "ch_1" }));
const completed = await client.complete({
  operationId: ownership.operationId,
  fence: ownership.fence,
  result: { body, contentType: "application/json" },
});
expect(completed.state === 2, "Complete answers SUCCEEDED", completed);

const replay = await client.claim({ scope, requestIdentity: request });
expect(replay.outcome.case === "completed", "the same Claim replays", replay);
const replayed = replay.outcome.value;
expect(replayed.operationId === ownership.operationId, "the replay names the operation", replayed);
expect(
  replayed.outcome.case === "result" &&
    Buffer.from(replayed.outcome.value.body).equals(Buffer.from(body)),
  "the replay carries the stored result",
  replayed,
);

try {
  await client.claim({
    scope,
    requestIdentity: { case: "jsonPayload", value: JSON.stringify({ amount: 999 }) },
  });
  throw new Error("a different request under the same key was not refused");
} catch (error) {
  const refused = ConnectError.from(error);
  expect(refused.code === Code.FailedPrecondition, "the conflict is FAILED_PRECONDITION", refused.code);
  const reasons = refused.findDetails(errorInfo).map((detail) => (detail as { reason: string }).reason);
  expect(
    reasons.length === 1 && reasons[0] === "IDEMPOTENCY_KEY_REUSED",
    "the conflict's ErrorInfo reason is IDEMPOTENCY_KEY_REUSED",
    reasons,
  );
}

console.log("connect-es: claimed, completed, replayed; conflict reason IDEMPOTENCY_KEY_REUSED");
