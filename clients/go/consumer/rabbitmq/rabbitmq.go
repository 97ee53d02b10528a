// Package rabbitmq is the RabbitMQ adapter of package consumer (amqp091-go): a
// delivery becomes a consumer.Message, a verdict becomes the broker's answer.
//
//   - Ack: basic.ack, after the outcome is recorded or replayed;
//   - DeadLetter / Park: republished (mandatory, confirmed) to the dead-letter or
//     parking queue with the x-idemd-* headers, then acked;
//   - RetryLater: held for After (at most LongestHold), then nack with requeue.
//
// Republishing, not a reject to the queue's dead-letter exchange, is how the reason
// travels with the message (RabbitMQ's x-death says only "rejected"). A consumer
// that dies between the copy and the ack copies again on the redelivery: dead
// letters are at-least-once, the handler at most once.
package rabbitmq

import (
	"context"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	idemd "github.com/idemd/idemd/clients/go"
	"github.com/idemd/idemd/clients/go/consumer"
)

// LongestHold bounds how long a message is held before it is handed back.
const LongestHold = 30 * time.Second

// Consumer is a deduplicating consumer. Its Channel carries the copies: New puts it
// in confirm mode, and a copy is acked by the broker before the original is.
type Consumer struct {
	client      *idemd.Client
	channel     *amqp.Channel
	settings    consumer.Settings
	deadLetters string
	parking     string
	returns     chan amqp.Return
}

// New is a consumer whose dead letters and parked messages go to the queues
// deadLetters and parking (through the default exchange).
func New(client *idemd.Client, channel *amqp.Channel, settings consumer.Settings, deadLetters, parking string) (*Consumer, error) {
	if err := channel.Confirm(false); err != nil {
		return nil, fmt.Errorf("idemd consumer: confirm mode: %w", err)
	}
	// Buffered: the broker sends a basic.return before the ack of the same publish,
	// so a copy that routed nowhere is here by the time its confirmation is.
	returns := channel.NotifyReturn(make(chan amqp.Return, 16))
	return &Consumer{client: client, channel: channel, settings: settings,
		deadLetters: deadLetters, parking: parking, returns: returns}, nil
}

// MessageOf is the message a delivery carries.
func MessageOf(delivery amqp.Delivery) consumer.Message {
	message := consumer.Message{MessageID: delivery.MessageId, Body: delivery.Body, Redelivered: delivery.Redelivered}
	// Quorum queues count returns (0 on the first delivery).
	if count, ok := delivery.Headers["x-delivery-count"].(int64); ok && count >= 0 {
		message.DeliveryCount = uint64(count) + 1
	}
	return message
}

// Handle decides and settles one delivery and returns the verdict.
func (c *Consumer) Handle(ctx context.Context, delivery amqp.Delivery, handler consumer.Handler) (consumer.Verdict, error) {
	verdict := c.Decide(ctx, delivery, handler)
	return verdict, c.Settle(ctx, delivery, verdict)
}

// Decide runs the delivery through idemd (the handler at most once) and says what
// to tell the broker, without telling it.
func (c *Consumer) Decide(ctx context.Context, delivery amqp.Delivery, handler consumer.Handler) consumer.Verdict {
	return consumer.Consume(ctx, c.client, c.settings, MessageOf(delivery), handler)
}

// Settle tells the broker verdict about delivery. An error leaves the delivery
// unacked: the broker redelivers it once this channel is gone.
func (c *Consumer) Settle(ctx context.Context, delivery amqp.Delivery, verdict consumer.Verdict) error {
	switch verdict.Kind {
	case consumer.Ack:
		return delivery.Ack(false)
	case consumer.DeadLetter, consumer.Park:
		queue := c.deadLetters
		if verdict.Kind == consumer.Park {
			queue = c.parking
		}
		if err := c.copy(ctx, delivery, queue, verdict); err != nil {
			return err
		}
		return delivery.Ack(false)
	default:
		// Requeued at once, a message idemd cannot take yet would come straight back.
		select {
		case <-time.After(min(verdict.After, LongestHold)):
		case <-ctx.Done():
		}
		return delivery.Nack(false, true)
	}
}

func (c *Consumer) copy(ctx context.Context, delivery amqp.Delivery, queue string, verdict consumer.Verdict) error {
	headers := amqp.Table{}
	for name, value := range delivery.Headers {
		headers[name] = value
	}
	headers[consumer.HeaderVerdict] = verdict.Kind.String()
	headers[consumer.HeaderReason] = verdict.Reason
	if verdict.OperationID != "" {
		headers[consumer.HeaderOperationID] = verdict.OperationID
	}
	headers[consumer.HeaderDetail] = verdict.Detail
	confirmation, err := c.channel.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, amqp.Publishing{
		Headers: headers, MessageId: delivery.MessageId, ContentType: delivery.ContentType,
		CorrelationId: delivery.CorrelationId, DeliveryMode: delivery.DeliveryMode, Body: delivery.Body,
	})
	if err != nil {
		return fmt.Errorf("idemd consumer: the copy to %s: %w", queue, err)
	}
	acked, err := confirmation.WaitContext(ctx)
	if err != nil || !acked {
		return fmt.Errorf("idemd consumer: the copy to %s was not confirmed (%v)", queue, err)
	}
	select {
	case returned := <-c.returns:
		return fmt.Errorf("idemd consumer: the copy to %s was returned: %s", queue, returned.ReplyText)
	default:
		return nil
	}
}
