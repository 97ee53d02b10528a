//! The `sqlite-ceiling` cell: the same INSERT and UPDATE on the same schema, and nothing else.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use crate::args::SqliteCeilingArgs;
use crate::client::fingerprint_of;
use crate::drive::Stop;
use crate::tally::{Tally, own_cpu_seconds, report};
use crate::{BoxError, OPERATION, RESULT_BODY, RESULT_CONTENT_TYPE};

/// The embedded store's ceiling: per logical operation one transaction that
/// draws a fence and inserts the operation with its history row, and one that
/// updates it to succeeded with its history row — the writes the embedded store
/// makes, without its reads, clock queries or anything else — on one writer
/// connection in WAL with synchronous=FULL, as the store runs.
pub(crate) async fn run_sqlite_ceiling(args: SqliteCeilingArgs) -> Result<Value, BoxError> {
    let options = SqliteConnectOptions::new()
        .filename(&args.path)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .foreign_keys(true)
        .busy_timeout(Duration::from_secs(10));
    let writer = SqlitePoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(60))
        .connect_with(options)
        .await?;
    let concurrency = args.limits.concurrency.max(1);
    let start = Arc::new(tokio::sync::Barrier::new(concurrency + 1));
    let stop = Arc::new(std::sync::OnceLock::<Stop>::new());
    let mut clients = Vec::new();
    for index in 0..concurrency {
        let writer = writer.clone();
        let start = start.clone();
        let stop = stop.clone();
        let run_id = args.run_id.clone();
        let tenant_id = args.tenant_id;
        clients.push(tokio::spawn(async move {
            let mut tally = Tally::new()?;
            start.wait().await;
            let stop = stop
                .get()
                .ok_or("the run started without its limits")?
                .clone();
            let mut sequence = 0u64;
            while stop.another() {
                sequence += 1;
                let key = format!("{run_id}-c{index}-{sequence}");
                let started = Instant::now();
                let outcome = sqlite_insert_then_update(&writer, tenant_id, &key).await;
                tally.record_latency(started);
                match outcome {
                    Ok(()) => {
                        tally.status(tonic::Code::Ok);
                        *tally.executions.entry(key).or_default() += 1;
                    }
                    Err(error) => {
                        eprintln!("sqlite ceiling: {error}");
                        tally.status(tonic::Code::Internal);
                        tally.unsettled += 1;
                    }
                }
            }
            Ok::<_, BoxError>(tally)
        }));
    }
    let cpu_before = own_cpu_seconds();
    let started = Instant::now();
    stop.set(Stop::new(&args.limits, started))
        .map_err(|_| "limits set twice")?;
    start.wait().await;
    let mut tally = Tally::new()?;
    for client in clients {
        tally.merge(client.await??)?;
    }
    let elapsed = started.elapsed();
    let cpu = own_cpu_seconds()
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    writer.close().await;
    Ok(report(
        "sqlite-ceiling",
        concurrency,
        elapsed,
        &tally,
        false,
        None,
        cpu,
    ))
}

/// idemd's timestamp text: UTC, microseconds, one fixed width.
pub(crate) fn stamp(moment: chrono::DateTime<chrono::Utc>) -> String {
    moment.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

#[allow(clippy::disallowed_methods)]
pub(crate) async fn sqlite_insert_then_update(
    writer: &sqlx::SqlitePool,
    tenant_id: i64,
    key: &str,
) -> Result<(), sqlx::Error> {
    let operation_id = uuid::Uuid::now_v7();
    let fingerprint = fingerprint_of(key);
    let now = chrono::Utc::now();
    let mut claim = writer.begin_with("BEGIN IMMEDIATE").await?;
    let fence: i64 = sqlx::query_scalar(
        "UPDATE operation_fence SET last_fence = last_fence + 1 WHERE singleton = 1 \
         RETURNING last_fence",
    )
    .fetch_one(&mut *claim)
    .await?;
    sqlx::query(
        "INSERT INTO operations (operation_id, tenant_id, operation, idempotency_key, \
             fingerprint, state, fence, attempt, max_attempts, claim_token, lease_ms, \
             max_attempt_duration_ms, retention_ms, lease_expires_at, attempt_deadline_at, \
             operation_deadline_at, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, 'in_progress', $6, 1, 5, x'', 30000, 300000, 86400000, \
             $7, $8, NULL, $9, $9) \
         ON CONFLICT (tenant_id, operation, idempotency_key) DO NOTHING RETURNING *",
    )
    .bind(operation_id)
    .bind(tenant_id)
    .bind(OPERATION)
    .bind(key)
    .bind(&fingerprint[..])
    .bind(fence)
    .bind(stamp(now + chrono::TimeDelta::seconds(30)))
    .bind(stamp(now + chrono::TimeDelta::seconds(300)))
    .bind(stamp(now))
    .fetch_optional(&mut *claim)
    .await?;
    sqlx::query(
        "INSERT INTO operation_history (operation_id, sequence, event, from_state, to_state, \
             fence, attempt, detail, count, first_at, last_at) \
         VALUES ($1, 1, 'CLAIMED', NULL, 'in_progress', $2, 1, '', 1, $3, $3)",
    )
    .bind(operation_id)
    .bind(fence)
    .bind(stamp(now))
    .execute(&mut *claim)
    .await?;
    claim.commit().await?;

    let completed_at = chrono::Utc::now();
    let mut complete = writer.begin_with("BEGIN IMMEDIATE").await?;
    sqlx::query(
        "UPDATE operations SET state = 'succeeded', outcome_state = 'succeeded', \
             lease_expires_at = NULL, result_body = $3, result_content_type = $4, \
             result_metadata = '{}', last_write_fence = $2, last_write_digest = $5, \
             last_write_by = 'owner', updated_at = $6, completed_at = $6, retain_until = $7 \
         WHERE operation_id = $1 AND fence = $2 AND state = 'in_progress' RETURNING fence",
    )
    .bind(operation_id)
    .bind(fence)
    .bind(RESULT_BODY)
    .bind(RESULT_CONTENT_TYPE)
    .bind(&fingerprint[..])
    .bind(stamp(completed_at))
    .bind(stamp(completed_at + chrono::TimeDelta::days(1)))
    .fetch_one(&mut *complete)
    .await?;
    sqlx::query(
        "INSERT INTO operation_history (operation_id, sequence, event, from_state, to_state, \
             fence, attempt, detail, count, first_at, last_at) \
         VALUES ($1, 2, 'COMPLETED', 'in_progress', 'succeeded', $2, 1, '', 1, $3, $3)",
    )
    .bind(operation_id)
    .bind(fence)
    .bind(stamp(completed_at))
    .execute(&mut *complete)
    .await?;
    complete.commit().await?;
    Ok(())
}
