//! Holds: the page that lists them, and an admin's Hold and Release, each
//! through the API's own handlers as the signed-in credential (which the
//! API audits, with the reason the form gave, exactly as for a gRPC caller).

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::http::header::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Extension, Form};
use serde::Deserialize;
use tonic::Code;
use tracing::info;

use crate::console::pages::holds::holds_page;
use crate::console::paths;
use crate::console::security::ExpectedOrigin;
use crate::proto::{self, HoldRequest, ListHoldsRequest, ReleaseRequest};

use super::{Shared, SignedIn, console_refusal, html, refused, sign_in, sign_in_to_write};

#[derive(Deserialize, Default)]
pub(in crate::console) struct HoldsQuery {
    #[serde(default)]
    done: String,
}

pub(in crate::console) async fn holds(
    State(console): Shared,
    headers: HeaderMap,
    Query(query): Query<HoldsQuery>,
) -> Response {
    let signed_in = match sign_in(&console, &headers).await {
        Ok(signed_in) => signed_in,
        Err(response) => return response,
    };
    let notice = match query.done.as_str() {
        "held" => Some("Held. Every replica sees it within about a second."),
        "already_held" => Some(
            "It was held already: the first hold stays as it was set (its reason and time), \
             and nothing was audited again.",
        ),
        "released" => {
            Some("Released. Held callers claim again within the retry_after they were told.")
        }
        _ => None,
    };
    match console
        .api
        .list_holds(&signed_in.principal, ListHoldsRequest::default())
        .await
    {
        Ok(listed) => html(
            StatusCode::OK,
            holds_page(&signed_in.viewer(), &listed.holds, notice),
        ),
        Err(refusal) => refused(&signed_in, "", "Holds", &refusal),
    }
}

#[derive(Deserialize)]
pub(in crate::console) struct HoldForm {
    csrf: Option<String>,
    #[serde(default)]
    tenant: String,
    /// `operation` (the name below) or `tenant` (the whole tenant): asked
    /// apart, so that a name left empty never holds a whole tenant.
    #[serde(default)]
    what: String,
    #[serde(default)]
    operation: String,
    #[serde(default)]
    retry_after_seconds: String,
    #[serde(default)]
    reason: String,
}

/// The operation name the form holds: `Some("")` for the whole tenant.
fn held_operation(form: &HoldForm) -> Result<String, &'static str> {
    match (form.what.as_str(), form.operation.trim()) {
        ("tenant", _) => Ok(String::new()),
        ("operation", "") => Err("Name the operation to hold, or choose the whole tenant."),
        ("operation", name) => Ok(name.to_owned()),
        _ => Err("Choose what to hold: an operation name or the whole tenant."),
    }
}

/// Empty: the API's default; otherwise whole seconds, which the API bounds.
fn retry_after(text: &str) -> Result<Option<pbjson_types::Duration>, &'static str> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    text.parse::<i64>()
        .map(|seconds| Some(pbjson_types::Duration { seconds, nanos: 0 }))
        .map_err(|_| "Retry after is a whole number of seconds.")
}

fn invalid(signed_in: &SignedIn, message: &str) -> Response {
    refused(
        signed_in,
        "",
        "Hold",
        &console_refusal(Code::InvalidArgument, "INVALID_REQUEST", message),
    )
}

pub(in crate::console) async fn hold(
    State(console): Shared,
    headers: HeaderMap,
    Extension(origin): Extension<ExpectedOrigin>,
    Form(form): Form<HoldForm>,
) -> Response {
    let signed_in = match sign_in_to_write(&console, &headers, &origin, form.csrf.as_deref()).await
    {
        Ok(signed_in) => signed_in,
        Err(response) => return response,
    };
    let operation = match held_operation(&form) {
        Ok(operation) => operation,
        Err(message) => return invalid(&signed_in, message),
    };
    let retry_after = match retry_after(&form.retry_after_seconds) {
        Ok(retry_after) => retry_after,
        Err(message) => return invalid(&signed_in, message),
    };
    // The reason, the names and the bounds are the API's to check (a
    // missing reason is INVALID_ARGUMENT, as for any caller).
    let request = HoldRequest {
        tenant: form.tenant.trim().to_owned(),
        operation,
        reason: form.reason,
        retry_after,
    };
    match console.api.hold(&signed_in.principal, request).await {
        Ok(held) => {
            let hold = held.hold.unwrap_or_default();
            info!(
                tenant = %hold.tenant,
                operation = %hold.operation,
                credential = %signed_in.principal.credential,
                already_held = held.already_held,
                "held from the console"
            );
            let done = if held.already_held {
                "already_held"
            } else {
                "held"
            };
            Redirect::to(&format!("/holds?{}", paths::query(&[("done", done)]))).into_response()
        }
        Err(refusal) => refused(&signed_in, "", "Hold", &refusal),
    }
}

#[derive(Deserialize)]
pub(in crate::console) struct ReleaseForm {
    csrf: Option<String>,
    #[serde(default)]
    tenant: String,
    #[serde(default)]
    operation: String,
    #[serde(default)]
    reason: String,
}

pub(in crate::console) async fn release(
    State(console): Shared,
    headers: HeaderMap,
    Extension(origin): Extension<ExpectedOrigin>,
    Form(form): Form<ReleaseForm>,
) -> Response {
    let signed_in = match sign_in_to_write(&console, &headers, &origin, form.csrf.as_deref()).await
    {
        Ok(signed_in) => signed_in,
        Err(response) => return response,
    };
    let request = ReleaseRequest {
        tenant: form.tenant,
        operation: form.operation,
        reason: form.reason,
    };
    match console.api.release(&signed_in.principal, request).await {
        Ok(proto::ReleaseResponse { released }) => {
            let released = released.unwrap_or_default();
            info!(
                tenant = %released.tenant,
                operation = %released.operation,
                credential = %signed_in.principal.credential,
                "released from the console"
            );
            Redirect::to("/holds?done=released").into_response()
        }
        Err(refusal) => refused(&signed_in, "", "Release", &refusal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(what: &str, operation: &str) -> HoldForm {
        HoldForm {
            csrf: None,
            tenant: String::new(),
            what: what.into(),
            operation: operation.into(),
            retry_after_seconds: String::new(),
            reason: String::new(),
        }
    }

    #[test]
    fn an_empty_name_never_holds_a_whole_tenant_by_accident() {
        assert_eq!(
            held_operation(&form("operation", " payments.charge ")),
            Ok("payments.charge".to_owned())
        );
        assert!(held_operation(&form("operation", "  ")).is_err());
        assert_eq!(
            held_operation(&form("tenant", "ignored")),
            Ok(String::new())
        );
        assert!(held_operation(&form("", "payments.charge")).is_err());
        assert_eq!(retry_after(""), Ok(None));
        assert_eq!(
            retry_after("45"),
            Ok(Some(pbjson_types::Duration {
                seconds: 45,
                nanos: 0
            }))
        );
        assert!(retry_after("1.5").is_err());
    }
}
