//! The real binary: `idemd` processes over a test's data, and a running
//! `idemd serve`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use idemd::proto::idempotency_service_client::IdempotencyServiceClient;
use idemd::store::Store;
use tonic::transport::Channel;

use super::backend::Backend;
use super::requests::Client;
use super::temp_dir::{TempDir, fresh_uuid};

impl Backend {
    /// Hands the data to `idemd` processes: closes this process's store
    /// (for SQLite, releasing the data directory's lock) and says how a
    /// process finds the same data.
    pub async fn into_process_data(self) -> ProcessData {
        match self {
            Self::Postgres { connect, pool, .. } => {
                pool.close().await;
                let database = connect.get_database().expect("a test database");
                ProcessData {
                    env: vec![("DATABASE_URL".into(), database_url_for(database))],
                    directory: Arc::new(TempDir::new()),
                }
            }
            Self::Sqlite { directory, store } => {
                store.close().await;
                ProcessData {
                    env: Vec::new(),
                    directory,
                }
            }
        }
    }
}

/// DATABASE_URL (the server `#[sqlx::test]` uses) naming another database;
/// credentials and parameters kept.
fn database_url_for(database: &str) -> String {
    let url = std::env::var("DATABASE_URL").expect("DATABASE_URL names the test server");
    let (base, parameters) = match url.split_once('?') {
        Some((base, parameters)) => (base, format!("?{parameters}")),
        None => (url.as_str(), String::new()),
    };
    let server = match base.rsplit_once('/') {
        Some((server, _)) if server.contains("://") && !server.ends_with('/') => server,
        _ => base.trim_end_matches('/'),
    };
    format!("{server}/{database}{parameters}")
}

/// Where `idemd` processes find a test's data: a Postgres database, or the
/// embedded store in `directory` (which is also every process's data dir).
pub struct ProcessData {
    env: Vec<(String, String)>,
    directory: Arc<TempDir>,
}

impl ProcessData {
    /// A Postgres database of the test's own at `url` (a private cluster).
    pub fn postgres_at(url: String) -> Self {
        Self {
            env: vec![("DATABASE_URL".into(), url)],
            directory: Arc::new(TempDir::new()),
        }
    }

    /// A fresh data directory for the embedded store.
    pub fn embedded() -> Self {
        Self {
            env: Vec::new(),
            directory: Arc::new(TempDir::new()),
        }
    }

    pub fn directory(&self) -> &Path {
        self.directory.path()
    }

    /// `idemd ARGS` with nothing inherited but this data (no stray
    /// DATABASE_URL or IDEMD_* from the test's environment).
    pub fn command(&self, args: &[&str]) -> std::process::Command {
        self.command_under(&[], args)
    }

    /// The same, run by `wrapper` (a program and its arguments, which then
    /// execs idemd): empty, idemd itself.
    pub fn command_under(&self, wrapper: &[&str], args: &[&str]) -> std::process::Command {
        let idemd = env!("CARGO_BIN_EXE_idemd");
        let mut command = match wrapper.split_first() {
            Some((program, wrapper_args)) => {
                let mut command = std::process::Command::new(program);
                command.args(wrapper_args).arg(idemd);
                command
            }
            None => std::process::Command::new(idemd),
        };
        command
            .args(args)
            .env_clear()
            .env("IDEMD_DATA_DIR", self.directory.path())
            .env("IDEMD_MIN_LEASE", "10ms")
            .env("IDEMD_CLOCK_MARGIN", "0s")
            // Several servers run at once: no fixed ports besides the API's.
            .env("IDEMD_METRICS_LISTEN", "off")
            // Plaintext on loopback unless a test gives TLS files (which win).
            .env("IDEMD_INSECURE_PLAINTEXT", "true")
            .envs(self.env.iter().map(|(name, value)| (name, value)))
            .stdin(std::process::Stdio::null());
        command
    }

    /// `idemd tenant create NAME`: the token it prints.
    pub fn create_tenant(&self, name: &str) -> String {
        let output = self
            .command(&["tenant", "create", name])
            .output()
            .expect("idemd runs");
        assert!(
            output.status.success(),
            "tenant create failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout)
            .expect("utf-8")
            .trim()
            .to_owned()
    }

    /// `idemd serve ARGS` on a free loopback port, once it answers health
    /// checks as SERVING.
    pub async fn serve(&self, args: &[&str]) -> Daemon {
        self.serve_with(args, &[]).await
    }

    /// The same, with extra environment (which wins over the defaults of
    /// [`ProcessData::command`]). With IDEMD_HEALTH_LISTEN the readiness
    /// check goes there: the API port may speak only TLS.
    pub async fn serve_with(&self, args: &[&str], env: &[(&str, String)]) -> Daemon {
        self.serve_under(&[], args, env).await
    }

    /// The same, run by `wrapper` (see [`ProcessData::command_under`]).
    pub async fn serve_under(
        &self,
        wrapper: &[&str],
        args: &[&str],
        env: &[(&str, String)],
    ) -> Daemon {
        let addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
        let log = self
            .directory
            .path()
            .join(format!("serve-{}.log", fresh_uuid()));
        let mut command = self.command_under(wrapper, &[&["serve"], args].concat());
        command
            .env("IDEMD_LISTEN", addr.to_string())
            .envs(env.iter().map(|(name, value)| (name, value)))
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("log file"));
        let health = env
            .iter()
            .find(|(name, _)| *name == "IDEMD_HEALTH_LISTEN")
            .map_or(addr, |(_, value)| value.parse().expect("a health address"));
        let child = command.spawn().expect("idemd starts");
        let mut daemon = Daemon { child, addr, log };
        daemon.wait_until_serving(health).await;
        daemon
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

/// A running `idemd serve` process.
pub struct Daemon {
    child: std::process::Child,
    pub addr: SocketAddr,
    log: PathBuf,
}

impl Daemon {
    async fn wait_until_serving(&mut self, health: SocketAddr) {
        use tonic_health::pb::HealthCheckRequest;
        use tonic_health::pb::health_check_response::ServingStatus;
        use tonic_health::pb::health_client::HealthClient;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().expect("child status") {
                panic!("idemd exited with {status}: {}", self.log());
            }
            let channel = Channel::from_shared(format!("http://{health}"))
                .expect("uri")
                .connect()
                .await;
            if let Ok(channel) = channel {
                let answer = HealthClient::new(channel)
                    .check(HealthCheckRequest {
                        service: "idem.v1.IdempotencyService".into(),
                    })
                    .await;
                if answer
                    .is_ok_and(|answer| answer.into_inner().status == ServingStatus::Serving as i32)
                {
                    return;
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "idemd did not start serving: {}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn client(&self) -> Client {
        IdempotencyServiceClient::new(
            Channel::from_shared(format!("http://{}", self.addr))
                .expect("uri")
                .connect()
                .await
                .expect("connect"),
        )
    }

    /// The next `lines` lines of its standard output, read while it runs
    /// (`--dev` prints its token there at start-up).
    pub fn stdout_lines(&mut self, lines: usize) -> Vec<String> {
        use std::io::BufRead;
        let stdout = self.child.stdout.as_mut().expect("piped stdout");
        let mut reader = std::io::BufReader::new(stdout);
        (0..lines)
            .map(|_| {
                let mut line = String::new();
                reader.read_line(&mut line).expect("stdout");
                line.trim_end().to_owned()
            })
            .collect()
    }

    /// Its peak resident memory so far (VmHWM), in bytes.
    pub fn peak_rss_bytes(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the process's status");
        let kib: u64 = status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM in the status");
        kib * 1024
    }

    /// SIGKILL: no drain, no clean close; whatever was not committed is lost.
    pub fn kill(mut self) {
        self.child.kill().expect("kill");
        self.child.wait().expect("reaped");
    }

    /// SIGTERM, as an orchestrator stops it: it drains and exits by itself.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let signalled = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(signalled.success());
        self.child.wait().expect("reaped")
    }

    /// GET /metrics from its metrics listener on `port`.
    pub async fn scrape(&self, port: u16) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("metrics port");
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .await
            .expect("request");
        let mut response = String::new();
        stream
            .read_to_string(&mut response)
            .await
            .expect("response");
        let (head, body) = response.split_once("\r\n\r\n").expect("http response");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        body.to_owned()
    }

    /// Its log (stderr) so far, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `name{a="x",b="y"} value` lines, keyed by name and sorted labels.
pub fn samples(text: &str) -> HashMap<String, f64> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (name, labels) = match series.split_once('{') {
                Some((name, labels)) => (name, labels.trim_end_matches('}')),
                None => (series, ""),
            };
            let mut labels: Vec<&str> = labels
                .split(',')
                .filter(|label| !label.is_empty())
                .collect();
            labels.sort_unstable();
            Some((
                format!("{name}{{{}}}", labels.join(",")),
                value.parse().ok()?,
            ))
        })
        .collect()
}
