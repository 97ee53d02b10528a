//! The database's topology, for real: a private Postgres behind Debian's
//! PgBouncer (`pgbouncer`), and one in a network namespace of its own cut
//! off by packet filters (`partition`). These need packages and privileges
//! that a plain `cargo test` may not have, so they are ignored there and run
//! by `tests/topology/run`, which installs what they need (CI runs it). A
//! test whose machine cannot do it (not root, no network namespaces) says
//! so on one line and returns.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use idemd::proto;

use crate::harness::*;

mod partition;
mod pgbouncer;

/// Runs `command`, panicking with its output when it fails.
fn run(command: &mut Command) -> Output {
    let output = command
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|error| panic!("{command:?}: {error}"));
    assert!(
        output.status.success(),
        "{command:?}: {}: {}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "0")
}

/// Why this machine cannot run a test, printed as the one line a skipped
/// test leaves; `None` when it can.
fn skip(reason: &str) {
    println!("SKIPPED: {reason}");
}

/// `program` run as the `postgres` user when root (Postgres and PgBouncer
/// refuse to run as root).
fn as_postgres(program: &Path) -> Command {
    if running_as_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

/// A directory the `postgres` user owns, removed with the test's TempDir.
fn owned_directory(parent: &Path, name: &str) -> PathBuf {
    let directory = parent.join(name);
    std::fs::create_dir_all(&directory).expect("mkdir");
    if running_as_root() {
        run(Command::new("chown").arg("postgres").arg(&directory));
        // Postgres's data directory must not be group- or world-readable,
        // but the parent must let the postgres user in.
        run(Command::new("chmod").arg("755").arg(parent));
    }
    directory
}

/// Claims `key`, completes it with `body`, and claims it again: the second
/// Claim must answer the stored result. Returns the operation_id.
async fn claim_complete_and_replay(client: &mut Client, token: &str, key: &str) -> String {
    let (operation_id, fence) = acquire(client, token, key).await;
    client
        .complete(authorized(
            token,
            proto::CompleteRequest {
                operation_id: operation_id.clone(),
                fence,
                result: result(key),
            },
        ))
        .await
        .expect("complete");
    let replay = client
        .claim(authorized(token, claim_json("payments.charge", key, "{}")))
        .await
        .expect("claim again")
        .into_inner();
    assert_eq!(outcome_name(&replay), "completed", "{replay:?}");
    operation_id
}

/// Waits for `condition`, polling, for at most `within`.
async fn eventually<F, Fut>(within: Duration, what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    while !condition().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within {within:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
