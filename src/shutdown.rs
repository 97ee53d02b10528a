//! SIGTERM - Kubernetes sends this to start a graceful shutdown; SIGINT is
//! the same from a terminal.

use tokio::signal::unix::{SignalKind, signal};

pub async fn signalled() {
    let terminate = async {
        match signal(SignalKind::terminate()) {
            Ok(mut stream) => {
                stream.recv().await;
            }
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => tracing::info!("sigint received: draining"),
        () = terminate => tracing::info!("sigterm received: draining"),
    }
}
