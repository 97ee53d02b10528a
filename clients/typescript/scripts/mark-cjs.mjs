// dist/cjs/ holds the CommonJS build inside a "type": "module" package: its own
// package.json tells Node (and TypeScript, for its .d.ts files) that its .js are CommonJS.
import { writeFileSync } from "node:fs";

writeFileSync(new URL("../dist/cjs/package.json", import.meta.url), '{\n  "type": "commonjs"\n}\n');
