/**
 * The wire side of the API: each RPC's path and its encoders, generated from the proto
 * by ts-proto (src/gen/, committed; nothing is loaded at run time).
 */
import * as gen from "./gen/idem/v1/idempotency.js";
import type * as pb from "./types.js";

export const SERVICE = "idem.v1.IdempotencyService";

/** A protobuf Duration of `seconds`. */
export function duration(seconds: number): pb.Duration {
  const whole = Math.floor(seconds);
  return { seconds: String(whole), nanos: Math.round((seconds - whole) * 1e9) };
}

/** A Duration the server sent, in seconds; missing or negative counts as zero. */
export function seconds(message: pb.Duration | null | undefined): number {
  if (!message) return 0;
  return Math.max(0, Number(message.seconds) + message.nanos / 1e9);
}

/** What ts-proto generates for each message (its MessageFns, which it does not export). */
interface Codec<T> {
  encode(message: T): { finish(): Uint8Array };
  decode(input: Uint8Array): T;
}

const EMPTY = new Uint8Array();

/** A message of `codec`'s type: `fields` over the proto's defaults (what decoding no bytes
 *  gives), since the generated encoders expect every field to be there. */
export function filled<T>(codec: Codec<T>, fields: Partial<T>): T {
  return { ...codec.decode(EMPTY), ...fields };
}

export interface Rpc<Req, Resp> {
  path: string;
  serialize(request: Req): Buffer;
  deserialize(bytes: Buffer): Resp;
}

function rpc<Req, Resp>(name: string, request: Codec<Req>, response: Codec<Resp>): Rpc<Req, Resp> {
  return {
    path: `/${SERVICE}/${name}`,
    // A hand-built request may leave fields out.
    serialize: (value) => Buffer.from(request.encode(filled(request, value)).finish()),
    deserialize: (bytes) => response.decode(bytes),
  };
}

/** The name of the oneof field that is set, as callers of this client always read it. */
function namedClaimResponse(response: gen.ClaimResponse): pb.ClaimResponse {
  const named: pb.ClaimResponse = response;
  for (const name of ["acquired", "reconcile_first", "pending", "completed", "needs_reconciliation"] as const) {
    if (response[name] != null) named.outcome = name;
  }
  const completed = named.completed;
  if (completed != null) {
    if (completed.result != null) completed.outcome = "result";
    else if (completed.error != null) completed.outcome = "error";
  }
  return named;
}

const claim = rpc<pb.ClaimRequest, gen.ClaimResponse>("Claim", gen.ClaimRequest, gen.ClaimResponse);

export const METHODS = {
  Claim: { ...claim, deserialize: (bytes: Buffer) => namedClaimResponse(claim.deserialize(bytes)) } as Rpc<
    pb.ClaimRequest,
    pb.ClaimResponse
  >,
  Renew: rpc<pb.RenewRequest, pb.RenewResponse>("Renew", gen.RenewRequest, gen.RenewResponse),
  Complete: rpc<pb.CompleteRequest, pb.CompleteResponse>("Complete", gen.CompleteRequest, gen.CompleteResponse),
  Fail: rpc<pb.FailRequest, pb.FailResponse>("Fail", gen.FailRequest, gen.FailResponse),
  Lookup: rpc<pb.LookupRequest, pb.LookupResponse>("Lookup", gen.LookupRequest, gen.LookupResponse),
  Reconcile: rpc<pb.ReconcileRequest, pb.ReconcileResponse>("Reconcile", gen.ReconcileRequest, gen.ReconcileResponse),
  ListUnresolved: rpc<pb.ListUnresolvedRequest, pb.ListUnresolvedResponse>(
    "ListUnresolved",
    gen.ListUnresolvedRequest,
    gen.ListUnresolvedResponse,
  ),
  ListOperations: rpc<pb.ListOperationsRequest, pb.ListOperationsResponse>(
    "ListOperations",
    gen.ListOperationsRequest,
    gen.ListOperationsResponse,
  ),
};
