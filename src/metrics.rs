//! Prometheus metrics, kept apart as the problem demands: what callers asked
//! (claims by outcome), what went wrong (conflicts, stale writes, takeovers),
//! what the database holds (unresolved operations, counted there, not in one
//! replica's memory) and how long things take.
//!
//! Each application owns its registry (no global recorder), so two servers in
//! one process, as in tests, count separately. Labels are bounded: the
//! operation name only when it is on the configured allow-list (else
//! `other`), the tenant only when asked for, never the key.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use metrics::{Key, Label, Level, Metadata, Recorder, SharedString, Unit};
use metrics_exporter_prometheus::{ExporterFuture, PrometheusBuilder, PrometheusRecorder};

use crate::domain::{ClaimOutcome, FailDisposition, Resolution, TenantId};
use crate::store::{OperationCounts, PoolUsage, SweepReport};

static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

/// Seconds; from a fast claim on a warm pool to a slow drain.
const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Which labels a deployment can afford.
#[derive(Debug, Clone, Default)]
pub struct LabelPolicy {
    /// Operation names that get their own label value; the rest are `other`.
    pub operations: HashSet<String>,
    /// Label by tenant id too (only where tenants are few).
    pub tenant: bool,
}

#[derive(Clone)]
pub struct Metrics {
    recorder: Arc<PrometheusRecorder>,
    labels: Arc<LabelPolicy>,
}

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
        let metrics = Self {
            recorder: Arc::new(recorder),
            labels: Arc::new(labels),
        };
        metrics.describe();
        Ok((metrics, exporter))
    }

    /// The Prometheus text exposition, as `/metrics` serves it.
    pub fn render(&self) -> String {
        self.recorder.handle().render()
    }

    fn describe(&self) {
        let counters = [
            ("idemd_claims_total", "Claims answered, by outcome."),
            (
                "idemd_takeovers_total",
                "New owners of an attempt whose lease expired or whose outcome was unknown.",
            ),
            (
                "idemd_stale_writes_refused_total",
                "Owner or reconciler writes refused for a stale fence.",
            ),
            (
                "idemd_late_writes_refused_total",
                "Owner writes refused after the attempt deadline.",
            ),
            (
                "idemd_completions_total",
                "Operations completed with a result.",
            ),
            ("idemd_failures_total", "Failures recorded, by disposition."),
            (
                "idemd_reconciliations_total",
                "Reconciliations, by resolution.",
            ),
            (
                "idemd_swept_total",
                "Records handled by the retention sweeper, by kind.",
            ),
        ];
        for (name, help) in counters {
            self.recorder
                .describe_counter(name.into(), None, SharedString::const_str(help));
        }
        let gauges = [
            (
                "idemd_in_progress_operations",
                "Operations whose owner holds a live lease (database count).",
            ),
            (
                "idemd_unresolved_operations",
                "Operations needing reconciliation: UNKNOWN or lease expired (database count).",
            ),
            (
                "idemd_retry_wait_operations",
                "Operations waiting for a retry (database count).",
            ),
            (
                "idemd_sweep_backlog",
                "Records due for the retention sweeper and not yet swept (database count).",
            ),
            (
                "idemd_db_pool_connections",
                "Database pool connections, by state.",
            ),
            ("idemd_db_pool_max_connections", "Database pool size limit."),
        ];
        for (name, help) in gauges {
            self.recorder
                .describe_gauge(name.into(), None, SharedString::const_str(help));
        }
        self.recorder.describe_histogram(
            "idemd_rpc_duration_seconds".into(),
            Some(Unit::Seconds),
            SharedString::const_str("gRPC call latency, by RPC and status code."),
        );
        self.recorder.describe_histogram(
            "idemd_store_duration_seconds".into(),
            Some(Unit::Seconds),
            SharedString::const_str("Store call latency, by call."),
        );
    }

    fn scope_labels(&self, tenant: Option<TenantId>, operation: &str) -> Vec<Label> {
        let operation = if self.labels.operations.contains(operation) {
            operation.to_owned()
        } else {
            "other".to_owned()
        };
        let mut labels = vec![Label::new("operation", operation)];
        if let (true, Some(tenant)) = (self.labels.tenant, tenant) {
            labels.push(Label::new("tenant", tenant.0.to_string()));
        }
        labels
    }

    fn count(&self, name: &'static str, labels: Vec<Label>) {
        self.recorder
            .register_counter(&Key::from_parts(name, labels), &METADATA)
            .increment(1);
    }

    fn set(&self, name: &'static str, labels: Vec<Label>, value: f64) {
        self.recorder
            .register_gauge(&Key::from_parts(name, labels), &METADATA)
            .set(value);
    }

    pub fn claim(&self, tenant: TenantId, operation: &str, outcome: ClaimOutcome) {
        let mut labels = self.scope_labels(Some(tenant), operation);
        labels.push(Label::new("outcome", outcome.as_str()));
        self.count("idemd_claims_total", labels);
        if outcome == ClaimOutcome::ReconcileFirst {
            self.count(
                "idemd_takeovers_total",
                self.scope_labels(Some(tenant), operation),
            );
        }
    }

    pub fn stale_write(&self, tenant: TenantId, operation: &str, rpc: &'static str) {
        let mut labels = self.scope_labels(Some(tenant), operation);
        labels.push(Label::new("rpc", rpc));
        self.count("idemd_stale_writes_refused_total", labels);
    }

    pub fn late_write(&self, tenant: TenantId, operation: &str, rpc: &'static str) {
        let mut labels = self.scope_labels(Some(tenant), operation);
        labels.push(Label::new("rpc", rpc));
        self.count("idemd_late_writes_refused_total", labels);
    }

    pub fn completion(&self, tenant: TenantId, operation: &str) {
        self.count(
            "idemd_completions_total",
            self.scope_labels(Some(tenant), operation),
        );
    }

    pub fn failure(&self, tenant: TenantId, operation: &str, disposition: FailDisposition) {
        let mut labels = self.scope_labels(Some(tenant), operation);
        let disposition = match disposition {
            FailDisposition::Terminal => "terminal",
            FailDisposition::Retryable => "retryable",
            FailDisposition::Unknown => "unknown",
        };
        labels.push(Label::new("disposition", disposition));
        self.count("idemd_failures_total", labels);
    }

    pub fn reconciliation(&self, tenant: TenantId, operation: &str, resolution: &Resolution) {
        let mut labels = self.scope_labels(Some(tenant), operation);
        let resolution = match resolution {
            Resolution::Succeeded(_) => "succeeded",
            Resolution::Failed(_) => "failed",
            Resolution::NotApplied => "not_applied",
        };
        labels.push(Label::new("resolution", resolution));
        self.count("idemd_reconciliations_total", labels);
    }

    pub fn swept(&self, report: &SweepReport) {
        for (kind, amount) in [
            ("tombstoned", report.tombstoned),
            ("deadline_exceeded", report.deadline_exceeded),
            ("deleted", report.deleted),
        ] {
            if amount > 0 {
                self.recorder
                    .register_counter(
                        &Key::from_parts("idemd_swept_total", vec![Label::new("kind", kind)]),
                        &METADATA,
                    )
                    .increment(amount);
            }
        }
    }

    pub fn operation_counts(&self, counts: &OperationCounts) {
        self.set(
            "idemd_in_progress_operations",
            Vec::new(),
            counts.in_progress as f64,
        );
        self.set(
            "idemd_unresolved_operations",
            Vec::new(),
            counts.unresolved as f64,
        );
        self.set(
            "idemd_retry_wait_operations",
            Vec::new(),
            counts.retry_wait as f64,
        );
        self.set(
            "idemd_sweep_backlog",
            Vec::new(),
            counts.sweep_backlog as f64,
        );
    }

    pub fn pool_usage(&self, usage: &PoolUsage) {
        let in_use = usage.size.saturating_sub(usage.idle);
        self.set(
            "idemd_db_pool_connections",
            vec![Label::new("state", "idle")],
            f64::from(usage.idle),
        );
        self.set(
            "idemd_db_pool_connections",
            vec![Label::new("state", "in_use")],
            f64::from(in_use),
        );
        self.set(
            "idemd_db_pool_max_connections",
            Vec::new(),
            f64::from(usage.max),
        );
    }

    pub fn rpc_latency(&self, rpc: &str, code: &str, elapsed: Duration) {
        self.recorder
            .register_histogram(
                &Key::from_parts(
                    "idemd_rpc_duration_seconds",
                    vec![
                        Label::new("rpc", rpc.to_owned()),
                        Label::new("code", code.to_owned()),
                    ],
                ),
                &METADATA,
            )
            .record(elapsed.as_secs_f64());
    }

    pub fn store_latency(&self, call: &'static str, elapsed: Duration) {
        self.recorder
            .register_histogram(
                &Key::from_parts(
                    "idemd_store_duration_seconds",
                    vec![Label::new("call", call)],
                ),
                &METADATA,
            )
            .record(elapsed.as_secs_f64());
    }
}

/// Refreshes the gauges that only the database can count, every `interval`.
pub async fn observe_store(
    store: Arc<dyn crate::store::Store>,
    metrics: Metrics,
    interval: Duration,
    stop: tokio_util::sync::CancellationToken,
) {
    crate::shutdown::every(interval, stop, || async {
        metrics.pool_usage(&store.pool_usage());
        match store.count_operations().await {
            Ok(counts) => metrics.operation_counts(&counts),
            Err(error) => tracing::warn!(%error, "cannot count operations for the gauges"),
        }
    })
    .await;
}
