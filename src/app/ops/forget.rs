//! `idemd ops forget`: says what the Forget will drop and what the caller's
//! next Claim will get, asks (the same prompt as reconcile), then calls
//! Forget. The server decides whether it is allowed (admin scope, an ended
//! operation, the fence).

use serde_json::json;

use super::connect::Server;
use super::failure::{EXIT_DECLINED, OpsFailure};
use super::{lookup, reconcile, render};
use crate::config::OutputFormat;
use crate::error::BoxError;
use crate::proto::lookup_request::Target;
use crate::proto::{ForgetRequest, Operation};

pub(super) struct Plan {
    pub(super) operation_id: String,
    pub(super) reason: String,
    pub(super) expected_fence: Option<u64>,
    /// Another tenant's name; empty: the caller's own.
    pub(super) tenant: String,
    /// --yes: no prompt.
    pub(super) confirmed: bool,
}

/// How many bytes of result or error the operation stores: what a Forget
/// drops.
fn stored_bytes(operation: &Operation) -> usize {
    let metadata = |map: &std::collections::HashMap<String, String>| {
        map.iter()
            .map(|(name, value)| name.len() + value.len())
            .sum::<usize>()
    };
    let result = operation.result.as_ref().map_or(0, |result| {
        result.body.len() + result.content_type.len() + metadata(&result.metadata)
    });
    let error = operation.error.as_ref().map_or(0, |error| {
        error.code.len() + error.message.len() + metadata(&error.metadata)
    });
    result + error
}

pub(super) async fn run(
    server: &mut Server,
    plan: Plan,
    output: OutputFormat,
) -> Result<(), BoxError> {
    // Refused before anything is read: the server would refuse it too, but
    // only after the prompt.
    if plan.reason.trim().is_empty() {
        return Err(OpsFailure::usage("--reason must say why the result is forgotten").into());
    }
    let current = lookup::read(
        server,
        Target::OperationId(plan.operation_id.clone()),
        &plan.tenant,
    )
    .await?;
    let expected_fence = plan.expected_fence.unwrap_or(current.fence);
    let scope = current.scope.clone().unwrap_or_default();
    // The plan and the prompt go to stderr: stdout carries only the outcome.
    eprintln!(
        "operation {} ({} {:?}) is {} at fence {}, storing {} bytes of {}.",
        current.operation_id,
        scope.operation,
        scope.key,
        render::state_name(render::state(current.state)),
        current.fence,
        stored_bytes(&current),
        if current.error.is_some() {
            "error"
        } else {
            "result"
        },
    );
    eprintln!(
        "forget at fence {expected_fence}: the stored result is dropped for good and the \
         caller's next Claim of this key gets RESULT_EXPIRED (never a new execution); the \
         history and the audit log record your credential and the reason {:?}.",
        plan.reason
    );
    if !plan.confirmed && !reconcile::confirm().await? {
        return Err(OpsFailure::new(EXIT_DECLINED, "not confirmed: nothing was changed").into());
    }
    let request = server.request(ForgetRequest {
        operation_id: plan.operation_id,
        expected_fence,
        reason: plan.reason,
        tenant: plan.tenant,
    });
    let response = server
        .client
        .forget(request)
        .await
        .map_err(|status| OpsFailure::from_status("Forget", &status))?
        .into_inner();
    let state = render::state_name(render::state(response.state));
    match output {
        OutputFormat::Json => render::print_json(&json!({
            "operation_id": current.operation_id,
            "state": state,
            "dropped_bytes": response.dropped_bytes,
            "retain_until": render::time(response.retain_until.as_ref()),
        })),
        OutputFormat::Table => {
            println!(
                "forgot {}: now {state}, {} bytes dropped; the tombstone is kept until {}",
                current.operation_id,
                response.dropped_bytes,
                render::time(response.retain_until.as_ref())
            );
            Ok(())
        }
    }
}
