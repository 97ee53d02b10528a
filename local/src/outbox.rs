//! The transactional outbox: an entry enqueued in the application's
//! transaction ([`Local::enqueue`]) commits with its business change or not
//! at all; the [`crate::dispatch`] dispatcher delivers it later through the
//! idemd service's execute-once, with the entry's id as the idempotency
//! key, and then marks it sent.

use idemd::domain::Result;
use idemd::store::postgres::in_transaction::database_error;
use sqlx::postgres::{PgConnection, Postgres};
use sqlx::{AssertSqlSafe, Transaction};
use uuid::Uuid;

use crate::{Local, Schema};

/// What the application enqueues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEntry {
    /// The service operation the delivery runs under, e.g. "emails.send".
    pub operation: String,
    /// Where it goes: a name the dispatcher's recipient understands (the
    /// `idemd-local dispatch` binary's: an `http://` URL).
    pub recipient: String,
    /// What is delivered; also the request the service fingerprints, so
    /// that one entry id can never stand for two payloads.
    pub payload: Vec<u8>,
}

/// An entry not yet marked sent, as the dispatcher reads it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Entry {
    pub entry_id: Uuid,
    pub operation: String,
    pub recipient: String,
    pub payload: Vec<u8>,
    /// Deliveries begun before this one.
    pub deliveries: i32,
}

impl Entry {
    /// The idempotency key of its delivery: at the service, and the one the
    /// recipient is handed.
    pub fn idempotency_key(&self) -> String {
        self.entry_id.to_string()
    }
}

/// The outbox's statements, naming the schema's table (a [`Schema`] needs no
/// quoting): no `search_path` change in the application's transaction.
#[derive(Debug, Clone)]
pub(crate) struct OutboxSql {
    insert: String,
    pub(crate) unsent: String,
    pub(crate) begin_delivery: String,
    pub(crate) mark_sent: String,
    pub(crate) note_error: String,
}

impl OutboxSql {
    pub(crate) fn new(schema: &Schema) -> Self {
        let table = format!("{}.outbox", schema.as_str());
        Self {
            insert: format!(
                "INSERT INTO {table} (entry_id, operation, recipient, payload, enqueued_at) \
                 VALUES ($1, $2, $3, $4, clock_timestamp())"
            ),
            unsent: format!(
                "SELECT entry_id, operation, recipient, payload, deliveries FROM {table} \
                 WHERE sent_at IS NULL ORDER BY enqueued_at, entry_id LIMIT $1"
            ),
            begin_delivery: format!(
                "UPDATE {table} SET deliveries = deliveries + 1 \
                 WHERE entry_id = $1 AND sent_at IS NULL"
            ),
            // Guarded: a second dispatcher that delivered the same entry
            // (the service replayed it to one of them) marks nothing.
            mark_sent: format!(
                "UPDATE {table} SET sent_at = clock_timestamp(), result = $2, last_error = $3 \
                 WHERE entry_id = $1 AND sent_at IS NULL"
            ),
            note_error: format!(
                "UPDATE {table} SET last_error = $2 WHERE entry_id = $1 AND sent_at IS NULL"
            ),
        }
    }
}

impl Local {
    /// Enqueues `entry` in `transaction`: it exists once the transaction
    /// commits, and never if it rolls back. Returns its id (the idempotency
    /// key of its delivery).
    pub async fn enqueue(
        &self,
        transaction: &mut Transaction<'_, Postgres>,
        entry: NewEntry,
    ) -> Result<Uuid> {
        let connection: &mut PgConnection = transaction;
        let entry_id = Uuid::new_v4();
        sqlx::query(AssertSqlSafe(self.outbox.insert.as_str()))
            .bind(entry_id)
            .bind(entry.operation)
            .bind(entry.recipient)
            .bind(entry.payload)
            .execute(connection)
            .await
            .map_err(database_error)?;
        Ok(entry_id)
    }
}
