//! Admin across tenants (issue 20 item 4): an admin credential looks up and
//! reconciles another tenant's operation (the history names its credential,
//! the audit log records it), and forgets an ended one (Forget: the record
//! becomes retention's tombstone, the next Claim gets RESULT_EXPIRED on the
//! same server, cache or not); every refusal changes nothing; GetPolicy; and
//! the `idemd ops` commands against the real binary.

use std::process::Output;

use idemd::proto;
use idemd::proto::lookup_request::Target;
use idemd::proto::reconcile_request::Resolution;
use idemd::store::Store;
use tonic::Code;

use crate::harness::*;

store_tests!(
    an_admin_looks_up_and_reconciles_another_tenants_operation_and_history_names_it,
    naming_another_tenant_without_admin_is_refused_and_changes_nothing,
    forget_tombstones_a_succeeded_operation_and_a_replayed_claim_then_gets_result_expired,
    forget_refuses_unresolved_operations_and_tombstones_and_changes_nothing,
    forget_with_a_stale_fence_or_without_admin_or_reason_is_refused_and_changes_nothing,
    get_policy_without_a_policy_file_answers_the_servers_bounds,
    ops_forget_policy_and_tenant_flags_against_the_real_binary,
);

/// The admin's token name, as history and the audit log must name it.
const ADMIN_TOKEN_NAME: &str = "ops-admin";

fn by_id(operation_id: &str) -> Option<Target> {
    Some(Target::OperationId(operation_id.to_owned()))
}

/// The operation and its whole history, as `token` reads it in `tenant`.
async fn read(
    client: &mut Client,
    token: &str,
    operation_id: &str,
    tenant: &str,
) -> (proto::Operation, Vec<proto::HistoryEntry>) {
    let response = client
        .lookup(authorized(
            token,
            proto::LookupRequest {
                target: by_id(operation_id),
                include_history: true,
                tenant: tenant.into(),
                ..Default::default()
            },
        ))
        .await
        .expect("lookup")
        .into_inner();
    (response.operation.expect("an operation"), response.history)
}

fn forget(operation_id: &str, fence: u64, reason: &str, tenant: &str) -> proto::ForgetRequest {
    proto::ForgetRequest {
        operation_id: operation_id.into(),
        expected_fence: fence,
        reason: reason.into(),
        tenant: tenant.into(),
    }
}

/// The audit rows of `tenant` for operations (not credentials).
async fn operation_audit(store: &dyn Store, tenant: &str) -> Vec<idemd::store::AuditEntry> {
    store
        .credentials()
        .audit_log(Some(tenant), 100)
        .await
        .expect("audit log")
        .into_iter()
        .filter(|entry| entry.action.starts_with("operation."))
        .collect()
}

async fn an_admin_looks_up_and_reconciles_another_tenants_operation_and_history_names_it(
    backend: Backend,
) {
    let world = World::start(backend).await;
    let admin = add_token(
        world.store.as_ref(),
        "tenant-a",
        ADMIN_TOKEN_NAME,
        "reconcile,admin",
    )
    .await;
    let mut client = world.client().await;
    // tenant-b's operation, in doubt.
    let owned = claim_owned(
        &mut client,
        &world.tenant_b,
        claim_json("payments.charge", "order-9", "{}"),
    )
    .await;
    fail_unknown(&mut client, &world.tenant_b, &owned).await;

    // Without naming the tenant, it is not the admin's to see.
    let own = client
        .lookup(authorized(
            &admin,
            proto::LookupRequest {
                target: by_id(&owned.operation_id),
                ..Default::default()
            },
        ))
        .await
        .expect_err("not the admin's own tenant");
    assert_status(&own, Code::NotFound, "OPERATION_NOT_FOUND");
    // Named, it is; a name no tenant has is TENANT_NOT_FOUND.
    let (before, _) = read(&mut client, &admin, &owned.operation_id, "tenant-b").await;
    assert_eq!(before.state(), proto::OperationState::Unknown);
    let unknown_tenant = client
        .lookup(authorized(
            &admin,
            proto::LookupRequest {
                target: by_id(&owned.operation_id),
                tenant: "tenant-zz".into(),
                ..Default::default()
            },
        ))
        .await
        .expect_err("no such tenant");
    assert_status(&unknown_tenant, Code::NotFound, "TENANT_NOT_FOUND");

    let reconciled = client
        .reconcile(authorized(
            &admin,
            proto::ReconcileRequest {
                operation_id: owned.operation_id.clone(),
                expected_fence: before.fence,
                resolution: Some(Resolution::Succeeded(proto::Result {
                    body: br#"{"charge":"ch_9"}"#.to_vec(),
                    content_type: "application/json".into(),
                    metadata: Default::default(),
                })),
                tenant: "tenant-b".into(),
            },
        ))
        .await
        .expect("an admin with reconcile reconciles on tenant-b's behalf")
        .into_inner();
    assert_eq!(reconciled.state(), proto::OperationState::Succeeded);

    // tenant-b's own view: the history names the admin's credential and
    // that it acted on tenant-b's behalf.
    let (after, history) = read(&mut client, &world.tenant_b, &owned.operation_id, "").await;
    assert_eq!(after.state(), proto::OperationState::Succeeded);
    let last = history.last().expect("history");
    assert_eq!(last.event, "RECONCILED");
    assert_eq!(last.credential, format!("token:{ADMIN_TOKEN_NAME}"));
    assert!(last.admin_on_behalf);
    // The owner's own entries name no credential.
    assert!(
        history[..history.len() - 1]
            .iter()
            .all(|entry| entry.credential.is_empty() && !entry.admin_on_behalf),
        "{history:?}"
    );
    // The audit log, under tenant-b: who, what, which operation.
    let audit = operation_audit(world.store.as_ref(), "tenant-b").await;
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0].actor, format!("token:{ADMIN_TOKEN_NAME}"));
    assert_eq!(audit[0].action, "operation.reconcile");
    assert_eq!(
        audit[0].target.as_deref(),
        Some(owned.operation_id.as_str())
    );
    assert_eq!(audit[0].detail.as_deref(), Some("succeeded"));

    // The effect: tenant-b's next Claim replays the result, never executes.
    let replay = client
        .claim(authorized(
            &world.tenant_b,
            claim_json("payments.charge", "order-9", "{}"),
        ))
        .await
        .expect("claim")
        .into_inner();
    assert_eq!(outcome_name(&replay), "completed", "{replay:?}");

    // A tenant's own reconciler is named too, but not as an admin, and
    // writes no audit row.
    let second = claim_owned(
        &mut client,
        &world.tenant_b,
        claim_json("payments.charge", "order-10", "{}"),
    )
    .await;
    fail_unknown(&mut client, &world.tenant_b, &second).await;
    client
        .reconcile(authorized(
            &world.tenant_b,
            proto::ReconcileRequest {
                operation_id: second.operation_id.clone(),
                expected_fence: second.fence,
                resolution: Some(Resolution::Succeeded(proto::Result::default())),
                tenant: String::new(),
            },
        ))
        .await
        .expect("own reconcile");
    let (_, history) = read(&mut client, &world.tenant_b, &second.operation_id, "").await;
    let last = history.last().expect("history");
    assert_eq!(
        (
            last.event.as_str(),
            last.credential.as_str(),
            last.admin_on_behalf
        ),
        ("RECONCILED", "token:initial", false)
    );
    assert_eq!(
        operation_audit(world.store.as_ref(), "tenant-b")
            .await
            .len(),
        1
    );
}

async fn naming_another_tenant_without_admin_is_refused_and_changes_nothing(backend: Backend) {
    let world = World::start(backend).await;
    let admin_only = add_token(world.store.as_ref(), "tenant-a", "admin-only", "admin").await;
    let mut client = world.client().await;
    let owned = claim_owned(
        &mut client,
        &world.tenant_b,
        claim_json("payments.charge", "order-1", "{}"),
    )
    .await;
    fail_unknown(&mut client, &world.tenant_b, &owned).await;
    let (before, history_before) =
        read(&mut client, &world.tenant_b, &owned.operation_id, "").await;

    let reconcile = |token: &str| {
        authorized(
            token,
            proto::ReconcileRequest {
                operation_id: owned.operation_id.clone(),
                expected_fence: before.fence,
                resolution: Some(Resolution::NotApplied(proto::NotApplied {})),
                tenant: "tenant-b".into(),
            },
        )
    };
    // tenant-a's reconciler (operations,reconcile) names tenant-b: no admin.
    let refused = client
        .reconcile(reconcile(&world.tenant_a))
        .await
        .expect_err("a reconciler may not name another tenant");
    assert_status(&refused, Code::PermissionDenied, "MISSING_SCOPE");
    assert_eq!(
        error_info(&refused).1.get("scope").map(String::as_str),
        Some("admin")
    );
    // An admin without reconcile: admin grants no reconcile by itself.
    let refused = client
        .reconcile(reconcile(&admin_only))
        .await
        .expect_err("admin alone does not reconcile");
    assert_status(&refused, Code::PermissionDenied, "MISSING_SCOPE");
    assert_eq!(
        error_info(&refused).1.get("scope").map(String::as_str),
        Some("reconcile")
    );
    // A Lookup naming a tenant needs admin as well.
    let refused = client
        .lookup(authorized(
            &world.tenant_a,
            proto::LookupRequest {
                target: by_id(&owned.operation_id),
                tenant: "tenant-b".into(),
                ..Default::default()
            },
        ))
        .await
        .expect_err("a reconciler may not read another tenant");
    assert_status(&refused, Code::PermissionDenied, "MISSING_SCOPE");

    // Nothing changed: state, fence, history, audit.
    let (after, history_after) = read(&mut client, &world.tenant_b, &owned.operation_id, "").await;
    assert_eq!(after.state(), proto::OperationState::Unknown);
    assert_eq!(after.fence, before.fence);
    assert_eq!(history_after, history_before);
    assert!(
        operation_audit(world.store.as_ref(), "tenant-b")
            .await
            .is_empty()
    );
    // And the admin-only credential reads it (Lookup admits admin alone).
    let (read_by_admin, _) = read(&mut client, &admin_only, &owned.operation_id, "tenant-b").await;
    assert_eq!(read_by_admin.fence, before.fence);
}

async fn forget_tombstones_a_succeeded_operation_and_a_replayed_claim_then_gets_result_expired(
    backend: Backend,
) {
    let world = World::start(backend).await;
    let admin = add_token(world.store.as_ref(), "tenant-a", ADMIN_TOKEN_NAME, "admin").await;
    let mut client = world.client().await;
    let request = || claim_json("payments.charge", "order-7", r#"{"amount":7}"#);
    let owned = claim_owned(&mut client, &world.tenant_b, request()).await;
    let body = r#"{"charge":"ch_7"}"#;
    complete(&mut client, &world.tenant_b, &owned, body).await;
    // Replayed twice: the second answer may come from the result cache.
    for _ in 0..2 {
        let replay = client
            .claim(authorized(&world.tenant_b, request()))
            .await
            .expect("replay")
            .into_inner();
        assert_eq!(outcome_name(&replay), "completed", "{replay:?}");
    }

    let reason = "GDPR erasure request #4711";
    let forgotten = client
        .forget(authorized(
            &admin,
            forget(&owned.operation_id, owned.fence, reason, "tenant-b"),
        ))
        .await
        .expect("forget")
        .into_inner();
    assert_eq!(forgotten.state(), proto::OperationState::Expired);
    assert!(
        forgotten.dropped_bytes >= body.len() as u64,
        "{forgotten:?}"
    );
    assert!(forgotten.retain_until.is_some());

    // The same Claim, on the same server: RESULT_EXPIRED, never a replay of
    // the forgotten result, never a new execution.
    for _ in 0..2 {
        let expired = client
            .claim(authorized(&world.tenant_b, request()))
            .await
            .expect_err("a tombstone");
        assert_status(&expired, Code::FailedPrecondition, "RESULT_EXPIRED");
    }
    // Stored: a tombstone without the result; the history says who and why.
    let (after, history) = read(&mut client, &world.tenant_b, &owned.operation_id, "").await;
    assert_eq!(after.state(), proto::OperationState::Expired);
    assert_eq!(after.result, None, "the result bytes are gone");
    assert_eq!(after.fence, owned.fence, "forget draws no fence");
    assert_eq!(events(&history), ["CLAIMED", "COMPLETED", "FORGOTTEN"]);
    let last = history.last().expect("history");
    assert_eq!(last.detail, reason);
    assert_eq!(last.credential, format!("token:{ADMIN_TOKEN_NAME}"));
    assert!(last.admin_on_behalf);
    assert_eq!(last.from_state(), proto::OperationState::Succeeded);
    // The store holds no result for it any more.
    let found = world
        .store
        .find(
            idemd::domain::TenantId(after_tenant_id(&world, &owned.operation_id).await),
            &idemd::domain::Target::Id(idemd::domain::OperationId(
                owned.operation_id.parse().expect("a uuid"),
            )),
            None,
        )
        .await
        .expect("find")
        .expect("the tombstone");
    assert_eq!(found.record.outcome, None);
    // And the durable audit row: who, what, which, why.
    let audit = operation_audit(world.store.as_ref(), "tenant-b").await;
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0].actor, format!("token:{ADMIN_TOKEN_NAME}"));
    assert_eq!(audit[0].action, "operation.forget");
    assert_eq!(
        audit[0].target.as_deref(),
        Some(owned.operation_id.as_str())
    );
    assert_eq!(audit[0].reason.as_deref(), Some(reason));
    let detail = audit[0].detail.clone().unwrap_or_default();
    assert!(detail.contains("state=succeeded"), "{detail}");
}

/// tenant-b's id, by the name (the harness hands out tokens, not ids).
async fn after_tenant_id(world: &World, _operation_id: &str) -> i64 {
    world
        .store
        .tenant_by_name("tenant-b")
        .await
        .expect("tenant read")
        .expect("tenant-b")
        .0
}

async fn forget_refuses_unresolved_operations_and_tombstones_and_changes_nothing(backend: Backend) {
    let world = World::start(backend).await;
    let admin = add_token(world.store.as_ref(), "tenant-b", ADMIN_TOKEN_NAME, "admin").await;
    let mut client = world.client().await;
    let token = world.tenant_b.clone();
    let in_progress =
        claim_owned(&mut client, &token, claim_json("orders.ship", "live", "{}")).await;
    let unknown = claim_owned(
        &mut client,
        &token,
        claim_json("orders.ship", "doubt", "{}"),
    )
    .await;
    fail_unknown(&mut client, &token, &unknown).await;

    for (owned, state) in [
        (&in_progress, proto::OperationState::InProgress),
        (&unknown, proto::OperationState::Unknown),
    ] {
        let (before, history_before) = read(&mut client, &token, &owned.operation_id, "").await;
        // The admin's own tenant: no name needed.
        let refused = client
            .forget(authorized(
                &admin,
                forget(&owned.operation_id, before.fence, "poisoned", ""),
            ))
            .await
            .expect_err("not ended");
        assert_status(&refused, Code::FailedPrecondition, "OPERATION_UNRESOLVED");
        let (after, history_after) = read(&mut client, &token, &owned.operation_id, "").await;
        assert_eq!(after.state(), state);
        assert_eq!(after.fence, before.fence);
        assert_eq!(history_after, history_before);
    }
    // The live owner still owns it: its Complete is accepted.
    complete(&mut client, &token, &in_progress, "{}").await;
    // Forgotten once (the admin's own tenant, named: not on another's
    // behalf); a second Forget finds a tombstone.
    client
        .forget(authorized(
            &admin,
            forget(
                &in_progress.operation_id,
                in_progress.fence,
                "poisoned",
                "tenant-b",
            ),
        ))
        .await
        .expect("forget the ended one");
    let (_, history) = read(&mut client, &token, &in_progress.operation_id, "").await;
    let last = history.last().expect("history");
    assert_eq!(
        (
            last.event.as_str(),
            last.credential.as_str(),
            last.admin_on_behalf
        ),
        ("FORGOTTEN", "token:ops-admin", false)
    );
    let again = client
        .forget(authorized(
            &admin,
            forget(&in_progress.operation_id, in_progress.fence, "poisoned", ""),
        ))
        .await
        .expect_err("a tombstone");
    assert_status(&again, Code::FailedPrecondition, "ALREADY_FORGOTTEN");
    assert_eq!(
        operation_audit(world.store.as_ref(), "tenant-b")
            .await
            .len(),
        1
    );
}

async fn forget_with_a_stale_fence_or_without_admin_or_reason_is_refused_and_changes_nothing(
    backend: Backend,
) {
    let world = World::start(backend).await;
    let admin = add_token(world.store.as_ref(), "tenant-a", ADMIN_TOKEN_NAME, "admin").await;
    let mut client = world.client().await;
    let token = world.tenant_b.clone();
    let owned = claim_owned(&mut client, &token, claim_json("orders.ship", "done", "{}")).await;
    complete(&mut client, &token, &owned, r#"{"shipped":true}"#).await;
    let (before, _) = read(&mut client, &token, &owned.operation_id, "").await;

    let stale = client
        .forget(authorized(
            &admin,
            forget(&owned.operation_id, owned.fence + 1, "poisoned", "tenant-b"),
        ))
        .await
        .expect_err("a stale fence");
    assert_status(&stale, Code::Aborted, "LEASE_LOST");
    // tenant-b's own operations,reconcile credential: no admin.
    let not_admin = client
        .forget(authorized(
            &token,
            forget(&owned.operation_id, owned.fence, "poisoned", ""),
        ))
        .await
        .expect_err("forget needs admin");
    assert_status(&not_admin, Code::PermissionDenied, "MISSING_SCOPE");
    assert_eq!(
        error_info(&not_admin).1.get("scope").map(String::as_str),
        Some("admin")
    );
    for reason in ["", "  ", &"x".repeat(513)] {
        let no_reason = client
            .forget(authorized(
                &admin,
                forget(&owned.operation_id, owned.fence, reason, "tenant-b"),
            ))
            .await
            .expect_err("a reason is required");
        assert_status(&no_reason, Code::InvalidArgument, "INVALID_REQUEST");
        assert_eq!(violated_fields(&no_reason), ["reason"]);
    }

    // Nothing changed: still SUCCEEDED, and the next Claim replays it.
    let (after, _) = read(&mut client, &token, &owned.operation_id, "").await;
    assert_eq!(after.state(), proto::OperationState::Succeeded);
    assert_eq!(after.result, before.result);
    let replay = client
        .claim(authorized(&token, claim_json("orders.ship", "done", "{}")))
        .await
        .expect("replay")
        .into_inner();
    assert_eq!(outcome_name(&replay), "completed");
    assert!(
        operation_audit(world.store.as_ref(), "tenant-b")
            .await
            .is_empty()
    );
}

async fn get_policy_without_a_policy_file_answers_the_servers_bounds(backend: Backend) {
    let world = World::start(backend).await;
    let admin_only = add_token(world.store.as_ref(), "tenant-a", "admin-only", "admin").await;
    let operations_only =
        add_token(world.store.as_ref(), "tenant-a", "service", "operations").await;
    let mut client = world.client().await;
    let ask = |token: &str, operation: &str| {
        authorized(
            token,
            proto::GetPolicyRequest {
                operation: operation.into(),
            },
        )
    };
    let limits = test_limits();
    for token in [&world.tenant_a, &admin_only] {
        let policy = client
            .get_policy(ask(token, "payments.charge"))
            .await
            .expect("get policy")
            .into_inner();
        assert!(policy.server_defaults);
        assert_eq!(policy.matched_pattern, "");
        assert_eq!(
            policy.default_lease.map(|lease| lease.seconds),
            Some(limits.default_lease.num_seconds())
        );
        assert_eq!(policy.max_attempts, limits.max_attempts);
        assert_eq!(policy.default_max_attempts, limits.default_max_attempts);
        assert_eq!(policy.default_operation_deadline, None);
    }
    let refused = client
        .get_policy(ask(&operations_only, "payments.charge"))
        .await
        .expect_err("a service credential");
    assert_status(&refused, Code::PermissionDenied, "MISSING_SCOPE");
    let invalid = client
        .get_policy(ask(&world.tenant_a, "a b"))
        .await
        .expect_err("not an operation name");
    assert_status(&invalid, Code::InvalidArgument, "INVALID_REQUEST");
    assert_eq!(violated_fields(&invalid), ["operation"]);
}

// The CLI, as the real binary against a real `idemd serve`.

fn ops(data: &ProcessData, daemon: &Daemon, token: &str, args: &[&str]) -> Output {
    data.command(&[&["ops"], args].concat())
        .env("IDEMD_ADDR", daemon.addr.to_string())
        .env("IDEMD_TOKEN", token)
        .output()
        .expect("idemd runs")
}

fn succeeded(output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "exit {:?}: {stdout}{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn create_tenant_with_scopes(data: &ProcessData, name: &str, scopes: &str) -> String {
    let output = data
        .command(&["tenant", "create", name, "--scopes", scopes])
        .output()
        .expect("idemd runs");
    succeeded(&output).trim().to_owned()
}

const POLICIES: &str = r#"
policies:
  - operation: "payments.*"
    lease: { default: 2s, max: 10s }
    max_attempts: { default: 2, max: 3 }
    operation_deadline: { default: 1h }
    on_failed: new_attempt
"#;

async fn ops_forget_policy_and_tenant_flags_against_the_real_binary(backend: Backend) {
    let data = backend.into_process_data().await;
    let shop = data.create_tenant("shop");
    let operator = create_tenant_with_scopes(&data, "operators", "reconcile,admin");
    let file = data.directory().join("policies.yaml");
    std::fs::write(&file, POLICIES).expect("write the policy file");
    let file_arg = file.to_string_lossy().into_owned();
    let server = data.serve(&["--policy-file", &file_arg]).await;
    let mut client = server.client().await;

    // ops policy: the matching entry, and the server's bounds elsewhere.
    let table = succeeded(&ops(
        &data,
        &server,
        &operator,
        &["policy", "--operation", "payments.charge"],
    ));
    assert!(table.contains("policy `payments.*`"), "{table}");
    assert!(table.contains("2s") && table.contains("10s"), "{table}");
    assert!(
        table.contains("a Claim of a FAILED operation gets: new_attempt"),
        "{table}"
    );
    let document: serde_json::Value = serde_json::from_str(&succeeded(&ops(
        &data,
        &server,
        &operator,
        &["policy", "--operation", "payments.charge", "-o", "json"],
    )))
    .expect("json");
    assert_eq!(document["policy"]["matchedPattern"], "payments.*");
    assert_eq!(document["policy"]["defaultMaxAttempts"], 2);
    assert_eq!(document["policy"]["maxAttempts"], 3);
    assert_eq!(document["policy"]["defaultOperationDeadline"], "3600s");
    assert_eq!(document["policy"]["onFailed"], "ON_FAILED_NEW_ATTEMPT");
    // The same bounds a Claim is admitted with.
    let claimed = claim_owned(
        &mut client,
        &shop,
        claim_json("payments.charge", "p1", "{}"),
    )
    .await;
    assert_eq!(claimed.max_attempts, 2);
    let other: serde_json::Value = serde_json::from_str(&succeeded(&ops(
        &data,
        &server,
        &operator,
        &["policy", "--operation", "orders.ship", "-o", "json"],
    )))
    .expect("json");
    assert_eq!(other["policy"]["serverDefaults"], true);
    assert_eq!(other["policy"]["onFailed"], "ON_FAILED_REPLAY");

    // ops lookup/reconcile --tenant: the operator acts on shop's behalf.
    let owned = claim_owned(&mut client, &shop, claim_json("orders.ship", "o1", "{}")).await;
    fail_unknown(&mut client, &shop, &owned).await;
    let table = succeeded(&ops(
        &data,
        &server,
        &operator,
        &["lookup", &owned.operation_id, "--tenant", "shop"],
    ));
    assert!(table.contains("UNKNOWN"), "{table}");
    let body = data.directory().join("evidence.json");
    std::fs::write(&body, r#"{"shipped":true}"#).expect("write evidence");
    let body_arg = body.to_string_lossy().into_owned();
    succeeded(&ops(
        &data,
        &server,
        &operator,
        &[
            "reconcile",
            &owned.operation_id,
            "--succeeded",
            "--result-file",
            &body_arg,
            "--tenant",
            "shop",
            "--yes",
        ],
    ));
    let table = succeeded(&ops(
        &data,
        &server,
        &operator,
        &["lookup", &owned.operation_id, "--tenant", "shop"],
    ));
    assert!(
        table.contains("token:initial (admin, on behalf)"),
        "the history names the operator's credential:\n{table}"
    );

    // ops forget: declined at the prompt changes nothing (exit 5) ...
    let declined = data
        .command(&[
            "ops",
            "forget",
            &owned.operation_id,
            "--reason",
            "erasure #1",
            "--tenant",
            "shop",
        ])
        .env("IDEMD_ADDR", server.addr.to_string())
        .env("IDEMD_TOKEN", &operator)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("idemd runs");
    assert_eq!(declined.status.code(), Some(5));
    let plan = String::from_utf8_lossy(&declined.stderr);
    assert!(
        plan.contains("SUCCEEDED") && plan.contains("RESULT_EXPIRED"),
        "{plan}"
    );
    let (still, _) = read(&mut client, &shop, &owned.operation_id, "").await;
    assert_eq!(still.state(), proto::OperationState::Succeeded);
    // ... without the admin scope it is refused (exit 1) ...
    let refused = ops(
        &data,
        &server,
        &shop,
        &["forget", &owned.operation_id, "--reason", "x", "--yes"],
    );
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("MISSING_SCOPE"));
    // ... a tenant that does not exist is exit 4 ...
    let missing = ops(
        &data,
        &server,
        &operator,
        &[
            "forget",
            &owned.operation_id,
            "--reason",
            "x",
            "--tenant",
            "nope",
            "--yes",
        ],
    );
    assert_eq!(missing.status.code(), Some(4));
    // ... and with --yes it forgets.
    let done = succeeded(&ops(
        &data,
        &server,
        &operator,
        &[
            "forget",
            &owned.operation_id,
            "--reason",
            "erasure #1",
            "--tenant",
            "shop",
            "--yes",
        ],
    ));
    assert!(done.contains("now EXPIRED"), "{done}");
    let expired = client
        .claim(authorized(&shop, claim_json("orders.ship", "o1", "{}")))
        .await
        .expect_err("a tombstone");
    assert_status(&expired, Code::FailedPrecondition, "RESULT_EXPIRED");
    let table = succeeded(&ops(
        &data,
        &server,
        &operator,
        &["lookup", &owned.operation_id, "--tenant", "shop"],
    ));
    assert!(
        table.contains("FORGOTTEN") && table.contains("erasure #1"),
        "{table}"
    );
    server.kill();
}

/// Postgres only (two replicas share one database): a result replayed, and
/// so cached, by one replica stops being replayed there once another replica
/// forgets it: the change notification drops the cached entry, and the next
/// Claim on the first replica gets RESULT_EXPIRED. Without that, the cache
/// would replay the forgotten result until its retention (a day).
#[sqlx::test(migrator = "idemd::store::postgres::MIGRATOR")]
async fn a_result_forgotten_on_one_replica_is_no_longer_replayed_by_another(
    _: sqlx::postgres::PgPoolOptions,
    connect: sqlx::postgres::PgConnectOptions,
) {
    let watcher = pool(connect.clone()).await;
    let data = Backend::postgres(connect).await.into_process_data().await;
    let shop = data.create_tenant("shop");
    let operator = create_tenant_with_scopes(&data, "operators", "admin");
    let replica_a = data.serve(&[]).await;
    let replica_b = data.serve(&[]).await;
    // Both replicas listen for changes before anything changes.
    for _ in 0..250 {
        let listening: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE query LIKE 'LISTEN%' AND datname = current_database()",
        )
        .fetch_one(&watcher)
        .await
        .expect("pg_stat_activity");
        if listening >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let mut client_a = replica_a.client().await;
    let mut client_b = replica_b.client().await;
    let request = || claim_json("payments.charge", "order-1", "{}");
    let owned = claim_owned(&mut client_a, &shop, request()).await;
    complete(&mut client_a, &shop, &owned, r#"{"charge":"ch_1"}"#).await;
    for _ in 0..3 {
        let replay = client_a
            .claim(authorized(&shop, request()))
            .await
            .expect("replay")
            .into_inner();
        assert_eq!(outcome_name(&replay), "completed");
    }

    client_b
        .forget(authorized(
            &operator,
            forget(&owned.operation_id, owned.fence, "poisoned result", "shop"),
        ))
        .await
        .expect("forget on replica b");

    // Replica a hears of it within moments (polling the answer, not sleeping
    // a fixed time), and from then on never replays it.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        match client_a.claim(authorized(&shop, request())).await {
            Err(status) => {
                assert_status(&status, Code::FailedPrecondition, "RESULT_EXPIRED");
                break;
            }
            Ok(replay) => {
                assert_eq!(outcome_name(&replay.into_inner()), "completed");
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "replica a still replays the forgotten result"
                );
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }
    }
    for _ in 0..3 {
        let expired = client_a
            .claim(authorized(&shop, request()))
            .await
            .expect_err("a tombstone");
        assert_status(&expired, Code::FailedPrecondition, "RESULT_EXPIRED");
    }
    replica_a.kill();
    replica_b.kill();
}
