//! Reconciling one operation: choose what happened, read the consequence on
//! a confirmation page, confirm. Every form carries the session's CSRF
//! token and the fence the operator saw, so a reconciliation never lands on
//! an operation that changed since it was read.

use chrono::{DateTime, Utc};
use maud::{Markup, html};

use super::layout::{Viewer, csrf_field, page};
use super::operation::deadline_passed;
use crate::console::paths;
use crate::proto::Operation;
use crate::support::format::{state, state_name, time};

/// What the operator says happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    Succeeded { content_type: String, body: String },
    Failed { code: String, message: String },
    NotApplied,
}

impl Choice {
    /// The consequence, stated before anything is done.
    pub fn consequence(&self) -> &'static str {
        match self {
            Choice::Succeeded { .. } => {
                "SUCCEEDED records this result: the caller's next Claim replays it and the effect is never executed again."
            }
            Choice::Failed { .. } => {
                "FAILED records this terminal error: the caller's next Claim replays the failure and the effect is never executed."
            }
            Choice::NotApplied => {
                "NOT_APPLIED grants one more attempt: the caller's next Claim executes the effect. \
                 Say it only when the provider shows the effect did not happen."
            }
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Choice::Succeeded { .. } => "succeeded",
            Choice::Failed { .. } => "failed",
            Choice::NotApplied => "not_applied",
        }
    }
}

fn summary(tenant: &str, operation: &Operation) -> Markup {
    let scope = operation.scope.clone().unwrap_or_default();
    html! {
        table.fields {
            @if !tenant.is_empty() { tr { th { "tenant" } td { (tenant) } } }
            tr { th { "operation" } td { (scope.operation) } }
            tr { th { "key" } td { code { (scope.key) } } }
            tr { th { "state" } td { (state_name(state(operation.state))) @if operation.lease_expired { " (lease expired)" } } }
            tr { th { "attempt" } td { (operation.attempt) " of " (operation.max_attempts) } }
            tr { th { "fence" } td { (operation.fence) } }
            tr { th { "last attempt's deadline" } td { (time(operation.attempt_deadline_at.as_ref())) } }
        }
    }
}

fn action(operation: &Operation, tenant: &str) -> String {
    paths::reconcile(&operation.operation_id, tenant)
}

/// The choice: three forms, each stating its consequence.
pub fn choose_page(
    viewer: &Viewer,
    tenant: &str,
    operation: &Operation,
    now: DateTime<Utc>,
) -> Markup {
    let hidden = html! {
        (csrf_field(viewer))
        input type="hidden" name="expected_fence" value=(operation.fence);
        input type="hidden" name="step" value="review";
    };
    let body = html! {
        (summary(tenant, operation))
        p { "First look the effect up at the provider by the operation's reference. Then say what happened:" }
        @if deadline_passed(operation, now) != Some(true) {
            p.note { "FAILED and NOT_APPLIED are accepted only once the last attempt's deadline has passed ("
                (time(operation.attempt_deadline_at.as_ref())) "): until then the attempt may still be "
                "applying the effect, and only SUCCEEDED can be known for sure." }
        }
        div.choices {
            form.choice method="post" action=(action(operation, tenant)) {
                (hidden)
                input type="hidden" name="resolution" value="succeeded";
                h2 { "It happened" }
                p { (Choice::Succeeded { content_type: String::new(), body: String::new() }.consequence()) }
                label { "Content type" input type="text" name="content_type" value="application/json" required; }
                label { "Result" textarea name="body" rows="4" {} }
                button type="submit" { "Review SUCCEEDED…" }
            }
            form.choice method="post" action=(action(operation, tenant)) {
                (hidden)
                input type="hidden" name="resolution" value="failed";
                h2 { "It failed" }
                p { (Choice::Failed { code: String::new(), message: String::new() }.consequence()) }
                label { "Code" input type="text" name="code" required; }
                label { "Message" input type="text" name="message"; }
                button type="submit" { "Review FAILED…" }
            }
            form.choice method="post" action=(action(operation, tenant)) {
                (hidden)
                input type="hidden" name="resolution" value="not_applied";
                h2 { "It did not happen" }
                p { (Choice::NotApplied.consequence()) }
                button type="submit" { "Review NOT_APPLIED…" }
            }
        }
    };
    page("Reconcile", viewer, &operation.operation_id, body)
}

/// The confirmation: what will happen, and one button that does it.
pub fn review_page(
    viewer: &Viewer,
    tenant: &str,
    operation: &Operation,
    choice: &Choice,
) -> Markup {
    let body = html! {
        (summary(tenant, operation))
        section.confirm {
            h2 { "Confirm: " (choice.name().to_uppercase()) }
            p.consequence { (choice.consequence()) }
            @match choice {
                Choice::Succeeded { content_type, body } => {
                    p { "Result (" code { (content_type) } "):" } pre.body { (body) }
                }
                Choice::Failed { code, message } => {
                    p { "Error " code { (code) } ": " (message) }
                }
                Choice::NotApplied => {}
            }
            form method="post" action=(action(operation, tenant)) {
                (csrf_field(viewer))
                input type="hidden" name="expected_fence" value=(operation.fence);
                input type="hidden" name="step" value="apply";
                input type="hidden" name="resolution" value=(choice.name());
                @match choice {
                    Choice::Succeeded { content_type, body } => {
                        input type="hidden" name="content_type" value=(content_type);
                        input type="hidden" name="body" value=(body);
                    }
                    Choice::Failed { code, message } => {
                        input type="hidden" name="code" value=(code);
                        input type="hidden" name="message" value=(message);
                    }
                    Choice::NotApplied => {}
                }
                button.danger type="submit" { "Reconcile as " (choice.name().to_uppercase()) }
                " "
                a href=(paths::operation(&operation.operation_id, tenant)) { "Cancel" }
            }
        }
    };
    page(
        "Confirm reconciliation",
        viewer,
        &operation.operation_id,
        body,
    )
}
