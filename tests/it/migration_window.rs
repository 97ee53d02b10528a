//! A rolling deployment that changes how a request is normalised (issue 21,
//! item 5): the old version claimed operations under one fingerprint, the new
//! one computes another for the same intent and sends the old one in
//! `previous_fingerprints`. Its retries replay, resume or take over instead of
//! conflicting; a genuinely different request still conflicts; a malformed
//! previous fingerprint is refused and changes nothing.

use idemd::domain::fingerprint;
use idemd::proto;
use idemd::proto::claim_response::Outcome;
use tonic::Code;

use crate::harness::*;

store_tests!(
    retries_of_the_old_normalisation_replay_or_take_over_instead_of_conflicting,
    a_different_request_conflicts_and_a_bad_previous_fingerprint_changes_nothing,
);

const OPERATION: &str = "payments.charge";

/// The old version's request: no currency.
fn old_json(amount: u32) -> String {
    format!(r#"{{"amount": {amount}}}"#)
}

/// The new version's normalisation of the same intent: the default currency
/// now written out, so the canonical JSON (and the fingerprint) differ.
fn new_json(amount: u32) -> String {
    format!(r#"{{"amount": {amount}, "currency": "EUR"}}"#)
}

/// What the new version sends: its own JSON, and the fingerprint the old
/// version's normalisation gives.
fn new_version_claim(key: &str, amount: u32) -> proto::ClaimRequest {
    let previous = fingerprint::of_json(&old_json(amount)).expect("I-JSON");
    proto::ClaimRequest {
        previous_fingerprints: vec![previous.0.to_vec()],
        ..claim_json(OPERATION, key, &new_json(amount))
    }
}

async fn retries_of_the_old_normalisation_replay_or_take_over_instead_of_conflicting(
    backend: Backend,
) {
    let world = World::start(backend).await;
    let token = world.tenant_a.clone();
    let mut client = world.client().await;

    // Completed by the old version: the new version's retry replays it.
    let done = claim_owned(
        &mut client,
        &token,
        claim_json(OPERATION, "done", &old_json(100)),
    )
    .await;
    client
        .complete(authorized(
            &token,
            proto::CompleteRequest {
                operation_id: done.operation_id.clone(),
                fence: done.fence,
                result: result(r#"{"charge": "ch_1"}"#),
            },
        ))
        .await
        .expect("complete");
    let retried = client
        .claim(authorized(&token, new_version_claim("done", 100)))
        .await
        .expect("the new version's retry is the same request")
        .into_inner();
    match retried.outcome {
        Some(Outcome::Completed(completed)) => {
            assert_eq!(completed.operation_id, done.operation_id);
            assert_eq!(
                completed.outcome,
                Some(proto::completed::Outcome::Result(
                    result(r#"{"charge": "ch_1"}"#).expect("a result")
                ))
            );
        }
        other => panic!("expected the replay, got {other:?}"),
    }

    // In doubt after the old version's attempt: the new version takes it
    // over (ReconcileFirst, never a conflict), and the history says which
    // previous fingerprint matched. The stored fingerprint stays the first's.
    let doubted = claim_owned(
        &mut client,
        &token,
        claim_json(OPERATION, "doubted", &old_json(200)),
    )
    .await;
    fail_unknown(&mut client, &token, &doubted).await;
    let taken = client
        .claim(authorized(&token, new_version_claim("doubted", 200)))
        .await
        .expect("the new version's retry is the same request")
        .into_inner();
    assert!(
        matches!(taken.outcome, Some(Outcome::ReconcileFirst(_))),
        "{taken:?}"
    );
    let entries = history(&mut client, &token, &doubted.operation_id).await;
    let last = entries.last().expect("history");
    assert_eq!(last.event, "TAKEN_OVER");
    assert!(
        last.detail
            .ends_with("request matched by previous_fingerprints[0]"),
        "{last:?}"
    );
    let stored = operation_by_id(&mut client, &token, &doubted.operation_id).await;
    assert_eq!(
        stored.fingerprint,
        fingerprint::of_json(&old_json(200))
            .expect("I-JSON")
            .0
            .to_vec()
    );
    assert_eq!(stored.conflicts, 0);
}

async fn a_different_request_conflicts_and_a_bad_previous_fingerprint_changes_nothing(
    backend: Backend,
) {
    let world = World::start(backend).await;
    let token = world.tenant_a.clone();
    let mut client = world.client().await;
    let owned = claim_owned(
        &mut client,
        &token,
        claim_json(OPERATION, "k", &old_json(100)),
    )
    .await;

    // Another amount: neither its fingerprint nor its previous one is the
    // stored one.
    let status = client
        .claim(authorized(&token, new_version_claim("k", 999)))
        .await
        .expect_err("another request");
    assert_status(&status, Code::FailedPrecondition, "IDEMPOTENCY_KEY_REUSED");
    let after = operation_by_id(&mut client, &token, &owned.operation_id).await;
    assert_eq!(after.conflicts, 1);

    // A previous fingerprint that is not 32 bytes, and too many of them:
    // refused naming the field, and no operation is created.
    for (previous, field) in [
        (vec![vec![0; 31]], "previous_fingerprints[0]"),
        (vec![vec![0; 32]; 5], "previous_fingerprints"),
    ] {
        let status = client
            .claim(authorized(
                &token,
                proto::ClaimRequest {
                    previous_fingerprints: previous,
                    ..claim_json(OPERATION, "fresh", &new_json(1))
                },
            ))
            .await
            .expect_err("refused");
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert_eq!(violated_fields(&status), [field]);
    }
    let status = client
        .lookup(authorized(
            &token,
            proto::LookupRequest {
                target: Some(proto::lookup_request::Target::Scope(proto::Scope {
                    operation: OPERATION.into(),
                    key: "fresh".into(),
                })),
                ..Default::default()
            },
        ))
        .await
        .expect_err("nothing was created");
    assert_eq!(status.code(), Code::NotFound);
}
