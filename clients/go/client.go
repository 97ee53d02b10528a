// Package idemd is the Go client of idemd, a gRPC service that makes a side effect
// (a payment, an order, a message) happen at most once per logical request, however
// often the caller times out, retries or crashes.
//
// Client is a typed wrapper over every RPC (Claim, Renew, Complete, Fail, Lookup,
// Reconcile, ListUnresolved, ListOperations, Forget, GetPolicy): it sends the bearer token on every call, re-sends
// transient failures unchanged (RetryPolicy) and returns *StatusError values
// decoded from the statuses' google.rpc details. Client.ExecuteOnce runs the whole
// client protocol around an effect. The idemdhttp package is the Idempotency-Key
// middleware for net/http.
package idemd

import (
	"context"
	"crypto/rand"
	"fmt"
	mathrand "math/rand/v2"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	idemv1 "github.com/idemd/idemd/clients/go/idemv1"
)

// Version is this client's version, sent in its user agent.
const Version = "0.1.0"

// Client is an idemd client on one gRPC connection. It is safe for concurrent use;
// Close it at the end.
type Client struct {
	conn  *grpc.ClientConn
	owned bool
	rpc   idemv1.IdempotencyServiceClient
	retry RetryPolicy
	now   func() time.Time
}

// New makes a client. The address and token come from the options, else from the
// IDEMD_ADDR and IDEMD_TOKEN environment variables; an empty token is refused at
// once (ErrEmptyToken). New does not connect: the first call does.
func New(options ...Option) (*Client, error) {
	config := clientConfig{retry: DefaultRetryPolicy}
	for _, option := range options {
		option(&config)
	}
	t, err := config.resolve()
	if err != nil {
		return nil, err
	}
	client := &Client{retry: config.retry, now: time.Now}
	creds := bearer{token: config.token}
	if config.conn != nil {
		client.conn = config.conn
		client.rpc = &tokenClient{inner: idemv1.NewIdempotencyServiceClient(config.conn), creds: creds}
		return client, nil
	}
	transport := insecure.NewCredentials()
	if t.tls {
		tlsConfig, err := config.buildTLS()
		if err != nil {
			return nil, err
		}
		transport = credentials.NewTLS(tlsConfig)
	}
	dial := []grpc.DialOption{
		grpc.WithTransportCredentials(transport),
		grpc.WithPerRPCCredentials(creds),
		grpc.WithUserAgent("idemd-go/" + Version),
		// gRPC's own reconnect backoff grows to 120 s, and a connection in that
		// backoff fails every call at once. idemd restarts and failovers are short:
		// reconnect sooner, and let the retry policy pace the re-sends.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay:  100 * time.Millisecond,
				Multiplier: 1.6,
				Jitter:     0.2,
				MaxDelay:   time.Second,
			},
			MinConnectTimeout: 20 * time.Second,
		}),
	}
	conn, err := grpc.NewClient(t.hostPort, append(dial, config.dialOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("idemd: %w", err)
	}
	client.conn, client.owned = conn, true
	client.rpc = idemv1.NewIdempotencyServiceClient(conn)
	return client, nil
}

// Close closes the connection New made (not one given with WithConn).
func (c *Client) Close() error {
	if !c.owned {
		return nil
	}
	return c.conn.Close()
}

// Conn is the client's gRPC connection, e.g. for grpc.health.v1 checks.
func (c *Client) Conn() *grpc.ClientConn { return c.conn }

// bearer sends the token on every call. Plaintext is allowed: idemd behind a mesh
// or on loopback is served without TLS.
type bearer struct{ token string }

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

// tokenClient adds the token to a connection the caller made (WithConn).
type tokenClient struct {
	inner idemv1.IdempotencyServiceClient
	creds bearer
}

func (t *tokenClient) Claim(ctx context.Context, in *idemv1.ClaimRequest, opts ...grpc.CallOption) (*idemv1.ClaimResponse, error) {
	return t.inner.Claim(ctx, in, append(opts, grpc.PerRPCCredentials(t.creds))...)
}

func (t *tokenClient) Renew(ctx context.Context, in *idemv1.RenewRequest, opts ...grpc.CallOption) (*idemv1.RenewResponse, error) {
	return t.inner.Renew(ctx, in, append(opts, grpc.PerRPCCredentials(t.creds))...)
}

func (t *tokenClient) Complete(ctx context.Context, in *idemv1.CompleteRequest, opts ...grpc.CallOption) (*idemv1.CompleteResponse, error) {
	return t.inner.Complete(ctx, in, append(opts, grpc.PerRPCCredentials(t.creds))...)
}

func (t *tokenClient) Fail(ctx context.Context, in *idemv1.FailRequest, opts ...grpc.CallOption) (*idemv1.FailResponse, error) {
	return t.inner.Fail(ctx, in, append(opts, grpc.PerRPCCredentials(t.creds))...)
}

func (t *tokenClient) Lookup(ctx context.Context, in *idemv1.LookupRequest, opts ...grpc.CallOption) (*idemv1.LookupResponse, error) {
	return t.inner.Lookup(ctx, in, append(opts, grpc.PerRPCCredentials(t.creds))...)
}

func (t *tokenClient) Reconcile(ctx context.Context, in *idemv1.ReconcileRequest, opts ...grpc.CallOption) (*idemv1.ReconcileResponse, error) {
	return t.inner.Reconcile(ctx, in, append(opts, grpc.PerRPCCredentials(t.creds))...)
}

func (t *tokenClient) ListUnresolved(ctx context.Context, in *idemv1.ListUnresolvedRequest, opts ...grpc.CallOption) (*idemv1.ListUnresolvedResponse, error) {
	return t.inner.ListUnresolved(ctx, in, append(opts, grpc.PerRPCCredentials(t.creds))...)
}

func (t *tokenClient) ListOperations(ctx context.Context, in *idemv1.ListOperationsRequest, opts ...grpc.CallOption) (*idemv1.ListOperationsResponse, error) {
	return t.inner.ListOperations(ctx, in, append(opts, grpc.PerRPCCredentials(t.creds))...)
}

func (t *tokenClient) Forget(ctx context.Context, in *idemv1.ForgetRequest, opts ...grpc.CallOption) (*idemv1.ForgetResponse, error) {
	return t.inner.Forget(ctx, in, append(opts, grpc.PerRPCCredentials(t.creds))...)
}

func (t *tokenClient) GetPolicy(ctx context.Context, in *idemv1.GetPolicyRequest, opts ...grpc.CallOption) (*idemv1.GetPolicyResponse, error) {
	return t.inner.GetPolicy(ctx, in, append(opts, grpc.PerRPCCredentials(t.creds))...)
}

func (t *tokenClient) Hold(ctx context.Context, in *idemv1.HoldRequest, opts ...grpc.CallOption) (*idemv1.HoldResponse, error) {
	return t.inner.Hold(ctx, in, append(opts, grpc.PerRPCCredentials(t.creds))...)
}

func (t *tokenClient) Release(ctx context.Context, in *idemv1.ReleaseRequest, opts ...grpc.CallOption) (*idemv1.ReleaseResponse, error) {
	return t.inner.Release(ctx, in, append(opts, grpc.PerRPCCredentials(t.creds))...)
}

func (t *tokenClient) ListHolds(ctx context.Context, in *idemv1.ListHoldsRequest, opts ...grpc.CallOption) (*idemv1.ListHoldsResponse, error) {
	return t.inner.ListHolds(ctx, in, append(opts, grpc.PerRPCCredentials(t.creds))...)
}

func (t *tokenClient) Diagnose(ctx context.Context, in *idemv1.DiagnoseRequest, opts ...grpc.CallOption) (*idemv1.DiagnoseResponse, error) {
	return t.inner.Diagnose(ctx, in, append(opts, grpc.PerRPCCredentials(t.creds))...)
}

// ---- sending, with re-sends --------------------------------------------------------

type unary[Req, Resp any] func(context.Context, Req, ...grpc.CallOption) (Resp, error)

// send calls rpc until it answers, re-sending the same request as the retry policy
// decides, and returns the answer with the instant at which the send it answers
// began (the server counts the durations in it from its handling of that very send).
// The plan ends at the earlier of the policy's total timeout, deadline (if not zero)
// and ctx's deadline.
func send[Req, Resp any](ctx context.Context, c *Client, rpc unary[Req, Resp], request Req, deadline time.Time, extraTimeout time.Duration) (Resp, time.Time, error) {
	var zero Resp
	if ctxDeadline, ok := ctx.Deadline(); ok && (deadline.IsZero() || ctxDeadline.Before(deadline)) {
		deadline = ctxDeadline
	}
	plan := newRetryPlan(c.retry, c.now(), deadline, extraTimeout)
	for {
		timeout, ok := plan.nextTimeout(c.now())
		if !ok {
			if err := c.callerGone(ctx); err != nil {
				return zero, plan.sentAt, err
			}
			return zero, plan.sentAt, &StatusError{Code: codes.DeadlineExceeded, Message: "no time left to send the call"}
		}
		sendCtx, cancel := context.WithTimeout(ctx, timeout)
		var trailer metadata.MD
		response, err := rpc(sendCtx, request, grpc.Trailer(&trailer))
		cancel()
		if err == nil {
			return response, plan.sentAt, nil
		}
		if err := c.callerGone(ctx); err != nil {
			return zero, plan.sentAt, err
		}
		decoded := statusErrorOf(err, trailer)
		delay, again := plan.delayAfter(decoded, c.now(), jitter)
		if !again {
			return zero, plan.sentAt, decoded
		}
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return zero, plan.sentAt, fmt.Errorf("idemd: %w", context.Cause(ctx))
		case <-timer.C:
		}
	}
}

// callerGone is the caller's cancellation, or its deadline once the clock has
// reached it (a send timed out by that deadline may fail a hair before the
// context's own timer fires): never a status of idemd's, never re-sent.
func (c *Client) callerGone(ctx context.Context) error {
	if ctx.Err() != nil {
		return fmt.Errorf("idemd: %w", context.Cause(ctx))
	}
	if deadline, ok := ctx.Deadline(); ok && !c.now().Before(deadline) {
		return fmt.Errorf("idemd: %w", context.DeadlineExceeded)
	}
	return nil
}

func jitter(limit time.Duration) time.Duration {
	if limit <= 0 {
		return 0
	}
	return mathrand.N(limit)
}

// newClaimToken is a fresh random claim_token: made per attempt, reused only to
// re-send that same Claim.
func newClaimToken() []byte {
	token := make([]byte, 16)
	_, _ = rand.Read(token) // crypto/rand.Read never fails (Go 1.24+)
	return token
}

// ---- the RPCs --------------------------------------------------------------------

// Claim starts or rejoins an operation. Execute the effect only on Acquired, or on
// ReconcileFirst after checking the provider; ExecuteOnce does all of it. A re-send
// (after UNAVAILABLE or a lost reply) carries the same claim_token; give the request
// one (NewClaimToken) for the re-send to be recognised.
func (c *Client) Claim(ctx context.Context, request *idemv1.ClaimRequest) (*idemv1.ClaimResponse, error) {
	response, _, err := c.claimAnswered(ctx, request, time.Time{})
	return response, err
}

// claimAnswered is Claim, also returning when the answered send began; its lease and
// attempt deadline count from there.
func (c *Client) claimAnswered(ctx context.Context, request *idemv1.ClaimRequest, deadline time.Time) (*idemv1.ClaimResponse, time.Time, error) {
	return send(ctx, c, c.rpc.Claim, request, deadline, request.GetWait().AsDuration())
}

// Renew extends the owner's lease, never past the attempt deadline.
func (c *Client) Renew(ctx context.Context, request *idemv1.RenewRequest) (*idemv1.RenewResponse, error) {
	response, _, err := c.renewAnswered(ctx, request, time.Time{})
	return response, err
}

func (c *Client) renewAnswered(ctx context.Context, request *idemv1.RenewRequest, deadline time.Time) (*idemv1.RenewResponse, time.Time, error) {
	return send(ctx, c, c.rpc.Renew, request, deadline, 0)
}

// Complete records the success result. Only the current fence may.
func (c *Client) Complete(ctx context.Context, request *idemv1.CompleteRequest) (*idemv1.CompleteResponse, error) {
	response, _, err := send(ctx, c, c.rpc.Complete, request, time.Time{}, 0)
	return response, err
}

// Fail records a failure with a disposition: TERMINAL, RETRYABLE (the effect
// certainly did not happen), UNKNOWN (it may have) or NOT_STARTED (this attempt
// declined before starting the effect). Only the current fence may.
func (c *Client) Fail(ctx context.Context, request *idemv1.FailRequest) (*idemv1.FailResponse, error) {
	response, _, err := send(ctx, c, c.rpc.Fail, request, time.Time{}, 0)
	return response, err
}

// Lookup reads an operation by scope or by operation_id, with its history if asked.
func (c *Client) Lookup(ctx context.Context, request *idemv1.LookupRequest) (*idemv1.LookupResponse, error) {
	response, _, err := send(ctx, c, c.rpc.Lookup, request, time.Time{}, 0)
	return response, err
}

// Reconcile resolves an operation whose outcome is unknown from outside evidence.
func (c *Client) Reconcile(ctx context.Context, request *idemv1.ReconcileRequest) (*idemv1.ReconcileResponse, error) {
	response, _, err := send(ctx, c, c.rpc.Reconcile, request, time.Time{}, 0)
	return response, err
}

// ListUnresolved is one page of the operations that need reconciliation, oldest
// first.
func (c *Client) ListUnresolved(ctx context.Context, request *idemv1.ListUnresolvedRequest) (*idemv1.ListUnresolvedResponse, error) {
	response, _, err := send(ctx, c, c.rpc.ListUnresolved, request, time.Time{}, 0)
	return response, err
}

// ListOperations is one page of the operations that match a filter
// (docs/api.md#listoperations), oldest or newest first. It needs the reconcile
// or the admin scope.
func (c *Client) ListOperations(ctx context.Context, request *idemv1.ListOperationsRequest) (*idemv1.ListOperationsResponse, error) {
	response, _, err := send(ctx, c, c.rpc.ListOperations, request, time.Time{}, 0)
	return response, err
}

// Forget turns an ended operation into a tombstone before its retention ends (a
// legal deletion request, a poisoned result): its result is dropped and the next
// Claim of its scope gets RESULT_EXPIRED. It needs the admin scope. A Forget
// re-sent after its reply was lost finds the tombstone: ALREADY_FORGOTTEN.
func (c *Client) Forget(ctx context.Context, request *idemv1.ForgetRequest) (*idemv1.ForgetResponse, error) {
	response, _, err := send(ctx, c, c.rpc.Forget, request, time.Time{}, 0)
	return response, err
}

// GetPolicy is the effective policy for an operation name: the defaults and
// ceilings its first Claim gets, and which policy entry decided them. It needs
// the reconcile or the admin scope.
func (c *Client) GetPolicy(ctx context.Context, request *idemv1.GetPolicyRequest) (*idemv1.GetPolicyResponse, error) {
	response, _, err := send(ctx, c, c.rpc.GetPolicy, request, time.Time{}, 0)
	return response, err
}

// NewClaimToken is a fresh random claim_token for a ClaimRequest sent by hand.
func NewClaimToken() []byte { return newClaimToken() }
