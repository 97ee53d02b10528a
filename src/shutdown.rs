//! SIGTERM - Kubernetes sends this to start a graceful shutdown; SIGINT is
//! the same from a terminal.

use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

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

/// Runs `tick` every `interval` (the first at once) until `stop` is
/// cancelled. A tick under way is finished, never cut short. A tick that
/// overruns its interval delays the next one rather than being followed by
/// a burst of catch-up ticks, which would run slow sweeps back to back.
pub async fn every<Tick, Ticked>(interval: Duration, stop: CancellationToken, mut tick: Tick)
where
    Tick: FnMut() -> Ticked,
    Ticked: Future<Output = ()>,
{
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            () = stop.cancelled() => return,
            _ = ticker.tick() => {}
        }
        tick().await;
    }
}
