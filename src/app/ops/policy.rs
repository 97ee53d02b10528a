//! `idemd ops policy`: the defaults and ceilings a first Claim of an
//! operation name gets (GetPolicy), and which policy entry decided them.

use serde_json::json;

use super::connect::Server;
use super::failure::OpsFailure;
use super::render;
use crate::config::OutputFormat;
use crate::error::BoxError;
use crate::proto::{GetPolicyRequest, GetPolicyResponse, OnFailed};

/// A duration as humantime prints it (`30s`, `1day`); `-` when unset.
fn duration(value: Option<&pbjson_types::Duration>) -> String {
    let Some(value) = value else {
        return "-".to_owned();
    };
    let seconds = u64::try_from(value.seconds).unwrap_or(0);
    let nanos = u32::try_from(value.nanos).unwrap_or(0);
    humantime::format_duration(std::time::Duration::new(seconds, nanos)).to_string()
}

fn decided_by(policy: &GetPolicyResponse) -> String {
    if policy.server_defaults {
        "server defaults (no policy entry matches)".to_owned()
    } else {
        format!("policy `{}`", policy.matched_pattern)
    }
}

/// What a Claim of a FAILED operation gets, as the policy file names it.
fn on_failed(policy: &GetPolicyResponse) -> &'static str {
    match policy.on_failed() {
        OnFailed::NewAttempt => "new_attempt",
        // UNSPECIFIED: a server from before the field, which replays.
        OnFailed::Replay | OnFailed::Unspecified => "replay",
    }
}

pub(super) async fn run(
    server: &mut Server,
    operation: String,
    output: OutputFormat,
) -> Result<(), BoxError> {
    let request = server.request(GetPolicyRequest {
        operation: operation.clone(),
    });
    let policy = server
        .client
        .get_policy(request)
        .await
        .map_err(|status| OpsFailure::from_status("GetPolicy", &status))?
        .into_inner();
    match output {
        OutputFormat::Json => render::print_json(&json!({
            "operation": operation,
            "policy": serde_json::to_value(&policy)?,
        })),
        OutputFormat::Table => {
            println!("{operation}: {}", decided_by(&policy));
            println!("a Claim of a FAILED operation gets: {}", on_failed(&policy));
            println!();
            render::print_table(
                &["FIELD", "DEFAULT", "MAX"],
                vec![
                    vec![
                        "lease".to_owned(),
                        duration(policy.default_lease.as_ref()),
                        duration(policy.max_lease.as_ref()),
                    ],
                    vec![
                        "max_attempt_duration".to_owned(),
                        duration(policy.default_max_attempt_duration.as_ref()),
                        duration(policy.max_attempt_duration.as_ref()),
                    ],
                    vec![
                        "max_attempts".to_owned(),
                        policy.default_max_attempts.to_string(),
                        policy.max_attempts.to_string(),
                    ],
                    vec![
                        "retention".to_owned(),
                        duration(policy.default_retention.as_ref()),
                        duration(policy.max_retention.as_ref()),
                    ],
                    vec![
                        "operation_deadline".to_owned(),
                        duration(policy.default_operation_deadline.as_ref()),
                        duration(policy.max_operation_deadline.as_ref()),
                    ],
                ],
            );
            Ok(())
        }
    }
}
