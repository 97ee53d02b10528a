package idemd

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	idemv1 "github.com/idemd/idemd/clients/go/idemv1"
)

// ExecuteOnce runs effect at most once for the intent (operation, key, payload) and
// answers with its recorded result, made now or replayed.
//
// The key must be made once per business intent and persisted before the first
// call; the payload identifies the request (the same key with another payload is
// IDEMPOTENCY_KEY_REUSED, never a replay). ctx bounds the call: its cancellation
// stops claiming and waiting and is passed on to the effect, and its deadline also
// bounds the effect (which is otherwise cancelled at the attempt deadline, less a
// margin to report it). Owner writes already under way (recording the outcome,
// declining) finish within the attempt's deadline even after ctx is cancelled.
//
// What idemd answers decides what runs:
//
//   - Acquired: the effect runs, the lease renewed meanwhile; its outcome is
//     recorded: Success (Complete), Terminal (Fail TERMINAL, returned as an
//     *OperationFailedError), Retryable (Fail RETRYABLE, then a new attempt within
//     WithPendingTimeout), Unknown or an error or a panic (Fail UNKNOWN, an
//     *OutcomeUnknownError). Cancelled at the attempt deadline: an
//     *OutcomeUnknownError matching ErrAttemptTimeout.
//   - ReconcileFirst (an earlier attempt may have taken effect): see WithLookup and
//     WithProviderDeduplicates; with neither the effect never runs and the call
//     fails with an *OutcomeUnknownError.
//   - Completed: the stored result (Replayed) or the stored failure
//     (*OperationFailedError); nothing runs.
//   - Pending: waits (long-polling Claims) up to WithPendingTimeout, then a
//     *PendingError.
//   - NeedsReconciliation, or an outcome this client does not know: nothing runs
//     (*NeedsReconciliationError, *UnrecognisedOutcomeError).
//
// Told LEASE_LOST after the effect ran, it looks the operation up and answers with
// what is stored, never redoing the effect. Other failures are *StatusError values
// (e.g. errors.Is(err, ErrIdempotencyKeyReused)).
func (c *Client) ExecuteOnce(ctx context.Context, operation, key string, payload Payload, effect Effect, options ...ExecuteOption) (*Result, error) {
	config := defaultExecuteConfig()
	for _, option := range options {
		option(&config)
	}
	switch {
	case effect == nil:
		return nil, errors.New("idemd: ExecuteOnce needs an effect")
	case payload.err != nil:
		return nil, payload.err
	case !payload.nonNil:
		return nil, errors.New("idemd: ExecuteOnce needs a payload (idemd.JSON, JSONText, Bytes or Fingerprint)")
	case config.lease <= 0 || config.attemptDuration <= 0:
		return nil, errors.New("idemd: the lease and the attempt duration must be positive")
	}
	if err := checkPreviousFingerprints(config.previousFingerprints); err != nil {
		return nil, err
	}
	if !config.selector.Empty() {
		selected, err := selectedPayload(payload, config.selector)
		if err != nil {
			return nil, err
		}
		payload = selected
	}
	d := &driver{
		client:   c,
		ctx:      ctx,
		detached: context.WithoutCancel(ctx),
		effect:   effect,
		lookupFn: config.lookup,
		renewals: map[*attempt]*renewal{},
	}
	x := &protocol{port: d, operation: operation, key: key, payload: payload, config: config}
	x.callerDeadline, _ = ctx.Deadline()
	return x.run()
}

// selectedPayload is the fingerprint of what selector picks from a JSON payload.
func selectedPayload(payload Payload, selector *Selector) (Payload, error) {
	if payload.document == nil {
		return Payload{}, errors.New("idemd: a selector applies to a JSON payload (idemd.JSON or JSONText)")
	}
	sum, err := selector.Fingerprint([]byte(*payload.document), nil)
	if err != nil {
		return Payload{}, err
	}
	return Fingerprint(sum), nil
}

// driver is the protocol's port over a Client: RPCs with re-sends, the effect and the
// lookup on goroutines of their own, renewals alongside, timers.
type driver struct {
	client *Client
	ctx    context.Context
	// detached carries ctx's values without its cancellation: an owner's writes
	// (recording an outcome, declining) finish even when the caller has gone, within
	// the deadlines the protocol gives them.
	detached context.Context
	effect   Effect
	lookupFn Lookup

	mu       sync.Mutex
	renewals map[*attempt]*renewal
}

// renewal is an attempt's renewing goroutine and its signals.
type renewal struct {
	stop     chan struct{}
	done     chan struct{}
	lost     chan struct{}
	lostOnce sync.Once
	cancel   context.CancelFunc
}

func (d *driver) now() time.Time     { return d.client.now() }
func (d *driver) claimToken() []byte { return newClaimToken() }
func (d *driver) cancelled() error {
	if d.ctx.Err() != nil {
		return fmt.Errorf("idemd: %w", context.Cause(d.ctx))
	}
	return nil
}

func (d *driver) claim(request *idemv1.ClaimRequest, deadline time.Time) (*idemv1.ClaimResponse, time.Time, error) {
	return d.client.claimAnswered(d.ctx, request, deadline)
}

func (d *driver) renew(request *idemv1.RenewRequest, deadline time.Time) (*idemv1.RenewResponse, time.Time, error) {
	return d.client.renewAnswered(d.detached, request, deadline)
}

func (d *driver) complete(request *idemv1.CompleteRequest, deadline time.Time) (*idemv1.CompleteResponse, error) {
	response, _, err := send(d.detached, d.client, d.client.rpc.Complete, request, deadline, 0)
	return response, err
}

func (d *driver) fail(request *idemv1.FailRequest, deadline time.Time) (*idemv1.FailResponse, error) {
	response, _, err := send(d.detached, d.client, d.client.rpc.Fail, request, deadline, 0)
	return response, err
}

func (d *driver) lookup(request *idemv1.LookupRequest) (*idemv1.LookupResponse, error) {
	response, _, err := send(d.detached, d.client, d.client.rpc.Lookup, request, time.Time{}, 0)
	return response, err
}

func (d *driver) sleep(duration time.Duration) error {
	timer := time.NewTimer(duration)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-d.ctx.Done():
		return d.cancelled()
	}
}

func (d *driver) startRenewing(a *attempt) {
	ctx, cancel := context.WithCancel(d.detached)
	r := &renewal{stop: make(chan struct{}), done: make(chan struct{}), lost: make(chan struct{}), cancel: cancel}
	a.mu.Lock()
	a.onLost = func() { r.lostOnce.Do(func() { close(r.lost) }) }
	a.mu.Unlock()
	d.mu.Lock()
	d.renewals[a] = r
	d.mu.Unlock()
	go func() {
		defer close(r.done)
		keepRenewing(&driverRenewer{d: d, ctx: ctx, stop: r.stop}, a)
	}()
}

func (d *driver) stopRenewing(a *attempt) {
	d.mu.Lock()
	r := d.renewals[a]
	delete(d.renewals, a)
	d.mu.Unlock()
	if r == nil {
		return
	}
	close(r.stop)
	r.cancel()
	<-r.done
}

func (d *driver) lostSignal(a *attempt) <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r := d.renewals[a]; r != nil {
		return r.lost
	}
	return nil
}

// driverRenewer is keepRenewing's port: Renew on a context that stopRenewing
// cancels, and pauses that stopRenewing ends.
type driverRenewer struct {
	d    *driver
	ctx  context.Context
	stop chan struct{}
}

func (r *driverRenewer) now() time.Time { return r.d.now() }

func (r *driverRenewer) wait(duration time.Duration) bool {
	timer := time.NewTimer(duration)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-r.stop:
		return false
	}
}

func (r *driverRenewer) renew(request *idemv1.RenewRequest, deadline time.Time) (*idemv1.RenewResponse, time.Time, error) {
	return r.d.client.renewAnswered(r.ctx, request, deadline)
}

type effectAnswer struct {
	outcome Outcome
	err     error
}

// guarded runs fn (the effect or the lookup) on a goroutine of its own, with a
// context that carries the attempt, its cancel point as deadline, and the caller's
// cancellation. When the lease is lost (the context is cancelled with ErrLeaseLost
// as its cause) or the cancel point comes first (its deadline is exceeded), fn is
// given half the attempt's margin to return and the attempt's interruption is
// answered; whatever fn returns after that is never recorded.
func (d *driver) guarded(a *attempt, fn func(context.Context, *Attempt) (Outcome, error)) (Outcome, interruption, error) {
	lostCtx, cancelLost := context.WithCancelCause(context.WithValue(d.ctx, attemptKey{}, &a.info))
	defer cancelLost(nil)
	ctx, cancel := context.WithDeadline(lostCtx, a.cancelAt)
	defer cancel()
	answers := make(chan effectAnswer, 1)
	go func() {
		var answer effectAnswer
		defer func() {
			if panicked := recover(); panicked != nil {
				answer = effectAnswer{err: &PanicError{Value: panicked, Stack: debug.Stack()}}
			}
			answers <- answer
		}()
		answer.outcome, answer.err = fn(ctx, &a.info)
	}()
	timer := time.NewTimer(max(0, a.cancelAt.Sub(d.now())))
	defer timer.Stop()
	select {
	case answer := <-answers:
		// An answer given once the lease was lost or the cancel point passed (its
		// context's own deadline may beat the timer) is an interrupted attempt's.
		if stopped := a.interruption(d.now()); stopped != notInterrupted {
			return nil, stopped, nil
		}
		return answer.outcome, notInterrupted, answer.err
	case <-d.lostSignal(a):
		cancelLost(ErrLeaseLost)
	case <-timer.C:
		// The context's own deadline is the same instant: it ends as exceeded,
		// not cancelled.
	}
	grace := time.NewTimer(a.margin / 2)
	defer grace.Stop()
	select {
	case <-answers:
	case <-grace.C:
	}
	if stopped := a.interruption(d.now()); stopped != notInterrupted {
		return nil, stopped, nil
	}
	return nil, timeUp, nil
}

func (d *driver) runEffect(a *attempt) (Outcome, interruption, error) {
	return d.guarded(a, d.effect)
}

func (d *driver) runLookup(a *attempt) (Outcome, interruption, error) {
	return d.guarded(a, d.lookupFn)
}

func (d *driver) pause(a *attempt, duration time.Duration) interruption {
	timer := time.NewTimer(min(duration, max(0, a.cancelAt.Sub(d.now()))))
	defer timer.Stop()
	select {
	case <-timer.C:
		return a.interruption(d.now())
	case <-d.lostSignal(a):
		return a.interruption(d.now())
	case <-d.ctx.Done():
		// The caller gave up: decline rather than keep waiting for the doubt to end.
		return timeUp
	}
}
