//! The real processes: `idemd` replicas and a Postgres cluster of the
//! campaign's own (initdb in a temp dir, a private port), each of which can
//! be SIGKILLed and started again.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use idemd_client::{Client, ClientConfig, Error, retry::RetryPolicy};

/// The `idemd` binary: IDEMD_BIN, else the one next to this binary (the same
/// cargo profile builds both: `cargo build --bin idemd`).
pub(crate) fn idemd_binary() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("IDEMD_BIN") {
        return Ok(PathBuf::from(path));
    }
    let me = std::env::current_exe().map_err(|error| format!("current_exe: {error}"))?;
    let binary = me.with_file_name("idemd");
    if binary.exists() {
        Ok(binary)
    } else {
        Err(format!(
            "{} is missing: build it with the same profile (`cargo build --bin idemd`, \
             with --release for a release run) or set IDEMD_BIN",
            binary.display()
        ))
    }
}

pub(crate) fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .map_err(|error| format!("no free port: {error}"))
}

fn run(command: &mut Command) -> Result<Output, String> {
    let output = command
        .output()
        .map_err(|error| format!("{command:?}: {error}"))?;
    if output.status.success() {
        Ok(output)
    } else {
        Err(format!(
            "{command:?}: {}: {}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "0")
}

/// A Postgres cluster in `directory`, listening on 127.0.0.1:`port`, trust
/// auth. Postgres refuses to run as root: then every command runs as the
/// `postgres` user (runuser).
#[derive(Debug)]
pub(crate) struct Postgres {
    pub(crate) port: u16,
    directory: PathBuf,
    binaries: PathBuf,
    as_postgres_user: bool,
}

impl Postgres {
    /// initdb and start.
    pub(crate) fn create(directory: &Path) -> Result<Self, String> {
        std::fs::create_dir_all(directory).map_err(|error| format!("mkdir: {error}"))?;
        let as_postgres_user = running_as_root();
        if as_postgres_user {
            run(Command::new("chown").arg("postgres").arg(directory))?;
        }
        let postgres = Self {
            port: free_port()?,
            directory: directory.to_owned(),
            binaries: postgres_binaries()?,
            as_postgres_user,
        };
        let data = postgres.data();
        run(postgres
            .command("initdb")
            .args(["-A", "trust", "-U", "postgres", "-D"])
            .arg(&data))?;
        postgres.start()?;
        Ok(postgres)
    }

    fn data(&self) -> PathBuf {
        self.directory.join("data")
    }

    fn command(&self, program: &str) -> Command {
        let program = self.binaries.join(program);
        let mut command = if self.as_postgres_user {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(program);
            command
        } else {
            Command::new(program)
        };
        command.stdin(Stdio::null());
        command
    }

    pub(crate) fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The server's log (appended to across restarts).
    pub(crate) fn log(&self) -> PathBuf {
        self.directory.join("postgres.log")
    }

    /// Runs `sql` with psql on this cluster, directly (not through the
    /// database proxy): unaligned tuples only, stopping at the first error.
    /// Its sessions are named `idemd-faults`, never `idemd`.
    pub(crate) fn psql(&self, sql: &str) -> Result<String, String> {
        let output = run(Command::new(self.binaries.join("psql"))
            .args([
                "-X",
                "-q",
                "-t",
                "-A",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                "127.0.0.1",
            ])
            .arg("-p")
            .arg(self.port.to_string())
            .args(["-U", "postgres", "-d", "postgres", "-c", sql])
            .env("PGAPPNAME", "idemd-faults")
            .env("PGCONNECT_TIMEOUT", "5")
            .stdin(Stdio::null()))?;
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        ([127, 0, 0, 1], self.port).into()
    }

    /// Starts the postmaster and waits until it accepts connections. After a
    /// SIGKILL the old backends may still hold the shared memory for a
    /// moment: it is tried again for up to 30 s.
    pub(crate) fn start(&self) -> Result<(), String> {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200",
            self.port,
            self.directory.display()
        );
        let log = self.log();
        let mut last_error = String::new();
        for _ in 0..150 {
            let started = run(self
                .command("pg_ctl")
                .arg("-D")
                .arg(self.data())
                .args(["-o", &options, "-l"])
                .arg(&log)
                .args(["-w", "-t", "30", "start"]));
            match started {
                Ok(_) => return Ok(()),
                Err(error) => last_error = error,
            }
            #[allow(
                clippy::disallowed_methods,
                reason = "the campaign calls this on a blocking thread (spawn_blocking)"
            )]
            std::thread::sleep(Duration::from_millis(200));
        }
        Err(last_error)
    }

    /// A clean restart (fast shutdown: sessions are cut, then it starts).
    pub(crate) fn restart(&self) -> Result<(), String> {
        run(self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .args(["-m", "fast", "-w", "stop"]))?;
        self.start()
    }

    /// SIGKILL of the postmaster: no shutdown at all; its backends notice and
    /// exit, and the next start runs crash recovery.
    pub(crate) fn kill(&self) -> Result<(), String> {
        let pid_file = self.data().join("postmaster.pid");
        let contents = std::fs::read_to_string(&pid_file)
            .map_err(|error| format!("{}: {error}", pid_file.display()))?;
        let pid = contents
            .lines()
            .next()
            .map(str::trim)
            .filter(|pid| !pid.is_empty() && pid.chars().all(|c| c.is_ascii_digit()))
            .ok_or_else(|| format!("{}: no pid", pid_file.display()))?;
        run(Command::new("kill").args(["-KILL", pid]))?;
        Ok(())
    }

    pub(crate) fn stop(&self) {
        let _ = run(self.command("pg_ctl").arg("-D").arg(self.data()).args([
            "-m",
            "immediate",
            "-w",
            "stop",
        ]));
    }
}

/// The cluster goes with its last handle, also when the campaign is
/// interrupted (Ctrl-C) or fails halfway.
impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Where initdb and pg_ctl are: IDEMD_FAULTS_PG_BIN, else the newest
/// /usr/lib/postgresql/<version>/bin (Debian's layout), else PATH.
fn postgres_binaries() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("IDEMD_FAULTS_PG_BIN") {
        return Ok(PathBuf::from(path));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Ok(bin);
    }
    let on_path = Command::new("initdb").arg("--version").output();
    if on_path.is_ok_and(|output| output.status.success()) {
        return Ok(PathBuf::new());
    }
    Err("initdb not found: install PostgreSQL or set IDEMD_FAULTS_PG_BIN".into())
}

/// Where a replica keeps its state.
#[derive(Debug, Clone)]
pub(crate) enum StoreConfig {
    Postgres { url: String },
    Embedded { data_dir: PathBuf },
}

/// `idemd ARGS` over `store`, inheriting nothing else.
pub(crate) fn idemd(store: &StoreConfig, args: &[&str]) -> Result<Command, String> {
    let mut command = Command::new(idemd_binary()?);
    command
        .args(args)
        .env_clear()
        .env("IDEMD_METRICS_LISTEN", "off")
        // Plaintext on loopback: serve refuses it unless asked.
        .env("IDEMD_INSECURE_PLAINTEXT", "true")
        .env("IDEMD_MIN_LEASE", "100ms")
        // Scaled down like the leases (the default is 3s), and not zero: the
        // margin's waits run under the faults too.
        .env("IDEMD_CLOCK_MARGIN", "300ms")
        .stdin(Stdio::null());
    match store {
        StoreConfig::Postgres { url } => command.env("DATABASE_URL", url),
        StoreConfig::Embedded { data_dir } => command.env("IDEMD_DATA_DIR", data_dir),
    };
    Ok(command)
}

/// Migrates the store and creates the campaign's tenant: its token.
pub(crate) fn prepare_store(store: &StoreConfig) -> Result<String, String> {
    // Setup, not under test: the embedded store's first open (the new file
    // switched to WAL, migrated, fsynced) outlasted the default 2 s on a
    // machine whose disk other builds kept busy ("pool timed out while
    // waiting for an open connection", twice in a dozen runs).
    let patient = |arguments: &[&str]| -> Result<Command, String> {
        let mut command = idemd(store, arguments)?;
        command.env("IDEMD_DB_ACQUIRE_TIMEOUT", "30s");
        Ok(command)
    };
    if matches!(store, StoreConfig::Postgres { .. }) {
        run(&mut patient(&["migrate"])?)?;
    }
    let created = run(&mut patient(&["tenant", "create", "faults"])?)?;
    String::from_utf8(created.stdout)
        .map(|token| token.trim().to_owned())
        .map_err(|_| "the token is not UTF-8".into())
}

/// One `idemd serve` process on a fixed port (kept across restarts).
#[derive(Debug)]
pub(crate) struct Replica {
    pub(crate) name: String,
    pub(crate) port: u16,
    store: StoreConfig,
    token: String,
    log: PathBuf,
    child: Option<Child>,
}

impl Replica {
    pub(crate) fn new(
        name: &str,
        store: StoreConfig,
        token: &str,
        log_dir: &Path,
    ) -> Result<Self, String> {
        Ok(Self {
            name: name.to_owned(),
            port: free_port()?,
            store,
            token: token.to_owned(),
            log: log_dir.join(format!("{name}.log")),
            child: None,
        })
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        ([127, 0, 0, 1], self.port).into()
    }

    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    /// Starts it and waits until it answers (up to 60 s; a start that fails,
    /// e.g. while the database restarts, is tried again).
    pub(crate) async fn start(&mut self) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            if self.child.is_none() {
                let log = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&self.log)
                    .map_err(|error| format!("{}: {error}", self.log.display()))?;
                let child = idemd(&self.store, &["serve"])?
                    .env("IDEMD_LISTEN", self.addr().to_string())
                    .env("IDEMD_MIGRATE_ON_START", "false")
                    .stdout(Stdio::null())
                    .stderr(log)
                    .spawn()
                    .map_err(|error| format!("idemd serve: {error}"))?;
                self.child = Some(child);
            }
            if self.answers().await {
                return Ok(());
            }
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(_)) = child.try_wait()
            {
                self.child = None;
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!(
                    "{} did not start; its log: {}",
                    self.name,
                    self.log.display()
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn answers(&self) -> bool {
        let Ok(client) = Client::connect(&self.addr().to_string(), &self.token).await else {
            return false;
        };
        let probe = client
            .with_config(ClientConfig {
                retry: RetryPolicy::none(),
                call_timeout: Duration::from_secs(2),
            })
            .lookup_operation("00000000-0000-0000-0000-000000000000")
            .await;
        matches!(
            probe,
            Err(Error::NotFound { .. } | Error::InvalidArgument { .. })
        )
    }

    /// SIGKILL: no drain; what was not committed is lost.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
    }
}
