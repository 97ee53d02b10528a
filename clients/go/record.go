package idemd

import (
	"errors"
	"fmt"

	idemv1 "github.com/idemd/idemd/clients/go/idemv1"
)

// What an owned attempt records: the effect's outcome (Complete, Fail), a decline
// (Fail NOT_STARTED), and, told LEASE_LOST, what another owner stored.

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

// failUnknown is best effort: an attempt whose outcome is unknown says so; if it
// cannot, its lease runs out and the next owner reconciles first all the same.
func (x *protocol) failUnknown(a *attempt, code, message string) {
	stored := &idemv1.OperationError{Code: code, Message: message}
	_, _ = x.port.fail(a.failRequest(idemv1.FailDisposition_FAIL_DISPOSITION_UNKNOWN, stored, 0), a.reportDeadline())
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
