//! Credentials apart from tenants (issue 19): scopes at admission over gRPC
//! and Connect JSON, rotation across an overlap, expiry and revocation within
//! the auth cache's bound (on a second replica too), last-used times, the
//! audit trail, and a database made with the previous schema keeping its
//! tokens.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::TimeDelta;
use idemd::auth::AuthSettings;
use idemd::proto;
use idemd::store::{Actor, NewToken, Store, TokenCreated};
use prost::Message;
use serde_json::json;
use tonic::Code;

use crate::harness::*;

store_tests!(
    each_scope_admits_its_rpcs_and_refuses_the_others_without_a_write,
    scopes_apply_alike_over_connect_json,
    rotation_keeps_the_tenant_and_replays_across_the_overlap,
    an_expired_token_is_refused_though_its_verdict_was_cached,
    a_revocation_reaches_a_second_replica_within_the_cache_ttl,
    tokens_seen_are_recorded_as_used_in_batches,
    every_credential_change_is_audited_without_a_secret,
    the_cli_manages_tokens_and_never_lists_a_secret,
    the_audit_trail_is_pruned_past_its_retention,
    tenant_apply_converges_idempotently_and_prunes_only_when_asked,
);

fn tester() -> Actor {
    Actor {
        name: "cli:tester@test-host".into(),
        reason: Some("issue 19 test".into()),
    }
}

/// A new token of `tenant`, stored as the CLI stores it.
async fn add_token(
    store: &dyn Store,
    tenant: &str,
    name: &str,
    scopes: &str,
    expires_in: Option<TimeDelta>,
) -> String {
    let token = idemd::auth::generate_token().expect("a token");
    let created = store
        .credentials()
        .create_token(
            tenant,
            &NewToken {
                name: name.into(),
                token_sha256: idemd::auth::token_sha256(&token),
                scopes: scopes.into(),
                expires_in,
            },
            &tester(),
        )
        .await
        .expect("token stored");
    assert_eq!(created, TokenCreated::Created);
    token
}

/// Auth verdicts trusted for `ttl`, so a test waits for the bound, not 5 s.
fn with_cache_ttl(ttl: Duration) -> ServerConfig {
    ServerConfig {
        auth: AuthSettings {
            cache_ttl: ttl,
            negative_cache_ttl: ttl,
            ..AuthSettings::default()
        },
        ..ServerConfig::default()
    }
}

const METHODS: [&str; 7] = [
    "Claim",
    "Renew",
    "Complete",
    "Fail",
    "Lookup",
    "Reconcile",
    "ListUnresolved",
];

/// Calls `method` with `token` on the operation `owned` describes, with
/// arguments that would change it (its real fence) if the call were served.
async fn call(
    client: &mut Client,
    token: &str,
    method: &str,
    owned: &proto::Ownership,
) -> Result<(), tonic::Status> {
    let id = owned.operation_id.clone();
    let fence = owned.fence;
    match method {
        "Claim" => client
            .claim(authorized(
                token,
                claim_json("payments.charge", "scoped-new", "{}"),
            ))
            .await
            .map(drop),
        "Renew" => client
            .renew(authorized(
                token,
                proto::RenewRequest {
                    operation_id: id,
                    fence,
                    lease: millis(30_000),
                },
            ))
            .await
            .map(drop),
        "Complete" => client
            .complete(authorized(
                token,
                proto::CompleteRequest {
                    operation_id: id,
                    fence,
                    result: result("{\"charge\":1}"),
                },
            ))
            .await
            .map(drop),
        "Fail" => client
            .fail(authorized(
                token,
                proto::FailRequest {
                    operation_id: id,
                    fence,
                    disposition: proto::FailDisposition::Terminal as i32,
                    error: Some(proto::OperationError {
                        code: "declined".into(),
                        message: "no".into(),
                        ..Default::default()
                    }),
                    retry_after: None,
                },
            ))
            .await
            .map(drop),
        "Lookup" => client
            .lookup(authorized(
                token,
                proto::LookupRequest {
                    target: Some(proto::lookup_request::Target::OperationId(id)),
                    ..Default::default()
                },
            ))
            .await
            .map(drop),
        "Reconcile" => client
            .reconcile(authorized(
                token,
                proto::ReconcileRequest {
                    tenant: String::new(),
                    operation_id: id,
                    expected_fence: fence,
                    resolution: Some(proto::reconcile_request::Resolution::NotApplied(
                        proto::NotApplied {},
                    )),
                },
            ))
            .await
            .map(drop),
        "ListUnresolved" => client
            .list_unresolved(authorized(token, proto::ListUnresolvedRequest::default()))
            .await
            .map(drop),
        other => panic!("no such method {other}"),
    }
}

/// The scope a credential holding `scopes` lacks for `method`, if any.
fn missing_scope(scopes: &str, method: &str) -> Option<&'static str> {
    let holds = |scope: &str| scopes.split(',').any(|held| held == scope);
    match method {
        "Claim" | "Renew" | "Complete" | "Fail" => (!holds("operations")).then_some("operations"),
        "Reconcile" | "ListUnresolved" => (!holds("reconcile")).then_some("reconcile"),
        // An operator reads any operation too (issue 20 item 4).
        "Lookup" => {
            (!holds("operations") && !holds("reconcile") && !holds("admin")).then_some("operations")
        }
        other => panic!("no such method {other}"),
    }
}

fn assert_missing_scope(status: &tonic::Status, scope: &str) {
    assert_status(status, Code::PermissionDenied, "MISSING_SCOPE");
    assert_eq!(
        error_info(status).1.get("scope").map(String::as_str),
        Some(scope),
        "{status:?}"
    );
}

async fn each_scope_admits_its_rpcs_and_refuses_the_others_without_a_write(backend: Backend) {
    let world = World::start(backend).await;
    let store = world.store.as_ref();
    let mut client = world.client().await;
    // An operation its owner holds: a refused Complete, Fail or Reconcile
    // carrying its real fence would change it if it were served.
    let claimed = client
        .claim(authorized(
            &world.tenant_a,
            claim_json("payments.charge", "held", "{}"),
        ))
        .await
        .expect("claim")
        .into_inner();
    let owned = ownership(&claimed).expect("acquired").clone();
    let mut history_before = history(&mut client, &world.tenant_a, &owned.operation_id).await;
    let operations_before = world.backend.count("SELECT count(*) FROM operations").await;

    // The operations token last: its allowed Complete ends the operation.
    for scopes in ["admin", "reconcile", "operations"] {
        let token = add_token(store, "tenant-a", scopes, scopes, None).await;
        for method in METHODS {
            let answered = call(&mut client, &token, method, &owned).await;
            match (missing_scope(scopes, method), answered) {
                (Some(scope), Err(status)) => assert_missing_scope(&status, scope),
                (Some(scope), Ok(())) => panic!("{scopes} may not call {method} (needs {scope})"),
                (None, Err(status)) => assert_ne!(
                    status.code(),
                    Code::PermissionDenied,
                    "{scopes} may call {method}: {status:?}"
                ),
                (None, Ok(())) => {}
            }
            let history_now = history(&mut client, &world.tenant_a, &owned.operation_id).await;
            if missing_scope(scopes, method).is_some() {
                assert_eq!(
                    events(&history_now),
                    events(&history_before),
                    "{scopes}: the refused {method} wrote"
                );
            }
            history_before = history_now;
        }
    }
    // The operations token's Claim created its one new operation; the
    // refusals created none.
    assert_eq!(
        world.backend.count("SELECT count(*) FROM operations").await,
        operations_before + 1
    );
}

async fn scopes_apply_alike_over_connect_json(backend: Backend) {
    use crate::connect::{call as post, claim, details};
    let world = World::start(backend).await;
    let store = world.store.as_ref();
    let operations = add_token(store, "tenant-a", "payments", "operations", None).await;
    let reconcile = add_token(store, "tenant-a", "reconciler", "reconcile", None).await;
    let admin = add_token(store, "tenant-a", "operator", "admin", None).await;
    let addr = world.server.addr;
    let claimed = post(addr, "Claim", Some(&operations), claim("json-1", "{}")).await;
    assert_eq!(claimed.status, 200, "{}", claimed.body);
    let operation_id = claimed.body["acquired"]["ownership"]["operationId"]
        .as_str()
        .expect("acquired")
        .to_owned();
    let fence = claimed.body["acquired"]["ownership"]["fence"].clone();
    let operations_before = world.backend.count("SELECT count(*) FROM operations").await;

    let complete = json!({ "operationId": operation_id, "fence": fence, "result": {} });
    let reconcile_body =
        json!({ "operationId": operation_id, "expectedFence": fence, "notApplied": {} });
    let lookup = json!({ "operationId": operation_id });
    let forget_body =
        json!({ "operationId": operation_id, "expectedFence": fence, "reason": "test" });
    for (token, method, body, scope) in [
        (&reconcile, "Complete", complete.clone(), "operations"),
        (&reconcile, "Claim", claim("json-2", "{}"), "operations"),
        (
            &operations,
            "Reconcile",
            reconcile_body.clone(),
            "reconcile",
        ),
        (&operations, "ListUnresolved", json!({}), "reconcile"),
        (&admin, "Reconcile", reconcile_body.clone(), "reconcile"),
        (&operations, "Forget", forget_body.clone(), "admin"),
        (&reconcile, "Forget", forget_body, "admin"),
    ] {
        let answer = post(addr, method, Some(token), body).await;
        assert_eq!(answer.status, 403, "{method}: {}", answer.body);
        assert_eq!(answer.body["code"], "permission_denied", "{}", answer.body);
        let details = details(&answer);
        let info = tonic_types::pb::ErrorInfo::decode(
            details
                .get("google.rpc.ErrorInfo")
                .expect("an ErrorInfo")
                .as_slice(),
        )
        .expect("an ErrorInfo");
        assert_eq!(info.reason, "MISSING_SCOPE");
        assert_eq!(info.metadata.get("scope").map(String::as_str), Some(scope));
    }
    assert_eq!(
        post(addr, "Lookup", Some(&reconcile), lookup.clone())
            .await
            .status,
        200
    );
    // An admin credential reads its tenant's operations (and, naming one,
    // another tenant's: tests/it/admin.rs).
    assert_eq!(post(addr, "Lookup", Some(&admin), lookup).await.status, 200);
    assert_eq!(
        post(addr, "ListUnresolved", Some(&reconcile), json!({}))
            .await
            .status,
        200
    );
    // Nothing the refusals carried was written: the operation is still
    // held, and no other was created.
    let still = post(addr, "Complete", Some(&operations), complete).await;
    assert_eq!(still.status, 200, "{}", still.body);
    assert_eq!(
        world.backend.count("SELECT count(*) FROM operations").await,
        operations_before
    );
}

async fn rotation_keeps_the_tenant_and_replays_across_the_overlap(backend: Backend) {
    let ttl = Duration::from_millis(300);
    let world = World::start_configured(backend, test_limits(), with_cache_ttl(ttl)).await;
    let store = world.store.as_ref();
    let old = world.tenant_a.clone();
    let provider = Provider::default();
    let request = claim_json("payments.charge", "rotated-1", r#"{"amount":7}"#);
    let mut client = world.client().await;
    assert_eq!(
        attempt(&mut client, &old, request.clone(), &provider).await,
        Attempt::Executed
    );

    // The overlap: both tokens work.
    let new = add_token(store, "tenant-a", "rotated", "operations,reconcile", None).await;
    for token in [&old, &new] {
        client
            .list_unresolved(authorized(token, proto::ListUnresolvedRequest::default()))
            .await
            .expect("both tokens work during the overlap");
    }
    assert!(
        store
            .credentials()
            .revoke_token("tenant-a", "initial", &tester())
            .await
            .expect("revoke")
    );
    // Same tenant: the late retry with the new token is a replay.
    assert_eq!(
        attempt(&mut client, &new, request, &provider).await,
        Attempt::Replayed
    );
    assert_eq!(provider.effects(), 1);
    tokio::time::sleep(ttl + Duration::from_millis(100)).await;
    let refused = client
        .list_unresolved(authorized(&old, proto::ListUnresolvedRequest::default()))
        .await
        .expect_err("the old token is revoked");
    assert_status(&refused, Code::Unauthenticated, "INVALID_CREDENTIALS");
}

async fn an_expired_token_is_refused_though_its_verdict_was_cached(backend: Backend) {
    // The default cache TTL (5 s) is longer than the token's life: the
    // cached yes must end with the token, not with the TTL.
    let world = World::start(backend).await;
    let token = add_token(
        world.store.as_ref(),
        "tenant-a",
        "short",
        "reconcile",
        Some(TimeDelta::milliseconds(1500)),
    )
    .await;
    let created = Instant::now();
    let mut client = world.client().await;
    client
        .list_unresolved(authorized(&token, proto::ListUnresolvedRequest::default()))
        .await
        .expect("valid before its expiry");
    tokio::time::sleep(Duration::from_millis(1800).saturating_sub(created.elapsed())).await;
    let refused = client
        .list_unresolved(authorized(&token, proto::ListUnresolvedRequest::default()))
        .await
        .expect_err("expired");
    assert_status(&refused, Code::Unauthenticated, "INVALID_CREDENTIALS");
    let listed = world
        .store
        .credentials()
        .list_tokens("tenant-a")
        .await
        .expect("list")
        .expect("tenant");
    assert!(
        listed
            .iter()
            .any(|token| token.name == "short" && token.expired),
        "{listed:?}"
    );
}

/// A second replica: its own store handle (its own pool, on Postgres) and
/// its own authenticator and cache.
async fn second_store(backend: &Backend) -> Arc<dyn Store> {
    match backend {
        Backend::Postgres { connect, .. } => Arc::new(
            idemd::store::postgres::PostgresStore::from_pool(pool((**connect).clone()).await),
        ),
        Backend::Sqlite { .. } => backend.store(),
    }
}

async fn a_revocation_reaches_a_second_replica_within_the_cache_ttl(backend: Backend) {
    let ttl = Duration::from_secs(1);
    let world = World::start_configured(backend, test_limits(), with_cache_ttl(ttl)).await;
    let other = TestServer::start_configured(
        second_store(&world.backend).await,
        test_limits(),
        with_cache_ttl(ttl),
    )
    .await;
    let token = add_token(
        world.store.as_ref(),
        "tenant-a",
        "leaked",
        "operations,reconcile",
        None,
    )
    .await;
    let mut clients = [world.client().await, other.client().await];
    // Both replicas trust the token, from their caches.
    for client in &mut clients {
        client
            .list_unresolved(authorized(&token, proto::ListUnresolvedRequest::default()))
            .await
            .expect("valid");
    }
    assert!(
        world
            .store
            .credentials()
            .revoke_token("tenant-a", "leaked", &tester())
            .await
            .expect("revoke")
    );
    let revoked = Instant::now();
    // The bound, plus a store lookup's worth of slack.
    let bound = ttl + Duration::from_millis(500);
    for (replica, client) in clients.iter_mut().enumerate() {
        loop {
            let answered = client
                .list_unresolved(authorized(&token, proto::ListUnresolvedRequest::default()))
                .await;
            if let Err(status) = answered {
                assert_status(&status, Code::Unauthenticated, "INVALID_CREDENTIALS");
                break;
            }
            assert!(
                revoked.elapsed() < bound,
                "replica {replica} still accepts the token {:?} after its revocation",
                revoked.elapsed()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // The tenant's other token still works on both.
    for client in &mut clients {
        client
            .list_unresolved(authorized(
                &world.tenant_a,
                proto::ListUnresolvedRequest::default(),
            ))
            .await
            .expect("the tenant's other token is untouched");
    }
    other.stop().await;
}

async fn tokens_seen_are_recorded_as_used_in_batches(backend: Backend) {
    let world = World::start(backend).await;
    let store = world.store.as_ref();
    let idle = add_token(store, "tenant-a", "idle", "operations", None).await;
    let mut client = world.client().await;
    for _ in 0..3 {
        client
            .list_unresolved(authorized(
                &world.tenant_a,
                proto::ListUnresolvedRequest::default(),
            ))
            .await
            .expect("valid");
    }
    let last_used = |tokens: &[idemd::store::TokenInfo], name: &str| {
        tokens
            .iter()
            .find(|token| token.name == name)
            .expect("listed")
            .last_used_at
    };
    let listed = store
        .credentials()
        .list_tokens("tenant-a")
        .await
        .expect("list")
        .expect("tenant");
    // Nothing is written per call.
    assert_eq!(last_used(&listed, "initial"), None);
    world
        .server
        .application
        .authenticator
        .record_last_used()
        .await
        .expect("recorded");
    let listed = store
        .credentials()
        .list_tokens("tenant-a")
        .await
        .expect("list")
        .expect("tenant");
    assert!(last_used(&listed, "initial").is_some(), "{listed:?}");
    assert_eq!(last_used(&listed, "idle"), None);
    drop(idle);
}

async fn every_credential_change_is_audited_without_a_secret(backend: Backend) {
    let world = World::start(backend).await;
    let store = world.store.as_ref();
    let token = add_token(
        store,
        "tenant-a",
        "ci",
        "operations",
        Some(TimeDelta::days(90)),
    )
    .await;
    assert!(
        store
            .credentials()
            .revoke_token("tenant-a", "ci", &tester())
            .await
            .expect("revoke")
    );
    assert!(store.revoke_tenant("tenant-b").await.expect("revoke"));
    let entries = store
        .credentials()
        .audit_log(Some("tenant-a"), 100)
        .await
        .expect("audit log");
    let actions: Vec<(&str, Option<&str>)> = entries
        .iter()
        .map(|entry| (entry.action.as_str(), entry.target.as_deref()))
        .collect();
    assert_eq!(
        actions,
        [
            ("tenant.create", Some("initial")),
            ("token.create", Some("ci")),
            ("token.revoke", Some("ci")),
        ]
    );
    let created = &entries[1];
    assert_eq!(created.actor, "cli:tester@test-host");
    assert_eq!(created.reason.as_deref(), Some("issue 19 test"));
    assert_eq!(
        created.detail.as_deref(),
        Some("scopes=operations expires_in=7776000s")
    );
    let everything = store
        .credentials()
        .audit_log(None, 100)
        .await
        .expect("audit log");
    assert!(everything.iter().any(
        |entry| entry.action == "tenant.revoke" && entry.tenant.as_deref() == Some("tenant-b")
    ));
    let hash: String = idemd::auth::token_sha256(&token)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let secret = &token["idem_".len()..];
    for entry in &everything {
        let text = format!("{entry:?}");
        assert!(!text.contains(secret) && !text.contains(&hash), "{text}");
    }
}

async fn the_audit_trail_is_pruned_past_its_retention(backend: Backend) {
    let world = World::start(backend).await;
    add_token(world.store.as_ref(), "tenant-a", "ci", "operations", None).await;
    // tenant-a's and tenant-b's creation, and the token: three entries; the
    // oldest is made 401 days old.
    let age = match &world.backend {
        Backend::Postgres { .. } => {
            "UPDATE audit_log SET at = at - interval '401 days' \
             WHERE audit_id = (SELECT min(audit_id) FROM audit_log)"
        }
        Backend::Sqlite { .. } => {
            "UPDATE audit_log SET at = strftime('%Y-%m-%dT%H:%M:%f', 'now', '-401 days') || '000Z' \
             WHERE audit_id = (SELECT min(audit_id) FROM audit_log)"
        }
    };
    assert_eq!(world.backend.execute(age).await, 1);
    let pruned = world
        .store
        .credentials()
        .prune_audit_log(TimeDelta::days(400))
        .await
        .expect("pruned");
    assert_eq!(pruned, 1);
    let left = world
        .store
        .credentials()
        .audit_log(None, 100)
        .await
        .expect("audit log");
    let actions: Vec<(&str, Option<&str>)> = left
        .iter()
        .map(|entry| (entry.action.as_str(), entry.tenant.as_deref()))
        .collect();
    assert_eq!(
        actions,
        [
            ("tenant.create", Some("tenant-b")),
            ("token.create", Some("tenant-a"))
        ]
    );
}

// ---- a database made with the previous schema --------------------------------

/// The first migration of this issue: what came before it is "the previous
/// schema", whatever it was squashed into.
const CREDENTIALS_MIGRATION: i64 = 20261202000001;

fn previous_schema(migrator: &sqlx::migrate::Migrator) -> sqlx::migrate::Migrator {
    sqlx::migrate::Migrator::with_migrations(
        migrator
            .iter()
            .filter(|migration| migration.version < CREDENTIALS_MIGRATION)
            .cloned()
            .collect(),
    )
}

/// Old tokens, as the previous binary stored them (no name, no scopes).
fn old_tokens() -> [String; 2] {
    [
        idemd::auth::generate_token().expect("a token"),
        idemd::auth::generate_token().expect("a token"),
    ]
}

/// The old tokens authenticate through the migrated store and server, are
/// named `initial` and `token-2` with today's scopes, and still work side by
/// side with a new token.
async fn old_tokens_keep_working(backend: Backend, tokens: &[String; 2]) {
    let world = World::start(backend).await;
    let mut client = world.client().await;
    let provider = Provider::default();
    let request = claim_json("payments.charge", "legacy-1", "{}");
    assert_eq!(
        attempt(&mut client, &tokens[0], request.clone(), &provider).await,
        Attempt::Executed
    );
    assert_eq!(
        attempt(&mut client, &tokens[1], request, &provider).await,
        Attempt::Replayed
    );
    client
        .list_unresolved(authorized(
            &tokens[1],
            proto::ListUnresolvedRequest::default(),
        ))
        .await
        .expect("reconcile scope kept");
    let listed = world
        .store
        .credentials()
        .list_tokens("legacy")
        .await
        .expect("list")
        .expect("tenant");
    let named: Vec<(&str, &str)> = listed
        .iter()
        .map(|token| (token.name.as_str(), token.scopes.as_str()))
        .collect();
    assert_eq!(
        named,
        [
            ("initial", "operations,reconcile"),
            ("token-2", "operations,reconcile")
        ]
    );
    let rotated = add_token(
        world.store.as_ref(),
        "legacy",
        "rotated",
        "operations",
        None,
    )
    .await;
    assert_eq!(
        attempt(
            &mut client,
            &rotated,
            claim_json("payments.charge", "legacy-1", "{}"),
            &provider
        )
        .await,
        Attempt::Replayed
    );
    assert_eq!(provider.effects(), 1);
}

#[sqlx::test(migrations = false)]
async fn a_postgres_database_of_the_previous_schema_keeps_its_tokens(
    _: sqlx::postgres::PgPoolOptions,
    connect: sqlx::postgres::PgConnectOptions,
) {
    let tokens = old_tokens();
    let database = pool(connect.clone()).await;
    previous_schema(&idemd::store::postgres::MIGRATOR)
        .run(&database)
        .await
        .expect("previous schema");
    let tenant: i64 =
        sqlx::query_scalar("INSERT INTO tenants (name) VALUES ('legacy') RETURNING tenant_id")
            .fetch_one(&database)
            .await
            .expect("old tenant");
    for token in &tokens {
        sqlx::query("INSERT INTO tenant_tokens (token_sha256, tenant_id) VALUES ($1, $2)")
            .bind(&idemd::auth::token_sha256(token)[..])
            .bind(tenant)
            .execute(&database)
            .await
            .expect("old token");
    }
    idemd::store::postgres::MIGRATOR
        .run(&database)
        .await
        .expect("migrates");
    database.close().await;
    old_tokens_keep_working(Backend::postgres(connect).await, &tokens).await;
}

#[tokio::test]
async fn a_sqlite_database_of_the_previous_schema_keeps_its_tokens() {
    let tokens = old_tokens();
    let directory = Arc::new(TempDir::new());
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(directory.path().join("idemd.db"))
        .create_if_missing(true);
    let database = sqlx::SqlitePool::connect_with(options)
        .await
        .expect("sqlite");
    previous_schema(&idemd::store::sqlite::MIGRATOR)
        .run(&database)
        .await
        .expect("previous schema");
    let tenant: i64 = sqlx::query_scalar(
        "INSERT INTO tenants (name, created_at) \
         VALUES ('legacy', '2026-11-29T09:00:00.000000Z') RETURNING tenant_id",
    )
    .fetch_one(&database)
    .await
    .expect("old tenant");
    for (token, created_at) in tokens
        .iter()
        .zip(["2026-11-29T09:00:00.000000Z", "2026-11-30T09:00:00.000000Z"])
    {
        sqlx::query(
            "INSERT INTO tenant_tokens (token_sha256, tenant_id, created_at) VALUES ($1, $2, $3)",
        )
        .bind(&idemd::auth::token_sha256(token)[..])
        .bind(tenant)
        .bind(created_at)
        .execute(&database)
        .await
        .expect("old token");
    }
    database.close().await;
    // Opening the store migrates it, as `idemd serve` does.
    let store = open_sqlite(directory.path()).await;
    old_tokens_keep_working(Backend::Sqlite { directory, store }, &tokens).await;
}

// ---- the command line ----------------------------------------------------------

/// `idemd ARGS` on `data`: its stdout, after asserting it succeeded (or
/// failed, as `succeeds` says).
fn run(data: &ProcessData, args: &[&str], succeeds: bool) -> String {
    let output = data
        .command(args)
        .env("USER", "tester")
        .output()
        .expect("idemd runs");
    assert_eq!(
        output.status.success(),
        succeeds,
        "idemd {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8")
}

fn json_of(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|_| panic!("JSON: {text}"))
}

async fn the_cli_manages_tokens_and_never_lists_a_secret(backend: Backend) {
    let data = backend.into_process_data().await;
    let initial = data.create_tenant("shop");
    let ci = run(
        &data,
        &[
            "tenant",
            "token",
            "create",
            "shop",
            "--name",
            "ci",
            "--scopes",
            "operations",
            "--expires-in",
            "90d",
        ],
        true,
    );
    let ci = ci.trim();
    assert!(idemd::auth::is_well_formed(ci), "the token alone: {ci:?}");
    // A name is unique among the tenant's active tokens; scopes are checked.
    run(
        &data,
        &["tenant", "token", "create", "shop", "--name", "ci"],
        false,
    );
    run(
        &data,
        &[
            "tenant", "token", "create", "shop", "--name", "x", "--scopes", "root",
        ],
        false,
    );
    run(
        &data,
        &["tenant", "token", "create", "nobody", "--name", "x"],
        false,
    );

    let secrets: Vec<String> = [initial.as_str(), ci]
        .iter()
        .flat_map(|token| {
            let hash: String = idemd::auth::token_sha256(token)
                .iter()
                .map(|byte| format!("{byte:02x}"))
                .collect();
            [token["idem_".len()..].to_owned(), hash]
        })
        .collect();
    let never_secret = |text: &str| {
        for secret in &secrets {
            assert!(!text.contains(secret.as_str()), "a secret listed: {text}");
        }
    };

    let table = run(&data, &["tenant", "token", "list", "shop"], true);
    never_secret(&table);
    assert!(table.starts_with("NAME"), "{table}");
    assert!(table.contains("initial") && table.contains("ci"), "{table}");
    let listed = run(
        &data,
        &["tenant", "token", "list", "shop", "-o", "json"],
        true,
    );
    never_secret(&listed);
    let listed = json_of(&listed);
    let names: Vec<&str> = listed
        .as_array()
        .expect("an array")
        .iter()
        .map(|token| token["name"].as_str().expect("a name"))
        .collect();
    assert_eq!(names, ["initial", "ci"]);
    assert_eq!(listed[1]["scopes"], json!(["operations"]));
    assert!(listed[1]["expires_at"].is_string(), "{listed}");
    assert_eq!(listed[0]["expires_at"], serde_json::Value::Null);
    assert_eq!(listed[0]["scopes"], json!(["operations", "reconcile"]));

    let tenants = json_of(&run(&data, &["tenant", "list", "-o", "json"], true));
    assert_eq!(tenants[0]["name"], "shop");
    assert_eq!(tenants[0]["state"], "active");
    assert_eq!(tenants[0]["credentials"], 2);

    run(
        &data,
        &[
            "tenant", "token", "revoke", "shop", "ci", "--reason", "rotated",
        ],
        true,
    );
    run(&data, &["tenant", "token", "revoke", "shop", "ci"], false);
    let listed = json_of(&run(
        &data,
        &["tenant", "token", "list", "shop", "-o", "json"],
        true,
    ));
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    let tenants = json_of(&run(&data, &["tenant", "list", "-o", "json"], true));
    assert_eq!(tenants[0]["credentials"], 1);

    let audit = run(
        &data,
        &["audit", "list", "--tenant", "shop", "-o", "json"],
        true,
    );
    never_secret(&audit);
    let audit = json_of(&audit);
    let actions: Vec<&str> = audit
        .as_array()
        .expect("an array")
        .iter()
        .map(|entry| entry["action"].as_str().expect("an action"))
        .collect();
    assert_eq!(actions, ["tenant.create", "token.create", "token.revoke"]);
    let actor = audit[2]["actor"].as_str().expect("an actor");
    assert!(actor.starts_with("cli:tester@"), "{actor}");
    assert_eq!(audit[2]["reason"], "rotated");
    assert_eq!(audit[2]["target"], "ci");
    never_secret(&run(&data, &["audit", "list"], true));
}

fn sha256_hex(token: &str) -> String {
    idemd::auth::token_sha256(token)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

async fn tenant_apply_converges_idempotently_and_prunes_only_when_asked(backend: Backend) {
    let data = backend.into_process_data().await;
    let api = idemd::auth::generate_token().expect("a token");
    let reconciler = idemd::auth::generate_token().expect("a token");
    std::fs::write(
        data.directory().join("reconciler-token"),
        format!("{reconciler}\n"),
    )
    .expect("token file");
    let declare = |api_scopes: &str| {
        format!(
            "tenants:\n\
             \x20 - name: declared\n\
             \x20   tokens:\n\
             \x20     - name: api\n\
             \x20       scopes: [{api_scopes}]\n\
             \x20       sha256: {}\n\
             \x20       expiresAt: \"2099-01-01T00:00:00Z\"\n\
             \x20     - name: reconciler\n\
             \x20       scopes: [reconcile]\n\
             \x20       tokenFile: reconciler-token\n",
            sha256_hex(&api)
        )
    };
    let file = data.directory().join("tenants.yaml");
    let apply = |extra: &[&str]| {
        let path = file.to_str().expect("utf-8 path");
        run(
            &data,
            &[&["tenant", "apply", "-f", path], extra].concat(),
            true,
        )
    };
    std::fs::write(&file, declare("operations")).expect("file");
    let first = apply(&[]);
    assert!(first.contains("tenant declared: created"), "{first}");
    assert!(first.contains("token api created"), "{first}");
    assert!(first.contains("token reconciler created"), "{first}");
    assert!(
        !first.contains(&reconciler) && !first.contains(&api),
        "{first}"
    );
    let audit_len = |data: &ProcessData| {
        json_of(&run(data, &["audit", "list", "-o", "json"], true))
            .as_array()
            .map_or(0, Vec::len)
    };
    let audited = audit_len(&data);
    // Twice: nothing changes, nothing is audited.
    assert_eq!(apply(&[]).trim(), "no changes");
    assert_eq!(audit_len(&data), audited);

    std::fs::write(&file, declare("operations, reconcile")).expect("file");
    assert_eq!(apply(&[]).trim(), "tenant declared: token api updated");
    let manual = run(
        &data,
        &["tenant", "token", "create", "declared", "--name", "manual"],
        true,
    );
    // A token the file does not list stays, unless --prune.
    assert_eq!(apply(&[]).trim(), "no changes");
    assert_eq!(
        apply(&["--prune"]).trim(),
        "tenant declared: token manual revoked"
    );
    assert_eq!(apply(&["--prune"]).trim(), "no changes");

    let listed = json_of(&run(
        &data,
        &["tenant", "token", "list", "declared", "-o", "json"],
        true,
    ));
    assert_eq!(listed[0]["name"], "api");
    assert_eq!(listed[0]["scopes"], json!(["operations", "reconcile"]));
    assert_eq!(listed[0]["expires_at"], "2099-01-01T00:00:00Z");
    assert_eq!(listed[1]["name"], "reconciler");
    assert_eq!(listed.as_array().map(Vec::len), Some(2));

    // The declared tokens are the ones that work, with their scopes.
    let server = data.serve(&[]).await;
    let mut client = server.client().await;
    client
        .claim(authorized(&api, claim_json("payments.charge", "k", "{}")))
        .await
        .expect("the declared token works");
    let refused = client
        .claim(authorized(
            &reconciler,
            claim_json("payments.charge", "k", "{}"),
        ))
        .await
        .expect_err("a reconciler cannot claim");
    assert_missing_scope(&refused, "operations");
    let refused = client
        .list_unresolved(authorized(
            manual.trim(),
            proto::ListUnresolvedRequest::default(),
        ))
        .await
        .expect_err("pruned");
    assert_status(&refused, Code::Unauthenticated, "INVALID_CREDENTIALS");
    server.kill();
}
