package idemd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	idemv1 "github.com/idemd/idemd/clients/go/idemv1"
)

// The shared protocol vectors (../../testdata/protocol/vectors.json, described in its
// README) driving this client's protocol core through a scripted port, without a
// server. Each step the core takes (a send, the effect, a provider lookup) must be the
// vector's next step, and is answered as the vector says; the clock moves only by
// what the vector says each step takes. Sends go through the client's own re-send
// decisions (retryPlan, with no jitter). Background renewals (keepRenewing) run while
// a guarded step takes its time, from the attempt's first guarded step on.

type vectorFile struct {
	Scenarios []vectorScenario `json:"scenarios"`
}

type vectorScenario struct {
	Name  string         `json:"name"`
	Call  map[string]any `json:"call"`
	Steps []vectorStep   `json:"steps"`
}

type vectorStep struct {
	Do                     string           `json:"do"`
	Token                  int              `json:"token"`
	Wait                   *float64         `json:"wait"`
	At                     *float64         `json:"at"`
	Takes                  float64          `json:"takes"`
	Answer                 map[string]any   `json:"answer"`
	Error                  string           `json:"error"`
	RetryAfter             *float64         `json:"retry_after"`
	Returns                *json.RawMessage `json:"returns"`
	Raises                 json.RawMessage  `json:"raises"`
	Body                   string           `json:"body"`
	Disposition            string           `json:"disposition"`
	Code                   string           `json:"code"`
	PreviousOutcomeUnknown *bool            `json:"previous_outcome_unknown"`
	Result                 *struct {
		Body     string `json:"body"`
		Replayed bool   `json:"replayed"`
		Attempts uint32 `json:"attempts"`
	} `json:"result"`
}

type vectorRaises struct {
	Kind     string `json:"kind"`
	Reason   string `json:"reason"`
	Code     string `json:"code"`
	Replayed *bool  `json:"replayed"`
}

// vectorOrigin is the clock at the call's start; the vectors count from there.
var vectorOrigin = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func vectorSeconds(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }

// errScript ends a call whose steps left the script; the world's failure says how.
var errScript = &StatusError{Code: codes.InvalidArgument, Reason: "SCRIPT", Message: "the client left the script"}

// vectorWorld is the scripted server, provider and clock of one scenario, and the
// port the core runs on.
type vectorWorld struct {
	name    string
	steps   []vectorStep
	taken   int
	clock   time.Time
	tokens  [][]byte
	sent    map[int][]byte
	lease   time.Duration
	attempt time.Duration
	failure string

	current  *attempt
	renewals *scriptedRenewals
}

// scriptedRenewals runs keepRenewing on a goroutine of its own, one step at a time:
// it runs only while the world waits for it to pause or finish, so the two never
// touch the world at once.
type scriptedRenewals struct {
	world   *vectorWorld
	started bool
	parked  bool
	wakesAt time.Time
	pauses  chan time.Duration
	resume  chan bool
	done    chan struct{}
}

func (r *scriptedRenewals) now() time.Time { return r.world.clock }

func (r *scriptedRenewals) wait(d time.Duration) bool {
	r.pauses <- d
	return <-r.resume
}

func (r *scriptedRenewals) renew(request *idemv1.RenewRequest, deadline time.Time) (*idemv1.RenewResponse, time.Time, error) {
	return r.world.renew(request, deadline)
}

// next lets the renewals run until they pause (wakesAt) or finish.
func (r *scriptedRenewals) next() {
	select {
	case d := <-r.pauses:
		r.parked, r.wakesAt = true, r.world.clock.Add(d)
	case <-r.done:
		r.parked = false
	}
}

func (r *scriptedRenewals) stop() {
	if r.parked {
		r.resume <- false
		<-r.done
		r.parked = false
	}
}

func (w *vectorWorld) leave(format string, args ...any) error {
	if w.failure == "" {
		w.failure = fmt.Sprintf("step %d: ", w.taken+1) + fmt.Sprintf(format, args...)
	}
	return errScript
}

func (w *vectorWorld) expect(do string) (vectorStep, error) {
	if w.failure != "" {
		return vectorStep{}, errScript
	}
	if len(w.steps) == 0 || w.steps[0].Do == "" {
		return vectorStep{}, w.leave("the client does %q, the vector expects the call to end", do)
	}
	step := w.steps[0]
	if step.Do != do {
		return vectorStep{}, w.leave("the client does %q, the vector expects %q", do, step.Do)
	}
	if step.At != nil {
		if at := w.clock.Sub(vectorOrigin); (at - vectorSeconds(*step.At)).Abs() > time.Microsecond {
			return vectorStep{}, w.leave("%s at %v, the vector says %vs", do, at, *step.At)
		}
	}
	w.steps = w.steps[1:]
	w.taken++
	return step, nil
}

func scriptedError(name string, retryAfter *float64) *StatusError {
	err := &StatusError{Message: "scripted " + name}
	switch name {
	case "UNAVAILABLE":
		err.Code = codes.Unavailable
	case "LOST_REPLY":
		err.Code = codes.DeadlineExceeded
	case "LEASE_LOST":
		err.Code, err.Reason = codes.Aborted, name
	case "INVALID_REQUEST":
		err.Code, err.Reason = codes.InvalidArgument, name
	default: // ATTEMPT_DEADLINE_PASSED, STATE_FORBIDS, IDEMPOTENCY_KEY_REUSED, RESULT_EXPIRED
		err.Code, err.Reason = codes.FailedPrecondition, name
	}
	if retryAfter != nil {
		err.RetryAfter = vectorSeconds(*retryAfter)
	}
	return err
}

// send is one call, re-sent as the client's retryPlan decides: each send is the
// vector's next step. It returns the answer and when the answered send began.
func (w *vectorWorld) send(do string, deadline time.Time, check func(vectorStep) error) (map[string]any, time.Time, error) {
	plan := newRetryPlan(DefaultRetryPolicy, w.clock, deadline, 0)
	for {
		if _, ok := plan.nextTimeout(w.clock); !ok {
			return nil, plan.sentAt, &StatusError{Code: codes.DeadlineExceeded, Message: "no time left to send the call"}
		}
		step, err := w.expect(do)
		if err != nil {
			return nil, plan.sentAt, err
		}
		if err := check(step); err != nil {
			return nil, plan.sentAt, err
		}
		w.clock = w.clock.Add(vectorSeconds(step.Takes))
		if step.Error == "" {
			return step.Answer, plan.sentAt, nil
		}
		decoded := scriptedError(step.Error, step.RetryAfter)
		delay, again := plan.delayAfter(decoded, w.clock, func(time.Duration) time.Duration { return 0 })
		if !again {
			return nil, plan.sentAt, decoded
		}
		w.clock = w.clock.Add(delay)
	}
}

func field(m map[string]any, name string) float64 {
	v, _ := m[name].(float64)
	return v
}

func vectorOwnership(fields map[string]any) *idemv1.Ownership {
	attempt := uint32(field(fields, "attempt"))
	return &idemv1.Ownership{
		OperationId: "op-1", Fence: uint64(10 + attempt), Attempt: attempt, MaxAttempts: 5,
		Lease:           durationpb.New(vectorSeconds(field(fields, "lease"))),
		AttemptDeadline: durationpb.New(vectorSeconds(field(fields, "attempt_deadline"))),
	}
}

func vectorClaimResponse(answer map[string]any) *idemv1.ClaimResponse {
	for kind, value := range answer {
		fields, _ := value.(map[string]any)
		switch kind {
		case "acquired":
			return &idemv1.ClaimResponse{Outcome: &idemv1.ClaimResponse_Acquired{Acquired: &idemv1.Acquired{Ownership: vectorOwnership(fields)}}}
		case "reconcile_first":
			first := &idemv1.ReconcileFirst{
				Ownership:     vectorOwnership(fields),
				PreviousState: idemv1.OperationState_OPERATION_STATE_IN_PROGRESS,
				PreviousFence: uint64(9 + field(fields, "attempt")),
			}
			if _, ok := fields["previous_attempt_deadline"]; ok {
				first.PreviousAttemptDeadline = durationpb.New(vectorSeconds(field(fields, "previous_attempt_deadline")))
			}
			return &idemv1.ClaimResponse{Outcome: &idemv1.ClaimResponse_ReconcileFirst{ReconcileFirst: first}}
		case "completed":
			completed := &idemv1.Completed{OperationId: "op-1", Attempts: uint32(field(fields, "attempts"))}
			if code, ok := fields["error"].(string); ok {
				completed.State = idemv1.OperationState_OPERATION_STATE_FAILED
				completed.Outcome = &idemv1.Completed_Error{Error: &idemv1.OperationError{Reason: idemv1.FailureReason_FAILURE_REASON_TERMINAL, Code: code}}
			} else {
				body, _ := fields["body"].(string)
				completed.State = idemv1.OperationState_OPERATION_STATE_SUCCEEDED
				completed.Outcome = &idemv1.Completed_Result{Result: &idemv1.Result{Body: []byte(body)}}
			}
			return &idemv1.ClaimResponse{Outcome: &idemv1.ClaimResponse_Completed{Completed: completed}}
		case "pending":
			reason, _ := fields["reason"].(string)
			return &idemv1.ClaimResponse{Outcome: &idemv1.ClaimResponse_Pending{Pending: &idemv1.Pending{
				OperationId: "op-1", Attempt: 1,
				Reason:     idemv1.PendingReason(idemv1.PendingReason_value["PENDING_REASON_"+reason]),
				RetryAfter: durationpb.New(vectorSeconds(field(fields, "retry_after"))),
			}}}
		case "needs_reconciliation":
			return &idemv1.ClaimResponse{Outcome: &idemv1.ClaimResponse_NeedsReconciliation{NeedsReconciliation: &idemv1.NeedsReconciliation{
				OperationId: "op-1", Fence: 14, Attempts: uint32(field(fields, "attempts")),
			}}}
		}
	}
	return &idemv1.ClaimResponse{} // "unrecognised": an outcome added later decodes as none
}

// ---- the port ------------------------------------------------------------------

func (w *vectorWorld) now() time.Time { return w.clock }

func (w *vectorWorld) claimToken() []byte {
	w.tokens = append(w.tokens, []byte(fmt.Sprintf("claim-token-%04d", len(w.tokens)+1)))
	return w.tokens[len(w.tokens)-1]
}

func (w *vectorWorld) cancelled() error { return nil }

func (w *vectorWorld) claim(request *idemv1.ClaimRequest, deadline time.Time) (*idemv1.ClaimResponse, time.Time, error) {
	answer, sentAt, err := w.send("claim", deadline, func(step vectorStep) error {
		number := 0
		for i, token := range w.tokens {
			if bytes.Equal(token, request.GetClaimToken()) {
				number = i + 1
			}
		}
		if number != step.Token {
			return w.leave("a Claim with token %d, the vector says %d", number, step.Token)
		}
		sent, _ := proto.MarshalOptions{Deterministic: true}.Marshal(request)
		if first, ok := w.sent[number]; ok && !bytes.Equal(first, sent) {
			return w.leave("a re-sent Claim changed")
		}
		w.sent[number] = sent
		switch {
		case step.Wait == nil && request.GetWait() != nil:
			return w.leave("a Claim with wait %v, the vector says none", request.GetWait().AsDuration())
		case step.Wait != nil && request.GetWait() == nil:
			return w.leave("a Claim without wait, the vector says %vs", *step.Wait)
		case step.Wait != nil && (request.GetWait().AsDuration()-vectorSeconds(*step.Wait)).Abs() > time.Microsecond:
			return w.leave("a Claim with wait %v, the vector says %vs", request.GetWait().AsDuration(), *step.Wait)
		case request.GetLease().AsDuration() != w.lease || request.GetMaxAttemptDuration().AsDuration() != w.attempt:
			return w.leave("a Claim asking for lease %v and attempt %v", request.GetLease().AsDuration(), request.GetMaxAttemptDuration().AsDuration())
		}
		return nil
	})
	if err != nil {
		return nil, sentAt, err
	}
	return vectorClaimResponse(answer), sentAt, nil
}

func (w *vectorWorld) renew(request *idemv1.RenewRequest, deadline time.Time) (*idemv1.RenewResponse, time.Time, error) {
	answer, sentAt, err := w.send("renew", deadline, func(vectorStep) error {
		if w.current == nil || request.GetFence() != w.current.fence || request.GetLease().AsDuration() != w.lease {
			return w.leave("a Renew with fence %d and lease %v", request.GetFence(), request.GetLease().AsDuration())
		}
		return nil
	})
	if err != nil {
		return nil, sentAt, err
	}
	return &idemv1.RenewResponse{
		Lease:           durationpb.New(vectorSeconds(field(answer, "lease"))),
		AttemptDeadline: durationpb.New(vectorSeconds(field(answer, "attempt_deadline"))),
	}, sentAt, nil
}

func (w *vectorWorld) complete(request *idemv1.CompleteRequest, deadline time.Time) (*idemv1.CompleteResponse, error) {
	_, _, err := w.send("complete", deadline, func(step vectorStep) error {
		if string(request.GetResult().GetBody()) != step.Body {
			return w.leave("Complete with %q, the vector says %q", request.GetResult().GetBody(), step.Body)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &idemv1.CompleteResponse{State: idemv1.OperationState_OPERATION_STATE_SUCCEEDED}, nil
}

func (w *vectorWorld) fail(request *idemv1.FailRequest, deadline time.Time) (*idemv1.FailResponse, error) {
	disposition := strings.TrimPrefix(request.GetDisposition().String(), "FAIL_DISPOSITION_")
	answer, _, err := w.send("fail", deadline, func(step vectorStep) error {
		switch {
		case disposition != step.Disposition:
			return w.leave("Fail %s, the vector says %s", disposition, step.Disposition)
		case step.Code != "" && request.GetError().GetCode() != step.Code:
			return w.leave("Fail with code %q, the vector says %q", request.GetError().GetCode(), step.Code)
		case (step.RetryAfter == nil) != (request.GetRetryAfter() == nil):
			return w.leave("Fail with retry_after %v, the vector says %v", request.GetRetryAfter(), step.RetryAfter)
		case step.RetryAfter != nil && request.GetRetryAfter().AsDuration() != vectorSeconds(*step.RetryAfter):
			return w.leave("Fail with retry_after %v, the vector says %vs", request.GetRetryAfter().AsDuration(), *step.RetryAfter)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	response := &idemv1.FailResponse{}
	state, _ := answer["state"].(string)
	response.State = idemv1.OperationState(idemv1.OperationState_value["OPERATION_STATE_"+state])
	if reason, ok := answer["reason"].(string); ok {
		response.Reason = idemv1.FailureReason(idemv1.FailureReason_value["FAILURE_REASON_"+reason])
	}
	if _, ok := answer["retry_after"]; ok {
		response.RetryAfter = durationpb.New(vectorSeconds(field(answer, "retry_after")))
	}
	return response, nil
}

func (w *vectorWorld) lookup(*idemv1.LookupRequest) (*idemv1.LookupResponse, error) {
	answer, _, err := w.send("lookup", time.Time{}, func(vectorStep) error { return nil })
	if err != nil {
		return nil, err
	}
	state, _ := answer["state"].(string)
	operation := &idemv1.Operation{
		OperationId: "op-1",
		State:       idemv1.OperationState(idemv1.OperationState_value["OPERATION_STATE_"+state]),
		Attempt:     uint32(field(answer, "attempt")),
	}
	if body, ok := answer["body"].(string); ok {
		operation.Result = &idemv1.Result{Body: []byte(body)}
	}
	if code, ok := answer["error"].(string); ok {
		reason, _ := answer["reason"].(string)
		operation.Error = &idemv1.OperationError{Code: code, Reason: idemv1.FailureReason(idemv1.FailureReason_value["FAILURE_REASON_"+reason])}
	}
	return &idemv1.LookupResponse{Operation: operation}, nil
}

func (w *vectorWorld) sleep(d time.Duration) error {
	w.clock = w.clock.Add(d)
	return nil
}

func (w *vectorWorld) startRenewing(a *attempt) {
	w.current = a
	w.renewals = &scriptedRenewals{
		world: w, pauses: make(chan time.Duration), resume: make(chan bool), done: make(chan struct{}),
	}
}

func (w *vectorWorld) stopRenewing(*attempt) {
	if w.renewals != nil {
		w.renewals.stop()
		w.renewals = nil
	}
}

// guarded lets `takes` pass within the attempt, running the renewals that fall due
// meanwhile; it ends early at the cancel point or when a Renew lost the lease.
func (w *vectorWorld) guarded(a *attempt, takes time.Duration) interruption {
	r := w.renewals
	if r != nil && !r.started {
		r.started = true
		go func() {
			defer close(r.done)
			keepRenewing(r, a)
		}()
		r.next()
	}
	ends := w.clock.Add(takes)
	for {
		stop := ends
		if a.cancelAt.Before(stop) {
			stop = a.cancelAt
		}
		if r != nil && r.parked && r.wakesAt.Before(stop) {
			if r.wakesAt.After(w.clock) {
				w.clock = r.wakesAt
			}
			r.parked = false
			r.resume <- true
			r.next()
			if a.isLost() {
				return a.interruption(w.clock)
			}
			continue
		}
		if ends.After(a.cancelAt) {
			if a.cancelAt.After(w.clock) {
				w.clock = a.cancelAt
			}
			return timeUp
		}
		w.clock = ends
		return notInterrupted
	}
}

func vectorOutcome(raw *json.RawMessage) (Outcome, error) {
	if raw == nil || string(*raw) == "null" {
		return nil, nil
	}
	var returns struct {
		Success    *string  `json:"success"`
		Terminal   *string  `json:"terminal"`
		Retryable  *string  `json:"retryable"`
		RetryAfter *float64 `json:"retry_after"`
		Unknown    *string  `json:"unknown"`
	}
	if err := json.Unmarshal(*raw, &returns); err != nil {
		return nil, err
	}
	switch {
	case returns.Success != nil:
		return Success{Body: []byte(*returns.Success)}, nil
	case returns.Terminal != nil:
		return Terminal{Code: *returns.Terminal}, nil
	case returns.Retryable != nil && returns.RetryAfter != nil:
		return Retryable{Code: *returns.Retryable, RetryAfter: vectorSeconds(*returns.RetryAfter)}, nil
	case returns.Unknown != nil:
		return Unknown{Code: *returns.Unknown}, nil
	}
	return nil, fmt.Errorf("not an outcome: %s", *raw)
}

func (w *vectorWorld) scriptedWork(a *attempt, do string) (Outcome, interruption, error) {
	step, err := w.expect(do)
	if err != nil {
		return nil, notInterrupted, err
	}
	if step.PreviousOutcomeUnknown != nil && a.info.PreviousOutcomeUnknown != *step.PreviousOutcomeUnknown {
		return nil, notInterrupted, w.leave("the effect is told previous_outcome_unknown %v", a.info.PreviousOutcomeUnknown)
	}
	if stopped := w.guarded(a, vectorSeconds(step.Takes)); stopped != notInterrupted {
		return nil, stopped, nil
	}
	if string(step.Raises) == "true" {
		return nil, notInterrupted, errors.New("the scripted effect or lookup raised")
	}
	outcome, err := vectorOutcome(step.Returns)
	if err != nil {
		return nil, notInterrupted, w.leave("%v", err)
	}
	return outcome, notInterrupted, nil
}

func (w *vectorWorld) runEffect(a *attempt) (Outcome, interruption, error) {
	return w.scriptedWork(a, "effect")
}

func (w *vectorWorld) runLookup(a *attempt) (Outcome, interruption, error) {
	return w.scriptedWork(a, "provider_lookup")
}

func (w *vectorWorld) pause(a *attempt, d time.Duration) interruption { return w.guarded(a, d) }

// ---- the test --------------------------------------------------------------------

func loadProtocolVectors(t *testing.T) []vectorScenario {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "protocol", "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file vectorFile
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Scenarios) == 0 {
		t.Fatal("no scenarios")
	}
	return file.Scenarios
}

func vectorConfig(call map[string]any) executeConfig {
	config := defaultExecuteConfig()
	number := func(name string) (time.Duration, bool) {
		v, ok := call[name].(float64)
		return vectorSeconds(v), ok
	}
	if d, ok := number("lease"); ok {
		config.lease = d
	}
	if d, ok := number("attempt_duration"); ok {
		config.attemptDuration = d
	}
	if d, ok := number("deadline"); ok {
		config.pendingTimeout = d
	}
	if d, ok := number("lookup_interval"); ok {
		config.lookupInterval = d
	}
	if lookup, _ := call["lookup"].(bool); lookup {
		// Never called: the scripted port answers the lookup steps.
		config.lookup = func(context.Context, *Attempt) (Outcome, error) { return nil, nil }
	}
	config.providerDeduplicates, _ = call["provider_deduplicates"].(bool)
	return config
}

func vectorErrorKind(err error) string {
	var (
		unknown      *OutcomeUnknownError
		failed       *OperationFailedError
		pending      *PendingError
		needs        *NeedsReconciliationError
		superseded   *SupersededError
		unrecognised *UnrecognisedOutcomeError
		status       *StatusError
	)
	switch {
	case errors.As(err, &unknown) && unknown.TimedOut:
		return "ATTEMPT_TIMEOUT"
	case errors.As(err, &unknown):
		return "OUTCOME_UNKNOWN"
	case errors.As(err, &failed):
		return "OPERATION_FAILED"
	case errors.As(err, &pending):
		return "PENDING"
	case errors.As(err, &needs):
		return "NEEDS_RECONCILIATION"
	case errors.As(err, &superseded):
		return "SUPERSEDED"
	case errors.As(err, &unrecognised):
		return "UNRECOGNISED_OUTCOME"
	case errors.As(err, &status):
		return "STATUS"
	}
	return fmt.Sprintf("%T", err)
}

func TestProtocolVectors(t *testing.T) {
	for _, scenario := range loadProtocolVectors(t) {
		t.Run(scenario.Name, func(t *testing.T) {
			config := vectorConfig(scenario.Call)
			w := &vectorWorld{
				name: scenario.Name, steps: scenario.Steps, clock: vectorOrigin, sent: map[int][]byte{},
				lease: config.lease, attempt: config.attemptDuration,
			}
			x := &protocol{
				port: w, operation: "payments.charge", key: "order-1",
				payload: JSONText(`{"amount":1000,"currency":"EUR"}`), config: config,
			}
			result, err := x.run()
			w.stopRenewing(nil)
			if w.failure != "" {
				t.Fatalf("%s (the call ended with %+v, %v)", w.failure, result, err)
			}
			if len(w.steps) != 1 {
				t.Fatalf("step %d: the call ended (%+v, %v) before the vector's step %+v", w.taken+1, result, err, w.steps[0])
			}
			final := w.steps[0]
			if final.Result != nil {
				if err != nil {
					t.Fatalf("raised %v, the vector expects a result", err)
				}
				if string(result.Body) != final.Result.Body || result.Replayed != final.Result.Replayed || result.Attempts != final.Result.Attempts {
					t.Fatalf("result %+v, the vector expects %+v", result, *final.Result)
				}
				return
			}
			var raises vectorRaises
			if jsonErr := json.Unmarshal(final.Raises, &raises); jsonErr != nil {
				t.Fatal(jsonErr)
			}
			if err == nil {
				t.Fatalf("returned %+v, the vector expects %+v", result, raises)
			}
			if kind := vectorErrorKind(err); kind != raises.Kind {
				t.Fatalf("raised %v (%s), the vector expects %+v", err, kind, raises)
			}
			var failed *OperationFailedError
			if errors.As(err, &failed) && (failed.Reason != "FAILURE_REASON_"+raises.Reason || failed.Replayed != *raises.Replayed) {
				t.Fatalf("raised %+v, the vector expects %+v", failed, raises)
			}
			var status *StatusError
			if errors.As(err, &status) &&
				((raises.Reason != "" && status.Reason != raises.Reason) ||
					(raises.Code != "" && codeName(status.Code) != raises.Code)) {
				t.Fatalf("raised %+v, the vector expects %+v", status, raises)
			}
		})
	}
}

// codeName is a gRPC code as the vectors name it (UNAVAILABLE, DEADLINE_EXCEEDED).
func codeName(code codes.Code) string {
	var name strings.Builder
	for i, r := range code.String() {
		if i > 0 && r >= 'A' && r <= 'Z' {
			name.WriteByte('_')
		}
		name.WriteRune(r)
	}
	return strings.ToUpper(name.String())
}
