//! The text of the statements on holds, and the row they read.

use chrono::{DateTime, Utc};
use sqlx::FromRow;

/// Holds in all, at most: each replica reads every one every refresh.
pub const MOST_HOLDS: i64 = 1000;

/// A new hold, unless the name (or the tenant) is held already or the table
/// is full: a second Hold keeps the first one's reason and time.
pub(super) const INSERT_HOLD: &str = "INSERT INTO holds \
     (tenant_id, operation, reason, retry_after_ms, held_at, held_by) \
     SELECT $1, $2, $3, $4, $5, $6 WHERE (SELECT count(*) FROM holds) < $7 \
     ON CONFLICT (tenant_id, operation) DO NOTHING";

pub(super) const DELETE_HOLD: &str = "DELETE FROM holds WHERE tenant_id = $1 AND operation = $2";

/// The columns a hold is read with (its tenant's name joined in).
macro_rules! hold_select {
    ($rest:literal) => {
        concat!(
            "SELECT holds.tenant_id, tenants.name AS tenant, holds.operation, holds.reason, \
             holds.retry_after_ms, holds.held_at, holds.held_by \
             FROM holds JOIN tenants ON tenants.tenant_id = holds.tenant_id",
            $rest
        )
    };
}

pub(super) const HOLD: &str = hold_select!(" WHERE holds.tenant_id = $1 AND holds.operation = $2");

pub(super) const LIST_HOLDS: &str =
    hold_select!(" ORDER BY holds.tenant_id, holds.operation LIMIT $1");

/// A hold as stored, with its tenant's name.
#[derive(Debug, FromRow)]
pub(crate) struct HoldRow {
    pub(crate) tenant_id: i64,
    pub(crate) tenant: String,
    pub(crate) operation: String,
    pub(crate) reason: String,
    pub(crate) retry_after_ms: i64,
    pub(crate) held_at: DateTime<Utc>,
    pub(crate) held_by: String,
}
