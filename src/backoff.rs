//! Pauses between attempts to reach something that failed, used by the
//! store (listening for other replicas' changes) and the service (relaying
//! them): a module of its own at the bottom, importing nothing of idemd.

use std::time::Duration;

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
    use super::*;

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
