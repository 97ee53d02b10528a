//! Concurrent duplicates, each in its own transaction: the scope's unique
//! index makes every one but the first wait for the first's commit, then
//! replay it.

use std::sync::Arc;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use crate::app::{Answer, App, Charge, Ending};

const DUPLICATES: usize = 64;

#[sqlx::test(migrations = false)]
async fn concurrent_duplicates_make_one_charge(_: PgPoolOptions, connect: PgConnectOptions) {
    let app = Arc::new(App::start(connect).await);
    app.tenant("acme").await;
    let charge = Charge::new("concurrent", "acme", "k-concurrent", 100);
    let start = Arc::new(tokio::sync::Barrier::new(DUPLICATES));
    let mut tasks = Vec::new();
    for _ in 0..DUPLICATES {
        let (app, charge, start) = (app.clone(), charge.clone(), start.clone());
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            app.charge(&charge, Ending::Commit).await
        }));
    }
    let mut charged = Vec::new();
    let mut replayed = Vec::new();
    for task in tasks {
        match task.await.expect("the delivery task") {
            Answer::Charged { charge_id } => charged.push(charge_id),
            Answer::Replayed { charge_id } => replayed.push(charge_id),
            other => panic!("a duplicate answered {other:?}"),
        }
    }
    assert_eq!(charged.len(), 1, "one delivery charged");
    assert_eq!(replayed.len(), DUPLICATES - 1);
    assert!(
        replayed.iter().all(|id| *id == charged[0]),
        "every other delivery replays that charge"
    );
    assert_eq!(app.effects("concurrent").await, 1, "one business row");
    assert_eq!(app.records("k-concurrent").await, 1);
}
