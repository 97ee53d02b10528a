/**
 * Typed errors for idemd's gRPC statuses, decoded from their google.rpc details.
 *
 * Every status idemd sends carries a google.rpc.Status in the grpc-status-details-bin
 * trailer with an ErrorInfo (domain idem.v1) whose reason is stable API;
 * INVALID_ARGUMENT adds BadRequest and UNAVAILABLE adds RetryInfo. `fromServiceError`
 * turns a grpc-js error into the most specific class below: branch on the class (or on
 * `reason`), never on the message.
 */
import { type Metadata, status as Code } from "@grpc/grpc-js";
import type { Any } from "./gen/google/protobuf/any.js";
import { BadRequest, ErrorInfo, RetryInfo } from "./gen/google/rpc/error_details.js";
import { Status } from "./gen/google/rpc/status.js";
import { seconds } from "./proto.js";
import type { OperationError, OperationMessage } from "./types.js";

export const DOMAIN = "idem.v1";
export const STATUS_DETAILS_KEY = "grpc-status-details-bin";
export { Code };

/** One BadRequest field violation: the field as named in the proto (`scope.key`). */
export interface FieldViolation {
  field: string;
  description: string;
}

/** Base of every error this package throws. */
export class IdemError extends Error {
  override name = "IdemError";
}

export interface StatusErrorInit {
  reason?: string | undefined;
  metadata?: Record<string, string>;
  retryAfter?: number | undefined;
  violations?: FieldViolation[];
}

/** A gRPC status from idemd (or from the transport when `reason` is undefined). */
export class StatusError extends IdemError {
  override name = "StatusError";
  /** The ErrorInfo reason (LEASE_LOST, ...); undefined when the status had none,
   *  e.g. a connection that failed before reaching idemd. */
  readonly reason: string | undefined;
  readonly metadata: Record<string, string>;
  /** RetryInfo's delay in seconds, when the status carried one. */
  readonly retryAfter: number | undefined;
  readonly violations: FieldViolation[];

  constructor(
    readonly code: Code,
    readonly grpcMessage: string,
    init: StatusErrorInit = {},
  ) {
    super(`${Code[code] ?? code}: ${grpcMessage}${init.reason ? ` (${init.reason})` : ""}`);
    this.reason = init.reason;
    this.metadata = { ...(init.metadata ?? {}) };
    this.retryAfter = init.retryAfter;
    this.violations = [...(init.violations ?? [])];
  }

  get operationId(): string | undefined {
    return this.metadata.operation_id;
  }

  /** The operation's state as idemd named it (IN_PROGRESS, SUCCEEDED, ...). */
  get state(): string | undefined {
    return this.metadata.state;
  }
}

/** INVALID_ARGUMENT (INVALID_REQUEST): `violations` names each field. */
export class InvalidArgumentError extends StatusError { override name = "InvalidArgumentError"; }
/** UNAUTHENTICATED: no token (MISSING_CREDENTIALS) or a bad one (INVALID_CREDENTIALS). */
export class UnauthenticatedError extends StatusError { override name = "UnauthenticatedError"; }
export class PermissionDeniedError extends StatusError { override name = "PermissionDeniedError"; }
/** NOT_FOUND (OPERATION_NOT_FOUND): no such operation, or another tenant's. */
export class NotFoundError extends StatusError { override name = "NotFoundError"; }
/** FAILED_PRECONDITION: a request the operation's state refuses. */
export class FailedPreconditionError extends StatusError { override name = "FailedPreconditionError"; }
/** IDEMPOTENCY_KEY_REUSED: the key was used with a different request. Never a replay,
 *  never a new execution; `operationId` names the operation that holds the key. */
export class ConflictError extends FailedPreconditionError { override name = "ConflictError"; }
/** RESULT_EXPIRED: the key's result passed retention; it is never executed again. */
export class ResultExpiredError extends FailedPreconditionError { override name = "ResultExpiredError"; }
/** OPERATION_TERMINAL: the operation already ended. */
export class OperationTerminalError extends FailedPreconditionError { override name = "OperationTerminalError"; }
/** REQUEST_MISMATCH: the same fence re-sent with a different request. */
export class RequestMismatchError extends FailedPreconditionError { override name = "RequestMismatchError"; }
/** LEASE_STILL_LIVE: Reconcile while an owner holds the lease. */
export class LeaseStillLiveError extends FailedPreconditionError { override name = "LeaseStillLiveError"; }
/** ATTEMPT_STILL_RUNNING: NOT_APPLIED before the last attempt's deadline. */
export class AttemptStillRunningError extends FailedPreconditionError { override name = "AttemptStillRunningError"; }
/** ATTEMPT_DEADLINE_PASSED: the owner's attempt deadline passed; it may not write. */
export class AttemptDeadlinePassedError extends FailedPreconditionError { override name = "AttemptDeadlinePassedError"; }
/** STATE_FORBIDS: any other write the state forbids. */
export class StateForbidsError extends FailedPreconditionError { override name = "StateForbidsError"; }
export class AbortedError extends StatusError { override name = "AbortedError"; }
/** LEASE_LOST: the write carried a stale fence; another owner or a reconciler took
 *  over. Look the operation up and answer with what is stored; never redo the effect. */
export class LeaseLostError extends AbortedError {
  override name = "LeaseLostError";
  /** The current fence (decimal string), when idemd said it. */
  get currentFence(): string | undefined {
    const value = this.metadata.current_fence;
    return value !== undefined && /^[0-9]+$/.test(value) ? value : undefined;
  }
}
/** UNAVAILABLE: re-send unchanged after `retryAfter` (RetryInfo) or a backoff. */
export class UnavailableError extends StatusError { override name = "UnavailableError"; }
/** DEADLINE_EXCEEDED: the call's deadline passed; whether it took effect is unknown. */
export class DeadlineExceededError extends StatusError { override name = "DeadlineExceededError"; }
/** RESOURCE_EXHAUSTED: overload or a quota; re-send after `retryAfter`. */
export class ResourceExhaustedError extends StatusError { override name = "ResourceExhaustedError"; }
/**
 * RESOURCE_EXHAUSTED `REQUEST_TOO_LARGE`: the message is longer than any legal request.
 * Never re-sent: the same bytes would be refused again.
 */
export class RequestTooLargeError extends ResourceExhaustedError { override name = "RequestTooLargeError"; }
/** INTERNAL or any code idemd does not send on purpose. */
export class InternalError extends StatusError { override name = "InternalError"; }

type StatusErrorClass = new (code: Code, message: string, init?: StatusErrorInit) => StatusError;

const BY_REASON: Record<string, StatusErrorClass> = {
  IDEMPOTENCY_KEY_REUSED: ConflictError,
  RESULT_EXPIRED: ResultExpiredError,
  OPERATION_TERMINAL: OperationTerminalError,
  REQUEST_MISMATCH: RequestMismatchError,
  LEASE_STILL_LIVE: LeaseStillLiveError,
  ATTEMPT_STILL_RUNNING: AttemptStillRunningError,
  ATTEMPT_DEADLINE_PASSED: AttemptDeadlinePassedError,
  STATE_FORBIDS: StateForbidsError,
  LEASE_LOST: LeaseLostError,
  REQUEST_TOO_LARGE: RequestTooLargeError,
};

const BY_CODE: Partial<Record<Code, StatusErrorClass>> = {
  [Code.INVALID_ARGUMENT]: InvalidArgumentError,
  [Code.UNAUTHENTICATED]: UnauthenticatedError,
  [Code.PERMISSION_DENIED]: PermissionDeniedError,
  [Code.NOT_FOUND]: NotFoundError,
  [Code.FAILED_PRECONDITION]: FailedPreconditionError,
  [Code.ABORTED]: AbortedError,
  [Code.UNAVAILABLE]: UnavailableError,
  [Code.DEADLINE_EXCEEDED]: DeadlineExceededError,
  [Code.RESOURCE_EXHAUSTED]: ResourceExhaustedError,
};

function typeName(detail: Any): string {
  const slash = detail.type_url.lastIndexOf("/");
  return detail.type_url.slice(slash + 1);
}

/** The typed error for a status and its grpc-status-details-bin bytes (if any). */
export function fromStatus(code: Code, message: string, details?: Uint8Array): StatusError {
  let reason: string | undefined;
  let metadata: Record<string, string> = {};
  let retryAfter: number | undefined;
  const violations: FieldViolation[] = [];
  if (details && details.length > 0) {
    let parsed: Any[];
    try {
      parsed = Status.decode(details).details;
    } catch {
      parsed = [];
    }
    for (const detail of parsed) {
      try {
        switch (typeName(detail)) {
          case "google.rpc.ErrorInfo": {
            const info = ErrorInfo.decode(detail.value);
            if (info.domain === DOMAIN || reason === undefined) {
              reason = info.reason;
              metadata = { ...info.metadata };
            }
            break;
          }
          case "google.rpc.RetryInfo": {
            retryAfter = Math.max(0, seconds(RetryInfo.decode(detail.value).retry_delay));
            break;
          }
          case "google.rpc.BadRequest": {
            for (const v of BadRequest.decode(detail.value).field_violations) {
              violations.push({ field: v.field, description: v.description });
            }
            break;
          }
          default:
            break;
        }
      } catch {
        continue;
      }
    }
  }
  const cls = (reason !== undefined ? BY_REASON[reason] : undefined) ?? BY_CODE[code] ?? InternalError;
  return new cls(code, message, { reason, metadata, retryAfter, violations });
}

/** Decodes a grpc-js call error (a ServiceError) into a typed error. */
export function fromServiceError(error: unknown): StatusError {
  const e = (error ?? {}) as { code?: unknown; details?: unknown; message?: unknown; metadata?: unknown };
  const code = typeof e.code === "number" && Code[e.code] !== undefined ? (e.code as Code) : Code.UNKNOWN;
  const message = typeof e.details === "string" ? e.details : String(e.message ?? error);
  let details: Uint8Array | undefined;
  // Duck-typed: the Metadata may come from another copy of grpc-js.
  const metadata = e.metadata as Metadata | undefined;
  if (metadata && typeof metadata.get === "function") {
    for (const value of metadata.get(STATUS_DETAILS_KEY)) {
      if (typeof value !== "string") details = value;
    }
  }
  return fromStatus(code, message, details);
}

// ---- outcomes of executeOnce that are not gRPC statuses ---------------------------

/** The operation ended with a terminal error, stored and replayed (state FAILED).
 *  `error` is the stored OperationError (code, message, metadata, reason). */
export class OperationFailedError extends IdemError {
  override name = "OperationFailedError";
  readonly code: string;
  readonly reason: string;
  constructor(
    readonly operationId: string,
    readonly error: OperationError,
    /** True when this call replayed a failure stored by an earlier call. */
    readonly replayed: boolean,
  ) {
    super(`operation ${operationId} failed: ${error.code || error.reason}: ${error.message}`);
    this.code = error.code;
    this.reason = error.reason;
  }
}

/** The attempt budget is spent on unknown outcomes: only Reconcile resolves it. */
export class NeedsReconciliationError extends IdemError {
  override name = "NeedsReconciliationError";
  constructor(readonly operationId: string, readonly fence: string, readonly attempts: number) {
    super(`operation ${operationId} needs reconciliation (fence ${fence}, ${attempts} attempts); nothing was executed`);
  }
}

/** This attempt's effect may or may not have happened; idemd was told UNKNOWN (or could
 *  not be told). The next owner reconciles first; nothing is redone. */
export class OutcomeUnknownError extends IdemError {
  override name = "OutcomeUnknownError";
  constructor(readonly operationId: string, message: string, options?: { cause?: unknown }) {
    super(`operation ${operationId}: ${message}`, options);
  }
}

/** The effect was aborted at the attempt deadline; its outcome is unknown. */
export class AttemptTimeoutError extends OutcomeUnknownError {
  override name = "AttemptTimeoutError";
}

/** The operation is still in progress elsewhere (or its retry is not yet due, or this
 *  call's attempt ended without a result, e.g. declined before its effect) and the
 *  caller's deadline passed: nothing was executed; try again after `retryAfter`. */
export class PendingError extends IdemError {
  override name = "PendingError";
  constructor(readonly operationId: string, readonly retryAfter: number, readonly reason: string) {
    super(`operation ${operationId} is pending (${reason}); retry after ${retryAfter.toFixed(3)}s`);
  }
}

/** A newer owner or a reconciler took the operation while this call held it, and it
 *  has not ended yet: what is stored stands and the effect is never redone. */
export class SupersededError extends IdemError {
  override name = "SupersededError";
  constructor(readonly operation: OperationMessage | undefined) {
    super(`operation ${operation?.operation_id ?? "?"} was taken over; now ${operation?.state ?? "unknown"}`);
  }
}

/** The server answered a Claim outcome this client does not know: nothing executed. */
export class UnrecognisedOutcomeError extends IdemError {
  override name = "UnrecognisedOutcomeError";
}

// ---- the client's own configuration, refused before any call ------------------------

/** The address or token a Client was given (or found in IDEMD_ADDR / IDEMD_TOKEN) cannot
 *  work: thrown by the constructor, before any connection is made. */
export class ConfigError extends IdemError {
  override name = "ConfigError";
}

/** The token is empty (say IDEMD_TOKEN unset): every call would be UNAUTHENTICATED. */
export class EmptyTokenError extends ConfigError {
  override name = "EmptyTokenError";
}
