//! idemd: a central gRPC service that makes side effects happen at most once
//! per logical request. See DESIGN.md for the contract and README.md for use.

pub mod auth;
pub mod config;
pub mod domain;
pub mod grpc;
pub mod service;
pub mod shutdown;
pub mod store;
pub mod sweeper;
pub mod telemetry;

pub mod proto {
    #![allow(clippy::all, unreachable_pub, missing_docs)]
    tonic::include_proto!("idem.v1");
    pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("idem_descriptor");
}

use std::future::Future;
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
use crate::proto::idempotency_server::IdempotencyServer;
use crate::service::IdempotencyService;
use crate::store::Store;
use crate::store::postgres::{PostgresOptions, PostgresStore};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

pub async fn run(cli: Cli) -> Result<(), BoxError> {
    match cli.command {
        Command::Serve(args) => {
            let limits = args.bounds.limits()?;
            let store = open_postgres(&cli.database, args.migrate_on_start).await?;
            store.warn_if_commits_are_asynchronous().await?;
            let listener = TcpListener::bind(args.listen).await?;
            info!(listen = %listener.local_addr()?, store = store.kind(), "idemd serving");
            let store: Arc<dyn Store> = Arc::new(store);
            serve(listener, store, limits, &args, shutdown::signalled()).await
        }
        Command::Migrate => {
            let store = open_postgres(&cli.database, true).await?;
            store.close().await;
            info!("migrations applied");
            Ok(())
        }
        Command::Tenant(command) => {
            let store = open_postgres(&cli.database, false).await?;
            let outcome = manage_tenant(&store, command).await;
            store.close().await;
            outcome
        }
    }
}

async fn open_postgres(database: &DatabaseArgs, migrate: bool) -> Result<PostgresStore, BoxError> {
    let url = database.database_url.clone().ok_or(
        "DATABASE_URL (or --database-url) must name the Postgres database, \
         e.g. postgres://postgres@127.0.0.1:5432/idemd",
    )?;
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
    Ok(store)
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
    pub async fn new(
        store: Arc<dyn Store>,
        limits: Limits,
        auth_cache_ttl: std::time::Duration,
    ) -> Result<Self, BoxError> {
        let (shutting_down, shutting_down_receiver) = watch::channel(false);
        let service = IdempotencyService::new(store.clone(), shutting_down_receiver);
        let authenticator = Authenticator::new(store, auth_cache_ttl);
        let api = IdempotencyApi::new(service.clone(), authenticator, Arc::new(limits));
        let (health, health_service) = tonic_health::server::health_reporter();
        health
            .set_serving::<IdempotencyServer<IdempotencyApi>>()
            .await;
        Ok(Self {
            routes: routes(api, health_service)?,
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
    let application = Application::new(store.clone(), limits, args.auth_cache_ttl).await?;
    let readiness = tokio::spawn(report_readiness(
        application.health.clone(),
        application.service.clone(),
        args.readiness_interval,
        application.shutting_down.subscribe(),
    ));
    let sweeper = tokio::spawn(sweeper::run(
        store.clone(),
        args.sweeper()?,
        application.shutting_down.subscribe(),
    ));
    let (drain_sender, drain) = tokio::sync::oneshot::channel::<()>();
    let server = tonic::transport::Server::builder()
        .add_routes(application.routes.clone())
        .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async {
            let _ = drain.await;
        });
    tokio::pin!(server);
    tokio::select! {
        result = &mut server => {
            result?;
            return Ok(());
        }
        () = shutdown => {}
    }
    application.begin_drain().await;
    let _ = drain_sender.send(());
    match tokio::time::timeout(args.drain_timeout, &mut server).await {
        Ok(result) => result?,
        Err(_) => {
            warn!(timeout = ?args.drain_timeout, "drain timed out: abandoning in-flight calls")
        }
    }
    readiness.abort();
    sweeper.abort();
    store.close().await;
    info!("idemd stopped");
    Ok(())
}
