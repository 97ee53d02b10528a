package idemd_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	idemd "github.com/idemd/idemd/clients/go"
	"github.com/idemd/idemd/clients/go/idemv1"
	"github.com/idemd/idemd/clients/go/internal/idemdtest"
)

// A rolling deployment that changes how a request is normalised (docs/api.md,
// "Changing the normalisation while operations are in flight"), as
// tests/it/migration_window.rs plays it against the server: the old version wrote a
// charge without its currency, the new one writes the default currency out, so the
// same intent has a new fingerprint. The new version sends the old one in
// WithPreviousFingerprints.

// oldCharge is the old version's normalisation of a charge: no currency.
func oldCharge(amount int) idemd.Payload { return idemd.JSONText(oldChargeText(amount)) }

func oldChargeText(amount int) string { return fmt.Sprintf(`{"amount":%d}`, amount) }

// newCharge is the new version's: the default currency written out.
func newCharge(amount int) idemd.Payload {
	return idemd.JSONText(fmt.Sprintf(`{"amount":%d,"currency":"EUR"}`, amount))
}

// oldFingerprint is what the new version computes for the old normalisation.
func oldFingerprint(t *testing.T, amount int) idemd.ExecuteOption {
	t.Helper()
	sum, err := idemd.FingerprintJSON([]byte(oldChargeText(amount)))
	if err != nil {
		t.Fatal(err)
	}
	return idemd.WithPreviousFingerprints(sum[:])
}

func TestARollingDeploymentReplaysAndTakesOverTheOldVersionsOperations(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		ctx := context.Background()
		client := connect(t, srv.Addr, srv.Token)
		provider := idemdtest.NewProvider()

		// Completed by the old version.
		done := idemdtest.Key()
		first, err := client.ExecuteOnce(ctx, chargeOp, done, oldCharge(100), charging(provider))
		if err != nil || first.Replayed {
			t.Fatalf("%+v %v", first, err)
		}
		// The new version without the window: its retry is a false conflict.
		_, err = client.ExecuteOnce(ctx, chargeOp, done, newCharge(100), charging(provider))
		if !errors.Is(err, idemd.ErrIdempotencyKeyReused) {
			t.Fatalf("without previous fingerprints: %v", err)
		}
		// With it: the old version's result, replayed.
		again, err := client.ExecuteOnce(ctx, chargeOp, done, newCharge(100), charging(provider), oldFingerprint(t, 100))
		if err != nil || !again.Replayed || again.OperationID != first.OperationID || string(again.Body) != string(first.Body) {
			t.Fatalf("%+v %v", again, err)
		}

		// Claimed by the old version, whose lease ran out: the new version takes it
		// over (ReconcileFirst; the provider deduplicates by the operation id) and
		// the Claim whose reply is lost is re-sent with its previous fingerprint.
		doubted := idemdtest.Key()
		stalled, err := client.Claim(ctx, &idemv1.ClaimRequest{
			Scope:              &idemv1.Scope{Operation: chargeOp, Key: doubted},
			RequestIdentity:    &idemv1.ClaimRequest_JsonPayload{JsonPayload: oldChargeText(200)},
			Lease:              seconds(0.05),
			MaxAttemptDuration: seconds(2),
		})
		if err != nil {
			t.Fatal(err)
		}
		owner := stalled.GetAcquired().GetOwnership()
		time.Sleep(100 * time.Millisecond)
		proxy := idemdtest.StartProxy(t, srv.Addr)
		proxied := connect(t, proxy.Addr, srv.Token, fastRetries())
		proxy.DropNextReply()
		taken, err := proxied.ExecuteOnce(ctx, chargeOp, doubted, newCharge(200), charging(provider), oldFingerprint(t, 200),
			idemd.WithProviderDeduplicates(), idemd.WithLease(time.Second), idemd.WithAttemptDuration(2*time.Second))
		if err != nil || taken.Replayed || taken.OperationID != owner.GetOperationId() || proxy.Dropped() != 1 {
			t.Fatalf("%+v %v (dropped %d)", taken, err, proxy.Dropped())
		}
		var takeover *idemv1.HistoryEntry
		for _, entry := range historyEntries(t, client, owner.GetOperationId()) {
			if entry.GetEvent() == "TAKEN_OVER" {
				takeover = entry
			}
		}
		if takeover == nil || !strings.HasSuffix(takeover.GetDetail(), "request matched by previous_fingerprints[0]") {
			t.Fatalf("takeover %v", takeover)
		}
		if stored := operationOf(t, client, owner.GetOperationId()); stored.GetConflicts() != 0 {
			t.Fatalf("%d conflicts", stored.GetConflicts())
		}

		// Another amount is another request, window or not.
		_, err = client.ExecuteOnce(ctx, chargeOp, done, newCharge(999), charging(provider), oldFingerprint(t, 999))
		if !errors.Is(err, idemd.ErrIdempotencyKeyReused) {
			t.Fatalf("another amount: %v", err)
		}
		// One charge each: the old version's, and the taken-over one's.
		if provider.Effects() != 2 {
			t.Fatalf("%d effects", provider.Effects())
		}
	})
}

// A selector changed: the old version fingerprinted only the amount, the new one
// the amount and the currency. The old selector's fingerprint of the new request
// is the old version's fingerprint of it.
func TestAPreviousSelectorsFingerprintIsTheOldVersionsRequest(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		ctx := context.Background()
		client := connect(t, srv.Addr, srv.Token)
		provider := idemdtest.NewProvider()
		oldSelector := idemd.MustSelector(idemd.SelectorFields{Include: []string{"/amount"}})
		newSelector := idemd.MustSelector(idemd.SelectorFields{Include: []string{"/amount", "/currency"}})
		body := `{"amount":300,"currency":"EUR","trace":"t1"}`
		key := idemdtest.Key()
		first, err := client.ExecuteOnce(ctx, chargeOp, key, idemd.JSONText(body), charging(provider), idemd.WithSelector(oldSelector))
		if err != nil {
			t.Fatal(err)
		}
		previous, err := oldSelector.Fingerprint([]byte(body), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = client.ExecuteOnce(ctx, chargeOp, key, idemd.JSONText(body), charging(provider), idemd.WithSelector(newSelector))
		if !errors.Is(err, idemd.ErrIdempotencyKeyReused) {
			t.Fatalf("without previous fingerprints: %v", err)
		}
		again, err := client.ExecuteOnce(ctx, chargeOp, key, idemd.JSONText(body), charging(provider),
			idemd.WithSelector(newSelector), idemd.WithPreviousFingerprints(previous[:]))
		if err != nil || !again.Replayed || again.OperationID != first.OperationID || provider.Effects() != 1 {
			t.Fatalf("%+v %v, %d effects", again, err, provider.Effects())
		}
	})
}

// What the server would refuse is refused before any RPC, naming the field the
// server names; the effect never runs.
func TestPreviousFingerprintsTheServerWouldRefuseAreRefusedBeforeAnyRPC(t *testing.T) {
	var calls atomic.Int32
	counting := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		calls.Add(1)
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	client := connect(t, "127.0.0.1:1", "t", idemd.WithDialOptions(grpc.WithUnaryInterceptor(counting)))
	full := make([]byte, 32)
	cases := []struct {
		name         string
		fingerprints [][]byte
		field        string
	}{
		{"five", [][]byte{full, full, full, full, full}, "previous_fingerprints"},
		{"31 bytes", [][]byte{make([]byte, 31)}, "previous_fingerprints[0]"},
		{"33 bytes second", [][]byte{full, make([]byte, 33)}, "previous_fingerprints[1]"},
		{"empty second", [][]byte{full, {}}, "previous_fingerprints[1]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ran := false
			effect := func(context.Context, *idemd.Attempt) (idemd.Outcome, error) {
				ran = true
				return idemd.Success{}, nil
			}
			_, err := client.ExecuteOnce(context.Background(), chargeOp, idemdtest.Key(), payment, effect,
				idemd.WithPreviousFingerprints(c.fingerprints...))
			var refused *idemd.StatusError
			if !errors.Is(err, idemd.ErrInvalidRequest) || !errors.As(err, &refused) || status.Code(err) != codes.InvalidArgument ||
				len(refused.Violations) != 1 || refused.Violations[0].Field != c.field {
				t.Fatalf("%v", err)
			}
			if ran || calls.Load() != 0 {
				t.Fatalf("the effect ran: %v; %d RPCs", ran, calls.Load())
			}
		})
	}
}
