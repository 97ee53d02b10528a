//! The NATS JetStream adapter (async-nats): a message becomes a
//! [`Message`], a [`Verdict`] becomes the consumer's acknowledgement.
//!
//! | verdict | JetStream |
//! |---|---|
//! | Ack | `+ACK`, after the outcome is recorded (or replayed) |
//! | DeadLetter | published to the dead-letter subject with the `x-idemd-*` headers (the stream's ack awaited), then `+TERM` |
//! | Park | published to the parking subject with the `x-idemd-*` headers (the stream's ack awaited), then `+TERM` |
//! | RetryLater | `-NAK` with the delay named (at most [`LONGEST_DELAY`]) |
//!
//! `+TERM` stops redelivery without calling the message done; the copy
//! (which keeps the original subject and message id in `x-idemd-subject`
//! and `x-idemd-message-id`, not in `Nats-Msg-Id`, so the dead-letter
//! stream never drops one as a duplicate) is where it waits for a person or
//! a reconciler. The subjects must be captured by a stream, or the publish
//! fails and the message stays unacknowledged (redelivered after ack-wait).
//! A consumer that dies between the copy and the `+TERM` copies it again on
//! the redelivery: the dead letters are at-least-once, the handler still at
//! most once.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::{self, AckKind};
use futures_util::StreamExt;

use super::{ConsumerSettings, Message, Reason, Verdict, headers};
use crate::client::Client;
use crate::execute::{Disposition, EffectContext};

/// The longest redelivery delay asked for (RetryLater).
pub const LONGEST_DELAY: Duration = Duration::from_secs(60);

/// The original subject of a dead-lettered or parked copy.
pub const SUBJECT_HEADER: &str = "x-idemd-subject";
/// The original `Nats-Msg-Id` of a dead-lettered or parked copy.
pub const MESSAGE_ID_HEADER: &str = "x-idemd-message-id";

/// A deduplicating consumer of JetStream messages.
#[derive(Debug, Clone)]
pub struct JetStreamConsumer {
    client: Client,
    context: jetstream::Context,
    settings: ConsumerSettings,
    dead_letter_subject: String,
    parking_subject: String,
}

/// Why a message could not be settled; it stays unacknowledged and is
/// redelivered after the consumer's ack-wait.
#[derive(Debug)]
#[non_exhaustive]
pub enum SettleError {
    /// The acknowledgement could not be sent.
    Ack(async_nats::Error),
    /// The dead-letter or parking copy was not stored.
    NotStored {
        subject: String,
        error: async_nats::Error,
    },
}

impl std::fmt::Display for SettleError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SettleError::Ack(error) => write!(formatter, "jetstream ack: {error}"),
            SettleError::NotStored { subject, error } => {
                write!(
                    formatter,
                    "jetstream: the copy to {subject:?} was not stored: {error}"
                )
            }
        }
    }
}

impl std::error::Error for SettleError {}

impl JetStreamConsumer {
    /// A consumer that publishes dead letters and parked messages through
    /// `context` to the two subjects.
    pub fn new(
        client: Client,
        context: jetstream::Context,
        settings: ConsumerSettings,
        dead_letter_subject: impl Into<String>,
        parking_subject: impl Into<String>,
    ) -> Self {
        Self {
            client,
            context,
            settings,
            dead_letter_subject: dead_letter_subject.into(),
            parking_subject: parking_subject.into(),
        }
    }

    /// Consumes a pull consumer's message stream one message at a time
    /// until it ends. Errors of the stream itself (a missed heartbeat, a
    /// reconnect) are returned; the consumer's messages stay in JetStream.
    pub async fn run<H, F>(
        &self,
        mut messages: jetstream::consumer::pull::Stream,
        handler: H,
    ) -> Result<(), RunError>
    where
        H: Fn(EffectContext, Arc<Message>) -> F,
        F: Future<Output = Disposition>,
    {
        while let Some(delivered) = messages.next().await {
            let delivered = delivered.map_err(|error| RunError::Stream(error.into()))?;
            self.handle(&delivered, &handler)
                .await
                .map_err(RunError::Settle)?;
        }
        Ok(())
    }

    /// Decides and settles one message; returns the verdict.
    pub async fn handle<H, F>(
        &self,
        delivered: &jetstream::Message,
        handler: &H,
    ) -> Result<Verdict, SettleError>
    where
        H: Fn(EffectContext, Arc<Message>) -> F,
        F: Future<Output = Disposition>,
    {
        let verdict = self.decide(delivered, handler).await;
        self.settle(delivered, &verdict).await?;
        Ok(verdict)
    }

    /// Runs the message through idemd (the handler at most once) and says
    /// what to tell JetStream, without telling it.
    pub async fn decide<H, F>(&self, delivered: &jetstream::Message, handler: &H) -> Verdict
    where
        H: Fn(EffectContext, Arc<Message>) -> F,
        F: Future<Output = Disposition>,
    {
        let message = Arc::new(message(delivered));
        self.client.consume(&self.settings, message, handler).await
    }

    /// Tells JetStream `verdict` about `delivered`.
    pub async fn settle(
        &self,
        delivered: &jetstream::Message,
        verdict: &Verdict,
    ) -> Result<(), SettleError> {
        let kind = match verdict {
            Verdict::Ack(_) => AckKind::Ack,
            Verdict::DeadLetter {
                reason,
                operation_id,
                detail,
            } => {
                let subject = &self.dead_letter_subject;
                self.copy(
                    delivered,
                    subject,
                    "dead-letter",
                    *reason,
                    operation_id,
                    detail,
                )
                .await?;
                AckKind::Term
            }
            Verdict::Park {
                reason,
                operation_id,
                detail,
            } => {
                let subject = &self.parking_subject;
                self.copy(delivered, subject, "park", *reason, operation_id, detail)
                    .await?;
                AckKind::Term
            }
            Verdict::RetryLater { after, .. } => AckKind::Nak(Some((*after).min(LONGEST_DELAY))),
        };
        // Double ack: the server confirms it, so a verdict is not reported
        // settled while its ack is lost on the way.
        delivered
            .double_ack_with(kind)
            .await
            .map_err(SettleError::Ack)
    }

    async fn copy(
        &self,
        delivered: &jetstream::Message,
        subject: &str,
        verdict: &str,
        reason: Reason,
        operation_id: &Option<String>,
        detail: &str,
    ) -> Result<(), SettleError> {
        let mut copied = HeaderMap::new();
        if let Some(original) = &delivered.headers {
            for (name, values) in original.iter() {
                if AsRef::<str>::as_ref(name).eq_ignore_ascii_case("Nats-Msg-Id") {
                    continue;
                }
                for value in values {
                    copied.append(name.clone(), value.clone());
                }
            }
            if let Some(id) = original.get(async_nats::header::NATS_MESSAGE_ID) {
                copied.insert(MESSAGE_ID_HEADER, id.as_str());
            }
        }
        copied.insert(SUBJECT_HEADER, delivered.subject.as_str());
        copied.insert(headers::VERDICT, verdict);
        copied.insert(headers::REASON, reason.as_str());
        if let Some(operation_id) = operation_id {
            copied.insert(headers::OPERATION_ID, operation_id.as_str());
        }
        copied.insert(headers::DETAIL, detail);
        let not_stored = |error: async_nats::Error| SettleError::NotStored {
            subject: subject.to_owned(),
            error,
        };
        self.context
            .publish_with_headers(subject.to_owned(), copied, delivered.payload.clone())
            .await
            .map_err(|error| not_stored(error.into()))?
            .await
            .map_err(|error| not_stored(error.into()))?;
        Ok(())
    }
}

/// Why [`JetStreamConsumer::run`] stopped.
#[derive(Debug)]
#[non_exhaustive]
pub enum RunError {
    Stream(async_nats::Error),
    Settle(SettleError),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Stream(error) => write!(formatter, "jetstream messages: {error}"),
            RunError::Settle(error) => error.fmt(formatter),
        }
    }
}

impl std::error::Error for RunError {}

/// The message JetStream delivered.
pub fn message(delivered: &jetstream::Message) -> Message {
    let delivery_count = delivered
        .info()
        .ok()
        .and_then(|info| u64::try_from(info.delivered).ok());
    Message {
        message_id: delivered
            .headers
            .as_ref()
            .and_then(|headers| headers.get(async_nats::header::NATS_MESSAGE_ID))
            .map(|id| id.as_str().to_owned()),
        body: delivered.payload.to_vec(),
        delivery_count,
        redelivered: delivery_count.is_some_and(|count| count > 1),
    }
}
