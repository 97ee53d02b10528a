// Copies the repository's protos (the API and the vendored google/rpc ones) into the
// package, from where src/proto.ts loads them at run time. Nothing generated is
// committed: proto/ here is a build output (see .gitignore).
import { cpSync, existsSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(dirname(fileURLToPath(import.meta.url)));
const source = resolve(process.env.IDEMD_PROTO_DIR ?? join(here, "..", "..", "proto"));
const target = join(here, "proto");
if (!existsSync(join(source, "idem", "v1", "idempotency.proto"))) {
  if (existsSync(join(target, "idem", "v1", "idempotency.proto"))) process.exit(0);
  console.error(`copy-protos: no idem/v1/idempotency.proto under ${source}`);
  process.exit(1);
}
if (source !== target) {
  rmSync(target, { recursive: true, force: true });
  cpSync(source, target, { recursive: true });
}
