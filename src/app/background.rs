//! What runs beside the server while it serves.

use std::time::Duration;

use tonic_health::server::HealthReporter;

use crate::grpc::server::IdempotencyApi;
use crate::proto::idempotency_server::IdempotencyServer;
use crate::service::IdempotencyService;

/// Readiness of the API follows the store: NOT_SERVING while it is unreachable.
pub(super) async fn report_readiness(
    reporter: HealthReporter,
    service: IdempotencyService,
    interval: Duration,
    shutting_down: tokio::sync::watch::Receiver<bool>,
) {
    crate::shutdown::every(interval, shutting_down, || async {
        match service.store().check_ready().await {
            Ok(()) => {
                reporter
                    .set_serving::<IdempotencyServer<IdempotencyApi>>()
                    .await
            }
            Err(error) => {
                tracing::warn!(%error, "store not ready");
                reporter
                    .set_not_serving::<IdempotencyServer<IdempotencyApi>>()
                    .await;
            }
        }
    })
    .await;
}
