package idemd

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	idemv1 "github.com/idemd/idemd/clients/go/idemv1"
)

// The client protocol of ExecuteOnce, written as a core that performs no I/O: every
// server answer, every instant and every random claim_token comes in through the
// port, and every RPC, pause, lookup and effect goes out through it. execute.go is
// the port over a Client (gRPC, goroutines, timers); protocol_test.go drives this
// core with scripted answers and a fake clock. The decisions are the Python client's
// (clients/python/src/idemd/protocol.py, the reference):
//
//   - a fresh random claim_token per attempt, re-sent unchanged (with the whole
//     Claim) after UNAVAILABLE or a lost reply;
//   - the lease and the attempt deadline count from the start of the send of the
//     Claim (or Renew) that was answered; the effect is never started while the
//     lease may be running out (it is renewed once first), is renewed while it runs,
//     and is cancelled at the attempt deadline (then Fail UNKNOWN);
//   - an attempt that does not start the effect (too little of the attempt left, or
//     of the lease even after one Renew, or an earlier attempt's doubt that outlasts
//     it) declines: Fail NOT_STARTED, which hands the operation on as it was, and
//     claims again within the caller's time; FAILED is answered with what is stored;
//   - the effect's outcome maps to Complete / Fail TERMINAL / RETRYABLE / UNKNOWN;
//   - Completed replays without running the effect; Pending waits (Claim wait,
//     retry_after); NeedsReconciliation or an outcome this client does not know
//     never executes; LEASE_LOST looks the operation up and answers with what is
//     stored, never redoing the effect;
//   - ReconcileFirst: with a lookup, the provider is asked first; a positive answer
//     is recorded at once, a negative one counts only if the lookup started at or
//     after the earlier attempt settles (previous_attempt_deadline, counted from the
//     reply's arrival). With provider deduplication declared, the effect runs again,
//     told so. With neither, the effect never runs: the attempt declines and the
//     call fails with an *OutcomeUnknownError that says what to do.

// Constants of the protocol, the same in every idemd client.
const (
	// maxClaimWait is the longest wait one Claim asks for while the operation is
	// pending.
	maxClaimWait = 20 * time.Second
	// pendingSlack: with less than this left of the caller's time, Pending is final.
	pendingSlack = 50 * time.Millisecond
	// A claim is sent with at least this long to be answered, whatever is left.
	minClaimTime = time.Second
	// The attempt's margin (room to stop the effect and report before its deadline)
	// is a tenth of the attempt, within these bounds.
	minAttemptMargin = 50 * time.Millisecond
	maxAttemptMargin = time.Second
)

// What an attempt stopped at its deadline reports (Fail UNKNOWN), and what one that
// never started the effect reports (Fail NOT_STARTED): one value each, so that a
// re-sent report is the same request, answered from the first one's receipt.
const (
	attemptDeadlineCode    = "attempt_deadline"
	attemptDeadlineMessage = "the effect was cancelled at the attempt deadline"
	notStartedCode         = "not_started"
	notStartedMessage      = "the effect was not started: too little of the lease or attempt was left, " +
		"or an earlier attempt may still be running"
)

// cannotCheckEarlierAttempt is why a ReconcileFirst without a lookup or a
// deduplicating provider never runs the effect: the caller learns what to change.
const cannotCheckEarlierAttempt = "an earlier attempt may have taken effect and this call cannot check it: " +
	"pass a lookup (idemd.WithLookup), or declare provider deduplication (idemd.WithProviderDeduplicates) " +
	"if the provider honours the key, or reconcile the operation"

// interruption is why a guarded step (the effect, a lookup, a pause) stopped early.
type interruption int

const (
	notInterrupted interruption = iota
	// leaseLost: another owner took the operation over (LEASE_LOST).
	leaseLost
	// timeUp: the attempt's cancel point is reached (or its deadline passed at the
	// server), or the caller gave up.
	timeUp
)

func (i interruption) Error() string {
	switch i {
	case leaseLost:
		return "the lease was lost"
	case timeUp:
		return "the attempt's time is up"
	}
	return "not interrupted"
}

// port is everything the protocol needs from outside: answers, the clock, the
// claim tokens, and the running of effects, lookups and pauses.
type port interface {
	now() time.Time
	claimToken() []byte
	// cancelled is the caller's cancellation, nil while the caller waits.
	cancelled() error
	// claim sends a Claim (re-sent unchanged as the retry policy decides) and
	// returns the answer and when the send it answers began.
	claim(request *idemv1.ClaimRequest, deadline time.Time) (*idemv1.ClaimResponse, time.Time, error)
	renew(request *idemv1.RenewRequest, deadline time.Time) (*idemv1.RenewResponse, time.Time, error)
	complete(request *idemv1.CompleteRequest, deadline time.Time) (*idemv1.CompleteResponse, error)
	fail(request *idemv1.FailRequest, deadline time.Time) (*idemv1.FailResponse, error)
	lookup(request *idemv1.LookupRequest) (*idemv1.LookupResponse, error)
	// sleep pauses outside an attempt; an error when the caller gave up meanwhile.
	sleep(d time.Duration) error
	// startRenewing runs keepRenewing for the attempt alongside, until
	// stopRenewing.
	startRenewing(a *attempt)
	stopRenewing(a *attempt)
	// The guarded steps run within the attempt: they end early, with the
	// attempt's interruption, when the lease is lost or its time is up.
	runEffect(a *attempt) (Outcome, interruption, error)
	runLookup(a *attempt) (Outcome, interruption, error)
	pause(a *attempt, d time.Duration) interruption
}

// protocol is one ExecuteOnce call.
type protocol struct {
	port           port
	operation, key string
	payload        Payload
	config         executeConfig
	// callerDeadline is the caller's context deadline (zero: none).
	callerDeadline time.Time
}

func durationOf(d *durationpb.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return max(0, d.AsDuration())
}

func (x *protocol) claimRequest(wait time.Duration, waiting bool) *idemv1.ClaimRequest {
	request := &idemv1.ClaimRequest{
		Scope:              &idemv1.Scope{Operation: x.operation, Key: x.key},
		ClaimToken:         x.port.claimToken(),
		Lease:              durationpb.New(x.config.lease),
		MaxAttemptDuration: durationpb.New(x.config.attemptDuration),
		MaxAttempts:        x.config.maxAttempts,
	}
	x.payload.set(request)
	if x.config.retention != nil {
		request.Retention = durationpb.New(*x.config.retention)
	}
	if x.config.operationDeadline != nil {
		request.OperationDeadline = durationpb.New(*x.config.operationDeadline)
	}
	if waiting {
		request.Wait = durationpb.New(wait)
	}
	return request
}

// run is the whole of ExecuteOnce.
func (x *protocol) run() (*Result, error) {
	end := x.port.now().Add(x.config.pendingTimeout)
	if !x.callerDeadline.IsZero() && x.callerDeadline.Before(end) {
		end = x.callerDeadline
	}
	var wait time.Duration
	waiting := false
	for {
		if err := x.port.cancelled(); err != nil {
			return nil, err
		}
		request := x.claimRequest(wait, waiting)
		response, sentAt, err := x.port.claim(request, later(end, x.port.now().Add(minClaimTime)))
		if err != nil {
			return nil, err
		}
		receivedAt := x.port.now()
		switch outcome := response.GetOutcome().(type) {
		case *idemv1.ClaimResponse_Acquired, *idemv1.ClaimResponse_ReconcileFirst:
			a := newAttempt(response, sentAt, receivedAt, x.config, x.callerDeadline)
			result, again, err := x.runAttempt(a)
			if !again {
				return result, err
			}
			// Retryable, or declined before the effect: claim again for the next
			// attempt, within the caller's time.
			if !x.port.now().Before(end) {
				return nil, &PendingError{OperationID: a.operationID, RetryAfter: a.reclaimAfter, Reason: a.reclaimReason.String()}
			}
			waiting = false
		case *idemv1.ClaimResponse_Completed:
			return replayed(outcome.Completed)
		case *idemv1.ClaimResponse_Pending:
			pending := outcome.Pending
			retryAfter := durationOf(pending.GetRetryAfter())
			remaining := end.Sub(x.port.now())
			if remaining <= pendingSlack {
				return nil, &PendingError{OperationID: pending.GetOperationId(), RetryAfter: retryAfter, Reason: pending.GetReason().String()}
			}
			if waiting && receivedAt.Sub(sentAt) < min(pendingSlack, wait) {
				// The server did not wait (it has as many waiters as it allows, or
				// clamped the wait): do not spin.
				if err := x.port.sleep(min(retryAfter, remaining, time.Second)); err != nil {
					return nil, err
				}
			}
			wait, waiting = max(0, min(maxClaimWait, remaining-pendingSlack)), true
		case *idemv1.ClaimResponse_NeedsReconciliation:
			needs := outcome.NeedsReconciliation
			return nil, &NeedsReconciliationError{OperationID: needs.GetOperationId(), Fence: needs.GetFence(), Attempts: needs.GetAttempts()}
		default:
			return nil, &UnrecognisedOutcomeError{}
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func replayed(completed *idemv1.Completed) (*Result, error) {
	if completed.GetError() != nil || completed.GetState() == idemv1.OperationState_OPERATION_STATE_FAILED {
		return nil, operationFailed(completed.GetOperationId(), completed.GetError(), true)
	}
	return stored(completed.GetOperationId(), completed.GetResult(), completed.GetAttempts()), nil
}

// stored is the result an earlier call recorded, as this call answers it.
func stored(operationID string, result *idemv1.Result, attempts uint32) *Result {
	return &Result{
		OperationID: operationID,
		Body:        result.GetBody(),
		ContentType: result.GetContentType(),
		Metadata:    result.GetMetadata(),
		Attempts:    attempts,
		Replayed:    true,
	}
}

func operationFailed(operationID string, stored *idemv1.OperationError, replayed bool) *OperationFailedError {
	return &OperationFailedError{
		OperationID: operationID,
		Reason:      stored.GetReason().String(),
		Code:        stored.GetCode(),
		Message:     stored.GetMessage(),
		Metadata:    stored.GetMetadata(),
		Replayed:    replayed,
	}
}

// ---- one owned attempt ---------------------------------------------------------------

// attempt is one owned attempt: the lease, renewed alongside the effect, the time
// bounds, and what was decided so far. The lease fields are shared with the
// renewals (mu); the rest belongs to the protocol's own flow.
type attempt struct {
	info        Attempt
	operationID string
	fence       uint64
	number      uint32
	// lease is the lease asked for.
	lease time.Duration
	// margin is the room left before the deadline to stop the effect and report;
	// the effect is not started with less than this before cancelAt.
	margin time.Duration
	// leaseMargin: the effect is not started with less than this of the lease left,
	// even after a Renew. Judged against the lease asked for, not the one granted:
	// a re-sent Claim is granted only what was left by then, and half of a remnant
	// is no margin.
	leaseMargin time.Duration
	cancelAt    time.Time

	hasLookup            bool
	providerDeduplicates bool
	lookupInterval       time.Duration

	// started is set just before the effect starts: until then nothing ran, and an
	// attempt that cannot go on declines instead of reporting UNKNOWN.
	started bool
	// When the attempt answers "claim again": when the next attempt is due, and why,
	// should the caller's time run out first.
	reclaimAfter  time.Duration
	reclaimReason idemv1.PendingReason

	mu             sync.Mutex
	granted        time.Duration
	leaseExpiresAt time.Time
	deadlineAt     time.Time
	lost           bool
	lostErr        error
	// onLost is the driver's hook, called once when the lease is lost.
	onLost func()
}

// newAttempt is the attempt an Acquired or ReconcileFirst answer hands over. sentAt
// is when the answered send began (the lease and the attempt deadline count from
// there, the early end); receivedAt is when the reply arrived (the earlier attempt's
// deadline counts from there, the late end: the server measured it somewhere
// between, and a long-polled or re-sent Claim may have been sent long before).
func newAttempt(response *idemv1.ClaimResponse, sentAt, receivedAt time.Time, config executeConfig, callerDeadline time.Time) *attempt {
	first := response.GetReconcileFirst()
	ownership := response.GetAcquired().GetOwnership()
	if first != nil {
		ownership = first.GetOwnership()
	}
	attemptLeft := durationOf(ownership.GetAttemptDeadline())
	a := &attempt{
		operationID:          ownership.GetOperationId(),
		fence:                ownership.GetFence(),
		number:               ownership.GetAttempt(),
		lease:                config.lease,
		margin:               max(minAttemptMargin, min(maxAttemptMargin, attemptLeft/10)),
		hasLookup:            config.lookup != nil,
		providerDeduplicates: config.providerDeduplicates,
		lookupInterval:       config.lookupInterval,
		reclaimReason:        idemv1.PendingReason_PENDING_REASON_RETRY_SCHEDULED,
		granted:              durationOf(ownership.GetLease()),
		deadlineAt:           sentAt.Add(attemptLeft),
		onLost:               func() {},
	}
	a.leaseExpiresAt = sentAt.Add(a.granted)
	a.leaseMargin = min(a.margin, a.lease/3)
	a.cancelAt = a.deadlineAt.Add(-a.margin)
	if !callerDeadline.IsZero() && callerDeadline.Before(a.cancelAt) {
		a.cancelAt = callerDeadline
	}
	a.info = Attempt{
		OperationID: a.operationID,
		Fence:       a.fence,
		Number:      a.number,
		MaxAttempts: ownership.GetMaxAttempts(),
		CancelAt:    a.cancelAt,
	}
	if first != nil {
		a.info.PreviousOutcomeUnknown = true
		a.info.PreviousFence = first.GetPreviousFence()
		if first.GetPreviousAttemptDeadline() != nil {
			a.info.PreviousAttemptDeadline = durationOf(first.GetPreviousAttemptDeadline())
			a.info.HasPreviousAttemptDeadline = true
			a.info.PreviousAttemptSettlesAt = receivedAt.Add(a.info.PreviousAttemptDeadline)
		} else {
			// An older server: the earlier attempt may have started just before this
			// Claim was handled, so it may run a whole attempt duration from then.
			a.info.PreviousAttemptSettlesAt = receivedAt.Add(attemptLeft)
		}
	}
	return a
}

// interruption is why the attempt must stop now, if it must.
func (a *attempt) interruption(now time.Time) interruption {
	a.mu.Lock()
	lost, lostErr := a.lost, a.lostErr
	a.mu.Unlock()
	if lost {
		if errors.Is(lostErr, ErrAttemptDeadlinePassed) {
			return timeUp // nobody took over: this attempt's time is up
		}
		return leaseLost
	}
	if !now.Before(a.cancelAt) {
		return timeUp
	}
	return notInterrupted
}

func (a *attempt) isLost() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lost
}

func (a *attempt) leaseLeft(now time.Time) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.leaseExpiresAt.Sub(now)
}

// renew renews once (re-sent after transient failures): a refusal that ends the
// attempt's ownership marks the lease lost; other failures are returned.
func renew(send func(*idemv1.RenewRequest, time.Time) (*idemv1.RenewResponse, time.Time, error), a *attempt) error {
	request := &idemv1.RenewRequest{OperationId: a.operationID, Fence: a.fence, Lease: durationpb.New(a.lease)}
	response, sentAt, err := send(request, a.cancelAt)
	if errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrAttemptDeadlinePassed) {
		a.mu.Lock()
		first := !a.lost
		a.lost, a.lostErr = true, err
		onLost := a.onLost
		a.mu.Unlock()
		if first {
			onLost()
		}
		return nil
	}
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.granted = durationOf(response.GetLease())
	a.leaseExpiresAt = sentAt.Add(a.granted)
	if deadline := sentAt.Add(durationOf(response.GetAttemptDeadline())); deadline.Before(a.deadlineAt) {
		a.deadlineAt = deadline
	}
	return nil
}

// renewer is what keepRenewing needs: the clock, a pause that ends early (false)
// when the renewals are stopped, and Renew.
type renewer interface {
	now() time.Time
	wait(d time.Duration) bool
	renew(request *idemv1.RenewRequest, deadline time.Time) (*idemv1.RenewResponse, time.Time, error)
}

// keepRenewing renews the lease two thirds into each grant until it is lost, it
// reaches the attempt deadline (Renew cannot extend it further: renewing again
// could only shrink it, call after call), or the renewals are stopped.
func keepRenewing(r renewer, a *attempt) {
	for {
		a.mu.Lock()
		done := a.lost || !a.leaseExpiresAt.Before(a.deadlineAt.Add(-time.Millisecond))
		due := a.leaseExpiresAt.Add(-a.granted * 2 / 3)
		granted := a.granted
		a.mu.Unlock()
		if done || !r.wait(max(0, due.Sub(r.now()))) {
			return
		}
		err := renew(r.renew, a)
		if errors.Is(err, ErrStateForbids) {
			return // marked UNKNOWN by a Claim: no renewals, writes still allowed
		}
		if err != nil {
			// Transient failures outlasted the retry policy: try again shortly; the
			// lease may lapse, and then a new owner reconciles first.
			if !r.wait(min(time.Second, max(50*time.Millisecond, granted/10))) {
				return
			}
		}
	}
}

// runAttempt is the attempt's answer; again when a retry was scheduled or the
// attempt declined before the effect (claim again).
func (x *protocol) runAttempt(a *attempt) (result *Result, again bool, err error) {
	x.port.startRenewing(a)
	defer x.port.stopRenewing(a)
	result, again, err = x.attemptBody(a)
	var stopped interruption
	if !errors.As(err, &stopped) {
		return result, again, err
	}
	if stopped == leaseLost {
		if !a.started {
			// Nothing ran here: another owner has the operation; claim again.
			a.reclaimReason = idemv1.PendingReason_PENDING_REASON_IN_PROGRESS
			return nil, true, nil
		}
		return x.answerStored(a)
	}
	if !a.started {
		return x.decline(a)
	}
	x.failUnknown(a, attemptDeadlineCode, attemptDeadlineMessage)
	return nil, false, &OutcomeUnknownError{
		OperationID: a.operationID,
		Message:     "the effect was cancelled at the attempt deadline; its outcome is unknown",
		TimedOut:    true,
	}
}

func (x *protocol) attemptBody(a *attempt) (*Result, bool, error) {
	if a.info.PreviousOutcomeUnknown {
		if a.hasLookup {
			found, err := x.lookUpProvider(a)
			if err != nil {
				return nil, false, err
			}
			if found != nil {
				return x.record(a, found)
			}
		} else if !a.providerDeduplicates {
			// Running the effect again could repeat the earlier one, and nothing here
			// can tell whether it happened. NOT_STARTED hands the doubt on with the
			// earlier attempt's deadline, for a caller (or reconciler) that can check.
			x.sendDecline(a)
			return nil, false, &OutcomeUnknownError{OperationID: a.operationID, Message: cannotCheckEarlierAttempt}
		}
	}
	// Never start the effect so close to its cancel point that it would be cancelled
	// as soon as it started (checked before renewing too: a Renew bounded by a
	// deadline all but gone fails as DEADLINE_EXCEEDED), nor on a lease that may be
	// running out. The lease counts from the Claim's answered send, which a
	// long-polled Claim (or the wait for an earlier attempt) may have left far
	// behind: renew it once, counted from the Renew's answered send, and decline
	// only if too little is left even then.
	now := x.port.now()
	if a.cancelAt.Sub(now) < a.margin {
		return x.decline(a)
	}
	if a.leaseLeft(now) < a.lease/2 {
		if err := renew(x.port.renew, a); err != nil {
			// Transient failures outlasted the re-sends, or STATE_FORBIDS (the lease
			// ran out and a Claim marked the attempt): the re-check below decides.
			var status *StatusError
			if !(errors.As(err, &status) && status.Retryable()) && !errors.Is(err, ErrStateForbids) {
				return nil, false, err
			}
		}
		now = x.port.now()
		if a.isLost() {
			if stopped := a.interruption(now); stopped != notInterrupted {
				return nil, false, stopped // LEASE_LOST: claim again; ATTEMPT_DEADLINE_PASSED: decline
			}
		}
		if a.leaseLeft(now) < a.leaseMargin || a.cancelAt.Sub(now) < a.margin {
			return x.decline(a)
		}
	}
	a.started = true
	outcome, stopped, err := x.port.runEffect(a)
	if stopped != notInterrupted {
		return nil, false, stopped
	}
	if err == nil && outcomeValue(outcome) == nil {
		err = errors.New("idemd: the effect returned no outcome and no error")
	}
	if err != nil {
		// The effect failed in a way nobody can tell. The report names the error's
		// type only (its text may carry what must not be stored), under the code
		// every idemd client reports it with.
		kind := fmt.Sprintf("%T", err)
		x.failUnknown(a, "effect_raised", kind)
		return nil, false, &OutcomeUnknownError{
			OperationID: a.operationID,
			Message:     "the effect failed (" + kind + "); its outcome is unknown",
			Cause:       err,
		}
	}
	return x.record(a, outcome)
}

// lookUpProvider asks the provider about the earlier attempt until its answer can
// be trusted: what it found, or nil (nothing, from a lookup that started once the
// earlier attempt had settled).
func (x *protocol) lookUpProvider(a *attempt) (Outcome, error) {
	for {
		// Taken before the lookup starts: it may read the provider at any moment up
		// to its answer, so only its start is known to precede the read.
		startedAt := x.port.now()
		found, stopped, err := x.port.runLookup(a)
		if stopped != notInterrupted {
			return nil, stopped
		}
		found = outcomeValue(found)
		switch found.(type) {
		case nil, Success, Terminal:
		default:
			err = fmt.Errorf("idemd: a lookup returns Success, Terminal or nil, not %T", found)
		}
		if err != nil {
			// Nothing ran here: hand the doubt on as it is (NOT_STARTED keeps the
			// earlier attempt's deadline), but this call cannot tell the outcome.
			x.sendDecline(a)
			return nil, &OutcomeUnknownError{
				OperationID: a.operationID,
				Message:     "the provider lookup failed; the earlier attempt's outcome is unknown",
				Cause:       err,
			}
		}
		if found != nil || a.info.PreviousAttemptSettled(startedAt) {
			return found, nil
		}
		// Nothing found proves nothing if the lookup began while the earlier attempt
		// could still run (even when it answered after that): its read may precede an
		// effect that landed before the earlier deadline.
		settlesAt := a.info.PreviousAttemptSettlesAt
		now := x.port.now()
		if !settlesAt.Before(a.cancelAt) && !now.Add(a.lookupInterval).Before(a.cancelAt) {
			// This attempt ends before the doubt does: having looked until now, hand
			// the doubt on as it is; the next attempt, told the earlier deadline and
			// ending later, waits it out.
			return nil, timeUp
		}
		if stopped := x.port.pause(a, max(0, min(a.lookupInterval, settlesAt.Sub(now)))); stopped != notInterrupted {
			return nil, stopped
		}
	}
}

// record reports the effect's outcome and answers with it.
func (x *protocol) record(a *attempt, outcome Outcome) (*Result, bool, error) {
	result, again, err := x.report(a, outcomeValue(outcome))
	switch {
	case errors.Is(err, ErrLeaseLost):
		return x.answerStored(a)
	case errors.Is(err, ErrAttemptDeadlinePassed):
		return nil, false, &OutcomeUnknownError{
			OperationID: a.operationID,
			Message:     "the attempt deadline passed before the outcome was recorded; a reconciler must settle it",
		}
	}
	return result, again, err
}

func (x *protocol) report(a *attempt, outcome Outcome) (*Result, bool, error) {
	a.mu.Lock()
	deadline := a.deadlineAt
	a.mu.Unlock()
	switch o := outcome.(type) {
	case Success:
		_, err := x.port.complete(&idemv1.CompleteRequest{
			OperationId: a.operationID,
			Fence:       a.fence,
			Result:      &idemv1.Result{Body: o.Body, ContentType: o.ContentType, Metadata: o.Metadata},
		}, deadline)
		if err != nil {
			return nil, false, err
		}
		return &Result{
			OperationID: a.operationID, Body: o.Body, ContentType: o.ContentType,
			Metadata: o.Metadata, Attempts: a.number,
		}, false, nil
	case Terminal:
		stored := &idemv1.OperationError{Code: o.Code, Message: o.Message, Metadata: o.Metadata}
		if _, err := x.port.fail(a.failRequest(idemv1.FailDisposition_FAIL_DISPOSITION_TERMINAL, stored, 0), deadline); err != nil {
			return nil, false, err
		}
		stored.Reason = idemv1.FailureReason_FAILURE_REASON_TERMINAL
		return nil, false, operationFailed(a.operationID, stored, false)
	case Retryable:
		stored := &idemv1.OperationError{Code: o.Code, Message: o.Message, Metadata: o.Metadata}
		failed, err := x.port.fail(a.failRequest(idemv1.FailDisposition_FAIL_DISPOSITION_RETRYABLE, stored, o.RetryAfter), deadline)
		if err != nil {
			return nil, false, err
		}
		if failed.GetState() == idemv1.OperationState_OPERATION_STATE_RETRY_WAIT {
			a.reclaimAfter = durationOf(failed.GetRetryAfter())
			return nil, true, nil
		}
		stored.Reason = failed.GetReason()
		return nil, false, operationFailed(a.operationID, stored, false)
	case Unknown:
		code := o.Code
		if code == "" {
			code = "outcome_unknown"
		}
		x.failUnknown(a, code, o.Message)
		return nil, false, &OutcomeUnknownError{OperationID: a.operationID, Message: "the effect's outcome is unknown"}
	}
	return nil, false, fmt.Errorf("idemd: an effect returns Success, Terminal, Retryable or Unknown, not %T", outcome)
}

func (a *attempt) failRequest(disposition idemv1.FailDisposition, stored *idemv1.OperationError, retryAfter time.Duration) *idemv1.FailRequest {
	request := &idemv1.FailRequest{OperationId: a.operationID, Fence: a.fence, Disposition: disposition, Error: stored}
	if retryAfter > 0 {
		request.RetryAfter = durationpb.New(retryAfter)
	}
	return request
}

func (a *attempt) reportDeadline() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.deadlineAt
}

// failUnknown is best effort: an attempt whose outcome is unknown says so; if it
// cannot, its lease runs out and the next owner reconciles first all the same.
func (x *protocol) failUnknown(a *attempt, code, message string) {
	stored := &idemv1.OperationError{Code: code, Message: message}
	_, _ = x.port.fail(a.failRequest(idemv1.FailDisposition_FAIL_DISPOSITION_UNKNOWN, stored, 0), a.reportDeadline())
}

// declineRequest has no retry_after: with NOT_STARTED it is INVALID_ARGUMENT.
func (a *attempt) declineRequest() *idemv1.FailRequest {
	stored := &idemv1.OperationError{Code: notStartedCode, Message: notStartedMessage}
	return a.failRequest(idemv1.FailDisposition_FAIL_DISPOSITION_NOT_STARTED, stored, 0)
}

// sendDecline is a best-effort Fail NOT_STARTED (the lease runs out otherwise, and
// the next owner reconciles first all the same).
func (x *protocol) sendDecline(a *attempt) {
	_, _ = x.port.fail(a.declineRequest(), a.reportDeadline())
}

// decline: the effect is not started. Fail NOT_STARTED hands the operation on as it
// was before this attempt (released for the next attempt at once, or, after a
// takeover, still in the doubt it took over, ending with that attempt's deadline,
// never this one's); then claim again. FAILED (the attempt budget or the operation
// deadline is spent) is answered with what is stored.
func (x *protocol) decline(a *attempt) (*Result, bool, error) {
	failed, err := x.port.fail(a.declineRequest(), a.reportDeadline())
	if err != nil {
		var status *StatusError
		if errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrAttemptDeadlinePassed) ||
			(errors.As(err, &status) && status.Retryable()) {
			// Taken over meanwhile, too late to say so, or not answered in time:
			// nothing ran here, and the next Claim learns where things stand.
			return nil, true, nil
		}
		return nil, false, err
	}
	if failed.GetState() == idemv1.OperationState_OPERATION_STATE_FAILED {
		return x.answerStored(a)
	}
	a.reclaimAfter = durationOf(failed.GetRetryAfter())
	return nil, true, nil
}

// answerStored (after LEASE_LOST, or a decline that ended the operation) answers
// with what is stored; it never redoes the effect.
func (x *protocol) answerStored(a *attempt) (*Result, bool, error) {
	found, err := x.port.lookup(&idemv1.LookupRequest{Target: &idemv1.LookupRequest_OperationId{OperationId: a.operationID}})
	if err != nil {
		return nil, false, err
	}
	operation := found.GetOperation()
	switch operation.GetState() {
	case idemv1.OperationState_OPERATION_STATE_SUCCEEDED:
		return stored(operation.GetOperationId(), operation.GetResult(), operation.GetAttempt()), false, nil
	case idemv1.OperationState_OPERATION_STATE_FAILED:
		return nil, false, operationFailed(operation.GetOperationId(), operation.GetError(), true)
	}
	return nil, false, &SupersededError{OperationID: operation.GetOperationId(), State: operation.GetState().String()}
}
