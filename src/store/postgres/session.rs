//! The settings every idemd session starts with: the planner's, the
//! server-side timeouts and the server's end of the keepalive, sent in the
//! startup packet.

use std::time::Duration;

use sqlx::postgres::PgConnectOptions;

use super::keepalive::DatabaseKeepalive;

/// The server-side bounds of every idemd session: a stalled lock holder, a
/// runaway statement or a session left idle inside a transaction ends with
/// an error the caller retries, instead of holding connections and locks.
/// Zero turns one off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionTimeouts {
    pub lock_timeout: Duration,
    pub statement_timeout: Duration,
    pub idle_in_transaction_timeout: Duration,
}

impl Default for SessionTimeouts {
    /// The defaults of `idemd serve`.
    fn default() -> Self {
        Self {
            lock_timeout: Duration::from_secs(2),
            statement_timeout: Duration::from_secs(5),
            idle_in_transaction_timeout: Duration::from_secs(10),
        }
    }
}

impl SessionTimeouts {
    /// None of them: for migrations, which may wait for the migration lock
    /// another replica holds and may rewrite large tables.
    pub const NONE: Self = Self {
        lock_timeout: Duration::ZERO,
        statement_timeout: Duration::ZERO,
        idle_in_transaction_timeout: Duration::ZERO,
    };
}

/// Milliseconds, as Postgres reads a bare number for its timeouts.
fn postgres_millis(duration: Duration) -> String {
    // Postgres takes at most i32::MAX ms; longer is the same as none.
    match i32::try_from(duration.as_millis()) {
        Ok(millis) => millis.to_string(),
        Err(_) => "0".to_owned(),
    }
}

/// Settings of every idemd session.
///
/// `plan_cache_mode = force_generic_plan`: idemd's statements are prepared
/// once per connection, and their plans do not depend on the values bound
/// (every lookup is by a unique key or a partial index). Left to choose,
/// Postgres keeps planning the multi-CTE one-statement paths afresh for
/// each call (0.6 ms of planning for 0.1 ms of work, measured), since their
/// generic plan looks no cheaper than a custom one.
///
/// `enable_seqscan = off`: a generic plan is made once and kept while the
/// table grows. Made on a new, never analyzed table, it scans `operations`
/// instead of using the scope or primary key index (a hash join over "ten
/// pages"), and every later call scans a table growing under it until
/// autovacuum analyzes it. Every statement idemd runs has an index to read;
/// the setting only takes the scan off the planner's table (it remains the
/// last resort where no index applies).
pub const PLANNER_SETTINGS: [(&str, &str); 2] = [
    ("plan_cache_mode", "force_generic_plan"),
    ("enable_seqscan", "off"),
];

/// And the [`SessionTimeouts`] and the server's end of the
/// [`DatabaseKeepalive`] (none when off), sent with the startup packet, so
/// they hold from the session's first statement without a round trip of
/// their own.
pub fn session_settings(
    options: PgConnectOptions,
    timeouts: &SessionTimeouts,
    keepalive: DatabaseKeepalive,
) -> PgConnectOptions {
    options.application_name("idemd").options(
        checked_settings(timeouts)
            .into_iter()
            .chain(keepalive.server_settings()),
    )
}

/// The session settings whose effect the start-up check verifies; the
/// keepalive ones read 0 on a Unix socket whatever was sent.
pub(super) fn checked_settings(timeouts: &SessionTimeouts) -> Vec<(&'static str, String)> {
    let planner = PLANNER_SETTINGS.map(|(name, value)| (name, value.to_owned()));
    planner
        .into_iter()
        .chain([
            ("lock_timeout", postgres_millis(timeouts.lock_timeout)),
            (
                "statement_timeout",
                postgres_millis(timeouts.statement_timeout),
            ),
            (
                "idle_in_transaction_session_timeout",
                postgres_millis(timeouts.idle_in_transaction_timeout),
            ),
        ])
        .collect()
}
