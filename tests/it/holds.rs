//! Holds (issue 23, item 3): an administrator stops new owners of an
//! operation name, or of a whole tenant, while replays, the owners already
//! running and reconciliation go on; nothing is deleted, every hold and
//! release is audited, and once released every held caller gets through,
//! each intent executed once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use idemd::proto;
use idemd::proto::reconcile_request::Resolution;
use tonic::Code;

use crate::harness::*;

store_tests!(
    a_hold_stops_new_owners_while_replays_owners_and_reconcilers_go_on,
    a_whole_tenant_is_held_and_other_tenants_are_not,
    a_hold_and_release_under_load_lose_nothing_and_start_nothing_while_held,
);

const CHARGE: &str = "payments.charge";
const CHARGED: &str = r#"{"charge":"ch_1"}"#;

fn hold(operation: &str, retry_after_ms: u64) -> proto::HoldRequest {
    proto::HoldRequest {
        operation: operation.into(),
        reason: "duplicates still occur: incident 42".into(),
        retry_after: millis(retry_after_ms),
        ..Default::default()
    }
}

fn release(operation: &str) -> proto::ReleaseRequest {
    proto::ReleaseRequest {
        operation: operation.into(),
        reason: "drained and reconciled".into(),
        ..Default::default()
    }
}

fn charge(key: &str) -> proto::ClaimRequest {
    claim_json(CHARGE, key, r#"{"amount": 1200}"#)
}

fn pending_held(response: &proto::ClaimResponse) -> Option<&proto::Pending> {
    match &response.outcome {
        Some(proto::claim_response::Outcome::Pending(pending))
            if pending.reason() == proto::PendingReason::Held =>
        {
            Some(pending)
        }
        _ => None,
    }
}

async fn claim(
    client: &mut Client,
    token: &str,
    request: proto::ClaimRequest,
) -> proto::ClaimResponse {
    client
        .claim(authorized(token, request))
        .await
        .expect("claim")
        .into_inner()
}

async fn a_hold_stops_new_owners_while_replays_owners_and_reconcilers_go_on(backend: Backend) {
    let world = World::start(backend).await;
    let token = world.tenant_a.clone();
    let admin = add_token(world.store.as_ref(), "tenant-a", "ops-admin", "admin").await;
    let mut client = world.client().await;

    // Before the hold: one operation done, one running, one whose lease
    // runs out while held, one in doubt.
    let done = claim_owned(&mut client, &token, charge("done")).await;
    complete(&mut client, &token, &done, CHARGED).await;
    let running = claim_owned(&mut client, &token, charge("running")).await;
    let stale = claim_owned(
        &mut client,
        &token,
        proto::ClaimRequest {
            lease: millis(100),
            ..charge("stale")
        },
    )
    .await;
    let doubt = claim_owned(&mut client, &token, charge("doubt")).await;
    fail_unknown(&mut client, &token, &doubt).await;

    // Only an admin holds.
    let refused = client
        .hold(authorized(&token, hold(CHARGE, 5_000)))
        .await
        .expect_err("not an admin");
    assert_eq!(refused.code(), Code::PermissionDenied);
    let held = client
        .hold(authorized(&admin, hold(CHARGE, 5_000)))
        .await
        .expect("hold")
        .into_inner();
    assert!(!held.already_held);
    let in_force = held.hold.expect("hold");
    assert_eq!(
        (in_force.tenant.as_str(), in_force.operation.as_str()),
        ("tenant-a", CHARGE)
    );
    assert!(in_force.held_by.contains("ops-admin"), "{in_force:?}");

    // A new intent: Pending (HELD), and nothing is created.
    let fresh = claim(&mut client, &token, charge("fresh")).await;
    let pending = pending_held(&fresh).unwrap_or_else(|| panic!("held: {fresh:?}"));
    assert_eq!(pending.operation_id, "");
    assert_eq!(pending.retry_after, millis(5_000));
    let missing = client
        .lookup(authorized(
            &token,
            proto::LookupRequest {
                target: Some(proto::lookup_request::Target::Scope(proto::Scope {
                    operation: CHARGE.into(),
                    key: "fresh".into(),
                })),
                ..Default::default()
            },
        ))
        .await
        .expect_err("nothing was created");
    assert_eq!(missing.code(), Code::NotFound);

    // Replays go on; so does the owner already running; and other names.
    assert_eq!(
        outcome_name(&claim(&mut client, &token, charge("done")).await),
        "completed"
    );
    complete(&mut client, &token, &running, CHARGED).await;
    let other = claim(
        &mut client,
        &token,
        claim_json("orders.ship", "o-1", r#"{"order": 1}"#),
    )
    .await;
    assert_eq!(outcome_name(&other), "acquired");

    // A lease that ran out is not taken over while held.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let takeover = claim(&mut client, &token, charge("stale")).await;
    assert!(pending_held(&takeover).is_some(), "{takeover:?}");
    let pending = match &takeover.outcome {
        Some(proto::claim_response::Outcome::Pending(pending)) => pending,
        other => panic!("{other:?}"),
    };
    assert_eq!(pending.operation_id, stale.operation_id);

    // Reconciliation goes on.
    client
        .reconcile(authorized(
            &token,
            proto::ReconcileRequest {
                operation_id: doubt.operation_id.clone(),
                expected_fence: doubt.fence,
                resolution: Some(Resolution::Succeeded(proto::Result::default())),
                ..Default::default()
            },
        ))
        .await
        .expect("reconcile while held");

    // Holding again keeps the first hold; both credentials list it.
    let again = client
        .hold(authorized(&admin, hold(CHARGE, 1_000)))
        .await
        .expect("hold again")
        .into_inner();
    assert!(again.already_held);
    assert_eq!(again.hold.expect("hold").retry_after, millis(5_000));
    for reader in [&admin, &token] {
        let listed = client
            .list_holds(authorized(reader, proto::ListHoldsRequest::default()))
            .await
            .expect("list")
            .into_inner();
        assert_eq!(listed.holds.len(), 1, "{listed:?}");
    }

    // Released: new owners again, the stale lease taken over.
    let released = client
        .release(authorized(&admin, release(CHARGE)))
        .await
        .expect("release")
        .into_inner();
    assert_eq!(released.released.expect("hold").operation, CHARGE);
    assert_eq!(
        outcome_name(&claim(&mut client, &token, charge("fresh")).await),
        "acquired"
    );
    assert_eq!(
        outcome_name(&claim(&mut client, &token, charge("stale")).await),
        "reconcile_first"
    );
    let twice = client
        .release(authorized(&admin, release(CHARGE)))
        .await
        .expect_err("nothing held");
    assert_eq!(twice.code(), Code::NotFound);

    // Both are in the audit log, with who and why.
    let audit = world
        .store
        .credentials()
        .audit_log(Some("tenant-a"), 100)
        .await
        .expect("audit");
    let holds: Vec<(&str, Option<&str>, Option<&str>)> = audit
        .iter()
        .filter(|entry| entry.action.starts_with("hold."))
        .map(|entry| {
            (
                entry.action.as_str(),
                entry.target.as_deref(),
                entry.reason.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        holds,
        [
            (
                "hold.set",
                Some(CHARGE),
                Some("duplicates still occur: incident 42")
            ),
            ("hold.release", Some(CHARGE), Some("drained and reconciled")),
        ]
    );
    assert!(
        audit
            .iter()
            .filter(|entry| entry.action.starts_with("hold."))
            .all(|entry| entry.actor.contains("ops-admin")),
        "{audit:?}"
    );
}

async fn a_whole_tenant_is_held_and_other_tenants_are_not(backend: Backend) {
    let world = World::start(backend).await;
    let admin = add_token(world.store.as_ref(), "tenant-a", "ops-admin", "admin").await;
    let mut client = world.client().await;
    client
        .hold(authorized(&admin, hold("", 1_000)))
        .await
        .expect("hold the tenant");
    for operation in [CHARGE, "orders.ship"] {
        let answer = claim(
            &mut client,
            &world.tenant_a,
            claim_json(operation, "k", "{}"),
        )
        .await;
        assert!(pending_held(&answer).is_some(), "{operation}: {answer:?}");
    }
    let elsewhere = claim(&mut client, &world.tenant_b, charge("k")).await;
    assert_eq!(outcome_name(&elsewhere), "acquired");
    // A bad request changes nothing: a name that is not one, no reason.
    let bad = client
        .hold(authorized(
            &admin,
            proto::HoldRequest {
                operation: "payments charge!".into(),
                ..Default::default()
            },
        ))
        .await
        .expect_err("invalid");
    assert_eq!(bad.code(), Code::InvalidArgument);
    let listed = client
        .list_holds(authorized(&admin, proto::ListHoldsRequest::default()))
        .await
        .expect("list")
        .into_inner();
    assert_eq!(listed.holds.len(), 1);
    assert_eq!(listed.holds[0].operation, "");
    client
        .release(authorized(&admin, release("")))
        .await
        .expect("release");
    let after = claim(&mut client, &world.tenant_a, charge("k")).await;
    assert_eq!(outcome_name(&after), "acquired");
}

/// Callers keep executing intents (claim, effect, complete; Pending: wait
/// and claim again) while an admin holds and releases their operation name.
/// No Claim sent after the hold answered, and answered before the release
/// was sent, makes an owner; every intent is executed exactly once in the
/// end.
async fn a_hold_and_release_under_load_lose_nothing_and_start_nothing_while_held(backend: Backend) {
    const WORKERS: usize = 8;
    const INTENTS_PER_WORKER: usize = 12;
    let world = World::start(backend).await;
    let admin = add_token(world.store.as_ref(), "tenant-a", "ops-admin", "admin").await;
    let effects: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    // (sent, answered) of every Claim that made an owner.
    let owners: Arc<Mutex<Vec<(Instant, Instant)>>> = Arc::default();
    let held_answers = Arc::new(Mutex::new(0_u32));
    let started = Instant::now();

    let mut clients = Vec::new();
    for _ in 0..WORKERS {
        clients.push(world.client().await);
    }
    let workers: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(worker, mut client)| {
            let (effects, owners, held_answers) =
                (effects.clone(), owners.clone(), held_answers.clone());
            let token = world.tenant_a.clone();
            tokio::spawn(async move {
                for intent in 0..INTENTS_PER_WORKER {
                    let key = format!("w{worker}-i{intent}");
                    loop {
                        let sent = Instant::now();
                        let answer = claim(&mut client, &token, charge(&key)).await;
                        let answered = Instant::now();
                        if let Some(owned) = ownership(&answer) {
                            owners.lock().expect("owners").push((sent, answered));
                            *effects
                                .lock()
                                .expect("effects")
                                .entry(key.clone())
                                .or_default() += 1;
                            tokio::time::sleep(Duration::from_millis(5)).await;
                            complete(&mut client, &token, owned, CHARGED).await;
                            break;
                        }
                        match outcome_name(&answer) {
                            "completed" => break,
                            "pending" => {
                                if pending_held(&answer).is_some() {
                                    *held_answers.lock().expect("held") += 1;
                                }
                                tokio::time::sleep(Duration::from_millis(20)).await;
                            }
                            other => panic!("{key}: {other}: {answer:?}"),
                        }
                    }
                }
            })
        })
        .collect();

    let mut admin_client = world.client().await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    admin_client
        .hold(authorized(&admin, hold(CHARGE, 20)))
        .await
        .expect("hold");
    let held_at = Instant::now();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let releasing_at = Instant::now();
    admin_client
        .release(authorized(&admin, release(CHARGE)))
        .await
        .expect("release");
    for worker in workers {
        worker.await.expect("worker");
    }

    let effects = effects.lock().expect("effects");
    assert_eq!(
        effects.len(),
        WORKERS * INTENTS_PER_WORKER,
        "every intent ran"
    );
    assert!(effects.values().all(|&count| count == 1), "{effects:?}");
    let owners = owners.lock().expect("owners");
    let made_while_held = owners
        .iter()
        .filter(|(sent, answered)| *sent > held_at && *answered < releasing_at)
        .count();
    assert_eq!(made_while_held, 0, "an owner was made while held");
    assert!(
        *held_answers.lock().expect("held") > 0,
        "the hold was met (the workers outran it: {:?})",
        started.elapsed()
    );
}
