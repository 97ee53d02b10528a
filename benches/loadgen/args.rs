//! The command line: which cell to measure, and how.

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(about = "Load generator of bench/run: one measured cell per invocation, JSON on stdout")]
pub(crate) struct Cli {
    /// Passed by `cargo bench`; the benchmark itself is `bench/run`.
    #[arg(long, hide = true)]
    pub(crate) bench: bool,
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Drive a running idemd through its gRPC API.
    Grpc(GrpcArgs),
    /// The embedded store's ceiling: plain INSERT + UPDATE transactions.
    SqliteCeiling(SqliteCeilingArgs),
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Workload {
    /// All-new keys; one logical operation is Claim + Complete.
    Fresh,
    /// Claims of operations completed before the run (preloaded).
    Replay,
    /// Every client on one scope per 10 ms.
    Hot,
    /// 70% new, 20% identical retries, 10% same key with another payload.
    Mixed,
    /// grpc.health.v1.Health/Check: the gRPC floor of the same server.
    Floor,
    /// Lookups (no history) of operations completed before the run
    /// (preloaded): the store's plain read path.
    Lookup,
}

impl Workload {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Workload::Fresh => "fresh",
            Workload::Replay => "replay",
            Workload::Hot => "hot",
            Workload::Mixed => "mixed",
            Workload::Floor => "floor",
            Workload::Lookup => "lookup",
        }
    }
}

#[derive(clap::Args)]
pub(crate) struct Limits {
    /// Concurrent clients, each on its own connection.
    #[arg(long)]
    pub(crate) concurrency: usize,
    /// Stop starting operations after this many seconds (0: no time limit).
    #[arg(long, default_value_t = 0.0)]
    pub(crate) duration: f64,
    /// Stop after this many logical operations in all (mixed: exactly this many).
    #[arg(long)]
    pub(crate) operations: Option<u64>,
}

#[derive(clap::Args)]
pub(crate) struct GrpcArgs {
    /// e.g. http://127.0.0.1:50051
    #[arg(long)]
    pub(crate) address: String,
    #[arg(long, value_enum)]
    pub(crate) workload: Workload,
    #[command(flatten)]
    pub(crate) limits: Limits,
    /// Makes this cell's keys its own, so cells never share a scope.
    #[arg(long)]
    pub(crate) run_id: String,
    /// Keys `<replay-prefix><n>` (n zero-padded to 10 digits), n in
    /// 1..=replay-keys, were completed before the run.
    #[arg(long, default_value_t = 0)]
    pub(crate) replay_keys: u64,
    #[arg(long, default_value = "replay-")]
    pub(crate) replay_prefix: String,
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
}

#[derive(clap::Args)]
pub(crate) struct SqliteCeilingArgs {
    /// A database file with idemd's migrated schema.
    #[arg(long)]
    pub(crate) path: std::path::PathBuf,
    /// The tenant the rows belong to (the schema's foreign key).
    #[arg(long)]
    pub(crate) tenant_id: i64,
    #[command(flatten)]
    pub(crate) limits: Limits,
    #[arg(long)]
    pub(crate) run_id: String,
}
