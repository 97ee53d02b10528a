//! The product's own logic: states, transitions, fingerprints, bounds and
//! errors. Pure: no tonic, no sqlx, no clock but the one it is handed.

mod admit;
pub mod claim_outcome;
pub mod command;
pub mod diagnose;
pub mod error;
pub mod filter;
pub mod fingerprint;
pub mod guarded;
mod identity;
pub mod limits;
pub mod model;
pub mod policy;
pub mod query;
pub mod requested;
pub mod transition;

#[cfg(test)]
mod purity_tests;
#[cfg(test)]
mod transition_tests;

pub use admit::DEFAULT_HELD_RETRY_AFTER;
pub use claim_outcome::ClaimOutcome;
pub use command::*;
pub use error::{
    CertificateRefusal, Error, ErrorReason, FieldViolation, Refusal, Result, Violations,
};
pub use filter::{FilterError, OperationFilter};
pub use identity::MAX_PREVIOUS_FINGERPRINTS;
pub use limits::Limits;
pub use model::*;
pub use query::{
    Found, HistoryPage, ListOrder, ListedOperation, OperationsPage, OperationsQuery, Target,
    TenantSelection, UnresolvedPage, UnresolvedQuery,
};
pub use requested::*;
pub use transition::{
    Answer, ClaimAnswer, Decision, Doubt, Effects, FirstClaim, PendingReason, SweepPolicy, Update,
    decide_first_claim,
};
