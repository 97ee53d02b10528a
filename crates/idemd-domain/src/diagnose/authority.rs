//! Where a caller's authority ends. A plan is followed move by move up to a
//! hand-over; the first move beyond the credential's scopes or the caller's
//! own constraints stops the whole answer (PERMISSION_DENIED), so that an
//! agent never starts a plan it cannot finish.

use chrono::TimeDelta;

use super::evidence::{Authority, Constraints, Granted};
use super::report::{MoveKind, Needs, Step};
use crate::error::ErrorReason;

/// Why a plan was stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// The credential lacks the scope a move needs.
    Scope { step: usize, needs: Needs },
    /// The caller said it may not make this kind of move.
    Authority { step: usize, kind: MoveKind },
    /// The caller may only make moves that can be undone.
    NotReversible { step: usize, kind: MoveKind },
    /// More new attempts than the caller's attempt budget.
    AttemptBudget { needed: u32, budget: u32 },
    /// Longer waits than the caller's wait budget.
    WaitBudget {
        needed: TimeDelta,
        budget: TimeDelta,
    },
}

impl Stop {
    /// The ErrorInfo reason it is answered with.
    pub fn reason(&self) -> ErrorReason {
        match self {
            Stop::Scope { .. } => ErrorReason::PlanExceedsScope,
            Stop::Authority { .. } => ErrorReason::PlanExceedsAuthority,
            Stop::NotReversible { .. } => ErrorReason::PlanNotReversible,
            Stop::AttemptBudget { .. } | Stop::WaitBudget { .. } => ErrorReason::PlanExceedsBudget,
        }
    }

    /// What stopped it, for the message.
    pub fn explain(&self) -> String {
        match self {
            Stop::Scope { step, needs } => {
                format!("move {step} needs the {} scope", needs.as_str())
            }
            Stop::Authority { step, kind } => {
                format!("move {step} ({kind:?}) is beyond the authority the caller gave")
            }
            Stop::NotReversible { step, kind } => {
                format!("move {step} ({kind:?}) cannot be undone")
            }
            Stop::AttemptBudget { needed, budget } => {
                format!("it needs {needed} new attempt(s), the budget is {budget}")
            }
            Stop::WaitBudget { needed, budget } => format!(
                "it waits {}s, the budget is {}s",
                needed.num_seconds(),
                budget.num_seconds()
            ),
        }
    }

    /// The ErrorInfo metadata beside the reason.
    pub fn metadata(&self) -> Vec<(&'static str, String)> {
        match self {
            Stop::Scope { step, needs } => {
                vec![
                    ("step", step.to_string()),
                    ("scope", needs.as_str().to_owned()),
                ]
            }
            Stop::Authority { step, kind } | Stop::NotReversible { step, kind } => {
                vec![("step", step.to_string()), ("move", format!("{kind:?}"))]
            }
            Stop::AttemptBudget { needed, budget } => vec![
                ("attempts_needed", needed.to_string()),
                ("attempt_budget", budget.to_string()),
            ],
            Stop::WaitBudget { needed, budget } => vec![
                ("wait_needed", format!("{}s", needed.num_seconds())),
                ("wait_budget", format!("{}s", budget.num_seconds())),
            ],
        }
    }
}

fn granted(granted: Granted, needs: Needs) -> bool {
    match needs {
        Needs::Nothing => true,
        Needs::Operations => granted.operations || granted.admin,
        Needs::Reconcile => granted.reconcile || granted.admin,
        Needs::Admin => granted.admin,
    }
}

/// The least authority a move needs: looking, waiting and changing one's
/// own code need none; a Claim needs retry; a Reconcile or an operator's
/// change needs reconcile.
fn authority_for(kind: MoveKind) -> Authority {
    match kind {
        MoveKind::Look | MoveKind::Wait | MoveKind::ChangeCaller | MoveKind::HandOver => {
            Authority::ReadOnly
        }
        MoveKind::ClaimSameKey | MoveKind::NewKey => Authority::Retry,
        MoveKind::Reconcile | MoveKind::Operator => Authority::Reconcile,
    }
}

/// Checks the plan's moves, in order, up to the first hand-over (what
/// follows it is someone else's).
pub fn check(plan: &[Step], scopes: Granted, constraints: &Constraints) -> Result<(), Stop> {
    let mut attempts = 0u32;
    let mut waited = TimeDelta::zero();
    for (index, step) in plan.iter().enumerate() {
        if step.kind == MoveKind::HandOver {
            break;
        }
        let number = index + 1;
        if !granted(scopes, step.needs) {
            return Err(Stop::Scope {
                step: number,
                needs: step.needs,
            });
        }
        if authority_for(step.kind) > constraints.authority {
            return Err(Stop::Authority {
                step: number,
                kind: step.kind,
            });
        }
        if constraints.reversible_only && !step.reversible {
            return Err(Stop::NotReversible {
                step: number,
                kind: step.kind,
            });
        }
        attempts = attempts.saturating_add(step.attempts);
        if let Some(budget) = constraints.attempt_budget
            && attempts > budget
        {
            return Err(Stop::AttemptBudget {
                needed: attempts,
                budget,
            });
        }
        waited += step.wait.unwrap_or_default();
        if let Some(budget) = constraints.wait_budget
            && waited > budget
        {
            return Err(Stop::WaitBudget {
                needed: waited,
                budget,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CALLER: Granted = Granted {
        operations: true,
        reconcile: false,
        admin: false,
    };
    const RECONCILER: Granted = Granted {
        operations: false,
        reconcile: true,
        admin: false,
    };

    fn reconcile_plan() -> Vec<Step> {
        vec![
            Step::look("look the provider up"),
            Step::reconcile("reconcile"),
        ]
    }

    #[test]
    fn a_move_beyond_the_credentials_scopes_stops_the_plan() {
        assert_eq!(
            check(&reconcile_plan(), CALLER, &Constraints::default()),
            Err(Stop::Scope {
                step: 2,
                needs: Needs::Reconcile
            })
        );
        assert_eq!(
            check(&reconcile_plan(), RECONCILER, &Constraints::default()),
            Ok(())
        );
    }

    #[test]
    fn a_move_beyond_the_callers_own_authority_stops_the_plan() {
        let read_only = Constraints {
            authority: Authority::ReadOnly,
            ..Constraints::default()
        };
        let stop = check(&reconcile_plan(), RECONCILER, &read_only).expect_err("stopped");
        assert_eq!(stop.reason().as_str(), "PLAN_EXCEEDS_AUTHORITY");
        let replay = vec![Step::replay("claim again")];
        assert_eq!(
            check(&replay, CALLER, &read_only).map_err(|stop| stop.reason().as_str()),
            Err("PLAN_EXCEEDS_AUTHORITY")
        );
        let retry = Constraints {
            authority: Authority::Retry,
            ..Constraints::default()
        };
        assert_eq!(check(&replay, CALLER, &retry), Ok(()));
    }

    #[test]
    fn reversible_only_refuses_an_execution_and_a_reconcile_but_not_a_replay() {
        let reversible = Constraints {
            reversible_only: true,
            ..Constraints::default()
        };
        assert_eq!(
            check(&[Step::replay("replay")], CALLER, &reversible),
            Ok(())
        );
        assert_eq!(
            check(&[Step::claim_attempt("retry")], CALLER, &reversible)
                .map_err(|stop| stop.reason().as_str()),
            Err("PLAN_NOT_REVERSIBLE")
        );
        assert_eq!(
            check(&reconcile_plan(), RECONCILER, &reversible)
                .map_err(|stop| stop.reason().as_str()),
            Err("PLAN_NOT_REVERSIBLE")
        );
    }

    #[test]
    fn budgets_count_attempts_and_waits_over_the_whole_plan() {
        let plan = vec![
            Step::wait("wait for the lease", TimeDelta::seconds(30)),
            Step::claim_attempt("claim"),
        ];
        let no_attempts = Constraints {
            attempt_budget: Some(0),
            ..Constraints::default()
        };
        assert_eq!(
            check(&plan, CALLER, &no_attempts),
            Err(Stop::AttemptBudget {
                needed: 1,
                budget: 0
            })
        );
        let short_wait = Constraints {
            wait_budget: Some(TimeDelta::seconds(10)),
            ..Constraints::default()
        };
        assert_eq!(
            check(&plan, CALLER, &short_wait).map_err(|stop| stop.reason().as_str()),
            Err("PLAN_EXCEEDS_BUDGET")
        );
        let enough = Constraints {
            attempt_budget: Some(1),
            wait_budget: Some(TimeDelta::minutes(1)),
            ..Constraints::default()
        };
        assert_eq!(check(&plan, CALLER, &enough), Ok(()));
    }

    #[test]
    fn moves_after_a_hand_over_are_someone_elses() {
        let plan = vec![
            Step::look("look"),
            Step::hand_over("hand over to a reconciler"),
            Step::reconcile("they reconcile"),
        ];
        assert_eq!(check(&plan, CALLER, &Constraints::default()), Ok(()));
    }
}
