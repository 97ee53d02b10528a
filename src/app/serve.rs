//! Serving until SIGTERM, then draining.

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::time::Instant;
use tracing::{info, warn};

use super::Application;
use super::background::{
    BackgroundTasks, HealthListener, TaskDeaths, export_metrics, report_readiness, serve_health,
};
use super::policy::{self, LoadedPolicies};
use super::settings::{
    admission_settings_from, auth_settings_from, connection_settings_from, label_policy_from,
    server_settings_from, sweeper_settings_from, waiter_limits_from,
};
use crate::config::ServeArgs;
use crate::console::Console;
use crate::domain::Limits;
use crate::error::BoxError;
use crate::listen::{ConnectionSettings, incoming};
use crate::listen::{ServerTls, TlsFiles, reload_every};
use crate::metrics::{self, Metrics};
use crate::service::new_keys::NewKeySettings;
use crate::store::Store;
use crate::sweeper::{self, SweeperSettings};

/// Serves until `shutdown` resolves, then drains: health goes NOT_SERVING,
/// no new connections are accepted, in-flight calls and the background
/// tasks' current rounds get `drain_timeout`, the store closes.
pub(super) async fn serve(
    listener: TcpListener,
    store: Arc<dyn Store>,
    (limits, policies): (Limits, LoadedPolicies),
    args: &ServeArgs,
    shutdown: impl Future<Output = ()>,
) -> Result<(), BoxError> {
    // Everything that can refuse the flags or a port, before any task starts.
    let sweeper_settings = sweeper_settings_from(args)?;
    let audit_retention = chrono::TimeDelta::from_std(args.audit_retention)
        .map_err(|_| "--audit-retention is too large")?;
    let admission = admission_settings_from(&args.transport, &args.bounds)?;
    let connections = connection_settings_from(&args.transport)?;
    let mut builder = server_settings_from(&args.transport).server();
    let tls_files = TlsFiles::from_args(args);
    let tls = tls_files.as_ref().map(ServerTls::load).transpose()?;
    let console_tls_files = TlsFiles::console_from_args(args);
    // Read before the console listens, as the API's are: a bad file stops
    // the server first.
    let console_tls = match (args.console_listen, &console_tls_files) {
        (Some(_), Some(files)) => Some(ServerTls::load(files)?),
        _ => None,
    };
    let console_listener = match args.console_listen {
        Some(address) if console_tls_files.is_none() && !address.ip().is_loopback() => {
            return Err(format!(
                "--console-listen takes a loopback address without TLS, not {address}: the \
                 console would serve plain HTTP and its session cookie must not cross a \
                 network; give --console-tls-cert and --console-tls-key \
                 (IDEMD_CONSOLE_TLS_CERT, IDEMD_CONSOLE_TLS_KEY) to serve it over HTTPS, or \
                 reach a loopback console through `kubectl port-forward` or an SSH tunnel"
            )
            .into());
        }
        Some(address) => Some(TcpListener::bind(address).await?),
        None => None,
    };
    let health_listener = match args.health_listen {
        Some(address) => Some(TcpListener::bind(address).await?),
        None => None,
    };
    let (metrics, exporter) = Metrics::new(label_policy_from(args), args.metrics_listen.0)?;
    let application = Application::build(
        store.clone(),
        limits.clone(),
        policies.in_force.subscribe(),
        auth_settings_from(args),
        admission,
        waiter_limits_from(&args.transport),
        metrics.clone(),
        crate::service::cache::TerminalCache::new(args.result_cache_bytes),
    )
    .await?;
    // The service the routes serve shares these counts.
    application
        .service
        .answer_tallies()
        .set_capacity(args.answer_count_capacity);
    application
        .service
        .new_key_retries()
        .configure(NewKeySettings {
            window: args.new_key_retry_window,
            threshold: args.new_key_retry_threshold,
        });

    let stop = application.draining.clone();
    let deaths = TaskDeaths::default();
    let mut background =
        BackgroundTasks::new(stop.clone(), application.health.clone(), deaths.clone());
    if let (Some(exporter), Some(address)) = (exporter, args.metrics_listen.0) {
        info!(%address, "metrics served at /metrics");
        background.spawn("metrics exporter", export_metrics(exporter, stop.clone()));
    }
    if let (Some(files), Some((tls, loaded))) = (tls_files, &tls) {
        background.spawn(
            "tls reload",
            reload_every(
                tls.clone(),
                files,
                loaded.clone(),
                args.tls_reload_interval,
                metrics.clone(),
                stop.clone(),
            ),
        );
    }
    if let Some((path, read)) = policies.file {
        background.spawn(
            "policy reload",
            policy::reload_every(
                path,
                read,
                limits,
                policies.in_force,
                args.policy_reload_interval,
                metrics.clone(),
                stop.clone(),
            ),
        );
    }
    if let Some(listener) = console_listener {
        info!(
            listen = %listener.local_addr()?,
            https = console_tls.is_some(),
            "web console served"
        );
        let console = Console::new(
            application.api.clone(),
            application.authenticator.clone(),
            metrics.clone(),
        );
        let stopped = stop.clone();
        match (console_tls, console_tls_files) {
            (Some((tls, loaded)), Some(files)) => {
                background.spawn(
                    "console tls reload",
                    reload_every(
                        tls.clone(),
                        files,
                        loaded,
                        args.tls_reload_interval,
                        metrics.clone(),
                        stop.clone(),
                    ),
                );
                let settings = console_connection_settings(&connections);
                let metrics = metrics.clone();
                background.spawn("console", async move {
                    let served = crate::console::serve_tls(
                        listener,
                        (tls, settings),
                        console,
                        metrics,
                        stopped,
                    );
                    if let Err(error) = served.await {
                        warn!(%error, "the web console stopped");
                    }
                });
            }
            _ => {
                background.spawn("console", async move {
                    if let Err(error) = crate::console::serve(listener, console, stopped).await {
                        warn!(%error, "the web console stopped");
                    }
                });
            }
        }
    }
    if let Some(health_listener) = health_listener {
        info!(listen = %health_listener.local_addr()?, "plaintext health served");
        background.spawn(
            "health server",
            serve_health(
                HealthListener {
                    listener: health_listener,
                    server: server_settings_from(&args.transport),
                    connections: connections.clone(),
                },
                application.health.clone(),
                metrics.clone(),
                stop.clone(),
            ),
        );
    }
    spawn_replica_tasks(
        &mut background,
        &application,
        &store,
        metrics,
        args,
        (sweeper_settings, audit_retention),
        deaths,
    );

    let server = builder
        .add_routes(application.routes.clone())
        .serve_with_incoming_shutdown(
            incoming(
                listener,
                connections,
                tls.map(|(tls, _)| tls),
                application.service.metrics().clone(),
            ),
            stop.cancelled_owned(),
        );
    tokio::pin!(server);
    let stopped_on_its_own = tokio::select! {
        result = &mut server => Some(result),
        () = shutdown => None,
    };
    // One deadline for the calls and the background tasks, which drain
    // side by side: the orchestrator's grace period is one too.
    let drain_deadline = Instant::now() + args.drain_timeout;
    application.begin_drain().await;
    let served = match stopped_on_its_own {
        Some(result) => result,
        None => match tokio::time::timeout_at(drain_deadline, &mut server).await {
            Ok(result) => result,
            Err(_) => {
                warn!(timeout = ?args.drain_timeout, "drain timed out: abandoning in-flight calls");
                Ok(())
            }
        },
    };
    // The answers given while the calls drained are counted too.
    let flushed = tokio::time::timeout_at(
        drain_deadline,
        application.service.answer_tallies().flush(store.as_ref()),
    )
    .await;
    if !matches!(flushed, Ok(Ok(_))) {
        warn!("drain: the last counts of replays and Pending answers were not added");
    }
    background.stop_by(drain_deadline).await;
    store.close().await;
    served?;
    info!("idemd stopped");
    Ok(())
}

/// The console's connections: the API's timeouts, far fewer of them (a few
/// people's browsers, each with a handful), so that a flood of connections
/// to the console cannot take the process's file descriptors from the API.
fn console_connection_settings(api: &ConnectionSettings) -> ConnectionSettings {
    ConnectionSettings {
        max_connections: 256,
        max_connections_per_source: 64,
        ..api.clone()
    }
}

/// The tasks every replica runs beside the API: relaying other replicas'
/// changes to waiting Claims, the gauges, readiness, tokens' last use, audit
/// pruning and the sweeper (whose settings, and the audit retention, `serve`
/// checked before anything started).
fn spawn_replica_tasks(
    background: &mut BackgroundTasks,
    application: &Application,
    store: &Arc<dyn Store>,
    metrics: Metrics,
    args: &ServeArgs,
    (sweeper_settings, audit_retention): (SweeperSettings, chrono::TimeDelta),
    deaths: TaskDeaths,
) {
    let stop = application.draining.clone();
    background.spawn(
        "change relay",
        application
            .service
            .clone()
            .relay_changes_from_other_replicas(stop.clone()),
    );
    background.spawn(
        "gauges",
        metrics::observe_store(
            store.clone(),
            metrics.clone(),
            args.gauge_interval,
            stop.clone(),
        ),
    );
    background.spawn(
        "readiness",
        report_readiness(
            application.health.clone(),
            application.service.clone(),
            deaths,
            args.readiness_interval,
            stop.clone(),
        ),
    );
    background.spawn(
        "token last-used",
        application
            .authenticator
            .clone()
            .record_last_used_every(crate::auth::LAST_USED_INTERVAL, stop.clone()),
    );
    background.spawn(
        "answer counts",
        application.service.answer_tallies().clone().flush_every(
            store.clone(),
            args.answer_count_interval,
            stop.clone(),
        ),
    );
    background.spawn(
        "holds",
        application.service.holds_in_force().clone().refresh_every(
            store.clone(),
            crate::service::holds::DEFAULT_REFRESH,
            stop.clone(),
        ),
    );
    background.spawn(
        "audit pruning",
        sweeper::prune_audit_log(
            store.clone(),
            audit_retention,
            sweeper::AUDIT_PRUNE_INTERVAL,
            stop.clone(),
        ),
    );
    background.spawn(
        "sweeper",
        sweeper::run(store.clone(), sweeper_settings, metrics, stop.clone()),
    );
}
