//! The real server process, killed with SIGKILL (no drain, no clean close)
//! and started again on the same data: what it acknowledged survives, and an
//! operation it was running is taken over as one of unknown outcome.
//! Acknowledgement after commit is what a kill can prove; that commits reach
//! the disk is what the stores assert at start-up (SQLite: synchronous=FULL;
//! Postgres warns when synchronous_commit is off).

use std::time::Duration;

use idemd::proto;
use idemd::proto::claim_response::Outcome;

use crate::harness::*;

async fn an_acknowledged_result_survives_sigkill_and_is_replayed_after_restart(backend: Backend) {
    let data = backend.into_process_data().await;
    let token = data.create_tenant("durable");
    let provider = Provider::default();
    let request = claim_json("payments.charge", "order-1", r#"{"amount":1000}"#);

    let server = data.serve(&[]).await;
    let mut client = server.client().await;
    assert_eq!(
        attempt(&mut client, &token, request.clone(), &provider).await,
        Attempt::Executed,
        "{}",
        server.log()
    );
    // The Complete was acknowledged: kill at once.
    server.kill();

    let restarted = data.serve(&[]).await;
    let mut client = restarted.client().await;
    let replay = client
        .claim(authorized(&token, request.clone()))
        .await
        .expect("claim")
        .into_inner();
    let Some(Outcome::Completed(completed)) = &replay.outcome else {
        panic!("expected the stored result, got {replay:?}");
    };
    let Some(proto::completed::Outcome::Result(stored)) = &completed.outcome else {
        panic!("expected a success result, got {completed:?}");
    };
    assert_eq!(stored.body, br#"{"charge":1}"#);
    assert_eq!(
        events(&history(&mut client, &token, &completed.operation_id).await),
        ["CLAIMED", "COMPLETED"]
    );
    assert_eq!(
        attempt(&mut client, &token, request, &provider).await,
        Attempt::Replayed
    );
    assert_eq!(provider.effects(), 1);
    restarted.kill();
}

async fn an_operation_in_progress_at_sigkill_is_taken_over_with_reconcile_first(backend: Backend) {
    let data = backend.into_process_data().await;
    let token = data.create_tenant("durable");
    let request = proto::ClaimRequest {
        lease: millis(200),
        ..claim_json("payments.charge", "order-2", r#"{"amount":5}"#)
    };

    let server = data.serve(&[]).await;
    let mut client = server.client().await;
    let claimed = client
        .claim(authorized(&token, request.clone()))
        .await
        .expect("claim")
        .into_inner();
    let owner = ownership(&claimed).expect("acquired").clone();
    // The owner was executing the effect when its server died.
    server.kill();

    let restarted = data.serve(&[]).await;
    let mut client = restarted.client().await;
    tokio::time::sleep(Duration::from_millis(250)).await; // the lease runs out
    let takeover = client
        .claim(authorized(&token, request))
        .await
        .expect("claim")
        .into_inner();
    let Some(Outcome::ReconcileFirst(reconcile_first)) = &takeover.outcome else {
        panic!("expected ReconcileFirst, got {takeover:?}");
    };
    assert_eq!(reconcile_first.previous_fence, owner.fence);
    assert_eq!(
        reconcile_first.previous_state,
        proto::OperationState::InProgress as i32
    );
    let next = reconcile_first.ownership.as_ref().expect("ownership");
    assert_eq!(next.operation_id, owner.operation_id);
    assert_eq!(next.attempt, 2);
    assert!(next.fence > owner.fence);
    restarted.kill();
}

store_tests!(
    an_acknowledged_result_survives_sigkill_and_is_replayed_after_restart,
    an_operation_in_progress_at_sigkill_is_taken_over_with_reconcile_first,
);
