//! The commands as the binary runs them, and the server they start: the API,
//! health and reflection, the background tasks beside them, and a graceful
//! drain on SIGTERM.

mod background;
mod dev;
mod mcp;
mod ops;
mod policy;
mod serve;
mod settings;
mod tenant;
mod transport;

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::auth::{AuthSettings, Authenticator};
use crate::config::{Cli, Command};
use crate::domain::Limits;
use crate::domain::policy::Policies;
use crate::error::BoxError;
use crate::grpc::admission::AdmissionSettings;
use crate::grpc::server::{IdempotencyApi, routes};
use crate::metrics::{LabelPolicy, Metrics};
use crate::proto::idempotency_service_server::IdempotencyServiceServer;
use crate::service::cache::TerminalCache;
use crate::service::{IdempotencyService, WaiterLimits};
use crate::shutdown;
use crate::store::Store;
use crate::store::open::{Purpose, open_store};
use tenant::{manage_tenant, read_audit};

pub use crate::listen::ServerTls;
pub use crate::listen::{Connection, ConnectionSettings, incoming};
pub use ops::OpsFailure;
use serve::serve;
pub use transport::ServerSettings;

pub async fn run(cli: Cli) -> Result<(), BoxError> {
    match cli.command {
        Command::Serve(args) => {
            let mut limits = settings::limits_from(&args.bounds)?;
            // A forgotten operation's tombstone is kept as long as the sweeper's.
            limits.tombstone_retention =
                settings::sweeper_settings_from(&args)?.tombstone_retention;
            if args.dev && !args.listen.ip().is_loopback() {
                return Err(format!(
                    "--dev listens on loopback addresses only (its token is printed and kept in \
                     the data directory), not on {}; without --dev, create tenants with \
                     `idemd tenant create`",
                    args.listen
                )
                .into());
            }
            crate::listen::refuse_unasked_plaintext(&args)?;
            // Before the store opens: an invalid policy file changes nothing.
            let policies = policy::LoadedPolicies::start(args.policy_file.as_deref(), &limits)?;
            let opened = open_store(
                &settings::store_options_from(&cli.database)?,
                Purpose::Serve(args.migrate_on_start),
            )
            .await?;
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
            serve(
                listener,
                opened.store,
                (limits, policies),
                &args,
                shutdown::signalled(),
            )
            .await
        }
        Command::Policy(command) => policy::check(command),
        // A client of a running server: no store, no database flags.
        Command::Ops(command) => ops::run_ops(command).await,
        // The same kind of client, for agents, on stdio.
        Command::Mcp { connection } => mcp::run_mcp(connection).await,
        Command::Migrate => {
            let opened = open_store(
                &settings::store_options_from(&cli.database)?,
                Purpose::Migrate,
            )
            .await?;
            opened.store.close().await;
            info!(store = opened.store.kind(), data = %opened.location, "migrations applied");
            Ok(())
        }
        Command::Tenant(command) => {
            let opened = open_store(
                &settings::store_options_from(&cli.database)?,
                Purpose::Administer,
            )
            .await?;
            let outcome = manage_tenant(opened.store.as_ref(), command).await;
            opened.store.close().await;
            outcome
        }
        Command::Audit(command) => {
            let opened = open_store(
                &settings::store_options_from(&cli.database)?,
                Purpose::Administer,
            )
            .await?;
            let outcome = read_audit(opened.store.as_ref(), command).await;
            opened.store.close().await;
            outcome
        }
    }
}

/// Everything a server serves, built once for production and for tests.
pub struct Application {
    pub routes: tonic::service::Routes,
    /// The API's handlers, which the web console calls in process.
    pub api: IdempotencyApi,
    pub health: tonic_health::server::HealthReporter,
    pub service: IdempotencyService,
    /// The API's authenticator (its caches, and the tokens it saw used).
    pub authenticator: Authenticator,
    /// Cancelled when the server drains: waiting Claims answer at once and
    /// the background tasks stop.
    pub draining: CancellationToken,
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
        let auth = AuthSettings {
            cache_ttl: auth_cache_ttl,
            ..AuthSettings::default()
        };
        Self::build(
            store,
            limits,
            watch::channel(Arc::new(Policies::default())).1,
            auth,
            AdmissionSettings::default(),
            WaiterLimits::default(),
            metrics,
            TerminalCache::new(crate::service::cache::DEFAULT_BUDGET_BYTES),
        )
        .await
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "one call site builds the server from its settings; a struct would only rename them"
    )]
    pub async fn build(
        store: Arc<dyn Store>,
        limits: Limits,
        policies: watch::Receiver<Arc<Policies>>,
        auth: AuthSettings,
        admission: AdmissionSettings,
        waiters: WaiterLimits,
        metrics: Metrics,
        results: TerminalCache,
    ) -> Result<Self, BoxError> {
        let draining = CancellationToken::new();
        let service =
            IdempotencyService::new(store.clone(), metrics.clone(), draining.child_token())
                .with_result_cache(results)
                .with_waiter_limits(waiters);
        let authenticator = Authenticator::new(store, auth, metrics.clone());
        let api = IdempotencyApi::new(service.clone(), Arc::new(limits), policies);
        let (health, health_service) = tonic_health::server::health_reporter();
        health
            .set_serving::<IdempotencyServiceServer<IdempotencyApi>>()
            .await;
        metrics.serving(true);
        Ok(Self {
            api: api.clone(),
            routes: routes(
                api,
                authenticator.clone(),
                admission,
                metrics,
                health_service,
            )?,
            authenticator,
            health,
            service,
            draining,
        })
    }

    /// Health NOT_SERVING (so load balancers stop sending), and waiting
    /// Claims answer at once. The token goes first: a readiness check that
    /// ends after it reports nothing, so it cannot undo NOT_SERVING.
    pub async fn begin_drain(&self) {
        self.draining.cancel();
        self.health
            .set_service_status("", tonic_health::ServingStatus::NotServing)
            .await;
        self.health
            .set_not_serving::<IdempotencyServiceServer<IdempotencyApi>>()
            .await;
        self.service.metrics().serving(false);
    }
}
