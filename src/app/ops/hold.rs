//! `idemd ops hold`, `release` and `holds`: stop new owners of an operation
//! name (or of a whole tenant) while its unresolved operations are drained,
//! then let them start again. The server decides (admin scope, the name's
//! bounds) and audits; these commands call and print.

use serde_json::json;

use super::connect::Server;
use super::failure::OpsFailure;
use super::render;
use crate::config::OutputFormat;
use crate::error::BoxError;
use crate::proto::{Hold, HoldRequest, ListHoldsRequest, ReleaseRequest};

/// What to hold or release.
pub(super) struct Target {
    /// `None` with `whole_tenant`: every operation of the tenant.
    pub(super) operation: Option<String>,
    /// Asked for explicitly: a missing name never holds a whole tenant.
    pub(super) whole_tenant: bool,
    /// Another tenant's name; empty: the caller's own.
    pub(super) tenant: String,
    pub(super) reason: String,
}

impl Target {
    /// The name as the API takes it: empty for the whole tenant.
    fn operation(&self) -> Result<String, OpsFailure> {
        match (&self.operation, self.whole_tenant) {
            (Some(operation), false) => Ok(operation.clone()),
            (None, true) => Ok(String::new()),
            (Some(_), true) => Err(OpsFailure::usage(
                "give an operation name or --whole-tenant, not both",
            )),
            (None, false) => Err(OpsFailure::usage(
                "give the operation name to hold, or --whole-tenant for every operation",
            )),
        }
    }
}

fn held_what(hold: &Hold) -> String {
    let what = if hold.operation.is_empty() {
        "every operation".to_owned()
    } else {
        hold.operation.clone()
    };
    format!("{what} of tenant {}", hold.tenant)
}

fn waits(hold: &Hold) -> String {
    hold.retry_after.as_ref().map_or_else(
        || "-".to_owned(),
        |duration| {
            let seconds = u64::try_from(duration.seconds).unwrap_or(0);
            let nanos = u32::try_from(duration.nanos).unwrap_or(0);
            humantime::format_duration(std::time::Duration::new(seconds, nanos)).to_string()
        },
    )
}

pub(super) async fn hold(
    server: &mut Server,
    target: Target,
    retry_after: Option<std::time::Duration>,
    output: OutputFormat,
) -> Result<(), BoxError> {
    let operation = target.operation()?;
    let request = server.request(HoldRequest {
        tenant: target.tenant,
        operation,
        reason: target.reason,
        retry_after: retry_after.map(|duration| pbjson_types::Duration {
            seconds: i64::try_from(duration.as_secs()).unwrap_or(i64::MAX),
            nanos: i32::try_from(duration.subsec_nanos()).unwrap_or(0),
        }),
    });
    let response = server
        .client
        .hold(request)
        .await
        .map_err(|status| OpsFailure::from_status("Hold", &status))?
        .into_inner();
    let hold = response.hold.unwrap_or_default();
    match output {
        OutputFormat::Json => render::print_json(&json!({
            "hold": serde_json::to_value(&hold)?,
            "already_held": response.already_held,
        })),
        OutputFormat::Table => {
            if response.already_held {
                println!(
                    "{} was held already, since {} by {} ({:?}): that hold stays",
                    held_what(&hold),
                    render::time(hold.held_at.as_ref()),
                    hold.held_by,
                    hold.reason
                );
            } else {
                println!(
                    "held {}: new operations and new attempts wait (Pending, retry after {}); \
                     replays, running owners and reconciliation go on. Drain with `idemd ops \
                     unresolved`, then `idemd ops release`.",
                    held_what(&hold),
                    waits(&hold)
                );
            }
            Ok(())
        }
    }
}

pub(super) async fn release(
    server: &mut Server,
    target: Target,
    output: OutputFormat,
) -> Result<(), BoxError> {
    let operation = target.operation()?;
    let request = server.request(ReleaseRequest {
        tenant: target.tenant,
        operation,
        reason: target.reason,
    });
    let response = server
        .client
        .release(request)
        .await
        .map_err(|status| OpsFailure::from_status("Release", &status))?
        .into_inner();
    let released = response.released.unwrap_or_default();
    match output {
        OutputFormat::Json => render::print_json(&json!({
            "released": serde_json::to_value(&released)?,
        })),
        OutputFormat::Table => {
            println!(
                "released {} (held since {} by {}): new owners start again within about a \
                 second on every replica",
                held_what(&released),
                render::time(released.held_at.as_ref()),
                released.held_by
            );
            Ok(())
        }
    }
}

pub(super) async fn list(
    server: &mut Server,
    tenant: Option<String>,
    output: OutputFormat,
) -> Result<(), BoxError> {
    let request = server.request(ListHoldsRequest {
        tenant: tenant.unwrap_or_default(),
    });
    let holds = server
        .client
        .list_holds(request)
        .await
        .map_err(|status| OpsFailure::from_status("ListHolds", &status))?
        .into_inner()
        .holds;
    match output {
        OutputFormat::Json => render::print_json(&json!({
            "holds": serde_json::to_value(&holds)?,
        })),
        OutputFormat::Table => {
            render::print_table(
                &[
                    "TENANT",
                    "OPERATION",
                    "SINCE",
                    "BY",
                    "RETRY AFTER",
                    "REASON",
                ],
                holds
                    .iter()
                    .map(|hold| {
                        vec![
                            hold.tenant.clone(),
                            if hold.operation.is_empty() {
                                "*".to_owned()
                            } else {
                                hold.operation.clone()
                            },
                            render::time(hold.held_at.as_ref()),
                            hold.held_by.clone(),
                            waits(hold),
                            hold.reason.clone(),
                        ]
                    })
                    .collect(),
            );
            Ok(())
        }
    }
}
