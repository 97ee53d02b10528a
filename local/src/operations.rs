//! Claim, Complete and Fail inside the application's transaction: the
//! service's decisions (`decide_claim`, `decide_complete`, `decide_fail`) on
//! the service's statements, on the application's connection. Nothing here
//! commits: the claim, the business change and the outcome commit together
//! or not at all.

use idemd::domain::transition::{decide_claim, decide_complete, decide_fail};
use idemd::domain::{
    Answer, ClaimAnswer, ClaimOutcome, ClaimRequested, CompleteRequested, Decision, Error,
    ErrorReport, FailDisposition, FailRequested, OperationId, OperationRecord, Outcome, Result,
    SuccessResult, Target, TenantId, Violations,
};
use idemd::service::DrawOperationId as _;
use idemd::store::ClaimStart;
use idemd::store::postgres::in_transaction;
use sqlx::Transaction;
use sqlx::postgres::{PgConnection, Postgres};

use crate::Local;

/// A claim that finds the scope neither insertable nor present tries again,
/// this many times in all (as the service's claim does).
const CLAIM_ROUNDS: usize = 3;

/// What a claim answered, and the operation's record as this transaction
/// sees it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Claimed {
    pub answer: ClaimAnswer,
    pub record: OperationRecord,
}

impl Claimed {
    /// The name metrics and the service use for this answer.
    pub fn outcome(&self) -> ClaimOutcome {
        self.answer.outcome()
    }

    /// Whether this transaction owns the operation: do the effect, then
    /// [`Local::complete`] or [`Local::fail`], then commit.
    pub fn acquired(&self) -> bool {
        self.answer == ClaimAnswer::Acquired
    }

    /// The stored outcome, when the operation had ended (a replay).
    pub fn replayed(&self) -> Option<&Outcome> {
        match self.answer {
            ClaimAnswer::Completed => self.record.outcome.as_ref(),
            _ => None,
        }
    }
}

impl Local {
    /// The active tenant of that name, created in this transaction when
    /// there is none. Scopes are per tenant, as in the service.
    pub async fn tenant(
        &self,
        transaction: &mut Transaction<'_, Postgres>,
        name: &str,
    ) -> Result<TenantId> {
        let connection: &mut PgConnection = transaction;
        let entered = self.schema.enter(connection).await?;
        let tenant = in_transaction::tenant(connection, name).await;
        entered.leave(connection, tenant).await
    }

    /// Claims the request's scope in `transaction`, with the service's
    /// defaults and bounds ([`idemd::domain::Limits`]) and its answers:
    /// Acquired (yours: the record is IN_PROGRESS until this transaction
    /// completes it), Completed (ended before: [`Claimed::replayed`]),
    /// IDEMPOTENCY_KEY_REUSED ([`Error::KeyReused`]) for another request
    /// under the same key, and the rest as the service answers them.
    ///
    /// A duplicate running concurrently waits here, on the scope's unique
    /// index, until this transaction ends: then it replays what committed,
    /// or acquires if this one rolled back. A claim never waits for a
    /// pending answer to change (`wait` is not used): Pending is answered.
    pub async fn claim(
        &self,
        transaction: &mut Transaction<'_, Postgres>,
        tenant: TenantId,
        requested: ClaimRequested,
    ) -> Result<Claimed> {
        let (command, _wait) = self.limits.claim(requested, Violations::default())?;
        let connection: &mut PgConnection = transaction;
        let entered = self.schema.enter(connection).await?;
        let claimed = claim_in_schema(connection, tenant, &command, self.history_cap).await;
        entered.leave(connection, claimed).await
    }

    /// Completes the operation `claimed` acquired, with `result` (stored,
    /// and replayed to every later claim once this transaction commits).
    pub async fn complete(
        &self,
        transaction: &mut Transaction<'_, Postgres>,
        claimed: &Claimed,
        result: SuccessResult,
    ) -> Result<OperationRecord> {
        let command = self.limits.complete(
            CompleteRequested {
                operation_id: claimed.record.operation_id,
                fence: claimed.record.fence,
                result: Some(result),
            },
            Violations::default(),
        )?;
        self.write(transaction, &claimed.record, |record, now| {
            decide_complete(record, &command, now)
        })
        .await
    }

    /// Fails the operation `claimed` acquired, as the service's Fail does:
    /// TERMINAL stores the failure (replayed), RETRYABLE schedules a retry
    /// after `retry_after`, NOT_STARTED hands the operation back. (UNKNOWN
    /// has no use here: an effect inside this transaction either commits
    /// with it or not at all.)
    pub async fn fail(
        &self,
        transaction: &mut Transaction<'_, Postgres>,
        claimed: &Claimed,
        disposition: FailDisposition,
        error: ErrorReport,
        retry_after: Option<chrono::TimeDelta>,
    ) -> Result<OperationRecord> {
        let command = self.limits.fail(
            FailRequested {
                operation_id: claimed.record.operation_id,
                fence: claimed.record.fence,
                disposition: Some(disposition),
                error: Some(error),
                retry_after,
            },
            Violations::default(),
        )?;
        self.write(transaction, &claimed.record, |record, now| {
            decide_fail(record, &command, now)
        })
        .await
    }

    /// An owner write by the locked path, in `transaction`.
    async fn write(
        &self,
        transaction: &mut Transaction<'_, Postgres>,
        owned: &OperationRecord,
        decide: impl FnOnce(&OperationRecord, chrono::DateTime<chrono::Utc>) -> Decision,
    ) -> Result<OperationRecord> {
        let connection: &mut PgConnection = transaction;
        let entered = self.schema.enter(connection).await?;
        let written = in_transaction::transition(
            connection,
            owned.tenant_id,
            &Target::Id(owned.operation_id),
            decide,
            self.history_cap,
        )
        .await
        .and_then(|applied| {
            let applied = applied.ok_or_else(|| {
                Error::Internal("the operation vanished inside its transaction".into())
            })?;
            match applied.answer {
                Ok(_) => Ok(applied.record),
                Err(error) => Err(error),
            }
        });
        entered.leave(connection, written).await
    }
}

/// The service's claim (`Service::claim_once`) on one connection: the first
/// step inserts or reads; an answer that changes nothing is given from the
/// read; anything else takes the row lock and decides again under it.
async fn claim_in_schema(
    connection: &mut PgConnection,
    tenant: TenantId,
    command: &idemd::domain::ClaimCommand,
    history_cap: idemd::domain::HistoryCap,
) -> Result<Claimed> {
    for _ in 0..CLAIM_ROUNDS {
        let started =
            in_transaction::insert_or_find(connection, tenant, OperationId::generate(), command)
                .await?;
        match started {
            Some(ClaimStart::Inserted(record)) => {
                return Ok(Claimed {
                    answer: ClaimAnswer::Acquired,
                    record,
                });
            }
            Some(ClaimStart::Existing(found)) => {
                let decision = decide_claim(&found.record, command, found.now);
                if decision.effects.is_empty() {
                    return claimed(found.record, decision.answer);
                }
            }
            // Inserted by a transaction that committed after this
            // statement's snapshot: the next statement sees it.
            None => continue,
        }
        let target = Target::Scope(command.scope.clone());
        let applied = in_transaction::transition(
            connection,
            tenant,
            &target,
            |record, now| decide_claim(record, command, now),
            history_cap,
        )
        .await?;
        if let Some(applied) = applied {
            return claimed(applied.record, applied.answer);
        }
    }
    Err(Error::unavailable(
        "the scope changed repeatedly during the claim",
    ))
}

fn claimed(record: OperationRecord, answer: Result<Answer>) -> Result<Claimed> {
    match answer? {
        Answer::Claim(answer) => Ok(Claimed { answer, record }),
        Answer::Written => Err(Error::Internal("claim decided a write".into())),
    }
}
