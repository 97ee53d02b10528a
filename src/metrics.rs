//! Prometheus metrics, kept apart as the problem demands: what callers asked
//! (claims by outcome), what went wrong (conflicts, stale writes, takeovers),
//! what the database holds (unresolved operations, counted there, not in one
//! replica's memory) and how long things take.
//!
//! Each application owns its registry (no global recorder), so two servers in
//! one process, as in tests, count separately. Labels are bounded: the
//! operation name only when it is on the configured allow-list (else
//! `other`), the tenant only when asked for, never the key.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::net::SocketAddr;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use metrics::{
    Counter, Gauge, Histogram, Key, Label, Level, Metadata, Recorder, SharedString, Unit,
};
use metrics_exporter_prometheus::{
    ExporterFuture, PrometheusBuilder, PrometheusHandle, PrometheusRecorder,
};

use crate::domain::{ClaimOutcome, FailDisposition, Resolution, TenantId};
use crate::store::{OperationCounts, PoolUsage, SweepReport};

static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

/// Seconds; from a fast claim on a warm pool to a slow drain.
const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// The label value of every operation name off the allow-list.
const OTHER_OPERATION: &str = "other";

/// Which labels a deployment can afford.
#[derive(Debug, Clone, Default)]
pub struct LabelPolicy {
    /// Operation names that get their own label value; the rest are `other`.
    pub operations: HashSet<String>,
    /// Label by tenant id too (only where tenants are few).
    pub tenant: bool,
}

/// Cheap to clone: one `Arc`.
#[derive(Clone)]
pub struct Metrics(Arc<Registry>);

/// The recorder, and a handle per series already recorded to. Registering
/// builds a `Key` (a label vector, its strings, then a retained copy inside
/// the recorder): done once per series, not once per call. The maps are
/// bounded as the labels are: fixed names and values, operations from the
/// allow-list, tenants only when labelled.
struct Registry {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
    /// Allowed operation name to its index in `operation_values`.
    allowed_operations: HashMap<String, usize>,
    /// Label values: the allow-list, then `other`.
    operation_values: Vec<SharedString>,
    tenant_label: bool,
    counters: RwLock<Handles<CounterSeries, Counter>>,
    histograms: RwLock<Handles<HistogramSeries, Histogram>>,
    /// The series of every call without a label of the call's own,
    /// registered once.
    fixed: Fixed,
}

/// Handles of series whose labels are fixed, recorded to on hot paths.
struct Fixed {
    cache_hits: Counter,
    cache_misses: Counter,
    answer_counts_dropped: Counter,
    requests_in_flight: Gauge,
    claim_wait: Histogram,
}

/// Looked up on every call: a fast hasher (the keys are fixed names, indices
/// and server-drawn tenant ids, nothing a peer chooses to collide) rather
/// than SipHash, which cost more than the rest of a lookup.
type Handles<S, H> = HashMap<S, H, foldhash::fast::RandomState>;

/// One counter series: the name, the operation (and tenant) it counts for,
/// and at most one more label, all fixed values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct CounterSeries {
    name: &'static str,
    /// Index into `Registry::operation_values`.
    operation: usize,
    /// Set only when the tenant label is on.
    tenant: Option<TenantId>,
    label: Option<(&'static str, &'static str)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum HistogramSeries {
    Rpc {
        rpc: &'static str,
        code: &'static str,
    },
    Store {
        call: &'static str,
    },
}

impl HistogramSeries {
    fn key(self) -> Key {
        match self {
            HistogramSeries::Rpc { rpc, code } => Key::from_parts(
                RPC_DURATION.name,
                vec![
                    Label::from_static_parts("rpc", rpc),
                    Label::from_static_parts("code", code),
                ],
            ),
            HistogramSeries::Store { call } => Key::from_parts(
                STORE_DURATION.name,
                vec![Label::from_static_parts("call", call)],
            ),
        }
    }
}

/// The handle registered for `series`, registering it on first use.
fn cached<S: Copy + Eq + Hash, H: Clone>(
    handles: &RwLock<Handles<S, H>>,
    series: S,
    register: impl FnOnce() -> H,
) -> H {
    if let Some(handle) = handles
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&series)
    {
        return handle.clone();
    }
    handles
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(series)
        .or_insert_with(register)
        .clone()
}

/// A metric family: its name and help text, written here once; `describe`
/// and every call site take both from the same constant.
#[derive(Debug, Clone, Copy)]
struct Family {
    name: &'static str,
    help: &'static str,
    kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
    /// In seconds, as every histogram here is.
    Histogram,
}

const fn describe_counter(name: &'static str, help: &'static str) -> Family {
    Family {
        name,
        help,
        kind: Kind::Counter,
    }
}

const fn describe_gauge(name: &'static str, help: &'static str) -> Family {
    Family {
        name,
        help,
        kind: Kind::Gauge,
    }
}

const fn describe_histogram(name: &'static str, help: &'static str) -> Family {
    Family {
        name,
        help,
        kind: Kind::Histogram,
    }
}

impl Family {
    /// The unlabelled series: static, so setting it allocates nothing.
    const fn key(self) -> Key {
        Key::from_static_name(self.name)
    }

    fn key_with(self, labels: &'static [Label]) -> Key {
        Key::from_static_parts(self.name, labels)
    }
}

const CLAIMS: Family = describe_counter("idemd_claims_total", "Claims answered, by outcome.");
const TAKEOVERS: Family = describe_counter(
    "idemd_takeovers_total",
    "New owners of an attempt whose lease expired or whose outcome was unknown.",
);
const SUSPECTED_NEW_KEY_RETRIES: Family = describe_counter(
    "idemd_suspected_new_key_retries_total",
    "New operations created with the same request (fingerprint) as at least --new-key-retry-threshold \
     - 1 others of their tenant and operation name within --new-key-retry-window, as this replica saw \
     them: a caller that makes a new idempotency key per retry.",
);
const STALE_WRITES_REFUSED: Family = describe_counter(
    "idemd_stale_writes_refused_total",
    "Owner or reconciler writes refused for a stale fence.",
);
const LATE_WRITES_REFUSED: Family = describe_counter(
    "idemd_late_writes_refused_total",
    "Owner writes refused after the attempt deadline.",
);
const COMPLETIONS: Family = describe_counter(
    "idemd_completions_total",
    "Operations completed with a result.",
);
const FAILURES: Family =
    describe_counter("idemd_failures_total", "Failures recorded, by disposition.");
const RECONCILIATIONS: Family = describe_counter(
    "idemd_reconciliations_total",
    "Reconciliations, by resolution.",
);
const SWEPT: Family = describe_counter(
    "idemd_swept_total",
    "Records handled by the retention sweeper, by kind.",
);
const WAITS_REFUSED: Family = describe_counter(
    "idemd_waits_refused_total",
    "Claims that answered Pending at once: no place left to wait (per tenant or per replica).",
);
const CONNECTIONS_REFUSED: Family = describe_counter(
    "idemd_connections_refused_total",
    "Connections closed at once because the server had as many open as it keeps.",
);
const TLS_RELOAD_FAILURES: Family = describe_counter(
    "idemd_tls_reload_failures_total",
    "Changed TLS files (certificate, key, client CA bundle, identities) that could not be used; the previous ones stay in force.",
);
const POLICY_RELOAD_FAILURES: Family = describe_counter(
    "idemd_policy_reload_failures_total",
    "Changed operation policy files that could not be used (unreadable or invalid); the policies in force stay.",
);
const CALLS_REFUSED: Family = describe_counter(
    "idemd_calls_refused_total",
    "Calls refused before a handler ran (credentials, load, size, time), by ErrorInfo reason.",
);

const IN_PROGRESS_OPERATIONS: Family = describe_gauge(
    "idemd_in_progress_operations",
    "Operations whose owner holds a live lease (database count).",
);
const UNRESOLVED_OPERATIONS: Family = describe_gauge(
    "idemd_unresolved_operations",
    "Operations needing reconciliation: UNKNOWN or lease expired (database count).",
);
const OLDEST_UNRESOLVED_AGE: Family = describe_gauge(
    "idemd_unresolved_oldest_age_seconds",
    "Age of the oldest operation needing reconciliation, by the database clock; 0 when none does.",
);
const RETRY_WAIT_OPERATIONS: Family = describe_gauge(
    "idemd_retry_wait_operations",
    "Operations waiting for a retry (database count).",
);
const SWEEP_BACKLOG: Family = describe_gauge(
    "idemd_sweep_backlog",
    "Records due for the retention sweeper and not yet swept (database count).",
);
const POOL_CONNECTIONS: Family = describe_gauge(
    "idemd_db_pool_connections",
    "Database pool connections, by state.",
);
const POOL_WAITING: Family = describe_gauge(
    "idemd_db_pool_waiting",
    "Store calls waiting for a database pool connection now (the embedded store: for a reader).",
);
const POOL_ACQUIRES: Family = describe_counter(
    "idemd_db_pool_acquires_total",
    "Database pool connections asked for, granted or not (the embedded store: readers).",
);
const POOL_ACQUIRE_WAIT: Family = describe_counter(
    "idemd_db_pool_acquire_wait_microseconds_total",
    "Time store calls spent waiting for a pool connection, added up, in microseconds: rate() of it over rate(idemd_db_pool_acquires_total) is the mean wait.",
);
const POOL_MAX_CONNECTIONS: Family =
    describe_gauge("idemd_db_pool_max_connections", "Database pool size limit.");
const DB_CLOCK_OFFSET: Family = describe_gauge(
    "idemd_db_clock_offset_seconds",
    "The database clock minus this replica's, measured around one query (positive: the database is ahead).",
);
const WAITING_CLAIMS: Family = describe_gauge(
    "idemd_waiting_claims",
    "Claims waiting for a pending operation on this replica.",
);

const RESULT_CACHE_LOOKUPS: Family = describe_counter(
    "idemd_result_cache_lookups_total",
    "Claims that looked for a replay in this replica's result cache, by result (hit, miss).",
);
const ANSWER_COUNTS_DROPPED: Family = describe_counter(
    "idemd_answer_counts_dropped_total",
    "Replays and Pending answers this replica did not count on their operation: past its bound \
     on operations counted between two flushes.",
);
const REQUESTS_IN_FLIGHT: Family = describe_gauge(
    "idemd_requests_in_flight",
    "API calls this replica is handling now, waiting Claims included.",
);
const SERVING: Family = describe_gauge(
    "idemd_serving",
    "1 while this replica's readiness is SERVING, 0 while NOT_SERVING.",
);
const BUILD_INFO: Family = describe_gauge(
    "idemd_build_info",
    "Always 1; the version of this replica's binary is its label.",
);

// The process's own, named as every Prometheus client names them.
const PROCESS_CPU: Family = describe_counter(
    "process_cpu_seconds_total",
    "Total user and system CPU time spent in seconds.",
);
const PROCESS_RESIDENT_MEMORY: Family = describe_gauge(
    "process_resident_memory_bytes",
    "Resident memory size in bytes.",
);
const PROCESS_VIRTUAL_MEMORY: Family = describe_gauge(
    "process_virtual_memory_bytes",
    "Virtual memory size in bytes.",
);
const PROCESS_OPEN_FDS: Family =
    describe_gauge("process_open_fds", "Number of open file descriptors.");
const PROCESS_MAX_FDS: Family = describe_gauge(
    "process_max_fds",
    "Maximum number of open file descriptors.",
);
const PROCESS_THREADS: Family =
    describe_gauge("process_threads", "Number of OS threads in the process.");
const PROCESS_START_TIME: Family = describe_gauge(
    "process_start_time_seconds",
    "Start time of the process since the Unix epoch in seconds.",
);

const RPC_DURATION: Family = describe_histogram(
    "idemd_rpc_duration_seconds",
    "gRPC call latency, by RPC and status code; a Claim's wait for a pending operation left out.",
);
const CLAIM_WAIT: Family = describe_histogram(
    "idemd_claim_wait_seconds",
    "Time Claims spent waiting for a pending operation to change (their wait), apart from their work.",
);
const STORE_DURATION: Family = describe_histogram(
    "idemd_store_duration_seconds",
    "Store call latency, by call.",
);
/// Every family, described to the recorder when a registry is built.
const FAMILIES: [Family; 41] = [
    CLAIMS,
    TAKEOVERS,
    SUSPECTED_NEW_KEY_RETRIES,
    STALE_WRITES_REFUSED,
    LATE_WRITES_REFUSED,
    COMPLETIONS,
    FAILURES,
    RECONCILIATIONS,
    SWEPT,
    WAITS_REFUSED,
    CONNECTIONS_REFUSED,
    TLS_RELOAD_FAILURES,
    POLICY_RELOAD_FAILURES,
    CALLS_REFUSED,
    IN_PROGRESS_OPERATIONS,
    UNRESOLVED_OPERATIONS,
    OLDEST_UNRESOLVED_AGE,
    RETRY_WAIT_OPERATIONS,
    SWEEP_BACKLOG,
    POOL_CONNECTIONS,
    POOL_MAX_CONNECTIONS,
    POOL_WAITING,
    POOL_ACQUIRES,
    POOL_ACQUIRE_WAIT,
    DB_CLOCK_OFFSET,
    WAITING_CLAIMS,
    RESULT_CACHE_LOOKUPS,
    ANSWER_COUNTS_DROPPED,
    REQUESTS_IN_FLIGHT,
    SERVING,
    BUILD_INFO,
    PROCESS_CPU,
    PROCESS_RESIDENT_MEMORY,
    PROCESS_VIRTUAL_MEMORY,
    PROCESS_OPEN_FDS,
    PROCESS_MAX_FDS,
    PROCESS_THREADS,
    PROCESS_START_TIME,
    RPC_DURATION,
    CLAIM_WAIT,
    STORE_DURATION,
];

static IDLE: [Label; 1] = [Label::from_static_parts("state", "idle")];
static IN_USE: [Label; 1] = [Label::from_static_parts("state", "in_use")];
static TOMBSTONED: [Label; 1] = [Label::from_static_parts("kind", "tombstoned")];
static DEADLINE_EXCEEDED: [Label; 1] = [Label::from_static_parts("kind", "deadline_exceeded")];
static DELETED: [Label; 1] = [Label::from_static_parts("kind", "deleted")];
static HIT: [Label; 1] = [Label::from_static_parts("result", "hit")];
static MISS: [Label; 1] = [Label::from_static_parts("result", "miss")];
static VERSION: [Label; 1] = [Label::from_static_parts(
    "version",
    env!("CARGO_PKG_VERSION"),
)];

impl std::fmt::Debug for Metrics {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// A registry of its own, plus, when `listen` is given, the future that
    /// serves it at `/metrics` (bound now, so a taken port fails start-up).
    pub fn new(
        labels: LabelPolicy,
        listen: Option<SocketAddr>,
    ) -> Result<(Self, Option<ExporterFuture>), metrics_exporter_prometheus::BuildError> {
        let builder = PrometheusBuilder::new().set_buckets(LATENCY_BUCKETS)?;
        let (recorder, exporter) = match listen {
            Some(address) => {
                let (recorder, exporter) = builder.with_http_listener(address).build()?;
                (recorder, Some(exporter))
            }
            None => (builder.build_recorder(), None),
        };
        let mut allowed: Vec<String> = labels.operations.into_iter().collect();
        allowed.sort_unstable();
        let allowed_operations = allowed
            .iter()
            .enumerate()
            .map(|(index, operation)| (operation.clone(), index))
            .collect();
        let mut operation_values: Vec<SharedString> =
            allowed.into_iter().map(SharedString::from).collect();
        operation_values.push(SharedString::const_str(OTHER_OPERATION));
        let fixed = Fixed {
            cache_hits: recorder.register_counter(&RESULT_CACHE_LOOKUPS.key_with(&HIT), &METADATA),
            cache_misses: recorder
                .register_counter(&RESULT_CACHE_LOOKUPS.key_with(&MISS), &METADATA),
            answer_counts_dropped: recorder
                .register_counter(&ANSWER_COUNTS_DROPPED.key(), &METADATA),
            requests_in_flight: recorder.register_gauge(&REQUESTS_IN_FLIGHT.key(), &METADATA),
            claim_wait: recorder.register_histogram(&CLAIM_WAIT.key(), &METADATA),
        };
        recorder
            .register_gauge(&BUILD_INFO.key_with(&VERSION), &METADATA)
            .set(1.0);
        let metrics = Self(Arc::new(Registry {
            handle: recorder.handle(),
            recorder,
            fixed,
            allowed_operations,
            operation_values,
            tenant_label: labels.tenant,
            counters: RwLock::default(),
            histograms: RwLock::default(),
        }));
        metrics.describe();
        Ok((metrics, exporter))
    }

    /// Whether series carry the tenant label (`--metrics-tenant-label`).
    pub fn labels_tenants(&self) -> bool {
        self.0.tenant_label
    }

    /// The Prometheus text exposition, as `/metrics` serves it.
    pub fn render(&self) -> String {
        self.0.handle.render()
    }

    fn describe(&self) {
        let recorder = &self.0.recorder;
        for family in FAMILIES {
            let (name, help) = (family.name.into(), family.help.into());
            match family.kind {
                Kind::Counter => recorder.describe_counter(name, None, help),
                Kind::Gauge => recorder.describe_gauge(name, None, help),
                Kind::Histogram => recorder.describe_histogram(name, Some(Unit::Seconds), help),
            }
        }
    }

    /// Adds one to the series of `family` for this operation (and tenant),
    /// with `label` besides when given.
    fn count(
        &self,
        family: Family,
        tenant: TenantId,
        operation: &str,
        label: Option<(&'static str, &'static str)>,
    ) {
        let registry = &*self.0;
        let series = CounterSeries {
            name: family.name,
            operation: registry.operation_index(operation),
            tenant: registry.tenant_label.then_some(tenant),
            label,
        };
        cached(&registry.counters, series, || {
            registry
                .recorder
                .register_counter(&registry.counter_key(series), &METADATA)
        })
        .increment(1);
    }

    fn record(&self, series: HistogramSeries, elapsed: Duration) {
        let registry = &*self.0;
        cached(&registry.histograms, series, || {
            registry
                .recorder
                .register_histogram(&series.key(), &METADATA)
        })
        .record(elapsed.as_secs_f64());
    }

    fn gauge(&self, key: &Key) -> Gauge {
        self.0.recorder.register_gauge(key, &METADATA)
    }

    pub fn claim(&self, tenant: TenantId, operation: &str, outcome: ClaimOutcome) {
        self.count(
            CLAIMS,
            tenant,
            operation,
            Some(("outcome", outcome.as_str())),
        );
        if outcome == ClaimOutcome::ReconcileFirst {
            self.count(TAKEOVERS, tenant, operation, None);
        }
    }

    pub fn suspected_new_key_retry(&self, tenant: TenantId, operation: &str) {
        self.count(SUSPECTED_NEW_KEY_RETRIES, tenant, operation, None);
    }

    pub fn stale_write(&self, tenant: TenantId, operation: &str, rpc: &'static str) {
        self.count(STALE_WRITES_REFUSED, tenant, operation, Some(("rpc", rpc)));
    }

    pub fn late_write(&self, tenant: TenantId, operation: &str, rpc: &'static str) {
        self.count(LATE_WRITES_REFUSED, tenant, operation, Some(("rpc", rpc)));
    }

    pub fn completion(&self, tenant: TenantId, operation: &str) {
        self.count(COMPLETIONS, tenant, operation, None);
    }

    pub fn failure(&self, tenant: TenantId, operation: &str, disposition: FailDisposition) {
        self.count(
            FAILURES,
            tenant,
            operation,
            Some(("disposition", disposition.as_str())),
        );
    }

    pub fn reconciliation(&self, tenant: TenantId, operation: &str, resolution: &Resolution) {
        let resolution = match resolution {
            Resolution::Succeeded(_) => "succeeded",
            Resolution::Failed(_) => "failed",
            Resolution::NotApplied => "not_applied",
        };
        self.count(
            RECONCILIATIONS,
            tenant,
            operation,
            Some(("resolution", resolution)),
        );
    }

    pub fn swept(&self, report: &SweepReport) {
        for (labels, amount) in [
            (&TOMBSTONED, report.tombstoned),
            (&DEADLINE_EXCEEDED, report.deadline_exceeded),
            (&DELETED, report.deleted),
        ] {
            if amount > 0 {
                self.0
                    .recorder
                    .register_counter(&SWEPT.key_with(labels), &METADATA)
                    .increment(amount);
            }
        }
    }

    pub fn operation_counts(&self, counts: &OperationCounts) {
        self.gauge(&IN_PROGRESS_OPERATIONS.key())
            .set(counts.in_progress as f64);
        self.gauge(&UNRESOLVED_OPERATIONS.key())
            .set(counts.unresolved as f64);
        // Both times are the database's: no replica clock in the age.
        let oldest_age = counts.oldest_unresolved.map_or(0.0, |created| {
            (counts.database_now - created).as_seconds_f64().max(0.0)
        });
        self.gauge(&OLDEST_UNRESOLVED_AGE.key()).set(oldest_age);
        self.gauge(&RETRY_WAIT_OPERATIONS.key())
            .set(counts.retry_wait as f64);
        self.gauge(&SWEEP_BACKLOG.key())
            .set(counts.sweep_backlog as f64);
    }

    pub fn pool_usage(&self, usage: &PoolUsage) {
        let in_use = usage.size.saturating_sub(usage.idle);
        self.gauge(&POOL_CONNECTIONS.key_with(&IDLE))
            .set(f64::from(usage.idle));
        self.gauge(&POOL_CONNECTIONS.key_with(&IN_USE))
            .set(f64::from(in_use));
        self.gauge(&POOL_MAX_CONNECTIONS.key())
            .set(f64::from(usage.max));
        let waits = usage.waits;
        self.gauge(&POOL_WAITING.key()).set(waits.waiting as f64);
        // Totals the store keeps since it opened: set, not added.
        let recorder = &self.0.recorder;
        recorder
            .register_counter(&POOL_ACQUIRES.key(), &METADATA)
            .absolute(waits.acquires);
        recorder
            .register_counter(&POOL_ACQUIRE_WAIT.key(), &METADATA)
            .absolute(u64::try_from(waits.waited.as_micros()).unwrap_or(u64::MAX));
    }

    /// `rpc` and `code` come from fixed sets (`grpc::observe`): each pair is
    /// a series of its own, kept for the life of the process.
    pub fn rpc_latency(&self, rpc: &'static str, code: &'static str, elapsed: Duration) {
        self.record(HistogramSeries::Rpc { rpc, code }, elapsed);
    }

    pub fn store_latency(&self, call: &'static str, elapsed: Duration) {
        self.record(HistogramSeries::Store { call }, elapsed);
    }

    /// A Claim waited `waited` for its pending operation to change.
    pub fn claim_wait(&self, waited: Duration) {
        self.0.fixed.claim_wait.record(waited.as_secs_f64());
    }

    /// A Claim looked for a replay in the result cache.
    pub fn result_cache_lookup(&self, hit: bool) {
        let fixed = &self.0.fixed;
        if hit {
            fixed.cache_hits.increment(1);
        } else {
            fixed.cache_misses.increment(1);
        }
    }

    /// Replays and Pending answers not counted on their operation (the
    /// replica's bound on operations counted between flushes was reached).
    pub fn answer_counts_dropped(&self, answers: u64) {
        self.0.fixed.answer_counts_dropped.increment(answers);
    }

    /// Counts an API call in flight until the guard is dropped (answered,
    /// or abandoned by its caller).
    pub fn request_in_flight(&self) -> InFlight {
        let gauge = self.0.fixed.requests_in_flight.clone();
        gauge.increment(1.0);
        InFlight(gauge)
    }

    /// Readiness, as the health service reports it.
    pub fn serving(&self, serving: bool) {
        self.gauge(&SERVING.key())
            .set(if serving { 1.0 } else { 0.0 });
    }

    /// The process's CPU, memory, file descriptors and threads, read now
    /// (from `/proc/self` on Linux; what a platform lacks is left out).
    pub fn process(&self) {
        let process = metrics_process::collector::collect();
        if let Some(seconds) = process.cpu_seconds_total {
            // A counter set to the kernel's own total, in whole seconds:
            // the exporter's counters are integers (as every metrics-rs
            // exporter's process collector has it).
            self.0
                .recorder
                .register_counter(&PROCESS_CPU.key(), &METADATA)
                .absolute(seconds as u64);
        }
        for (family, value) in [
            (PROCESS_RESIDENT_MEMORY, process.resident_memory_bytes),
            (PROCESS_VIRTUAL_MEMORY, process.virtual_memory_bytes),
            (PROCESS_OPEN_FDS, process.open_fds),
            (PROCESS_MAX_FDS, process.max_fds),
            (PROCESS_THREADS, process.threads),
            (PROCESS_START_TIME, process.start_time_seconds),
        ] {
            if let Some(value) = value {
                self.gauge(&family.key()).set(value as f64);
            }
        }
    }

    /// A connection closed at once: the server had as many open as it keeps.
    pub fn connection_refused(&self) {
        self.0
            .recorder
            .register_counter(&CONNECTIONS_REFUSED.key(), &METADATA)
            .increment(1);
    }

    /// Changed TLS files that could not be used (the old ones serve on).
    pub fn tls_reload_failed(&self) {
        self.0
            .recorder
            .register_counter(&TLS_RELOAD_FAILURES.key(), &METADATA)
            .increment(1);
    }

    /// A changed policy file that could not be used (the old policies
    /// stay).
    pub fn policy_reload_failed(&self) {
        self.0
            .recorder
            .register_counter(&POLICY_RELOAD_FAILURES.key(), &METADATA)
            .increment(1);
    }

    /// A Claim that would have waited, answered at once instead.
    pub fn waiter_refused(&self) {
        self.0
            .recorder
            .register_counter(&WAITS_REFUSED.key(), &METADATA)
            .increment(1);
    }

    pub fn waiting_claims(&self, waiting: usize) {
        self.gauge(&WAITING_CLAIMS.key()).set(waiting as f64);
    }

    /// A call admission refused; `reason` is an ErrorInfo reason (a fixed set).
    pub fn call_refused(&self, reason: &'static str) {
        self.0
            .recorder
            .register_counter(
                &Key::from_parts(
                    CALLS_REFUSED.name,
                    vec![Label::from_static_parts("reason", reason)],
                ),
                &METADATA,
            )
            .increment(1);
    }
}

/// An API call counted in `idemd_requests_in_flight` while it lives.
#[must_use = "the call counts as in flight only while this lives"]
pub struct InFlight(Gauge);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

impl Registry {
    /// Its index in `operation_values`: its own when allowed, else `other`'s
    /// (the last).
    fn operation_index(&self, operation: &str) -> usize {
        let other = self.operation_values.len() - 1;
        self.allowed_operations
            .get(operation)
            .copied()
            .unwrap_or(other)
    }

    fn counter_key(&self, series: CounterSeries) -> Key {
        let operation = self
            .operation_values
            .get(series.operation)
            .cloned()
            .unwrap_or(SharedString::const_str(OTHER_OPERATION));
        let mut labels = vec![Label::new("operation", operation)];
        if let Some(tenant) = series.tenant {
            labels.push(Label::new("tenant", tenant.0.to_string()));
        }
        if let Some((name, value)) = series.label {
            labels.push(Label::from_static_parts(name, value));
        }
        Key::from_parts(series.name, labels)
    }
}

/// This replica's wall clock, read only to measure the database clock's
/// offset from it: nothing is decided with it.
#[expect(
    clippy::disallowed_methods,
    reason = "measures the database clock's offset; decides nothing"
)]
fn replica_clock() -> chrono::DateTime<chrono::Utc> {
    chrono::Utc::now()
}

/// Refreshes the gauges that only the database can count, every `interval`,
/// and folds the histogram samples recorded since into their buckets.
///
/// The recorder keeps each latency sample until it is folded: the exporter's
/// own upkeep task does that every few seconds, but with metrics not served
/// (`--metrics-listen off`) there is no exporter, and nothing scrapes either,
/// so without this the samples would pile up for the life of the process.
pub async fn observe_store(
    store: Arc<dyn crate::store::Store>,
    metrics: Metrics,
    interval: Duration,
    stop: tokio_util::sync::CancellationToken,
) {
    crate::shutdown::every(interval, stop, || async {
        metrics.0.handle.run_upkeep();
        metrics.process();
        metrics.pool_usage(&store.pool_usage());
        let sent = replica_clock();
        let counted = store.count_operations().await;
        let answered = replica_clock();
        match counted {
            Ok(counts) => {
                metrics.operation_counts(&counts);
                // The database read its clock somewhere between the send and
                // the answer: measured from their midpoint, the error is at
                // most half the round trip.
                let midpoint = sent + (answered - sent) / 2;
                let offset = (counts.database_now - midpoint).as_seconds_f64();
                metrics.gauge(&DB_CLOCK_OFFSET.key()).set(offset);
            }
            Err(error) => tracing::warn!(%error, "cannot count operations for the gauges"),
        }
    })
    .await;
}

#[cfg(test)]
mod tests;
