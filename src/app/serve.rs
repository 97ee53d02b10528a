//! Serving until SIGTERM, then draining.

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_stream::wrappers::TcpListenerStream;
use tracing::{info, warn};

use super::Application;
use super::background::report_readiness;
use super::settings::{label_policy_from, sweeper_settings_from};
use super::tls::tls_config;
use crate::config::ServeArgs;
use crate::domain::Limits;
use crate::error::BoxError;
use crate::metrics::{self, Metrics};
use crate::store::Store;
use crate::sweeper;

/// Serves until `shutdown` resolves, then drains: health goes NOT_SERVING,
/// no new connections are accepted, in-flight calls get `drain_timeout`, the
/// store closes.
pub async fn serve(
    listener: TcpListener,
    store: Arc<dyn Store>,
    limits: Limits,
    args: &ServeArgs,
    shutdown: impl Future<Output = ()>,
) -> Result<(), BoxError> {
    let (metrics, exporter) = Metrics::new(label_policy_from(args), args.metrics_listen.0)?;
    if let (Some(exporter), Some(address)) = (exporter, args.metrics_listen.0) {
        info!(%address, "metrics served at /metrics");
        tokio::spawn(async move {
            if let Err(error) = exporter.await {
                warn!(?error, "metrics endpoint stopped");
            }
        });
    }
    let application =
        Application::with_metrics(store.clone(), limits, args.auth_cache_ttl, metrics.clone())
            .await?;
    let relay = tokio::spawn(
        application
            .service
            .clone()
            .relay_changes_from_other_replicas(),
    );
    let gauges = tokio::spawn(metrics::observe_store(
        store.clone(),
        metrics.clone(),
        args.gauge_interval,
        application.shutting_down.subscribe(),
    ));
    let readiness = tokio::spawn(report_readiness(
        application.health.clone(),
        application.service.clone(),
        args.readiness_interval,
        application.shutting_down.subscribe(),
    ));
    let sweeper = tokio::spawn(sweeper::run(
        store.clone(),
        sweeper_settings_from(args)?,
        metrics,
        application.shutting_down.subscribe(),
    ));
    let (drain_sender, drain) = tokio::sync::watch::channel(false);
    let drained = |mut drain: watch::Receiver<bool>| async move {
        let _ = drain.wait_for(|draining| *draining).await;
    };
    let health_server = match args.health_listen {
        Some(address) => {
            let health_listener = TcpListener::bind(address).await?;
            info!(listen = %health_listener.local_addr()?, "plaintext health served");
            let health = tonic_health::pb::health_server::HealthServer::new(
                tonic_health::server::HealthService::from_health_reporter(
                    application.health.clone(),
                ),
            );
            Some(tokio::spawn(
                tonic::transport::Server::builder()
                    .add_service(health)
                    .serve_with_incoming_shutdown(
                        TcpListenerStream::new(health_listener),
                        drained(drain.clone()),
                    ),
            ))
        }
        None => None,
    };
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = tls_config(args)? {
        builder = builder.tls_config(tls)?;
        info!("tls on");
    }
    let server = builder
        .add_routes(application.routes.clone())
        .serve_with_incoming_shutdown(TcpListenerStream::new(listener), drained(drain));
    tokio::pin!(server);
    tokio::select! {
        result = &mut server => {
            result?;
            return Ok(());
        }
        () = shutdown => {}
    }
    application.begin_drain().await;
    let _ = drain_sender.send(true);
    match tokio::time::timeout(args.drain_timeout, &mut server).await {
        Ok(result) => result?,
        Err(_) => {
            warn!(timeout = ?args.drain_timeout, "drain timed out: abandoning in-flight calls")
        }
    }
    if let Some(health_server) = health_server {
        health_server.abort();
    }
    readiness.abort();
    sweeper.abort();
    gauges.abort();
    relay.abort();
    store.close().await;
    info!("idemd stopped");
    Ok(())
}
