//! Every store call bounded in time. The database's own timeouts end what
//! the server sees (a lock waited for, a long statement); this bound also
//! ends what it cannot see: a connection whose packets vanish, a server that
//! stopped answering without closing the socket. A call past its bound
//! answers UNAVAILABLE, which the caller retries; the work it abandoned is
//! dropped with its connection, and whatever the database did or did not
//! commit meanwhile is settled by the record, as for a lost reply.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tracing::warn;

use super::Actor;
use super::holds::{Hold, HoldSet, Holds};
use super::one_at_a_time::OneAtATime;
use super::{
    Applied, ClaimStart, Credentials, Decide, OperationCounts, PoolUsage, Store, SweepReport,
    TokenGrant,
};
use crate::domain::guarded::GuardedWrite;
use crate::domain::{
    ClaimCommand, Error, Found, HistoryPage, OperationId, OperationRecord, OperationsPage,
    OperationsQuery, Result, SweepPolicy, Target, TenantId, UnresolvedPage, UnresolvedQuery,
};

static UNFINISHED_LOG: std::sync::LazyLock<crate::telemetry::LogLimiter> =
    std::sync::LazyLock::new(|| {
        crate::telemetry::LogLimiter::new(super::error::OUTAGE_LOG_INTERVAL)
    });

/// A store whose every call ends within `bound`.
pub struct Bounded {
    inner: Arc<dyn Store>,
    bound: Duration,
    /// One call per operation in the write paths (see [`OneAtATime`]).
    writers: OneAtATime,
}

impl Bounded {
    /// `inner`, each call bounded by `bound` (zero: unbounded).
    pub fn new(inner: Arc<dyn Store>, bound: Duration) -> Self {
        Self {
            inner,
            bound,
            writers: OneAtATime::default(),
        }
    }

    async fn within<T>(
        &self,
        call: &'static str,
        work: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        // Marks the call as running while polled: what it drops itself is
        // told from what is dropped with it (see `polled`).
        let work = super::postgres::polled(work);
        if self.bound.is_zero() {
            return work.await;
        }
        match tokio::time::timeout(self.bound, work).await {
            Ok(outcome) => outcome,
            Err(_) => {
                // Every call during an outage: one line a second, counting
                // the others.
                if let Some(suppressed) = UNFINISHED_LOG.admit(std::time::Instant::now()) {
                    warn!(
                        call,
                        bound = ?self.bound,
                        suppressed,
                        "store call did not finish within --db-call-timeout: abandoned"
                    );
                }
                Err(Error::unavailable("the database did not answer in time"))
            }
        }
    }
}

impl std::fmt::Debug for Bounded {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Bounded")
            .field("bound", &self.bound)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Store for Bounded {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    async fn insert_or_find(
        &self,
        tenant: TenantId,
        operation_id: OperationId,
        command: &ClaimCommand,
    ) -> Result<Option<ClaimStart>> {
        self.within(
            "insert_or_find",
            self.inner.insert_or_find(tenant, operation_id, command),
        )
        .await
    }

    async fn insert_new(
        &self,
        tenant: TenantId,
        operation_id: OperationId,
        command: &ClaimCommand,
    ) -> Result<Option<OperationRecord>> {
        self.within(
            "insert_new",
            self.inner.insert_new(tenant, operation_id, command),
        )
        .await
    }

    async fn transition(
        &self,
        tenant: TenantId,
        target: &Target,
        decide: &Decide<'_>,
    ) -> Result<Option<Applied>> {
        self.within("transition", async {
            let _turn = self.writers.turn(tenant, target).await;
            self.inner.transition(tenant, target, decide).await
        })
        .await
    }

    async fn write(
        &self,
        tenant: TenantId,
        guarded: GuardedWrite,
        decide: &Decide<'_>,
    ) -> Result<Option<Applied>> {
        self.within("write", async {
            let target = Target::Id(guarded.operation_id);
            let _turn = self.writers.turn(tenant, &target).await;
            self.inner.write(tenant, guarded, decide).await
        })
        .await
    }

    async fn find(
        &self,
        tenant: TenantId,
        target: &Target,
        history: Option<HistoryPage>,
    ) -> Result<Option<Found>> {
        self.within("find", self.inner.find(tenant, target, history))
            .await
    }

    async fn list_unresolved(
        &self,
        tenant: TenantId,
        query: &UnresolvedQuery,
    ) -> Result<UnresolvedPage> {
        self.within("list_unresolved", self.inner.list_unresolved(tenant, query))
            .await
    }

    async fn list_operations(&self, query: &OperationsQuery) -> Result<OperationsPage> {
        self.within("list_operations", self.inner.list_operations(query))
            .await
    }

    async fn sweep(&self, batch: u32, policy: SweepPolicy) -> Result<SweepReport> {
        self.within("sweep", self.inner.sweep(batch, policy)).await
    }

    async fn count_operations(&self) -> Result<OperationCounts> {
        self.within("count_operations", self.inner.count_operations())
            .await
    }

    fn pool_usage(&self) -> PoolUsage {
        self.inner.pool_usage()
    }

    async fn authenticate(&self, token_sha256: &[u8; 32]) -> Result<Option<TokenGrant>> {
        self.within("authenticate", self.inner.authenticate(token_sha256))
            .await
    }

    async fn tenant_by_name(&self, name: &str) -> Result<Option<TenantId>> {
        self.within("tenant_by_name", self.inner.tenant_by_name(name))
            .await
    }

    async fn record_tokens_used(&self, token_hashes: &[[u8; 32]]) -> Result<()> {
        self.within(
            "record_tokens_used",
            self.inner.record_tokens_used(token_hashes),
        )
        .await
    }

    async fn add_answer_counts(&self, tallies: &[super::AnswerTally]) -> Result<()> {
        self.within("add_answer_counts", self.inner.add_answer_counts(tallies))
            .await
    }

    /// Unbounded: only the command line administers, and it waits for the
    /// database as long as its operator does.
    fn credentials(&self) -> &dyn Credentials {
        self.inner.credentials()
    }

    /// Bounded: the service reads them every second, and admins set them
    /// through the API.
    fn holds(&self) -> &dyn Holds {
        self
    }

    /// Unbounded: it runs as long as the store does.
    async fn listen_for_changes(
        &self,
        changed: &(dyn Fn(OperationId) + Send + Sync),
    ) -> Result<()> {
        self.inner.listen_for_changes(changed).await
    }

    async fn check_ready(&self) -> Result<()> {
        self.within("check_ready", self.inner.check_ready()).await
    }

    async fn close(&self) {
        self.inner.close().await;
    }
}

#[async_trait]
impl Holds for Bounded {
    async fn hold(
        &self,
        tenant: TenantId,
        operation: Option<&str>,
        retry_after: chrono::TimeDelta,
        actor: &Actor,
    ) -> Result<HoldSet> {
        self.within(
            "hold",
            self.inner
                .holds()
                .hold(tenant, operation, retry_after, actor),
        )
        .await
    }

    async fn release(
        &self,
        tenant: TenantId,
        operation: Option<&str>,
        actor: &Actor,
    ) -> Result<Option<Hold>> {
        self.within(
            "release",
            self.inner.holds().release(tenant, operation, actor),
        )
        .await
    }

    async fn list_holds(&self) -> Result<Vec<Hold>> {
        self.within("list_holds", self.inner.holds().list_holds())
            .await
    }
}
