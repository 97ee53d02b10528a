//! `idemd ops reconcile --filter …`: bulk reconciliation, the real binary
//! against a real server. A dry run counts and changes nothing; --yes
//! reconciles each operation at the fence it was listed with, and the
//! callers' next Claims each execute once; the server's refusals
//! (ATTEMPT_STILL_RUNNING) and operations that moved between the listing and
//! the answer at the prompt are reported, not retried.

use std::io::{Read, Write};
use std::process::{Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use idemd::proto;
use idemd::proto::claim_response::Outcome;
use serde_json::Value;

use crate::harness::*;
use crate::ops::{json, ops, stdout};

/// An operation whose attempt may last `attempt_millis`, left UNKNOWN by
/// its owner; the Claim that made it, to claim again as its caller would.
async fn in_doubt(
    client: &mut Client,
    token: &str,
    operation: &str,
    key: &str,
    attempt_millis: u64,
) -> (proto::Ownership, proto::ClaimRequest) {
    let request = proto::ClaimRequest {
        lease: millis(attempt_millis.min(200)),
        max_attempt_duration: millis(attempt_millis),
        ..claim_json(operation, key, r#"{"amount":1}"#)
    };
    let owned = claim_owned(client, token, request.clone()).await;
    fail_unknown(client, token, &owned).await;
    (owned, request)
}

async fn lookup(client: &mut Client, token: &str, operation_id: &str) -> proto::Operation {
    client
        .lookup(authorized(
            token,
            proto::LookupRequest {
                target: Some(proto::lookup_request::Target::OperationId(
                    operation_id.to_owned(),
                )),
                ..Default::default()
            },
        ))
        .await
        .expect("lookup")
        .into_inner()
        .operation
        .expect("operation")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

async fn bulk_dry_run_changes_nothing_and_yes_reconciles_each_so_the_next_claims_execute_once(
    backend: Backend,
) {
    let data = backend.into_process_data().await;
    let token = data.create_tenant("support");
    let server = data.serve(&[]).await;
    let mut client = server.client().await;
    // Three payments in doubt whose attempts are over, one whose attempt
    // may still run (five minutes), and what the filter must leave alone: a
    // payment that succeeded, and another operation name in doubt.
    let mut over = Vec::new();
    for key in ["bulk-1", "bulk-2", "bulk-3"] {
        over.push(in_doubt(&mut client, &token, "payments.charge", key, 300).await);
    }
    let (running, _) = in_doubt(&mut client, &token, "payments.refund", "bulk-4", 300_000).await;
    let (other, _) = in_doubt(&mut client, &token, "orders.ship", "bulk-5", 300).await;
    let done = claim_owned(
        &mut client,
        &token,
        claim_json("payments.charge", "bulk-6", "{}"),
    )
    .await;
    complete(&mut client, &token, &done, "{}").await;
    // The short attempts' deadlines pass (the test server has no clock margin).
    tokio::time::sleep(Duration::from_millis(500)).await;

    let filter = "op:payments.*";
    let dry_run = ops(
        &data,
        &server,
        &token,
        &[
            "reconcile",
            "--filter",
            filter,
            "--not-applied",
            "--dry-run",
        ],
    );
    let table = stdout(&dry_run);
    assert_eq!(
        dry_run.status.code(),
        Some(0),
        "{table}{}",
        stderr(&dry_run)
    );
    assert!(
        stderr(&dry_run).contains("added `state:unresolved`"),
        "{}",
        stderr(&dry_run)
    );
    assert!(
        table.contains("filter: op:payments.* state:unresolved"),
        "{table}"
    );
    assert!(table.contains("4 unresolved operations"), "{table}");
    assert!(
        table.contains(
            "NOT_APPLIED grants one more attempt each: the callers' next Claim executes the effect"
        ),
        "{table}"
    );
    let header = table
        .lines()
        .find(|line| line.starts_with("OPERATION_ID"))
        .expect("the sample's header");
    assert!(header.ends_with("DEADLINE_PASSED"), "{table}");
    for (owned, _) in &over {
        let row = table
            .lines()
            .find(|line| line.starts_with(&owned.operation_id))
            .expect("a row for each");
        assert!(row.ends_with("yes"), "{table}");
    }
    let running_row = table
        .lines()
        .find(|line| line.starts_with(&running.operation_id))
        .expect("a row for the running one");
    assert!(running_row.ends_with("no"), "{table}");
    let counted = json(&ops(
        &data,
        &server,
        &token,
        &[
            "reconcile",
            "--filter",
            filter,
            "--not-applied",
            "--dry-run",
            "-o",
            "json",
        ],
    ));
    assert_eq!(counted["count"], 4, "{counted}");
    assert_eq!(counted["limit_reached"], false, "{counted}");
    // --limit: the oldest N, and a word that more may match.
    let limited = json(&ops(
        &data,
        &server,
        &token,
        &[
            "reconcile",
            "--filter",
            filter,
            "--not-applied",
            "--dry-run",
            "--limit",
            "2",
            "-o",
            "json",
        ],
    ));
    assert_eq!(limited["count"], 2, "{limited}");
    assert_eq!(limited["limit_reached"], true, "{limited}");
    assert_eq!(
        limited["operations"][0]["operationId"],
        over[0].0.operation_id.as_str()
    );

    // Not a terminal to ask on, and no --yes: refused, naming --yes.
    let unasked = ops(
        &data,
        &server,
        &token,
        &["reconcile", "--filter", filter, "--not-applied"],
    );
    assert_eq!(unasked.status.code(), Some(2), "{}", stderr(&unasked));
    assert!(stderr(&unasked).contains("--yes"), "{}", stderr(&unasked));

    // Neither changed a thing.
    for (owned, _) in &over {
        let operation = lookup(&mut client, &token, &owned.operation_id).await;
        assert_eq!(operation.state(), proto::OperationState::Unknown);
        assert_eq!(operation.fence, owned.fence);
    }

    // --yes: the three reconciled; the running one refused by the server,
    // reported with its reason; exit 6.
    let applied = ops(
        &data,
        &server,
        &token,
        &[
            "reconcile",
            "--filter",
            filter,
            "--not-applied",
            "--yes",
            "-o",
            "json",
        ],
    );
    assert_eq!(applied.status.code(), Some(6), "{}", stderr(&applied));
    let summary: Value = serde_json::from_slice(&applied.stdout).expect("one JSON document");
    assert_eq!(summary["reconciled"], 3, "{summary}");
    assert_eq!(summary["refused"], 1, "{summary}");
    assert_eq!(summary["changed"], 0, "{summary}");
    let refused = summary["operations"]
        .as_array()
        .expect("operations")
        .iter()
        .find(|each| each["outcome"] == "refused")
        .expect("the refused one");
    assert_eq!(refused["operation_id"], running.operation_id.as_str());
    assert!(
        refused["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("ATTEMPT_STILL_RUNNING")),
        "{summary}"
    );

    // Each caller's next Claim executes, once: a second Claim replays.
    let mut effects = 0;
    for (_, request) in &over {
        for _ in 0..2 {
            let answer = client
                .claim(authorized(&token, request.clone()))
                .await
                .expect("claim")
                .into_inner();
            match answer.outcome {
                Some(Outcome::Acquired(acquired)) => {
                    effects += 1;
                    let owned = acquired.ownership.expect("ownership");
                    complete(&mut client, &token, &owned, r#"{"charge":"again"}"#).await;
                }
                Some(Outcome::Completed(_)) => {}
                other => panic!("neither executed nor replayed: {other:?}"),
            }
        }
    }
    assert_eq!(
        effects,
        over.len(),
        "one execution per reconciled operation"
    );
    // Left alone: the other name's operation and the running one.
    let untouched = lookup(&mut client, &token, &other.operation_id).await;
    assert_eq!(untouched.state(), proto::OperationState::Unknown);
    assert_eq!(untouched.fence, other.fence);
    let still = lookup(&mut client, &token, &running.operation_id).await;
    assert_eq!(still.fence, running.fence);
    server.kill();
}

/// The wrapper that gives `idemd` a terminal (a pseudo-terminal) for its
/// stdin, stdout and stderr, copying ours in and its output out.
const PYTHON: &str = "/usr/bin/python3";
const ON_A_TERMINAL: &str = "import pty, sys; sys.exit(pty.waitstatus_to_exitcode(pty.spawn(sys.argv[1:])) if hasattr(pty, 'waitstatus_to_exitcode') else pty.spawn(sys.argv[1:]) >> 8)";

async fn bulk_skips_and_reports_an_operation_whose_fence_moved_after_it_was_listed(
    backend: Backend,
) {
    if !std::path::Path::new(PYTHON).exists() {
        eprintln!("SKIPPED: {PYTHON} (which gives idemd a terminal to ask on) is not installed");
        return;
    }
    let data = backend.into_process_data().await;
    let token = data.create_tenant("support");
    let server = data.serve(&[]).await;
    let mut client = server.client().await;
    let (kept, _) = in_doubt(&mut client, &token, "payments.charge", "moved-1", 300).await;
    let (moved, moved_request) =
        in_doubt(&mut client, &token, "payments.charge", "moved-2", 300).await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    let mut child = data
        .command_under(
            &[PYTHON, "-c", ON_A_TERMINAL],
            &[
                "ops",
                "reconcile",
                "--filter",
                "state:unresolved",
                "--not-applied",
            ],
        )
        .env("IDEMD_ADDR", server.addr.to_string())
        .env("IDEMD_TOKEN", &token)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("idemd runs");
    let (chunks, received) = mpsc::channel();
    let mut terminal_output = child.stdout.take().expect("piped stdout");
    std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        while let Ok(read) = terminal_output.read(&mut buffer) {
            if read == 0 || chunks.send(buffer[..read].to_vec()).is_err() {
                return;
            }
        }
    });
    let mut shown = String::new();
    let read_until = |shown: &mut String, wanted: &str| {
        while !shown.contains(wanted) {
            let chunk = received
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("no {wanted:?} within 30 s: {shown}"));
            shown.push_str(&String::from_utf8_lossy(&chunk));
        }
    };
    read_until(&mut shown, "Proceed? [y/N]");
    assert!(shown.contains("2 unresolved operations"), "{shown}");

    // Between the listing and the answer, the caller claims one again: a
    // takeover, at a new fence.
    let again = client
        .claim(authorized(&token, moved_request))
        .await
        .expect("claim")
        .into_inner();
    let Some(Outcome::ReconcileFirst(taken)) = &again.outcome else {
        panic!("expected a takeover, got {again:?}");
    };
    let new_fence = taken.ownership.as_ref().expect("ownership").fence;
    assert!(new_fence > moved.fence);

    let mut stdin = child.stdin.take().expect("piped stdin");
    stdin.write_all(b"y\n").expect("answer written");
    read_until(&mut shown, "not reconciled");
    let status = child.wait().expect("idemd ends");
    drop(stdin);
    assert_eq!(status.code(), Some(6), "{shown}");
    assert!(shown.contains("reconciled 1; skipped 1"), "{shown}");
    // Its row in the summary (the sample before the prompt has one too).
    let reported = shown
        .lines()
        .find(|line| line.starts_with(&moved.operation_id) && line.contains("changed"))
        .unwrap_or_else(|| panic!("the moved one reported: {shown}"));
    assert!(reported.contains("LEASE_LOST"), "{shown}");

    // The new owner keeps it; the other one was reconciled.
    let owned = lookup(&mut client, &token, &moved.operation_id).await;
    assert_eq!(owned.state(), proto::OperationState::InProgress);
    assert_eq!(owned.fence, new_fence);
    let reconciled = lookup(&mut client, &token, &kept.operation_id).await;
    assert_eq!(reconciled.state(), proto::OperationState::RetryWait);
    server.kill();
}

store_tests!(
    bulk_dry_run_changes_nothing_and_yes_reconciles_each_so_the_next_claims_execute_once,
    bulk_skips_and_reports_an_operation_whose_fence_moved_after_it_was_listed,
);
