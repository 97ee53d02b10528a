//! `idemd ops lookup`: one operation, what it means for a retry, and its
//! whole history (every page).

use serde_json::{Value, json};

use super::connect::Server;
use super::failure::OpsFailure;
use super::render;
use crate::config::OutputFormat;
use crate::error::BoxError;
use crate::proto::{self, HistoryEntry, LookupRequest, Operation, lookup_request::Target};
use crate::support::format;
use crate::support::verdict::{Facts, verdict};

/// The most history entries a page may hold; fewer round trips.
const HISTORY_PAGE_SIZE: u32 = 1000;

pub(super) fn target(
    operation_id: Option<String>,
    operation: Option<String>,
    key: Option<String>,
) -> Result<Target, OpsFailure> {
    // clap already requires one form or the other; this is the same rule
    // stated once more for the types.
    match (operation_id, operation, key) {
        (Some(operation_id), None, None) => Ok(Target::OperationId(operation_id)),
        (None, Some(operation), Some(key)) => Ok(Target::Scope(proto::Scope { operation, key })),
        _ => Err(OpsFailure::usage(
            "name the operation either by OPERATION_ID or by --operation NAME --key KEY",
        )),
    }
}

/// The operation alone, without history (what reconcile and forget read
/// first), of `tenant` (empty: the caller's own).
pub(super) async fn read(
    server: &mut Server,
    target: Target,
    tenant: &str,
) -> Result<Operation, BoxError> {
    let request = server.request(LookupRequest {
        target: Some(target),
        tenant: tenant.to_owned(),
        ..Default::default()
    });
    let response = server
        .client
        .lookup(request)
        .await
        .map_err(|status| OpsFailure::from_status("Lookup", &status))?
        .into_inner();
    Ok(response.operation.unwrap_or_default())
}

pub(super) async fn run(
    server: &mut Server,
    target: Target,
    tenant: String,
    output: OutputFormat,
) -> Result<(), BoxError> {
    let (operation, history) = read_with_history(server, target, &tenant).await?;
    match output {
        OutputFormat::Json => render::print_json(&json_document(&operation, &history)?),
        OutputFormat::Table => {
            print_operation(&operation);
            print_history(&history);
            Ok(())
        }
    }
}

async fn read_with_history(
    server: &mut Server,
    target: Target,
    tenant: &str,
) -> Result<(Operation, Vec<HistoryEntry>), BoxError> {
    Ok(fetch_with_history(server, target, tenant)
        .await
        .map_err(|status| OpsFailure::from_status("Lookup", &status))?)
}

/// The operation and its whole history (every page), or the status Lookup
/// was refused with, as the server sent it (`idemd mcp` hands its details
/// to the agent as they are).
pub(in crate::app) async fn fetch_with_history(
    server: &mut Server,
    target: Target,
    tenant: &str,
) -> Result<(Operation, Vec<HistoryEntry>), tonic::Status> {
    let mut history = Vec::new();
    let mut page_token = String::new();
    loop {
        let request = server.request(LookupRequest {
            target: Some(target.clone()),
            include_history: true,
            history_page_size: HISTORY_PAGE_SIZE,
            history_page_token: page_token.clone(),
            tenant: tenant.to_owned(),
        });
        let response = server.client.lookup(request).await?.into_inner();
        history.extend(response.history);
        // The operation as of the last page: the freshest read.
        let next = response.next_history_page_token;
        if next.is_empty() {
            return Ok((response.operation.unwrap_or_default(), history));
        }
        // A server that hands back the same token would loop forever.
        if next == page_token {
            return Err(tonic::Status::internal(
                "Lookup returned the same history page token twice",
            ));
        }
        page_token = next;
    }
}

fn answer(operation: &Operation) -> &'static str {
    verdict(Facts {
        state: render::state(operation.state),
        lease_expired: operation.lease_expired,
        attempts_left: operation.attempt < operation.max_attempts,
        failed_gets_new_attempt: operation.on_failed() == proto::OnFailed::NewAttempt,
    })
    .headline
}

fn json_document(operation: &Operation, history: &[HistoryEntry]) -> Result<Value, BoxError> {
    let mut document = operation_json(operation)?;
    document["history"] = serde_json::to_value(history)?;
    Ok(document)
}

/// The answer, the operation and its body as text: lookup's JSON document
/// without the history (`ops show` prints the history one entry a line).
pub(in crate::app) fn operation_json(operation: &Operation) -> Result<Value, BoxError> {
    // The proto's own JSON mapping (what grpcurl prints), plus the body as
    // text when it is text: the mapping gives bytes as base64.
    let body_text = operation.result.as_ref().and_then(render::readable_body);
    Ok(json!({
        "answer": answer(operation),
        "operation": serde_json::to_value(operation)?,
        "result_body_text": body_text,
    }))
}

pub(super) fn print_operation(operation: &Operation) {
    println!("{}", answer(operation));
    println!();
    let state = render::state(operation.state);
    let mut state_text = render::state_name(state).to_owned();
    if operation.lease_expired {
        state_text.push_str(" (lease expired)");
    }
    let scope = operation.scope.clone().unwrap_or_default();
    let mut fields = vec![
        ("operation_id", operation.operation_id.clone()),
        ("operation", scope.operation),
        ("key", scope.key),
        ("state", state_text),
        (
            "attempt",
            format!("{}/{}", operation.attempt, operation.max_attempts),
        ),
        ("fence", operation.fence.to_string()),
        (
            "lease_expires_at",
            render::time(operation.lease_expires_at.as_ref()),
        ),
        (
            "attempt_deadline",
            render::time(operation.attempt_deadline_at.as_ref()),
        ),
        ("retry_at", render::time(operation.retry_at.as_ref())),
        (
            "operation_deadline",
            render::time(operation.operation_deadline_at.as_ref()),
        ),
        ("created_at", render::time(operation.created_at.as_ref())),
        ("updated_at", render::time(operation.updated_at.as_ref())),
        (
            "completed_at",
            render::time(operation.completed_at.as_ref()),
        ),
        (
            "retain_until",
            render::time(operation.retain_until.as_ref()),
        ),
        ("conflicts", format::operation_conflicts(operation)),
        // As of the replicas' last flush of their counts (a few seconds).
        ("answered", format::operation_answers(operation)),
        ("same_request", format::operation_same_request(operation)),
    ];
    if let Some(result) = &operation.result {
        fields.push(("content_type", result.content_type.clone()));
        fields.push(("metadata", metadata(&result.metadata)));
        let body = render::readable_body(result)
            .map_or_else(|| render::opaque_body(&result.body), str::to_owned);
        fields.push(("result", body));
    }
    if let Some(error) = &operation.error {
        let reason = proto::FailureReason::try_from(error.reason)
            .map_or("UNSPECIFIED", |reason| reason.as_str_name());
        fields.push(("error_reason", reason.to_owned()));
        fields.push(("error_code", error.code.clone()));
        fields.push(("error_message", error.message.clone()));
        fields.push(("error_metadata", metadata(&error.metadata)));
    }
    render::print_fields(&fields);
}

fn metadata(map: &std::collections::HashMap<String, String>) -> String {
    let mut pairs: Vec<String> = map
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect();
    pairs.sort();
    if pairs.is_empty() {
        "-".to_owned()
    } else {
        pairs.join(", ")
    }
}

pub(super) fn print_history(history: &[HistoryEntry]) {
    println!();
    println!("history:");
    render::print_table(&HISTORY_HEADER, history.iter().map(history_row).collect());
}

pub(super) const HISTORY_HEADER: [&str; 10] = [
    "SEQ", "EVENT", "FROM", "TO", "FENCE", "ATTEMPT", "COUNT", "AT", "BY", "DETAIL",
];

/// One history entry as a row under [`HISTORY_HEADER`].
pub(super) fn history_row(entry: &HistoryEntry) -> Vec<String> {
    vec![
        entry.sequence.to_string(),
        entry.event.clone(),
        // The first entry comes from no state at all.
        match render::state(entry.from_state) {
            proto::OperationState::Unspecified => "-".to_owned(),
            from => render::state_name(from).to_owned(),
        },
        render::state_name(render::state(entry.to_state)).to_owned(),
        entry.fence.to_string(),
        entry.attempt.to_string(),
        entry.count.to_string(),
        render::time(entry.at.as_ref()),
        acted_by(entry),
        format::history_detail(entry),
    ]
}

/// Who made the change: the credential of a reconciliation or a Forget,
/// marked when an admin acted on the tenant's behalf; `-` for the owners'
/// own writes and the sweeper's.
fn acted_by(entry: &HistoryEntry) -> String {
    match (entry.credential.as_str(), entry.admin_on_behalf) {
        ("", _) => "-".to_owned(),
        (credential, true) => format!("{credential} (admin, on behalf)"),
        (credential, false) => credential.to_owned(),
    }
}
