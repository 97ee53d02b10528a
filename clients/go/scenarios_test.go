package idemd_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	idemd "github.com/idemd/idemd/clients/go"
	"github.com/idemd/idemd/clients/go/internal/idemdtest"
)

// End-to-end scenarios against a real server on both stores, counting effects at a
// fake provider: concurrent duplicates, a lost reply, a server restart during the
// effect, a lost lease.

const orderOp = "orders.create"

var order = idemd.JSON(map[string]any{"sku": "book-42", "amount": 1999})

func creating(provider *idemdtest.Provider, delay time.Duration) idemd.Effect {
	return func(_ context.Context, a *idemd.Attempt) (idemd.Outcome, error) {
		time.Sleep(delay)
		return idemd.Success{Body: provider.Effect(a.OperationID), ContentType: "application/json"}, nil
	}
}

func TestConcurrentDuplicatesMakeOneEffect(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		provider := idemdtest.NewProvider()
		clients := []*idemd.Client{connect(t, srv.Addr, srv.Token), connect(t, srv.Addr, srv.Token), connect(t, srv.Addr, srv.Token)}
		key := idemdtest.Key()
		results := make([]*idemd.Result, 10)
		errs := make([]error, 10)
		var wg sync.WaitGroup
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errs[i] = clients[i%3].ExecuteOnce(context.Background(), orderOp, key, order, creating(provider, 300*time.Millisecond))
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		if provider.Effects() != 1 {
			t.Fatalf("%d effects", provider.Effects())
		}
		fresh := 0
		for _, result := range results {
			if string(result.Body) != string(results[0].Body) || result.OperationID != results[0].OperationID {
				t.Fatalf("answers differ: %+v %+v", result, results[0])
			}
			if !result.Replayed {
				fresh++
			}
		}
		if fresh != 1 {
			t.Fatalf("%d answers were not replays", fresh)
		}
	})
}

func TestConcurrentConflictingRequests(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		client := connect(t, srv.Addr, srv.Token)
		provider := idemdtest.NewProvider()
		key := idemdtest.Key()
		other := idemd.JSON(map[string]any{"sku": "book-42", "amount": 2999})
		var mu sync.Mutex
		var bodies []string
		conflicts := 0
		var wg sync.WaitGroup
		for i := range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				payload := order
				if i%2 == 0 {
					payload = other
				}
				result, err := client.ExecuteOnce(context.Background(), orderOp, key, payload, creating(provider, 200*time.Millisecond))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					bodies = append(bodies, string(result.Body))
				case errors.Is(err, idemd.ErrIdempotencyKeyReused):
					conflicts++
				default:
					t.Errorf("unexpected %v", err)
				}
			}()
		}
		wg.Wait()
		if provider.Effects() != 1 || len(bodies) != 5 || conflicts != 5 || len(slices.Compact(slices.Sorted(slices.Values(bodies)))) != 1 {
			t.Fatalf("%d effects, %d results, %d conflicts", provider.Effects(), len(bodies), conflicts)
		}
	})
}

func TestALostReplyMakesOneEffect(t *testing.T) {
	for _, lost := range []string{"claim", "complete"} {
		t.Run(lost, func(t *testing.T) {
			eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
				client := connect(t, srv.Addr, srv.Token)
				proxy := idemdtest.StartProxy(t, srv.Addr)
				proxied := connect(t, proxy.Addr, srv.Token, fastRetries())
				provider := idemdtest.NewProvider()
				key := idemdtest.Key()
				effect := func(_ context.Context, a *idemd.Attempt) (idemd.Outcome, error) {
					if lost == "complete" {
						proxy.DropNextReply() // the Complete's reply (no Renew is due yet)
					}
					return idemd.Success{Body: provider.Effect(a.OperationID)}, nil
				}
				if lost == "claim" {
					proxy.DropNextReply()
				}
				result, err := proxied.ExecuteOnce(context.Background(), orderOp, key, order, effect, idemd.WithLease(10*time.Second))
				if err != nil || proxy.Dropped() != 1 || provider.Effects() != 1 || result.Replayed {
					t.Fatalf("%+v %v, dropped %d, %d effects", result, err, proxy.Dropped(), provider.Effects())
				}
				if events := eventsBut(historyEntries(t, client, result.OperationID), ""); !slices.Equal(events, []string{"CLAIMED", "COMPLETED"}) {
					t.Fatalf("history %v", events)
				}
				again, err := client.ExecuteOnce(context.Background(), orderOp, key, order, creating(provider, 0))
				if err != nil || !again.Replayed || string(again.Body) != string(result.Body) || provider.Effects() != 1 {
					t.Fatalf("%+v %v", again, err)
				}
			})
		})
	}
}

func TestAServerRestartDuringTheEffectMakesOneEffect(t *testing.T) {
	for _, restart := range []string{"during_the_effect", "before_the_complete"} {
		t.Run(restart, func(t *testing.T) {
			eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
				client := connect(t, srv.Addr, srv.Token)
				provider := idemdtest.NewProvider()
				key := idemdtest.Key()
				restarted := make(chan struct{})
				effect := func(_ context.Context, a *idemd.Attempt) (idemd.Outcome, error) {
					body := provider.Effect(a.OperationID)
					srv.Kill() // SIGKILL: the record holds only what was committed
					if restart == "during_the_effect" {
						srv.Start()
						close(restarted)
					} else {
						// Back only after the effect returned: the Complete is re-sent
						// until then.
						time.AfterFunc(300*time.Millisecond, func() { srv.Start(); close(restarted) })
					}
					return idemd.Success{Body: body}, nil
				}
				result, err := client.ExecuteOnce(context.Background(), orderOp, key, order, effect, idemd.WithLease(10*time.Second))
				<-restarted
				if err != nil || provider.Effects() != 1 || srv.Starts() != 2 {
					t.Fatalf("%+v %v, %d effects, %d starts", result, err, provider.Effects(), srv.Starts())
				}
				again, err := client.ExecuteOnce(context.Background(), orderOp, key, order, creating(provider, 0))
				if err != nil || !again.Replayed || string(again.Body) != string(result.Body) || provider.Effects() != 1 {
					t.Fatalf("%+v %v", again, err)
				}
				if events := eventsBut(historyEntries(t, client, result.OperationID), "RENEWED"); !slices.Equal(events, []string{"CLAIMED", "COMPLETED"}) {
					t.Fatalf("history %v", events)
				}
			})
		})
	}
}

// Owner A's effect lands, then A is cut off and its lease lapses; B takes over
// (ReconcileFirst), finds A's effect at the provider and records it. A is refused
// (LEASE_LOST), looks the operation up and answers with B's record.
func TestALostLeaseIsAnsweredFromTheRecordNeverRedone(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		client := connect(t, srv.Addr, srv.Token)
		proxy := idemdtest.StartProxy(t, srv.Addr)
		proxied := connect(t, proxy.Addr, srv.Token, reconnectingRetries())
		provider := idemdtest.NewProvider()
		key := idemdtest.Key()
		bDone := make(chan struct{})
		lookup := func(_ context.Context, a *idemd.Attempt) (idemd.Outcome, error) {
			if body := provider.Record(a.OperationID); body != nil {
				return idemd.Success{Body: body}, nil
			}
			return nil, nil
		}
		effectA := func(_ context.Context, a *idemd.Attempt) (idemd.Outcome, error) {
			body := provider.Effect(a.OperationID)
			proxy.Cut()
			<-bDone
			proxy.Restore()
			return idemd.Success{Body: body}, nil
		}
		type answer struct {
			result *idemd.Result
			err    error
		}
		aDone := make(chan answer, 1)
		go func() {
			result, err := proxied.ExecuteOnce(context.Background(), orderOp, key, order, effectA,
				idemd.WithLease(200*time.Millisecond), idemd.WithAttemptDuration(10*time.Second))
			aDone <- answer{result, err}
		}()
		time.Sleep(500 * time.Millisecond) // A's lease has lapsed
		b, err := client.ExecuteOnce(context.Background(), orderOp, key, order, creating(provider, 0),
			idemd.WithLookup(lookup), idemd.WithLease(5*time.Second))
		close(bDone)
		a := <-aDone
		if err != nil || a.err != nil {
			t.Fatalf("B %v, A %v", err, a.err)
		}
		if provider.Effects() != 1 || b.Replayed || b.Attempts != 2 || !a.result.Replayed || string(a.result.Body) != string(b.Body) {
			t.Fatalf("%d effects, A %+v, B %+v", provider.Effects(), a.result, b)
		}
		events := eventsBut(historyEntries(t, client, b.OperationID), "")
		if !slices.Contains(events, "TAKEN_OVER") || !slices.Contains(events, "STALE_WRITE_REFUSED") {
			t.Fatalf("history %v", events)
		}
	})
}

// The caller's cancellation reaches the effect through its context; an effect that
// stops on it reports its outcome unknown, and nothing runs again without a check.
func TestTheCallersCancellationReachesTheEffect(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		client := connect(t, srv.Addr, srv.Token)
		ctx, cancel := context.WithCancel(context.Background())
		effect := func(ctx context.Context, _ *idemd.Attempt) (idemd.Outcome, error) {
			cancel()
			<-ctx.Done()
			return nil, ctx.Err()
		}
		_, err := client.ExecuteOnce(ctx, orderOp, idemdtest.Key(), order, effect)
		var unknown *idemd.OutcomeUnknownError
		if !errors.As(err, &unknown) || !errors.Is(err, context.Canceled) {
			t.Fatalf("%v", err)
		}
		// The report was made although the caller had gone.
		if events := eventsBut(historyEntries(t, client, unknown.OperationID), "RENEWED"); !slices.Equal(events, []string{"CLAIMED", "OUTCOME_UNKNOWN"}) {
			t.Fatalf("history %v", events)
		}
	})
}
