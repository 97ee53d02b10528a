//! `examples/charge_once.rs` against a real server, on every store: the very
//! functions the example's `main` calls, so the example cannot rot. They count
//! the simulated provider's charges, not successful responses.

use std::time::Duration;

use idemd::proto::{self, claim_response::Outcome};

use crate::harness::*;

#[path = "../../examples/charge_once.rs"]
#[expect(
    dead_code,
    reason = "the example's main and its flags run only as the example"
)]
mod charge_once;

use charge_once::{Ending, Intent, SimulatedProvider, Takeover, charge_once};
use tokio::time::Instant;

fn intent(key: &str) -> Intent {
    Intent {
        operation: "payments.charge".into(),
        key: key.into(),
        json_payload: r#"{"amount":1000,"currency":"EUR"}"#.into(),
        lease: Duration::from_millis(300),
    }
}

/// An attempt that claimed the intent and then crashed: it never completes,
/// but what it sent the provider may land until its deadline,
/// `attempt_duration` after its Claim.
async fn crashed_attempt(
    world: &World,
    intent: &Intent,
    attempt_duration: Duration,
) -> proto::Ownership {
    let mut client = world.client().await;
    let response = client
        .claim(authorized(
            &world.tenant_a,
            proto::ClaimRequest {
                lease: millis(50),
                max_attempt_duration: millis(attempt_duration.as_millis() as u64),
                claim_token: b"crashed-attempt".to_vec(),
                ..claim_json(&intent.operation, &intent.key, &intent.json_payload)
            },
        ))
        .await
        .expect("claim")
        .into_inner();
    let Some(Outcome::Acquired(acquired)) = response.outcome else {
        panic!("expected Acquired, got {response:?}");
    };
    acquired.ownership.expect("ownership")
}

async fn charge_once_charges_once_renews_while_charging_and_replays_the_retry(backend: Backend) {
    let world = World::start(backend).await;
    let client = world.client().await;
    // The charge outlasts the lease more than twice: only renewals keep it.
    let provider = SimulatedProvider::new(Duration::from_millis(800));
    let intent = intent("order-7");

    let first = tokio::spawn({
        let (client, token, intent, provider) = (
            client.clone(),
            world.tenant_a.clone(),
            intent.clone(),
            provider.clone(),
        );
        async move { charge_once(&client, &token, &intent, &provider, Takeover::LookUpFirst).await }
    });
    tokio::time::sleep(Duration::from_millis(600)).await;
    let mut other = world.client().await;
    let meanwhile = other
        .claim(authorized(
            &world.tenant_a,
            claim_json(&intent.operation, &intent.key, &intent.json_payload),
        ))
        .await
        .expect("claim")
        .into_inner();
    assert_eq!(
        outcome_name(&meanwhile),
        "pending",
        "past its first lease, the running charge still holds the operation"
    );

    let first = first.await.expect("task").expect("the protocol answers");
    let Ending::Recorded {
        operation_id,
        body,
        charged: true,
    } = first
    else {
        panic!("expected a recorded charge, got {first:?}");
    };
    let retry = charge_once(
        &client,
        &world.tenant_a,
        &intent,
        &provider,
        Takeover::LookUpFirst,
    )
    .await
    .expect("the protocol answers");
    let Ending::Replayed(completed) = retry else {
        panic!("expected a replay, got {retry:?}");
    };
    assert_eq!(completed.operation_id, operation_id);
    assert_eq!(
        completed.outcome,
        Some(proto::completed::Outcome::Result(proto::Result {
            body,
            content_type: "application/json".into(),
            metadata: Default::default(),
        }))
    );
    assert_eq!(provider.charges(), 1);

    let mut lookups = world.client().await;
    let events = events(&history(&mut lookups, &world.tenant_a, &operation_id).await);
    assert_eq!(events.first().map(String::as_str), Some("CLAIMED"));
    assert!(events.iter().any(|event| event == "RENEWED"), "{events:?}");
    assert_eq!(events.last().map(String::as_str), Some("COMPLETED"));
}

async fn charge_once_after_a_crash_that_charged_records_that_charge_without_charging_again(
    backend: Backend,
) {
    let world = World::start(backend).await;
    let client = world.client().await;
    let provider = SimulatedProvider::new(Duration::from_millis(10));
    let intent = intent("order-8");
    let crashed = crashed_attempt(&world, &intent, Duration::from_secs(5)).await;
    let charged_before_the_crash = provider.charge(&intent.key).await;
    tokio::time::sleep(Duration::from_millis(100)).await; // its lease expires

    let ending = charge_once(
        &client,
        &world.tenant_a,
        &intent,
        &provider,
        Takeover::LookUpFirst,
    )
    .await
    .expect("the protocol answers");
    assert_eq!(
        ending,
        Ending::Recorded {
            operation_id: crashed.operation_id.clone(),
            body: charged_before_the_crash,
            charged: false,
        }
    );
    assert_eq!(provider.charges(), 1);
    let mut lookups = world.client().await;
    assert_eq!(
        events(&history(&mut lookups, &world.tenant_a, &crashed.operation_id).await),
        ["CLAIMED", "TAKEN_OVER", "COMPLETED"]
    );
}

async fn charge_once_after_a_crash_that_never_charged_charges_once(backend: Backend) {
    let world = World::start(backend).await;
    let client = world.client().await;
    let provider = SimulatedProvider::new(Duration::from_millis(10));
    let intent = intent("order-9");
    let attempt_duration = Duration::from_secs(1);
    let crashed_sent = Instant::now();
    let crashed = crashed_attempt(&world, &intent, attempt_duration).await;
    tokio::time::sleep(Duration::from_millis(100)).await; // its lease expires

    let ending = charge_once(
        &client,
        &world.tenant_a,
        &intent,
        &provider,
        Takeover::LookUpFirst,
    )
    .await
    .expect("the protocol answers");
    assert!(
        matches!(&ending, Ending::Recorded { operation_id, charged: true, .. }
            if *operation_id == crashed.operation_id),
        "{ending:?}"
    );
    // "Not found" counted only from a lookup after the crashed attempt's
    // deadline: until then its charge could still have landed.
    assert!(Instant::now() >= crashed_sent + attempt_duration);
    let retry = charge_once(
        &client,
        &world.tenant_a,
        &intent,
        &provider,
        Takeover::LookUpFirst,
    )
    .await
    .expect("the protocol answers");
    assert!(matches!(retry, Ending::Replayed(_)), "{retry:?}");
    assert_eq!(provider.charges(), 1);
}

async fn charge_once_with_a_deduplicating_provider_charges_at_once_after_a_crash(backend: Backend) {
    let world = World::start(backend).await;
    let client = world.client().await;
    let provider = SimulatedProvider::deduplicating(Duration::from_millis(10));
    let intent = intent("order-10");
    let attempt_duration = Duration::from_secs(5);
    let crashed_sent = Instant::now();
    let crashed = crashed_attempt(&world, &intent, attempt_duration).await;
    let charged_before_the_crash = provider.charge(&intent.key).await;
    tokio::time::sleep(Duration::from_millis(100)).await; // its lease expires

    let ending = charge_once(
        &client,
        &world.tenant_a,
        &intent,
        &provider,
        Takeover::ProviderDeduplicates,
    )
    .await
    .expect("the protocol answers");
    // Charged again at once, without waiting out the crashed attempt: the
    // provider answered with the earlier charge.
    assert!(Instant::now() < crashed_sent + attempt_duration - Duration::from_secs(1));
    assert!(
        matches!(&ending, Ending::Recorded { operation_id, body, .. }
            if *operation_id == crashed.operation_id && *body == charged_before_the_crash),
        "{ending:?}"
    );
    assert_eq!(provider.charges(), 1);
}

store_tests!(
    charge_once_charges_once_renews_while_charging_and_replays_the_retry,
    charge_once_after_a_crash_that_charged_records_that_charge_without_charging_again,
    charge_once_after_a_crash_that_never_charged_charges_once,
    charge_once_with_a_deduplicating_provider_charges_at_once_after_a_crash,
);
