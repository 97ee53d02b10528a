package idemd_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	idemd "github.com/idemd/idemd/clients/go"
	"github.com/idemd/idemd/clients/go/idemv1"
	"github.com/idemd/idemd/clients/go/internal/idemdtest"
)

// ExecuteOnce's semantics, one test each, against a real server on each store,
// counting effects at a fake provider.

const chargeOp = "payments.charge"

var payment = idemd.JSON(map[string]any{"amount": 1000, "currency": "EUR"})

func charging(provider *idemdtest.Provider) idemd.Effect {
	return func(_ context.Context, a *idemd.Attempt) (idemd.Outcome, error) {
		return idemd.Success{Body: provider.Effect(a.OperationID), ContentType: "application/json"}, nil
	}
}

func historyEntries(t *testing.T, client *idemd.Client, operationID string) []*idemv1.HistoryEntry {
	t.Helper()
	found, err := client.Lookup(context.Background(), &idemv1.LookupRequest{
		Target:         &idemv1.LookupRequest_OperationId{OperationId: operationID},
		IncludeHistory: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return found.GetHistory()
}

func eventsBut(entries []*idemv1.HistoryEntry, skip string) []string {
	var events []string
	for _, entry := range entries {
		if entry.GetEvent() != skip {
			events = append(events, entry.GetEvent())
		}
	}
	return events
}

func operationOf(t *testing.T, client *idemd.Client, operationID string) *idemv1.Operation {
	t.Helper()
	found, err := client.Lookup(context.Background(), &idemv1.LookupRequest{Target: &idemv1.LookupRequest_OperationId{OperationId: operationID}})
	if err != nil {
		t.Fatal(err)
	}
	return found.GetOperation()
}

// abandonedAttempt is an earlier owner that stalled: its 50 ms lease runs out and
// nobody completes.
func abandonedAttempt(t *testing.T, client *idemd.Client, key string, attempt time.Duration, maxAttempts uint32) *idemv1.Ownership {
	t.Helper()
	request := claimJSON(chargeOp, key, paymentJSON, 0.05)
	request.MaxAttemptDuration = seconds(attempt.Seconds())
	request.MaxAttempts = maxAttempts
	claimed, err := client.Claim(context.Background(), request)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	return claimed.GetAcquired().GetOwnership()
}

func fastRetries() idemd.Option {
	return idemd.WithRetryPolicy(fastRetryPolicy())
}

func fastRetryPolicy() idemd.RetryPolicy {
	policy := idemd.DefaultRetryPolicy
	policy.InitialBackoff, policy.MaxBackoff, policy.CallTimeout = 20*time.Millisecond, 200*time.Millisecond, 5*time.Second
	return policy
}

// reconnectingRetries is fastRetries with sends enough to outlast the channel's
// reconnect backoff (at most 1 s plus jitter: client.go) once a cut connection is
// restored: ten sends of fastRetries last about 0.6 s, and a call made while the
// channel still backs off fails at once. A cut that lasts while a loaded machine runs
// another owner's work grows that backoff to its maximum (the TypeScript and Python
// tests met it).
func reconnectingRetries() idemd.Option {
	policy := fastRetryPolicy()
	policy.MaxSends = 40
	return idemd.WithRetryPolicy(policy)
}

func TestSuccessIsCompletedAndReplayedWithoutRunning(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		client := connect(t, srv.Addr, srv.Token)
		provider := idemdtest.NewProvider()
		key := idemdtest.Key()
		first, err := client.ExecuteOnce(context.Background(), chargeOp, key, payment, charging(provider))
		if err != nil || first.Replayed || first.Attempts != 1 {
			t.Fatalf("%+v %v", first, err)
		}
		again, err := client.ExecuteOnce(context.Background(), chargeOp, key, idemd.JSONText(`{"currency":"EUR","amount":1000}`), charging(provider))
		if err != nil || !again.Replayed || string(again.Body) != string(first.Body) || again.OperationID != first.OperationID {
			t.Fatalf("%+v %v", again, err)
		}
		if provider.Effects() != 1 {
			t.Fatalf("%d effects", provider.Effects())
		}
		if events := eventsBut(historyEntries(t, client, first.OperationID), ""); !slices.Equal(events, []string{"CLAIMED", "COMPLETED"}) {
			t.Fatalf("history %v", events)
		}
	})
}

func TestTerminalIsStoredAndReplayedAsATypedError(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		client := connect(t, srv.Addr, srv.Token)
		key := idemdtest.Key()
		declined := func(context.Context, *idemd.Attempt) (idemd.Outcome, error) {
			return idemd.Terminal{Code: "card_declined", Message: "insufficient funds", Metadata: map[string]string{"decline_code": "51"}}, nil
		}
		_, err := client.ExecuteOnce(context.Background(), chargeOp, key, payment, declined)
		var first *idemd.OperationFailedError
		if !errors.As(err, &first) || first.Code != "card_declined" || first.Replayed {
			t.Fatalf("%v", err)
		}
		ran := 0
		never := func(context.Context, *idemd.Attempt) (idemd.Outcome, error) { ran++; return idemd.Success{}, nil }
		_, err = client.ExecuteOnce(context.Background(), chargeOp, key, payment, never)
		var replay *idemd.OperationFailedError
		if !errors.As(err, &replay) || !replay.Replayed || replay.Message != "insufficient funds" ||
			replay.Metadata["decline_code"] != "51" || replay.Reason != "FAILURE_REASON_TERMINAL" || ran != 0 {
			t.Fatalf("%+v (ran %d)", err, ran)
		}
	})
}

func TestRetryableReleasesForANewAttempt(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		client := connect(t, srv.Addr, srv.Token)
		provider := idemdtest.NewProvider()
		var attempts []uint32
		flaky := func(_ context.Context, a *idemd.Attempt) (idemd.Outcome, error) {
			attempts = append(attempts, a.Number)
			if len(attempts) == 1 {
				return idemd.Retryable{Code: "provider_busy", RetryAfter: 50 * time.Millisecond}, nil
			}
			return idemd.Success{Body: provider.Effect(a.OperationID)}, nil
		}
		result, err := client.ExecuteOnce(context.Background(), chargeOp, idemdtest.Key(), payment, flaky)
		if err != nil || result.Attempts != 2 || !slices.Equal(attempts, []uint32{1, 2}) || provider.Effects() != 1 {
			t.Fatalf("%+v %v attempts %v", result, err, attempts)
		}
		events := eventsBut(historyEntries(t, client, result.OperationID), "RENEWED")
		if !slices.Equal(events, []string{"CLAIMED", "RETRY_SCHEDULED", "RETRY_STARTED", "COMPLETED"}) {
			t.Fatalf("history %v", events)
		}
	})
}

func TestUnknownErrorsAndPanicsAreReportedUnknown(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		client := connect(t, srv.Addr, srv.Token)
		for name, effect := range map[string]idemd.Effect{
			"unknown": func(context.Context, *idemd.Attempt) (idemd.Outcome, error) {
				return idemd.Unknown{Code: "timeout", Message: "provider did not answer"}, nil
			},
			"error": func(context.Context, *idemd.Attempt) (idemd.Outcome, error) {
				return nil, errors.New("provider hung up")
			},
			"panic": func(context.Context, *idemd.Attempt) (idemd.Outcome, error) { panic("provider exploded") },
		} {
			_, err := client.ExecuteOnce(context.Background(), chargeOp, idemdtest.Key(), payment, effect)
			var unknown *idemd.OutcomeUnknownError
			if !errors.As(err, &unknown) {
				t.Fatalf("%s: %v", name, err)
			}
			var panicked *idemd.PanicError
			if name == "panic" && (!errors.As(err, &panicked) || panicked.Value != "provider exploded") {
				t.Fatalf("the panic is not the cause: %v", err)
			}
			if state := operationOf(t, client, unknown.OperationID).GetState(); state != idemv1.OperationState_OPERATION_STATE_UNKNOWN {
				t.Fatalf("%s: %s", name, state)
			}
		}
	})
}

func TestRenewsWhileTheEffectRuns(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		client := connect(t, srv.Addr, srv.Token)
		provider := idemdtest.NewProvider()
		slow := func(ctx context.Context, a *idemd.Attempt) (idemd.Outcome, error) {
			time.Sleep(500 * time.Millisecond)
			return idemd.Success{Body: provider.Effect(a.OperationID)}, nil
		}
		result, err := client.ExecuteOnce(context.Background(), chargeOp, idemdtest.Key(), payment, slow,
			idemd.WithLease(150*time.Millisecond), idemd.WithAttemptDuration(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		entries := historyEntries(t, client, result.OperationID)
		var renewals uint64
		for _, entry := range entries {
			if entry.GetEvent() == "RENEWED" {
				renewals += entry.GetCount()
			}
		}
		events := eventsBut(entries, "")
		if renewals < 3 || events[0] != "CLAIMED" || events[len(events)-1] != "COMPLETED" || slices.Contains(events, "TAKEN_OVER") || provider.Effects() != 1 {
			t.Fatalf("renewals %d, history %v", renewals, events)
		}
	})
}

func TestTheEffectIsCancelledAtTheAttemptDeadlineThenUnknown(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		client := connect(t, srv.Addr, srv.Token)
		var cancelAt time.Time
		type ended struct {
			at  time.Time
			err error
		}
		cancelled := make(chan ended, 1)
		hangs := func(ctx context.Context, a *idemd.Attempt) (idemd.Outcome, error) {
			cancelAt = a.CancelAt
			<-ctx.Done()
			cancelled <- ended{time.Now(), ctx.Err()}
			return nil, ctx.Err()
		}
		started := time.Now()
		// A 5 s attempt leaves a 500 ms margin to report the outcome before the
		// deadline (a tenth of it): with 1 s (100 ms) the report landed late on a
		// loaded CI machine and was refused as a late write.
		_, err := client.ExecuteOnce(context.Background(), chargeOp, idemdtest.Key(), payment, hangs,
			idemd.WithLease(200*time.Millisecond), idemd.WithAttemptDuration(5*time.Second))
		var unknown *idemd.OutcomeUnknownError
		if !errors.Is(err, idemd.ErrAttemptTimeout) || !errors.As(err, &unknown) {
			t.Fatalf("%v", err)
		}
		// Cancelled at its cancel point, a margin before the attempt deadline (5 s
		// from the Claim's answered send), by the context's deadline.
		end := <-cancelled
		if !errors.Is(end.err, context.DeadlineExceeded) || end.at.Before(cancelAt) || end.at.After(cancelAt.Add(500*time.Millisecond)) ||
			cancelAt.Sub(started) > 5*time.Second+500*time.Millisecond {
			t.Fatalf("ended %v at %s, cancel point %s", end.err, end.at.Sub(started), cancelAt.Sub(started))
		}
		// Reported in time: UNKNOWN, not a late write refused.
		entries := historyEntries(t, client, unknown.OperationID)
		if state := operationOf(t, client, unknown.OperationID).GetState(); state != idemv1.OperationState_OPERATION_STATE_UNKNOWN ||
			entries[len(entries)-1].GetEvent() != "OUTCOME_UNKNOWN" || entries[len(entries)-1].GetDetail() != "attempt_deadline" {
			t.Fatalf("%s %v", state, entries)
		}
	})
}

func TestRenewalsStopOnceTheLeaseReachesTheAttemptDeadline(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		client := connect(t, srv.Addr, srv.Token)
		hangs := func(ctx context.Context, _ *idemd.Attempt) (idemd.Outcome, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		// Seconds, not tenths: on a loaded machine a Renew due 0.2 s in could arrive
		// past a 0.8 s deadline.
		_, err := client.ExecuteOnce(context.Background(), chargeOp, idemdtest.Key(), payment, hangs,
			idemd.WithLease(3*time.Second), idemd.WithAttemptDuration(4*time.Second))
		var unknown *idemd.OutcomeUnknownError
		if !errors.As(err, &unknown) {
			t.Fatal(err)
		}
		// The first Renew (a third into the lease) is granted up to the deadline;
		// renewing again could only shrink towards it, call after call.
		events := eventsBut(historyEntries(t, client, unknown.OperationID), "")
		var renewals uint64
		for _, entry := range historyEntries(t, client, unknown.OperationID) {
			if entry.GetEvent() == "RENEWED" {
				renewals += entry.GetCount()
			}
		}
		// (A second one when the first was granted a hair short of the deadline.)
		if renewals < 1 || renewals > 2 {
			t.Fatalf("renewed %d times: %v", renewals, events)
		}
	})
}

func TestPendingWaitsForTheRunningAttemptThenReplays(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		client := connect(t, srv.Addr, srv.Token)
		provider := idemdtest.NewProvider()
		key := idemdtest.Key()
		started := make(chan struct{})
		slow := func(_ context.Context, a *idemd.Attempt) (idemd.Outcome, error) {
			close(started)
			time.Sleep(400 * time.Millisecond)
			return idemd.Success{Body: provider.Effect(a.OperationID)}, nil
		}
		firstDone := make(chan *idemd.Result, 1)
		go func() {
			result, _ := client.ExecuteOnce(context.Background(), chargeOp, key, payment, slow)
			firstDone <- result
		}()
		<-started
		second, err := client.ExecuteOnce(context.Background(), chargeOp, key, payment, charging(provider))
		first := <-firstDone
		if err != nil || first == nil || !second.Replayed || string(second.Body) != string(first.Body) || provider.Effects() != 1 {
			t.Fatalf("%+v %+v %v", first, second, err)
		}
	})
}

func TestPendingPastTheCallersTimeFailsWithoutRunning(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		client := connect(t, srv.Addr, srv.Token)
		provider := idemdtest.NewProvider()
		key := idemdtest.Key()
		started, release := make(chan struct{}), make(chan struct{})
		held := func(_ context.Context, a *idemd.Attempt) (idemd.Outcome, error) {
			close(started)
			<-release
			return idemd.Success{Body: provider.Effect(a.OperationID)}, nil
		}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = client.ExecuteOnce(context.Background(), chargeOp, key, payment, held)
		}()
		<-started
		_, err := client.ExecuteOnce(context.Background(), chargeOp, key, payment, charging(provider), idemd.WithPendingTimeout(0))
		var waiting *idemd.PendingError
		if !errors.As(err, &waiting) || waiting.RetryAfter <= 0 || waiting.Reason != "PENDING_REASON_IN_PROGRESS" {
			t.Fatalf("%v", err)
		}
		// The caller's own deadline bounds the wait as well.
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		began := time.Now()
		_, err = client.ExecuteOnce(ctx, chargeOp, key, payment, charging(provider))
		if !errors.As(err, &waiting) && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("past the caller's deadline: %v", err)
		}
		if elapsed := time.Since(began); elapsed > 2*time.Second {
			t.Fatalf("waited %s past a 300 ms deadline", elapsed)
		}
		close(release)
		wg.Wait()
		if provider.Effects() != 1 {
			t.Fatalf("%d effects", provider.Effects())
		}
	})
}

func TestReconcileFirstWithADeduplicatingProviderRunsTold(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		client := connect(t, srv.Addr, srv.Token)
		provider := idemdtest.NewProvider()
		key := idemdtest.Key()
		stalled := abandonedAttempt(t, client, key, 2*time.Second, 0)
		var seen idemd.Attempt
		effect := func(ctx context.Context, a *idemd.Attempt) (idemd.Outcome, error) {
			seen = *a
			if fromCtx, ok := idemd.AttemptFromContext(ctx); !ok || fromCtx.OperationID != a.OperationID {
				t.Error("the effect's context does not carry its attempt")
			}
			return idemd.Success{Body: provider.Effect(a.OperationID)}, nil
		}
		result, err := client.ExecuteOnce(context.Background(), chargeOp, key, payment, effect,
			idemd.WithLease(time.Second), idemd.WithAttemptDuration(2*time.Second), idemd.WithProviderDeduplicates())
		if err != nil {
			t.Fatal(err)
		}
		if !seen.PreviousOutcomeUnknown || seen.Number != 2 || seen.PreviousFence != stalled.GetFence() ||
			seen.OperationID != stalled.GetOperationId() || result.OperationID != stalled.GetOperationId() {
			t.Fatalf("%+v", seen)
		}
		if !seen.HasPreviousAttemptDeadline || seen.PreviousAttemptDeadline <= 0 || seen.PreviousAttemptDeadline > 2*time.Second {
			t.Fatalf("previous attempt deadline %s", seen.PreviousAttemptDeadline)
		}
	})
}

// Issue 17 item 3: the call site said neither how to look the provider up nor that
// the provider deduplicates, so nothing can tell whether the earlier attempt took
// effect: no effect, Fail NOT_STARTED (the earlier doubt and deadline kept), and an
// error that says what to do.
func TestReconcileFirstWithoutALookupOrDeduplicationDeclinesAndNeverRuns(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		client := connect(t, srv.Addr, srv.Token)
		provider := idemdtest.NewProvider()
		key := idemdtest.Key()
		stalled := abandonedAttempt(t, client, key, 3*time.Second, 0)
		before := operationOf(t, client, stalled.GetOperationId())
		options := []idemd.ExecuteOption{idemd.WithLease(time.Second), idemd.WithAttemptDuration(3 * time.Second)}
		_, err := client.ExecuteOnce(context.Background(), chargeOp, key, payment, charging(provider), options...)
		var unknown *idemd.OutcomeUnknownError
		if !errors.As(err, &unknown) || provider.Effects() != 0 {
			t.Fatalf("%v, %d effects", err, provider.Effects())
		}
		for _, advice := range []string{"WithLookup", "WithProviderDeduplicates", "reconcile"} {
			if !strings.Contains(err.Error(), advice) {
				t.Fatalf("%q does not say %s", err, advice)
			}
		}
		var entries []*idemv1.HistoryEntry
		for _, entry := range historyEntries(t, client, stalled.GetOperationId()) {
			if entry.GetEvent() != "RENEWED" {
				entries = append(entries, entry)
			}
		}
		if events := eventsBut(entries, ""); !slices.Equal(events, []string{"CLAIMED", "TAKEN_OVER", "OUTCOME_UNKNOWN"}) ||
			entries[2].GetDetail() != "not_started" || entries[2].GetAttempt() != 2 {
			t.Fatalf("history %v", entries)
		}
		// Handed on as it was: the doubt still ends with the abandoned attempt's deadline.
		if after := operationOf(t, client, stalled.GetOperationId()); !after.GetAttemptDeadlineAt().AsTime().Equal(before.GetAttemptDeadlineAt().AsTime()) {
			t.Fatalf("the doubt moved from %v to %v", before.GetAttemptDeadlineAt().AsTime(), after.GetAttemptDeadlineAt().AsTime())
		}
		// The next call, still without either, declines again rather than running.
		if _, err := client.ExecuteOnce(context.Background(), chargeOp, key, payment, charging(provider), options...); !errors.As(err, &unknown) || provider.Effects() != 0 {
			t.Fatalf("%v, %d effects", err, provider.Effects())
		}
	})
}

// Issue 17 item 1, scaled down: a lookup reads the provider as it starts, before the
// earlier owner's charge lands (0.3 s before that owner's deadline), and answers
// "nothing" only after the deadline. Its answer must not count, or the effect would
// run a second time; asked again, the lookup finds the earlier charge, recorded.
func TestANegativeLookupThatBeganBeforeTheEarlierDeadlineIsNotTrusted(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		client := connect(t, srv.Addr, srv.Token)
		provider := idemdtest.NewProvider()
		key := idemdtest.Key()
		// The earlier owner: a 3 s attempt, a 2 s lease; its charge lands 2.7 s after
		// its Claim and it never reports (it crashed, or its Complete was lost).
		request := claimJSON(chargeOp, key, paymentJSON, 2)
		request.MaxAttemptDuration = seconds(3)
		claimed, err := client.Claim(context.Background(), request)
		if err != nil {
			t.Fatal(err)
		}
		earlier := claimed.GetAcquired().GetOwnership()
		claimedAt := time.Now()
		var mu sync.Mutex
		var landed time.Time
		time.AfterFunc(2700*time.Millisecond, func() {
			mu.Lock()
			landed = time.Now()
			mu.Unlock()
			provider.Effect(earlier.GetOperationId())
		})
		type lookupRun struct {
			started, answered, settlesAt time.Time
			found                        bool
		}
		var lookups []lookupRun
		slowLookup := func(_ context.Context, a *idemd.Attempt) (idemd.Outcome, error) {
			started := time.Now()
			body := provider.Record(a.OperationID) // the provider as it is now
			time.Sleep(time.Second)
			lookups = append(lookups, lookupRun{started, time.Now(), a.PreviousAttemptSettlesAt, body != nil})
			if body != nil {
				return idemd.Success{Body: body}, nil
			}
			return nil, nil
		}
		// The takeover claims just after the earlier lease ran out: its own attempt
		// ends 2.2 s after the earlier one, room for a lookup that straddles the
		// earlier deadline and another one after it.
		time.Sleep(time.Until(claimedAt.Add(2200 * time.Millisecond)))
		result, err := client.ExecuteOnce(context.Background(), chargeOp, key, payment, charging(provider),
			idemd.WithLookup(slowLookup), idemd.WithLease(2*time.Second), idemd.WithAttemptDuration(3*time.Second),
			idemd.WithLookupInterval(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if provider.Effects() != 1 || string(result.Body) != string(provider.Record(earlier.GetOperationId())) || result.Attempts != 2 || result.Replayed {
			t.Fatalf("%d effects, %+v, lookups %+v", provider.Effects(), result, lookups)
		}
		// The scenario happened as described: the first lookup began before the charge
		// landed and answered "nothing" after the earlier attempt had settled.
		mu.Lock()
		defer mu.Unlock()
		first := lookups[0]
		if !(first.started.Before(landed) && landed.Before(first.settlesAt) && first.settlesAt.Before(first.answered) && !first.found) ||
			!lookups[len(lookups)-1].found {
			t.Fatalf("the scenario did not happen: landed %v, lookups %+v", landed, lookups)
		}
	})
}

func TestANegativeLookupIsNotTrustedWhileTheEarlierAttemptMayRun(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		client := connect(t, srv.Addr, srv.Token)
		provider := idemdtest.NewProvider()
		key := idemdtest.Key()
		before := time.Now()
		abandonedAttempt(t, client, key, time.Second, 0)
		lookups := 0
		var ran time.Time
		nothing := func(context.Context, *idemd.Attempt) (idemd.Outcome, error) { lookups++; return nil, nil }
		effect := func(_ context.Context, a *idemd.Attempt) (idemd.Outcome, error) {
			ran = time.Now()
			return idemd.Success{Body: provider.Effect(a.OperationID)}, nil
		}
		// The earlier attempt's doubt lasts as long as this attempt: it looks,
		// declines (NOT_STARTED), and the next attempt waits the doubt out, then runs.
		result, err := client.ExecuteOnce(context.Background(), chargeOp, key, payment, effect, idemd.WithLookup(nothing),
			idemd.WithLease(300*time.Millisecond), idemd.WithAttemptDuration(time.Second), idemd.WithLookupInterval(200*time.Millisecond))
		if err != nil || provider.Effects() != 1 || lookups < 2 || result.Attempts != 3 {
			t.Fatalf("%+v %v, %d effects, %d lookups", result, err, provider.Effects(), lookups)
		}
		// Never before the earlier attempt's deadline (1 s after its Claim).
		if ran.Before(before.Add(950 * time.Millisecond)) {
			t.Fatalf("ran %s after the earlier Claim", ran.Sub(before))
		}
	})
}

func TestALookupThatFindsTheEarlierEffectRecordsIt(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		client := connect(t, srv.Addr, srv.Token)
		provider := idemdtest.NewProvider()
		key := idemdtest.Key()
		stalled := abandonedAttempt(t, client, key, 2*time.Second, 0)
		landing := time.AfterFunc(300*time.Millisecond, func() { provider.Effect(stalled.GetOperationId()) })
		defer landing.Stop()
		lookup := func(_ context.Context, a *idemd.Attempt) (idemd.Outcome, error) {
			if body := provider.Record(a.OperationID); body != nil {
				return idemd.Success{Body: body}, nil
			}
			return nil, nil
		}
		result, err := client.ExecuteOnce(context.Background(), chargeOp, key, payment, charging(provider), idemd.WithLookup(lookup),
			idemd.WithLease(500*time.Millisecond), idemd.WithAttemptDuration(2*time.Second), idemd.WithLookupInterval(100*time.Millisecond))
		if err != nil || provider.Effects() != 1 || string(result.Body) != string(provider.Record(stalled.GetOperationId())) {
			t.Fatalf("%+v %v, %d effects", result, err, provider.Effects())
		}
		again, err := client.ExecuteOnce(context.Background(), chargeOp, key, payment, charging(provider))
		if err != nil || !again.Replayed || string(again.Body) != string(result.Body) || provider.Effects() != 1 {
			t.Fatalf("%+v %v", again, err)
		}
	})
}

func TestLeaseLostLooksUpAndNeverRedoes(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		client := connect(t, srv.Addr, srv.Token)
		proxy := idemdtest.StartProxy(t, srv.Addr)
		proxied := connect(t, proxy.Addr, srv.Token, reconnectingRetries())
		provider := idemdtest.NewProvider()
		key := idemdtest.Key()
		effect := func(_ context.Context, a *idemd.Attempt) (idemd.Outcome, error) {
			provider.Effect(a.OperationID)
			proxy.Cut() // this owner's renewals fail; its lease lapses
			time.Sleep(300 * time.Millisecond)
			other, err := client.Claim(context.Background(), claimJSON(chargeOp, key, paymentJSON, 5))
			if err != nil {
				return nil, err
			}
			owner := other.GetReconcileFirst().GetOwnership()
			if _, err := client.Complete(context.Background(), &idemv1.CompleteRequest{
				OperationId: owner.GetOperationId(), Fence: owner.GetFence(),
				Result: &idemv1.Result{Body: []byte("reconciled by another owner")},
			}); err != nil {
				return nil, err
			}
			proxy.Restore()
			return idemd.Success{Body: []byte("mine")}, nil
		}
		result, err := proxied.ExecuteOnce(context.Background(), chargeOp, key, payment, effect,
			idemd.WithLease(150*time.Millisecond), idemd.WithAttemptDuration(5*time.Second))
		if err != nil || string(result.Body) != "reconciled by another owner" || !result.Replayed || provider.Effects() != 1 {
			t.Fatalf("%+v %v, %d effects", result, err, provider.Effects())
		}
		if events := eventsBut(historyEntries(t, client, result.OperationID), ""); !slices.Contains(events, "STALE_WRITE_REFUSED") {
			t.Fatalf("history %v", events)
		}
	})
}

func TestNeedsReconciliationNeverExecutes(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		client := connect(t, srv.Addr, srv.Token)
		provider := idemdtest.NewProvider()
		key := idemdtest.Key()
		stalled := abandonedAttempt(t, client, key, time.Second, 1)
		_, err := client.ExecuteOnce(context.Background(), chargeOp, key, payment, charging(provider), idemd.WithMaxAttempts(1))
		var needs *idemd.NeedsReconciliationError
		if !errors.As(err, &needs) || needs.OperationID != stalled.GetOperationId() || provider.Effects() != 0 {
			t.Fatalf("%v", err)
		}
	})
}

func TestAConflictingPayloadIsRefused(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		client := connect(t, srv.Addr, srv.Token)
		provider := idemdtest.NewProvider()
		key := idemdtest.Key()
		first, err := client.ExecuteOnce(context.Background(), chargeOp, key, payment, charging(provider))
		if err != nil {
			t.Fatal(err)
		}
		_, err = client.ExecuteOnce(context.Background(), chargeOp, key, idemd.JSON(map[string]any{"amount": 2000, "currency": "EUR"}), charging(provider))
		var conflict *idemd.StatusError
		if !errors.Is(err, idemd.ErrIdempotencyKeyReused) || !errors.As(err, &conflict) || conflict.OperationID() != first.OperationID || provider.Effects() != 1 {
			t.Fatalf("%v", err)
		}
		// A local fingerprint is the same request as the server's own.
		sum, err := idemd.FingerprintJSON([]byte(`{"currency":"EUR","amount":1000}`))
		if err != nil {
			t.Fatal(err)
		}
		again, err := client.ExecuteOnce(context.Background(), chargeOp, key, idemd.Fingerprint(sum), charging(provider))
		if err != nil || !again.Replayed {
			t.Fatalf("%+v %v", again, err)
		}
	})
}

func recording(provider *idemdtest.Provider, attempts *[]uint32) idemd.Effect {
	var mu sync.Mutex
	return func(_ context.Context, a *idemd.Attempt) (idemd.Outcome, error) {
		mu.Lock()
		*attempts = append(*attempts, a.Number)
		mu.Unlock()
		return idemd.Success{Body: provider.Effect(a.OperationID)}, nil
	}
}

// The first Claim's reply is lost and the re-send is slow: the re-send is answered
// with what is left of the lease at its handling, too little, so the owner renews
// before it starts the effect.
func TestAResentClaimAnsweredWithAShortLeaseRenewsBeforeTheEffect(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		client := connect(t, srv.Addr, srv.Token)
		proxy := idemdtest.StartProxy(t, srv.Addr)
		proxied := connect(t, proxy.Addr, srv.Token, fastRetries())
		provider := idemdtest.NewProvider()
		var renewedFirst bool
		var cancelAt time.Time
		effect := func(_ context.Context, a *idemd.Attempt) (idemd.Outcome, error) {
			cancelAt = a.CancelAt
			events := eventsBut(historyEntries(t, client, a.OperationID), "")
			renewedFirst = events[0] == "CLAIMED" && slices.Contains(events, "RENEWED")
			return idemd.Success{Body: provider.Effect(a.OperationID)}, nil
		}
		proxy.DropNextReply()
		// Re-sent after 1.3 s of a 2 s lease: under half is left, 0.7 s of slack.
		proxy.SetConnectDelay(1300 * time.Millisecond)
		started := time.Now()
		result, err := proxied.ExecuteOnce(context.Background(), chargeOp, idemdtest.Key(), payment, effect,
			idemd.WithLease(2*time.Second), idemd.WithAttemptDuration(5*time.Second))
		if err != nil || proxy.Dropped() != 1 || provider.Effects() != 1 || !renewedFirst {
			t.Fatalf("%+v %v, dropped %d, %d effects, renewed first %v", result, err, proxy.Dropped(), provider.Effects(), renewedFirst)
		}
		// The re-sent Claim (same claim_token) got the same ownership: one attempt.
		if result.Attempts != 1 || cancelAt.After(started.Add(5*time.Second)) {
			t.Fatalf("%+v, cancel at %s", result, cancelAt.Sub(started))
		}
	})
}

// The Claim's reply arrives with 200 ms of a 1 s lease left (counted from its send),
// less than the least the effect starts with: the attempt renews, and the Renew's
// lease counts from the Renew's send.
func TestALeaseNearlySpentOnArrivalIsRenewedBeforeTheEffect(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		client := connect(t, srv.Addr, srv.Token)
		proxy := idemdtest.StartProxy(t, srv.Addr)
		proxied := connect(t, proxy.Addr, srv.Token, fastRetries())
		provider := idemdtest.NewProvider()
		proxy.DelayReplies(800 * time.Millisecond)
		var attempts []uint32
		result, err := proxied.ExecuteOnce(context.Background(), chargeOp, idemdtest.Key(), payment, recording(provider, &attempts),
			idemd.WithLease(time.Second), idemd.WithAttemptDuration(5*time.Second))
		if err != nil || proxy.Delayed() != 1 || !slices.Equal(attempts, []uint32{1}) || result.Attempts != 1 || provider.Effects() != 1 {
			t.Fatalf("%+v %v, attempts %v", result, err, attempts)
		}
		if events := eventsBut(historyEntries(t, client, result.OperationID), ""); !slices.Equal(events, []string{"CLAIMED", "RENEWED", "COMPLETED"}) {
			t.Fatalf("history %v", events)
		}
	})
}

// The Claim's reply and the Renew's both arrive with 200 ms of a 1 s lease left:
// attempt 1 declines (Fail NOT_STARTED: released at once) and attempt 2 runs.
func TestTooLittleLeaseLeftNeverStartsTheEffect(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		client := connect(t, srv.Addr, srv.Token)
		proxy := idemdtest.StartProxy(t, srv.Addr)
		proxied := connect(t, proxy.Addr, srv.Token, fastRetries())
		provider := idemdtest.NewProvider()
		proxy.DelayReplies(800*time.Millisecond, 800*time.Millisecond)
		var attempts []uint32
		result, err := proxied.ExecuteOnce(context.Background(), chargeOp, idemdtest.Key(), payment, recording(provider, &attempts),
			idemd.WithLease(time.Second), idemd.WithAttemptDuration(5*time.Second))
		if err != nil || !slices.Equal(attempts, []uint32{2}) || result.Attempts != 2 || provider.Effects() != 1 {
			t.Fatalf("%+v %v, attempts %v", result, err, attempts)
		}
		entries := historyEntries(t, client, result.OperationID)
		if events := eventsBut(entries, ""); !slices.Equal(events, []string{"CLAIMED", "RENEWED", "RETRY_SCHEDULED", "RETRY_STARTED", "COMPLETED"}) ||
			entries[2].GetDetail() != "not_started" {
			t.Fatalf("history %v", entries)
		}
	})
}

// The long fault run's liveness failure: an attempt that declines because the doubt
// it took over outlasts it must not push the doubt forward. The next attempt is told
// the earlier attempt's deadline, waits it out and runs.
func TestADeclinedTakeoverHandsOnTheEarlierAttemptsDoubt(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		client := connect(t, srv.Addr, srv.Token)
		provider := idemdtest.NewProvider()
		key := idemdtest.Key()
		// Attempt 1 claims with a 2 s lease and crashes: its effect may run until its
		// deadline, 4 s after its Claim.
		request := claimJSON(chargeOp, key, paymentJSON, 2)
		request.MaxAttemptDuration = seconds(4)
		request.ClaimToken = []byte("crashed-attempt")
		first, err := client.Claim(context.Background(), request)
		if err != nil || first.GetAcquired() == nil {
			t.Fatalf("%v %v", first, err)
		}
		firstReplied := time.Now()
		// This call's Claim waits (long poll) until attempt 1's lease runs out, 2 s
		// after it was sent: its attempt (2) counts 4 s from that send, so it would end
		// before attempt 1's doubt does. It declines; attempt 3 is told attempt 1's
		// deadline, not attempt 2's.
		type told struct {
			attempt   uint32
			settlesAt time.Time
		}
		var tolds []told
		lookup := func(_ context.Context, a *idemd.Attempt) (idemd.Outcome, error) {
			tolds = append(tolds, told{a.Number, a.PreviousAttemptSettlesAt})
			if body := provider.Record(a.OperationID); body != nil {
				return idemd.Success{Body: body}, nil
			}
			return nil, nil
		}
		var attempts []uint32
		result, err := client.ExecuteOnce(context.Background(), chargeOp, key, payment, recording(provider, &attempts),
			idemd.WithLookup(lookup), idemd.WithLease(3*time.Second), idemd.WithAttemptDuration(4*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		entries := historyEntries(t, client, result.OperationID)
		if provider.Effects() != 1 || !slices.Equal(attempts, []uint32{3}) {
			t.Fatalf("%d effects, attempts %v, history %v, told %+v", provider.Effects(), attempts, eventsBut(entries, ""), tolds)
		}
		seen := map[uint32]bool{}
		for _, each := range tolds {
			seen[each.attempt] = true
			// Measured from a reply that came at most a little later.
			if late := each.settlesAt.Sub(firstReplied.Add(4 * time.Second)); late > 700*time.Millisecond {
				t.Fatalf("attempt %d was told the doubt lasts %s past attempt 1's deadline", each.attempt, late)
			}
		}
		if !seen[2] || !seen[3] || len(seen) != 2 {
			t.Fatalf("told %+v", tolds)
		}
		var rest []*idemv1.HistoryEntry
		for _, entry := range entries {
			if entry.GetEvent() != "RENEWED" {
				rest = append(rest, entry)
			}
		}
		if events := eventsBut(rest, ""); !slices.Equal(events, []string{"CLAIMED", "TAKEN_OVER", "OUTCOME_UNKNOWN", "TAKEN_OVER", "COMPLETED"}) ||
			rest[2].GetDetail() != "not_started" {
			t.Fatalf("history %v", rest)
		}
	})
}

// The first send's reply is held for 2 s, and every reply behind it on that
// connection: the sends at 0 and ~0.8 s time out after 800 ms, and the one at ~1.6 s
// is answered at ~2 s with what is left of the 3.5 s attempt at its handling. Counted
// from that send, the attempt has plenty left; counted from the first send, it would
// be all but spent before the answer even arrived, and attempt 1 would decline.
func TestAResentClaimCountsItsAttemptFromTheAnsweredSend(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		client := connect(t, srv.Addr, srv.Token)
		proxy := idemdtest.StartProxy(t, srv.Addr)
		provider := idemdtest.NewProvider()
		proxy.DelayReplies(2 * time.Second)
		policy := idemd.DefaultRetryPolicy
		policy.InitialBackoff, policy.MaxBackoff, policy.CallTimeout = 20*time.Millisecond, 200*time.Millisecond, 800*time.Millisecond
		resending := connect(t, proxy.Addr, srv.Token, idemd.WithRetryPolicy(policy))
		var attempts []uint32
		started := time.Now()
		result, err := resending.ExecuteOnce(context.Background(), chargeOp, idemdtest.Key(), payment, recording(provider, &attempts),
			idemd.WithLease(3*time.Second), idemd.WithAttemptDuration(3500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		// The held reply was waited out: the Claim was re-sent past the call timeout.
		if proxy.Delayed() != 1 || time.Since(started) < 2*time.Second {
			t.Fatalf("delayed %d, after %s", proxy.Delayed(), time.Since(started))
		}
		if !slices.Equal(attempts, []uint32{1}) || result.Attempts != 1 || provider.Effects() != 1 {
			t.Fatalf("%+v attempts %v", result, attempts)
		}
		if events := eventsBut(historyEntries(t, client, result.OperationID), "RENEWED"); !slices.Equal(events, []string{"CLAIMED", "COMPLETED"}) {
			t.Fatalf("history %v", events)
		}
	})
}
