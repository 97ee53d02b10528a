//! `idemd ops reconcile --filter F`: one resolution for every unresolved
//! operation a filter finds. It lists them (ListOperations, oldest first),
//! shows how many and a sample, says what the callers' next Claim will do,
//! asks (or stops, with --dry-run), then reconciles each at the fence it was
//! listed with. The server decides each one: an operation that moved since
//! it was listed is refused by its fence and reported as changed, never
//! retried at its new fence (whoever moved it knew something this listing
//! did not); a resolution the server refuses (NOT_APPLIED before the last
//! attempt's deadline) is reported with its reason.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::json;
use tonic::{Code, Status};
use tonic_types::StatusExt;

use super::connect::Server;
use super::failure::{
    EXIT_DECLINED, EXIT_INTERRUPTED, EXIT_NOT_ALL_RECONCILED, EXIT_USAGE, OpsFailure,
};
use super::{list, reconcile, render};
use crate::backoff::Backoff;
use crate::config::OutputFormat;
use crate::domain::OperationFilter;
use crate::domain::filter::StateMatch;
use crate::error::BoxError;
use crate::proto::list_operations_request::Order;
use crate::proto::reconcile_request::Resolution;
use crate::proto::{ListOperationsRequest, Operation, ReconcileRequest};

/// Rows of the sample printed before acting.
const SAMPLE_ROWS: usize = 10;
/// The most a ListOperations page holds.
const PAGE_SIZE: u32 = 1000;
/// Tries of one Reconcile that meets UNAVAILABLE (re-sending it is safe: the
/// same fence and request get the original answer), and the pauses between.
const RECONCILE_TRIES: u32 = 5;
const FIRST_RETRY: Duration = Duration::from_millis(200);
const LONGEST_RETRY: Duration = Duration::from_secs(5);

pub(super) struct BulkPlan {
    /// The user's filter as [`unresolved_filter`] narrowed it.
    pub(super) filter: String,
    pub(super) resolution: Resolution,
    pub(super) limit: Option<u32>,
    pub(super) dry_run: bool,
    /// --yes: no prompt.
    pub(super) confirmed: bool,
}

/// What became of one operation.
enum Outcome {
    Reconciled {
        state: String,
        fence: u64,
    },
    /// It moved since it was listed (its fence, its state), or is gone.
    Changed(String),
    /// The server refused this resolution for it.
    Refused(String),
}

pub(super) async fn run(
    server: &mut Server,
    plan: BulkPlan,
    output: OutputFormat,
) -> Result<(), BoxError> {
    let filter = plan.filter;
    let listed = list_all(server, &filter, plan.limit).await?;
    let sample = &listed[..listed.len().min(SAMPLE_ROWS)];
    let deadlines = deadlines_passed(server, sample).await?;
    let consequence = reconcile::consequence_for_each(&plan.resolution);

    // With --dry-run the plan is the outcome: stdout. Otherwise stdout
    // carries only the summary (one JSON document with -o json), as for a
    // single reconcile.
    let to_stdout = plan.dry_run;
    // --limit N met: more may match than were listed.
    let limit_reached = plan
        .limit
        .is_some_and(|limit| listed.len() == limit as usize);
    if to_stdout && output == OutputFormat::Json {
        return render::print_json(&json!({
            "filter": filter,
            "count": listed.len(),
            "limit_reached": limit_reached,
            "operations": serde_json::to_value(&listed)?,
            "consequence": consequence,
        }));
    }
    let say = |line: String| {
        if to_stdout {
            println!("{line}");
        } else {
            eprintln!("{line}");
        }
    };
    say(format!("filter: {filter}"));
    if listed.is_empty() {
        say("no unresolved operation matches: nothing to reconcile".to_owned());
        // A script reading the summary gets one, with nothing in it.
        if !plan.dry_run && output == OutputFormat::Json {
            print_summary(&[], 0, output)?;
        }
        return Ok(());
    }
    say(format!(
        "{} unresolved operation{}{} (oldest first{}):",
        listed.len(),
        if listed.len() == 1 { "" } else { "s" },
        if limit_reached {
            ", as many as --limit allows: more may match"
        } else {
            ""
        },
        if sample.len() < listed.len() {
            format!("; the first {}", sample.len())
        } else {
            String::new()
        },
    ));
    print_sample(sample, &deadlines, to_stdout);
    say(format!("{consequence}."));
    if plan.dry_run {
        return Ok(());
    }
    if !plan.confirmed {
        if !std::io::stdin().is_terminal() {
            return Err(OpsFailure::new(
                EXIT_USAGE,
                "not a terminal to ask on: pass --yes to reconcile these without asking (or \
                 --dry-run to only list them); nothing was changed",
            )
            .into());
        }
        if !reconcile::confirm().await? {
            return Err(
                OpsFailure::new(EXIT_DECLINED, "not confirmed: nothing was changed").into(),
            );
        }
    }

    // Ctrl-C stops before the next operation, never inside a call: the one in
    // flight gets its answer and is reported.
    let interrupted = Arc::new(AtomicBool::new(false));
    let watcher = {
        let interrupted = Arc::clone(&interrupted);
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                interrupted.store(true, Ordering::SeqCst);
            }
        })
    };
    let mut outcomes = Vec::with_capacity(listed.len());
    let mut stopped = None;
    for operation in &listed {
        if interrupted.load(Ordering::SeqCst) {
            stopped = Some(OpsFailure::new(EXIT_INTERRUPTED, "interrupted"));
            break;
        }
        match reconcile_one(server, operation, &plan.resolution).await {
            Ok(outcome) => outcomes.push((operation, outcome)),
            Err(failure) => {
                stopped = Some(failure);
                break;
            }
        }
    }
    watcher.abort();
    let not_reached = listed.len() - outcomes.len();
    print_summary(&outcomes, not_reached, output)?;
    if let Some(failure) = stopped {
        return Err(failure.into());
    }
    let reconciled = outcomes
        .iter()
        .filter(|(_, outcome)| matches!(outcome, Outcome::Reconciled { .. }))
        .count();
    if reconciled < listed.len() {
        return Err(OpsFailure::new(
            EXIT_NOT_ALL_RECONCILED,
            format!(
                "{} of {} not reconciled",
                listed.len() - reconciled,
                listed.len()
            ),
        )
        .into());
    }
    Ok(())
}

/// The user's filter, narrowed to unresolved operations as the server means
/// them (`state:unresolved`: UNKNOWN, or IN_PROGRESS whose lease expired by
/// the database clock). State terms add up, so `state:unresolved` is added
/// only to a filter without any; a filter naming other states is refused
/// rather than widened.
pub(super) fn unresolved_filter(filter: &str) -> Result<String, OpsFailure> {
    // The server parses it again and refuses what does not parse, with the
    // position; this reading only looks for state terms.
    let states = OperationFilter::parse(filter)
        .map(|parsed| parsed.states)
        .unwrap_or_default();
    if states.is_empty() {
        let narrowed = format!("{} state:unresolved", filter.trim())
            .trim()
            .to_owned();
        eprintln!(
            "idemd: only unresolved operations can be reconciled: added `state:unresolved` to the \
             filter"
        );
        return Ok(narrowed);
    }
    // UNKNOWN is unresolved; IN_PROGRESS is only once its lease expired.
    if states
        .iter()
        .all(|state| matches!(state, StateMatch::Unresolved | StateMatch::Unknown))
    {
        return Ok(filter.to_owned());
    }
    Err(OpsFailure::usage(
        "only unresolved operations can be reconciled: the filter's state terms may name \
         `unresolved` or `unknown` (IN_PROGRESS operations whose lease expired are in \
         `state:unresolved`), or leave the state out",
    ))
}

/// Every operation the filter finds, oldest first, up to `limit`.
async fn list_all(
    server: &mut Server,
    filter: &str,
    limit: Option<u32>,
) -> Result<Vec<Operation>, BoxError> {
    let limit = limit.map_or(usize::MAX, |limit| limit as usize);
    let mut operations = Vec::new();
    let mut page_token = String::new();
    while operations.len() < limit {
        let wanted = u32::try_from(limit - operations.len()).unwrap_or(PAGE_SIZE);
        let request = server.request(ListOperationsRequest {
            filter: filter.to_owned(),
            page_size: wanted.min(PAGE_SIZE),
            page_token: page_token.clone(),
            order: Order::OldestFirst.into(),
        });
        let page = server
            .client
            .list_operations(request)
            .await
            .map_err(|status| OpsFailure::from_status("ListOperations", &status))?
            .into_inner();
        operations.extend(page.operations);
        if page.next_page_token.is_empty() {
            break;
        }
        // A server that hands back the same token would loop forever.
        if page.next_page_token == page_token {
            return Err("the server returned the same page token twice".into());
        }
        page_token = page.next_page_token;
    }
    operations.truncate(limit);
    Ok(operations)
}

/// Whether each operation's last attempt deadline has passed by the
/// database's clock, as the server's `is:deadline_passed` term says (this
/// machine's clock decides nothing). Reconcile also adds the server's clock
/// margin, so a "yes" that just turned may still be refused for a moment.
async fn deadlines_passed(
    server: &mut Server,
    operations: &[Operation],
) -> Result<Vec<bool>, BoxError> {
    let mut passed = Vec::with_capacity(operations.len());
    for operation in operations {
        let request = server.request(ListOperationsRequest {
            filter: format!("id:{} is:deadline_passed", operation.operation_id),
            page_size: 1,
            ..Default::default()
        });
        let page = server
            .client
            .list_operations(request)
            .await
            .map_err(|status| OpsFailure::from_status("ListOperations", &status))?
            .into_inner();
        passed.push(!page.operations.is_empty());
    }
    Ok(passed)
}

fn print_sample(sample: &[Operation], deadlines: &[bool], to_stdout: bool) {
    let (mut header, mut rows) = list::operations_table(sample);
    header.push("DEADLINE_PASSED");
    for (row, passed) in rows.iter_mut().zip(deadlines) {
        row.push(if *passed { "yes" } else { "no" }.to_owned());
    }
    if to_stdout {
        render::print_table(&header, rows);
    } else {
        // The prompt and the plan share stderr; stdout keeps the summary.
        eprint!("{}", render::table_text(&header, rows));
    }
}

/// One Reconcile at the fence the operation was listed with; UNAVAILABLE is
/// sent again (the same request: the server answers a re-sent one as it
/// answered the first). Err: the run stops (no credential for it, or no
/// server).
async fn reconcile_one(
    server: &mut Server,
    operation: &Operation,
    resolution: &Resolution,
) -> Result<Outcome, OpsFailure> {
    let mut backoff = Backoff::new(FIRST_RETRY, LONGEST_RETRY);
    let mut tries = 0;
    loop {
        tries += 1;
        let request = server.request(ReconcileRequest {
            operation_id: operation.operation_id.clone(),
            expected_fence: operation.fence,
            resolution: Some(resolution.clone()),
            // An admin's listing names each operation's tenant (empty
            // otherwise: the caller's own); reconciling another tenant's
            // needs admin and reconcile, as the server checks.
            tenant: operation.tenant.clone(),
        });
        let status = match server.client.reconcile(request).await {
            Ok(response) => {
                let response = response.into_inner();
                return Ok(Outcome::Reconciled {
                    state: render::state_name(render::state(response.state)).to_owned(),
                    fence: response.fence,
                });
            }
            Err(status) => status,
        };
        match status.code() {
            Code::Unavailable | Code::ResourceExhausted if tries < RECONCILE_TRIES => {
                let pause = backoff.pause();
                eprintln!(
                    "idemd: Reconcile {}: {:?}: {}; retrying in {pause:?}",
                    operation.operation_id,
                    status.code(),
                    status.message()
                );
                tokio::time::sleep(pause).await;
            }
            // Gone, or moved: another fence (ABORTED), or the same fence in
            // another state (completed by its owner, reconciled otherwise).
            Code::NotFound | Code::Aborted => return Ok(Outcome::Changed(refusal(&status))),
            Code::FailedPrecondition if reason(&status) != "ATTEMPT_STILL_RUNNING" => {
                return Ok(Outcome::Changed(refusal(&status)));
            }
            // Nothing else would fare better: every call is refused alike.
            Code::Unavailable
            | Code::ResourceExhausted
            | Code::PermissionDenied
            | Code::Unauthenticated => {
                return Err(OpsFailure::from_status("Reconcile", &status));
            }
            _ => return Ok(Outcome::Refused(refusal(&status))),
        }
    }
}

fn reason(status: &Status) -> String {
    status
        .get_details_error_info()
        .map(|info| info.reason)
        .unwrap_or_default()
}

/// A refusal on one line: code, reason, message, ErrorInfo's metadata.
fn refusal(status: &Status) -> String {
    let mut text = format!("{:?}", status.code());
    if let Some(info) = status.get_details_error_info() {
        text.push(' ');
        text.push_str(&info.reason);
        let mut metadata: Vec<_> = info
            .metadata
            .into_iter()
            .filter(|(name, _)| name != "operation_id")
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        metadata.sort();
        if !metadata.is_empty() {
            text.push_str(&format!(" ({})", metadata.join(", ")));
        }
    }
    text.push_str(&format!(": {}", status.message()));
    text
}

fn print_summary(
    outcomes: &[(&Operation, Outcome)],
    not_reached: usize,
    output: OutputFormat,
) -> Result<(), BoxError> {
    let count = |wanted: fn(&Outcome) -> bool| {
        outcomes
            .iter()
            .filter(|(_, outcome)| wanted(outcome))
            .count()
    };
    let reconciled = count(|outcome| matches!(outcome, Outcome::Reconciled { .. }));
    let changed = count(|outcome| matches!(outcome, Outcome::Changed(_)));
    let refused = count(|outcome| matches!(outcome, Outcome::Refused(_)));
    match output {
        OutputFormat::Json => {
            let each: Vec<_> = outcomes
                .iter()
                .map(|(operation, outcome)| match outcome {
                    Outcome::Reconciled { state, fence } => json!({
                        "operation_id": operation.operation_id,
                        "outcome": "reconciled",
                        "state": state,
                        "fence": fence,
                    }),
                    Outcome::Changed(detail) => json!({
                        "operation_id": operation.operation_id,
                        "outcome": "changed",
                        "listed_fence": operation.fence,
                        "detail": detail,
                    }),
                    Outcome::Refused(detail) => json!({
                        "operation_id": operation.operation_id,
                        "outcome": "refused",
                        "listed_fence": operation.fence,
                        "detail": detail,
                    }),
                })
                .collect();
            render::print_json(&json!({
                "reconciled": reconciled,
                "changed": changed,
                "refused": refused,
                "not_reached": not_reached,
                "operations": each,
            }))
        }
        OutputFormat::Table => {
            let mut line = format!(
                "reconciled {reconciled}; skipped {changed} (changed since listed); refused \
                 {refused}"
            );
            if not_reached > 0 {
                line.push_str(&format!("; not reached {not_reached}"));
            }
            println!("{line}");
            let rows: Vec<Vec<String>> = outcomes
                .iter()
                .filter_map(|(operation, outcome)| match outcome {
                    Outcome::Reconciled { .. } => None,
                    Outcome::Changed(detail) => Some(vec![
                        operation.operation_id.clone(),
                        "changed".to_owned(),
                        operation.fence.to_string(),
                        detail.clone(),
                    ]),
                    Outcome::Refused(detail) => Some(vec![
                        operation.operation_id.clone(),
                        "refused".to_owned(),
                        operation.fence.to_string(),
                        detail.clone(),
                    ]),
                })
                .collect();
            if !rows.is_empty() {
                println!();
                render::print_table(&["OPERATION_ID", "OUTCOME", "LISTED_FENCE", "DETAIL"], rows);
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_is_narrowed_to_unresolved_operations_never_widened() {
        assert_eq!(
            unresolved_filter("op:payments.*").ok().as_deref(),
            Some("op:payments.* state:unresolved")
        );
        assert_eq!(
            unresolved_filter("").ok().as_deref(),
            Some("state:unresolved")
        );
        for kept in ["state:unresolved op:a", "state:unknown age>10m"] {
            assert_eq!(unresolved_filter(kept).ok().as_deref(), Some(kept));
        }
        // State terms add up: adding `unresolved` to these would widen them.
        for refused in [
            "state:succeeded",
            "state:unknown,failed",
            "state:in_progress",
        ] {
            let error = unresolved_filter(refused).expect_err(refused);
            assert_eq!(error.exit_code, EXIT_USAGE, "{refused}");
        }
    }
}
