// Item 8: the README's usage snippet runs as written against a real server (imported as
// "@idemd/client" through the package's own exports), and replays on the second run.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";
import { type Server, startServer } from "./harness.js";

const PACKAGE = dirname(dirname(dirname(fileURLToPath(import.meta.url))));

function snippet(): string {
  const readme = readFileSync(join(PACKAGE, "README.md"), "utf8");
  const usage = readme.slice(readme.indexOf("## Usage"));
  const match = /```ts\n([\s\S]*?)```/.exec(usage);
  assert.ok(match, "no ts block under ## Usage");
  return match[1]!;
}

let server: Server;
before(async () => {
  server = await startServer("sqlite");
});
after(async () => {
  await server.close();
});

test("the README usage snippet is ten lines and runs as written", () => {
  const code = snippet();
  assert.ok(code.trim().split("\n").length <= 10, code);
  // Inside the package, so that "@idemd/client" resolves to it by name.
  const file = join(PACKAGE, "dist", "readme-usage.mjs");
  writeFileSync(file, code);
  try {
    const run = () => spawnSync(process.execPath, [file], {
      env: { ...process.env, IDEMD_ADDR: server.addr, IDEMD_TOKEN: server.token },
      encoding: "utf8",
      timeout: 60_000,
    });
    const first = run();
    assert.equal(first.status, 0, first.stderr);
    assert.equal(first.stdout.trim(), '{"charge":"ch_1"} (charged)');
    const second = run();
    assert.equal(second.status, 0, second.stderr);
    assert.equal(second.stdout.trim(), '{"charge":"ch_1"} (replayed)');
  } finally {
    rmSync(file, { force: true });
  }
});
