//! A process killed (SIGKILL) between its claim and its commit leaves
//! nothing: no record to reconcile, no charge. The child is this test
//! binary again, running `child_claims_charges_and_waits_to_be_killed`.

use std::process::Stdio;
use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::app::{Answer, App, Charge, Ending, insert_charge};

/// The child's database, named by the parent.
const CHILD_DATABASE: &str = "IDEMD_LOCAL_CHILD_DATABASE";

fn killed_charge() -> Charge {
    Charge::new("killed", "acme", "k-killed", 100)
}

#[sqlx::test(migrations = false)]
async fn a_process_killed_between_claim_and_commit_leaves_nothing_to_reconcile(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let database = connect
        .get_database()
        .expect("sqlx::test names the database")
        .to_owned();
    let app = App::start(connect).await;
    app.tenant("acme").await;

    let mut child = tokio::process::Command::new(std::env::current_exe().expect("this binary"))
        .args([
            "killed::child_claims_charges_and_waits_to_be_killed",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_DATABASE, &database)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the child starts");
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let backend_pid: i32 = loop {
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("the child reports within a minute")
            .expect("the child's output reads")
            .expect("the child reports before it ends");
        if let Some(pid) = line.strip_prefix("claimed, charged and completed; backend ") {
            break pid.trim().parse().expect("a backend pid");
        }
    };

    // Mid-transaction: the child holds the scope (a claim of it from here
    // would wait on the unique index) and nothing of it is visible.
    assert_eq!(app.records("k-killed").await, 0);
    child.start_kill().expect("SIGKILL");
    child.wait().await.expect("the child is reaped");

    // The database ends the dead client's transaction once it sees the
    // connection gone; wait for its backend to leave.
    let gone_by = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let alive: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)")
                .bind(backend_pid)
                .fetch_one(&app.pool)
                .await
                .expect("pg_stat_activity");
        if !alive {
            break;
        }
        assert!(
            tokio::time::Instant::now() < gone_by,
            "the killed child's backend is still there after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    assert_eq!(app.records("k-killed").await, 0, "no record");
    assert_eq!(app.unresolved().await, 0, "nothing to reconcile");
    assert_eq!(app.effects("killed").await, 0, "no charge");
    // The retry is a plain first claim: no takeover, no doubt.
    let answer = app.charge(&killed_charge(), Ending::Commit).await;
    assert!(matches!(answer, Answer::Charged { .. }), "{answer:?}");
    assert_eq!(app.effects("killed").await, 1);
}

/// The child process of the test above (run only by it: it needs the
/// database the parent names).
#[tokio::test]
#[ignore = "the child process of a_process_killed_between_claim_and_commit_leaves_nothing_to_reconcile"]
async fn child_claims_charges_and_waits_to_be_killed() {
    let database = std::env::var(CHILD_DATABASE).expect("run by the parent test only");
    let url = std::env::var("DATABASE_URL").expect("DATABASE_URL");
    let connect = PgConnectOptions::from_str(&url)
        .expect("DATABASE_URL parses")
        .database(&database);
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect_with(connect)
        .await
        .expect("the parent's database");
    let local = idemd_local::Local::new(
        idemd_local::Schema::new(crate::app::SCHEMA).expect("a valid schema name"),
    );
    let charge = killed_charge();
    let mut transaction = pool.begin().await.expect("begin");
    let backend_pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut *transaction)
        .await
        .expect("the backend pid");
    let tenant = local
        .tenant(&mut transaction, "acme")
        .await
        .expect("tenant");
    let claimed = local
        .claim(&mut transaction, tenant, charge.claim_requested())
        .await
        .expect("claim");
    assert!(claimed.acquired());
    let charge_id = insert_charge(&mut transaction, &charge).await;
    let result = idemd::domain::SuccessResult {
        body: charge_id.to_string().into_bytes(),
        content_type: "text/plain".into(),
        metadata: Default::default(),
    };
    local
        .complete(&mut transaction, &claimed, result)
        .await
        .expect("complete");
    println!("claimed, charged and completed; backend {backend_pid}");
    // Killed here, before the commit.
    tokio::time::sleep(Duration::from_secs(600)).await;
    transaction.commit().await.expect("never reached");
}
