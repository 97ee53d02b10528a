//! History placement: Postgres's append_history.sql, SQLite's
//! count_into_last_history_entry.sql with append_history.sql, the `last`
//! CTE of Postgres's write_guarded.sql and the `placed` subquery of SQLite's,
//! against [`HistoryCap::place`].

use proptest::prelude::*;
use sqlx::PgPool;

use super::guarded::{WriteInput, write_input};
use super::{Backend, CASES, Fixture, HistoryModel, TempSqlite, claim_command, for_random, millis};
use crate::domain::{
    Effects, Fence, HistoryCap, HistoryEvent, NewHistoryEntry, OperationRecord, State, Update,
};
use crate::store::postgres::{MIGRATOR, PostgresStore};

#[derive(Debug, Clone)]
struct EntryInput {
    event: HistoryEvent,
    from_state: Option<State>,
    to_state: State,
    /// Counted from the operation's fence: renewals of one fence coalesce.
    fence_offset: Fence,
    attempt: u32,
    detail: &'static str,
    /// The cap it is written under: an operator may change it between two
    /// writes of one operation. From 2, as the cap never reaches the first
    /// entry, CLAIMED, which Postgres inserts with the record (no cap runs
    /// below 10: `HistoryCap::MIN_MAX_ENTRIES`); small, so that the
    /// truncation marker is reached.
    cap: u32,
}

impl EntryInput {
    fn on(&self, record: &OperationRecord) -> NewHistoryEntry {
        NewHistoryEntry {
            event: self.event,
            from_state: self.from_state,
            to_state: self.to_state,
            fence: record.fence + self.fence_offset,
            attempt: self.attempt,
            detail: self.detail.to_owned(),
        }
    }
}

fn entry() -> impl Strategy<Value = EntryInput> {
    let event = prop_oneof![
        3 => Just(HistoryEvent::Renewed),
        2 => Just(HistoryEvent::StaleWriteRefused),
        2 => Just(HistoryEvent::LateWriteRefused),
        1 => Just(HistoryEvent::Completed),
        1 => Just(HistoryEvent::Failed),
        1 => Just(HistoryEvent::RetryScheduled),
        1 => Just(HistoryEvent::TakenOver),
        1 => Just(HistoryEvent::MarkedUnknown),
        1 => Just(HistoryEvent::Expired),
    ];
    (
        event,
        proptest::option::of(super::any_state()),
        super::any_state(),
        0u64..2,
        1u32..3,
        prop_oneof![Just(""), Just("renew"), Just("complete")],
        prop_oneof![3 => Just(4u32), 1 => 2u32..7],
    )
        .prop_map(
            |(event, from_state, to_state, fence_offset, attempt, detail, cap)| EntryInput {
                event,
                from_state,
                to_state,
                fence_offset,
                attempt,
                detail,
                cap,
            },
        )
}

#[derive(Debug, Clone)]
struct HistoryInput {
    entries: Vec<EntryInput>,
    /// The cap of a last, guarded write.
    cap: u32,
}

fn inputs() -> impl Strategy<Value = HistoryInput> {
    (proptest::collection::vec(entry(), 0..16), 2u32..7)
        .prop_map(|(entries, cap)| HistoryInput { entries, cap })
}

fn cap(max_entries: u32) -> HistoryCap {
    HistoryCap { max_entries }
}

/// A claimed operation with `entries` written into its history by the
/// locked path; the fixture, the record, and the history the model expects.
async fn with_history(
    backend: &Backend,
    entries: &[EntryInput],
) -> Result<(Fixture, OperationRecord, HistoryModel), proptest::test_runner::TestCaseError> {
    let fixture = Fixture::new(backend, HistoryCap::default()).await;
    let record = fixture
        .claim(&claim_command(millis(60_000), millis(60_000), 3))
        .await?;
    let mut model = HistoryModel::of(fixture.history(record.operation_id).await?);
    for input in entries {
        let entry = input.on(&record);
        let written = entry.clone();
        let under = Fixture {
            store: backend.store(cap(input.cap)),
            tenant: fixture.tenant,
        };
        let (_, now) = under
            .transition(record.operation_id, move |_, _| Effects {
                history: Some(written.clone()),
                ..Effects::default()
            })
            .await?;
        model.place(cap(input.cap), &entry, now);
    }
    Ok((fixture, record, model))
}

/// Entries the locked path writes land where [`HistoryCap::place`] puts
/// them: counted into the last, appended, or as the truncation marker.
async fn appended_history_is_history_cap_place(backend: Backend) {
    for_random(CASES, inputs(), move |input| {
        let backend = backend.clone();
        Box::pin(async move {
            let (fixture, record, model) = with_history(&backend, &input.entries).await?;
            prop_assert_eq!(fixture.history(record.operation_id).await?, model.entries());
            Ok(())
        })
    })
    .await;
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn postgres_append_history_is_history_cap_place(pool: PgPool) {
    appended_history_is_history_cap_place(Backend::Postgres(PostgresStore::from_pool(pool))).await;
}

#[tokio::test]
async fn sqlite_append_history_is_history_cap_place() {
    let sqlite = TempSqlite::open().await;
    appended_history_is_history_cap_place(sqlite.backend()).await;
    sqlite.close().await;
}

/// A write of the locked path whose entry [`HistoryCap::place`] appends
/// whatever the last one is (a terminal transition) goes with its guarded
/// UPDATE, in one query on SQLite (`append_entry_after_update.sql`): it lands
/// where the model puts it, after any history, and so does an entry that
/// does not qualify (a renewal, a refusal), written the usual way.
#[tokio::test]
async fn sqlite_entry_written_with_its_update_is_history_cap_place() {
    let sqlite = TempSqlite::open().await;
    let backend = sqlite.backend();
    let strategy = (inputs(), entry());
    for_random(
        CASES,
        strategy,
        move |(input, last): (HistoryInput, EntryInput)| {
            let backend = backend.clone();
            Box::pin(async move {
                let (fixture, record, mut model) = with_history(&backend, &input.entries).await?;
                let entry = last.on(&record);
                let written = entry.clone();
                let under = Fixture {
                    store: backend.store(cap(input.cap)),
                    tenant: fixture.tenant,
                };
                let (_, now) = under
                    .transition(record.operation_id, move |current, now| Effects {
                        update: Some(Update {
                            next: OperationRecord {
                                updated_at: now,
                                ..current.clone()
                            },
                            takes_new_fence: false,
                        }),
                        history: Some(written.clone()),
                        ..Effects::default()
                    })
                    .await?;
                model.place(cap(input.cap), &entry, now);
                prop_assert_eq!(fixture.history(record.operation_id).await?, model.entries());
                Ok(())
            })
        },
    )
    .await;
    sqlite.close().await;
}

/// The entry of a guarded write (Renew, Complete, Fail in one statement)
/// lands where [`HistoryCap::place`] puts it, after any history.
async fn guarded_history_is_history_cap_place(
    backend: Backend,
    writes: impl Strategy<Value = WriteInput> + Send + 'static,
) {
    let strategy = (inputs(), writes);
    for_random(
        CASES,
        strategy,
        move |(input, write): (HistoryInput, WriteInput)| {
            let backend = backend.clone();
            Box::pin(async move {
                let (fixture, record, mut model) = with_history(&backend, &input.entries).await?;
                let fixture = Fixture {
                    store: backend.store(cap(input.cap)),
                    ..fixture
                };
                let (before, _) = fixture.read(record.operation_id).await?;
                let guarded = write.on(&before, 0);
                let (applied, locked) = fixture.write_recording(&guarded).await?;
                prop_assert!(
                    locked.is_empty(),
                    "the guard holds, yet the locked path decided"
                );
                model.place(cap(input.cap), &guarded.history(&before), applied.now);
                prop_assert_eq!(fixture.history(record.operation_id).await?, model.entries());
                Ok(())
            })
        },
    )
    .await;
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn postgres_write_guarded_history_is_history_cap_place(pool: PgPool) {
    let backend = Backend::Postgres(PostgresStore::from_pool(pool));
    guarded_history_is_history_cap_place(backend, write_input()).await;
}

#[tokio::test]
async fn sqlite_write_guarded_history_is_history_cap_place() {
    let sqlite = TempSqlite::open().await;
    guarded_history_is_history_cap_place(sqlite.backend(), write_input()).await;
    sqlite.close().await;
}
