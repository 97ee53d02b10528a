//! What can go wrong inside a store call, typed, and its one translation
//! into the domain's errors.
//!
//! Store code returns [`StoreError`]: a database error as sqlx reported it,
//! or a domain error raised while the store worked (a corrupt row, a refused
//! tenant name). Each dialect says which database errors are transient; the
//! translation happens once, at the edge of the store.

use tracing::warn;

use crate::domain::Error;
use crate::telemetry::LogLimiter;

#[derive(Debug, thiserror::Error)]
pub(crate) enum StoreError {
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    #[error(transparent)]
    Domain(#[from] Error),
}

pub(crate) type StoreResult<T> = std::result::Result<T, StoreError>;

/// How a dialect reads a database error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorClass {
    /// A serialization failure or deadlock: the transaction may simply be
    /// run again.
    Conflict,
    /// Not now: the database is unreachable, busy, shutting down, or the pool
    /// is exhausted. The caller may retry.
    Unavailable,
    /// Anything else: a bug or a broken database.
    Internal,
}

/// The database errors every dialect reads alike: the pool's and the
/// connection's own failures.
pub(crate) fn connection_class(error: &sqlx::Error) -> Option<ErrorClass> {
    match error {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::WorkerCrashed => Some(ErrorClass::Unavailable),
        // The connection was closed before the server said a word: sqlx reads
        // no byte (EOF leaves its buffer at 0x00) and calls it a protocol
        // error. A TCP proxy or pooler in front of a database that is down or
        // restarting does exactly this; it is as transient as a refused
        // connection. Found by the fault campaign (faults/), where it surfaced
        // as INTERNAL and the clients gave up instead of retrying.
        sqlx::Error::Protocol(message)
            if message.starts_with("unexpected response from SSLRequest: 0x00") =>
        {
            Some(ErrorClass::Unavailable)
        }
        _ => None,
    }
}

/// How often an outage's errors are logged, as refusals are.
pub(super) const OUTAGE_LOG_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

static UNAVAILABLE_LOG: std::sync::LazyLock<LogLimiter> =
    std::sync::LazyLock::new(|| LogLimiter::new(OUTAGE_LOG_INTERVAL));

impl StoreError {
    pub(crate) fn class(&self, classify: fn(&sqlx::Error) -> ErrorClass) -> ErrorClass {
        match self {
            StoreError::Database(error) => classify(error),
            StoreError::Domain(_) => ErrorClass::Internal,
        }
    }

    /// The domain error a caller gets. Transient database conditions are
    /// UNAVAILABLE (retry), never INTERNAL.
    pub(crate) fn into_domain(self, classify: fn(&sqlx::Error) -> ErrorClass) -> Error {
        match self {
            StoreError::Domain(error) => error,
            StoreError::Database(error) => match classify(&error) {
                ErrorClass::Conflict | ErrorClass::Unavailable => unavailable_database(&error),
                ErrorClass::Internal => Error::Internal(format!("database error: {error}")),
            },
        }
    }
}

/// A database that cannot answer now: UNAVAILABLE (retry). Every call sees
/// it during an outage, so it is logged once a second, counting the others.
pub(crate) fn unavailable_database(error: &dyn std::fmt::Display) -> Error {
    if let Some(suppressed) = UNAVAILABLE_LOG.admit(std::time::Instant::now()) {
        warn!(error = %error, suppressed, "database unavailable");
    }
    Error::unavailable("the database is unavailable")
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::Connection;

    /// A database endpoint that takes the SSLRequest and closes without an
    /// answer (a proxy in front of a database that is shutting down, or
    /// Postgres closing as it goes down): what sqlx makes of it is transient.
    #[tokio::test]
    async fn a_connection_closed_before_the_ssl_answer_is_unavailable() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut connection, _)) = listener.accept().await {
                use tokio::io::AsyncReadExt;
                // Read the whole SSLRequest (8 bytes), so that closing sends
                // a FIN (end of stream), not a reset.
                let mut request = [0u8; 8];
                let _ = connection.read_exact(&mut request).await;
                drop(connection);
            }
        });
        let error = sqlx::PgConnection::connect(&format!("postgres://postgres@{addr}/postgres"))
            .await
            .expect_err("nothing answers");
        assert_eq!(
            connection_class(&error),
            Some(ErrorClass::Unavailable),
            "{error:?}"
        );
    }
}
