//! Every store is a [`Dialect`] running its statements ([`Sql`]) in the
//! flows below: [`Store::write`] tries the dialect's one-statement batched
//! path first ([`Dialect::write_guarded`], Postgres only) and falls back to
//! the [`locked`] path; [`Store::transition`] always takes the locked path;
//! the reads and the sweep are written here.

use async_trait::async_trait;
use tracing::instrument;

use super::access::{Credentials, TokenGrant};
use super::dialect::Dialect;
use super::error::StoreError;
use super::locked;
use super::statements::Sql;
use super::{
    AnswerTally, Applied, ClaimStart, Decide, OperationCounts, PoolUsage, Store, SweepReport,
};
use crate::domain::guarded::GuardedWrite;
use crate::domain::transition::decide_sweep;
use crate::domain::{
    ClaimCommand, Found, HistoryPage, OperationId, OperationsPage, OperationsQuery, Result,
    SweepPolicy, Target, TenantId, UnresolvedPage, UnresolvedQuery,
};

/// Operations one statement adds answer counts to. Measured on Postgres
/// (1M operations, rows drawn at random, mostly not in memory): 1,000 in
/// 64 ms, 10,000 in 0.82 s, every update HOT.
const ANSWER_COUNT_BATCH: usize = 1_000;

/// Every store is a dialect running its statements in these flows. Errors
/// are translated inside them; spans name the call and the database.
#[async_trait]
impl<D: Sql> Store for D {
    fn kind(&self) -> &'static str {
        D::KIND
    }

    #[instrument(name = "store.insert_or_find", skip_all, fields(db.system = D::SYSTEM))]
    async fn insert_or_find(
        &self,
        tenant: TenantId,
        operation_id: OperationId,
        command: &ClaimCommand,
    ) -> Result<Option<ClaimStart>> {
        Dialect::insert_or_find(self, tenant, operation_id, command)
            .await
            .map_err(D::translate)
    }

    #[instrument(name = "store.write", skip_all, fields(db.system = D::SYSTEM))]
    async fn write(
        &self,
        tenant: TenantId,
        guarded: GuardedWrite,
        decide: &Decide<'_>,
    ) -> Result<Option<Applied>> {
        let target = Target::Id(guarded.operation_id);
        let written = self
            .write_guarded(tenant, guarded)
            .await
            .map_err(D::translate)?;
        if let Some(applied) = written {
            self.announce_change(applied.record.operation_id);
            return Ok(Some(applied));
        }
        // Boxed: the locked path's future is large (about 31 KB on Postgres),
        // and without the box every write's future, allocated and moved
        // whole, would be that large although the common case never takes
        // this path.
        Box::pin(locked::transition(self, tenant, &target, decide)).await
    }

    #[instrument(name = "store.transition", skip_all, fields(db.system = D::SYSTEM))]
    async fn transition(
        &self,
        tenant: TenantId,
        target: &Target,
        decide: &Decide<'_>,
    ) -> Result<Option<Applied>> {
        locked::transition(self, tenant, target, decide).await
    }

    /// Without history (the Claim replay path) one statement reads the
    /// record and the clock; with history, one snapshot, so that record,
    /// history and clock agree.
    #[instrument(name = "store.find", skip_all, fields(db.system = D::SYSTEM))]
    async fn find(
        &self,
        tenant: TenantId,
        target: &Target,
        history: Option<HistoryPage>,
    ) -> Result<Option<Found>> {
        let found = async {
            let Some(page) = history else {
                let found = self.read_alone(tenant, target).await?;
                return Ok(found.map(|(record, now)| Found::without_history(record, now)));
            };
            let mut transaction = self.begin_snapshot().await?;
            let Some((record, now)) =
                D::read_with_clock_in(&mut transaction, tenant, target).await?
            else {
                self.end_read(transaction).await?;
                return Ok(None);
            };
            let mut history = D::history_page(&mut transaction, record.operation_id, page).await?;
            self.end_read(transaction).await?;
            // The page holds one entry more: whether another page follows.
            let limit = usize::try_from(page.limit).unwrap_or(usize::MAX);
            let more_history = history.len() > limit;
            history.truncate(limit);
            Ok::<_, StoreError>(Some(Found {
                record,
                history,
                more_history,
                now,
            }))
        };
        found.await.map_err(D::translate)
    }

    #[instrument(name = "store.list_unresolved", skip_all, fields(db.system = D::SYSTEM))]
    async fn list_unresolved(
        &self,
        tenant: TenantId,
        query: &UnresolvedQuery,
    ) -> Result<UnresolvedPage> {
        let page = async {
            let (mut transaction, now) = self.begin_read_at_clock().await?;
            let records = D::unresolved(&mut transaction, tenant, query, now).await?;
            self.end_read(transaction).await?;
            Ok::<_, StoreError>(UnresolvedPage { records, now })
        };
        page.await.map_err(D::translate)
    }

    #[instrument(name = "store.list_operations", skip_all, fields(db.system = D::SYSTEM))]
    async fn list_operations(&self, query: &OperationsQuery) -> Result<OperationsPage> {
        let page = async {
            // The clock first, in the same transaction: every time in the
            // filter (age, leases, deadlines) is compared with it.
            let (mut transaction, now) = self.begin_read_at_clock().await?;
            let operations = D::operations(&mut transaction, query, now).await?;
            self.end_read(transaction).await?;
            Ok::<_, StoreError>(OperationsPage { operations, now })
        };
        page.await.map_err(D::translate)
    }

    /// One batch: results past retention first, then retries past their
    /// deadline, `batch` records in all, each decided by [`decide_sweep`];
    /// then tombstones past their own retention.
    #[instrument(name = "store.sweep", skip_all, fields(db.system = D::SYSTEM))]
    async fn sweep(&self, batch: u32, policy: SweepPolicy) -> Result<SweepReport> {
        let swept = async {
            let mut report = SweepReport::default();
            let (mut transaction, now) = self.begin_write_at_clock().await?;
            let mut due = Vec::new();
            for (statement, name) in [
                (D::DUE_FOR_TOMBSTONE, "SELECT operations past retention"),
                (D::DUE_FOR_DEADLINE, "SELECT retries past their deadline"),
            ] {
                let room = i64::from(batch) - i64::try_from(due.len()).unwrap_or(i64::MAX);
                if room <= 0 {
                    break;
                }
                due.extend(D::due(&mut transaction, statement, name, now, room).await?);
            }
            for record in due {
                let Some(decision) = decide_sweep(&record, now, policy) else {
                    continue;
                };
                let cap = self.history_cap();
                let after = D::apply(&mut transaction, &record, decision.effects, cap, now).await?;
                report.count(&after);
            }
            report.deleted =
                D::delete_expired_tombstones(&mut transaction, now, i64::from(batch)).await?;
            self.commit(transaction).await?;
            Ok(report)
        };
        swept.await.map_err(D::translate)
    }

    #[instrument(name = "store.count_operations", skip_all, fields(db.system = D::SYSTEM))]
    async fn count_operations(&self) -> Result<OperationCounts> {
        let counts = async {
            let (mut transaction, now) = self.begin_read_at_clock().await?;
            let counts = D::count_operations(&mut transaction, now).await?;
            self.end_read(transaction).await?;
            Ok::<_, StoreError>(counts)
        };
        counts.await.map_err(D::translate)
    }

    fn pool_usage(&self) -> PoolUsage {
        Dialect::pool_usage(self)
    }

    /// By the database's clock, on the readers.
    async fn authenticate(&self, token_sha256: &[u8; 32]) -> Result<Option<TokenGrant>> {
        let found = async {
            let mut connection = self.acquire_read().await?;
            let read = async {
                let now = D::database_now(&mut connection).await?;
                Ok::<_, StoreError>((D::grant(&mut connection, token_sha256, now).await?, now))
            }
            .await;
            D::release_read(connection);
            let (grant, now) = read?;
            Ok::<_, StoreError>(grant.map(|row| {
                TokenGrant {
                    tenant: TenantId(row.tenant_id),
                    name: row.name.unwrap_or_else(|| "unnamed".into()),
                    scopes: row.scopes,
                    expires_in: row
                        .expires_at
                        .map(|expires_at| (expires_at - now).to_std().unwrap_or_default()),
                }
            }))
        };
        found.await.map_err(D::translate)
    }

    async fn tenant_by_name(&self, name: &str) -> Result<Option<TenantId>> {
        let found = async {
            let mut connection = self.acquire_read().await?;
            let found = D::active_tenant(&mut connection, name).await;
            D::release_read(connection);
            found
        };
        found.await.map_err(D::translate)
    }

    /// One write transaction for the batch, at one clock.
    async fn record_tokens_used(&self, token_hashes: &[[u8; 32]]) -> Result<()> {
        if token_hashes.is_empty() {
            return Ok(());
        }
        let marked = async {
            let (mut transaction, now) = self.begin_write_at_clock().await?;
            for hash in token_hashes {
                D::mark_used(&mut transaction, hash, now).await?;
            }
            self.commit(transaction).await
        };
        marked.await.map_err(D::translate)
    }

    #[instrument(name = "store.add_answer_counts", skip_all, fields(db.system = D::SYSTEM))]
    async fn add_answer_counts(&self, tallies: &[AnswerTally]) -> Result<()> {
        // Sorted by operation_id, so that two replicas' batches lock shared
        // rows in one order; at most ANSWER_COUNT_BATCH a statement, so that
        // one holds its rows' locks briefly (an owner's write to one of them
        // waits for it).
        let mut sorted = tallies.to_vec();
        sorted.sort_by_key(|tally| tally.operation_id.0);
        for batch in sorted.chunks(ANSWER_COUNT_BATCH) {
            Dialect::add_answer_counts(self, batch)
                .await
                .map_err(D::translate)?;
        }
        Ok(())
    }

    fn credentials(&self) -> &dyn Credentials {
        self
    }

    fn holds(&self) -> &dyn super::holds::Holds {
        self
    }

    async fn listen_for_changes(
        &self,
        changed: &(dyn Fn(OperationId) + Send + Sync),
    ) -> Result<()> {
        Dialect::listen_for_changes(self, changed).await
    }

    async fn check_ready(&self) -> Result<()> {
        let ready = async {
            let mut connection = self.acquire_read().await?;
            let pinged = D::ping(&mut connection).await;
            D::release_read(connection);
            pinged
        };
        ready.await.map_err(D::translate)
    }

    async fn close(&self) {
        Dialect::close(self).await;
    }
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Utc};

    use super::*;
    use crate::domain::guarded::renew_write;
    use crate::domain::{Decision, OperationRecord, RenewCommand};
    use crate::store::mirror_tests::TempSqlite;

    /// Every owner write's future is allocated and moved whole (the trait
    /// boxes it), so the locked path, which the common case never takes,
    /// must not size it: it did, at 7 KB a write on SQLite (31 KB on
    /// Postgres, in a release build).
    #[tokio::test]
    async fn a_writes_future_does_not_carry_the_locked_paths_size() {
        let sqlite = TempSqlite::open().await;
        let command = RenewCommand {
            operation_id: OperationId(uuid::Uuid::nil()),
            fence: 1,
            lease: None,
        };
        let decide = |_: &OperationRecord, _: DateTime<Utc>| -> Decision {
            unreachable!("the future is measured, never run")
        };
        let write = Store::write(&sqlite.store, TenantId(1), renew_write(&command), &decide);
        let size = std::mem::size_of_val(&*write);
        drop(write);
        sqlite.close().await;
        assert!(size < 4096, "a write's future takes {size} bytes");
    }
}
