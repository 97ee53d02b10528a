//! idemd-faults: the fault-injection campaign (README.md next to Cargo.toml).
//! Real `idemd` replicas on a store of its own, a faulty proxy in front of
//! them, a simulated provider, workers using the Rust client's execute-once
//! helper, faults on a schedule and at random; then a table and the checks.
//! Exits non-zero on any violation.

mod campaign;
mod database;
mod duplicator;
mod formation;
mod lock;
mod process;
mod provider;
mod proxy;
mod rng;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use crate::campaign::{Backend, Language, Report, Settings, print_table};
use crate::proxy::FaultRates;
use crate::rng::Rng;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// About a minute for both stores (CI).
    Short,
    /// 100k logical operations in all (documented in README.md).
    Long,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Stores {
    Both,
    Postgres,
    Embedded,
    /// The failover campaign alone (pg_auto_failover; not part of `both`).
    Failover,
}

#[derive(Debug, Parser)]
#[command(name = "idemd-faults", about = "The idemd fault-injection campaign")]
struct Arguments {
    #[arg(long, value_enum, default_value_t = Mode::Short)]
    mode: Mode,
    #[arg(long, value_enum, default_value_t = Stores::Both)]
    store: Stores,
    /// The seed of the plan (intents, twists, fault targets); random if absent.
    #[arg(long)]
    seed: Option<u64>,
    /// Logical operations per store, instead of the mode's.
    #[arg(long)]
    operations: Option<usize>,
    /// Whose execute-once helper delivers the intents: the Rust client in
    /// process, or another client's worker program (faults/workers/).
    #[arg(long, value_enum, default_value_t = Language::Rust)]
    client: Language,
}

/// `--mode short`'s intents on Postgres and on the embedded store for a
/// worker out of process (`--client` other than rust).
const EXTERNAL_SHORT: (usize, usize) = (200, 120);

fn settings(
    mode: Mode,
    seed: u64,
    operations: Option<usize>,
    language: Language,
) -> (Settings, Settings) {
    let rates = FaultRates {
        lose_reply: 0.02,
        delay_reply: 0.03,
        max_delay: Duration::from_millis(400),
        reset_request: 0.01,
        duplicate_at_once: 0.03,
        duplicate_after_answer: 0.03,
    };
    let base = Settings {
        operations: 0,
        concurrency: 24,
        lease: Duration::from_secs(1),
        attempt_duration: Duration::from_secs(3),
        fault_every: Duration::from_secs(2),
        rates,
        statement_failure_rate: 0.1,
        terminate_every: Duration::from_millis(1500),
        seed,
        language,
    };
    let (postgres_operations, embedded_operations, concurrency) = match (mode, language) {
        (Mode::Short, Language::Rust) => (500, 300, 24),
        // A worker out of process is one more toolchain's start in CI: fewer
        // intents, still enough that every twist and fault occurs (a verdict).
        (Mode::Short, _) => (EXTERNAL_SHORT.0, EXTERNAL_SHORT.1, 24),
        (Mode::Long, _) => (60_000, 40_000, 128),
    };
    let postgres = Settings {
        operations: operations.unwrap_or(postgres_operations),
        concurrency,
        ..base.clone()
    };
    let embedded = Settings {
        operations: operations.unwrap_or(embedded_operations),
        concurrency,
        seed: seed ^ 0x5eed,
        ..base
    };
    (postgres, embedded)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> ExitCode {
    let arguments = Arguments::parse();
    let seed = arguments
        .seed
        .unwrap_or_else(|| Rng::from_entropy().next_u64());
    println!(
        "idemd-faults: mode {:?}, client {:?}, seed {seed}",
        arguments.mode, arguments.client
    );
    let (postgres, embedded) =
        settings(arguments.mode, seed, arguments.operations, arguments.client);
    let mut campaigns = Vec::new();
    match arguments.store {
        Stores::Both => {
            campaigns.push((Backend::Postgres, postgres));
            campaigns.push((Backend::Embedded, embedded));
        }
        Stores::Postgres => campaigns.push((Backend::Postgres, postgres)),
        Stores::Embedded => campaigns.push((Backend::Embedded, embedded)),
        Stores::Failover => campaigns.push((Backend::Failover, postgres)),
    }
    let root = std::env::temp_dir().join(format!("idemd-faults-{seed:016x}"));
    let mut reports = Vec::new();
    for (backend, settings) in campaigns {
        let directory = root.join(format!("{backend:?}").to_lowercase());
        eprintln!(
            "idemd-faults: {backend:?}: {} operations in {}",
            settings.operations,
            directory.display()
        );
        let outcome = tokio::select! {
            outcome = campaign::run(backend, settings, &directory) => outcome,
            // Dropping the campaign kills its replicas and stops its Postgres.
            _ = tokio::signal::ctrl_c() => Err("interrupted".into()),
        };
        match outcome {
            Ok(report) => reports.push(report),
            Err(error) => {
                eprintln!("idemd-faults: {backend:?}: the campaign could not run: {error}");
                eprintln!("idemd-faults: its logs are kept in {}", directory.display());
                return ExitCode::FAILURE;
            }
        }
    }
    print_table(&reports);
    // One line per run, for CI's log: the client and its counts per store.
    for report in &reports {
        println!("idemd-faults: {}", report.summary(arguments.client));
    }
    if reports.iter().all(Report::passed) {
        let _ = std::fs::remove_dir_all(&root);
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "idemd-faults: FAILED (seed {seed}); logs kept in {}",
            root.display()
        );
        ExitCode::FAILURE
    }
}
