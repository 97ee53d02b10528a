// Package jetstream is the NATS JetStream adapter of package consumer (nats.go's
// jetstream API): a message becomes a consumer.Message, a verdict becomes the
// acknowledgement.
//
//   - Ack: +ACK confirmed by the server (DoubleAck), after the outcome is recorded
//     or replayed;
//   - DeadLetter / Park: published to the dead-letter or parking subject with the
//     x-idemd-* headers (the stream's ack awaited), then +TERM;
//   - RetryLater: -NAK with the delay named (at most LongestDelay).
//
// +TERM stops redelivery without calling the message done. The copy keeps the
// original subject and message id in x-idemd-subject and x-idemd-message-id, not in
// Nats-Msg-Id, so the dead-letter stream never drops one as a duplicate. The
// subjects must be captured by a stream, or the publish fails and the message stays
// unacknowledged (redelivered after ack-wait).
package jetstream

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	idemd "github.com/idemd/idemd/clients/go"
	"github.com/idemd/idemd/clients/go/consumer"
)

// LongestDelay bounds the redelivery delay asked for (RetryLater).
const LongestDelay = time.Minute

// The original subject and message id of a dead-lettered or parked copy.
const (
	HeaderSubject   = "x-idemd-subject"
	HeaderMessageID = "x-idemd-message-id"
)

// Consumer is a deduplicating consumer of JetStream messages.
type Consumer struct {
	Client            *idemd.Client
	JetStream         jetstream.JetStream
	Settings          consumer.Settings
	DeadLetterSubject string
	ParkingSubject    string
}

// MessageOf is the message JetStream delivered.
func MessageOf(delivered jetstream.Msg) consumer.Message {
	message := consumer.Message{MessageID: delivered.Headers().Get(nats.MsgIdHdr), Body: delivered.Data()}
	if metadata, err := delivered.Metadata(); err == nil {
		message.DeliveryCount = metadata.NumDelivered
		message.Redelivered = metadata.NumDelivered > 1
	}
	return message
}

// Handle decides and settles one message and returns the verdict.
func (c *Consumer) Handle(ctx context.Context, delivered jetstream.Msg, handler consumer.Handler) (consumer.Verdict, error) {
	verdict := c.Decide(ctx, delivered, handler)
	return verdict, c.Settle(ctx, delivered, verdict)
}

// Decide runs the message through idemd (the handler at most once) and says what
// to tell JetStream, without telling it.
func (c *Consumer) Decide(ctx context.Context, delivered jetstream.Msg, handler consumer.Handler) consumer.Verdict {
	return consumer.Consume(ctx, c.Client, c.Settings, MessageOf(delivered), handler)
}

// Settle tells JetStream verdict about delivered. An error leaves the message
// unacknowledged: JetStream redelivers it after ack-wait.
func (c *Consumer) Settle(ctx context.Context, delivered jetstream.Msg, verdict consumer.Verdict) error {
	switch verdict.Kind {
	case consumer.Ack:
		return delivered.DoubleAck(ctx)
	case consumer.DeadLetter, consumer.Park:
		subject := c.DeadLetterSubject
		if verdict.Kind == consumer.Park {
			subject = c.ParkingSubject
		}
		if err := c.copy(ctx, delivered, subject, verdict); err != nil {
			return err
		}
		return delivered.Term()
	default:
		return delivered.NakWithDelay(min(verdict.After, LongestDelay))
	}
}

func (c *Consumer) copy(ctx context.Context, delivered jetstream.Msg, subject string, verdict consumer.Verdict) error {
	headers := nats.Header{}
	for name, values := range delivered.Headers() {
		if name == nats.MsgIdHdr {
			headers[HeaderMessageID] = values
			continue
		}
		headers[name] = values
	}
	headers.Set(HeaderSubject, delivered.Subject())
	headers.Set(consumer.HeaderVerdict, verdict.Kind.String())
	headers.Set(consumer.HeaderReason, verdict.Reason)
	if verdict.OperationID != "" {
		headers.Set(consumer.HeaderOperationID, verdict.OperationID)
	}
	headers.Set(consumer.HeaderDetail, verdict.Detail)
	if _, err := c.JetStream.PublishMsg(ctx, &nats.Msg{Subject: subject, Header: headers, Data: delivered.Data()}); err != nil {
		return fmt.Errorf("idemd consumer: the copy to %s was not stored: %w", subject, err)
	}
	return nil
}
