//! The load generator of `bench/run` (see bench/README.md), which drives it
//! once per measured cell and reads the one JSON object it prints.
//!
//! `grpc` drives a running idemd only through its public gRPC API, like any
//! client would, and counts business effects, not responses: an execution is
//! an Acquired (or ReconcileFirst) answer followed by a successful Complete,
//! a duplicate execution is a second one for the same logical operation, a
//! false conflict is IDEMPOTENCY_KEY_REUSED for a request whose payload was
//! identical. `sqlite-ceiling` is the embedded store's ceiling: the same
//! INSERT and UPDATE on the same schema through the same SQLite library, with
//! the same durability, and nothing else.
//!
//! The token comes from `IDEMD_BENCH_TOKEN`, so it is never on a command line.

mod args;
mod client;
mod drive;
mod grpc;
mod sqlite_ceiling;
mod tally;

use clap::Parser;

use crate::args::{Cli, Command};
use crate::grpc::run_grpc;
use crate::sqlite_ceiling::run_sqlite_ceiling;

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body every execution completes with, and every replay must return.
pub(crate) const RESULT_BODY: &[u8] = br#"{"charge":"ch_1"}"#;
pub(crate) const RESULT_CONTENT_TYPE: &str = "application/json";
pub(crate) const OPERATION: &str = "payments.charge";
/// Replays checked for their stored result before the timed window opens.
pub(crate) const REPLAYS_CHECKED_BEFORE_TIMING: u64 = 5;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let cli = Cli::parse();
    let report = match cli.command {
        Some(Command::Grpc(args)) => run_grpc(args).await?,
        Some(Command::SqliteCeiling(args)) => run_sqlite_ceiling(args).await?,
        None => {
            eprintln!("this is bench/run's load generator; run the benchmark with `bench/run`");
            return Ok(());
        }
    };
    println!("{report}");
    Ok(())
}
