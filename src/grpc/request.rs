//! proto -> domain: each request read into plain values, refusing here only
//! what cannot be read (a malformed duration, an id that is no UUID, a page
//! token this server did not write). Defaults, bounds and rules across fields
//! are the domain's: [`Limits`] applies them to the same violations, so a
//! request with several bad fields hears about all of them at once.

use chrono::TimeDelta;
use uuid::Uuid;

use super::page_token;
use crate::auth::{Principal, Scope as AuthScope};
use crate::domain::diagnose::{
    Authority, Constraints, DiagnoseCommand, ProviderFinding, Symptom, refuse_secrets,
};
use crate::domain::policy::Policies;
use crate::domain::{
    ClaimCommand, ClaimRequested, CompleteCommand, CompleteRequested, Error, ErrorReport,
    FailCommand, FailDisposition, FailRequested, ForgetCommand, ForgetRequested, HistoryPage,
    HoldCommand, HoldRequested, Limits, ListOrder, Metadata, OperationFilter, OperationId,
    OperationsQuery, ReconcileCommand, ReconcileRequested, RenewCommand, RenewRequested,
    RequestIdentity, Resolution, Result, Scope, SuccessResult, Target, TenantSelection,
    UnresolvedQuery, UnresolvedRequested, Violations,
};
use crate::proto;

fn duration(
    field: &str,
    value: Option<pbjson_types::Duration>,
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

fn scope(scope: proto::Scope) -> Scope {
    Scope {
        operation: scope.operation,
        key: scope.key,
    }
}

fn metadata(metadata: std::collections::HashMap<String, String>) -> Metadata {
    metadata.into_iter().collect()
}

fn result(result: proto::Result) -> SuccessResult {
    SuccessResult {
        body: result.body,
        content_type: result.content_type,
        metadata: metadata(result.metadata),
    }
}

/// The server decides the reason; a reason the caller sent is ignored.
fn error_report(error: proto::OperationError) -> ErrorReport {
    ErrorReport {
        code: error.code,
        message: error.message,
        metadata: metadata(error.metadata),
    }
}

/// The validated command and how long the caller is willing to wait.
pub fn claim_command(
    request: proto::ClaimRequest,
    limits: &Limits,
    policies: &Policies,
) -> Result<(ClaimCommand, TimeDelta)> {
    use proto::claim_request::RequestIdentity as ProtoIdentity;
    let mut violations = Violations::default();
    let requested = ClaimRequested {
        scope: request.scope.map(scope),
        identity: request.request_identity.map(|identity| match identity {
            ProtoIdentity::Fingerprint(bytes) => RequestIdentity::Fingerprint(bytes),
            ProtoIdentity::JsonPayload(document) => RequestIdentity::JsonPayload(document),
            ProtoIdentity::BytesPayload(bytes) => RequestIdentity::BytesPayload(bytes),
        }),
        claim_token: request.claim_token,
        lease: duration("lease", request.lease, &mut violations),
        max_attempt_duration: duration(
            "max_attempt_duration",
            request.max_attempt_duration,
            &mut violations,
        ),
        max_attempts: request.max_attempts,
        retention: duration("retention", request.retention, &mut violations),
        operation_deadline: duration(
            "operation_deadline",
            request.operation_deadline,
            &mut violations,
        ),
        wait: duration("wait", request.wait, &mut violations),
        previous_fingerprints: request.previous_fingerprints,
    };
    policies.claim(requested, violations, limits)
}

pub fn renew_command(request: proto::RenewRequest, limits: &Limits) -> Result<RenewCommand> {
    let mut violations = Violations::default();
    let requested = RenewRequested {
        operation_id: operation_id("operation_id", &request.operation_id, &mut violations),
        fence: request.fence,
        lease: duration("lease", request.lease, &mut violations),
    };
    limits.renew(requested, violations)
}

pub fn complete_command(
    request: proto::CompleteRequest,
    limits: &Limits,
) -> Result<CompleteCommand> {
    let mut violations = Violations::default();
    let requested = CompleteRequested {
        operation_id: operation_id("operation_id", &request.operation_id, &mut violations),
        fence: request.fence,
        result: request.result.map(result),
    };
    limits.complete(requested, violations)
}

pub fn fail_command(request: proto::FailRequest, limits: &Limits) -> Result<FailCommand> {
    let mut violations = Violations::default();
    let disposition = match proto::FailDisposition::try_from(request.disposition) {
        Ok(proto::FailDisposition::Terminal) => Some(FailDisposition::Terminal),
        Ok(proto::FailDisposition::Retryable) => Some(FailDisposition::Retryable),
        Ok(proto::FailDisposition::Unknown) => Some(FailDisposition::Unknown),
        Ok(proto::FailDisposition::NotStarted) => Some(FailDisposition::NotStarted),
        Ok(proto::FailDisposition::Unspecified) | Err(_) => None,
    };
    let requested = FailRequested {
        operation_id: operation_id("operation_id", &request.operation_id, &mut violations),
        fence: request.fence,
        disposition,
        error: request.error.map(error_report),
        retry_after: duration("retry_after", request.retry_after, &mut violations),
    };
    limits.fail(requested, violations)
}

pub fn reconcile_command(
    request: proto::ReconcileRequest,
    limits: &Limits,
) -> Result<ReconcileCommand> {
    use proto::reconcile_request::Resolution as ProtoResolution;
    let mut violations = Violations::default();
    let requested = ReconcileRequested {
        operation_id: operation_id("operation_id", &request.operation_id, &mut violations),
        expected_fence: request.expected_fence,
        resolution: request.resolution.map(|resolution| match resolution {
            ProtoResolution::Succeeded(value) => Resolution::Succeeded(result(value)),
            ProtoResolution::Failed(value) => Resolution::Failed(error_report(value)),
            ProtoResolution::NotApplied(_) => Resolution::NotApplied,
        }),
    };
    limits.reconcile(requested, violations)
}

/// What a Lookup addresses, and the page of history it asks for (`None`:
/// no history).
pub fn lookup_request(
    request: proto::LookupRequest,
    limits: &Limits,
) -> Result<(Target, Option<HistoryPage>)> {
    use proto::lookup_request::Target as ProtoTarget;
    let mut violations = Violations::default();
    let after = if request.history_page_token.is_empty() {
        None
    } else {
        let parsed = page_token::parse_history(&request.history_page_token);
        if parsed.is_none() {
            violations.add(
                "history_page_token",
                "is not a token from a previous response",
            );
        }
        parsed
    };
    let wants_history = request.include_history || !request.history_page_token.is_empty();
    let page = wants_history.then(|| limits.history_page(request.history_page_size, after));
    let requested = request.target.map(|target| match target {
        ProtoTarget::Scope(value) => Target::Scope(scope(value)),
        ProtoTarget::OperationId(value) => {
            Target::Id(operation_id("operation_id", &value, &mut violations))
        }
    });
    Ok((limits.lookup_target(requested, violations)?, page))
}

pub fn unresolved_query(
    request: proto::ListUnresolvedRequest,
    limits: &Limits,
) -> Result<UnresolvedQuery> {
    let mut violations = Violations::default();
    let after = if request.page_token.is_empty() {
        None
    } else {
        let parsed = page_token::parse(&request.page_token);
        if parsed.is_none() {
            violations.add("page_token", "is not a token from a previous response");
        }
        parsed
    };
    let requested = UnresolvedRequested {
        // proto3 cannot tell an empty string from one left out.
        operation: (!request.operation.is_empty()).then_some(request.operation),
        page_size: request.page_size,
        after,
    };
    limits.unresolved(requested, violations)
}

/// Whose operations a call addresses: the caller's own tenant, or the one it
/// names (`None` or empty: its own). Only an admin credential may name one:
/// anyone else is PERMISSION_DENIED `MISSING_SCOPE` admin, before anything is
/// read. The one resolution for ListOperations' `tenant:` term and the
/// `tenant` field of Lookup, Reconcile and Forget.
pub fn tenant_selection(principal: &Principal, named: Option<&str>) -> Result<TenantSelection> {
    match named.filter(|name| !name.is_empty()) {
        None => Ok(TenantSelection::Own(principal.tenant)),
        Some(_) if !principal.scopes.contains(AuthScope::Admin) => Err(Error::MissingScope {
            scope: AuthScope::Admin.as_str(),
        }),
        Some(name) => Ok(TenantSelection::Named(name.to_owned())),
    }
}

/// A Hold's command: the operation name (empty: the whole tenant), the
/// reason and what held Claims are told to wait.
pub fn hold_command(request: proto::HoldRequest, limits: &Limits) -> Result<HoldCommand> {
    let mut violations = Violations::default();
    let requested = HoldRequested {
        operation: request.operation,
        reason: request.reason,
        retry_after: duration("retry_after", request.retry_after, &mut violations),
    };
    limits.hold(requested, violations)
}

/// A Release's command: the hold's name (empty: the whole tenant's) and why.
pub fn release_command(request: proto::ReleaseRequest, limits: &Limits) -> Result<HoldCommand> {
    let requested = HoldRequested {
        operation: request.operation,
        reason: request.reason,
        retry_after: None,
    };
    limits.release(requested, Violations::default())
}

pub fn forget_command(request: proto::ForgetRequest, limits: &Limits) -> Result<ForgetCommand> {
    let mut violations = Violations::default();
    let requested = ForgetRequested {
        operation_id: operation_id("operation_id", &request.operation_id, &mut violations),
        expected_fence: request.expected_fence,
        reason: request.reason,
    };
    limits.forget(requested, violations)
}

/// A ListOperations request, for the credential that made it: a non-admin
/// credential reads its own tenant only and may not name one (`tenant:` is
/// PERMISSION_DENIED `MISSING_SCOPE` admin); an admin reads every tenant,
/// or the one its filter names. The page token must have been made for the
/// same filter, tenant selection and order.
pub fn list_operations_query(
    request: proto::ListOperationsRequest,
    limits: &Limits,
    principal: &Principal,
) -> Result<OperationsQuery> {
    use proto::list_operations_request::Order;
    let mut violations = Violations::default();
    let filter = match OperationFilter::parse(&request.filter) {
        Ok(filter) => filter,
        Err(refused) => {
            violations.add("filter", refused.to_string());
            OperationFilter::default()
        }
    };
    let order = match Order::try_from(request.order) {
        Ok(Order::Unspecified | Order::OldestFirst) => ListOrder::OldestFirst,
        Ok(Order::NewestFirst) => ListOrder::NewestFirst,
        Err(_) => {
            violations.add("order", "must be ORDER_OLDEST_FIRST or ORDER_NEWEST_FIRST");
            ListOrder::OldestFirst
        }
    };
    let tenants = match tenant_selection(principal, filter.tenant.as_deref())? {
        // An admin naming no tenant searches them all.
        TenantSelection::Own(_) if principal.scopes.contains(AuthScope::Admin) => {
            TenantSelection::All
        }
        selection => selection,
    };
    let mut query = OperationsQuery {
        filter,
        tenants,
        order,
        limit: limits.page_size(request.page_size),
        after: None,
    };
    if !request.page_token.is_empty() {
        match page_token::parse_listing(&request.page_token) {
            None => violations.add("page_token", "is not a token from a previous response"),
            Some((_, _, binding)) if binding != page_token::listing_binding(&query) => {
                violations.add(
                    "page_token",
                    "was made for another filter, order or tenant: list again from the first page",
                );
            }
            Some((created_at, operation_id, _)) => query.after = Some((created_at, operation_id)),
        }
    }
    violations.into_result()?;
    Ok(query)
}

/// The longest free text Diagnose takes in `notes`.
const MAX_DIAGNOSE_NOTES: usize = 2048;
/// The longest `success_criterion` and `context`.
const MAX_DIAGNOSE_TEXT: usize = 1024;
/// The longest `error_reason`.
const MAX_ERROR_REASON: usize = 64;

/// A Diagnose request: secrets first (refused before anything else reads
/// the evidence), then every field, all violations at once.
pub fn diagnose_request(
    request: proto::DiagnoseRequest,
    limits: &Limits,
) -> Result<DiagnoseCommand> {
    use proto::diagnose_evidence::RequestIdentity as ProtoIdentity;
    use proto::diagnose_request::Target as ProtoTarget;
    let evidence = request.evidence.unwrap_or_default();
    let constraints = request.constraints.unwrap_or_default();
    let bytes_text = match &evidence.request_identity {
        Some(ProtoIdentity::BytesPayload(bytes)) => String::from_utf8_lossy(bytes).into_owned(),
        _ => String::new(),
    };
    let json_text = match &evidence.request_identity {
        Some(ProtoIdentity::JsonPayload(document)) => document.as_str(),
        _ => "",
    };
    refuse_secrets(&[
        ("evidence.notes", &evidence.notes),
        ("evidence.error_reason", &evidence.error_reason),
        ("evidence.json_payload", json_text),
        ("evidence.bytes_payload", &bytes_text),
        ("success_criterion", &request.success_criterion),
        ("context", &request.context),
    ])?;
    let mut violations = Violations::default();
    for (field, text, most) in [
        (
            "evidence.notes",
            evidence.notes.as_str(),
            MAX_DIAGNOSE_NOTES,
        ),
        (
            "evidence.error_reason",
            evidence.error_reason.as_str(),
            MAX_ERROR_REASON,
        ),
        (
            "success_criterion",
            request.success_criterion.as_str(),
            MAX_DIAGNOSE_TEXT,
        ),
        ("context", request.context.as_str(), MAX_DIAGNOSE_TEXT),
    ] {
        if text.len() > most {
            violations.add(field, format!("must be at most {most} bytes"));
        }
    }
    let symptom = match proto::Symptom::try_from(evidence.symptom) {
        Ok(proto::Symptom::Unspecified) => Symptom::Unspecified,
        Ok(proto::Symptom::TimeoutBeforeResponse) => Symptom::TimeoutBeforeResponse,
        Ok(proto::Symptom::ErrorStatus) => {
            if !(1..=16).contains(&evidence.status_code) {
                violations.add(
                    "evidence.status_code",
                    "SYMPTOM_ERROR_STATUS needs the gRPC status code it got (1-16)",
                );
            }
            Symptom::ErrorStatus {
                code: evidence.status_code,
                reason: evidence.error_reason.clone(),
            }
        }
        Ok(proto::Symptom::ConcurrentDuplicates) => Symptom::ConcurrentDuplicates,
        Ok(proto::Symptom::StuckInProgress) => Symptom::StuckInProgress,
        Ok(proto::Symptom::DuplicateEffect) => Symptom::DuplicateEffect,
        Ok(proto::Symptom::FrequentConflicts) => Symptom::FrequentConflicts,
        Ok(proto::Symptom::StoreGrowing) => Symptom::StoreGrowing,
        Err(_) => {
            violations.add("evidence.symptom", "is not a Symptom this server knows");
            Symptom::Unspecified
        }
    };
    let looked_ago = duration(
        "evidence.provider_looked_ago",
        evidence.provider_looked_ago,
        &mut violations,
    );
    let finding = match proto::ProviderFinding::try_from(evidence.provider_finding) {
        Ok(proto::ProviderFinding::Unspecified) => None,
        Ok(proto::ProviderFinding::EffectFound) => Some(ProviderFinding::EffectFound),
        Ok(proto::ProviderFinding::NoEffect) => Some(ProviderFinding::NoEffect),
        Ok(proto::ProviderFinding::EffectFoundMoreThanOnce) => {
            Some(ProviderFinding::EffectFoundMoreThanOnce)
        }
        Err(_) => {
            violations.add(
                "evidence.provider_finding",
                "is not a ProviderFinding this server knows",
            );
            None
        }
    };
    let provider = match (finding, looked_ago) {
        (Some(finding), Some(ago)) => Some((finding, ago)),
        (Some(_), None) => {
            violations.add(
                "evidence.provider_looked_ago",
                "is required with provider_finding: how long ago the lookup was sent",
            );
            None
        }
        (None, _) => None,
    };
    let observed_ago = duration(
        "evidence.observed_ago",
        evidence.observed_ago,
        &mut violations,
    )
    .unwrap_or_default();
    let identity = evidence.request_identity.map(|identity| match identity {
        ProtoIdentity::Fingerprint(bytes) => RequestIdentity::Fingerprint(bytes),
        ProtoIdentity::JsonPayload(document) => RequestIdentity::JsonPayload(document),
        ProtoIdentity::BytesPayload(bytes) => RequestIdentity::BytesPayload(bytes),
    });
    let candidates = limits.diagnose_candidates(identity, &mut violations);
    let authority = match proto::Authority::try_from(constraints.authority) {
        Ok(proto::Authority::ReadOnly) => Authority::ReadOnly,
        Ok(proto::Authority::Retry) => Authority::Retry,
        Ok(proto::Authority::Reconcile | proto::Authority::Unspecified) => Authority::Reconcile,
        Err(_) => {
            violations.add(
                "constraints.authority",
                "is not an Authority this server knows",
            );
            Authority::ReadOnly
        }
    };
    let wait_budget = duration(
        "constraints.wait_budget",
        constraints.wait_budget,
        &mut violations,
    );
    let requested = request.target.map(|target| match target {
        ProtoTarget::Scope(value) => Target::Scope(scope(value)),
        ProtoTarget::OperationId(value) => {
            Target::Id(operation_id("operation_id", &value, &mut violations))
        }
    });
    let target = limits.lookup_target(requested, violations)?;
    Ok(DiagnoseCommand {
        target,
        symptom,
        candidates,
        new_key_for_retry: evidence.new_key_for_retry,
        provider,
        observed_ago,
        constraints: Constraints {
            authority,
            reversible_only: constraints.reversible_only,
            attempt_budget: constraints.attempt_budget,
            wait_budget,
        },
        success_criterion: request.success_criterion,
        context: request.context,
    })
}
