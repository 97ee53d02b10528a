//! The database stalls, fails over or refuses: every transient condition
//! answers UNAVAILABLE with RetryInfo (reason STORE_UNAVAILABLE), never
//! INTERNAL, and the server recovers by itself. Postgres only: these are
//! Postgres's own conditions, provoked for real on the test's database.
//!
//! `transient`: a database that refuses, cancels or holds a lock;
//! `vanished`: one that silently stops answering; `startup`: what a server
//! starts on (a pool of one, commit settings, a newer schema); `snapshot`:
//! what one Lookup reads while another transaction writes.

use std::time::Duration;

use idemd::proto;
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection, PgPool};
use tonic::Code;
use tonic_types::StatusExt;

use crate::harness::*;

mod snapshot;
mod startup;
mod transient;
mod vanished;

/// UNAVAILABLE, STORE_UNAVAILABLE, with a RetryInfo.
fn assert_unavailable(status: &tonic::Status) {
    assert_status(status, Code::Unavailable, "STORE_UNAVAILABLE");
    assert!(
        status.get_details_retry_info().is_some(),
        "RetryInfo expected: {status:?}"
    );
}

/// A connection of the test's own, outside every store.
async fn outside(connect: &PgConnectOptions) -> PgConnection {
    PgConnection::connect_with(connect)
        .await
        .expect("an outside connection")
}

fn complete(operation_id: &str, fence: u64) -> proto::CompleteRequest {
    proto::CompleteRequest {
        operation_id: operation_id.into(),
        fence,
        result: result("ok"),
    }
}

/// Holds the row lock of one operation in an open transaction of its own.
async fn lock_row(connect: &PgConnectOptions, operation_id: &str) -> PgConnection {
    let mut holder = outside(connect).await;
    sqlx::query("BEGIN")
        .execute(&mut holder)
        .await
        .expect("begin");
    let locked = sqlx::query("SELECT 1 FROM operations WHERE operation_id = $1::uuid FOR UPDATE")
        .bind(operation_id)
        .execute(&mut holder)
        .await
        .expect("row locked");
    assert_eq!(locked.rows_affected(), 1);
    holder
}

/// The backends of this database waiting for a lock, once there is one.
async fn lock_waiters(pool: &PgPool) -> Vec<i32> {
    loop {
        let waiting: Vec<i32> = sqlx::query_scalar(
            "SELECT pid FROM pg_stat_activity \
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_all(pool)
        .await
        .expect("pg_stat_activity");
        if !waiting.is_empty() {
            return waiting;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
