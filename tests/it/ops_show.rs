//! `idemd ops show [--follow]`: the real binary against a real server. Show
//! prints the operation and its history as lookup does; --follow prints the
//! entries written after it started, one JSON document a line with -o json,
//! and exits 0 once the operation is terminal; a FAILED operation whose
//! policy opted in to `on_failed: new_attempt` is followed on.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

use crate::harness::*;
use crate::ops::{ops, succeeded};

/// `idemd ops show ID --follow -o json`, polling every 100 ms, its output
/// piped.
fn follow(
    data: &ProcessData,
    addr: std::net::SocketAddr,
    token: &str,
    operation_id: &str,
) -> std::process::Child {
    data.command(&[
        "ops",
        "show",
        operation_id,
        "--follow",
        "--interval",
        "100ms",
        "-o",
        "json",
    ])
    .env("IDEMD_ADDR", addr.to_string())
    .env("IDEMD_TOKEN", token)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("idemd runs")
}

/// The follower's stdout, a line at a time, read on a thread of its own.
fn lines_of(follower: &mut std::process::Child) -> mpsc::Receiver<String> {
    let (lines, received) = mpsc::channel();
    let stdout = follower.stdout.take().expect("piped stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    received
}

/// The next line, within 30 s, as the one JSON document it must be.
fn next_document(received: &mpsc::Receiver<String>) -> Value {
    let line = received
        .recv_timeout(Duration::from_secs(30))
        .expect("a line within 30 s");
    serde_json::from_str::<Value>(&line).expect("one JSON document a line")
}

async fn show_prints_the_operation_and_its_history(backend: Backend) {
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

    let table = succeeded(&ops(&data, &server, &token, &["show", &owned.operation_id]));
    assert_eq!(
        table.lines().next(),
        Some("the effect happened; a retry replays the result"),
        "{table}"
    );
    let history: Vec<&str> = table
        .lines()
        .skip_while(|line| *line != "history:")
        .collect();
    assert!(history[1].starts_with("SEQ"), "{table}");
    assert!(history[2].contains("CLAIMED"), "{table}");
    assert!(history[3].contains("COMPLETED"), "{table}");
    assert!(table.contains(r#"{"charge":"ch_1"}"#), "{table}");

    // -o json: one document a line, the operation first.
    let lines = succeeded(&ops(
        &data,
        &server,
        &token,
        &["show", &owned.operation_id, "-o", "json"],
    ));
    let documents: Vec<Value> = lines
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON document a line"))
        .collect();
    assert_eq!(documents.len(), 3, "{lines}");
    assert_eq!(documents[0]["kind"], "operation");
    assert_eq!(
        documents[0]["operation"]["state"],
        "OPERATION_STATE_SUCCEEDED"
    );
    let events: Vec<&str> = documents[1..]
        .iter()
        .map(|document| document["entry"]["event"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(events, ["CLAIMED", "COMPLETED"]);

    // Exit 4: no such operation, as for lookup.
    let missing = ops(
        &data,
        &server,
        &token,
        &["show", "0190f0e4-0000-7000-8000-000000000000", "--follow"],
    );
    assert_eq!(missing.status.code(), Some(4));
    server.kill();
}

async fn show_follow_prints_what_happens_after_it_started_and_exits_0_once_terminal(
    backend: Backend,
) {
    let data = backend.into_process_data().await;
    let token = data.create_tenant("support");
    let server = data.serve(&[]).await;
    let mut client = server.client().await;
    let owned = claim_owned(
        &mut client,
        &token,
        claim_json("payments.charge", "order-2", r#"{"amount":2}"#),
    )
    .await;

    let mut follower = follow(&data, server.addr, &token, &owned.operation_id);
    let received = lines_of(&mut follower);
    let next_document = || next_document(&received);
    // What was there when it started: the operation, in progress, and its
    // first entry.
    let first = next_document();
    assert_eq!(first["kind"], "operation", "{first}");
    assert_eq!(first["operation"]["state"], "OPERATION_STATE_IN_PROGRESS");
    let claimed = next_document();
    assert_eq!(claimed["entry"]["event"], "CLAIMED", "{claimed}");

    // Written while it follows: a renewal, then the result.
    client
        .renew(authorized(
            &token,
            idemd::proto::RenewRequest {
                operation_id: owned.operation_id.clone(),
                fence: owned.fence,
                lease: millis(60_000),
            },
        ))
        .await
        .expect("renew");
    let renewed = next_document();
    assert_eq!(renewed["entry"]["event"], "RENEWED", "{renewed}");
    complete(&mut client, &token, &owned, r#"{"charge":"ch_2"}"#).await;
    let completed = next_document();
    assert_eq!(completed["entry"]["event"], "COMPLETED", "{completed}");
    assert_eq!(completed["updated"], false);
    let ended = next_document();
    assert_eq!(ended["kind"], "operation", "{ended}");
    assert_eq!(ended["operation"]["state"], "OPERATION_STATE_SUCCEEDED");
    assert_eq!(ended["result_body_text"], r#"{"charge":"ch_2"}"#);

    // Terminal and printed everything: it ends by itself, with 0.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = follower.try_wait().expect("status") {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "still following");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status.code(), Some(0));
    assert!(
        received.recv_timeout(Duration::from_secs(1)).is_err(),
        "nothing after the end"
    );
    server.kill();
}

async fn show_follow_waits_out_a_server_restart_and_says_so(backend: Backend) {
    let data = backend.into_process_data().await;
    let token = data.create_tenant("support");
    let server = data.serve(&[]).await;
    let addr = server.addr;
    let mut client = server.client().await;
    let owned = claim_owned(
        &mut client,
        &token,
        idemd::proto::ClaimRequest {
            lease: millis(60_000),
            ..claim_json("payments.charge", "order-3", r#"{"amount":3}"#)
        },
    )
    .await;

    let mut follower = follow(&data, addr, &token, &owned.operation_id);
    let received = lines_of(&mut follower);
    let next_document = || next_document(&received);
    assert_eq!(next_document()["kind"], "operation");
    assert_eq!(next_document()["entry"]["event"], "CLAIMED");

    // The server goes away for a while, then comes back on the same address.
    server.kill();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        follower.try_wait().expect("status").is_none(),
        "it waits, it does not give up"
    );
    let restarted = data
        .serve_with(
            &[],
            &[
                ("IDEMD_LISTEN", addr.to_string()),
                ("IDEMD_HEALTH_LISTEN", format!("127.0.0.1:{}", free_port())),
            ],
        )
        .await;
    // (`restarted.addr` is the port the harness drew, not the one it listens
    // on: the environment's IDEMD_LISTEN won.)
    let mut client = idemd::proto::idempotency_service_client::IdempotencyServiceClient::new(
        tonic::transport::Channel::from_shared(format!("http://{addr}"))
            .expect("uri")
            .connect()
            .await
            .expect("connect"),
    );
    complete(&mut client, &token, &owned, r#"{"charge":"ch_3"}"#).await;
    assert_eq!(next_document()["entry"]["event"], "COMPLETED");
    assert_eq!(
        next_document()["operation"]["state"],
        "OPERATION_STATE_SUCCEEDED"
    );

    let output = follower.wait_with_output().expect("idemd ends");
    assert_eq!(output.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("Unavailable"), "{stderr}");
    assert!(stderr.contains("retrying in"), "{stderr}");
    restarted.kill();
}

async fn show_follow_ends_on_ctrl_c_with_130_and_whole_lines(backend: Backend) {
    let data = backend.into_process_data().await;
    let token = data.create_tenant("support");
    let server = data.serve(&[]).await;
    let mut client = server.client().await;
    let owned = claim_owned(
        &mut client,
        &token,
        claim_json("payments.charge", "order-4", r#"{"amount":4}"#),
    )
    .await;
    let mut follower = follow(&data, server.addr, &token, &owned.operation_id);
    let mut stdout = BufReader::new(follower.stdout.take().expect("piped stdout"));
    // Following: the operation and its first entry are out.
    for _ in 0..2 {
        let mut line = String::new();
        stdout.read_line(&mut line).expect("a line");
        serde_json::from_str::<Value>(&line).expect("one JSON document a line");
    }
    let interrupted = std::process::Command::new("kill")
        .args(["-INT", &follower.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(interrupted.success());
    let output = follower.wait_with_output().expect("idemd ends");
    assert_eq!(output.status.code(), Some(130));
    // Whatever else it printed is whole lines of JSON.
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).expect("the rest");
    for line in rest.lines() {
        serde_json::from_str::<Value>(line).expect("whole lines");
    }
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("interrupted"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    server.kill();
}

/// `payments.*` lets a Claim of a FAILED operation start a new attempt.
const NEW_ATTEMPT_POLICY: &str = r#"
policies:
  - operation: "payments.*"
    on_failed: new_attempt
"#;

async fn show_follow_keeps_following_a_failure_a_claim_may_retry(backend: Backend) {
    let data = backend.into_process_data().await;
    let token = data.create_tenant("support");
    let file = data.directory().join("policies.yaml");
    std::fs::write(&file, NEW_ATTEMPT_POLICY).expect("write the policy file");
    let server = data
        .serve(&["--policy-file", &file.to_string_lossy()])
        .await;
    let mut client = server.client().await;
    let owned = claim_owned(
        &mut client,
        &token,
        claim_json("payments.charge", "order-5", r#"{"amount":5}"#),
    )
    .await;

    let mut follower = follow(&data, server.addr, &token, &owned.operation_id);
    let received = lines_of(&mut follower);
    let next_document = || next_document(&received);
    assert_eq!(next_document()["kind"], "operation");
    assert_eq!(next_document()["entry"]["event"], "CLAIMED");

    // A terminal failure: printed, with the operation, and the follow goes on.
    fail_terminal(&mut client, &token, &owned).await;
    assert_eq!(next_document()["entry"]["event"], "FAILED");
    let failed = next_document();
    assert_eq!(failed["kind"], "operation", "{failed}");
    assert_eq!(failed["operation"]["state"], "OPERATION_STATE_FAILED");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        follower.try_wait().expect("status").is_none(),
        "a Claim may start a new attempt: it follows on"
    );

    // The caller tries again: a new attempt, which succeeds.
    let again = claim_owned(
        &mut client,
        &token,
        claim_json("payments.charge", "order-5", r#"{"amount":5}"#),
    )
    .await;
    assert_eq!(again.attempt, 2);
    let retried = next_document();
    assert_eq!(
        retried["entry"]["event"], "RETRIED_AFTER_FAILURE",
        "{retried}"
    );
    complete(&mut client, &token, &again, r#"{"charge":"ch_5"}"#).await;
    assert_eq!(next_document()["entry"]["event"], "COMPLETED");
    assert_eq!(
        next_document()["operation"]["state"],
        "OPERATION_STATE_SUCCEEDED"
    );
    let output = follower.wait_with_output().expect("idemd ends");
    assert_eq!(output.status.code(), Some(0));
    server.kill();
}

async fn show_follow_ends_at_a_failure_that_is_replayed(backend: Backend) {
    let data = backend.into_process_data().await;
    let token = data.create_tenant("support");
    let server = data.serve(&[]).await;
    let mut client = server.client().await;
    let owned = claim_owned(
        &mut client,
        &token,
        claim_json("payments.charge", "order-6", r#"{"amount":6}"#),
    )
    .await;
    let mut follower = follow(&data, server.addr, &token, &owned.operation_id);
    let received = lines_of(&mut follower);
    let next_document = || next_document(&received);
    assert_eq!(next_document()["kind"], "operation");
    assert_eq!(next_document()["entry"]["event"], "CLAIMED");
    fail_terminal(&mut client, &token, &owned).await;
    assert_eq!(next_document()["entry"]["event"], "FAILED");
    assert_eq!(
        next_document()["operation"]["state"],
        "OPERATION_STATE_FAILED"
    );
    let output = follower.wait_with_output().expect("idemd ends");
    assert_eq!(output.status.code(), Some(0));
    server.kill();
}

store_tests!(
    show_follow_keeps_following_a_failure_a_claim_may_retry,
    show_follow_ends_at_a_failure_that_is_replayed,
    show_follow_ends_on_ctrl_c_with_130_and_whole_lines,
    show_prints_the_operation_and_its_history,
    show_follow_prints_what_happens_after_it_started_and_exits_0_once_terminal,
    show_follow_waits_out_a_server_restart_and_says_so,
);
