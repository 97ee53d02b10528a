//! Thin handlers: take the tenant admission authenticated, convert, call
//! the service, convert back.

use std::sync::Arc;
use std::time::Duration;

use chrono::TimeDelta;
use tokio::sync::watch;
use tonic::metadata::MetadataMap;
use tonic::service::Routes;
use tonic::{Extensions, Request, Response, Status};

use super::admission::{AdmissionSettings, Admitted};
use super::connect::Connect;
use super::observe::{Observed, Waited};
use super::page_token;
use super::request::{
    claim_command, complete_command, fail_command, forget_command, hold_command,
    list_operations_query, lookup_request, reconcile_command, release_command, renew_command,
    tenant_selection, unresolved_query,
};
use super::response::{
    claim_response, complete_response, fail_response, forget_response, lookup_response,
    operations_response, policy_response, proto_hold, reconcile_response, renew_response,
    unresolved_response,
};
use crate::auth::{Authenticator, Principal, Scope};
use crate::domain::policy::Policies;
use crate::domain::{ActedBy, Error, HoldCommand, Limits, TenantId, TenantSelection};
use crate::grpc::status::to_status;
use crate::metrics::Metrics;
use crate::proto;
use crate::proto::idempotency_service_server::{
    IdempotencyService as IdempotencyRpcs, IdempotencyServiceServer,
};
use crate::service::{IdempotencyService, WriteReply};
use crate::store::Actor;
use crate::store::holds::{HoldSet, MOST_HOLDS};

/// What is left of the caller's deadline is not all ours to wait: the answer
/// must still travel back. At least this much is kept for it.
const MIN_DEADLINE_MARGIN: Duration = Duration::from_millis(100);

#[derive(Clone)]
pub struct IdempotencyApi {
    service: IdempotencyService,
    limits: Arc<Limits>,
    /// The operation policies in force (reloaded from their file).
    policies: watch::Receiver<Arc<Policies>>,
}

impl IdempotencyApi {
    /// What a Hold or a Release acts on: the tenant (an admin may name
    /// another; checked before the request is), the validated command, and
    /// the actor the audit log names.
    async fn hold_parts(
        &self,
        extensions: &Extensions,
        named: &str,
        command: impl FnOnce() -> crate::domain::Result<HoldCommand>,
    ) -> Result<(TenantId, HoldCommand, Actor), Status> {
        let principal = principal(extensions)?;
        let selection = tenant_selection(principal, Some(named)).map_err(to_status)?;
        let command = command().map_err(to_status)?;
        let tenant = self
            .service
            .tenant_of(&selection)
            .await
            .map_err(to_status)?;
        let actor = admin_actor(principal, &command.reason);
        Ok((tenant, command, actor))
    }

    pub fn new(
        service: IdempotencyService,
        limits: Arc<Limits>,
        policies: watch::Receiver<Arc<Policies>>,
    ) -> Self {
        Self {
            service,
            limits,
            policies,
        }
    }
}

/// The tenant admission authenticated the call for, before its body was read.
fn tenant(extensions: &Extensions) -> Result<TenantId, Status> {
    principal(extensions).map(|principal| principal.tenant)
}

/// Who admission authenticated the call as, with the credential's scopes.
fn principal(extensions: &Extensions) -> Result<&Principal, Status> {
    extensions.get::<Principal>().ok_or_else(|| {
        to_status(Error::Internal(
            "a call reached its handler unauthenticated".into(),
        ))
    })
}

/// Who acts on an operation of `tenant`: the credential, and whether it is
/// an admin's acting for another tenant (only an admin may name one:
/// [`tenant_selection`]; naming its own is not acting on another's behalf).
fn acted_by(principal: &Principal, selection: &TenantSelection, tenant: TenantId) -> ActedBy {
    ActedBy {
        credential: principal.credential.to_string(),
        admin_on_behalf: matches!(selection, TenantSelection::Named(_))
            && tenant != principal.tenant,
    }
}

/// Who sets or releases a hold, as the audit log names them: the
/// credential, with the reason the request gave.
fn admin_actor(principal: &Principal, reason: &str) -> Actor {
    Actor {
        name: principal.credential.to_string(),
        reason: Some(reason.to_owned()),
    }
}

/// OpenTelemetry integers are signed; fences stay far below 2^63.
fn fence_attribute(fence: u64) -> i64 {
    i64::try_from(fence).unwrap_or(i64::MAX)
}

/// What a write did, on the call's span (never the key, never payloads).
fn record_write(reply: &WriteReply) {
    let span = tracing::Span::current();
    span.record("idem.operation", reply.record.scope.operation.as_str());
    span.record("idem.outcome", reply.record.state.as_str());
    span.record("idem.fence", fence_attribute(reply.record.fence));
}

/// The longest a Claim may wait given the call's own gRPC deadline.
fn wait_within_deadline(requested: TimeDelta, metadata: &MetadataMap) -> Duration {
    let requested = requested.to_std().unwrap_or_default();
    let Some(deadline) = metadata
        .get("grpc-timeout")
        .and_then(|value| value.to_str().ok())
        .and_then(parse_grpc_timeout)
    else {
        return requested;
    };
    let margin = (deadline / 10).max(MIN_DEADLINE_MARGIN);
    requested.min(deadline.saturating_sub(margin))
}

/// `grpc-timeout` is digits and a unit: H, M, S, m (milli), u (micro), n (nano).
fn parse_grpc_timeout(value: &str) -> Option<Duration> {
    let split = value.len().checked_sub(1)?;
    let (digits, unit) = value.split_at(split);
    let amount: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(amount.saturating_mul(3600)),
        "M" => Duration::from_secs(amount.saturating_mul(60)),
        "S" => Duration::from_secs(amount),
        "m" => Duration::from_millis(amount),
        "u" => Duration::from_micros(amount),
        "n" => Duration::from_nanos(amount),
        _ => return None,
    })
}

#[tonic::async_trait]
impl IdempotencyRpcs for IdempotencyApi {
    async fn claim(
        &self,
        request: Request<proto::ClaimRequest>,
    ) -> Result<Response<proto::ClaimResponse>, Status> {
        let (metadata, extensions, message) = request.into_parts();
        let tenant = tenant(&extensions)?;
        // The read guard lives for this statement only (admission is synchronous).
        let (command, wait) =
            claim_command(message, &self.limits, &self.policies.borrow()).map_err(to_status)?;
        let span = tracing::Span::current();
        span.record("idem.operation", command.scope.operation.as_str());
        let wait = wait_within_deadline(wait, &metadata);
        let reply = self
            .service
            .claim(tenant, &command, wait)
            .await
            .map_err(to_status)?;
        span.record("idem.outcome", reply.answer.outcome().as_str());
        if let Some(record) = &reply.record {
            span.record("idem.fence", fence_attribute(record.fence));
        }
        let mut response = Response::new(claim_response(&reply));
        if !reply.waited.is_zero() {
            response.extensions_mut().insert(Waited(reply.waited));
        }
        Ok(response)
    }

    async fn renew(
        &self,
        request: Request<proto::RenewRequest>,
    ) -> Result<Response<proto::RenewResponse>, Status> {
        let (_, extensions, message) = request.into_parts();
        let tenant = tenant(&extensions)?;
        let command = renew_command(message, &self.limits).map_err(to_status)?;
        let reply = self
            .service
            .renew(tenant, &command)
            .await
            .map_err(to_status)?;
        record_write(&reply);
        Ok(Response::new(renew_response(&reply)))
    }

    async fn complete(
        &self,
        request: Request<proto::CompleteRequest>,
    ) -> Result<Response<proto::CompleteResponse>, Status> {
        let (_, extensions, message) = request.into_parts();
        let tenant = tenant(&extensions)?;
        let command = complete_command(message, &self.limits).map_err(to_status)?;
        let reply = self
            .service
            .complete(tenant, &command)
            .await
            .map_err(to_status)?;
        record_write(&reply);
        Ok(Response::new(complete_response(&reply)))
    }

    async fn fail(
        &self,
        request: Request<proto::FailRequest>,
    ) -> Result<Response<proto::FailResponse>, Status> {
        let (_, extensions, message) = request.into_parts();
        let tenant = tenant(&extensions)?;
        let command = fail_command(message, &self.limits).map_err(to_status)?;
        let reply = self
            .service
            .fail(tenant, &command)
            .await
            .map_err(to_status)?;
        record_write(&reply);
        Ok(Response::new(fail_response(&reply)))
    }

    async fn lookup(
        &self,
        request: Request<proto::LookupRequest>,
    ) -> Result<Response<proto::LookupResponse>, Status> {
        let (_, extensions, message) = request.into_parts();
        let principal = principal(&extensions)?;
        let selection = tenant_selection(principal, Some(&message.tenant)).map_err(to_status)?;
        let (target, history) = lookup_request(message, &self.limits).map_err(to_status)?;
        let tenant = self
            .service
            .tenant_of(&selection)
            .await
            .map_err(to_status)?;
        let reply = self
            .service
            .lookup(tenant, &target, history)
            .await
            .map_err(to_status)?;
        let same_request = self.service.new_key_retries().same_request(
            tenant,
            &reply.record.scope.operation,
            reply.record.fingerprint,
        );
        Ok(Response::new(lookup_response(
            &reply,
            same_request.as_ref(),
        )))
    }

    async fn reconcile(
        &self,
        request: Request<proto::ReconcileRequest>,
    ) -> Result<Response<proto::ReconcileResponse>, Status> {
        let (_, extensions, message) = request.into_parts();
        let principal = principal(&extensions)?;
        // Admission asked for reconcile; another tenant's needs admin too.
        let selection = tenant_selection(principal, Some(&message.tenant)).map_err(to_status)?;
        let command = reconcile_command(message, &self.limits).map_err(to_status)?;
        let tenant = self
            .service
            .tenant_of(&selection)
            .await
            .map_err(to_status)?;
        let acted_by = acted_by(principal, &selection, tenant);
        let reply = self
            .service
            .reconcile(tenant, &command, &acted_by)
            .await
            .map_err(to_status)?;
        record_write(&reply);
        Ok(Response::new(reconcile_response(&reply)))
    }

    async fn forget(
        &self,
        request: Request<proto::ForgetRequest>,
    ) -> Result<Response<proto::ForgetResponse>, Status> {
        let (_, extensions, message) = request.into_parts();
        let principal = principal(&extensions)?;
        let selection = tenant_selection(principal, Some(&message.tenant)).map_err(to_status)?;
        let command = forget_command(message, &self.limits).map_err(to_status)?;
        let tenant = self
            .service
            .tenant_of(&selection)
            .await
            .map_err(to_status)?;
        let acted_by = acted_by(principal, &selection, tenant);
        let (reply, dropped_bytes) = self
            .service
            .forget(tenant, &command, &acted_by)
            .await
            .map_err(to_status)?;
        record_write(&reply);
        Ok(Response::new(forget_response(&reply, dropped_bytes)))
    }

    async fn hold(
        &self,
        request: Request<proto::HoldRequest>,
    ) -> Result<Response<proto::HoldResponse>, Status> {
        let (_, extensions, message) = request.into_parts();
        let named = message.tenant.clone();
        let (tenant, command, actor) = self
            .hold_parts(&extensions, &named, || hold_command(message, &self.limits))
            .await?;
        let (hold, already_held) = match self
            .service
            .hold(tenant, &command, &actor)
            .await
            .map_err(to_status)?
        {
            HoldSet::Held(hold) => (hold, false),
            HoldSet::AlreadyHeld(hold) => (hold, true),
            HoldSet::Full => {
                return Err(to_status(Error::invalid(
                    "operation",
                    format!(
                        "{MOST_HOLDS} holds are in force already, the most kept: release one first"
                    ),
                )));
            }
        };
        Ok(Response::new(proto::HoldResponse {
            hold: Some(proto_hold(&hold)),
            already_held,
        }))
    }

    async fn release(
        &self,
        request: Request<proto::ReleaseRequest>,
    ) -> Result<Response<proto::ReleaseResponse>, Status> {
        let (_, extensions, message) = request.into_parts();
        let named = message.tenant.clone();
        let (tenant, command, actor) = self
            .hold_parts(&extensions, &named, || {
                release_command(message, &self.limits)
            })
            .await?;
        let released = self
            .service
            .release(tenant, &command, &actor)
            .await
            .map_err(to_status)?
            .ok_or_else(|| to_status(Error::NotFound))?;
        Ok(Response::new(proto::ReleaseResponse {
            released: Some(proto_hold(&released)),
        }))
    }

    async fn list_holds(
        &self,
        request: Request<proto::ListHoldsRequest>,
    ) -> Result<Response<proto::ListHoldsResponse>, Status> {
        let (_, extensions, message) = request.into_parts();
        let principal = principal(&extensions)?;
        // An admin sees every tenant's unless it names one; others their own.
        let only = match tenant_selection(principal, Some(&message.tenant)).map_err(to_status)? {
            TenantSelection::Own(tenant) if !principal.scopes.contains(Scope::Admin) => {
                Some(tenant)
            }
            TenantSelection::Own(_) | TenantSelection::All => None,
            named @ TenantSelection::Named(_) => {
                Some(self.service.tenant_of(&named).await.map_err(to_status)?)
            }
        };
        let holds = self.service.list_holds().await.map_err(to_status)?;
        Ok(Response::new(proto::ListHoldsResponse {
            holds: holds
                .iter()
                .filter(|hold| only.is_none_or(|tenant| hold.tenant == tenant))
                .map(proto_hold)
                .collect(),
        }))
    }

    // TEMPORARY on this branch only: the lead lands the real handler.
    async fn diagnose(
        &self,
        _request: Request<proto::DiagnoseRequest>,
    ) -> Result<Response<proto::DiagnoseResponse>, Status> {
        Err(Status::unimplemented("Diagnose lands with the lead's branch"))
    }

    async fn get_policy(
        &self,
        request: Request<proto::GetPolicyRequest>,
    ) -> Result<Response<proto::GetPolicyResponse>, Status> {
        let operation = self
            .limits
            .policy_operation(request.into_inner().operation)
            .map_err(to_status)?;
        // The read guard lives for this block only, as in Claim.
        let response = {
            let policies = self.policies.borrow();
            let (pattern, limits) = policies.effective(&operation, &self.limits);
            policy_response(pattern, &limits, policies.on_failed(&operation))
        };
        Ok(Response::new(response))
    }

    async fn list_unresolved(
        &self,
        request: Request<proto::ListUnresolvedRequest>,
    ) -> Result<Response<proto::ListUnresolvedResponse>, Status> {
        let (_, extensions, message) = request.into_parts();
        let tenant = tenant(&extensions)?;
        let query = unresolved_query(message, &self.limits).map_err(to_status)?;
        let page = self
            .service
            .list_unresolved(tenant, &query)
            .await
            .map_err(to_status)?;
        Ok(Response::new(unresolved_response(&page, query.limit)))
    }

    async fn list_operations(
        &self,
        request: Request<proto::ListOperationsRequest>,
    ) -> Result<Response<proto::ListOperationsResponse>, Status> {
        let (_, extensions, message) = request.into_parts();
        let principal = principal(&extensions)?;
        let query = list_operations_query(message, &self.limits, principal).map_err(to_status)?;
        let page = self
            .service
            .list_operations(&query)
            .await
            .map_err(to_status)?;
        let binding = page_token::listing_binding(&query);
        let show_tenants = principal.scopes.contains(Scope::Admin);
        Ok(Response::new(operations_response(
            &page,
            query.limit,
            binding,
            show_tenants,
        )))
    }
}

/// The served gRPC services: the API, health (no credentials: Kubernetes
/// probes send none) and reflection (so grpcurl works out of the box).
///
/// The API also speaks Connect's unary JSON ([`Connect`]), translated into
/// the same gRPC calls. It admits calls first ([`Admitted`]) and decodes no message longer
/// than the largest legal request ([`Limits::max_request_bytes`]).
pub fn routes(
    api: IdempotencyApi,
    authenticator: Authenticator,
    admission: AdmissionSettings,
    metrics: Metrics,
    health: tonic_health::pb::health_server::HealthServer<
        impl tonic_health::pb::health_server::Health,
    >,
) -> Result<Routes, tonic_reflection::server::Error> {
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    let max_request_bytes = api.limits.max_request_bytes();
    let admission_metrics = metrics.clone();
    let max_response_bytes = api.limits.max_response_bytes();
    let api = IdempotencyServiceServer::new(api)
        .max_decoding_message_size(max_request_bytes)
        .max_encoding_message_size(max_response_bytes);
    let observed = Observed::new(
        Admitted::new(
            api,
            admission,
            authenticator,
            admission_metrics,
            max_request_bytes,
        ),
        metrics,
    );
    Ok(Routes::new(Connect::new(
        observed,
        max_request_bytes,
        max_response_bytes,
    ))
    .add_service(health)
    .add_service(reflection().build_v1()?)
    .add_service(reflection().build_v1alpha()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeout_units_parse() {
        assert_eq!(parse_grpc_timeout("5S"), Some(Duration::from_secs(5)));
        assert_eq!(parse_grpc_timeout("250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse_grpc_timeout("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(parse_grpc_timeout("S"), None);
        assert_eq!(parse_grpc_timeout("5x"), None);
    }

    #[test]
    fn wait_keeps_a_margin_of_the_callers_deadline() {
        let mut metadata = MetadataMap::new();
        assert_eq!(
            wait_within_deadline(TimeDelta::seconds(3), &metadata),
            Duration::from_secs(3)
        );
        metadata.insert("grpc-timeout", "2S".parse().expect("valid header"));
        assert_eq!(
            wait_within_deadline(TimeDelta::seconds(3), &metadata),
            Duration::from_millis(1800)
        );
        metadata.insert("grpc-timeout", "50m".parse().expect("valid header"));
        assert_eq!(
            wait_within_deadline(TimeDelta::seconds(3), &metadata),
            Duration::ZERO
        );
    }
}
