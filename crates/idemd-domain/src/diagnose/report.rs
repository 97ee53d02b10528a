//! What Diagnose answers: a diagnosis, a plan of moves, the checks that
//! would confirm it, the observations behind its confidence, and (for an
//! escalation) what is missing.

use chrono::TimeDelta;

/// What the evidence points to (the map of the issue, one cause per line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    None,
    AmbiguousOutcome,
    Race,
    PayloadConflict,
    ClientDefect,
    StuckInProgress,
    NewKeyPerRetry,
    UnstableKeysOrPayload,
    UnboundedRetention,
    NeedsReconciliation,
}

/// Where the cause lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    None,
    Transport,
    Concurrency,
    CallerRequest,
    CallerLogic,
    OwnerRecovery,
    Provider,
    Policy,
}

/// A diagnosis: the cause, its layer, what it means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnosis {
    pub cause: Cause,
    pub layer: Layer,
    pub meaning: String,
}

/// The kind of a move; what it needs follows from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoveKind {
    Look,
    Wait,
    ClaimSameKey,
    Reconcile,
    ChangeCaller,
    NewKey,
    Operator,
    HandOver,
}

/// The scope a move needs at idemd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    Nothing,
    Operations,
    Reconcile,
    Admin,
}

impl Needs {
    pub fn as_str(self) -> &'static str {
        match self {
            Needs::Nothing => "",
            Needs::Operations => "operations",
            Needs::Reconcile => "reconcile",
            Needs::Admin => "admin",
        }
    }
}

/// One move of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub kind: MoveKind,
    pub action: String,
    pub needs: Needs,
    pub reversible: bool,
    /// New attempts (executions of the effect) it may start.
    pub attempts: u32,
    pub wait: Option<TimeDelta>,
}

impl Step {
    pub fn look(action: impl Into<String>) -> Self {
        Self::of(MoveKind::Look, action, Needs::Nothing, true, 0)
    }

    pub fn wait(action: impl Into<String>, wait: TimeDelta) -> Self {
        Step {
            wait: Some(wait.max(TimeDelta::zero())),
            ..Self::of(MoveKind::Wait, action, Needs::Nothing, true, 0)
        }
    }

    /// A Claim that can only replay or be told Pending: it starts nothing.
    pub fn replay(action: impl Into<String>) -> Self {
        Self::of(MoveKind::ClaimSameKey, action, Needs::Operations, true, 0)
    }

    /// A Claim that may start an attempt: an execution cannot be undone.
    pub fn claim_attempt(action: impl Into<String>) -> Self {
        Self::of(MoveKind::ClaimSameKey, action, Needs::Operations, false, 1)
    }

    pub fn reconcile(action: impl Into<String>) -> Self {
        Self::of(MoveKind::Reconcile, action, Needs::Reconcile, false, 0)
    }

    pub fn change_caller(action: impl Into<String>) -> Self {
        Self::of(MoveKind::ChangeCaller, action, Needs::Nothing, true, 0)
    }

    pub fn new_key(action: impl Into<String>) -> Self {
        Self::of(MoveKind::NewKey, action, Needs::Operations, false, 1)
    }

    pub fn operator(action: impl Into<String>) -> Self {
        Self::of(MoveKind::Operator, action, Needs::Admin, true, 0)
    }

    pub fn hand_over(action: impl Into<String>) -> Self {
        Self::of(MoveKind::HandOver, action, Needs::Nothing, true, 0)
    }

    fn of(
        kind: MoveKind,
        action: impl Into<String>,
        needs: Needs,
        reversible: bool,
        attempts: u32,
    ) -> Self {
        Step {
            kind,
            action: action.into(),
            needs,
            reversible,
            attempts,
            wait: None,
        }
    }
}

/// A check that would confirm or refute the diagnosis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub check: String,
    pub if_true: String,
    pub if_false: String,
}

impl Check {
    pub fn new(
        check: impl Into<String>,
        if_true: impl Into<String>,
        if_false: impl Into<String>,
    ) -> Self {
        Check {
            check: check.into(),
            if_true: if_true.into(),
            if_false: if_false.into(),
        }
    }
}

/// Where an observation comes from, which is what it is worth.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    History,
    Fingerprint,
    Timing,
    Provider,
    Counters,
    CallerReport,
    Policy,
}

/// One observation considered for a diagnosis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    pub source: Source,
    pub detail: String,
    pub supports: bool,
    /// What it added to the score (signed); set by the scoring.
    pub weight: i32,
}

impl Observation {
    pub fn supporting(source: Source, detail: impl Into<String>) -> Self {
        Observation {
            source,
            detail: detail.into(),
            supports: true,
            weight: 0,
        }
    }

    pub fn against(source: Source, detail: impl Into<String>) -> Self {
        Observation {
            supports: false,
            ..Self::supporting(source, detail)
        }
    }
}

/// How sure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Low,
    Medium,
    High,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confidence {
    pub score: u32,
    pub level: Level,
    pub observations: Vec<Observation>,
}

/// Follow the plan, or escalate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Diagnosed,
    Escalate,
}

/// What a person or agent taking over needs to know.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Handoff {
    pub fingerprint_mode: String,
    pub history_summary: Vec<String>,
    pub effect_atomicity: String,
    pub policy: String,
    pub effect_count_evidence: String,
}

/// The whole answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub verdict: Verdict,
    pub diagnosis: Diagnosis,
    pub also: Vec<Diagnosis>,
    pub plan: Vec<Step>,
    pub verification: Vec<Check>,
    pub confidence: Confidence,
    pub missing: Vec<String>,
    pub handoff: Handoff,
}
