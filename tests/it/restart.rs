//! A terminal result, once acknowledged, survives a restart of the server.

use std::sync::Arc;

use idemd::proto;
use idemd::store::postgres::PostgresStore;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use crate::harness::*;

#[sqlx::test(migrator = "idemd::store::postgres::MIGRATOR")]
async fn an_acknowledged_result_is_replayed_after_a_restart(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let world = World::start(connect.clone()).await;
    let token = world.tenant_a.clone();
    let provider = Provider::default();
    let request = claim_json("payments.charge", "k", r#"{"amount":3}"#);
    let mut client = world.client().await;
    assert_eq!(
        attempt(&mut client, &token, request.clone(), &provider).await,
        Attempt::Executed
    );
    drop(client);
    world.server.stop().await;
    world.pool.close().await;

    // A new server process: new pool, new service, same database.
    let store = PostgresStore::from_pool(pool(connect).await);
    let server = TestServer::start(Arc::new(store), test_limits()).await;
    let mut client = server.client().await;
    let replay = client
        .claim(authorized(&token, request))
        .await
        .expect("claim")
        .into_inner();

    let Some(proto::claim_response::Outcome::Completed(completed)) = replay.outcome else {
        panic!("expected the stored result, got {replay:?}");
    };
    let Some(proto::completed::Outcome::Result(stored)) = completed.outcome else {
        panic!("expected a success result");
    };
    assert_eq!(stored.body, br#"{"charge":1}"#);
    assert_eq!(provider.effects(), 1);
}
