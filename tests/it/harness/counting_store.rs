//! A store that counts what authentication asks of it.

use std::sync::Arc;
use std::time::Duration;

use idemd::store::Store;

/// A store that counts `authenticate` calls, and how many run at once (each
/// takes `lookup_time`, so that concurrent ones overlap), and passes every
/// call on to the store it wraps.
pub struct CountingStore {
    inner: Arc<dyn Store>,
    lookup_time: Duration,
    pub authentications: std::sync::atomic::AtomicUsize,
    in_flight: std::sync::atomic::AtomicUsize,
    pub most_in_flight: std::sync::atomic::AtomicUsize,
}

impl CountingStore {
    pub fn new(inner: Arc<dyn Store>, lookup_time: Duration) -> Arc<Self> {
        Arc::new(Self {
            inner,
            lookup_time,
            authentications: Default::default(),
            in_flight: Default::default(),
            most_in_flight: Default::default(),
        })
    }

    pub fn authentications(&self) -> usize {
        self.authentications
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn most_in_flight(&self) -> usize {
        self.most_in_flight
            .load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl Store for CountingStore {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    async fn insert_or_find(
        &self,
        tenant: idemd::domain::TenantId,
        operation_id: idemd::domain::OperationId,
        command: &idemd::domain::ClaimCommand,
    ) -> idemd::domain::Result<Option<idemd::store::ClaimStart>> {
        self.inner
            .insert_or_find(tenant, operation_id, command)
            .await
    }

    async fn transition(
        &self,
        tenant: idemd::domain::TenantId,
        target: &idemd::domain::Target,
        decide: &idemd::store::Decide<'_>,
    ) -> idemd::domain::Result<Option<idemd::store::Applied>> {
        self.inner.transition(tenant, target, decide).await
    }

    async fn write(
        &self,
        tenant: idemd::domain::TenantId,
        guarded: idemd::domain::guarded::GuardedWrite,
        decide: &idemd::store::Decide<'_>,
    ) -> idemd::domain::Result<Option<idemd::store::Applied>> {
        self.inner.write(tenant, guarded, decide).await
    }

    async fn find(
        &self,
        tenant: idemd::domain::TenantId,
        target: &idemd::domain::Target,
        history: Option<idemd::domain::HistoryPage>,
    ) -> idemd::domain::Result<Option<idemd::domain::Found>> {
        self.inner.find(tenant, target, history).await
    }

    async fn list_unresolved(
        &self,
        tenant: idemd::domain::TenantId,
        query: &idemd::domain::UnresolvedQuery,
    ) -> idemd::domain::Result<idemd::domain::UnresolvedPage> {
        self.inner.list_unresolved(tenant, query).await
    }

    async fn list_operations(
        &self,
        query: &idemd::domain::OperationsQuery,
    ) -> idemd::domain::Result<idemd::domain::OperationsPage> {
        self.inner.list_operations(query).await
    }

    async fn sweep(
        &self,
        batch: u32,
        policy: idemd::domain::SweepPolicy,
    ) -> idemd::domain::Result<idemd::store::SweepReport> {
        self.inner.sweep(batch, policy).await
    }

    async fn count_operations(&self) -> idemd::domain::Result<idemd::store::OperationCounts> {
        self.inner.count_operations().await
    }

    fn pool_usage(&self) -> idemd::store::PoolUsage {
        self.inner.pool_usage()
    }

    async fn authenticate(
        &self,
        token_sha256: &[u8; 32],
    ) -> idemd::domain::Result<Option<idemd::store::TokenGrant>> {
        use std::sync::atomic::Ordering::SeqCst;
        self.authentications.fetch_add(1, SeqCst);
        let now = self.in_flight.fetch_add(1, SeqCst) + 1;
        self.most_in_flight.fetch_max(now, SeqCst);
        tokio::time::sleep(self.lookup_time).await;
        let found = self.inner.authenticate(token_sha256).await;
        self.in_flight.fetch_sub(1, SeqCst);
        found
    }

    async fn tenant_by_name(
        &self,
        name: &str,
    ) -> idemd::domain::Result<Option<idemd::domain::TenantId>> {
        self.inner.tenant_by_name(name).await
    }

    async fn record_tokens_used(&self, token_hashes: &[[u8; 32]]) -> idemd::domain::Result<()> {
        self.inner.record_tokens_used(token_hashes).await
    }

    async fn add_answer_counts(
        &self,
        tallies: &[idemd::store::AnswerTally],
    ) -> idemd::domain::Result<()> {
        self.inner.add_answer_counts(tallies).await
    }

    fn credentials(&self) -> &dyn idemd::store::Credentials {
        self.inner.credentials()
    }

    fn holds(&self) -> &dyn idemd::store::holds::Holds {
        self.inner.holds()
    }

    async fn listen_for_changes(
        &self,
        changed: &(dyn Fn(idemd::domain::OperationId) + Send + Sync),
    ) -> idemd::domain::Result<()> {
        self.inner.listen_for_changes(changed).await
    }

    async fn check_ready(&self) -> idemd::domain::Result<()> {
        self.inner.check_ready().await
    }

    async fn close(&self) {
        self.inner.close().await;
    }
}
