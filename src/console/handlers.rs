//! The console's routes: each signs the request in, calls the API through
//! [`Api`](super::calls::Api), and renders a page. Thin on purpose.

use std::sync::Arc;

use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::{DateTime, Utc};
use maud::Markup;
use serde::{Deserialize, Serialize};
use tonic::Code;
use tracing::info;

use super::calls::Refusal;
use super::counters::{Whose, sum_by, total};
use super::pages::dashboard::{AgeBand, Counter, Dashboard, dashboard_page};
use super::pages::lists::{
    ConflictRow, NextPage, conflicts_page, operations_page, unresolved_page,
};
use super::pages::operation::operation_page;
use super::pages::reconcile::{Choice, choose_page, review_page};
use super::pages::{Viewer, error_page, login_page};
use super::search::{Search, classify};
use super::security::{cleared_cookie, csrf_ok, same_origin, session_cookie, session_id};
use super::session::{ABSOLUTE_TIMEOUT, Session};
use super::{Console, paths};
use crate::auth::{Principal, Scope};
use crate::proto::{
    self, ListOperationsRequest, ListUnresolvedRequest, LookupRequest, ReconcileRequest,
    list_operations_request::Order, lookup_request::Target, reconcile_request::Resolution,
};
use crate::support::format;

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

pub(super) async fn login_form() -> Markup {
    login_page(None)
}

#[derive(Deserialize)]
pub(super) struct LoginForm {
    token: String,
}

pub(super) async fn login(
    State(console): Shared,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    if !same_origin(&headers) {
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
pub(super) struct CsrfForm {
    csrf: Option<String>,
}

pub(super) async fn logout(
    State(console): Shared,
    headers: HeaderMap,
    Form(form): Form<CsrfForm>,
) -> Response {
    let signed_in = match sign_in(&console, &headers).await {
        Ok(signed_in) => signed_in,
        Err(response) => return response,
    };
    if !same_origin(&headers) || !csrf_ok(&signed_in.session.csrf, form.csrf.as_deref()) {
        return forged(&signed_in);
    }
    if let Some(id) = session_id(&headers) {
        console.sessions.end(id);
    }
    let mut response = to_login();
    set_cookie(&mut response, &cleared_cookie());
    response
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

#[derive(Deserialize)]
pub(super) struct SearchQuery {
    #[serde(default)]
    q: String,
}

pub(super) async fn search(
    State(console): Shared,
    headers: HeaderMap,
    Query(query): Query<SearchQuery>,
) -> Response {
    let signed_in = match sign_in(&console, &headers).await {
        Ok(signed_in) => signed_in,
        Err(response) => return response,
    };
    match classify(&query.q) {
        Search::Nothing => Redirect::to("/").into_response(),
        Search::OperationId(id) => Redirect::to(&paths::operation(&id, "")).into_response(),
        Search::Filter(filter) => Redirect::to(&paths::filtered(&filter)).into_response(),
        Search::Scope { operation, key } => {
            let request = LookupRequest {
                target: Some(Target::Scope(proto::Scope { operation, key })),
                ..LookupRequest::default()
            };
            match console.api.lookup(&signed_in.principal, request).await {
                Ok(found) => {
                    let id = found.operation.unwrap_or_default().operation_id;
                    Redirect::to(&paths::operation(&id, "")).into_response()
                }
                Err(refusal) => refused(&signed_in, &query.q, "Not found", &refusal),
            }
        }
    }
}

#[derive(Deserialize, Serialize, Default)]
pub(super) struct ListQuery {
    #[serde(default)]
    filter: String,
    #[serde(default)]
    order: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    page_token: String,
}

pub(super) async fn operations(
    State(console): Shared,
    headers: HeaderMap,
    Query(query): Query<ListQuery>,
) -> Response {
    let signed_in = match sign_in(&console, &headers).await {
        Ok(signed_in) => signed_in,
        Err(response) => return response,
    };
    let order = if query.order == "oldest" {
        Order::OldestFirst
    } else {
        Order::NewestFirst
    };
    let request = ListOperationsRequest {
        filter: query.filter.clone(),
        page_size: PAGE_SIZE,
        page_token: query.page_token.clone(),
        order: order.into(),
    };
    match console
        .api
        .list_operations(&signed_in.principal, request)
        .await
    {
        Ok(page) => {
            let next = (!page.next_page_token.is_empty()).then(|| {
                let next = ListQuery {
                    page_token: page.next_page_token.clone(),
                    ..query
                };
                format!("/operations?{}", paths::encoded(&next))
            });
            html(
                StatusCode::OK,
                operations_page(
                    &signed_in.viewer(),
                    &next_filter_text(&next),
                    &page.operations,
                    &NextPage(next),
                    shown_now(),
                ),
            )
        }
        Err(refusal) => refused(&signed_in, &query.filter, "Operations", &refusal),
    }
}

/// The filter box keeps what was typed; a next-page link carries it too.
fn next_filter_text(next: &Option<String>) -> String {
    next.as_deref()
        .and_then(|link| link.split_once('?'))
        .and_then(|(_, query)| serde_urlencoded::from_str::<ListQuery>(query).ok())
        .map(|query| query.filter)
        .unwrap_or_default()
}

#[derive(Deserialize, Default)]
pub(super) struct OperationQuery {
    #[serde(default)]
    done: String,
    #[serde(default)]
    tenant: String,
}

#[derive(Deserialize, Default)]
pub(super) struct TenantQuery {
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

pub(super) async fn operation(
    State(console): Shared,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(query): Query<OperationQuery>,
) -> Response {
    let signed_in = match sign_in(&console, &headers).await {
        Ok(signed_in) => signed_in,
        Err(response) => return response,
    };
    match read_operation(&console, &signed_in.principal, &id, &query.tenant, true).await {
        Ok(found) => {
            let notice = match query.done.as_str() {
                "reconciled" => {
                    Some("Reconciled. This is the operation as the server holds it now.")
                }
                _ => None,
            };
            html(
                StatusCode::OK,
                operation_page(
                    &signed_in.viewer(),
                    &query.tenant,
                    &found.operation.unwrap_or_default(),
                    &found.history,
                    !found.next_history_page_token.is_empty(),
                    shown_now(),
                    notice,
                ),
            )
        }
        Err(refusal) => refused(&signed_in, &id, "Operation", &refusal),
    }
}

#[derive(Deserialize, Serialize)]
pub(super) struct PageQuery {
    #[serde(default)]
    page_token: String,
}

pub(super) async fn unresolved(
    State(console): Shared,
    headers: HeaderMap,
    Query(query): Query<PageQuery>,
) -> Response {
    let signed_in = match sign_in(&console, &headers).await {
        Ok(signed_in) => signed_in,
        Err(response) => return response,
    };
    let request = ListUnresolvedRequest {
        operation: String::new(),
        page_size: PAGE_SIZE,
        page_token: query.page_token,
    };
    match console
        .api
        .list_unresolved(&signed_in.principal, request)
        .await
    {
        Ok(page) => {
            let next = (!page.next_page_token.is_empty()).then(|| {
                let next = PageQuery {
                    page_token: page.next_page_token.clone(),
                };
                format!("/unresolved?{}", paths::encoded(&next))
            });
            html(
                StatusCode::OK,
                unresolved_page(
                    &signed_in.viewer(),
                    &page.operations,
                    &NextPage(next),
                    shown_now(),
                ),
            )
        }
        Err(refusal) => refused(&signed_in, "", "Unresolved", &refusal),
    }
}

pub(super) async fn reconcile_form(
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
pub(super) struct ReconcileForm {
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

pub(super) async fn reconcile(
    State(console): Shared,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(query): Query<TenantQuery>,
    Form(form): Form<ReconcileForm>,
) -> Response {
    let signed_in = match sign_in(&console, &headers).await {
        Ok(signed_in) => signed_in,
        Err(response) => return response,
    };
    if !same_origin(&headers) || !csrf_ok(&signed_in.session.csrf, form.csrf.as_deref()) {
        return forged(&signed_in);
    }
    let Some(choice) = form.choice() else {
        let refusal = console_refusal(
            Code::InvalidArgument,
            "RESOLUTION_UNKNOWN",
            "resolution must be succeeded, failed or not_applied",
        );
        return refused(&signed_in, &id, "Reconcile", &refusal);
    };
    let tenant = query.tenant;
    let operation = match read_operation(&console, &signed_in.principal, &id, &tenant, false).await
    {
        Ok(found) => found.operation.unwrap_or_default(),
        Err(refusal) => return refused(&signed_in, &id, "Reconcile", &refusal),
    };
    if operation.fence != form.expected_fence {
        // Never act on what the operator did not see: show it as it is now.
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
    if form.step != "apply" {
        return html(
            StatusCode::OK,
            review_page(&signed_in.viewer(), &tenant, &operation, &choice),
        );
    }
    let request = ReconcileRequest {
        operation_id: id.clone(),
        expected_fence: form.expected_fence,
        resolution: Some(resolution(choice)),
        tenant: tenant.clone(),
    };
    match console.api.reconcile(&signed_in.principal, request).await {
        Ok(_) => {
            info!(
                operation_id = %id,
                credential = %signed_in.principal.credential,
                resolution = %form.resolution,
                "reconciled from the console"
            );
            Redirect::to(&paths::operation_after(&id, &tenant, "reconciled")).into_response()
        }
        Err(refusal) => refused(&signed_in, &id, "Reconcile", &refusal),
    }
}

/// Whose counters a viewer may see: an admin every tenant's; anyone else
/// only its own tenant's, which needs the tenant label on the metrics.
fn whose_counters<'a>(signed_in: &SignedIn, own: &'a str, labelled: bool) -> Option<Whose<'a>> {
    if signed_in.principal.scopes.contains(Scope::Admin) {
        Some(Whose::Everyone)
    } else if labelled {
        Some(Whose::Tenant(own))
    } else {
        None
    }
}

pub(super) async fn dashboard(State(console): Shared, headers: HeaderMap) -> Response {
    let signed_in = match sign_in(&console, &headers).await {
        Ok(signed_in) => signed_in,
        Err(response) => return response,
    };
    let own = signed_in.principal.tenant.0.to_string();
    let whose = whose_counters(&signed_in, &own, console.metrics.labels_tenants());
    let text = console.metrics.render();
    let counters = whose.map_or_else(Vec::new, |whose| counters(&text, whose));
    let counters_scope = match whose {
        Some(Whose::Everyone) => "Every tenant, on this replica, since it started.".to_owned(),
        Some(Whose::Tenant(_)) => format!("Tenant {own}, on this replica, since it started."),
        None => String::new(),
    };
    let request = ListUnresolvedRequest {
        operation: String::new(),
        page_size: AGE_BAND_READ,
        page_token: String::new(),
    };
    let page = match console
        .api
        .list_unresolved(&signed_in.principal, request)
        .await
    {
        Ok(page) => page,
        Err(refusal) => return refused(&signed_in, "", "Dashboard", &refusal),
    };
    let dashboard = Dashboard {
        counters,
        counters_scope,
        unresolved: age_bands(&page.operations),
        unresolved_truncated: !page.next_page_token.is_empty(),
    };
    html(
        StatusCode::OK,
        dashboard_page(&signed_in.viewer(), &dashboard),
    )
}

fn counters(text: &str, whose: Whose<'_>) -> Vec<Counter> {
    let claims = sum_by(text, "idemd_claims_total", "outcome", &[], whose);
    let claim = |outcome: &str| claims.get(outcome).copied().unwrap_or(0.0);
    vec![
        Counter {
            name: "new",
            value: claim("acquired"),
            meaning: "Claims that started an operation",
        },
        Counter {
            name: "replayed",
            value: claim("replayed"),
            meaning: "Claims answered with the stored outcome",
        },
        Counter {
            name: "conflicts",
            value: claim("conflict"),
            meaning: "Claims refused: the key with another payload",
        },
        Counter {
            name: "takeovers",
            value: claim("reconcile_first"),
            meaning: "Claims that took over an expired lease (ReconcileFirst)",
        },
        Counter {
            name: "pending",
            value: claim("pending"),
            meaning: "Claims told to wait: another attempt holds the lease",
        },
        Counter {
            name: "needs reconciliation",
            value: claim("needs_reconciliation"),
            meaning: "Claims refused until someone reconciles",
        },
        Counter {
            name: "stale writes refused",
            value: total(text, "idemd_stale_writes_refused_total", &[], whose),
            meaning: "Writes with a superseded fence",
        },
        Counter {
            name: "reconciliations",
            value: total(text, "idemd_reconciliations_total", &[], whose),
            meaning: "Operations settled from outside evidence",
        },
    ]
}

fn age_bands(operations: &[proto::Operation]) -> Vec<AgeBand> {
    const BANDS: [(&str, i64); 4] = [
        ("under 5 minutes", 300),
        ("5 minutes to 1 hour", 3600),
        ("1 hour to 1 day", 86_400),
        ("over 1 day", i64::MAX),
    ];
    let now = shown_now();
    let mut counts = [0usize; BANDS.len()];
    for operation in operations {
        let age = format::timestamp(operation.created_at.as_ref())
            .map_or(0, |created| (now - created).num_seconds());
        if let Some(band) = BANDS.iter().position(|(_, below)| age < *below) {
            counts[band] += 1;
        }
    }
    BANDS
        .iter()
        .zip(counts)
        .map(|((label, _), count)| AgeBand { label, count })
        .collect()
}

pub(super) async fn conflicts(State(console): Shared, headers: HeaderMap) -> Response {
    let signed_in = match sign_in(&console, &headers).await {
        Ok(signed_in) => signed_in,
        Err(response) => return response,
    };
    let own = signed_in.principal.tenant.0.to_string();
    let whose = whose_counters(&signed_in, &own, console.metrics.labels_tenants());
    let (rows, note) = match whose {
        Some(whose) => {
            let now = super::conflicts::sample(&console.metrics.render());
            let rows = console
                .conflicts
                .series(&now, whose)
                .into_iter()
                .map(|series| ConflictRow {
                    operation: series.operation,
                    per_minute: series.per_minute,
                    last_hour: series.last_hour,
                    since_start: series.since_start,
                })
                .collect();
            let whom = match whose {
                Whose::Everyone => "every tenant".to_owned(),
                Whose::Tenant(tenant) => format!("tenant {tenant}"),
            };
            (
                rows,
                format!(
                    "Counted by this replica for {whom}, by operation name as metrics label it \
                 (names off the --metrics-operations allow-list count as `other`)."
                ),
            )
        }
        None => (
            Vec::new(),
            "Not shown: this replica's metrics do not carry the tenant label, \
                 so they count every tenant; only an admin sees them."
                .to_owned(),
        ),
    };
    html(
        StatusCode::OK,
        conflicts_page(&signed_in.viewer(), &rows, &note),
    )
}

pub(super) async fn stylesheet() -> Response {
    asset(
        "text/css; charset=utf-8",
        include_str!("assets/console.css"),
    )
}

pub(super) async fn script() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("assets/console.js"),
    )
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "max-age=300"),
        ],
        body,
    )
        .into_response()
}

pub(super) async fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "not found").into_response()
}
