//! The outbox's dispatcher: delivers each unsent entry through the idemd
//! service's execute-once (the Rust client, `idemd-client`) with the
//! entry's id as the idempotency key, hands the recipient that key, and
//! only then marks the entry sent.
//!
//! What a crash leaves: a dispatcher that dies after the service recorded a
//! delivery but before its mark delivers the entry again on its next pass;
//! the service replays the stored result and the recipient is not called.
//! One that dies during the recipient's call leaves the operation in doubt
//! at the service: the next delivery, once the lease has run out, takes it
//! over and calls the recipient again with the same key
//! ([`Operation::provider_deduplicates`]), so a recipient must apply each key
//! once (every provider that takes an idempotency key does).

use std::future::Future;
use std::time::Duration;

use idemd::domain::Error;
use idemd::store::postgres::in_transaction::database_error;
use idemd_client::{
    Client, Disposition, Execution, Operation, OperationError, OperationResult, Outcome, Payload,
    Source,
};
use sqlx::AssertSqlSafe;
use sqlx::postgres::PgPool;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::Local;
use crate::outbox::{Entry, OutboxSql};

/// What a recipient did with one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivered {
    /// Applied (or applied before, under the same key): its answer.
    Accepted(Vec<u8>),
    /// Refused for good: stored, replayed, the entry marked sent with it.
    Refused { code: String, message: String },
    /// Certainly not applied (nothing reached it): delivered again later.
    NotDelivered { message: String },
    /// May have been applied (the answer was lost): the next delivery takes
    /// it over and calls again with the same key.
    Unknown { message: String },
}

/// Where entries go. `idempotency_key` is the entry's id: the recipient must
/// apply each key at most once (see the module's docs).
pub trait Recipient: Send + Sync {
    fn deliver(
        &self,
        entry: &Entry,
        idempotency_key: &str,
    ) -> impl Future<Output = Delivered> + Send;
}

/// How a dispatcher paces itself.
#[derive(Debug, Clone)]
pub struct DispatchSettings {
    /// Entries read per pass.
    pub batch: i64,
    /// The pause after a pass that found nothing to send.
    pub idle: Duration,
    /// The lease each delivery asks the service for: how soon a delivery cut
    /// short by a crash can be taken over.
    pub lease: Duration,
    /// For fault tests only: sleep this long between the service's record
    /// of a delivery and the entry's mark (the window a crash is harmless in).
    pub pause_before_mark: Option<Duration>,
}

impl Default for DispatchSettings {
    fn default() -> Self {
        Self {
            batch: 100,
            idle: Duration::from_millis(500),
            lease: Duration::from_secs(10),
            pause_before_mark: None,
        }
    }
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pass {
    /// Entries marked sent by this pass.
    pub sent: usize,
    /// Of those, how many the service replayed (delivered before; the
    /// recipient was not called again).
    pub replayed: usize,
    /// Entries left unsent (the error is in their `last_error`).
    pub left: usize,
}

pub struct Dispatcher<R> {
    pool: PgPool,
    sql: OutboxSql,
    client: Client,
    recipient: R,
    settings: DispatchSettings,
}

/// A dispatcher running as a tokio task.
pub struct DispatcherTask {
    stop: watch::Sender<bool>,
    handle: JoinHandle<()>,
}

impl DispatcherTask {
    /// Stops after the delivery in flight, if any, and waits for it.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.handle.await;
    }
}

impl<R: Recipient + 'static> Dispatcher<R> {
    pub fn new(pool: PgPool, local: &Local, client: Client, recipient: R) -> Self {
        Self {
            pool,
            sql: OutboxSql::new(local.schema()),
            client,
            recipient,
            settings: DispatchSettings::default(),
        }
    }

    pub fn with_settings(mut self, settings: DispatchSettings) -> Self {
        self.settings = settings;
        self
    }

    /// Runs passes on a tokio task of its own until stopped.
    pub fn spawn(self) -> DispatcherTask {
        let (stop, mut stopped) = watch::channel(false);
        let handle = tokio::spawn(async move {
            self.run_until(async move {
                let _ = stopped.wait_for(|stop| *stop).await;
            })
            .await;
        });
        DispatcherTask { stop, handle }
    }

    /// Runs passes until `stop` completes; a pass that fails (the database
    /// unreachable) is followed by the idle pause and another.
    pub async fn run_until(&self, stop: impl Future<Output = ()>) {
        tokio::pin!(stop);
        loop {
            let pass = tokio::select! {
                () = &mut stop => return,
                pass = self.pass() => pass,
            };
            let busy = matches!(pass, Ok(Pass { sent, .. }) if sent > 0);
            if !busy {
                tokio::select! {
                    () = &mut stop => return,
                    () = tokio::time::sleep(self.settings.idle) => {}
                }
            }
        }
    }

    /// Delivers the oldest unsent entries, one after another.
    pub async fn pass(&self) -> Result<Pass, Error> {
        let entries: Vec<Entry> = sqlx::query_as(AssertSqlSafe(self.sql.unsent.as_str()))
            .bind(self.settings.batch)
            .fetch_all(&self.pool)
            .await
            .map_err(database_error)?;
        let mut pass = Pass::default();
        for entry in entries {
            match self.deliver(&entry).await? {
                Some(Source::Replayed) => {
                    pass.sent += 1;
                    pass.replayed += 1;
                }
                Some(_) => pass.sent += 1,
                None => pass.left += 1,
            }
        }
        Ok(pass)
    }

    /// One entry: counted, executed once at the service, marked. `None`:
    /// left unsent (marked by another dispatcher, or not delivered yet).
    async fn deliver(&self, entry: &Entry) -> Result<Option<Source>, Error> {
        let begun = sqlx::query(AssertSqlSafe(self.sql.begin_delivery.as_str()))
            .bind(entry.entry_id)
            .execute(&self.pool)
            .await
            .map_err(database_error)?;
        if begun.rows_affected() == 0 {
            return Ok(None);
        }
        let key = entry.idempotency_key();
        let mut operation = Operation::new(
            entry.operation.clone(),
            key.clone(),
            Payload::Bytes(entry.payload.clone()),
        );
        operation.lease = self.settings.lease;
        // The recipient gets the key and applies it once: a takeover of a
        // delivery cut short may call it again.
        operation.provider_deduplicates = true;
        let executed = self
            .client
            .execute_once(&operation, |_attempt| async {
                disposition(self.recipient.deliver(entry, &key).await)
            })
            .await;
        let execution = match executed {
            Ok(execution) => execution,
            Err(error) => {
                sqlx::query(AssertSqlSafe(self.sql.note_error.as_str()))
                    .bind(entry.entry_id)
                    .bind(error.to_string())
                    .execute(&self.pool)
                    .await
                    .map_err(database_error)?;
                return Ok(None);
            }
        };
        if let Some(pause) = self.settings.pause_before_mark {
            tokio::time::sleep(pause).await;
        }
        let (result, error) = stored(&execution);
        sqlx::query(AssertSqlSafe(self.sql.mark_sent.as_str()))
            .bind(entry.entry_id)
            .bind(result)
            .bind(error)
            .execute(&self.pool)
            .await
            .map_err(database_error)?;
        Ok(Some(execution.source))
    }
}

fn disposition(delivered: Delivered) -> Disposition {
    let error = |code: String, message: String| OperationError {
        code,
        message,
        ..OperationError::default()
    };
    match delivered {
        Delivered::Accepted(body) => Disposition::Success(OperationResult {
            body,
            ..OperationResult::default()
        }),
        Delivered::Refused { code, message } => Disposition::Terminal(error(code, message)),
        Delivered::NotDelivered { message } => Disposition::Retryable(
            error("NOT_DELIVERED".into(), message),
            Duration::from_secs(1),
        ),
        Delivered::Unknown { message } => Disposition::Unknown(error("UNKNOWN".into(), message)),
    }
}

/// The entry's columns for the stored outcome: the answer, or the error.
fn stored(execution: &Execution) -> (Option<Vec<u8>>, Option<String>) {
    match &execution.outcome {
        Outcome::Succeeded(result) => (Some(result.body.clone()), None),
        Outcome::Failed(error) => (None, Some(format!("{}: {}", error.code, error.message))),
    }
}
