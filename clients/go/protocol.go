package idemd

import (
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
		// Every Claim, re-sends and waits included: the window is the call's.
		PreviousFingerprints: x.config.previousFingerprints,
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
