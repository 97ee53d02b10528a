// idemd: at most one business effect per logical request.
//
// The contract behind this file is DESIGN.md; README.md walks through a call
// sequence. Every RPC needs `authorization: Bearer <token>` metadata, or a
// client certificate that the server maps to a tenant (mutual TLS; a valid
// token wins over it): the credential decides the tenant and its scopes,
// which are never read from a request body.
//
// Errors are gRPC statuses with google.rpc details. Every status idemd sends
// carries an ErrorInfo with domain "idem.v1" (AIP-193), so a client can branch
// on its reason alone; INVALID_ARGUMENT adds BadRequest field violations, and
// UNAVAILABLE and RESOURCE_EXHAUSTED add RetryInfo and, with the same delay, the
// trailer grpc-retry-pushback-ms that gRPC's own retry policy reads (see
// docs/grpc-service-config.json). ErrorInfo reasons are API and stable:
//   INVALID_REQUEST         INVALID_ARGUMENT     fields out of bounds or malformed;
//                                                BadRequest names each field
//   MISSING_CREDENTIALS     UNAUTHENTICATED      no `authorization: Bearer <token>`
//   INVALID_CREDENTIALS     UNAUTHENTICATED      a token that is unknown, revoked
//                                                or malformed
//   OPERATION_NOT_FOUND     NOT_FOUND            no such scope or operation_id, or
//                                                another tenant's (indistinguishable)
//   STORE_UNAVAILABLE       UNAVAILABLE          the database cannot answer now;
//                                                re-send after RetryInfo's delay
//   INTERNAL                INTERNAL             a fault of the server, logged there
//   IDEMPOTENCY_KEY_REUSED  FAILED_PRECONDITION  same scope, different fingerprint
//   RESULT_EXPIRED          FAILED_PRECONDITION  the scope's result passed retention
//   LEASE_LOST              ABORTED              the write carried a stale fence
//   OPERATION_TERMINAL      FAILED_PRECONDITION  the operation already ended
//   REQUEST_MISMATCH        FAILED_PRECONDITION  same fence re-sent with another request
//   LEASE_STILL_LIVE        FAILED_PRECONDITION  Reconcile while an owner holds the lease
//   ATTEMPT_STILL_RUNNING   FAILED_PRECONDITION  Reconcile FAILED or NOT_APPLIED while an
//                                                attempt's effect may still be in flight
//                                                (before its deadline plus the clock
//                                                margin)
//   ATTEMPT_DEADLINE_PASSED FAILED_PRECONDITION  Renew beyond the attempt deadline
//   STATE_FORBIDS           FAILED_PRECONDITION  any other write the state forbids
//   REQUEST_TOO_LARGE       RESOURCE_EXHAUSTED   a message longer than any legal
//                                                request; refused from its length
//                                                prefix
//   REQUEST_TIMEOUT         DEADLINE_EXCEEDED    the call outlived the server's
//                                                request timeout (a stalled body)
//   OVERLOADED              UNAVAILABLE          the server has as many calls in
//                                                flight as it admits; re-send after
//                                                RetryInfo's delay (another replica
//                                                may take it)
//   TENANT_CONCURRENCY_LIMIT RESOURCE_EXHAUSTED  the tenant has as many calls in
//                                                flight on this server as one tenant
//                                                may; re-send after RetryInfo's delay
//   MISSING_SCOPE           PERMISSION_DENIED    the credential lacks the scope the
//                                                RPC needs (metadata `scope`: the
//                                                missing one); nothing was written
//   CERTIFICATE_REQUIRED    UNAUTHENTICATED      the server requires a client
//                                                certificate and none was sent
//   CERTIFICATE_UNTRUSTED   UNAUTHENTICATED      a client certificate not issued by
//                                                the server's client CAs (refused
//                                                whatever token comes with it)
//   CERTIFICATE_EXPIRED     UNAUTHENTICATED      a client certificate outside its
//                                                validity period (likewise)
//   CERTIFICATE_UNMAPPED    UNAUTHENTICATED      a valid client certificate whose
//                                                identity maps to no tenant (likewise)
//   TENANT_NOT_FOUND        NOT_FOUND            an admin named a tenant that has no
//                                                active tenant of that name
//   OPERATION_UNRESOLVED    FAILED_PRECONDITION  Forget of an operation that has not
//                                                ended (in progress, retry wait,
//                                                unknown): only SUCCEEDED or FAILED
//                                                may be forgotten
//   ALREADY_FORGOTTEN       FAILED_PRECONDITION  Forget of an operation that is a
//                                                tombstone already (forgotten, or
//                                                past retention)
//   EVIDENCE_CARRIES_SECRET INVALID_ARGUMENT     Diagnose evidence carries a secret
//                                                (metadata field and kind, never
//                                                the value)
//   PLAN_EXCEEDS_SCOPE      PERMISSION_DENIED    a Diagnose plan needs a scope the
//                                                credential lacks (step, scope)
//   PLAN_EXCEEDS_AUTHORITY  PERMISSION_DENIED    a Diagnose plan needs a move the
//                                                caller's constraints forbid
//   PLAN_NOT_REVERSIBLE     PERMISSION_DENIED    a Diagnose plan needs a move that
//                                                cannot be undone (reversible_only)
//   PLAN_EXCEEDS_BUDGET     PERMISSION_DENIED    a Diagnose plan needs more attempts
//                                                or waits than the caller's budget
// The ErrorInfo of IDEMPOTENCY_KEY_REUSED through STATE_FORBIDS, and of
// OPERATION_UNRESOLVED and ALREADY_FORGOTTEN, carries
// `operation_id` in its metadata, and where it helps `state` and
// `current_fence`; MISSING_SCOPE carries `scope`; the others carry none.
//
// Durations in responses are counted by the client from when it sent the
// request; the server's clock (the database's) decides every expiry, and no
// wall-clock comparison across machines is needed. Deadlines that decide
// whether an earlier attempt's effect may still be in flight carry the
// server's clock margin (IDEMD_CLOCK_MARGIN, 3s by default), which covers a
// step of the database's clock.
//
// Re-sending a write: Complete, Fail and Reconcile keep a receipt of the last
// write recorded for the operation (its fence, a digest of the request, the
// answer it got). The same write re-sent after a lost reply (same fence, same
// request) gets that original answer, however the record moved on since;
// with the same fence and another request it is FAILED_PRECONDITION
// (REQUEST_MISMATCH). One receipt is kept per operation: once a later write
// has been recorded (a new owner's after a RETRYABLE, UNKNOWN or NOT_STARTED
// Fail, or a reconciliation), the earlier write re-sent is ABORTED
// (LEASE_LOST) like any stale write: look the operation up and act on what is
// stored, never redo the effect. A terminal write (Complete, Fail TERMINAL,
// Reconcile SUCCEEDED or FAILED) is never followed by another, so its re-send
// always gets the original answer.

// Code generated by protoc-gen-go. DO NOT EDIT.
// versions:
// 	protoc-gen-go v1.36.12
// 	protoc        (unknown)
// source: idem/v1/idempotency.proto

package idemv1

import (
	protoreflect "google.golang.org/protobuf/reflect/protoreflect"
	protoimpl "google.golang.org/protobuf/runtime/protoimpl"
	durationpb "google.golang.org/protobuf/types/known/durationpb"
	timestamppb "google.golang.org/protobuf/types/known/timestamppb"
	reflect "reflect"
	sync "sync"
	unsafe "unsafe"
)

const (
	// Verify that this generated code is sufficiently up-to-date.
	_ = protoimpl.EnforceVersion(20 - protoimpl.MinVersion)
	// Verify that runtime/protoimpl is sufficiently up-to-date.
	_ = protoimpl.EnforceVersion(protoimpl.MaxVersion - 20)
)

// Why a Claim is Pending.
type PendingReason int32

const (
	// Never sent; the proto3 default.
	PendingReason_PENDING_REASON_UNSPECIFIED PendingReason = 0
	// Another owner holds a live lease.
	PendingReason_PENDING_REASON_IN_PROGRESS PendingReason = 1
	// A retryable failure was recorded; the next attempt is not yet due.
	PendingReason_PENDING_REASON_RETRY_SCHEDULED PendingReason = 2
	// An administrator holds the operation name or the tenant (Hold): nothing
	// new is started until the hold is released. Claim again after
	// retry_after. The Pending carries no operation_id when the scope has no
	// operation yet.
	PendingReason_PENDING_REASON_HELD PendingReason = 3
)

// Enum value maps for PendingReason.
var (
	PendingReason_name = map[int32]string{
		0: "PENDING_REASON_UNSPECIFIED",
		1: "PENDING_REASON_IN_PROGRESS",
		2: "PENDING_REASON_RETRY_SCHEDULED",
		3: "PENDING_REASON_HELD",
	}
	PendingReason_value = map[string]int32{
		"PENDING_REASON_UNSPECIFIED":     0,
		"PENDING_REASON_IN_PROGRESS":     1,
		"PENDING_REASON_RETRY_SCHEDULED": 2,
		"PENDING_REASON_HELD":            3,
	}
)

func (x PendingReason) Enum() *PendingReason {
	p := new(PendingReason)
	*p = x
	return p
}

func (x PendingReason) String() string {
	return protoimpl.X.EnumStringOf(x.Descriptor(), protoreflect.EnumNumber(x))
}

func (PendingReason) Descriptor() protoreflect.EnumDescriptor {
	return file_idem_v1_idempotency_proto_enumTypes[0].Descriptor()
}

func (PendingReason) Type() protoreflect.EnumType {
	return &file_idem_v1_idempotency_proto_enumTypes[0]
}

func (x PendingReason) Number() protoreflect.EnumNumber {
	return protoreflect.EnumNumber(x)
}

// Deprecated: Use PendingReason.Descriptor instead.
func (PendingReason) EnumDescriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{0}
}

// Why an operation ended FAILED.
type FailureReason int32

const (
	// Not a failure (or not set in a request, where the server sets it).
	FailureReason_FAILURE_REASON_UNSPECIFIED FailureReason = 0
	// The owner reported a TERMINAL failure, or a reconciler reported FAILED.
	FailureReason_FAILURE_REASON_TERMINAL FailureReason = 1
	// A RETRYABLE failure arrived with no attempt left in the budget.
	FailureReason_FAILURE_REASON_ATTEMPTS_EXHAUSTED FailureReason = 2
	// A RETRYABLE failure arrived past the operation deadline.
	FailureReason_FAILURE_REASON_DEADLINE_EXCEEDED FailureReason = 3
)

// Enum value maps for FailureReason.
var (
	FailureReason_name = map[int32]string{
		0: "FAILURE_REASON_UNSPECIFIED",
		1: "FAILURE_REASON_TERMINAL",
		2: "FAILURE_REASON_ATTEMPTS_EXHAUSTED",
		3: "FAILURE_REASON_DEADLINE_EXCEEDED",
	}
	FailureReason_value = map[string]int32{
		"FAILURE_REASON_UNSPECIFIED":        0,
		"FAILURE_REASON_TERMINAL":           1,
		"FAILURE_REASON_ATTEMPTS_EXHAUSTED": 2,
		"FAILURE_REASON_DEADLINE_EXCEEDED":  3,
	}
)

func (x FailureReason) Enum() *FailureReason {
	p := new(FailureReason)
	*p = x
	return p
}

func (x FailureReason) String() string {
	return protoimpl.X.EnumStringOf(x.Descriptor(), protoreflect.EnumNumber(x))
}

func (FailureReason) Descriptor() protoreflect.EnumDescriptor {
	return file_idem_v1_idempotency_proto_enumTypes[1].Descriptor()
}

func (FailureReason) Type() protoreflect.EnumType {
	return &file_idem_v1_idempotency_proto_enumTypes[1]
}

func (x FailureReason) Number() protoreflect.EnumNumber {
	return protoreflect.EnumNumber(x)
}

// Deprecated: Use FailureReason.Descriptor instead.
func (FailureReason) EnumDescriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{1}
}

// The state of an operation as stored.
type OperationState int32

const (
	// Never the state of an operation; HistoryEntry.from_state of the first
	// entry (there was no state before it).
	OperationState_OPERATION_STATE_UNSPECIFIED OperationState = 0
	// An owner holds (or held, if its lease expired) the operation.
	OperationState_OPERATION_STATE_IN_PROGRESS OperationState = 1
	// Ended with a result.
	OperationState_OPERATION_STATE_SUCCEEDED OperationState = 2
	// Ended with a terminal error.
	OperationState_OPERATION_STATE_FAILED OperationState = 3
	// The effect certainly did not happen; a new attempt is due at retry time.
	OperationState_OPERATION_STATE_RETRY_WAIT OperationState = 4
	// The effect may have happened; a takeover must reconcile first.
	OperationState_OPERATION_STATE_UNKNOWN OperationState = 5
	// The result passed retention; the scope refuses new Claims until the
	// tombstone itself expires.
	OperationState_OPERATION_STATE_EXPIRED OperationState = 6
)

// Enum value maps for OperationState.
var (
	OperationState_name = map[int32]string{
		0: "OPERATION_STATE_UNSPECIFIED",
		1: "OPERATION_STATE_IN_PROGRESS",
		2: "OPERATION_STATE_SUCCEEDED",
		3: "OPERATION_STATE_FAILED",
		4: "OPERATION_STATE_RETRY_WAIT",
		5: "OPERATION_STATE_UNKNOWN",
		6: "OPERATION_STATE_EXPIRED",
	}
	OperationState_value = map[string]int32{
		"OPERATION_STATE_UNSPECIFIED": 0,
		"OPERATION_STATE_IN_PROGRESS": 1,
		"OPERATION_STATE_SUCCEEDED":   2,
		"OPERATION_STATE_FAILED":      3,
		"OPERATION_STATE_RETRY_WAIT":  4,
		"OPERATION_STATE_UNKNOWN":     5,
		"OPERATION_STATE_EXPIRED":     6,
	}
)

func (x OperationState) Enum() *OperationState {
	p := new(OperationState)
	*p = x
	return p
}

func (x OperationState) String() string {
	return protoimpl.X.EnumStringOf(x.Descriptor(), protoreflect.EnumNumber(x))
}

func (OperationState) Descriptor() protoreflect.EnumDescriptor {
	return file_idem_v1_idempotency_proto_enumTypes[2].Descriptor()
}

func (OperationState) Type() protoreflect.EnumType {
	return &file_idem_v1_idempotency_proto_enumTypes[2]
}

func (x OperationState) Number() protoreflect.EnumNumber {
	return protoreflect.EnumNumber(x)
}

// Deprecated: Use OperationState.Descriptor instead.
func (OperationState) EnumDescriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{2}
}

// What a Claim of a FAILED operation gets, as the operation policy said when
// the operation's first Claim was admitted (stored with the operation).
type OnFailed int32

const (
	// Not said (a server from before this field): the replay.
	OnFailed_ON_FAILED_UNSPECIFIED OnFailed = 0
	// The stored failure, replayed (Completed): the default.
	OnFailed_ON_FAILED_REPLAY OnFailed = 1
	// A new attempt (Acquired, or ReconcileFirst while an attempt the failed
	// one took over may still be in flight), one more granted beyond a spent
	// attempt budget; still the replay once the operation deadline has passed,
	// and to a Claim with the failed attempt's own claim_token (a re-sent
	// Claim, not a new decision).
	OnFailed_ON_FAILED_NEW_ATTEMPT OnFailed = 2
)

// Enum value maps for OnFailed.
var (
	OnFailed_name = map[int32]string{
		0: "ON_FAILED_UNSPECIFIED",
		1: "ON_FAILED_REPLAY",
		2: "ON_FAILED_NEW_ATTEMPT",
	}
	OnFailed_value = map[string]int32{
		"ON_FAILED_UNSPECIFIED": 0,
		"ON_FAILED_REPLAY":      1,
		"ON_FAILED_NEW_ATTEMPT": 2,
	}
)

func (x OnFailed) Enum() *OnFailed {
	p := new(OnFailed)
	*p = x
	return p
}

func (x OnFailed) String() string {
	return protoimpl.X.EnumStringOf(x.Descriptor(), protoreflect.EnumNumber(x))
}

func (OnFailed) Descriptor() protoreflect.EnumDescriptor {
	return file_idem_v1_idempotency_proto_enumTypes[3].Descriptor()
}

func (OnFailed) Type() protoreflect.EnumType {
	return &file_idem_v1_idempotency_proto_enumTypes[3]
}

func (x OnFailed) Number() protoreflect.EnumNumber {
	return protoreflect.EnumNumber(x)
}

// Deprecated: Use OnFailed.Descriptor instead.
func (OnFailed) EnumDescriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{3}
}

// What a failure means for the effect, and so for the operation.
type FailDisposition int32

const (
	// Not set: INVALID_ARGUMENT.
	FailDisposition_FAIL_DISPOSITION_UNSPECIFIED FailDisposition = 0
	// Final: stored and replayed like a result.
	FailDisposition_FAIL_DISPOSITION_TERMINAL FailDisposition = 1
	// The effect certainly did not happen: release for a later attempt after
	// retry_after, within the attempt budget and the operation deadline.
	FailDisposition_FAIL_DISPOSITION_RETRYABLE FailDisposition = 2
	// The effect may have happened: the next owner must reconcile first.
	FailDisposition_FAIL_DISPOSITION_UNKNOWN FailDisposition = 3
	// This attempt never started the effect: it declined, with too little of
	// its lease or attempt left, or because an earlier attempt's doubt outlasts
	// it. The operation is handed on as it was before this attempt: released
	// for the next attempt at once (like RETRYABLE without retry_after, within
	// the budget and the operation deadline) when this attempt began afresh;
	// still in doubt (UNKNOWN) when it took over an attempt of unknown outcome,
	// with that earlier attempt's deadline, not this one's, as the end of the
	// doubt, so that the next owner is told the earlier previous_attempt_deadline
	// and a chain of declines never pushes the doubt forward. Counts against the
	// attempt budget like any attempt.
	FailDisposition_FAIL_DISPOSITION_NOT_STARTED FailDisposition = 4
)

// Enum value maps for FailDisposition.
var (
	FailDisposition_name = map[int32]string{
		0: "FAIL_DISPOSITION_UNSPECIFIED",
		1: "FAIL_DISPOSITION_TERMINAL",
		2: "FAIL_DISPOSITION_RETRYABLE",
		3: "FAIL_DISPOSITION_UNKNOWN",
		4: "FAIL_DISPOSITION_NOT_STARTED",
	}
	FailDisposition_value = map[string]int32{
		"FAIL_DISPOSITION_UNSPECIFIED": 0,
		"FAIL_DISPOSITION_TERMINAL":    1,
		"FAIL_DISPOSITION_RETRYABLE":   2,
		"FAIL_DISPOSITION_UNKNOWN":     3,
		"FAIL_DISPOSITION_NOT_STARTED": 4,
	}
)

func (x FailDisposition) Enum() *FailDisposition {
	p := new(FailDisposition)
	*p = x
	return p
}

func (x FailDisposition) String() string {
	return protoimpl.X.EnumStringOf(x.Descriptor(), protoreflect.EnumNumber(x))
}

func (FailDisposition) Descriptor() protoreflect.EnumDescriptor {
	return file_idem_v1_idempotency_proto_enumTypes[4].Descriptor()
}

func (FailDisposition) Type() protoreflect.EnumType {
	return &file_idem_v1_idempotency_proto_enumTypes[4]
}

func (x FailDisposition) Number() protoreflect.EnumNumber {
	return protoreflect.EnumNumber(x)
}

// Deprecated: Use FailDisposition.Descriptor instead.
func (FailDisposition) EnumDescriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{4}
}

// What a caller saw that made it ask.
type Symptom int32

const (
	// Nothing in particular: diagnose the operation from its record alone.
	Symptom_SYMPTOM_UNSPECIFIED Symptom = 0
	// The call ended before any answer: a deadline, a reset, a lost connection.
	Symptom_SYMPTOM_TIMEOUT_BEFORE_RESPONSE Symptom = 1
	// An error answer: status_code and error_reason say which.
	Symptom_SYMPTOM_ERROR_STATUS Symptom = 2
	// The same request was sent more than once at a time (two workers, a
	// duplicate delivery).
	Symptom_SYMPTOM_CONCURRENT_DUPLICATES Symptom = 3
	// The operation keeps answering Pending, or stays in progress.
	Symptom_SYMPTOM_STUCK_IN_PROGRESS Symptom = 4
	// The effect seems to have happened more than once.
	Symptom_SYMPTOM_DUPLICATE_EFFECT Symptom = 5
	// Claims of this caller are often refused as IDEMPOTENCY_KEY_REUSED.
	Symptom_SYMPTOM_FREQUENT_CONFLICTS Symptom = 6
	// The number of stored operations keeps growing.
	Symptom_SYMPTOM_STORE_GROWING Symptom = 7
)

// Enum value maps for Symptom.
var (
	Symptom_name = map[int32]string{
		0: "SYMPTOM_UNSPECIFIED",
		1: "SYMPTOM_TIMEOUT_BEFORE_RESPONSE",
		2: "SYMPTOM_ERROR_STATUS",
		3: "SYMPTOM_CONCURRENT_DUPLICATES",
		4: "SYMPTOM_STUCK_IN_PROGRESS",
		5: "SYMPTOM_DUPLICATE_EFFECT",
		6: "SYMPTOM_FREQUENT_CONFLICTS",
		7: "SYMPTOM_STORE_GROWING",
	}
	Symptom_value = map[string]int32{
		"SYMPTOM_UNSPECIFIED":             0,
		"SYMPTOM_TIMEOUT_BEFORE_RESPONSE": 1,
		"SYMPTOM_ERROR_STATUS":            2,
		"SYMPTOM_CONCURRENT_DUPLICATES":   3,
		"SYMPTOM_STUCK_IN_PROGRESS":       4,
		"SYMPTOM_DUPLICATE_EFFECT":        5,
		"SYMPTOM_FREQUENT_CONFLICTS":      6,
		"SYMPTOM_STORE_GROWING":           7,
	}
)

func (x Symptom) Enum() *Symptom {
	p := new(Symptom)
	*p = x
	return p
}

func (x Symptom) String() string {
	return protoimpl.X.EnumStringOf(x.Descriptor(), protoreflect.EnumNumber(x))
}

func (Symptom) Descriptor() protoreflect.EnumDescriptor {
	return file_idem_v1_idempotency_proto_enumTypes[5].Descriptor()
}

func (Symptom) Type() protoreflect.EnumType {
	return &file_idem_v1_idempotency_proto_enumTypes[5]
}

func (x Symptom) Number() protoreflect.EnumNumber {
	return protoreflect.EnumNumber(x)
}

// Deprecated: Use Symptom.Descriptor instead.
func (Symptom) EnumDescriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{5}
}

// What the caller found at the provider (the system the effect lands in).
type ProviderFinding int32

const (
	// Not looked.
	ProviderFinding_PROVIDER_FINDING_UNSPECIFIED ProviderFinding = 0
	// The effect is there, once.
	ProviderFinding_PROVIDER_FINDING_EFFECT_FOUND ProviderFinding = 1
	// No effect found.
	ProviderFinding_PROVIDER_FINDING_NO_EFFECT ProviderFinding = 2
	// The effect is there more than once.
	ProviderFinding_PROVIDER_FINDING_EFFECT_FOUND_MORE_THAN_ONCE ProviderFinding = 3
)

// Enum value maps for ProviderFinding.
var (
	ProviderFinding_name = map[int32]string{
		0: "PROVIDER_FINDING_UNSPECIFIED",
		1: "PROVIDER_FINDING_EFFECT_FOUND",
		2: "PROVIDER_FINDING_NO_EFFECT",
		3: "PROVIDER_FINDING_EFFECT_FOUND_MORE_THAN_ONCE",
	}
	ProviderFinding_value = map[string]int32{
		"PROVIDER_FINDING_UNSPECIFIED":                 0,
		"PROVIDER_FINDING_EFFECT_FOUND":                1,
		"PROVIDER_FINDING_NO_EFFECT":                   2,
		"PROVIDER_FINDING_EFFECT_FOUND_MORE_THAN_ONCE": 3,
	}
)

func (x ProviderFinding) Enum() *ProviderFinding {
	p := new(ProviderFinding)
	*p = x
	return p
}

func (x ProviderFinding) String() string {
	return protoimpl.X.EnumStringOf(x.Descriptor(), protoreflect.EnumNumber(x))
}

func (ProviderFinding) Descriptor() protoreflect.EnumDescriptor {
	return file_idem_v1_idempotency_proto_enumTypes[6].Descriptor()
}

func (ProviderFinding) Type() protoreflect.EnumType {
	return &file_idem_v1_idempotency_proto_enumTypes[6]
}

func (x ProviderFinding) Number() protoreflect.EnumNumber {
	return protoreflect.EnumNumber(x)
}

// Deprecated: Use ProviderFinding.Descriptor instead.
func (ProviderFinding) EnumDescriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{6}
}

// How far the caller may go.
type Authority int32

const (
	// Not said: as far as the credential's scopes allow.
	Authority_AUTHORITY_UNSPECIFIED Authority = 0
	// Look, wait and ask only: no Claim, no Reconcile.
	Authority_AUTHORITY_READ_ONLY Authority = 1
	// Claim (replay, retry), but not Reconcile.
	Authority_AUTHORITY_RETRY Authority = 2
	// Reconcile too.
	Authority_AUTHORITY_RECONCILE Authority = 3
)

// Enum value maps for Authority.
var (
	Authority_name = map[int32]string{
		0: "AUTHORITY_UNSPECIFIED",
		1: "AUTHORITY_READ_ONLY",
		2: "AUTHORITY_RETRY",
		3: "AUTHORITY_RECONCILE",
	}
	Authority_value = map[string]int32{
		"AUTHORITY_UNSPECIFIED": 0,
		"AUTHORITY_READ_ONLY":   1,
		"AUTHORITY_RETRY":       2,
		"AUTHORITY_RECONCILE":   3,
	}
)

func (x Authority) Enum() *Authority {
	p := new(Authority)
	*p = x
	return p
}

func (x Authority) String() string {
	return protoimpl.X.EnumStringOf(x.Descriptor(), protoreflect.EnumNumber(x))
}

func (Authority) Descriptor() protoreflect.EnumDescriptor {
	return file_idem_v1_idempotency_proto_enumTypes[7].Descriptor()
}

func (Authority) Type() protoreflect.EnumType {
	return &file_idem_v1_idempotency_proto_enumTypes[7]
}

func (x Authority) Number() protoreflect.EnumNumber {
	return protoreflect.EnumNumber(x)
}

// Deprecated: Use Authority.Descriptor instead.
func (Authority) EnumDescriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{7}
}

// What a diagnosis points to.
type Cause int32

const (
	// Never sent.
	Cause_CAUSE_UNSPECIFIED Cause = 0
	// Nothing is wrong: the operation is where the protocol says it should be.
	Cause_CAUSE_NONE Cause = 1
	// A timeout before any answer: the outcome is ambiguous until looked up;
	// never assume nothing happened.
	Cause_CAUSE_AMBIGUOUS_OUTCOME Cause = 2
	// Concurrent duplicates: one owner executes, the others wait or replay.
	Cause_CAUSE_RACE Cause = 3
	// The same key with another request: a new intent needs a new key.
	Cause_CAUSE_PAYLOAD_CONFLICT Cause = 4
	// A retry after a terminal validation, authorisation or policy failure:
	// do not retry unchanged.
	Cause_CAUSE_CLIENT_DEFECT Cause = 5
	// In progress with no live owner: lease or crash recovery is missing.
	Cause_CAUSE_STUCK_IN_PROGRESS Cause = 6
	// The same request under many keys: retry identity is per transport
	// attempt instead of per intent.
	Cause_CAUSE_NEW_KEY_PER_RETRY Cause = 7
	// Frequent conflicts: keys reused across intents, or an unstable payload
	// normalisation.
	Cause_CAUSE_UNSTABLE_KEYS_OR_PAYLOAD Cause = 8
	// A store that keeps growing: retention without a bounded policy.
	Cause_CAUSE_UNBOUNDED_RETENTION Cause = 9
	// The outcome is unknown and only reconciliation from the provider's
	// evidence can settle it.
	Cause_CAUSE_NEEDS_RECONCILIATION Cause = 10
)

// Enum value maps for Cause.
var (
	Cause_name = map[int32]string{
		0:  "CAUSE_UNSPECIFIED",
		1:  "CAUSE_NONE",
		2:  "CAUSE_AMBIGUOUS_OUTCOME",
		3:  "CAUSE_RACE",
		4:  "CAUSE_PAYLOAD_CONFLICT",
		5:  "CAUSE_CLIENT_DEFECT",
		6:  "CAUSE_STUCK_IN_PROGRESS",
		7:  "CAUSE_NEW_KEY_PER_RETRY",
		8:  "CAUSE_UNSTABLE_KEYS_OR_PAYLOAD",
		9:  "CAUSE_UNBOUNDED_RETENTION",
		10: "CAUSE_NEEDS_RECONCILIATION",
	}
	Cause_value = map[string]int32{
		"CAUSE_UNSPECIFIED":              0,
		"CAUSE_NONE":                     1,
		"CAUSE_AMBIGUOUS_OUTCOME":        2,
		"CAUSE_RACE":                     3,
		"CAUSE_PAYLOAD_CONFLICT":         4,
		"CAUSE_CLIENT_DEFECT":            5,
		"CAUSE_STUCK_IN_PROGRESS":        6,
		"CAUSE_NEW_KEY_PER_RETRY":        7,
		"CAUSE_UNSTABLE_KEYS_OR_PAYLOAD": 8,
		"CAUSE_UNBOUNDED_RETENTION":      9,
		"CAUSE_NEEDS_RECONCILIATION":     10,
	}
)

func (x Cause) Enum() *Cause {
	p := new(Cause)
	*p = x
	return p
}

func (x Cause) String() string {
	return protoimpl.X.EnumStringOf(x.Descriptor(), protoreflect.EnumNumber(x))
}

func (Cause) Descriptor() protoreflect.EnumDescriptor {
	return file_idem_v1_idempotency_proto_enumTypes[8].Descriptor()
}

func (Cause) Type() protoreflect.EnumType {
	return &file_idem_v1_idempotency_proto_enumTypes[8]
}

func (x Cause) Number() protoreflect.EnumNumber {
	return protoreflect.EnumNumber(x)
}

// Deprecated: Use Cause.Descriptor instead.
func (Cause) EnumDescriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{8}
}

// Where the cause lies.
type Layer int32

const (
	// Never sent.
	Layer_LAYER_UNSPECIFIED Layer = 0
	// The network between caller and idemd.
	Layer_LAYER_TRANSPORT Layer = 1
	// Concurrent callers of one intent.
	Layer_LAYER_CONCURRENCY Layer = 2
	// What the caller sends (key, payload, its normalisation).
	Layer_LAYER_CALLER_REQUEST Layer = 3
	// How the caller handles answers (retries, keys per intent).
	Layer_LAYER_CALLER_LOGIC Layer = 4
	// The owner's lease, crash recovery and reconciliation.
	Layer_LAYER_OWNER_RECOVERY Layer = 5
	// The provider the effect lands in.
	Layer_LAYER_PROVIDER Layer = 6
	// The operation policy (retention, budgets).
	Layer_LAYER_POLICY Layer = 7
	// None: nothing is wrong.
	Layer_LAYER_NONE Layer = 8
)

// Enum value maps for Layer.
var (
	Layer_name = map[int32]string{
		0: "LAYER_UNSPECIFIED",
		1: "LAYER_TRANSPORT",
		2: "LAYER_CONCURRENCY",
		3: "LAYER_CALLER_REQUEST",
		4: "LAYER_CALLER_LOGIC",
		5: "LAYER_OWNER_RECOVERY",
		6: "LAYER_PROVIDER",
		7: "LAYER_POLICY",
		8: "LAYER_NONE",
	}
	Layer_value = map[string]int32{
		"LAYER_UNSPECIFIED":    0,
		"LAYER_TRANSPORT":      1,
		"LAYER_CONCURRENCY":    2,
		"LAYER_CALLER_REQUEST": 3,
		"LAYER_CALLER_LOGIC":   4,
		"LAYER_OWNER_RECOVERY": 5,
		"LAYER_PROVIDER":       6,
		"LAYER_POLICY":         7,
		"LAYER_NONE":           8,
	}
)

func (x Layer) Enum() *Layer {
	p := new(Layer)
	*p = x
	return p
}

func (x Layer) String() string {
	return protoimpl.X.EnumStringOf(x.Descriptor(), protoreflect.EnumNumber(x))
}

func (Layer) Descriptor() protoreflect.EnumDescriptor {
	return file_idem_v1_idempotency_proto_enumTypes[9].Descriptor()
}

func (Layer) Type() protoreflect.EnumType {
	return &file_idem_v1_idempotency_proto_enumTypes[9]
}

func (x Layer) Number() protoreflect.EnumNumber {
	return protoreflect.EnumNumber(x)
}

// Deprecated: Use Layer.Descriptor instead.
func (Layer) EnumDescriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{9}
}

// The kind of a move.
type MoveKind int32

const (
	// Never sent.
	MoveKind_MOVE_KIND_UNSPECIFIED MoveKind = 0
	// Read the operation (Lookup) or the provider: changes nothing.
	MoveKind_MOVE_KIND_LOOK MoveKind = 1
	// Wait (for a lease, a retry time, another owner).
	MoveKind_MOVE_KIND_WAIT MoveKind = 2
	// Claim again with the same key and request: a replay, Pending, or (when
	// the record allows) a new attempt.
	MoveKind_MOVE_KIND_CLAIM_SAME_KEY MoveKind = 3
	// Reconcile from the provider's evidence (needs the reconcile scope).
	MoveKind_MOVE_KIND_RECONCILE MoveKind = 4
	// Change the caller's request or code; no call to idemd.
	MoveKind_MOVE_KIND_CHANGE_CALLER MoveKind = 5
	// A new intent under a new key.
	MoveKind_MOVE_KIND_NEW_KEY MoveKind = 6
	// An operator's change (policy, hold; needs the admin scope).
	MoveKind_MOVE_KIND_OPERATOR MoveKind = 7
	// Stop and hand over to someone with more evidence or authority.
	MoveKind_MOVE_KIND_HAND_OVER MoveKind = 8
)

// Enum value maps for MoveKind.
var (
	MoveKind_name = map[int32]string{
		0: "MOVE_KIND_UNSPECIFIED",
		1: "MOVE_KIND_LOOK",
		2: "MOVE_KIND_WAIT",
		3: "MOVE_KIND_CLAIM_SAME_KEY",
		4: "MOVE_KIND_RECONCILE",
		5: "MOVE_KIND_CHANGE_CALLER",
		6: "MOVE_KIND_NEW_KEY",
		7: "MOVE_KIND_OPERATOR",
		8: "MOVE_KIND_HAND_OVER",
	}
	MoveKind_value = map[string]int32{
		"MOVE_KIND_UNSPECIFIED":    0,
		"MOVE_KIND_LOOK":           1,
		"MOVE_KIND_WAIT":           2,
		"MOVE_KIND_CLAIM_SAME_KEY": 3,
		"MOVE_KIND_RECONCILE":      4,
		"MOVE_KIND_CHANGE_CALLER":  5,
		"MOVE_KIND_NEW_KEY":        6,
		"MOVE_KIND_OPERATOR":       7,
		"MOVE_KIND_HAND_OVER":      8,
	}
)

func (x MoveKind) Enum() *MoveKind {
	p := new(MoveKind)
	*p = x
	return p
}

func (x MoveKind) String() string {
	return protoimpl.X.EnumStringOf(x.Descriptor(), protoreflect.EnumNumber(x))
}

func (MoveKind) Descriptor() protoreflect.EnumDescriptor {
	return file_idem_v1_idempotency_proto_enumTypes[10].Descriptor()
}

func (MoveKind) Type() protoreflect.EnumType {
	return &file_idem_v1_idempotency_proto_enumTypes[10]
}

func (x MoveKind) Number() protoreflect.EnumNumber {
	return protoreflect.EnumNumber(x)
}

// Deprecated: Use MoveKind.Descriptor instead.
func (MoveKind) EnumDescriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{10}
}

// Where an observation comes from: its quality.
type ObservationSource int32

const (
	// Never sent.
	ObservationSource_OBSERVATION_SOURCE_UNSPECIFIED ObservationSource = 0
	// The operation's history, written in the transaction of each transition.
	ObservationSource_OBSERVATION_SOURCE_HISTORY ObservationSource = 1
	// A comparison of the caller's request with the stored fingerprint.
	ObservationSource_OBSERVATION_SOURCE_FINGERPRINT ObservationSource = 2
	// Times on the database clock (leases, deadlines, retry times).
	ObservationSource_OBSERVATION_SOURCE_TIMING ObservationSource = 3
	// What the caller found at the provider.
	ObservationSource_OBSERVATION_SOURCE_PROVIDER ObservationSource = 4
	// Counters (conflicts, replays, same-request keys): approximate.
	ObservationSource_OBSERVATION_SOURCE_COUNTERS ObservationSource = 5
	// The caller's own report of what it saw.
	ObservationSource_OBSERVATION_SOURCE_CALLER_REPORT ObservationSource = 6
	// The policy in force.
	ObservationSource_OBSERVATION_SOURCE_POLICY ObservationSource = 7
)

// Enum value maps for ObservationSource.
var (
	ObservationSource_name = map[int32]string{
		0: "OBSERVATION_SOURCE_UNSPECIFIED",
		1: "OBSERVATION_SOURCE_HISTORY",
		2: "OBSERVATION_SOURCE_FINGERPRINT",
		3: "OBSERVATION_SOURCE_TIMING",
		4: "OBSERVATION_SOURCE_PROVIDER",
		5: "OBSERVATION_SOURCE_COUNTERS",
		6: "OBSERVATION_SOURCE_CALLER_REPORT",
		7: "OBSERVATION_SOURCE_POLICY",
	}
	ObservationSource_value = map[string]int32{
		"OBSERVATION_SOURCE_UNSPECIFIED":   0,
		"OBSERVATION_SOURCE_HISTORY":       1,
		"OBSERVATION_SOURCE_FINGERPRINT":   2,
		"OBSERVATION_SOURCE_TIMING":        3,
		"OBSERVATION_SOURCE_PROVIDER":      4,
		"OBSERVATION_SOURCE_COUNTERS":      5,
		"OBSERVATION_SOURCE_CALLER_REPORT": 6,
		"OBSERVATION_SOURCE_POLICY":        7,
	}
)

func (x ObservationSource) Enum() *ObservationSource {
	p := new(ObservationSource)
	*p = x
	return p
}

func (x ObservationSource) String() string {
	return protoimpl.X.EnumStringOf(x.Descriptor(), protoreflect.EnumNumber(x))
}

func (ObservationSource) Descriptor() protoreflect.EnumDescriptor {
	return file_idem_v1_idempotency_proto_enumTypes[11].Descriptor()
}

func (ObservationSource) Type() protoreflect.EnumType {
	return &file_idem_v1_idempotency_proto_enumTypes[11]
}

func (x ObservationSource) Number() protoreflect.EnumNumber {
	return protoreflect.EnumNumber(x)
}

// Deprecated: Use ObservationSource.Descriptor instead.
func (ObservationSource) EnumDescriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{11}
}

// How sure the diagnosis is.
type ConfidenceLevel int32

const (
	// Never sent.
	ConfidenceLevel_CONFIDENCE_LEVEL_UNSPECIFIED ConfidenceLevel = 0
	// Below 40.
	ConfidenceLevel_CONFIDENCE_LEVEL_LOW ConfidenceLevel = 1
	// 40-69.
	ConfidenceLevel_CONFIDENCE_LEVEL_MEDIUM ConfidenceLevel = 2
	// 70 and above.
	ConfidenceLevel_CONFIDENCE_LEVEL_HIGH ConfidenceLevel = 3
)

// Enum value maps for ConfidenceLevel.
var (
	ConfidenceLevel_name = map[int32]string{
		0: "CONFIDENCE_LEVEL_UNSPECIFIED",
		1: "CONFIDENCE_LEVEL_LOW",
		2: "CONFIDENCE_LEVEL_MEDIUM",
		3: "CONFIDENCE_LEVEL_HIGH",
	}
	ConfidenceLevel_value = map[string]int32{
		"CONFIDENCE_LEVEL_UNSPECIFIED": 0,
		"CONFIDENCE_LEVEL_LOW":         1,
		"CONFIDENCE_LEVEL_MEDIUM":      2,
		"CONFIDENCE_LEVEL_HIGH":        3,
	}
)

func (x ConfidenceLevel) Enum() *ConfidenceLevel {
	p := new(ConfidenceLevel)
	*p = x
	return p
}

func (x ConfidenceLevel) String() string {
	return protoimpl.X.EnumStringOf(x.Descriptor(), protoreflect.EnumNumber(x))
}

func (ConfidenceLevel) Descriptor() protoreflect.EnumDescriptor {
	return file_idem_v1_idempotency_proto_enumTypes[12].Descriptor()
}

func (ConfidenceLevel) Type() protoreflect.EnumType {
	return &file_idem_v1_idempotency_proto_enumTypes[12]
}

func (x ConfidenceLevel) Number() protoreflect.EnumNumber {
	return protoreflect.EnumNumber(x)
}

// Deprecated: Use ConfidenceLevel.Descriptor instead.
func (ConfidenceLevel) EnumDescriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{12}
}

// Whether the evidence supports a move.
type Verdict int32

const (
	// Never sent.
	Verdict_VERDICT_UNSPECIFIED Verdict = 0
	// Diagnosed: follow the plan.
	Verdict_VERDICT_DIAGNOSED Verdict = 1
	// The evidence is missing, contradictory or too stale to support a move:
	// do nothing but what the plan says (look, hand over); missing says what
	// would settle it.
	Verdict_VERDICT_ESCALATE Verdict = 2
)

// Enum value maps for Verdict.
var (
	Verdict_name = map[int32]string{
		0: "VERDICT_UNSPECIFIED",
		1: "VERDICT_DIAGNOSED",
		2: "VERDICT_ESCALATE",
	}
	Verdict_value = map[string]int32{
		"VERDICT_UNSPECIFIED": 0,
		"VERDICT_DIAGNOSED":   1,
		"VERDICT_ESCALATE":    2,
	}
)

func (x Verdict) Enum() *Verdict {
	p := new(Verdict)
	*p = x
	return p
}

func (x Verdict) String() string {
	return protoimpl.X.EnumStringOf(x.Descriptor(), protoreflect.EnumNumber(x))
}

func (Verdict) Descriptor() protoreflect.EnumDescriptor {
	return file_idem_v1_idempotency_proto_enumTypes[13].Descriptor()
}

func (Verdict) Type() protoreflect.EnumType {
	return &file_idem_v1_idempotency_proto_enumTypes[13]
}

func (x Verdict) Number() protoreflect.EnumNumber {
	return protoreflect.EnumNumber(x)
}

// Deprecated: Use Verdict.Descriptor instead.
func (Verdict) EnumDescriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{13}
}

// The order of a page, by created_at and then operation_id.
type ListOperationsRequest_Order int32

const (
	// Oldest first, as ORDER_OLDEST_FIRST.
	ListOperationsRequest_ORDER_UNSPECIFIED ListOperationsRequest_Order = 0
	// Oldest created_at first.
	ListOperationsRequest_ORDER_OLDEST_FIRST ListOperationsRequest_Order = 1
	// Newest created_at first.
	ListOperationsRequest_ORDER_NEWEST_FIRST ListOperationsRequest_Order = 2
)

// Enum value maps for ListOperationsRequest_Order.
var (
	ListOperationsRequest_Order_name = map[int32]string{
		0: "ORDER_UNSPECIFIED",
		1: "ORDER_OLDEST_FIRST",
		2: "ORDER_NEWEST_FIRST",
	}
	ListOperationsRequest_Order_value = map[string]int32{
		"ORDER_UNSPECIFIED":  0,
		"ORDER_OLDEST_FIRST": 1,
		"ORDER_NEWEST_FIRST": 2,
	}
)

func (x ListOperationsRequest_Order) Enum() *ListOperationsRequest_Order {
	p := new(ListOperationsRequest_Order)
	*p = x
	return p
}

func (x ListOperationsRequest_Order) String() string {
	return protoimpl.X.EnumStringOf(x.Descriptor(), protoreflect.EnumNumber(x))
}

func (ListOperationsRequest_Order) Descriptor() protoreflect.EnumDescriptor {
	return file_idem_v1_idempotency_proto_enumTypes[14].Descriptor()
}

func (ListOperationsRequest_Order) Type() protoreflect.EnumType {
	return &file_idem_v1_idempotency_proto_enumTypes[14]
}

func (x ListOperationsRequest_Order) Number() protoreflect.EnumNumber {
	return protoreflect.EnumNumber(x)
}

// Deprecated: Use ListOperationsRequest_Order.Descriptor instead.
func (ListOperationsRequest_Order) EnumDescriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{26, 0}
}

// The caller's name for one logical operation, within its tenant.
type Scope struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// The action, 1-128 characters of [A-Za-z0-9._/-], e.g. "payments.charge".
	Operation string `protobuf:"bytes,1,opt,name=operation,proto3" json:"operation,omitempty"`
	// The caller's idempotency key, 1-255 bytes of UTF-8, compared byte for
	// byte. Generate it once per intent and persist it before the first attempt.
	Key           string `protobuf:"bytes,2,opt,name=key,proto3" json:"key,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *Scope) Reset() {
	*x = Scope{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[0]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *Scope) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*Scope) ProtoMessage() {}

func (x *Scope) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[0]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use Scope.ProtoReflect.Descriptor instead.
func (*Scope) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{0}
}

func (x *Scope) GetOperation() string {
	if x != nil {
		return x.Operation
	}
	return ""
}

func (x *Scope) GetKey() string {
	if x != nil {
		return x.Key
	}
	return ""
}

// Starts or rejoins one logical operation: the first Claim of a scope creates
// it, later ones replay, wait or take over (see ClaimResponse).
type ClaimRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Which logical operation this attempt belongs to.
	Scope *Scope `protobuf:"bytes,1,opt,name=scope,proto3" json:"scope,omitempty"`
	// What the request asks for, so that the same key with a different request
	// is refused (IDEMPOTENCY_KEY_REUSED) instead of replayed. Exactly one is
	// required; only the resulting fingerprint is stored, never the payload.
	//
	// Types that are valid to be assigned to RequestIdentity:
	//
	//	*ClaimRequest_Fingerprint
	//	*ClaimRequest_JsonPayload
	//	*ClaimRequest_BytesPayload
	RequestIdentity isClaimRequest_RequestIdentity `protobuf_oneof:"request_identity"`
	// Random, made per attempt (at most 64 bytes) and reused only when re-sending
	// this same Claim after UNAVAILABLE or a lost response: a re-sent Claim whose
	// token matches the live owner's gets the same Acquired answer again, and the
	// attempt is counted once, until the owner has renewed its lease: the owner
	// writes only after it got its Claim's answer, so from then on a Claim with
	// its token is another sender's (a token derived from a message id makes a
	// duplicate delivery look like a re-send) and is answered Pending, never the
	// owner's fence. Empty means no token.
	ClaimToken []byte `protobuf:"bytes,5,opt,name=claim_token,json=claimToken,proto3" json:"claim_token,omitempty"`
	// How long the new owner holds the operation before others may take it over.
	// Default and bounds are server configuration (default 30s, 1s-1h).
	Lease *durationpb.Duration `protobuf:"bytes,6,opt,name=lease,proto3" json:"lease,omitempty"`
	// The longest one attempt may run, counted from its acquisition. Renew cannot
	// extend past it and the client cancels its effect at it. Default: 5m, at
	// most 24h, and at least the lease: given with a longer lease it is
	// INVALID_ARGUMENT; left out, it defaults to outlast the lease. Fixed by the
	// first Claim of a scope.
	MaxAttemptDuration *durationpb.Duration `protobuf:"bytes,7,opt,name=max_attempt_duration,json=maxAttemptDuration,proto3" json:"max_attempt_duration,omitempty"`
	// Attempt budget: how many owners the operation may have in all, takeovers
	// included. Default 5, at most 100. Fixed by the first Claim of a scope.
	MaxAttempts uint32 `protobuf:"varint,8,opt,name=max_attempts,json=maxAttempts,proto3" json:"max_attempts,omitempty"`
	// How long a terminal result is kept for replay after completion. Default and
	// maximum are server configuration (default 24h). Never shorter than the
	// retry window (operation_deadline, or max_attempts × max_attempt_duration):
	// asked for, a shorter one is INVALID_ARGUMENT naming both values; left out,
	// the default grows to the window. Fixed by the first Claim.
	Retention *durationpb.Duration `protobuf:"bytes,9,opt,name=retention,proto3" json:"retention,omitempty"`
	// Optional: no new attempt starts after this long from the first Claim; a
	// RETRYABLE failure past it ends the operation as FAILED (DEADLINE_EXCEEDED).
	// Fixed by the first Claim.
	OperationDeadline *durationpb.Duration `protobuf:"bytes,10,opt,name=operation_deadline,json=operationDeadline,proto3" json:"operation_deadline,omitempty"`
	// Optional: when the answer would be Pending, wait up to this long for the
	// operation to finish or become claimable, then answer. A longer wait is
	// clamped, never refused: to the server's maximum (default 30s) and to the
	// call's own gRPC deadline minus a margin. Negative is INVALID_ARGUMENT.
	// When the server already has as many waiting Claims as it allows (per
	// tenant or in all), the Claim answers Pending at once instead.
	Wait *durationpb.Duration `protobuf:"bytes,11,opt,name=wait,proto3" json:"wait,omitempty"`
	// The fingerprints of this same request under earlier normalisations, while
	// a deployment that changes how the request is normalised (a field added
	// with a default, a changed selector) rolls out: at most 4, 32 bytes each.
	// An operation whose stored fingerprint equals the request's or any of
	// these is the same request (replayed, resumed or retried, never a
	// conflict); one that matches none is IDEMPOTENCY_KEY_REUSED as always. A
	// Claim that writes (a new attempt, a takeover) records in its history
	// entry that a previous fingerprint matched, and which; the stored
	// fingerprint stays the first Claim's. Empty outside a migration window.
	PreviousFingerprints [][]byte `protobuf:"bytes,12,rep,name=previous_fingerprints,json=previousFingerprints,proto3" json:"previous_fingerprints,omitempty"`
	unknownFields        protoimpl.UnknownFields
	sizeCache            protoimpl.SizeCache
}

func (x *ClaimRequest) Reset() {
	*x = ClaimRequest{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[1]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ClaimRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ClaimRequest) ProtoMessage() {}

func (x *ClaimRequest) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[1]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ClaimRequest.ProtoReflect.Descriptor instead.
func (*ClaimRequest) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{1}
}

func (x *ClaimRequest) GetScope() *Scope {
	if x != nil {
		return x.Scope
	}
	return nil
}

func (x *ClaimRequest) GetRequestIdentity() isClaimRequest_RequestIdentity {
	if x != nil {
		return x.RequestIdentity
	}
	return nil
}

func (x *ClaimRequest) GetFingerprint() []byte {
	if x != nil {
		if x, ok := x.RequestIdentity.(*ClaimRequest_Fingerprint); ok {
			return x.Fingerprint
		}
	}
	return nil
}

func (x *ClaimRequest) GetJsonPayload() string {
	if x != nil {
		if x, ok := x.RequestIdentity.(*ClaimRequest_JsonPayload); ok {
			return x.JsonPayload
		}
	}
	return ""
}

func (x *ClaimRequest) GetBytesPayload() []byte {
	if x != nil {
		if x, ok := x.RequestIdentity.(*ClaimRequest_BytesPayload); ok {
			return x.BytesPayload
		}
	}
	return nil
}

func (x *ClaimRequest) GetClaimToken() []byte {
	if x != nil {
		return x.ClaimToken
	}
	return nil
}

func (x *ClaimRequest) GetLease() *durationpb.Duration {
	if x != nil {
		return x.Lease
	}
	return nil
}

func (x *ClaimRequest) GetMaxAttemptDuration() *durationpb.Duration {
	if x != nil {
		return x.MaxAttemptDuration
	}
	return nil
}

func (x *ClaimRequest) GetMaxAttempts() uint32 {
	if x != nil {
		return x.MaxAttempts
	}
	return 0
}

func (x *ClaimRequest) GetRetention() *durationpb.Duration {
	if x != nil {
		return x.Retention
	}
	return nil
}

func (x *ClaimRequest) GetOperationDeadline() *durationpb.Duration {
	if x != nil {
		return x.OperationDeadline
	}
	return nil
}

func (x *ClaimRequest) GetWait() *durationpb.Duration {
	if x != nil {
		return x.Wait
	}
	return nil
}

func (x *ClaimRequest) GetPreviousFingerprints() [][]byte {
	if x != nil {
		return x.PreviousFingerprints
	}
	return nil
}

type isClaimRequest_RequestIdentity interface {
	isClaimRequest_RequestIdentity()
}

type ClaimRequest_Fingerprint struct {
	// A client-computed fingerprint: exactly 32 bytes (SHA-256 recommended,
	// computed as the server would, see below, so both forms match).
	Fingerprint []byte `protobuf:"bytes,2,opt,name=fingerprint,proto3,oneof"`
}

type ClaimRequest_JsonPayload struct {
	// A JSON document (I-JSON, RFC 7493). The server fingerprints its RFC 8785
	// canonical form: SHA-256("idem.v1" 0x00 "json" 0x00 JCS(document)).
	// Duplicate object keys, lone surrogates, integers beyond +-2^53, numbers
	// with a fraction or exponent of magnitude 2^53 or more, and numbers that
	// are no integer but that a double rounds to one (4503599627370496.5) are
	// INVALID_ARGUMENT, because canonicalization would merge distinct requests.
	// At most 64 KiB by default (server configuration), measured before it is
	// parsed; for a larger request send a fingerprint.
	JsonPayload string `protobuf:"bytes,3,opt,name=json_payload,json=jsonPayload,proto3,oneof"`
}

type ClaimRequest_BytesPayload struct {
	// Opaque bytes, fingerprinted as given:
	// SHA-256("idem.v1" 0x00 "bytes" 0x00 payload). Same size bound as
	// json_payload.
	BytesPayload []byte `protobuf:"bytes,4,opt,name=bytes_payload,json=bytesPayload,proto3,oneof"`
}

func (*ClaimRequest_Fingerprint) isClaimRequest_RequestIdentity() {}

func (*ClaimRequest_JsonPayload) isClaimRequest_RequestIdentity() {}

func (*ClaimRequest_BytesPayload) isClaimRequest_RequestIdentity() {}

// What the Claim decided. Execute the effect only on acquired, or on
// reconcile_first after checking the provider.
type ClaimResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Exactly one is set; treat an outcome this client does not know (added
	// later) as "do not execute".
	//
	// Types that are valid to be assigned to Outcome:
	//
	//	*ClaimResponse_Acquired
	//	*ClaimResponse_ReconcileFirst
	//	*ClaimResponse_Pending
	//	*ClaimResponse_Completed
	//	*ClaimResponse_NeedsReconciliation
	Outcome       isClaimResponse_Outcome `protobuf_oneof:"outcome"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ClaimResponse) Reset() {
	*x = ClaimResponse{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[2]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ClaimResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ClaimResponse) ProtoMessage() {}

func (x *ClaimResponse) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[2]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ClaimResponse.ProtoReflect.Descriptor instead.
func (*ClaimResponse) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{2}
}

func (x *ClaimResponse) GetOutcome() isClaimResponse_Outcome {
	if x != nil {
		return x.Outcome
	}
	return nil
}

func (x *ClaimResponse) GetAcquired() *Acquired {
	if x != nil {
		if x, ok := x.Outcome.(*ClaimResponse_Acquired); ok {
			return x.Acquired
		}
	}
	return nil
}

func (x *ClaimResponse) GetReconcileFirst() *ReconcileFirst {
	if x != nil {
		if x, ok := x.Outcome.(*ClaimResponse_ReconcileFirst); ok {
			return x.ReconcileFirst
		}
	}
	return nil
}

func (x *ClaimResponse) GetPending() *Pending {
	if x != nil {
		if x, ok := x.Outcome.(*ClaimResponse_Pending); ok {
			return x.Pending
		}
	}
	return nil
}

func (x *ClaimResponse) GetCompleted() *Completed {
	if x != nil {
		if x, ok := x.Outcome.(*ClaimResponse_Completed); ok {
			return x.Completed
		}
	}
	return nil
}

func (x *ClaimResponse) GetNeedsReconciliation() *NeedsReconciliation {
	if x != nil {
		if x, ok := x.Outcome.(*ClaimResponse_NeedsReconciliation); ok {
			return x.NeedsReconciliation
		}
	}
	return nil
}

type isClaimResponse_Outcome interface {
	isClaimResponse_Outcome()
}

type ClaimResponse_Acquired struct {
	// You own a fresh attempt: execute the effect, then Complete or Fail.
	Acquired *Acquired `protobuf:"bytes,1,opt,name=acquired,proto3,oneof"`
}

type ClaimResponse_ReconcileFirst struct {
	// You own the operation, but an earlier attempt may have taken effect:
	// look the provider up by the stable reference (the key or operation_id)
	// before acting, and Complete if it already happened.
	ReconcileFirst *ReconcileFirst `protobuf:"bytes,2,opt,name=reconcile_first,json=reconcileFirst,proto3,oneof"`
}

type ClaimResponse_Pending struct {
	// Another attempt holds the lease, or a retry is not yet due: do not
	// execute; Claim again after retry_after.
	Pending *Pending `protobuf:"bytes,3,opt,name=pending,proto3,oneof"`
}

type ClaimResponse_Completed struct {
	// The operation ended: its stored result or terminal error, replayed.
	Completed *Completed `protobuf:"bytes,4,opt,name=completed,proto3,oneof"`
}

type ClaimResponse_NeedsReconciliation struct {
	// The attempt budget is spent on unknown outcomes: only Reconcile can
	// resolve it. Do not execute.
	NeedsReconciliation *NeedsReconciliation `protobuf:"bytes,5,opt,name=needs_reconciliation,json=needsReconciliation,proto3,oneof"`
}

func (*ClaimResponse_Acquired) isClaimResponse_Outcome() {}

func (*ClaimResponse_ReconcileFirst) isClaimResponse_Outcome() {}

func (*ClaimResponse_Pending) isClaimResponse_Outcome() {}

func (*ClaimResponse_Completed) isClaimResponse_Outcome() {}

func (*ClaimResponse_NeedsReconciliation) isClaimResponse_Outcome() {}

// What an owner needs for its writes.
type Ownership struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Server-generated id of this incarnation of the scope. Owner writes and
	// Reconcile address the operation by it. Good as a provider idempotency key.
	OperationId string `protobuf:"bytes,1,opt,name=operation_id,json=operationId,proto3" json:"operation_id,omitempty"`
	// This owner's fence. Every owner write carries it; a stale one is refused.
	Fence uint64 `protobuf:"varint,2,opt,name=fence,proto3" json:"fence,omitempty"`
	// 1-based number of this attempt; counts every owner, takeovers included.
	Attempt uint32 `protobuf:"varint,3,opt,name=attempt,proto3" json:"attempt,omitempty"`
	// The attempt budget of the operation.
	MaxAttempts uint32 `protobuf:"varint,4,opt,name=max_attempts,json=maxAttempts,proto3" json:"max_attempts,omitempty"`
	// The lease left, at the server's clock when it answered. Count it from
	// when this Claim was sent (the early end; for a re-sent Claim, the send
	// this reply answers: each send is answered with what is left at its own
	// handling).
	Lease *durationpb.Duration `protobuf:"bytes,5,opt,name=lease,proto3" json:"lease,omitempty"`
	// Time left until this attempt's deadline, counted like the lease: cancel
	// the effect by then.
	AttemptDeadline *durationpb.Duration `protobuf:"bytes,6,opt,name=attempt_deadline,json=attemptDeadline,proto3" json:"attempt_deadline,omitempty"`
	unknownFields   protoimpl.UnknownFields
	sizeCache       protoimpl.SizeCache
}

func (x *Ownership) Reset() {
	*x = Ownership{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[3]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *Ownership) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*Ownership) ProtoMessage() {}

func (x *Ownership) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[3]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use Ownership.ProtoReflect.Descriptor instead.
func (*Ownership) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{3}
}

func (x *Ownership) GetOperationId() string {
	if x != nil {
		return x.OperationId
	}
	return ""
}

func (x *Ownership) GetFence() uint64 {
	if x != nil {
		return x.Fence
	}
	return 0
}

func (x *Ownership) GetAttempt() uint32 {
	if x != nil {
		return x.Attempt
	}
	return 0
}

func (x *Ownership) GetMaxAttempts() uint32 {
	if x != nil {
		return x.MaxAttempts
	}
	return 0
}

func (x *Ownership) GetLease() *durationpb.Duration {
	if x != nil {
		return x.Lease
	}
	return nil
}

func (x *Ownership) GetAttemptDeadline() *durationpb.Duration {
	if x != nil {
		return x.AttemptDeadline
	}
	return nil
}

// A fresh attempt is yours: no earlier attempt can have taken effect.
type Acquired struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// What the owner's writes need (operation_id, fence) and its time bounds.
	Ownership     *Ownership `protobuf:"bytes,1,opt,name=ownership,proto3" json:"ownership,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *Acquired) Reset() {
	*x = Acquired{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[4]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *Acquired) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*Acquired) ProtoMessage() {}

func (x *Acquired) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[4]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use Acquired.ProtoReflect.Descriptor instead.
func (*Acquired) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{4}
}

func (x *Acquired) GetOwnership() *Ownership {
	if x != nil {
		return x.Ownership
	}
	return nil
}

// The operation is yours, but the attempt before yours may have taken effect:
// check the provider before acting.
type ReconcileFirst struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// What the owner's writes need (operation_id, fence) and its time bounds.
	Ownership *Ownership `protobuf:"bytes,1,opt,name=ownership,proto3" json:"ownership,omitempty"`
	// The state the earlier attempt left behind: IN_PROGRESS (its lease expired)
	// or UNKNOWN (its owner reported an unknown outcome).
	PreviousState OperationState `protobuf:"varint,2,opt,name=previous_state,json=previousState,proto3,enum=idem.v1.OperationState" json:"previous_state,omitempty"`
	// The fence of the attempt whose outcome is in doubt.
	PreviousFence uint64 `protobuf:"varint,3,opt,name=previous_fence,json=previousFence,proto3" json:"previous_fence,omitempty"`
	// Time left until the earlier attempt settles: its deadline plus the
	// server's clock margin, at the server's clock when it answered; zero when
	// it has passed. Count it from when the reply arrived (the late end), never
	// from the send: for a long-polled or re-sent Claim the send may be seconds
	// earlier, and the doubt would seem to end too soon. When the earlier
	// attempt declined (Fail NOT_STARTED) or failed RETRYABLE after taking over
	// a doubt that had not settled, this is the deadline of the doubt it
	// inherited: its own outcome says nothing about the attempt it replaced. A
	// re-sent Claim told ReconcileFirst again gets what is left of the same
	// deadline by then.
	//
	// The client rule: until previous_attempt_deadline has elapsed the earlier
	// attempt's effect may still be in flight, so a provider lookup that finds
	// nothing proves nothing yet. A lookup observes the provider at some moment
	// between its send and its answer: trust a negative one only if it was
	// SENT after previous_attempt_deadline elapsed (wait, Renewing meanwhile,
	// then ask again), and only if it reads the provider's current state (not a
	// cache or a lagging replica); or rely on a provider that honours an
	// idempotency key (pass operation_id or the stable key), which makes a late
	// duplicate harmless. A positive lookup may be trusted at once: Complete
	// with what the provider reports.
	//
	// Absent only for a takeover that a server older than this field recorded
	// (during a rolling upgrade): then the deadline is not known, so treat it
	// as max_attempt_duration from this Claim.
	PreviousAttemptDeadline *durationpb.Duration `protobuf:"bytes,4,opt,name=previous_attempt_deadline,json=previousAttemptDeadline,proto3" json:"previous_attempt_deadline,omitempty"`
	unknownFields           protoimpl.UnknownFields
	sizeCache               protoimpl.SizeCache
}

func (x *ReconcileFirst) Reset() {
	*x = ReconcileFirst{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[5]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ReconcileFirst) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ReconcileFirst) ProtoMessage() {}

func (x *ReconcileFirst) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[5]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ReconcileFirst.ProtoReflect.Descriptor instead.
func (*ReconcileFirst) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{5}
}

func (x *ReconcileFirst) GetOwnership() *Ownership {
	if x != nil {
		return x.Ownership
	}
	return nil
}

func (x *ReconcileFirst) GetPreviousState() OperationState {
	if x != nil {
		return x.PreviousState
	}
	return OperationState_OPERATION_STATE_UNSPECIFIED
}

func (x *ReconcileFirst) GetPreviousFence() uint64 {
	if x != nil {
		return x.PreviousFence
	}
	return 0
}

func (x *ReconcileFirst) GetPreviousAttemptDeadline() *durationpb.Duration {
	if x != nil {
		return x.PreviousAttemptDeadline
	}
	return nil
}

// Do not execute now: another attempt holds the lease, or a retry is not yet
// due.
type Pending struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// The operation that is pending.
	OperationId string `protobuf:"bytes,1,opt,name=operation_id,json=operationId,proto3" json:"operation_id,omitempty"`
	// Why nothing is to be executed now.
	Reason PendingReason `protobuf:"varint,2,opt,name=reason,proto3,enum=idem.v1.PendingReason" json:"reason,omitempty"`
	// When to Claim again.
	RetryAfter *durationpb.Duration `protobuf:"bytes,3,opt,name=retry_after,json=retryAfter,proto3" json:"retry_after,omitempty"`
	// The attempt currently running or last run.
	Attempt       uint32 `protobuf:"varint,4,opt,name=attempt,proto3" json:"attempt,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *Pending) Reset() {
	*x = Pending{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[6]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *Pending) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*Pending) ProtoMessage() {}

func (x *Pending) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[6]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use Pending.ProtoReflect.Descriptor instead.
func (*Pending) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{6}
}

func (x *Pending) GetOperationId() string {
	if x != nil {
		return x.OperationId
	}
	return ""
}

func (x *Pending) GetReason() PendingReason {
	if x != nil {
		return x.Reason
	}
	return PendingReason_PENDING_REASON_UNSPECIFIED
}

func (x *Pending) GetRetryAfter() *durationpb.Duration {
	if x != nil {
		return x.RetryAfter
	}
	return nil
}

func (x *Pending) GetAttempt() uint32 {
	if x != nil {
		return x.Attempt
	}
	return 0
}

// The operation ended: its stored outcome, replayed byte for byte.
type Completed struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// The operation that ended.
	OperationId string `protobuf:"bytes,1,opt,name=operation_id,json=operationId,proto3" json:"operation_id,omitempty"`
	// SUCCEEDED or FAILED.
	State OperationState `protobuf:"varint,2,opt,name=state,proto3,enum=idem.v1.OperationState" json:"state,omitempty"`
	// The stored outcome, matching state.
	//
	// Types that are valid to be assigned to Outcome:
	//
	//	*Completed_Result
	//	*Completed_Error
	Outcome isCompleted_Outcome `protobuf_oneof:"outcome"`
	// How many attempts the operation took.
	Attempts uint32 `protobuf:"varint,5,opt,name=attempts,proto3" json:"attempts,omitempty"`
	// When the operation ended (database clock).
	CompletedAt *timestamppb.Timestamp `protobuf:"bytes,6,opt,name=completed_at,json=completedAt,proto3" json:"completed_at,omitempty"`
	// Until when this outcome is kept and replayed (database clock; the
	// operation's retention). After it the scope answers RESULT_EXPIRED, and
	// a retry is no longer deduplicated: a caller that may still retry after
	// this moment needs a longer retention (the Claim's `retention`).
	RetainUntil   *timestamppb.Timestamp `protobuf:"bytes,7,opt,name=retain_until,json=retainUntil,proto3" json:"retain_until,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *Completed) Reset() {
	*x = Completed{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[7]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *Completed) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*Completed) ProtoMessage() {}

func (x *Completed) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[7]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use Completed.ProtoReflect.Descriptor instead.
func (*Completed) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{7}
}

func (x *Completed) GetOperationId() string {
	if x != nil {
		return x.OperationId
	}
	return ""
}

func (x *Completed) GetState() OperationState {
	if x != nil {
		return x.State
	}
	return OperationState_OPERATION_STATE_UNSPECIFIED
}

func (x *Completed) GetOutcome() isCompleted_Outcome {
	if x != nil {
		return x.Outcome
	}
	return nil
}

func (x *Completed) GetResult() *Result {
	if x != nil {
		if x, ok := x.Outcome.(*Completed_Result); ok {
			return x.Result
		}
	}
	return nil
}

func (x *Completed) GetError() *OperationError {
	if x != nil {
		if x, ok := x.Outcome.(*Completed_Error); ok {
			return x.Error
		}
	}
	return nil
}

func (x *Completed) GetAttempts() uint32 {
	if x != nil {
		return x.Attempts
	}
	return 0
}

func (x *Completed) GetCompletedAt() *timestamppb.Timestamp {
	if x != nil {
		return x.CompletedAt
	}
	return nil
}

func (x *Completed) GetRetainUntil() *timestamppb.Timestamp {
	if x != nil {
		return x.RetainUntil
	}
	return nil
}

type isCompleted_Outcome interface {
	isCompleted_Outcome()
}

type Completed_Result struct {
	// The stored success result (state SUCCEEDED).
	Result *Result `protobuf:"bytes,3,opt,name=result,proto3,oneof"`
}

type Completed_Error struct {
	// The stored terminal error (state FAILED).
	Error *OperationError `protobuf:"bytes,4,opt,name=error,proto3,oneof"`
}

func (*Completed_Result) isCompleted_Outcome() {}

func (*Completed_Error) isCompleted_Outcome() {}

// Only Reconcile can resolve the operation now: its attempt budget (or its
// operation deadline) is spent on outcomes nobody knows. Do not execute.
type NeedsReconciliation struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// The operation to reconcile.
	OperationId string `protobuf:"bytes,1,opt,name=operation_id,json=operationId,proto3" json:"operation_id,omitempty"`
	// The fence a reconciler must pass as expected_fence.
	Fence uint64 `protobuf:"varint,2,opt,name=fence,proto3" json:"fence,omitempty"`
	// How many attempts the operation has had.
	Attempts      uint32 `protobuf:"varint,3,opt,name=attempts,proto3" json:"attempts,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *NeedsReconciliation) Reset() {
	*x = NeedsReconciliation{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[8]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *NeedsReconciliation) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*NeedsReconciliation) ProtoMessage() {}

func (x *NeedsReconciliation) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[8]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use NeedsReconciliation.ProtoReflect.Descriptor instead.
func (*NeedsReconciliation) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{8}
}

func (x *NeedsReconciliation) GetOperationId() string {
	if x != nil {
		return x.OperationId
	}
	return ""
}

func (x *NeedsReconciliation) GetFence() uint64 {
	if x != nil {
		return x.Fence
	}
	return 0
}

func (x *NeedsReconciliation) GetAttempts() uint32 {
	if x != nil {
		return x.Attempts
	}
	return 0
}

// A success result, replayed byte for byte.
type Result struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Opaque bytes, at most 1 MiB by default.
	Body []byte `protobuf:"bytes,1,opt,name=body,proto3" json:"body,omitempty"`
	// How to read body, e.g. "application/json". At most 255 bytes.
	ContentType string `protobuf:"bytes,2,opt,name=content_type,json=contentType,proto3" json:"content_type,omitempty"`
	// Small string map: at most 16 entries, each at most 256 bytes (key and
	// value together).
	Metadata      map[string]string `protobuf:"bytes,3,rep,name=metadata,proto3" json:"metadata,omitempty" protobuf_key:"bytes,1,opt,name=key" protobuf_val:"bytes,2,opt,name=value"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *Result) Reset() {
	*x = Result{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[9]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *Result) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*Result) ProtoMessage() {}

func (x *Result) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[9]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use Result.ProtoReflect.Descriptor instead.
func (*Result) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{9}
}

func (x *Result) GetBody() []byte {
	if x != nil {
		return x.Body
	}
	return nil
}

func (x *Result) GetContentType() string {
	if x != nil {
		return x.ContentType
	}
	return ""
}

func (x *Result) GetMetadata() map[string]string {
	if x != nil {
		return x.Metadata
	}
	return nil
}

// A failure as stored and replayed.
type OperationError struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Who ended the operation and why.
	Reason FailureReason `protobuf:"varint,1,opt,name=reason,proto3,enum=idem.v1.FailureReason" json:"reason,omitempty"`
	// The caller's error code, e.g. "card_declined". At most 255 bytes.
	Code string `protobuf:"bytes,2,opt,name=code,proto3" json:"code,omitempty"`
	// Human-readable message, at most 4 KiB. Never put secrets here.
	Message string `protobuf:"bytes,3,opt,name=message,proto3" json:"message,omitempty"`
	// Small string map, same bounds as Result.metadata.
	Metadata      map[string]string `protobuf:"bytes,4,rep,name=metadata,proto3" json:"metadata,omitempty" protobuf_key:"bytes,1,opt,name=key" protobuf_val:"bytes,2,opt,name=value"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *OperationError) Reset() {
	*x = OperationError{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[10]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *OperationError) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*OperationError) ProtoMessage() {}

func (x *OperationError) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[10]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use OperationError.ProtoReflect.Descriptor instead.
func (*OperationError) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{10}
}

func (x *OperationError) GetReason() FailureReason {
	if x != nil {
		return x.Reason
	}
	return FailureReason_FAILURE_REASON_UNSPECIFIED
}

func (x *OperationError) GetCode() string {
	if x != nil {
		return x.Code
	}
	return ""
}

func (x *OperationError) GetMessage() string {
	if x != nil {
		return x.Message
	}
	return ""
}

func (x *OperationError) GetMetadata() map[string]string {
	if x != nil {
		return x.Metadata
	}
	return nil
}

// Extends the owner's lease, never beyond its attempt deadline.
type RenewRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// The operation, as Acquired or ReconcileFirst gave it.
	OperationId string `protobuf:"bytes,1,opt,name=operation_id,json=operationId,proto3" json:"operation_id,omitempty"`
	// The owner's fence; a stale one is ABORTED (LEASE_LOST).
	Fence uint64 `protobuf:"varint,2,opt,name=fence,proto3" json:"fence,omitempty"`
	// The lease wanted from now; same bounds and default as ClaimRequest.lease.
	Lease         *durationpb.Duration `protobuf:"bytes,3,opt,name=lease,proto3" json:"lease,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *RenewRequest) Reset() {
	*x = RenewRequest{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[11]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *RenewRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*RenewRequest) ProtoMessage() {}

func (x *RenewRequest) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[11]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use RenewRequest.ProtoReflect.Descriptor instead.
func (*RenewRequest) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{11}
}

func (x *RenewRequest) GetOperationId() string {
	if x != nil {
		return x.OperationId
	}
	return ""
}

func (x *RenewRequest) GetFence() uint64 {
	if x != nil {
		return x.Fence
	}
	return 0
}

func (x *RenewRequest) GetLease() *durationpb.Duration {
	if x != nil {
		return x.Lease
	}
	return nil
}

// The lease as granted.
type RenewResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// The lease granted: shorter than asked when the attempt deadline is nearer.
	Lease *durationpb.Duration `protobuf:"bytes,1,opt,name=lease,proto3" json:"lease,omitempty"`
	// Time left until the attempt deadline.
	AttemptDeadline *durationpb.Duration `protobuf:"bytes,2,opt,name=attempt_deadline,json=attemptDeadline,proto3" json:"attempt_deadline,omitempty"`
	unknownFields   protoimpl.UnknownFields
	sizeCache       protoimpl.SizeCache
}

func (x *RenewResponse) Reset() {
	*x = RenewResponse{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[12]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *RenewResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*RenewResponse) ProtoMessage() {}

func (x *RenewResponse) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[12]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use RenewResponse.ProtoReflect.Descriptor instead.
func (*RenewResponse) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{12}
}

func (x *RenewResponse) GetLease() *durationpb.Duration {
	if x != nil {
		return x.Lease
	}
	return nil
}

func (x *RenewResponse) GetAttemptDeadline() *durationpb.Duration {
	if x != nil {
		return x.AttemptDeadline
	}
	return nil
}

// Records the success result; only the current fence may.
type CompleteRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// The operation, as Acquired or ReconcileFirst gave it.
	OperationId string `protobuf:"bytes,1,opt,name=operation_id,json=operationId,proto3" json:"operation_id,omitempty"`
	// The owner's fence; a stale one is ABORTED (LEASE_LOST).
	Fence uint64 `protobuf:"varint,2,opt,name=fence,proto3" json:"fence,omitempty"`
	// The result to store and replay. Required.
	Result        *Result `protobuf:"bytes,3,opt,name=result,proto3" json:"result,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *CompleteRequest) Reset() {
	*x = CompleteRequest{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[13]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *CompleteRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*CompleteRequest) ProtoMessage() {}

func (x *CompleteRequest) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[13]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use CompleteRequest.ProtoReflect.Descriptor instead.
func (*CompleteRequest) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{13}
}

func (x *CompleteRequest) GetOperationId() string {
	if x != nil {
		return x.OperationId
	}
	return ""
}

func (x *CompleteRequest) GetFence() uint64 {
	if x != nil {
		return x.Fence
	}
	return 0
}

func (x *CompleteRequest) GetResult() *Result {
	if x != nil {
		return x.Result
	}
	return nil
}

// The operation's state after the Complete.
type CompleteResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Always SUCCEEDED.
	State         OperationState `protobuf:"varint,1,opt,name=state,proto3,enum=idem.v1.OperationState" json:"state,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *CompleteResponse) Reset() {
	*x = CompleteResponse{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[14]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *CompleteResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*CompleteResponse) ProtoMessage() {}

func (x *CompleteResponse) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[14]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use CompleteResponse.ProtoReflect.Descriptor instead.
func (*CompleteResponse) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{14}
}

func (x *CompleteResponse) GetState() OperationState {
	if x != nil {
		return x.State
	}
	return OperationState_OPERATION_STATE_UNSPECIFIED
}

// Records a failure with a disposition; only the current fence may.
type FailRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// The operation, as Acquired or ReconcileFirst gave it.
	OperationId string `protobuf:"bytes,1,opt,name=operation_id,json=operationId,proto3" json:"operation_id,omitempty"`
	// The owner's fence; a stale one is ABORTED (LEASE_LOST).
	Fence uint64 `protobuf:"varint,2,opt,name=fence,proto3" json:"fence,omitempty"`
	// Whether the effect happened: decides what becomes of the operation.
	// Required (UNSPECIFIED is INVALID_ARGUMENT).
	Disposition FailDisposition `protobuf:"varint,3,opt,name=disposition,proto3,enum=idem.v1.FailDisposition" json:"disposition,omitempty"`
	// The error to store (TERMINAL) or to keep in history (RETRYABLE, UNKNOWN,
	// NOT_STARTED).
	// reason is set by the server and ignored here.
	Error *OperationError `protobuf:"bytes,4,opt,name=error,proto3" json:"error,omitempty"`
	// RETRYABLE only: when the next attempt may start (default 1s, at most 1h).
	RetryAfter    *durationpb.Duration `protobuf:"bytes,5,opt,name=retry_after,json=retryAfter,proto3" json:"retry_after,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *FailRequest) Reset() {
	*x = FailRequest{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[15]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *FailRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*FailRequest) ProtoMessage() {}

func (x *FailRequest) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[15]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use FailRequest.ProtoReflect.Descriptor instead.
func (*FailRequest) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{15}
}

func (x *FailRequest) GetOperationId() string {
	if x != nil {
		return x.OperationId
	}
	return ""
}

func (x *FailRequest) GetFence() uint64 {
	if x != nil {
		return x.Fence
	}
	return 0
}

func (x *FailRequest) GetDisposition() FailDisposition {
	if x != nil {
		return x.Disposition
	}
	return FailDisposition_FAIL_DISPOSITION_UNSPECIFIED
}

func (x *FailRequest) GetError() *OperationError {
	if x != nil {
		return x.Error
	}
	return nil
}

func (x *FailRequest) GetRetryAfter() *durationpb.Duration {
	if x != nil {
		return x.RetryAfter
	}
	return nil
}

// The operation's state after the Fail.
type FailResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// FAILED, RETRY_WAIT or UNKNOWN.
	State OperationState `protobuf:"varint,1,opt,name=state,proto3,enum=idem.v1.OperationState" json:"state,omitempty"`
	// Set when state is FAILED.
	Reason FailureReason `protobuf:"varint,2,opt,name=reason,proto3,enum=idem.v1.FailureReason" json:"reason,omitempty"`
	// Set when state is RETRY_WAIT: when the next attempt is due.
	RetryAfter    *durationpb.Duration `protobuf:"bytes,3,opt,name=retry_after,json=retryAfter,proto3" json:"retry_after,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *FailResponse) Reset() {
	*x = FailResponse{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[16]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *FailResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*FailResponse) ProtoMessage() {}

func (x *FailResponse) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[16]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use FailResponse.ProtoReflect.Descriptor instead.
func (*FailResponse) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{16}
}

func (x *FailResponse) GetState() OperationState {
	if x != nil {
		return x.State
	}
	return OperationState_OPERATION_STATE_UNSPECIFIED
}

func (x *FailResponse) GetReason() FailureReason {
	if x != nil {
		return x.Reason
	}
	return FailureReason_FAILURE_REASON_UNSPECIFIED
}

func (x *FailResponse) GetRetryAfter() *durationpb.Duration {
	if x != nil {
		return x.RetryAfter
	}
	return nil
}

// Reads one operation of the caller's tenant.
type LookupRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Which operation; exactly one is required.
	//
	// Types that are valid to be assigned to Target:
	//
	//	*LookupRequest_Scope
	//	*LookupRequest_OperationId
	Target isLookupRequest_Target `protobuf_oneof:"target"`
	// Include the operation's history, oldest first, one page at a time
	// (implied by history_page_token).
	IncludeHistory bool `protobuf:"varint,3,opt,name=include_history,json=includeHistory,proto3" json:"include_history,omitempty"`
	// At most this many history entries (default 100); more than 1000 is
	// clamped to 1000.
	HistoryPageSize uint32 `protobuf:"varint,4,opt,name=history_page_size,json=historyPageSize,proto3" json:"history_page_size,omitempty"`
	// A previous response's next_history_page_token, unchanged, for the next
	// page of the same operation; empty for the first page. Tokens are opaque:
	// anything else, or a token of another operation, is INVALID_ARGUMENT.
	HistoryPageToken string `protobuf:"bytes,5,opt,name=history_page_token,json=historyPageToken,proto3" json:"history_page_token,omitempty"`
	// Optional: the name of the tenant whose operation to read; empty, the
	// caller's own. Naming a tenant needs the admin scope (else
	// PERMISSION_DENIED, MISSING_SCOPE naming admin); a name with no active
	// tenant is NOT_FOUND (TENANT_NOT_FOUND).
	Tenant        string `protobuf:"bytes,6,opt,name=tenant,proto3" json:"tenant,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *LookupRequest) Reset() {
	*x = LookupRequest{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[17]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *LookupRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*LookupRequest) ProtoMessage() {}

func (x *LookupRequest) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[17]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use LookupRequest.ProtoReflect.Descriptor instead.
func (*LookupRequest) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{17}
}

func (x *LookupRequest) GetTarget() isLookupRequest_Target {
	if x != nil {
		return x.Target
	}
	return nil
}

func (x *LookupRequest) GetScope() *Scope {
	if x != nil {
		if x, ok := x.Target.(*LookupRequest_Scope); ok {
			return x.Scope
		}
	}
	return nil
}

func (x *LookupRequest) GetOperationId() string {
	if x != nil {
		if x, ok := x.Target.(*LookupRequest_OperationId); ok {
			return x.OperationId
		}
	}
	return ""
}

func (x *LookupRequest) GetIncludeHistory() bool {
	if x != nil {
		return x.IncludeHistory
	}
	return false
}

func (x *LookupRequest) GetHistoryPageSize() uint32 {
	if x != nil {
		return x.HistoryPageSize
	}
	return 0
}

func (x *LookupRequest) GetHistoryPageToken() string {
	if x != nil {
		return x.HistoryPageToken
	}
	return ""
}

func (x *LookupRequest) GetTenant() string {
	if x != nil {
		return x.Tenant
	}
	return ""
}

type isLookupRequest_Target interface {
	isLookupRequest_Target()
}

type LookupRequest_Scope struct {
	// By the caller's name for it.
	Scope *Scope `protobuf:"bytes,1,opt,name=scope,proto3,oneof"`
}

type LookupRequest_OperationId struct {
	// By the server's id of it.
	OperationId string `protobuf:"bytes,2,opt,name=operation_id,json=operationId,proto3,oneof"`
}

func (*LookupRequest_Scope) isLookupRequest_Target() {}

func (*LookupRequest_OperationId) isLookupRequest_Target() {}

// The operation and, if asked for, its history.
type LookupResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// The operation as stored.
	Operation *Operation `protobuf:"bytes,1,opt,name=operation,proto3" json:"operation,omitempty"`
	// One page of the history, oldest first: the pages of a history, in order,
	// concatenate to the whole of it.
	History []*HistoryEntry `protobuf:"bytes,2,rep,name=history,proto3" json:"history,omitempty"`
	// Empty when no entries follow this page. Opaque, URL-safe; pass it back
	// as is, with the same target.
	NextHistoryPageToken string `protobuf:"bytes,3,opt,name=next_history_page_token,json=nextHistoryPageToken,proto3" json:"next_history_page_token,omitempty"`
	unknownFields        protoimpl.UnknownFields
	sizeCache            protoimpl.SizeCache
}

func (x *LookupResponse) Reset() {
	*x = LookupResponse{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[18]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *LookupResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*LookupResponse) ProtoMessage() {}

func (x *LookupResponse) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[18]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use LookupResponse.ProtoReflect.Descriptor instead.
func (*LookupResponse) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{18}
}

func (x *LookupResponse) GetOperation() *Operation {
	if x != nil {
		return x.Operation
	}
	return nil
}

func (x *LookupResponse) GetHistory() []*HistoryEntry {
	if x != nil {
		return x.History
	}
	return nil
}

func (x *LookupResponse) GetNextHistoryPageToken() string {
	if x != nil {
		return x.NextHistoryPageToken
	}
	return ""
}

// An operation as stored.
type Operation struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Server-generated id of this incarnation of the scope.
	OperationId string `protobuf:"bytes,1,opt,name=operation_id,json=operationId,proto3" json:"operation_id,omitempty"`
	// The caller's name for the operation.
	Scope *Scope `protobuf:"bytes,2,opt,name=scope,proto3" json:"scope,omitempty"`
	// As stored. An IN_PROGRESS operation whose lease expired is reported with
	// lease_expired set.
	State OperationState `protobuf:"varint,3,opt,name=state,proto3,enum=idem.v1.OperationState" json:"state,omitempty"`
	// IN_PROGRESS with its lease run out (by the database clock): it counts as
	// unresolved.
	LeaseExpired bool `protobuf:"varint,4,opt,name=lease_expired,json=leaseExpired,proto3" json:"lease_expired,omitempty"`
	// The 32-byte fingerprint of the request the operation was created for.
	Fingerprint []byte `protobuf:"bytes,5,opt,name=fingerprint,proto3" json:"fingerprint,omitempty"`
	// The current fence: the owner's, or the last reconciler's.
	Fence uint64 `protobuf:"varint,6,opt,name=fence,proto3" json:"fence,omitempty"`
	// 1-based number of the current or last attempt.
	Attempt uint32 `protobuf:"varint,7,opt,name=attempt,proto3" json:"attempt,omitempty"`
	// The attempt budget (raised by one when a not_applied grants an attempt
	// beyond it).
	MaxAttempts uint32 `protobuf:"varint,8,opt,name=max_attempts,json=maxAttempts,proto3" json:"max_attempts,omitempty"`
	// Set for SUCCEEDED (unless omitted by ListUnresolved).
	Result *Result `protobuf:"bytes,9,opt,name=result,proto3" json:"result,omitempty"`
	// Set for FAILED.
	Error *OperationError `protobuf:"bytes,10,opt,name=error,proto3" json:"error,omitempty"`
	// When the first Claim created it (database clock, like every time here).
	CreatedAt *timestamppb.Timestamp `protobuf:"bytes,11,opt,name=created_at,json=createdAt,proto3" json:"created_at,omitempty"`
	// When it last changed.
	UpdatedAt *timestamppb.Timestamp `protobuf:"bytes,12,opt,name=updated_at,json=updatedAt,proto3" json:"updated_at,omitempty"`
	// IN_PROGRESS: lease expiry and attempt deadline; RETRY_WAIT: retry time.
	LeaseExpiresAt *timestamppb.Timestamp `protobuf:"bytes,13,opt,name=lease_expires_at,json=leaseExpiresAt,proto3" json:"lease_expires_at,omitempty"`
	// The deadline of the current or last attempt (kept after it ended).
	AttemptDeadlineAt *timestamppb.Timestamp `protobuf:"bytes,14,opt,name=attempt_deadline_at,json=attemptDeadlineAt,proto3" json:"attempt_deadline_at,omitempty"`
	// RETRY_WAIT: when the next attempt is due.
	RetryAt *timestamppb.Timestamp `protobuf:"bytes,15,opt,name=retry_at,json=retryAt,proto3" json:"retry_at,omitempty"`
	// Terminal: when it ended and when its result will be purged.
	CompletedAt *timestamppb.Timestamp `protobuf:"bytes,16,opt,name=completed_at,json=completedAt,proto3" json:"completed_at,omitempty"`
	// Terminal: when its result is purged (a tombstone: when it is deleted).
	RetainUntil *timestamppb.Timestamp `protobuf:"bytes,17,opt,name=retain_until,json=retainUntil,proto3" json:"retain_until,omitempty"`
	// Set when the first Claim gave an operation_deadline.
	OperationDeadlineAt *timestamppb.Timestamp `protobuf:"bytes,18,opt,name=operation_deadline_at,json=operationDeadlineAt,proto3" json:"operation_deadline_at,omitempty"`
	// The name of the tenant the operation belongs to. Set only in
	// ListOperations answers to an admin credential, which may list every
	// tenant's operations; empty otherwise (a caller knows its own tenant).
	Tenant string `protobuf:"bytes,19,opt,name=tenant,proto3" json:"tenant,omitempty"`
	// What a Claim gets once the operation is FAILED, stored by its first
	// Claim from the operation policy in force then.
	OnFailed OnFailed `protobuf:"varint,20,opt,name=on_failed,json=onFailed,proto3,enum=idem.v1.OnFailed" json:"on_failed,omitempty"`
	// How many Claims of this scope were refused because their request
	// differed from this operation's (IDEMPOTENCY_KEY_REUSED). Evidence only:
	// counting one changes neither the state, the fence, the lease nor
	// updated_at. 0 for operations refused only by a server that predates
	// the count.
	Conflicts uint64 `protobuf:"varint,21,opt,name=conflicts,proto3" json:"conflicts,omitempty"`
	// The database time of the last of them; unset when conflicts is 0.
	LastConflictAt *timestamppb.Timestamp `protobuf:"bytes,22,opt,name=last_conflict_at,json=lastConflictAt,proto3" json:"last_conflict_at,omitempty"`
	// About how many Claims were answered Completed (a replay of the stored
	// result or failure), as of the last flush. Each replica counts replays
	// in memory, so that a replay stays free of database writes, and adds its
	// counts in one batched statement every flush interval (the server's
	// --answer-count-interval, default 5 s) and when it drains: the count lags
	// by up to that interval, and a replica that crashes loses at most one
	// interval's counts. Past a replica's bound on operations counted in one
	// interval, the rest are not counted (idemd_answer_counts_dropped_total).
	// Evidence only: counting changes neither the state, the fence, the lease
	// nor updated_at. 0 for answers of servers that predate the count.
	Replays uint64 `protobuf:"varint,23,opt,name=replays,proto3" json:"replays,omitempty"`
	// About how many Claims were answered Pending (another attempt holds the
	// lease, or a retry is not yet due), counted as replays are: as of the
	// last flush, at most one interval lost in a crash. A Claim that waited
	// (`wait`) counts once, with the answer it finally got.
	Pendings uint64 `protobuf:"varint,24,opt,name=pendings,proto3" json:"pendings,omitempty"`
	// About when the last counted replay was answered, on the database clock
	// (the replica's time since the replay, subtracted from the database
	// clock at the flush); unset when replays is 0.
	LastReplayAt *timestamppb.Timestamp `protobuf:"bytes,25,opt,name=last_replay_at,json=lastReplayAt,proto3" json:"last_replay_at,omitempty"`
	// Lookup only: how many operations of this tenant and operation name the
	// replica that answered saw created with this operation's request (its
	// fingerprint) within its current new-key-retry window (the server's
	// --new-key-retry-window, default 60 s), this one's own included when it is
	// that recent; 0 when none lately. Counted in that replica's memory from
	// fingerprints alone: a Lookup answered by another replica may say less.
	SameRequestKeys uint32 `protobuf:"varint,26,opt,name=same_request_keys,json=sameRequestKeys,proto3" json:"same_request_keys,omitempty"`
	// Lookup only: same_request_keys reached the server's
	// --new-key-retry-threshold (default 3). The caller probably makes a new
	// idempotency key per retry instead of one per intent, which protects
	// nothing: each retry is a new operation. Also counted in
	// idemd_suspected_new_key_retries_total.
	SuspectedNewKeyRetry bool `protobuf:"varint,27,opt,name=suspected_new_key_retry,json=suspectedNewKeyRetry,proto3" json:"suspected_new_key_retry,omitempty"`
	unknownFields        protoimpl.UnknownFields
	sizeCache            protoimpl.SizeCache
}

func (x *Operation) Reset() {
	*x = Operation{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[19]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *Operation) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*Operation) ProtoMessage() {}

func (x *Operation) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[19]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use Operation.ProtoReflect.Descriptor instead.
func (*Operation) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{19}
}

func (x *Operation) GetOperationId() string {
	if x != nil {
		return x.OperationId
	}
	return ""
}

func (x *Operation) GetScope() *Scope {
	if x != nil {
		return x.Scope
	}
	return nil
}

func (x *Operation) GetState() OperationState {
	if x != nil {
		return x.State
	}
	return OperationState_OPERATION_STATE_UNSPECIFIED
}

func (x *Operation) GetLeaseExpired() bool {
	if x != nil {
		return x.LeaseExpired
	}
	return false
}

func (x *Operation) GetFingerprint() []byte {
	if x != nil {
		return x.Fingerprint
	}
	return nil
}

func (x *Operation) GetFence() uint64 {
	if x != nil {
		return x.Fence
	}
	return 0
}

func (x *Operation) GetAttempt() uint32 {
	if x != nil {
		return x.Attempt
	}
	return 0
}

func (x *Operation) GetMaxAttempts() uint32 {
	if x != nil {
		return x.MaxAttempts
	}
	return 0
}

func (x *Operation) GetResult() *Result {
	if x != nil {
		return x.Result
	}
	return nil
}

func (x *Operation) GetError() *OperationError {
	if x != nil {
		return x.Error
	}
	return nil
}

func (x *Operation) GetCreatedAt() *timestamppb.Timestamp {
	if x != nil {
		return x.CreatedAt
	}
	return nil
}

func (x *Operation) GetUpdatedAt() *timestamppb.Timestamp {
	if x != nil {
		return x.UpdatedAt
	}
	return nil
}

func (x *Operation) GetLeaseExpiresAt() *timestamppb.Timestamp {
	if x != nil {
		return x.LeaseExpiresAt
	}
	return nil
}

func (x *Operation) GetAttemptDeadlineAt() *timestamppb.Timestamp {
	if x != nil {
		return x.AttemptDeadlineAt
	}
	return nil
}

func (x *Operation) GetRetryAt() *timestamppb.Timestamp {
	if x != nil {
		return x.RetryAt
	}
	return nil
}

func (x *Operation) GetCompletedAt() *timestamppb.Timestamp {
	if x != nil {
		return x.CompletedAt
	}
	return nil
}

func (x *Operation) GetRetainUntil() *timestamppb.Timestamp {
	if x != nil {
		return x.RetainUntil
	}
	return nil
}

func (x *Operation) GetOperationDeadlineAt() *timestamppb.Timestamp {
	if x != nil {
		return x.OperationDeadlineAt
	}
	return nil
}

func (x *Operation) GetTenant() string {
	if x != nil {
		return x.Tenant
	}
	return ""
}

func (x *Operation) GetOnFailed() OnFailed {
	if x != nil {
		return x.OnFailed
	}
	return OnFailed_ON_FAILED_UNSPECIFIED
}

func (x *Operation) GetConflicts() uint64 {
	if x != nil {
		return x.Conflicts
	}
	return 0
}

func (x *Operation) GetLastConflictAt() *timestamppb.Timestamp {
	if x != nil {
		return x.LastConflictAt
	}
	return nil
}

func (x *Operation) GetReplays() uint64 {
	if x != nil {
		return x.Replays
	}
	return 0
}

func (x *Operation) GetPendings() uint64 {
	if x != nil {
		return x.Pendings
	}
	return 0
}

func (x *Operation) GetLastReplayAt() *timestamppb.Timestamp {
	if x != nil {
		return x.LastReplayAt
	}
	return nil
}

func (x *Operation) GetSameRequestKeys() uint32 {
	if x != nil {
		return x.SameRequestKeys
	}
	return 0
}

func (x *Operation) GetSuspectedNewKeyRetry() bool {
	if x != nil {
		return x.SuspectedNewKeyRetry
	}
	return false
}

// One transition of an operation, or one run of coalesced events (an owner's
// renewals, refused writes of one RPC, the events past the history cap).
type HistoryEntry struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// 1-based, in order.
	Sequence uint64 `protobuf:"varint,1,opt,name=sequence,proto3" json:"sequence,omitempty"`
	// What happened, one of (a Claim re-sent with the owner's claim_token
	// writes nothing):
	//
	//	CLAIMED              the first Claim of the scope: attempt 1
	//	TAKEN_OVER           a new owner after an expired lease or an unknown
	//	                     outcome (it was told ReconcileFirst)
	//	RETRY_STARTED        a new attempt after a retryable failure
	//	RETRIED_AFTER_FAILURE a new attempt of a FAILED operation whose policy
	//	                     says on_failed: new_attempt (detail: the failure
	//	                     it replaces; whether one more attempt was granted
	//	                     beyond the budget)
	//	MARKED_UNKNOWN       an expired attempt with no budget or time left for
	//	                     another: only Reconcile resolves it
	//	RENEWED              the owner extended its lease
	//	COMPLETED            the owner stored its result
	//	FAILED               a terminal failure, or a retryable one with the
	//	                     attempt budget spent
	//	DEADLINE_EXCEEDED    ended as failed by the operation deadline
	//	RETRY_SCHEDULED      a retryable failure: the next attempt is due at
	//	                     retry_at
	//	OUTCOME_UNKNOWN      the owner reported an unknown outcome
	//	RECONCILED           a reconciler resolved it (detail: succeeded,
	//	                     failed or not_applied)
	//	STALE_WRITE_REFUSED  a write with a stale fence (detail: which call)
	//	LATE_WRITE_REFUSED   the owner's write after its attempt deadline
	//	CONFLICTING_CLAIM_REFUSED  a Claim of the key with another request,
	//	                     refused as a key reuse; state, fence and lease
	//	                     unchanged (counted in Operation.conflicts)
	//	EXPIRED              the result passed retention: now a tombstone
	//	FORGOTTEN            an admin turned the ended operation into a
	//	                     tombstone before its retention ended (Forget;
	//	                     detail: the reason given; credential: who)
	//	HISTORY_TRUNCATED    stands for the events past the history cap
	//	                     (the server's history cap, default 100): count
	//	                     says how many, fence and last_fence the first and
	//	                     the last one's fence, at and last_at their times.
	//	                     CLAIMED and the terminal transitions (COMPLETED,
	//	                     FAILED, DEADLINE_EXCEEDED, RECONCILED to a
	//	                     terminal state, EXPIRED) are always kept
	Event string `protobuf:"bytes,2,opt,name=event,proto3" json:"event,omitempty"`
	// The state before (UNSPECIFIED for CLAIMED).
	FromState OperationState `protobuf:"varint,3,opt,name=from_state,json=fromState,proto3,enum=idem.v1.OperationState" json:"from_state,omitempty"`
	// The state after (for a refusal, unchanged).
	ToState OperationState `protobuf:"varint,4,opt,name=to_state,json=toState,proto3,enum=idem.v1.OperationState" json:"to_state,omitempty"`
	// The fence that made the write (for STALE_WRITE_REFUSED and
	// LATE_WRITE_REFUSED, the refused one; for a coalesced entry, the first).
	Fence uint64 `protobuf:"varint,5,opt,name=fence,proto3" json:"fence,omitempty"`
	// The attempt the entry belongs to.
	Attempt uint32 `protobuf:"varint,6,opt,name=attempt,proto3" json:"attempt,omitempty"`
	// Free-form, no payloads: e.g. the RPC of a refused write, a failure code.
	Detail string `protobuf:"bytes,7,opt,name=detail,proto3" json:"detail,omitempty"`
	// How many events this entry stands for. Events coalesce into the
	// operation's last entry: RENEWED per fence (one owner renewing N times is
	// one entry, count N), STALE_WRITE_REFUSED and LATE_WRITE_REFUSED per RPC
	// (detail) whatever the fence, CONFLICTING_CLAIM_REFUSED whatever the
	// fence; every other event has an entry of its own.
	// 64 bits wide (it was uint32: the same varint on the wire for every
	// value below 2^32, so clients built with either read it alike).
	Count uint64 `protobuf:"varint,8,opt,name=count,proto3" json:"count,omitempty"`
	// When it happened; for a coalesced entry, the first and the last time.
	At *timestamppb.Timestamp `protobuf:"bytes,9,opt,name=at,proto3" json:"at,omitempty"`
	// The last time, for a coalesced entry; else equal to at.
	LastAt *timestamppb.Timestamp `protobuf:"bytes,10,opt,name=last_at,json=lastAt,proto3" json:"last_at,omitempty"`
	// The fence of the last event this entry stands for; equals fence unless
	// refusals of several fences coalesced (fence is then the first refused
	// one, last_fence the last).
	LastFence uint64 `protobuf:"varint,11,opt,name=last_fence,json=lastFence,proto3" json:"last_fence,omitempty"`
	// Which credential made the change, for RECONCILED and FORGOTTEN entries:
	// `token:NAME` or `certificate:IDENTITY`, never a secret. Empty for the
	// owners' own writes and the sweeper's, and for entries written before
	// servers recorded it.
	Credential string `protobuf:"bytes,12,opt,name=credential,proto3" json:"credential,omitempty"`
	// The credential was an admin's acting on this tenant's behalf (it belongs
	// to another tenant and named this one).
	AdminOnBehalf bool `protobuf:"varint,13,opt,name=admin_on_behalf,json=adminOnBehalf,proto3" json:"admin_on_behalf,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *HistoryEntry) Reset() {
	*x = HistoryEntry{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[20]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *HistoryEntry) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*HistoryEntry) ProtoMessage() {}

func (x *HistoryEntry) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[20]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use HistoryEntry.ProtoReflect.Descriptor instead.
func (*HistoryEntry) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{20}
}

func (x *HistoryEntry) GetSequence() uint64 {
	if x != nil {
		return x.Sequence
	}
	return 0
}

func (x *HistoryEntry) GetEvent() string {
	if x != nil {
		return x.Event
	}
	return ""
}

func (x *HistoryEntry) GetFromState() OperationState {
	if x != nil {
		return x.FromState
	}
	return OperationState_OPERATION_STATE_UNSPECIFIED
}

func (x *HistoryEntry) GetToState() OperationState {
	if x != nil {
		return x.ToState
	}
	return OperationState_OPERATION_STATE_UNSPECIFIED
}

func (x *HistoryEntry) GetFence() uint64 {
	if x != nil {
		return x.Fence
	}
	return 0
}

func (x *HistoryEntry) GetAttempt() uint32 {
	if x != nil {
		return x.Attempt
	}
	return 0
}

func (x *HistoryEntry) GetDetail() string {
	if x != nil {
		return x.Detail
	}
	return ""
}

func (x *HistoryEntry) GetCount() uint64 {
	if x != nil {
		return x.Count
	}
	return 0
}

func (x *HistoryEntry) GetAt() *timestamppb.Timestamp {
	if x != nil {
		return x.At
	}
	return nil
}

func (x *HistoryEntry) GetLastAt() *timestamppb.Timestamp {
	if x != nil {
		return x.LastAt
	}
	return nil
}

func (x *HistoryEntry) GetLastFence() uint64 {
	if x != nil {
		return x.LastFence
	}
	return 0
}

func (x *HistoryEntry) GetCredential() string {
	if x != nil {
		return x.Credential
	}
	return ""
}

func (x *HistoryEntry) GetAdminOnBehalf() bool {
	if x != nil {
		return x.AdminOnBehalf
	}
	return false
}

// Resolves an operation whose outcome is unknown, from outside evidence.
type ReconcileRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// The operation, as Lookup, ListUnresolved or NeedsReconciliation gave it.
	OperationId string `protobuf:"bytes,1,opt,name=operation_id,json=operationId,proto3" json:"operation_id,omitempty"`
	// The current fence, as Lookup, ListUnresolved or NeedsReconciliation gave it.
	ExpectedFence uint64 `protobuf:"varint,2,opt,name=expected_fence,json=expectedFence,proto3" json:"expected_fence,omitempty"`
	// What the evidence says; exactly one is required.
	//
	// Types that are valid to be assigned to Resolution:
	//
	//	*ReconcileRequest_Succeeded
	//	*ReconcileRequest_Failed
	//	*ReconcileRequest_NotApplied
	Resolution isReconcileRequest_Resolution `protobuf_oneof:"resolution"`
	// Optional: the name of the tenant whose operation it is; empty, the
	// caller's own. Naming a tenant needs the admin scope besides reconcile
	// (else PERMISSION_DENIED, MISSING_SCOPE naming admin, and nothing is
	// written); a name with no active tenant is NOT_FOUND (TENANT_NOT_FOUND).
	// The history entry records the credential and that an admin acted on
	// the tenant's behalf, and the audit log records it too.
	Tenant        string `protobuf:"bytes,6,opt,name=tenant,proto3" json:"tenant,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ReconcileRequest) Reset() {
	*x = ReconcileRequest{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[21]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ReconcileRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ReconcileRequest) ProtoMessage() {}

func (x *ReconcileRequest) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[21]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ReconcileRequest.ProtoReflect.Descriptor instead.
func (*ReconcileRequest) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{21}
}

func (x *ReconcileRequest) GetOperationId() string {
	if x != nil {
		return x.OperationId
	}
	return ""
}

func (x *ReconcileRequest) GetExpectedFence() uint64 {
	if x != nil {
		return x.ExpectedFence
	}
	return 0
}

func (x *ReconcileRequest) GetResolution() isReconcileRequest_Resolution {
	if x != nil {
		return x.Resolution
	}
	return nil
}

func (x *ReconcileRequest) GetSucceeded() *Result {
	if x != nil {
		if x, ok := x.Resolution.(*ReconcileRequest_Succeeded); ok {
			return x.Succeeded
		}
	}
	return nil
}

func (x *ReconcileRequest) GetFailed() *OperationError {
	if x != nil {
		if x, ok := x.Resolution.(*ReconcileRequest_Failed); ok {
			return x.Failed
		}
	}
	return nil
}

func (x *ReconcileRequest) GetNotApplied() *NotApplied {
	if x != nil {
		if x, ok := x.Resolution.(*ReconcileRequest_NotApplied); ok {
			return x.NotApplied
		}
	}
	return nil
}

func (x *ReconcileRequest) GetTenant() string {
	if x != nil {
		return x.Tenant
	}
	return ""
}

type isReconcileRequest_Resolution interface {
	isReconcileRequest_Resolution()
}

type ReconcileRequest_Succeeded struct {
	// The effect happened: store this result. Allowed at any time once no
	// owner holds a live lease: an effect seen at the provider is evidence.
	Succeeded *Result `protobuf:"bytes,3,opt,name=succeeded,proto3,oneof"`
}

type ReconcileRequest_Failed struct {
	// The effect did not happen and never will (the provider's own terminal
	// answer): store this terminal error. Callers act on FAILED (compensate,
	// or retry under a new key), so, like not_applied, it is allowed only
	// once no attempt's effect can still be in flight: after the last
	// attempt's deadline plus the server's clock margin (and the deadline of
	// an attempt a retry took over, while that may still run); before then it
	// is FAILED_PRECONDITION (ATTEMPT_STILL_RUNNING). "Not found at the
	// provider" is evidence only after then.
	Failed *OperationError `protobuf:"bytes,4,opt,name=failed,proto3,oneof"`
}

type ReconcileRequest_NotApplied struct {
	// The effect did not happen: release for a new attempt, due now. Allowed
	// only once no attempt's effect can still be in flight, as for failed.
	// It always grants one more attempt, even when the attempt budget was
	// spent (recorded in history as "not_applied; one more attempt granted").
	NotApplied *NotApplied `protobuf:"bytes,5,opt,name=not_applied,json=notApplied,proto3,oneof"`
}

func (*ReconcileRequest_Succeeded) isReconcileRequest_Resolution() {}

func (*ReconcileRequest_Failed) isReconcileRequest_Resolution() {}

func (*ReconcileRequest_NotApplied) isReconcileRequest_Resolution() {}

// The effect did not happen (no fields).
type NotApplied struct {
	state         protoimpl.MessageState `protogen:"open.v1"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *NotApplied) Reset() {
	*x = NotApplied{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[22]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *NotApplied) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*NotApplied) ProtoMessage() {}

func (x *NotApplied) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[22]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use NotApplied.ProtoReflect.Descriptor instead.
func (*NotApplied) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{22}
}

// The operation after the reconciliation.
type ReconcileResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// SUCCEEDED, FAILED or RETRY_WAIT.
	State OperationState `protobuf:"varint,1,opt,name=state,proto3,enum=idem.v1.OperationState" json:"state,omitempty"`
	// The fence this reconciliation took; older fences are now stale.
	Fence         uint64 `protobuf:"varint,2,opt,name=fence,proto3" json:"fence,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ReconcileResponse) Reset() {
	*x = ReconcileResponse{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[23]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ReconcileResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ReconcileResponse) ProtoMessage() {}

func (x *ReconcileResponse) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[23]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ReconcileResponse.ProtoReflect.Descriptor instead.
func (*ReconcileResponse) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{23}
}

func (x *ReconcileResponse) GetState() OperationState {
	if x != nil {
		return x.State
	}
	return OperationState_OPERATION_STATE_UNSPECIFIED
}

func (x *ReconcileResponse) GetFence() uint64 {
	if x != nil {
		return x.Fence
	}
	return 0
}

// Pages through the operations that need reconciliation, oldest first.
type ListUnresolvedRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Optional: only this operation name.
	Operation string `protobuf:"bytes,1,opt,name=operation,proto3" json:"operation,omitempty"`
	// At most this many (default 100); more than 1000 is clamped to 1000.
	PageSize uint32 `protobuf:"varint,2,opt,name=page_size,json=pageSize,proto3" json:"page_size,omitempty"`
	// A previous response's next_page_token, unchanged; empty for the first
	// page. Tokens are opaque: anything else is INVALID_ARGUMENT.
	PageToken     string `protobuf:"bytes,3,opt,name=page_token,json=pageToken,proto3" json:"page_token,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ListUnresolvedRequest) Reset() {
	*x = ListUnresolvedRequest{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[24]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ListUnresolvedRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ListUnresolvedRequest) ProtoMessage() {}

func (x *ListUnresolvedRequest) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[24]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ListUnresolvedRequest.ProtoReflect.Descriptor instead.
func (*ListUnresolvedRequest) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{24}
}

func (x *ListUnresolvedRequest) GetOperation() string {
	if x != nil {
		return x.Operation
	}
	return ""
}

func (x *ListUnresolvedRequest) GetPageSize() uint32 {
	if x != nil {
		return x.PageSize
	}
	return 0
}

func (x *ListUnresolvedRequest) GetPageToken() string {
	if x != nil {
		return x.PageToken
	}
	return ""
}

// One page of operations that need reconciliation.
type ListUnresolvedResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// UNKNOWN operations and IN_PROGRESS ones whose lease expired, oldest first,
	// without result bytes.
	Operations []*Operation `protobuf:"bytes,1,rep,name=operations,proto3" json:"operations,omitempty"`
	// Empty when there are no more. Opaque, URL-safe; pass it back as is.
	NextPageToken string `protobuf:"bytes,2,opt,name=next_page_token,json=nextPageToken,proto3" json:"next_page_token,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ListUnresolvedResponse) Reset() {
	*x = ListUnresolvedResponse{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[25]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ListUnresolvedResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ListUnresolvedResponse) ProtoMessage() {}

func (x *ListUnresolvedResponse) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[25]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ListUnresolvedResponse.ProtoReflect.Descriptor instead.
func (*ListUnresolvedResponse) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{25}
}

func (x *ListUnresolvedResponse) GetOperations() []*Operation {
	if x != nil {
		return x.Operations
	}
	return nil
}

func (x *ListUnresolvedResponse) GetNextPageToken() string {
	if x != nil {
		return x.NextPageToken
	}
	return ""
}

// Pages through the operations that match a filter, without result bytes.
type ListOperationsRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Terms separated by whitespace, all of which an operation must match
	// (docs/api.md has the language): `state:unknown,failed`, `op:payments.*`,
	// `key:"a key"`, `id:UUID`, `age>10m`, `attempts>=2`, `is:taken_over`,
	// `is:deadline_passed`, `tenant:NAME` (admin only). Empty: every
	// operation. At most 16 terms and 1024 bytes; a filter that does not parse
	// is INVALID_ARGUMENT with a field violation naming the character
	// position.
	Filter string `protobuf:"bytes,1,opt,name=filter,proto3" json:"filter,omitempty"`
	// At most this many (default 100); more than 1000 is clamped to 1000.
	PageSize uint32 `protobuf:"varint,2,opt,name=page_size,json=pageSize,proto3" json:"page_size,omitempty"`
	// A previous response's next_page_token, unchanged, with the same filter
	// and order; empty for the first page. Anything else is INVALID_ARGUMENT.
	PageToken string `protobuf:"bytes,3,opt,name=page_token,json=pageToken,proto3" json:"page_token,omitempty"`
	// Oldest or newest first; unspecified is oldest first.
	Order         ListOperationsRequest_Order `protobuf:"varint,4,opt,name=order,proto3,enum=idem.v1.ListOperationsRequest_Order" json:"order,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ListOperationsRequest) Reset() {
	*x = ListOperationsRequest{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[26]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ListOperationsRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ListOperationsRequest) ProtoMessage() {}

func (x *ListOperationsRequest) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[26]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ListOperationsRequest.ProtoReflect.Descriptor instead.
func (*ListOperationsRequest) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{26}
}

func (x *ListOperationsRequest) GetFilter() string {
	if x != nil {
		return x.Filter
	}
	return ""
}

func (x *ListOperationsRequest) GetPageSize() uint32 {
	if x != nil {
		return x.PageSize
	}
	return 0
}

func (x *ListOperationsRequest) GetPageToken() string {
	if x != nil {
		return x.PageToken
	}
	return ""
}

func (x *ListOperationsRequest) GetOrder() ListOperationsRequest_Order {
	if x != nil {
		return x.Order
	}
	return ListOperationsRequest_ORDER_UNSPECIFIED
}

// One page of the operations that match a filter.
type ListOperationsResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// The matching operations in the order asked for, without result bytes.
	Operations []*Operation `protobuf:"bytes,1,rep,name=operations,proto3" json:"operations,omitempty"`
	// Empty when there are no more. Opaque, URL-safe; pass it back as is, with
	// the same filter and order.
	NextPageToken string `protobuf:"bytes,2,opt,name=next_page_token,json=nextPageToken,proto3" json:"next_page_token,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ListOperationsResponse) Reset() {
	*x = ListOperationsResponse{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[27]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ListOperationsResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ListOperationsResponse) ProtoMessage() {}

func (x *ListOperationsResponse) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[27]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ListOperationsResponse.ProtoReflect.Descriptor instead.
func (*ListOperationsResponse) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{27}
}

func (x *ListOperationsResponse) GetOperations() []*Operation {
	if x != nil {
		return x.Operations
	}
	return nil
}

func (x *ListOperationsResponse) GetNextPageToken() string {
	if x != nil {
		return x.NextPageToken
	}
	return ""
}

// Turns an ended operation into a tombstone before its retention ends.
type ForgetRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// The operation, as Lookup or ListOperations gave it.
	OperationId string `protobuf:"bytes,1,opt,name=operation_id,json=operationId,proto3" json:"operation_id,omitempty"`
	// The current fence, as Lookup gave it: an operation that moved on since
	// is ABORTED (LEASE_LOST), so an operator acts on what they saw.
	ExpectedFence uint64 `protobuf:"varint,2,opt,name=expected_fence,json=expectedFence,proto3" json:"expected_fence,omitempty"`
	// Why (a legal deletion request, a poisoned result): 1-512 bytes of
	// UTF-8, recorded in the history and the audit log. Required.
	Reason string `protobuf:"bytes,3,opt,name=reason,proto3" json:"reason,omitempty"`
	// Optional: the name of the tenant whose operation it is; empty, the
	// caller's own. A name with no active tenant is NOT_FOUND
	// (TENANT_NOT_FOUND).
	Tenant        string `protobuf:"bytes,4,opt,name=tenant,proto3" json:"tenant,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ForgetRequest) Reset() {
	*x = ForgetRequest{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[28]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ForgetRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ForgetRequest) ProtoMessage() {}

func (x *ForgetRequest) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[28]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ForgetRequest.ProtoReflect.Descriptor instead.
func (*ForgetRequest) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{28}
}

func (x *ForgetRequest) GetOperationId() string {
	if x != nil {
		return x.OperationId
	}
	return ""
}

func (x *ForgetRequest) GetExpectedFence() uint64 {
	if x != nil {
		return x.ExpectedFence
	}
	return 0
}

func (x *ForgetRequest) GetReason() string {
	if x != nil {
		return x.Reason
	}
	return ""
}

func (x *ForgetRequest) GetTenant() string {
	if x != nil {
		return x.Tenant
	}
	return ""
}

// The operation after it was forgotten.
type ForgetResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Always EXPIRED: a tombstone.
	State OperationState `protobuf:"varint,1,opt,name=state,proto3,enum=idem.v1.OperationState" json:"state,omitempty"`
	// When the tombstone itself is deleted and the scope is free again.
	RetainUntil *timestamppb.Timestamp `protobuf:"bytes,2,opt,name=retain_until,json=retainUntil,proto3" json:"retain_until,omitempty"`
	// How many bytes of stored result or error were dropped.
	DroppedBytes  uint64 `protobuf:"varint,3,opt,name=dropped_bytes,json=droppedBytes,proto3" json:"dropped_bytes,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ForgetResponse) Reset() {
	*x = ForgetResponse{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[29]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ForgetResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ForgetResponse) ProtoMessage() {}

func (x *ForgetResponse) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[29]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ForgetResponse.ProtoReflect.Descriptor instead.
func (*ForgetResponse) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{29}
}

func (x *ForgetResponse) GetState() OperationState {
	if x != nil {
		return x.State
	}
	return OperationState_OPERATION_STATE_UNSPECIFIED
}

func (x *ForgetResponse) GetRetainUntil() *timestamppb.Timestamp {
	if x != nil {
		return x.RetainUntil
	}
	return nil
}

func (x *ForgetResponse) GetDroppedBytes() uint64 {
	if x != nil {
		return x.DroppedBytes
	}
	return 0
}

// Asks for the policy a first Claim of an operation name gets.
type GetPolicyRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// The operation name, as a Claim's scope gives it (1-128 characters of
	// [A-Za-z0-9._/-]).
	Operation     string `protobuf:"bytes,1,opt,name=operation,proto3" json:"operation,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *GetPolicyRequest) Reset() {
	*x = GetPolicyRequest{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[30]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *GetPolicyRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*GetPolicyRequest) ProtoMessage() {}

func (x *GetPolicyRequest) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[30]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use GetPolicyRequest.ProtoReflect.Descriptor instead.
func (*GetPolicyRequest) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{30}
}

func (x *GetPolicyRequest) GetOperation() string {
	if x != nil {
		return x.Operation
	}
	return ""
}

// The defaults and ceilings in force for an operation name.
type GetPolicyResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// The pattern of the policy entry that decided (an exact name, a prefix
	// ending in `*`, or `*`); empty when no entry matched and the server's
	// own bounds apply.
	MatchedPattern string `protobuf:"bytes,1,opt,name=matched_pattern,json=matchedPattern,proto3" json:"matched_pattern,omitempty"`
	// True when no policy entry matched: every bound is the server's.
	ServerDefaults bool `protobuf:"varint,2,opt,name=server_defaults,json=serverDefaults,proto3" json:"server_defaults,omitempty"`
	// What a Claim leaving lease out gets, and the most it may ask.
	DefaultLease *durationpb.Duration `protobuf:"bytes,3,opt,name=default_lease,json=defaultLease,proto3" json:"default_lease,omitempty"`
	// The longest lease a Claim may ask.
	MaxLease *durationpb.Duration `protobuf:"bytes,4,opt,name=max_lease,json=maxLease,proto3" json:"max_lease,omitempty"`
	// What a Claim leaving max_attempt_duration out gets.
	DefaultMaxAttemptDuration *durationpb.Duration `protobuf:"bytes,5,opt,name=default_max_attempt_duration,json=defaultMaxAttemptDuration,proto3" json:"default_max_attempt_duration,omitempty"`
	// The longest max_attempt_duration a Claim may ask.
	MaxAttemptDuration *durationpb.Duration `protobuf:"bytes,6,opt,name=max_attempt_duration,json=maxAttemptDuration,proto3" json:"max_attempt_duration,omitempty"`
	// What a Claim leaving max_attempts out gets.
	DefaultMaxAttempts uint32 `protobuf:"varint,7,opt,name=default_max_attempts,json=defaultMaxAttempts,proto3" json:"default_max_attempts,omitempty"`
	// The largest max_attempts a Claim may ask.
	MaxAttempts uint32 `protobuf:"varint,8,opt,name=max_attempts,json=maxAttempts,proto3" json:"max_attempts,omitempty"`
	// What a Claim leaving retention out gets.
	DefaultRetention *durationpb.Duration `protobuf:"bytes,9,opt,name=default_retention,json=defaultRetention,proto3" json:"default_retention,omitempty"`
	// The longest retention a Claim may ask.
	MaxRetention *durationpb.Duration `protobuf:"bytes,10,opt,name=max_retention,json=maxRetention,proto3" json:"max_retention,omitempty"`
	// What a Claim leaving operation_deadline out gets; absent: no deadline.
	DefaultOperationDeadline *durationpb.Duration `protobuf:"bytes,11,opt,name=default_operation_deadline,json=defaultOperationDeadline,proto3" json:"default_operation_deadline,omitempty"`
	// The longest operation_deadline a Claim may ask.
	MaxOperationDeadline *durationpb.Duration `protobuf:"bytes,12,opt,name=max_operation_deadline,json=maxOperationDeadline,proto3" json:"max_operation_deadline,omitempty"`
	// What a Claim gets once an operation of this name is FAILED (the policy
	// entry's on_failed; ON_FAILED_REPLAY unless an entry opts in).
	OnFailed      OnFailed `protobuf:"varint,13,opt,name=on_failed,json=onFailed,proto3,enum=idem.v1.OnFailed" json:"on_failed,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *GetPolicyResponse) Reset() {
	*x = GetPolicyResponse{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[31]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *GetPolicyResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*GetPolicyResponse) ProtoMessage() {}

func (x *GetPolicyResponse) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[31]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use GetPolicyResponse.ProtoReflect.Descriptor instead.
func (*GetPolicyResponse) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{31}
}

func (x *GetPolicyResponse) GetMatchedPattern() string {
	if x != nil {
		return x.MatchedPattern
	}
	return ""
}

func (x *GetPolicyResponse) GetServerDefaults() bool {
	if x != nil {
		return x.ServerDefaults
	}
	return false
}

func (x *GetPolicyResponse) GetDefaultLease() *durationpb.Duration {
	if x != nil {
		return x.DefaultLease
	}
	return nil
}

func (x *GetPolicyResponse) GetMaxLease() *durationpb.Duration {
	if x != nil {
		return x.MaxLease
	}
	return nil
}

func (x *GetPolicyResponse) GetDefaultMaxAttemptDuration() *durationpb.Duration {
	if x != nil {
		return x.DefaultMaxAttemptDuration
	}
	return nil
}

func (x *GetPolicyResponse) GetMaxAttemptDuration() *durationpb.Duration {
	if x != nil {
		return x.MaxAttemptDuration
	}
	return nil
}

func (x *GetPolicyResponse) GetDefaultMaxAttempts() uint32 {
	if x != nil {
		return x.DefaultMaxAttempts
	}
	return 0
}

func (x *GetPolicyResponse) GetMaxAttempts() uint32 {
	if x != nil {
		return x.MaxAttempts
	}
	return 0
}

func (x *GetPolicyResponse) GetDefaultRetention() *durationpb.Duration {
	if x != nil {
		return x.DefaultRetention
	}
	return nil
}

func (x *GetPolicyResponse) GetMaxRetention() *durationpb.Duration {
	if x != nil {
		return x.MaxRetention
	}
	return nil
}

func (x *GetPolicyResponse) GetDefaultOperationDeadline() *durationpb.Duration {
	if x != nil {
		return x.DefaultOperationDeadline
	}
	return nil
}

func (x *GetPolicyResponse) GetMaxOperationDeadline() *durationpb.Duration {
	if x != nil {
		return x.MaxOperationDeadline
	}
	return nil
}

func (x *GetPolicyResponse) GetOnFailed() OnFailed {
	if x != nil {
		return x.OnFailed
	}
	return OnFailed_ON_FAILED_UNSPECIFIED
}

// Hold an operation name, or a whole tenant.
type HoldRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Optional: the name of the tenant to hold in; empty, the caller's own. A
	// name with no active tenant is NOT_FOUND (TENANT_NOT_FOUND).
	Tenant string `protobuf:"bytes,1,opt,name=tenant,proto3" json:"tenant,omitempty"`
	// The operation name to hold; empty holds every operation of the tenant.
	Operation string `protobuf:"bytes,2,opt,name=operation,proto3" json:"operation,omitempty"`
	// Why (duplicates still occur, requests stuck in progress): 1-512 bytes of
	// UTF-8, kept with the hold and in the audit log. Required.
	Reason string `protobuf:"bytes,3,opt,name=reason,proto3" json:"reason,omitempty"`
	// What a held Claim is told to wait before it claims again: at most 1 h,
	// default 30 s.
	RetryAfter    *durationpb.Duration `protobuf:"bytes,4,opt,name=retry_after,json=retryAfter,proto3" json:"retry_after,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *HoldRequest) Reset() {
	*x = HoldRequest{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[32]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *HoldRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*HoldRequest) ProtoMessage() {}

func (x *HoldRequest) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[32]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use HoldRequest.ProtoReflect.Descriptor instead.
func (*HoldRequest) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{32}
}

func (x *HoldRequest) GetTenant() string {
	if x != nil {
		return x.Tenant
	}
	return ""
}

func (x *HoldRequest) GetOperation() string {
	if x != nil {
		return x.Operation
	}
	return ""
}

func (x *HoldRequest) GetReason() string {
	if x != nil {
		return x.Reason
	}
	return ""
}

func (x *HoldRequest) GetRetryAfter() *durationpb.Duration {
	if x != nil {
		return x.RetryAfter
	}
	return nil
}

// A hold in force.
type Hold struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// The tenant's name.
	Tenant string `protobuf:"bytes,1,opt,name=tenant,proto3" json:"tenant,omitempty"`
	// The operation name held; empty when the whole tenant is.
	Operation string `protobuf:"bytes,2,opt,name=operation,proto3" json:"operation,omitempty"`
	// Why, as the Hold gave it.
	Reason string `protobuf:"bytes,3,opt,name=reason,proto3" json:"reason,omitempty"`
	// What a held Claim is told to wait.
	RetryAfter *durationpb.Duration `protobuf:"bytes,4,opt,name=retry_after,json=retryAfter,proto3" json:"retry_after,omitempty"`
	// When it was set, on the database clock.
	HeldAt *timestamppb.Timestamp `protobuf:"bytes,5,opt,name=held_at,json=heldAt,proto3" json:"held_at,omitempty"`
	// Who set it: the credential (token:NAME, certificate:IDENTITY) or the
	// command line (cli:USER@HOST).
	HeldBy        string `protobuf:"bytes,6,opt,name=held_by,json=heldBy,proto3" json:"held_by,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *Hold) Reset() {
	*x = Hold{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[33]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *Hold) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*Hold) ProtoMessage() {}

func (x *Hold) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[33]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use Hold.ProtoReflect.Descriptor instead.
func (*Hold) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{33}
}

func (x *Hold) GetTenant() string {
	if x != nil {
		return x.Tenant
	}
	return ""
}

func (x *Hold) GetOperation() string {
	if x != nil {
		return x.Operation
	}
	return ""
}

func (x *Hold) GetReason() string {
	if x != nil {
		return x.Reason
	}
	return ""
}

func (x *Hold) GetRetryAfter() *durationpb.Duration {
	if x != nil {
		return x.RetryAfter
	}
	return nil
}

func (x *Hold) GetHeldAt() *timestamppb.Timestamp {
	if x != nil {
		return x.HeldAt
	}
	return nil
}

func (x *Hold) GetHeldBy() string {
	if x != nil {
		return x.HeldBy
	}
	return ""
}

// The hold in force after a Hold.
type HoldResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// The hold: this one, or the one that was in force already.
	Hold *Hold `protobuf:"bytes,1,opt,name=hold,proto3" json:"hold,omitempty"`
	// Whether it was held already: the first hold stays as it was set (its
	// reason and time), and nothing is audited again.
	AlreadyHeld   bool `protobuf:"varint,2,opt,name=already_held,json=alreadyHeld,proto3" json:"already_held,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *HoldResponse) Reset() {
	*x = HoldResponse{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[34]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *HoldResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*HoldResponse) ProtoMessage() {}

func (x *HoldResponse) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[34]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use HoldResponse.ProtoReflect.Descriptor instead.
func (*HoldResponse) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{34}
}

func (x *HoldResponse) GetHold() *Hold {
	if x != nil {
		return x.Hold
	}
	return nil
}

func (x *HoldResponse) GetAlreadyHeld() bool {
	if x != nil {
		return x.AlreadyHeld
	}
	return false
}

// End a hold.
type ReleaseRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Optional: the name of the tenant; empty, the caller's own.
	Tenant string `protobuf:"bytes,1,opt,name=tenant,proto3" json:"tenant,omitempty"`
	// The operation name; empty for the hold of the whole tenant.
	Operation string `protobuf:"bytes,2,opt,name=operation,proto3" json:"operation,omitempty"`
	// Why: 1-512 bytes of UTF-8, kept in the audit log. Required.
	Reason        string `protobuf:"bytes,3,opt,name=reason,proto3" json:"reason,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ReleaseRequest) Reset() {
	*x = ReleaseRequest{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[35]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ReleaseRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ReleaseRequest) ProtoMessage() {}

func (x *ReleaseRequest) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[35]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ReleaseRequest.ProtoReflect.Descriptor instead.
func (*ReleaseRequest) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{35}
}

func (x *ReleaseRequest) GetTenant() string {
	if x != nil {
		return x.Tenant
	}
	return ""
}

func (x *ReleaseRequest) GetOperation() string {
	if x != nil {
		return x.Operation
	}
	return ""
}

func (x *ReleaseRequest) GetReason() string {
	if x != nil {
		return x.Reason
	}
	return ""
}

// The hold that ended.
type ReleaseResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// As it was in force.
	Released      *Hold `protobuf:"bytes,1,opt,name=released,proto3" json:"released,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ReleaseResponse) Reset() {
	*x = ReleaseResponse{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[36]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ReleaseResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ReleaseResponse) ProtoMessage() {}

func (x *ReleaseResponse) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[36]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ReleaseResponse.ProtoReflect.Descriptor instead.
func (*ReleaseResponse) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{36}
}

func (x *ReleaseResponse) GetReleased() *Hold {
	if x != nil {
		return x.Released
	}
	return nil
}

// List the holds in force.
type ListHoldsRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Optional, admin only: one tenant's holds, by name; empty: the caller's
	// own tenant's, or for an admin every tenant's.
	Tenant        string `protobuf:"bytes,1,opt,name=tenant,proto3" json:"tenant,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ListHoldsRequest) Reset() {
	*x = ListHoldsRequest{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[37]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ListHoldsRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ListHoldsRequest) ProtoMessage() {}

func (x *ListHoldsRequest) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[37]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ListHoldsRequest.ProtoReflect.Descriptor instead.
func (*ListHoldsRequest) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{37}
}

func (x *ListHoldsRequest) GetTenant() string {
	if x != nil {
		return x.Tenant
	}
	return ""
}

// The holds in force (at most 1000 in all).
type ListHoldsResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// By tenant, then operation name.
	Holds         []*Hold `protobuf:"bytes,1,rep,name=holds,proto3" json:"holds,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ListHoldsResponse) Reset() {
	*x = ListHoldsResponse{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[38]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ListHoldsResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ListHoldsResponse) ProtoMessage() {}

func (x *ListHoldsResponse) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[38]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ListHoldsResponse.ProtoReflect.Descriptor instead.
func (*ListHoldsResponse) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{38}
}

func (x *ListHoldsResponse) GetHolds() []*Hold {
	if x != nil {
		return x.Holds
	}
	return nil
}

// What the caller observed. Nothing of it is stored or logged.
type DiagnoseEvidence struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// What happened to the caller's call.
	Symptom Symptom `protobuf:"varint,1,opt,name=symptom,proto3,enum=idem.v1.Symptom" json:"symptom,omitempty"`
	// SYMPTOM_ERROR_STATUS: the gRPC status code (a number, 1-16).
	StatusCode uint32 `protobuf:"varint,2,opt,name=status_code,json=statusCode,proto3" json:"status_code,omitempty"`
	// SYMPTOM_ERROR_STATUS: the ErrorInfo reason it carried, if any
	// (e.g. IDEMPOTENCY_KEY_REUSED), at most 64 characters.
	ErrorReason string `protobuf:"bytes,3,opt,name=error_reason,json=errorReason,proto3" json:"error_reason,omitempty"`
	// The request the caller would send now, compared with the operation's:
	// as in ClaimRequest, a fingerprint or a payload (never stored).
	//
	// Types that are valid to be assigned to RequestIdentity:
	//
	//	*DiagnoseEvidence_Fingerprint
	//	*DiagnoseEvidence_JsonPayload
	//	*DiagnoseEvidence_BytesPayload
	RequestIdentity isDiagnoseEvidence_RequestIdentity `protobuf_oneof:"request_identity"`
	// The caller made a new idempotency key for its retry.
	NewKeyForRetry bool `protobuf:"varint,7,opt,name=new_key_for_retry,json=newKeyForRetry,proto3" json:"new_key_for_retry,omitempty"`
	// What the caller found at the provider, if it looked.
	ProviderFinding ProviderFinding `protobuf:"varint,8,opt,name=provider_finding,json=providerFinding,proto3,enum=idem.v1.ProviderFinding" json:"provider_finding,omitempty"`
	// How long before this request the provider lookup was sent (counted by
	// the caller; never a wall-clock time). Required with provider_finding.
	ProviderLookedAgo *durationpb.Duration `protobuf:"bytes,9,opt,name=provider_looked_ago,json=providerLookedAgo,proto3" json:"provider_looked_ago,omitempty"`
	// How long before this request the caller observed the symptom; unset:
	// just now.
	ObservedAgo *durationpb.Duration `protobuf:"bytes,10,opt,name=observed_ago,json=observedAgo,proto3" json:"observed_ago,omitempty"`
	// Free text (at most 2 KiB): what else the caller saw. Checked for secrets
	// like every other field; never stored or logged.
	Notes         string `protobuf:"bytes,11,opt,name=notes,proto3" json:"notes,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *DiagnoseEvidence) Reset() {
	*x = DiagnoseEvidence{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[39]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *DiagnoseEvidence) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*DiagnoseEvidence) ProtoMessage() {}

func (x *DiagnoseEvidence) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[39]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use DiagnoseEvidence.ProtoReflect.Descriptor instead.
func (*DiagnoseEvidence) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{39}
}

func (x *DiagnoseEvidence) GetSymptom() Symptom {
	if x != nil {
		return x.Symptom
	}
	return Symptom_SYMPTOM_UNSPECIFIED
}

func (x *DiagnoseEvidence) GetStatusCode() uint32 {
	if x != nil {
		return x.StatusCode
	}
	return 0
}

func (x *DiagnoseEvidence) GetErrorReason() string {
	if x != nil {
		return x.ErrorReason
	}
	return ""
}

func (x *DiagnoseEvidence) GetRequestIdentity() isDiagnoseEvidence_RequestIdentity {
	if x != nil {
		return x.RequestIdentity
	}
	return nil
}

func (x *DiagnoseEvidence) GetFingerprint() []byte {
	if x != nil {
		if x, ok := x.RequestIdentity.(*DiagnoseEvidence_Fingerprint); ok {
			return x.Fingerprint
		}
	}
	return nil
}

func (x *DiagnoseEvidence) GetJsonPayload() string {
	if x != nil {
		if x, ok := x.RequestIdentity.(*DiagnoseEvidence_JsonPayload); ok {
			return x.JsonPayload
		}
	}
	return ""
}

func (x *DiagnoseEvidence) GetBytesPayload() []byte {
	if x != nil {
		if x, ok := x.RequestIdentity.(*DiagnoseEvidence_BytesPayload); ok {
			return x.BytesPayload
		}
	}
	return nil
}

func (x *DiagnoseEvidence) GetNewKeyForRetry() bool {
	if x != nil {
		return x.NewKeyForRetry
	}
	return false
}

func (x *DiagnoseEvidence) GetProviderFinding() ProviderFinding {
	if x != nil {
		return x.ProviderFinding
	}
	return ProviderFinding_PROVIDER_FINDING_UNSPECIFIED
}

func (x *DiagnoseEvidence) GetProviderLookedAgo() *durationpb.Duration {
	if x != nil {
		return x.ProviderLookedAgo
	}
	return nil
}

func (x *DiagnoseEvidence) GetObservedAgo() *durationpb.Duration {
	if x != nil {
		return x.ObservedAgo
	}
	return nil
}

func (x *DiagnoseEvidence) GetNotes() string {
	if x != nil {
		return x.Notes
	}
	return ""
}

type isDiagnoseEvidence_RequestIdentity interface {
	isDiagnoseEvidence_RequestIdentity()
}

type DiagnoseEvidence_Fingerprint struct {
	// A client-computed fingerprint, 32 bytes.
	Fingerprint []byte `protobuf:"bytes,4,opt,name=fingerprint,proto3,oneof"`
}

type DiagnoseEvidence_JsonPayload struct {
	// A JSON payload, fingerprinted as Claim does (mode json).
	JsonPayload string `protobuf:"bytes,5,opt,name=json_payload,json=jsonPayload,proto3,oneof"`
}

type DiagnoseEvidence_BytesPayload struct {
	// Opaque bytes, fingerprinted as Claim does (mode bytes).
	BytesPayload []byte `protobuf:"bytes,6,opt,name=bytes_payload,json=bytesPayload,proto3,oneof"`
}

func (*DiagnoseEvidence_Fingerprint) isDiagnoseEvidence_RequestIdentity() {}

func (*DiagnoseEvidence_JsonPayload) isDiagnoseEvidence_RequestIdentity() {}

func (*DiagnoseEvidence_BytesPayload) isDiagnoseEvidence_RequestIdentity() {}

// The caller's own limits; a plan beyond them is refused (PERMISSION_DENIED),
// so that an agent stops where its authority ends.
type DiagnoseConstraints struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Which moves the caller may make.
	Authority Authority `protobuf:"varint,1,opt,name=authority,proto3,enum=idem.v1.Authority" json:"authority,omitempty"`
	// Only moves that can be undone or that change nothing (looking, waiting,
	// a replay); an execution or a Reconcile is refused.
	ReversibleOnly bool `protobuf:"varint,2,opt,name=reversible_only,json=reversibleOnly,proto3" json:"reversible_only,omitempty"`
	// The most new attempts (executions of the effect) the caller may start.
	AttemptBudget *uint32 `protobuf:"varint,3,opt,name=attempt_budget,json=attemptBudget,proto3,oneof" json:"attempt_budget,omitempty"`
	// The longest the caller may wait.
	WaitBudget    *durationpb.Duration `protobuf:"bytes,4,opt,name=wait_budget,json=waitBudget,proto3" json:"wait_budget,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *DiagnoseConstraints) Reset() {
	*x = DiagnoseConstraints{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[40]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *DiagnoseConstraints) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*DiagnoseConstraints) ProtoMessage() {}

func (x *DiagnoseConstraints) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[40]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use DiagnoseConstraints.ProtoReflect.Descriptor instead.
func (*DiagnoseConstraints) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{40}
}

func (x *DiagnoseConstraints) GetAuthority() Authority {
	if x != nil {
		return x.Authority
	}
	return Authority_AUTHORITY_UNSPECIFIED
}

func (x *DiagnoseConstraints) GetReversibleOnly() bool {
	if x != nil {
		return x.ReversibleOnly
	}
	return false
}

func (x *DiagnoseConstraints) GetAttemptBudget() uint32 {
	if x != nil && x.AttemptBudget != nil {
		return *x.AttemptBudget
	}
	return 0
}

func (x *DiagnoseConstraints) GetWaitBudget() *durationpb.Duration {
	if x != nil {
		return x.WaitBudget
	}
	return nil
}

// Diagnose one operation.
type DiagnoseRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Which operation; exactly one is required. A scope with no operation
	// stored is diagnosed too (a Claim that never arrived); an operation_id
	// that is not found is NOT_FOUND.
	//
	// Types that are valid to be assigned to Target:
	//
	//	*DiagnoseRequest_Scope
	//	*DiagnoseRequest_OperationId
	Target isDiagnoseRequest_Target `protobuf_oneof:"target"`
	// Optional: the name of the tenant whose operation it is; naming one needs
	// the admin scope, as in Lookup.
	Tenant string `protobuf:"bytes,3,opt,name=tenant,proto3" json:"tenant,omitempty"`
	// What the caller observed.
	Evidence *DiagnoseEvidence `protobuf:"bytes,4,opt,name=evidence,proto3" json:"evidence,omitempty"`
	// What the caller may do.
	Constraints *DiagnoseConstraints `protobuf:"bytes,5,opt,name=constraints,proto3" json:"constraints,omitempty"`
	// What must be true at the end, in the caller's words (at most 1 KiB):
	// echoed in the handoff record, checked for secrets, never stored.
	SuccessCriterion string `protobuf:"bytes,6,opt,name=success_criterion,json=successCriterion,proto3" json:"success_criterion,omitempty"`
	// Who asks and why, in the caller's words (at most 1 KiB): echoed in the
	// handoff record, checked for secrets, never stored.
	Context       string `protobuf:"bytes,7,opt,name=context,proto3" json:"context,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *DiagnoseRequest) Reset() {
	*x = DiagnoseRequest{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[41]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *DiagnoseRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*DiagnoseRequest) ProtoMessage() {}

func (x *DiagnoseRequest) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[41]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use DiagnoseRequest.ProtoReflect.Descriptor instead.
func (*DiagnoseRequest) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{41}
}

func (x *DiagnoseRequest) GetTarget() isDiagnoseRequest_Target {
	if x != nil {
		return x.Target
	}
	return nil
}

func (x *DiagnoseRequest) GetScope() *Scope {
	if x != nil {
		if x, ok := x.Target.(*DiagnoseRequest_Scope); ok {
			return x.Scope
		}
	}
	return nil
}

func (x *DiagnoseRequest) GetOperationId() string {
	if x != nil {
		if x, ok := x.Target.(*DiagnoseRequest_OperationId); ok {
			return x.OperationId
		}
	}
	return ""
}

func (x *DiagnoseRequest) GetTenant() string {
	if x != nil {
		return x.Tenant
	}
	return ""
}

func (x *DiagnoseRequest) GetEvidence() *DiagnoseEvidence {
	if x != nil {
		return x.Evidence
	}
	return nil
}

func (x *DiagnoseRequest) GetConstraints() *DiagnoseConstraints {
	if x != nil {
		return x.Constraints
	}
	return nil
}

func (x *DiagnoseRequest) GetSuccessCriterion() string {
	if x != nil {
		return x.SuccessCriterion
	}
	return ""
}

func (x *DiagnoseRequest) GetContext() string {
	if x != nil {
		return x.Context
	}
	return ""
}

type isDiagnoseRequest_Target interface {
	isDiagnoseRequest_Target()
}

type DiagnoseRequest_Scope struct {
	// By the caller's name for it.
	Scope *Scope `protobuf:"bytes,1,opt,name=scope,proto3,oneof"`
}

type DiagnoseRequest_OperationId struct {
	// By the server's id of it.
	OperationId string `protobuf:"bytes,2,opt,name=operation_id,json=operationId,proto3,oneof"`
}

func (*DiagnoseRequest_Scope) isDiagnoseRequest_Target() {}

func (*DiagnoseRequest_OperationId) isDiagnoseRequest_Target() {}

// A diagnosis.
type Diagnosis struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// What the evidence points to.
	Cause Cause `protobuf:"varint,1,opt,name=cause,proto3,enum=idem.v1.Cause" json:"cause,omitempty"`
	// Where it lies.
	Layer Layer `protobuf:"varint,2,opt,name=layer,proto3,enum=idem.v1.Layer" json:"layer,omitempty"`
	// What it means, in a sentence or two.
	Meaning       string `protobuf:"bytes,3,opt,name=meaning,proto3" json:"meaning,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *Diagnosis) Reset() {
	*x = Diagnosis{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[42]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *Diagnosis) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*Diagnosis) ProtoMessage() {}

func (x *Diagnosis) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[42]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use Diagnosis.ProtoReflect.Descriptor instead.
func (*Diagnosis) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{42}
}

func (x *Diagnosis) GetCause() Cause {
	if x != nil {
		return x.Cause
	}
	return Cause_CAUSE_UNSPECIFIED
}

func (x *Diagnosis) GetLayer() Layer {
	if x != nil {
		return x.Layer
	}
	return Layer_LAYER_UNSPECIFIED
}

func (x *Diagnosis) GetMeaning() string {
	if x != nil {
		return x.Meaning
	}
	return ""
}

// One move of a plan.
type PlanStep struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// What kind of move.
	Kind MoveKind `protobuf:"varint,1,opt,name=kind,proto3,enum=idem.v1.MoveKind" json:"kind,omitempty"`
	// What to do, in a sentence.
	Action string `protobuf:"bytes,2,opt,name=action,proto3" json:"action,omitempty"`
	// The scope the move needs at idemd (operations, reconcile, admin); empty
	// when it needs none.
	NeedsScope string `protobuf:"bytes,3,opt,name=needs_scope,json=needsScope,proto3" json:"needs_scope,omitempty"`
	// Whether it can be undone or changes nothing.
	Reversible bool `protobuf:"varint,4,opt,name=reversible,proto3" json:"reversible,omitempty"`
	// How many new attempts (executions of the effect) it may start.
	Attempts uint32 `protobuf:"varint,5,opt,name=attempts,proto3" json:"attempts,omitempty"`
	// How long it waits, when it waits.
	Wait          *durationpb.Duration `protobuf:"bytes,6,opt,name=wait,proto3" json:"wait,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *PlanStep) Reset() {
	*x = PlanStep{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[43]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *PlanStep) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*PlanStep) ProtoMessage() {}

func (x *PlanStep) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[43]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use PlanStep.ProtoReflect.Descriptor instead.
func (*PlanStep) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{43}
}

func (x *PlanStep) GetKind() MoveKind {
	if x != nil {
		return x.Kind
	}
	return MoveKind_MOVE_KIND_UNSPECIFIED
}

func (x *PlanStep) GetAction() string {
	if x != nil {
		return x.Action
	}
	return ""
}

func (x *PlanStep) GetNeedsScope() string {
	if x != nil {
		return x.NeedsScope
	}
	return ""
}

func (x *PlanStep) GetReversible() bool {
	if x != nil {
		return x.Reversible
	}
	return false
}

func (x *PlanStep) GetAttempts() uint32 {
	if x != nil {
		return x.Attempts
	}
	return 0
}

func (x *PlanStep) GetWait() *durationpb.Duration {
	if x != nil {
		return x.Wait
	}
	return nil
}

// A check that would confirm or refute the diagnosis.
type VerificationCheck struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// What to check.
	Check string `protobuf:"bytes,1,opt,name=check,proto3" json:"check,omitempty"`
	// What it means if it holds.
	IfTrue string `protobuf:"bytes,2,opt,name=if_true,json=ifTrue,proto3" json:"if_true,omitempty"`
	// What it means if it does not.
	IfFalse       string `protobuf:"bytes,3,opt,name=if_false,json=ifFalse,proto3" json:"if_false,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *VerificationCheck) Reset() {
	*x = VerificationCheck{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[44]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *VerificationCheck) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*VerificationCheck) ProtoMessage() {}

func (x *VerificationCheck) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[44]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use VerificationCheck.ProtoReflect.Descriptor instead.
func (*VerificationCheck) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{44}
}

func (x *VerificationCheck) GetCheck() string {
	if x != nil {
		return x.Check
	}
	return ""
}

func (x *VerificationCheck) GetIfTrue() string {
	if x != nil {
		return x.IfTrue
	}
	return ""
}

func (x *VerificationCheck) GetIfFalse() string {
	if x != nil {
		return x.IfFalse
	}
	return ""
}

// One observation behind a diagnosis.
type Observation struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Where it comes from.
	Source ObservationSource `protobuf:"varint,1,opt,name=source,proto3,enum=idem.v1.ObservationSource" json:"source,omitempty"`
	// What was observed.
	Detail string `protobuf:"bytes,2,opt,name=detail,proto3" json:"detail,omitempty"`
	// Whether it supports the diagnosis (false: it speaks against it).
	Supports bool `protobuf:"varint,3,opt,name=supports,proto3" json:"supports,omitempty"`
	// What it adds to the score (0-100; negative when it speaks against).
	Weight        int32 `protobuf:"varint,4,opt,name=weight,proto3" json:"weight,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *Observation) Reset() {
	*x = Observation{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[45]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *Observation) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*Observation) ProtoMessage() {}

func (x *Observation) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[45]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use Observation.ProtoReflect.Descriptor instead.
func (*Observation) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{45}
}

func (x *Observation) GetSource() ObservationSource {
	if x != nil {
		return x.Source
	}
	return ObservationSource_OBSERVATION_SOURCE_UNSPECIFIED
}

func (x *Observation) GetDetail() string {
	if x != nil {
		return x.Detail
	}
	return ""
}

func (x *Observation) GetSupports() bool {
	if x != nil {
		return x.Supports
	}
	return false
}

func (x *Observation) GetWeight() int32 {
	if x != nil {
		return x.Weight
	}
	return 0
}

// A confidence scored from the number and quality of independent
// observations (one per source counts; a second of the same source adds
// nothing), never from how familiar the pattern looks.
type Confidence struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// 0-100.
	Score uint32 `protobuf:"varint,1,opt,name=score,proto3" json:"score,omitempty"`
	// The score as a level.
	Level ConfidenceLevel `protobuf:"varint,2,opt,name=level,proto3,enum=idem.v1.ConfidenceLevel" json:"level,omitempty"`
	// Every observation considered, the ones that scored and the ones that
	// did not.
	Observations  []*Observation `protobuf:"bytes,3,rep,name=observations,proto3" json:"observations,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *Confidence) Reset() {
	*x = Confidence{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[46]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *Confidence) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*Confidence) ProtoMessage() {}

func (x *Confidence) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[46]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use Confidence.ProtoReflect.Descriptor instead.
func (*Confidence) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{46}
}

func (x *Confidence) GetScore() uint32 {
	if x != nil {
		return x.Score
	}
	return 0
}

func (x *Confidence) GetLevel() ConfidenceLevel {
	if x != nil {
		return x.Level
	}
	return ConfidenceLevel_CONFIDENCE_LEVEL_UNSPECIFIED
}

func (x *Confidence) GetObservations() []*Observation {
	if x != nil {
		return x.Observations
	}
	return nil
}

// What a person or agent taking over needs to know.
type Handoff struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// The operation, if one is stored.
	OperationId string `protobuf:"bytes,1,opt,name=operation_id,json=operationId,proto3" json:"operation_id,omitempty"`
	// The scope.
	Scope *Scope `protobuf:"bytes,2,opt,name=scope,proto3" json:"scope,omitempty"`
	// The tenant's name.
	Tenant string `protobuf:"bytes,3,opt,name=tenant,proto3" json:"tenant,omitempty"`
	// The canonical payload definition: which fingerprint mode matched the
	// caller's request (json, bytes), or client (a client-computed
	// fingerprint), or unknown (no request to compare).
	FingerprintMode string `protobuf:"bytes,4,opt,name=fingerprint_mode,json=fingerprintMode,proto3" json:"fingerprint_mode,omitempty"`
	// The stored fingerprint, hex.
	Fingerprint string `protobuf:"bytes,5,opt,name=fingerprint,proto3" json:"fingerprint,omitempty"`
	// The state now.
	State OperationState `protobuf:"varint,6,opt,name=state,proto3,enum=idem.v1.OperationState" json:"state,omitempty"`
	// The history in a sentence per attempt.
	HistorySummary []string `protobuf:"bytes,7,rep,name=history_summary,json=historySummary,proto3" json:"history_summary,omitempty"`
	// What is known about the effect's atomicity and reconciliation.
	EffectAtomicity string `protobuf:"bytes,8,opt,name=effect_atomicity,json=effectAtomicity,proto3" json:"effect_atomicity,omitempty"`
	// The retry and retention policy in force for this operation.
	Policy string `protobuf:"bytes,9,opt,name=policy,proto3" json:"policy,omitempty"`
	// The evidence about how many effects happened: attempts that owned the
	// operation, their outcomes, the provider's finding.
	EffectCountEvidence string `protobuf:"bytes,10,opt,name=effect_count_evidence,json=effectCountEvidence,proto3" json:"effect_count_evidence,omitempty"`
	// Echoed from the request.
	SuccessCriterion string `protobuf:"bytes,11,opt,name=success_criterion,json=successCriterion,proto3" json:"success_criterion,omitempty"`
	// Echoed from the request.
	Context       string `protobuf:"bytes,12,opt,name=context,proto3" json:"context,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *Handoff) Reset() {
	*x = Handoff{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[47]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *Handoff) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*Handoff) ProtoMessage() {}

func (x *Handoff) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[47]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use Handoff.ProtoReflect.Descriptor instead.
func (*Handoff) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{47}
}

func (x *Handoff) GetOperationId() string {
	if x != nil {
		return x.OperationId
	}
	return ""
}

func (x *Handoff) GetScope() *Scope {
	if x != nil {
		return x.Scope
	}
	return nil
}

func (x *Handoff) GetTenant() string {
	if x != nil {
		return x.Tenant
	}
	return ""
}

func (x *Handoff) GetFingerprintMode() string {
	if x != nil {
		return x.FingerprintMode
	}
	return ""
}

func (x *Handoff) GetFingerprint() string {
	if x != nil {
		return x.Fingerprint
	}
	return ""
}

func (x *Handoff) GetState() OperationState {
	if x != nil {
		return x.State
	}
	return OperationState_OPERATION_STATE_UNSPECIFIED
}

func (x *Handoff) GetHistorySummary() []string {
	if x != nil {
		return x.HistorySummary
	}
	return nil
}

func (x *Handoff) GetEffectAtomicity() string {
	if x != nil {
		return x.EffectAtomicity
	}
	return ""
}

func (x *Handoff) GetPolicy() string {
	if x != nil {
		return x.Policy
	}
	return ""
}

func (x *Handoff) GetEffectCountEvidence() string {
	if x != nil {
		return x.EffectCountEvidence
	}
	return ""
}

func (x *Handoff) GetSuccessCriterion() string {
	if x != nil {
		return x.SuccessCriterion
	}
	return ""
}

func (x *Handoff) GetContext() string {
	if x != nil {
		return x.Context
	}
	return ""
}

// The answer to Diagnose.
type DiagnoseResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Whether to follow the plan or escalate.
	Verdict Verdict `protobuf:"varint,1,opt,name=verdict,proto3,enum=idem.v1.Verdict" json:"verdict,omitempty"`
	// What the evidence points to.
	Diagnosis *Diagnosis `protobuf:"bytes,2,opt,name=diagnosis,proto3" json:"diagnosis,omitempty"`
	// The next safe moves, in order.
	Plan []*PlanStep `protobuf:"bytes,3,rep,name=plan,proto3" json:"plan,omitempty"`
	// The checks that would confirm it, and what each result means.
	Verification []*VerificationCheck `protobuf:"bytes,4,rep,name=verification,proto3" json:"verification,omitempty"`
	// What someone taking over needs to know.
	Handoff *Handoff `protobuf:"bytes,5,opt,name=handoff,proto3" json:"handoff,omitempty"`
	// How sure, and from which observations.
	Confidence *Confidence `protobuf:"bytes,6,opt,name=confidence,proto3" json:"confidence,omitempty"`
	// ESCALATE: what is missing, contradictory or stale, one item each.
	Missing []string `protobuf:"bytes,7,rep,name=missing,proto3" json:"missing,omitempty"`
	// Other findings the evidence also supports (e.g. frequent conflicts
	// beside a conflict), weaker than the diagnosis.
	Also          []*Diagnosis `protobuf:"bytes,8,rep,name=also,proto3" json:"also,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *DiagnoseResponse) Reset() {
	*x = DiagnoseResponse{}
	mi := &file_idem_v1_idempotency_proto_msgTypes[48]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *DiagnoseResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*DiagnoseResponse) ProtoMessage() {}

func (x *DiagnoseResponse) ProtoReflect() protoreflect.Message {
	mi := &file_idem_v1_idempotency_proto_msgTypes[48]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use DiagnoseResponse.ProtoReflect.Descriptor instead.
func (*DiagnoseResponse) Descriptor() ([]byte, []int) {
	return file_idem_v1_idempotency_proto_rawDescGZIP(), []int{48}
}

func (x *DiagnoseResponse) GetVerdict() Verdict {
	if x != nil {
		return x.Verdict
	}
	return Verdict_VERDICT_UNSPECIFIED
}

func (x *DiagnoseResponse) GetDiagnosis() *Diagnosis {
	if x != nil {
		return x.Diagnosis
	}
	return nil
}

func (x *DiagnoseResponse) GetPlan() []*PlanStep {
	if x != nil {
		return x.Plan
	}
	return nil
}

func (x *DiagnoseResponse) GetVerification() []*VerificationCheck {
	if x != nil {
		return x.Verification
	}
	return nil
}

func (x *DiagnoseResponse) GetHandoff() *Handoff {
	if x != nil {
		return x.Handoff
	}
	return nil
}

func (x *DiagnoseResponse) GetConfidence() *Confidence {
	if x != nil {
		return x.Confidence
	}
	return nil
}

func (x *DiagnoseResponse) GetMissing() []string {
	if x != nil {
		return x.Missing
	}
	return nil
}

func (x *DiagnoseResponse) GetAlso() []*Diagnosis {
	if x != nil {
		return x.Also
	}
	return nil
}

var File_idem_v1_idempotency_proto protoreflect.FileDescriptor

const file_idem_v1_idempotency_proto_rawDesc = "" +
	"\n" +
	"\x19idem/v1/idempotency.proto\x12\aidem.v1\x1a\x1egoogle/protobuf/duration.proto\x1a\x1fgoogle/protobuf/timestamp.proto\"7\n" +
	"\x05Scope\x12\x1c\n" +
	"\toperation\x18\x01 \x01(\tR\toperation\x12\x10\n" +
	"\x03key\x18\x02 \x01(\tR\x03key\"\xe1\x04\n" +
	"\fClaimRequest\x12$\n" +
	"\x05scope\x18\x01 \x01(\v2\x0e.idem.v1.ScopeR\x05scope\x12\"\n" +
	"\vfingerprint\x18\x02 \x01(\fH\x00R\vfingerprint\x12#\n" +
	"\fjson_payload\x18\x03 \x01(\tH\x00R\vjsonPayload\x12%\n" +
	"\rbytes_payload\x18\x04 \x01(\fH\x00R\fbytesPayload\x12\x1f\n" +
	"\vclaim_token\x18\x05 \x01(\fR\n" +
	"claimToken\x12/\n" +
	"\x05lease\x18\x06 \x01(\v2\x19.google.protobuf.DurationR\x05lease\x12K\n" +
	"\x14max_attempt_duration\x18\a \x01(\v2\x19.google.protobuf.DurationR\x12maxAttemptDuration\x12!\n" +
	"\fmax_attempts\x18\b \x01(\rR\vmaxAttempts\x127\n" +
	"\tretention\x18\t \x01(\v2\x19.google.protobuf.DurationR\tretention\x12H\n" +
	"\x12operation_deadline\x18\n" +
	" \x01(\v2\x19.google.protobuf.DurationR\x11operationDeadline\x12-\n" +
	"\x04wait\x18\v \x01(\v2\x19.google.protobuf.DurationR\x04wait\x123\n" +
	"\x15previous_fingerprints\x18\f \x03(\fR\x14previousFingerprintsB\x12\n" +
	"\x10request_identity\"\xc4\x02\n" +
	"\rClaimResponse\x12/\n" +
	"\bacquired\x18\x01 \x01(\v2\x11.idem.v1.AcquiredH\x00R\bacquired\x12B\n" +
	"\x0freconcile_first\x18\x02 \x01(\v2\x17.idem.v1.ReconcileFirstH\x00R\x0ereconcileFirst\x12,\n" +
	"\apending\x18\x03 \x01(\v2\x10.idem.v1.PendingH\x00R\apending\x122\n" +
	"\tcompleted\x18\x04 \x01(\v2\x12.idem.v1.CompletedH\x00R\tcompleted\x12Q\n" +
	"\x14needs_reconciliation\x18\x05 \x01(\v2\x1c.idem.v1.NeedsReconciliationH\x00R\x13needsReconciliationB\t\n" +
	"\aoutcome\"\xf8\x01\n" +
	"\tOwnership\x12!\n" +
	"\foperation_id\x18\x01 \x01(\tR\voperationId\x12\x14\n" +
	"\x05fence\x18\x02 \x01(\x04R\x05fence\x12\x18\n" +
	"\aattempt\x18\x03 \x01(\rR\aattempt\x12!\n" +
	"\fmax_attempts\x18\x04 \x01(\rR\vmaxAttempts\x12/\n" +
	"\x05lease\x18\x05 \x01(\v2\x19.google.protobuf.DurationR\x05lease\x12D\n" +
	"\x10attempt_deadline\x18\x06 \x01(\v2\x19.google.protobuf.DurationR\x0fattemptDeadline\"<\n" +
	"\bAcquired\x120\n" +
	"\townership\x18\x01 \x01(\v2\x12.idem.v1.OwnershipR\townership\"\x80\x02\n" +
	"\x0eReconcileFirst\x120\n" +
	"\townership\x18\x01 \x01(\v2\x12.idem.v1.OwnershipR\townership\x12>\n" +
	"\x0eprevious_state\x18\x02 \x01(\x0e2\x17.idem.v1.OperationStateR\rpreviousState\x12%\n" +
	"\x0eprevious_fence\x18\x03 \x01(\x04R\rpreviousFence\x12U\n" +
	"\x19previous_attempt_deadline\x18\x04 \x01(\v2\x19.google.protobuf.DurationR\x17previousAttemptDeadline\"\xb2\x01\n" +
	"\aPending\x12!\n" +
	"\foperation_id\x18\x01 \x01(\tR\voperationId\x12.\n" +
	"\x06reason\x18\x02 \x01(\x0e2\x16.idem.v1.PendingReasonR\x06reason\x12:\n" +
	"\vretry_after\x18\x03 \x01(\v2\x19.google.protobuf.DurationR\n" +
	"retryAfter\x12\x18\n" +
	"\aattempt\x18\x04 \x01(\rR\aattempt\"\xde\x02\n" +
	"\tCompleted\x12!\n" +
	"\foperation_id\x18\x01 \x01(\tR\voperationId\x12-\n" +
	"\x05state\x18\x02 \x01(\x0e2\x17.idem.v1.OperationStateR\x05state\x12)\n" +
	"\x06result\x18\x03 \x01(\v2\x0f.idem.v1.ResultH\x00R\x06result\x12/\n" +
	"\x05error\x18\x04 \x01(\v2\x17.idem.v1.OperationErrorH\x00R\x05error\x12\x1a\n" +
	"\battempts\x18\x05 \x01(\rR\battempts\x12=\n" +
	"\fcompleted_at\x18\x06 \x01(\v2\x1a.google.protobuf.TimestampR\vcompletedAt\x12=\n" +
	"\fretain_until\x18\a \x01(\v2\x1a.google.protobuf.TimestampR\vretainUntilB\t\n" +
	"\aoutcome\"j\n" +
	"\x13NeedsReconciliation\x12!\n" +
	"\foperation_id\x18\x01 \x01(\tR\voperationId\x12\x14\n" +
	"\x05fence\x18\x02 \x01(\x04R\x05fence\x12\x1a\n" +
	"\battempts\x18\x03 \x01(\rR\battempts\"\xb7\x01\n" +
	"\x06Result\x12\x12\n" +
	"\x04body\x18\x01 \x01(\fR\x04body\x12!\n" +
	"\fcontent_type\x18\x02 \x01(\tR\vcontentType\x129\n" +
	"\bmetadata\x18\x03 \x03(\v2\x1d.idem.v1.Result.MetadataEntryR\bmetadata\x1a;\n" +
	"\rMetadataEntry\x12\x10\n" +
	"\x03key\x18\x01 \x01(\tR\x03key\x12\x14\n" +
	"\x05value\x18\x02 \x01(\tR\x05value:\x028\x01\"\xee\x01\n" +
	"\x0eOperationError\x12.\n" +
	"\x06reason\x18\x01 \x01(\x0e2\x16.idem.v1.FailureReasonR\x06reason\x12\x12\n" +
	"\x04code\x18\x02 \x01(\tR\x04code\x12\x18\n" +
	"\amessage\x18\x03 \x01(\tR\amessage\x12A\n" +
	"\bmetadata\x18\x04 \x03(\v2%.idem.v1.OperationError.MetadataEntryR\bmetadata\x1a;\n" +
	"\rMetadataEntry\x12\x10\n" +
	"\x03key\x18\x01 \x01(\tR\x03key\x12\x14\n" +
	"\x05value\x18\x02 \x01(\tR\x05value:\x028\x01\"x\n" +
	"\fRenewRequest\x12!\n" +
	"\foperation_id\x18\x01 \x01(\tR\voperationId\x12\x14\n" +
	"\x05fence\x18\x02 \x01(\x04R\x05fence\x12/\n" +
	"\x05lease\x18\x03 \x01(\v2\x19.google.protobuf.DurationR\x05lease\"\x86\x01\n" +
	"\rRenewResponse\x12/\n" +
	"\x05lease\x18\x01 \x01(\v2\x19.google.protobuf.DurationR\x05lease\x12D\n" +
	"\x10attempt_deadline\x18\x02 \x01(\v2\x19.google.protobuf.DurationR\x0fattemptDeadline\"s\n" +
	"\x0fCompleteRequest\x12!\n" +
	"\foperation_id\x18\x01 \x01(\tR\voperationId\x12\x14\n" +
	"\x05fence\x18\x02 \x01(\x04R\x05fence\x12'\n" +
	"\x06result\x18\x03 \x01(\v2\x0f.idem.v1.ResultR\x06result\"A\n" +
	"\x10CompleteResponse\x12-\n" +
	"\x05state\x18\x01 \x01(\x0e2\x17.idem.v1.OperationStateR\x05state\"\xed\x01\n" +
	"\vFailRequest\x12!\n" +
	"\foperation_id\x18\x01 \x01(\tR\voperationId\x12\x14\n" +
	"\x05fence\x18\x02 \x01(\x04R\x05fence\x12:\n" +
	"\vdisposition\x18\x03 \x01(\x0e2\x18.idem.v1.FailDispositionR\vdisposition\x12-\n" +
	"\x05error\x18\x04 \x01(\v2\x17.idem.v1.OperationErrorR\x05error\x12:\n" +
	"\vretry_after\x18\x05 \x01(\v2\x19.google.protobuf.DurationR\n" +
	"retryAfter\"\xa9\x01\n" +
	"\fFailResponse\x12-\n" +
	"\x05state\x18\x01 \x01(\x0e2\x17.idem.v1.OperationStateR\x05state\x12.\n" +
	"\x06reason\x18\x02 \x01(\x0e2\x16.idem.v1.FailureReasonR\x06reason\x12:\n" +
	"\vretry_after\x18\x03 \x01(\v2\x19.google.protobuf.DurationR\n" +
	"retryAfter\"\x81\x02\n" +
	"\rLookupRequest\x12&\n" +
	"\x05scope\x18\x01 \x01(\v2\x0e.idem.v1.ScopeH\x00R\x05scope\x12#\n" +
	"\foperation_id\x18\x02 \x01(\tH\x00R\voperationId\x12'\n" +
	"\x0finclude_history\x18\x03 \x01(\bR\x0eincludeHistory\x12*\n" +
	"\x11history_page_size\x18\x04 \x01(\rR\x0fhistoryPageSize\x12,\n" +
	"\x12history_page_token\x18\x05 \x01(\tR\x10historyPageToken\x12\x16\n" +
	"\x06tenant\x18\x06 \x01(\tR\x06tenantB\b\n" +
	"\x06target\"\xaa\x01\n" +
	"\x0eLookupResponse\x120\n" +
	"\toperation\x18\x01 \x01(\v2\x12.idem.v1.OperationR\toperation\x12/\n" +
	"\ahistory\x18\x02 \x03(\v2\x15.idem.v1.HistoryEntryR\ahistory\x125\n" +
	"\x17next_history_page_token\x18\x03 \x01(\tR\x14nextHistoryPageToken\"\x89\n" +
	"\n" +
	"\tOperation\x12!\n" +
	"\foperation_id\x18\x01 \x01(\tR\voperationId\x12$\n" +
	"\x05scope\x18\x02 \x01(\v2\x0e.idem.v1.ScopeR\x05scope\x12-\n" +
	"\x05state\x18\x03 \x01(\x0e2\x17.idem.v1.OperationStateR\x05state\x12#\n" +
	"\rlease_expired\x18\x04 \x01(\bR\fleaseExpired\x12 \n" +
	"\vfingerprint\x18\x05 \x01(\fR\vfingerprint\x12\x14\n" +
	"\x05fence\x18\x06 \x01(\x04R\x05fence\x12\x18\n" +
	"\aattempt\x18\a \x01(\rR\aattempt\x12!\n" +
	"\fmax_attempts\x18\b \x01(\rR\vmaxAttempts\x12'\n" +
	"\x06result\x18\t \x01(\v2\x0f.idem.v1.ResultR\x06result\x12-\n" +
	"\x05error\x18\n" +
	" \x01(\v2\x17.idem.v1.OperationErrorR\x05error\x129\n" +
	"\n" +
	"created_at\x18\v \x01(\v2\x1a.google.protobuf.TimestampR\tcreatedAt\x129\n" +
	"\n" +
	"updated_at\x18\f \x01(\v2\x1a.google.protobuf.TimestampR\tupdatedAt\x12D\n" +
	"\x10lease_expires_at\x18\r \x01(\v2\x1a.google.protobuf.TimestampR\x0eleaseExpiresAt\x12J\n" +
	"\x13attempt_deadline_at\x18\x0e \x01(\v2\x1a.google.protobuf.TimestampR\x11attemptDeadlineAt\x125\n" +
	"\bretry_at\x18\x0f \x01(\v2\x1a.google.protobuf.TimestampR\aretryAt\x12=\n" +
	"\fcompleted_at\x18\x10 \x01(\v2\x1a.google.protobuf.TimestampR\vcompletedAt\x12=\n" +
	"\fretain_until\x18\x11 \x01(\v2\x1a.google.protobuf.TimestampR\vretainUntil\x12N\n" +
	"\x15operation_deadline_at\x18\x12 \x01(\v2\x1a.google.protobuf.TimestampR\x13operationDeadlineAt\x12\x16\n" +
	"\x06tenant\x18\x13 \x01(\tR\x06tenant\x12.\n" +
	"\ton_failed\x18\x14 \x01(\x0e2\x11.idem.v1.OnFailedR\bonFailed\x12\x1c\n" +
	"\tconflicts\x18\x15 \x01(\x04R\tconflicts\x12D\n" +
	"\x10last_conflict_at\x18\x16 \x01(\v2\x1a.google.protobuf.TimestampR\x0elastConflictAt\x12\x18\n" +
	"\areplays\x18\x17 \x01(\x04R\areplays\x12\x1a\n" +
	"\bpendings\x18\x18 \x01(\x04R\bpendings\x12@\n" +
	"\x0elast_replay_at\x18\x19 \x01(\v2\x1a.google.protobuf.TimestampR\flastReplayAt\x12*\n" +
	"\x11same_request_keys\x18\x1a \x01(\rR\x0fsameRequestKeys\x125\n" +
	"\x17suspected_new_key_retry\x18\x1b \x01(\bR\x14suspectedNewKeyRetry\"\xd2\x03\n" +
	"\fHistoryEntry\x12\x1a\n" +
	"\bsequence\x18\x01 \x01(\x04R\bsequence\x12\x14\n" +
	"\x05event\x18\x02 \x01(\tR\x05event\x126\n" +
	"\n" +
	"from_state\x18\x03 \x01(\x0e2\x17.idem.v1.OperationStateR\tfromState\x122\n" +
	"\bto_state\x18\x04 \x01(\x0e2\x17.idem.v1.OperationStateR\atoState\x12\x14\n" +
	"\x05fence\x18\x05 \x01(\x04R\x05fence\x12\x18\n" +
	"\aattempt\x18\x06 \x01(\rR\aattempt\x12\x16\n" +
	"\x06detail\x18\a \x01(\tR\x06detail\x12\x14\n" +
	"\x05count\x18\b \x01(\x04R\x05count\x12*\n" +
	"\x02at\x18\t \x01(\v2\x1a.google.protobuf.TimestampR\x02at\x123\n" +
	"\alast_at\x18\n" +
	" \x01(\v2\x1a.google.protobuf.TimestampR\x06lastAt\x12\x1d\n" +
	"\n" +
	"last_fence\x18\v \x01(\x04R\tlastFence\x12\x1e\n" +
	"\n" +
	"credential\x18\f \x01(\tR\n" +
	"credential\x12&\n" +
	"\x0fadmin_on_behalf\x18\r \x01(\bR\radminOnBehalf\"\x9e\x02\n" +
	"\x10ReconcileRequest\x12!\n" +
	"\foperation_id\x18\x01 \x01(\tR\voperationId\x12%\n" +
	"\x0eexpected_fence\x18\x02 \x01(\x04R\rexpectedFence\x12/\n" +
	"\tsucceeded\x18\x03 \x01(\v2\x0f.idem.v1.ResultH\x00R\tsucceeded\x121\n" +
	"\x06failed\x18\x04 \x01(\v2\x17.idem.v1.OperationErrorH\x00R\x06failed\x126\n" +
	"\vnot_applied\x18\x05 \x01(\v2\x13.idem.v1.NotAppliedH\x00R\n" +
	"notApplied\x12\x16\n" +
	"\x06tenant\x18\x06 \x01(\tR\x06tenantB\f\n" +
	"\n" +
	"resolution\"\f\n" +
	"\n" +
	"NotApplied\"X\n" +
	"\x11ReconcileResponse\x12-\n" +
	"\x05state\x18\x01 \x01(\x0e2\x17.idem.v1.OperationStateR\x05state\x12\x14\n" +
	"\x05fence\x18\x02 \x01(\x04R\x05fence\"q\n" +
	"\x15ListUnresolvedRequest\x12\x1c\n" +
	"\toperation\x18\x01 \x01(\tR\toperation\x12\x1b\n" +
	"\tpage_size\x18\x02 \x01(\rR\bpageSize\x12\x1d\n" +
	"\n" +
	"page_token\x18\x03 \x01(\tR\tpageToken\"t\n" +
	"\x16ListUnresolvedResponse\x122\n" +
	"\n" +
	"operations\x18\x01 \x03(\v2\x12.idem.v1.OperationR\n" +
	"operations\x12&\n" +
	"\x0fnext_page_token\x18\x02 \x01(\tR\rnextPageToken\"\xf7\x01\n" +
	"\x15ListOperationsRequest\x12\x16\n" +
	"\x06filter\x18\x01 \x01(\tR\x06filter\x12\x1b\n" +
	"\tpage_size\x18\x02 \x01(\rR\bpageSize\x12\x1d\n" +
	"\n" +
	"page_token\x18\x03 \x01(\tR\tpageToken\x12:\n" +
	"\x05order\x18\x04 \x01(\x0e2$.idem.v1.ListOperationsRequest.OrderR\x05order\"N\n" +
	"\x05Order\x12\x15\n" +
	"\x11ORDER_UNSPECIFIED\x10\x00\x12\x16\n" +
	"\x12ORDER_OLDEST_FIRST\x10\x01\x12\x16\n" +
	"\x12ORDER_NEWEST_FIRST\x10\x02\"t\n" +
	"\x16ListOperationsResponse\x122\n" +
	"\n" +
	"operations\x18\x01 \x03(\v2\x12.idem.v1.OperationR\n" +
	"operations\x12&\n" +
	"\x0fnext_page_token\x18\x02 \x01(\tR\rnextPageToken\"\x89\x01\n" +
	"\rForgetRequest\x12!\n" +
	"\foperation_id\x18\x01 \x01(\tR\voperationId\x12%\n" +
	"\x0eexpected_fence\x18\x02 \x01(\x04R\rexpectedFence\x12\x16\n" +
	"\x06reason\x18\x03 \x01(\tR\x06reason\x12\x16\n" +
	"\x06tenant\x18\x04 \x01(\tR\x06tenant\"\xa3\x01\n" +
	"\x0eForgetResponse\x12-\n" +
	"\x05state\x18\x01 \x01(\x0e2\x17.idem.v1.OperationStateR\x05state\x12=\n" +
	"\fretain_until\x18\x02 \x01(\v2\x1a.google.protobuf.TimestampR\vretainUntil\x12#\n" +
	"\rdropped_bytes\x18\x03 \x01(\x04R\fdroppedBytes\"0\n" +
	"\x10GetPolicyRequest\x12\x1c\n" +
	"\toperation\x18\x01 \x01(\tR\toperation\"\xbd\x06\n" +
	"\x11GetPolicyResponse\x12'\n" +
	"\x0fmatched_pattern\x18\x01 \x01(\tR\x0ematchedPattern\x12'\n" +
	"\x0fserver_defaults\x18\x02 \x01(\bR\x0eserverDefaults\x12>\n" +
	"\rdefault_lease\x18\x03 \x01(\v2\x19.google.protobuf.DurationR\fdefaultLease\x126\n" +
	"\tmax_lease\x18\x04 \x01(\v2\x19.google.protobuf.DurationR\bmaxLease\x12Z\n" +
	"\x1cdefault_max_attempt_duration\x18\x05 \x01(\v2\x19.google.protobuf.DurationR\x19defaultMaxAttemptDuration\x12K\n" +
	"\x14max_attempt_duration\x18\x06 \x01(\v2\x19.google.protobuf.DurationR\x12maxAttemptDuration\x120\n" +
	"\x14default_max_attempts\x18\a \x01(\rR\x12defaultMaxAttempts\x12!\n" +
	"\fmax_attempts\x18\b \x01(\rR\vmaxAttempts\x12F\n" +
	"\x11default_retention\x18\t \x01(\v2\x19.google.protobuf.DurationR\x10defaultRetention\x12>\n" +
	"\rmax_retention\x18\n" +
	" \x01(\v2\x19.google.protobuf.DurationR\fmaxRetention\x12W\n" +
	"\x1adefault_operation_deadline\x18\v \x01(\v2\x19.google.protobuf.DurationR\x18defaultOperationDeadline\x12O\n" +
	"\x16max_operation_deadline\x18\f \x01(\v2\x19.google.protobuf.DurationR\x14maxOperationDeadline\x12.\n" +
	"\ton_failed\x18\r \x01(\x0e2\x11.idem.v1.OnFailedR\bonFailed\"\x97\x01\n" +
	"\vHoldRequest\x12\x16\n" +
	"\x06tenant\x18\x01 \x01(\tR\x06tenant\x12\x1c\n" +
	"\toperation\x18\x02 \x01(\tR\toperation\x12\x16\n" +
	"\x06reason\x18\x03 \x01(\tR\x06reason\x12:\n" +
	"\vretry_after\x18\x04 \x01(\v2\x19.google.protobuf.DurationR\n" +
	"retryAfter\"\xde\x01\n" +
	"\x04Hold\x12\x16\n" +
	"\x06tenant\x18\x01 \x01(\tR\x06tenant\x12\x1c\n" +
	"\toperation\x18\x02 \x01(\tR\toperation\x12\x16\n" +
	"\x06reason\x18\x03 \x01(\tR\x06reason\x12:\n" +
	"\vretry_after\x18\x04 \x01(\v2\x19.google.protobuf.DurationR\n" +
	"retryAfter\x123\n" +
	"\aheld_at\x18\x05 \x01(\v2\x1a.google.protobuf.TimestampR\x06heldAt\x12\x17\n" +
	"\aheld_by\x18\x06 \x01(\tR\x06heldBy\"T\n" +
	"\fHoldResponse\x12!\n" +
	"\x04hold\x18\x01 \x01(\v2\r.idem.v1.HoldR\x04hold\x12!\n" +
	"\falready_held\x18\x02 \x01(\bR\valreadyHeld\"^\n" +
	"\x0eReleaseRequest\x12\x16\n" +
	"\x06tenant\x18\x01 \x01(\tR\x06tenant\x12\x1c\n" +
	"\toperation\x18\x02 \x01(\tR\toperation\x12\x16\n" +
	"\x06reason\x18\x03 \x01(\tR\x06reason\"<\n" +
	"\x0fReleaseResponse\x12)\n" +
	"\breleased\x18\x01 \x01(\v2\r.idem.v1.HoldR\breleased\"*\n" +
	"\x10ListHoldsRequest\x12\x16\n" +
	"\x06tenant\x18\x01 \x01(\tR\x06tenant\"8\n" +
	"\x11ListHoldsResponse\x12#\n" +
	"\x05holds\x18\x01 \x03(\v2\r.idem.v1.HoldR\x05holds\"\x95\x04\n" +
	"\x10DiagnoseEvidence\x12*\n" +
	"\asymptom\x18\x01 \x01(\x0e2\x10.idem.v1.SymptomR\asymptom\x12\x1f\n" +
	"\vstatus_code\x18\x02 \x01(\rR\n" +
	"statusCode\x12!\n" +
	"\ferror_reason\x18\x03 \x01(\tR\verrorReason\x12\"\n" +
	"\vfingerprint\x18\x04 \x01(\fH\x00R\vfingerprint\x12#\n" +
	"\fjson_payload\x18\x05 \x01(\tH\x00R\vjsonPayload\x12%\n" +
	"\rbytes_payload\x18\x06 \x01(\fH\x00R\fbytesPayload\x12)\n" +
	"\x11new_key_for_retry\x18\a \x01(\bR\x0enewKeyForRetry\x12C\n" +
	"\x10provider_finding\x18\b \x01(\x0e2\x18.idem.v1.ProviderFindingR\x0fproviderFinding\x12I\n" +
	"\x13provider_looked_ago\x18\t \x01(\v2\x19.google.protobuf.DurationR\x11providerLookedAgo\x12<\n" +
	"\fobserved_ago\x18\n" +
	" \x01(\v2\x19.google.protobuf.DurationR\vobservedAgo\x12\x14\n" +
	"\x05notes\x18\v \x01(\tR\x05notesB\x12\n" +
	"\x10request_identity\"\xeb\x01\n" +
	"\x13DiagnoseConstraints\x120\n" +
	"\tauthority\x18\x01 \x01(\x0e2\x12.idem.v1.AuthorityR\tauthority\x12'\n" +
	"\x0freversible_only\x18\x02 \x01(\bR\x0ereversibleOnly\x12*\n" +
	"\x0eattempt_budget\x18\x03 \x01(\rH\x00R\rattemptBudget\x88\x01\x01\x12:\n" +
	"\vwait_budget\x18\x04 \x01(\v2\x19.google.protobuf.DurationR\n" +
	"waitBudgetB\x11\n" +
	"\x0f_attempt_budget\"\xbe\x02\n" +
	"\x0fDiagnoseRequest\x12&\n" +
	"\x05scope\x18\x01 \x01(\v2\x0e.idem.v1.ScopeH\x00R\x05scope\x12#\n" +
	"\foperation_id\x18\x02 \x01(\tH\x00R\voperationId\x12\x16\n" +
	"\x06tenant\x18\x03 \x01(\tR\x06tenant\x125\n" +
	"\bevidence\x18\x04 \x01(\v2\x19.idem.v1.DiagnoseEvidenceR\bevidence\x12>\n" +
	"\vconstraints\x18\x05 \x01(\v2\x1c.idem.v1.DiagnoseConstraintsR\vconstraints\x12+\n" +
	"\x11success_criterion\x18\x06 \x01(\tR\x10successCriterion\x12\x18\n" +
	"\acontext\x18\a \x01(\tR\acontextB\b\n" +
	"\x06target\"q\n" +
	"\tDiagnosis\x12$\n" +
	"\x05cause\x18\x01 \x01(\x0e2\x0e.idem.v1.CauseR\x05cause\x12$\n" +
	"\x05layer\x18\x02 \x01(\x0e2\x0e.idem.v1.LayerR\x05layer\x12\x18\n" +
	"\ameaning\x18\x03 \x01(\tR\ameaning\"\xd5\x01\n" +
	"\bPlanStep\x12%\n" +
	"\x04kind\x18\x01 \x01(\x0e2\x11.idem.v1.MoveKindR\x04kind\x12\x16\n" +
	"\x06action\x18\x02 \x01(\tR\x06action\x12\x1f\n" +
	"\vneeds_scope\x18\x03 \x01(\tR\n" +
	"needsScope\x12\x1e\n" +
	"\n" +
	"reversible\x18\x04 \x01(\bR\n" +
	"reversible\x12\x1a\n" +
	"\battempts\x18\x05 \x01(\rR\battempts\x12-\n" +
	"\x04wait\x18\x06 \x01(\v2\x19.google.protobuf.DurationR\x04wait\"]\n" +
	"\x11VerificationCheck\x12\x14\n" +
	"\x05check\x18\x01 \x01(\tR\x05check\x12\x17\n" +
	"\aif_true\x18\x02 \x01(\tR\x06ifTrue\x12\x19\n" +
	"\bif_false\x18\x03 \x01(\tR\aifFalse\"\x8d\x01\n" +
	"\vObservation\x122\n" +
	"\x06source\x18\x01 \x01(\x0e2\x1a.idem.v1.ObservationSourceR\x06source\x12\x16\n" +
	"\x06detail\x18\x02 \x01(\tR\x06detail\x12\x1a\n" +
	"\bsupports\x18\x03 \x01(\bR\bsupports\x12\x16\n" +
	"\x06weight\x18\x04 \x01(\x05R\x06weight\"\x8c\x01\n" +
	"\n" +
	"Confidence\x12\x14\n" +
	"\x05score\x18\x01 \x01(\rR\x05score\x12.\n" +
	"\x05level\x18\x02 \x01(\x0e2\x18.idem.v1.ConfidenceLevelR\x05level\x128\n" +
	"\fobservations\x18\x03 \x03(\v2\x14.idem.v1.ObservationR\fobservations\"\xcd\x03\n" +
	"\aHandoff\x12!\n" +
	"\foperation_id\x18\x01 \x01(\tR\voperationId\x12$\n" +
	"\x05scope\x18\x02 \x01(\v2\x0e.idem.v1.ScopeR\x05scope\x12\x16\n" +
	"\x06tenant\x18\x03 \x01(\tR\x06tenant\x12)\n" +
	"\x10fingerprint_mode\x18\x04 \x01(\tR\x0ffingerprintMode\x12 \n" +
	"\vfingerprint\x18\x05 \x01(\tR\vfingerprint\x12-\n" +
	"\x05state\x18\x06 \x01(\x0e2\x17.idem.v1.OperationStateR\x05state\x12'\n" +
	"\x0fhistory_summary\x18\a \x03(\tR\x0ehistorySummary\x12)\n" +
	"\x10effect_atomicity\x18\b \x01(\tR\x0feffectAtomicity\x12\x16\n" +
	"\x06policy\x18\t \x01(\tR\x06policy\x122\n" +
	"\x15effect_count_evidence\x18\n" +
	" \x01(\tR\x13effectCountEvidence\x12+\n" +
	"\x11success_criterion\x18\v \x01(\tR\x10successCriterion\x12\x18\n" +
	"\acontext\x18\f \x01(\tR\acontext\"\xfa\x02\n" +
	"\x10DiagnoseResponse\x12*\n" +
	"\averdict\x18\x01 \x01(\x0e2\x10.idem.v1.VerdictR\averdict\x120\n" +
	"\tdiagnosis\x18\x02 \x01(\v2\x12.idem.v1.DiagnosisR\tdiagnosis\x12%\n" +
	"\x04plan\x18\x03 \x03(\v2\x11.idem.v1.PlanStepR\x04plan\x12>\n" +
	"\fverification\x18\x04 \x03(\v2\x1a.idem.v1.VerificationCheckR\fverification\x12*\n" +
	"\ahandoff\x18\x05 \x01(\v2\x10.idem.v1.HandoffR\ahandoff\x123\n" +
	"\n" +
	"confidence\x18\x06 \x01(\v2\x13.idem.v1.ConfidenceR\n" +
	"confidence\x12\x18\n" +
	"\amissing\x18\a \x03(\tR\amissing\x12&\n" +
	"\x04also\x18\b \x03(\v2\x12.idem.v1.DiagnosisR\x04also*\x8c\x01\n" +
	"\rPendingReason\x12\x1e\n" +
	"\x1aPENDING_REASON_UNSPECIFIED\x10\x00\x12\x1e\n" +
	"\x1aPENDING_REASON_IN_PROGRESS\x10\x01\x12\"\n" +
	"\x1ePENDING_REASON_RETRY_SCHEDULED\x10\x02\x12\x17\n" +
	"\x13PENDING_REASON_HELD\x10\x03*\x99\x01\n" +
	"\rFailureReason\x12\x1e\n" +
	"\x1aFAILURE_REASON_UNSPECIFIED\x10\x00\x12\x1b\n" +
	"\x17FAILURE_REASON_TERMINAL\x10\x01\x12%\n" +
	"!FAILURE_REASON_ATTEMPTS_EXHAUSTED\x10\x02\x12$\n" +
	" FAILURE_REASON_DEADLINE_EXCEEDED\x10\x03*\xe7\x01\n" +
	"\x0eOperationState\x12\x1f\n" +
	"\x1bOPERATION_STATE_UNSPECIFIED\x10\x00\x12\x1f\n" +
	"\x1bOPERATION_STATE_IN_PROGRESS\x10\x01\x12\x1d\n" +
	"\x19OPERATION_STATE_SUCCEEDED\x10\x02\x12\x1a\n" +
	"\x16OPERATION_STATE_FAILED\x10\x03\x12\x1e\n" +
	"\x1aOPERATION_STATE_RETRY_WAIT\x10\x04\x12\x1b\n" +
	"\x17OPERATION_STATE_UNKNOWN\x10\x05\x12\x1b\n" +
	"\x17OPERATION_STATE_EXPIRED\x10\x06*V\n" +
	"\bOnFailed\x12\x19\n" +
	"\x15ON_FAILED_UNSPECIFIED\x10\x00\x12\x14\n" +
	"\x10ON_FAILED_REPLAY\x10\x01\x12\x19\n" +
	"\x15ON_FAILED_NEW_ATTEMPT\x10\x02*\xb2\x01\n" +
	"\x0fFailDisposition\x12 \n" +
	"\x1cFAIL_DISPOSITION_UNSPECIFIED\x10\x00\x12\x1d\n" +
	"\x19FAIL_DISPOSITION_TERMINAL\x10\x01\x12\x1e\n" +
	"\x1aFAIL_DISPOSITION_RETRYABLE\x10\x02\x12\x1c\n" +
	"\x18FAIL_DISPOSITION_UNKNOWN\x10\x03\x12 \n" +
	"\x1cFAIL_DISPOSITION_NOT_STARTED\x10\x04*\xfc\x01\n" +
	"\aSymptom\x12\x17\n" +
	"\x13SYMPTOM_UNSPECIFIED\x10\x00\x12#\n" +
	"\x1fSYMPTOM_TIMEOUT_BEFORE_RESPONSE\x10\x01\x12\x18\n" +
	"\x14SYMPTOM_ERROR_STATUS\x10\x02\x12!\n" +
	"\x1dSYMPTOM_CONCURRENT_DUPLICATES\x10\x03\x12\x1d\n" +
	"\x19SYMPTOM_STUCK_IN_PROGRESS\x10\x04\x12\x1c\n" +
	"\x18SYMPTOM_DUPLICATE_EFFECT\x10\x05\x12\x1e\n" +
	"\x1aSYMPTOM_FREQUENT_CONFLICTS\x10\x06\x12\x19\n" +
	"\x15SYMPTOM_STORE_GROWING\x10\a*\xa8\x01\n" +
	"\x0fProviderFinding\x12 \n" +
	"\x1cPROVIDER_FINDING_UNSPECIFIED\x10\x00\x12!\n" +
	"\x1dPROVIDER_FINDING_EFFECT_FOUND\x10\x01\x12\x1e\n" +
	"\x1aPROVIDER_FINDING_NO_EFFECT\x10\x02\x120\n" +
	",PROVIDER_FINDING_EFFECT_FOUND_MORE_THAN_ONCE\x10\x03*m\n" +
	"\tAuthority\x12\x19\n" +
	"\x15AUTHORITY_UNSPECIFIED\x10\x00\x12\x17\n" +
	"\x13AUTHORITY_READ_ONLY\x10\x01\x12\x13\n" +
	"\x0fAUTHORITY_RETRY\x10\x02\x12\x17\n" +
	"\x13AUTHORITY_RECONCILE\x10\x03*\xad\x02\n" +
	"\x05Cause\x12\x15\n" +
	"\x11CAUSE_UNSPECIFIED\x10\x00\x12\x0e\n" +
	"\n" +
	"CAUSE_NONE\x10\x01\x12\x1b\n" +
	"\x17CAUSE_AMBIGUOUS_OUTCOME\x10\x02\x12\x0e\n" +
	"\n" +
	"CAUSE_RACE\x10\x03\x12\x1a\n" +
	"\x16CAUSE_PAYLOAD_CONFLICT\x10\x04\x12\x17\n" +
	"\x13CAUSE_CLIENT_DEFECT\x10\x05\x12\x1b\n" +
	"\x17CAUSE_STUCK_IN_PROGRESS\x10\x06\x12\x1b\n" +
	"\x17CAUSE_NEW_KEY_PER_RETRY\x10\a\x12\"\n" +
	"\x1eCAUSE_UNSTABLE_KEYS_OR_PAYLOAD\x10\b\x12\x1d\n" +
	"\x19CAUSE_UNBOUNDED_RETENTION\x10\t\x12\x1e\n" +
	"\x1aCAUSE_NEEDS_RECONCILIATION\x10\n" +
	"*\xcc\x01\n" +
	"\x05Layer\x12\x15\n" +
	"\x11LAYER_UNSPECIFIED\x10\x00\x12\x13\n" +
	"\x0fLAYER_TRANSPORT\x10\x01\x12\x15\n" +
	"\x11LAYER_CONCURRENCY\x10\x02\x12\x18\n" +
	"\x14LAYER_CALLER_REQUEST\x10\x03\x12\x16\n" +
	"\x12LAYER_CALLER_LOGIC\x10\x04\x12\x18\n" +
	"\x14LAYER_OWNER_RECOVERY\x10\x05\x12\x12\n" +
	"\x0eLAYER_PROVIDER\x10\x06\x12\x10\n" +
	"\fLAYER_POLICY\x10\a\x12\x0e\n" +
	"\n" +
	"LAYER_NONE\x10\b*\xe9\x01\n" +
	"\bMoveKind\x12\x19\n" +
	"\x15MOVE_KIND_UNSPECIFIED\x10\x00\x12\x12\n" +
	"\x0eMOVE_KIND_LOOK\x10\x01\x12\x12\n" +
	"\x0eMOVE_KIND_WAIT\x10\x02\x12\x1c\n" +
	"\x18MOVE_KIND_CLAIM_SAME_KEY\x10\x03\x12\x17\n" +
	"\x13MOVE_KIND_RECONCILE\x10\x04\x12\x1b\n" +
	"\x17MOVE_KIND_CHANGE_CALLER\x10\x05\x12\x15\n" +
	"\x11MOVE_KIND_NEW_KEY\x10\x06\x12\x16\n" +
	"\x12MOVE_KIND_OPERATOR\x10\a\x12\x17\n" +
	"\x13MOVE_KIND_HAND_OVER\x10\b*\xa1\x02\n" +
	"\x11ObservationSource\x12\"\n" +
	"\x1eOBSERVATION_SOURCE_UNSPECIFIED\x10\x00\x12\x1e\n" +
	"\x1aOBSERVATION_SOURCE_HISTORY\x10\x01\x12\"\n" +
	"\x1eOBSERVATION_SOURCE_FINGERPRINT\x10\x02\x12\x1d\n" +
	"\x19OBSERVATION_SOURCE_TIMING\x10\x03\x12\x1f\n" +
	"\x1bOBSERVATION_SOURCE_PROVIDER\x10\x04\x12\x1f\n" +
	"\x1bOBSERVATION_SOURCE_COUNTERS\x10\x05\x12$\n" +
	" OBSERVATION_SOURCE_CALLER_REPORT\x10\x06\x12\x1d\n" +
	"\x19OBSERVATION_SOURCE_POLICY\x10\a*\x85\x01\n" +
	"\x0fConfidenceLevel\x12 \n" +
	"\x1cCONFIDENCE_LEVEL_UNSPECIFIED\x10\x00\x12\x18\n" +
	"\x14CONFIDENCE_LEVEL_LOW\x10\x01\x12\x1b\n" +
	"\x17CONFIDENCE_LEVEL_MEDIUM\x10\x02\x12\x19\n" +
	"\x15CONFIDENCE_LEVEL_HIGH\x10\x03*O\n" +
	"\aVerdict\x12\x17\n" +
	"\x13VERDICT_UNSPECIFIED\x10\x00\x12\x15\n" +
	"\x11VERDICT_DIAGNOSED\x10\x01\x12\x14\n" +
	"\x10VERDICT_ESCALATE\x10\x022\x96\a\n" +
	"\x12IdempotencyService\x126\n" +
	"\x05Claim\x12\x15.idem.v1.ClaimRequest\x1a\x16.idem.v1.ClaimResponse\x126\n" +
	"\x05Renew\x12\x15.idem.v1.RenewRequest\x1a\x16.idem.v1.RenewResponse\x12?\n" +
	"\bComplete\x12\x18.idem.v1.CompleteRequest\x1a\x19.idem.v1.CompleteResponse\x123\n" +
	"\x04Fail\x12\x14.idem.v1.FailRequest\x1a\x15.idem.v1.FailResponse\x129\n" +
	"\x06Lookup\x12\x16.idem.v1.LookupRequest\x1a\x17.idem.v1.LookupResponse\x12B\n" +
	"\tReconcile\x12\x19.idem.v1.ReconcileRequest\x1a\x1a.idem.v1.ReconcileResponse\x12Q\n" +
	"\x0eListUnresolved\x12\x1e.idem.v1.ListUnresolvedRequest\x1a\x1f.idem.v1.ListUnresolvedResponse\x12Q\n" +
	"\x0eListOperations\x12\x1e.idem.v1.ListOperationsRequest\x1a\x1f.idem.v1.ListOperationsResponse\x129\n" +
	"\x06Forget\x12\x16.idem.v1.ForgetRequest\x1a\x17.idem.v1.ForgetResponse\x12B\n" +
	"\tGetPolicy\x12\x19.idem.v1.GetPolicyRequest\x1a\x1a.idem.v1.GetPolicyResponse\x123\n" +
	"\x04Hold\x12\x14.idem.v1.HoldRequest\x1a\x15.idem.v1.HoldResponse\x12<\n" +
	"\aRelease\x12\x17.idem.v1.ReleaseRequest\x1a\x18.idem.v1.ReleaseResponse\x12B\n" +
	"\tListHolds\x12\x19.idem.v1.ListHoldsRequest\x1a\x1a.idem.v1.ListHoldsResponse\x12?\n" +
	"\bDiagnose\x12\x18.idem.v1.DiagnoseRequest\x1a\x19.idem.v1.DiagnoseResponseBC\n" +
	"\x11dev.idemd.idem.v1P\x01Z,github.com/idemd/idemd/gen/go/idem/v1;idemv1b\x06proto3"

var (
	file_idem_v1_idempotency_proto_rawDescOnce sync.Once
	file_idem_v1_idempotency_proto_rawDescData []byte
)

func file_idem_v1_idempotency_proto_rawDescGZIP() []byte {
	file_idem_v1_idempotency_proto_rawDescOnce.Do(func() {
		file_idem_v1_idempotency_proto_rawDescData = protoimpl.X.CompressGZIP(unsafe.Slice(unsafe.StringData(file_idem_v1_idempotency_proto_rawDesc), len(file_idem_v1_idempotency_proto_rawDesc)))
	})
	return file_idem_v1_idempotency_proto_rawDescData
}

var file_idem_v1_idempotency_proto_enumTypes = make([]protoimpl.EnumInfo, 15)
var file_idem_v1_idempotency_proto_msgTypes = make([]protoimpl.MessageInfo, 51)
var file_idem_v1_idempotency_proto_goTypes = []any{
	(PendingReason)(0),               // 0: idem.v1.PendingReason
	(FailureReason)(0),               // 1: idem.v1.FailureReason
	(OperationState)(0),              // 2: idem.v1.OperationState
	(OnFailed)(0),                    // 3: idem.v1.OnFailed
	(FailDisposition)(0),             // 4: idem.v1.FailDisposition
	(Symptom)(0),                     // 5: idem.v1.Symptom
	(ProviderFinding)(0),             // 6: idem.v1.ProviderFinding
	(Authority)(0),                   // 7: idem.v1.Authority
	(Cause)(0),                       // 8: idem.v1.Cause
	(Layer)(0),                       // 9: idem.v1.Layer
	(MoveKind)(0),                    // 10: idem.v1.MoveKind
	(ObservationSource)(0),           // 11: idem.v1.ObservationSource
	(ConfidenceLevel)(0),             // 12: idem.v1.ConfidenceLevel
	(Verdict)(0),                     // 13: idem.v1.Verdict
	(ListOperationsRequest_Order)(0), // 14: idem.v1.ListOperationsRequest.Order
	(*Scope)(nil),                    // 15: idem.v1.Scope
	(*ClaimRequest)(nil),             // 16: idem.v1.ClaimRequest
	(*ClaimResponse)(nil),            // 17: idem.v1.ClaimResponse
	(*Ownership)(nil),                // 18: idem.v1.Ownership
	(*Acquired)(nil),                 // 19: idem.v1.Acquired
	(*ReconcileFirst)(nil),           // 20: idem.v1.ReconcileFirst
	(*Pending)(nil),                  // 21: idem.v1.Pending
	(*Completed)(nil),                // 22: idem.v1.Completed
	(*NeedsReconciliation)(nil),      // 23: idem.v1.NeedsReconciliation
	(*Result)(nil),                   // 24: idem.v1.Result
	(*OperationError)(nil),           // 25: idem.v1.OperationError
	(*RenewRequest)(nil),             // 26: idem.v1.RenewRequest
	(*RenewResponse)(nil),            // 27: idem.v1.RenewResponse
	(*CompleteRequest)(nil),          // 28: idem.v1.CompleteRequest
	(*CompleteResponse)(nil),         // 29: idem.v1.CompleteResponse
	(*FailRequest)(nil),              // 30: idem.v1.FailRequest
	(*FailResponse)(nil),             // 31: idem.v1.FailResponse
	(*LookupRequest)(nil),            // 32: idem.v1.LookupRequest
	(*LookupResponse)(nil),           // 33: idem.v1.LookupResponse
	(*Operation)(nil),                // 34: idem.v1.Operation
	(*HistoryEntry)(nil),             // 35: idem.v1.HistoryEntry
	(*ReconcileRequest)(nil),         // 36: idem.v1.ReconcileRequest
	(*NotApplied)(nil),               // 37: idem.v1.NotApplied
	(*ReconcileResponse)(nil),        // 38: idem.v1.ReconcileResponse
	(*ListUnresolvedRequest)(nil),    // 39: idem.v1.ListUnresolvedRequest
	(*ListUnresolvedResponse)(nil),   // 40: idem.v1.ListUnresolvedResponse
	(*ListOperationsRequest)(nil),    // 41: idem.v1.ListOperationsRequest
	(*ListOperationsResponse)(nil),   // 42: idem.v1.ListOperationsResponse
	(*ForgetRequest)(nil),            // 43: idem.v1.ForgetRequest
	(*ForgetResponse)(nil),           // 44: idem.v1.ForgetResponse
	(*GetPolicyRequest)(nil),         // 45: idem.v1.GetPolicyRequest
	(*GetPolicyResponse)(nil),        // 46: idem.v1.GetPolicyResponse
	(*HoldRequest)(nil),              // 47: idem.v1.HoldRequest
	(*Hold)(nil),                     // 48: idem.v1.Hold
	(*HoldResponse)(nil),             // 49: idem.v1.HoldResponse
	(*ReleaseRequest)(nil),           // 50: idem.v1.ReleaseRequest
	(*ReleaseResponse)(nil),          // 51: idem.v1.ReleaseResponse
	(*ListHoldsRequest)(nil),         // 52: idem.v1.ListHoldsRequest
	(*ListHoldsResponse)(nil),        // 53: idem.v1.ListHoldsResponse
	(*DiagnoseEvidence)(nil),         // 54: idem.v1.DiagnoseEvidence
	(*DiagnoseConstraints)(nil),      // 55: idem.v1.DiagnoseConstraints
	(*DiagnoseRequest)(nil),          // 56: idem.v1.DiagnoseRequest
	(*Diagnosis)(nil),                // 57: idem.v1.Diagnosis
	(*PlanStep)(nil),                 // 58: idem.v1.PlanStep
	(*VerificationCheck)(nil),        // 59: idem.v1.VerificationCheck
	(*Observation)(nil),              // 60: idem.v1.Observation
	(*Confidence)(nil),               // 61: idem.v1.Confidence
	(*Handoff)(nil),                  // 62: idem.v1.Handoff
	(*DiagnoseResponse)(nil),         // 63: idem.v1.DiagnoseResponse
	nil,                              // 64: idem.v1.Result.MetadataEntry
	nil,                              // 65: idem.v1.OperationError.MetadataEntry
	(*durationpb.Duration)(nil),      // 66: google.protobuf.Duration
	(*timestamppb.Timestamp)(nil),    // 67: google.protobuf.Timestamp
}
var file_idem_v1_idempotency_proto_depIdxs = []int32{
	15,  // 0: idem.v1.ClaimRequest.scope:type_name -> idem.v1.Scope
	66,  // 1: idem.v1.ClaimRequest.lease:type_name -> google.protobuf.Duration
	66,  // 2: idem.v1.ClaimRequest.max_attempt_duration:type_name -> google.protobuf.Duration
	66,  // 3: idem.v1.ClaimRequest.retention:type_name -> google.protobuf.Duration
	66,  // 4: idem.v1.ClaimRequest.operation_deadline:type_name -> google.protobuf.Duration
	66,  // 5: idem.v1.ClaimRequest.wait:type_name -> google.protobuf.Duration
	19,  // 6: idem.v1.ClaimResponse.acquired:type_name -> idem.v1.Acquired
	20,  // 7: idem.v1.ClaimResponse.reconcile_first:type_name -> idem.v1.ReconcileFirst
	21,  // 8: idem.v1.ClaimResponse.pending:type_name -> idem.v1.Pending
	22,  // 9: idem.v1.ClaimResponse.completed:type_name -> idem.v1.Completed
	23,  // 10: idem.v1.ClaimResponse.needs_reconciliation:type_name -> idem.v1.NeedsReconciliation
	66,  // 11: idem.v1.Ownership.lease:type_name -> google.protobuf.Duration
	66,  // 12: idem.v1.Ownership.attempt_deadline:type_name -> google.protobuf.Duration
	18,  // 13: idem.v1.Acquired.ownership:type_name -> idem.v1.Ownership
	18,  // 14: idem.v1.ReconcileFirst.ownership:type_name -> idem.v1.Ownership
	2,   // 15: idem.v1.ReconcileFirst.previous_state:type_name -> idem.v1.OperationState
	66,  // 16: idem.v1.ReconcileFirst.previous_attempt_deadline:type_name -> google.protobuf.Duration
	0,   // 17: idem.v1.Pending.reason:type_name -> idem.v1.PendingReason
	66,  // 18: idem.v1.Pending.retry_after:type_name -> google.protobuf.Duration
	2,   // 19: idem.v1.Completed.state:type_name -> idem.v1.OperationState
	24,  // 20: idem.v1.Completed.result:type_name -> idem.v1.Result
	25,  // 21: idem.v1.Completed.error:type_name -> idem.v1.OperationError
	67,  // 22: idem.v1.Completed.completed_at:type_name -> google.protobuf.Timestamp
	67,  // 23: idem.v1.Completed.retain_until:type_name -> google.protobuf.Timestamp
	64,  // 24: idem.v1.Result.metadata:type_name -> idem.v1.Result.MetadataEntry
	1,   // 25: idem.v1.OperationError.reason:type_name -> idem.v1.FailureReason
	65,  // 26: idem.v1.OperationError.metadata:type_name -> idem.v1.OperationError.MetadataEntry
	66,  // 27: idem.v1.RenewRequest.lease:type_name -> google.protobuf.Duration
	66,  // 28: idem.v1.RenewResponse.lease:type_name -> google.protobuf.Duration
	66,  // 29: idem.v1.RenewResponse.attempt_deadline:type_name -> google.protobuf.Duration
	24,  // 30: idem.v1.CompleteRequest.result:type_name -> idem.v1.Result
	2,   // 31: idem.v1.CompleteResponse.state:type_name -> idem.v1.OperationState
	4,   // 32: idem.v1.FailRequest.disposition:type_name -> idem.v1.FailDisposition
	25,  // 33: idem.v1.FailRequest.error:type_name -> idem.v1.OperationError
	66,  // 34: idem.v1.FailRequest.retry_after:type_name -> google.protobuf.Duration
	2,   // 35: idem.v1.FailResponse.state:type_name -> idem.v1.OperationState
	1,   // 36: idem.v1.FailResponse.reason:type_name -> idem.v1.FailureReason
	66,  // 37: idem.v1.FailResponse.retry_after:type_name -> google.protobuf.Duration
	15,  // 38: idem.v1.LookupRequest.scope:type_name -> idem.v1.Scope
	34,  // 39: idem.v1.LookupResponse.operation:type_name -> idem.v1.Operation
	35,  // 40: idem.v1.LookupResponse.history:type_name -> idem.v1.HistoryEntry
	15,  // 41: idem.v1.Operation.scope:type_name -> idem.v1.Scope
	2,   // 42: idem.v1.Operation.state:type_name -> idem.v1.OperationState
	24,  // 43: idem.v1.Operation.result:type_name -> idem.v1.Result
	25,  // 44: idem.v1.Operation.error:type_name -> idem.v1.OperationError
	67,  // 45: idem.v1.Operation.created_at:type_name -> google.protobuf.Timestamp
	67,  // 46: idem.v1.Operation.updated_at:type_name -> google.protobuf.Timestamp
	67,  // 47: idem.v1.Operation.lease_expires_at:type_name -> google.protobuf.Timestamp
	67,  // 48: idem.v1.Operation.attempt_deadline_at:type_name -> google.protobuf.Timestamp
	67,  // 49: idem.v1.Operation.retry_at:type_name -> google.protobuf.Timestamp
	67,  // 50: idem.v1.Operation.completed_at:type_name -> google.protobuf.Timestamp
	67,  // 51: idem.v1.Operation.retain_until:type_name -> google.protobuf.Timestamp
	67,  // 52: idem.v1.Operation.operation_deadline_at:type_name -> google.protobuf.Timestamp
	3,   // 53: idem.v1.Operation.on_failed:type_name -> idem.v1.OnFailed
	67,  // 54: idem.v1.Operation.last_conflict_at:type_name -> google.protobuf.Timestamp
	67,  // 55: idem.v1.Operation.last_replay_at:type_name -> google.protobuf.Timestamp
	2,   // 56: idem.v1.HistoryEntry.from_state:type_name -> idem.v1.OperationState
	2,   // 57: idem.v1.HistoryEntry.to_state:type_name -> idem.v1.OperationState
	67,  // 58: idem.v1.HistoryEntry.at:type_name -> google.protobuf.Timestamp
	67,  // 59: idem.v1.HistoryEntry.last_at:type_name -> google.protobuf.Timestamp
	24,  // 60: idem.v1.ReconcileRequest.succeeded:type_name -> idem.v1.Result
	25,  // 61: idem.v1.ReconcileRequest.failed:type_name -> idem.v1.OperationError
	37,  // 62: idem.v1.ReconcileRequest.not_applied:type_name -> idem.v1.NotApplied
	2,   // 63: idem.v1.ReconcileResponse.state:type_name -> idem.v1.OperationState
	34,  // 64: idem.v1.ListUnresolvedResponse.operations:type_name -> idem.v1.Operation
	14,  // 65: idem.v1.ListOperationsRequest.order:type_name -> idem.v1.ListOperationsRequest.Order
	34,  // 66: idem.v1.ListOperationsResponse.operations:type_name -> idem.v1.Operation
	2,   // 67: idem.v1.ForgetResponse.state:type_name -> idem.v1.OperationState
	67,  // 68: idem.v1.ForgetResponse.retain_until:type_name -> google.protobuf.Timestamp
	66,  // 69: idem.v1.GetPolicyResponse.default_lease:type_name -> google.protobuf.Duration
	66,  // 70: idem.v1.GetPolicyResponse.max_lease:type_name -> google.protobuf.Duration
	66,  // 71: idem.v1.GetPolicyResponse.default_max_attempt_duration:type_name -> google.protobuf.Duration
	66,  // 72: idem.v1.GetPolicyResponse.max_attempt_duration:type_name -> google.protobuf.Duration
	66,  // 73: idem.v1.GetPolicyResponse.default_retention:type_name -> google.protobuf.Duration
	66,  // 74: idem.v1.GetPolicyResponse.max_retention:type_name -> google.protobuf.Duration
	66,  // 75: idem.v1.GetPolicyResponse.default_operation_deadline:type_name -> google.protobuf.Duration
	66,  // 76: idem.v1.GetPolicyResponse.max_operation_deadline:type_name -> google.protobuf.Duration
	3,   // 77: idem.v1.GetPolicyResponse.on_failed:type_name -> idem.v1.OnFailed
	66,  // 78: idem.v1.HoldRequest.retry_after:type_name -> google.protobuf.Duration
	66,  // 79: idem.v1.Hold.retry_after:type_name -> google.protobuf.Duration
	67,  // 80: idem.v1.Hold.held_at:type_name -> google.protobuf.Timestamp
	48,  // 81: idem.v1.HoldResponse.hold:type_name -> idem.v1.Hold
	48,  // 82: idem.v1.ReleaseResponse.released:type_name -> idem.v1.Hold
	48,  // 83: idem.v1.ListHoldsResponse.holds:type_name -> idem.v1.Hold
	5,   // 84: idem.v1.DiagnoseEvidence.symptom:type_name -> idem.v1.Symptom
	6,   // 85: idem.v1.DiagnoseEvidence.provider_finding:type_name -> idem.v1.ProviderFinding
	66,  // 86: idem.v1.DiagnoseEvidence.provider_looked_ago:type_name -> google.protobuf.Duration
	66,  // 87: idem.v1.DiagnoseEvidence.observed_ago:type_name -> google.protobuf.Duration
	7,   // 88: idem.v1.DiagnoseConstraints.authority:type_name -> idem.v1.Authority
	66,  // 89: idem.v1.DiagnoseConstraints.wait_budget:type_name -> google.protobuf.Duration
	15,  // 90: idem.v1.DiagnoseRequest.scope:type_name -> idem.v1.Scope
	54,  // 91: idem.v1.DiagnoseRequest.evidence:type_name -> idem.v1.DiagnoseEvidence
	55,  // 92: idem.v1.DiagnoseRequest.constraints:type_name -> idem.v1.DiagnoseConstraints
	8,   // 93: idem.v1.Diagnosis.cause:type_name -> idem.v1.Cause
	9,   // 94: idem.v1.Diagnosis.layer:type_name -> idem.v1.Layer
	10,  // 95: idem.v1.PlanStep.kind:type_name -> idem.v1.MoveKind
	66,  // 96: idem.v1.PlanStep.wait:type_name -> google.protobuf.Duration
	11,  // 97: idem.v1.Observation.source:type_name -> idem.v1.ObservationSource
	12,  // 98: idem.v1.Confidence.level:type_name -> idem.v1.ConfidenceLevel
	60,  // 99: idem.v1.Confidence.observations:type_name -> idem.v1.Observation
	15,  // 100: idem.v1.Handoff.scope:type_name -> idem.v1.Scope
	2,   // 101: idem.v1.Handoff.state:type_name -> idem.v1.OperationState
	13,  // 102: idem.v1.DiagnoseResponse.verdict:type_name -> idem.v1.Verdict
	57,  // 103: idem.v1.DiagnoseResponse.diagnosis:type_name -> idem.v1.Diagnosis
	58,  // 104: idem.v1.DiagnoseResponse.plan:type_name -> idem.v1.PlanStep
	59,  // 105: idem.v1.DiagnoseResponse.verification:type_name -> idem.v1.VerificationCheck
	62,  // 106: idem.v1.DiagnoseResponse.handoff:type_name -> idem.v1.Handoff
	61,  // 107: idem.v1.DiagnoseResponse.confidence:type_name -> idem.v1.Confidence
	57,  // 108: idem.v1.DiagnoseResponse.also:type_name -> idem.v1.Diagnosis
	16,  // 109: idem.v1.IdempotencyService.Claim:input_type -> idem.v1.ClaimRequest
	26,  // 110: idem.v1.IdempotencyService.Renew:input_type -> idem.v1.RenewRequest
	28,  // 111: idem.v1.IdempotencyService.Complete:input_type -> idem.v1.CompleteRequest
	30,  // 112: idem.v1.IdempotencyService.Fail:input_type -> idem.v1.FailRequest
	32,  // 113: idem.v1.IdempotencyService.Lookup:input_type -> idem.v1.LookupRequest
	36,  // 114: idem.v1.IdempotencyService.Reconcile:input_type -> idem.v1.ReconcileRequest
	39,  // 115: idem.v1.IdempotencyService.ListUnresolved:input_type -> idem.v1.ListUnresolvedRequest
	41,  // 116: idem.v1.IdempotencyService.ListOperations:input_type -> idem.v1.ListOperationsRequest
	43,  // 117: idem.v1.IdempotencyService.Forget:input_type -> idem.v1.ForgetRequest
	45,  // 118: idem.v1.IdempotencyService.GetPolicy:input_type -> idem.v1.GetPolicyRequest
	47,  // 119: idem.v1.IdempotencyService.Hold:input_type -> idem.v1.HoldRequest
	50,  // 120: idem.v1.IdempotencyService.Release:input_type -> idem.v1.ReleaseRequest
	52,  // 121: idem.v1.IdempotencyService.ListHolds:input_type -> idem.v1.ListHoldsRequest
	56,  // 122: idem.v1.IdempotencyService.Diagnose:input_type -> idem.v1.DiagnoseRequest
	17,  // 123: idem.v1.IdempotencyService.Claim:output_type -> idem.v1.ClaimResponse
	27,  // 124: idem.v1.IdempotencyService.Renew:output_type -> idem.v1.RenewResponse
	29,  // 125: idem.v1.IdempotencyService.Complete:output_type -> idem.v1.CompleteResponse
	31,  // 126: idem.v1.IdempotencyService.Fail:output_type -> idem.v1.FailResponse
	33,  // 127: idem.v1.IdempotencyService.Lookup:output_type -> idem.v1.LookupResponse
	38,  // 128: idem.v1.IdempotencyService.Reconcile:output_type -> idem.v1.ReconcileResponse
	40,  // 129: idem.v1.IdempotencyService.ListUnresolved:output_type -> idem.v1.ListUnresolvedResponse
	42,  // 130: idem.v1.IdempotencyService.ListOperations:output_type -> idem.v1.ListOperationsResponse
	44,  // 131: idem.v1.IdempotencyService.Forget:output_type -> idem.v1.ForgetResponse
	46,  // 132: idem.v1.IdempotencyService.GetPolicy:output_type -> idem.v1.GetPolicyResponse
	49,  // 133: idem.v1.IdempotencyService.Hold:output_type -> idem.v1.HoldResponse
	51,  // 134: idem.v1.IdempotencyService.Release:output_type -> idem.v1.ReleaseResponse
	53,  // 135: idem.v1.IdempotencyService.ListHolds:output_type -> idem.v1.ListHoldsResponse
	63,  // 136: idem.v1.IdempotencyService.Diagnose:output_type -> idem.v1.DiagnoseResponse
	123, // [123:137] is the sub-list for method output_type
	109, // [109:123] is the sub-list for method input_type
	109, // [109:109] is the sub-list for extension type_name
	109, // [109:109] is the sub-list for extension extendee
	0,   // [0:109] is the sub-list for field type_name
}

func init() { file_idem_v1_idempotency_proto_init() }
func file_idem_v1_idempotency_proto_init() {
	if File_idem_v1_idempotency_proto != nil {
		return
	}
	file_idem_v1_idempotency_proto_msgTypes[1].OneofWrappers = []any{
		(*ClaimRequest_Fingerprint)(nil),
		(*ClaimRequest_JsonPayload)(nil),
		(*ClaimRequest_BytesPayload)(nil),
	}
	file_idem_v1_idempotency_proto_msgTypes[2].OneofWrappers = []any{
		(*ClaimResponse_Acquired)(nil),
		(*ClaimResponse_ReconcileFirst)(nil),
		(*ClaimResponse_Pending)(nil),
		(*ClaimResponse_Completed)(nil),
		(*ClaimResponse_NeedsReconciliation)(nil),
	}
	file_idem_v1_idempotency_proto_msgTypes[7].OneofWrappers = []any{
		(*Completed_Result)(nil),
		(*Completed_Error)(nil),
	}
	file_idem_v1_idempotency_proto_msgTypes[17].OneofWrappers = []any{
		(*LookupRequest_Scope)(nil),
		(*LookupRequest_OperationId)(nil),
	}
	file_idem_v1_idempotency_proto_msgTypes[21].OneofWrappers = []any{
		(*ReconcileRequest_Succeeded)(nil),
		(*ReconcileRequest_Failed)(nil),
		(*ReconcileRequest_NotApplied)(nil),
	}
	file_idem_v1_idempotency_proto_msgTypes[39].OneofWrappers = []any{
		(*DiagnoseEvidence_Fingerprint)(nil),
		(*DiagnoseEvidence_JsonPayload)(nil),
		(*DiagnoseEvidence_BytesPayload)(nil),
	}
	file_idem_v1_idempotency_proto_msgTypes[40].OneofWrappers = []any{}
	file_idem_v1_idempotency_proto_msgTypes[41].OneofWrappers = []any{
		(*DiagnoseRequest_Scope)(nil),
		(*DiagnoseRequest_OperationId)(nil),
	}
	type x struct{}
	out := protoimpl.TypeBuilder{
		File: protoimpl.DescBuilder{
			GoPackagePath: reflect.TypeOf(x{}).PkgPath(),
			RawDescriptor: unsafe.Slice(unsafe.StringData(file_idem_v1_idempotency_proto_rawDesc), len(file_idem_v1_idempotency_proto_rawDesc)),
			NumEnums:      15,
			NumMessages:   51,
			NumExtensions: 0,
			NumServices:   1,
		},
		GoTypes:           file_idem_v1_idempotency_proto_goTypes,
		DependencyIndexes: file_idem_v1_idempotency_proto_depIdxs,
		EnumInfos:         file_idem_v1_idempotency_proto_enumTypes,
		MessageInfos:      file_idem_v1_idempotency_proto_msgTypes,
	}.Build()
	File_idem_v1_idempotency_proto = out.File
	file_idem_v1_idempotency_proto_goTypes = nil
	file_idem_v1_idempotency_proto_depIdxs = nil
}
