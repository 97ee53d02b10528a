//! A failure inside the transaction, before its commit, leaves neither the
//! record nor the charge; after the commit, the retry replays.

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use crate::app::{Answer, App, Charge, Ending, insert_charge};

#[sqlx::test(migrations = false)]
async fn a_failure_before_commit_leaves_neither_row(_: PgPoolOptions, connect: PgConnectOptions) {
    let app = App::start(connect).await;
    let tenant = app.tenant("acme").await;
    let charge = Charge::new("failure", "acme", "k-failure", 100);

    let mut transaction = app.pool.begin().await.expect("begin");
    let claimed = app
        .local
        .claim(&mut transaction, tenant, claim_of(&charge))
        .await
        .expect("claim");
    assert!(claimed.acquired());
    let charge_id = insert_charge(&mut transaction, &charge).await;
    app.complete(&mut transaction, &claimed, charge_id)
        .await
        .expect("complete");
    // The failure: a statement of the application's that the database
    // refuses, after both rows were written; the transaction is aborted.
    let refused = sqlx::query("SELECT 1 / 0").execute(&mut *transaction).await;
    assert!(refused.is_err(), "division by zero is refused");
    // What a handler does with an error: the transaction goes. (A COMMIT
    // of the aborted transaction would roll it back just the same.)
    transaction.rollback().await.expect("rollback");

    assert_eq!(app.records("k-failure").await, 0, "no idempotency record");
    assert_eq!(app.effects("failure").await, 0, "no charge");

    // The retry is a first attempt, not a takeover of a doubtful one.
    let answer = app.charge(&charge, Ending::Commit).await;
    assert!(matches!(answer, Answer::Charged { .. }), "{answer:?}");
    let attempt: i32 = sqlx::query_scalar(
        "SELECT attempt FROM idemd.operations WHERE idempotency_key = 'k-failure'",
    )
    .fetch_one(&app.pool)
    .await
    .expect("the record");
    assert_eq!(attempt, 1);
    assert_eq!(app.effects("failure").await, 1);
}

#[sqlx::test(migrations = false)]
async fn after_commit_the_retry_replays(_: PgPoolOptions, connect: PgConnectOptions) {
    let app = App::start(connect).await;
    let charge = Charge::new("replay", "acme", "k-replay", 100);
    let Answer::Charged { charge_id } = app.charge(&charge, Ending::Commit).await else {
        panic!("the first delivery charges");
    };
    assert_eq!(
        app.charge(&charge, Ending::Commit).await,
        Answer::Replayed { charge_id }
    );
    assert_eq!(app.effects("replay").await, 1);
    assert_eq!(app.records("k-replay").await, 1);
}

pub(crate) fn claim_of(charge: &Charge) -> idemd::domain::ClaimRequested {
    charge.claim_requested()
}
