package idemd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	idemv1 "github.com/idemd/idemd/clients/go/idemv1"
)

// The protocol's core, driven without a server: every answer is scripted and the
// clock moves only when a step takes time. Each test pins one decision of the
// protocol (and one fix of CHANGELOG.md's "Fixed" section where it says so).

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type fakePort struct {
	t      *testing.T
	clock  time.Time
	steps  []string
	tokens [][]byte
	claims []*idemv1.ClaimRequest
	fails  []*idemv1.FailRequest

	// Each answer is scripted; each step takes the time given (the send's start is
	// the clock before it).
	onClaim     func(n int, request *idemv1.ClaimRequest) (*idemv1.ClaimResponse, error)
	claimTakes  []time.Duration
	onRenew     func(request *idemv1.RenewRequest) (*idemv1.RenewResponse, error)
	renewTakes  []time.Duration
	onComplete  func(request *idemv1.CompleteRequest) (*idemv1.CompleteResponse, error)
	onFail      func(request *idemv1.FailRequest) (*idemv1.FailResponse, error)
	onLookup    func(request *idemv1.LookupRequest) (*idemv1.LookupResponse, error)
	effect      func(a *attempt) (Outcome, error)
	effectTakes time.Duration
	lookupFn    func(a *attempt, startedAt time.Time) (Outcome, error)
	lookupTakes time.Duration
	effectsRun  []time.Time
	lookupsRun  []time.Time
}

func (f *fakePort) now() time.Time { return f.clock }
func (f *fakePort) cancelled() error {
	return nil
}

func (f *fakePort) claimToken() []byte {
	token := []byte(fmt.Sprintf("token-%02d-padding", len(f.tokens)))
	f.tokens = append(f.tokens, token)
	return token
}

func take(durations *[]time.Duration) time.Duration {
	if len(*durations) == 0 {
		return 0
	}
	d := (*durations)[0]
	*durations = (*durations)[1:]
	return d
}

func (f *fakePort) claim(request *idemv1.ClaimRequest, _ time.Time) (*idemv1.ClaimResponse, time.Time, error) {
	sentAt := f.clock
	f.clock = f.clock.Add(take(&f.claimTakes))
	f.steps = append(f.steps, "claim")
	f.claims = append(f.claims, request)
	response, err := f.onClaim(len(f.claims), request)
	return response, sentAt, err
}

func (f *fakePort) renew(request *idemv1.RenewRequest, _ time.Time) (*idemv1.RenewResponse, time.Time, error) {
	sentAt := f.clock
	f.clock = f.clock.Add(take(&f.renewTakes))
	f.steps = append(f.steps, "renew")
	if f.onRenew == nil {
		return &idemv1.RenewResponse{Lease: request.GetLease(), AttemptDeadline: durationpb.New(time.Minute)}, sentAt, nil
	}
	response, err := f.onRenew(request)
	return response, sentAt, err
}

func (f *fakePort) complete(request *idemv1.CompleteRequest, _ time.Time) (*idemv1.CompleteResponse, error) {
	f.steps = append(f.steps, "complete")
	if f.onComplete == nil {
		return &idemv1.CompleteResponse{State: idemv1.OperationState_OPERATION_STATE_SUCCEEDED}, nil
	}
	return f.onComplete(request)
}

func (f *fakePort) fail(request *idemv1.FailRequest, _ time.Time) (*idemv1.FailResponse, error) {
	f.steps = append(f.steps, "fail "+strings.TrimPrefix(request.GetDisposition().String(), "FAIL_DISPOSITION_"))
	f.fails = append(f.fails, request)
	if f.onFail != nil {
		return f.onFail(request)
	}
	switch request.GetDisposition() {
	case idemv1.FailDisposition_FAIL_DISPOSITION_TERMINAL:
		return &idemv1.FailResponse{State: idemv1.OperationState_OPERATION_STATE_FAILED}, nil
	case idemv1.FailDisposition_FAIL_DISPOSITION_UNKNOWN:
		return &idemv1.FailResponse{State: idemv1.OperationState_OPERATION_STATE_UNKNOWN}, nil
	}
	return &idemv1.FailResponse{State: idemv1.OperationState_OPERATION_STATE_RETRY_WAIT, RetryAfter: request.GetRetryAfter()}, nil
}

func (f *fakePort) lookup(request *idemv1.LookupRequest) (*idemv1.LookupResponse, error) {
	f.steps = append(f.steps, "lookup")
	return f.onLookup(request)
}

func (f *fakePort) sleep(d time.Duration) error {
	f.clock = f.clock.Add(d)
	return nil
}

func (f *fakePort) startRenewing(*attempt) {}
func (f *fakePort) stopRenewing(*attempt)  {}

func (f *fakePort) runEffect(a *attempt) (Outcome, interruption, error) {
	f.steps = append(f.steps, "effect")
	f.effectsRun = append(f.effectsRun, f.clock)
	f.clock = f.clock.Add(f.effectTakes)
	if stopped := a.interruption(f.clock); stopped != notInterrupted {
		return nil, stopped, nil
	}
	if f.effect == nil {
		return Success{Body: []byte("charged")}, notInterrupted, nil
	}
	outcome, err := f.effect(a)
	return outcome, notInterrupted, err
}

func (f *fakePort) runLookup(a *attempt) (Outcome, interruption, error) {
	f.steps = append(f.steps, "provider lookup")
	startedAt := f.clock
	f.lookupsRun = append(f.lookupsRun, startedAt)
	f.clock = f.clock.Add(f.lookupTakes)
	if stopped := a.interruption(f.clock); stopped != notInterrupted {
		return nil, stopped, nil
	}
	outcome, err := f.lookupFn(a, startedAt)
	return outcome, notInterrupted, err
}

func (f *fakePort) pause(a *attempt, d time.Duration) interruption {
	f.clock = f.clock.Add(min(d, max(0, a.cancelAt.Sub(f.clock))))
	return a.interruption(f.clock)
}

func ownership(attempt uint32, lease, attemptLeft time.Duration) *idemv1.Ownership {
	return &idemv1.Ownership{
		OperationId: "op-1", Fence: uint64(10 + attempt), Attempt: attempt, MaxAttempts: 5,
		Lease: durationpb.New(lease), AttemptDeadline: durationpb.New(attemptLeft),
	}
}

func acquired(attempt uint32, lease, attemptLeft time.Duration) *idemv1.ClaimResponse {
	return &idemv1.ClaimResponse{Outcome: &idemv1.ClaimResponse_Acquired{Acquired: &idemv1.Acquired{
		Ownership: ownership(attempt, lease, attemptLeft),
	}}}
}

func reconcileFirst(attempt uint32, lease, attemptLeft time.Duration, previous *durationpb.Duration) *idemv1.ClaimResponse {
	return &idemv1.ClaimResponse{Outcome: &idemv1.ClaimResponse_ReconcileFirst{ReconcileFirst: &idemv1.ReconcileFirst{
		Ownership:               ownership(attempt, lease, attemptLeft),
		PreviousState:           idemv1.OperationState_OPERATION_STATE_IN_PROGRESS,
		PreviousFence:           uint64(9 + attempt),
		PreviousAttemptDeadline: previous,
	}}}
}

func completed(body string) *idemv1.ClaimResponse {
	return &idemv1.ClaimResponse{Outcome: &idemv1.ClaimResponse_Completed{Completed: &idemv1.Completed{
		OperationId: "op-1", State: idemv1.OperationState_OPERATION_STATE_SUCCEEDED,
		Outcome:  &idemv1.Completed_Result{Result: &idemv1.Result{Body: []byte(body)}},
		Attempts: 1,
	}}}
}

func pending(retryAfter time.Duration) *idemv1.ClaimResponse {
	return &idemv1.ClaimResponse{Outcome: &idemv1.ClaimResponse_Pending{Pending: &idemv1.Pending{
		OperationId: "op-1", Reason: idemv1.PendingReason_PENDING_REASON_IN_PROGRESS,
		RetryAfter: durationpb.New(retryAfter), Attempt: 1,
	}}}
}

func newFake(t *testing.T) *fakePort {
	return &fakePort{t: t, clock: epoch}
}

func (f *fakePort) run(options ...ExecuteOption) (*Result, error) {
	config := defaultExecuteConfig()
	for _, option := range options {
		option(&config)
	}
	x := &protocol{port: f, operation: "payments.charge", key: "order-1", payload: JSONText(`{"amount":1}`), config: config}
	return x.run()
}

func (f *fakePort) expectSteps(want ...string) {
	f.t.Helper()
	if !slices.Equal(f.steps, want) {
		f.t.Fatalf("steps %q, want %q", f.steps, want)
	}
}

func TestCoreAcquiredRunsTheEffectOnceAndCompletes(t *testing.T) {
	f := newFake(t)
	f.onClaim = func(int, *idemv1.ClaimRequest) (*idemv1.ClaimResponse, error) {
		return acquired(1, 30*time.Second, 5*time.Minute), nil
	}
	result, err := f.run()
	if err != nil || result.Replayed || string(result.Body) != "charged" || result.Attempts != 1 {
		t.Fatalf("%+v %v", result, err)
	}
	f.expectSteps("claim", "effect", "complete")
	request := f.claims[0]
	if request.GetLease().AsDuration() != 30*time.Second || request.GetMaxAttemptDuration().AsDuration() != 5*time.Minute ||
		request.GetJsonPayload() != `{"amount":1}` || len(request.GetClaimToken()) == 0 || request.GetWait() != nil {
		t.Fatalf("claim %v", request)
	}
}

func TestCoreCompletedReplaysWithoutRunningTheEffect(t *testing.T) {
	f := newFake(t)
	f.onClaim = func(int, *idemv1.ClaimRequest) (*idemv1.ClaimResponse, error) { return completed("stored"), nil }
	result, err := f.run()
	if err != nil || !result.Replayed || string(result.Body) != "stored" {
		t.Fatalf("%+v %v", result, err)
	}
	f.expectSteps("claim")

	f = newFake(t)
	f.onClaim = func(int, *idemv1.ClaimRequest) (*idemv1.ClaimResponse, error) {
		return &idemv1.ClaimResponse{Outcome: &idemv1.ClaimResponse_Completed{Completed: &idemv1.Completed{
			OperationId: "op-1", State: idemv1.OperationState_OPERATION_STATE_FAILED,
			Outcome: &idemv1.Completed_Error{Error: &idemv1.OperationError{
				Reason: idemv1.FailureReason_FAILURE_REASON_TERMINAL, Code: "card_declined",
			}},
		}}}, nil
	}
	_, err = f.run()
	var failed *OperationFailedError
	if !errors.As(err, &failed) || !failed.Replayed || failed.Code != "card_declined" || failed.Reason != "FAILURE_REASON_TERMINAL" {
		t.Fatalf("%v", err)
	}
	f.expectSteps("claim")
}

func TestCoreNeedsReconciliationAndUnknownOutcomesNeverExecute(t *testing.T) {
	f := newFake(t)
	f.onClaim = func(int, *idemv1.ClaimRequest) (*idemv1.ClaimResponse, error) {
		return &idemv1.ClaimResponse{Outcome: &idemv1.ClaimResponse_NeedsReconciliation{
			NeedsReconciliation: &idemv1.NeedsReconciliation{OperationId: "op-1", Fence: 7, Attempts: 5},
		}}, nil
	}
	var needs *NeedsReconciliationError
	if _, err := f.run(); !errors.As(err, &needs) || needs.Fence != 7 {
		t.Fatalf("%v", err)
	}
	f.expectSteps("claim")

	f = newFake(t)
	f.onClaim = func(int, *idemv1.ClaimRequest) (*idemv1.ClaimResponse, error) { return &idemv1.ClaimResponse{}, nil }
	var unrecognised *UnrecognisedOutcomeError
	if _, err := f.run(); !errors.As(err, &unrecognised) {
		t.Fatalf("%v", err)
	}
	f.expectSteps("claim")
}

// CHANGELOG "Fixed": on ReconcileFirst the caller must have chosen a lookup or
// declared provider deduplication; with neither, the attempt declines (NOT_STARTED)
// and the call fails "outcome unknown", saying what to do.
func TestCoreReconcileFirstWithoutAChoiceDeclinesAndNeverRuns(t *testing.T) {
	f := newFake(t)
	f.onClaim = func(int, *idemv1.ClaimRequest) (*idemv1.ClaimResponse, error) {
		return reconcileFirst(2, 30*time.Second, 5*time.Minute, durationpb.New(time.Second)), nil
	}
	_, err := f.run()
	var unknown *OutcomeUnknownError
	if !errors.As(err, &unknown) || !strings.Contains(err.Error(), "WithLookup") || !strings.Contains(err.Error(), "WithProviderDeduplicates") {
		t.Fatalf("%v", err)
	}
	f.expectSteps("claim", "fail NOT_STARTED")
	if f.fails[0].GetRetryAfter() != nil || f.fails[0].GetError().GetCode() != "not_started" {
		t.Fatalf("decline %v", f.fails[0])
	}

	// Declared: the effect runs, told an earlier attempt may have taken effect.
	f = newFake(t)
	f.onClaim = func(int, *idemv1.ClaimRequest) (*idemv1.ClaimResponse, error) {
		return reconcileFirst(2, 30*time.Second, 5*time.Minute, durationpb.New(time.Second)), nil
	}
	var told *attempt
	f.effect = func(a *attempt) (Outcome, error) { told = a; return Success{Body: []byte("ok")}, nil }
	if _, err := f.run(WithProviderDeduplicates()); err != nil {
		t.Fatal(err)
	}
	f.expectSteps("claim", "effect", "complete")
	if !told.info.PreviousOutcomeUnknown || told.info.PreviousFence != 11 || told.info.OperationID != "op-1" {
		t.Fatalf("%+v", told.info)
	}
}

// CHANGELOG "Fixed": previous_attempt_deadline counts from the reply's arrival, not
// the Claim's send: a long-polled Claim (2 s here) would otherwise end the doubt
// 2 s early and trust a lookup made while the earlier effect could still land.
func TestCorePreviousAttemptDeadlineCountsFromTheReply(t *testing.T) {
	f := newFake(t)
	f.claimTakes = []time.Duration{2 * time.Second}
	f.onClaim = func(int, *idemv1.ClaimRequest) (*idemv1.ClaimResponse, error) {
		return reconcileFirst(2, 30*time.Second, 10*time.Second, durationpb.New(time.Second)), nil
	}
	f.lookupFn = func(*attempt, time.Time) (Outcome, error) { return nil, nil }
	var settlesAt time.Time
	f.effect = func(a *attempt) (Outcome, error) {
		settlesAt = a.info.PreviousAttemptSettlesAt
		return Success{}, nil
	}
	if _, err := f.run(WithLookup(noLookup), WithLookupInterval(200*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	replyArrived := epoch.Add(2 * time.Second)
	if !settlesAt.Equal(replyArrived.Add(time.Second)) {
		t.Fatalf("the doubt ends at %s after the send; want 3s", settlesAt.Sub(epoch))
	}
	// Only a lookup started once the doubt ended was trusted, and only then did the
	// effect run.
	trusted := f.lookupsRun[len(f.lookupsRun)-1]
	if trusted.Before(settlesAt) || len(f.lookupsRun) < 2 || f.effectsRun[0].Before(settlesAt) {
		t.Fatalf("lookups at %v, effect at %v, doubt until %v", f.lookupsRun, f.effectsRun, settlesAt)
	}
	// Absent (an older server): a whole attempt duration from the reply.
	first := newAttempt(reconcileFirst(2, time.Second, 10*time.Second, nil), epoch, epoch.Add(time.Second), defaultExecuteConfig(), time.Time{})
	if first.info.HasPreviousAttemptDeadline || !first.info.PreviousAttemptSettlesAt.Equal(epoch.Add(11*time.Second)) {
		t.Fatalf("%+v", first.info)
	}
}

// noLookup stands for the caller's lookup: the fake port answers for it.
func noLookup(context.Context, *Attempt) (Outcome, error) { return nil, nil }

// CHANGELOG "Fixed": a negative lookup counts only if it STARTED at or after the
// earlier attempt settled. This one starts 0.3 s before and answers after: the
// earlier effect lands meanwhile, so its "nothing" is not trusted, and the lookup
// asked again finds the effect, which is recorded instead of run twice.
func TestCoreANegativeLookupThatStartedBeforeTheDoubtEndedIsAskedAgain(t *testing.T) {
	f := newFake(t)
	f.onClaim = func(int, *idemv1.ClaimRequest) (*idemv1.ClaimResponse, error) {
		return reconcileFirst(2, 30*time.Second, 10*time.Second, durationpb.New(300*time.Millisecond)), nil
	}
	landsAt := epoch.Add(200 * time.Millisecond)
	f.lookupTakes = time.Second
	f.lookupFn = func(_ *attempt, startedAt time.Time) (Outcome, error) {
		if startedAt.Before(landsAt) {
			return nil, nil // read before the earlier effect landed
		}
		return Success{Body: []byte("the earlier charge")}, nil
	}
	result, err := f.run(WithLookup(noLookup), WithLookupInterval(100*time.Millisecond))
	if err != nil || string(result.Body) != "the earlier charge" {
		t.Fatalf("%+v %v", result, err)
	}
	f.expectSteps("claim", "provider lookup", "provider lookup", "complete")
}

// The doubt outlasts this attempt: having looked, it declines (NOT_STARTED keeps
// the earlier attempt's deadline) and claims again; the next attempt waits it out.
func TestCoreADoubtThatOutlastsTheAttemptIsHandedOn(t *testing.T) {
	f := newFake(t)
	f.onClaim = func(n int, _ *idemv1.ClaimRequest) (*idemv1.ClaimResponse, error) {
		if n == 1 {
			return reconcileFirst(2, 30*time.Second, 2*time.Second, durationpb.New(3*time.Second)), nil
		}
		return reconcileFirst(3, 30*time.Second, 10*time.Second, durationpb.New(1*time.Second)), nil
	}
	f.lookupFn = func(*attempt, time.Time) (Outcome, error) { return nil, nil }
	if _, err := f.run(WithLookup(noLookup), WithLookupInterval(500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if f.steps[len(f.steps)-2] != "effect" || !slices.Contains(f.steps, "fail NOT_STARTED") {
		t.Fatalf("steps %q", f.steps)
	}
	declined := slices.Index(f.steps, "fail NOT_STARTED")
	if slices.Contains(f.steps[:declined], "effect") || f.steps[declined+1] != "claim" {
		t.Fatalf("steps %q", f.steps)
	}
	if !bytesDiffer(f.claims[0].GetClaimToken(), f.claims[1].GetClaimToken()) {
		t.Fatal("the second attempt reused the first one's claim_token")
	}
}

func bytesDiffer(a, b []byte) bool { return string(a) != string(b) }

// CHANGELOG "Fixed": the lease counts from the answered send; a lease a slow reply
// left short is renewed once before the effect, and if too little is left even
// then the attempt declines NOT_STARTED and claims again.
func TestCoreAShortLeaseIsRenewedOnceBeforeTheEffectElseTheAttemptDeclines(t *testing.T) {
	f := newFake(t)
	f.claimTakes = []time.Duration{800 * time.Millisecond}
	f.onClaim = func(int, *idemv1.ClaimRequest) (*idemv1.ClaimResponse, error) {
		return acquired(1, time.Second, 5*time.Second), nil
	}
	if _, err := f.run(WithLease(time.Second), WithAttemptDuration(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	f.expectSteps("claim", "renew", "effect", "complete")

	f = newFake(t)
	f.claimTakes = []time.Duration{800 * time.Millisecond}
	f.renewTakes = []time.Duration{800 * time.Millisecond}
	f.onClaim = func(n int, _ *idemv1.ClaimRequest) (*idemv1.ClaimResponse, error) {
		return acquired(uint32(n), time.Second, 5*time.Second), nil
	}
	result, err := f.run(WithLease(time.Second), WithAttemptDuration(5*time.Second))
	if err != nil || result.Attempts != 2 {
		t.Fatalf("%+v %v", result, err)
	}
	f.expectSteps("claim", "renew", "fail NOT_STARTED", "claim", "effect", "complete")
}

// CHANGELOG "Fixed": a Claim's lease and attempt deadline count from the send that
// was answered, not the first one: a Claim re-sent for seconds is still on time.
func TestCoreTheAttemptCountsFromTheAnsweredSend(t *testing.T) {
	a := newAttempt(acquired(1, 3*time.Second, 3500*time.Millisecond), epoch.Add(1600*time.Millisecond), epoch.Add(2*time.Second), defaultExecuteConfig(), time.Time{})
	if want := epoch.Add(1600*time.Millisecond + 3500*time.Millisecond - 350*time.Millisecond); !a.cancelAt.Equal(want) {
		t.Fatalf("cancel at %s, want %s", a.cancelAt.Sub(epoch), want.Sub(epoch))
	}
	if !a.leaseExpiresAt.Equal(epoch.Add(4600 * time.Millisecond)) {
		t.Fatalf("lease until %s", a.leaseExpiresAt.Sub(epoch))
	}
	// The caller's deadline, when sooner, is the cancel point.
	bounded := newAttempt(acquired(1, 3*time.Second, time.Minute), epoch, epoch, defaultExecuteConfig(), epoch.Add(2*time.Second))
	if !bounded.cancelAt.Equal(epoch.Add(2 * time.Second)) {
		t.Fatalf("cancel at %s", bounded.cancelAt.Sub(epoch))
	}
}

func TestCoreTooLittleOfTheAttemptLeftNeverStartsTheEffect(t *testing.T) {
	f := newFake(t)
	f.onClaim = func(n int, _ *idemv1.ClaimRequest) (*idemv1.ClaimResponse, error) {
		if n == 1 {
			return acquired(1, 30*time.Second, 40*time.Millisecond), nil
		}
		return completed("someone else's"), nil
	}
	result, err := f.run()
	if err != nil || !result.Replayed {
		t.Fatalf("%+v %v", result, err)
	}
	f.expectSteps("claim", "fail NOT_STARTED", "claim")
}

// CHANGELOG "Fixed": LEASE_LOST looks the operation up and answers with what is
// stored, never re-running the effect.
func TestCoreLeaseLostAnswersWithWhatIsStored(t *testing.T) {
	f := newFake(t)
	f.onClaim = func(int, *idemv1.ClaimRequest) (*idemv1.ClaimResponse, error) {
		return acquired(1, 30*time.Second, 5*time.Minute), nil
	}
	f.onComplete = func(*idemv1.CompleteRequest) (*idemv1.CompleteResponse, error) {
		return nil, &StatusError{Code: codes.Aborted, Reason: "LEASE_LOST"}
	}
	f.onLookup = func(*idemv1.LookupRequest) (*idemv1.LookupResponse, error) {
		return &idemv1.LookupResponse{Operation: &idemv1.Operation{
			OperationId: "op-1", State: idemv1.OperationState_OPERATION_STATE_SUCCEEDED, Attempt: 2,
			Result: &idemv1.Result{Body: []byte("recorded by the next owner")},
		}}, nil
	}
	result, err := f.run()
	if err != nil || !result.Replayed || string(result.Body) != "recorded by the next owner" {
		t.Fatalf("%+v %v", result, err)
	}
	f.expectSteps("claim", "effect", "complete", "lookup")
}

func TestCorePendingWaitsWithLongPollsThenReplays(t *testing.T) {
	f := newFake(t)
	f.claimTakes = []time.Duration{0, 3 * time.Second}
	f.onClaim = func(n int, _ *idemv1.ClaimRequest) (*idemv1.ClaimResponse, error) {
		if n == 1 {
			return pending(time.Second), nil
		}
		return completed("theirs"), nil
	}
	result, err := f.run()
	if err != nil || !result.Replayed {
		t.Fatalf("%+v %v", result, err)
	}
	f.expectSteps("claim", "claim")
	if f.claims[0].GetWait() != nil || f.claims[1].GetWait().AsDuration() != maxClaimWait {
		t.Fatalf("waits %v %v", f.claims[0].GetWait(), f.claims[1].GetWait())
	}

	f = newFake(t)
	f.onClaim = func(int, *idemv1.ClaimRequest) (*idemv1.ClaimResponse, error) { return pending(time.Second), nil }
	var waiting *PendingError
	if _, err := f.run(WithPendingTimeout(0)); !errors.As(err, &waiting) || waiting.RetryAfter != time.Second || waiting.Reason != "PENDING_REASON_IN_PROGRESS" {
		t.Fatalf("%v", err)
	}
	f.expectSteps("claim")
}

func TestCoreOutcomesMapToCompleteAndFailDispositions(t *testing.T) {
	run := func(effect func(*attempt) (Outcome, error), options ...ExecuteOption) (*fakePort, *Result, error) {
		f := newFake(t)
		f.onClaim = func(n int, _ *idemv1.ClaimRequest) (*idemv1.ClaimResponse, error) {
			return acquired(uint32(n), 30*time.Second, 5*time.Minute), nil
		}
		f.effect = effect
		result, err := f.run(options...)
		return f, result, err
	}
	f, _, err := run(func(*attempt) (Outcome, error) { return Terminal{Code: "card_declined", Message: "no"}, nil })
	var failed *OperationFailedError
	if !errors.As(err, &failed) || failed.Replayed || failed.Code != "card_declined" {
		t.Fatalf("terminal: %v", err)
	}
	f.expectSteps("claim", "effect", "fail TERMINAL")

	calls := 0
	f, result, err := run(func(*attempt) (Outcome, error) {
		calls++
		if calls == 1 {
			return &Retryable{Code: "busy", RetryAfter: 50 * time.Millisecond}, nil
		}
		return Success{Body: []byte("second")}, nil
	})
	if err != nil || result.Attempts != 2 {
		t.Fatalf("retryable: %+v %v", result, err)
	}
	f.expectSteps("claim", "effect", "fail RETRYABLE", "claim", "effect", "complete")
	if f.fails[0].GetRetryAfter().AsDuration() != 50*time.Millisecond || !bytesDiffer(f.claims[0].GetClaimToken(), f.claims[1].GetClaimToken()) {
		t.Fatalf("retryable: %v, tokens %q", f.fails[0], f.tokens)
	}

	f, _, err = run(func(*attempt) (Outcome, error) { return Unknown{Message: "timeout"}, nil })
	var unknown *OutcomeUnknownError
	if !errors.As(err, &unknown) {
		t.Fatalf("unknown: %v", err)
	}
	f.expectSteps("claim", "effect", "fail UNKNOWN")

	secret := errors.New("card 4242424242424242 refused")
	f, _, err = run(func(*attempt) (Outcome, error) { return nil, secret })
	if !errors.As(err, &unknown) || !errors.Is(err, secret) {
		t.Fatalf("an effect's error: %v", err)
	}
	f.expectSteps("claim", "effect", "fail UNKNOWN")
	if report := f.fails[0].GetError(); report.GetCode() != "effect_raised" || strings.Contains(report.GetMessage(), "4242") {
		t.Fatalf("the report %v carries the error's text", report)
	}
}

func TestCoreAnEffectCancelledAtTheAttemptDeadlineIsReportedUnknown(t *testing.T) {
	f := newFake(t)
	f.onClaim = func(int, *idemv1.ClaimRequest) (*idemv1.ClaimResponse, error) {
		return acquired(1, 30*time.Second, 2*time.Second), nil
	}
	f.effectTakes = time.Minute
	_, err := f.run()
	if !errors.Is(err, ErrAttemptTimeout) {
		t.Fatalf("%v", err)
	}
	f.expectSteps("claim", "effect", "fail UNKNOWN")
	if f.fails[0].GetError().GetCode() != attemptDeadlineCode {
		t.Fatalf("%v", f.fails[0])
	}
}

type fakeRenewer struct {
	clock   time.Time
	renewed []time.Duration
	answer  func(n int) (*idemv1.RenewResponse, error)
}

func (r *fakeRenewer) now() time.Time { return r.clock }
func (r *fakeRenewer) wait(d time.Duration) bool {
	r.clock = r.clock.Add(d)
	return len(r.renewed) < 50
}

func (r *fakeRenewer) renew(*idemv1.RenewRequest, time.Time) (*idemv1.RenewResponse, time.Time, error) {
	r.renewed = append(r.renewed, r.clock.Sub(epoch))
	response, err := r.answer(len(r.renewed))
	return response, r.clock, err
}

func TestCoreRenewalsComeTwoThirdsIntoEachGrantUntilTheDeadlineOrALoss(t *testing.T) {
	config := defaultExecuteConfig()
	config.lease = 3 * time.Second
	a := newAttempt(acquired(1, 3*time.Second, 7*time.Second), epoch, epoch, config, time.Time{})
	r := &fakeRenewer{clock: epoch, answer: func(int) (*idemv1.RenewResponse, error) {
		return &idemv1.RenewResponse{Lease: durationpb.New(3 * time.Second), AttemptDeadline: durationpb.New(time.Hour)}, nil
	}}
	// The attempt deadline is 7 s away: renewals at 1 s, 2 s, ... each granted 3 s,
	// until a grant reaches the deadline (at 4 s, granted until 7 s).
	a.deadlineAt = epoch.Add(7 * time.Second)
	keepRenewing(r, a)
	if !slices.Equal(r.renewed, []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second}) {
		t.Fatalf("renewed at %v", r.renewed)
	}

	lostCalls := 0
	a = newAttempt(acquired(1, 3*time.Second, time.Hour), epoch, epoch, config, time.Time{})
	a.onLost = func() { lostCalls++ }
	r = &fakeRenewer{clock: epoch, answer: func(int) (*idemv1.RenewResponse, error) {
		return nil, &StatusError{Code: codes.Aborted, Reason: "LEASE_LOST"}
	}}
	keepRenewing(r, a)
	if len(r.renewed) != 1 || lostCalls != 1 || a.interruption(r.clock) != leaseLost {
		t.Fatalf("renewed %v, lost %d times", r.renewed, lostCalls)
	}
}

// A migration window's previous fingerprints go on every Claim of the call (the
// first, and the one after Pending), copied when the option is made.
func TestCoreEveryClaimCarriesThePreviousFingerprints(t *testing.T) {
	f := newFake(t)
	f.onClaim = func(n int, _ *idemv1.ClaimRequest) (*idemv1.ClaimResponse, error) {
		if n == 1 {
			return pending(time.Second), nil
		}
		return acquired(1, 30*time.Second, 5*time.Minute), nil
	}
	old, older := make([]byte, 32), make([]byte, 32)
	old[0], older[0] = 1, 2
	option := WithPreviousFingerprints(old, older)
	old[0] = 9 // the caller reusing its slice
	if _, err := f.run(option); err != nil {
		t.Fatal(err)
	}
	f.expectSteps("claim", "claim", "effect", "complete")
	for _, request := range f.claims {
		sent := request.GetPreviousFingerprints()
		if len(sent) != 2 || sent[0][0] != 1 || sent[1][0] != 2 || len(sent[0]) != 32 {
			t.Fatalf("claim %v", request)
		}
	}
}
