//! Retention: tombstones, their deletion, deadlines, and sweepers in parallel.

use chrono::TimeDelta;
use idemd::proto;
use idemd::sweeper::{SweeperSettings, sweep_backlog};
use tonic::Code;

use crate::harness::*;

fn settings(tombstone_retention: TimeDelta) -> SweeperSettings {
    SweeperSettings {
        interval: std::time::Duration::from_secs(3600),
        batch: 10,
        tombstone_retention,
        clock_margin: TimeDelta::zero(),
    }
}

/// A webhook delivery kept as briefly as the server allows: retention may
/// not be shorter than the retry window, so one attempt of a second.
fn webhook(key: &str) -> proto::ClaimRequest {
    proto::ClaimRequest {
        lease: millis(1_000),
        max_attempt_duration: millis(1_000),
        max_attempts: 1,
        retention: millis(1_000),
        ..claim_json("webhooks.deliver", key, r#"{"event":"paid"}"#)
    }
}

/// Past [`webhook`]'s retention, by the clock (a replica's cache of
/// terminal records answers until then, as it should).
async fn until_retention_passed() {
    tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
}

/// Completes `count` operations (`k0`, `k1`, …) and waits for their
/// retention to pass: a backlog for the sweeper.
async fn complete_past_retention(world: &World, count: u64) {
    let mut client = world.client().await;
    let provider = Provider::default();
    for index in 0..count {
        let executed = attempt(
            &mut client,
            &world.tenant_a,
            webhook(&format!("k{index}")),
            &provider,
        )
        .await;
        assert_eq!(executed, Attempt::Executed);
    }
    until_retention_passed().await;
}

async fn an_expired_result_becomes_a_tombstone_then_frees_the_scope(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let provider = Provider::default();
    assert_eq!(
        attempt(&mut client, token, webhook("k"), &provider).await,
        Attempt::Executed
    );
    until_retention_passed().await;

    let report = sweep_backlog(world.store.as_ref(), settings(TimeDelta::hours(1))).await;
    assert_eq!((report.tombstoned, report.deleted), (1, 0));
    let refused = client
        .claim(authorized(token, webhook("k")))
        .await
        .expect_err("the tombstone refuses");
    assert_status(&refused, Code::FailedPrecondition, "RESULT_EXPIRED");
    let operation_id = error_info(&refused).1["operation_id"].clone();
    let found = client
        .lookup(authorized(
            token,
            proto::LookupRequest {
                target: Some(proto::lookup_request::Target::OperationId(
                    operation_id.clone(),
                )),
                include_history: true,
                ..Default::default()
            },
        ))
        .await
        .expect("lookup")
        .into_inner();
    let tombstone = found.operation.expect("operation");
    assert_eq!(tombstone.state, proto::OperationState::Expired as i32);
    assert!(tombstone.result.is_none(), "the result is gone");
    assert_eq!(events(&found.history), ["CLAIMED", "COMPLETED", "EXPIRED"]);
    // Sweeping again finds nothing new.
    assert_eq!(
        sweep_backlog(world.store.as_ref(), settings(TimeDelta::hours(1)))
            .await
            .total(),
        0
    );

    let report = sweep_backlog(world.store.as_ref(), settings(TimeDelta::zero())).await;
    assert_eq!(
        report.deleted, 0,
        "the tombstone's own retention has not passed"
    );
    world.backend.age_retention().await;
    let report = sweep_backlog(world.store.as_ref(), settings(TimeDelta::zero())).await;
    assert_eq!(report.deleted, 1);
    let fresh = client
        .claim(authorized(token, webhook("k")))
        .await
        .expect("a later claim starts afresh")
        .into_inner();
    assert_eq!(outcome_name(&fresh), "acquired");
    assert_ne!(
        ownership(&fresh).expect("acquired").operation_id,
        operation_id
    );
}

async fn unresolved_operations_are_never_swept(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let in_progress = proto::ClaimRequest {
        lease: millis(20),
        ..webhook("stalled")
    };
    client
        .claim(authorized(token, in_progress))
        .await
        .expect("claim");
    let reported = client
        .claim(authorized(token, webhook("unknown")))
        .await
        .expect("claim")
        .into_inner();
    let owner = ownership(&reported).expect("acquired").clone();
    client
        .fail(authorized(
            token,
            proto::FailRequest {
                operation_id: owner.operation_id,
                fence: owner.fence,
                disposition: proto::FailDisposition::Unknown as i32,
                error: None,
                retry_after: None,
            },
        ))
        .await
        .expect("fail unknown");
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    // Even with every retention passed, nothing unresolved is swept.
    world.backend.age_retention().await;

    let report = sweep_backlog(world.store.as_ref(), settings(TimeDelta::zero())).await;
    assert_eq!(report.total(), 0);
    let unresolved = client
        .list_unresolved(authorized(token, proto::ListUnresolvedRequest::default()))
        .await
        .expect("list")
        .into_inner();
    assert_eq!(unresolved.operations.len(), 2);
}

async fn a_retry_past_the_operation_deadline_ends_as_deadline_exceeded(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let request = proto::ClaimRequest {
        // Long enough for the RETRYABLE Fail to land before it on a loaded machine.
        operation_deadline: millis(1_500),
        ..claim_json("webhooks.deliver", "k", r#"{"event":"paid"}"#)
    };
    let claimed = client
        .claim(authorized(token, request.clone()))
        .await
        .expect("claim")
        .into_inner();
    let owner = ownership(&claimed).expect("acquired").clone();
    let failed = client
        .fail(authorized(
            token,
            proto::FailRequest {
                operation_id: owner.operation_id,
                fence: owner.fence,
                disposition: proto::FailDisposition::Retryable as i32,
                error: Some(proto::OperationError {
                    code: "upstream_503".into(),
                    ..Default::default()
                }),
                retry_after: millis(100),
            },
        ))
        .await
        .expect("fail")
        .into_inner();
    assert_eq!(failed.state, proto::OperationState::RetryWait as i32);
    tokio::time::sleep(std::time::Duration::from_millis(1_600)).await;

    let report = sweep_backlog(world.store.as_ref(), settings(TimeDelta::hours(1))).await;
    assert_eq!(report.deadline_exceeded, 1);
    let replay = client
        .claim(authorized(token, request))
        .await
        .expect("claim")
        .into_inner();
    let Some(proto::claim_response::Outcome::Completed(completed)) = replay.outcome else {
        panic!("expected the stored failure, got {replay:?}");
    };
    let Some(proto::completed::Outcome::Error(error)) = completed.outcome else {
        panic!("expected an error");
    };
    assert_eq!(error.reason, proto::FailureReason::DeadlineExceeded as i32);
}

async fn sweepers_on_many_replicas_share_the_work_without_doing_it_twice(backend: Backend) {
    const RESULTS: u64 = 60;
    let world = World::start(backend).await;
    complete_past_retention(&world, RESULTS).await;

    let sweepers: Vec<_> = (0..4)
        .map(|_| {
            let store = world.store.clone();
            tokio::spawn(async move {
                let mut tombstoned = 0;
                loop {
                    let report = store
                        .sweep(7, sweep_policy(TimeDelta::hours(1)))
                        .await
                        .expect("sweep");
                    tombstoned += report.tombstoned;
                    if report.tombstoned == 0 {
                        return tombstoned;
                    }
                }
            })
        })
        .collect();
    let mut total = 0;
    for sweeper in sweepers {
        total += sweeper.await.expect("sweeper");
    }

    assert_eq!(total, RESULTS);
    let expired_events = world
        .backend
        .count("SELECT count(*) FROM operation_history WHERE event = 'EXPIRED'")
        .await;
    assert_eq!(expired_events, i64::try_from(RESULTS).expect("small"));
}

/// One tick works a backlog off while its batches come back full, at the
/// database's pace: a fixed number of batches per tick (once 20) capped every
/// replica's retention below the rate it can create operations at.
async fn one_tick_sweeps_a_backlog_of_more_than_twenty_full_batches(backend: Backend) {
    const RESULTS: u64 = 45;
    const BATCH: u32 = 2;
    let world = World::start(backend).await;
    complete_past_retention(&world, RESULTS).await;

    let report = sweep_backlog(
        world.store.as_ref(),
        SweeperSettings {
            batch: BATCH,
            ..settings(TimeDelta::hours(1))
        },
    )
    .await;
    assert!(RESULTS > 20 * u64::from(BATCH), "more than 20 full batches");
    assert_eq!(report.tombstoned, RESULTS);
}

store_tests!(
    an_expired_result_becomes_a_tombstone_then_frees_the_scope,
    unresolved_operations_are_never_swept,
    a_retry_past_the_operation_deadline_ends_as_deadline_exceeded,
    sweepers_on_many_replicas_share_the_work_without_doing_it_twice,
    one_tick_sweeps_a_backlog_of_more_than_twenty_full_batches,
);

/// A replay says until when its outcome is kept: the retention the first
/// Claim asked for, from when the operation ended, as Lookup reports it.
async fn a_replay_says_until_when_its_outcome_is_kept(backend: Backend) {
    let world = World::start(backend).await;
    let mut client = world.client().await;
    let token = world.tenant_a.clone();
    let request = || proto::ClaimRequest {
        retention: millis(3_600_000),
        ..claim_json("invoices.send", "inv-1", r#"{"invoice":1}"#)
    };
    let owned = claim_owned(&mut client, &token, request()).await;
    client
        .complete(authorized(
            &token,
            proto::CompleteRequest {
                operation_id: owned.operation_id.clone(),
                fence: owned.fence,
                result: result("{}"),
            },
        ))
        .await
        .expect("complete");
    let replay = client
        .claim(authorized(&token, request()))
        .await
        .expect("claim")
        .into_inner();
    let Some(proto::claim_response::Outcome::Completed(completed)) = replay.outcome else {
        panic!("a replay: {replay:?}");
    };
    let (completed_at, retain_until) = (
        completed.completed_at.expect("completed_at"),
        completed.retain_until.expect("retain_until"),
    );
    assert_eq!(retain_until.seconds - completed_at.seconds, 3600);
    let looked_up = operation_by_id(&mut client, &token, &owned.operation_id).await;
    assert_eq!(looked_up.retain_until, Some(retain_until));
}

store_tests!(a_replay_says_until_when_its_outcome_is_kept);
