//! Signing in and out: a token becomes a session, a session ends.

use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Extension, Form};
use maud::Markup;
use serde::Deserialize;
use tracing::info;

use crate::console::pages::login_page;
use crate::console::security::{
    ExpectedOrigin, cleared_cookie, csrf_ok, same_origin, session_cookie, session_id,
};
use crate::console::session::ABSOLUTE_TIMEOUT;

use super::{Shared, forged, html, may_use_console, sign_in, to_login};

pub(in crate::console) async fn login_form() -> Markup {
    login_page(None)
}

#[derive(Deserialize)]
pub(in crate::console) struct LoginForm {
    token: String,
}

pub(in crate::console) async fn login(
    State(console): Shared,
    headers: HeaderMap,
    Extension(origin): Extension<ExpectedOrigin>,
    Form(form): Form<LoginForm>,
) -> Response {
    if !same_origin(&headers, &origin) {
        return html(
            StatusCode::FORBIDDEN,
            login_page(Some(
                "Refused: the sign-in did not come from this console's page.",
            )),
        );
    }
    let token = form.token.trim().to_owned();
    let principal = match console.api.principal(&token).await {
        Ok(principal) => principal,
        Err(refusal) => {
            let problem = format!("This token was refused ({:?}).", refusal.code);
            return html(StatusCode::UNAUTHORIZED, login_page(Some(&problem)));
        }
    };
    if !may_use_console(&principal) {
        return html(
            StatusCode::FORBIDDEN,
            login_page(Some(
                "This credential holds neither the reconcile nor the admin scope: the console is \
                 for support staff, not for a service's own credential.",
            )),
        );
    }
    let Ok((id, _)) = console.sessions.start(token) else {
        return html(
            StatusCode::SERVICE_UNAVAILABLE,
            login_page(Some("No randomness for a session: try again.")),
        );
    };
    info!(credential = %principal.credential, tenant = principal.tenant.0, "console sign-in");
    let mut response = Redirect::to("/").into_response();
    set_cookie(
        &mut response,
        &session_cookie(&id, ABSOLUTE_TIMEOUT.as_secs()),
    );
    response
}

fn set_cookie(response: &mut Response, cookie: &str) {
    if let Ok(value) = HeaderValue::from_str(cookie) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
}

#[derive(Deserialize)]
pub(in crate::console) struct CsrfForm {
    csrf: Option<String>,
}

pub(in crate::console) async fn logout(
    State(console): Shared,
    headers: HeaderMap,
    Extension(origin): Extension<ExpectedOrigin>,
    Form(form): Form<CsrfForm>,
) -> Response {
    let signed_in = match sign_in(&console, &headers).await {
        Ok(signed_in) => signed_in,
        Err(response) => return response,
    };
    if !same_origin(&headers, &origin) || !csrf_ok(&signed_in.session.csrf, form.csrf.as_deref()) {
        return forged(&signed_in);
    }
    if let Some(id) = session_id(&headers) {
        console.sessions.end(id);
    }
    let mut response = to_login();
    set_cookie(&mut response, &cleared_cookie());
    response
}
