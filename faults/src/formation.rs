//! A highly available Postgres of the campaign's own, from Debian's
//! packages: a pg_auto_failover formation (`pg-auto-failover-cli`,
//! `postgresql-15-auto-failover`) of a monitor, a primary and two
//! secondaries on private ports, with synchronous replication
//! (`number_sync_standbys = 1`: a commit waits for one standby's flush, so
//! a failover loses nothing acknowledged). Every `pg_autoctl` command runs
//! as the `postgres` user when root, with its state under the campaign's
//! directory (XDG_*), never a system path.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::process::free_port;

const DATABASE: &str = "idemd";
const DATA_NODES: usize = 3;

#[derive(Debug)]
struct Node {
    name: String,
    port: u16,
    pgdata: PathBuf,
}

#[derive(Debug)]
pub(crate) struct Formation {
    directory: PathBuf,
    binaries: PathBuf,
    monitor: Node,
    nodes: Vec<Node>,
    as_postgres_user: bool,
    /// The `pg_autoctl run` processes this formation started: the
    /// monitor's first, then one per data node, in `nodes`' order.
    running: Mutex<Vec<Child>>,
    /// Former primaries (or standbys) rewound after their timeline diverged.
    rewinds: AtomicU64,
}

/// What a standby's Postgres says, and then stops, when its WAL went past
/// the point where the primary it must follow forked its timeline.
const DIVERGED: &str = "is not a child of this server's history";

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "0")
}

/// The binaries pg_auto_failover's extension was built for.
fn postgres_15() -> Result<PathBuf, String> {
    let binaries = PathBuf::from("/usr/lib/postgresql/15/bin");
    if !binaries.join("pg_ctl").exists() || which("pg_autoctl").is_none() {
        return Err(
            "pg_auto_failover is not installed: apt-get install pg-auto-failover-cli \
                    postgresql-15-auto-failover (tests/topology/run does)"
                .into(),
        );
    }
    Ok(binaries)
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|path| path.join(program))
            .find(|path| path.exists())
    })
}

impl Formation {
    /// Creates and starts the formation; returns once it has a primary, two
    /// secondaries and a synchronous standby. Blocking (tens of seconds).
    pub(crate) fn create(directory: &Path) -> Result<Self, String> {
        let binaries = postgres_15()?;
        // A formation left by an earlier run of the same seed: pg_autoctl
        // refuses to create a node over it.
        let _ = std::fs::remove_dir_all(directory);
        std::fs::create_dir_all(directory).map_err(|error| format!("mkdir: {error}"))?;
        let as_postgres_user = running_as_root();
        let node = |name: &str| -> Result<Node, String> {
            Ok(Node {
                name: name.to_owned(),
                port: free_port()?,
                pgdata: directory.join(name),
            })
        };
        let formation = Self {
            directory: directory.to_owned(),
            binaries,
            monitor: node("monitor")?,
            nodes: (1..=DATA_NODES)
                .map(|number| node(&format!("node{number}")))
                .collect::<Result<_, _>>()?,
            as_postgres_user,
            running: Mutex::new(Vec::new()),
            rewinds: AtomicU64::new(0),
        };
        for state in ["config", "share", "run"] {
            std::fs::create_dir_all(directory.join(state))
                .map_err(|error| format!("mkdir: {error}"))?;
        }
        if as_postgres_user {
            formation.checked(
                Command::new("chown")
                    .args(["-R", "postgres"])
                    .arg(directory),
            )?;
        }
        let monitor = &formation.monitor;
        formation.autoctl_create("monitor", monitor, &[])?;
        formation.run(monitor)?;
        // One at a time: the first becomes the primary, the others clone it.
        for node in &formation.nodes {
            formation.create_node(node)?;
            formation.run(node)?;
            formation.wait_until_settled(formation.nodes_running(), Duration::from_secs(90))?;
        }
        // The roles have settled, but the monitor may still report the
        // primary as "wait_primary" (its last standby not yet caught up), and
        // refuses the setting until it reports "primary".
        formation.autoctl_once_the_monitor_agrees(
            &[
                "set",
                "formation",
                "number-sync-standbys",
                "--pgdata",
                &formation.nodes[0].pgdata.to_string_lossy(),
                "1",
            ],
            "current reported state is",
        )?;
        // What idemd's start-up check reads too: commits wait for a standby.
        // The primary's keeper applies the monitor's setting a moment later.
        let deadline = Instant::now() + Duration::from_secs(60);
        while formation.synchronous_standby_names()?.is_empty() {
            if Instant::now() > deadline {
                return Err("the formation's primary names no synchronous standby".into());
            }
            #[allow(
                clippy::disallowed_methods,
                reason = "the campaign calls this on a blocking thread (spawn_blocking)"
            )]
            std::thread::sleep(Duration::from_millis(500));
        }
        Ok(formation)
    }

    fn monitor_uri(&self) -> String {
        format!(
            "postgres://autoctl_node@127.0.0.1:{}/pg_auto_failover?sslmode=disable",
            self.monitor.port
        )
    }

    /// `pg_autoctl create postgres` for `node`: the first node created
    /// becomes the primary, the others clone the primary.
    fn create_node(&self, node: &Node) -> Result<(), String> {
        let monitor = self.monitor_uri();
        let extra = [
            "--name",
            &node.name,
            "--dbname",
            DATABASE,
            "--monitor",
            &monitor,
        ];
        self.autoctl_create("postgres", node, &extra)
    }

    /// `pg_autoctl create KIND` for `node` on loopback, trusting local
    /// connections, with `extra` arguments.
    fn autoctl_create(&self, kind: &str, node: &Node, extra: &[&str]) -> Result<(), String> {
        let (pgdata, port) = (node.pgdata.to_string_lossy(), node.port.to_string());
        let mut args = vec![
            "create",
            kind,
            "--pgdata",
            &pgdata,
            "--pgport",
            &port,
            "--hostname",
            "127.0.0.1",
            "--listen",
            "127.0.0.1",
            "--auth",
            "trust",
            "--no-ssl",
        ];
        args.extend_from_slice(extra);
        self.checked(&mut self.autoctl(&args)).map(|_| ())
    }

    fn nodes_running(&self) -> usize {
        self.running
            .lock()
            .map(|running| running.len())
            .unwrap_or(0)
            - 1
    }

    /// `pg_autoctl ARGS` as the cluster's owner, with its state here.
    fn autoctl(&self, args: &[&str]) -> Command {
        self.autoctl_with(&[], args)
    }

    /// The same with `environment` (`NAME=value`) besides.
    fn autoctl_with(&self, environment: &[&str], args: &[&str]) -> Command {
        let mut command = if self.as_postgres_user {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--", "env"]);
            command
        } else {
            Command::new("env")
        };
        let path = format!(
            "PATH={}:{}",
            self.binaries.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        command
            .arg(path)
            .arg(format!(
                "PG_CONFIG={}",
                self.binaries.join("pg_config").display()
            ))
            .arg(format!(
                "XDG_CONFIG_HOME={}",
                self.directory.join("config").display()
            ))
            .arg(format!(
                "XDG_DATA_HOME={}",
                self.directory.join("share").display()
            ))
            .arg(format!(
                "XDG_RUNTIME_DIR={}",
                self.directory.join("run").display()
            ))
            .args(environment)
            .arg("pg_autoctl")
            .args(args)
            .stdin(Stdio::null());
        command
    }

    fn checked(&self, command: &mut Command) -> Result<String, String> {
        let output = command
            .output()
            .map_err(|error| format!("{command:?}: {error}"))?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(format!(
                "{command:?}: {}: {}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
                    .lines()
                    .rev()
                    .take(10)
                    .collect::<Vec<_>>()
                    .join(" / ")
            ))
        }
    }

    /// `pg_autoctl run` for a node, in the background, logging beside it.
    fn run(&self, node: &Node) -> Result<(), String> {
        let keeper = self.keeper(node)?;
        if let Ok(mut running) = self.running.lock() {
            running.push(keeper);
        }
        Ok(())
    }

    /// A node's `pg_autoctl run`, in a process group of its own: its
    /// supervisor, stopping, signals its whole process group (killpg of its
    /// own group, assuming it leads one), which without this would be the
    /// campaign's and every other node's (one node stopped for a rewind
    /// stopped the whole formation).
    fn keeper(&self, node: &Node) -> Result<Child, String> {
        use std::os::unix::process::CommandExt;
        let log = std::fs::File::create(self.log(node)).map_err(|error| format!("log: {error}"))?;
        self.autoctl(&["run", "--pgdata", &node.pgdata.to_string_lossy()])
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|error| format!("pg_autoctl run: {error}"))
    }

    fn log(&self, node: &Node) -> PathBuf {
        self.directory.join(format!("{}.log", node.name))
    }

    /// The formation's URL for idemd: every data node, the primary found by
    /// `target_session_attrs=read-write`.
    pub(crate) fn url(&self) -> String {
        let hosts: Vec<String> = self
            .nodes
            .iter()
            .map(|node| format!("127.0.0.1:{}", node.port))
            .collect();
        format!(
            "postgres://postgres@{}/{DATABASE}?target_session_attrs=read-write",
            hosts.join(",")
        )
    }

    /// Whether each node is a primary (`Some(true)`), a standby
    /// (`Some(false)`) or unreachable (`None`).
    fn roles(&self) -> Vec<Option<bool>> {
        self.nodes
            .iter()
            .map(|node| {
                let output = Command::new(self.binaries.join("psql"))
                    .args(["-X", "-q", "-t", "-A", "-h", "127.0.0.1", "-U", "postgres"])
                    .arg("-p")
                    .arg(node.port.to_string())
                    .args(["-d", DATABASE, "-c", "SELECT NOT pg_is_in_recovery()"])
                    .env("PGCONNECT_TIMEOUT", "2")
                    .env("PGAPPNAME", "idemd-faults")
                    .stdin(Stdio::null())
                    .output()
                    .ok()?;
                let answer = String::from_utf8_lossy(&output.stdout).trim().to_owned();
                output.status.success().then_some(answer == "t")
            })
            .collect()
    }

    /// Waits until exactly one of the first `nodes` nodes is the primary and
    /// the others are standbys.
    fn wait_until_settled(&self, nodes: usize, within: Duration) -> Result<usize, String> {
        let deadline = Instant::now() + within;
        loop {
            let roles = self.roles();
            let primaries: Vec<usize> = (0..nodes).filter(|&i| roles[i] == Some(true)).collect();
            let standbys = (0..nodes).filter(|&i| roles[i] == Some(false)).count();
            if primaries.len() == 1 && standbys == nodes - 1 {
                return Ok(primaries[0]);
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the formation did not settle within {within:?}: {roles:?}; logs in {}",
                    self.directory.display()
                ));
            }
            #[allow(
                clippy::disallowed_methods,
                reason = "the campaign calls this on a blocking thread (spawn_blocking)"
            )]
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// SIGKILL of the primary's postmaster. Its keeper (`pg_autoctl run`)
    /// starts it again (crash recovery); meanwhile no node accepts writes.
    /// Returns once the formation is settled again.
    pub(crate) fn kill_primary(&self) -> Result<(), String> {
        let primary = self.settle_after_fault()?;
        let pid_file = self.nodes[primary].pgdata.join("postmaster.pid");
        let contents = std::fs::read_to_string(&pid_file)
            .map_err(|error| format!("{}: {error}", pid_file.display()))?;
        let pid = contents
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned();
        if pid.is_empty() || !pid.chars().all(|c| c.is_ascii_digit()) {
            return Err(format!("{}: no pid", pid_file.display()));
        }
        self.checked(Command::new("kill").args(["-KILL", &pid]))?;
        self.settle_after_fault().map(|_| ())
    }

    /// A planned switchover (`pg_autoctl perform switchover`): the primary
    /// is drained and demoted, a secondary promoted. Returns once the
    /// formation is settled again.
    pub(crate) fn switchover(&self) -> Result<(), String> {
        self.settle_after_fault()?;
        // Right after a failover the monitor may still hold the new primary
        // in a transition state and refuse a switchover.
        self.autoctl_once_the_monitor_agrees(
            &[
                "perform",
                "switchover",
                "--pgdata",
                &self.nodes[0].pgdata.to_string_lossy(),
            ],
            "couldn't find the primary node",
        )?;
        self.settle_after_fault().map(|_| ())
    }

    /// `pg_autoctl ARGS`, repeated for up to a minute while it fails with
    /// `transient` in its error. Every node answering in its role is not
    /// yet the monitor's view of them, and the monitor refuses some
    /// commands until its view has caught up.
    fn autoctl_once_the_monitor_agrees(
        &self,
        args: &[&str],
        transient: &str,
    ) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match self.checked(self.autoctl(args).stdout(Stdio::null())) {
                Ok(_) => return Ok(()),
                Err(error) if error.contains(transient) && Instant::now() < deadline => {
                    #[allow(
                        clippy::disallowed_methods,
                        reason = "the campaign calls this on a blocking thread (spawn_blocking)"
                    )]
                    std::thread::sleep(Duration::from_secs(1));
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// Waits for the formation to settle after a fault, and returns the
    /// primary's index. A node that cannot follow the new primary because
    /// its timeline diverged is rewound. Also called before a fault: a
    /// node may diverge only after the last fault seemed settled (its
    /// keeper restarts it later), and is then rewound there.
    fn settle_after_fault(&self) -> Result<usize, String> {
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let settled = self.wait_until_settled(DATA_NODES, Duration::from_secs(30));
            let error = match settled {
                Ok(primary) => return Ok(primary),
                Err(error) => error,
            };
            match self.diverged_node() {
                Some(index) if Instant::now() < deadline => self.rewind(index)?,
                _ if Instant::now() < deadline => {}
                _ => return Err(error),
            }
        }
    }

    /// How many nodes were rewound after their timeline diverged.
    pub(crate) fn rewinds(&self) -> u64 {
        self.rewinds.load(Ordering::Relaxed)
    }

    /// A data node that does not answer while its log says its timeline
    /// diverged from the one it must follow.
    ///
    /// pg_auto_failover 2.0 leaves such a node down for good: a SIGKILLed
    /// primary's postmaster is restarted by its keeper and may write WAL
    /// (records no commit waited for) that never reached the standby
    /// promoted in its place; its Postgres then refuses to follow ("requested
    /// timeline N is not a child of this server's history") and the keeper
    /// retries forever. Upstream fixed it after 2.0 (timeline-fork detection,
    /// hapostgres/pg_auto_failover#1161) by rewinding such a node, as an
    /// operator does here.
    fn diverged_node(&self) -> Option<usize> {
        let roles = self.roles();
        (0..DATA_NODES).find(|&index| {
            roles[index].is_none() && newest_postgres_log(&self.nodes[index]).contains(DIVERGED)
        })
    }

    /// The operator's step for a diverged node: its keeper stopped, its data
    /// directory rewound onto the primary's timeline and set up as a standby
    /// by pg_autoctl's own `do standby rewind` (pg_rewind; the formation runs
    /// with `wal_log_hints`), its Postgres stopped, its keeper started again
    /// (with a new log).
    fn rewind(&self, index: usize) -> Result<(), String> {
        let node = &self.nodes[index];
        let pgdata = node.pgdata.to_string_lossy().into_owned();
        let roles = self.roles();
        let primary = (0..DATA_NODES)
            .find(|&i| roles[i] == Some(true))
            .ok_or_else(|| format!("{} diverged and no node is the primary", node.name))?;
        eprintln!(
            "formation: {} diverged from the primary's timeline; rewinding it onto {}",
            node.name, self.nodes[primary].name
        );
        self.stop_keeper(index)?;
        let primary_port = self.nodes[primary].port.to_string();
        // `do` commands exist only with PG_AUTOCTL_DEBUG set. Outside a
        // running keeper its last step (waiting for the keeper's supervisor
        // to start Postgres) fails: what counts is that pg_rewind finished
        // and the node was set up as a standby; its keeper starts it below.
        let rewound = self
            .autoctl_with(
                &["PG_AUTOCTL_DEBUG=1"],
                &[
                    "do",
                    "standby",
                    "rewind",
                    "--pgdata",
                    &pgdata,
                    "127.0.0.1",
                    &primary_port,
                ],
            )
            .output()
            .map_err(|error| format!("pg_autoctl do standby rewind: {error}"))?;
        let said = String::from_utf8_lossy(&rewound.stderr);
        if !(rewound.status.success() || self.rewound_as_standby(node)) {
            return Err(format!(
                "{}: pg_autoctl do standby rewind: {}: {}",
                node.name,
                rewound.status,
                said.lines().rev().take(10).collect::<Vec<_>>().join(" / ")
            ));
        }
        // Should it have started Postgres after all, outside any keeper.
        self.pg_ctl_stop(node)?;
        let keeper = self.keeper(node)?;
        if let Ok(mut running) = self.running.lock()
            && let Some(slot) = running.get_mut(index + 1)
        {
            *slot = keeper;
        }
        self.rewinds.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Whether pg_rewind finished on `node` and it was set up as a standby:
    /// pg_rewind leaves the control file "in archive recovery" (the state
    /// of a node that was shut down, or failed to start, is another), and
    /// pg_autoctl writes standby.signal after it.
    fn rewound_as_standby(&self, node: &Node) -> bool {
        let control = Command::new(self.binaries.join("pg_controldata"))
            .arg("-D")
            .arg(&node.pgdata)
            .env("LC_ALL", "C")
            .stdin(Stdio::null())
            .output();
        control.is_ok_and(|control| {
            String::from_utf8_lossy(&control.stdout)
                .lines()
                .any(|line| {
                    line.starts_with("Database cluster state:")
                        && line.ends_with("in archive recovery")
                })
        }) && node.pgdata.join("standby.signal").exists()
    }

    /// Stops one data node's keeper (`pg_autoctl stop`) and reaps it; a
    /// keeper that does not exit within 30 s is killed, its Postgres stopped
    /// immediately.
    fn stop_keeper(&self, index: usize) -> Result<(), String> {
        let node = &self.nodes[index];
        let pgdata = node.pgdata.to_string_lossy().into_owned();
        let _ = self.autoctl(&["stop", "--pgdata", &pgdata]).output();
        let mut running = self
            .running
            .lock()
            .map_err(|_| "the formation's process list is poisoned".to_owned())?;
        let keeper = running
            .get_mut(index + 1)
            .ok_or_else(|| format!("{}: no keeper", node.name))?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while matches!(keeper.try_wait(), Ok(None)) && Instant::now() < deadline {
            #[allow(
                clippy::disallowed_methods,
                reason = "the campaign calls this on a blocking thread (spawn_blocking)"
            )]
            std::thread::sleep(Duration::from_millis(100));
        }
        if matches!(keeper.try_wait(), Ok(None)) {
            let _ = keeper.kill();
        }
        let _ = keeper.wait();
        drop(running);
        self.pg_ctl_stop(node)
    }

    /// `pg_ctl stop -m fast` of a node's Postgres when it runs.
    fn pg_ctl_stop(&self, node: &Node) -> Result<(), String> {
        if !node.pgdata.join("postmaster.pid").exists() {
            return Ok(());
        }
        let pg_ctl = self.binaries.join("pg_ctl");
        let pgdata = node.pgdata.to_string_lossy().into_owned();
        let mut command = if self.as_postgres_user {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(pg_ctl);
            command
        } else {
            Command::new(pg_ctl)
        };
        command
            .args(["stop", "-m", "fast", "-w", "-t", "60", "-D", &pgdata])
            .stdin(Stdio::null());
        match self.checked(&mut command) {
            Ok(_) => Ok(()),
            // Not running after all (a stale pid file).
            Err(_) if !node.pgdata.join("postmaster.pid").exists() => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// The primary's synchronous_standby_names: non-empty once a commit
    /// waits for a standby.
    fn synchronous_standby_names(&self) -> Result<String, String> {
        let primary = self.settle_after_fault()?;
        let output = self.checked(
            Command::new(self.binaries.join("psql"))
                .args(["-X", "-q", "-t", "-A", "-h", "127.0.0.1", "-U", "postgres"])
                .arg("-p")
                .arg(self.nodes[primary].port.to_string())
                .args(["-d", DATABASE, "-c", "SHOW synchronous_standby_names"])
                .stdin(Stdio::null()),
        )?;
        Ok(output.trim().to_owned())
    }
}

/// The last lines of a node's newest Postgres log (pg_autoctl runs Postgres
/// with `logging_collector`, its logs under `PGDATA/log`); empty if none.
fn newest_postgres_log(node: &Node) -> String {
    let newest = std::fs::read_dir(node.pgdata.join("log"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| Some((entry.metadata().ok()?.modified().ok()?, entry.path())))
        .max();
    let Some((_, path)) = newest else {
        return String::new();
    };
    let log = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// Stops every node it started (`pg_autoctl stop --immediate`, by the
/// pidfiles of its own processes), then reaps them.
impl Drop for Formation {
    fn drop(&mut self) {
        for node in self.nodes.iter().chain([&self.monitor]) {
            let _ = self
                .autoctl(&[
                    "stop",
                    "--immediate",
                    "--pgdata",
                    &node.pgdata.to_string_lossy(),
                ])
                .output();
        }
        if let Ok(mut running) = self.running.lock() {
            for child in running.iter_mut() {
                let deadline = Instant::now() + Duration::from_secs(10);
                while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                    #[allow(
                        clippy::disallowed_methods,
                        reason = "dropped on a blocking thread (spawn_blocking)"
                    )]
                    std::thread::sleep(Duration::from_millis(50));
                }
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}
