//! What can go wrong inside a store call, typed, and its one translation
//! into the domain's errors.
//!
//! Store code returns [`StoreError`]: a database error as sqlx reported it,
//! or a domain error raised while the store worked (a corrupt row, a refused
//! tenant name). Each dialect says which database errors are transient; the
//! translation happens once, at the edge of the store.

use tracing::warn;

use crate::domain::Error;

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
        _ => None,
    }
}

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
                ErrorClass::Conflict | ErrorClass::Unavailable => {
                    warn!(error = %error, "database unavailable");
                    Error::unavailable("the database is unavailable")
                }
                ErrorClass::Internal => Error::Internal(format!("database error: {error}")),
            },
        }
    }
}
