//! Diagnose (issue 23, item 1) through the real server, on each store: the
//! map's lines on real operations, the refusal of evidence carrying a
//! secret (nothing changed, the secret never echoed), the stop at the
//! caller's scope and constraints, and escalation on contradictory or
//! premature evidence.

use idemd::proto;
use idemd::proto::diagnose_evidence::RequestIdentity;
use tonic::Code;

use crate::harness::*;
use crate::ops::{json, ops};

store_tests!(
    the_map_on_real_operations,
    evidence_carrying_a_secret_is_refused_and_changes_nothing,
    a_plan_beyond_the_callers_scope_or_constraints_stops,
    contradictory_or_premature_evidence_escalates,
    idemd_ops_diagnose_prints_the_diagnosis_and_refuses_secrets,
);

const CHARGE: &str = "payments.charge";
const REQUEST: &str = r#"{"amount": 1200, "to": "acct-1"}"#;

fn by_scope(key: &str, evidence: proto::DiagnoseEvidence) -> proto::DiagnoseRequest {
    proto::DiagnoseRequest {
        target: Some(proto::diagnose_request::Target::Scope(proto::Scope {
            operation: CHARGE.into(),
            key: key.into(),
        })),
        evidence: Some(evidence),
        success_criterion: "the customer is charged exactly once".into(),
        context: "checkout agent, order 1".into(),
        ..Default::default()
    }
}

fn saw(symptom: proto::Symptom) -> proto::DiagnoseEvidence {
    proto::DiagnoseEvidence {
        symptom: symptom.into(),
        ..Default::default()
    }
}

fn with_request(mut evidence: proto::DiagnoseEvidence, json: &str) -> proto::DiagnoseEvidence {
    evidence.request_identity = Some(RequestIdentity::JsonPayload(json.into()));
    evidence
}

async fn diagnose(
    client: &mut Client,
    token: &str,
    request: proto::DiagnoseRequest,
) -> Result<proto::DiagnoseResponse, tonic::Status> {
    client
        .diagnose(authorized(token, request))
        .await
        .map(tonic::Response::into_inner)
}

fn cause(response: &proto::DiagnoseResponse) -> proto::Cause {
    response
        .diagnosis
        .as_ref()
        .map_or(proto::Cause::Unspecified, |diagnosis| diagnosis.cause())
}

fn moves(response: &proto::DiagnoseResponse) -> Vec<proto::MoveKind> {
    response.plan.iter().map(|step| step.kind()).collect()
}

async fn the_map_on_real_operations(backend: Backend) {
    let world = World::start(backend).await;
    let token = world.tenant_a.clone();
    let mut client = world.client().await;

    // A timeout before the answer of a charge that succeeded: ambiguous;
    // the first move is the replay, never a new key; the request compared
    // byte for byte says the fingerprint mode.
    let done = claim_owned(&mut client, &token, claim_json(CHARGE, "done", REQUEST)).await;
    complete(&mut client, &token, &done, r#"{"charge":"ch_1"}"#).await;
    let timed_out = diagnose(
        &mut client,
        &token,
        by_scope(
            "done",
            with_request(saw(proto::Symptom::TimeoutBeforeResponse), REQUEST),
        ),
    )
    .await
    .expect("diagnose");
    assert_eq!(timed_out.verdict(), proto::Verdict::Diagnosed);
    assert_eq!(cause(&timed_out), proto::Cause::AmbiguousOutcome);
    assert_eq!(moves(&timed_out)[0], proto::MoveKind::ClaimSameKey);
    assert!(!moves(&timed_out).contains(&proto::MoveKind::NewKey));
    let handoff = timed_out.handoff.as_ref().expect("handoff");
    assert_eq!(handoff.fingerprint_mode, "json");
    assert_eq!(handoff.operation_id, done.operation_id);
    assert_eq!(handoff.state(), proto::OperationState::Succeeded);
    assert_eq!(
        handoff.success_criterion,
        "the customer is charged exactly once"
    );
    assert!(!handoff.history_summary.is_empty());
    let confidence = timed_out.confidence.as_ref().expect("confidence");
    assert!(confidence.score >= 70, "{confidence:?}");

    // The same key with another amount: a conflict, refused, new key for a
    // new intent.
    let conflict = diagnose(
        &mut client,
        &token,
        by_scope(
            "done",
            with_request(
                saw(proto::Symptom::Unspecified),
                r#"{"amount": 9900, "to": "acct-1"}"#,
            ),
        ),
    )
    .await
    .expect("diagnose");
    assert_eq!(cause(&conflict), proto::Cause::PayloadConflict);
    assert_eq!(moves(&conflict)[0], proto::MoveKind::ChangeCaller);

    // Concurrent duplicates while an owner runs: a race; wait, then replay.
    let _running = claim_owned(
        &mut client,
        &token,
        claim_json(CHARGE, "running", r#"{"amount": 1, "to": "acct-2"}"#),
    )
    .await;
    let race = diagnose(
        &mut client,
        &token,
        by_scope("running", saw(proto::Symptom::ConcurrentDuplicates)),
    )
    .await
    .expect("diagnose");
    assert_eq!(cause(&race), proto::Cause::Race);
    assert_eq!(
        moves(&race),
        [proto::MoveKind::Wait, proto::MoveKind::ClaimSameKey]
    );
    assert!(race.plan.iter().all(|step| step.attempts == 0));

    // An owner that lost track (UNKNOWN): reconcile from the provider before
    // any new attempt.
    let lost = claim_owned(
        &mut client,
        &token,
        claim_json(CHARGE, "lost", r#"{"amount": 2, "to": "acct-3"}"#),
    )
    .await;
    fail_unknown(&mut client, &token, &lost).await;
    let stuck = diagnose(
        &mut client,
        &token,
        by_scope("lost", saw(proto::Symptom::StuckInProgress)),
    )
    .await
    .expect("diagnose");
    assert_eq!(cause(&stuck), proto::Cause::StuckInProgress);
    let plan = moves(&stuck);
    let look = plan.iter().position(|kind| *kind == proto::MoveKind::Look);
    let reconcile = plan
        .iter()
        .position(|kind| *kind == proto::MoveKind::Reconcile);
    assert!(look.is_some() && look < reconcile, "{plan:?}");

    // Nothing stored under a scope: the Claim never arrived; by an unknown
    // id, NOT_FOUND as Lookup says.
    let never = diagnose(
        &mut client,
        &token,
        by_scope("never-sent", saw(proto::Symptom::TimeoutBeforeResponse)),
    )
    .await
    .expect("diagnose");
    assert_eq!(cause(&never), proto::Cause::AmbiguousOutcome);
    assert_eq!(moves(&never), [proto::MoveKind::ClaimSameKey]);
    let unknown_id = diagnose(
        &mut client,
        &token,
        proto::DiagnoseRequest {
            target: Some(proto::diagnose_request::Target::OperationId(
                "00000000-0000-0000-0000-000000000042".into(),
            )),
            ..Default::default()
        },
    )
    .await
    .expect_err("not found");
    assert_status(&unknown_id, Code::NotFound, "OPERATION_NOT_FOUND");
    // Another tenant's operation is just as absent.
    let mut other = world.client().await;
    let elsewhere = diagnose(
        &mut other,
        &world.tenant_b,
        proto::DiagnoseRequest {
            target: Some(proto::diagnose_request::Target::OperationId(
                done.operation_id.clone(),
            )),
            ..Default::default()
        },
    )
    .await
    .expect_err("another tenant's");
    assert_status(&elsewhere, Code::NotFound, "OPERATION_NOT_FOUND");
}

async fn evidence_carrying_a_secret_is_refused_and_changes_nothing(backend: Backend) {
    let world = World::start(backend).await;
    let token = world.tenant_a.clone();
    let mut client = world.client().await;
    let owned = claim_owned(&mut client, &token, claim_json(CHARGE, "k", REQUEST)).await;
    let before = operation_by_id(&mut client, &token, &owned.operation_id).await;

    let private_key =
        "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----";
    let seed = "legal winner thank year wave sausage worth useful legal winner thank yellow";
    let card = r#"{"amount": 1200, "card": "4111 1111 1111 1111"}"#;
    let cases: Vec<(&str, proto::DiagnoseRequest)> = vec![
        (
            "evidence.notes",
            by_scope(
                "k",
                proto::DiagnoseEvidence {
                    notes: format!("the provider said: {private_key}"),
                    ..saw(proto::Symptom::TimeoutBeforeResponse)
                },
            ),
        ),
        (
            "evidence.json_payload",
            by_scope("k", with_request(saw(proto::Symptom::Unspecified), card)),
        ),
        (
            "context",
            proto::DiagnoseRequest {
                context: format!("wallet recovery words: {seed}"),
                ..by_scope("k", saw(proto::Symptom::Unspecified))
            },
        ),
        (
            "success_criterion",
            proto::DiagnoseRequest {
                success_criterion: "works with password=hunter2-prod".into(),
                ..by_scope("k", saw(proto::Symptom::Unspecified))
            },
        ),
    ];
    for (field, request) in cases {
        let refused = diagnose(&mut client, &token, request)
            .await
            .expect_err("a secret is refused");
        assert_status(&refused, Code::InvalidArgument, "EVIDENCE_CARRIES_SECRET");
        let (_, metadata) = error_info(&refused);
        assert_eq!(metadata.get("field").map(String::as_str), Some(field));
        for secret in ["MIIEvQIBADANBgkqhkiG9w0", "4111 1111", "sausage", "hunter2"] {
            assert!(
                !refused.message().contains(secret) && !format!("{metadata:?}").contains(secret),
                "the refusal echoes the secret: {refused:?}"
            );
        }
    }
    // Benign evidence with ids, times and traces is not refused.
    diagnose(
        &mut client,
        &token,
        by_scope(
            "k",
            proto::DiagnoseEvidence {
                notes: format!(
                    "trace 4bf92f3577b34da6a3ce929d0e0e4736, operation {}, at 2026-12-03T12:00:00Z",
                    owned.operation_id
                ),
                ..saw(proto::Symptom::TimeoutBeforeResponse)
            },
        ),
    )
    .await
    .expect("benign evidence is diagnosed");
    let after = operation_by_id(&mut client, &token, &owned.operation_id).await;
    assert_eq!(
        (after.fence, after.state, after.updated_at),
        (before.fence, before.state, before.updated_at)
    );
}

async fn a_plan_beyond_the_callers_scope_or_constraints_stops(backend: Backend) {
    let world = World::start(backend).await;
    let reconciler = world.tenant_a.clone();
    let caller = add_token(
        world.store.as_ref(),
        "tenant-a",
        "caller-only",
        "operations",
    )
    .await;
    let mut client = world.client().await;
    let lost = claim_owned(&mut client, &caller, claim_json(CHARGE, "lost", REQUEST)).await;
    fail_unknown(&mut client, &caller, &lost).await;
    let unknown = || {
        by_scope(
            "lost",
            proto::DiagnoseEvidence {
                provider_finding: proto::ProviderFinding::EffectFound.into(),
                provider_looked_ago: millis(1_000),
                ..saw(proto::Symptom::StuckInProgress)
            },
        )
    };
    // The plan is a Reconcile: the caller's credential lacks the scope.
    let stopped = diagnose(&mut client, &caller, unknown())
        .await
        .expect_err("beyond the scope");
    assert_status(&stopped, Code::PermissionDenied, "PLAN_EXCEEDS_SCOPE");
    let (_, metadata) = error_info(&stopped);
    assert_eq!(metadata.get("scope").map(String::as_str), Some("reconcile"));
    assert_eq!(
        metadata.get("operation_id").map(String::as_str),
        Some(lost.operation_id.as_str())
    );
    // A reconciler gets the plan, and the first move reconciles.
    let planned = diagnose(&mut client, &reconciler, unknown())
        .await
        .expect("a reconciler's plan");
    assert_eq!(moves(&planned)[0], proto::MoveKind::Reconcile);
    // ... unless it said it may only read, or only make reversible moves.
    for (constraints, reason) in [
        (
            proto::DiagnoseConstraints {
                authority: proto::Authority::ReadOnly.into(),
                ..Default::default()
            },
            "PLAN_EXCEEDS_AUTHORITY",
        ),
        (
            proto::DiagnoseConstraints {
                reversible_only: true,
                ..Default::default()
            },
            "PLAN_NOT_REVERSIBLE",
        ),
    ] {
        let stopped = diagnose(
            &mut client,
            &reconciler,
            proto::DiagnoseRequest {
                constraints: Some(constraints),
                ..unknown()
            },
        )
        .await
        .expect_err("beyond the constraints");
        assert_status(&stopped, Code::PermissionDenied, reason);
    }
    // A budget of no new attempts stops a plan that starts one: nothing is
    // stored under the scope, so the plan is a Claim that executes.
    let stopped = diagnose(
        &mut client,
        &caller,
        proto::DiagnoseRequest {
            constraints: Some(proto::DiagnoseConstraints {
                attempt_budget: Some(0),
                ..Default::default()
            }),
            ..by_scope("never-sent", saw(proto::Symptom::TimeoutBeforeResponse))
        },
    )
    .await
    .expect_err("beyond the attempt budget");
    assert_status(&stopped, Code::PermissionDenied, "PLAN_EXCEEDS_BUDGET");
    let (_, metadata) = error_info(&stopped);
    assert_eq!(
        metadata.get("attempt_budget").map(String::as_str),
        Some("0")
    );
    // A wait budget shorter than the live owner's lease stops a plan that
    // waits for it.
    let _running = claim_owned(
        &mut client,
        &caller,
        claim_json(CHARGE, "running", r#"{"amount": 4}"#),
    )
    .await;
    let stopped = diagnose(
        &mut client,
        &caller,
        proto::DiagnoseRequest {
            constraints: Some(proto::DiagnoseConstraints {
                wait_budget: millis(0),
                ..Default::default()
            }),
            ..by_scope("running", saw(proto::Symptom::ConcurrentDuplicates))
        },
    )
    .await
    .expect_err("beyond the wait budget");
    assert_status(&stopped, Code::PermissionDenied, "PLAN_EXCEEDS_BUDGET");
    let (_, metadata) = error_info(&stopped);
    assert!(metadata.contains_key("wait_needed"), "{metadata:?}");
}

async fn contradictory_or_premature_evidence_escalates(backend: Backend) {
    let world = World::start(backend).await;
    let token = world.tenant_a.clone();
    let mut client = world.client().await;
    // A negative provider lookup sent while the attempt could still run
    // proves nothing: escalate, naming the lookup that would.
    let lost = claim_owned(&mut client, &token, claim_json(CHARGE, "lost", REQUEST)).await;
    fail_unknown(&mut client, &token, &lost).await;
    let early = diagnose(
        &mut client,
        &token,
        by_scope(
            "lost",
            proto::DiagnoseEvidence {
                provider_finding: proto::ProviderFinding::NoEffect.into(),
                provider_looked_ago: millis(0),
                ..saw(proto::Symptom::StuckInProgress)
            },
        ),
    )
    .await
    .expect("diagnose");
    assert_eq!(early.verdict(), proto::Verdict::Escalate, "{early:?}");
    assert!(
        early
            .missing
            .iter()
            .any(|missing| missing.contains("sent after")),
        "{:?}",
        early.missing
    );
    assert!(!moves(&early).contains(&proto::MoveKind::Reconcile));
    assert_eq!(moves(&early).last(), Some(&proto::MoveKind::HandOver));

    // The provider contradicts a stored success.
    let done = claim_owned(&mut client, &token, claim_json(CHARGE, "done", REQUEST)).await;
    complete(&mut client, &token, &done, r#"{"charge":"ch_1"}"#).await;
    let contradicted = diagnose(
        &mut client,
        &token,
        by_scope(
            "done",
            proto::DiagnoseEvidence {
                provider_finding: proto::ProviderFinding::NoEffect.into(),
                provider_looked_ago: millis(0),
                ..saw(proto::Symptom::Unspecified)
            },
        ),
    )
    .await
    .expect("diagnose");
    assert_eq!(contradicted.verdict(), proto::Verdict::Escalate);
    // Evidence two days old supports no move.
    let stale = diagnose(
        &mut client,
        &token,
        by_scope(
            "done",
            proto::DiagnoseEvidence {
                observed_ago: Some(pbjson_types::Duration {
                    seconds: 2 * 86_400,
                    nanos: 0,
                }),
                ..saw(proto::Symptom::TimeoutBeforeResponse)
            },
        ),
    )
    .await
    .expect("diagnose");
    assert_eq!(stale.verdict(), proto::Verdict::Escalate);
    // A provider finding without when it was looked for is refused.
    let unanchored = diagnose(
        &mut client,
        &token,
        by_scope(
            "done",
            proto::DiagnoseEvidence {
                provider_finding: proto::ProviderFinding::EffectFound.into(),
                ..saw(proto::Symptom::Unspecified)
            },
        ),
    )
    .await
    .expect_err("needs provider_looked_ago");
    assert_status(&unanchored, Code::InvalidArgument, "INVALID_REQUEST");
}

async fn idemd_ops_diagnose_prints_the_diagnosis_and_refuses_secrets(backend: Backend) {
    let data = backend.into_process_data().await;
    let token = data.create_tenant("support");
    let server = data.serve(&[]).await;
    let mut client = server.client().await;
    let done = claim_owned(&mut client, &token, claim_json(CHARGE, "done", REQUEST)).await;
    complete(&mut client, &token, &done, r#"{"charge":"ch_1"}"#).await;

    let table = crate::ops::succeeded(&ops(
        &data,
        &server,
        &token,
        &[
            "diagnose",
            "--operation",
            CHARGE,
            "--key",
            "done",
            "--symptom",
            "timeout",
            "--json-payload",
            REQUEST,
        ],
    ));
    assert!(
        table.contains("AmbiguousOutcome") && table.contains("plan:") && table.contains("json"),
        "{table}"
    );
    let document = json(&ops(
        &data,
        &server,
        &token,
        &[
            "diagnose",
            &done.operation_id,
            "--symptom",
            "timeout",
            "-o",
            "json",
        ],
    ));
    assert_eq!(document["verdict"], "VERDICT_DIAGNOSED", "{document}");
    assert_eq!(document["diagnosis"]["cause"], "CAUSE_AMBIGUOUS_OUTCOME");

    let refused = ops(
        &data,
        &server,
        &token,
        &[
            "diagnose",
            &done.operation_id,
            "--notes",
            "token sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        ],
    );
    assert!(!refused.status.success());
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&refused.stdout),
        String::from_utf8_lossy(&refused.stderr)
    );
    assert!(said.contains("EVIDENCE_CARRIES_SECRET"), "{said}");
    assert!(!said.contains("4eC39HqLyjWDarjtT1zdp7dc"), "{said}");
}
