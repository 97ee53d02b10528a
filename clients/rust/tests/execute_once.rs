//! `Client::execute_once` against the real `idemd` binary, on both stores.
//! Every test counts effects at the provider, not successful responses.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use idemd_client::{
    DeadlineSource, Disposition, Error, Execution, Operation, OperationState, Outcome, Payload,
    Source, UnknownBecause, proto,
};
use support::*;
use tokio::time::Instant;

fn order(key: &str) -> Operation {
    Operation {
        lease: Duration::from_secs(3),
        deadline: Duration::from_secs(30),
        ..Operation::new(
            "orders.create",
            key,
            Payload::Json(r#"{"amount":1000,"currency":"EUR"}"#.into()),
        )
    }
}

fn succeeded(execution: &Execution) -> Vec<u8> {
    match &execution.outcome {
        Outcome::Succeeded(result) => result.body.clone(),
        Outcome::Failed(error) => panic!("expected a result, got {error:?}"),
    }
}

async fn history(client: &idemd_client::Client, operation_id: &str) -> Vec<String> {
    history_entries(client, operation_id)
        .await
        .into_iter()
        .map(|entry| entry.event)
        .collect()
}

async fn history_entries(
    client: &idemd_client::Client,
    operation_id: &str,
) -> Vec<proto::HistoryEntry> {
    client
        .lookup(proto::LookupRequest {
            target: Some(proto::lookup_request::Target::OperationId(
                operation_id.into(),
            )),
            include_history: true,
            ..Default::default()
        })
        .await
        .expect("lookup")
        .history
}

both_stores!(
    concurrent_duplicates_run_one_effect_and_share_its_result,
    a_lost_claim_reply_is_resent_with_the_same_claim_token,
    a_lost_complete_reply_is_resent_and_counted_once,
    a_server_restart_during_the_effect_leaves_one_effect_and_a_stable_result,
    lease_lost_looks_the_operation_up_and_never_reruns_the_effect,
    a_changed_payload_is_a_conflict_and_runs_nothing,
    the_attempt_deadline_cancels_the_effect_and_reports_unknown,
    a_negative_lookup_is_trusted_only_after_the_earlier_attempt_deadline,
    a_takeover_records_what_the_lookup_found_without_running_the_effect,
    a_retryable_failure_is_released_and_claimed_again,
    a_terminal_failure_is_stored_and_replayed,
    a_lease_nearly_spent_on_arrival_is_renewed_before_the_effect,
    too_little_lease_left_never_starts_the_effect,
    a_declined_takeover_hands_on_the_earlier_attempts_doubt,
    needs_reconciliation_runs_nothing,
    the_lease_is_renewed_while_the_effect_runs,
    a_pending_operation_past_the_callers_deadline_runs_nothing,
    a_claim_reply_later_than_the_call_timeout_is_resent_with_the_same_claim_token,
    a_resent_claim_counts_its_attempt_from_the_answered_send,
    a_negative_lookup_started_before_the_earlier_attempt_settled_does_not_count,
    a_takeover_without_a_lookup_or_provider_deduplication_runs_nothing_and_keeps_the_doubt,
    a_takeover_with_provider_deduplication_declared_runs_the_effect,
    a_lookup_that_cannot_tell_declines_and_keeps_the_doubt,
    an_effect_that_panics_is_reported_unknown_and_the_panic_resumes,
);

async fn concurrent_duplicates_run_one_effect_and_share_its_result(store: Store) {
    let world = World::start(store).await;
    let client = world.client().await;
    let provider = Provider::default();
    let operation = order("order-1");
    let runs: Vec<_> = (0..8)
        .map(|_| {
            let (client, provider, operation) =
                (client.clone(), provider.clone(), operation.clone());
            tokio::spawn(async move {
                client
                    .execute_once(&operation, |context| {
                        let provider = provider.clone();
                        async move {
                            // Long enough for the others to find it pending.
                            tokio::time::sleep(Duration::from_millis(300)).await;
                            Disposition::Success(result(provider.perform(context.operation_id())))
                        }
                    })
                    .await
            })
        })
        .collect();
    let mut executions = Vec::new();
    for run in runs {
        executions.push(run.await.expect("task").expect("executed or replayed"));
    }
    assert_eq!(provider.total(), 1, "one effect for one intent");
    let first = succeeded(&executions[0]);
    assert!(
        executions
            .iter()
            .all(|execution| succeeded(execution) == first)
    );
    assert_eq!(
        executions
            .iter()
            .filter(|execution| execution.source == Source::Executed)
            .count(),
        1
    );
    assert!(
        executions
            .iter()
            .all(|execution| execution.operation_id == executions[0].operation_id)
    );
    world.finish().await;
}

async fn a_lost_claim_reply_is_resent_with_the_same_claim_token(store: Store) {
    let world = World::start(store).await;
    let proxy = Proxy::start(world.addr()).await;
    proxy.arm(1, ReplyFault::Lose);
    let client = proxy.client(&world.token).await;
    let provider = Provider::default();
    let execution = client
        .execute_once(&order("order-2"), |context| {
            let provider = provider.clone();
            async move { Disposition::Success(result(provider.perform(context.operation_id()))) }
        })
        .await
        .expect("executed");
    assert!(
        proxy.responses() >= 3,
        "the Claim reply was lost and re-sent"
    );
    assert_eq!(provider.total(), 1);
    assert_eq!(execution.source, Source::Executed);
    // The re-sent Claim carried the first one's token: the server answered it
    // as the same attempt, not as a rival (Pending) or a takeover.
    assert_eq!(execution.attempt, 1);
    let events = history(&world.client().await, &execution.operation_id).await;
    assert_eq!(events, ["CLAIMED", "COMPLETED"], "{events:?}");
    world.finish().await;
}

async fn a_lost_complete_reply_is_resent_and_counted_once(store: Store) {
    let world = World::start(store).await;
    let proxy = Proxy::start(world.addr()).await;
    // 1: Claim, 2: Complete (the effect is quicker than the first renewal).
    proxy.arm(2, ReplyFault::Lose);
    let client = proxy.client(&world.token).await;
    let provider = Provider::default();
    let operation = order("order-3");
    let execution = client
        .execute_once(&operation, |context| {
            let provider = provider.clone();
            async move { Disposition::Success(result(provider.perform(context.operation_id()))) }
        })
        .await
        .expect("executed");
    assert_eq!(execution.source, Source::Executed);
    assert!(
        proxy.responses() >= 3,
        "the Complete reply was lost and re-sent"
    );
    let replay = world
        .client()
        .await
        .execute_once(&operation, |_| async { panic!("a replay runs nothing") })
        .await
        .expect("replayed");
    assert_eq!(replay.source, Source::Replayed);
    assert_eq!(succeeded(&replay), succeeded(&execution));
    assert_eq!(provider.total(), 1);
    world.finish().await;
}

async fn a_server_restart_during_the_effect_leaves_one_effect_and_a_stable_result(store: Store) {
    let mut world = World::start(store).await;
    let client = world.client().await;
    let provider = Provider::default();
    let operation = order("order-4");
    let (started, mut effect_started) = tokio::sync::mpsc::channel::<()>(1);
    let release = Arc::new(tokio::sync::Notify::new());
    let run = tokio::spawn({
        let (client, provider, operation, release) = (
            client.clone(),
            provider.clone(),
            operation.clone(),
            release.clone(),
        );
        async move {
            client
                .execute_once(&operation, |context| {
                    let (provider, started, release) =
                        (provider.clone(), started.clone(), release.clone());
                    async move {
                        let _ = started.send(()).await;
                        release.notified().await;
                        Disposition::Success(result(provider.perform(context.operation_id())))
                    }
                })
                .await
        }
    });
    effect_started.recv().await.expect("the effect started");
    world.kill();
    // Down for longer than a renewal interval: renewals fail meanwhile.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    world.serve().await;
    release.notify_one();
    let execution = run.await.expect("task").expect("executed");
    assert_eq!(execution.source, Source::Executed);
    assert_eq!(provider.total(), 1);
    let replay = client
        .execute_once(&operation, |_| async { panic!("a replay runs nothing") })
        .await
        .expect("replayed");
    assert_eq!(replay.source, Source::Replayed);
    assert_eq!(succeeded(&replay), succeeded(&execution));
    world.finish().await;
}

async fn lease_lost_looks_the_operation_up_and_never_reruns_the_effect(store: Store) {
    let world = World::start(store).await;
    let proxy = Proxy::start(world.addr()).await;
    let client = proxy.client(&world.token).await;
    let provider = Provider::default();
    let operation = Operation {
        lease: Duration::from_millis(600),
        ..order("order-5")
    };
    let runs = Arc::new(AtomicUsize::new(0));
    let (started, mut effect_started) = tokio::sync::mpsc::channel::<String>(1);
    let run = tokio::spawn({
        let (client, operation, runs) = (client.clone(), operation.clone(), runs.clone());
        async move {
            client
                .execute_once(&operation, |context| {
                    let (started, runs) = (started.clone(), runs.clone());
                    async move {
                        runs.fetch_add(1, Ordering::SeqCst);
                        let _ = started.send(context.operation_id().to_owned()).await;
                        // Stalls: only the lost lease ends it.
                        std::future::pending::<Disposition>().await
                    }
                })
                .await
        }
    });
    let operation_id = effect_started.recv().await.expect("the effect started");
    // The owner is cut off; its lease runs out and another owner takes over.
    proxy.set_blackout(true);
    tokio::time::sleep(Duration::from_millis(800)).await;
    let direct = world.client().await;
    let taken_over = direct
        .claim(claim_json(
            "orders.create",
            "order-5",
            r#"{"amount":1000,"currency":"EUR"}"#,
        ))
        .await
        .expect("claim");
    let Some(proto::claim_response::Outcome::ReconcileFirst(reconcile_first)) = taken_over.outcome
    else {
        panic!("expected a takeover, got {taken_over:?}");
    };
    let ownership = reconcile_first.ownership.expect("ownership");
    let other_body = provider.perform(&operation_id);
    direct
        .complete(proto::CompleteRequest {
            operation_id: ownership.operation_id.clone(),
            fence: ownership.fence,
            result: Some(result(other_body.clone())),
        })
        .await
        .expect("the new owner completes");
    proxy.set_blackout(false);
    let execution = run.await.expect("task").expect("what is stored");
    assert_eq!(execution.source, Source::Superseded);
    assert_eq!(succeeded(&execution), other_body);
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the effect never ran again");
    let events = history(&direct, &operation_id).await;
    assert!(
        events.iter().any(|event| event == "STALE_WRITE_REFUSED"),
        "the old owner's write was refused as stale: {events:?}"
    );
    world.finish().await;
}

async fn a_changed_payload_is_a_conflict_and_runs_nothing(store: Store) {
    let world = World::start(store).await;
    let client = world.client().await;
    let provider = Provider::default();
    let first = client
        .execute_once(&order("order-6"), |context| {
            let provider = provider.clone();
            async move { Disposition::Success(result(provider.perform(context.operation_id()))) }
        })
        .await
        .expect("executed");
    let changed = Operation {
        payload: Payload::Json(r#"{"amount":2000,"currency":"EUR"}"#.into()),
        ..order("order-6")
    };
    let refused = client
        .execute_once(&changed, |_| async { panic!("a conflict runs nothing") })
        .await;
    assert_eq!(
        refused,
        Err(Error::Conflict {
            operation_id: first.operation_id.clone()
        })
    );
    assert_eq!(provider.total(), 1);
    world.finish().await;
}

/// An attempt that claimed `key` and crashed: it never writes again.
async fn crashed_attempt(
    client: &idemd_client::Client,
    key: &str,
    attempt_duration: Duration,
    max_attempts: u32,
) -> proto::Ownership {
    let response = client
        .claim(proto::ClaimRequest {
            lease: millis(50),
            max_attempt_duration: prost_types::Duration::try_from(attempt_duration).ok(),
            max_attempts,
            claim_token: b"crashed-attempt".to_vec(),
            ..claim_json("orders.create", key, r#"{"amount":1000,"currency":"EUR"}"#)
        })
        .await
        .expect("claim");
    let Some(proto::claim_response::Outcome::Acquired(acquired)) = response.outcome else {
        panic!("expected Acquired, got {response:?}");
    };
    // Past its lease: the next Claim takes over.
    tokio::time::sleep(Duration::from_millis(100)).await;
    acquired.ownership.expect("ownership")
}

async fn the_attempt_deadline_cancels_the_effect_and_reports_unknown(store: Store) {
    let world = World::start(store).await;
    let client = world.client().await;
    // The report (Fail UNKNOWN) must land before the attempt deadline, within the
    // margin (a tenth of the attempt): 100 ms was too little for a loaded CI
    // machine (the late report was refused and the record stayed IN_PROGRESS,
    // unknown only by its lease), so the attempt is 5 s (a 0.5 s margin).
    let operation = Operation {
        lease: Duration::from_millis(1500),
        attempt_duration: Some(Duration::from_secs(5)),
        ..order("order-7")
    };
    let (told, mut cancelled) = tokio::sync::oneshot::channel::<()>();
    let mut told = Some(told);
    let refused = client
        .execute_once(&operation, |context| {
            let told = told.take();
            async move {
                // Work the effect spawned learns of the cancellation too.
                tokio::spawn({
                    let context = context.clone();
                    async move {
                        context.cancelled().await;
                        if let Some(told) = told {
                            let _ = told.send(());
                        }
                    }
                });
                std::future::pending::<Disposition>().await
            }
        })
        .await;
    let Err(Error::OutcomeUnknown {
        operation_id,
        attempt: 1,
        because: UnknownBecause::AttemptTimedOut,
    }) = refused
    else {
        panic!("expected an unknown outcome, got {refused:?}");
    };
    tokio::time::timeout(Duration::from_secs(5), &mut cancelled)
        .await
        .expect("the context said cancelled")
        .expect("sent");
    let stored = client
        .lookup_operation(&operation_id)
        .await
        .expect("lookup");
    assert_eq!(stored.state(), OperationState::Unknown);
    let events = history(&client, &operation_id).await;
    assert!(events.contains(&"OUTCOME_UNKNOWN".to_owned()), "{events:?}");
    world.finish().await;
}

async fn a_negative_lookup_is_trusted_only_after_the_earlier_attempt_deadline(store: Store) {
    let world = World::start(store).await;
    let client = world.client().await;
    let provider = Provider::default();
    let crashed_sent = tokio::time::Instant::now();
    crashed_attempt(&client, "order-8", Duration::from_secs(1), 0).await;
    let operation = Operation {
        lease: Duration::from_millis(300),
        attempt_duration: Some(Duration::from_secs(1)),
        ..order("order-8")
    };
    let lookups = Arc::new(AtomicUsize::new(0));
    let started = Arc::new(std::sync::Mutex::new(None));
    let execution = client
        .execute_once_with_lookup(
            &operation,
            |context| {
                let (provider, lookups) = (provider.clone(), lookups.clone());
                async move {
                    lookups.fetch_add(1, Ordering::SeqCst);
                    provider
                        .find(context.operation_id())
                        .map(|body| Disposition::Success(result(body)))
                }
            },
            |context| {
                let (provider, started) = (provider.clone(), started.clone());
                async move {
                    *started.lock().expect("lock") = Some((
                        tokio::time::Instant::now(),
                        context.attempt(),
                        context.previous_outcome_unknown().cloned(),
                    ));
                    Disposition::Success(result(provider.perform(context.operation_id())))
                }
            },
        )
        .await
        .expect("executed");
    assert_eq!(execution.source, Source::Executed);
    assert_eq!(provider.total(), 1);
    let (started_at, attempt, previous) = started.lock().expect("lock").clone().expect("ran");
    // The server tells when the crashed attempt's deadline is; the helper
    // trusted "not found" only once it had passed. Its own attempt (2) ends
    // about when that deadline does, so how it goes on depends on the
    // machine's pace: attempt 2 declines (NOT_STARTED keeps the crashed
    // attempt's doubt) once no lookup could start in time, or when too
    // little of it is left after the doubt, and attempt 3 waits the doubt
    // out, looks again and runs the effect; or, with its Claim slower, it
    // too has too little left after the doubt, declines, and attempt 4 runs
    // it. Either way the effect runs once, after the crashed attempt's
    // deadline.
    assert!(
        started_at >= crashed_sent + Duration::from_secs(1),
        "the effect started before the crashed attempt's deadline"
    );
    assert!((3..=4).contains(&attempt), "attempt {attempt}");
    if let Some(previous) = previous {
        assert_eq!(previous.deadline_source, DeadlineSource::Server);
    }
    assert!(lookups.load(Ordering::SeqCst) >= 2);
    world.finish().await;
}

async fn a_takeover_records_what_the_lookup_found_without_running_the_effect(store: Store) {
    let world = World::start(store).await;
    let client = world.client().await;
    let provider = Provider::default();
    let crashed = crashed_attempt(&client, "order-9", Duration::from_secs(5), 0).await;
    // The crashed attempt's effect did happen at the provider.
    let earlier = provider.perform(&crashed.operation_id);
    let execution = client
        .execute_once_with_lookup(
            &order("order-9"),
            |context| {
                let provider = provider.clone();
                async move {
                    provider
                        .find(context.operation_id())
                        .map(|body| Disposition::Success(result(body)))
                }
            },
            |_| async { panic!("the effect already happened") },
        )
        .await
        .expect("reconciled");
    assert_eq!(execution.source, Source::Reconciled);
    assert_eq!(succeeded(&execution), earlier);
    assert_eq!(execution.attempt, 2);
    assert_eq!(provider.total(), 1);
    world.finish().await;
}

async fn a_retryable_failure_is_released_and_claimed_again(store: Store) {
    let world = World::start(store).await;
    let client = world.client().await;
    let provider = Provider::default();
    let calls = Arc::new(AtomicUsize::new(0));
    let execution = client
        .execute_once(&order("order-10"), |context| {
            let (provider, calls) = (provider.clone(), calls.clone());
            async move {
                if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                    return Disposition::Retryable(
                        proto::OperationError {
                            code: "provider_busy".into(),
                            ..Default::default()
                        },
                        Duration::from_millis(50),
                    );
                }
                Disposition::Success(result(provider.perform(context.operation_id())))
            }
        })
        .await
        .expect("executed");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(execution.attempt, 2);
    assert_eq!(provider.total(), 1);
    let events = history(&client, &execution.operation_id).await;
    assert_eq!(
        events,
        ["CLAIMED", "RETRY_SCHEDULED", "RETRY_STARTED", "COMPLETED"],
        "{events:?}"
    );
    world.finish().await;
}

async fn a_terminal_failure_is_stored_and_replayed(store: Store) {
    let world = World::start(store).await;
    let client = world.client().await;
    let declined = proto::OperationError {
        code: "card_declined".into(),
        message: "declined".into(),
        ..Default::default()
    };
    let execution = client
        .execute_once(&order("order-11"), |_| {
            let declined = declined.clone();
            async move { Disposition::Terminal(declined) }
        })
        .await
        .expect("ended");
    let Outcome::Failed(error) = &execution.outcome else {
        panic!("expected a failure, got {execution:?}");
    };
    assert_eq!(error.code, "card_declined");
    assert_eq!(error.reason(), proto::FailureReason::Terminal);
    let replay = client
        .execute_once(&order("order-11"), |_| async {
            panic!("a replay runs nothing")
        })
        .await
        .expect("replayed");
    assert_eq!(replay.source, Source::Replayed);
    let Outcome::Failed(replayed) = &replay.outcome else {
        panic!("expected the failure replayed, got {replay:?}");
    };
    assert_eq!(replayed.code, "card_declined");
    world.finish().await;
}

/// The effect of `execute_once` that records the attempt it ran on.
fn recording_effect(
    provider: &Provider,
    attempts: &Arc<std::sync::Mutex<Vec<u32>>>,
) -> impl FnMut(idemd_client::EffectContext) -> std::pin::Pin<Box<dyn Future<Output = Disposition> + Send>>
{
    let (provider, attempts) = (provider.clone(), attempts.clone());
    move |context| {
        let (provider, attempts) = (provider.clone(), attempts.clone());
        Box::pin(async move {
            attempts.lock().expect("lock").push(context.attempt());
            Disposition::Success(result(provider.perform(context.operation_id())))
        })
    }
}

async fn a_lease_nearly_spent_on_arrival_is_renewed_before_the_effect(store: Store) {
    let world = World::start(store).await;
    let proxy = Proxy::start(world.addr()).await;
    // The Claim's reply arrives with 600 ms of a 3 s lease left (counted from
    // its send), less than the 1 s margin (a third of the lease): the helper
    // renews, and the Renew's lease counts from the Renew's send. (Seconds,
    // not tenths: on a loaded CI machine a Renew due 0.2 s before the lease
    // ran out came back too late and the attempt was given up.)
    proxy.arm(1, ReplyFault::Delay(Duration::from_millis(2_400)));
    let client = proxy.client(&world.token).await;
    let provider = Provider::default();
    let operation = Operation {
        lease: Duration::from_secs(3),
        ..order("order-11")
    };
    let attempts = Arc::new(std::sync::Mutex::new(Vec::new()));
    let execution = client
        .execute_once(&operation, recording_effect(&provider, &attempts))
        .await
        .expect("executed");
    assert_eq!(*attempts.lock().expect("lock"), [1], "no attempt given up");
    assert_eq!(execution.attempt, 1);
    assert_eq!(provider.total(), 1);
    let events = history(&world.client().await, &execution.operation_id).await;
    assert_eq!(events, ["CLAIMED", "RENEWED", "COMPLETED"], "{events:?}");
    world.finish().await;
}

async fn too_little_lease_left_never_starts_the_effect(store: Store) {
    let world = World::start(store).await;
    let proxy = Proxy::start(world.addr()).await;
    // The Claim's reply and the Renew's both arrive with 200 ms of a 1 s
    // lease left, less than the 300 ms margin: attempt 1 declines.
    proxy.arm(1, ReplyFault::Delay(Duration::from_millis(800)));
    proxy.arm(2, ReplyFault::Delay(Duration::from_millis(800)));
    let client = proxy.client(&world.token).await;
    let provider = Provider::default();
    let operation = Operation {
        lease: Duration::from_secs(1),
        ..order("order-12")
    };
    let attempts = Arc::new(std::sync::Mutex::new(Vec::new()));
    let execution = client
        .execute_once(&operation, recording_effect(&provider, &attempts))
        .await
        .expect("executed");
    assert_eq!(
        *attempts.lock().expect("lock"),
        [2],
        "attempt 1 never started"
    );
    assert_eq!(execution.attempt, 2);
    assert_eq!(provider.total(), 1);
    let entries = history_entries(&world.client().await, &execution.operation_id).await;
    let events: Vec<_> = entries.iter().map(|entry| entry.event.as_str()).collect();
    assert_eq!(
        events,
        [
            "CLAIMED",
            "RENEWED",
            "RETRY_SCHEDULED",
            "RETRY_STARTED",
            "COMPLETED"
        ],
        "{events:?}"
    );
    assert_eq!(entries[2].detail, "not_started");
    world.finish().await;
}

/// The long fault run's liveness failure: an attempt that declines because
/// the doubt it took over outlasts it must not push the doubt forward. The
/// next attempt is told the earlier attempt's deadline, waits it out and runs.
async fn a_declined_takeover_hands_on_the_earlier_attempts_doubt(store: Store) {
    let world = World::start(store).await;
    let client = world.client().await;
    let provider = Provider::default();
    let attempt_duration = Duration::from_secs(4);
    // Attempt 1 claims with a 2 s lease and crashes: its effect may run
    // until its deadline, 4 s after its Claim.
    let first = client
        .claim(proto::ClaimRequest {
            lease: millis(2_000),
            max_attempt_duration: prost_types::Duration::try_from(attempt_duration).ok(),
            claim_token: b"crashed-attempt".to_vec(),
            ..claim_json(
                "orders.create",
                "order-14",
                r#"{"amount":1000,"currency":"EUR"}"#,
            )
        })
        .await
        .expect("claim");
    let first_replied = tokio::time::Instant::now();
    assert!(matches!(
        first.outcome,
        Some(proto::claim_response::Outcome::Acquired(_))
    ));
    // This call's first Claim is told Pending; its second waits (long poll)
    // until attempt 1's lease runs out, 2 s after it was sent: its attempt
    // (2) counts 4 s from that send, so it would end (less its 0.4 s margin)
    // before attempt 1's doubt does. It declines once no further lookup
    // could start before its cancel point; attempt 3 is told attempt 1's
    // deadline, not attempt 2's.
    let operation = Operation {
        lease: Duration::from_secs(3),
        attempt_duration: Some(attempt_duration),
        ..order("order-14")
    };
    let told = Arc::new(std::sync::Mutex::new(Vec::new()));
    let attempts = Arc::new(std::sync::Mutex::new(Vec::new()));
    let execution = client
        .execute_once_with_lookup(
            &operation,
            |context| {
                let (provider, told) = (provider.clone(), told.clone());
                async move {
                    if let Some(previous) = context.previous_outcome_unknown() {
                        told.lock()
                            .expect("lock")
                            .push((context.attempt(), previous.attempt_deadline));
                    }
                    provider
                        .find(context.operation_id())
                        .map(|body| Disposition::Success(result(body)))
                }
            },
            recording_effect(&provider, &attempts),
        )
        .await
        .expect("executed");
    assert_eq!(provider.total(), 1);
    let entries = history_entries(&client, &execution.operation_id).await;
    assert_eq!(
        *attempts.lock().expect("lock"),
        [3],
        "{:#?} {:?}",
        entries,
        told.lock().expect("lock")
    );
    let first_deadline = first_replied + attempt_duration;
    for (attempt, deadline) in told.lock().expect("lock").iter() {
        // Measured from a reply that came at most a little later (up to a
        // second on a loaded CI machine); attempt 2's deadline, which a
        // doubt pushed forward would carry, is 2 s later.
        assert!(
            *deadline <= first_deadline + Duration::from_millis(1_500),
            "attempt {attempt} was told the doubt lasts {:?} past attempt 1's deadline",
            deadline.saturating_duration_since(first_deadline)
        );
    }
    // Attempt 2 renewed while it waited; the rest is one line each.
    let entries: Vec<_> = entries
        .into_iter()
        .filter(|entry| entry.event != "RENEWED")
        .collect();
    let events: Vec<_> = entries.iter().map(|entry| entry.event.as_str()).collect();
    assert_eq!(
        events,
        [
            "CLAIMED",
            "TAKEN_OVER",
            "OUTCOME_UNKNOWN",
            "TAKEN_OVER",
            "COMPLETED"
        ],
        "{events:?}"
    );
    assert_eq!(entries[2].detail, "not_started");
    world.finish().await;
}

async fn needs_reconciliation_runs_nothing(store: Store) {
    let world = World::start(store).await;
    let client = world.client().await;
    let crashed = crashed_attempt(&client, "order-13", Duration::from_secs(5), 1).await;
    let refused = client
        .execute_once(&order("order-13"), |_| async { panic!("nothing may run") })
        .await;
    assert_eq!(
        refused,
        Err(Error::NeedsReconciliation {
            operation_id: crashed.operation_id,
            fence: crashed.fence,
            attempts: 1,
        })
    );
    world.finish().await;
}

async fn the_lease_is_renewed_while_the_effect_runs(store: Store) {
    let world = World::start(store).await;
    let client = world.client().await;
    let provider = Provider::default();
    let operation = Operation {
        lease: Duration::from_millis(300),
        ..order("order-14")
    };
    let run = tokio::spawn({
        let (client, provider, operation) = (client.clone(), provider.clone(), operation.clone());
        async move {
            client
                .execute_once(&operation, |context| {
                    let provider = provider.clone();
                    async move {
                        // More than three leases long.
                        tokio::time::sleep(Duration::from_millis(1000)).await;
                        Disposition::Success(result(provider.perform(context.operation_id())))
                    }
                })
                .await
        }
    });
    // Past the first lease, the running effect still holds the operation.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let meanwhile = client
        .claim(claim_json(
            "orders.create",
            "order-14",
            r#"{"amount":1000,"currency":"EUR"}"#,
        ))
        .await
        .expect("claim");
    assert!(
        matches!(
            meanwhile.outcome,
            Some(proto::claim_response::Outcome::Pending(_))
        ),
        "{meanwhile:?}"
    );
    let execution = run.await.expect("task").expect("executed");
    assert_eq!((execution.source, execution.attempt), (Source::Executed, 1));
    assert_eq!(provider.total(), 1);
    // The owner's renewals are one history entry that counts them.
    let entries = history_entries(&client, &execution.operation_id).await;
    let renewals: u64 = entries
        .iter()
        .filter(|entry| entry.event == "RENEWED")
        .map(|entry| entry.count)
        .sum();
    assert!(renewals >= 2, "{entries:?}");
    assert_eq!(
        entries.last().map(|entry| entry.event.as_str()),
        Some("COMPLETED")
    );
    world.finish().await;
}

async fn a_pending_operation_past_the_callers_deadline_runs_nothing(store: Store) {
    let world = World::start(store).await;
    let client = world.client().await;
    // Another owner holds a long lease.
    let holder = client
        .claim(proto::ClaimRequest {
            lease: millis(10_000),
            ..claim_json(
                "orders.create",
                "order-15",
                r#"{"amount":1000,"currency":"EUR"}"#,
            )
        })
        .await
        .expect("claim");
    let Some(proto::claim_response::Outcome::Acquired(acquired)) = holder.outcome else {
        panic!("expected Acquired, got {holder:?}");
    };
    let operation_id = acquired.ownership.expect("ownership").operation_id;
    let operation = Operation {
        deadline: Duration::from_millis(500),
        ..order("order-15")
    };
    let refused = client
        .execute_once(&operation, |_| async { panic!("another owner holds it") })
        .await;
    let Err(Error::DeadlinePassed {
        operation_id: Some(pending),
        reason: proto::PendingReason::InProgress,
        ..
    }) = refused
    else {
        panic!("expected pending, got {refused:?}");
    };
    assert_eq!(pending, operation_id);
    world.finish().await;
}

async fn a_claim_reply_later_than_the_call_timeout_is_resent_with_the_same_claim_token(
    store: Store,
) {
    let world = World::start(store).await;
    let proxy = Proxy::start(world.addr()).await;
    // The Claim is handled at once, its reply held past the call's deadline:
    // the client gives up on it (DEADLINE_EXCEEDED) and re-sends.
    proxy.arm(1, ReplyFault::Delay(Duration::from_millis(1000)));
    let base = proxy.client(&world.token).await;
    let client = base.clone().with_config(idemd_client::ClientConfig {
        call_timeout: Duration::from_millis(400),
        ..base.config().clone()
    });
    let provider = Provider::default();
    let execution = client
        .execute_once(
            // The first Claim asks no server-side wait, which would
            // lengthen the call's deadline.
            &order("order-16"),
            |context| {
                let provider = provider.clone();
                async move {
                    Disposition::Success(result(provider.perform(context.operation_id())))
                }
            },
        )
        .await
        .expect("executed");
    assert!(proxy.responses() >= 3, "the Claim was re-sent");
    assert_eq!((execution.source, execution.attempt), (Source::Executed, 1));
    assert_eq!(provider.total(), 1);
    let events = history(&world.client().await, &execution.operation_id).await;
    assert_eq!(events, ["CLAIMED", "COMPLETED"], "{events:?}");
    world.finish().await;
}

async fn a_resent_claim_counts_its_attempt_from_the_answered_send(store: Store) {
    let world = World::start(store).await;
    let proxy = Proxy::start(world.addr()).await;
    // The first send's reply is held for 2 s (and the connection's replies
    // behind it): sends at 0 and ~0.8 s time out after 800 ms, and the one at
    // ~1.7 s is answered at ~2 s with what is left of the 3.5 s attempt at
    // its handling (~1.8 s). Counted from that send, the attempt ends at
    // ~3.5 s: plenty. Counted from the first send, it would end at ~1.8 s,
    // before the answer even arrived, and the attempt would be declined.
    proxy.arm(1, ReplyFault::Delay(Duration::from_secs(2)));
    let base = proxy.client(&world.token).await;
    let client = base.clone().with_config(idemd_client::ClientConfig {
        call_timeout: Duration::from_millis(800),
        ..base.config().clone()
    });
    let provider = Provider::default();
    let attempts = Arc::new(std::sync::Mutex::new(Vec::new()));
    let operation = Operation {
        lease: Duration::from_secs(3),
        attempt_duration: Some(Duration::from_millis(3_500)),
        ..order("order-17")
    };
    let execution = client
        .execute_once(&operation, recording_effect(&provider, &attempts))
        .await
        .expect("executed");
    assert!(proxy.responses() >= 3, "the Claim was re-sent");
    assert_eq!(*attempts.lock().expect("lock"), [1], "attempt 1 ran");
    assert_eq!(provider.total(), 1);
    let events: Vec<_> = history(&world.client().await, &execution.operation_id)
        .await
        .into_iter()
        .filter(|event| event != "RENEWED")
        .collect();
    assert_eq!(events, ["CLAIMED", "COMPLETED"], "{events:?}");
    world.finish().await;
}

/// Issue 17, item 1, scaled down: the earlier owner's charge lands just
/// before its attempt deadline while a takeover's slow lookup, started before
/// that deadline, is in flight; the lookup read the provider before the
/// charge landed and answers "not found" after the deadline. Trusting it
/// would charge again.
async fn a_negative_lookup_started_before_the_earlier_attempt_settled_does_not_count(store: Store) {
    let world = World::start(store).await;
    let client = world.client().await;
    let provider = Provider::default();
    let payload = r#"{"amount":1000,"currency":"EUR"}"#;
    let attempt_duration = Duration::from_secs(3);
    // The earlier owner holds a lease nearly as long as its attempt, sends
    // its charge and stalls.
    let earlier_sent = Instant::now();
    let earlier = client
        .claim(proto::ClaimRequest {
            lease: millis(2_300),
            max_attempt_duration: prost_types::Duration::try_from(attempt_duration).ok(),
            claim_token: b"stalled-owner".to_vec(),
            ..claim_json("orders.create", "order-18", payload)
        })
        .await
        .expect("claim");
    let Some(proto::claim_response::Outcome::Acquired(acquired)) = earlier.outcome else {
        panic!("expected Acquired, got {earlier:?}");
    };
    let operation_id = acquired.ownership.expect("ownership").operation_id;
    // Its charge lands 250 ms before its deadline (counted here from its
    // Claim's send, before the server's: legitimately in time).
    let earlier_deadline = earlier_sent + attempt_duration;
    let landing = earlier_deadline - Duration::from_millis(250);
    tokio::spawn({
        let (provider, operation_id) = (provider.clone(), operation_id.clone());
        async move {
            tokio::time::sleep_until(landing).await;
            provider.perform(&operation_id);
        }
    });
    // This call comes once the earlier lease has run out, 600 ms before the
    // earlier deadline; each lookup reads the provider as it starts and
    // answers 1 s later.
    tokio::time::sleep_until(earlier_sent + Duration::from_millis(2_400)).await;
    let lookups = Arc::new(std::sync::Mutex::new(Vec::new()));
    let runs = Arc::new(AtomicUsize::new(0));
    let operation = Operation {
        lease: Duration::from_secs(3),
        ..order("order-18")
    };
    let execution = client
        .execute_once_with_lookup(
            &operation,
            |context| {
                let (provider, lookups) = (provider.clone(), lookups.clone());
                async move {
                    let read_at = Instant::now();
                    let found = provider.find(context.operation_id());
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    lookups
                        .lock()
                        .expect("lock")
                        .push((read_at, Instant::now(), found.is_some()));
                    found.map(|body| Disposition::Success(result(body)))
                }
            },
            |context| {
                let (provider, runs) = (provider.clone(), runs.clone());
                async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    Disposition::Success(result(provider.perform(context.operation_id())))
                }
            },
        )
        .await
        .expect("reconciled");
    let lookups = lookups.lock().expect("lock").clone();
    // The scene as set: the first lookup straddled the landing and the
    // earlier deadline (else this test proves nothing).
    let (read_at, answered_at, found) = lookups[0];
    assert!(
        read_at < landing && answered_at > earlier_deadline && !found,
        "the first lookup read at {:?} and answered at {:?} after the earlier Claim; \
         the charge landed at {:?}, the deadline was at {:?}",
        read_at - earlier_sent,
        answered_at - earlier_sent,
        landing - earlier_sent,
        attempt_duration
    );
    assert_eq!(provider.total(), 1, "one charge: the earlier owner's");
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the effect never ran");
    assert_eq!(execution.source, Source::Reconciled);
    assert_eq!(execution.operation_id, operation_id);
    assert_eq!(
        Some(succeeded(&execution)),
        provider.find(&operation_id),
        "the takeover recorded the earlier charge"
    );
    assert_eq!(lookups.len(), 2, "asked again once, after the deadline");
    world.finish().await;
}

/// The earlier attempt's deadline the server tells a takeover now, as a
/// local instant (counted from the reply).
async fn doubt_told_now(client: &idemd_client::Client, key: &str) -> (Instant, u64) {
    let response = client
        .claim(proto::ClaimRequest {
            claim_token: b"a-later-takeover".to_vec(),
            ..claim_json("orders.create", key, r#"{"amount":1000,"currency":"EUR"}"#)
        })
        .await
        .expect("claim");
    let received_at = Instant::now();
    let Some(proto::claim_response::Outcome::ReconcileFirst(reconcile_first)) = response.outcome
    else {
        panic!("expected a takeover, got {response:?}");
    };
    let left = reconcile_first
        .previous_attempt_deadline
        .and_then(|left| Duration::try_from(left).ok())
        .expect("previous_attempt_deadline");
    (received_at + left, reconcile_first.previous_fence)
}

async fn a_takeover_without_a_lookup_or_provider_deduplication_runs_nothing_and_keeps_the_doubt(
    store: Store,
) {
    let world = World::start(store).await;
    let client = world.client().await;
    let provider = Provider::default();
    let attempt_duration = Duration::from_secs(5);
    let crashed_sent = Instant::now();
    let crashed = crashed_attempt(&client, "order-19", attempt_duration, 0).await;
    // Well after the crash, so that this call's own attempt would end a
    // second later than the crashed one.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let runs = Arc::new(AtomicUsize::new(0));
    let refused = client
        .execute_once(&order("order-19"), |context| {
            let (provider, runs) = (provider.clone(), runs.clone());
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Disposition::Success(result(provider.perform(context.operation_id())))
            }
        })
        .await;
    let Err(
        error @ Error::OutcomeUnknown {
            because: UnknownBecause::EarlierAttemptUnchecked,
            attempt: 2,
            ..
        },
    ) = &refused
    else {
        panic!("expected an unchecked takeover, got {refused:?}");
    };
    assert_eq!(error.operation_id(), Some(crashed.operation_id.as_str()));
    let message = error.to_string();
    for advice in [
        "cannot check it",
        "pass a lookup",
        "declare provider deduplication",
        "reconcile the operation",
    ] {
        assert!(message.contains(advice), "{message}");
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0, "nothing ran");
    assert_eq!(provider.total(), 0);
    let entries = history_entries(&client, &crashed.operation_id).await;
    let events: Vec<_> = entries.iter().map(|entry| entry.event.as_str()).collect();
    assert_eq!(
        events,
        ["CLAIMED", "TAKEN_OVER", "OUTCOME_UNKNOWN"],
        "{entries:#?}"
    );
    assert_eq!(
        entries[2].detail, "not_started",
        "declined: Fail NOT_STARTED"
    );
    let stored = client
        .lookup_operation(&crashed.operation_id)
        .await
        .expect("lookup");
    assert_eq!(stored.state(), OperationState::Unknown);
    // The doubt is still the crashed attempt's, not the declining one's.
    let (told, _) = doubt_told_now(&client, "order-19").await;
    let crashed_deadline = crashed_sent + attempt_duration;
    assert!(
        told <= crashed_deadline + Duration::from_millis(300),
        "the doubt was pushed {:?} past the crashed attempt's deadline",
        told.saturating_duration_since(crashed_deadline)
    );
    world.finish().await;
}

async fn a_takeover_with_provider_deduplication_declared_runs_the_effect(store: Store) {
    let world = World::start(store).await;
    let client = world.client().await;
    let provider = Provider::default();
    let crashed = crashed_attempt(&client, "order-20", Duration::from_secs(5), 0).await;
    let told = Arc::new(std::sync::Mutex::new(None));
    let operation = Operation {
        provider_deduplicates: true,
        ..order("order-20")
    };
    let execution = client
        .execute_once(&operation, |context| {
            let (provider, told) = (provider.clone(), told.clone());
            async move {
                *told.lock().expect("lock") = context.previous_outcome_unknown().cloned();
                // The provider honours the operation_id as its key.
                Disposition::Success(result(provider.perform(context.operation_id())))
            }
        })
        .await
        .expect("executed");
    assert_eq!(execution.source, Source::Executed);
    assert_eq!(
        (execution.operation_id.as_str(), execution.attempt),
        (crashed.operation_id.as_str(), 2)
    );
    let told = told
        .lock()
        .expect("lock")
        .clone()
        .expect("told the earlier outcome is unknown");
    assert_eq!(told.fence, crashed.fence);
    assert_eq!(provider.total(), 1);
    world.finish().await;
}

async fn a_lookup_that_cannot_tell_declines_and_keeps_the_doubt(store: Store) {
    let world = World::start(store).await;
    let client = world.client().await;
    let crashed = crashed_attempt(&client, "order-21", Duration::from_secs(5), 0).await;
    let refused = client
        .execute_once_with_lookup(
            &order("order-21"),
            |_| async {
                Some(Disposition::Unknown(proto::OperationError {
                    code: "provider_unreachable".into(),
                    ..Default::default()
                }))
            },
            |_| async { panic!("nothing may run") },
        )
        .await;
    assert!(
        matches!(
            &refused,
            Err(Error::OutcomeUnknown {
                because: UnknownBecause::LookupInconclusive,
                ..
            })
        ),
        "{refused:?}"
    );
    let entries = history_entries(&client, &crashed.operation_id).await;
    assert_eq!(
        entries
            .last()
            .map(|entry| (entry.event.as_str(), entry.detail.as_str())),
        Some(("OUTCOME_UNKNOWN", "not_started")),
        "{entries:#?}"
    );
    world.finish().await;
}

async fn an_effect_that_panics_is_reported_unknown_and_the_panic_resumes(store: Store) {
    let world = World::start(store).await;
    let client = world.client().await;
    let provider = Provider::default();
    let operation_id = Arc::new(std::sync::Mutex::new(String::new()));
    let run = tokio::spawn({
        let (client, provider, operation_id) =
            (client.clone(), provider.clone(), operation_id.clone());
        async move {
            client
                .execute_once(&order("order-20"), |context| {
                    let (provider, operation_id) = (provider.clone(), operation_id.clone());
                    async move {
                        *operation_id.lock().expect("lock") = context.operation_id().to_owned();
                        provider.perform(context.operation_id());
                        panic!("the effect panicked after the provider took it")
                    }
                })
                .await
        }
    });
    let panicked = run.await.expect_err("the panic resumes");
    assert!(panicked.is_panic(), "{panicked:?}");
    let operation_id = operation_id.lock().expect("lock").clone();
    // Reported before the panic resumed: the next owner reconciles first.
    let stored = client
        .lookup_operation(&operation_id)
        .await
        .expect("lookup");
    assert_eq!(stored.state(), OperationState::Unknown);
    let entries = history_entries(&client, &operation_id).await;
    let unknown = entries
        .iter()
        .find(|entry| entry.event == "OUTCOME_UNKNOWN")
        .unwrap_or_else(|| panic!("reported UNKNOWN: {entries:#?}"));
    assert_eq!(unknown.detail, "effect_raised");
    assert_eq!(provider.total(), 1);
    world.finish().await;
}
