//! proto <-> domain. Every check names the field it refuses, and a request
//! with several bad fields hears about all of them at once.

use chrono::{DateTime, TimeDelta, Utc};
use uuid::Uuid;

use crate::domain::fingerprint;
use crate::domain::limits::Violations;
use crate::domain::{
    ClaimAnswer, ClaimCommand, CompleteCommand, Error, ErrorReport, FailCommand, FailDisposition,
    FailureReason, Found, HistoryEntry, Limits, OperationId, OperationRecord, Outcome,
    PendingReason, ReconcileCommand, RenewCommand, Resolution, Result, Scope, State, SuccessResult,
    Target, UnresolvedPage, UnresolvedQuery, time_left,
};
use crate::proto;
use crate::service::{ClaimReply, WriteReply};

// ---- requests ---------------------------------------------------------------

fn duration(
    field: &str,
    value: Option<&prost_types::Duration>,
    violations: &mut Violations,
) -> Option<TimeDelta> {
    let value = value?;
    if value.seconds < 0 || value.nanos < 0 || value.nanos >= 1_000_000_000 {
        violations.add(field, "must be a non-negative duration");
        return None;
    }
    let delta = TimeDelta::new(value.seconds, value.nanos.unsigned_abs());
    if delta.is_none() {
        violations.add(field, "is too large");
    }
    delta
}

fn scope(
    field: &str,
    scope: Option<&proto::Scope>,
    limits: &Limits,
    violations: &mut Violations,
) -> Scope {
    let Some(scope) = scope else {
        violations.add(field, "is required");
        return Scope {
            operation: String::new(),
            key: String::new(),
        };
    };
    limits.check_operation(&format!("{field}.operation"), &scope.operation, violations);
    limits.check_key(&format!("{field}.key"), &scope.key, violations);
    Scope {
        operation: scope.operation.clone(),
        key: scope.key.clone(),
    }
}

fn operation_id(field: &str, value: &str, violations: &mut Violations) -> OperationId {
    match Uuid::parse_str(value) {
        Ok(uuid) => OperationId(uuid),
        Err(_) => {
            violations.add(
                field,
                "must be an operation_id as returned by Claim (a UUID)",
            );
            OperationId(Uuid::nil())
        }
    }
}

fn fence(field: &str, value: u64, violations: &mut Violations) -> u64 {
    if value == 0 {
        violations.add(field, "is required (fences start at 1)");
    }
    value
}

fn metadata(
    field: &str,
    value: &std::collections::HashMap<String, String>,
    limits: &Limits,
    violations: &mut Violations,
) -> crate::domain::Metadata {
    let metadata = value.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    limits.check_metadata(field, &metadata, violations);
    metadata
}

fn result(
    field: &str,
    value: Option<&proto::Result>,
    limits: &Limits,
    violations: &mut Violations,
) -> SuccessResult {
    let Some(value) = value else {
        violations.add(field, "is required");
        return SuccessResult::default();
    };
    Limits::check_bytes(
        &format!("{field}.body"),
        value.body.len(),
        limits.max_result_bytes,
        violations,
    );
    Limits::check_text(
        &format!("{field}.content_type"),
        &value.content_type,
        limits.max_content_type_bytes,
        violations,
    );
    SuccessResult {
        body: value.body.clone(),
        content_type: value.content_type.clone(),
        metadata: metadata(
            &format!("{field}.metadata"),
            &value.metadata,
            limits,
            violations,
        ),
    }
}

fn error_report(
    field: &str,
    value: Option<&proto::OperationError>,
    limits: &Limits,
    violations: &mut Violations,
) -> ErrorReport {
    let Some(value) = value else {
        return ErrorReport::default();
    };
    Limits::check_text(
        &format!("{field}.code"),
        &value.code,
        limits.max_error_code_bytes,
        violations,
    );
    Limits::check_text(
        &format!("{field}.message"),
        &value.message,
        limits.max_error_message_bytes,
        violations,
    );
    ErrorReport {
        code: value.code.clone(),
        message: value.message.clone(),
        metadata: metadata(
            &format!("{field}.metadata"),
            &value.metadata,
            limits,
            violations,
        ),
    }
}

/// The validated command and how long the caller is willing to wait.
pub fn claim_command(
    request: &proto::ClaimRequest,
    limits: &Limits,
) -> Result<(ClaimCommand, TimeDelta)> {
    use proto::claim_request::RequestIdentity;
    let mut violations = Violations::default();
    let scope = scope("scope", request.scope.as_ref(), limits, &mut violations);
    let fingerprint = match &request.request_identity {
        None => {
            violations.add(
                "request_identity",
                "one of fingerprint, json_payload or bytes_payload is required",
            );
            None
        }
        Some(RequestIdentity::Fingerprint(bytes)) => fingerprint::from_client_bytes(bytes)
            .map_err(|error| violations.add("fingerprint", error.to_string()))
            .ok(),
        Some(RequestIdentity::JsonPayload(document)) => fingerprint::of_json(document)
            .map_err(|error| violations.add("json_payload", format!("{error} (RFC 7493)")))
            .ok(),
        Some(RequestIdentity::BytesPayload(bytes)) => Some(fingerprint::of_bytes(bytes)),
    };
    limits.check_claim_token("claim_token", &request.claim_token, &mut violations);
    let lease = Limits::duration_or_default(
        "lease",
        duration("lease", request.lease.as_ref(), &mut violations),
        limits.default_lease,
        (limits.min_lease, limits.max_lease),
        &mut violations,
    );
    let max_attempt_duration = Limits::duration_or_default(
        "max_attempt_duration",
        duration(
            "max_attempt_duration",
            request.max_attempt_duration.as_ref(),
            &mut violations,
        ),
        limits.default_max_attempt_duration.max(lease),
        (limits.min_lease, limits.max_attempt_duration),
        &mut violations,
    );
    let max_attempts = match request.max_attempts {
        0 => limits.default_max_attempts,
        requested if requested > limits.max_attempts => {
            violations.add(
                "max_attempts",
                format!("must be at most {}", limits.max_attempts),
            );
            requested
        }
        requested => requested,
    };
    let retention = Limits::duration_or_default(
        "retention",
        duration("retention", request.retention.as_ref(), &mut violations),
        limits.default_retention,
        (TimeDelta::zero(), limits.max_retention),
        &mut violations,
    );
    let operation_deadline = duration(
        "operation_deadline",
        request.operation_deadline.as_ref(),
        &mut violations,
    )
    .inspect(|deadline| {
        if *deadline < limits.min_lease || *deadline > limits.max_operation_deadline {
            violations.add(
                "operation_deadline",
                format!(
                    "must be between {} and {}",
                    crate::domain::limits::describe(limits.min_lease),
                    crate::domain::limits::describe(limits.max_operation_deadline)
                ),
            );
        }
    });
    let wait = Limits::duration_or_default(
        "wait",
        duration("wait", request.wait.as_ref(), &mut violations),
        TimeDelta::zero(),
        (TimeDelta::zero(), limits.max_wait),
        &mut violations,
    );
    violations.into_result()?;
    let fingerprint = fingerprint
        .ok_or_else(|| Error::Internal("fingerprint missing after validation".into()))?;
    Ok((
        ClaimCommand {
            scope,
            fingerprint,
            claim_token: request.claim_token.clone(),
            lease,
            max_attempt_duration,
            max_attempts,
            retention,
            operation_deadline,
        },
        wait,
    ))
}

pub fn renew_command(request: &proto::RenewRequest, limits: &Limits) -> Result<RenewCommand> {
    let mut violations = Violations::default();
    let operation_id = operation_id("operation_id", &request.operation_id, &mut violations);
    let fence = fence("fence", request.fence, &mut violations);
    let lease = duration("lease", request.lease.as_ref(), &mut violations);
    if let Some(lease) = lease {
        Limits::duration_or_default(
            "lease",
            Some(lease),
            lease,
            (limits.min_lease, limits.max_lease),
            &mut violations,
        );
    }
    violations.into_result()?;
    Ok(RenewCommand {
        operation_id,
        fence,
        lease,
    })
}

pub fn complete_command(
    request: &proto::CompleteRequest,
    limits: &Limits,
) -> Result<CompleteCommand> {
    let mut violations = Violations::default();
    let operation_id = operation_id("operation_id", &request.operation_id, &mut violations);
    let fence = fence("fence", request.fence, &mut violations);
    let result = result("result", request.result.as_ref(), limits, &mut violations);
    violations.into_result()?;
    Ok(CompleteCommand {
        operation_id,
        fence,
        result,
    })
}

pub fn fail_command(request: &proto::FailRequest, limits: &Limits) -> Result<FailCommand> {
    let mut violations = Violations::default();
    let operation_id = operation_id("operation_id", &request.operation_id, &mut violations);
    let fence = fence("fence", request.fence, &mut violations);
    let disposition = match proto::FailDisposition::try_from(request.disposition) {
        Ok(proto::FailDisposition::Terminal) => FailDisposition::Terminal,
        Ok(proto::FailDisposition::Retryable) => FailDisposition::Retryable,
        Ok(proto::FailDisposition::Unknown) => FailDisposition::Unknown,
        Ok(proto::FailDisposition::Unspecified) | Err(_) => {
            violations.add("disposition", "must be TERMINAL, RETRYABLE or UNKNOWN");
            FailDisposition::Unknown
        }
    };
    let error = error_report("error", request.error.as_ref(), limits, &mut violations);
    let retry_after = duration("retry_after", request.retry_after.as_ref(), &mut violations);
    if retry_after.is_some() && disposition != FailDisposition::Retryable {
        violations.add(
            "retry_after",
            "is only meaningful with disposition RETRYABLE",
        );
    }
    let retry_after = Limits::duration_or_default(
        "retry_after",
        retry_after,
        limits.default_retry_after,
        (TimeDelta::zero(), limits.max_retry_after),
        &mut violations,
    );
    violations.into_result()?;
    Ok(FailCommand {
        operation_id,
        fence,
        disposition,
        error,
        retry_after: if disposition == FailDisposition::Retryable {
            retry_after
        } else {
            TimeDelta::zero()
        },
    })
}

pub fn reconcile_command(
    request: &proto::ReconcileRequest,
    limits: &Limits,
) -> Result<ReconcileCommand> {
    use proto::reconcile_request::Resolution as ProtoResolution;
    let mut violations = Violations::default();
    let operation_id = operation_id("operation_id", &request.operation_id, &mut violations);
    let expected_fence = fence("expected_fence", request.expected_fence, &mut violations);
    let resolution = match &request.resolution {
        Some(ProtoResolution::Succeeded(value)) => {
            Resolution::Succeeded(result("succeeded", Some(value), limits, &mut violations))
        }
        Some(ProtoResolution::Failed(value)) => {
            Resolution::Failed(error_report("failed", Some(value), limits, &mut violations))
        }
        Some(ProtoResolution::NotApplied(_)) => Resolution::NotApplied,
        None => {
            violations.add(
                "resolution",
                "one of succeeded, failed or not_applied is required",
            );
            Resolution::NotApplied
        }
    };
    violations.into_result()?;
    Ok(ReconcileCommand {
        operation_id,
        expected_fence,
        resolution,
    })
}

pub fn lookup_target(request: &proto::LookupRequest, limits: &Limits) -> Result<Target> {
    use proto::lookup_request::Target as ProtoTarget;
    let mut violations = Violations::default();
    let target = match &request.target {
        Some(ProtoTarget::Scope(value)) => {
            Target::Scope(scope("scope", Some(value), limits, &mut violations))
        }
        Some(ProtoTarget::OperationId(value)) => {
            Target::Id(operation_id("operation_id", value, &mut violations))
        }
        None => {
            violations.add("target", "one of scope or operation_id is required");
            Target::Id(OperationId(Uuid::nil()))
        }
    };
    violations.into_result()?;
    Ok(target)
}

const PAGE_TOKEN_VERSION: &str = "v1";

pub fn unresolved_query(
    request: &proto::ListUnresolvedRequest,
    limits: &Limits,
) -> Result<UnresolvedQuery> {
    let mut violations = Violations::default();
    let operation = (!request.operation.is_empty()).then(|| request.operation.clone());
    if let Some(operation) = &operation {
        limits.check_operation("operation", operation, &mut violations);
    }
    let limit = match request.page_size {
        0 => limits.default_page_size,
        size if size > limits.max_page_size => {
            violations.add(
                "page_size",
                format!("must be at most {}", limits.max_page_size),
            );
            size
        }
        size => size,
    };
    let after = if request.page_token.is_empty() {
        None
    } else {
        let parsed = parse_page_token(&request.page_token);
        if parsed.is_none() {
            violations.add("page_token", "is not a token from a previous response");
        }
        parsed
    };
    violations.into_result()?;
    Ok(UnresolvedQuery {
        operation,
        limit,
        after,
    })
}

fn parse_page_token(token: &str) -> Option<(DateTime<Utc>, OperationId)> {
    let mut parts = token.split('.');
    if parts.next()? != PAGE_TOKEN_VERSION {
        return None;
    }
    let micros: i64 = parts.next()?.parse().ok()?;
    let operation_id = Uuid::parse_str(parts.next()?).ok()?;
    if parts.next().is_some() {
        return None;
    }
    Some((
        DateTime::from_timestamp_micros(micros)?,
        OperationId(operation_id),
    ))
}

fn page_token(record: &OperationRecord) -> String {
    format!(
        "{PAGE_TOKEN_VERSION}.{}.{}",
        record.created_at.timestamp_micros(),
        record.operation_id
    )
}

// ---- responses --------------------------------------------------------------

pub fn proto_duration(delta: TimeDelta) -> prost_types::Duration {
    let delta = delta.max(TimeDelta::zero());
    prost_types::Duration {
        seconds: delta.num_seconds(),
        nanos: delta.subsec_nanos(),
    }
}

fn timestamp(moment: DateTime<Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: moment.timestamp(),
        nanos: i32::try_from(moment.timestamp_subsec_nanos()).unwrap_or(0),
    }
}

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
    let record = &reply.record;
    let outcome = match reply.answer {
        ClaimAnswer::Acquired => ProtoOutcome::Acquired(proto::Acquired {
            ownership: Some(ownership(record, reply.now)),
        }),
        ClaimAnswer::ReconcileFirst(previous) => {
            ProtoOutcome::ReconcileFirst(proto::ReconcileFirst {
                ownership: Some(ownership(record, reply.now)),
                previous_state: proto_state(previous.state).into(),
                previous_fence: previous.fence,
            })
        }
        ClaimAnswer::Pending {
            reason,
            retry_after,
        } => ProtoOutcome::Pending(proto::Pending {
            operation_id: record.operation_id.to_string(),
            reason: match reason {
                PendingReason::InProgress => proto::PendingReason::InProgress,
                PendingReason::RetryScheduled => proto::PendingReason::RetryScheduled,
            }
            .into(),
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
        attempt: entry.attempt,
        detail: entry.detail.clone(),
        count: entry.count,
        at: Some(timestamp(entry.first_at)),
        last_at: Some(timestamp(entry.last_at)),
    }
}

pub fn lookup_response(reply: &Found) -> proto::LookupResponse {
    proto::LookupResponse {
        operation: Some(operation(&reply.record, reply.now, true)),
        history: reply.history.iter().map(history_entry).collect(),
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
            Some(last) if full_page => page_token(last),
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
        state: proto_state(reply.record.state).into(),
    }
}

pub fn fail_response(reply: &WriteReply) -> proto::FailResponse {
    let record = &reply.record;
    proto::FailResponse {
        state: proto_state(record.state).into(),
        reason: match &record.outcome {
            Some(Outcome::Failed { reason, .. }) => proto_reason(*reason).into(),
            _ => proto::FailureReason::Unspecified.into(),
        },
        retry_after: (record.state == State::RetryWait)
            .then(|| proto_duration(time_left(record.retry_at, reply.now))),
    }
}

pub fn reconcile_response(reply: &WriteReply) -> proto::ReconcileResponse {
    proto::ReconcileResponse {
        state: proto_state(reply.record.state).into(),
        fence: reply.record.fence,
    }
}
