package idemd_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	idemd "github.com/idemd/idemd/clients/go"
	"github.com/idemd/idemd/clients/go/idemv1"
	"github.com/idemd/idemd/clients/go/internal/idemdtest"
)

func TestMain(m *testing.M) { idemdtest.Main(m) }

const paymentJSON = `{"amount":1000,"currency":"EUR"}`

// eachStore runs test against a server of its own on every store.
func eachStore(t *testing.T, test func(t *testing.T, srv *idemdtest.Server), serverEnv ...string) {
	t.Helper()
	// Not in parallel: most tests here time leases and deadlines in tens of
	// milliseconds, which a loaded machine (and the race detector) would stretch.
	for _, store := range idemdtest.Stores {
		t.Run(string(store), func(t *testing.T) {
			test(t, idemdtest.Start(t, store, serverEnv...))
		})
	}
}

func connect(t *testing.T, addr, token string, options ...idemd.Option) *idemd.Client {
	t.Helper()
	client, err := idemd.New(append([]idemd.Option{idemd.WithAddress(addr), idemd.WithToken(token)}, options...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

func seconds(s float64) *durationpb.Duration {
	return durationpb.New(time.Duration(s * float64(time.Second)))
}

func claimJSON(operation, key, payload string, lease float64) *idemv1.ClaimRequest {
	return &idemv1.ClaimRequest{
		Scope:           &idemv1.Scope{Operation: operation, Key: key},
		RequestIdentity: &idemv1.ClaimRequest_JsonPayload{JsonPayload: payload},
		Lease:           seconds(lease),
	}
}

func history(t *testing.T, client *idemd.Client, operationID string) []string {
	t.Helper()
	found, err := client.Lookup(context.Background(), &idemv1.LookupRequest{
		Target:         &idemv1.LookupRequest_OperationId{OperationId: operationID},
		IncludeHistory: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	for _, entry := range found.GetHistory() {
		events = append(events, entry.GetEvent())
	}
	return events
}

func TestEveryRPCRoundTrips(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		ctx := context.Background()
		client := connect(t, srv.Addr, srv.Token)
		key := idemdtest.Key()
		request := claimJSON("payments.charge", key, paymentJSON, 5)
		request.ClaimToken = idemd.NewClaimToken()
		claimed, err := client.Claim(ctx, request)
		if err != nil {
			t.Fatal(err)
		}
		owner := claimed.GetAcquired().GetOwnership()
		if owner == nil || owner.GetAttempt() != 1 || owner.GetFence() == 0 {
			t.Fatalf("not acquired: %v", claimed)
		}
		renewed, err := client.Renew(ctx, &idemv1.RenewRequest{OperationId: owner.GetOperationId(), Fence: owner.GetFence(), Lease: seconds(5)})
		if err != nil || renewed.GetLease().AsDuration() > 5*time.Second {
			t.Fatalf("renew: %v %v", renewed, err)
		}
		done, err := client.Complete(ctx, &idemv1.CompleteRequest{
			OperationId: owner.GetOperationId(), Fence: owner.GetFence(),
			Result: &idemv1.Result{Body: []byte(`{"charge":"ch_1"}`), ContentType: "application/json", Metadata: map[string]string{"provider": "fake"}},
		})
		if err != nil || done.GetState() != idemv1.OperationState_OPERATION_STATE_SUCCEEDED {
			t.Fatalf("complete: %v %v", done, err)
		}
		replay, err := client.Claim(ctx, claimJSON("payments.charge", key, `{"currency":"EUR","amount":1000}`, 5))
		if err != nil {
			t.Fatal(err)
		}
		if string(replay.GetCompleted().GetResult().GetBody()) != `{"charge":"ch_1"}` ||
			replay.GetCompleted().GetResult().GetMetadata()["provider"] != "fake" {
			t.Fatalf("no replay: %v", replay)
		}
		found, err := client.Lookup(ctx, &idemv1.LookupRequest{
			Target:         &idemv1.LookupRequest_Scope{Scope: &idemv1.Scope{Operation: "payments.charge", Key: key}},
			IncludeHistory: true,
		})
		if err != nil || found.GetOperation().GetOperationId() != owner.GetOperationId() {
			t.Fatalf("lookup: %v %v", found, err)
		}
		if events := history(t, client, owner.GetOperationId()); !slices.Equal(events, []string{"CLAIMED", "RENEWED", "COMPLETED"}) {
			t.Fatalf("history %v", events)
		}

		// Fail UNKNOWN, then a reconciler finds it in ListUnresolved and settles it.
		other, err := client.Claim(ctx, &idemv1.ClaimRequest{
			Scope:           &idemv1.Scope{Operation: "payments.charge", Key: idemdtest.Key()},
			RequestIdentity: &idemv1.ClaimRequest_BytesPayload{BytesPayload: []byte("x")},
			Lease:           seconds(5),
		})
		if err != nil {
			t.Fatal(err)
		}
		second := other.GetAcquired().GetOwnership()
		failed, err := client.Fail(ctx, &idemv1.FailRequest{
			OperationId: second.GetOperationId(), Fence: second.GetFence(),
			Disposition: idemv1.FailDisposition_FAIL_DISPOSITION_UNKNOWN,
			Error:       &idemv1.OperationError{Code: "timeout", Message: "provider timed out"},
		})
		if err != nil || failed.GetState() != idemv1.OperationState_OPERATION_STATE_UNKNOWN {
			t.Fatalf("fail: %v %v", failed, err)
		}
		page, err := client.ListUnresolved(ctx, &idemv1.ListUnresolvedRequest{Operation: "payments.charge", PageSize: 10})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(page.GetOperations(), func(op *idemv1.Operation) bool { return op.GetOperationId() == second.GetOperationId() }) {
			t.Fatalf("not listed: %v", page)
		}
		settled, err := client.Reconcile(ctx, &idemv1.ReconcileRequest{
			OperationId: second.GetOperationId(), ExpectedFence: second.GetFence(),
			Resolution: &idemv1.ReconcileRequest_Succeeded{Succeeded: &idemv1.Result{Body: []byte("found")}},
		})
		if err != nil || settled.GetState() != idemv1.OperationState_OPERATION_STATE_SUCCEEDED || settled.GetFence() <= second.GetFence() {
			t.Fatalf("reconcile: %v %v", settled, err)
		}
	})
}

func TestRefusalsAreTypedErrorsCarryingTheirReason(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		ctx := context.Background()
		client := connect(t, srv.Addr, srv.Token)
		key := idemdtest.Key()
		claimed, err := client.Claim(ctx, claimJSON("payments.charge", key, paymentJSON, 0.05))
		if err != nil {
			t.Fatal(err)
		}
		first := claimed.GetAcquired().GetOwnership()

		_, err = client.Claim(ctx, claimJSON("payments.charge", key, `{"amount":2000,"currency":"EUR"}`, 5))
		var conflict *idemd.StatusError
		if !errors.As(err, &conflict) || !errors.Is(err, idemd.ErrIdempotencyKeyReused) {
			t.Fatalf("conflict: %v", err)
		}
		if conflict.Code != codes.FailedPrecondition || status.Code(err) != codes.FailedPrecondition ||
			conflict.Reason != "IDEMPOTENCY_KEY_REUSED" || conflict.OperationID() != first.GetOperationId() {
			t.Fatalf("conflict fields: %+v", conflict)
		}

		time.Sleep(100 * time.Millisecond) // the first owner's lease runs out
		taken, err := client.Claim(ctx, claimJSON("payments.charge", key, paymentJSON, 5))
		if err != nil || taken.GetReconcileFirst() == nil {
			t.Fatalf("takeover: %v %v", taken, err)
		}
		second := taken.GetReconcileFirst().GetOwnership()
		_, err = client.Complete(ctx, &idemv1.CompleteRequest{OperationId: first.GetOperationId(), Fence: first.GetFence(), Result: &idemv1.Result{Body: []byte("late")}})
		var lost *idemd.StatusError
		if !errors.As(err, &lost) || !errors.Is(err, idemd.ErrLeaseLost) || lost.Code != codes.Aborted {
			t.Fatalf("lease lost: %v", err)
		}
		if fence, ok := lost.CurrentFence(); !ok || fence != second.GetFence() || lost.State() != "IN_PROGRESS" || lost.OperationID() != first.GetOperationId() {
			t.Fatalf("lease lost metadata: %+v", lost.Metadata)
		}

		if _, err := client.Complete(ctx, &idemv1.CompleteRequest{OperationId: second.GetOperationId(), Fence: second.GetFence(), Result: &idemv1.Result{Body: []byte("one")}}); err != nil {
			t.Fatal(err)
		}
		_, err = client.Complete(ctx, &idemv1.CompleteRequest{OperationId: second.GetOperationId(), Fence: second.GetFence(), Result: &idemv1.Result{Body: []byte("two")}})
		if !errors.Is(err, idemd.ErrRequestMismatch) {
			t.Fatalf("mismatch: %v", err)
		}
		_, err = client.Renew(ctx, &idemv1.RenewRequest{OperationId: second.GetOperationId(), Fence: second.GetFence()})
		var terminal *idemd.StatusError
		if !errors.Is(err, idemd.ErrOperationTerminal) || !errors.As(err, &terminal) || terminal.State() != "SUCCEEDED" {
			t.Fatalf("terminal: %v", err)
		}

		_, err = client.Claim(ctx, claimJSON("payments charge!", "", "{", 5))
		var invalid *idemd.StatusError
		if !errors.As(err, &invalid) || !errors.Is(err, idemd.ErrInvalidRequest) {
			t.Fatalf("invalid: %v", err)
		}
		fields := map[string]bool{}
		for _, v := range invalid.Violations {
			fields[v.Field] = true
		}
		if !fields["scope.key"] || !fields["scope.operation"] {
			t.Fatalf("violations %+v", invalid.Violations)
		}

		_, err = client.Lookup(ctx, &idemv1.LookupRequest{Target: &idemv1.LookupRequest_OperationId{OperationId: "01a2269b-92ba-727d-ab2a-b74a6876d78e"}})
		if !errors.Is(err, idemd.ErrOperationNotFound) || status.Code(err) != codes.NotFound {
			t.Fatalf("not found: %v", err)
		}
	})
}

func TestTheBearerTokenGoesOnEveryCall(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		ctx := context.Background()
		stranger := connect(t, srv.Addr, "idem_"+strings.Repeat("0", 64))
		_, err := stranger.Claim(ctx, claimJSON("payments.charge", idemdtest.Key(), paymentJSON, 5))
		if !errors.Is(err, idemd.ErrInvalidCredentials) || status.Code(err) != codes.Unauthenticated {
			t.Fatalf("stranger claim: %v", err)
		}
		if _, err := stranger.ListUnresolved(ctx, &idemv1.ListUnresolvedRequest{}); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("stranger list: %v", err)
		}
		owner := connect(t, srv.Addr, srv.Token)
		if _, err := owner.ListUnresolved(ctx, &idemv1.ListUnresolvedRequest{}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestResultExpiredIsTyped(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		ctx := context.Background()
		client := connect(t, srv.Addr, srv.Token)
		key := idemdtest.Key()
		request := &idemv1.ClaimRequest{
			Scope:           &idemv1.Scope{Operation: "reports.send", Key: key},
			RequestIdentity: &idemv1.ClaimRequest_BytesPayload{BytesPayload: []byte("r")},
			// As short as the server allows: never below the retry window
			// (one attempt of two seconds).
			Lease:              seconds(1),
			MaxAttemptDuration: seconds(2),
			MaxAttempts:        1,
			Retention:          seconds(2),
		}
		claimed, err := client.Claim(ctx, request)
		if err != nil {
			t.Fatal(err)
		}
		owner := claimed.GetAcquired().GetOwnership()
		if _, err := client.Complete(ctx, &idemv1.CompleteRequest{OperationId: owner.GetOperationId(), Fence: owner.GetFence(), Result: &idemv1.Result{Body: []byte("sent")}}); err != nil {
			t.Fatal(err)
		}
		var expired *idemd.StatusError
		if !idemdtest.Eventually(10*time.Second, func() bool {
			_, err := client.Claim(ctx, &idemv1.ClaimRequest{Scope: request.GetScope(), RequestIdentity: request.GetRequestIdentity()})
			return errors.Is(err, idemd.ErrResultExpired) && errors.As(err, &expired)
		}) {
			t.Fatal("the sweeper never made a tombstone")
		}
		if expired.OperationID() != owner.GetOperationId() {
			t.Fatalf("expired: %+v", expired)
		}
	}, "IDEMD_SWEEP_INTERVAL=50ms")
}

func TestADeadAddressIsUnavailableWithoutAReason(t *testing.T) {
	policy := idemd.DefaultRetryPolicy
	policy.MaxSends, policy.InitialBackoff, policy.CallTimeout = 2, 10*time.Millisecond, 2*time.Second
	client := connect(t, "127.0.0.1:1", "t", idemd.WithRetryPolicy(policy))
	_, err := client.Lookup(context.Background(), &idemv1.LookupRequest{Target: &idemv1.LookupRequest_OperationId{OperationId: "x"}})
	var unavailable *idemd.StatusError
	if !errors.As(err, &unavailable) || unavailable.Code != codes.Unavailable || unavailable.Reason != "" {
		t.Fatalf("dead address: %v", err)
	}
}

func TestTheCallersCancellationIsNeverResent(t *testing.T) {
	policy := idemd.DefaultRetryPolicy
	policy.InitialBackoff, policy.MaxBackoff = time.Second, time.Second
	client := connect(t, "127.0.0.1:1", "t", idemd.WithRetryPolicy(policy))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	started := time.Now()
	_, err := client.Lookup(ctx, &idemv1.LookupRequest{Target: &idemv1.LookupRequest_OperationId{OperationId: "x"}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if elapsed := time.Since(started); elapsed > time.Second {
		t.Fatalf("re-sent after the caller cancelled: %s", elapsed)
	}
}

// A lost reply is re-sent unchanged: the Claim with its claim_token (answered with
// the same ownership, one attempt), the Complete from its receipt.
func TestALostReplyIsResentUnchanged(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		ctx := context.Background()
		proxy := idemdtest.StartProxy(t, srv.Addr)
		policy := idemd.DefaultRetryPolicy
		policy.InitialBackoff, policy.MaxBackoff, policy.CallTimeout = 20*time.Millisecond, 200*time.Millisecond, 5*time.Second
		client := connect(t, proxy.Addr, srv.Token, idemd.WithRetryPolicy(policy))
		direct := connect(t, srv.Addr, srv.Token)

		request := claimJSON("payments.charge", idemdtest.Key(), paymentJSON, 10)
		request.ClaimToken = idemd.NewClaimToken()
		proxy.DropNextReply()
		claimed, err := client.Claim(ctx, request)
		if err != nil {
			t.Fatal(err)
		}
		owner := claimed.GetAcquired().GetOwnership()
		if proxy.Dropped() != 1 || owner.GetAttempt() != 1 {
			t.Fatalf("dropped %d, %v", proxy.Dropped(), claimed)
		}
		proxy.DropNextReply()
		done, err := client.Complete(ctx, &idemv1.CompleteRequest{OperationId: owner.GetOperationId(), Fence: owner.GetFence(), Result: &idemv1.Result{Body: []byte("ok")}})
		if err != nil || done.GetState() != idemv1.OperationState_OPERATION_STATE_SUCCEEDED || proxy.Dropped() != 2 {
			t.Fatalf("complete: %v %v (dropped %d)", done, err, proxy.Dropped())
		}
		if events := history(t, direct, owner.GetOperationId()); !slices.Equal(events, []string{"CLAIMED", "COMPLETED"}) {
			t.Fatalf("history %v", events)
		}
	})
}
