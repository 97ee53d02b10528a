//! The console reads and writes through the API's own handlers, in
//! process, as the signed-in credential: the same scope rules (admission's
//! `scopes_for`), the same request validation, the same answers and errors
//! as a gRPC caller gets. It holds no SQL and decides nothing itself.

use tonic::{Code, Request, Status};
use tonic_types::StatusExt;

use crate::auth::{Authenticator, Principal};
use crate::grpc::admission::scopes_for;
use crate::grpc::observe::ApiMethod;
use crate::grpc::server::IdempotencyApi;
use crate::grpc::status::to_status;
use crate::proto;
use crate::proto::idempotency_service_server::IdempotencyService as Rpcs;

/// Why a call was refused, as a page shows it: the gRPC code, the ErrorInfo
/// reason and the message.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub code: Code,
    pub reason: Option<String>,
    pub message: String,
}

impl From<Status> for Refusal {
    fn from(status: Status) -> Self {
        let reason = status
            .get_error_details()
            .error_info()
            .map(|info| info.reason.clone());
        Self {
            code: status.code(),
            reason,
            message: status.message().to_owned(),
        }
    }
}

impl From<crate::domain::Error> for Refusal {
    fn from(error: crate::domain::Error) -> Self {
        to_status(error).into()
    }
}

#[derive(Clone)]
pub struct Api {
    api: IdempotencyApi,
    authenticator: Authenticator,
}

impl Api {
    pub fn new(api: IdempotencyApi, authenticator: Authenticator) -> Self {
        Self { api, authenticator }
    }

    /// Who `token` is, as the API's authenticator says (its caches, its
    /// revocations and expiries).
    pub async fn principal(&self, token: &str) -> Result<Principal, Refusal> {
        let authorization = format!("Bearer {token}");
        Ok(self.authenticator.principal(Some(&authorization)).await?)
    }

    /// A request as admission would hand it to the handler: the principal in
    /// its extensions, once the method's scopes admit it.
    fn admitted<M>(
        principal: &Principal,
        method: ApiMethod,
        message: M,
    ) -> Result<Request<M>, Refusal> {
        principal.require_any(scopes_for(method))?;
        let mut request = Request::new(message);
        request.extensions_mut().insert(principal.clone());
        Ok(request)
    }

    pub async fn lookup(
        &self,
        principal: &Principal,
        message: proto::LookupRequest,
    ) -> Result<proto::LookupResponse, Refusal> {
        let request = Self::admitted(principal, ApiMethod::Lookup, message)?;
        Ok(Rpcs::lookup(&self.api, request).await?.into_inner())
    }

    /// Diagnose, as the signed-in credential: its scopes bound the plan.
    pub async fn diagnose(
        &self,
        principal: &Principal,
        message: proto::DiagnoseRequest,
    ) -> Result<proto::DiagnoseResponse, Refusal> {
        let request = Self::admitted(principal, ApiMethod::Diagnose, message)?;
        Ok(Rpcs::diagnose(&self.api, request).await?.into_inner())
    }

    pub async fn list_operations(
        &self,
        principal: &Principal,
        message: proto::ListOperationsRequest,
    ) -> Result<proto::ListOperationsResponse, Refusal> {
        let request = Self::admitted(principal, ApiMethod::ListOperations, message)?;
        Ok(Rpcs::list_operations(&self.api, request)
            .await?
            .into_inner())
    }

    pub async fn list_unresolved(
        &self,
        principal: &Principal,
        message: proto::ListUnresolvedRequest,
    ) -> Result<proto::ListUnresolvedResponse, Refusal> {
        let request = Self::admitted(principal, ApiMethod::ListUnresolved, message)?;
        Ok(Rpcs::list_unresolved(&self.api, request)
            .await?
            .into_inner())
    }

    pub async fn reconcile(
        &self,
        principal: &Principal,
        message: proto::ReconcileRequest,
    ) -> Result<proto::ReconcileResponse, Refusal> {
        let request = Self::admitted(principal, ApiMethod::Reconcile, message)?;
        Ok(Rpcs::reconcile(&self.api, request).await?.into_inner())
    }

    pub async fn list_holds(
        &self,
        principal: &Principal,
        message: proto::ListHoldsRequest,
    ) -> Result<proto::ListHoldsResponse, Refusal> {
        let request = Self::admitted(principal, ApiMethod::ListHolds, message)?;
        Ok(Rpcs::list_holds(&self.api, request).await?.into_inner())
    }

    pub async fn hold(
        &self,
        principal: &Principal,
        message: proto::HoldRequest,
    ) -> Result<proto::HoldResponse, Refusal> {
        let request = Self::admitted(principal, ApiMethod::Hold, message)?;
        Ok(Rpcs::hold(&self.api, request).await?.into_inner())
    }

    pub async fn release(
        &self,
        principal: &Principal,
        message: proto::ReleaseRequest,
    ) -> Result<proto::ReleaseResponse, Refusal> {
        let request = Self::admitted(principal, ApiMethod::Release, message)?;
        Ok(Rpcs::release(&self.api, request).await?.into_inner())
    }
}
