// google.rpc.Status bytes as idemd sends them, for tests without a server.
import { Metadata } from "@grpc/grpc-js";
import { Duration } from "../src/gen/google/protobuf/duration.js";
import { BadRequest, BadRequest_FieldViolation, ErrorInfo, RetryInfo } from "../src/gen/google/rpc/error_details.js";
import { Status } from "../src/gen/google/rpc/status.js";
import { type Code, STATUS_DETAILS_KEY } from "../src/index.js";
import { filled } from "../src/proto.js";

// Each detail as given (a partial message, nested ones too) to its bytes.
const DETAILS: Record<string, (value: object) => Uint8Array> = {
  "google.rpc.ErrorInfo": (value) => ErrorInfo.encode(filled(ErrorInfo, value)).finish(),
  "google.rpc.RetryInfo": (value) => {
    const given = value as { retry_delay?: object };
    const retry_delay = given.retry_delay ? filled(Duration, given.retry_delay) : null;
    return RetryInfo.encode({ retry_delay }).finish();
  },
  "google.rpc.BadRequest": (value) => {
    const given = value as { field_violations?: object[] };
    const field_violations = (given.field_violations ?? []).map((v) => filled(BadRequest_FieldViolation, v));
    return BadRequest.encode({ field_violations }).finish();
  },
};

export function statusBytes(code: Code, ...details: [string, object][]): Uint8Array {
  const packed = details.map(([name, value]) => {
    const encode = DETAILS[name];
    if (encode === undefined) throw new Error(`no encoder for ${name}`);
    return { type_url: `type.googleapis.com/${name}`, value: Buffer.from(encode(value)) };
  });
  return Status.encode({ code, message: "m", details: packed }).finish();
}

/** An error shaped as grpc-js rejects a call: code, details and trailing metadata. */
export function serviceError(code: Code, reason?: string, retryAfter?: number): Error {
  const details: [string, object][] = [];
  if (reason) details.push(["google.rpc.ErrorInfo", { reason, domain: "idem.v1" }]);
  if (retryAfter !== undefined) {
    const whole = Math.floor(retryAfter);
    details.push(["google.rpc.RetryInfo", { retry_delay: { seconds: String(whole), nanos: Math.round((retryAfter - whole) * 1e9) } }]);
  }
  const metadata = new Metadata();
  metadata.set(STATUS_DETAILS_KEY, Buffer.from(statusBytes(code, ...details)));
  return Object.assign(new Error("fake"), { code, details: "fake", metadata });
}
