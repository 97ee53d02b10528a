//! Operations as rows: a filter's results, and the unresolved queue as a
//! work queue (oldest first, what may be done to each).

use chrono::{DateTime, Utc};
use maud::{Markup, html};

use super::layout::{Viewer, page};
use super::operation::{deadline_passed, unresolved};
use crate::console::conflicts::{FILTER, Group, WINDOW_HOURS, group_filter};
use crate::console::paths;
use crate::proto::Operation;
use crate::support::format::{age, state, state_name, time};

/// Where the next page is, as a link's query string.
pub struct NextPage(pub Option<String>);

/// An admin's rows name their tenant (ListOperations fills it for admins
/// only), and the link carries it.
fn operation_link(operation: &Operation) -> String {
    paths::operation(&operation.operation_id, &operation.tenant)
}

fn next_link(next: &NextPage) -> Markup {
    html! {
        @if let Some(query) = &next.0 {
            p { a.next href=(query) { "Next page →" } }
        }
    }
}

pub fn operations_page(
    viewer: &Viewer,
    filter: &str,
    operations: &[Operation],
    next: &NextPage,
    now: DateTime<Utc>,
) -> Markup {
    let body = html! {
        form.filter method="get" action="/operations" {
            label for="filter" { "Filter" }
            input #filter type="text" name="filter" value=(filter)
                placeholder="state:unknown op:payments.* age>10m attempts>=2 is:taken_over is:conflicted last:reconciled";
            select name="order" aria-label="Order" {
                option value="newest" { "newest first" }
                option value="oldest" { "oldest first" }
            }
            button type="submit" { "List" }
        }
        @if operations.is_empty() {
            p.empty { "No operation matches." }
        } @else {
            table.operations {
                thead { tr {
                    @if viewer.admin { th { "tenant" } }
                    th { "operation" } th { "key" } th { "state" } th { "attempt" } th { "age" } th { "updated" }
                } }
                tbody {
                    @for operation in operations {
                        @let scope = operation.scope.clone().unwrap_or_default();
                        @let state = state_name(state(operation.state));
                        tr {
                            @if viewer.admin { td { (operation.tenant) } }
                            td { a href=(operation_link(operation)) { (scope.operation) } }
                            td { code { (scope.key) } }
                            td.state data-state=(state) { (state) @if operation.lease_expired { " (lease expired)" } }
                            td { (operation.attempt) "/" (operation.max_attempts) }
                            td { (age(operation.created_at.as_ref(), now)) }
                            td { (time(operation.updated_at.as_ref())) }
                        }
                    }
                }
            }
        }
        (next_link(next))
    };
    page("Operations", viewer, filter, body)
}

pub fn unresolved_page(
    viewer: &Viewer,
    operations: &[Operation],
    next: &NextPage,
    now: DateTime<Utc>,
) -> Markup {
    let body = html! {
        p { "Operations whose outcome is unknown — reported UNKNOWN, or whose owner stopped renewing — oldest first. "
            "Each waits for someone to look the effect up at the provider and say what happened." }
        @if operations.is_empty() {
            p.empty { "Nothing to reconcile." }
        } @else {
            table.queue {
                thead { tr {
                    @if viewer.admin { th { "tenant" } }
                    th { "operation" } th { "key" } th { "state" } th { "attempts spent" } th { "age" }
                    th { "last attempt's deadline" } th { "NOT_APPLIED" } th {}
                } }
                tbody {
                    @for operation in operations {
                        @let scope = operation.scope.clone().unwrap_or_default();
                        @let state = state_name(state(operation.state));
                        @let passed = deadline_passed(operation, now);
                        tr {
                            @if viewer.admin { td { (operation.tenant) } }
                            td { a href=(operation_link(operation)) { (scope.operation) } }
                            td { code { (scope.key) } }
                            td.state data-state=(state) { (state) @if operation.lease_expired { " (lease expired)" } }
                            td { (operation.attempt) " of " (operation.max_attempts) }
                            td { (age(operation.created_at.as_ref(), now)) }
                            td { (time(operation.attempt_deadline_at.as_ref()))
                                @match passed { Some(true) => " (passed)", Some(false) => " (not yet)", None => "" } }
                            td { @match passed {
                                Some(true) | None => "allowed",
                                Some(false) => "not yet: the attempt may still be running",
                            } }
                            td { @if unresolved(operation) {
                                a.button href=(paths::reconcile(&operation.operation_id, &operation.tenant)) { "Reconcile…" }
                            } }
                        }
                    }
                }
            }
        }
        (next_link(next))
    };
    page("Unresolved", viewer, "state:unresolved", body)
}

/// Conflicts refused per operation name, per hour over the last day, from
/// the database ([`crate::console::conflicts`]).
pub fn conflicts_page(viewer: &Viewer, groups: &[Group], scope_note: &str) -> Markup {
    let body = html! {
        p { "Claims refused with " code { "IDEMPOTENCY_KEY_REUSED" } ": the same key with another payload. "
            "Frequent conflicts mean a caller reuses keys across intents, or its payload normalisation is unstable "
            "(a timestamp or a random id inside the fingerprinted payload)." }
        p.note { (scope_note) }
        @if groups.is_empty() {
            p.empty { "No refused conflicting Claims in the last " (WINDOW_HOURS) " hours." }
        } @else {
            table.conflicts {
                thead { tr {
                    @if viewer.admin { th { "tenant" } }
                    th { "operation" } th { "last " (WINDOW_HOURS) " h, per hour" }
                    th { "refused" } th { "keys" } th { "last at" } } }
                tbody {
                    @for group in groups {
                        @let peak = group.per_hour.iter().copied().max().unwrap_or(1).max(1) as f64;
                        tr {
                            @if viewer.admin { td { (group.tenant) } }
                            td { a href=(paths::filtered(&group_filter(group))) { (group.operation) } }
                            td {
                                svg.spark viewBox="0 0 120 20" role="img" aria-label="refusals per hour" {
                                    @for (hour, count) in group.per_hour.iter().enumerate() {
                                        @let height = *count as f64 / peak * 20.0;
                                        rect x=(hour * 5) y=(20.0 - height) width="4" height=(height) {}
                                    }
                                }
                            }
                            td { (group.refusals) } td { (group.operations) }
                            td { (group.last_at.format("%Y-%m-%dT%H:%M:%SZ").to_string()) }
                        }
                    }
                }
            }
        }
    };
    page("Conflicts", viewer, FILTER, body)
}
