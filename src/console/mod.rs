//! The web console: support staff find an operation by id, scope, key or
//! filter, read what happened attempt by attempt, work the queue of
//! operations whose outcome is unknown, and see (an admin: set and release)
//! the holds in force. Served by idemd on a listener of its
//! own (off by default; plain HTTP on loopback only, or HTTPS on any address
//! with a certificate of its own, [`listener`]), as server-rendered HTML with
//! a little JavaScript, every asset embedded in the binary.
//!
//! It is one more client of the API, in process ([`calls`]): the same
//! handlers, scope rules and errors as a gRPC caller's, as the credential
//! that signed in ([`session`]). What makes it safe in a browser (CSP,
//! cookies, CSRF, same-origin checks) is in [`security`]; the pure parts
//! (reading the search box, the timeline, the counters) have their own
//! modules and tests.

pub mod calls;
pub mod conflicts;
pub mod counters;
mod handlers;
pub mod listener;
pub mod pages;
pub mod paths;
pub mod search;
pub mod security;
pub mod session;
pub mod timeline;

use std::io;
use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::auth::Authenticator;
use crate::grpc::server::IdempotencyApi;
use crate::listen::{ConnectionSettings, ServerTls};
use crate::metrics::Metrics;
use listener::TlsListener;
use security::Served;

/// What every console page shares.
pub struct Console {
    api: calls::Api,
    sessions: session::Sessions,
    metrics: Metrics,
}

impl Console {
    pub fn new(api: IdempotencyApi, authenticator: Authenticator, metrics: Metrics) -> Arc<Self> {
        Arc::new(Self {
            api: calls::Api::new(api, authenticator),
            sessions: session::Sessions::default(),
            metrics,
        })
    }
}

pub fn router(console: Arc<Console>) -> Router {
    Router::new()
        .route("/", get(handlers::dashboard))
        .route("/login", get(handlers::login_form).post(handlers::login))
        .route("/logout", post(handlers::logout))
        .route("/search", get(handlers::search))
        .route("/operations", get(handlers::operations))
        .route("/operations/{id}", get(handlers::operation))
        .route(
            "/operations/{id}/reconcile",
            get(handlers::reconcile_form).post(handlers::reconcile),
        )
        .route("/unresolved", get(handlers::unresolved))
        .route("/holds", get(handlers::holds).post(handlers::hold))
        .route("/holds/release", post(handlers::release))
        .route("/conflicts", get(handlers::conflicts))
        .route("/assets/console.css", get(handlers::stylesheet))
        .route("/assets/console.js", get(handlers::script))
        .fallback(handlers::not_found)
        .layer(axum::middleware::from_fn(security::guard))
        .layer(axum::middleware::map_response(security::headers))
        .with_state(console)
}

/// Serves the console in plain HTTP on `listener` (a loopback address: the
/// caller checks it, and only loopback Hosts are answered) until `stop`,
/// then lets the requests in flight finish.
pub async fn serve(
    listener: TcpListener,
    console: Arc<Console>,
    stop: CancellationToken,
) -> io::Result<()> {
    let app = router(console).into_make_service_with_connect_info::<Served>();
    axum::serve(listener, app)
        .with_graceful_shutdown(stop.cancelled_owned())
        .await
}

/// Serves the console over HTTPS on `listener` (any address) with the
/// configuration `tls` holds, on connections bounded by `settings`, until
/// `stop`; only requests naming a host of the certificate are answered.
pub async fn serve_tls(
    listener: TcpListener,
    (tls, settings): (ServerTls, ConnectionSettings),
    console: Arc<Console>,
    metrics: Metrics,
    stop: CancellationToken,
) -> io::Result<()> {
    let listener = TlsListener::new(listener, settings, tls, metrics)?;
    let app = router(console).into_make_service_with_connect_info::<Served>();
    axum::serve(listener, app)
        .with_graceful_shutdown(stop.cancelled_owned())
        .await
}
