//! The one-statement owner write, Postgres's and SQLite's write_guarded.sql: its WHERE
//! against [`Guard::holds`], its SET against [`Write::apply`] (the lease cap
//! too, against [`decide_renew`]).
//!
//! [`Guard::holds`]: crate::domain::guarded::Guard::holds
//! [`Write::apply`]: crate::domain::guarded::Write::apply

use chrono::{DateTime, Utc};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use sqlx::PgPool;

use super::{Backend, CASES, Fixture, Shape, TempSqlite, claim_command, for_random, millis, shape};
use crate::domain::guarded::{GuardedWrite, complete_write, fail_write, renew_write};
use crate::domain::transition::decide_renew;
use crate::domain::{
    CompleteCommand, ErrorReport, FailCommand, FailDisposition, HistoryCap, OperationRecord,
    RenewCommand, State, SuccessResult, Writer,
};
use crate::store::Applied;
use crate::store::postgres::{MIGRATOR, PostgresStore};

/// An owner write whose common case is one guarded statement.
#[derive(Debug, Clone)]
pub(super) enum WriteInput {
    /// With the lease asked for, in milliseconds (`None`: the owner's).
    Renew(Option<i64>),
    Complete,
    /// With the retry delay, in milliseconds.
    Fail(FailDisposition, i64),
}

pub(super) fn write_input() -> impl Strategy<Value = WriteInput> {
    let lease = prop_oneof![(1i64..4).prop_map(|seconds| seconds * 1_000), 1i64..300_000];
    let disposition = prop_oneof![
        Just(FailDisposition::Terminal),
        Just(FailDisposition::Retryable),
        Just(FailDisposition::Unknown),
    ];
    prop_oneof![
        proptest::option::of(lease).prop_map(WriteInput::Renew),
        Just(WriteInput::Complete),
        (disposition, 0i64..120_000)
            .prop_map(|(disposition, retry_ms)| WriteInput::Fail(disposition, retry_ms)),
    ]
}

impl WriteInput {
    fn renew(&self, record: &OperationRecord, fence: u64) -> Option<RenewCommand> {
        match self {
            WriteInput::Renew(lease) => Some(RenewCommand {
                operation_id: record.operation_id,
                fence,
                lease: lease.map(millis),
            }),
            _ => None,
        }
    }

    /// The guarded write of this request for `record`, sent by the owner of
    /// `record.fence + fence_offset`.
    pub(super) fn on(&self, record: &OperationRecord, fence_offset: i64) -> GuardedWrite {
        let fence = record.fence.saturating_add_signed(fence_offset);
        let operation_id = record.operation_id;
        match self {
            WriteInput::Renew(_) => {
                let command = self.renew(record, fence);
                renew_write(&command.unwrap_or(RenewCommand {
                    operation_id,
                    fence,
                    lease: None,
                }))
            }
            WriteInput::Complete => complete_write(&CompleteCommand {
                operation_id,
                fence,
                result: SuccessResult {
                    body: b"{\"charge\":\"ch_1\"}".to_vec(),
                    content_type: "application/json".into(),
                    metadata: [("psp".to_owned(), "acme".to_owned())].into(),
                },
            }),
            WriteInput::Fail(disposition, retry_ms) => {
                let command = FailCommand {
                    operation_id,
                    fence,
                    disposition: *disposition,
                    error: ErrorReport {
                        code: "card_declined".into(),
                        message: "declined".into(),
                        metadata: Default::default(),
                    },
                    retry_after: millis(*retry_ms),
                    clock_margin: millis(0),
                };
                fail_write(&command).expect("these dispositions have a common case")
            }
        }
    }
}

#[derive(Debug, Clone)]
struct GuardInput {
    shape: Shape,
    /// From the Claim, in milliseconds.
    operation_deadline: Option<i64>,
    write: WriteInput,
    fence_offset: i64,
}

/// Records whose owner's write the guard lets through: IN_PROGRESS, before
/// the attempt deadline, with no receipt of that owner, a retry within the
/// budget and the operation deadline.
fn holding_guard(writes: impl Strategy<Value = WriteInput>) -> impl Strategy<Value = GuardInput> {
    let shape = shape(Just(State::InProgress));
    // Half the deadlines within a Renew's lease, so that the lease cap is
    // met often; none so near that it passes during a case.
    let deadline = prop_oneof![5_000i64..30_000, 30_000i64..600_000];
    (shape, writes, deadline, 2u32..5).prop_map(|(mut shape, write, deadline, max_attempts)| {
        shape.attempt = max_attempts - 1;
        shape.max_attempts = max_attempts;
        shape.attempt_deadline = Some(deadline);
        shape.retain_until = None;
        shape.receipt = shape.receipt.filter(|(writer, fence_offset, _)| {
            *writer == Writer::Reconciler || *fence_offset != 0
        });
        GuardInput {
            shape,
            operation_deadline: None,
            write,
            fence_offset: 0,
        }
    })
}

/// The one condition of the guard an input breaks, if any.
#[derive(Debug, Clone, Copy)]
enum Breach {
    None,
    Fence(i64),
    State(State),
    /// Passed by then (this many milliseconds before the claim), or none.
    AttemptDeadline(Option<i64>),
    OwnerReceipt,
    /// A retry with every attempt spent.
    BudgetSpent,
    /// A retry, with the operation deadline this many milliseconds from
    /// the claim's clock plus the retry's delay.
    OperationDeadline(i64),
}

/// Each condition broken; `retries`: those of a retry too (which switch the
/// write to a RETRYABLE Fail).
fn breach(retries: bool) -> impl Strategy<Value = Breach> {
    let other_state = prop_oneof![
        Just(State::Succeeded),
        Just(State::Failed),
        Just(State::RetryWait),
        Just(State::Unknown),
        Just(State::Expired),
    ];
    prop_oneof![
        2 => Just(Breach::None),
        1 => prop_oneof![Just(-1i64), Just(1i64)].prop_map(Breach::Fence),
        1 => other_state.prop_map(Breach::State),
        1 => proptest::option::of(-120_000i64..=0).prop_map(Breach::AttemptDeadline),
        1 => Just(Breach::OwnerReceipt),
        u32::from(retries) => Just(Breach::BudgetSpent),
        u32::from(retries) => (-60_000i64..60_000).prop_map(Breach::OperationDeadline),
    ]
}

/// Writes that the guard lets through, and the same with each of its
/// conditions broken in turn.
fn any_guard(
    writes: impl Strategy<Value = WriteInput>,
    retries: bool,
) -> impl Strategy<Value = (GuardInput, Breach)> {
    (holding_guard(writes), breach(retries), 0i64..120_000).prop_map(
        |(mut input, breach, retry_ms)| {
            match breach {
                Breach::None => {}
                Breach::Fence(offset) => input.fence_offset = offset,
                Breach::State(state) => input.shape.state = state,
                Breach::AttemptDeadline(deadline) => input.shape.attempt_deadline = deadline,
                Breach::OwnerReceipt => input.shape.receipt = Some((Writer::Owner, 0, true)),
                Breach::BudgetSpent => {
                    input.shape.attempt = input.shape.max_attempts;
                    input.write = WriteInput::Fail(FailDisposition::Retryable, retry_ms);
                }
                Breach::OperationDeadline(beyond) => {
                    input.operation_deadline = Some(retry_ms + beyond);
                    input.write = WriteInput::Fail(FailDisposition::Retryable, retry_ms);
                }
            }
            (input, breach)
        },
    )
}

/// What one guarded write did to the record `before`, read at `read_at`.
struct Ran {
    before: OperationRecord,
    read_at: DateTime<Utc>,
    guarded: GuardedWrite,
    applied: Applied,
    /// The clock of the locked path, if the statement left the write to it.
    locked_at: Option<DateTime<Utc>>,
}

async fn run(fixture: &Fixture, input: &GuardInput) -> Result<Ran, TestCaseError> {
    let mut command = claim_command(millis(60_000), millis(60_000), 3);
    command.operation_deadline = input.operation_deadline.map(millis);
    let claimed = fixture.claim(&command).await?;
    fixture
        .set(input.shape.on(&claimed, claimed.created_at))
        .await?;
    let (before, read_at) = fixture.read(claimed.operation_id).await?;
    let guarded = input.write.on(&before, input.fence_offset);
    let (applied, locked) = fixture.write_recording(&guarded).await?;
    if let Some((record, _)) = locked.last() {
        prop_assert_eq!(record, &before, "the statement changed a record it refused");
    }
    Ok(Ran {
        before,
        read_at,
        guarded,
        applied,
        locked_at: locked.last().map(|(_, now)| *now),
    })
}

fn postgres(pool: PgPool) -> Backend {
    Backend::Postgres(PostgresStore::from_pool(pool))
}

/// The statement writes exactly when [`Guard::holds`] at its clock. The
/// guard only ever stops holding as time passes, so a refusal is checked
/// at the locked path's clock, which comes after the statement's.
///
/// [`Guard::holds`]: crate::domain::guarded::Guard::holds
async fn written_exactly_when_the_guard_holds(
    backend: Backend,
    guards: impl Strategy<Value = (GuardInput, Breach)> + Send + 'static,
) {
    let fixture = Fixture::new(&backend, HistoryCap::default()).await;
    for_random(CASES * 2, guards, move |(input, _)| {
        let fixture = fixture.clone();
        Box::pin(async move {
            let ran = run(&fixture, &input).await?;
            let guard = &ran.guarded.guard;
            match ran.locked_at {
                None => prop_assert!(
                    guard.holds(&ran.before, ran.applied.now),
                    "written, but the guard does not hold at the statement's clock"
                ),
                Some(locked_at) => prop_assert!(
                    !guard.holds(&ran.before, locked_at),
                    "refused, but the guard holds (read at {})",
                    ran.read_at
                ),
            }
            Ok(())
        })
    })
    .await;
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn postgres_write_guarded_where_is_guard_holds(pool: PgPool) {
    written_exactly_when_the_guard_holds(postgres(pool), any_guard(write_input(), true)).await;
}

#[tokio::test]
async fn sqlite_write_guarded_where_is_guard_holds() {
    let sqlite = TempSqlite::open().await;
    let guards = any_guard(write_input(), true);
    written_exactly_when_the_guard_holds(sqlite.backend(), guards).await;
    sqlite.close().await;
}

/// What the statement writes is [`Write::apply`] at its clock, the lease
/// capped at the attempt deadline as [`decide_renew`] caps it.
///
/// [`Write::apply`]: crate::domain::guarded::Write::apply
async fn written_as_write_apply(
    backend: Backend,
    writes: impl Strategy<Value = WriteInput> + Send + 'static,
) {
    let fixture = Fixture::new(&backend, HistoryCap::default()).await;
    for_random(CASES, holding_guard(writes), move |input| {
        let fixture = fixture.clone();
        Box::pin(async move {
            let ran = run(&fixture, &input).await?;
            prop_assert_eq!(ran.locked_at, None, "the guard holds: one statement writes");
            let now = ran.applied.now;
            let spec = ran.guarded.write.apply(&ran.before, now);
            prop_assert_eq!(&ran.applied.record, &spec);
            let (stored, _) = fixture.read(ran.before.operation_id).await?;
            prop_assert_eq!(&stored, &spec);
            if let Some(command) = input.write.renew(&ran.before, ran.before.fence) {
                let decided = decide_renew(&ran.before, &command, now).effects.update;
                let lease = decided.map(|update| update.next.lease_expires_at);
                prop_assert_eq!(lease, Some(stored.lease_expires_at), "the lease cap");
            }
            Ok(())
        })
    })
    .await;
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn postgres_write_guarded_set_is_write_apply(pool: PgPool) {
    written_as_write_apply(postgres(pool), write_input()).await;
}

#[tokio::test]
async fn sqlite_write_guarded_set_is_write_apply() {
    let sqlite = TempSqlite::open().await;
    written_as_write_apply(sqlite.backend(), write_input()).await;
    sqlite.close().await;
}
