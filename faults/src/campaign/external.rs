//! Workers out of process (`--client python|go|…`): the simulated provider
//! served over HTTP on 127.0.0.1, and a worker program of the chosen
//! language that reads intents as JSON lines on its stdin, runs its client's
//! execute-once helper for each against the duplicating stages, and writes
//! each delivery's outcome as a JSON line on its stdout (the protocol is in
//! faults/workers/README.md).
//!
//! The provider's endpoints (GET, answered with `Connection: close`):
//! `/attempt?reference=R&fence=F&takeover=0|1` (an attempt reached its
//! effect or lookup: counted), `/perform?reference=R&honour_key=0|1` (the
//! effect; its body), `/lookup?reference=R` (the first effect's body, or
//! 404), `/forbidden?key=K` (a conflicting reuse ran its effect: a
//! violation).

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::settings::Language;
use super::stats::Stats;
use crate::lock::locked;
use crate::provider::Provider;

/// The provider over HTTP, on 127.0.0.1; stops when dropped.
pub(super) struct ProviderServer {
    pub(super) addr: std::net::SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for ProviderServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ProviderServer {
    pub(super) async fn start(provider: Arc<Provider>, stats: Arc<Stats>) -> Result<Self, String> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|error| format!("provider: bind: {error}"))?;
        let addr = listener
            .local_addr()
            .map_err(|error| format!("provider: {error}"))?;
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (provider, stats) = (provider.clone(), stats.clone());
                tokio::spawn(async move {
                    let _ = serve(stream, &provider, &stats).await;
                });
            }
        });
        Ok(Self { addr, task })
    }
}

/// One request on one connection.
async fn serve(mut stream: TcpStream, provider: &Provider, stats: &Stats) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buffer = [0u8; 1024];
    while !head.windows(4).any(|window| window == b"\r\n\r\n") {
        let read = stream.read(&mut buffer).await?;
        if read == 0 || head.len() > 16 * 1024 {
            return Ok(());
        }
        head.extend_from_slice(&buffer[..read]);
    }
    let head = String::from_utf8_lossy(&head);
    let target = head.split_whitespace().nth(1).unwrap_or("/");
    let (status, body) = answer(target, provider, stats);
    let reason = if status == 200 { "OK" } else { "Not Found" };
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.write_all(&body).await?;
    stream.shutdown().await
}

fn answer(target: &str, provider: &Provider, stats: &Stats) -> (u16, Vec<u8>) {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let parameters: HashMap<&str, &str> = query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .collect();
    let parameter = |name: &str| parameters.get(name).copied().unwrap_or("");
    let reference = parameter("reference");
    match path {
        "/attempt" if !reference.is_empty() => {
            let fence = parameter("fence").parse().unwrap_or(0);
            stats.note_attempt(reference, fence, parameter("takeover") == "1");
            (200, b"{}".to_vec())
        }
        "/perform" if !reference.is_empty() => (
            200,
            provider.perform(reference, parameter("honour_key") == "1"),
        ),
        "/lookup" if !reference.is_empty() => match provider.lookup(reference) {
            Some(body) => (200, body),
            None => (404, b"{}".to_vec()),
        },
        "/forbidden" => {
            stats.violation(format!(
                "a conflicting reuse of key {} ran its effect",
                parameter("key")
            ));
            (200, b"{}".to_vec())
        }
        _ => (404, b"{}".to_vec()),
    }
}

/// How a delivery by an external worker ended, as its line on stdout says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Reply {
    Succeeded {
        operation_id: String,
        body: Vec<u8>,
        /// executed, replayed, reconciled or superseded.
        source: String,
    },
    Failed {
        operation_id: String,
        code: String,
    },
    /// conflict, lease_lost, outcome_unknown, deadline_passed,
    /// needs_reconciliation or other.
    Error {
        kind: String,
        operation_id: Option<String>,
    },
}

impl Reply {
    pub(super) fn parse(line: &str) -> Result<(u64, Self), String> {
        let value: Value =
            serde_json::from_str(line).map_err(|error| format!("{error}: {line:?}"))?;
        let text = |name: &str| value.get(name).and_then(Value::as_str).map(str::to_owned);
        let id = value
            .get("id")
            .and_then(Value::as_u64)
            .ok_or_else(|| format!("no id: {line:?}"))?;
        let operation_id = text("operation_id").filter(|id| !id.is_empty());
        let reply = match text("outcome").as_deref() {
            Some("succeeded") => Reply::Succeeded {
                operation_id: operation_id.ok_or_else(|| format!("no operation_id: {line:?}"))?,
                body: text("body").unwrap_or_default().into_bytes(),
                source: text("source").unwrap_or_default(),
            },
            Some("failed") => Reply::Failed {
                operation_id: operation_id.ok_or_else(|| format!("no operation_id: {line:?}"))?,
                code: text("code").unwrap_or_default(),
            },
            Some("error") => Reply::Error {
                kind: text("error").unwrap_or_else(|| "other".into()),
                operation_id,
            },
            _ => return Err(format!("no outcome: {line:?}")),
        };
        Ok((id, reply))
    }

    pub(super) fn operation_id(&self) -> Option<&str> {
        match self {
            Reply::Succeeded { operation_id, .. } | Reply::Failed { operation_id, .. } => {
                Some(operation_id)
            }
            Reply::Error { operation_id, .. } => operation_id.as_deref(),
        }
    }
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Reply>>>>;

/// The worker process: deliveries go out on its stdin, their outcomes come
/// back on its stdout, in any order (matched by id).
pub(super) struct Worker {
    stdin: tokio::sync::Mutex<ChildStdin>,
    pending: Pending,
    next_id: AtomicU64,
    _child: Child,
    reader: JoinHandle<()>,
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Worker {
    /// Starts the worker of `language` (stderr to `worker.log` in
    /// `directory`): it reaches the duplicating stages at `targets` (two
    /// client connections to each, in order) with `token`, and the provider
    /// at `provider`.
    pub(super) async fn start(
        language: Language,
        directory: &Path,
        targets: &[String],
        token: &str,
        provider: std::net::SocketAddr,
    ) -> Result<Self, String> {
        let program = language.program();
        let log = std::fs::File::create(directory.join("worker.log"))
            .map_err(|error| format!("worker.log: {error}"))?;
        let mut child = Command::new(&program)
            .env("IDEMD_FAULTS_TARGETS", targets.join(","))
            .env("IDEMD_FAULTS_TOKEN", token)
            .env("IDEMD_FAULTS_PROVIDER", format!("http://{provider}"))
            .env("IDEMD_FAULTS_DIRECTORY", directory)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| format!("{}: {error}", program.display()))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("the worker's pipes".into());
        };
        let pending: Pending = Arc::default();
        let mut lines = BufReader::new(stdout).lines();
        // The worker says it is ready (its clients made, its toolchain
        // built) with a first line {"ready":true}.
        let ready = tokio::time::timeout(std::time::Duration::from_secs(600), lines.next_line())
            .await
            .map_err(|_| "the worker was not ready within 10 minutes".to_string())?
            .map_err(|error| format!("the worker's stdout: {error}"))?;
        if !ready.is_some_and(|line| line.contains("\"ready\"")) {
            return Err(format!(
                "the worker exited before it was ready (see {})",
                directory.join("worker.log").display()
            ));
        }
        let reader = {
            let pending = pending.clone();
            tokio::spawn(async move {
                while let Ok(Some(line)) = lines.next_line().await {
                    match Reply::parse(&line) {
                        Ok((id, reply)) => {
                            if let Some(waiting) = locked(&pending).remove(&id) {
                                let _ = waiting.send(reply);
                            }
                        }
                        Err(error) => eprintln!("idemd-faults: worker: {error}"),
                    }
                }
                // The worker is gone: every delivery in flight is answered
                // by its sender's drop.
                locked(&pending).clear();
            })
        };
        Ok(Self {
            stdin: tokio::sync::Mutex::new(stdin),
            pending,
            next_id: AtomicU64::new(1),
            _child: child,
            reader,
        })
    }

    /// One delivery: `request` (an object) with an id added; its outcome, or
    /// an `other` error if the worker is gone.
    pub(super) async fn deliver(&self, mut request: Value) -> Reply {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        request["id"] = json!(id);
        let (sender, receiver) = oneshot::channel();
        locked(&self.pending).insert(id, sender);
        let mut line = request.to_string();
        line.push('\n');
        let written = self.stdin.lock().await.write_all(line.as_bytes()).await;
        let gone = Reply::Error {
            kind: "worker_gone".into(),
            operation_id: None,
        };
        if written.is_err() {
            locked(&self.pending).remove(&id);
            return gone;
        }
        receiver.await.unwrap_or(gone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_read_from_their_lines() {
        let (id, reply) = Reply::parse(
            r#"{"id":7,"outcome":"succeeded","operation_id":"op","body":"{\"a\":1}","source":"replayed"}"#,
        )
        .expect("parses");
        assert_eq!(id, 7);
        assert_eq!(
            reply,
            Reply::Succeeded {
                operation_id: "op".into(),
                body: br#"{"a":1}"#.to_vec(),
                source: "replayed".into()
            }
        );
        let (_, reply) =
            Reply::parse(r#"{"id":8,"outcome":"error","error":"conflict","operation_id":""}"#)
                .expect("parses");
        assert_eq!(
            reply,
            Reply::Error {
                kind: "conflict".into(),
                operation_id: None
            }
        );
        assert!(Reply::parse(r#"{"id":9}"#).is_err());
        assert!(Reply::parse("not json").is_err());
    }

    #[test]
    fn the_provider_answers_by_path() {
        let provider = Provider::default();
        let stats = Stats::default();
        assert_eq!(answer("/lookup?reference=a", &provider, &stats).0, 404);
        let (status, body) = answer("/perform?reference=a&honour_key=0", &provider, &stats);
        assert_eq!(status, 200);
        assert_eq!(
            answer("/lookup?reference=a", &provider, &stats),
            (200, body)
        );
        answer("/attempt?reference=a&fence=2&takeover=1", &provider, &stats);
        assert_eq!(locked(&stats.takeovers).len(), 1);
        answer("/forbidden?key=k", &provider, &stats);
        assert_eq!(locked(&stats.violations).len(), 1);
        assert_eq!(provider.duplicates(), 0);
        answer("/perform?reference=a&honour_key=1", &provider, &stats);
        assert_eq!(provider.duplicates(), 0);
        answer("/perform?reference=a", &provider, &stats);
        assert_eq!(provider.duplicates(), 1);
    }
}
