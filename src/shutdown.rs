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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::sync::{Notify, mpsc};

    use super::*;

    #[tokio::test]
    async fn a_tick_under_way_finishes_and_none_starts_after_the_stop() {
        let stop = CancellationToken::new();
        let finished = Arc::new(AtomicUsize::new(0));
        let release = Arc::new(Notify::new());
        let (started_sender, mut started) = mpsc::unbounded_channel();
        let ticking = tokio::spawn(every(Duration::from_millis(1), stop.clone(), {
            let finished = finished.clone();
            let release = release.clone();
            move || {
                let finished = finished.clone();
                let release = release.clone();
                let _ = started_sender.send(());
                async move {
                    release.notified().await;
                    finished.fetch_add(1, Ordering::SeqCst);
                }
            }
        }));
        started.recv().await.expect("the first tick starts at once");
        stop.cancel();
        release.notify_one();
        tokio::time::timeout(Duration::from_secs(5), ticking)
            .await
            .expect("the ticker stops")
            .expect("the ticker does not panic");
        assert_eq!(finished.load(Ordering::SeqCst), 1);
        assert!(started.try_recv().is_err(), "a tick started after the stop");
    }
}
