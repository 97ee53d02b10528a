//! idemd's state machine inside the application's own Postgres transaction.
//!
//! When the effect is a row in the application's own database, the
//! strongest boundary keeps the idempotency record and the business change
//! in one transaction: [`Local::claim`], the business statements and
//! [`Local::complete`] run in the transaction the application passes in, and
//! commit together. A failure before the commit leaves neither; a retry
//! after it replays the stored result. The decisions, fingerprints, bounds,
//! error types and SQL are the service's own (`idemd::domain`, the crate
//! `idemd-domain`; `idemd::store::postgres::in_transaction`), and the tables
//! are the service's migrations, in a schema of the application's choosing.
//!
//! The transactional outbox ([`outbox`]) rides on the same transactions: an
//! entry enqueued with the business change commits with it, and a
//! dispatcher delivers it through the idemd service's execute-once.
//!
//! See README.md for the boundary: what commits together, what a crash
//! leaves.

pub mod dispatch;
pub mod http_recipient;
mod migrate;
mod operations;
pub mod outbox;
mod schema;

pub use idemd::domain;
pub use migrate::migrate;
pub use operations::Claimed;
pub use schema::Schema;

use idemd::domain::{HistoryCap, Limits};

/// idemd-local's settings: the schema its tables are in, and the bounds and
/// defaults of every request (the service's own, unless changed).
#[derive(Debug, Clone)]
pub struct Local {
    schema: Schema,
    limits: Limits,
    history_cap: HistoryCap,
    outbox: outbox::OutboxSql,
}

impl Local {
    /// The service's default limits and history cap.
    pub fn new(schema: Schema) -> Self {
        Self {
            limits: Limits::default(),
            history_cap: HistoryCap::default(),
            outbox: outbox::OutboxSql::new(&schema),
            schema,
        }
    }

    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// [`migrate`] into this schema.
    pub async fn migrate(&self, pool: &sqlx::PgPool) -> domain::Result<()> {
        migrate::migrate(pool, &self.schema).await
    }
}
