//! What a campaign is asked to run: its store and its sizes, rates and seed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::proxy::FaultRates;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    /// Two replicas on one Postgres of the campaign's own.
    Postgres,
    /// One replica on the embedded store.
    Embedded,
    /// Two replicas on a pg_auto_failover formation of the campaign's own
    /// (a primary, two secondaries, synchronous replication), reached by a
    /// multi-host URL; the faults are the primary's: its postmaster
    /// SIGKILLed, and planned switchovers.
    Failover,
}

#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) operations: usize,
    pub(crate) concurrency: usize,
    pub(crate) lease: Duration,
    pub(crate) attempt_duration: Duration,
    /// The mean pause between two scheduled faults (each is drawn between
    /// half and one and a half of it).
    pub(crate) fault_every: Duration,
    pub(crate) rates: FaultRates,
    /// (Postgres) The fraction of statements on `operations` that fail while
    /// a window of failing statements is on.
    pub(crate) statement_failure_rate: f64,
    /// (Postgres) The mean pause between two rounds of terminated idemd
    /// backends (each drawn between half and one and a half of it).
    pub(crate) terminate_every: Duration,
    pub(crate) seed: u64,
    /// Whose execute-once helper delivers the intents.
    pub(crate) language: Language,
}

/// The languages whose execute-once helper a campaign can drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Language {
    /// In process (tokio tasks on the Rust client): every twist.
    Rust,
    Python,
    Go,
    Typescript,
    Java,
}

impl Language {
    pub(crate) fn external(self) -> bool {
        self != Language::Rust
    }

    /// The worker program: `faults/workers/<language>/run` (it builds or
    /// prepares what it needs, then runs the worker); `IDEMD_FAULTS_WORKER`
    /// names another.
    pub(super) fn program(self) -> PathBuf {
        if let Some(program) = std::env::var_os("IDEMD_FAULTS_WORKER") {
            return PathBuf::from(program);
        }
        let name = format!("{self:?}").to_lowercase();
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("workers")
            .join(name)
            .join("run")
    }
}
