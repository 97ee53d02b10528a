//! Every metric family of idemd: its name and help text, each written once.
//! `Metrics::describe` walks the lists; every call site names the constant.

use metrics::{Key, Label};

/// A metric family: its name and help text, written here once; `describe`
/// and every call site take both from the same constant.
#[derive(Debug, Clone, Copy)]
pub(super) struct Family {
    pub(super) name: &'static str,
    pub(super) help: &'static str,
}

impl Family {
    const fn new(name: &'static str, help: &'static str) -> Self {
        Self { name, help }
    }

    /// The unlabelled series: static, so setting it allocates nothing.
    pub(super) const fn key(self) -> Key {
        Key::from_static_name(self.name)
    }

    pub(super) fn key_with(self, labels: &'static [Label]) -> Key {
        Key::from_static_parts(self.name, labels)
    }
}

pub(super) const CLAIMS: Family = Family::new("idemd_claims_total", "Claims answered, by outcome.");
pub(super) const TAKEOVERS: Family = Family::new(
    "idemd_takeovers_total",
    "New owners of an attempt whose lease expired or whose outcome was unknown.",
);
pub(super) const STALE_WRITES_REFUSED: Family = Family::new(
    "idemd_stale_writes_refused_total",
    "Owner or reconciler writes refused for a stale fence.",
);
pub(super) const LATE_WRITES_REFUSED: Family = Family::new(
    "idemd_late_writes_refused_total",
    "Owner writes refused after the attempt deadline.",
);
pub(super) const COMPLETIONS: Family = Family::new(
    "idemd_completions_total",
    "Operations completed with a result.",
);
pub(super) const FAILURES: Family =
    Family::new("idemd_failures_total", "Failures recorded, by disposition.");
pub(super) const RECONCILIATIONS: Family = Family::new(
    "idemd_reconciliations_total",
    "Reconciliations, by resolution.",
);
pub(super) const SWEPT: Family = Family::new(
    "idemd_swept_total",
    "Records handled by the retention sweeper, by kind.",
);
pub(super) const WAITS_REFUSED: Family = Family::new(
    "idemd_waits_refused_total",
    "Claims that answered Pending at once: no place left to wait (per tenant or per replica).",
);
pub(super) const CONNECTIONS_REFUSED: Family = Family::new(
    "idemd_connections_refused_total",
    "Connections closed at once because the server had as many open as it keeps.",
);
pub(super) const CALLS_REFUSED: Family = Family::new(
    "idemd_calls_refused_total",
    "Calls refused before a handler ran (credentials, load, size, time), by ErrorInfo reason.",
);
pub(super) const COUNTERS: [Family; 11] = [
    CLAIMS,
    TAKEOVERS,
    STALE_WRITES_REFUSED,
    LATE_WRITES_REFUSED,
    COMPLETIONS,
    FAILURES,
    RECONCILIATIONS,
    SWEPT,
    WAITS_REFUSED,
    CONNECTIONS_REFUSED,
    CALLS_REFUSED,
];

pub(super) const IN_PROGRESS_OPERATIONS: Family = Family::new(
    "idemd_in_progress_operations",
    "Operations whose owner holds a live lease (database count).",
);
pub(super) const UNRESOLVED_OPERATIONS: Family = Family::new(
    "idemd_unresolved_operations",
    "Operations needing reconciliation: UNKNOWN or lease expired (database count).",
);
pub(super) const RETRY_WAIT_OPERATIONS: Family = Family::new(
    "idemd_retry_wait_operations",
    "Operations waiting for a retry (database count).",
);
pub(super) const SWEEP_BACKLOG: Family = Family::new(
    "idemd_sweep_backlog",
    "Records due for the retention sweeper and not yet swept (database count).",
);
pub(super) const POOL_CONNECTIONS: Family = Family::new(
    "idemd_db_pool_connections",
    "Database pool connections, by state.",
);
pub(super) const POOL_MAX_CONNECTIONS: Family =
    Family::new("idemd_db_pool_max_connections", "Database pool size limit.");
pub(super) const DB_CLOCK_OFFSET: Family = Family::new(
    "idemd_db_clock_offset_seconds",
    "The database clock minus this replica's, measured around one query (positive: the database is ahead).",
);
pub(super) const WAITING_CLAIMS: Family = Family::new(
    "idemd_waiting_claims",
    "Claims waiting for a pending operation on this replica.",
);
pub(super) const GAUGES: [Family; 8] = [
    IN_PROGRESS_OPERATIONS,
    UNRESOLVED_OPERATIONS,
    RETRY_WAIT_OPERATIONS,
    SWEEP_BACKLOG,
    POOL_CONNECTIONS,
    POOL_MAX_CONNECTIONS,
    DB_CLOCK_OFFSET,
    WAITING_CLAIMS,
];

/// Both in seconds.
pub(super) const RPC_DURATION: Family = Family::new(
    "idemd_rpc_duration_seconds",
    "gRPC call latency, by RPC and status code.",
);
pub(super) const STORE_DURATION: Family = Family::new(
    "idemd_store_duration_seconds",
    "Store call latency, by call.",
);
pub(super) const HISTOGRAMS: [Family; 2] = [RPC_DURATION, STORE_DURATION];
