/**
 * The API's messages as this client reads and writes them: the types ts-proto generates
 * from the proto into src/gen/ (see buf.gen.yaml), under the names this package has
 * always exported. Field names as in the proto, uint64 as decimal strings, enums by name,
 * bytes as Buffers, an unset message as null. Durations are given to the Client's
 * methods in seconds.
 */
import type * as gen from "./gen/idem/v1/idempotency.js";

export type { Duration } from "./gen/google/protobuf/duration.js";
export type { Timestamp } from "./gen/google/protobuf/timestamp.js";

export type OperationState = gen.OperationState;
export type FailureReason = gen.FailureReason;
export type FailDisposition = gen.FailDisposition;
export type PendingReason = gen.PendingReason;

export type Scope = gen.Scope;
/** The proto's Result (renamed: Result is executeOnce's answer). */
export type ResultMessage = gen.Result;
export type OperationError = gen.OperationError;

export type Ownership = gen.Ownership;
export type Acquired = gen.Acquired;
export type ReconcileFirst = gen.ReconcileFirst;
export type Pending = gen.Pending;
export interface Completed extends gen.Completed {
  /** The name of the oneof's field that is set (filled in as the answer is decoded). */
  outcome?: "result" | "error";
}
export type NeedsReconciliation = gen.NeedsReconciliation;

export type ClaimRequest = gen.ClaimRequest;
export interface ClaimResponse extends Omit<gen.ClaimResponse, "completed"> {
  /** The name of the outcome that is set; anything else (or nothing) is an outcome this
   *  client does not know: never execute. */
  outcome?: "acquired" | "reconcile_first" | "pending" | "completed" | "needs_reconciliation" | string;
  completed?: Completed | null;
}

export type RenewRequest = gen.RenewRequest;
export type RenewResponse = gen.RenewResponse;
export type CompleteRequest = gen.CompleteRequest;
export type CompleteResponse = gen.CompleteResponse;
export type FailRequest = gen.FailRequest;
export type FailResponse = gen.FailResponse;
export type LookupRequest = gen.LookupRequest;
/** The proto's Operation. */
export type OperationMessage = gen.Operation;
export type HistoryEntry = gen.HistoryEntry;
export type LookupResponse = gen.LookupResponse;
export type ReconcileRequest = gen.ReconcileRequest;
export type ReconcileResponse = gen.ReconcileResponse;
export type ListUnresolvedRequest = gen.ListUnresolvedRequest;
export type ListUnresolvedResponse = gen.ListUnresolvedResponse;
export type ListOperationsRequest = gen.ListOperationsRequest;
/** ListOperationsRequest's order: "ORDER_OLDEST_FIRST" (also what "ORDER_UNSPECIFIED" means) or "ORDER_NEWEST_FIRST". */
export type ListOperationsOrder = gen.ListOperationsRequest_Order;
export type ListOperationsResponse = gen.ListOperationsResponse;
