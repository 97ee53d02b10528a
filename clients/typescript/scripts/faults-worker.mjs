// The fault campaign's worker for the TypeScript client (faults/workers/README.md):
// reads deliveries as JSON lines on stdin, runs executeOnce for each (all at once)
// against the duplicating stages named in IDEMD_FAULTS_TARGETS, with the effect and
// the lookup at the campaign's HTTP provider (IDEMD_FAULTS_PROVIDER), and writes each
// delivery's outcome as a JSON line on stdout. Runs on the built client (dist/).
import { createInterface } from "node:readline";
import {
  Client, ConflictError, LeaseLostError, NeedsReconciliationError, OperationFailedError,
  OutcomeUnknownError, PendingError, RetryPolicy, Success, SupersededError, Terminal,
} from "../dist/src/index.js";

const provider = process.env.IDEMD_FAULTS_PROVIDER;
const token = process.env.IDEMD_FAULTS_TOKEN;
const retry = new RetryPolicy({
  maxSends: 200, initialBackoff: 0.02, maxBackoff: 0.3, totalTimeout: 20, callTimeout: 2,
});
// Two connections to each replica's stage, in the campaign's order (a local subchannel
// pool: channels to one target would share a connection otherwise).
const clients = process.env.IDEMD_FAULTS_TARGETS.split(",").flatMap((target) =>
  [0, 1].map(() => new Client(target, token, {
    retry, channelOptions: { "grpc.use_local_subchannel_pool": 1 },
  })));

async function get(path, signal) {
  const response = await fetch(provider + path, { signal });
  return [response.status, new Uint8Array(await response.arrayBuffer())];
}

const reference = (ctx) => encodeURIComponent(ctx.operationId);

async function noteAttempt(ctx) {
  const takeover = ctx.previousOutcomeUnknown ? 1 : 0;
  await get(`/attempt?reference=${reference(ctx)}&fence=${ctx.fence}&takeover=${takeover}`, ctx.signal);
}

async function perform(ctx, honourKey) {
  const [, body] = await get(`/perform?reference=${reference(ctx)}&honour_key=${honourKey ? 1 : 0}`, ctx.signal);
  return new Success(body, "application/json");
}

function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason ?? new Error("aborted"));
      return;
    }
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(signal.reason ?? new Error("aborted"));
    }, { once: true });
  });
}

async function deliver(request) {
  const client = clients[request.client % clients.length];
  let effectRan = false;
  let found = false;
  const effect = async (ctx) => {
    await noteAttempt(ctx);
    effectRan = true;
    if (request.conflict) {
      await get(`/forbidden?key=${encodeURIComponent(request.key)}`, ctx.signal);
      return new Terminal("CONFLICT_EXECUTED");
    }
    if (request.stall) {
      if (request.stall.performed_first) await perform(ctx, false);
      // Aborted at the attempt deadline, before the second perform.
      await sleep(request.stall.ms, ctx.signal);
      return await perform(ctx, false);
    }
    await sleep(request.work_ms, ctx.signal);
    return await perform(ctx, request.honour_key);
  };
  const lookup = async (ctx) => {
    await noteAttempt(ctx);
    const [status, body] = await get(`/lookup?reference=${reference(ctx)}`, ctx.signal);
    if (status !== 200) return undefined;
    found = true;
    return new Success(body, "application/json");
  };
  const options = {
    lease: request.lease_ms / 1000,
    attemptDuration: request.attempt_ms / 1000,
    deadline: request.deadline_ms / 1000,
    maxAttempts: request.max_attempts,
  };
  if (!request.conflict) {
    if (request.honour_key) options.providerDeduplicates = true;
    else options.lookup = lookup;
  }
  try {
    const result = await client.executeOnce("faults.transfer", request.key, request.payload, effect, options);
    const source = result.replayed ? "replayed" : found && !effectRan ? "reconciled" : "executed";
    return {
      outcome: "succeeded", operation_id: result.operationId, body: Buffer.from(result.body).toString("utf8"), source,
    };
  } catch (error) {
    if (error instanceof ConflictError) return { outcome: "error", error: "conflict" };
    if (error instanceof OperationFailedError) {
      return { outcome: "failed", operation_id: error.operationId, code: error.code };
    }
    if (error instanceof LeaseLostError || error instanceof SupersededError) return { outcome: "error", error: "lease_lost" };
    if (error instanceof OutcomeUnknownError) {
      return { outcome: "error", error: "outcome_unknown", operation_id: error.operationId };
    }
    if (error instanceof NeedsReconciliationError) {
      return { outcome: "error", error: "needs_reconciliation", operation_id: error.operationId };
    }
    if (error instanceof PendingError) {
      return { outcome: "error", error: "deadline_passed", operation_id: error.operationId };
    }
    // Transport, unavailable, anything else: the campaign delivers again.
    process.stderr.write(`delivery ${request.id}: ${error?.name}: ${error?.message}\n`);
    return { outcome: "error", error: "other" };
  }
}

process.stdout.write(JSON.stringify({ ready: true }) + "\n");
const running = new Set();
for await (const line of createInterface({ input: process.stdin })) {
  if (line.trim() === "") continue;
  const request = JSON.parse(line);
  const delivery = deliver(request).then((reply) => {
    process.stdout.write(JSON.stringify({ ...reply, id: request.id }) + "\n");
  });
  running.add(delivery);
  delivery.finally(() => running.delete(delivery));
}
await Promise.all(running);
for (const client of clients) client.close();
