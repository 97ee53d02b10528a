//! Every store is a [`Dialect`] running the two write paths and the shared
//! SQL: [`Store::write`] tries the dialect's one-statement batched path
//! first ([`Dialect::write_guarded`], Postgres only) and falls back to the
//! [`locked`] path; [`Store::transition`] always takes the locked path.

use async_trait::async_trait;
use tracing::instrument;

use super::credentials::{CredentialQueries, Credentials, TokenGrant};
use super::dialect::Dialect;
use super::locked;
use super::shared::Shared;
use super::{Applied, ClaimStart, Decide, OperationCounts, PoolUsage, Store, SweepReport};
use crate::domain::guarded::GuardedWrite;
use crate::domain::{
    ClaimCommand, Found, HistoryPage, OperationId, Result, SweepPolicy, Target, TenantId,
    UnresolvedPage, UnresolvedQuery,
};

/// Every store is a dialect running the shared SQL and the write paths.
/// Errors are translated inside them; spans name the call and the database.
#[async_trait]
impl<D: Shared + CredentialQueries + Credentials> Store for D {
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
        locked::transition(self, tenant, &target, decide).await
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

    #[instrument(name = "store.find", skip_all, fields(db.system = D::SYSTEM))]
    async fn find(
        &self,
        tenant: TenantId,
        target: &Target,
        history: Option<HistoryPage>,
    ) -> Result<Option<Found>> {
        self.find_flow(tenant, target, history).await
    }

    #[instrument(name = "store.list_unresolved", skip_all, fields(db.system = D::SYSTEM))]
    async fn list_unresolved(
        &self,
        tenant: TenantId,
        query: &UnresolvedQuery,
    ) -> Result<UnresolvedPage> {
        self.list_unresolved_flow(tenant, query).await
    }

    #[instrument(name = "store.sweep", skip_all, fields(db.system = D::SYSTEM))]
    async fn sweep(&self, batch: u32, policy: SweepPolicy) -> Result<SweepReport> {
        self.sweep_flow(batch, policy).await
    }

    #[instrument(name = "store.count_operations", skip_all, fields(db.system = D::SYSTEM))]
    async fn count_operations(&self) -> Result<OperationCounts> {
        self.count_operations_flow().await
    }

    fn pool_usage(&self) -> PoolUsage {
        Dialect::pool_usage(self)
    }

    async fn authenticate(&self, token_sha256: &[u8; 32]) -> Result<Option<TokenGrant>> {
        self.authenticate_token(token_sha256).await
    }

    async fn tenant_by_name(&self, name: &str) -> Result<Option<TenantId>> {
        self.active_tenant(name).await
    }

    async fn record_tokens_used(&self, token_hashes: &[[u8; 32]]) -> Result<()> {
        self.mark_tokens_used(token_hashes).await
    }

    fn credentials(&self) -> &dyn Credentials {
        self
    }

    async fn listen_for_changes(
        &self,
        changed: &(dyn Fn(OperationId) + Send + Sync),
    ) -> Result<()> {
        Dialect::listen_for_changes(self, changed).await
    }

    async fn check_ready(&self) -> Result<()> {
        self.check_ready_flow().await
    }

    async fn close(&self) {
        Dialect::close(self).await;
    }
}
