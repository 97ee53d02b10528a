//! The real `idemd` executable as a child process: for what is process-wide
//! (tracing, the listeners it binds, TLS) or must survive a kill.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use idemd::proto::idempotency_client::IdempotencyClient;
use sqlx::postgres::PgConnectOptions;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::transport::Channel;

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

pub fn database_url(connect: &PgConnectOptions) -> String {
    format!(
        "postgres://{}@{}:{}/{}",
        connect.get_username(),
        connect.get_host(),
        connect.get_port(),
        connect.get_database().expect("a test database")
    )
}

pub fn idemd() -> Command {
    Command::new(env!("CARGO_BIN_EXE_idemd"))
}

pub fn create_tenant(database_url: &str) -> String {
    let output = idemd()
        .args(["tenant", "create", "observed"])
        .env("DATABASE_URL", database_url)
        .env("IDEMD_MIGRATE_ON_START", "false")
        .output()
        .expect("idemd tenant create runs");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout)
        .expect("utf-8")
        .trim()
        .to_owned()
}

/// The server process; killed when dropped. Its stderr is collected.
pub struct Server {
    child: Child,
    logs: Arc<Mutex<Vec<String>>>,
    pub grpc: u16,
    pub metrics: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    pub async fn start(database_url: &str, extra_env: &[(&str, String)]) -> Self {
        let grpc = free_port();
        let metrics = free_port();
        let mut command = idemd();
        command
            .arg("serve")
            .env("DATABASE_URL", database_url)
            .env("IDEMD_LISTEN", format!("127.0.0.1:{grpc}"))
            .env("IDEMD_METRICS_LISTEN", format!("127.0.0.1:{metrics}"))
            .env("IDEMD_METRICS_OPERATIONS", "payments.charge")
            .env("IDEMD_GAUGE_INTERVAL", "100ms")
            .env("IDEMD_MIN_LEASE", "10ms")
            .env("IDEMD_LOG_FORMAT", "json")
            .env("RUST_LOG", "info")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (name, value) in extra_env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("idemd serve starts");
        let logs = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().expect("stderr");
        let sink = logs.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().expect("logs").push(line);
            }
        });
        let server = Self {
            child,
            logs,
            grpc,
            metrics,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while tokio::net::TcpStream::connect(("127.0.0.1", grpc))
            .await
            .is_err()
        {
            assert!(
                Instant::now() < deadline,
                "idemd did not start: {:?}",
                server.logs()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        server
    }

    pub async fn client(&self) -> IdempotencyClient<Channel> {
        IdempotencyClient::connect(format!("http://127.0.0.1:{}", self.grpc))
            .await
            .expect("connect")
    }

    pub fn logs(&self) -> Vec<String> {
        self.logs.lock().expect("logs").clone()
    }

    pub async fn scrape(&self) -> String {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", self.metrics))
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
}
