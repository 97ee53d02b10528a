// Package consumer is the broker-neutral core of a deduplicating queue consumer:
// a message is claimed by its identity (the producer's message id, or a business
// reference the caller's function takes from it), its handler runs through
// (*idemd.Client).ExecuteOnce with the body as the payload, and only then is the
// message acknowledged. A redelivery replays; the same identity with another body
// is dead-lettered, never executed; an operation whose outcome is unknown is
// parked, never acknowledged as done.
//
// Key and VerdictFor decide without I/O; Consume runs one message through idemd.
// A broker adapter turns a delivery into a Message and a Verdict into the
// broker's answer, as the Rust and Python clients' RabbitMQ and JetStream
// adapters do (their READMEs), with the same x-idemd-* headers.
package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"

	idemd "github.com/idemd/idemd/clients/go"
)

// The headers an adapter gives a dead-lettered or parked copy.
const (
	HeaderVerdict     = "x-idemd-verdict"
	HeaderReason      = "x-idemd-reason"
	HeaderOperationID = "x-idemd-operation-id"
	HeaderDetail      = "x-idemd-detail"
)

// Message is a message as the core sees it, whatever broker delivered it.
type Message struct {
	// MessageID is the producer's message id (AMQP message-id, Nats-Msg-Id).
	MessageID string
	Body      []byte
	// DeliveryCount counts deliveries, this one included, where the broker counts
	// (JetStream); zero where it only flags a redelivery.
	DeliveryCount uint64
	Redelivered   bool
}

// ErrNoIdentity is wrapped by an Identity function's error when the message
// carries no identity: the message is dead-lettered (NO_MESSAGE_IDENTITY).
var ErrNoIdentity = errors.New("no message identity")

// Settings say how messages become operations.
type Settings struct {
	// Operation names the action every message is, e.g. "orders.ship".
	Operation string
	// Identity takes a business reference from a message; nil: the message id.
	// Any error it returns dead-letters the message (NO_MESSAGE_IDENTITY).
	Identity func(Message) (string, error)
	// JSONBody fingerprints the body as JSON (its canonical form) instead of bytes.
	JSONBody bool
	// RetryDelay is how long a message idemd cannot decide on now waits, when the
	// server named no time (default 1 s).
	RetryDelay time.Duration
	// Options go to ExecuteOnce. Without WithPendingTimeout the consumer waits 5 s
	// for another attempt, then hands the message back (RetryLater).
	Options []idemd.ExecuteOption
}

// Kind is what to tell the broker.
type Kind int

const (
	// Ack: the operation has its outcome (new, replayed, or a stored terminal
	// failure).
	Ack Kind = iota + 1
	// DeadLetter: never executable; copy it with the reason, never redeliver.
	DeadLetter
	// Park: needs a reconciler; copy it with the reason; it is not done.
	Park
	// RetryLater: idemd cannot decide now; hand it back after After.
	RetryLater
)

func (k Kind) String() string {
	switch k {
	case Ack:
		return "ack"
	case DeadLetter:
		return "dead-letter"
	case Park:
		return "park"
	case RetryLater:
		return "retry-later"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Verdict is what to tell the broker about one message.
type Verdict struct {
	Kind Kind
	// Reason is a stable UPPER_SNAKE name for DeadLetter and Park:
	// IDEMPOTENCY_KEY_REUSED, RESULT_EXPIRED, NO_MESSAGE_IDENTITY, INVALID_MESSAGE,
	// NEEDS_RECONCILIATION, OUTCOME_UNKNOWN.
	Reason      string
	OperationID string
	// Detail describes the error (never the payload).
	Detail string
	// After is the delay of RetryLater.
	After time.Duration
	// Result is Ack's outcome (nil for a stored terminal failure).
	Result *idemd.Result
	// Replayed is set on Ack when nothing ran now.
	Replayed bool
}

// Handler runs the message's effect once the operation is owned.
type Handler func(ctx context.Context, attempt *idemd.Attempt, message Message) (idemd.Outcome, error)

// Key is the idempotency key of message's operation, or the verdict that it has
// none.
func (s Settings) Key(message Message) (string, *Verdict) {
	if s.Identity == nil {
		if message.MessageID == "" {
			return "", &Verdict{Kind: DeadLetter, Reason: "NO_MESSAGE_IDENTITY", Detail: "the message has no message id"}
		}
		return message.MessageID, nil
	}
	key, err := s.Identity(message)
	if err != nil || key == "" {
		detail := "the identity function found none"
		if err != nil {
			detail = err.Error()
		}
		return "", &Verdict{Kind: DeadLetter, Reason: "NO_MESSAGE_IDENTITY", Detail: detail}
	}
	return key, nil
}

// VerdictFor is what to tell the broker once ExecuteOnce answered result, err.
func VerdictFor(result *idemd.Result, err error, retryDelay time.Duration) Verdict {
	if retryDelay <= 0 {
		retryDelay = time.Second
	}
	if err == nil {
		return Verdict{Kind: Ack, OperationID: result.OperationID, Result: result, Replayed: result.Replayed}
	}
	var (
		failed   *idemd.OperationFailedError
		needs    *idemd.NeedsReconciliationError
		unknown  *idemd.OutcomeUnknownError
		pending  *idemd.PendingError
		statusOf *idemd.StatusError
	)
	operationID := ""
	if errors.As(err, &statusOf) {
		operationID = statusOf.OperationID()
	}
	switch {
	case errors.As(err, &failed):
		// A terminal failure is the operation's outcome, replayed to every delivery.
		return Verdict{Kind: Ack, OperationID: failed.OperationID, Detail: failed.Reason, Replayed: failed.Replayed}
	case errors.Is(err, idemd.ErrIdempotencyKeyReused):
		return Verdict{Kind: DeadLetter, Reason: "IDEMPOTENCY_KEY_REUSED", OperationID: operationID,
			Detail: "the same identity was used with another body"}
	case errors.Is(err, idemd.ErrResultExpired):
		return Verdict{Kind: DeadLetter, Reason: "RESULT_EXPIRED", OperationID: operationID, Detail: err.Error()}
	case errors.Is(err, idemd.ErrRequestTooLarge), statusOf != nil && statusOf.Code == codes.InvalidArgument:
		return Verdict{Kind: DeadLetter, Reason: "INVALID_MESSAGE", OperationID: operationID, Detail: err.Error()}
	case errors.As(err, &needs):
		return Verdict{Kind: Park, Reason: "NEEDS_RECONCILIATION", OperationID: needs.OperationID,
			Detail: fmt.Sprintf("attempt budget spent on unknown outcomes (%d attempts)", needs.Attempts)}
	case errors.As(err, &unknown):
		return Verdict{Kind: Park, Reason: "OUTCOME_UNKNOWN", OperationID: unknown.OperationID, Detail: unknown.Message}
	case errors.As(err, &pending):
		return Verdict{Kind: RetryLater, OperationID: pending.OperationID, After: pending.RetryAfter, Detail: err.Error()}
	case statusOf != nil && statusOf.RetryAfter > 0:
		return Verdict{Kind: RetryLater, OperationID: operationID, After: statusOf.RetryAfter, Detail: err.Error()}
	}
	// Not ended, or not known to this call (unreachable, taken over, a context
	// that ended): nothing is acknowledged as done; a later delivery decides again.
	return Verdict{Kind: RetryLater, OperationID: operationID, After: retryDelay, Detail: err.Error()}
}

// Consume runs handler at most once for message's operation and returns the
// verdict.
func Consume(ctx context.Context, client *idemd.Client, settings Settings, message Message, handler Handler) Verdict {
	key, refused := settings.Key(message)
	if refused != nil {
		return *refused
	}
	payload := idemd.Bytes(message.Body)
	if settings.JSONBody {
		payload = idemd.JSONText(string(message.Body))
	}
	options := append([]idemd.ExecuteOption{idemd.WithPendingTimeout(5 * time.Second)}, settings.Options...)
	effect := func(ctx context.Context, attempt *idemd.Attempt) (idemd.Outcome, error) {
		return handler(ctx, attempt, message)
	}
	result, err := client.ExecuteOnce(ctx, settings.Operation, key, payload, effect, options...)
	return VerdictFor(result, err, settings.RetryDelay)
}
