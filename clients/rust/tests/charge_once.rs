//! examples/charge_once.rs (the repository's example of the client
//! protocol) against the real `idemd` binary, on both stores: the very
//! functions the example's `main` calls, so the example cannot rot. They
//! count the simulated provider's charges, not successful responses.
#![allow(unreachable_pub)] // the example's items are `pub` for this test

mod support;

#[path = "../../../examples/charge_once.rs"]
#[expect(
    dead_code,
    reason = "the example's main and its flags run only as the example"
)]
mod charge_once;

use std::time::Duration;

use charge_once::{Intent, SimulatedProvider, Takeover, charge_once};
use idemd_client::{Execution, Outcome, Source, proto};
use support::*;
use tokio::time::Instant;

both_stores!(
    charge_once_charges_once_renews_while_charging_and_replays_the_retry,
    charge_once_after_a_crash_that_charged_records_that_charge_without_charging_again,
    charge_once_after_a_crash_that_never_charged_charges_once,
    charge_once_with_a_deduplicating_provider_charges_at_once_after_a_crash,
);

fn intent(key: &str) -> Intent {
    Intent {
        operation: "payments.charge".into(),
        key: key.into(),
        json_payload: r#"{"amount":1000,"currency":"EUR"}"#.into(),
        lease: Duration::from_millis(300),
    }
}

fn charged(execution: &Execution) -> Vec<u8> {
    match &execution.outcome {
        Outcome::Succeeded(result) => result.body.clone(),
        Outcome::Failed(error) => panic!("expected a charge, got {error:?}"),
    }
}

async fn events(client: &idemd_client::Client, operation_id: &str) -> Vec<String> {
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
        .into_iter()
        .map(|entry| entry.event)
        .collect()
}

/// An attempt that claimed the intent and then crashed: it never completes,
/// but what it sent the provider may land until its deadline,
/// `attempt_duration` after its Claim.
async fn crashed_attempt(
    client: &idemd_client::Client,
    intent: &Intent,
    attempt_duration: Duration,
) -> proto::Ownership {
    let response = client
        .claim(proto::ClaimRequest {
            lease: millis(50),
            max_attempt_duration: prost_types::Duration::try_from(attempt_duration).ok(),
            claim_token: b"crashed-attempt".to_vec(),
            ..claim_json(&intent.operation, &intent.key, &intent.json_payload)
        })
        .await
        .expect("claim");
    let Some(proto::claim_response::Outcome::Acquired(acquired)) = response.outcome else {
        panic!("expected Acquired, got {response:?}");
    };
    acquired.ownership.expect("ownership")
}

async fn charge_once_charges_once_renews_while_charging_and_replays_the_retry(store: Store) {
    let world = World::start(store).await;
    let client = world.client().await;
    // The charge outlasts the lease more than twice: only renewals keep it.
    let provider = SimulatedProvider::new(Duration::from_millis(800));
    let intent = intent("order-7");

    let first = tokio::spawn({
        let (client, intent, provider) = (client.clone(), intent.clone(), provider.clone());
        async move { charge_once(&client, &intent, &provider, Takeover::LookUpFirst).await }
    });
    tokio::time::sleep(Duration::from_millis(600)).await;
    let meanwhile = world
        .client()
        .await
        .claim(claim_json(
            &intent.operation,
            &intent.key,
            &intent.json_payload,
        ))
        .await
        .expect("claim");
    assert!(
        matches!(
            meanwhile.outcome,
            Some(proto::claim_response::Outcome::Pending(_))
        ),
        "past its first lease, the running charge still holds the operation: {meanwhile:?}"
    );

    let first = first.await.expect("task").expect("executed");
    assert_eq!((first.source, first.attempt), (Source::Executed, 1));
    let retry = charge_once(&client, &intent, &provider, Takeover::LookUpFirst)
        .await
        .expect("replayed");
    assert_eq!(retry.source, Source::Replayed);
    assert_eq!(retry.operation_id, first.operation_id);
    assert_eq!(charged(&retry), charged(&first));
    assert_eq!(provider.charges(), 1);

    let events = events(&client, &first.operation_id).await;
    assert_eq!(events.first().map(String::as_str), Some("CLAIMED"));
    assert!(events.iter().any(|event| event == "RENEWED"), "{events:?}");
    assert_eq!(events.last().map(String::as_str), Some("COMPLETED"));
    world.finish().await;
}

async fn charge_once_after_a_crash_that_charged_records_that_charge_without_charging_again(
    store: Store,
) {
    let world = World::start(store).await;
    let client = world.client().await;
    let provider = SimulatedProvider::new(Duration::from_millis(10));
    let intent = intent("order-8");
    let crashed = crashed_attempt(&client, &intent, Duration::from_secs(5)).await;
    let charged_before_the_crash = provider.charge(&crashed.operation_id).await;
    tokio::time::sleep(Duration::from_millis(100)).await; // its lease expires

    let execution = charge_once(&client, &intent, &provider, Takeover::LookUpFirst)
        .await
        .expect("recorded");
    assert_eq!(execution.operation_id, crashed.operation_id);
    assert_eq!(execution.source, Source::Reconciled);
    assert_eq!(charged(&execution), charged_before_the_crash);
    assert_eq!(provider.charges(), 1);
    assert_eq!(
        events(&client, &crashed.operation_id).await,
        ["CLAIMED", "TAKEN_OVER", "COMPLETED"]
    );
    world.finish().await;
}

async fn charge_once_after_a_crash_that_never_charged_charges_once(store: Store) {
    let world = World::start(store).await;
    let client = world.client().await;
    let provider = SimulatedProvider::new(Duration::from_millis(10));
    let intent = intent("order-9");
    let attempt_duration = Duration::from_secs(1);
    let crashed_sent = Instant::now();
    let crashed = crashed_attempt(&client, &intent, attempt_duration).await;
    tokio::time::sleep(Duration::from_millis(100)).await; // its lease expires

    let execution = charge_once(&client, &intent, &provider, Takeover::LookUpFirst)
        .await
        .expect("executed");
    assert_eq!(execution.operation_id, crashed.operation_id);
    assert_eq!(execution.source, Source::Executed);
    // "Not found" counted only from a lookup after the crashed attempt's
    // deadline: until then its charge could still have landed.
    assert!(Instant::now() >= crashed_sent + attempt_duration);
    let retry = charge_once(&client, &intent, &provider, Takeover::LookUpFirst)
        .await
        .expect("replayed");
    assert_eq!(retry.source, Source::Replayed);
    assert_eq!(provider.charges(), 1);
    world.finish().await;
}

async fn charge_once_with_a_deduplicating_provider_charges_at_once_after_a_crash(store: Store) {
    let world = World::start(store).await;
    let client = world.client().await;
    let provider = SimulatedProvider::deduplicating(Duration::from_millis(10));
    let intent = intent("order-10");
    let attempt_duration = Duration::from_secs(5);
    let crashed_sent = Instant::now();
    let crashed = crashed_attempt(&client, &intent, attempt_duration).await;
    let charged_before_the_crash = provider.charge(&crashed.operation_id).await;
    tokio::time::sleep(Duration::from_millis(100)).await; // its lease expires

    let execution = charge_once(&client, &intent, &provider, Takeover::ProviderDeduplicates)
        .await
        .expect("executed");
    // Charged again at once, without waiting out the crashed attempt: the
    // provider answered with the earlier charge.
    assert!(Instant::now() < crashed_sent + attempt_duration - Duration::from_secs(1));
    assert_eq!(execution.operation_id, crashed.operation_id);
    assert_eq!(execution.source, Source::Executed);
    assert_eq!(charged(&execution), charged_before_the_crash);
    assert_eq!(provider.charges(), 1);
    world.finish().await;
}
