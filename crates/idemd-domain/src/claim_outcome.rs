//! How a Claim ended, under the one name that metrics count and spans carry.
//! The names are API: README's metric table and the dashboards use them.

use super::error::Error;
use super::transition::ClaimAnswer;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimOutcome {
    Acquired,
    ReconcileFirst,
    Pending,
    /// The operation had ended: its stored outcome was replayed.
    Replayed,
    NeedsReconciliation,
    Conflict,
    ResultExpired,
}

impl ClaimOutcome {
    /// None for errors that say nothing about the scope (invalid, unavailable,
    /// internal): those are no outcome of a Claim.
    pub fn of(result: Result<&ClaimAnswer, &Error>) -> Option<Self> {
        Some(match result {
            Ok(answer) => answer.outcome(),
            Err(Error::KeyReused { .. }) => ClaimOutcome::Conflict,
            Err(Error::ResultExpired { .. }) => ClaimOutcome::ResultExpired,
            Err(_) => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ClaimOutcome::Acquired => "acquired",
            ClaimOutcome::ReconcileFirst => "reconcile_first",
            ClaimOutcome::Pending => "pending",
            ClaimOutcome::Replayed => "replayed",
            ClaimOutcome::NeedsReconciliation => "needs_reconciliation",
            ClaimOutcome::Conflict => "conflict",
            ClaimOutcome::ResultExpired => "result_expired",
        }
    }
}

impl ClaimAnswer {
    pub fn outcome(self) -> ClaimOutcome {
        match self {
            ClaimAnswer::Acquired => ClaimOutcome::Acquired,
            ClaimAnswer::ReconcileFirst(_) => ClaimOutcome::ReconcileFirst,
            ClaimAnswer::Pending { .. } => ClaimOutcome::Pending,
            ClaimAnswer::Completed => ClaimOutcome::Replayed,
            ClaimAnswer::NeedsReconciliation => ClaimOutcome::NeedsReconciliation,
        }
    }
}
