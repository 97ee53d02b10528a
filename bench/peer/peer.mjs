// The peer a user would pick instead of idemd: AWS Powertools for Lambda
// (TypeScript) idempotency, its documented `makeIdempotent` wrapper around a
// trivial async handler, on its Redis persistence layer (CachePersistenceLayer
// with an @redis/client client). bench/run starts the Redis (appendonly yes,
// appendfsync always: every acknowledged record is on disk, as idemd's are)
// and runs this once per measured cell; it prints one JSON object.
//
//   node peer.mjs --redis-port P --mode fresh|replay|preload --concurrency N
//                 [--duration S] [--operations N] [--run-id R] [--replay-keys K]
//
// One logical operation is one call of the idempotent function: on a new key
// Powertools writes an INPROGRESS record (SET NX), runs the handler and
// writes the result (SET); on a completed key it reads the record back and
// returns the stored result without running the handler.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { CachePersistenceLayer } from '@aws-lambda-powertools/idempotency/cache';
import { createClient } from '@redis/client';

const { values: options } = parseArgs({
  options: {
    'redis-port': { type: 'string' },
    mode: { type: 'string' },
    concurrency: { type: 'string', default: '1' },
    duration: { type: 'string', default: '0' },
    operations: { type: 'string', default: '0' },
    'run-id': { type: 'string', default: 'peer' },
    'replay-keys': { type: 'string', default: '0' },
    'replay-prefix': { type: 'string', default: 'peer-replay-' },
  },
});
const mode = options.mode;
const concurrency = Math.max(1, Number(options.concurrency));
const durationMs = Number(options.duration) * 1000;
const operationBudget = Number(options.operations);
const replayKeys = Number(options['replay-keys']);
const replayPrefix = options['replay-prefix'];
const RESULT = { charge: 'ch_1' };

const client = await createClient({ url: `redis://127.0.0.1:${options['redis-port']}` }).connect();
const persistenceStore = new CachePersistenceLayer({ client });
// The key is the caller's idempotency key, as in idemd. No payload
// validation: CachePersistenceLayer (2.35.0) drops the payload hash when it
// stores the result, so with `payloadValidationJmesPath` every replay of a
// completed record fails with IdempotencyValidationError.
const config = new IdempotencyConfig({
  eventKeyJmesPath: 'key',
  expiresAfterSeconds: 24 * 3600,
});
// What Lambda would hand in: the in-progress record then expires with the
// invocation (30 s, like idemd's default lease) instead of never.
config.registerLambdaContext({ getRemainingTimeInMillis: () => 30_000 });
const executions = new Map();
const charge = makeIdempotent(
  async (request) => {
    executions.set(request.key, (executions.get(request.key) ?? 0) + 1);
    return RESULT;
  },
  { persistenceStore, config },
);

const latenciesUs = [];
const outcomes = {};
const count = (outcome) => {
  outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
};
let unsettled = 0;
let wrongReplays = 0;
let issued = 0;

/** The number of the next operation (from 1), or 0 once time or budget is up. */
function another(deadline) {
  if (durationMs > 0 && performance.now() >= deadline) return 0;
  if (operationBudget > 0 && issued >= operationBudget) return 0;
  issued += 1;
  return issued;
}

async function call(key) {
  const started = process.hrtime.bigint();
  let answer;
  try {
    answer = await charge({ key, payload: { amount: 1000, currency: 'EUR' } });
  } catch (error) {
    count(error?.name ?? 'error');
    unsettled += 1;
    answer = undefined;
  }
  latenciesUs.push(Number((process.hrtime.bigint() - started) / 1000n));
  return answer;
}

function random(bound) {
  return Math.floor(Math.random() * bound);
}

async function caller(index, deadline) {
  for (let ticket = another(deadline); ticket > 0; ticket = another(deadline)) {
    if (mode === 'replay') {
      const key = `${replayPrefix}${1 + random(replayKeys)}`;
      const before = executions.get(key) ?? 0;
      const answer = await call(key);
      if ((executions.get(key) ?? 0) !== before) {
        count('executed');
        unsettled += 1;
      } else if (answer !== undefined) {
        count('replayed');
        if (answer?.charge !== RESULT.charge) wrongReplays += 1;
      }
    } else {
      const key =
        mode === 'preload' ? `${replayPrefix}${ticket}` : `${options['run-id']}-c${index}-${ticket}`;
      const answer = await call(key);
      if (answer !== undefined) count('executed');
    }
  }
}

function peakRssKib() {
  const status = readFileSync('/proc/self/status', 'utf8');
  const line = status.split('\n').find((entry) => entry.startsWith('VmHWM:'));
  return line ? Number(line.split(/\s+/)[1]) : null;
}

function percentile(sorted, quantile) {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil(quantile * sorted.length) - 1)];
}

if (mode === 'preload') {
  // Loading is not measured: the records reach the AOF without an fsync
  // each, then every later write is fsynced again.
  await client.configSet('appendfsync', 'no');
}
const cpuBefore = process.cpuUsage();
const started = performance.now();
const deadline = started + durationMs;
await Promise.all(Array.from({ length: concurrency }, (_, index) => caller(index, deadline)));
const elapsedS = (performance.now() - started) / 1000;
const cpu = process.cpuUsage(cpuBefore);
if (mode === 'preload') {
  await client.configSet('appendfsync', 'always');
}
await client.quit();

let totalExecutions = 0;
let duplicateExecutions = 0;
for (const executed of executions.values()) {
  totalExecutions += executed;
  if (mode === 'replay') duplicateExecutions += executed;
  else duplicateExecutions += Math.max(0, executed - 1);
}
latenciesUs.sort((a, b) => a - b);
const violations = [];
if (duplicateExecutions > 0) violations.push(`${duplicateExecutions} duplicate executions`);
if (unsettled > 0) violations.push(`${unsettled} operations not settled`);
if (wrongReplays > 0) violations.push(`${wrongReplays} replays returned another result`);
const operations = latenciesUs.length;
process.stdout.write(
  `${JSON.stringify({
    workload: `peer-${mode}`,
    concurrency,
    elapsed_s: elapsedS,
    operations,
    ops_per_s: elapsedS > 0 ? operations / elapsedS : 0,
    latency_us: {
      p50: percentile(latenciesUs, 0.5),
      p90: percentile(latenciesUs, 0.9),
      p99: percentile(latenciesUs, 0.99),
      p999: percentile(latenciesUs, 0.999),
      max: latenciesUs.at(-1) ?? 0,
      mean: operations ? latenciesUs.reduce((sum, value) => sum + value, 0) / operations : 0,
    },
    outcomes,
    executions: totalExecutions,
    duplicate_executions: duplicateExecutions,
    false_conflicts: outcomes.IdempotencyValidationError ?? 0,
    unsettled,
    wrong_replays: wrongReplays,
    violations,
    server_cpu_s: (cpu.user + cpu.system) / 1e6,
    server_peak_rss_kib: peakRssKib(),
  })}\n`,
);
