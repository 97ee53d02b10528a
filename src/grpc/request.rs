//! proto -> domain: each request read into plain values, refusing here only
//! what cannot be read (a malformed duration, an id that is no UUID, a page
//! token this server did not write). Defaults, bounds and rules across fields
//! are the domain's: [`Limits`] applies them to the same violations, so a
//! request with several bad fields hears about all of them at once.

use chrono::TimeDelta;
use uuid::Uuid;

use super::page_token;
use crate::auth::{Principal, Scope as AuthScope};
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
