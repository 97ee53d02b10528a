//! The deduplicating consumers against real brokers (RabbitMQ and NATS
//! JetStream, started by tests/brokers/) and the real `idemd` binary.
//! Every test makes the broker redeliver, counts the redeliveries it saw
//! (RabbitMQ's redelivered flag, JetStream's delivery count) and counts
//! effects at the handler: exactly one per message however many
//! deliveries.
//!
//! `cargo test -p idemd-client --features rabbitmq,jetstream --test consumers`

mod brokers;
mod support;

#[path = "consumers/jetstream.rs"]
mod jetstream;
#[path = "consumers/rabbitmq.rs"]
mod rabbitmq;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use idemd_client::consumer::Message;
use idemd_client::{Disposition, EffectContext};

/// Effects per message identity, and every delivery seen.
#[derive(Debug, Clone, Default)]
pub struct Effects(Arc<Mutex<HashMap<String, usize>>>);

impl Effects {
    /// The handler every test consumes with: one effect per call, keyed by
    /// what the message says it is (its body's first line).
    pub fn handler(
        &self,
    ) -> impl Fn(EffectContext, Arc<Message>) -> std::future::Ready<Disposition> + use<> {
        let effects = self.0.clone();
        move |_context, message| {
            let name = String::from_utf8_lossy(&message.body).into_owned();
            let mut effects = effects.lock().expect("effects lock");
            *effects.entry(name.clone()).or_default() += 1;
            std::future::ready(Disposition::Success(support::result(
                format!("{{\"shipped\":{name:?}}}").into_bytes(),
            )))
        }
    }

    pub fn of(&self, body: &str) -> usize {
        self.0
            .lock()
            .expect("effects lock")
            .get(body)
            .copied()
            .unwrap_or(0)
    }

    pub fn total(&self) -> usize {
        self.0.lock().expect("effects lock").values().sum()
    }
}

pub fn unique(prefix: &str) -> String {
    let mut bytes = [0u8; 4];
    getrandom::fill(&mut bytes).expect("randomness");
    let suffix: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("{prefix}-{suffix}")
}
