//! Deduplicating queue consumers: a message is claimed by its identity (the
//! producer's message id, or a business reference the caller extracts),
//! its handler runs through [`Client::execute_once`], and only then is the
//! message acknowledged. A redelivery replays the stored outcome; the same
//! identity with another body is dead-lettered, never executed; an operation
//! whose outcome is unknown is parked, never acknowledged as done.
//!
//! [`decision`] decides, with no I/O, for every broker; [`Client::consume`]
//! runs one message through idemd and returns its [`Verdict`]. The broker
//! adapters ([`rabbitmq`], [`jetstream`], behind the features of the same
//! names) only translate a delivery into a [`Message`] and a verdict into
//! the broker's ack, nack or republish.

mod decision;
#[cfg(feature = "jetstream")]
pub mod jetstream;
#[cfg(feature = "rabbitmq")]
pub mod rabbitmq;

use std::future::Future;
use std::sync::Arc;

pub use self::decision::{ConsumerSettings, ExtractIdentity, Identity, Message, Reason, Verdict};
use crate::client::Client;
use crate::execute::{Disposition, EffectContext};

/// The header names the adapters give a dead-lettered or parked message.
pub mod headers {
    /// `dead-letter` or `park`.
    pub const VERDICT: &str = "x-idemd-verdict";
    /// The [`Reason`](super::Reason), e.g. `IDEMPOTENCY_KEY_REUSED`.
    pub const REASON: &str = "x-idemd-reason";
    /// The idemd operation the message is, where known.
    pub const OPERATION_ID: &str = "x-idemd-operation-id";
    /// A short description (the error's kind; never the payload).
    pub const DETAIL: &str = "x-idemd-detail";
}

impl Client {
    /// Runs `handler` at most once for `message`'s operation, as
    /// [`ConsumerSettings`] says which one it is, and returns what to tell
    /// the broker. The handler is given the attempt's context and the
    /// message; what it returns is recorded as for
    /// [`Client::execute_once`].
    pub async fn consume<H, F>(
        &self,
        settings: &ConsumerSettings,
        message: Arc<Message>,
        handler: &H,
    ) -> Verdict
    where
        H: Fn(EffectContext, Arc<Message>) -> F,
        F: Future<Output = Disposition>,
    {
        let operation = match settings.operation_for(&message) {
            Ok(operation) => operation,
            Err(verdict) => return verdict,
        };
        let executed = self
            .execute_once(&operation, |context| handler(context, message.clone()))
            .await;
        settings.verdict(executed)
    }
}
