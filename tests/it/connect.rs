//! The Connect protocol's unary JSON mapping on the API port, called with
//! curl (a subprocess, HTTP/1.1 as curl speaks by default) against the real
//! server: the same RPCs, the same credentials, the same errors.

use std::collections::HashMap;
use std::net::SocketAddr;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use prost::Message;
use serde_json::{Value, json};

use crate::harness::*;

/// What curl got: the HTTP status, the body as JSON and the headers
/// (names lowercased).
pub struct Answer {
    pub status: u16,
    pub body: Value,
    content_type: String,
    headers: HashMap<String, String>,
}

/// `curl` POSTs `body` to `/idem.v1.IdempotencyService/<method>` with the
/// given token (if any) and extra headers.
async fn curl(
    addr: SocketAddr,
    method: &str,
    token: Option<&str>,
    headers: &[&str],
    body: Vec<u8>,
) -> Answer {
    let mut command = std::process::Command::new("curl");
    command.args([
        "--silent",
        "--http1.1",
        "--request",
        "POST",
        "--data-binary",
        "@-",
        "--write-out",
        "\n%{http_code} %{content_type}",
        "--dump-header",
        "/dev/stderr",
    ]);
    if !headers
        .iter()
        .any(|header| header.to_ascii_lowercase().starts_with("content-type:"))
    {
        command.args(["--header", "Content-Type: application/json"]);
    }
    for header in headers {
        command.args(["--header", header]);
    }
    if let Some(token) = token {
        command.args(["--header", &format!("Authorization: Bearer {token}")]);
    }
    command.arg(format!("http://{addr}/idem.v1.IdempotencyService/{method}"));
    let output = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut child = command
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("curl runs (it must be installed for these tests)");
        let mut stdin = child.stdin.take().expect("curl's stdin");
        // The server may answer (and stop reading) before all of a body it
        // refuses is sent: a broken pipe here is that, not a failure.
        let _ = stdin.write_all(&body);
        drop(stdin);
        child.wait_with_output().expect("curl finishes")
    })
    .await
    .expect("curl task");
    let text = String::from_utf8(output.stdout).expect("utf-8 answer");
    let (body, trailer) = text.rsplit_once('\n').expect("curl's status line");
    let (status, content_type) = trailer.split_once(' ').unwrap_or((trailer, ""));
    let status = status.parse().expect("an HTTP status");
    let body = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(body).unwrap_or_else(|_| panic!("a JSON body: {body}"))
    };
    let headers = String::from_utf8_lossy(&output.stderr)
        .lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    Answer {
        status,
        body,
        content_type: content_type.to_owned(),
        headers,
    }
}

pub async fn call(addr: SocketAddr, method: &str, token: Option<&str>, body: Value) -> Answer {
    curl(addr, method, token, &[], body.to_string().into_bytes()).await
}

/// The Connect error's details, decoded by type.
pub fn details(answer: &Answer) -> HashMap<String, Vec<u8>> {
    let details = answer.body["details"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    details
        .iter()
        .map(|detail| {
            let value = detail["value"].as_str().expect("a detail value");
            let bytes = STANDARD_NO_PAD
                .decode(value)
                .expect("unpadded base64, as Connect sends it");
            (detail["type"].as_str().expect("a type").to_owned(), bytes)
        })
        .collect()
}

/// Asserts a Connect error: its HTTP status, code and ErrorInfo reason.
fn assert_connect_error(answer: &Answer, http_status: u16, code: &str, reason: &str) {
    assert_eq!(answer.status, http_status, "{}", answer.body);
    assert_eq!(answer.content_type, "application/json");
    assert_eq!(answer.body["code"], code, "{}", answer.body);
    let details = details(answer);
    let info = details
        .get("google.rpc.ErrorInfo")
        .unwrap_or_else(|| panic!("an ErrorInfo in {}", answer.body));
    let info = tonic_types::pb::ErrorInfo::decode(info.as_slice()).expect("an ErrorInfo");
    assert_eq!(info.reason, reason);
    assert_eq!(info.domain, "idem.v1");
    // The same ErrorInfo readable without protobuf (Connect's `debug`).
    let debug = debug_of(answer, "google.rpc.ErrorInfo");
    assert_eq!(debug["reason"], reason, "{}", answer.body);
    assert_eq!(debug["domain"], "idem.v1");
    for (key, value) in &info.metadata {
        assert_eq!(debug["metadata"][key], value.as_str(), "{}", answer.body);
    }
}

/// The `debug` form of the detail of `type_name` in a Connect error.
fn debug_of(answer: &Answer, type_name: &str) -> Value {
    answer.body["details"]
        .as_array()
        .and_then(|details| details.iter().find(|detail| detail["type"] == type_name))
        .map(|detail| detail["debug"].clone())
        .unwrap_or_else(|| panic!("a {type_name} detail in {}", answer.body))
}

pub fn claim(key: &str, payload: &str) -> Value {
    json!({
        "scope": { "operation": "payments.charge", "key": key },
        "jsonPayload": payload,
        "lease": "30s",
    })
}

async fn claim_complete_and_replay_over_json(backend: Backend) {
    let world = World::start(backend).await;
    let addr = world.server.addr;
    let token = Some(world.tenant_a.as_str());

    let acquired = call(addr, "Claim", token, claim("k1", r#"{"amount":100}"#)).await;
    assert_eq!(acquired.status, 200, "{}", acquired.body);
    assert_eq!(acquired.content_type, "application/json");
    let ownership = &acquired.body["acquired"]["ownership"];
    let operation_id = ownership["operationId"].as_str().expect("an operation id");
    // uint64 in JSON is a string; Duration is "<seconds>s".
    assert_eq!(ownership["fence"], "1");
    assert_eq!(ownership["lease"], "30s");

    let stored = STANDARD.encode(br#"{"charge":"ch_1"}"#);
    let completed = call(
        addr,
        "Complete",
        token,
        json!({
            "operationId": operation_id,
            "fence": "1",
            "result": { "body": stored, "contentType": "application/json" },
        }),
    )
    .await;
    assert_eq!(completed.status, 200, "{}", completed.body);
    assert_eq!(completed.body["state"], "OPERATION_STATE_SUCCEEDED");

    // The proto's own field names are accepted too.
    let replay = call(
        addr,
        "Claim",
        token,
        json!({
            "scope": { "operation": "payments.charge", "key": "k1" },
            "json_payload": r#"{"amount":100}"#,
        }),
    )
    .await;
    assert_eq!(replay.status, 200, "{}", replay.body);
    let replayed = &replay.body["completed"];
    assert_eq!(replayed["operationId"], operation_id);
    assert_eq!(replayed["result"]["body"], stored);
    assert_eq!(replayed["result"]["contentType"], "application/json");
    assert!(
        replayed["completedAt"]
            .as_str()
            .is_some_and(|at| chrono::DateTime::parse_from_rfc3339(at).is_ok()),
        "an RFC 3339 timestamp: {replayed}"
    );
}

async fn a_reused_key_is_failed_precondition_with_its_error_info(backend: Backend) {
    let world = World::start(backend).await;
    let addr = world.server.addr;
    let token = Some(world.tenant_a.as_str());
    let first = call(addr, "Claim", token, claim("k2", r#"{"amount":100}"#)).await;
    assert_eq!(first.status, 200, "{}", first.body);

    let reused = call(addr, "Claim", token, claim("k2", r#"{"amount":999}"#)).await;
    assert_connect_error(
        &reused,
        400,
        "failed_precondition",
        "IDEMPOTENCY_KEY_REUSED",
    );
}

async fn a_missing_or_unknown_token_is_unauthenticated(backend: Backend) {
    let world = World::start(backend).await;
    let addr = world.server.addr;
    let missing = call(addr, "Claim", None, claim("k3", "{}")).await;
    assert_connect_error(&missing, 401, "unauthenticated", "MISSING_CREDENTIALS");
    let unknown = call(addr, "Claim", Some("idem_not-a-token"), claim("k3", "{}")).await;
    assert_connect_error(&unknown, 401, "unauthenticated", "INVALID_CREDENTIALS");

    // Authentication comes before the body is read: a body past every
    // bound, without a token, is answered as unauthenticated.
    let oversized = vec![b' '; 3 * test_limits().max_request_bytes()];
    let refused = curl(addr, "Claim", None, &[], oversized).await;
    assert_connect_error(&refused, 401, "unauthenticated", "MISSING_CREDENTIALS");
}

async fn a_body_over_the_limit_is_refused(backend: Backend) {
    let world = World::start(backend).await;
    let addr = world.server.addr;
    let token = Some(world.tenant_a.as_str());
    let limit = test_limits().max_request_bytes();

    // A JSON body longer than its bound (twice the decode limit): refused
    // as it is read, before any of it is parsed.
    let mut padded =
        br#"{"scope":{"operation":"payments.charge","key":"k4"},"jsonPayload":"{}""#.to_vec();
    padded.extend(std::iter::repeat_n(b' ', 2 * limit));
    padded.push(b'}');
    let refused = curl(addr, "Claim", token, &[], padded).await;
    assert_connect_error(&refused, 429, "resource_exhausted", "REQUEST_TOO_LARGE");

    // A shorter JSON body whose message exceeds the decode limit: refused by
    // the same limit a gRPC call meets.
    let body = STANDARD.encode(vec![b'x'; limit + 1]);
    let complete = json!({
        "operationId": "00000000-0000-0000-0000-000000000000",
        "fence": "1",
        "result": { "body": body, "contentType": "application/json" },
    });
    let refused = call(addr, "Complete", token, complete).await;
    assert_connect_error(&refused, 429, "resource_exhausted", "REQUEST_TOO_LARGE");
}

async fn an_invalid_field_is_invalid_argument_with_bad_request(backend: Backend) {
    let world = World::start(backend).await;
    let addr = world.server.addr;
    let token = Some(world.tenant_a.as_str());
    let bad = json!({
        "scope": { "operation": "payments charge!", "key": "k5" },
        "jsonPayload": "{}",
    });
    let refused = call(addr, "Claim", token, bad).await;
    assert_connect_error(&refused, 400, "invalid_argument", "INVALID_REQUEST");
    let details = details(&refused);
    let bad_request = tonic_types::pb::BadRequest::decode(
        details
            .get("google.rpc.BadRequest")
            .expect("a BadRequest")
            .as_slice(),
    )
    .expect("a BadRequest");
    let fields: Vec<_> = bad_request
        .field_violations
        .iter()
        .map(|violation| violation.field.as_str())
        .collect();
    assert_eq!(fields, ["scope.operation"]);
    let debug = debug_of(&refused, "google.rpc.BadRequest");
    assert_eq!(debug["fieldViolations"][0]["field"], "scope.operation");
    assert_eq!(
        debug["fieldViolations"][0]["description"],
        bad_request.field_violations[0].description.as_str()
    );

    // A body that is not the message at all names no field, same reason.
    let garbage = curl(addr, "Claim", token, &[], b"{\"scope\": 7}".to_vec()).await;
    assert_connect_error(&garbage, 400, "invalid_argument", "INVALID_REQUEST");
}

/// The gRPC answer's metadata reaches a Connect client as Connect says:
/// trailers as `trailer-` headers (here the pushback trailer of a refusal),
/// the status only in the JSON error. Connect-Timeout-Ms is the call's
/// deadline: a Claim asking to wait longer answers Pending within it.
async fn trailers_become_trailer_headers_and_the_timeout_bounds_the_call(backend: Backend) {
    let config = ServerConfig {
        admission: idemd::grpc::admission::AdmissionSettings {
            max_in_flight_per_tenant: 1,
            ..Default::default()
        },
        ..Default::default()
    };
    let world = World::start_configured(backend, test_limits(), config).await;
    let addr = world.server.addr;
    let token = world.tenant_a.clone();
    let first = call(addr, "Claim", Some(&token), claim("k9", "{}")).await;
    assert_eq!(first.status, 200, "{}", first.body);
    // A duplicate that waits for the running attempt holds the tenant's
    // one slot, for at most its Connect-Timeout-Ms.
    let waiting = tokio::spawn({
        let token = token.clone();
        async move {
            let started = std::time::Instant::now();
            let body = json!({
                "scope": { "operation": "payments.charge", "key": "k9" },
                "jsonPayload": "{}",
                "wait": "20s",
            });
            let answer = curl(
                addr,
                "Claim",
                Some(&token),
                &["Connect-Timeout-Ms: 2000"],
                body.to_string().into_bytes(),
            )
            .await;
            (answer, started.elapsed())
        }
    });
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    let refused = call(addr, "Claim", Some(&token), claim("k10", "{}")).await;
    assert_connect_error(
        &refused,
        429,
        "resource_exhausted",
        "TENANT_CONCURRENCY_LIMIT",
    );
    let retry_info = details(&refused)
        .get("google.rpc.RetryInfo")
        .map(|bytes| tonic_types::pb::RetryInfo::decode(bytes.as_slice()).expect("a RetryInfo"))
        .and_then(|info| info.retry_delay)
        .expect("a RetryInfo delay");
    let delay_ms = u64::try_from(retry_info.seconds).expect("positive") * 1000
        + u64::try_from(retry_info.nanos)
            .expect("positive")
            .div_ceil(1_000_000);
    assert_eq!(
        refused.headers.get("trailer-grpc-retry-pushback-ms"),
        Some(&delay_ms.to_string()),
        "{:?}",
        refused.headers
    );
    for protocol in ["grpc-status", "grpc-message", "grpc-status-details-bin"] {
        assert!(
            !refused.headers.contains_key(protocol)
                && !refused.headers.contains_key(&format!("trailer-{protocol}")),
            "{protocol} in {:?}",
            refused.headers
        );
    }
    let (waited, elapsed) = waiting.await.expect("the waiting claim");
    assert_eq!(waited.status, 200, "{}", waited.body);
    assert!(waited.body.get("pending").is_some(), "{}", waited.body);
    // The wait ends at the deadline less its margin (1.8 s of the 2 s); the
    // bound leaves a loaded machine room to start curl and answer, and is
    // still far below the 20 s the Claim asked to wait.
    assert!(
        elapsed < std::time::Duration::from_secs(6),
        "answered by the call's deadline, not after the 20 s wait: {elapsed:?}"
    );

    // Past its deadline on arrival the call is not run at all, and answered
    // deadline_exceeded: no operation is created for a caller that gave up.
    let late = curl(
        addr,
        "Claim",
        Some(&token),
        &["Connect-Timeout-Ms: 0"],
        claim("k11", "{}").to_string().into_bytes(),
    )
    .await;
    assert_eq!(late.status, 504, "{}", late.body);
    assert_eq!(late.body["code"], "deadline_exceeded", "{}", late.body);
    let after = curl(
        addr,
        "Claim",
        Some(&token),
        &[],
        claim("k11", "{}").to_string().into_bytes(),
    )
    .await;
    assert!(after.body.get("acquired").is_some(), "{}", after.body);
}

store_tests!(
    trailers_become_trailer_headers_and_the_timeout_bounds_the_call,
    claim_complete_and_replay_over_json,
    a_reused_key_is_failed_precondition_with_its_error_info,
    a_missing_or_unknown_token_is_unauthenticated,
    a_body_over_the_limit_is_refused,
    an_invalid_field_is_invalid_argument_with_bad_request,
);

#[tokio::test]
async fn other_forms_get_connect_errors() {
    let world = World::start(Backend::sqlite().await).await;
    let addr = world.server.addr;
    let token = Some(world.tenant_a.as_str());

    let unknown = call(addr, "Charge", token, json!({})).await;
    assert_eq!(unknown.status, 501);
    assert_eq!(unknown.body["code"], "unimplemented");

    let text = curl(
        addr,
        "Claim",
        token,
        &["Content-Type: text/plain"],
        b"hello".to_vec(),
    )
    .await;
    assert_eq!(text.status, 415);
    assert_eq!(text.body["code"], "unimplemented");

    let gzip = curl(
        addr,
        "Claim",
        token,
        &["Content-Encoding: gzip"],
        b"not really gzip".to_vec(),
    )
    .await;
    assert_eq!(gzip.status, 501);
    assert_eq!(gzip.body["code"], "unimplemented");

    let version = curl(
        addr,
        "Claim",
        token,
        &["Connect-Protocol-Version: 2"],
        claim("k6", "{}").to_string().into_bytes(),
    )
    .await;
    assert_eq!(version.status, 400);
    assert_eq!(version.body["code"], "invalid_argument");

    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new("curl")
            .args(["--silent", "--write-out", "\n%{http_code}"])
            .arg(format!("http://{addr}/idem.v1.IdempotencyService/Claim"))
            .output()
            .expect("curl runs")
    })
    .await
    .expect("curl task");
    let text = String::from_utf8(output.stdout).expect("utf-8");
    let (body, status) = text.rsplit_once('\n').expect("a status line");
    assert_eq!(status, "405");
    let body: Value = serde_json::from_str(body).expect("a JSON error");
    assert_eq!(body["code"], "unimplemented");
}

/// Runs `program args` in `directory`, failing the test with a clear message
/// when the program is missing (these tests need node and npm; nothing is
/// skipped).
fn run_in(directory: &std::path::Path, program: &str, args: &[&str], env: &[(&str, String)]) {
    let output = std::process::Command::new(program)
        .args(args)
        .current_dir(directory)
        .envs(env.iter().map(|(name, value)| (name, value)))
        .output()
        .unwrap_or_else(|error| {
            panic!("`{program}` does not run ({error}): the Connect-ES test needs node and npm")
        });
    assert!(
        output.status.success(),
        "`{program} {}` failed:\n{}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// tests/connect-es/claim.ts: Connect-ES (connect-node, JSON over HTTP/1.1)
/// claims, completes and replays, and reads a conflict's ErrorInfo reason,
/// with the service described by the descriptor set the server serves.
#[tokio::test]
async fn connect_es_claims_completes_replays_and_reads_a_conflicts_reason() {
    let world = World::start(Backend::sqlite().await).await;
    let directory = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/connect-es");
    let descriptors = TempDir::new();
    let descriptor = descriptors.path().join("idem.binpb");
    std::fs::write(&descriptor, idemd::proto::FILE_DESCRIPTOR_SET).expect("descriptor set");
    let env = [
        ("IDEMD_URL", format!("http://{}", world.server.addr)),
        ("IDEMD_TOKEN", world.tenant_a.clone()),
        ("IDEMD_DESCRIPTOR", descriptor.display().to_string()),
    ];
    tokio::task::spawn_blocking(move || {
        if !directory.join("node_modules").is_dir() {
            // The committed package-lock.json, exactly.
            run_in(&directory, "npm", &["ci", "--no-audit", "--no-fund"], &[]);
        }
        run_in(&directory, "npm", &["test", "--silent"], &env);
    })
    .await
    .expect("the Connect-ES run");
}
