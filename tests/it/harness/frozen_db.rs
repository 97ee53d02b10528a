//! A database that stops answering without closing anything: a TCP proxy
//! that freezes the connections it carries (and can send new ones to
//! another server), and private Postgres clusters whose processes can be
//! stopped (SIGSTOP) and continued.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::postgres_server::{ServerBinaries, run};
use super::process::free_port;
use super::temp_dir::TempDir;

/// A TCP proxy in front of a database. [`FrozenPath::freeze`] holds every
/// connection until [`FrozenPath::thaw`]; [`FrozenPath::freeze_existing`]
/// stops forwarding on every connection open at that moment, in both
/// directions, keeping their sockets open (the kernel keeps acknowledging,
/// as for a stalled Postgres or a hung middlebox, so neither keepalive nor
/// TCP_USER_TIMEOUT ever fires), for good; connections opened afterwards
/// are forwarded, to the upstream it names then.
pub struct FrozenPath {
    pub addr: SocketAddr,
    state: Arc<Mutex<PathState>>,
    task: tokio::task::JoinHandle<()>,
}

struct PathState {
    upstream: SocketAddr,
    /// The freeze switch of the connections opened since the last change.
    generation: watch::Sender<bool>,
}

impl FrozenPath {
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let state = Arc::new(Mutex::new(PathState {
            upstream,
            generation: watch::channel(false).0,
        }));
        let shared = Arc::clone(&state);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (upstream, frozen) = {
                    let state = shared.lock().expect("unpoisoned");
                    let frozen = state.generation.subscribe();
                    (state.upstream, frozen)
                };
                tokio::spawn(async move {
                    let Ok(server) = tokio::net::TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    tokio::select! {
                        () = forward(client_read, server_write, frozen.clone()) => {}
                        () = forward(server_read, client_write, frozen) => {}
                    }
                });
            }
        });
        Self { addr, state, task }
    }

    /// Freezes every connection open now, for good; and, until
    /// [`FrozenPath::reopen`], every new one too (the database is gone).
    pub fn freeze_existing(&self) {
        let mut state = self.state.lock().expect("unpoisoned");
        state.generation.send_replace(true);
        // New connections join a generation that is frozen too.
        state.generation = watch::channel(true).0;
    }

    /// Freezes every connection, those open now and those opened until
    /// [`FrozenPath::thaw`]: a network path that silently drops packets.
    pub fn freeze(&self) {
        let state = self.state.lock().expect("unpoisoned");
        state.generation.send_replace(true);
    }

    /// Forwards again on every connection [`FrozenPath::freeze`] held.
    pub fn thaw(&self) {
        let state = self.state.lock().expect("unpoisoned");
        state.generation.send_replace(false);
    }

    /// New connections work again, to `upstream`; the frozen ones stay so.
    pub fn reopen(&self, upstream: SocketAddr) {
        let mut state = self.state.lock().expect("unpoisoned");
        state.upstream = upstream;
        state.generation = watch::channel(false).0;
    }
}

impl Drop for FrozenPath {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Copies `from` to `to` while not frozen; frozen, reads and writes nothing.
async fn forward(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut frozen: watch::Receiver<bool>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        if frozen.wait_for(|frozen| !frozen).await.is_err() {
            // Its generation is gone while frozen: frozen for good.
            std::future::pending::<()>().await;
        }
        let read = tokio::select! {
            read = from.read(&mut buffer) => read,
            _ = frozen.changed() => continue,
        };
        let Ok(read) = read else { return };
        if read == 0 {
            return;
        }
        if frozen.wait_for(|frozen| !frozen).await.is_err() {
            std::future::pending::<()>().await;
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}

/// A TCP proxy in front of a database that freezes a connection for good
/// the moment its client sends a Sync message alone: sqlx's ping of a
/// connection going back to the pool (`PgConnection::ping` writes nothing
/// else; a statement's Sync travels with its Parse, Bind and Execute, and
/// a simple query has none). What a database that freezes in the instant a
/// read's connection goes back to the pool does, every time.
pub struct FreezingOnPing {
    pub addr: SocketAddr,
    frozen: Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl FreezingOnPing {
    pub async fn start(upstream: SocketAddr) -> Self {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        const LONE_SYNC: [u8; 5] = [b'S', 0, 0, 0, 4];
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let frozen = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&frozen);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let counted = Arc::clone(&counted);
                tokio::spawn(async move {
                    let Ok(server) = tokio::net::TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (mut client_read, mut client_write) = client.into_split();
                    let (mut server_read, mut server_write) = server.into_split();
                    let _answers = tokio::spawn(async move {
                        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
                    });
                    let mut buffer = vec![0u8; 16 * 1024];
                    while let Ok(read) = client_read.read(&mut buffer).await {
                        if read == 0 {
                            break;
                        }
                        if buffer[..read] == LONE_SYNC {
                            counted.fetch_add(1, Ordering::SeqCst);
                            // Frozen: nothing more either way, the sockets
                            // kept open (the kernel keeps acknowledging)
                            // by this task, which never ends.
                            std::future::pending::<()>().await;
                        }
                        if server_write.write_all(&buffer[..read]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        Self { addr, frozen, task }
    }

    /// How many connections froze so far.
    pub fn frozen(&self) -> usize {
        self.frozen.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for FreezingOnPing {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A Postgres cluster of the test's own: initdb in a temporary directory,
/// 127.0.0.1 on a free port, trust auth; as root, run as the `postgres`
/// user. Stopped and removed when dropped. `None` (with the reason printed)
/// where PostgreSQL's server binaries are not installed.
pub struct PrivateCluster {
    pub port: u16,
    directory: TempDir,
    binaries: ServerBinaries,
}

impl PrivateCluster {
    pub fn create() -> Option<Self> {
        let Some(binaries) = ServerBinaries::find() else {
            eprintln!("SKIPPED: PostgreSQL's server binaries (initdb, pg_ctl) are not installed");
            return None;
        };
        let directory = TempDir::new();
        if binaries.as_postgres_user() {
            run(Command::new("chown")
                .args(["-R", "postgres"])
                .arg(directory.path()));
        }
        let cluster = Self {
            port: free_port(),
            directory,
            binaries,
        };
        cluster.binaries.initdb(&cluster.data());
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100",
            cluster.port,
            cluster.directory.path().display()
        );
        cluster.binaries.start(
            &[],
            &cluster.data(),
            &options,
            &cluster.directory.path().join("postgres.log"),
        );
        Some(cluster)
    }

    fn data(&self) -> PathBuf {
        self.directory.path().join("data")
    }

    pub fn addr(&self) -> SocketAddr {
        ([127, 0, 0, 1], self.port).into()
    }

    /// The URL of database `database` on this cluster, through `addr`.
    pub fn url_via(&self, addr: SocketAddr, database: &str) -> String {
        format!("postgres://postgres@{addr}/{database}")
    }

    /// The postmaster and every process it started.
    fn processes(&self) -> Vec<u32> {
        let pid_file =
            std::fs::read_to_string(self.data().join("postmaster.pid")).expect("postmaster.pid");
        let postmaster: u32 = pid_file
            .lines()
            .next()
            .and_then(|pid| pid.trim().parse().ok())
            .expect("the postmaster's pid");
        let mut processes = vec![postmaster];
        for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|pid| pid.parse().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // pid (comm) state ppid …: comm may hold spaces, not ')'.
            let parent = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|ppid| ppid.parse::<u32>().ok());
            if parent == Some(postmaster) {
                processes.push(pid);
            }
        }
        processes
    }

    /// SIGSTOP to the postmaster and all its processes: the kernel still
    /// accepts and acknowledges, nobody answers.
    pub fn stop_processes(&self) {
        self.signal("-STOP");
    }

    /// SIGCONT to them all.
    pub fn continue_processes(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let pids: Vec<String> = self.processes().iter().map(u32::to_string).collect();
        run(Command::new("kill").arg(signal).args(&pids));
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg("-CONT")
            .args(self.processes().iter().map(u32::to_string))
            .status();
        self.binaries.stop_immediately(&self.data());
    }
}
