//! The console's routes: each signs the request in, calls the API through
//! [`Api`](super::calls::Api), and renders a page. Thin on purpose.

mod assets;
mod holding;
mod overview;
mod reading;
mod reconciling;
mod session;

pub(super) use assets::{not_found, script, stylesheet};
pub(super) use holding::{hold, holds, release};
pub(super) use overview::{conflicts, dashboard};
pub(super) use reading::{operation, operations, search, unresolved};
pub(super) use reconciling::{reconcile, reconcile_form};
pub(super) use session::{login, login_form, logout};

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use chrono::{DateTime, Utc};
use maud::Markup;
use serde::Deserialize;
use tonic::Code;

use super::Console;
use super::calls::Refusal;
use super::pages::{Viewer, error_page};
use super::security::{ExpectedOrigin, csrf_ok, same_origin, session_id};
use super::session::Session;
use crate::auth::{Principal, Scope};
use crate::proto::{self, LookupRequest, lookup_request::Target};

type Shared = State<Arc<Console>>;

/// This replica's clock, for what a page shows (ages, whether a deadline
/// looks passed). Nothing here decides by it: the server's handlers decide
/// with the database's clock, and a page says so where it matters.
#[expect(
    clippy::disallowed_methods,
    reason = "display only; every decision is the API's, by the database's clock"
)]
fn shown_now() -> DateTime<Utc> {
    Utc::now()
}

/// A page of a list.
const PAGE_SIZE: u32 = 50;
/// History entries an operation page shows.
const HISTORY_PAGE_SIZE: u32 = 1000;
/// Unresolved operations read for the dashboard's age bands.
const AGE_BAND_READ: u32 = 1000;

/// A request from a signed-in session whose credential may use the console.
struct SignedIn {
    session: Session,
    principal: Principal,
}

impl SignedIn {
    fn viewer(&self) -> Viewer {
        Viewer {
            credential: self.principal.credential.to_string(),
            tenant: self.principal.tenant.0.to_string(),
            scopes: self.principal.scopes.to_string(),
            admin: self.principal.scopes.contains(Scope::Admin),
            csrf: self.session.csrf.clone(),
        }
    }
}

/// The console needs one of these scopes; `operations` alone is a service's
/// credential, not a person's.
const CONSOLE_SCOPES: [Scope; 2] = [Scope::Reconcile, Scope::Admin];

fn may_use_console(principal: &Principal) -> bool {
    CONSOLE_SCOPES
        .iter()
        .any(|scope| principal.scopes.contains(*scope))
}

fn to_login() -> Response {
    Redirect::to("/login").into_response()
}

/// The session behind the request's cookie, its credential authenticated
/// again (a revoked or expired token ends the session).
async fn sign_in(console: &Console, headers: &HeaderMap) -> Result<SignedIn, Response> {
    let Some(id) = session_id(headers) else {
        return Err(to_login());
    };
    let Some(session) = console.sessions.get(id) else {
        return Err(to_login());
    };
    match console.api.principal(&session.token).await {
        Ok(principal) if may_use_console(&principal) => Ok(SignedIn { session, principal }),
        Ok(_) | Err(_) => {
            console.sessions.end(id);
            Err(to_login())
        }
    }
}

/// A write from one of the console's forms: the session signed in, the
/// request from the console's own origin, carrying the session's CSRF token.
/// Anything else is answered (the sign-in page, or "nothing was changed").
async fn sign_in_to_write(
    console: &Console,
    headers: &HeaderMap,
    origin: &ExpectedOrigin,
    csrf: Option<&str>,
) -> Result<SignedIn, Response> {
    let signed_in = sign_in(console, headers).await?;
    if !same_origin(headers, origin) || !csrf_ok(&signed_in.session.csrf, csrf) {
        return Err(forged(&signed_in));
    }
    Ok(signed_in)
}

fn html(status: StatusCode, markup: Markup) -> Response {
    (status, markup).into_response()
}

fn status_of(code: Code) -> StatusCode {
    match code {
        Code::InvalidArgument | Code::OutOfRange => StatusCode::BAD_REQUEST,
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        Code::FailedPrecondition | Code::Aborted | Code::AlreadyExists => StatusCode::CONFLICT,
        Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        Code::Unavailable | Code::DeadlineExceeded => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

fn refused(signed_in: &SignedIn, search: &str, title: &str, refusal: &Refusal) -> Response {
    html(
        status_of(refusal.code),
        error_page(&signed_in.viewer(), search, title, refusal),
    )
}

/// A refusal of the console's own (a forged form, a bad field), shaped as
/// the API's are.
fn console_refusal(code: Code, reason: &str, message: &str) -> Refusal {
    Refusal {
        code,
        reason: Some(reason.to_owned()),
        message: message.to_owned(),
    }
}

fn forged(signed_in: &SignedIn) -> Response {
    refused(
        signed_in,
        "",
        "Refused",
        &console_refusal(
            Code::PermissionDenied,
            "CSRF_TOKEN_INVALID",
            "This request did not come from a form of this session: nothing was changed.",
        ),
    )
}

/// Which tenant a page is about: empty, the viewer's own; a name, another
/// tenant's (an admin's view), which the API checks.
#[derive(Deserialize, Default)]
pub(in crate::console) struct TenantQuery {
    #[serde(default)]
    tenant: String,
}

/// `tenant` empty: the viewer's own; a name: another tenant's (an admin's
/// view), checked by the API as any caller's tenant name is.
async fn read_operation(
    console: &Console,
    principal: &Principal,
    id: &str,
    tenant: &str,
    history: bool,
) -> Result<proto::LookupResponse, Refusal> {
    let request = LookupRequest {
        target: Some(Target::OperationId(id.to_owned())),
        include_history: history,
        history_page_size: if history { HISTORY_PAGE_SIZE } else { 0 },
        history_page_token: String::new(),
        tenant: tenant.to_owned(),
    };
    console.api.lookup(principal, request).await
}
