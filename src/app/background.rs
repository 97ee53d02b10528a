//! What runs beside the server while it serves, and how it stops: every task
//! watches one token, finishes the round it is in when the token is
//! cancelled, and is waited for before the store closes.

use std::future::Future;
use std::time::Duration;

use metrics_exporter_prometheus::ExporterFuture;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic_health::pb::health_server::HealthServer;
use tonic_health::server::{HealthReporter, HealthService};
use tracing::warn;

use super::connections::{ConnectionSettings, incoming};
use super::transport::ServerSettings;
use crate::grpc::server::IdempotencyApi;
use crate::metrics::Metrics;
use crate::proto::idempotency_service_server::IdempotencyServiceServer;
use crate::service::IdempotencyService;

/// The background tasks of one server.
pub(super) struct BackgroundTasks {
    stop: CancellationToken,
    tracker: TaskTracker,
    /// Kept to abort the tasks that outlive the drain: one still holding a
    /// store connection would keep the store from closing.
    running: Vec<(&'static str, JoinHandle<()>)>,
}

impl BackgroundTasks {
    /// Tasks that stop when `stop` is cancelled.
    pub(super) fn new(stop: CancellationToken) -> Self {
        Self {
            stop,
            tracker: TaskTracker::new(),
            running: Vec::new(),
        }
    }

    pub(super) fn spawn(
        &mut self,
        name: &'static str,
        task: impl Future<Output = ()> + Send + 'static,
    ) {
        self.running.push((name, self.tracker.spawn(task)));
    }

    /// Stops the tasks and waits until they have finished what they were
    /// doing, or until `deadline`, when those still running are aborted.
    pub(super) async fn stop_by(self, deadline: Instant) {
        self.stop.cancel();
        self.tracker.close();
        if tokio::time::timeout_at(deadline, self.tracker.wait())
            .await
            .is_ok()
        {
            return;
        }
        for (name, task) in &self.running {
            if !task.is_finished() {
                warn!(
                    task = name,
                    "background task still running at the drain timeout: aborted"
                );
                task.abort();
            }
        }
    }
}

/// Readiness of the API follows the store: NOT_SERVING while it is unreachable.
pub(super) async fn report_readiness(
    reporter: HealthReporter,
    service: IdempotencyService,
    interval: Duration,
    stop: CancellationToken,
) {
    crate::shutdown::every(interval, stop.clone(), || async {
        let ready = service.store().check_ready().await;
        // A check that ends after the drain began must not report SERVING
        // over the drain's NOT_SERVING.
        if stop.is_cancelled() {
            return;
        }
        match ready {
            Ok(()) => {
                reporter
                    .set_serving::<IdempotencyServiceServer<IdempotencyApi>>()
                    .await
            }
            Err(error) => {
                warn!(%error, "store not ready");
                reporter
                    .set_not_serving::<IdempotencyServiceServer<IdempotencyApi>>()
                    .await;
            }
        }
    })
    .await;
}

/// Serves `/metrics` until `stop` is cancelled. Scrapes under way run in
/// tasks of their own and finish.
pub(super) async fn export_metrics(exporter: ExporterFuture, stop: CancellationToken) {
    if let Some(Err(error)) = stop.run_until_cancelled(exporter).await {
        warn!(?error, "metrics endpoint stopped");
    }
}

/// Where the plaintext health listener serves, with the API's bounds on
/// connections and streams.
pub(super) struct HealthListener {
    pub(super) listener: TcpListener,
    pub(super) server: ServerSettings,
    pub(super) connections: ConnectionSettings,
}

/// The plaintext health listener: stops accepting when `stop` is cancelled
/// and answers the checks under way.
pub(super) async fn serve_health(
    listener: HealthListener,
    reporter: HealthReporter,
    metrics: Metrics,
    stop: CancellationToken,
) {
    let health = HealthServer::new(HealthService::from_health_reporter(reporter));
    let incoming = incoming(listener.listener, listener.connections, None, metrics);
    let served = listener
        .server
        .server()
        .add_service(health)
        .serve_with_incoming_shutdown(incoming, stop.cancelled_owned())
        .await;
    if let Err(error) = served {
        warn!(%error, "plaintext health listener stopped");
    }
}
