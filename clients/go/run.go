package idemd

import (
	"errors"
	"fmt"
	"time"

	idemv1 "github.com/idemd/idemd/clients/go/idemv1"
)

// The protocol's flow (protocol.go holds its state and requests): claim until an
// answer ends the call, run each owned attempt (attempt.go's state), look up the
// provider after a takeover, record what happened (record.go).

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
