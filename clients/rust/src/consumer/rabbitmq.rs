//! The RabbitMQ adapter (lapin): a delivery becomes a [`Message`], a
//! [`Verdict`] becomes the broker's answer.
//!
//! | verdict | RabbitMQ |
//! |---|---|
//! | Ack | `basic.ack`, after the outcome is recorded (or replayed) |
//! | DeadLetter | republished to the dead-letter destination with the `x-idemd-*` headers (confirmed), then acked |
//! | Park | republished to the parking destination with the `x-idemd-*` headers (confirmed), then acked |
//! | RetryLater | held for `after` (at most [`LONGEST_HOLD`]), then `basic.nack` with requeue |
//!
//! Republishing, not `nack` to the queue's dead-letter exchange, is how the
//! reason travels with the message (RabbitMQ's own `x-death` only says
//! "rejected"). A consumer that dies between the republish and the ack sees
//! the message again and republishes it again: the dead letters are
//! at-least-once, the handler still at most once. The channel is put in
//! confirm mode so that a message is acked only once its copy is stored.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use lapin::message::Delivery;
use lapin::options::{
    BasicAckOptions, BasicNackOptions, BasicPublishOptions, ConfirmSelectOptions,
};
use lapin::types::{AMQPValue, LongString, ShortString};
use lapin::{Channel, Confirmation};

use super::{ConsumerSettings, Message, Reason, Verdict, headers};
use crate::client::Client;
use crate::execute::{Disposition, EffectContext};

/// The longest a message is held before it is handed back (RetryLater).
pub const LONGEST_HOLD: Duration = Duration::from_secs(30);

/// Where a dead-lettered or parked message is republished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// The exchange ("" is the default exchange, which routes by queue name).
    pub exchange: String,
    pub routing_key: String,
}

impl Destination {
    /// A queue, through the default exchange.
    pub fn queue(name: impl Into<String>) -> Self {
        Self {
            exchange: String::new(),
            routing_key: name.into(),
        }
    }
}

/// A deduplicating consumer on one lapin channel.
#[derive(Debug, Clone)]
pub struct RabbitConsumer {
    client: Client,
    channel: Channel,
    settings: ConsumerSettings,
    dead_letters: Destination,
    parking: Destination,
}

impl RabbitConsumer {
    /// A consumer on `channel`, which it puts in confirm mode (its own
    /// republications are confirmed before the original is acked).
    pub async fn new(
        client: Client,
        channel: Channel,
        settings: ConsumerSettings,
        dead_letters: Destination,
        parking: Destination,
    ) -> Result<Self, lapin::Error> {
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await?;
        Ok(Self {
            client,
            channel,
            settings,
            dead_letters,
            parking,
        })
    }

    /// Consumes `deliveries` (from `basic_consume` on this consumer's
    /// channel, without no_ack) one at a time until the stream ends or the
    /// broker fails.
    pub async fn run<H, F>(
        &self,
        mut deliveries: lapin::Consumer,
        handler: H,
    ) -> Result<(), SettleError>
    where
        H: Fn(EffectContext, Arc<Message>) -> F,
        F: Future<Output = Disposition>,
    {
        while let Some(delivery) = deliveries.next().await {
            self.handle(&delivery?, &handler).await?;
        }
        Ok(())
    }

    /// Decides and settles one delivery; returns the verdict.
    pub async fn handle<H, F>(
        &self,
        delivery: &Delivery,
        handler: &H,
    ) -> Result<Verdict, SettleError>
    where
        H: Fn(EffectContext, Arc<Message>) -> F,
        F: Future<Output = Disposition>,
    {
        let verdict = self.decide(delivery, handler).await;
        self.settle(delivery, &verdict).await?;
        Ok(verdict)
    }

    /// Runs the delivery through idemd (the handler at most once) and says
    /// what to tell the broker, without telling it: [`RabbitConsumer::settle`]
    /// does.
    pub async fn decide<H, F>(&self, delivery: &Delivery, handler: &H) -> Verdict
    where
        H: Fn(EffectContext, Arc<Message>) -> F,
        F: Future<Output = Disposition>,
    {
        let message = Arc::new(message(delivery));
        self.client.consume(&self.settings, message, handler).await
    }

    /// Tells the broker `verdict` about `delivery`.
    pub async fn settle(&self, delivery: &Delivery, verdict: &Verdict) -> Result<(), SettleError> {
        match verdict {
            Verdict::Ack(_) => {
                delivery.ack(BasicAckOptions::default()).await?;
            }
            Verdict::DeadLetter {
                reason,
                operation_id,
                detail,
            } => {
                let destination = &self.dead_letters;
                self.republish(
                    delivery,
                    destination,
                    "dead-letter",
                    *reason,
                    operation_id,
                    detail,
                )
                .await?;
                delivery.ack(BasicAckOptions::default()).await?;
            }
            Verdict::Park {
                reason,
                operation_id,
                detail,
            } => {
                let destination = &self.parking;
                self.republish(delivery, destination, "park", *reason, operation_id, detail)
                    .await?;
                delivery.ack(BasicAckOptions::default()).await?;
            }
            Verdict::RetryLater { after, .. } => {
                // Requeued at once, a message the server cannot take yet
                // would come straight back: hold it for the time named.
                tokio::time::sleep((*after).min(LONGEST_HOLD)).await;
                delivery
                    .nack(BasicNackOptions {
                        multiple: false,
                        requeue: true,
                    })
                    .await?;
            }
        }
        Ok(())
    }

    async fn republish(
        &self,
        delivery: &Delivery,
        destination: &Destination,
        verdict: &str,
        reason: Reason,
        operation_id: &Option<String>,
        detail: &str,
    ) -> Result<(), SettleError> {
        let mut table = delivery.properties.headers().clone().unwrap_or_default();
        let mut set = |name: &str, value: &str| {
            table.insert(
                ShortString::from(name),
                AMQPValue::LongString(LongString::from(value)),
            );
        };
        set(headers::VERDICT, verdict);
        set(headers::REASON, reason.as_str());
        if let Some(operation_id) = operation_id {
            set(headers::OPERATION_ID, operation_id);
        }
        set(headers::DETAIL, detail);
        let properties = delivery.properties.clone().with_headers(table);
        let (Ok(exchange), Ok(routing_key)) = (
            ShortString::try_new(destination.exchange.as_str()),
            ShortString::try_new(destination.routing_key.as_str()),
        ) else {
            return Err(SettleError::NotStored(destination.clone()));
        };
        let confirmation = self
            .channel
            .basic_publish(
                exchange,
                routing_key,
                // Mandatory: a destination that routes nowhere is returned,
                // not silently dropped.
                BasicPublishOptions {
                    mandatory: true,
                    ..BasicPublishOptions::default()
                },
                &delivery.data,
                properties,
            )
            .await?
            .await?;
        match confirmation {
            Confirmation::Ack(None) => Ok(()),
            // Returned (unroutable), refused, or unconfirmed: the original
            // stays unacked, and the broker redelivers it.
            Confirmation::Ack(Some(_)) | Confirmation::Nack(_) | Confirmation::NotRequested => {
                Err(SettleError::NotStored(destination.clone()))
            }
        }
    }
}

/// The message a delivery carries.
pub fn message(delivery: &Delivery) -> Message {
    let delivery_count = delivery
        .properties
        .headers()
        .as_ref()
        .and_then(|table| table.inner().get("x-delivery-count"))
        .and_then(|count| match count {
            // Quorum queues count returns (0 on the first delivery).
            AMQPValue::LongLongInt(count) => u64::try_from(*count).ok(),
            AMQPValue::LongInt(count) => u64::try_from(*count).ok(),
            AMQPValue::LongUInt(count) => Some(u64::from(*count)),
            _ => None,
        })
        .map(|returned| returned + 1);
    Message {
        message_id: delivery
            .properties
            .message_id()
            .as_ref()
            .map(|id| id.as_str().to_owned()),
        body: delivery.data.clone(),
        delivery_count,
        redelivered: delivery.redelivered,
    }
}

/// Why a message could not be settled; it stays unacked, and the broker
/// redelivers it (to this consumer after a reconnect, or another).
#[derive(Debug)]
#[non_exhaustive]
pub enum SettleError {
    /// The channel or connection failed.
    Broker(lapin::Error),
    /// The dead-letter or parking copy was not stored: the destination
    /// routes nowhere (or its name is too long for AMQP), or the broker
    /// refused it.
    NotStored(Destination),
}

impl From<lapin::Error> for SettleError {
    fn from(error: lapin::Error) -> Self {
        SettleError::Broker(error)
    }
}

impl std::fmt::Display for SettleError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SettleError::Broker(error) => write!(formatter, "rabbitmq: {error}"),
            SettleError::NotStored(destination) => write!(
                formatter,
                "rabbitmq: the copy for exchange {:?}, routing key {:?} was not stored",
                destination.exchange, destination.routing_key
            ),
        }
    }
}

impl std::error::Error for SettleError {}
