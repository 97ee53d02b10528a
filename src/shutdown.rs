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

/// Pauses between attempts to reach something that failed: doubling from
/// `first` up to `max`, and back to `first` once an attempt succeeded, so a
/// connection that worked for hours and then dropped is retried at once,
/// not after the longest pause an earlier outage reached.
#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    pub fn new(first: Duration, max: Duration) -> Self {
        Self {
            first,
            max: max.max(first),
            next: first,
        }
    }

    /// The pause before the next attempt; the one after it is twice as long.
    pub fn pause(&mut self) -> Duration {
        let pause = self.next;
        self.next = (self.next * 2).min(self.max);
        pause
    }

    /// An attempt succeeded: the next failure pauses `first` again.
    pub fn reset(&mut self) {
        self.next = self.first;
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

    #[test]
    fn backoff_doubles_to_its_ceiling_and_starts_over_after_a_success() {
        let millis = Duration::from_millis;
        let mut backoff = Backoff::new(millis(100), millis(500));
        let pauses: Vec<_> = (0..5).map(|_| backoff.pause()).collect();
        assert_eq!(
            pauses,
            [
                millis(100),
                millis(200),
                millis(400),
                millis(500),
                millis(500)
            ]
        );
        backoff.reset();
        assert_eq!(backoff.pause(), millis(100));
        assert_eq!(backoff.pause(), millis(200));
    }
}
