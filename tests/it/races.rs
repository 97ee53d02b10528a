//! Store-level races: one transaction pauses between its read and its write
//! while a racing call arrives. Exactly one wins; the history shows both.

use std::sync::Arc;
use std::time::Duration;

use chrono::TimeDelta;
use idemd::domain::transition::{decide_claim, decide_complete, decide_reconcile, decide_renew};
use idemd::domain::*;
use idemd::store::postgres::PostgresStore;
use idemd::store::{Store, Target};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use tokio::sync::Semaphore;

use crate::harness::*;

/// A store whose transitions stop before writing until `release` is called.
fn paused(store: &PostgresStore) -> (PostgresStore, Arc<Semaphore>, Arc<Semaphore>) {
    let reached = Arc::new(Semaphore::new(0));
    let release = Arc::new(Semaphore::new(0));
    let hook = {
        let reached = reached.clone();
        let release = release.clone();
        Arc::new(move || {
            let reached = reached.clone();
            let release = release.clone();
            Box::pin(async move {
                reached.add_permits(1);
                release.acquire().await.expect("open").forget();
            }) as std::pin::Pin<Box<dyn Future<Output = ()> + Send>>
        })
    };
    (store.with_pause_before_write(hook), reached, release)
}

fn claim_command(lease_ms: i64) -> ClaimCommand {
    ClaimCommand {
        scope: Scope {
            operation: "payments.charge".into(),
            key: "race".into(),
        },
        fingerprint: fingerprint::of_bytes(b"race"),
        claim_token: Vec::new(),
        lease: TimeDelta::milliseconds(lease_ms),
        max_attempt_duration: TimeDelta::seconds(60),
        max_attempts: 5,
        retention: TimeDelta::hours(1),
        operation_deadline: None,
    }
}

async fn history_events(store: &PostgresStore, tenant: TenantId, id: OperationId) -> Vec<String> {
    store
        .find(tenant, &Target::Id(id), true)
        .await
        .expect("find")
        .expect("exists")
        .history
        .into_iter()
        .map(|entry| entry.event)
        .collect()
}

async fn tenant(store: &PostgresStore) -> TenantId {
    let token = create_tenant(store, "racer").await;
    store
        .authenticate(&idemd::auth::token_sha256(&token))
        .await
        .expect("auth")
        .expect("tenant")
}

#[sqlx::test(migrator = "idemd::store::postgres::MIGRATOR")]
async fn a_renew_racing_a_takeover_loses_to_the_takeover_that_locked_first(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let store = PostgresStore::from_pool(pool(connect).await);
    let tenant = tenant(&store).await;
    let command = claim_command(50);
    let first = store
        .insert_new(tenant, OperationId::generate(), &command)
        .await
        .expect("insert")
        .expect("new");
    tokio::time::sleep(Duration::from_millis(100)).await; // the lease expires

    let (paused_store, reached, release) = paused(&store);
    let takeover = tokio::spawn({
        let command = command.clone();
        async move {
            let decide = |record: &OperationRecord, now| decide_claim(record, &command, now);
            paused_store
                .transition(tenant, &Target::Scope(command.scope.clone()), &decide)
                .await
        }
    });
    reached.acquire().await.expect("paused").forget(); // the takeover holds the lock

    let renew = tokio::spawn({
        let store = store.clone();
        let command = RenewCommand {
            operation_id: first.operation_id,
            fence: first.fence,
            lease: None,
        };
        async move {
            let decide = |record: &OperationRecord, now| decide_renew(record, &command, now);
            store
                .transition(tenant, &Target::Id(command.operation_id), &decide)
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!renew.is_finished(), "the renew must wait for the row lock");
    release.add_permits(1);

    let takeover = takeover.await.expect("task").expect("ok").expect("row");
    let renew = renew.await.expect("task").expect("ok").expect("row");
    assert!(matches!(
        takeover.answer,
        Ok(Answer::Claim(ClaimAnswer::ReconcileFirst(_)))
    ));
    assert!(
        matches!(renew.answer, Err(Error::LeaseLost { current_fence, .. }) if current_fence == takeover.record.fence)
    );
    assert_eq!(
        history_events(&store, tenant, first.operation_id).await,
        ["CLAIMED", "TAKEN_OVER", "STALE_WRITE_REFUSED"]
    );
}

#[sqlx::test(migrator = "idemd::store::postgres::MIGRATOR")]
async fn a_late_complete_racing_a_reconcile_loses_to_the_reconcile_that_locked_first(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let store = PostgresStore::from_pool(pool(connect).await);
    let tenant = tenant(&store).await;
    let first = store
        .insert_new(tenant, OperationId::generate(), &claim_command(50))
        .await
        .expect("insert")
        .expect("new");
    tokio::time::sleep(Duration::from_millis(100)).await; // the owner stalls past its lease

    let (paused_store, reached, release) = paused(&store);
    let reconcile = tokio::spawn({
        let command = ReconcileCommand {
            operation_id: first.operation_id,
            expected_fence: first.fence,
            resolution: Resolution::Failed(ErrorReport {
                code: "not_found_at_provider".into(),
                ..ErrorReport::default()
            }),
        };
        async move {
            let decide = |record: &OperationRecord, now| decide_reconcile(record, &command, now);
            paused_store
                .transition(tenant, &Target::Id(command.operation_id), &decide)
                .await
        }
    });
    reached.acquire().await.expect("paused").forget();

    let complete = tokio::spawn({
        let store = store.clone();
        let command = CompleteCommand {
            operation_id: first.operation_id,
            fence: first.fence,
            result: SuccessResult::default(),
        };
        async move {
            let decide = |record: &OperationRecord, now| decide_complete(record, &command, now);
            store
                .transition(tenant, &Target::Id(command.operation_id), &decide)
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !complete.is_finished(),
        "the complete must wait for the row lock"
    );
    release.add_permits(1);

    let reconcile = reconcile.await.expect("task").expect("ok").expect("row");
    let complete = complete.await.expect("task").expect("ok").expect("row");
    assert!(matches!(reconcile.answer, Ok(Answer::Written)));
    assert_eq!(reconcile.record.state, State::Failed);
    assert!(
        matches!(complete.answer, Err(Error::LeaseLost { .. })),
        "{:?}",
        complete.answer
    );
    assert_eq!(
        history_events(&store, tenant, first.operation_id).await,
        ["CLAIMED", "RECONCILED", "STALE_WRITE_REFUSED"]
    );
}
