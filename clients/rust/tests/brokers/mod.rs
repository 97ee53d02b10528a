//! Real brokers for the consumer tests, started by the tests themselves on
//! private ports: Debian's `rabbitmq-server` and `nats-server`, one instance
//! of each per test binary (RabbitMQ takes seconds to boot), in a temporary
//! directory of their own, with their own node name, ports and epmd.
//!
//! Each broker runs under a small shell watchdog that stops it (and its
//! epmd) and removes its directory once this test process is gone: the test
//! harness has no hook that runs after the last test.
//!
//! A missing broker binary fails the test when CI or IDEMD_REQUIRE_BROKERS
//! is set (.ci/run installs them and sets the latter); elsewhere the test
//! says so loudly and skips.
#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;
use tokio::sync::OnceCell;

use super::support::free_port;

/// A running broker: where to connect, and its log for failures.
#[derive(Debug)]
pub struct Broker {
    pub url: String,
    pub port: u16,
    pub log: PathBuf,
    pub started_in: Duration,
    /// Outlives this process on purpose: it stops the broker after it.
    watchdog: Mutex<Child>,
}

impl Broker {
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

// Tokio's OnceCell: the tests that come while the first starts the broker
// wait for it without blocking their runtimes' threads.
static RABBITMQ: OnceCell<Option<Broker>> = OnceCell::const_new();
static NATS: OnceCell<Option<Broker>> = OnceCell::const_new();

/// The RabbitMQ of this test binary, started on first use; `None` (after a
/// loud message) when the binary is missing outside CI.
pub async fn rabbitmq() -> Option<&'static Broker> {
    RABBITMQ
        .get_or_init(|| async {
            let binary = find(&[
                "/usr/lib/rabbitmq/bin/rabbitmq-server",
                "/usr/sbin/rabbitmq-server",
            ])
            .or_else(|| missing("rabbitmq-server", "rabbitmq-server"))?;
            Some(start_rabbitmq(&binary).await)
        })
        .await
        .as_ref()
}

/// The NATS server (JetStream on) of this test binary, started on first use.
pub async fn nats() -> Option<&'static Broker> {
    NATS.get_or_init(|| async {
        let binary = find(&["/usr/sbin/nats-server", "/usr/bin/nats-server"])
            .or_else(|| which("nats-server"))
            .or_else(|| missing("nats-server", "nats-server"))?;
        Some(start_nats(&binary).await)
    })
    .await
    .as_ref()
}

fn find(candidates: &[&str]) -> Option<PathBuf> {
    candidates
        .iter()
        .map(PathBuf::from)
        .find(|path| path.exists())
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|directory| directory.join(name))
            .find(|path| path.exists())
    })
}

fn missing(binary: &str, package: &str) -> Option<PathBuf> {
    if std::env::var_os("CI").is_some() || std::env::var_os("IDEMD_REQUIRE_BROKERS").is_some() {
        panic!(
            "{binary} is missing and CI or IDEMD_REQUIRE_BROKERS is set: install Debian's \
             {package} (.ci/run does)"
        );
    }
    eprintln!(
        "\n!!!! SKIPPED: {binary} is missing: `apt-get install -y {package}` to run the \
         broker tests (in CI they fail instead) !!!!\n"
    );
    None
}

fn unique() -> String {
    let mut bytes = [0u8; 6];
    getrandom::fill(&mut bytes).expect("randomness");
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Runs `command` (a shell line that `exec`s the broker) under a watchdog
/// that stops it once this process is gone, then runs `cleanup` and removes
/// `directory`.
fn supervise(directory: &Path, envs: &[(&str, String)], command: &str, cleanup: &str) -> Child {
    let script = format!(
        r#"
        ( {command} ) >"$DIR/broker.log" 2>&1 &
        broker=$!
        while kill -0 "$PARENT" 2>/dev/null; do sleep 0.5; done
        kill "$broker" 2>/dev/null
        wait "$broker" 2>/dev/null
        {cleanup}
        rm -rf "$DIR"
        "#
    );
    let mut watchdog = Command::new("sh");
    watchdog
        .arg("-c")
        .arg(script)
        .env("DIR", directory)
        .env("PARENT", std::process::id().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (name, value) in envs {
        watchdog.env(name, value);
    }
    watchdog.spawn().expect("the broker's watchdog starts")
}

async fn wait_for_port(port: u16, log: &Path, name: &str, within: Duration) {
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(
            started.elapsed() < within,
            "{name} did not listen on {port} within {within:?}: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn start_rabbitmq(binary: &Path) -> Broker {
    let started = Instant::now();
    let directory = std::env::temp_dir().join(format!("idemd-rabbitmq-{}", unique()));
    std::fs::create_dir_all(directory.join("home")).expect("broker dir");
    // No plugins (the management plugin alone costs seconds of boot), an
    // empty config, and everything under this directory.
    std::fs::write(directory.join("enabled_plugins"), "[].\n").expect("plugins file");
    std::fs::write(directory.join("rabbitmq.conf"), "loopback_users = none\n").expect("config");
    let (port, dist_port, epmd_port) = (free_port(), free_port(), free_port());
    let path = |name: &str| directory.join(name).display().to_string();
    let envs = [
        ("HOME", path("home")),
        (
            "RABBITMQ_NODENAME",
            format!("idemd-test-{}@localhost", unique()),
        ),
        ("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1".into()),
        ("RABBITMQ_NODE_PORT", port.to_string()),
        ("RABBITMQ_DIST_PORT", dist_port.to_string()),
        ("ERL_EPMD_PORT", epmd_port.to_string()),
        ("ERL_EPMD_ADDRESS", "127.0.0.1".into()),
        ("RABBITMQ_MNESIA_BASE", path("mnesia")),
        ("RABBITMQ_LOG_BASE", path("log")),
        ("RABBITMQ_ENABLED_PLUGINS_FILE", path("enabled_plugins")),
        ("RABBITMQ_CONFIG_FILE", path("rabbitmq")),
        ("RABBITMQ_PID_FILE", path("pid")),
    ];
    let watchdog = supervise(
        &directory,
        &envs,
        &format!("exec '{}'", binary.display()),
        r#"epmd -port "$ERL_EPMD_PORT" -kill >/dev/null 2>&1"#,
    );
    let log = directory.join("broker.log");
    wait_for_port(port, &log, "rabbitmq-server", Duration::from_secs(120)).await;
    let broker = Broker {
        url: format!("amqp://guest:guest@127.0.0.1:{port}/%2f"),
        port,
        log,
        started_in: started.elapsed(),
        watchdog: Mutex::new(watchdog),
    };
    eprintln!(
        "rabbitmq-server started in {:?} on port {port}",
        broker.started_in
    );
    broker
}

async fn start_nats(binary: &Path) -> Broker {
    let started = Instant::now();
    let directory = std::env::temp_dir().join(format!("idemd-nats-{}", unique()));
    std::fs::create_dir_all(&directory).expect("broker dir");
    let port = free_port();
    let command = format!(
        "exec '{}' -js -a 127.0.0.1 -p {port} -sd '{}'",
        binary.display(),
        directory.join("store").display()
    );
    let watchdog = supervise(&directory, &[], &command, "");
    let log = directory.join("broker.log");
    wait_for_port(port, &log, "nats-server", Duration::from_secs(30)).await;
    let broker = Broker {
        url: format!("nats://127.0.0.1:{port}"),
        port,
        log,
        started_in: started.elapsed(),
        watchdog: Mutex::new(watchdog),
    };
    eprintln!(
        "nats-server started in {:?} on port {port}",
        broker.started_in
    );
    broker
}
