// Run from a fresh "type": "module" project that installed the packed tarball: import
// resolves the package's ES module build.
import { createRequire } from "node:module";
import { Client, Success } from "@idemd/client";

const { check } = createRequire(import.meta.url)("./common.cjs");
await check("esm", Client, Success);
