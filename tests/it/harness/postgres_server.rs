//! PostgreSQL's server binaries, for the tests that run clusters of their
//! own (a frozen one, one behind a network partition): found once, run as
//! the `postgres` user when the tests run as root (Postgres refuses root).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub struct ServerBinaries {
    bin: PathBuf,
    as_postgres_user: bool,
}

impl ServerBinaries {
    /// Debian's newest /usr/lib/postgresql/<version>/bin, else the directory
    /// of `initdb` on PATH; `None` where neither exists.
    pub fn find() -> Option<Self> {
        let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let version = entry.file_name().to_str()?.parse().ok()?;
                let bin = entry.path().join("bin");
                bin.join("initdb").exists().then_some((version, bin))
            })
            .collect();
        versions.sort();
        let bin = match versions.pop() {
            Some((_, bin)) => bin,
            None => {
                let which = Command::new("sh")
                    .args(["-c", "command -v initdb"])
                    .output()
                    .ok()?;
                let path = String::from_utf8(which.stdout).ok()?;
                Path::new(path.trim()).parent()?.to_owned()
            }
        };
        Some(Self {
            bin,
            as_postgres_user: rustix::process::getuid().is_root(),
        })
    }

    /// Whether the clusters' directories must belong to `postgres`.
    pub fn as_postgres_user(&self) -> bool {
        self.as_postgres_user
    }

    /// `program` (initdb, pg_ctl, …) run by `wrapper` (e.g. `ip netns exec
    /// NAME`; empty: directly), as `postgres` when root.
    pub fn command_under(&self, wrapper: &[&str], program: &str) -> Command {
        let program = self.bin.join(program);
        let mut line: Vec<&std::ffi::OsStr> = wrapper.iter().map(|part| part.as_ref()).collect();
        if self.as_postgres_user {
            line.extend(["runuser", "-u", "postgres", "--"].map(std::ffi::OsStr::new));
        }
        line.push(program.as_os_str());
        let mut command = Command::new(line[0]);
        command.args(&line[1..]).stdin(Stdio::null());
        command
    }

    pub fn command(&self, program: &str) -> Command {
        self.command_under(&[], program)
    }

    /// A new cluster in `data`: trust authentication, superuser `postgres`,
    /// UTF-8 without a locale (the same on every machine), no fsync of its
    /// files (a test's cluster is thrown away).
    pub fn initdb(&self, data: &Path) {
        run(self
            .command("initdb")
            .args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-locale",
                "--no-sync",
                "-D",
            ])
            .arg(data));
    }

    /// Starts the cluster in `data` with postgres `options`, logging to
    /// `log`, under `wrapper`; returns once it accepts connections.
    pub fn start(&self, wrapper: &[&str], data: &Path, options: &str, log: &Path) {
        run(self
            .command_under(wrapper, "pg_ctl")
            .arg("-D")
            .arg(data)
            .args(["-o", options, "-l"])
            .arg(log)
            .args(["-w", "-t", "30", "start"]));
    }

    /// `pg_ctl stop -m immediate`, whatever state the cluster is in.
    pub fn stop_immediately(&self, data: &Path) {
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(data)
            .args(["-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .status();
    }
}

/// Runs `command`, panicking with its output when it fails.
pub(super) fn run(command: &mut Command) {
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("{command:?}: {error}"));
    assert!(
        output.status.success(),
        "{command:?}: {}: {}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
