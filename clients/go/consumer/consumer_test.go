package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	idemd "github.com/idemd/idemd/clients/go"
	"github.com/idemd/idemd/clients/go/consumer"
	"github.com/idemd/idemd/clients/go/internal/idemdtest"
)

func TestMain(m *testing.M) { idemdtest.Main(m) }

func TestTheMessageIDIsTheKeyUnlessAnIdentityFunctionIsGiven(t *testing.T) {
	byID := consumer.Settings{Operation: "shipments.create"}
	if key, refused := byID.Key(consumer.Message{MessageID: "m-1"}); key != "m-1" || refused != nil {
		t.Fatalf("key %q, refused %+v", key, refused)
	}
	if _, refused := byID.Key(consumer.Message{}); refused == nil || refused.Kind != consumer.DeadLetter ||
		refused.Reason != "NO_MESSAGE_IDENTITY" {
		t.Fatalf("refused %+v", refused)
	}
	byOrder := consumer.Settings{Operation: "shipments.create", Identity: func(m consumer.Message) (string, error) {
		order, found := strings.CutPrefix(string(m.Body), "order-")
		if !found {
			return "", fmt.Errorf("%w: no order number", consumer.ErrNoIdentity)
		}
		return order, nil
	}}
	if key, _ := byOrder.Key(consumer.Message{Body: []byte("order-7")}); key != "7" {
		t.Fatalf("key %q", key)
	}
	if _, refused := byOrder.Key(consumer.Message{MessageID: "m-1", Body: []byte("other")}); refused == nil ||
		refused.Reason != "NO_MESSAGE_IDENTITY" || !strings.Contains(refused.Detail, "no order number") {
		t.Fatalf("refused %+v", refused)
	}
}

// The table every adapter follows.
func TestEveryAnswerOfExecuteOnceHasOneVerdict(t *testing.T) {
	status := func(code codes.Code, reason string) error {
		return &idemd.StatusError{Code: code, Reason: reason, Metadata: map[string]string{"operation_id": "op"}}
	}
	cases := []struct {
		result *idemd.Result
		err    error
		want   string
	}{
		{&idemd.Result{OperationID: "op"}, nil, "ack"},
		{&idemd.Result{OperationID: "op", Replayed: true}, nil, "ack"},
		{nil, &idemd.OperationFailedError{OperationID: "op"}, "ack"},
		{nil, status(codes.FailedPrecondition, "IDEMPOTENCY_KEY_REUSED"), "dead-letter IDEMPOTENCY_KEY_REUSED"},
		{nil, status(codes.FailedPrecondition, "RESULT_EXPIRED"), "dead-letter RESULT_EXPIRED"},
		{nil, status(codes.InvalidArgument, "INVALID_REQUEST"), "dead-letter INVALID_MESSAGE"},
		{nil, status(codes.ResourceExhausted, "REQUEST_TOO_LARGE"), "dead-letter INVALID_MESSAGE"},
		{nil, &idemd.NeedsReconciliationError{OperationID: "op", Attempts: 3}, "park NEEDS_RECONCILIATION"},
		{nil, &idemd.OutcomeUnknownError{OperationID: "op", Message: "unknown"}, "park OUTCOME_UNKNOWN"},
		{nil, &idemd.PendingError{OperationID: "op", RetryAfter: 700 * time.Millisecond}, "retry-later 700ms"},
		{nil, status(codes.Unavailable, "STORE_UNAVAILABLE"), "retry-later 1s"},
		{nil, &idemd.SupersededError{OperationID: "op"}, "retry-later 1s"},
		{nil, context.DeadlineExceeded, "retry-later 1s"},
	}
	for _, c := range cases {
		verdict := consumer.VerdictFor(c.result, c.err, 0)
		shown := verdict.Kind.String()
		switch verdict.Kind {
		case consumer.DeadLetter, consumer.Park:
			shown += " " + verdict.Reason
			if verdict.OperationID != "op" {
				t.Errorf("%v: operation id %q", c.err, verdict.OperationID)
			}
		case consumer.RetryLater:
			shown += " " + verdict.After.String()
		}
		if shown != c.want {
			t.Errorf("%v: %s, want %s", c.err, shown, c.want)
		}
	}
}

// Consume against a real idemd, deliveries simulated: a redelivery replays, a
// changed body under the same id is dead-lettered, an unknown outcome is parked
// and then needs reconciliation; the handler runs once per operation.
func TestConsumeReplaysRedeliveriesDeadLettersConflictsAndParksUnknowns(t *testing.T) {
	srv := idemdtest.Start(t, idemdtest.Embedded)
	client, err := idemd.New(idemd.WithAddress(srv.Addr), idemd.WithToken(srv.Token))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	var mu sync.Mutex
	effects := map[string]int{}
	handler := func(_ context.Context, _ *idemd.Attempt, m consumer.Message) (idemd.Outcome, error) {
		mu.Lock()
		effects[string(m.Body)]++
		mu.Unlock()
		if string(m.Body) == "order-2" {
			return nil, errors.New("the carrier did not answer")
		}
		return idemd.Success{Body: []byte(`{"parcel":"P-1"}`)}, nil
	}
	settings := consumer.Settings{Operation: "shipments.create", Options: []idemd.ExecuteOption{idemd.WithMaxAttempts(1)}}
	deliveries := []consumer.Message{
		{MessageID: "m-1", Body: []byte("order-1")},
		{MessageID: "m-1", Body: []byte("order-1"), Redelivered: true},
		{MessageID: "m-1", Body: []byte("order-1-changed")},
		{MessageID: "m-2", Body: []byte("order-2")},
		{MessageID: "m-2", Body: []byte("order-2"), Redelivered: true},
		{Body: []byte("order-3")},
	}
	var shown []string
	for _, m := range deliveries {
		verdict := consumer.Consume(context.Background(), client, settings, m, handler)
		line := verdict.Kind.String()
		if verdict.Kind == consumer.Ack {
			line += fmt.Sprintf(" replayed=%v", verdict.Replayed)
		} else {
			line += " " + verdict.Reason
		}
		shown = append(shown, line)
	}
	want := []string{
		"ack replayed=false", "ack replayed=true", "dead-letter IDEMPOTENCY_KEY_REUSED",
		"park OUTCOME_UNKNOWN", "park NEEDS_RECONCILIATION", "dead-letter NO_MESSAGE_IDENTITY",
	}
	if strings.Join(shown, "\n") != strings.Join(want, "\n") {
		t.Fatalf("verdicts:\n%s\nwant:\n%s", strings.Join(shown, "\n"), strings.Join(want, "\n"))
	}
	if effects["order-1"] != 1 || effects["order-1-changed"] != 0 || effects["order-2"] != 1 || effects["order-3"] != 0 {
		t.Fatalf("effects %v", effects)
	}
}
