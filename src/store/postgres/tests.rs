//! What Postgres does its own way: sessions, error classes, plans.

use sqlx::{PgPool, Row};

use super::*;
use crate::store::credentials::AUTHENTICATE;
use crate::store::sql::{COUNT_OPERATIONS, SELECT_UNRESOLVED};

/// A call cancelled while its BEGIN is on the wire must not leave a pooled
/// connection inside that transaction (sqlx 0.9.0 does with `pool.begin()`,
/// transact-rs/sqlx#4393): the next caller's autocommit statements would
/// run uncommitted inside it. Read and write transactions begin on a
/// [`Held`] connection, which a call dropped mid-BEGIN (or right after)
/// abandons instead of handing on. Cancelled at every point from before the
/// first poll to after the round trip.
#[sqlx::test(migrator = "MIGRATOR")]
async fn a_begin_cancelled_mid_flight_leaves_no_transaction_behind(pool: PgPool) {
    let one = PgPoolOptions::new()
        .max_connections(1)
        .connect_with(pool.connect_options().as_ref().clone())
        .await
        .expect("a pool of one");
    let connections = Connections::new(one.clone());
    for micros in (0..2_000).step_by(50) {
        let cancelled = tokio::time::timeout(
            Duration::from_micros(micros),
            HeldTransaction::begin(
                &connections,
                "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY",
            ),
        )
        .await;
        drop(cancelled);
        // Whatever connection the pool hands out next is outside any
        // transaction (a simple query: its statement time is its
        // transaction's start unless an earlier BEGIN opened one).
        let mut next = one.acquire().await.expect("a connection");
        let idle: bool = sqlx::raw_sql("SELECT statement_timestamp() = transaction_timestamp()")
            .fetch_one(&mut *next)
            .await
            .expect("a reading")
            .get(0);
        assert!(
            idle,
            "left inside a transaction by a BEGIN cancelled after {micros} µs"
        );
    }
}

#[test]
fn commit_settings_that_can_lose_acknowledged_results_are_named() {
    for (commit, standbys, risk) in [
        ("off", "", Some(DurabilityRisk::Crash)),
        ("off", "replica1", Some(DurabilityRisk::Crash)),
        ("local", "replica1", Some(DurabilityRisk::Failover)),
        (
            "remote_write",
            "ANY 1 (a, b)",
            Some(DurabilityRisk::Failover),
        ),
        ("on", "", Some(DurabilityRisk::Failover)),
        ("remote_apply", " ", Some(DurabilityRisk::Failover)),
        ("on", "replica1", None),
        ("remote_apply", "FIRST 1 (a, b)", None),
    ] {
        assert_eq!(
            durability_risk(commit, standbys),
            risk,
            "{commit} / {standbys:?}"
        );
    }
}

/// Every transient condition of a Postgres server answers UNAVAILABLE
/// (retry), never INTERNAL; only what no retry can mend is INTERNAL.
#[test]
fn transient_sqlstates_are_unavailable_and_the_rest_internal() {
    use crate::store::error::StoreError;
    for (sqlstate, class) in [
        ("55P03", ErrorClass::Unavailable), // lock_timeout
        ("57014", ErrorClass::Unavailable), // statement_timeout, cancel
        ("25006", ErrorClass::Unavailable), // read-only: a demoted primary
        ("25P03", ErrorClass::Unavailable), // idle_in_transaction_session_timeout
        ("57P01", ErrorClass::Unavailable), // admin shutdown
        ("57P02", ErrorClass::Unavailable), // crash shutdown
        ("57P03", ErrorClass::Unavailable), // cannot connect now
        ("53300", ErrorClass::Unavailable), // too many connections
        ("53100", ErrorClass::Unavailable), // disk full
        ("08006", ErrorClass::Unavailable), // connection failure
        ("08001", ErrorClass::Unavailable), // cannot establish a connection
        ("08P01", ErrorClass::Unavailable), // protocol violation
        ("40001", ErrorClass::Conflict),    // serialization failure
        ("40P01", ErrorClass::Conflict),    // deadlock
        ("23505", ErrorClass::Conflict),    // a history sequence raced
        ("42P01", ErrorClass::Internal),    // undefined table: a bug
        ("22P02", ErrorClass::Internal),    // invalid text representation
        ("23502", ErrorClass::Internal),    // not null violation
        ("XX000", ErrorClass::Internal),    // internal error
    ] {
        assert_eq!(PostgresStore::classify_code(sqlstate), class, "{sqlstate}");
    }
    // A conflict whose attempts are spent is UNAVAILABLE too, as is the
    // pool's own failure; neither is INTERNAL.
    for error in [
        sqlx::Error::PoolTimedOut,
        sqlx::Error::PoolClosed,
        sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset)),
    ] {
        let translated = PostgresStore::translate(StoreError::Database(error));
        assert!(
            matches!(translated, Error::Unavailable { .. }),
            "{translated:?}"
        );
    }
}

/// The statements that run over many rows (the sweeper's, the gauges',
/// ListUnresolved) must find their rows through an index: with sequential
/// scans turned off, a plan that still scans `operations` could not.
#[sqlx::test(migrator = "MIGRATOR")]
async fn background_statements_read_indexes_not_the_whole_table(pool: PgPool) {
    let mut connection = pool.acquire().await.expect("a connection");
    sqlx::query("SET enable_seqscan = off")
        .execute(&mut *connection)
        .await
        .expect("set");
    let now = "now()";
    let batch = "100";
    for (name, sql, parameters) in [
        (
            "tombstones due",
            PostgresStore::DUE_FOR_TOMBSTONE,
            &[now, batch][..],
        ),
        (
            "deadlines due",
            PostgresStore::DUE_FOR_DEADLINE,
            &[now, batch],
        ),
        (
            "old tombstones",
            PostgresStore::DELETE_EXPIRED_TOMBSTONES,
            &[now, batch],
        ),
        ("gauges", COUNT_OPERATIONS, &[now]),
        (
            "unresolved",
            SELECT_UNRESOLVED,
            &[
                "1",
                now,
                "NULL::text",
                "NULL::timestamptz",
                "NULL::uuid",
                batch,
            ],
        ),
        ("tokens", AUTHENTICATE, &["'\\x00'::bytea", now]),
    ] {
        // Highest first: `$1` must not eat the start of `$10`.
        let explained = parameters
            .iter()
            .enumerate()
            .rev()
            .fold(sql.to_owned(), |sql, (index, value)| {
                sql.replace(&format!("${}", index + 1), value)
            });
        let plan: Vec<String> =
            sqlx::query_scalar(sqlx::AssertSqlSafe(format!("EXPLAIN {explained}")))
                .fetch_all(&mut *connection)
                .await
                .unwrap_or_else(|error| panic!("{name}: {error}"));
        assert!(
            !plan
                .iter()
                .any(|line| line.contains("Seq Scan on operations")),
            "{name} scans the table: {plan:#?}"
        );
    }
}

/// ListOperations' statements, planned as the server plans them (generic
/// plans, sequential scans off) on a table with statistics (20 000 rows of
/// 20 tenants, analyzed), read `operations` through the index each filter
/// shape was given in `20261202140000_operation_listing.sql`, never the
/// whole table: a tenant's page by (tenant_id, created_at), a key by
/// (tenant_id, idempotency_key), an admin's page of every tenant by
/// created_at. (On a table never analyzed, a generic plan of `key:` may read
/// the tenant's rows by created_at instead, until autovacuum analyzes it:
/// support's searches are rare, unlike the hot statements, whose plans are
/// held to unique indexes even then in `batched.rs`.)
#[sqlx::test(migrator = "MIGRATOR")]
async fn listing_statements_read_the_index_of_their_filter(pool: PgPool) {
    use crate::domain::{ListOrder, OperationFilter, OperationsQuery, TenantId, TenantSelection};
    use crate::store::statements::listing::{Piece, operations_statement};

    let mut connection = pool.acquire().await.expect("a connection");
    for (name, value) in super::session::PLANNER_SETTINGS {
        sqlx::query(sqlx::AssertSqlSafe(format!("SET {name} = {value}")))
            .execute(&mut *connection)
            .await
            .expect("set");
    }
    sqlx::query("INSERT INTO tenants (name) SELECT 'tenant-' || g FROM generate_series(1, 20) g")
        .execute(&mut *connection)
        .await
        .expect("tenants");
    sqlx::query(
        "INSERT INTO operations (operation_id, tenant_id, operation, idempotency_key, \
         fingerprint, state, fence, attempt, max_attempts, lease_ms, max_attempt_duration_ms, \
         retention_ms, outcome_state, created_at, updated_at, taken_over_fence) \
         SELECT gen_random_uuid(), 1 + g % 20, 'payments.charge', 'order-' || g, \
           sha256(g::text::bytea), 'succeeded', g, 1 + (g % 11 = 0)::int, 5, 30000, 300000, \
           86400000, 'succeeded', timestamptz '2026-11-01 00:00:00+00' + g * interval '1 minute', \
           timestamptz '2026-11-01 00:00:00+00' + g * interval '1 minute', \
           CASE WHEN g % 11 = 0 THEN g END \
         FROM generate_series(1, 20000) g",
    )
    .execute(&mut *connection)
    .await
    .expect("operations");
    sqlx::query("ANALYZE operations")
        .execute(&mut *connection)
        .await
        .expect("analyze");
    let own = TenantSelection::Own(TenantId(1));
    for (filter, tenants, order, index) in [
        (
            "",
            own.clone(),
            ListOrder::OldestFirst,
            "operations_tenant_created",
        ),
        (
            "",
            own.clone(),
            ListOrder::NewestFirst,
            "operations_tenant_created",
        ),
        (
            "age>1h attempts>=2",
            own.clone(),
            ListOrder::OldestFirst,
            "operations_tenant_created",
        ),
        (
            "key:order-42",
            own.clone(),
            ListOrder::OldestFirst,
            "operations_tenant_key",
        ),
        (
            "",
            TenantSelection::All,
            ListOrder::NewestFirst,
            "operations_created",
        ),
        (
            "is:taken_over",
            TenantSelection::All,
            ListOrder::OldestFirst,
            "operations_created",
        ),
    ] {
        let query = OperationsQuery {
            filter: OperationFilter::parse(filter).expect("a valid filter"),
            tenants,
            order,
            limit: 100,
            after: None,
        };
        let mut builder = sqlx::QueryBuilder::<Postgres>::new("");
        let mut parameters = 0;
        for piece in operations_statement(&query, chrono::DateTime::UNIX_EPOCH) {
            match piece {
                Piece::Sql(text) => {
                    builder.push(text);
                }
                Piece::Text(value) => {
                    builder.push_bind(value);
                    parameters += 1;
                }
                Piece::Integer(value) => {
                    builder.push_bind(value);
                    parameters += 1;
                }
                Piece::Id(value) => {
                    builder.push_bind(value);
                    parameters += 1;
                }
                Piece::Moment(value) => {
                    builder.push_bind(value);
                    parameters += 1;
                }
            }
        }
        let sql = builder.sql();
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "PREPARE listing AS {}",
            sql.as_str()
        )))
        .execute(&mut *connection)
        .await
        .unwrap_or_else(|error| panic!("{filter:?}: {error}"));
        let nulls = vec!["NULL"; parameters].join(", ");
        let plan: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "EXPLAIN EXECUTE listing({nulls})"
        )))
        .fetch_all(&mut *connection)
        .await
        .unwrap_or_else(|error| panic!("{filter:?}: {error}"));
        sqlx::query("DEALLOCATE listing")
            .execute(&mut *connection)
            .await
            .expect("deallocate");
        assert!(
            !plan
                .iter()
                .any(|line| line.contains("Seq Scan on operations")),
            "{filter:?} scans the table: {plan:#?}"
        );
        assert!(
            plan.iter()
                .any(|line| line.contains(&format!("using {index} on operations"))),
            "{filter:?} ({order:?}) does not read {index}: {plan:#?}"
        );
    }
}
