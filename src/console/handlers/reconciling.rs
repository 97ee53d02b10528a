//! Reconciling one operation: the choice, the confirmation, the write.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::http::header::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Extension, Form};
use serde::Deserialize;
use tonic::Code;
use tracing::info;

use crate::console::pages::reconcile::{Choice, choose_page, review_page};
use crate::console::security::ExpectedOrigin;
use crate::console::{Console, paths};
use crate::proto::{self, ReconcileRequest, reconcile_request::Resolution};

use super::{
    Shared, SignedIn, TenantQuery, console_refusal, html, read_operation, refused, shown_now,
    sign_in, sign_in_to_write,
};

pub(in crate::console) async fn reconcile_form(
    State(console): Shared,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(query): Query<TenantQuery>,
) -> Response {
    let signed_in = match sign_in(&console, &headers).await {
        Ok(signed_in) => signed_in,
        Err(response) => return response,
    };
    match read_operation(&console, &signed_in.principal, &id, &query.tenant, false).await {
        Ok(found) => html(
            StatusCode::OK,
            choose_page(
                &signed_in.viewer(),
                &query.tenant,
                &found.operation.unwrap_or_default(),
                shown_now(),
            ),
        ),
        Err(refusal) => refused(&signed_in, &id, "Reconcile", &refusal),
    }
}

#[derive(Deserialize)]
pub(in crate::console) struct ReconcileForm {
    csrf: Option<String>,
    expected_fence: u64,
    step: String,
    resolution: String,
    #[serde(default)]
    content_type: String,
    #[serde(default)]
    body: String,
    #[serde(default)]
    code: String,
    #[serde(default)]
    message: String,
}

impl ReconcileForm {
    fn choice(&self) -> Option<Choice> {
        match self.resolution.as_str() {
            "succeeded" => Some(Choice::Succeeded {
                content_type: self.content_type.clone(),
                body: self.body.clone(),
            }),
            "failed" => Some(Choice::Failed {
                code: self.code.clone(),
                message: self.message.clone(),
            }),
            "not_applied" => Some(Choice::NotApplied),
            _ => None,
        }
    }
}

fn resolution(choice: Choice) -> Resolution {
    match choice {
        Choice::Succeeded { content_type, body } => Resolution::Succeeded(proto::Result {
            content_type,
            body: body.into_bytes(),
            ..Default::default()
        }),
        Choice::Failed { code, message } => Resolution::Failed(proto::OperationError {
            code,
            message,
            ..Default::default()
        }),
        Choice::NotApplied => Resolution::NotApplied(proto::NotApplied {}),
    }
}

pub(in crate::console) async fn reconcile(
    State(console): Shared,
    headers: HeaderMap,
    Extension(origin): Extension<ExpectedOrigin>,
    Path(id): Path<String>,
    Query(query): Query<TenantQuery>,
    Form(form): Form<ReconcileForm>,
) -> Response {
    let signed_in = match sign_in_to_write(&console, &headers, &origin, form.csrf.as_deref()).await
    {
        Ok(signed_in) => signed_in,
        Err(response) => return response,
    };
    let Some(choice) = form.choice() else {
        let refusal = console_refusal(
            Code::InvalidArgument,
            "RESOLUTION_UNKNOWN",
            "resolution must be succeeded, failed or not_applied",
        );
        return refused(&signed_in, &id, "Reconcile", &refusal);
    };
    let tenant = query.tenant;
    if form.step == "apply" {
        // The write carries the fence the operator saw: the API refuses it
        // (ABORTED, LEASE_LOST) if the operation moved since, as for any caller.
        return apply(&console, &signed_in, &id, &tenant, &form, choice).await;
    }
    let operation = match read_operation(&console, &signed_in.principal, &id, &tenant, false).await
    {
        Ok(found) => found.operation.unwrap_or_default(),
        Err(refusal) => return refused(&signed_in, &id, "Reconcile", &refusal),
    };
    if operation.fence != form.expected_fence {
        // The confirmation shows the operation as it is now: it must be
        // what the operator chose from.
        let refusal = console_refusal(
            Code::Aborted,
            "OPERATION_CHANGED",
            &format!(
                "The operation changed since you read it (fence {} is now {}): nothing was done. \
                 Read it again before reconciling.",
                form.expected_fence, operation.fence
            ),
        );
        return refused(&signed_in, &id, "Reconcile", &refusal);
    }
    html(
        StatusCode::OK,
        review_page(&signed_in.viewer(), &tenant, &operation, &choice),
    )
}

async fn apply(
    console: &Console,
    signed_in: &SignedIn,
    id: &str,
    tenant: &str,
    form: &ReconcileForm,
    choice: Choice,
) -> Response {
    let request = ReconcileRequest {
        operation_id: id.to_owned(),
        expected_fence: form.expected_fence,
        resolution: Some(resolution(choice)),
        tenant: tenant.to_owned(),
    };
    match console.api.reconcile(&signed_in.principal, request).await {
        Ok(_) => {
            info!(
                operation_id = %id,
                credential = %signed_in.principal.credential,
                resolution = %form.resolution,
                "reconciled from the console"
            );
            Redirect::to(&paths::operation_after(id, tenant, "reconciled")).into_response()
        }
        Err(refusal) => refused(signed_in, id, "Reconcile", &refusal),
    }
}
