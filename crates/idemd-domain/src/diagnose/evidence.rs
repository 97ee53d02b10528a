//! What a caller brings to Diagnose: what it saw, the request it would send
//! now, what it found at the provider, and how far it may go. Held only for
//! the one call: nothing of it is stored or logged.

use chrono::{DateTime, TimeDelta, Utc};

use crate::model::Fingerprint;

/// What the caller saw that made it ask.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Symptom {
    /// Nothing in particular: the record alone is diagnosed.
    #[default]
    Unspecified,
    /// The call ended before any answer.
    TimeoutBeforeResponse,
    /// An error answer: the gRPC status code and the ErrorInfo reason.
    ErrorStatus { code: u32, reason: String },
    /// The same request was sent more than once at a time.
    ConcurrentDuplicates,
    /// The operation keeps answering Pending, or stays in progress.
    StuckInProgress,
    /// The effect seems to have happened more than once.
    DuplicateEffect,
    /// Claims are often refused as IDEMPOTENCY_KEY_REUSED.
    FrequentConflicts,
    /// The store keeps growing.
    StoreGrowing,
}

/// gRPC status codes a caller may report (the numbers of the wire).
pub mod status_code {
    pub const INVALID_ARGUMENT: u32 = 3;
    pub const DEADLINE_EXCEEDED: u32 = 4;
    pub const PERMISSION_DENIED: u32 = 7;
    pub const FAILED_PRECONDITION: u32 = 9;
    pub const ABORTED: u32 = 10;
    pub const UNAVAILABLE: u32 = 14;
    pub const UNAUTHENTICATED: u32 = 16;
}

/// How a request's fingerprint was computed, as far as a comparison tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Client,
    Json,
    Bytes,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Client => "client",
            Mode::Json => "json",
            Mode::Bytes => "bytes",
        }
    }
}

/// The fingerprints the caller's request could have: a client-computed one,
/// or a payload's under each mode it parses in (admission computes them).
pub type Candidates = Vec<(Mode, Fingerprint)>;

/// What the caller found at the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderFinding {
    EffectFound,
    NoEffect,
    EffectFoundMoreThanOnce,
}

/// A provider lookup and when it was sent, placed on the database clock
/// (the request's arrival minus the caller's own "how long ago").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderEvidence {
    pub finding: ProviderFinding,
    pub looked_at: DateTime<Utc>,
}

/// Everything the caller observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evidence {
    pub symptom: Symptom,
    pub new_key_for_retry: bool,
    pub provider: Option<ProviderEvidence>,
    /// When the caller saw the symptom, on the database clock.
    pub observed_at: DateTime<Utc>,
}

impl Evidence {
    /// A request with no evidence in it, observed at `now`.
    pub fn none(now: DateTime<Utc>) -> Self {
        Evidence {
            symptom: Symptom::Unspecified,
            new_key_for_retry: false,
            provider: None,
            observed_at: now,
        }
    }
}

/// Which moves the caller said it may make.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Authority {
    ReadOnly,
    Retry,
    /// Reconcile too; also what "not said" means (the credential's scopes
    /// still bound it).
    #[default]
    Reconcile,
}

/// The caller's own limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Constraints {
    pub authority: Authority,
    pub reversible_only: bool,
    pub attempt_budget: Option<u32>,
    pub wait_budget: Option<TimeDelta>,
}

/// The scopes the caller's credential carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Granted {
    pub operations: bool,
    pub reconcile: bool,
    pub admin: bool,
}

/// A Diagnose request as admitted: its secrets refused and its fields
/// checked. Times are ages, counted by the caller back from its send; the
/// service places them on the database clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiagnoseCommand {
    pub target: crate::query::Target,
    pub symptom: Symptom,
    pub candidates: Candidates,
    pub new_key_for_retry: bool,
    pub provider: Option<(ProviderFinding, TimeDelta)>,
    pub observed_ago: TimeDelta,
    pub constraints: Constraints,
    pub success_criterion: String,
    pub context: String,
}

impl DiagnoseCommand {
    /// The evidence, its ages placed before `now` (the call's arrival).
    pub fn evidence(&self, now: DateTime<Utc>) -> Evidence {
        Evidence {
            symptom: self.symptom.clone(),
            new_key_for_retry: self.new_key_for_retry,
            provider: self.provider.map(|(finding, ago)| ProviderEvidence {
                finding,
                looked_at: now - ago,
            }),
            observed_at: now - self.observed_ago,
        }
    }
}
