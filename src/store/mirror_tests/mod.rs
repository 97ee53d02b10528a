//! One test per SQL mirror of a domain rule (the table in [`super`]'s docs):
//! random inputs go through the SQL, on a real database, and through the
//! rule's Rust spec, and the two must agree. Postgres is the database of
//! DATABASE_URL (each test gets a database of its own); SQLite a file in a
//! temporary directory.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use super::postgres::PostgresStore;
use super::sqlite::{DatabaseLock, SqliteOptions, SqliteStore};
use super::{Applied, ClaimStart, Store};
use crate::domain::guarded::GuardedWrite;
use crate::domain::{
    Answer, ClaimCommand, Decision, Effects, ErrorReport, FailureReason, Fingerprint, HistoryCap,
    HistoryEntry, HistoryPage, HistoryPlacement, NewHistoryEntry, OperationId, OperationRecord,
    Outcome, PreviousAttempt, RequestDigest, Scope, State, SuccessResult, Target, TenantId, Update,
    WriteAnswer, WriteReceipt, Writer,
};
use crate::service::DrawOperationId as _;

mod conflict;
mod due;
mod first_claim;
mod guarded;
mod history;
mod point_read;

/// Random inputs per test: each runs a handful of statements, on a machine
/// shared with other builds.
const CASES: u32 = 32;

type Checked = Result<(), TestCaseError>;
type Case = Pin<Box<dyn Future<Output = Checked> + Send>>;

/// Runs `case` for `cases` random values of `strategy`, on the test's
/// runtime, and panics with the smallest failing value proptest finds.
async fn for_random<S>(cases: u32, strategy: S, case: impl Fn(S::Value) -> Case + Send + 'static)
where
    S: Strategy + Send + 'static,
{
    let runtime = tokio::runtime::Handle::current();
    // The runner is synchronous: it runs beside the runtime, which keeps
    // driving the database connections, and blocks on each case.
    let outcome = tokio::task::spawn_blocking(move || {
        let mut runner = TestRunner::new(Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        });
        runner
            .run(&strategy, |value| runtime.block_on(case(value)))
            .map_err(|failure| failure.to_string())
    })
    .await
    .expect("the runner finishes");
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
}

/// A store call that failed fails the case.
fn failed(error: impl std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(error.to_string())
}

/// A store of each kind, as the tests drive it.
#[derive(Clone)]
enum Backend {
    Postgres(PostgresStore),
    Sqlite(SqliteStore),
}

impl Backend {
    /// The store, holding each operation's history to `cap`.
    fn store(&self, cap: HistoryCap) -> Arc<dyn Store> {
        match self {
            Backend::Postgres(store) => Arc::new(store.with_history_cap(cap)),
            Backend::Sqlite(store) => Arc::new(store.with_history_cap(cap)),
        }
    }
}

/// A SQLite store in a directory of its own, removed by [`TempSqlite::close`]
/// (also the store of `paths`' unit test).
pub(super) struct TempSqlite {
    pub(super) store: SqliteStore,
    directory: PathBuf,
}

impl TempSqlite {
    pub(super) async fn open() -> Self {
        let directory = std::env::temp_dir().join(format!("idemd-mirror-{}", uuid::Uuid::new_v4()));
        let path = directory.join("mirror.db");
        let lock = DatabaseLock::try_acquire(&path)
            .expect("lockable")
            .expect("free");
        let options = SqliteOptions {
            path,
            max_read_connections: 2,
            acquire_timeout: Duration::from_secs(10),
        };
        let store = SqliteStore::open(&options, lock).await.expect("opens");
        Self { store, directory }
    }

    fn backend(&self) -> Backend {
        Backend::Sqlite(self.store.clone())
    }

    pub(super) async fn close(self) {
        self.store.close().await;
        let _ = std::fs::remove_dir_all(&self.directory);
    }
}

/// A store and a tenant of it.
#[derive(Clone)]
struct Fixture {
    store: Arc<dyn Store>,
    tenant: TenantId,
}

impl Fixture {
    /// Runs `guarded` through the store, with a locked path that writes
    /// nothing and records what it was handed (the record, the clock): a
    /// write the statement refused shows there.
    async fn write_recording(
        &self,
        guarded: &GuardedWrite,
    ) -> Result<(Applied, Vec<(OperationRecord, DateTime<Utc>)>), TestCaseError> {
        let locked = Seen::default();
        let decide = {
            let locked = locked.clone();
            move |record: &OperationRecord, now| {
                locked.push((record.clone(), now));
                Decision {
                    effects: Effects::default(),
                    answer: Ok(Answer::Written),
                }
            }
        };
        let applied = self
            .store
            .write(self.tenant, guarded.clone(), &decide)
            .await
            .map_err(failed)?
            .ok_or_else(|| failed("the operation is gone"))?;
        Ok((applied, locked.all()))
    }

    async fn new(backend: &Backend, cap: HistoryCap) -> Self {
        let store = backend.store(cap);
        let name = format!("mirror-{}", uuid::Uuid::new_v4());
        let token = *uuid::Uuid::new_v4().as_bytes();
        let mut token_sha256 = [0u8; 32];
        token_sha256[..16].copy_from_slice(&token);
        let tenant = store
            .create_tenant(&name, &token_sha256)
            .await
            .expect("a tenant");
        Self { store, tenant }
    }

    /// The first record of a new scope.
    async fn claim(&self, command: &ClaimCommand) -> Result<OperationRecord, TestCaseError> {
        let started = self
            .store
            .insert_or_find(self.tenant, OperationId::generate(), command)
            .await
            .map_err(failed)?;
        match started {
            Some(ClaimStart::Inserted(record)) => Ok(record),
            other => Err(failed(format!("a new scope was not inserted: {other:?}"))),
        }
    }

    /// Runs one transition through the locked path, `effects` decided for
    /// the record as locked, and returns the record as written and the
    /// database clock of the decision.
    async fn transition(
        &self,
        operation_id: OperationId,
        effects: impl Fn(&OperationRecord, DateTime<Utc>) -> Effects + Send + Sync,
    ) -> Result<(OperationRecord, DateTime<Utc>), TestCaseError> {
        let decide = |record: &OperationRecord, now: DateTime<Utc>| Decision {
            effects: effects(record, now),
            answer: Ok(Answer::Written),
        };
        let applied = self
            .store
            .transition(self.tenant, &Target::Id(operation_id), &decide)
            .await
            .map_err(failed)?
            .ok_or_else(|| failed("the operation is gone"))?;
        Ok((applied.record, applied.now))
    }

    /// Makes the operation's record `next` (its identity, fence and
    /// operation deadline are the claim's), as the locked path writes it,
    /// and reads it back.
    async fn set(&self, next: OperationRecord) -> Result<OperationRecord, TestCaseError> {
        let operation_id = next.operation_id;
        self.transition(operation_id, move |_, _| Effects {
            update: Some(Update {
                next: next.clone(),
                takes_new_fence: false,
            }),
            ..Effects::default()
        })
        .await?;
        self.read(operation_id).await.map(|(record, _)| record)
    }

    /// The record as stored and the database clock of the read.
    async fn read(
        &self,
        operation_id: OperationId,
    ) -> Result<(OperationRecord, DateTime<Utc>), TestCaseError> {
        let found = self
            .store
            .find(self.tenant, &Target::Id(operation_id), None)
            .await
            .map_err(failed)?
            .ok_or_else(|| failed("the operation is gone"))?;
        Ok((found.record, found.now))
    }

    /// The operation's whole history.
    async fn history(&self, operation_id: OperationId) -> Result<Vec<HistoryEntry>, TestCaseError> {
        let page = HistoryPage {
            after: 0,
            limit: 10_000,
            of: None,
        };
        let found = self
            .store
            .find(self.tenant, &Target::Id(operation_id), Some(page))
            .await
            .map_err(failed)?
            .ok_or_else(|| failed("the operation is gone"))?;
        Ok(found.history)
    }
}

fn millis(value: i64) -> TimeDelta {
    TimeDelta::milliseconds(value)
}

/// A Claim of a scope nobody used: the lease and attempt lengths given,
/// every other value plain.
fn claim_command(lease: TimeDelta, attempt: TimeDelta, max_attempts: u32) -> ClaimCommand {
    ClaimCommand {
        scope: Scope {
            operation: "mirror".into(),
            key: uuid::Uuid::new_v4().to_string(),
        },
        fingerprint: Fingerprint([7; 32]),
        claim_token: b"claimer".to_vec(),
        lease,
        max_attempt_duration: attempt,
        max_attempts,
        retention: TimeDelta::hours(1),
        operation_deadline: None,
        on_failed: crate::domain::OnFailed::Replay,
        clock_margin: TimeDelta::zero(),
        previous_fingerprints: Vec::new(),
        held: None,
    }
}

/// The history of an operation as [`HistoryCap::place`] says the stores
/// keep it: each row with its coalesce key.
#[derive(Debug, Clone, Default)]
struct HistoryModel {
    rows: Vec<(HistoryEntry, Option<String>)>,
}

impl HistoryModel {
    /// Starts from a history as read (its entries' keys: none, as the first
    /// entry's, CLAIMED).
    fn of(history: Vec<HistoryEntry>) -> Self {
        Self {
            rows: history.into_iter().map(|entry| (entry, None)).collect(),
        }
    }

    /// Writes `entry` at `now` where [`HistoryCap::place`] puts it.
    fn place(&mut self, cap: HistoryCap, entry: &NewHistoryEntry, now: DateTime<Utc>) {
        let last = self
            .rows
            .last()
            .map(|(row, key)| (row.sequence, key.as_deref()));
        let sequence = last.map_or(0, |(sequence, _)| sequence) + 1;
        match cap.place(entry, last) {
            HistoryPlacement::CountIntoLast => {
                if let Some((row, _)) = self.rows.last_mut() {
                    row.count += 1;
                    row.last_at = now;
                    row.last_fence = entry.fence;
                    row.to_state = entry.to_state;
                    row.attempt = entry.attempt;
                }
            }
            HistoryPlacement::Append => {
                let row = stored(entry, sequence, entry.event.as_str(), &entry.detail, now);
                self.rows.push((row, entry.coalesce_key()));
            }
            HistoryPlacement::AppendTruncationMarker => {
                let event = crate::domain::HistoryEvent::HistoryTruncated.as_str();
                let row = stored(entry, sequence, event, HistoryCap::TRUNCATED_DETAIL, now);
                self.rows
                    .push((row, Some(HistoryCap::TRUNCATED_KEY.to_owned())));
            }
        }
    }

    fn entries(&self) -> Vec<HistoryEntry> {
        self.rows.iter().map(|(entry, _)| entry.clone()).collect()
    }
}

/// `entry` as a new row reads back, under `event` and `detail`.
fn stored(
    entry: &NewHistoryEntry,
    sequence: u64,
    event: &str,
    detail: &str,
    now: DateTime<Utc>,
) -> HistoryEntry {
    HistoryEntry {
        sequence,
        event: event.to_owned(),
        from_state: entry.from_state,
        to_state: entry.to_state,
        fence: entry.fence,
        last_fence: entry.fence,
        attempt: entry.attempt,
        detail: detail.to_owned(),
        count: 1,
        first_at: now,
        last_at: now,
        acted_by: None,
    }
}

/// A record's state and moments, as offsets in milliseconds from a base
/// moment; [`Shape::on`] lays it onto a claimed record. Only what the
/// domain reaches: an IN_PROGRESS record has a lease, a SUCCEEDED or
/// FAILED one its outcome, a tombstone its outcome's kind.
#[derive(Debug, Clone)]
struct Shape {
    state: State,
    attempt: u32,
    max_attempts: u32,
    lease_ms: i64,
    lease_expires: Option<i64>,
    attempt_deadline: Option<i64>,
    retry_at: Option<i64>,
    retain_until: Option<i64>,
    failure: FailureReason,
    taken_over: Option<(State, Option<i64>)>,
    receipt: Option<(Writer, i64, bool)>,
}

impl Shape {
    /// `claimed` as this shape, its moments counted from `base`.
    fn on(&self, claimed: &OperationRecord, base: DateTime<Utc>) -> OperationRecord {
        let at = |offset: i64| base + millis(offset);
        let outcome = match self.state {
            State::Succeeded => Some(Outcome::Succeeded(SuccessResult {
                body: b"done".to_vec(),
                content_type: "text/plain".into(),
                metadata: [("psp".to_owned(), "acme".to_owned())].into(),
            })),
            State::Failed => Some(Outcome::Failed {
                reason: self.failure,
                error: ErrorReport {
                    code: "declined".into(),
                    message: "declined".into(),
                    metadata: Default::default(),
                },
            }),
            _ => None,
        };
        let outcome_kind = match self.state {
            State::Succeeded | State::Failed => Some(self.state),
            State::Expired if self.failure == FailureReason::Terminal => Some(State::Failed),
            State::Expired => Some(State::Succeeded),
            _ => None,
        };
        let fence = claimed.fence;
        let lease_expires = match self.state {
            State::InProgress => self.lease_expires.or(Some(0)),
            _ => self.lease_expires,
        };
        OperationRecord {
            state: self.state,
            attempt: self.attempt,
            max_attempts: self.max_attempts,
            taken_over_from: self.taken_over.map(|(state, deadline)| PreviousAttempt {
                state,
                fence: fence.saturating_sub(1),
                attempt_deadline_at: deadline.map(at),
            }),
            lease_duration: millis(self.lease_ms),
            lease_expires_at: lease_expires.map(at),
            attempt_deadline_at: self.attempt_deadline.map(at),
            retry_at: self.retry_at.map(at),
            outcome,
            outcome_kind,
            last_write: self.receipt.map(|(writer, fence_offset, answered)| {
                let receipt_fence = fence.saturating_add_signed(fence_offset);
                WriteReceipt {
                    fence: receipt_fence,
                    digest: RequestDigest([3; 32]),
                    writer,
                    answer: answered.then_some(WriteAnswer {
                        state: self.state,
                        failure: None,
                        retry_at: None,
                        fence: match writer {
                            Writer::Owner => receipt_fence,
                            Writer::Reconciler => receipt_fence + 1,
                        },
                    }),
                }
            }),
            completed_at: self.retain_until.map(|_| at(0)),
            retain_until: self.retain_until.map(at),
            updated_at: base,
            ..claimed.clone()
        }
    }
}

/// Offsets around a moment: often exactly on it or a millisecond away,
/// otherwise anywhere within two minutes.
fn offset() -> impl Strategy<Value = i64> {
    prop_oneof![
        2 => -1i64..=1,
        3 => -120_000i64..120_000,
    ]
}

fn any_state() -> impl Strategy<Value = State> {
    prop_oneof![
        Just(State::InProgress),
        Just(State::Succeeded),
        Just(State::Failed),
        Just(State::RetryWait),
        Just(State::Unknown),
        Just(State::Expired),
    ]
}

fn shape(state: impl Strategy<Value = State>) -> impl Strategy<Value = Shape> {
    let failure = prop_oneof![
        Just(FailureReason::Terminal),
        Just(FailureReason::AttemptsExhausted),
        Just(FailureReason::DeadlineExceeded),
    ];
    let taken_over = proptest::option::of((
        prop_oneof![Just(State::InProgress), Just(State::Unknown)],
        proptest::option::of(offset()),
    ));
    let receipt = proptest::option::of((
        prop_oneof![Just(Writer::Owner), Just(Writer::Reconciler)],
        -1i64..=1,
        any::<bool>(),
    ));
    (
        (state, 1u32..4, 1u32..4, 1i64..120_000),
        (
            proptest::option::weighted(0.75, offset()),
            proptest::option::weighted(0.75, offset()),
            proptest::option::weighted(0.75, offset()),
            proptest::option::weighted(0.75, offset()),
        ),
        (failure, taken_over, receipt),
    )
        .prop_map(
            |(
                (state, attempt, max_attempts, lease_ms),
                (lease_expires, attempt_deadline, retry_at, retain_until),
                (failure, taken_over, receipt),
            )| Shape {
                state,
                attempt,
                max_attempts,
                lease_ms,
                lease_expires,
                attempt_deadline,
                retry_at,
                retain_until,
                failure,
                taken_over,
                receipt,
            },
        )
}

/// What a closure the store calls was handed, each time.
#[derive(Clone)]
struct Seen<T>(Arc<Mutex<Vec<T>>>);

impl<T> Default for Seen<T> {
    fn default() -> Self {
        Self(Arc::new(Mutex::new(Vec::new())))
    }
}

impl<T: Clone> Seen<T> {
    fn push(&self, value: T) {
        if let Ok(mut seen) = self.0.lock() {
            seen.push(value);
        }
    }

    fn all(&self) -> Vec<T> {
        self.0.lock().map(|seen| seen.clone()).unwrap_or_default()
    }
}
