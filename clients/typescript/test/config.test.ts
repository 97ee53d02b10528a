// Issue 21 item 4: one convention in every client. The address is host:port or
// http(s)://host:port, IDEMD_ADDR and IDEMD_TOKEN are read when not passed, and a token
// that cannot work is refused by the constructor, before any connection.
import assert from "node:assert/strict";
import { createServer, type Server as NetServer } from "node:net";
import { after, before, test } from "node:test";
import { credentials } from "@grpc/grpc-js";
import {
  Client, ConfigError, EmptyTokenError, ENV_ADDR, ENV_TOKEN, parseAddress, RetryPolicy, UnavailableError,
} from "../src/index.js";
import { key, type Server, startServer } from "./harness.js";

const quick = new RetryPolicy({ maxSends: 2, initialBackoff: 0.01, callTimeout: 2 });

/** Runs `body` with IDEMD_ADDR / IDEMD_TOKEN set as given (undefined: unset), then restores them. */
async function withEnv(env: { addr?: string | undefined; token?: string | undefined }, body: () => unknown): Promise<void> {
  const saved = [process.env[ENV_ADDR], process.env[ENV_TOKEN]];
  const set = (name: string, value: string | undefined) => {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  };
  set(ENV_ADDR, env.addr);
  set(ENV_TOKEN, env.token);
  try {
    await body();
  } finally {
    set(ENV_ADDR, saved[0]);
    set(ENV_TOKEN, saved[1]);
  }
}

test("addresses: host:port, http://host:port, https://host:port", () => {
  assert.deepEqual(parseAddress("127.0.0.1:50051"), { target: "127.0.0.1:50051", tls: false });
  assert.deepEqual(parseAddress(" idemd.internal:50051\n"), { target: "idemd.internal:50051", tls: false });
  assert.deepEqual(parseAddress("[::1]:50051"), { target: "[::1]:50051", tls: false });
  assert.deepEqual(parseAddress("http://idemd:50051"), { target: "idemd:50051", tls: false });
  assert.deepEqual(parseAddress("https://idemd.example:8443/"), { target: "idemd.example:8443", tls: true });
  assert.deepEqual(parseAddress("https://idemd.example"), { target: "idemd.example:443", tls: true });
  assert.deepEqual(parseAddress("http://idemd.example"), { target: "idemd.example:80", tls: false });
  assert.deepEqual(parseAddress("HTTPS://[::1]:9"), { target: "[::1]:9", tls: true });
});

test("addresses that cannot work are a ConfigError", () => {
  for (const bad of ["", "  ", "idemd", "idemd:", ":50051", "idemd:port", "grpc://idemd:1", "dns:///idemd:1",
    "http://idemd:1/v1", "http://idemd:1?x=1", "https://user:pw@idemd:1", "http://:1", "idemd/x:1"]) {
    assert.throws(() => parseAddress(bad), ConfigError, JSON.stringify(bad));
    assert.throws(() => new Client(bad, "t"), ConfigError, JSON.stringify(bad));
  }
});

test("an empty token is refused at once, before any connection", async () => {
  // A listener that counts connections: the refused clients must never dial it.
  let connections = 0;
  const listener: NetServer = createServer((socket) => {
    connections += 1;
    socket.destroy();
  });
  await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve));
  const { port } = listener.address() as { port: number };
  try {
    assert.throws(() => new Client(`127.0.0.1:${port}`, ""), EmptyTokenError);
    assert.throws(() => new Client(`127.0.0.1:${port}`, ""), ConfigError);
    assert.throws(() => new Client(`127.0.0.1:${port}`, ""), /token is empty.*IDEMD_TOKEN/);
    assert.throws(() => new Client(`127.0.0.1:${port}`, "idem_abc\n"), /whitespace or a control character/);
    await withEnv({ addr: `127.0.0.1:${port}`, token: "" }, () => {
      assert.throws(() => Client.fromEnv(), EmptyTokenError);
    });
    await withEnv({ addr: `127.0.0.1:${port}`, token: undefined }, () => {
      assert.throws(() => Client.fromEnv(), EmptyTokenError);
      assert.throws(() => new Client(`127.0.0.1:${port}`), EmptyTokenError);
    });
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(connections, 0);
  } finally {
    listener.close();
  }
});

test("no address passed and IDEMD_ADDR unset is a ConfigError naming it", async () => {
  await withEnv({ addr: undefined, token: "t" }, () => {
    assert.throws(() => Client.fromEnv(), /no address.*IDEMD_ADDR/);
  });
});

test("https with insecure credentials is refused rather than sent in plaintext", () => {
  assert.throws(() => new Client("https://idemd:1", "t", { credentials: credentials.createInsecure() }), ConfigError);
  new Client("https://idemd:1", "t", { credentials: credentials.createSsl() }).close();
});

let server: Server;
before(async () => {
  server = await startServer("sqlite");
});
after(async () => {
  await server.close();
});

test("IDEMD_ADDR and IDEMD_TOKEN are read when not passed, in every address form", async () => {
  const port = server.addr.slice(server.addr.lastIndexOf(":") + 1);
  for (const addr of [server.addr, `http://127.0.0.1:${port}`, `http://localhost:${port}/`]) {
    await withEnv({ addr, token: server.token }, async () => {
      for (const client of [Client.fromEnv(), new Client(), new Client(undefined, undefined, { retry: quick })]) {
        try {
          const answer = await client.claim("config.env", key(), { jsonPayload: "{}" });
          assert.equal(answer.outcome, "acquired", addr);
        } finally {
          client.close();
        }
      }
    });
  }
  // What is passed wins over the environment.
  await withEnv({ addr: "127.0.0.1:1", token: "wrong" }, async () => {
    const client = new Client(server.addr, server.token);
    try {
      assert.equal((await client.claim("config.env", key(), { jsonPayload: "{}" })).outcome, "acquired");
    } finally {
      client.close();
    }
  });
});

test("https:// means TLS: it does not speak to a plaintext server", async () => {
  const port = server.addr.slice(server.addr.lastIndexOf(":") + 1);
  const client = new Client(`https://127.0.0.1:${port}`, server.token, { retry: quick });
  try {
    await assert.rejects(client.claim("config.tls", key(), { jsonPayload: "{}" }), UnavailableError);
  } finally {
    client.close();
  }
});
