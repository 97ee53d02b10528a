//! Holds: the ones in force (ListHolds, scoped as for any caller: a
//! reconciler's own tenant's, an admin's every tenant's), and for an admin
//! the forms that set and release them (Hold, Release), each with the
//! session's CSRF token and a required reason, which the audit log keeps.

use maud::{Markup, html};

use super::layout::{Viewer, csrf_field, page};
use crate::proto::Hold;
use crate::support::format::time;

/// What a hold covers, in words.
pub fn held_name(hold: &Hold) -> &str {
    if hold.operation.is_empty() {
        "whole tenant"
    } else {
        &hold.operation
    }
}

/// A hold's retry_after, as a page shows it.
fn retry_after(hold: &Hold) -> String {
    hold.retry_after.as_ref().map_or_else(
        || "-".to_owned(),
        |wait| {
            let millis = wait.seconds * 1000 + i64::from(wait.nanos) / 1_000_000;
            if millis % 1000 == 0 {
                format!("{}s", millis / 1000)
            } else {
                format!("{millis}ms")
            }
        },
    )
}

/// The holds of one tenant that stop new owners of `operation`: its own
/// name's and the whole tenant's. `holds` must be that tenant's only.
pub fn holds_on<'a>(holds: &'a [Hold], operation: &str) -> Vec<&'a Hold> {
    holds
        .iter()
        .filter(|hold| hold.operation.is_empty() || hold.operation == operation)
        .collect()
}

/// The operation page's notice for each hold that applies to it.
pub fn held_notice(holds: &[&Hold], operation: &str) -> Markup {
    html! {
        @for hold in holds {
            p.held role="status" {
                strong { "Held. " }
                "New owners of "
                @if hold.operation.is_empty() {
                    "every operation of tenant " (hold.tenant) " (" (operation) " among them)"
                } @else {
                    code { (hold.operation) }
                }
                " are held since " (time(hold.held_at.as_ref())) " by " (hold.held_by) ": "
                q.reason { (hold.reason) }
                "; replays and reconciliation go on. "
                a href="/holds" { "Holds →" }
            }
        }
    }
}

/// The operation page's notices, from its tenant's holds as read; a read
/// that failed is said, not hidden (a hold makes callers wait).
pub fn operation_holds(read: Result<&[Hold], &str>, operation: &str) -> Markup {
    match read {
        Ok(holds) => held_notice(&holds_on(holds, operation), operation),
        Err(problem) => html! {
            p.held role="status" { "Whether this operation is held could not be read: " (problem) }
        },
    }
}

/// The dashboard's line: how many holds are in force, linked.
pub fn holds_banner(holds: &[Hold]) -> Markup {
    html! {
        @if !holds.is_empty() {
            section.held-banner role="status" {
                p {
                    strong.holds-count data-count=(holds.len()) { (holds.len()) }
                    @if holds.len() == 1 { " hold is" } @else { " holds are" }
                    " in force: callers of a held name are told to wait (Pending, HELD) and no new owner is made. "
                    a href="/holds" { "See the holds →" }
                }
            }
        }
    }
}

fn hold_form(viewer: &Viewer) -> Markup {
    html! {
        form.hold method="post" action="/holds" {
            (csrf_field(viewer))
            h2 { "Hold" }
            p.note { "No new owners of the name (or of the whole tenant) until released: held callers are told Pending with the retry_after below and claim again; replays, the owners already running and reconciliation go on. Audited as "
                code { "hold.set" } ", with your credential and the reason." }
            label { "Tenant (empty: your own)" input type="text" name="tenant"; }
            fieldset {
                legend { "What" }
                label { input type="radio" name="what" value="operation" checked; " the operation name" }
                label { input type="radio" name="what" value="tenant"; " the whole tenant" }
            }
            label { "Operation name" input type="text" name="operation" placeholder="payments.charge"; }
            label { "Retry after, seconds (empty: 30)" input type="number" name="retry_after_seconds" min="1" max="3600"; }
            label { "Reason (required)" input type="text" name="reason" required maxlength="512"; }
            button.danger type="submit" { "Hold" }
        }
    }
}

fn release_form(viewer: &Viewer, hold: &Hold) -> Markup {
    html! {
        form.release method="post" action="/holds/release" {
            (csrf_field(viewer))
            input type="hidden" name="tenant" value=(hold.tenant);
            input type="hidden" name="operation" value=(hold.operation);
            input type="text" name="reason" required maxlength="512" placeholder="why (required)" aria-label="Reason for the release";
            button type="submit" { "Release" }
        }
    }
}

pub fn holds_page(viewer: &Viewer, holds: &[Hold], notice: Option<&str>) -> Markup {
    let whose = if viewer.admin {
        "every tenant"
    } else {
        "this tenant"
    };
    let body = html! {
        @if let Some(notice) = notice { p.notice role="status" { (notice) } }
        section {
            p.note { "The holds in force, for " (whose) ", as the API lists them (ListHolds). While a name is held, a Claim that would make a new owner is told Pending ("
                code { "PENDING_REASON_HELD" } ") and writes nothing; replays, owners already running, Lookup and Reconcile go on." }
            @if holds.is_empty() {
                p.empty { "No holds in force." }
            } @else {
                table.holds {
                    thead { tr {
                        th { "tenant" } th { "operation" } th { "reason" } th { "retry after" }
                        th { "held at" } th { "held by" }
                        @if viewer.admin { th { "release" } }
                    } }
                    tbody {
                        @for hold in holds {
                            tr {
                                td { (hold.tenant) }
                                td { @if hold.operation.is_empty() { em { (held_name(hold)) } } @else { code { (hold.operation) } } }
                                td.reason { (hold.reason) }
                                td { (retry_after(hold)) }
                                td { (time(hold.held_at.as_ref())) }
                                td { (hold.held_by) }
                                @if viewer.admin { td { (release_form(viewer, hold)) } }
                            }
                        }
                    }
                }
            }
        }
        @if viewer.admin { section { (hold_form(viewer)) } }
    };
    page("Holds", viewer, "", body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hold(operation: &str) -> Hold {
        Hold {
            tenant: "shop".into(),
            operation: operation.into(),
            reason: "incident <42> & \"friends\"".into(),
            retry_after: Some(pbjson_types::Duration {
                seconds: 1,
                nanos: 500_000_000,
            }),
            held_at: None,
            held_by: "token:ops".into(),
        }
    }

    #[test]
    fn a_name_is_held_by_its_own_hold_or_its_whole_tenants() {
        let holds = [hold("payments.charge"), hold(""), hold("orders.ship")];
        let on = |name| {
            holds_on(&holds, name)
                .iter()
                .map(|hold| hold.operation.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(on("payments.charge"), ["payments.charge", ""]);
        assert_eq!(on("payments.refund"), [""]);
        let only_named = [hold("payments.charge")];
        assert!(holds_on(&only_named, "payments.refund").is_empty());
    }

    #[test]
    fn the_notice_names_the_hold_and_escapes_the_reason() {
        let whole = hold("");
        let named = hold("payments.charge");
        let text = held_notice(&[&named, &whole], "payments.charge").into_string();
        assert!(
            text.contains(
                "New owners of <code>payments.charge</code> are held since - by token:ops"
            ),
            "{text}"
        );
        assert!(text.contains("every operation of tenant shop"), "{text}");
        assert!(
            text.contains("incident &lt;42&gt; &amp; &quot;friends&quot;"),
            "{text}"
        );
        assert!(!text.contains("<42>"), "{text}");
        assert_eq!(retry_after(&whole), "1500ms");
    }
}
