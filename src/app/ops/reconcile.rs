//! `idemd ops reconcile`: says in plain words what the reconciliation will
//! make of the caller's next Claim, asks, then calls Reconcile. The server
//! decides whether it is allowed (fence, live lease, attempt deadline).

use std::io::Write;
use std::path::PathBuf;

use serde_json::json;

use super::connect::Server;
use super::failure::{EXIT_DECLINED, OpsFailure};
use super::{lookup, render};
use crate::config::OutputFormat;
use crate::error::BoxError;
use crate::proto::lookup_request::Target;
use crate::proto::reconcile_request::Resolution;
use crate::proto::{self, NotApplied, OperationError, ReconcileRequest};

pub(super) struct Plan {
    pub(super) operation_id: String,
    pub(super) resolution: Resolution,
    pub(super) expected_fence: Option<u64>,
    /// Another tenant's name (admin); empty: the caller's own.
    pub(super) tenant: String,
    /// --yes: no prompt.
    pub(super) confirmed: bool,
}

/// The resolution the flags ask for (clap requires exactly one of the three
/// and the values each needs).
pub(super) fn resolution(
    (succeeded, failed, not_applied): (bool, bool, bool),
    result_file: Option<PathBuf>,
    content_type: String,
    code: Option<String>,
    message: Option<String>,
) -> Result<Resolution, OpsFailure> {
    match (succeeded, failed, not_applied) {
        (true, false, false) => {
            let path =
                result_file.ok_or_else(|| OpsFailure::usage("--succeeded needs --result-file"))?;
            let body = std::fs::read(&path).map_err(|error| {
                OpsFailure::usage(format!("cannot read {}: {error}", path.display()))
            })?;
            Ok(Resolution::Succeeded(proto::Result {
                body,
                content_type,
                metadata: Default::default(),
            }))
        }
        (false, true, false) => Ok(Resolution::Failed(OperationError {
            code: code.unwrap_or_default(),
            message: message.unwrap_or_default(),
            ..Default::default()
        })),
        (false, false, true) => Ok(Resolution::NotApplied(NotApplied {})),
        _ => Err(OpsFailure::usage(
            "give exactly one of --succeeded, --failed, --not-applied",
        )),
    }
}

/// What the caller's next Claim does after this resolution, in the words
/// support staff use with the caller.
pub(in crate::app) fn consequence(resolution: &Resolution) -> String {
    match resolution {
        Resolution::Succeeded(result) => format!(
            "SUCCEEDED stores this result ({} bytes, {}): the caller's next Claim replays this \
             result",
            result.body.len(),
            result.content_type
        ),
        Resolution::Failed(error) => format!(
            "FAILED stores this failure (code {:?}): the caller's next Claim replays this failure",
            error.code
        ),
        Resolution::NotApplied(_) => {
            "NOT_APPLIED grants one more attempt: the caller's next Claim executes the effect"
                .to_owned()
        }
    }
}

/// [`consequence`] for each of many operations (`reconcile --filter`).
pub(super) fn consequence_for_each(resolution: &Resolution) -> String {
    match resolution {
        Resolution::Succeeded(result) => format!(
            "SUCCEEDED stores this result ({} bytes, {}) for each: the callers' next Claim replays \
             this result",
            result.body.len(),
            result.content_type
        ),
        Resolution::Failed(error) => format!(
            "FAILED stores this failure (code {:?}) for each: the callers' next Claim replays this \
             failure",
            error.code
        ),
        Resolution::NotApplied(_) => {
            "NOT_APPLIED grants one more attempt each: the callers' next Claim executes the effect"
                .to_owned()
        }
    }
}

pub(super) async fn run(
    server: &mut Server,
    plan: Plan,
    output: OutputFormat,
) -> Result<(), BoxError> {
    // The fence as it is now, unless the operator read one elsewhere (from
    // ListUnresolved, say) and wants the call refused if it moved since.
    let current = lookup::read(
        server,
        Target::OperationId(plan.operation_id.clone()),
        &plan.tenant,
    )
    .await?;
    let expected_fence = plan.expected_fence.unwrap_or(current.fence);
    let scope = current.scope.clone().unwrap_or_default();
    // The plan and the prompt go to stderr: stdout carries only the outcome,
    // one JSON document with -o json.
    eprintln!(
        "operation {} ({} {:?}) is {} at fence {}, attempt {}/{}.",
        current.operation_id,
        scope.operation,
        scope.key,
        render::state_name(render::state(current.state)),
        current.fence,
        current.attempt,
        current.max_attempts,
    );
    eprintln!(
        "reconcile at fence {expected_fence}: {}.",
        consequence(&plan.resolution)
    );
    if !plan.confirmed && !confirm().await? {
        return Err(OpsFailure::new(EXIT_DECLINED, "not confirmed: nothing was changed").into());
    }
    let request = server.request(ReconcileRequest {
        operation_id: plan.operation_id,
        expected_fence,
        resolution: Some(plan.resolution),
        tenant: plan.tenant,
    });
    let response = server
        .client
        .reconcile(request)
        .await
        .map_err(|status| OpsFailure::from_status("Reconcile", &status))?
        .into_inner();
    let state = render::state_name(render::state(response.state));
    match output {
        OutputFormat::Json => render::print_json(&json!({
            "operation_id": current.operation_id,
            "state": state,
            "fence": response.fence,
        })),
        OutputFormat::Table => {
            println!(
                "reconciled {}: now {state} at fence {}",
                current.operation_id, response.fence
            );
            Ok(())
        }
    }
}

/// `Proceed? [y/N]` on the terminal; anything but y or yes (or no answer
/// at all) is no.
pub(super) async fn confirm() -> Result<bool, BoxError> {
    eprint!("Proceed? [y/N] ");
    std::io::stderr().flush()?;
    // Reading stdin blocks: off the runtime's threads.
    let answer = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    })
    .await??;
    // No answer at all (end of input): end the prompt's line ourselves.
    if !answer.ends_with('\n') {
        eprintln!();
    }
    let answer = answer.trim().to_ascii_lowercase();
    Ok(answer == "y" || answer == "yes")
}
