//! Replays and Pending answers counted per operation (Operation.replays,
//! pendings, last_replay_at), on both stores through the real binary: each
//! replica counts them in memory and adds them in batches, so after a flush
//! the counts are exact — N replays (most answered from the result cache,
//! without the database) and M Pending answers — a later flush adds nothing
//! twice, counting never moves the state, fence or updated_at, and a
//! replica stopped with SIGTERM adds what it counted before it exits.

use std::time::Duration;

use idemd::proto;
use idemd::proto::claim_response::Outcome;

use crate::harness::*;
use crate::ops::{ops, succeeded};

store_tests!(
    replays_and_pending_answers_are_counted_exactly_after_a_flush,
    a_drained_replica_adds_what_it_counted,
);

const REPLAYS: u64 = 7;
const PENDINGS: u64 = 4;

/// A Claim of the scope with a claim_token of its own (not the owner's).
async fn claim_again(client: &mut Client, token: &str, key: &str, claim_token: u8) -> Outcome {
    client
        .claim(authorized(
            token,
            proto::ClaimRequest {
                claim_token: vec![claim_token; 16],
                ..claim_json("payments.charge", key, r#"{"amount":1}"#)
            },
        ))
        .await
        .expect("claim")
        .into_inner()
        .outcome
        .expect("an outcome")
}

/// The operation with its counts zeroed: what counting must not change.
fn without_counts(operation: &proto::Operation) -> proto::Operation {
    proto::Operation {
        replays: 0,
        pendings: 0,
        last_replay_at: None,
        ..operation.clone()
    }
}

/// Looks the operation up until its counts reach `replays` and `pendings`
/// (they lag by the flush interval), within 20 s.
async fn counted(
    client: &mut Client,
    token: &str,
    operation_id: &str,
    replays: u64,
    pendings: u64,
) -> proto::Operation {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let operation = operation_by_id(client, token, operation_id).await;
        if (operation.replays, operation.pendings) == (replays, pendings) {
            return operation;
        }
        assert!(
            operation.replays <= replays && operation.pendings <= pendings,
            "counted more than answered: {operation:?}"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "not counted: {operation:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn replays_and_pending_answers_are_counted_exactly_after_a_flush(backend: Backend) {
    let data = backend.into_process_data().await;
    let token = data.create_tenant("shop");
    let server = data.serve(&["--answer-count-interval", "100ms"]).await;
    let mut client = server.client().await;
    let owned = claim_owned(
        &mut client,
        &token,
        proto::ClaimRequest {
            claim_token: vec![1; 16],
            lease: millis(60_000),
            ..claim_json("payments.charge", "order-1", r#"{"amount":1}"#)
        },
    )
    .await;
    for other in 0..PENDINGS {
        let outcome = claim_again(&mut client, &token, "order-1", 10 + other as u8).await;
        assert!(matches!(outcome, Outcome::Pending(_)), "{outcome:?}");
    }
    let pending = counted(&mut client, &token, &owned.operation_id, 0, PENDINGS).await;
    assert!(pending.last_replay_at.is_none());

    complete(&mut client, &token, &owned, r#"{"charge":"ch_1"}"#).await;
    let completed = operation_by_id(&mut client, &token, &owned.operation_id).await;
    for other in 0..REPLAYS {
        let outcome = claim_again(&mut client, &token, "order-1", 100 + other as u8).await;
        assert!(matches!(outcome, Outcome::Completed(_)), "{outcome:?}");
    }
    let replayed = counted(&mut client, &token, &owned.operation_id, REPLAYS, PENDINGS).await;
    let last_replay_at = replayed.last_replay_at.expect("the last replay's time");
    let completed_at = completed.completed_at.expect("completed_at");
    assert!(
        (last_replay_at.seconds, last_replay_at.nanos)
            >= (completed_at.seconds, completed_at.nanos),
        "{last_replay_at:?} before {completed_at:?}"
    );
    // Evidence only: not the state, the fence, nor updated_at.
    assert_eq!(without_counts(&replayed), without_counts(&completed));

    // Later flushes add nothing twice.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let later = operation_by_id(&mut client, &token, &owned.operation_id).await;
    assert_eq!((later.replays, later.pendings), (REPLAYS, PENDINGS));
    assert_eq!(later.last_replay_at, replayed.last_replay_at);

    // `ops lookup` says so, in its table and in its JSON.
    let table = succeeded(&ops(
        &data,
        &server,
        &token,
        &["lookup", &owned.operation_id],
    ));
    assert!(
        table.lines().any(|line| line.starts_with("answered")
            && line.contains("about 7 replays (the last at ")
            && line.ends_with(", 4 Pending answers")),
        "{table}"
    );
    let json = succeeded(&ops(
        &data,
        &server,
        &token,
        &["lookup", &owned.operation_id, "-o", "json"],
    ));
    let document: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(document["operation"]["replays"], "7", "{json}");
    assert_eq!(document["operation"]["pendings"], "4", "{json}");
    server.kill();
}

async fn a_drained_replica_adds_what_it_counted(backend: Backend) {
    let data = backend.into_process_data().await;
    let token = data.create_tenant("shop");
    // No flush before the drain.
    let server = data.serve(&["--answer-count-interval", "1h"]).await;
    let mut client = server.client().await;
    let owned = claim_owned(
        &mut client,
        &token,
        claim_json("payments.charge", "order-2", r#"{"amount":1}"#),
    )
    .await;
    complete(&mut client, &token, &owned, r#"{"charge":"ch_2"}"#).await;
    for other in 0..REPLAYS {
        let outcome = claim_again(&mut client, &token, "order-2", 100 + other as u8).await;
        assert!(matches!(outcome, Outcome::Completed(_)), "{outcome:?}");
    }
    let before = operation_by_id(&mut client, &token, &owned.operation_id).await;
    assert_eq!((before.replays, before.pendings), (0, 0), "not flushed yet");
    drop(client);
    let status = server.terminate();
    assert!(status.success(), "{status:?}");

    let restarted = data.serve(&[]).await;
    let mut client = restarted.client().await;
    let after = operation_by_id(&mut client, &token, &owned.operation_id).await;
    assert_eq!((after.replays, after.pendings), (REPLAYS, 0));
    assert!(after.last_replay_at.is_some());
    restarted.kill();
}
