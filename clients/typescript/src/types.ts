/**
 * The API's messages as this client reads and writes them (see proto.ts for the
 * mapping): field names as in the proto, uint64 as decimal strings, enums by name,
 * bytes as Buffers. Durations are given to the Client's methods in seconds.
 */

export interface Duration { seconds: string; nanos: number }
export interface Timestamp { seconds: string; nanos: number }

export type OperationState =
  | "OPERATION_STATE_UNSPECIFIED" | "OPERATION_STATE_IN_PROGRESS" | "OPERATION_STATE_SUCCEEDED"
  | "OPERATION_STATE_FAILED" | "OPERATION_STATE_RETRY_WAIT" | "OPERATION_STATE_UNKNOWN"
  | "OPERATION_STATE_EXPIRED";
export type FailureReason =
  | "FAILURE_REASON_UNSPECIFIED" | "FAILURE_REASON_TERMINAL"
  | "FAILURE_REASON_ATTEMPTS_EXHAUSTED" | "FAILURE_REASON_DEADLINE_EXCEEDED";
export type FailDisposition =
  | "FAIL_DISPOSITION_TERMINAL" | "FAIL_DISPOSITION_RETRYABLE" | "FAIL_DISPOSITION_UNKNOWN"
  | "FAIL_DISPOSITION_NOT_STARTED";
export type PendingReason =
  | "PENDING_REASON_UNSPECIFIED" | "PENDING_REASON_IN_PROGRESS" | "PENDING_REASON_RETRY_SCHEDULED";

export interface Scope { operation: string; key: string }

export interface ResultMessage { body: Buffer; content_type: string; metadata: Record<string, string> }
export interface OperationError {
  reason: FailureReason | string;
  code: string;
  message: string;
  metadata: Record<string, string>;
}

export interface Ownership {
  operation_id: string;
  fence: string;
  attempt: number;
  max_attempts: number;
  lease: Duration | null;
  attempt_deadline: Duration | null;
}
export interface Acquired { ownership: Ownership | null }
export interface ReconcileFirst {
  ownership: Ownership | null;
  previous_state: OperationState | string;
  previous_fence: string;
  previous_attempt_deadline: Duration | null;
}
export interface Pending { operation_id: string; reason: PendingReason | string; retry_after: Duration | null; attempt: number }
export interface Completed {
  operation_id: string;
  state: OperationState | string;
  result?: ResultMessage | null;
  error?: OperationError | null;
  outcome?: "result" | "error";
  attempts: number;
  completed_at: Timestamp | null;
}
export interface NeedsReconciliation { operation_id: string; fence: string; attempts: number }

export interface ClaimRequest {
  scope: Scope;
  fingerprint?: Buffer;
  json_payload?: string;
  bytes_payload?: Buffer;
  claim_token: Buffer;
  lease?: Duration;
  max_attempt_duration?: Duration;
  max_attempts: number;
  retention?: Duration;
  operation_deadline?: Duration;
  wait?: Duration;
}
export interface ClaimResponse {
  /** The name of the outcome that is set; anything else (or nothing) is an outcome this
   *  client does not know: never execute. */
  outcome?: "acquired" | "reconcile_first" | "pending" | "completed" | "needs_reconciliation" | string;
  acquired?: Acquired | null;
  reconcile_first?: ReconcileFirst | null;
  pending?: Pending | null;
  completed?: Completed | null;
  needs_reconciliation?: NeedsReconciliation | null;
}

export interface RenewRequest { operation_id: string; fence: string; lease?: Duration }
export interface RenewResponse { lease: Duration | null; attempt_deadline: Duration | null }
export interface CompleteRequest { operation_id: string; fence: string; result: Partial<ResultMessage> }
export interface CompleteResponse { state: OperationState | string }
export interface FailRequest {
  operation_id: string;
  fence: string;
  disposition: FailDisposition;
  error: Partial<OperationError>;
  retry_after?: Duration;
}
export interface FailResponse { state: OperationState | string; reason: FailureReason | string; retry_after: Duration | null }

export interface LookupRequest {
  scope?: Scope;
  operation_id?: string;
  include_history: boolean;
  history_page_size: number;
  history_page_token: string;
}
export interface OperationMessage {
  operation_id: string;
  scope: Scope | null;
  state: OperationState | string;
  lease_expired: boolean;
  fingerprint: Buffer;
  fence: string;
  attempt: number;
  max_attempts: number;
  result: ResultMessage | null;
  error: OperationError | null;
  created_at: Timestamp | null;
  updated_at: Timestamp | null;
  lease_expires_at: Timestamp | null;
  attempt_deadline_at: Timestamp | null;
  retry_at: Timestamp | null;
  completed_at: Timestamp | null;
  retain_until: Timestamp | null;
  operation_deadline_at: Timestamp | null;
}
export interface HistoryEntry {
  sequence: string;
  event: string;
  from_state: OperationState | string;
  to_state: OperationState | string;
  fence: string;
  attempt: number;
  detail: string;
  count: string;
  at: Timestamp | null;
  last_at: Timestamp | null;
  last_fence: string;
}
export interface LookupResponse { operation: OperationMessage | null; history: HistoryEntry[]; next_history_page_token: string }

export interface ReconcileRequest {
  operation_id: string;
  expected_fence: string;
  succeeded?: Partial<ResultMessage>;
  failed?: Partial<OperationError>;
  not_applied?: Record<string, never>;
}
export interface ReconcileResponse { state: OperationState | string; fence: string }
export interface ListUnresolvedRequest { operation: string; page_size: number; page_token: string }
export interface ListUnresolvedResponse { operations: OperationMessage[]; next_page_token: string }
