//! The service over a store without a server, and a real server on
//! 127.0.0.1:0 in this process, with the fault layer in front.

use std::net::SocketAddr;
use std::sync::Arc;

use idemd::Application;
use idemd::app::{ConnectionSettings, ServerSettings};
use idemd::auth::AuthSettings;
use idemd::cache::TerminalCache;
use idemd::domain::Limits;
use idemd::grpc::admission::AdmissionSettings;
use idemd::metrics::{LabelPolicy, Metrics};
use idemd::proto::idempotency_service_client::IdempotencyServiceClient;
use idemd::service::{IdempotencyService, WaiterLimits};
use idemd::store::Store;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tonic::transport::Channel;

use super::faults::{FaultLayer, Faults};
use super::requests::Client;

/// `IdempotencyService` over a store, wired as `Application::new` wires it:
/// a metrics registry of its own that nothing serves. The only place tests
/// build one, so a change to its constructor is one edit here.
pub struct ServiceUnderTest {
    pub service: IdempotencyService,
}

impl ServiceUnderTest {
    pub fn over(store: Arc<dyn Store>) -> Self {
        let (metrics, _) =
            Metrics::new(LabelPolicy::default(), None).expect("a metrics registry builds");
        // Never cancelled: a waiting Claim is never told the server drains.
        let draining = tokio_util::sync::CancellationToken::new();
        Self {
            service: IdempotencyService::new(store, metrics, draining),
        }
    }
}

pub struct TestServer {
    pub addr: SocketAddr,
    pub faults: Faults,
    pub application: Arc<Application>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

/// The server-side settings a test may change; the defaults are the binary's.
#[derive(Debug, Clone, Default)]
pub struct ServerConfig {
    pub server: ServerSettings,
    pub admission: AdmissionSettings,
    pub auth: AuthSettings,
    pub waiters: WaiterLimits,
    pub connections: ConnectionSettings,
    /// The operation policies in force (none by default), as
    /// `--policy-file` gives them.
    pub policies: idemd::domain::policy::Policies,
}

impl TestServer {
    pub async fn start(store: Arc<dyn Store>, limits: Limits) -> Self {
        Self::start_configured(store, limits, ServerConfig::default()).await
    }

    pub async fn start_configured(
        store: Arc<dyn Store>,
        limits: Limits,
        config: ServerConfig,
    ) -> Self {
        let (metrics, _) =
            Metrics::new(LabelPolicy::default(), None).expect("a metrics registry builds");
        let application = Arc::new(
            Application::build(
                store,
                limits,
                tokio::sync::watch::channel(std::sync::Arc::new(config.policies)).1,
                config.auth,
                config.admission,
                config.waiters,
                metrics,
                TerminalCache::new(idemd::cache::DEFAULT_BUDGET_BYTES),
            )
            .await
            .expect("application builds"),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let faults = Faults::default();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let routes = application.routes.clone();
        let layer = FaultLayer(faults.clone());
        let server = config.server.server();
        // The binary's own accept loop, bounds and all.
        let incoming = idemd::app::incoming(
            listener,
            config.connections,
            None,
            application.service.metrics().clone(),
        );
        let task = tokio::spawn(async move {
            server
                .layer(layer)
                .add_routes(routes)
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = stopped.await;
                })
                .await
                .expect("server runs");
        });
        Self {
            addr,
            faults,
            application,
            stop: Some(stop),
            task: Some(task),
        }
    }

    pub async fn channel(&self) -> Channel {
        Channel::from_shared(format!("http://{}", self.addr))
            .expect("uri")
            .connect()
            .await
            .expect("connect")
    }

    pub async fn client(&self) -> Client {
        IdempotencyServiceClient::new(self.channel().await)
    }

    /// Graceful stop, as on SIGTERM.
    pub async fn stop(mut self) {
        self.application.begin_drain().await;
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.expect("server task");
        }
    }
}
