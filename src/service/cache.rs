//! A bounded in-memory cache of terminal records, for replays.
//!
//! Terminal records (SUCCEEDED, FAILED) never change until their retention
//! ends, so a replica may answer a replay of one without a database round
//! trip, until `retain_until` less a margin. A FAILED record whose policy
//! says `on_failed: new_attempt` is not final (a Claim may start it again)
//! and is never held. The one exception is an admin's
//! Forget, which makes the record a tombstone early: the replica that
//! forgets drops its entry ([`TerminalCache::remove`]), and the others drop
//! theirs when the change reaches them ([`TerminalCache::remove_operation`],
//! by operation id, from the store's change notifications; everything, when
//! notifications may have been missed: [`TerminalCache::clear`]). Time is measured as the
//! database measured it: an entry keeps the database clock of the read that
//! filled it and counts on from there with this process's monotonic clock,
//! so no wall clock of this machine is compared with the database's. The
//! cache holds at most its byte budget (an entry counts what it keeps
//! resident, [`Entry::resident_bytes`]);
//! entries are looked up by a hash of the scope and checked against the
//! record's own scope and tenant, so a collision is a miss, never another
//! tenant's answer.

use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use quick_cache::Weighter;
use quick_cache::sync::Cache;

use crate::domain::{OperationId, OperationRecord, Outcome, Scope, TenantId};

/// The budget a server has unless told otherwise (`--result-cache-bytes`).
pub const DEFAULT_BUDGET_BYTES: u64 = 16 * 1024 * 1024;

/// How long before its retention ends an entry stops answering: covers the
/// time between the database's read and the entry's fill, and any drift of
/// this process's clock against the database's.
const RETENTION_MARGIN: Duration = Duration::from_secs(2);
/// The longest an entry answers, however long its retention: a Forget
/// whose change notification never reached this replica (notifications are
/// best effort) stops being replayed here within this long.
const MAX_ENTRY_AGE: Duration = Duration::from_secs(60);
/// What an entry costs beyond its own struct and the bytes its strings and
/// result hold: the allocator's headers and rounding for each of its
/// allocations, its slot in the cache, its line in the by-operation index and
/// the freed memory that churn leaves between live entries. Measured, so that
/// the budget is what the cache keeps resident: a full cache of the
/// benchmark's replays (a 17-byte result) against none (bench/README.md,
/// "Memory").
const BOOKKEEPING_BYTES: usize = 448;

/// The least an entry weighs: an empty record's.
const LEAST_ENTRY_BYTES: usize =
    std::mem::size_of::<Entry>() + ARC_COUNTS_BYTES + BOOKKEEPING_BYTES;
/// An `Arc`'s strong and weak counts, allocated with the entry.
const ARC_COUNTS_BYTES: usize = 2 * std::mem::size_of::<usize>();

#[derive(Debug)]
struct Entry {
    record: OperationRecord,
    /// The database clock of the read that filled the entry, and when.
    read_at: DateTime<Utc>,
    filled: Instant,
    answers_until: Instant,
}

#[derive(Clone)]
struct EntryWeight;

impl Weighter<u64, Arc<Entry>> for EntryWeight {
    fn weight(&self, _key: &u64, entry: &Arc<Entry>) -> u64 {
        u64::try_from(entry.resident_bytes()).unwrap_or(u64::MAX)
    }
}

impl Entry {
    /// What holding this entry keeps resident: the budget counts this.
    fn resident_bytes(&self) -> usize {
        let record = &self.record;
        let outcome = record.outcome.as_ref().map_or(0, Outcome::stored_bytes);
        let held = record.scope.operation.len() + record.scope.key.len() + record.claim_token.len();
        LEAST_ENTRY_BYTES
            .saturating_add(outcome)
            .saturating_add(held)
    }
}

#[derive(Clone)]
pub struct TerminalCache {
    entries: Option<Arc<Cache<u64, Arc<Entry>, EntryWeight>>>,
    /// Which entry holds an operation, so that a change notification (which
    /// names operations, not scopes) can drop it. Bounded like `entries`; a
    /// key evicted here leaves its entry to a full clear.
    by_operation: Option<Arc<Cache<OperationId, u64>>>,
    hasher: std::collections::hash_map::RandomState,
}

impl std::fmt::Debug for TerminalCache {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("TerminalCache")
            .field("enabled", &self.entries.is_some())
            .finish_non_exhaustive()
    }
}

/// A cached terminal record and the database clock it stands at now.
#[derive(Debug, Clone)]
pub struct Cached {
    pub record: OperationRecord,
    pub now: DateTime<Utc>,
}

impl TerminalCache {
    /// Holds at most `budget_bytes`; zero disables the cache.
    pub fn new(budget_bytes: u64) -> Self {
        // Sized for entries of twice the least weight: the cache grows past
        // its estimate when they are lighter.
        let estimated_items = usize::try_from(budget_bytes)
            .map_or(1024, |budget| budget / (LEAST_ENTRY_BYTES * 2))
            .max(16);
        let entries = (budget_bytes > 0).then(|| {
            Arc::new(Cache::with_weighter(
                estimated_items,
                budget_bytes,
                EntryWeight,
            ))
        });
        // Twice the entries' estimate: an entry evicted by weight leaves a
        // stale id behind, which costs a miss, never a wrong answer.
        let by_operation =
            (budget_bytes > 0).then(|| Arc::new(Cache::new(estimated_items.saturating_mul(2))));
        Self {
            entries,
            by_operation,
            hasher: std::collections::hash_map::RandomState::new(),
        }
    }

    /// False when built with no budget: nothing is ever held.
    pub fn is_enabled(&self) -> bool {
        self.entries.is_some()
    }

    fn key(&self, tenant: TenantId, scope: &Scope) -> u64 {
        let mut hasher = self.hasher.build_hasher();
        tenant.hash(&mut hasher);
        scope.hash(&mut hasher);
        hasher.finish()
    }

    /// The terminal record of the scope, if this replica holds it and its
    /// retention has not come close to ending.
    pub fn get(&self, tenant: TenantId, scope: &Scope) -> Option<Cached> {
        let entries = self.entries.as_ref()?;
        let key = self.key(tenant, scope);
        let entry = entries.get(&key)?;
        if entry.record.tenant_id != tenant || entry.record.scope != *scope {
            return None;
        }
        let now = Instant::now();
        if now >= entry.answers_until {
            entries.remove(&key);
            return None;
        }
        let elapsed = TimeDelta::from_std(now - entry.filled).unwrap_or(TimeDelta::MAX);
        Some(Cached {
            record: entry.record.clone(),
            now: entry.read_at + elapsed,
        })
    }

    /// Keeps `record`, read at the database clock `read_at`, if it is
    /// terminal and its retention leaves it time to answer.
    pub fn offer(&self, record: &OperationRecord, read_at: DateTime<Utc>) {
        let Some(entries) = self.entries.as_ref() else {
            return;
        };
        let (Some(retain_until), true) = (record.retain_until, record.outcome.is_some()) else {
            return;
        };
        // A FAILED record whose policy opted in to a new attempt is not
        // final: the next Claim may start one, so it is never held (nor
        // answered) here. A SUCCEEDED one is final whatever its policy.
        let holds = match record.state {
            crate::domain::State::Succeeded => true,
            crate::domain::State::Failed => !record.on_failed.gets_new_attempt(),
            _ => false,
        };
        if !holds {
            return;
        }
        let Ok(left) = (retain_until - read_at).to_std() else {
            return;
        };
        let Some(left) = left.checked_sub(RETENTION_MARGIN) else {
            return;
        };
        let filled = Instant::now();
        let key = self.key(record.tenant_id, &record.scope);
        if let Some(by_operation) = self.by_operation.as_ref() {
            by_operation.insert(record.operation_id, key);
        }
        entries.insert(
            key,
            Arc::new(Entry {
                record: record.clone(),
                read_at,
                filled,
                answers_until: filled + left.min(MAX_ENTRY_AGE),
            }),
        );
    }

    /// Drops the scope's entry: its record is no longer what it held (an
    /// admin forgot it).
    pub fn remove(&self, tenant: TenantId, scope: &Scope) {
        if let Some(entries) = self.entries.as_ref() {
            entries.remove(&self.key(tenant, scope));
        }
    }

    /// Drops the entry of the operation, if this replica holds it: another
    /// replica changed it (a terminal record changes only by Forget).
    pub fn remove_operation(&self, operation_id: OperationId) {
        let (Some(entries), Some(by_operation)) =
            (self.entries.as_ref(), self.by_operation.as_ref())
        else {
            return;
        };
        let Some(key) = by_operation.get(&operation_id) else {
            return;
        };
        by_operation.remove(&operation_id);
        let holds_it = entries
            .get(&key)
            .is_some_and(|entry| entry.record.operation_id == operation_id);
        if holds_it {
            entries.remove(&key);
        }
    }

    /// Drops every entry: changes may have been missed (the store's change
    /// notifications were interrupted), so none is known to stand.
    pub fn clear(&self) {
        if let Some(entries) = self.entries.as_ref() {
            entries.clear();
        }
        if let Some(by_operation) = self.by_operation.as_ref() {
            by_operation.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::*;
    use crate::domain::{
        ClaimCommand, ErrorReport, FailureReason, Fingerprint, OnFailed, State, SuccessResult,
        decide_first_claim,
    };
    use crate::service::DrawOperationId as _;

    fn ended(state: State, on_failed: OnFailed) -> OperationRecord {
        let command = ClaimCommand {
            scope: Scope {
                operation: "payments.charge".into(),
                key: format!("{state:?}-{on_failed:?}"),
            },
            fingerprint: Fingerprint([1; 32]),
            claim_token: Vec::new(),
            lease: TimeDelta::seconds(30),
            max_attempt_duration: TimeDelta::minutes(5),
            max_attempts: 3,
            retention: TimeDelta::hours(1),
            operation_deadline: None,
            on_failed,
            clock_margin: TimeDelta::zero(),
            previous_fingerprints: Vec::new(),
            held: None,
        };
        let now = DateTime::from_timestamp(1_750_000_000, 0).expect("an instant");
        let mut record = decide_first_claim(&command).record(
            OperationId::generate(),
            TenantId(1),
            &command,
            1,
            now,
        );
        record.state = state;
        record.outcome_kind = Some(state);
        record.outcome = Some(match state {
            State::Failed => Outcome::Failed {
                reason: FailureReason::Terminal,
                error: ErrorReport::default(),
            },
            _ => Outcome::Succeeded(SuccessResult::default()),
        });
        record.retain_until = Some(now + TimeDelta::hours(1));
        record
    }

    #[test]
    fn an_entry_weighs_its_struct_its_bookkeeping_and_the_bytes_it_holds() {
        let mut record = ended(State::Succeeded, OnFailed::Replay);
        let entry = |record: &OperationRecord| Entry {
            record: record.clone(),
            read_at: record.created_at,
            filled: Instant::now(),
            answers_until: Instant::now(),
        };
        let empty = entry(&record).resident_bytes();
        assert_eq!(
            empty,
            size_of::<Entry>()
                + ARC_COUNTS_BYTES
                + BOOKKEEPING_BYTES
                + record.scope.operation.len()
                + record.scope.key.len()
        );
        record.outcome = Some(Outcome::Succeeded(SuccessResult {
            body: vec![0; 1000],
            content_type: "application/json".into(),
            metadata: [("region".to_owned(), "eu".to_owned())].into(),
        }));
        assert_eq!(entry(&record).resident_bytes(), empty + 1000 + 16 + 8);
        // The budget bounds the entries' weight: a 64 KiB cache of 1,000-byte
        // results holds no more entries than 64 KiB / (1,000 + the struct).
        let cache = TerminalCache::new(64 * 1024);
        for n in 0..200 {
            record.scope.key = format!("key-{n}");
            cache.offer(&record, record.created_at);
        }
        let entries = cache.entries.as_ref().expect("enabled");
        assert!(entries.weight() <= 64 * 1024, "{}", entries.weight());
        assert!(
            entries.len() * (1000 + size_of::<Entry>()) <= 64 * 1024,
            "{} entries",
            entries.len()
        );
    }

    #[test]
    fn a_failure_a_claim_may_start_again_is_never_held() {
        let cache = TerminalCache::new(DEFAULT_BUDGET_BYTES);
        for (state, on_failed, held) in [
            (State::Failed, OnFailed::Replay, true),
            (State::Failed, OnFailed::NewAttempt, false),
            (State::Succeeded, OnFailed::Replay, true),
            (State::Succeeded, OnFailed::NewAttempt, true),
        ] {
            let record = ended(state, on_failed);
            cache.offer(&record, record.created_at);
            assert_eq!(
                cache.get(record.tenant_id, &record.scope).is_some(),
                held,
                "{state:?} {on_failed:?}"
            );
        }
    }
}
