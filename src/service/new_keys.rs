//! The same request under many new keys: a caller that makes its
//! idempotency key per transport attempt instead of per intent gets no
//! protection at all, since every retry is a new operation. idemd cannot
//! refuse those retries (two orders may well carry the same payload), but it
//! can see them: operations of one tenant and operation name, created with
//! the same fingerprint within a short window, in numbers no honest caller
//! produces.
//!
//! Counted by this replica in memory, on the path that inserts a new
//! operation only: nothing is written, and nothing new is kept about
//! payloads (fingerprints are compared, as the store compares them). A
//! replica sees the operations created through it, so behind a load
//! balancer each replica sees its share; the metric adds the replicas up.
//!
//! Bounded: at most [`NewKeyRetries::capacity`] groups (tenant, operation
//! name, fingerprint) are watched at once. When full, groups whose window
//! has ended make room (looked for at most once a second); a new group
//! beyond the bound is not watched.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::domain::{Fingerprint, OperationId, TenantId};
use crate::metrics::Metrics;

/// How long operations count as retries of one another, by default.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(60);
/// How many keys for the same request within the window make a suspicion,
/// by default: two orders of the same thing a minute apart happen, three
/// identical ones within a minute are most often one intent retried.
pub const DEFAULT_THRESHOLD: u32 = 3;
/// Groups watched at once.
pub const CAPACITY: usize = 10_000;
/// The operation ids kept per group, for the reader.
const RECENT: usize = 10;
/// Looking for ended groups to make room costs a pass over the map: at most
/// this often.
const MAKE_ROOM_EVERY: Duration = Duration::from_secs(1);

/// The window and threshold (`--new-key-retry-window`,
/// `--new-key-retry-threshold`). A zero window turns the detector off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewKeySettings {
    pub window: Duration,
    pub threshold: u32,
}

impl Default for NewKeySettings {
    fn default() -> Self {
        Self {
            window: DEFAULT_WINDOW,
            threshold: DEFAULT_THRESHOLD,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct GroupKey {
    tenant: TenantId,
    operation: Box<str>,
    fingerprint: Fingerprint,
}

#[derive(Debug)]
struct Group {
    started: Instant,
    keys: u32,
    recent: VecDeque<OperationId>,
}

/// What this replica saw of one request under many keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SameRequest {
    /// Operations created with this request within the window, the one
    /// asked about included.
    pub keys: u32,
    /// Whether that reaches the threshold.
    pub suspected: bool,
    /// The newest of them, newest first (at most ten).
    pub recent: Vec<OperationId>,
    pub window: Duration,
}

#[derive(Debug)]
struct Groups {
    groups: HashMap<GroupKey, Group>,
    last_made_room: Option<Instant>,
    settings: NewKeySettings,
}

/// This replica's watch over new operations; clones share it.
#[derive(Debug, Clone)]
pub struct NewKeyRetries {
    inner: Arc<Mutex<Groups>>,
    metrics: Metrics,
}

impl NewKeyRetries {
    pub fn new(settings: NewKeySettings, metrics: Metrics) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Groups {
                groups: HashMap::new(),
                last_made_room: None,
                settings,
            })),
            metrics,
        }
    }

    /// Sets the window and threshold for this replica's every clone.
    pub fn configure(&self, settings: NewKeySettings) {
        let mut inner = self.lock();
        inner.settings = settings;
        inner.groups.clear();
    }

    pub fn capacity(&self) -> usize {
        CAPACITY
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Groups> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes a newly created operation. `Some` when its request reaches the
    /// threshold: counted in `idemd_suspected_new_key_retries_total`, for the
    /// caller to log. A map update under a lock held for nothing else.
    pub fn observe(
        &self,
        tenant: TenantId,
        operation: &str,
        fingerprint: Fingerprint,
        operation_id: OperationId,
    ) -> Option<SameRequest> {
        self.observe_at(tenant, operation, fingerprint, operation_id, Instant::now())
    }

    fn observe_at(
        &self,
        tenant: TenantId,
        operation: &str,
        fingerprint: Fingerprint,
        operation_id: OperationId,
        now: Instant,
    ) -> Option<SameRequest> {
        let mut inner = self.lock();
        let settings = inner.settings;
        if settings.window.is_zero() {
            return None;
        }
        let key = GroupKey {
            tenant,
            operation: operation.into(),
            fingerprint,
        };
        if !inner.groups.contains_key(&key) && !inner.make_room(now) {
            return None;
        }
        let group = inner.groups.entry(key).or_insert_with(|| Group {
            started: now,
            keys: 0,
            recent: VecDeque::new(),
        });
        if now.saturating_duration_since(group.started) >= settings.window {
            group.started = now;
            group.keys = 0;
            group.recent.clear();
        }
        group.keys = group.keys.saturating_add(1);
        if group.recent.len() == RECENT {
            group.recent.pop_back();
        }
        group.recent.push_front(operation_id);
        let seen = same_request(group, settings);
        drop(inner);
        if seen.suspected {
            self.metrics.suspected_new_key_retry(tenant, operation);
            return Some(seen);
        }
        None
    }

    /// What this replica saw of `fingerprint` under this tenant and
    /// operation name within the current window; `None` when nothing (or
    /// the window has ended, or the detector is off).
    pub fn same_request(
        &self,
        tenant: TenantId,
        operation: &str,
        fingerprint: Fingerprint,
    ) -> Option<SameRequest> {
        self.same_request_at(tenant, operation, fingerprint, Instant::now())
    }

    fn same_request_at(
        &self,
        tenant: TenantId,
        operation: &str,
        fingerprint: Fingerprint,
        now: Instant,
    ) -> Option<SameRequest> {
        let inner = self.lock();
        let settings = inner.settings;
        let key = GroupKey {
            tenant,
            operation: operation.into(),
            fingerprint,
        };
        let group = inner.groups.get(&key)?;
        (now.saturating_duration_since(group.started) < settings.window)
            .then(|| same_request(group, settings))
    }
}

fn same_request(group: &Group, settings: NewKeySettings) -> SameRequest {
    SameRequest {
        keys: group.keys,
        suspected: group.keys >= settings.threshold,
        recent: group.recent.iter().copied().collect(),
        window: settings.window,
    }
}

impl Groups {
    /// Whether one more group fits, after dropping those whose window has
    /// ended (at most once every [`MAKE_ROOM_EVERY`]).
    fn make_room(&mut self, now: Instant) -> bool {
        if self.groups.len() < CAPACITY {
            return true;
        }
        let looked_lately = self
            .last_made_room
            .is_some_and(|at| now.saturating_duration_since(at) < MAKE_ROOM_EVERY);
        if looked_lately {
            return false;
        }
        self.last_made_room = Some(now);
        let window = self.settings.window;
        self.groups
            .retain(|_, group| now.saturating_duration_since(group.started) < window);
        self.groups.len() < CAPACITY
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::LabelPolicy;
    use crate::service::DrawOperationId as _;

    /// The metric's total over every series, as exported.
    fn suspected(metrics: &Metrics) -> u64 {
        metrics
            .render()
            .lines()
            .filter(|line| line.starts_with("idemd_suspected_new_key_retries_total"))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }

    fn detector(window: Duration, threshold: u32) -> (NewKeyRetries, Metrics) {
        let (metrics, _) = Metrics::new(LabelPolicy::default(), None).expect("metrics");
        let detector = NewKeyRetries::new(NewKeySettings { window, threshold }, metrics.clone());
        (detector, metrics)
    }

    const TENANT: TenantId = TenantId(7);
    const CHARGE: Fingerprint = Fingerprint([1; 32]);

    fn new_operation(detector: &NewKeyRetries, fingerprint: Fingerprint, now: Instant) -> bool {
        detector
            .observe_at(
                TENANT,
                "payments.charge",
                fingerprint,
                OperationId::generate(),
                now,
            )
            .is_some()
    }

    #[test]
    fn ten_new_keys_for_one_request_within_the_window_are_suspected_from_the_threshold() {
        let (detector, metrics) = detector(Duration::from_secs(60), 3);
        let start = Instant::now();
        let flagged: Vec<bool> = (0..10)
            .map(|retry| new_operation(&detector, CHARGE, start + Duration::from_secs(retry)))
            .collect();
        assert_eq!(
            flagged,
            [false, false, true, true, true, true, true, true, true, true]
        );
        assert_eq!(suspected(&metrics), 8);
        let seen = detector
            .same_request_at(
                TENANT,
                "payments.charge",
                CHARGE,
                start + Duration::from_secs(10),
            )
            .expect("watched");
        assert_eq!(
            (seen.keys, seen.suspected, seen.recent.len()),
            (10, true, 10)
        );
    }

    #[test]
    fn different_requests_other_tenants_and_other_operations_are_not_one_group() {
        let (detector, metrics) = detector(Duration::from_secs(60), 3);
        let now = Instant::now();
        for index in 0..10u8 {
            assert!(!new_operation(&detector, Fingerprint([index; 32]), now));
        }
        for tenant in 0..10 {
            let flagged = detector.observe_at(
                TenantId(tenant),
                "payments.charge",
                Fingerprint([99; 32]),
                OperationId::generate(),
                now,
            );
            assert!(flagged.is_none());
        }
        for name in ["a", "b", "c", "d"] {
            let flagged = detector.observe_at(
                TENANT,
                name,
                Fingerprint([98; 32]),
                OperationId::generate(),
                now,
            );
            assert!(flagged.is_none());
        }
        assert_eq!(suspected(&metrics), 0);
    }

    #[test]
    fn keys_spread_wider_than_the_window_are_not_suspected() {
        let (detector, _) = detector(Duration::from_secs(60), 3);
        let start = Instant::now();
        for minute in 0..10 {
            let at = start + Duration::from_secs(61 * minute);
            assert!(!new_operation(&detector, CHARGE, at), "minute {minute}");
        }
        let after = detector.same_request_at(
            TENANT,
            "payments.charge",
            CHARGE,
            start + Duration::from_secs(61 * 9 + 60),
        );
        assert_eq!(after, None, "the window ended");
    }

    #[test]
    fn a_zero_window_turns_the_detector_off() {
        let (detector, metrics) = detector(Duration::ZERO, 1);
        let now = Instant::now();
        assert!(!new_operation(&detector, CHARGE, now));
        assert!(!new_operation(&detector, CHARGE, now));
        assert_eq!(
            detector.same_request_at(TENANT, "payments.charge", CHARGE, now),
            None
        );
        assert_eq!(suspected(&metrics), 0);
    }

    #[test]
    fn a_full_detector_makes_room_from_ended_windows_and_otherwise_watches_nothing_new() {
        let (detector, _) = detector(Duration::from_secs(60), 2);
        let start = Instant::now();
        let fingerprint = |index: usize| {
            let mut bytes = [0u8; 32];
            bytes[..8].copy_from_slice(&(index as u64).to_le_bytes());
            Fingerprint(bytes)
        };
        for index in 0..CAPACITY {
            new_operation(&detector, fingerprint(index), start);
        }
        // Full, every window still open: a new request is not watched.
        let late = start + Duration::from_secs(30);
        assert!(!new_operation(&detector, CHARGE, late));
        assert!(!new_operation(&detector, CHARGE, late));
        assert_eq!(detector.lock().groups.len(), CAPACITY);
        // Once their windows have ended, they make room.
        let later = start + Duration::from_secs(61);
        assert!(!new_operation(&detector, CHARGE, later));
        assert!(new_operation(&detector, CHARGE, later));
        assert_eq!(detector.lock().groups.len(), 1);
    }
}
