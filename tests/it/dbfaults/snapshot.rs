//! One Lookup reads one snapshot, whatever commits meanwhile.

use sqlx::postgres::PgConnectOptions;

use crate::harness::*;

use super::{lock_waiters, outside};

/// Lookup reads the record and its history from one snapshot: a history
/// entry committed between the two reads is in neither.
#[sqlx::test(migrator = "idemd::store::postgres::MIGRATOR")]
async fn lookup_reads_record_and_history_from_one_snapshot(
    _: sqlx::postgres::PgPoolOptions,
    connect: PgConnectOptions,
) {
    let world = World::start(Backend::postgres(connect.clone()).await).await;
    let mut client = world.client().await;
    let (operation_id, _) = acquire(&mut client, &world.tenant_a, "k").await;

    // The history table is held while the Lookup reads the record, so its
    // history read waits; meanwhile an entry is appended and committed.
    let mut writer = outside(&connect).await;
    sqlx::query("BEGIN")
        .execute(&mut writer)
        .await
        .expect("begin");
    sqlx::query("LOCK TABLE operation_history IN ACCESS EXCLUSIVE MODE")
        .execute(&mut writer)
        .await
        .expect("locked");
    let looking = {
        let mut client = client.clone();
        let token = world.tenant_a.clone();
        let operation_id = operation_id.clone();
        tokio::spawn(async move { history(&mut client, &token, &operation_id).await })
    };
    let Backend::Postgres { pool, .. } = &world.backend else {
        unreachable!("a Postgres test")
    };
    lock_waiters(pool).await;
    sqlx::query(
        "INSERT INTO operation_history (operation_id, sequence, event, from_state, to_state, \
             fence, attempt, detail, count, first_at, last_at, coalesce_key) \
         SELECT operation_id, sequence + 1, event, from_state, to_state, fence, attempt, \
             detail, count, first_at, last_at, NULL \
         FROM operation_history WHERE operation_id = $1::uuid",
    )
    .bind(&operation_id)
    .execute(&mut writer)
    .await
    .expect("appended");
    sqlx::query("COMMIT")
        .execute(&mut writer)
        .await
        .expect("commit");

    let seen = looking.await.expect("joined");
    assert_eq!(
        seen.len(),
        1,
        "the history as of the record's snapshot: {seen:#?}"
    );
    // Read again, both entries are there.
    assert_eq!(
        history(&mut client, &world.tenant_a, &operation_id)
            .await
            .len(),
        2
    );
}
