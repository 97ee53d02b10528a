package idemd

import (
	"errors"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	idemv1 "github.com/idemd/idemd/clients/go/idemv1"
)

// The state of one owned attempt of ExecuteOnce's protocol: the lease and its
// renewals, the time bounds, and the requests that report on it. The steps that run
// it are run.go's; what it records is record.go's.

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

// keepRenewing renews the lease a third into each grant until it is lost, it
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

// declineRequest has no retry_after: with NOT_STARTED it is INVALID_ARGUMENT.
func (a *attempt) declineRequest() *idemv1.FailRequest {
	stored := &idemv1.OperationError{Code: notStartedCode, Message: notStartedMessage}
	return a.failRequest(idemv1.FailDisposition_FAIL_DISPOSITION_NOT_STARTED, stored, 0)
}
