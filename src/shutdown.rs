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

/// Runs `tick` every `interval` (the first at once) until the server drains.
pub async fn every<Tick, Ticked>(
    interval: std::time::Duration,
    mut shutting_down: tokio::sync::watch::Receiver<bool>,
    mut tick: Tick,
) where
    Tick: FnMut() -> Ticked,
    Ticked: Future<Output = ()>,
{
    let mut ticker = tokio::time::interval(interval);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = shutting_down.changed() => {}
        }
        if *shutting_down.borrow() {
            return;
        }
        tick().await;
    }
}
