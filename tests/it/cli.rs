//! The binary as a newcomer meets it: `serve --dev`, the embedded store's
//! data directory and its lock, and tenant commands beside a running server.

use std::time::Duration;

use idemd::proto;

use crate::harness::*;

/// `--dev` prints two lines at start-up; the token is the second.
fn dev_token(daemon: &mut Daemon) -> String {
    let lines = daemon.stdout_lines(2);
    assert!(lines[0].contains("dev"), "{lines:?}");
    lines[1].clone()
}

#[tokio::test]
async fn dev_mode_creates_one_tenant_on_first_start_and_reuses_it_after_a_restart() {
    let data = ProcessData::embedded();
    let provider = Provider::default();
    let request = claim_json("payments.charge", "order-1", r#"{"amount":1}"#);

    let mut first = data.serve(&["--dev"]).await;
    let token = dev_token(&mut first);
    assert!(token.starts_with("idem_"), "{token:?}");
    let token_file = data.directory().join("dev-token");
    assert_eq!(
        std::fs::read_to_string(&token_file)
            .expect("token file")
            .trim(),
        token
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&token_file)
            .expect("token file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }
    assert!(data.directory().join("idemd.db").exists());
    let mut client = first.client().await;
    assert_eq!(
        attempt(&mut client, &token, request.clone(), &provider).await,
        Attempt::Executed
    );
    first.kill();

    // The same tenant after a restart: the retry is a replay, not a second effect.
    let mut second = data.serve(&["--dev"]).await;
    assert_eq!(dev_token(&mut second), token);
    let mut client = second.client().await;
    assert_eq!(
        attempt(&mut client, &token, request, &provider).await,
        Attempt::Replayed
    );
    assert_eq!(provider.effects(), 1);
    // Authentication stays on.
    let anonymous = client
        .claim(tonic::Request::new(claim_json(
            "payments.charge",
            "k",
            "{}",
        )))
        .await
        .expect_err("no token");
    assert_eq!(anonymous.code(), tonic::Code::Unauthenticated);
    second.kill();
}

#[tokio::test]
async fn dev_mode_refuses_to_listen_beyond_loopback() {
    let data = ProcessData::embedded();
    let output = data
        .command(&["serve", "--dev", "--listen", "0.0.0.0:0"])
        .output()
        .expect("idemd runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("loopback"), "{stderr}");
    assert!(!data.directory().join("dev-token").exists());
}

#[tokio::test]
async fn a_second_server_on_the_same_data_directory_is_refused() {
    let data = ProcessData::embedded();
    let server = data.serve(&[]).await;

    let output = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::task::spawn_blocking({
            let mut second = data.command(&["serve", "--listen", "127.0.0.1:0"]);
            move || second.output()
        }),
    )
    .await
    .expect("the second server gives up at once")
    .expect("task")
    .expect("idemd runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("in use by another idemd process"),
        "{stderr}"
    );
    // The first one still serves.
    let mut health = server.client().await;
    let token = data.create_tenant("still-serving");
    health
        .claim(authorized(&token, claim_json("payments.charge", "k", "{}")))
        .await
        .expect("the owner serves on");
    server.kill();
}

#[tokio::test]
async fn tenant_commands_work_beside_a_running_embedded_server() {
    let data = ProcessData::embedded();
    let server = data.serve(&["--auth-cache-ttl", "100ms"]).await;
    let mut client = server.client().await;

    let token = data.create_tenant("late-arrival");
    let claimed = client
        .claim(authorized(&token, claim_json("payments.charge", "k", "{}")))
        .await
        .expect("the new tenant's token works on the running server")
        .into_inner();
    assert_eq!(outcome_name(&claimed), "acquired");

    let revoked = data
        .command(&["tenant", "revoke", "late-arrival"])
        .output()
        .expect("idemd runs");
    assert!(
        revoked.status.success(),
        "{}",
        String::from_utf8_lossy(&revoked.stderr)
    );
    // The server trusts a verified token for its auth cache TTL.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let refused = client
        .claim(authorized(
            &token,
            claim_json("payments.charge", "k2", "{}"),
        ))
        .await
        .expect_err("revoked");
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);
    let _ = proto::FILE_DESCRIPTOR_SET;
    server.kill();
}
