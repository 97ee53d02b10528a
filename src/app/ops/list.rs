//! `idemd ops list` (ListOperations) and `idemd ops unresolved`
//! (ListUnresolved): one page, or every page with --all, in one shape.

use serde_json::json;

use super::connect::Server;
use super::failure::OpsFailure;
use super::render;
use crate::config::{OpsOrder, OutputFormat};
use crate::error::BoxError;
use crate::proto::list_operations_request::Order;
use crate::proto::{ListOperationsRequest, ListUnresolvedRequest, Operation};

/// Which pages to fetch.
pub(super) struct Pages {
    pub(super) page_size: Option<u32>,
    pub(super) page_token: String,
    pub(super) all: bool,
}

/// What was listed, and where the next page starts (empty: nothing follows).
struct Listed {
    operations: Vec<Operation>,
    next_page_token: String,
}

pub(super) async fn list_operations(
    server: &mut Server,
    filter: String,
    order: OpsOrder,
    pages: Pages,
    output: OutputFormat,
) -> Result<(), BoxError> {
    let order = match order {
        OpsOrder::Oldest => Order::OldestFirst,
        OpsOrder::Newest => Order::NewestFirst,
    };
    let listed = collect(pages, async |page_size, page_token| {
        let request = server.request(ListOperationsRequest {
            filter: filter.clone(),
            page_size,
            page_token,
            order: order.into(),
        });
        let page = server
            .client
            .list_operations(request)
            .await
            .map_err(|status| OpsFailure::from_status("ListOperations", &status))?
            .into_inner();
        Ok((page.operations, page.next_page_token))
    })
    .await?;
    print(&listed, output)
}

pub(super) async fn list_unresolved(
    server: &mut Server,
    operation: String,
    pages: Pages,
    output: OutputFormat,
) -> Result<(), BoxError> {
    let listed = collect(pages, async |page_size, page_token| {
        let request = server.request(ListUnresolvedRequest {
            operation: operation.clone(),
            page_size,
            page_token,
        });
        let page = server
            .client
            .list_unresolved(request)
            .await
            .map_err(|status| OpsFailure::from_status("ListUnresolved", &status))?
            .into_inner();
        Ok((page.operations, page.next_page_token))
    })
    .await?;
    print(&listed, output)
}

/// Calls `fetch(page_size, page_token)` once, or until the last page.
async fn collect(
    pages: Pages,
    mut fetch: impl AsyncFnMut(u32, String) -> Result<(Vec<Operation>, String), BoxError>,
) -> Result<Listed, BoxError> {
    // 0 is the server's default page size.
    let page_size = pages.page_size.unwrap_or(0);
    let mut operations = Vec::new();
    let mut page_token = pages.page_token;
    loop {
        let (page, next) = fetch(page_size, page_token.clone()).await?;
        operations.extend(page);
        if !pages.all || next.is_empty() {
            return Ok(Listed {
                operations,
                next_page_token: next,
            });
        }
        // A server that hands back the same token would loop forever.
        if next == page_token {
            return Err("the server returned the same page token twice".into());
        }
        page_token = next;
    }
}

fn print(listed: &Listed, output: OutputFormat) -> Result<(), BoxError> {
    match output {
        OutputFormat::Json => render::print_json(&json!({
            "operations": serde_json::to_value(&listed.operations)?,
            "next_page_token": listed.next_page_token,
        })),
        OutputFormat::Table => {
            print_table(&listed.operations);
            if !listed.next_page_token.is_empty() {
                println!();
                println!("next page: --page-token {}", listed.next_page_token);
            }
            Ok(())
        }
    }
}

fn print_table(operations: &[Operation]) {
    let (header, rows) = operations_table(operations);
    render::print_table(&header, rows);
}

/// The listing's columns and one row per operation (bulk reconcile prints
/// its sample in the same shape, with a column more).
pub(super) fn operations_table(operations: &[Operation]) -> (Vec<&'static str>, Vec<Vec<String>>) {
    // The server names the tenant only to an admin credential listing every
    // tenant: a column of blanks would only be noise.
    let with_tenant = operations
        .iter()
        .any(|operation| !operation.tenant.is_empty());
    #[allow(
        clippy::disallowed_methods,
        reason = "the AGE column is for the person reading it on this machine; nothing is decided by it"
    )]
    let now = chrono::Utc::now();
    let mut header = vec!["OPERATION_ID"];
    if with_tenant {
        header.push("TENANT");
    }
    header.extend(["OPERATION", "KEY", "STATE", "ATTEMPT", "AGE"]);
    let rows = operations
        .iter()
        .map(|operation| {
            let scope = operation.scope.clone().unwrap_or_default();
            let mut state = render::state_name(render::state(operation.state)).to_owned();
            if operation.lease_expired {
                state.push_str(" (lease expired)");
            }
            let mut row = vec![operation.operation_id.clone()];
            if with_tenant {
                row.push(operation.tenant.clone());
            }
            row.extend([
                scope.operation,
                scope.key,
                state,
                format!("{}/{}", operation.attempt, operation.max_attempts),
                render::age(operation.created_at.as_ref(), now),
            ]);
            row
        })
        .collect();
    (header, rows)
}
