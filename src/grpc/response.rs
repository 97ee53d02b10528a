//! domain -> proto: the answers, with every duration counted against the
//! database's clock of the read or write that produced them.

use chrono::{DateTime, TimeDelta, Utc};

use super::page_token;
use crate::domain::policy::OperationPattern;
use crate::domain::{
    ClaimAnswer, ErrorReport, FailureReason, Found, HistoryEntry, Limits, OnFailed,
    OperationRecord, OperationsPage, Outcome, PendingReason, State, SuccessResult, UnresolvedPage,
    time_left,
};
use crate::proto;
use crate::service::diagnosis::Diagnosed;
use crate::service::new_keys::SameRequest;
use crate::service::{ClaimReply, WriteReply};
use crate::store::holds::Hold;

pub fn proto_duration(delta: TimeDelta) -> pbjson_types::Duration {
    let delta = delta.max(TimeDelta::zero());
    pbjson_types::Duration {
        seconds: delta.num_seconds(),
        nanos: delta.subsec_nanos(),
    }
}

fn timestamp(moment: DateTime<Utc>) -> pbjson_types::Timestamp {
    pbjson_types::Timestamp {
        seconds: moment.timestamp(),
        nanos: i32::try_from(moment.timestamp_subsec_nanos()).unwrap_or(0),
    }
}

/// The one mapping of a state to the wire; [`state_name`] reads its name
/// from it.
pub fn proto_state(state: State) -> proto::OperationState {
    match state {
        State::InProgress => proto::OperationState::InProgress,
        State::Succeeded => proto::OperationState::Succeeded,
        State::Failed => proto::OperationState::Failed,
        State::RetryWait => proto::OperationState::RetryWait,
        State::Unknown => proto::OperationState::Unknown,
        State::Expired => proto::OperationState::Expired,
    }
}

/// The state's wire name without the enum's prefix (`IN_PROGRESS`), as
/// error messages and ErrorInfo metadata carry it.
pub fn state_name(state: State) -> &'static str {
    let name = proto_state(state).as_str_name();
    name.strip_prefix("OPERATION_STATE_").unwrap_or(name)
}

fn proto_reason(reason: FailureReason) -> proto::FailureReason {
    match reason {
        FailureReason::Terminal => proto::FailureReason::Terminal,
        FailureReason::AttemptsExhausted => proto::FailureReason::AttemptsExhausted,
        FailureReason::DeadlineExceeded => proto::FailureReason::DeadlineExceeded,
    }
}

fn proto_result(result: &SuccessResult) -> proto::Result {
    proto::Result {
        body: result.body.clone(),
        content_type: result.content_type.clone(),
        metadata: result.metadata.clone().into_iter().collect(),
    }
}

fn proto_error(reason: FailureReason, error: &ErrorReport) -> proto::OperationError {
    proto::OperationError {
        reason: proto_reason(reason).into(),
        code: error.code.clone(),
        message: error.message.clone(),
        metadata: error.metadata.clone().into_iter().collect(),
    }
}

fn ownership(record: &OperationRecord, now: DateTime<Utc>) -> proto::Ownership {
    proto::Ownership {
        operation_id: record.operation_id.to_string(),
        fence: record.fence,
        attempt: record.attempt,
        max_attempts: record.max_attempts,
        lease: Some(proto_duration(time_left(record.lease_expires_at, now))),
        attempt_deadline: Some(proto_duration(time_left(record.attempt_deadline_at, now))),
    }
}

pub fn claim_response(reply: &ClaimReply) -> proto::ClaimResponse {
    use proto::claim_response::Outcome as ProtoOutcome;
    let Some(record) = &reply.record else {
        // Held, with no operation yet (the only reply without a record):
        // Pending, naming no operation. Any other answer without a record
        // is answered the same, which executes nothing.
        let (reason, retry_after) = match reply.answer {
            ClaimAnswer::Pending {
                reason,
                retry_after,
            } => (reason, retry_after),
            _ => (PendingReason::Held, TimeDelta::seconds(1)),
        };
        return proto::ClaimResponse {
            outcome: Some(ProtoOutcome::Pending(proto::Pending {
                operation_id: String::new(),
                reason: proto_pending_reason(reason).into(),
                retry_after: Some(proto_duration(retry_after)),
                attempt: 0,
            })),
        };
    };
    let outcome = match reply.answer {
        ClaimAnswer::Acquired => ProtoOutcome::Acquired(proto::Acquired {
            ownership: Some(ownership(record, reply.now)),
        }),
        ClaimAnswer::ReconcileFirst(doubt) => {
            ProtoOutcome::ReconcileFirst(proto::ReconcileFirst {
                ownership: Some(ownership(record, reply.now)),
                previous_state: proto_state(doubt.previous.state).into(),
                previous_fence: doubt.previous.fence,
                // Until the earlier attempt settles (its deadline plus the
                // clock margin), counted like the ownership's durations, at
                // this reply's clock: a re-sent Claim is told what is left.
                previous_attempt_deadline: doubt
                    .settles_at
                    .map(|settles_at| proto_duration(time_left(Some(settles_at), reply.now))),
            })
        }
        ClaimAnswer::Pending {
            reason,
            retry_after,
        } => ProtoOutcome::Pending(proto::Pending {
            operation_id: record.operation_id.to_string(),
            reason: proto_pending_reason(reason).into(),
            retry_after: Some(proto_duration(retry_after)),
            attempt: record.attempt,
        }),
        ClaimAnswer::Completed => ProtoOutcome::Completed(completed(record)),
        ClaimAnswer::NeedsReconciliation => {
            ProtoOutcome::NeedsReconciliation(proto::NeedsReconciliation {
                operation_id: record.operation_id.to_string(),
                fence: record.fence,
                attempts: record.attempt,
            })
        }
    };
    proto::ClaimResponse {
        outcome: Some(outcome),
    }
}

fn completed(record: &OperationRecord) -> proto::Completed {
    use proto::completed::Outcome as ProtoOutcome;
    proto::Completed {
        operation_id: record.operation_id.to_string(),
        state: proto_state(record.state).into(),
        outcome: match &record.outcome {
            Some(Outcome::Succeeded(result)) => Some(ProtoOutcome::Result(proto_result(result))),
            Some(Outcome::Failed { reason, error }) => {
                Some(ProtoOutcome::Error(proto_error(*reason, error)))
            }
            None => None,
        },
        attempts: record.attempt,
        completed_at: record.completed_at.map(timestamp),
        retain_until: record.retain_until.map(timestamp),
    }
}

pub fn operation(
    record: &OperationRecord,
    now: DateTime<Utc>,
    with_result: bool,
) -> proto::Operation {
    let (result, error) = match &record.outcome {
        Some(Outcome::Succeeded(result)) if with_result => (Some(proto_result(result)), None),
        Some(Outcome::Failed { reason, error }) => (None, Some(proto_error(*reason, error))),
        _ => (None, None),
    };
    proto::Operation {
        operation_id: record.operation_id.to_string(),
        scope: Some(proto::Scope {
            operation: record.scope.operation.clone(),
            key: record.scope.key.clone(),
        }),
        state: proto_state(record.state).into(),
        lease_expired: record.lease_expired(now),
        fingerprint: record.fingerprint.0.to_vec(),
        fence: record.fence,
        attempt: record.attempt,
        max_attempts: record.max_attempts,
        result,
        error,
        created_at: Some(timestamp(record.created_at)),
        updated_at: Some(timestamp(record.updated_at)),
        lease_expires_at: record.lease_expires_at.map(timestamp),
        attempt_deadline_at: record.attempt_deadline_at.map(timestamp),
        retry_at: record.retry_at.map(timestamp),
        completed_at: record.completed_at.map(timestamp),
        retain_until: record.retain_until.map(timestamp),
        operation_deadline_at: record.operation_deadline_at.map(timestamp),
        tenant: String::new(),
        conflicts: record.conflicts,
        last_conflict_at: record.last_conflict_at.map(timestamp),
        replays: record.answers.replays,
        pendings: record.answers.pendings,
        last_replay_at: record.answers.last_replay_at.map(timestamp),
        on_failed: proto_on_failed(record.on_failed).into(),
        same_request_keys: 0,
        suspected_new_key_retry: false,
    }
}

fn proto_pending_reason(reason: PendingReason) -> proto::PendingReason {
    match reason {
        PendingReason::InProgress => proto::PendingReason::InProgress,
        PendingReason::RetryScheduled => proto::PendingReason::RetryScheduled,
        PendingReason::Held => proto::PendingReason::Held,
    }
}

/// A hold as the API answers it.
pub fn proto_hold(hold: &Hold) -> proto::Hold {
    proto::Hold {
        tenant: hold.tenant_name.clone(),
        operation: hold.operation.clone().unwrap_or_default(),
        reason: hold.reason.clone(),
        retry_after: Some(proto_duration(hold.retry_after)),
        held_at: Some(timestamp(hold.held_at)),
        held_by: hold.held_by.clone(),
    }
}

pub fn proto_on_failed(on_failed: OnFailed) -> proto::OnFailed {
    match on_failed {
        OnFailed::Replay => proto::OnFailed::Replay,
        OnFailed::NewAttempt => proto::OnFailed::NewAttempt,
    }
}

fn history_entry(entry: &HistoryEntry) -> proto::HistoryEntry {
    proto::HistoryEntry {
        sequence: entry.sequence,
        event: entry.event.clone(),
        from_state: entry
            .from_state
            .map_or(proto::OperationState::Unspecified, proto_state)
            .into(),
        to_state: proto_state(entry.to_state).into(),
        fence: entry.fence,
        last_fence: entry.last_fence,
        attempt: entry.attempt,
        detail: entry.detail.clone(),
        count: entry.count,
        at: Some(timestamp(entry.first_at)),
        last_at: Some(timestamp(entry.last_at)),
        credential: entry
            .acted_by
            .as_ref()
            .map(|acted_by| acted_by.credential.clone())
            .unwrap_or_default(),
        admin_on_behalf: entry
            .acted_by
            .as_ref()
            .is_some_and(|acted_by| acted_by.admin_on_behalf),
    }
}

/// `same_request`: what this replica saw of the operation's request under
/// other keys lately ([`crate::service::new_keys`]).
pub fn lookup_response(reply: &Found, same_request: Option<&SameRequest>) -> proto::LookupResponse {
    proto::LookupResponse {
        operation: Some(proto::Operation {
            same_request_keys: same_request.map_or(0, |seen| seen.keys),
            suspected_new_key_retry: same_request.is_some_and(|seen| seen.suspected),
            ..operation(&reply.record, reply.now, true)
        }),
        history: reply.history.iter().map(history_entry).collect(),
        next_history_page_token: match reply.history.last() {
            Some(last) if reply.more_history => {
                page_token::history_after(reply.record.operation_id, last.sequence)
            }
            _ => String::new(),
        },
    }
}

pub fn unresolved_response(page: &UnresolvedPage, limit: u32) -> proto::ListUnresolvedResponse {
    let full_page = page.records.len() >= limit as usize;
    proto::ListUnresolvedResponse {
        operations: page
            .records
            .iter()
            .map(|record| operation(record, page.now, false))
            .collect(),
        next_page_token: match page.records.last() {
            Some(last) if full_page => page_token::after(last),
            _ => String::new(),
        },
    }
}

/// A ListOperations page. `show_tenants`: the caller is an admin, who may
/// see every tenant's operations and is told whose each one is.
pub fn operations_response(
    page: &OperationsPage,
    limit: u32,
    binding: page_token::ListingBinding,
    show_tenants: bool,
) -> proto::ListOperationsResponse {
    let full_page = page.operations.len() >= limit as usize;
    proto::ListOperationsResponse {
        operations: page
            .operations
            .iter()
            .map(|listed| proto::Operation {
                tenant: if show_tenants {
                    listed.tenant_name.clone()
                } else {
                    String::new()
                },
                ..operation(&listed.record, page.now, false)
            })
            .collect(),
        next_page_token: match page.operations.last() {
            Some(last) if full_page => page_token::listing_after(&last.record, binding),
            _ => String::new(),
        },
    }
}

pub fn renew_response(reply: &WriteReply) -> proto::RenewResponse {
    proto::RenewResponse {
        lease: Some(proto_duration(time_left(
            reply.record.lease_expires_at,
            reply.now,
        ))),
        attempt_deadline: Some(proto_duration(time_left(
            reply.record.attempt_deadline_at,
            reply.now,
        ))),
    }
}

pub fn complete_response(reply: &WriteReply) -> proto::CompleteResponse {
    proto::CompleteResponse {
        state: proto_state(reply.answer().state).into(),
    }
}

pub fn fail_response(reply: &WriteReply) -> proto::FailResponse {
    let answer = reply.answer();
    proto::FailResponse {
        state: proto_state(answer.state).into(),
        reason: answer
            .failure
            .map_or(proto::FailureReason::Unspecified, proto_reason)
            .into(),
        retry_after: (answer.state == State::RetryWait)
            .then(|| proto_duration(time_left(answer.retry_at, reply.now))),
    }
}

pub fn forget_response(reply: &WriteReply, dropped_bytes: u64) -> proto::ForgetResponse {
    proto::ForgetResponse {
        state: proto_state(reply.record.state).into(),
        retain_until: reply.record.retain_until.map(timestamp),
        dropped_bytes,
    }
}

/// The bounds a first Claim of an operation name is admitted with, and the
/// pattern of the policy that decided them (`None`: the server's own).
pub fn policy_response(
    pattern: Option<&OperationPattern>,
    limits: &Limits,
    on_failed: OnFailed,
) -> proto::GetPolicyResponse {
    proto::GetPolicyResponse {
        matched_pattern: pattern.map(ToString::to_string).unwrap_or_default(),
        server_defaults: pattern.is_none(),
        default_lease: Some(proto_duration(limits.default_lease)),
        max_lease: Some(proto_duration(limits.max_lease)),
        default_max_attempt_duration: Some(proto_duration(limits.default_max_attempt_duration)),
        max_attempt_duration: Some(proto_duration(limits.max_attempt_duration)),
        default_max_attempts: limits.default_max_attempts,
        max_attempts: limits.max_attempts,
        default_retention: Some(proto_duration(limits.default_retention)),
        max_retention: Some(proto_duration(limits.max_retention)),
        default_operation_deadline: limits.default_operation_deadline.map(proto_duration),
        max_operation_deadline: Some(proto_duration(limits.max_operation_deadline)),
        on_failed: proto_on_failed(on_failed).into(),
    }
}

pub fn reconcile_response(reply: &WriteReply) -> proto::ReconcileResponse {
    let answer = reply.answer();
    proto::ReconcileResponse {
        state: proto_state(answer.state).into(),
        fence: answer.fence,
    }
}

/// A diagnosis on the wire. `tenant` is the name the request gave (empty:
/// the caller's own).
pub fn diagnose_response(
    diagnosed: &Diagnosed,
    scope: &proto::Scope,
    tenant: &str,
    success_criterion: &str,
    context: &str,
) -> proto::DiagnoseResponse {
    use crate::domain::diagnose::{Cause, Layer, Level, MoveKind, Source, Verdict};
    let cause = |cause: Cause| match cause {
        Cause::None => proto::Cause::None,
        Cause::AmbiguousOutcome => proto::Cause::AmbiguousOutcome,
        Cause::Race => proto::Cause::Race,
        Cause::PayloadConflict => proto::Cause::PayloadConflict,
        Cause::ClientDefect => proto::Cause::ClientDefect,
        Cause::StuckInProgress => proto::Cause::StuckInProgress,
        Cause::NewKeyPerRetry => proto::Cause::NewKeyPerRetry,
        Cause::UnstableKeysOrPayload => proto::Cause::UnstableKeysOrPayload,
        Cause::UnboundedRetention => proto::Cause::UnboundedRetention,
        Cause::NeedsReconciliation => proto::Cause::NeedsReconciliation,
    };
    let layer = |layer: Layer| match layer {
        Layer::None => proto::Layer::None,
        Layer::Transport => proto::Layer::Transport,
        Layer::Concurrency => proto::Layer::Concurrency,
        Layer::CallerRequest => proto::Layer::CallerRequest,
        Layer::CallerLogic => proto::Layer::CallerLogic,
        Layer::OwnerRecovery => proto::Layer::OwnerRecovery,
        Layer::Provider => proto::Layer::Provider,
        Layer::Policy => proto::Layer::Policy,
    };
    let diagnosis = |diagnosis: &crate::domain::diagnose::Diagnosis| proto::Diagnosis {
        cause: cause(diagnosis.cause).into(),
        layer: layer(diagnosis.layer).into(),
        meaning: diagnosis.meaning.clone(),
    };
    let report = &diagnosed.report;
    let record = diagnosed.record.as_ref();
    proto::DiagnoseResponse {
        verdict: match report.verdict {
            Verdict::Diagnosed => proto::Verdict::Diagnosed,
            Verdict::Escalate => proto::Verdict::Escalate,
        }
        .into(),
        diagnosis: Some(diagnosis(&report.diagnosis)),
        plan: report
            .plan
            .iter()
            .map(|step| proto::PlanStep {
                kind: match step.kind {
                    MoveKind::Look => proto::MoveKind::Look,
                    MoveKind::Wait => proto::MoveKind::Wait,
                    MoveKind::ClaimSameKey => proto::MoveKind::ClaimSameKey,
                    MoveKind::Reconcile => proto::MoveKind::Reconcile,
                    MoveKind::ChangeCaller => proto::MoveKind::ChangeCaller,
                    MoveKind::NewKey => proto::MoveKind::NewKey,
                    MoveKind::Operator => proto::MoveKind::Operator,
                    MoveKind::HandOver => proto::MoveKind::HandOver,
                }
                .into(),
                action: step.action.clone(),
                needs_scope: step.needs.as_str().to_owned(),
                reversible: step.reversible,
                attempts: step.attempts,
                wait: step.wait.map(proto_duration),
            })
            .collect(),
        verification: report
            .verification
            .iter()
            .map(|check| proto::VerificationCheck {
                check: check.check.clone(),
                if_true: check.if_true.clone(),
                if_false: check.if_false.clone(),
            })
            .collect(),
        handoff: Some(proto::Handoff {
            operation_id: record
                .map(|record| record.operation_id.to_string())
                .unwrap_or_default(),
            scope: Some(scope.clone()),
            tenant: tenant.to_owned(),
            fingerprint_mode: report.handoff.fingerprint_mode.clone(),
            fingerprint: record
                .map(|record| crate::domain::hex(&record.fingerprint.0))
                .unwrap_or_default(),
            state: record
                .map_or(proto::OperationState::Unspecified, |record| {
                    proto_state(record.state)
                })
                .into(),
            history_summary: report.handoff.history_summary.clone(),
            effect_atomicity: report.handoff.effect_atomicity.clone(),
            policy: report.handoff.policy.clone(),
            effect_count_evidence: report.handoff.effect_count_evidence.clone(),
            success_criterion: success_criterion.to_owned(),
            context: context.to_owned(),
        }),
        confidence: Some(proto::Confidence {
            score: report.confidence.score,
            level: match report.confidence.level {
                Level::Low => proto::ConfidenceLevel::Low,
                Level::Medium => proto::ConfidenceLevel::Medium,
                Level::High => proto::ConfidenceLevel::High,
            }
            .into(),
            observations: report
                .confidence
                .observations
                .iter()
                .map(|observation| proto::Observation {
                    source: match observation.source {
                        Source::History => proto::ObservationSource::History,
                        Source::Fingerprint => proto::ObservationSource::Fingerprint,
                        Source::Timing => proto::ObservationSource::Timing,
                        Source::Provider => proto::ObservationSource::Provider,
                        Source::Counters => proto::ObservationSource::Counters,
                        Source::CallerReport => proto::ObservationSource::CallerReport,
                        Source::Policy => proto::ObservationSource::Policy,
                    }
                    .into(),
                    detail: observation.detail.clone(),
                    supports: observation.supports,
                    weight: observation.weight,
                })
                .collect(),
        }),
        missing: report.missing.clone(),
        also: report.also.iter().map(diagnosis).collect(),
    }
}
