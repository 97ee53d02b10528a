//! Counting a refused conflicting Claim: the stores' `COUNT_CONFLICT`
//! (`store/sql.rs`), run by the locked path for `decide_claim`'s refusal,
//! against [`OperationRecord::with_conflict_counted`], on records of every
//! shape (state, lease, deadlines, receipts, takeovers), with the coalesced
//! history entry the refusal records.

use proptest::prelude::*;
use sqlx::PgPool;

use super::{
    Backend, CASES, Fixture, HistoryModel, Shape, TempSqlite, any_state, claim_command, failed,
    for_random, millis, shape,
};
use crate::domain::transition::decide_claim;
use crate::domain::{Error, Fingerprint, HistoryCap, OperationRecord, Target};
use crate::store::postgres::{MIGRATOR, PostgresStore};

/// The stored record after each of `refused` conflicting Claims is what
/// `with_conflict_counted` says at the decision's clock, the answer is the
/// refusal as before, and the history holds one coalesced entry.
async fn conflicts_are_counted_as_the_spec_says(backend: Backend) {
    let fixture = Fixture::new(&backend, HistoryCap::default()).await;
    let strategy = (shape(any_state()), 1usize..4);
    for_random(CASES, strategy, move |(shape, refused): (Shape, usize)| {
        let fixture = fixture.clone();
        Box::pin(async move {
            let command = claim_command(millis(30_000), millis(60_000), 5);
            let claimed = fixture.claim(&command).await?;
            let operation_id = claimed.operation_id;
            let (_, base) = fixture.read(operation_id).await?;
            let mut before = fixture.set(shape.on(&claimed, base)).await?;
            let mut history = HistoryModel::of(fixture.history(operation_id).await?);
            let conflicting = crate::domain::ClaimCommand {
                fingerprint: Fingerprint([0xee; 32]),
                ..command.clone()
            };
            for _ in 0..refused {
                let seen =
                    super::Seen::<(OperationRecord, chrono::DateTime<chrono::Utc>)>::default();
                let decide = {
                    let seen = seen.clone();
                    let conflicting = conflicting.clone();
                    move |record: &OperationRecord, now| {
                        seen.push((record.clone(), now));
                        decide_claim(record, &conflicting, now)
                    }
                };
                let applied = fixture
                    .store
                    .transition(fixture.tenant, &Target::Id(operation_id), &decide)
                    .await
                    .map_err(failed)?
                    .ok_or_else(|| failed("the operation is gone"))?;
                prop_assert_eq!(&applied.answer, &Err(Error::KeyReused { operation_id }));
                prop_assert!(!applied.record_changed);
                let (locked, now) = seen
                    .all()
                    .pop()
                    .ok_or_else(|| failed("the locked path decided nothing"))?;
                prop_assert_eq!(&locked, &before);
                let spec = before.with_conflict_counted(now);
                prop_assert_eq!(&applied.record, &spec);
                let (stored, _) = fixture.read(operation_id).await?;
                prop_assert_eq!(&stored, &spec);
                let entry = decide_claim(&before, &conflicting, now)
                    .effects
                    .history
                    .ok_or_else(|| failed("the refusal records no history"))?;
                history.place(HistoryCap::default(), &entry, now);
                prop_assert_eq!(fixture.history(operation_id).await?, history.entries());
                before = stored;
            }
            let last = history
                .entries()
                .pop()
                .ok_or_else(|| failed("no history"))?;
            prop_assert_eq!(last.event.as_str(), "CONFLICTING_CLAIM_REFUSED");
            prop_assert_eq!(last.count, refused as u64);
            Ok(())
        })
    })
    .await;
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn postgres_count_conflict_is_with_conflict_counted(pool: PgPool) {
    conflicts_are_counted_as_the_spec_says(Backend::Postgres(PostgresStore::from_pool(pool))).await;
}

#[tokio::test]
async fn sqlite_count_conflict_is_with_conflict_counted() {
    let sqlite = TempSqlite::open().await;
    conflicts_are_counted_as_the_spec_says(sqlite.backend()).await;
    sqlite.close().await;
}
