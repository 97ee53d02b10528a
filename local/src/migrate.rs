//! The server's migrations (`migrations/postgres`, the very files idemd
//! runs) and idemd-local's own (the outbox), applied into the application's
//! chosen schema.
//!
//! The migrations name their tables unqualified, so they run on a
//! connection of their own whose `search_path` is the schema; sqlx's record
//! of what ran is `<schema>._sqlx_migrations`, apart from any other schema's
//! (the application's own migrations included).

use idemd::domain::Result;
use idemd::store::postgres::in_transaction::database_error;
use sqlx::migrate::Migrator;
use sqlx::postgres::PgPool;

use crate::Schema;

/// idemd-local's own tables (the outbox). Their versions follow the
/// server's; sqlx applies whichever of the two sets has not run yet.
static LOCAL_MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// Creates the schema when missing and brings it to the server's schema
/// plus the outbox. Safe to run from several processes at once: sqlx takes
/// an advisory lock for the run.
pub async fn migrate(pool: &PgPool, schema: &Schema) -> Result<()> {
    let mut migrator = Migrator::with_migrations(
        idemd::store::postgres::MIGRATOR
            .iter()
            .chain(LOCAL_MIGRATOR.iter())
            .cloned()
            .collect(),
    );
    migrator.dangerous_set_table_name(format!("{}._sqlx_migrations", schema.as_str()));
    // A connection of its own, closed afterwards: its search_path is set
    // for the whole session, which no pooled connection should keep.
    let mut connection = pool.acquire().await.map_err(database_error)?.detach();
    for statement in [
        format!("CREATE SCHEMA IF NOT EXISTS {}", schema.as_str()),
        format!("SET search_path TO {}", schema.as_str()),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(statement))
            .execute(&mut connection)
            .await
            .map_err(database_error)?;
    }
    migrator
        .run(&mut connection)
        .await
        .map_err(|error| idemd::domain::Error::Internal(format!("migrating: {error}")))?;
    Ok(())
}
