//! Operation policies (`--policy-file`) on the real binary: a Claim gets its
//! operation's defaults, is refused past its ceilings (naming the policy,
//! writing nothing), and a changed file applies without a restart while an
//! invalid one changes nothing; an invalid file stops start-up; `idemd
//! policy check` shows what a Claim gets.

use std::path::Path;
use std::time::Duration;

use idemd::proto;
use tonic::Code;
use tonic_types::StatusExt;

use crate::harness::*;

store_tests!(a_claim_follows_its_operations_policy_and_a_changed_file_applies_without_a_restart);

const POLICIES: &str = r#"
policies:
  - operation: "payments.*"
    lease: { default: 2s, max: 10s }
    max_attempts: { default: 2, max: 3 }
    retention: { default: 7d }
    operation_deadline: { default: 1h }
    on_failed: new_attempt
"#;

fn seconds(duration: &Option<pbjson_types::Duration>) -> i64 {
    duration.as_ref().map_or(-1, |duration| duration.seconds)
}

fn timestamp_seconds(timestamp: &Option<pbjson_types::Timestamp>) -> i64 {
    timestamp.as_ref().map_or(0, |timestamp| timestamp.seconds)
}

async fn lookup(
    client: &mut Client,
    token: &str,
    operation: &str,
    key: &str,
) -> Result<proto::Operation, tonic::Status> {
    client
        .lookup(authorized(
            token,
            proto::LookupRequest {
                target: Some(proto::lookup_request::Target::Scope(proto::Scope {
                    operation: operation.into(),
                    key: key.into(),
                })),
                ..Default::default()
            },
        ))
        .await
        .map(|response| response.into_inner().operation.expect("an operation"))
}

/// The lease an acquiring Claim of `operation`/`key` was given.
async fn acquired_lease(client: &mut Client, token: &str, operation: &str, key: &str) -> i64 {
    let claimed = client
        .claim(authorized(token, claim_json(operation, key, "{}")))
        .await
        .expect("claim")
        .into_inner();
    seconds(&ownership(&claimed).expect("acquired").lease)
}

fn write(path: &Path, text: &str) {
    // Written whole, then renamed: the reload never reads half a file.
    let partial = path.with_extension("partial");
    std::fs::write(&partial, text).expect("write the policy file");
    std::fs::rename(&partial, path).expect("rename the policy file");
}

async fn a_claim_follows_its_operations_policy_and_a_changed_file_applies_without_a_restart(
    backend: Backend,
) {
    let data = backend.into_process_data().await;
    let token = data.create_tenant("shop");
    let file = data.directory().join("policies.yaml");
    write(&file, POLICIES);
    let file_arg = file.to_string_lossy().into_owned();
    let server = data
        .serve(&[
            "--policy-file",
            &file_arg,
            "--policy-reload-interval",
            "100ms",
        ])
        .await;
    let mut client = server.client().await;

    // The policy's defaults.
    let claimed = client
        .claim(authorized(
            &token,
            claim_json("payments.charge", "k1", "{}"),
        ))
        .await
        .expect("claim")
        .into_inner();
    let owned = ownership(&claimed).expect("acquired").clone();
    assert_eq!(seconds(&owned.lease), 2);
    assert_eq!(owned.max_attempts, 2);
    let record = lookup(&mut client, &token, "payments.charge", "k1")
        .await
        .expect("stored");
    assert_eq!(
        timestamp_seconds(&record.operation_deadline_at) - timestamp_seconds(&record.created_at),
        3600,
        "the policy's default operation deadline"
    );
    assert_eq!(
        record.on_failed(),
        proto::OnFailed::NewAttempt,
        "the policy's on_failed, stored"
    );
    client
        .complete(authorized(
            &token,
            proto::CompleteRequest {
                operation_id: owned.operation_id.clone(),
                fence: owned.fence,
                result: result("charged"),
            },
        ))
        .await
        .expect("complete");
    let record = lookup(&mut client, &token, "payments.charge", "k1")
        .await
        .expect("stored");
    assert_eq!(
        timestamp_seconds(&record.retain_until) - timestamp_seconds(&record.completed_at),
        7 * 24 * 3600,
        "the policy's default retention"
    );

    // Past the policy's ceilings: refused, naming the policy, nothing written.
    let mut too_long = claim_json("payments.charge", "k2", "{}");
    too_long.lease = millis(20_000);
    too_long.max_attempts = 4;
    let refused = client
        .claim(authorized(&token, too_long))
        .await
        .expect_err("past the policy's ceilings");
    assert_status(&refused, Code::InvalidArgument, "INVALID_REQUEST");
    let violations = refused
        .get_details_bad_request()
        .expect("BadRequest")
        .field_violations;
    let fields: Vec<&str> = violations
        .iter()
        .map(|violation| violation.field.as_str())
        .collect();
    assert_eq!(fields, ["lease", "max_attempts"], "{violations:?}");
    for violation in &violations {
        assert!(
            violation
                .description
                .ends_with("(the ceiling of the operation policy `payments.*`)"),
            "{violations:?}"
        );
    }
    let nothing = lookup(&mut client, &token, "payments.charge", "k2")
        .await
        .expect_err("nothing was written");
    assert_eq!(nothing.code(), Code::NotFound);
    // Narrower than the ceiling: as asked.
    let mut narrower = claim_json("payments.charge", "k3", "{}");
    narrower.lease = millis(5_000);
    let claimed = client
        .claim(authorized(&token, narrower))
        .await
        .expect("within the ceiling")
        .into_inner();
    assert_eq!(seconds(&ownership(&claimed).expect("acquired").lease), 5);
    // Another operation: the server's own bounds.
    let mut other = claim_json("emails.send", "k1", "{}");
    other.lease = millis(20_000);
    let claimed = client
        .claim(authorized(&token, other))
        .await
        .expect("the server's ceiling is an hour")
        .into_inner();
    assert_eq!(seconds(&ownership(&claimed).expect("acquired").lease), 20);

    // A changed file applies to the Claims admitted after it.
    write(&file, &POLICIES.replace("default: 2s", "default: 3s"));
    let mut key = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        key += 1;
        let lease =
            acquired_lease(&mut client, &token, "payments.charge", &format!("r{key}")).await;
        if lease == 3 {
            break;
        }
        assert_eq!(lease, 2, "the old policy until the new one is read");
        assert!(
            tokio::time::Instant::now() < deadline,
            "the changed file was not applied"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // An invalid file changes nothing: logged, and the policies in force stay.
    write(
        &file,
        "policies:\n  - operation: \"payments.*\"\n    lease: { max: soon }\n",
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !server.log().contains("policy file refused") {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the invalid file was not noticed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        acquired_lease(&mut client, &token, "payments.charge", "after-invalid").await,
        3
    );
    let log = server.log();
    assert!(log.contains("`soon` is not a duration"), "{log}");
}

#[tokio::test]
async fn an_invalid_policy_file_stops_start_up_with_every_problem() {
    let data = ProcessData::embedded();
    let file = data.directory().join("policies.yaml");
    std::fs::write(
        &file,
        "policies:\n  - operation: \"payments.*\"\n    lease: { default: 2m, max: 1m }\n    \
         max_attempts: { max: 1000 }\n",
    )
    .expect("write");
    let output = data
        .command(&[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--policy-file",
            &file.to_string_lossy(),
        ])
        .output()
        .expect("idemd runs");
    assert!(
        !output.status.success(),
        "an invalid policy file must stop start-up"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("payments.*: lease.default 2m exceeds its max 1m"),
        "{stderr}"
    );
    assert!(
        stderr.contains("payments.*: max_attempts.max 1000 must be between 1 and 100"),
        "{stderr}"
    );
    assert!(
        !data.directory().join("idemd.sqlite").exists(),
        "refused before the store opened"
    );
}

#[tokio::test]
async fn policy_check_prints_what_a_claim_gets() {
    let data = ProcessData::embedded();
    let file = data.directory().join("policies.yaml");
    std::fs::write(&file, POLICIES).expect("write");
    let path = file.to_string_lossy().into_owned();
    let output = data
        .command(&[
            "policy",
            "check",
            &path,
            "--operation",
            "payments.charge",
            "--operation",
            "emails.send",
            "-o",
            "json",
        ])
        .output()
        .expect("idemd runs");
    assert!(output.status.success(), "{output:?}");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(report["policies"], 1);
    let payments = &report["operations"][0];
    assert_eq!(payments["operation"], "payments.charge");
    assert_eq!(payments["policy"], "payments.*");
    assert_eq!(payments["lease"], serde_json::json!(["2s", "10s"]));
    assert_eq!(payments["max_attempts"], serde_json::json!(["2", "3"]));
    assert_eq!(payments["operation_deadline"][0], "1h");
    assert_eq!(payments["on_failed"], "new_attempt");
    let emails = &report["operations"][1];
    assert_eq!(emails["policy"], serde_json::Value::Null);
    assert_eq!(emails["lease"], serde_json::json!(["30s", "1h"]));
    assert_eq!(emails["on_failed"], "replay");

    let table = data
        .command(&["policy", "check", &path, "--operation", "payments.charge"])
        .output()
        .expect("idemd runs");
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.contains("1 policies, valid"), "{table}");
    assert!(
        table.contains("payments.charge (policy: payments.*)"),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|line| line.split_whitespace().eq(["on_failed", "new_attempt"])),
        "{table}"
    );

    std::fs::write(&file, "policies:\n  - operation: \"a b\"\n").expect("write");
    let invalid = data
        .command(&["policy", "check", &path])
        .output()
        .expect("idemd runs");
    assert_eq!(invalid.status.code(), Some(1), "{invalid:?}");
    assert!(String::from_utf8_lossy(&invalid.stderr).contains("`a b`"));
}
