//! What support staff read: the search box, a filter's operations, one
//! operation, the unresolved queue.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::http::header::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use serde::{Deserialize, Serialize};

use crate::console::pages::diagnosis::{self, EvidenceQuery};
use crate::console::pages::lists::{NextPage, operations_page, unresolved_page};
use crate::console::pages::operation::operation_page;
use crate::console::paths;
use crate::console::search::{Search, classify};
use crate::proto::{
    self, ListOperationsRequest, ListUnresolvedRequest, LookupRequest,
    list_operations_request::Order, lookup_request::Target,
};

use super::{PAGE_SIZE, Shared, html, read_operation, refused, shown_now, sign_in};

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
            let answer = console
                .api
                .diagnose(
                    &signed_in.principal,
                    query.evidence.request(&id, &query.tenant),
                )
                .await;
            let diagnosis = diagnosis::section(&answer, &query.evidence, &id, &query.tenant);
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
                    diagnosis,
                ),
            )
        }
        Err(refusal) => refused(&signed_in, &id, "Operation", &refusal),
    }
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
