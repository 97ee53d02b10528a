//! The broker-neutral decisions of a deduplicating consumer, with no I/O:
//! which operation a message is (its identity), and what to tell the broker
//! once execute-once has answered. Both broker adapters settle a message by
//! the [`Verdict`] these functions return, so a rule changes here only.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, UnknownBecause};
use crate::execute::{Execution, Operation, Payload};

/// A message as the decision core sees it, whatever broker delivered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The producer's message id (AMQP `message-id`, JetStream `Nats-Msg-Id`).
    pub message_id: Option<String>,
    pub body: Vec<u8>,
    /// How many times the broker has delivered it, this delivery included,
    /// where the broker counts (JetStream); `None` where it only flags a
    /// redelivery (RabbitMQ classic queues: see `redelivered`).
    pub delivery_count: Option<u64>,
    /// Whether the broker says it delivered this message before.
    pub redelivered: bool,
}

/// Extracts a business reference from a message: `Err` names what is
/// missing, and the message is dead-lettered with it (never executed).
pub type ExtractIdentity = Arc<dyn Fn(&Message) -> Result<String, String> + Send + Sync>;

/// What identifies a message's operation, so that every delivery of it,
/// and every re-publication of the same intent, claims the same key.
#[derive(Clone)]
pub enum Identity {
    /// The producer's message id.
    MessageId,
    /// A reference the caller's function takes from the message (an order
    /// number in the body, a header): for producers that re-publish the same
    /// intent under new message ids.
    Extract(ExtractIdentity),
}

impl fmt::Debug for Identity {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Identity::MessageId => formatter.write_str("MessageId"),
            Identity::Extract(_) => formatter.write_str("Extract(..)"),
        }
    }
}

/// How a consumer turns messages into operations and settles them.
#[derive(Debug, Clone)]
pub struct ConsumerSettings {
    /// The operation every message becomes: its name, lease, budget and
    /// deadlines. Its key and payload are replaced per message (the
    /// identity, the body).
    pub template: Operation,
    pub identity: Identity,
    /// Whether the body is fingerprinted as JSON (its canonical form: key
    /// order and spacing do not count) or as bytes (as given). Either way
    /// the same identity with another body is a conflict.
    pub json_body: bool,
    /// How long a message waits before it is tried again when idemd cannot
    /// decide now (unreachable, another attempt holds the operation) and the
    /// server named no time.
    pub retry_delay: Duration,
}

impl ConsumerSettings {
    /// Messages of `operation_name`, identified by their message id,
    /// fingerprinted as bytes.
    pub fn new(operation_name: impl Into<String>) -> Self {
        let mut template = Operation::new(operation_name, "", Payload::Bytes(Vec::new()));
        // A consumer holds its message while it waits; a short wait hands a
        // busy operation back to the broker instead of blocking the queue.
        template.deadline = Duration::from_secs(5);
        Self {
            template,
            identity: Identity::MessageId,
            json_body: false,
            retry_delay: Duration::from_secs(1),
        }
    }

    pub fn identity(mut self, identity: Identity) -> Self {
        self.identity = identity;
        self
    }

    pub fn json_body(mut self, json_body: bool) -> Self {
        self.json_body = json_body;
        self
    }

    /// The operation `message` is, or the verdict that it is none.
    pub fn operation_for(&self, message: &Message) -> Result<Operation, Verdict> {
        let key = match &self.identity {
            Identity::MessageId => match message.message_id.as_deref() {
                Some(id) if !id.is_empty() => Ok(id.to_owned()),
                _ => Err("the message has no message id".to_owned()),
            },
            Identity::Extract(extract) => extract(message),
        };
        let key = key.map_err(|detail| Verdict::DeadLetter {
            reason: Reason::NoIdentity,
            operation_id: None,
            detail,
        })?;
        let payload = if self.json_body {
            match String::from_utf8(message.body.clone()) {
                Ok(document) => Payload::Json(document),
                Err(_) => {
                    return Err(Verdict::DeadLetter {
                        reason: Reason::InvalidMessage,
                        operation_id: None,
                        detail: "the body is not UTF-8 JSON".into(),
                    });
                }
            }
        } else {
            Payload::Bytes(message.body.clone())
        };
        let mut operation = self.template.clone();
        operation.key = key;
        operation.payload = payload;
        Ok(operation)
    }

    /// What to tell the broker about a message whose execution answered
    /// `executed`.
    pub fn verdict(&self, executed: Result<Execution, Error>) -> Verdict {
        verdict(executed, self.retry_delay)
    }
}

/// Why a message was dead-lettered or parked: stable UPPER_SNAKE names,
/// carried with the message (the adapters' `x-idemd-reason` header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reason {
    /// IDEMPOTENCY_KEY_REUSED: the identity was used with another body.
    KeyReused,
    /// RESULT_EXPIRED: the identity's result passed retention.
    ResultExpired,
    /// NO_MESSAGE_IDENTITY: no message id, or the extractor found none.
    NoIdentity,
    /// INVALID_MESSAGE: idemd refuses the request the message makes (a key
    /// or body out of bounds, a body that is not I-JSON).
    InvalidMessage,
    /// NEEDS_RECONCILIATION: the attempt budget is spent on unknown
    /// outcomes; only Reconcile resolves it.
    NeedsReconciliation,
    /// OUTCOME_UNKNOWN: whether the effect happened is unknown (the handler
    /// said so, timed out or panicked, or a takeover could not check).
    OutcomeUnknown,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::KeyReused => "IDEMPOTENCY_KEY_REUSED",
            Reason::ResultExpired => "RESULT_EXPIRED",
            Reason::NoIdentity => "NO_MESSAGE_IDENTITY",
            Reason::InvalidMessage => "INVALID_MESSAGE",
            Reason::NeedsReconciliation => "NEEDS_RECONCILIATION",
            Reason::OutcomeUnknown => "OUTCOME_UNKNOWN",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// What to tell the broker about one message.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Verdict {
    /// The operation has its outcome, new or replayed: acknowledge. (Boxed:
    /// the other verdicts are small.)
    Ack(Box<Execution>),
    /// The message can never be executed: move it to the dead letters with
    /// the reason, and never redeliver it.
    DeadLetter {
        reason: Reason,
        operation_id: Option<String>,
        detail: String,
    },
    /// The operation needs a reconciler: move the message to the parking
    /// place with the reason; it is not done, and not redelivered until
    /// someone moves it back.
    Park {
        reason: Reason,
        operation_id: Option<String>,
        detail: String,
    },
    /// idemd cannot decide now (unreachable, another attempt holds the
    /// operation): hand the message back for a later delivery after `after`.
    RetryLater { after: Duration, detail: String },
}

fn verdict(executed: Result<Execution, Error>, retry_delay: Duration) -> Verdict {
    let error = match executed {
        // Executed, replayed, reconciled from the provider, or stored by a
        // newer owner: the operation has its outcome (a terminal failure is
        // an outcome too, replayed to every delivery).
        Ok(execution) => return Verdict::Ack(Box::new(execution)),
        Err(error) => error,
    };
    let operation_id = error.operation_id().map(str::to_owned);
    let dead_letter = |reason| Verdict::DeadLetter {
        reason,
        operation_id: operation_id.clone(),
        detail: describe(&error),
    };
    let park = |reason| Verdict::Park {
        reason,
        operation_id: operation_id.clone(),
        detail: describe(&error),
    };
    let retry = |after: Option<Duration>| Verdict::RetryLater {
        after: after.unwrap_or(retry_delay),
        detail: describe(&error),
    };
    match &error {
        Error::Conflict { .. } => dead_letter(Reason::KeyReused),
        Error::ResultExpired { .. } => dead_letter(Reason::ResultExpired),
        Error::InvalidArgument { .. } | Error::RequestTooLarge { .. } => {
            dead_letter(Reason::InvalidMessage)
        }
        Error::NeedsReconciliation { .. } => park(Reason::NeedsReconciliation),
        Error::OutcomeUnknown { .. } => park(Reason::OutcomeUnknown),
        Error::DeadlinePassed { retry_after, .. } => retry(Some(*retry_after)),
        Error::Unavailable { retry_after, .. } | Error::ResourceExhausted { retry_after, .. } => {
            retry(*retry_after)
        }
        // Not ended, or not known to this call: nothing is acknowledged as
        // done; a later delivery claims again and replays or decides then.
        Error::Superseded { .. }
        | Error::LeaseLost { .. }
        | Error::RequestMismatch { .. }
        | Error::OperationTerminal { .. }
        | Error::FailedPrecondition { .. }
        | Error::DeadlineExceeded { .. }
        | Error::Transport { .. }
        | Error::Unauthenticated { .. }
        | Error::PermissionDenied { .. }
        | Error::NotFound { .. }
        | Error::Internal { .. }
        | Error::Unknown { .. }
        | Error::InvalidResponse(_)
        | Error::UnrecognisedOutcome => retry(None),
    }
}

/// The error as a header value: its kind and operation, never the payload.
fn describe(error: &Error) -> String {
    match error {
        Error::OutcomeUnknown {
            attempt, because, ..
        } => format!("attempt {attempt}: {}", unknown_because(*because)),
        Error::NeedsReconciliation { attempts, .. } => {
            format!("attempt budget spent on unknown outcomes ({attempts} attempts)")
        }
        Error::Conflict { .. } => "the same identity was used with another body".into(),
        other => {
            let mut text = format!("{other:?}");
            text.truncate(200);
            text
        }
    }
}

fn unknown_because(because: UnknownBecause) -> &'static str {
    match because {
        UnknownBecause::EffectUnknown => "the handler said its outcome is unknown",
        UnknownBecause::EarlierAttemptUnchecked => "an earlier attempt may have taken effect",
        UnknownBecause::LookupInconclusive => "the provider lookup could not tell",
        UnknownBecause::AttemptTimedOut => "the handler ran past the attempt deadline",
        UnknownBecause::EffectPanicked => "the handler panicked",
        UnknownBecause::NotRecordedInTime => "the outcome could not be recorded in time",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execute::{Outcome, Source};
    use crate::proto::{OperationError, PendingReason};

    fn message(id: Option<&str>, body: &str) -> Message {
        Message {
            message_id: id.map(str::to_owned),
            body: body.as_bytes().to_vec(),
            delivery_count: None,
            redelivered: false,
        }
    }

    fn execution(source: Source, outcome: Outcome) -> Execution {
        Execution {
            operation_id: "op".into(),
            outcome,
            source,
            attempt: 1,
        }
    }

    #[test]
    fn the_message_id_is_the_key_and_the_body_the_payload() {
        let settings = ConsumerSettings::new("orders.ship");
        let operation = settings
            .operation_for(&message(Some("m-1"), "{}"))
            .expect("an operation");
        assert_eq!(operation.name, "orders.ship");
        assert_eq!(operation.key, "m-1");
        assert_eq!(operation.payload, Payload::Bytes(b"{}".to_vec()));
        let json = settings.clone().json_body(true);
        let operation = json
            .operation_for(&message(Some("m-1"), "{}"))
            .expect("an operation");
        assert_eq!(operation.payload, Payload::Json("{}".into()));
    }

    #[test]
    fn a_message_without_identity_is_dead_lettered_never_executed() {
        let settings = ConsumerSettings::new("orders.ship");
        for id in [None, Some("")] {
            let verdict = settings
                .operation_for(&message(id, "{}"))
                .expect_err("no operation");
            assert!(
                matches!(
                    verdict,
                    Verdict::DeadLetter {
                        reason: Reason::NoIdentity,
                        ..
                    }
                ),
                "{verdict:?}"
            );
        }
        let by_order = settings.identity(Identity::Extract(Arc::new(|message: &Message| {
            std::str::from_utf8(&message.body)
                .ok()
                .and_then(|body| body.strip_prefix("order:"))
                .map(str::to_owned)
                .ok_or_else(|| "no order number".to_owned())
        })));
        let operation = by_order
            .operation_for(&message(None, "order:42"))
            .expect("an operation");
        assert_eq!(operation.key, "42");
        let verdict = by_order
            .operation_for(&message(Some("m-1"), "other"))
            .expect_err("no operation");
        assert_eq!(
            verdict,
            Verdict::DeadLetter {
                reason: Reason::NoIdentity,
                operation_id: None,
                detail: "no order number".into()
            }
        );
    }

    #[test]
    fn a_json_consumer_dead_letters_a_body_that_is_not_utf8() {
        let settings = ConsumerSettings::new("orders.ship").json_body(true);
        let mut bad = message(Some("m-1"), "");
        bad.body = vec![0xff, 0xfe];
        let verdict = settings.operation_for(&bad).expect_err("no operation");
        assert!(matches!(
            verdict,
            Verdict::DeadLetter {
                reason: Reason::InvalidMessage,
                ..
            }
        ));
    }

    /// Every answer of execute-once, and what the broker is told: the table
    /// both adapters follow.
    #[test]
    fn every_answer_has_one_verdict() {
        let settings = ConsumerSettings::new("orders.ship");
        let succeeded = Outcome::Succeeded(Default::default());
        let failed = Outcome::Failed(OperationError::default());
        let unknown = |because| Error::OutcomeUnknown {
            operation_id: "op".into(),
            attempt: 2,
            because,
        };
        let table: Vec<(Result<Execution, Error>, &str)> = vec![
            (Ok(execution(Source::Executed, succeeded.clone())), "ack"),
            (Ok(execution(Source::Replayed, succeeded.clone())), "ack"),
            (Ok(execution(Source::Reconciled, succeeded.clone())), "ack"),
            (Ok(execution(Source::Superseded, succeeded)), "ack"),
            (Ok(execution(Source::Executed, failed)), "ack"),
            (
                Err(Error::Conflict {
                    operation_id: "op".into(),
                }),
                "dead-letter IDEMPOTENCY_KEY_REUSED",
            ),
            (
                Err(Error::ResultExpired {
                    operation_id: "op".into(),
                }),
                "dead-letter RESULT_EXPIRED",
            ),
            (
                Err(Error::InvalidArgument {
                    field_violations: Vec::new(),
                    message: String::new(),
                }),
                "dead-letter INVALID_MESSAGE",
            ),
            (
                Err(Error::RequestTooLarge {
                    message: String::new(),
                }),
                "dead-letter INVALID_MESSAGE",
            ),
            (
                Err(Error::NeedsReconciliation {
                    operation_id: "op".into(),
                    fence: 3,
                    attempts: 3,
                }),
                "park NEEDS_RECONCILIATION",
            ),
            (
                Err(unknown(UnknownBecause::EffectUnknown)),
                "park OUTCOME_UNKNOWN",
            ),
            (
                Err(unknown(UnknownBecause::EarlierAttemptUnchecked)),
                "park OUTCOME_UNKNOWN",
            ),
            (
                Err(unknown(UnknownBecause::EffectPanicked)),
                "park OUTCOME_UNKNOWN",
            ),
            (
                Err(Error::DeadlinePassed {
                    operation_id: None,
                    retry_after: Duration::from_millis(700),
                    reason: PendingReason::InProgress,
                }),
                "retry 700ms",
            ),
            (
                Err(Error::Unavailable {
                    retry_after: None,
                    message: String::new(),
                }),
                "retry 1s",
            ),
            (
                Err(Error::Transport {
                    code: tonic::Code::Unavailable,
                    message: String::new(),
                }),
                "retry 1s",
            ),
            (
                Err(Error::Superseded {
                    operation_id: "op".into(),
                    state: crate::proto::OperationState::InProgress,
                    attempt: 2,
                }),
                "retry 1s",
            ),
        ];
        for (executed, expected) in table {
            let shown = match settings.verdict(executed.clone()) {
                Verdict::Ack(_) => "ack".to_owned(),
                Verdict::DeadLetter {
                    reason,
                    operation_id,
                    ..
                } => {
                    assert_eq!(
                        operation_id.as_deref(),
                        executed.as_ref().err().and_then(Error::operation_id)
                    );
                    format!("dead-letter {reason}")
                }
                Verdict::Park {
                    reason,
                    operation_id,
                    ..
                } => {
                    assert_eq!(operation_id.as_deref(), Some("op"));
                    format!("park {reason}")
                }
                Verdict::RetryLater { after, .. } => format!("retry {after:?}"),
            };
            assert_eq!(shown, expected, "{executed:?}");
        }
    }
}
