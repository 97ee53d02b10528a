package idemd

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	idemv1 "github.com/idemd/idemd/clients/go/idemv1"
)

// One owned attempt of ExecuteOnce's protocol (protocol.go): the lease and its
// renewals, the lookup on a takeover, the checks before the effect and the effect;
// what it records is record.go's.

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
