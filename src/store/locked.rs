//! The locked path: lock the operation's row, read the database clock,
//! decide in the pure domain, write guarded and append history, commit.
//! Every transition may run it; see [`super`] for when it does.

use super::dialect::retry_on_conflict;
use super::error::StoreResult;
use super::statements::Sql;
use super::{Applied, Decide};
use crate::domain::{OperationRecord, Result, Target, TenantId};

/// The locked path, run again on a conflict: `None` when the target is not
/// the tenant's.
pub(super) async fn transition<D: Sql>(
    dialect: &D,
    tenant: TenantId,
    target: &Target,
    decide: &Decide<'_>,
) -> Result<Option<Applied>> {
    retry_on_conflict::<D, _, _, _>(|| try_transition(dialect, tenant, target, decide)).await
}

/// Lock, read the clock (after the lock is held: the time the decision is
/// made at), decide, write, commit.
async fn try_transition<D: Sql>(
    dialect: &D,
    tenant: TenantId,
    target: &Target,
    decide: &Decide<'_>,
) -> StoreResult<Option<Applied>> {
    let (mut transaction, locked) = dialect.begin_write_locked(tenant, target).await?;
    let Some((record, now)) = locked else {
        dialect.rollback(transaction).await?;
        return Ok(None);
    };
    if let Some(pause) = dialect.pause_before_write() {
        pause().await;
    }
    let decision = decide(&record, now);
    if decision.effects.is_empty() {
        dialect.rollback(transaction).await?;
        return Ok(Some(Applied {
            record,
            answer: decision.answer,
            now,
            record_changed: false,
        }));
    }
    let record_after = D::apply(
        &mut transaction,
        &record,
        decision.effects,
        dialect.history_cap(),
        now,
    )
    .await?;
    dialect.commit(transaction).await?;
    if record_after.state != record.state {
        dialect.announce_change(record.operation_id);
    }
    // Counted conflict evidence is not a change anyone waits for.
    let evidence_only = OperationRecord {
        conflicts: record.conflicts,
        last_conflict_at: record.last_conflict_at,
        answers: record.answers,
        ..record_after.clone()
    };
    Ok(Some(Applied {
        record_changed: evidence_only != record,
        record: record_after,
        answer: decision.answer,
        now,
    }))
}
