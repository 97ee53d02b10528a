// google.rpc.Status bytes as idemd sends them, for tests without a server.
import { Metadata } from "@grpc/grpc-js";
import { type Code, STATUS_DETAILS_KEY } from "../src/index.js";
import { rpcTypes } from "../src/proto.js";

export function statusBytes(code: Code, ...details: [string, object][]): Uint8Array {
  const root = rpcTypes();
  const packed = details.map(([name, value]) => {
    const type = root.lookupType(name);
    return { type_url: `type.googleapis.com/${name}`, value: type.encode(type.fromObject(value)).finish() };
  });
  const status = root.lookupType("google.rpc.Status");
  return status.encode(status.fromObject({ code, message: "m", details: packed })).finish();
}

/** An error shaped as grpc-js rejects a call: code, details and trailing metadata. */
export function serviceError(code: Code, reason?: string, retryAfter?: number): Error {
  const details: [string, object][] = [];
  if (reason) details.push(["google.rpc.ErrorInfo", { reason, domain: "idem.v1" }]);
  if (retryAfter !== undefined) {
    const whole = Math.floor(retryAfter);
    details.push(["google.rpc.RetryInfo", { retry_delay: { seconds: whole, nanos: Math.round((retryAfter - whole) * 1e9) } }]);
  }
  const metadata = new Metadata();
  metadata.set(STATUS_DETAILS_KEY, Buffer.from(statusBytes(code, ...details)));
  return Object.assign(new Error("fake"), { code, details: "fake", metadata });
}
