//! Every error row of DESIGN.md: code, google.rpc details, and no change.

use idemd::proto;
use idemd::sweeper::{SweeperSettings, sweep_backlog};
use tonic::{Code, Request};
use tonic_types::StatusExt;

use crate::harness::*;

fn lookup_scope(operation: &str, key: &str) -> proto::LookupRequest {
    proto::LookupRequest {
        target: Some(proto::lookup_request::Target::Scope(
            scope(operation, key).expect("scope"),
        )),
        include_history: true,
        ..Default::default()
    }
}

async fn missing_unknown_or_revoked_credentials_are_unauthenticated(backend: Backend) {
    let world = World::start(backend).await;
    let mut client = world.client().await;
    let claim = claim_json("payments.charge", "k", "{}");

    let none = client
        .claim(Request::new(claim.clone()))
        .await
        .expect_err("no token");
    assert_eq!(none.code(), Code::Unauthenticated);
    let unknown = client
        .claim(authorized("idem_not-a-real-token", claim.clone()))
        .await
        .expect_err("unknown token");
    assert_eq!(unknown.code(), Code::Unauthenticated);

    let revoked = create_tenant(world.store.as_ref(), "short-lived").await;
    assert!(
        world
            .store
            .revoke_tenant("short-lived")
            .await
            .expect("revoke")
    );
    let refused = client
        .claim(authorized(&revoked, claim))
        .await
        .expect_err("revoked");
    assert_eq!(refused.code(), Code::Unauthenticated);

    let nothing = client
        .lookup(authorized(
            &world.tenant_a,
            lookup_scope("payments.charge", "k"),
        ))
        .await
        .expect_err("nothing was stored");
    assert_eq!(nothing.code(), Code::NotFound);
}

async fn out_of_bounds_input_is_invalid_argument_naming_every_field_and_changes_nothing(
    backend: Backend,
) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let bad = proto::ClaimRequest {
        scope: Some(proto::Scope {
            operation: "payments charge!".into(),
            key: "k".repeat(256),
        }),
        request_identity: Some(proto::claim_request::RequestIdentity::Fingerprint(vec![
            0;
            31
        ])),
        claim_token: vec![0; 65],
        lease: millis(2 * 3600 * 1000),
        max_attempts: 1000,
        ..Default::default()
    };
    let status = client
        .claim(authorized(token, bad))
        .await
        .expect_err("invalid");
    assert_eq!(status.code(), Code::InvalidArgument);
    let violations = status
        .get_details_bad_request()
        .expect("BadRequest")
        .field_violations;
    let fields: Vec<&str> = violations
        .iter()
        .map(|violation| violation.field.as_str())
        .collect();
    assert_eq!(
        fields,
        [
            "scope.operation",
            "scope.key",
            "fingerprint",
            "claim_token",
            "lease",
            "max_attempts"
        ]
    );

    for (json, why) in [
        (r#"{"amount":1,"amount":2}"#, "duplicate key"),
        (r#"{"amount":9007199254740993}"#, "integer beyond 2^53"),
        (r#"{"note":"\ud800"}"#, "lone surrogate"),
        ("{not json", "malformed"),
    ] {
        let status = client
            .claim(authorized(token, claim_json("payments.charge", "k", json)))
            .await
            .expect_err(why);
        assert_eq!(status.code(), Code::InvalidArgument, "{why}");
        let violations = status
            .get_details_bad_request()
            .expect("BadRequest")
            .field_violations;
        assert_eq!(violations[0].field, "json_payload", "{why}");
    }
    let missing = client
        .claim(authorized(
            token,
            proto::ClaimRequest {
                scope: scope("payments.charge", "k"),
                ..Default::default()
            },
        ))
        .await
        .expect_err("no identity");
    assert_eq!(
        missing
            .get_details_bad_request()
            .expect("BadRequest")
            .field_violations[0]
            .field,
        "request_identity"
    );
    let bad_id = client
        .complete(authorized(
            token,
            proto::CompleteRequest {
                operation_id: "not-a-uuid".into(),
                fence: 0,
                result: None,
            },
        ))
        .await
        .expect_err("invalid");
    let fields = violated_fields(&bad_id);
    assert_eq!(fields, ["operation_id", "fence", "result"]);

    // NUL cannot be stored as text by every store: refused alike on each.
    let with_nul = client
        .claim(authorized(
            token,
            claim_json("payments.charge", "k\0", "{}"),
        ))
        .await
        .expect_err("NUL in the key");
    assert_eq!(
        with_nul
            .get_details_bad_request()
            .expect("BadRequest")
            .field_violations[0]
            .field,
        "scope.key"
    );
    let acquired = client
        .claim(authorized(
            token,
            claim_json("payments.charge", "nul-test", "{}"),
        ))
        .await
        .expect("claim")
        .into_inner();
    let owner = ownership(&acquired).expect("acquired").clone();
    let nul_result = client
        .complete(authorized(
            token,
            proto::CompleteRequest {
                operation_id: owner.operation_id,
                fence: owner.fence,
                result: Some(proto::Result {
                    body: b"\0binary bodies may hold NUL\0".to_vec(),
                    content_type: "text/plain\0".into(),
                    metadata: [("k".to_owned(), "v\0".to_owned())].into(),
                }),
            },
        ))
        .await
        .expect_err("NUL in stored text");
    let fields = violated_fields(&nul_result);
    assert_eq!(fields, ["result.content_type", "result.metadata"]);

    let nothing = client
        .lookup(authorized(token, lookup_scope("payments.charge", "k")))
        .await
        .expect_err("bad input changed nothing");
    assert_eq!(nothing.code(), Code::NotFound);
}

async fn key_reuse_is_failed_precondition_with_the_operation_id(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let first = client
        .claim(authorized(
            token,
            claim_json("payments.charge", "k", r#"{"amount":1}"#),
        ))
        .await
        .expect("claim")
        .into_inner();
    let operation_id = ownership(&first).expect("acquired").operation_id.clone();

    let status = client
        .claim(authorized(
            token,
            claim_json("payments.charge", "k", r#"{"amount":2}"#),
        ))
        .await
        .expect_err("conflict");
    assert_status(&status, Code::FailedPrecondition, "IDEMPOTENCY_KEY_REUSED");
    assert_eq!(error_info(&status).1["operation_id"], operation_id);
    // The same document written differently is the same request: no conflict.
    let same = client
        .claim(authorized(
            token,
            claim_json("payments.charge", "k", r#"{ "amount" : 1.0 }"#),
        ))
        .await
        .expect("same request")
        .into_inner();
    assert_eq!(outcome_name(&same), "pending");
}

async fn a_tombstone_refuses_claims_with_result_expired(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let provider = Provider::default();
    // Kept as briefly as the server allows: one attempt of a second.
    let request = proto::ClaimRequest {
        lease: millis(1_000),
        max_attempt_duration: millis(1_000),
        max_attempts: 1,
        retention: millis(1_000),
        ..claim_json("payments.charge", "k", "{}")
    };
    attempt(&mut client, token, request.clone(), &provider).await;
    tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
    // The retention sweeper: the result goes, the scope stays.
    let swept = sweep_backlog(
        world.store.as_ref(),
        SweeperSettings {
            interval: std::time::Duration::from_secs(3600),
            batch: 10,
            tombstone_retention: chrono::TimeDelta::hours(1),
            clock_margin: chrono::TimeDelta::zero(),
        },
    )
    .await;
    assert_eq!(swept.tombstoned, 1);

    let status = client
        .claim(authorized(token, request))
        .await
        .expect_err("expired");
    assert_status(&status, Code::FailedPrecondition, "RESULT_EXPIRED");
    let other = client
        .claim(authorized(
            token,
            claim_json("payments.charge", "k", r#"{"x":1}"#),
        ))
        .await
        .expect_err("conflict");
    assert_status(&other, Code::FailedPrecondition, "IDEMPOTENCY_KEY_REUSED");
    assert_eq!(provider.effects(), 1);
}

async fn reconcile_on_a_live_lease_is_refused(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let claimed = client
        .claim(authorized(token, claim_json("payments.charge", "k", "{}")))
        .await
        .expect("claim")
        .into_inner();
    let owner = ownership(&claimed).expect("acquired").clone();
    let status = client
        .reconcile(authorized(
            token,
            proto::ReconcileRequest {
                tenant: String::new(),
                operation_id: owner.operation_id.clone(),
                expected_fence: owner.fence,
                resolution: Some(proto::reconcile_request::Resolution::Succeeded(
                    result("x").expect("result"),
                )),
            },
        ))
        .await
        .expect_err("live lease");
    assert_status(&status, Code::FailedPrecondition, "LEASE_STILL_LIVE");
    assert_eq!(error_info(&status).1["state"], "IN_PROGRESS");
}

async fn another_tenants_operation_is_indistinguishable_from_a_missing_one(backend: Backend) {
    let world = World::start(backend).await;
    let mut client = world.client().await;
    let claimed = client
        .claim(authorized(
            &world.tenant_a,
            claim_json("payments.charge", "k", "{}"),
        ))
        .await
        .expect("claim")
        .into_inner();
    let owner = ownership(&claimed).expect("acquired").clone();
    let by_id = |operation_id: &str| proto::LookupRequest {
        target: Some(proto::lookup_request::Target::OperationId(
            operation_id.into(),
        )),
        include_history: false,
        ..Default::default()
    };

    let foreign = client
        .lookup(authorized(&world.tenant_b, by_id(&owner.operation_id)))
        .await
        .expect_err("another tenant's");
    let missing = client
        .lookup(authorized(
            &world.tenant_b,
            by_id(&fresh_uuid().to_string()),
        ))
        .await
        .expect_err("missing");
    assert_eq!(foreign.code(), Code::NotFound);
    assert_eq!(
        (foreign.code(), foreign.message()),
        (missing.code(), missing.message())
    );
    assert_eq!(foreign.details(), missing.details());

    // Nor can tenant B write to it, even with the right fence.
    let write = client
        .complete(authorized(
            &world.tenant_b,
            proto::CompleteRequest {
                operation_id: owner.operation_id.clone(),
                fence: owner.fence,
                result: result("x"),
            },
        ))
        .await
        .expect_err("another tenant's");
    assert_eq!(write.code(), Code::NotFound);
    let still = client
        .lookup(authorized(&world.tenant_a, by_id(&owner.operation_id)))
        .await
        .expect("lookup")
        .into_inner();
    assert_eq!(
        still.operation.expect("operation").state,
        proto::OperationState::InProgress as i32
    );
}

async fn an_unreachable_database_is_unavailable_with_retry_info(backend: Backend) {
    let world = World::start(backend).await;
    let mut client = world.client().await;
    world.store.close().await;

    let status = client
        .claim(authorized(
            &world.tenant_a,
            claim_json("payments.charge", "k", "{}"),
        ))
        .await
        .expect_err("database gone");
    assert_eq!(status.code(), Code::Unavailable);
    let retry_delay = status
        .get_details_retry_info()
        .and_then(|info| info.retry_delay)
        .unwrap_or_else(|| panic!("RetryInfo expected: {status:?}"));
    // A client's own retry policy (docs/grpc-service-config.json) reads the
    // pushback trailer: the same delay as RetryInfo's, in milliseconds.
    let pushback = status
        .metadata()
        .get("grpc-retry-pushback-ms")
        .unwrap_or_else(|| panic!("grpc-retry-pushback-ms expected: {status:?}"))
        .to_str()
        .expect("ascii");
    assert_eq!(pushback, retry_delay.as_millis().to_string());
    assert!(!retry_delay.is_zero());
}

/// The recommended service config the README publishes: valid JSON that names
/// the service as the server registers it, retrying UNAVAILABLE only.
#[test]
fn the_published_service_config_parses_and_names_the_service() {
    let config: serde_json::Value =
        serde_json::from_str(include_str!("../../docs/grpc-service-config.json"))
            .expect("docs/grpc-service-config.json is JSON");
    let method_configs = config["methodConfig"].as_array().expect("methodConfig");
    assert_eq!(method_configs.len(), 1);
    let method_config = &method_configs[0];
    assert_eq!(
        method_config["name"],
        serde_json::json!([{
            "service": proto::idempotency_service_server::SERVICE_NAME
        }])
    );
    assert_eq!(
        proto::idempotency_service_server::SERVICE_NAME,
        "idem.v1.IdempotencyService"
    );
    assert_eq!(
        method_config["retryPolicy"],
        serde_json::json!({
            "maxAttempts": 5,
            "initialBackoff": "0.1s",
            "maxBackoff": "2s",
            "backoffMultiplier": 2,
            "retryableStatusCodes": ["UNAVAILABLE"],
        })
    );
}

store_tests!(
    missing_unknown_or_revoked_credentials_are_unauthenticated,
    out_of_bounds_input_is_invalid_argument_naming_every_field_and_changes_nothing,
    key_reuse_is_failed_precondition_with_the_operation_id,
    a_tombstone_refuses_claims_with_result_expired,
    reconcile_on_a_live_lease_is_refused,
    another_tenants_operation_is_indistinguishable_from_a_missing_one,
    an_unreachable_database_is_unavailable_with_retry_info,
);
