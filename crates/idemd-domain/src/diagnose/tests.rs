//! One test per line of the diagnosis map (the evidence in, the cause and
//! the first move out), the escalations, and the confidence rule on whole
//! diagnoses.

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use uuid::Uuid;

use super::*;
use crate::fingerprint;
use crate::model::{
    AnswerCounts, ErrorReport, FailureReason, HistoryEntry, OnFailed, OperationId, OperationRecord,
    Outcome, Scope, State, SuccessResult, TenantId,
};

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 3, 12, 0, 0)
        .single()
        .expect("a time")
}

fn scope() -> Scope {
    Scope {
        operation: "payments.charge".into(),
        key: "order-1".into(),
    }
}

const REQUEST: &str = r#"{"amount":100,"to":"acct-1"}"#;

fn record(state: State) -> OperationRecord {
    let created = now() - TimeDelta::minutes(10);
    OperationRecord {
        operation_id: OperationId(Uuid::nil()),
        tenant_id: TenantId(1),
        scope: scope(),
        fingerprint: fingerprint::of_json(REQUEST).expect("json"),
        state,
        fence: 7,
        attempt: 1,
        max_attempts: 3,
        claim_token: Vec::new(),
        renewed_under_fence: None,
        taken_over_from: None,
        lease_duration: TimeDelta::seconds(30),
        max_attempt_duration: TimeDelta::minutes(1),
        retention: TimeDelta::days(1),
        on_failed: OnFailed::Replay,
        lease_expires_at: Some(created + TimeDelta::seconds(30)),
        attempt_deadline_at: Some(created + TimeDelta::minutes(1)),
        retry_at: None,
        operation_deadline_at: None,
        outcome: None,
        outcome_kind: None,
        last_write: None,
        created_at: created,
        updated_at: created,
        completed_at: None,
        retain_until: None,
        conflicts: 0,
        last_conflict_at: None,
        answers: AnswerCounts::default(),
    }
}

fn live(mut record: OperationRecord) -> OperationRecord {
    record.lease_expires_at = Some(now() + TimeDelta::seconds(20));
    record.attempt_deadline_at = Some(now() + TimeDelta::seconds(50));
    record
}

fn succeeded() -> OperationRecord {
    let mut record = record(State::Succeeded);
    record.outcome = Some(Outcome::Succeeded(SuccessResult {
        body: b"ok".to_vec(),
        content_type: "text/plain".into(),
        metadata: Default::default(),
    }));
    record.outcome_kind = Some(State::Succeeded);
    record.completed_at = Some(now() - TimeDelta::minutes(9));
    record
}

fn failed_terminal() -> OperationRecord {
    let mut record = record(State::Failed);
    record.outcome = Some(Outcome::Failed {
        reason: FailureReason::Terminal,
        error: ErrorReport {
            code: "card_declined".into(),
            message: "declined".into(),
            metadata: Default::default(),
        },
    });
    record.outcome_kind = Some(State::Failed);
    record
}

fn entry(event: &str, attempt: u32, fence: u64) -> HistoryEntry {
    HistoryEntry {
        sequence: 1,
        event: event.into(),
        from_state: None,
        to_state: State::InProgress,
        fence,
        last_fence: fence,
        attempt,
        detail: String::new(),
        count: 1,
        first_at: now() - TimeDelta::minutes(10),
        last_at: now() - TimeDelta::minutes(10),
        acted_by: None,
    }
}

struct Case {
    record: Option<OperationRecord>,
    history: Vec<HistoryEntry>,
    evidence: Evidence,
    candidates: Candidates,
    same_request_keys: u32,
    suspected: bool,
    retention_ceiling: Option<TimeDelta>,
}

impl Case {
    fn of(record: Option<OperationRecord>) -> Self {
        Case {
            record,
            history: vec![entry("CLAIMED", 1, 7)],
            evidence: Evidence::none(now()),
            candidates: Vec::new(),
            same_request_keys: 1,
            suspected: false,
            retention_ceiling: Some(TimeDelta::days(7)),
        }
    }

    fn symptom(mut self, symptom: Symptom) -> Self {
        self.evidence.symptom = symptom;
        self
    }

    fn request(mut self, json: &str) -> Self {
        self.candidates = vec![(Mode::Json, fingerprint::of_json(json).expect("json"))];
        self
    }

    fn provider(mut self, finding: ProviderFinding, ago: TimeDelta) -> Self {
        self.evidence.provider = Some(ProviderEvidence {
            finding,
            looked_at: now() - ago,
        });
        self
    }

    fn run(&self) -> Report {
        let scope = scope();
        let facts = Facts {
            scope: &scope,
            record: self.record.as_ref(),
            history: &self.history,
            now: now(),
            clock_margin: TimeDelta::seconds(1),
            same_request_keys: self.same_request_keys,
            suspected_new_key_retry: self.suspected,
            retention_ceiling: self.retention_ceiling,
            server_max_retention: TimeDelta::days(30),
        };
        diagnose(&facts, &self.evidence, &self.candidates)
    }
}

fn first_move(report: &Report) -> MoveKind {
    report.plan.first().map(|step| step.kind).expect("a plan")
}

#[test]
fn the_map_one_line_each() {
    let expired = || {
        let mut record = record(State::InProgress);
        record.lease_expires_at = Some(now() - TimeDelta::minutes(9));
        record.attempt_deadline_at = Some(now() - TimeDelta::minutes(9));
        record
    };
    let mut conflicted = live(record(State::InProgress));
    conflicted.conflicts = 5;
    let table: Vec<(&str, Case, Cause, MoveKind)> = vec![
        (
            "timeout before a response: look up, answer with what is stored",
            Case::of(Some(succeeded())).symptom(Symptom::TimeoutBeforeResponse),
            Cause::AmbiguousOutcome,
            MoveKind::ClaimSameKey,
        ),
        (
            "concurrent duplicates: one owner; the others wait and replay",
            Case::of(Some(live(record(State::InProgress)))).symptom(Symptom::ConcurrentDuplicates),
            Cause::Race,
            MoveKind::Wait,
        ),
        (
            "same key, changed amount: conflict; a new intent needs a new key",
            Case::of(Some(live(record(State::InProgress))))
                .request(r#"{"amount":250,"to":"acct-1"}"#),
            Cause::PayloadConflict,
            MoveKind::ChangeCaller,
        ),
        (
            "a retry after a terminal failure: client defect",
            Case::of(Some(failed_terminal())).symptom(Symptom::ErrorStatus {
                code: 9,
                reason: String::new(),
            }),
            Cause::ClientDefect,
            MoveKind::ChangeCaller,
        ),
        (
            "a retry after idemd refused the call (validation)",
            Case::of(Some(live(record(State::InProgress)))).symptom(Symptom::ErrorStatus {
                code: 3,
                reason: String::new(),
            }),
            Cause::ClientDefect,
            MoveKind::ChangeCaller,
        ),
        (
            "stuck in progress: let the lease expire and reconcile before a new attempt",
            Case::of(Some(expired())).symptom(Symptom::StuckInProgress),
            Cause::StuckInProgress,
            MoveKind::Look,
        ),
        (
            "the same request under many keys: keys per attempt",
            Case {
                same_request_keys: 5,
                suspected: true,
                ..Case::of(Some(live(record(State::InProgress))))
                    .symptom(Symptom::TimeoutBeforeResponse)
            },
            Cause::NewKeyPerRetry,
            MoveKind::ChangeCaller,
        ),
        (
            "frequent conflicts: keys reused or unstable normalisation",
            Case::of(Some(conflicted)).request(REQUEST),
            Cause::UnstableKeysOrPayload,
            MoveKind::ChangeCaller,
        ),
        (
            "a store that keeps growing: retention without a bounded policy",
            Case {
                retention_ceiling: None,
                ..Case::of(Some(succeeded())).symptom(Symptom::StoreGrowing)
            },
            Cause::UnboundedRetention,
            MoveKind::Operator,
        ),
    ];
    for (line, case, cause, first) in table {
        let report = case.run();
        assert_eq!(report.verdict, Verdict::Diagnosed, "{line}: {report:#?}");
        assert_eq!(report.diagnosis.cause, cause, "{line}: {report:#?}");
        assert_eq!(first_move(&report), first, "{line}: {report:#?}");
        assert!(!report.verification.is_empty(), "{line}");
    }
}

#[test]
fn a_timeout_never_reads_as_nothing_happened() {
    // Whatever is stored, the first move after a timeout is to find out,
    // never a fresh execution under a new key.
    for stored in [
        Some(succeeded()),
        Some(failed_terminal()),
        Some(live(record(State::InProgress))),
        None,
    ] {
        let report = Case::of(stored)
            .symptom(Symptom::TimeoutBeforeResponse)
            .run();
        assert!(
            !report.plan.iter().any(|step| step.kind == MoveKind::NewKey),
            "{report:#?}"
        );
    }
    let report = Case::of(Some(succeeded()))
        .symptom(Symptom::TimeoutBeforeResponse)
        .run();
    assert!(report.plan[0].reversible && report.plan[0].attempts == 0);
}

#[test]
fn an_unknown_outcome_is_reconciled_from_the_provider_and_never_run_blind() {
    let mut unknown = record(State::Unknown);
    unknown.attempt = 3;
    let report = Case::of(Some(unknown.clone())).run();
    assert_eq!(report.diagnosis.cause, Cause::NeedsReconciliation);
    let kinds: Vec<MoveKind> = report.plan.iter().map(|step| step.kind).collect();
    assert_eq!(kinds, [MoveKind::Look, MoveKind::Reconcile]);
    let found = Case::of(Some(unknown.clone()))
        .provider(ProviderFinding::EffectFound, TimeDelta::seconds(5))
        .run();
    assert_eq!(first_move(&found), MoveKind::Reconcile);
    assert!(
        found.plan.iter().all(|step| step.attempts == 0),
        "{found:#?}"
    );
    let absent = Case::of(Some(unknown))
        .provider(ProviderFinding::NoEffect, TimeDelta::seconds(5))
        .run();
    let kinds: Vec<MoveKind> = absent.plan.iter().map(|step| step.kind).collect();
    assert_eq!(kinds, [MoveKind::Reconcile, MoveKind::ClaimSameKey]);
}

#[test]
fn an_attempt_still_in_flight_is_waited_for_first() {
    let mut stalled = record(State::InProgress);
    stalled.lease_expires_at = Some(now() - TimeDelta::seconds(5));
    stalled.attempt_deadline_at = Some(now() + TimeDelta::seconds(40));
    let report = Case::of(Some(stalled)).run();
    assert_eq!(report.diagnosis.cause, Cause::StuckInProgress);
    assert_eq!(first_move(&report), MoveKind::Wait);
    assert_eq!(report.plan[0].wait, Some(TimeDelta::seconds(41)));
}

#[test]
fn escalations_name_what_is_missing_and_plan_no_action() {
    let mut stalled = record(State::InProgress);
    stalled.lease_expires_at = Some(now() - TimeDelta::minutes(5));
    stalled.attempt_deadline_at = Some(now() - TimeDelta::minutes(2));
    let cases = vec![
        (
            "a negative lookup sent while the attempt could still run proves nothing",
            Case::of(Some(stalled)).provider(ProviderFinding::NoEffect, TimeDelta::minutes(4)),
            "sent after",
        ),
        (
            "the provider contradicts a stored success",
            Case::of(Some(succeeded())).provider(ProviderFinding::NoEffect, TimeDelta::seconds(1)),
            "which is right",
        ),
        (
            "two effects, one owner: the other came from outside idemd",
            Case::of(Some(succeeded())).symptom(Symptom::DuplicateEffect),
            "references",
        ),
        (
            "an observation too old to describe the operation",
            Case {
                evidence: Evidence {
                    symptom: Symptom::StuckInProgress,
                    observed_at: now() - TimeDelta::days(2),
                    ..Evidence::none(now())
                },
                ..Case::of(Some(live(record(State::InProgress))))
            },
            "fresh observation",
        ),
        (
            "the effect exists but nothing was claimed under the scope",
            Case::of(None).provider(ProviderFinding::EffectFound, TimeDelta::seconds(1)),
            "which caller or key",
        ),
    ];
    for (line, case, named) in cases {
        let report = case.run();
        assert_eq!(report.verdict, Verdict::Escalate, "{line}: {report:#?}");
        assert!(
            report.missing.iter().any(|missing| missing.contains(named)),
            "{line}: {:?}",
            report.missing
        );
        assert!(
            report.plan.iter().all(|step| matches!(
                step.kind,
                MoveKind::Look | MoveKind::Wait | MoveKind::HandOver
            )),
            "{line}: {:?}",
            report.plan
        );
        assert_eq!(
            report.plan.last().map(|step| step.kind),
            Some(MoveKind::HandOver)
        );
    }
}

#[test]
fn confidence_grows_with_independent_evidence_not_with_the_pattern() {
    // The same cause: a caller that only says "timed out" about an
    // operation idemd has no record of scores low; one whose request
    // matches a stored success, with its history and times, scores high.
    let thin = Case::of(None).symptom(Symptom::TimeoutBeforeResponse).run();
    assert_eq!(thin.diagnosis.cause, Cause::AmbiguousOutcome);
    let thick = Case::of(Some(succeeded()))
        .symptom(Symptom::TimeoutBeforeResponse)
        .request(REQUEST)
        .run();
    assert_eq!(thick.diagnosis.cause, Cause::AmbiguousOutcome);
    assert!(
        thin.confidence.score < thick.confidence.score,
        "{thin:#?} {thick:#?}"
    );
    assert_eq!(thin.confidence.level, Level::Low);
    // Evidence against it lowers it: the new-key watch saw one key only.
    let claimed = Case {
        evidence: Evidence {
            new_key_for_retry: true,
            ..Evidence::none(now())
        },
        ..Case::of(Some(succeeded()))
    }
    .run();
    let watched = Case {
        evidence: Evidence {
            new_key_for_retry: true,
            ..Evidence::none(now())
        },
        same_request_keys: 10,
        suspected: true,
        ..Case::of(Some(succeeded()))
    }
    .run();
    assert_eq!(claimed.diagnosis.cause, Cause::NewKeyPerRetry);
    assert!(claimed.confidence.score < watched.confidence.score);
}

#[test]
fn the_handoff_names_the_mode_that_matched_and_the_history_by_attempt() {
    let mut history = vec![entry("CLAIMED", 1, 7), entry("TAKEN_OVER", 2, 9)];
    history[1].count = 1;
    let report = Case {
        history,
        ..Case::of(Some(succeeded()))
    }
    .request(REQUEST)
    .run();
    assert_eq!(report.handoff.fingerprint_mode, "json");
    assert_eq!(report.handoff.history_summary.len(), 2);
    assert!(report.handoff.effect_count_evidence.contains("2 owner(s)"));
    assert!(report.handoff.policy.contains("attempts 1 of 3"));
}
