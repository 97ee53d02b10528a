//! What runs beside the server while it serves, and how it stops: every task
//! watches one token, finishes the round it is in when the token is
//! cancelled, and is waited for before the store closes.
//!
//! A task that ends before the token is cancelled (a panic, or a return
//! nobody asked for) has stopped doing its job while the server goes on
//! answering: retention no longer swept, readiness no longer checked. Each
//! task is watched: its death is logged as an error and turns readiness
//! NOT_SERVING for good, so that the orchestrator replaces the replica.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use metrics_exporter_prometheus::ExporterFuture;
use tokio::net::TcpListener;
use tokio::task::{AbortHandle, JoinError, JoinHandle};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic_health::pb::health_server::HealthServer;
use tonic_health::server::{HealthReporter, HealthService};
use tracing::{error, warn};

use super::transport::ServerSettings;
use crate::grpc::server::IdempotencyApi;
use crate::listen::{ConnectionSettings, incoming};
use crate::metrics::Metrics;
use crate::proto::idempotency_service_server::IdempotencyServiceServer;
use crate::service::IdempotencyService;

/// Whether a background task died while the server was serving: once
/// set, readiness stays NOT_SERVING.
#[derive(Debug, Clone, Default)]
pub(super) struct TaskDeaths(Arc<AtomicBool>);

impl TaskDeaths {
    pub(super) fn any(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    fn record(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The background tasks of one server.
pub(super) struct BackgroundTasks {
    stop: CancellationToken,
    tracker: TaskTracker,
    /// Kept to abort the tasks that outlive the drain: one still holding a
    /// store connection would keep the store from closing.
    running: Vec<(&'static str, AbortHandle)>,
    health: HealthReporter,
    deaths: TaskDeaths,
}

impl BackgroundTasks {
    /// Tasks that stop when `stop` is cancelled; the death of one before
    /// then is recorded in `deaths` and reported on `health`.
    pub(super) fn new(stop: CancellationToken, health: HealthReporter, deaths: TaskDeaths) -> Self {
        Self {
            stop,
            tracker: TaskTracker::new(),
            running: Vec::new(),
            health,
            deaths,
        }
    }

    pub(super) fn spawn(
        &mut self,
        name: &'static str,
        task: impl Future<Output = ()> + Send + 'static,
    ) {
        let task = self.tracker.spawn(task);
        self.running.push((name, task.abort_handle()));
        self.tracker.spawn(watch(
            name,
            task,
            self.stop.clone(),
            self.health.clone(),
            self.deaths.clone(),
        ));
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

/// Waits for a background task to end; an end before `stop` (a panic
/// included, which tokio catches in the task) is logged and reported.
async fn watch(
    name: &'static str,
    task: JoinHandle<()>,
    stop: CancellationToken,
    health: HealthReporter,
    deaths: TaskDeaths,
) {
    let ended = task.await;
    if let Err(ended) = &ended
        && ended.is_cancelled()
    {
        // Aborted at the drain timeout: stop_by has said so.
        return;
    }
    if stop.is_cancelled() && ended.is_ok() {
        return;
    }
    match ended {
        Err(ended) => error!(task = name, cause = %panic_cause(ended), "background task panicked"),
        Ok(()) => error!(
            task = name,
            "background task ended while the server was serving"
        ),
    }
    if stop.is_cancelled() {
        return;
    }
    deaths.record();
    health
        .set_not_serving::<IdempotencyServiceServer<IdempotencyApi>>()
        .await;
}

/// What a panic said, when it said it with a string.
fn panic_cause(ended: JoinError) -> String {
    let Ok(payload) = ended.try_into_panic() else {
        return "unknown".into();
    };
    payload
        .downcast_ref::<&str>()
        .map(|cause| (*cause).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown".into())
}

/// Readiness of the API follows the store: NOT_SERVING while it is
/// unreachable, and for good once a background task died.
pub(super) async fn report_readiness(
    reporter: HealthReporter,
    service: IdempotencyService,
    deaths: TaskDeaths,
    interval: Duration,
    stop: CancellationToken,
) {
    crate::shutdown::every(interval, stop.clone(), || async {
        let ready = service.store().check_ready().await;
        // A check that ends after the drain began must not report SERVING
        // over the drain's NOT_SERVING, nor one after a task's death over
        // its NOT_SERVING.
        if stop.is_cancelled() {
            return;
        }
        if deaths.any() {
            // Said again each round, should a check under way have said
            // SERVING just after the death.
            reporter
                .set_not_serving::<IdempotencyServiceServer<IdempotencyApi>>()
                .await;
            service.metrics().serving(false);
            return;
        }
        match ready {
            Ok(()) => {
                reporter
                    .set_serving::<IdempotencyServiceServer<IdempotencyApi>>()
                    .await;
                service.metrics().serving(true);
            }
            Err(error) => {
                warn!(%error, "store not ready");
                reporter
                    .set_not_serving::<IdempotencyServiceServer<IdempotencyApi>>()
                    .await;
                service.metrics().serving(false);
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

#[cfg(test)]
mod tests {
    use std::pin::Pin;

    use tonic_health::pb::health_server::Health;
    use tonic_health::pb::{HealthCheckRequest, health_check_response::ServingStatus};

    use super::*;

    async fn api_status(health: &HealthService) -> ServingStatus {
        let request = tonic::Request::new(HealthCheckRequest {
            service: crate::grpc::observe::API_SERVICE.into(),
        });
        let answer = health.check(request).await.expect("the API is known");
        ServingStatus::try_from(answer.into_inner().status).expect("a status")
    }

    type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

    /// A serving API's health, and the background tasks that report to it.
    async fn serving_tasks() -> (
        HealthService,
        TaskDeaths,
        CancellationToken,
        BackgroundTasks,
    ) {
        let (reporter, _) = tonic_health::server::health_reporter();
        let health = HealthService::from_health_reporter(reporter.clone());
        reporter
            .set_serving::<IdempotencyServiceServer<IdempotencyApi>>()
            .await;
        let deaths = TaskDeaths::default();
        let stop = CancellationToken::new();
        let tasks = BackgroundTasks::new(stop.clone(), reporter, deaths.clone());
        (health, deaths, stop, tasks)
    }

    #[tokio::test]
    async fn a_task_that_dies_while_serving_turns_readiness_not_serving() {
        let panics: Task = Box::pin(async { panic!("a zero interval") });
        let returns: Task = Box::pin(async {});
        for (what, task) in [("panics", panics), ("returns", returns)] {
            let (health, deaths, _stop, mut tasks) = serving_tasks().await;
            tasks.spawn("doomed", task);
            let waited = Instant::now() + Duration::from_secs(5);
            while !deaths.any() {
                assert!(Instant::now() < waited, "the task that {what} went unseen");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            assert_eq!(
                api_status(&health).await,
                ServingStatus::NotServing,
                "{what}"
            );
            tasks.stop_by(Instant::now() + Duration::from_secs(1)).await;
        }
    }

    #[tokio::test]
    async fn a_task_that_ends_at_the_stop_is_no_death() {
        let (health, deaths, stop, mut tasks) = serving_tasks().await;
        tasks.spawn("well-behaved", stop.clone().cancelled_owned());
        tasks.stop_by(Instant::now() + Duration::from_secs(1)).await;
        assert!(!deaths.any());
        assert_eq!(api_status(&health).await, ServingStatus::Serving);
    }
}
