/**
 * The requests both Client and executeOnce send, built here and only here, so that a
 * request is the same whoever sends it. Durations are seconds.
 */
import { randomBytes } from "node:crypto";
import { Code, InvalidArgumentError } from "./errors.js";
import * as gen from "./gen/idem/v1/idempotency.js";
import { duration, filled } from "./proto.js";
import type * as pb from "./types.js";

/** A fresh random claim_token (16 bytes). */
export function newClaimToken(): Buffer {
  return randomBytes(16);
}

export interface SendOptions {
  /** A `monotonic()` instant bounding the call and its re-sends. */
  deadline?: number | undefined;
}

export interface ClaimOptions {
  /** Exactly one of jsonPayload, bytesPayload and fingerprint identifies the request. */
  jsonPayload?: string;
  bytesPayload?: Uint8Array;
  fingerprint?: Uint8Array;
  /** Random per attempt, reused only to re-send that same Claim (default: empty). */
  claimToken?: Uint8Array;
  lease?: number;
  maxAttemptDuration?: number;
  maxAttempts?: number;
  retention?: number;
  operationDeadline?: number;
  wait?: number;
  /** While a deployment changes how requests are normalised (docs/api.md, "Changing the
   *  normalisation while operations are in flight"): the request's fingerprints under the
   *  earlier normalisations, at most MAX_PREVIOUS_FINGERPRINTS, each 32 bytes. */
  previousFingerprints?: readonly Uint8Array[];
}

/** The server's bound on ClaimRequest.previous_fingerprints. */
export const MAX_PREVIOUS_FINGERPRINTS = 4;
const FINGERPRINT_BYTES = 32;

function refusedPrevious(field: string, description: string): InvalidArgumentError {
  return new InvalidArgumentError(Code.INVALID_ARGUMENT, `${field}: ${description}`, {
    reason: "INVALID_REQUEST",
    violations: [{ field, description }],
  });
}

/** `previous` as the server would accept it, or the InvalidArgumentError it would answer
 *  (naming `previous_fingerprints` or `previous_fingerprints[i]`), thrown here so that a
 *  wrong list never costs an RPC nor reaches an operation. */
export function checkPreviousFingerprints(previous: readonly Uint8Array[]): Buffer[] {
  if (!Array.isArray(previous)) {
    throw refusedPrevious("previous_fingerprints", "must be a list of 32-byte fingerprints");
  }
  if (previous.length > MAX_PREVIOUS_FINGERPRINTS) {
    throw refusedPrevious(
      "previous_fingerprints",
      `at most ${MAX_PREVIOUS_FINGERPRINTS} previous fingerprints, not ${previous.length}`,
    );
  }
  return previous.map((fingerprint: unknown, i) => {
    if (!(fingerprint instanceof Uint8Array) || fingerprint.length !== FINGERPRINT_BYTES) {
      const size = fingerprint instanceof Uint8Array ? `${fingerprint.length} bytes` : typeof fingerprint;
      throw refusedPrevious(`previous_fingerprints[${i}]`, `a fingerprint is ${FINGERPRINT_BYTES} bytes, not ${size}`);
    }
    return Buffer.from(fingerprint);
  });
}

export interface CompleteOptions { contentType?: string; metadata?: Record<string, string> }
export interface FailOptions { code: string; message?: string; metadata?: Record<string, string>; retryAfter?: number }
export type LookupTarget = { operationId: string } | { operation: string; key: string };
export interface LookupOptions { includeHistory?: boolean; historyPageSize?: number; historyPageToken?: string }
export type Resolution =
  | { succeeded: { body: Uint8Array; contentType?: string; metadata?: Record<string, string> } }
  | { failed: { code: string; message?: string; metadata?: Record<string, string> } }
  | { notApplied: true };
export interface ListUnresolvedOptions { operation?: string; pageSize?: number; pageToken?: string }
export interface ListOperationsOptions {
  /** Terms all of which an operation matches (docs/api.md), e.g. `state:unknown op:payments.* age>10m`;
   *  empty: every operation. */
  filter?: string;
  pageSize?: number;
  pageToken?: string;
  /** Default: oldest first. */
  order?: pb.ListOperationsOrder;
}

/** A ClaimRequest; exactly one of jsonPayload, bytesPayload and fingerprint. */
export function claimRequest(operation: string, key: string, options: ClaimOptions): pb.ClaimRequest {
  const given = [options.jsonPayload, options.bytesPayload, options.fingerprint].filter((x) => x !== undefined);
  if (given.length !== 1) throw new TypeError("give exactly one of jsonPayload, bytesPayload, fingerprint");
  const previous = checkPreviousFingerprints(options.previousFingerprints ?? []);
  const request: pb.ClaimRequest = filled(gen.ClaimRequest, {
    scope: { operation, key },
    claim_token: Buffer.from(options.claimToken ?? new Uint8Array()),
    max_attempts: options.maxAttempts ?? 0,
    previous_fingerprints: previous,
  });
  if (options.jsonPayload !== undefined) request.json_payload = options.jsonPayload;
  else if (options.bytesPayload !== undefined) request.bytes_payload = Buffer.from(options.bytesPayload);
  else if (options.fingerprint !== undefined) request.fingerprint = Buffer.from(options.fingerprint);
  if (options.lease !== undefined) request.lease = duration(options.lease);
  if (options.maxAttemptDuration !== undefined) request.max_attempt_duration = duration(options.maxAttemptDuration);
  if (options.retention !== undefined) request.retention = duration(options.retention);
  if (options.operationDeadline !== undefined) request.operation_deadline = duration(options.operationDeadline);
  if (options.wait !== undefined) request.wait = duration(options.wait);
  return request;
}

export function renewRequest(operationId: string, fence: string, lease: number | undefined): pb.RenewRequest {
  const request: pb.RenewRequest = filled(gen.RenewRequest, { operation_id: operationId, fence });
  if (lease !== undefined) request.lease = duration(lease);
  return request;
}

export function completeRequest(
  operationId: string,
  fence: string,
  body: Uint8Array,
  options: CompleteOptions,
): pb.CompleteRequest {
  return filled(gen.CompleteRequest, {
    operation_id: operationId,
    fence,
    result: { body: Buffer.from(body), content_type: options.contentType ?? "", metadata: options.metadata ?? {} },
  });
}

export function failRequest(
  operationId: string,
  fence: string,
  disposition: pb.FailDisposition,
  options: FailOptions,
): pb.FailRequest {
  const request: pb.FailRequest = filled(gen.FailRequest, {
    operation_id: operationId,
    fence,
    disposition,
    error: filled(gen.OperationError, { code: options.code, message: options.message ?? "", metadata: options.metadata ?? {} }),
  });
  if (options.retryAfter !== undefined) request.retry_after = duration(options.retryAfter);
  return request;
}

export function lookupRequest(target: LookupTarget, options: LookupOptions): pb.LookupRequest {
  const request: pb.LookupRequest = filled(gen.LookupRequest, {
    include_history: options.includeHistory ?? false,
    history_page_size: options.historyPageSize ?? 0,
    history_page_token: options.historyPageToken ?? "",
  });
  if ("operationId" in target) request.operation_id = target.operationId;
  else request.scope = { operation: target.operation, key: target.key };
  return request;
}

export function reconcileRequest(operationId: string, expectedFence: string, resolution: Resolution): pb.ReconcileRequest {
  const request: pb.ReconcileRequest = filled(gen.ReconcileRequest, { operation_id: operationId, expected_fence: expectedFence });
  if ("succeeded" in resolution) {
    const s = resolution.succeeded;
    request.succeeded = { body: Buffer.from(s.body), content_type: s.contentType ?? "", metadata: s.metadata ?? {} };
  } else if ("failed" in resolution) {
    const f = resolution.failed;
    request.failed = filled(gen.OperationError, { code: f.code, message: f.message ?? "", metadata: f.metadata ?? {} });
  } else {
    request.not_applied = {};
  }
  return request;
}

export function listUnresolvedRequest(options: ListUnresolvedOptions): pb.ListUnresolvedRequest {
  return filled(gen.ListUnresolvedRequest, {
    operation: options.operation ?? "",
    page_size: options.pageSize ?? 0,
    page_token: options.pageToken ?? "",
  });
}

export function listOperationsRequest(options: ListOperationsOptions): pb.ListOperationsRequest {
  return filled(gen.ListOperationsRequest, {
    filter: options.filter ?? "",
    page_size: options.pageSize ?? 0,
    page_token: options.pageToken ?? "",
    order: options.order ?? "ORDER_UNSPECIFIED",
  });
}
