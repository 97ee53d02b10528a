//! The state machine of DESIGN.md, as pure functions.
//!
//! Each `decide_*` takes the locked record, the validated command and the
//! database's clock, and returns a [`Decision`]: the write to make (if any),
//! the history entry to append (if any) and the answer. It performs no I/O;
//! the stores apply the decision inside the transaction that holds the lock.
//!
//! By concern: `decision` (what every `decide_*` returns), `claim` (the
//! first Claim and Claims of an existing record), `owner_writes` (Renew,
//! Complete, Fail), `reconcile`, `sweep`, and what several of them share:
//! `deadlines` (the lease cap and the operation deadline), `ending` (how an
//! operation ends, or stays in doubt, without a new attempt) and `refusal`.

mod claim;
mod deadlines;
mod decision;
mod ending;
mod forget;
mod owner_writes;
mod reconcile;
mod refusal;
mod sweep;

pub use claim::{
    FirstClaim, MOST_ATTEMPTS_EVER, decide_claim, decide_first_claim, takeover_detail,
};
pub use decision::{Answer, ClaimAnswer, Decision, Doubt, Effects, PendingReason, Update};
pub use ending::doubt_detail;
pub use forget::decide_forget;
pub use owner_writes::{decide_complete, decide_fail, decide_renew};
pub use reconcile::{NOT_APPLIED_WITH_GRANT, decide_reconcile};
pub use sweep::{SweepPolicy, decide_sweep};
