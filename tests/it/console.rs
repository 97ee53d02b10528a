//! The web console in a real headless Chromium (tests/console/console.mjs,
//! playwright-core driving Debian's /usr/bin/chromium): this side starts a
//! server with its console, seeds what the browser looks at, runs the
//! browser, and then checks what the server holds — the reconciliation the
//! browser confirmed is what the caller's next Claim replays, and the forged
//! request changed nothing.

use std::path::{Path, PathBuf};
use std::process::Command;

use idemd::console::Console;
use idemd::proto;
use idemd::proto::claim_response::Outcome;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::harness::*;

const OPERATION: &str = "payments.charge";
/// Held through the API before the browser runs; the browser sees it, and
/// an admin releases it from the console.
const HELD: &str = "refunds.issue";
/// Markup in the reason, which every page must show as text.
const HELD_REASON: &str = "refunds doubled <script>alert(1)</script> & more";

fn payload(key: &str) -> proto::ClaimRequest {
    claim_json(
        OPERATION,
        key,
        &format!("{{\"order\":\"{key}\",\"amount\":1200}}"),
    )
}

/// The Chromium the browser test drives: `CHROMIUM`, else Debian's. None
/// when it is not installed: the test is then skipped, saying so, unless
/// `IDEMD_REQUIRE_BROWSER` is set (CI sets it: `.ci/run` installs Chromium).
pub(crate) fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("CHROMIUM")
        .map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    if path.exists() {
        return Some(path);
    }
    assert!(
        std::env::var_os("IDEMD_REQUIRE_BROWSER").is_none(),
        "no Chromium at {} (IDEMD_REQUIRE_BROWSER is set): `apt-get install chromium`",
        path.display()
    );
    eprintln!(
        "console browser test SKIPPED: no Chromium at {} (apt-get install chromium)",
        path.display()
    );
    None
}

pub(crate) fn browser_test_directory() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/console")
}

/// Installs the browser test's packages (the committed package-lock.json,
/// exactly) unless they are there; one test at a time, so that two never
/// write node_modules together.
pub(crate) fn browser_dependencies(directory: &Path) {
    static INSTALLING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = INSTALLING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !directory.join("node_modules").is_dir() {
        run(directory, "npm", &["ci", "--no-audit", "--no-fund"], &[]);
    }
}

/// Where the screenshots go: CI keeps target/ of a run.
fn screenshots(store: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/console-screenshots")
        .join(store)
}

pub(crate) fn run(directory: &Path, program: &str, args: &[&str], env: &[(&str, String)]) {
    let output = Command::new(program)
        .args(args)
        .current_dir(directory)
        .envs(env.iter().map(|(name, value)| (name, value)))
        .output()
        .unwrap_or_else(|error| {
            panic!("`{program}` does not run ({error}): the console test needs node and npm")
        });
    assert!(
        output.status.success(),
        "`{program} {}` failed:\n{}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

async fn support_staff_work_the_console_in_a_real_browser(backend: Backend) {
    let Some(chromium) = chromium() else {
        return;
    };
    let store_name = match &backend {
        Backend::Postgres { .. } => "postgres",
        Backend::Sqlite { .. } => "sqlite",
    };
    let world = World::start(backend).await;
    let reconciler = world.tenant_a.clone();
    let operations_only = add_token(
        world.store.as_ref(),
        "tenant-a",
        "checkout-service",
        "operations",
    )
    .await;
    let admin = add_token(
        world.store.as_ref(),
        "tenant-a",
        "support-lead",
        "reconcile,admin",
    )
    .await;
    let mut client = world.client().await;

    // order-1 succeeded; the caller then reused its key with another payload.
    let succeeded = claim_owned(&mut client, &reconciler, payload("order-1")).await;
    client
        .complete(authorized(
            &reconciler,
            proto::CompleteRequest {
                operation_id: succeeded.operation_id.clone(),
                fence: succeeded.fence,
                result: result("{\"charge\":\"ch_seeded\"}"),
            },
        ))
        .await
        .expect("complete");
    let conflict = client
        .claim(authorized(
            &reconciler,
            claim_json(
                OPERATION,
                "order-1",
                "{\"order\":\"order-1\",\"amount\":9999}",
            ),
        ))
        .await
        .expect_err("the key reused with another payload");
    assert_status(
        &conflict,
        tonic::Code::FailedPrecondition,
        "IDEMPOTENCY_KEY_REUSED",
    );

    // order-2 and order-3: the provider timed out, the outcome is unknown.
    let unresolved = claim_owned(&mut client, &reconciler, payload("order-2")).await;
    fail_unknown(&mut client, &reconciler, &unresolved).await;
    let untouched = claim_owned(&mut client, &reconciler, payload("order-3")).await;
    fail_unknown(&mut client, &reconciler, &untouched).await;
    // Tenant B's operation, which tenant A's credential must not see.
    let other = claim_owned(&mut client, &world.tenant_b, payload("b-order")).await;
    fail_unknown(&mut client, &world.tenant_b, &other).await;

    // A hold of tenant A's, set through the API as `idemd ops hold` does.
    client
        .hold(authorized(
            &admin,
            proto::HoldRequest {
                operation: HELD.into(),
                reason: HELD_REASON.into(),
                ..Default::default()
            },
        ))
        .await
        .expect("hold");

    let console = Console::new(
        world.server.application.api.clone(),
        world.server.application.authenticator.clone(),
        world.server.application.service.metrics().clone(),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let stop = CancellationToken::new();
    let served = tokio::spawn(idemd::console::serve(listener, console, stop.clone()));

    let directory = browser_test_directory();
    let env = vec![
        ("CONSOLE_URL", format!("http://{address}")),
        ("CHROMIUM", chromium.display().to_string()),
        ("TOKEN_RECONCILER", reconciler.clone()),
        ("TOKEN_OPERATIONS_ONLY", operations_only),
        ("TOKEN_ADMIN", admin.clone()),
        ("OP_SUCCEEDED_ID", succeeded.operation_id.clone()),
        ("OP_UNRESOLVED_ID", unresolved.operation_id.clone()),
        ("OP_UNTOUCHED_ID", untouched.operation_id.clone()),
        ("OP_OTHER_TENANT_ID", other.operation_id.clone()),
        ("HELD_OPERATION", HELD.to_owned()),
        ("HELD_REASON", HELD_REASON.to_owned()),
        (
            "IDEMD_CONSOLE_SCREENSHOTS",
            screenshots(store_name).display().to_string(),
        ),
    ];
    tokio::task::spawn_blocking(move || {
        browser_dependencies(&directory);
        run(&directory, "npm", &["test", "--silent"], &env);
    })
    .await
    .expect("the browser run");
    stop.cancel();
    served.await.expect("console task").expect("console served");

    // The caller's next Claim replays what the browser reconciled, and
    // executes nothing.
    let replay = client
        .claim(authorized(&reconciler, payload("order-2")))
        .await
        .expect("claim")
        .into_inner();
    let Some(Outcome::Completed(completed)) = replay.outcome else {
        panic!("a replay of the reconciled result: {replay:?}");
    };
    let Some(proto::completed::Outcome::Result(stored)) = completed.outcome else {
        panic!("a success result: {completed:?}");
    };
    assert_eq!(stored.body, br#"{"charge":"ch_from_console"}"#);
    // The forged request changed nothing: still unknown, at its fence.
    let found = operation_by_id(&mut client, &reconciler, &untouched.operation_id).await;
    assert_eq!(found.state(), proto::OperationState::Unknown);
    assert_eq!(found.fence, untouched.fence);
    // History says who reconciled: the signed-in credential, as the API
    // records it for any caller.
    let entries = history(&mut client, &reconciler, &unresolved.operation_id).await;
    let reconciled = entries
        .iter()
        .find(|entry| entry.event == "RECONCILED")
        .unwrap_or_else(|| panic!("reconciled: {entries:?}"));
    assert_eq!(reconciled.credential, "token:initial");
    assert!(!reconciled.admin_on_behalf);
    // The admin's reconciliation of tenant B's operation, on its behalf.
    let entries = history(&mut client, &world.tenant_b, &other.operation_id).await;
    let reconciled = entries
        .iter()
        .find(|entry| entry.event == "RECONCILED")
        .unwrap_or_else(|| panic!("reconciled on behalf: {entries:?}"));
    assert_eq!(reconciled.credential, "token:support-lead");
    assert!(reconciled.admin_on_behalf);
    // The browser's admin released tenant A's hold and held all of tenant
    // B: that is what is in force, and the audit log names who and why.
    let holds = client
        .list_holds(authorized(&admin, proto::ListHoldsRequest::default()))
        .await
        .expect("list holds")
        .into_inner()
        .holds;
    let in_force: Vec<(&str, &str, &str, &str)> = holds
        .iter()
        .map(|hold| {
            (
                hold.tenant.as_str(),
                hold.operation.as_str(),
                hold.reason.as_str(),
                hold.held_by.as_str(),
            )
        })
        .collect();
    assert_eq!(
        in_force,
        [(
            "tenant-b",
            "",
            "incident 43: tenant-b drains",
            "token:support-lead"
        )]
    );
    let audit = world
        .store
        .credentials()
        .audit_log(Some("tenant-a"), 100)
        .await
        .expect("audit");
    let released: Vec<(&str, Option<&str>, &str)> = audit
        .iter()
        .filter(|entry| entry.action == "hold.release")
        .map(|entry| {
            (
                entry.actor.as_str(),
                entry.target.as_deref(),
                entry.reason.as_deref().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        released,
        [("token:support-lead", Some(HELD), "drained and reconciled")]
    );
}

store_tests!(support_staff_work_the_console_in_a_real_browser);

/// One raw HTTP/1.1 GET with the given Host; the response head and body.
async fn get_with_host(address: std::net::SocketAddr, path: &str, host: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("request sent");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .await
        .expect("response read");
    response
}

/// A page of another site reaching the console by DNS rebinding (its name
/// resolving to 127.0.0.1) is refused before anything runs, and every answer
/// carries the console's security headers.
#[tokio::test]
async fn the_console_answers_only_loopback_hosts_and_always_with_its_headers() {
    let world = World::start(Backend::sqlite().await).await;
    let console = Console::new(
        world.server.application.api.clone(),
        world.server.application.authenticator.clone(),
        world.server.application.service.metrics().clone(),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let stop = CancellationToken::new();
    let served = tokio::spawn(idemd::console::serve(listener, console, stop.clone()));

    let rebound = get_with_host(address, "/login", "attacker.example").await;
    assert!(rebound.starts_with("HTTP/1.1 421"), "{rebound}");
    assert!(!rebound.contains("<form"), "{rebound}");

    let login = get_with_host(address, "/login", &address.to_string()).await;
    assert!(login.starts_with("HTTP/1.1 200"), "{login}");
    let head = login.to_ascii_lowercase();
    for header in [
        "content-security-policy: default-src 'none'; script-src 'self'",
        "x-frame-options: deny",
        "x-content-type-options: nosniff",
        "cache-control: no-store",
    ] {
        assert!(head.contains(header), "{header} missing:\n{login}");
    }
    // Signed out, a page leads to the sign-in page and shows nothing.
    let unresolved = get_with_host(address, "/unresolved", &address.to_string()).await;
    assert!(unresolved.starts_with("HTTP/1.1 303"), "{unresolved}");
    assert!(
        unresolved.to_ascii_lowercase().contains("location: /login"),
        "{unresolved}"
    );

    stop.cancel();
    served.await.expect("console task").expect("console served");
}
