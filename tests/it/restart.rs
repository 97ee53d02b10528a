//! A terminal result, once acknowledged, survives a restart of the server.
//! (durability.rs kills the real process instead of stopping it.)

use idemd::proto;

use crate::harness::*;

async fn an_acknowledged_result_is_replayed_after_a_restart(backend: Backend) {
    let world = World::start(backend).await;
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

    // A new server process: new connections, new service, same data.
    let backend = world.backend.reopen().await;
    let server = TestServer::start(backend.store(), test_limits()).await;
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

store_tests!(an_acknowledged_result_is_replayed_after_a_restart);
