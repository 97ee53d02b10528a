//! The schema idemd-local's tables live in, chosen by the application, and
//! how its statements (the server's, which name tables unqualified) find
//! them inside the application's transaction.

use idemd::domain::{Error, Result};
use idemd::store::postgres::in_transaction::database_error;
use sqlx::postgres::PgConnection;

/// A schema name: lowercase ASCII letters, digits and `_`, starting with a
/// letter or `_`, at most 63 bytes (Postgres's identifier limit). Such a name
/// needs no quoting, so it is safe to place in `search_path` and in the
/// migrations' table name as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema(String);

impl Schema {
    pub fn new(name: &str) -> Result<Self> {
        let mut characters = name.chars();
        let first_ok = characters
            .next()
            .is_some_and(|first| first.is_ascii_lowercase() || first == '_');
        let rest_ok = characters.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !first_ok || !rest_ok || name.len() > 63 || name.starts_with("pg_") {
            return Err(Error::invalid(
                "schema",
                "lowercase letters, digits and _, starting with a letter or _, \
                 at most 63 bytes, not pg_*",
            ));
        }
        Ok(Self(name.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The application's `search_path` while an idemd-local call runs, to be
/// put back when it returns: the schema alone is searched (with
/// `pg_catalog`, always), so an application table that shares a name with
/// one of idemd's (`operations`) is never written by mistake, and the
/// application's own statements after the call see its own path again.
/// `set_config(…, true)` is transaction-local: a rollback undoes it too.
pub(crate) struct Entered {
    previous: String,
}

const ENTER: &str = "SELECT current_setting('search_path'), set_config('search_path', $1, true)";
const LEAVE: &str = "SELECT set_config('search_path', $1, true)";

impl Schema {
    pub(crate) async fn enter(&self, connection: &mut PgConnection) -> Result<Entered> {
        let (previous, _): (String, String) = sqlx::query_as(ENTER)
            .bind(self.as_str())
            .fetch_one(&mut *connection)
            .await
            .map_err(database_error)?;
        Ok(Entered { previous })
    }
}

impl Entered {
    /// Puts the application's path back. After a failed statement the
    /// transaction is aborted and refuses this too: the call's own error is
    /// the one to report then, so `result`'s error wins.
    pub(crate) async fn leave<T>(
        self,
        connection: &mut PgConnection,
        result: Result<T>,
    ) -> Result<T> {
        let restored = sqlx::query(LEAVE)
            .bind(&self.previous)
            .execute(&mut *connection)
            .await
            .map_err(database_error);
        match (result, restored) {
            (Ok(value), Ok(_)) => Ok(value),
            (Ok(_), Err(error)) | (Err(error), _) => Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Schema;

    #[test]
    fn only_names_that_need_no_quoting_are_schemas() {
        for good in ["idemd", "_idemd", "billing_idemd2"] {
            assert!(Schema::new(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "Idemd",
            "2idemd",
            "idemd;drop",
            "a b",
            "pg_idemd",
            "\"x\"",
        ] {
            assert!(Schema::new(bad).is_err(), "{bad}");
        }
        assert!(Schema::new(&"a".repeat(64)).is_err());
    }
}
