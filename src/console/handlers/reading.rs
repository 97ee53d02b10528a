//! What support staff read: the search box, a filter's operations, one
//! operation, the unresolved queue.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::http::header::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use serde::{Deserialize, Serialize};

use crate::auth::Scope;
use crate::console::calls::Refusal;
use crate::console::pages::diagnosis::{self, EvidenceQuery};
use crate::console::pages::holds::operation_holds;
use crate::console::pages::lists::{NextPage, operations_page, unresolved_page};
use crate::console::pages::operation::{Panels, operation_page};
use crate::console::paths;
use crate::console::search::{Search, classify};
use crate::domain::OperationId;
use crate::domain::filter::OperationFilter;
use crate::proto::{
    self, ListHoldsRequest, ListOperationsRequest, ListUnresolvedRequest, LookupRequest,
    list_operations_request::Order, lookup_request::Target,
};

use super::{PAGE_SIZE, Shared, SignedIn, html, read_operation, refused, shown_now, sign_in};

#[derive(Deserialize)]
pub(in crate::console) struct SearchQuery {
    #[serde(default)]
    q: String,
}

pub(in crate::console) async fn search(
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
pub(in crate::console) struct ListQuery {
    #[serde(default)]
    filter: String,
    #[serde(default)]
    order: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    page_token: String,
}

pub(in crate::console) async fn operations(
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
pub(in crate::console) struct OperationQuery {
    #[serde(default)]
    done: String,
    #[serde(default)]
    tenant: String,
    #[serde(flatten)]
    evidence: EvidenceQuery,
}

pub(in crate::console) async fn operation(
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
            let operation = found.operation.unwrap_or_default();
            let name = operation
                .scope
                .as_ref()
                .map_or("", |scope| scope.operation.as_str());
            let holds = tenant_holds(&console, &signed_in, &id, &query.tenant).await;
            let held = operation_holds(
                holds.as_deref().map_err(|refusal| refusal.message.as_str()),
                name,
            );
            let answer = console
                .api
                .diagnose(
                    &signed_in.principal,
                    query.evidence.request(&id, &query.tenant),
                )
                .await;
            let diagnosis = diagnosis::section(&answer, &query.evidence, &id, &query.tenant);
            let done = match query.done.as_str() {
                "reconciled" => {
                    Some("Reconciled. This is the operation as the server holds it now.")
                }
                _ => None,
            };
            let notices = maud::html! {
                @if let Some(done) = done { p.notice role="status" { (done) } }
                (held)
            };
            html(
                StatusCode::OK,
                operation_page(
                    &signed_in.viewer(),
                    &query.tenant,
                    &operation,
                    &found.history,
                    !found.next_history_page_token.is_empty(),
                    shown_now(),
                    Panels { notices, diagnosis },
                ),
            )
        }
        Err(refusal) => refused(&signed_in, &id, "Operation", &refusal),
    }
}

/// The holds in force in the tenant of operation `id`, through ListHolds
/// and its scoping: `tenant` named (an admin's view of another tenant), that
/// tenant's; not named, the viewer's own, which ListHolds lists alone for a
/// reconciler. An admin's unnamed ListHolds lists every tenant's, and a
/// credential knows its tenant by id only: ListOperations (whose rows name
/// their tenant for an admin) says which tenant the operation is in.
async fn tenant_holds(
    console: &crate::console::Console,
    signed_in: &SignedIn,
    id: &str,
    tenant: &str,
) -> Result<Vec<proto::Hold>, Refusal> {
    let principal = &signed_in.principal;
    let tenant = if !tenant.is_empty() || !principal.scopes.contains(Scope::Admin) {
        tenant.to_owned()
    } else {
        let Ok(uuid) = uuid::Uuid::try_parse(id) else {
            return Ok(Vec::new());
        };
        let by_id = OperationFilter {
            id: Some(OperationId(uuid)),
            ..OperationFilter::default()
        };
        let request = ListOperationsRequest {
            filter: by_id.to_string(),
            page_size: 1,
            ..ListOperationsRequest::default()
        };
        let listed = console.api.list_operations(principal, request).await?;
        match listed.operations.into_iter().next() {
            Some(operation) => operation.tenant,
            None => return Ok(Vec::new()),
        }
    };
    let request = ListHoldsRequest { tenant };
    Ok(console.api.list_holds(principal, request).await?.holds)
}

#[derive(Deserialize, Serialize)]
pub(in crate::console) struct PageQuery {
    #[serde(default)]
    page_token: String,
}

pub(in crate::console) async fn unresolved(
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
