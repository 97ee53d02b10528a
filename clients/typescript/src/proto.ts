/**
 * The API's messages, loaded at run time from the repository's protos (copied into the
 * package by the build: nothing generated is committed). `IDEMD_PROTO_DIR` points at
 * other ones.
 */
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as protoLoader from "@grpc/proto-loader";
import protobuf from "protobufjs";

export const SERVICE = "idem.v1.IdempotencyService";

/** The folder holding idem/v1/idempotency.proto and google/rpc/*.proto. */
export function protoDir(): string {
  const configured = process.env.IDEMD_PROTO_DIR;
  if (configured) return configured;
  // dist/src/proto.js -> the package root's proto/
  const root = dirname(dirname(dirname(fileURLToPath(import.meta.url))));
  const copied = join(root, "proto");
  if (existsSync(join(copied, "idem", "v1", "idempotency.proto"))) return copied;
  return join(root, "..", "..", "proto");
}

/**
 * How messages look in JavaScript: field names as in the proto (snake_case), 64-bit
 * integers as decimal strings (as in proto3's JSON mapping), enums as their names,
 * bytes as Buffers, unset scalars as their defaults, and each oneof's name holding the
 * name of the field that is set.
 */
export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: String,
  enums: String,
  bytes: Buffer,
  defaults: true,
  oneofs: true,
};

let definition: protoLoader.PackageDefinition | undefined;

export function packageDefinition(): protoLoader.PackageDefinition {
  definition ??= protoLoader.loadSync(join(protoDir(), "idem", "v1", "idempotency.proto"), {
    ...LOADER_OPTIONS,
    includeDirs: [protoDir()],
  });
  return definition;
}

let rpcRoot: protobuf.Root | undefined;

/** google.rpc.Status, ErrorInfo, RetryInfo, BadRequest (the error details). */
export function rpcTypes(): protobuf.Root {
  if (rpcRoot === undefined) {
    rpcRoot = new protobuf.Root().loadSync(
      [join(protoDir(), "google", "rpc", "status.proto"), join(protoDir(), "google", "rpc", "error_details.proto")],
      { keepCase: true },
    );
  }
  return rpcRoot;
}
