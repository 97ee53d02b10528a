//! Behind PgBouncer (Debian's 1.18: no prepared statements across
//! transactions, no startup `options`). Session pooling, with idemd's
//! session settings set on the database instead of sent at connect, works;
//! transaction pooling, and a pooler that drops the settings, are refused
//! at start-up with a message naming what to change.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection};

use super::*;

const PGBOUNCER: &str = "/usr/sbin/pgbouncer";

/// A PgBouncer in front of the test's Postgres server, on a free port.
struct Pgbouncer {
    port: u16,
    pid_file: PathBuf,
    log: PathBuf,
}

impl Pgbouncer {
    fn start(
        directory: &Path,
        upstream: &PgConnectOptions,
        pool_mode: &str,
        ignore_options: bool,
    ) -> Self {
        let directory = owned_directory(directory, &format!("pgbouncer-{pool_mode}"));
        let port = free_port();
        let auth_file = directory.join("userlist.txt");
        std::fs::write(
            &auth_file,
            format!("\"{}\" \"\"\n", upstream.get_username()),
        )
        .expect("userlist");
        // sqlx sends extra_float_digits, which PgBouncer 1.18 refuses too.
        let ignored = if ignore_options {
            "extra_float_digits, options"
        } else {
            ""
        };
        let config = directory.join("pgbouncer.ini");
        let log = directory.join("pgbouncer.log");
        let pid_file = directory.join("pgbouncer.pid");
        std::fs::write(
            &config,
            format!(
                "[databases]\n* = host={host} port={upstream_port}\n\
                 [pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\n\
                 unix_socket_dir =\nauth_type = trust\nauth_file = {auth}\n\
                 pool_mode = {pool_mode}\nignore_startup_parameters = {ignored}\n\
                 default_pool_size = 40\nmax_client_conn = 200\n\
                 logfile = {log}\npidfile = {pid}\n",
                host = upstream.get_host(),
                upstream_port = upstream.get_port(),
                auth = auth_file.display(),
                log = log.display(),
                pid = pid_file.display(),
            ),
        )
        .expect("pgbouncer.ini");
        if running_as_root() {
            run(Command::new("chown")
                .arg("-R")
                .arg("postgres")
                .arg(&directory));
        }
        run(as_postgres(Path::new(PGBOUNCER)).arg("-d").arg(&config));
        let bouncer = Self {
            port,
            pid_file,
            log,
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "pgbouncer did not start: {}",
                bouncer.log()
            );
            #[allow(
                clippy::disallowed_methods,
                reason = "start-up, before the test's runtime does anything else"
            )]
            std::thread::sleep(Duration::from_millis(20));
        }
        bouncer
    }

    fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Pgbouncer {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(&self.pid_file) {
            let _ = Command::new("kill").args(["-TERM", pid.trim()]).status();
        }
    }
}

/// Skips (one line) where Debian's PgBouncer is not installed.
fn pgbouncer_installed() -> bool {
    if Path::new(PGBOUNCER).exists() {
        return true;
    }
    skip("pgbouncer is not installed (tests/topology/run installs it with apt-get)");
    false
}

/// `idemd serve` over `url`, which must refuse to start: its log.
async fn refused_start(data: &ProcessData, url: &str) -> String {
    let mut command = data.command(&["serve"]);
    command
        .env("DATABASE_URL", url)
        .env("IDEMD_LISTEN", format!("127.0.0.1:{}", free_port()))
        .env("IDEMD_DB_MAX_CONNECTIONS", "4");
    let log = data
        .directory()
        .join(format!("refused-{}.log", free_port()));
    command
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"));
    let mut child = command.spawn().expect("idemd runs");
    // A server that does not refuse serves on: stopped after a while.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("child status") {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        status.is_some_and(|status| !status.success()),
        "idemd did not refuse to start: {log}"
    );
    log
}

/// What `idemd serve` sends at connect, set on the database instead, with
/// the defaults of `idemd serve`.
async fn set_session_settings_on_the_database(connect: &PgConnectOptions) {
    let database = connect.get_database().expect("a test database");
    let mut connection = PgConnection::connect_with(connect).await.expect("connect");
    for (name, value) in [
        ("plan_cache_mode", "force_generic_plan"),
        ("enable_seqscan", "off"),
        ("lock_timeout", "2s"),
        ("statement_timeout", "5s"),
        ("idle_in_transaction_session_timeout", "10s"),
    ] {
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "ALTER DATABASE \"{database}\" SET {name} = '{value}'"
        )))
        .execute(&mut connection)
        .await
        .expect("ALTER DATABASE … SET");
    }
}

#[ignore = "needs Debian's pgbouncer: tests/topology/run"]
#[sqlx::test(migrator = "idemd::store::postgres::MIGRATOR")]
async fn session_pooling_with_the_settings_on_the_database_serves(
    _: sqlx::postgres::PgPoolOptions,
    connect: PgConnectOptions,
) {
    if !pgbouncer_installed() {
        return;
    }
    set_session_settings_on_the_database(&connect).await;
    let backend = Backend::postgres(connect.clone()).await;
    let token = create_tenant(backend.store().as_ref(), "tenant-a").await;
    let data = backend.into_process_data().await;
    let bouncer = Pgbouncer::start(data.directory(), &connect, "session", true);
    let database = connect.get_database().expect("a test database");
    let daemon = data
        .serve_with(
            &[],
            &[
                ("DATABASE_URL", bouncer.url(database)),
                ("IDEMD_DB_MAX_CONNECTIONS", "4".into()),
            ],
        )
        .await;
    let mut client = daemon.client().await;
    for key in ["first", "second", "third"] {
        claim_complete_and_replay(&mut client, &token, key).await;
    }
    let pool = crate::harness::pool(connect.clone()).await;
    let completed: i64 =
        sqlx::query_scalar("SELECT count(*) FROM operations WHERE state = 'succeeded'")
            .fetch_one(&pool)
            .await
            .expect("count");
    assert_eq!(completed, 3, "{}", daemon.log());
}

#[ignore = "needs Debian's pgbouncer: tests/topology/run"]
#[sqlx::test(migrator = "idemd::store::postgres::MIGRATOR")]
async fn transaction_pooling_is_refused_at_start_up_naming_pool_mode(
    _: sqlx::postgres::PgPoolOptions,
    connect: PgConnectOptions,
) {
    if !pgbouncer_installed() {
        return;
    }
    // The settings pass: what is left to refuse is the pool mode itself.
    set_session_settings_on_the_database(&connect).await;
    let data = Backend::postgres(connect.clone())
        .await
        .into_process_data()
        .await;
    let bouncer = Pgbouncer::start(data.directory(), &connect, "transaction", true);
    let log = refused_start(&data, &bouncer.url(connect.get_database().expect("db"))).await;
    assert!(log.contains("pool_mode = session"), "{log}");
    assert!(log.contains("changed server sessions"), "{log}");
}

#[ignore = "needs Debian's pgbouncer: tests/topology/run"]
#[sqlx::test(migrator = "idemd::store::postgres::MIGRATOR")]
async fn a_pooler_refusing_or_dropping_the_session_settings_is_refused_at_start_up(
    _: sqlx::postgres::PgPoolOptions,
    connect: PgConnectOptions,
) {
    if !pgbouncer_installed() {
        return;
    }
    let data = Backend::postgres(connect.clone())
        .await
        .into_process_data()
        .await;
    let database = connect.get_database().expect("db");
    let refusing = Pgbouncer::start(data.directory(), &connect, "session", false);
    let log = refused_start(&data, &refusing.url(database)).await;
    assert!(
        log.contains("ignore_startup_parameters = extra_float_digits, options"),
        "{log}"
    );
    drop(refusing);
    let dropping = Pgbouncer::start(data.directory(), &connect, "statement", true);
    let log = refused_start(&data, &dropping.url(database)).await;
    assert!(log.contains("lock_timeout is 0 instead of 2000"), "{log}");
    assert!(log.contains("ALTER ROLE"), "{log}");
}
