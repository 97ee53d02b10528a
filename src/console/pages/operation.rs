//! One operation: the answer to the support question first, then its record,
//! its result or error, and its history as a timeline and as a table.

use chrono::{DateTime, Utc};
use maud::{Markup, html};

use super::layout::{Viewer, page};
use crate::console::paths;
use crate::console::timeline::{SpanEnd, Timeline, timeline};
use crate::proto::{self, HistoryEntry, Operation, OperationState};
use crate::support::body::{opaque_body, readable_body};
use crate::support::format::{self, duration, state, state_name, time};
use crate::support::verdict::{Facts, verdict};

/// Whether an operation is one a reconciler may settle now: what
/// ListUnresolved lists (UNKNOWN, or IN_PROGRESS whose lease expired).
pub fn unresolved(operation: &Operation) -> bool {
    match state(operation.state) {
        OperationState::Unknown => true,
        OperationState::InProgress => operation.lease_expired,
        _ => false,
    }
}

/// Whether the last attempt's deadline has passed by this replica's clock
/// (the server decides with the database's, and a safety margin).
pub fn deadline_passed(operation: &Operation, now: DateTime<Utc>) -> Option<bool> {
    format::timestamp(operation.attempt_deadline_at.as_ref()).map(|deadline| deadline <= now)
}

pub fn facts(operation: &Operation) -> Facts {
    Facts {
        state: state(operation.state),
        lease_expired: operation.lease_expired,
        attempts_left: operation.attempt < operation.max_attempts,
        failed_gets_new_attempt: operation.on_failed() == crate::proto::OnFailed::NewAttempt,
    }
}

/// What the handler read beside the operation: the notices (a write just
/// done, a hold on its name) and the diagnosis.
pub struct Panels {
    pub notices: Markup,
    pub diagnosis: Markup,
}

pub fn operation_page(
    viewer: &Viewer,
    tenant: &str,
    operation: &Operation,
    history: &[HistoryEntry],
    more_history: bool,
    now: DateTime<Utc>,
    panels: Panels,
) -> Markup {
    let Panels { notices, diagnosis } = panels;
    let answer = verdict(facts(operation));
    let scope = operation.scope.clone().unwrap_or_default();
    let title = format!("{} / {}", scope.operation, scope.key);
    let state = state(operation.state);
    let body = html! {
        (notices)
        section.verdict data-happened=(answer.happened.as_str()) {
            p.headline { (answer.headline) }
            dl {
                dt { "Did the effect happen?" } dd { (answer.happened.as_str()) }
                dt { "Is it safe for the caller to retry?" } dd { (answer.retry) }
                dt { "What should be done next?" } dd { (answer.next) }
            }
            @if unresolved(operation) {
                a.button href=(paths::reconcile(&operation.operation_id, tenant)) { "Reconcile…" }
            }
        }
        (diagnosis)
        section {
            h2 { "Record" }
            table.fields {
                tr { th { "operation_id" } td { code { (operation.operation_id) } } }
                @if !tenant.is_empty() { tr { th { "tenant" } td { (tenant) } } }
                tr { th { "operation" } td { (scope.operation) } }
                tr { th { "key" } td { code { (scope.key) } } }
                tr { th { "state" } td.state data-state=(state_name(state)) {
                    (state_name(state)) @if operation.lease_expired { " (lease expired)" } } }
                tr { th { "attempt" } td { (operation.attempt) " of " (operation.max_attempts) } }
                tr { th { "fence" } td { (operation.fence) } }
                tr { th { "lease expires" } td { (time(operation.lease_expires_at.as_ref())) } }
                tr { th { "attempt deadline" } td {
                    (time(operation.attempt_deadline_at.as_ref()))
                    // Whether it passed matters while the attempt may still
                    // run: to a reconciler choosing FAILED or NOT_APPLIED.
                    @if matches!(state, OperationState::InProgress | OperationState::Unknown) {
                        @match deadline_passed(operation, now) {
                            Some(true) => " (passed)",
                            Some(false) => " (not yet passed)",
                            None => "",
                        }
                    }
                } }
                tr { th { "retry at" } td { (time(operation.retry_at.as_ref())) } }
                tr { th { "operation deadline" } td { (time(operation.operation_deadline_at.as_ref())) } }
                tr { th { "created" } td { (time(operation.created_at.as_ref())) } }
                tr { th { "updated" } td { (time(operation.updated_at.as_ref())) } }
                tr { th { "completed" } td { (time(operation.completed_at.as_ref())) } }
                tr { th { "retained until" } td { (time(operation.retain_until.as_ref())) } }
                tr { th { "fingerprint" } td { code { (hex(&operation.fingerprint)) } } }
                tr { th { "conflicts" } td.conflicts { (format::operation_conflicts(operation))
                    @if operation.conflicts > 0 {
                        " (Claims of this key with another request, refused "
                        code { "IDEMPOTENCY_KEY_REUSED" } ")"
                    } } }
                @if operation.same_request_keys > 1 {
                    tr { th { "same request" } td.same-request
                        .warning[operation.suspected_new_key_retry] {
                        (format::operation_same_request(operation))
                        " (new operations of this name with this request, as the replica \
                         that answered saw them within its window)" } }
                }
                tr { th { "answered" } td.answers { (format::operation_answers(operation))
                    " (Claims answered with the stored outcome, and Pending; counted by each \
                     replica and added every few seconds, so as of then)" } }
            }
        }
        @if let Some(result) = &operation.result {
            section {
                h2 { "Result" }
                p { "content type " code { (result.content_type) } (metadata(&result.metadata)) }
                @match readable_body(result) {
                    Some(text) => pre.body { (text) },
                    None => p { code { (opaque_body(&result.body)) } },
                }
            }
        }
        @if let Some(error) = &operation.error {
            section {
                h2 { "Error" }
                table.fields {
                    tr { th { "reason" } td { (failure_reason(error.reason)) } }
                    tr { th { "code" } td { code { (error.code) } } }
                    tr { th { "message" } td { (error.message) } }
                }
                p { (metadata(&error.metadata)) }
            }
        }
        section {
            h2 { "Timeline" }
            (timeline_chart(&timeline(history, now, operation.lease_expired), operation))
        }
        section {
            h2 { "History" }
            (history_table(history))
            @if more_history { p { "Older entries beyond the first page are not shown." } }
        }
    };
    page(&title, viewer, &operation.operation_id, body)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn failure_reason(reason: i32) -> &'static str {
    proto::FailureReason::try_from(reason).map_or("UNSPECIFIED", |reason| reason.as_str_name())
}

fn metadata(map: &std::collections::HashMap<String, String>) -> String {
    let mut pairs: Vec<String> = map
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect();
    pairs.sort();
    if pairs.is_empty() {
        String::new()
    } else {
        format!(" · metadata {}", pairs.join(", "))
    }
}

const CHART_WIDTH: f64 = 1000.0;
const ROW_HEIGHT: f64 = 26.0;

/// Attempts as bars on one time axis (SVG attributes, no inline style: the
/// CSP allows none), the unknown stretches hatched behind them, markers as
/// ticks. Colours come from the stylesheet, by class.
fn timeline_chart(timeline: &Timeline, operation: &Operation) -> Markup {
    let Some((start, end)) = timeline.bounds() else {
        return html! { p { "No history." } };
    };
    let span_ms = (end - start).num_milliseconds().max(1) as f64;
    let x = |at: DateTime<Utc>| (at - start).num_milliseconds() as f64 / span_ms * CHART_WIDTH;
    let rows = timeline.spans.len().max(1) as f64;
    let height = rows * ROW_HEIGHT + 30.0;
    let refused: u64 = timeline
        .spans
        .iter()
        .map(|span| span.stale_writes_refused + span.late_writes_refused)
        .sum::<u64>()
        + timeline.stray_refusals;
    html! {
        svg.timeline viewBox=(format!("0 0 {CHART_WIDTH} {height}")) role="img"
            aria-label="Attempts over time" preserveAspectRatio="none" {
            @for gap in &timeline.gaps {
                rect.gap x=(x(gap.from)) y="0" width=((x(gap.to) - x(gap.from)).max(2.0))
                    height=(rows * ROW_HEIGHT) {
                    title { "outcome unknown for " (duration((gap.to - gap.from).num_seconds()))
                        @if gap.open { " (still unknown)" } }
                }
            }
            @for (row, span) in timeline.spans.iter().enumerate() {
                rect class=(format!("span {}", span_class(span.end)))
                    x=(x(span.started)) y=(row as f64 * ROW_HEIGHT + 4.0)
                    width=((x(span.ended) - x(span.started)).max(3.0)) height=(ROW_HEIGHT - 8.0) {
                    title { "attempt " (span.attempt) " (fence " (span.fence) "): " (span.end.as_str())
                        ", " (duration((span.ended - span.started).num_seconds())) }
                }
                text x=(x(span.started) + 4.0) y=(row as f64 * ROW_HEIGHT + 18.0) {
                    "#" (span.attempt) " " (span.end.as_str())
                }
            }
            @for marker in &timeline.markers {
                line.marker x1=(x(marker.at)) x2=(x(marker.at)) y1="0" y2=(rows * ROW_HEIGHT) {
                    title { (marker.event) ": " (marker.detail) }
                }
            }
            text x="0" y=(height - 6.0) { (start.format("%H:%M:%S").to_string()) }
            text.end x=(CHART_WIDTH) y=(height - 6.0) { (end.format("%H:%M:%S").to_string()) " UTC" }
        }
        table.spans {
            thead { tr { th { "attempt" } th { "fence" } th { "started" } th { "ran" } th { "ended" }
                th { "renewals" } th { "stale writes refused" } th { "late writes refused" } } }
            tbody {
                @for span in &timeline.spans {
                    tr {
                        td { (span.attempt) } td { (span.fence) }
                        td { (span.started.format("%Y-%m-%dT%H:%M:%SZ").to_string()) }
                        td { (duration((span.ended - span.started).num_seconds())) }
                        td class=(span_class(span.end)) { (span.end.as_str()) }
                        td { (span.renewals) } td { (span.stale_writes_refused) } td { (span.late_writes_refused) }
                    }
                }
            }
        }
        @if !timeline.gaps.is_empty() {
            p { "Outcome unknown: "
                @for (index, gap) in timeline.gaps.iter().enumerate() {
                    @if index > 0 { ", " }
                    (duration((gap.to - gap.from).num_seconds())) @if gap.open { " (still unknown)" }
                }
                "." }
        }
        p { (refused) " stale or late writes refused in all." }
        p.answers { "Claims answered without a write: "
            @if operation.replays == 0 && operation.pendings == 0 { "none counted" }
            @else { (format::operation_answers(operation)) }
            ", as of the replicas' last flush of their counts (every few seconds; a replica \
             that crashed loses at most one interval's)." }
        @if timeline.conflicting_claims_refused > 0 {
            p.conflicts { (format::conflicts(timeline.conflicting_claims_refused))
                " in this history: Claims of the key with another request, refused "
                code { "IDEMPOTENCY_KEY_REUSED" } "." }
        }
    }
}

fn span_class(end: SpanEnd) -> &'static str {
    match end {
        SpanEnd::Running => "running",
        SpanEnd::Succeeded => "succeeded",
        SpanEnd::Failed => "failed",
        SpanEnd::Retryable => "retryable",
        SpanEnd::Unknown | SpanEnd::LeaseExpired => "unknown",
        SpanEnd::TakenOver => "taken-over",
        SpanEnd::Reconciled => "reconciled",
    }
}

fn history_table(history: &[HistoryEntry]) -> Markup {
    html! {
        table.history {
            thead { tr { th { "#" } th { "event" } th { "from" } th { "to" } th { "fence" }
                th { "attempt" } th { "count" } th { "at" } th { "by" } th { "detail" } } }
            tbody {
                @for entry in history {
                    tr {
                        td { (entry.sequence) }
                        td { code { (entry.event) } }
                        td { @match state(entry.from_state) {
                            OperationState::Unspecified => "-",
                            from => (state_name(from)),
                        } }
                        td { (state_name(state(entry.to_state))) }
                        td { (entry.fence) } td { (entry.attempt) } td { (entry.count) }
                        td { (time(entry.at.as_ref())) }
                        td { @if !entry.credential.is_empty() {
                            code { (entry.credential) }
                            @if entry.admin_on_behalf { " (admin, on behalf)" }
                        } }
                        td { (format::history_detail(entry)) }
                    }
                }
            }
        }
    }
}
