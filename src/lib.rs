//! idemd: a central gRPC service that makes side effects happen at most once
//! per logical request. See DESIGN.md for the contract and README.md for use.

pub mod auth;
pub mod config;
mod dev;
pub mod domain;
pub mod error;
pub mod grpc;
pub mod metrics;
pub mod proto;
pub mod service;
pub mod shutdown;
pub mod store;
pub mod sweeper;
pub mod telemetry;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sqlx::migrate::MigrateDatabase;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_stream::wrappers::TcpListenerStream;
use tracing::{info, warn};

use crate::auth::Authenticator;
use crate::config::{Cli, Command, DatabaseArgs, ServeArgs, TenantCommand};
use crate::domain::{Error, Limits};
use crate::grpc::server::{IdempotencyApi, report_readiness, routes};
use crate::metrics::{LabelPolicy, Metrics};
use crate::proto::idempotency_server::IdempotencyServer;
use crate::service::IdempotencyService;
use crate::store::Store;
use crate::store::postgres::{PostgresOptions, PostgresStore};
use crate::store::sqlite::{DatabaseLock, SqliteOptions, SqliteStore};

pub use crate::error::BoxError;

pub async fn run(cli: Cli) -> Result<(), BoxError> {
    match cli.command {
        Command::Serve(args) => {
            let limits = args.bounds.limits()?;
            if args.dev && !args.listen.ip().is_loopback() {
                return Err(format!(
                    "--dev listens on loopback addresses only (its token is printed and kept in \
                     the data directory), not on {}; without --dev, create tenants with \
                     `idemd tenant create`",
                    args.listen
                )
                .into());
            }
            let opened = open_store(&cli.database, Purpose::Serve(args.migrate_on_start)).await?;
            let listener = TcpListener::bind(args.listen).await?;
            if args.dev {
                let token =
                    dev::ensure_dev_tenant(opened.store.as_ref(), &cli.database.data_dir).await?;
                dev::announce(&token, &cli.database.data_dir);
            }
            info!(
                listen = %listener.local_addr()?,
                store = opened.store.kind(),
                data = %opened.location,
                dev = args.dev,
                "idemd serving"
            );
            serve(listener, opened.store, limits, &args, shutdown::signalled()).await
        }
        Command::Migrate => {
            let opened = open_store(&cli.database, Purpose::Migrate).await?;
            opened.store.close().await;
            info!(store = opened.store.kind(), data = %opened.location, "migrations applied");
            Ok(())
        }
        Command::Tenant(command) => {
            let opened = open_store(&cli.database, Purpose::Administer).await?;
            let outcome = manage_tenant(opened.store.as_ref(), command).await;
            opened.store.close().await;
            outcome
        }
    }
}

/// Where a command keeps its records, as DATABASE_URL (or its absence) says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreLocation {
    Postgres {
        url: String,
    },
    /// The embedded store's database file.
    Sqlite {
        path: PathBuf,
    },
}

impl StoreLocation {
    /// `postgres://…`/`postgresql://…` or `sqlite://PATH` pick the store; no
    /// URL picks the embedded store in the data directory.
    pub fn of(database: &DatabaseArgs) -> Result<Self, BoxError> {
        let url = database
            .database_url
            .as_deref()
            .map(str::trim)
            .filter(|url| !url.is_empty());
        let Some(url) = url else {
            return Ok(Self::Sqlite {
                path: database.data_dir.join(SQLITE_FILE_NAME),
            });
        };
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(Self::Postgres {
                url: url.to_owned(),
            });
        }
        // The URL is not echoed: it may hold a password.
        let Some(path) = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
        else {
            return Err(
                "DATABASE_URL must start with postgres://, postgresql:// or sqlite:// \
                 (or be unset for the embedded store in --data-dir)"
                    .into(),
            );
        };
        if path.is_empty() || path.contains(":memory:") || path.contains('?') {
            return Err(
                "a sqlite:// DATABASE_URL names a database file, without parameters \
                 (idemd sets SQLite's options itself; an in-memory database would lose \
                 every record)"
                    .into(),
            );
        }
        Ok(Self::Sqlite {
            path: PathBuf::from(path),
        })
    }
}

/// The embedded store's file in the data directory.
pub const SQLITE_FILE_NAME: &str = "idemd.db";

/// What a command opens its store for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    /// Serving; for Postgres, whether to migrate first (the embedded store is
    /// always migrated by its owner).
    Serve(bool),
    Migrate,
    /// A tenant command: a short write, possibly beside a running server.
    Administer,
}

struct OpenedStore {
    store: Arc<dyn Store>,
    /// Where the records live, for the operator (no credentials).
    location: String,
}

async fn open_store(database: &DatabaseArgs, purpose: Purpose) -> Result<OpenedStore, BoxError> {
    match StoreLocation::of(database)? {
        StoreLocation::Postgres { url } => {
            let migrate = match purpose {
                Purpose::Serve(migrate) => migrate,
                Purpose::Migrate => true,
                Purpose::Administer => false,
            };
            let location = postgres_location(&url);
            let store = open_postgres(database, url, migrate).await?;
            if matches!(purpose, Purpose::Serve(_)) {
                store.warn_if_commits_are_asynchronous().await?;
            }
            Ok(OpenedStore {
                store: Arc::new(store),
                location,
            })
        }
        StoreLocation::Sqlite { path } => {
            let store = open_sqlite(database, &path, purpose).await?;
            let location = std::path::absolute(&path).unwrap_or(path);
            Ok(OpenedStore {
                store: Arc::new(store),
                location: location.display().to_string(),
            })
        }
    }
}

/// host:port/database of a Postgres URL, without user or password.
fn postgres_location(url: &str) -> String {
    match url.parse::<sqlx::postgres::PgConnectOptions>() {
        Ok(options) => format!(
            "postgres {}:{}/{}",
            options.get_host(),
            options.get_port(),
            options.get_database().unwrap_or_default()
        ),
        Err(_) => "postgres".to_owned(),
    }
}

async fn open_postgres(
    database: &DatabaseArgs,
    url: String,
    migrate: bool,
) -> Result<PostgresStore, BoxError> {
    if migrate && !sqlx::Postgres::database_exists(&url).await? {
        warn!("database does not exist: creating it");
        sqlx::Postgres::create_database(&url).await?;
    }
    let store = PostgresStore::connect(&PostgresOptions {
        url,
        max_connections: database.db_max_connections,
        acquire_timeout: database.db_acquire_timeout,
    })
    .await?;
    if migrate {
        store.migrate().await?;
    }
    if !database.pg_notify {
        return Ok(store.without_change_notifications());
    }
    Ok(store)
}

/// Opens the embedded store. Serving and migrating need to own the file (its
/// lock); a tenant command owns it when nobody does, and otherwise writes
/// beside the running server, which SQLite serialises with the server's
/// writes.
async fn open_sqlite(
    database: &DatabaseArgs,
    path: &Path,
    purpose: Purpose,
) -> Result<SqliteStore, BoxError> {
    let options = SqliteOptions {
        path: path.to_owned(),
        max_read_connections: database.db_max_connections,
        acquire_timeout: database.db_acquire_timeout,
    };
    if let Some(lock) = DatabaseLock::try_acquire(path)? {
        let store = SqliteStore::open(&options, lock).await?;
        info!(database = %path.display(), "embedded sqlite store opened and migrated");
        return Ok(store);
    }
    let holder = DatabaseLock::holder(path)
        .map(|pid| format!(" (pid {pid})"))
        .unwrap_or_default();
    match purpose {
        Purpose::Administer => {
            info!(
                database = %path.display(),
                "another idemd process{holder} owns the embedded store: writing beside it"
            );
            Ok(SqliteStore::open_beside_owner(&options).await?)
        }
        Purpose::Serve(_) => Err(format!(
            "{} is in use by another idemd process{holder}: the embedded store belongs to one \
             process. Stop that one, point --data-dir elsewhere, or use Postgres \
             (DATABASE_URL=postgres://…) to run several replicas",
            path.display()
        )
        .into()),
        Purpose::Migrate => Err(format!(
            "{} is in use by another idemd process{holder}, which migrated it when it started",
            path.display()
        )
        .into()),
    }
}

async fn manage_tenant(store: &dyn Store, command: TenantCommand) -> Result<(), BoxError> {
    match command {
        TenantCommand::Create { name } => {
            let token = auth::generate_token()?;
            let tenant = store
                .create_tenant(&name, &auth::token_sha256(&token))
                .await?;
            info!(tenant = tenant.0, name = %name, "tenant created");
            // The token alone on stdout, so scripts can capture it.
            println!("{token}");
            Ok(())
        }
        TenantCommand::Revoke { name } => {
            if store.revoke_tenant(&name).await? {
                info!(name = %name, "tenant revoked");
                Ok(())
            } else {
                Err(Box::new(Error::NotFound))
            }
        }
    }
}

/// Everything a server serves, built once for production and for tests.
pub struct Application {
    pub routes: tonic::service::Routes,
    pub health: tonic_health::server::HealthReporter,
    pub service: IdempotencyService,
    /// Tells waiting Claims to answer now: the server is draining.
    pub shutting_down: watch::Sender<bool>,
}

impl Application {
    /// With a metrics registry of its own that nothing serves (tests render it).
    pub async fn new(
        store: Arc<dyn Store>,
        limits: Limits,
        auth_cache_ttl: std::time::Duration,
    ) -> Result<Self, BoxError> {
        let (metrics, _) = Metrics::new(LabelPolicy::default(), None)?;
        Self::with_metrics(store, limits, auth_cache_ttl, metrics).await
    }

    pub async fn with_metrics(
        store: Arc<dyn Store>,
        limits: Limits,
        auth_cache_ttl: std::time::Duration,
        metrics: Metrics,
    ) -> Result<Self, BoxError> {
        let (shutting_down, shutting_down_receiver) = watch::channel(false);
        let service =
            IdempotencyService::new(store.clone(), metrics.clone(), shutting_down_receiver);
        let authenticator = Authenticator::new(store, auth_cache_ttl);
        let api = IdempotencyApi::new(service.clone(), authenticator, Arc::new(limits));
        let (health, health_service) = tonic_health::server::health_reporter();
        health
            .set_serving::<IdempotencyServer<IdempotencyApi>>()
            .await;
        Ok(Self {
            routes: routes(api, metrics, health_service)?,
            health,
            service,
            shutting_down,
        })
    }

    /// Health NOT_SERVING (so load balancers stop sending), and waiting
    /// Claims answer at once.
    pub async fn begin_drain(&self) {
        self.health
            .set_service_status("", tonic_health::ServingStatus::NotServing)
            .await;
        self.health
            .set_not_serving::<IdempotencyServer<IdempotencyApi>>()
            .await;
        let _ = self.shutting_down.send(true);
    }
}

/// The API's TLS identity, when configured; read at start-up, so a bad file
/// stops the server before it listens.
fn tls_config(args: &ServeArgs) -> Result<Option<tonic::transport::ServerTlsConfig>, BoxError> {
    let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) else {
        return Ok(None);
    };
    let read = |path: &Path| {
        std::fs::read(path).map_err(|error| format!("cannot read {}: {error}", path.display()))
    };
    let identity = tonic::transport::Identity::from_pem(read(cert)?, read(key)?);
    Ok(Some(
        tonic::transport::ServerTlsConfig::new().identity(identity),
    ))
}

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
    let (metrics, exporter) = Metrics::new(args.metrics_labels(), args.metrics_listen.0)?;
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
        args.sweeper()?,
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
