//! `idemd ops …`: the support commands, as the real binary run against a
//! real `idemd serve` over gRPC. They assert what support staff rely on:
//! the answer to "is it safe to retry?", listings that scripts can parse,
//! a reconciliation that asks first, and stable exit codes.

use std::io::Write;
use std::process::{Output, Stdio};
use std::time::Duration;

use idemd::proto;
use idemd::proto::claim_response::Outcome;
use serde_json::Value;

use crate::harness::*;

/// `idemd ops ARGS` against `daemon`, the address and the token given by
/// their environment variables (as a support person's shell would).
pub(crate) fn ops(data: &ProcessData, daemon: &Daemon, token: &str, args: &[&str]) -> Output {
    data.command(&[&["ops"], args].concat())
        .env("IDEMD_ADDR", daemon.addr.to_string())
        .env("IDEMD_TOKEN", token)
        .output()
        .expect("idemd runs")
}

pub(crate) fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub(crate) fn succeeded(output: &Output) -> String {
    assert!(
        output.status.success(),
        "exit {:?}: {}{}",
        output.status.code(),
        stdout(output),
        String::from_utf8_lossy(&output.stderr)
    );
    stdout(output)
}

pub(crate) fn json(output: &Output) -> Value {
    serde_json::from_str(&succeeded(output)).expect("one JSON document")
}

async fn lookup_by_id_and_by_scope_shows_a_completed_operation_and_what_a_retry_does(
    backend: Backend,
) {
    let data = backend.into_process_data().await;
    let token = data.create_tenant("support");
    let server = data.serve(&[]).await;
    let mut client = server.client().await;
    let owned = claim_owned(
        &mut client,
        &token,
        claim_json("payments.charge", "order-1", r#"{"amount":1000}"#),
    )
    .await;
    complete(&mut client, &token, &owned, r#"{"charge":"ch_1"}"#).await;

    let table = succeeded(&ops(
        &data,
        &server,
        &token,
        &["lookup", &owned.operation_id],
    ));
    let first_line = table.lines().next().expect("an answer line");
    assert_eq!(
        first_line, "the effect happened; a retry replays the result",
        "{table}"
    );
    for expected in [
        owned.operation_id.as_str(),
        "SUCCEEDED",
        "1/",
        r#"{"charge":"ch_1"}"#,
        "provider=test",
        "CLAIMED",
        "COMPLETED",
    ] {
        assert!(table.contains(expected), "{expected:?} in:\n{table}");
    }

    let document = json(&ops(
        &data,
        &server,
        &token,
        &[
            "lookup",
            "--operation",
            "payments.charge",
            "--key",
            "order-1",
            "-o",
            "json",
        ],
    ));
    assert_eq!(
        document["answer"],
        "the effect happened; a retry replays the result"
    );
    assert_eq!(document["operation"]["operationId"], owned.operation_id);
    assert_eq!(document["operation"]["state"], "OPERATION_STATE_SUCCEEDED");
    assert_eq!(document["result_body_text"], r#"{"charge":"ch_1"}"#);
    let events: Vec<&str> = document["history"]
        .as_array()
        .expect("history")
        .iter()
        .filter_map(|entry| entry["event"].as_str())
        .collect();
    assert_eq!(events, ["CLAIMED", "COMPLETED"]);

    // Exit code 4: no such operation (the server cannot say whose it is);
    // a well-formed id that no fresh store holds.
    let missing = ops(
        &data,
        &server,
        &token,
        &["lookup", "0190f0e4-0000-7000-8000-000000000000"],
    );
    assert_eq!(missing.status.code(), Some(4), "{}", stdout(&missing));
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("OPERATION_NOT_FOUND"),
        "{}",
        String::from_utf8_lossy(&missing.stderr)
    );
    server.kill();
}

async fn list_with_a_filter_finds_exactly_the_matching_operations(backend: Backend) {
    let data = backend.into_process_data().await;
    let token = data.create_tenant("support");
    let server = data.serve(&[]).await;
    let mut client = server.client().await;
    let charged = claim_owned(
        &mut client,
        &token,
        claim_json("payments.charge", "charged", "{}"),
    )
    .await;
    complete(&mut client, &token, &charged, "{}").await;
    let in_doubt = claim_owned(
        &mut client,
        &token,
        claim_json("payments.refund", "in-doubt", "{}"),
    )
    .await;
    fail_unknown(&mut client, &token, &in_doubt).await;
    let shipping = claim_owned(
        &mut client,
        &token,
        claim_json("orders.ship", "in-doubt-too", "{}"),
    )
    .await;
    fail_unknown(&mut client, &token, &shipping).await;

    let filter = "state:unknown op:payments.*";
    let document = json(&ops(
        &data,
        &server,
        &token,
        &["list", "--filter", filter, "-o", "json"],
    ));
    let ids: Vec<&str> = document["operations"]
        .as_array()
        .expect("operations")
        .iter()
        .filter_map(|operation| operation["operationId"].as_str())
        .collect();
    assert_eq!(ids, [in_doubt.operation_id.as_str()], "{document}");
    assert_eq!(document["next_page_token"], "");

    let table = succeeded(&ops(&data, &server, &token, &["list", "--filter", filter]));
    let mut lines = table.lines();
    let header = lines.next().expect("a header");
    assert!(header.starts_with("OPERATION_ID"), "{table}");
    assert!(!header.contains("TENANT"), "not an admin listing: {table}");
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 1, "{table}");
    assert!(rows[0].contains(&in_doubt.operation_id), "{table}");
    assert!(rows[0].contains("UNKNOWN"), "{table}");

    // A filter the server cannot parse: refused (exit 1), the violation shown.
    let refused = ops(&data, &server, &token, &["list", "--filter", "state:"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("InvalidArgument"), "{stderr}");
    assert!(stderr.contains("field filter"), "{stderr}");

    // One page at a time: the token printed leads to the rest.
    let first = json(&ops(
        &data,
        &server,
        &token,
        &["list", "--limit", "1", "--order", "newest", "-o", "json"],
    ));
    assert_eq!(first["operations"][0]["operationId"], shipping.operation_id);
    let next = first["next_page_token"].as_str().expect("a token");
    assert!(!next.is_empty(), "{first}");
    let every = json(&ops(
        &data,
        &server,
        &token,
        &["list", "--limit", "1", "--all", "-o", "json"],
    ));
    assert_eq!(every["operations"].as_array().map(Vec::len), Some(3));

    // What needs reconciliation: the two in doubt, whatever their name;
    // --operation narrows it.
    let unresolved = json(&ops(&data, &server, &token, &["unresolved", "-o", "json"]));
    assert_eq!(unresolved["operations"].as_array().map(Vec::len), Some(2));
    let narrowed = json(&ops(
        &data,
        &server,
        &token,
        &["unresolved", "--operation", "orders.ship", "-o", "json"],
    ));
    assert_eq!(
        narrowed["operations"][0]["operationId"],
        shipping.operation_id
    );
    assert_eq!(narrowed["operations"].as_array().map(Vec::len), Some(1));
    server.kill();
}

/// `idemd ops reconcile …` with `answer` written to its stdin.
fn reconcile_answering(
    data: &ProcessData,
    daemon: &Daemon,
    token: &str,
    args: &[&str],
    answer: &str,
) -> Output {
    let mut child = data
        .command(&[&["ops", "reconcile"], args].concat())
        .env("IDEMD_ADDR", format!("http://{}", daemon.addr))
        .env("IDEMD_TOKEN", token)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("idemd runs");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(answer.as_bytes())
        .expect("answer written");
    child.wait_with_output().expect("idemd ends")
}

async fn reconcile_not_applied_asks_first_then_the_next_claim_executes(backend: Backend) {
    let data = backend.into_process_data().await;
    let token = data.create_tenant("support");
    let server = data.serve(&[]).await;
    let mut client = server.client().await;
    // A short attempt: NOT_APPLIED is allowed only once its deadline passed.
    let request = proto::ClaimRequest {
        lease: millis(200),
        max_attempt_duration: millis(300),
        ..claim_json("payments.charge", "order-9", r#"{"amount":5}"#)
    };
    let owned = claim_owned(&mut client, &token, request.clone()).await;
    fail_unknown(&mut client, &token, &owned).await;

    // Declined at the prompt: exit 5, and the operation is as it was.
    let declined = reconcile_answering(
        &data,
        &server,
        &token,
        &[&owned.operation_id, "--not-applied"],
        "n\n",
    );
    let stderr = String::from_utf8_lossy(&declined.stderr);
    assert_eq!(declined.status.code(), Some(5), "{stderr}");
    assert!(
        stderr.contains(
            "NOT_APPLIED grants one more attempt: the caller's next Claim executes the effect"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("Proceed? [y/N]"), "{stderr}");
    let unchanged = operation_by_id(&mut client, &token, &owned.operation_id).await;
    assert_eq!(unchanged.state(), proto::OperationState::Unknown);
    assert_eq!(unchanged.fence, owned.fence);

    // With --yes, once the attempt's deadline has passed by the server's
    // clock: until then the server refuses (ATTEMPT_STILL_RUNNING, exit 1).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let reconciled = loop {
        let output = ops(
            &data,
            &server,
            &token,
            &[
                "reconcile",
                &owned.operation_id,
                "--not-applied",
                "--yes",
                "-o",
                "json",
            ],
        );
        if output.status.success() {
            break serde_json::from_slice::<Value>(&output.stdout).expect("one JSON document");
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("ATTEMPT_STILL_RUNNING"), "{stderr}");
        assert!(tokio::time::Instant::now() < deadline, "{stderr}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(reconciled["state"], "RETRY_WAIT", "{reconciled}");

    let next = client
        .claim(authorized(&token, request))
        .await
        .expect("claim")
        .into_inner();
    assert!(
        matches!(next.outcome, Some(Outcome::Acquired(_))),
        "the next Claim executes: {next:?}"
    );
    server.kill();
}

store_tests!(
    lookup_by_id_and_by_scope_shows_a_completed_operation_and_what_a_retry_does,
    list_with_a_filter_finds_exactly_the_matching_operations,
    reconcile_not_applied_asks_first_then_the_next_claim_executes,
);

#[test]
fn a_closed_port_exits_3_and_an_empty_token_is_refused_before_connecting() {
    let data = ProcessData::embedded();
    let closed = format!("127.0.0.1:{}", free_port());
    let unreachable = data
        .command(&[
            "ops", "lookup", "some-id", "--addr", &closed, "--token", "t",
        ])
        .output()
        .expect("idemd runs");
    let stderr = String::from_utf8_lossy(&unreachable.stderr);
    assert_eq!(unreachable.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("cannot reach the server"), "{stderr}");

    // Refused at once: the message is about the token, not the address.
    let empty = data
        .command(&["ops", "list", "--addr", &closed])
        .env("IDEMD_TOKEN", "")
        .output()
        .expect("idemd runs");
    let stderr = String::from_utf8_lossy(&empty.stderr);
    assert_eq!(empty.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no credential: pass --token"), "{stderr}");
}

async fn reconcile_succeeded_stores_the_result_the_next_claim_replays(backend: Backend) {
    let data = backend.into_process_data().await;
    let token = data.create_tenant("support");
    let server = data.serve(&[]).await;
    let mut client = server.client().await;
    let request = claim_json("payments.charge", "order-10", r#"{"amount":7}"#);
    let owned = claim_owned(&mut client, &token, request.clone()).await;
    fail_unknown(&mut client, &token, &owned).await;
    // The provider says it happened: evidence, allowed once no lease is live.
    let result_file = data.directory().join("charge.json");
    std::fs::write(&result_file, r#"{"charge":"ch_10"}"#).expect("result file");
    let result_path = result_file.display().to_string();
    let reconciled = json(&ops(
        &data,
        &server,
        &token,
        &[
            "reconcile",
            &owned.operation_id,
            "--succeeded",
            "--result-file",
            &result_path,
            "--expected-fence",
            &owned.fence.to_string(),
            "--yes",
            "-o",
            "json",
        ],
    ));
    assert_eq!(reconciled["state"], "SUCCEEDED", "{reconciled}");

    let replay = client
        .claim(authorized(&token, request))
        .await
        .expect("claim")
        .into_inner();
    let Some(Outcome::Completed(completed)) = &replay.outcome else {
        panic!("expected the reconciled result, got {replay:?}");
    };
    let Some(proto::completed::Outcome::Result(stored)) = &completed.outcome else {
        panic!("expected a success result, got {completed:?}");
    };
    assert_eq!(stored.body, br#"{"charge":"ch_10"}"#);
    assert_eq!(stored.content_type, "application/json");
    server.kill();
}

store_tests!(reconcile_succeeded_stores_the_result_the_next_claim_replays);

#[tokio::test]
async fn lookup_over_tls_verifies_the_server_with_the_ca_given() {
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .expect("a self-signed certificate");
    let data = ProcessData::embedded();
    let cert_path = data.directory().join("tls.crt");
    let key_path = data.directory().join("tls.key");
    std::fs::write(&cert_path, certified.cert.pem()).expect("write cert");
    std::fs::write(&key_path, certified.signing_key.serialize_pem()).expect("write key");
    let token = data.create_tenant("tls");
    let health_port = free_port();
    let server = data
        .serve_with(
            &[],
            &[
                ("IDEMD_TLS_CERT", cert_path.display().to_string()),
                ("IDEMD_TLS_KEY", key_path.display().to_string()),
                ("IDEMD_HEALTH_LISTEN", format!("127.0.0.1:{health_port}")),
            ],
        )
        .await;
    let https = format!("https://{}", server.addr);
    let lookup = |extra: &[&str]| {
        data.command(&[&["ops", "lookup", "--operation", "a", "--key", "b"], extra].concat())
            .env("IDEMD_ADDR", &https)
            .env("IDEMD_TOKEN", &token)
            .output()
            .expect("idemd runs")
    };
    // Through TLS to the server, which answers: no such operation.
    let verified = lookup(&["--ca-cert", &cert_path.display().to_string()]);
    let stderr = String::from_utf8_lossy(&verified.stderr);
    assert_eq!(verified.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("OPERATION_NOT_FOUND"), "{stderr}");
    // Without a CA there is nothing to verify the server with: refused before
    // any connection.
    let unverified = lookup(&[]);
    let stderr = String::from_utf8_lossy(&unverified.stderr);
    assert_eq!(unverified.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--ca-cert"), "{stderr}");
    server.kill();
}
