/**
 * A real idemd server per test, on each store: the embedded store in a fresh temp data
 * dir, and Postgres when DATABASE_URL is set (one fresh database for the run, made and
 * migrated by `idemd migrate`; each test is its own tenant).
 *
 * IDEMD_BIN names the server binary (default: the repository's target/debug/idemd). A
 * missing binary fails the suite: a suite that ran without its server tested nothing.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { after, describe } from "node:test";
import { Client, RetryPolicy } from "../src/index.js";

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "..");

export function idemdBin(): string {
  const configured = process.env.IDEMD_BIN;
  const candidate = configured ? resolve(configured) : join(REPO, "target", "debug", "idemd");
  if (!existsSync(candidate)) throw new Error(`no idemd binary at ${candidate}: build it or set IDEMD_BIN`);
  return candidate;
}

let postgres: string | null | undefined;

/** One fresh, migrated database on DATABASE_URL's server for the whole run. */
function postgresUrl(): string | null {
  if (postgres !== undefined) return postgres;
  const base = process.env.DATABASE_URL;
  if (!base) {
    postgres = null;
    return postgres;
  }
  const url = new URL(base);
  url.pathname = `/idemd_ts_${randomUUID().replaceAll("-", "").slice(0, 16)}`;
  const done = spawnSync(idemdBin(), ["migrate"], {
    env: { PATH: process.env.PATH ?? "", DATABASE_URL: url.toString() },
    encoding: "utf8",
    timeout: 120_000,
  });
  if (done.status !== 0) throw new Error(`idemd migrate failed: ${done.stderr}`);
  postgres = url.toString();
  // Dropped when this test file's process ends (each test file runs in its own).
  process.once("exit", () => {
    spawnSync("psql", [base, "-q", "-c", `DROP DATABASE IF EXISTS "${url.pathname.slice(1)}" WITH (FORCE)`], {
      stdio: "ignore",
      timeout: 30_000,
    });
  });
  return postgres;
}

export type Store = "sqlite" | "postgres";

/** One idemd store and the server serving it (restartable on the same port). */
export class Server {
  readonly binary = idemdBin();
  readonly tmp = mkdtempSync(join(tmpdir(), "idemd-ts-"));
  readonly env: Record<string, string>;
  process: ChildProcess | undefined;
  addr = "";
  port = 0;
  starts = 0;
  token = "";

  constructor(readonly store: Store, env: Record<string, string> = {}) {
    this.env = {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      IDEMD_METRICS_LISTEN: "off",
      // The tests talk plaintext on loopback; serve refuses that unless asked.
      IDEMD_INSECURE_PLAINTEXT: "true",
      IDEMD_MIN_LEASE: "10ms",
      // The server adds its clock margin to previous_attempt_deadline; these tests time
      // the doubt to the earlier deadline itself (the margin has the server's own tests).
      IDEMD_CLOCK_MARGIN: "0s",
      IDEMD_LOG_FORMAT: "json",
      RUST_LOG: "info",
      ...env,
    };
    if (store === "postgres") {
      const url = postgresUrl();
      if (url === null) throw new Error("the Postgres store needs DATABASE_URL");
      this.env.DATABASE_URL = url;
    } else {
      this.env.IDEMD_DATA_DIR = join(this.tmp, "data");
    }
  }

  run(...args: string[]): string {
    const done = spawnSync(this.binary, args, { env: this.env, encoding: "utf8", timeout: 60_000 });
    if (done.status !== 0) throw new Error(`idemd ${args.join(" ")} failed: ${done.stderr}`);
    return done.stdout.trim();
  }

  createTenant(): string {
    return this.run("tenant", "create", `ts-${randomUUID().slice(0, 12)}`);
  }

  /** Starts serving; a restart listens on the same port. */
  async start(): Promise<void> {
    this.starts += 1;
    const log = join(this.tmp, `serve-${this.starts}.log`);
    const { openSync, closeSync } = await import("node:fs");
    const fd = openSync(log, "w");
    this.process = spawn(this.binary, ["serve", "--listen", `127.0.0.1:${this.port}`], {
      env: this.env,
      stdio: ["ignore", "ignore", fd],
    });
    closeSync(fd);
    const child = this.process;
    const end = Date.now() + 30_000;
    while (Date.now() < end) {
      for (const line of readFileSync(log, "utf8").split("\n")) {
        if (line.includes('"idemd serving"')) {
          this.addr = (JSON.parse(line) as { listen: string }).listen;
          this.port = Number(this.addr.slice(this.addr.lastIndexOf(":") + 1));
          return;
        }
      }
      if (child.exitCode !== null) throw new Error(`idemd exited: ${readFileSync(log, "utf8")}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error(`idemd did not start: ${readFileSync(log, "utf8")}`);
  }

  /** SIGKILL: no drain; whatever was not committed is lost. */
  async kill(): Promise<void> {
    const child = this.process;
    this.process = undefined;
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGKILL");
      await exited;
    }
  }

  async close(): Promise<void> {
    await this.kill();
    rmSync(this.tmp, { recursive: true, force: true });
  }

  client(retry?: RetryPolicy, addr = this.addr): Client {
    return new Client(addr, this.token, retry ? { retry } : {});
  }
}

export function stores(): Store[] {
  if (!process.env.DATABASE_URL) {
    console.log("DATABASE_URL is unset: the Postgres store's tests are skipped");
    return ["sqlite"];
  }
  return ["sqlite", "postgres"];
}

/** A started server with a fresh tenant; closed after the test. */
export async function startServer(store: Store, env: Record<string, string> = {}): Promise<Server> {
  const server = new Server(store, env);
  server.token = server.createTenant();
  await server.start();
  return server;
}

/** Runs `body` as a describe block per store. */
export function eachStore(name: string, body: (store: Store) => void): void {
  for (const store of stores()) describe(`${name} [${store}]`, () => body(store));
}

export function key(): string {
  return `k-${randomUUID()}`;
}

/** A fake provider that counts business effects and can be looked up by reference. */
export class Provider {
  effects: string[] = [];
  records = new Map<string, Buffer>();
  effect(reference: string): Buffer {
    this.effects.push(reference);
    const body = Buffer.from(JSON.stringify({ charge: `ch_${this.effects.length}`, ref: reference }));
    this.records.set(reference, body);
    return body;
  }
}

export async function eventually(predicate: () => boolean, timeout = 5): Promise<void> {
  const end = Date.now() + timeout * 1000;
  while (Date.now() < end) {
    if (predicate()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error("condition not met in time");
}

export const fastRetry = new RetryPolicy({ initialBackoff: 0.02, maxBackoff: 0.2, callTimeout: 5 });

/**
 * fastRetry with sends enough to outlast the channel's reconnect backoff (at most 1 s,
 * plus jitter: src/client.ts) once a cut connection is restored: ten sends of fastRetry
 * last about 0.6 s, and a call made while the channel still backs off fails at once.
 */
export const reconnectingRetry = new RetryPolicy({
  initialBackoff: 0.02,
  maxBackoff: 0.2,
  callTimeout: 5,
  maxSends: 40,
});

/** Closes what a test opened, whatever happened. */
export function cleanup(): (fn: () => unknown) => void {
  const fns: (() => unknown)[] = [];
  after(async () => {
    for (const fn of fns.reverse()) await fn();
  });
  return (fn) => fns.push(fn);
}
