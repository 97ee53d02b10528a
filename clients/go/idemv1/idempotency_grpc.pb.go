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

// Code generated by protoc-gen-go-grpc. DO NOT EDIT.
// versions:
// - protoc-gen-go-grpc v1.6.2
// - protoc             (unknown)
// source: idem/v1/idempotency.proto

package idemv1

import (
	context "context"
	grpc "google.golang.org/grpc"
	codes "google.golang.org/grpc/codes"
	status "google.golang.org/grpc/status"
)

// This is a compile-time assertion to ensure that this generated file
// is compatible with the grpc package it is being compiled against.
// Requires gRPC-Go v1.64.0 or later.
const _ = grpc.SupportPackageIsVersion9

const (
	IdempotencyService_Claim_FullMethodName          = "/idem.v1.IdempotencyService/Claim"
	IdempotencyService_Renew_FullMethodName          = "/idem.v1.IdempotencyService/Renew"
	IdempotencyService_Complete_FullMethodName       = "/idem.v1.IdempotencyService/Complete"
	IdempotencyService_Fail_FullMethodName           = "/idem.v1.IdempotencyService/Fail"
	IdempotencyService_Lookup_FullMethodName         = "/idem.v1.IdempotencyService/Lookup"
	IdempotencyService_Reconcile_FullMethodName      = "/idem.v1.IdempotencyService/Reconcile"
	IdempotencyService_ListUnresolved_FullMethodName = "/idem.v1.IdempotencyService/ListUnresolved"
	IdempotencyService_ListOperations_FullMethodName = "/idem.v1.IdempotencyService/ListOperations"
	IdempotencyService_Forget_FullMethodName         = "/idem.v1.IdempotencyService/Forget"
	IdempotencyService_GetPolicy_FullMethodName      = "/idem.v1.IdempotencyService/GetPolicy"
	IdempotencyService_Hold_FullMethodName           = "/idem.v1.IdempotencyService/Hold"
	IdempotencyService_Release_FullMethodName        = "/idem.v1.IdempotencyService/Release"
	IdempotencyService_ListHolds_FullMethodName      = "/idem.v1.IdempotencyService/ListHolds"
	IdempotencyService_Diagnose_FullMethodName       = "/idem.v1.IdempotencyService/Diagnose"
)

// IdempotencyServiceClient is the client API for IdempotencyService service.
//
// For semantics around ctx use and closing/ending streaming RPCs, please refer to https://pkg.go.dev/google.golang.org/grpc/?tab=doc#ClientConn.NewStream.
//
// IdempotencyService coordinates callers so that one logical operation, identified by
// (tenant, operation, key), produces at most one business effect.
type IdempotencyServiceClient interface {
	// Start or rejoin an operation. Execute the effect only on Acquired, or on
	// ReconcileFirst after checking the provider. Treat any other or unknown
	// outcome as "do not execute".
	Claim(ctx context.Context, in *ClaimRequest, opts ...grpc.CallOption) (*ClaimResponse, error)
	// Extend the owner's lease, never beyond the attempt deadline.
	Renew(ctx context.Context, in *RenewRequest, opts ...grpc.CallOption) (*RenewResponse, error)
	// Record the success result. Only the current fence may.
	Complete(ctx context.Context, in *CompleteRequest, opts ...grpc.CallOption) (*CompleteResponse, error)
	// Record a failure with a disposition. Only the current fence may.
	Fail(ctx context.Context, in *FailRequest, opts ...grpc.CallOption) (*FailResponse, error)
	// Read an operation by scope or by operation_id, with its history.
	Lookup(ctx context.Context, in *LookupRequest, opts ...grpc.CallOption) (*LookupResponse, error)
	// Resolve an operation whose outcome is unknown from outside evidence.
	Reconcile(ctx context.Context, in *ReconcileRequest, opts ...grpc.CallOption) (*ReconcileResponse, error)
	// Page through the operations that need reconciliation, oldest first.
	ListUnresolved(ctx context.Context, in *ListUnresolvedRequest, opts ...grpc.CallOption) (*ListUnresolvedResponse, error)
	// Page through a tenant's operations that match a filter (state, name, key,
	// id, age, attempts, takeovers, deadlines), oldest or newest first. Needs
	// the reconcile or the admin scope; an admin credential may list every
	// tenant's.
	ListOperations(ctx context.Context, in *ListOperationsRequest, opts ...grpc.CallOption) (*ListOperationsResponse, error)
	// Turn a completed (SUCCEEDED or FAILED) operation into a tombstone before
	// its retention ends: a legal deletion request, a poisoned result. Its
	// stored result or error is dropped; the scope then answers Claims with
	// RESULT_EXPIRED exactly as after retention. Needs the admin scope; the
	// history and the audit log record who forgot it and why. Never forgets an
	// operation that has not ended.
	Forget(ctx context.Context, in *ForgetRequest, opts ...grpc.CallOption) (*ForgetResponse, error)
	// The effective policy for an operation name: the defaults and ceilings a
	// first Claim of that name gets, and which policy entry decided them (or
	// that the server's own bounds apply). Needs the reconcile or the admin
	// scope.
	GetPolicy(ctx context.Context, in *GetPolicyRequest, opts ...grpc.CallOption) (*GetPolicyResponse, error)
	// Stop new owners of an operation name, or of a whole tenant, while its
	// unresolved operations are drained: a Claim that would start a new
	// operation or a new attempt is told Pending (PENDING_REASON_HELD) with
	// the hold's retry_after; replays, the owners already running, Lookup and
	// Reconcile go on, and nothing is deleted. Each replica sees a hold within
	// about a second. Needs the admin scope; audited.
	Hold(ctx context.Context, in *HoldRequest, opts ...grpc.CallOption) (*HoldResponse, error)
	// End a hold: new owners are made again (within about a second on every
	// replica). Needs the admin scope; audited. NOT_FOUND when nothing is held.
	Release(ctx context.Context, in *ReleaseRequest, opts ...grpc.CallOption) (*ReleaseResponse, error)
	// The holds in force: the caller's tenant's, or an admin's across tenants.
	// Needs the reconcile or the admin scope.
	ListHolds(ctx context.Context, in *ListHoldsRequest, opts ...grpc.CallOption) (*ListHoldsResponse, error)
	// Say what the evidence about one operation means and what the next safe
	// move is: a diagnosis (which layer, what it means), an ordered plan, the
	// checks that would confirm it, a handoff record and a confidence scored
	// from the independent observations behind it. Reads only: it changes
	// nothing and stores nothing of the evidence. Evidence that carries a
	// secret is INVALID_ARGUMENT (EVIDENCE_CARRIES_SECRET, naming the field
	// and the kind, never the value); a plan beyond the caller's scope or its
	// constraints is PERMISSION_DENIED (PLAN_EXCEEDS_SCOPE,
	// PLAN_EXCEEDS_BUDGET, PLAN_NOT_REVERSIBLE, PLAN_EXCEEDS_AUTHORITY);
	// evidence missing, contradictory or too stale to support a move is the
	// verdict ESCALATE, naming what is missing. Needs the operations,
	// reconcile or admin scope, as Lookup does.
	Diagnose(ctx context.Context, in *DiagnoseRequest, opts ...grpc.CallOption) (*DiagnoseResponse, error)
}

type idempotencyServiceClient struct {
	cc grpc.ClientConnInterface
}

func NewIdempotencyServiceClient(cc grpc.ClientConnInterface) IdempotencyServiceClient {
	return &idempotencyServiceClient{cc}
}

func (c *idempotencyServiceClient) Claim(ctx context.Context, in *ClaimRequest, opts ...grpc.CallOption) (*ClaimResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(ClaimResponse)
	err := c.cc.Invoke(ctx, IdempotencyService_Claim_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *idempotencyServiceClient) Renew(ctx context.Context, in *RenewRequest, opts ...grpc.CallOption) (*RenewResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(RenewResponse)
	err := c.cc.Invoke(ctx, IdempotencyService_Renew_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *idempotencyServiceClient) Complete(ctx context.Context, in *CompleteRequest, opts ...grpc.CallOption) (*CompleteResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(CompleteResponse)
	err := c.cc.Invoke(ctx, IdempotencyService_Complete_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *idempotencyServiceClient) Fail(ctx context.Context, in *FailRequest, opts ...grpc.CallOption) (*FailResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(FailResponse)
	err := c.cc.Invoke(ctx, IdempotencyService_Fail_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *idempotencyServiceClient) Lookup(ctx context.Context, in *LookupRequest, opts ...grpc.CallOption) (*LookupResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(LookupResponse)
	err := c.cc.Invoke(ctx, IdempotencyService_Lookup_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *idempotencyServiceClient) Reconcile(ctx context.Context, in *ReconcileRequest, opts ...grpc.CallOption) (*ReconcileResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(ReconcileResponse)
	err := c.cc.Invoke(ctx, IdempotencyService_Reconcile_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *idempotencyServiceClient) ListUnresolved(ctx context.Context, in *ListUnresolvedRequest, opts ...grpc.CallOption) (*ListUnresolvedResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(ListUnresolvedResponse)
	err := c.cc.Invoke(ctx, IdempotencyService_ListUnresolved_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *idempotencyServiceClient) ListOperations(ctx context.Context, in *ListOperationsRequest, opts ...grpc.CallOption) (*ListOperationsResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(ListOperationsResponse)
	err := c.cc.Invoke(ctx, IdempotencyService_ListOperations_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *idempotencyServiceClient) Forget(ctx context.Context, in *ForgetRequest, opts ...grpc.CallOption) (*ForgetResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(ForgetResponse)
	err := c.cc.Invoke(ctx, IdempotencyService_Forget_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *idempotencyServiceClient) GetPolicy(ctx context.Context, in *GetPolicyRequest, opts ...grpc.CallOption) (*GetPolicyResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(GetPolicyResponse)
	err := c.cc.Invoke(ctx, IdempotencyService_GetPolicy_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *idempotencyServiceClient) Hold(ctx context.Context, in *HoldRequest, opts ...grpc.CallOption) (*HoldResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(HoldResponse)
	err := c.cc.Invoke(ctx, IdempotencyService_Hold_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *idempotencyServiceClient) Release(ctx context.Context, in *ReleaseRequest, opts ...grpc.CallOption) (*ReleaseResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(ReleaseResponse)
	err := c.cc.Invoke(ctx, IdempotencyService_Release_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *idempotencyServiceClient) ListHolds(ctx context.Context, in *ListHoldsRequest, opts ...grpc.CallOption) (*ListHoldsResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(ListHoldsResponse)
	err := c.cc.Invoke(ctx, IdempotencyService_ListHolds_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *idempotencyServiceClient) Diagnose(ctx context.Context, in *DiagnoseRequest, opts ...grpc.CallOption) (*DiagnoseResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(DiagnoseResponse)
	err := c.cc.Invoke(ctx, IdempotencyService_Diagnose_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// IdempotencyServiceServer is the server API for IdempotencyService service.
// All implementations must embed UnimplementedIdempotencyServiceServer
// for forward compatibility.
//
// IdempotencyService coordinates callers so that one logical operation, identified by
// (tenant, operation, key), produces at most one business effect.
type IdempotencyServiceServer interface {
	// Start or rejoin an operation. Execute the effect only on Acquired, or on
	// ReconcileFirst after checking the provider. Treat any other or unknown
	// outcome as "do not execute".
	Claim(context.Context, *ClaimRequest) (*ClaimResponse, error)
	// Extend the owner's lease, never beyond the attempt deadline.
	Renew(context.Context, *RenewRequest) (*RenewResponse, error)
	// Record the success result. Only the current fence may.
	Complete(context.Context, *CompleteRequest) (*CompleteResponse, error)
	// Record a failure with a disposition. Only the current fence may.
	Fail(context.Context, *FailRequest) (*FailResponse, error)
	// Read an operation by scope or by operation_id, with its history.
	Lookup(context.Context, *LookupRequest) (*LookupResponse, error)
	// Resolve an operation whose outcome is unknown from outside evidence.
	Reconcile(context.Context, *ReconcileRequest) (*ReconcileResponse, error)
	// Page through the operations that need reconciliation, oldest first.
	ListUnresolved(context.Context, *ListUnresolvedRequest) (*ListUnresolvedResponse, error)
	// Page through a tenant's operations that match a filter (state, name, key,
	// id, age, attempts, takeovers, deadlines), oldest or newest first. Needs
	// the reconcile or the admin scope; an admin credential may list every
	// tenant's.
	ListOperations(context.Context, *ListOperationsRequest) (*ListOperationsResponse, error)
	// Turn a completed (SUCCEEDED or FAILED) operation into a tombstone before
	// its retention ends: a legal deletion request, a poisoned result. Its
	// stored result or error is dropped; the scope then answers Claims with
	// RESULT_EXPIRED exactly as after retention. Needs the admin scope; the
	// history and the audit log record who forgot it and why. Never forgets an
	// operation that has not ended.
	Forget(context.Context, *ForgetRequest) (*ForgetResponse, error)
	// The effective policy for an operation name: the defaults and ceilings a
	// first Claim of that name gets, and which policy entry decided them (or
	// that the server's own bounds apply). Needs the reconcile or the admin
	// scope.
	GetPolicy(context.Context, *GetPolicyRequest) (*GetPolicyResponse, error)
	// Stop new owners of an operation name, or of a whole tenant, while its
	// unresolved operations are drained: a Claim that would start a new
	// operation or a new attempt is told Pending (PENDING_REASON_HELD) with
	// the hold's retry_after; replays, the owners already running, Lookup and
	// Reconcile go on, and nothing is deleted. Each replica sees a hold within
	// about a second. Needs the admin scope; audited.
	Hold(context.Context, *HoldRequest) (*HoldResponse, error)
	// End a hold: new owners are made again (within about a second on every
	// replica). Needs the admin scope; audited. NOT_FOUND when nothing is held.
	Release(context.Context, *ReleaseRequest) (*ReleaseResponse, error)
	// The holds in force: the caller's tenant's, or an admin's across tenants.
	// Needs the reconcile or the admin scope.
	ListHolds(context.Context, *ListHoldsRequest) (*ListHoldsResponse, error)
	// Say what the evidence about one operation means and what the next safe
	// move is: a diagnosis (which layer, what it means), an ordered plan, the
	// checks that would confirm it, a handoff record and a confidence scored
	// from the independent observations behind it. Reads only: it changes
	// nothing and stores nothing of the evidence. Evidence that carries a
	// secret is INVALID_ARGUMENT (EVIDENCE_CARRIES_SECRET, naming the field
	// and the kind, never the value); a plan beyond the caller's scope or its
	// constraints is PERMISSION_DENIED (PLAN_EXCEEDS_SCOPE,
	// PLAN_EXCEEDS_BUDGET, PLAN_NOT_REVERSIBLE, PLAN_EXCEEDS_AUTHORITY);
	// evidence missing, contradictory or too stale to support a move is the
	// verdict ESCALATE, naming what is missing. Needs the operations,
	// reconcile or admin scope, as Lookup does.
	Diagnose(context.Context, *DiagnoseRequest) (*DiagnoseResponse, error)
	mustEmbedUnimplementedIdempotencyServiceServer()
}

// UnimplementedIdempotencyServiceServer must be embedded to have
// forward compatible implementations.
//
// NOTE: this should be embedded by value instead of pointer to avoid a nil
// pointer dereference when methods are called.
type UnimplementedIdempotencyServiceServer struct{}

func (UnimplementedIdempotencyServiceServer) Claim(context.Context, *ClaimRequest) (*ClaimResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method Claim not implemented")
}
func (UnimplementedIdempotencyServiceServer) Renew(context.Context, *RenewRequest) (*RenewResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method Renew not implemented")
}
func (UnimplementedIdempotencyServiceServer) Complete(context.Context, *CompleteRequest) (*CompleteResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method Complete not implemented")
}
func (UnimplementedIdempotencyServiceServer) Fail(context.Context, *FailRequest) (*FailResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method Fail not implemented")
}
func (UnimplementedIdempotencyServiceServer) Lookup(context.Context, *LookupRequest) (*LookupResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method Lookup not implemented")
}
func (UnimplementedIdempotencyServiceServer) Reconcile(context.Context, *ReconcileRequest) (*ReconcileResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method Reconcile not implemented")
}
func (UnimplementedIdempotencyServiceServer) ListUnresolved(context.Context, *ListUnresolvedRequest) (*ListUnresolvedResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method ListUnresolved not implemented")
}
func (UnimplementedIdempotencyServiceServer) ListOperations(context.Context, *ListOperationsRequest) (*ListOperationsResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method ListOperations not implemented")
}
func (UnimplementedIdempotencyServiceServer) Forget(context.Context, *ForgetRequest) (*ForgetResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method Forget not implemented")
}
func (UnimplementedIdempotencyServiceServer) GetPolicy(context.Context, *GetPolicyRequest) (*GetPolicyResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method GetPolicy not implemented")
}
func (UnimplementedIdempotencyServiceServer) Hold(context.Context, *HoldRequest) (*HoldResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method Hold not implemented")
}
func (UnimplementedIdempotencyServiceServer) Release(context.Context, *ReleaseRequest) (*ReleaseResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method Release not implemented")
}
func (UnimplementedIdempotencyServiceServer) ListHolds(context.Context, *ListHoldsRequest) (*ListHoldsResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method ListHolds not implemented")
}
func (UnimplementedIdempotencyServiceServer) Diagnose(context.Context, *DiagnoseRequest) (*DiagnoseResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method Diagnose not implemented")
}
func (UnimplementedIdempotencyServiceServer) mustEmbedUnimplementedIdempotencyServiceServer() {}
func (UnimplementedIdempotencyServiceServer) testEmbeddedByValue()                            {}

// UnsafeIdempotencyServiceServer may be embedded to opt out of forward compatibility for this service.
// Use of this interface is not recommended, as added methods to IdempotencyServiceServer will
// result in compilation errors.
type UnsafeIdempotencyServiceServer interface {
	mustEmbedUnimplementedIdempotencyServiceServer()
}

func RegisterIdempotencyServiceServer(s grpc.ServiceRegistrar, srv IdempotencyServiceServer) {
	// If the following call panics, it indicates UnimplementedIdempotencyServiceServer was
	// embedded by pointer and is nil.  This will cause panics if an
	// unimplemented method is ever invoked, so we test this at initialization
	// time to prevent it from happening at runtime later due to I/O.
	if t, ok := srv.(interface{ testEmbeddedByValue() }); ok {
		t.testEmbeddedByValue()
	}
	s.RegisterService(&IdempotencyService_ServiceDesc, srv)
}

func _IdempotencyService_Claim_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(ClaimRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(IdempotencyServiceServer).Claim(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: IdempotencyService_Claim_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(IdempotencyServiceServer).Claim(ctx, req.(*ClaimRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _IdempotencyService_Renew_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(RenewRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(IdempotencyServiceServer).Renew(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: IdempotencyService_Renew_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(IdempotencyServiceServer).Renew(ctx, req.(*RenewRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _IdempotencyService_Complete_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(CompleteRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(IdempotencyServiceServer).Complete(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: IdempotencyService_Complete_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(IdempotencyServiceServer).Complete(ctx, req.(*CompleteRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _IdempotencyService_Fail_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(FailRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(IdempotencyServiceServer).Fail(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: IdempotencyService_Fail_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(IdempotencyServiceServer).Fail(ctx, req.(*FailRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _IdempotencyService_Lookup_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(LookupRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(IdempotencyServiceServer).Lookup(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: IdempotencyService_Lookup_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(IdempotencyServiceServer).Lookup(ctx, req.(*LookupRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _IdempotencyService_Reconcile_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(ReconcileRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(IdempotencyServiceServer).Reconcile(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: IdempotencyService_Reconcile_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(IdempotencyServiceServer).Reconcile(ctx, req.(*ReconcileRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _IdempotencyService_ListUnresolved_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(ListUnresolvedRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(IdempotencyServiceServer).ListUnresolved(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: IdempotencyService_ListUnresolved_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(IdempotencyServiceServer).ListUnresolved(ctx, req.(*ListUnresolvedRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _IdempotencyService_ListOperations_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(ListOperationsRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(IdempotencyServiceServer).ListOperations(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: IdempotencyService_ListOperations_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(IdempotencyServiceServer).ListOperations(ctx, req.(*ListOperationsRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _IdempotencyService_Forget_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(ForgetRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(IdempotencyServiceServer).Forget(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: IdempotencyService_Forget_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(IdempotencyServiceServer).Forget(ctx, req.(*ForgetRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _IdempotencyService_GetPolicy_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(GetPolicyRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(IdempotencyServiceServer).GetPolicy(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: IdempotencyService_GetPolicy_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(IdempotencyServiceServer).GetPolicy(ctx, req.(*GetPolicyRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _IdempotencyService_Hold_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(HoldRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(IdempotencyServiceServer).Hold(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: IdempotencyService_Hold_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(IdempotencyServiceServer).Hold(ctx, req.(*HoldRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _IdempotencyService_Release_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(ReleaseRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(IdempotencyServiceServer).Release(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: IdempotencyService_Release_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(IdempotencyServiceServer).Release(ctx, req.(*ReleaseRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _IdempotencyService_ListHolds_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(ListHoldsRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(IdempotencyServiceServer).ListHolds(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: IdempotencyService_ListHolds_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(IdempotencyServiceServer).ListHolds(ctx, req.(*ListHoldsRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _IdempotencyService_Diagnose_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(DiagnoseRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(IdempotencyServiceServer).Diagnose(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: IdempotencyService_Diagnose_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(IdempotencyServiceServer).Diagnose(ctx, req.(*DiagnoseRequest))
	}
	return interceptor(ctx, in, info, handler)
}

// IdempotencyService_ServiceDesc is the grpc.ServiceDesc for IdempotencyService service.
// It's only intended for direct use with grpc.RegisterService,
// and not to be introspected or modified (even as a copy)
var IdempotencyService_ServiceDesc = grpc.ServiceDesc{
	ServiceName: "idem.v1.IdempotencyService",
	HandlerType: (*IdempotencyServiceServer)(nil),
	Methods: []grpc.MethodDesc{
		{
			MethodName: "Claim",
			Handler:    _IdempotencyService_Claim_Handler,
		},
		{
			MethodName: "Renew",
			Handler:    _IdempotencyService_Renew_Handler,
		},
		{
			MethodName: "Complete",
			Handler:    _IdempotencyService_Complete_Handler,
		},
		{
			MethodName: "Fail",
			Handler:    _IdempotencyService_Fail_Handler,
		},
		{
			MethodName: "Lookup",
			Handler:    _IdempotencyService_Lookup_Handler,
		},
		{
			MethodName: "Reconcile",
			Handler:    _IdempotencyService_Reconcile_Handler,
		},
		{
			MethodName: "ListUnresolved",
			Handler:    _IdempotencyService_ListUnresolved_Handler,
		},
		{
			MethodName: "ListOperations",
			Handler:    _IdempotencyService_ListOperations_Handler,
		},
		{
			MethodName: "Forget",
			Handler:    _IdempotencyService_Forget_Handler,
		},
		{
			MethodName: "GetPolicy",
			Handler:    _IdempotencyService_GetPolicy_Handler,
		},
		{
			MethodName: "Hold",
			Handler:    _IdempotencyService_Hold_Handler,
		},
		{
			MethodName: "Release",
			Handler:    _IdempotencyService_Release_Handler,
		},
		{
			MethodName: "ListHolds",
			Handler:    _IdempotencyService_ListHolds_Handler,
		},
		{
			MethodName: "Diagnose",
			Handler:    _IdempotencyService_Diagnose_Handler,
		},
	},
	Streams:  []grpc.StreamDesc{},
	Metadata: "idem/v1/idempotency.proto",
}
