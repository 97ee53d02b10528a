//! The diagnosis on an operation's page: what Diagnose says the record (and
//! the evidence support staff select: what the caller saw, what the provider
//! showed) means, the plan, the checks and the observations behind the
//! confidence. Only enumerated evidence is taken, by GET: no free text, so
//! nothing a caller pasted ends up in a URL or a log.

use maud::{Markup, html};
use serde::Deserialize;

use crate::console::calls::Refusal;
use crate::console::paths;
use crate::proto;

/// What support staff selected, from the page's form.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct EvidenceQuery {
    #[serde(default)]
    pub symptom: String,
    #[serde(default)]
    pub provider: String,
    /// Seconds since the provider lookup was sent. Text: the page's query
    /// is read flattened into another, and serde reads flattened fields as
    /// strings only.
    #[serde(default)]
    pub looked: String,
}

const SYMPTOMS: [(&str, &str, proto::Symptom); 8] = [
    ("", "nothing in particular", proto::Symptom::Unspecified),
    (
        "timeout",
        "the call timed out before any answer",
        proto::Symptom::TimeoutBeforeResponse,
    ),
    (
        "concurrent",
        "sent more than once at a time",
        proto::Symptom::ConcurrentDuplicates,
    ),
    (
        "stuck",
        "keeps answering Pending",
        proto::Symptom::StuckInProgress,
    ),
    (
        "duplicate",
        "the effect happened twice",
        proto::Symptom::DuplicateEffect,
    ),
    (
        "conflicts",
        "often refused as key reuse",
        proto::Symptom::FrequentConflicts,
    ),
    (
        "growing",
        "the store keeps growing",
        proto::Symptom::StoreGrowing,
    ),
    (
        "new-key",
        "the caller made a new key to retry",
        proto::Symptom::Unspecified,
    ),
];

const PROVIDER: [(&str, &str, proto::ProviderFinding); 4] = [
    ("", "not looked", proto::ProviderFinding::Unspecified),
    (
        "found",
        "the effect, once",
        proto::ProviderFinding::EffectFound,
    ),
    ("not-found", "no effect", proto::ProviderFinding::NoEffect),
    (
        "twice",
        "the effect more than once",
        proto::ProviderFinding::EffectFoundMoreThanOnce,
    ),
];

impl EvidenceQuery {
    /// The seconds given, 0 when none or not a number (the page offers a
    /// number field, at most a day).
    fn looked_seconds(&self) -> u32 {
        self.looked.trim().parse::<u32>().unwrap_or(0).min(86_400)
    }

    /// The Diagnose request for the operation and this evidence.
    pub fn request(&self, operation_id: &str, tenant: &str) -> proto::DiagnoseRequest {
        let symptom = SYMPTOMS
            .iter()
            .find(|(name, _, _)| *name == self.symptom)
            .map_or(proto::Symptom::Unspecified, |(_, _, symptom)| *symptom);
        let provider = PROVIDER
            .iter()
            .find(|(name, _, _)| *name == self.provider)
            .map_or(proto::ProviderFinding::Unspecified, |(_, _, finding)| {
                *finding
            });
        let looked =
            (provider != proto::ProviderFinding::Unspecified).then(|| pbjson_types::Duration {
                seconds: i64::from(self.looked_seconds()),
                nanos: 0,
            });
        proto::DiagnoseRequest {
            target: Some(proto::diagnose_request::Target::OperationId(
                operation_id.to_owned(),
            )),
            tenant: tenant.to_owned(),
            evidence: Some(proto::DiagnoseEvidence {
                symptom: symptom.into(),
                new_key_for_retry: self.symptom == "new-key",
                provider_finding: provider.into(),
                provider_looked_ago: looked,
                ..Default::default()
            }),
            context: "the console's operation page".to_owned(),
            ..Default::default()
        }
    }
}

fn enum_name(debug: impl std::fmt::Debug) -> String {
    format!("{debug:?}")
}

/// The section: the form, then the answer or why there is none.
pub fn section(
    answer: &Result<proto::DiagnoseResponse, Refusal>,
    query: &EvidenceQuery,
    operation_id: &str,
    tenant: &str,
) -> Markup {
    html! {
        section.diagnosis {
            h2 { "Diagnosis" }
            form.evidence method="get" action=(paths::operation(operation_id, tenant)) {
                @if !tenant.is_empty() { input type="hidden" name="tenant" value=(tenant); }
                label { "What the caller saw "
                    select name="symptom" {
                        @for (name, title, _) in SYMPTOMS {
                            option value=(name) selected[query.symptom == name] { (title) }
                        }
                    }
                }
                label { " The provider showed "
                    select name="provider" {
                        @for (name, title, _) in PROVIDER {
                            option value=(name) selected[query.provider == name] { (title) }
                        }
                    }
                }
                label { " looked up "
                    input type="number" name="looked" min="0" max="86400"
                        value=(query.looked_seconds()) aria-label="seconds ago";
                    " s ago"
                }
                " " button type="submit" { "Diagnose" }
            }
            @match answer {
                Ok(response) => (answered(response)),
                Err(refusal) => (stopped(refusal)),
            }
        }
    }
}

fn answered(response: &proto::DiagnoseResponse) -> Markup {
    let diagnosis = response.diagnosis.clone().unwrap_or_default();
    let confidence = response.confidence.clone().unwrap_or_default();
    html! {
        p.diagnosis-headline data-verdict=(enum_name(response.verdict()))
            data-cause=(enum_name(diagnosis.cause())) {
            strong { (enum_name(diagnosis.cause())) } " (" (enum_name(diagnosis.layer())) "), "
            "confidence " (confidence.score) " " (enum_name(confidence.level()))
        }
        p { (diagnosis.meaning) }
        @for also in &response.also {
            p.also { "Also: " (enum_name(also.cause())) ": " (also.meaning) }
        }
        @if !response.missing.is_empty() {
            div.escalate role="alert" {
                p { strong { "Escalate." } " The evidence cannot support a move; missing:" }
                ul { @for missing in &response.missing { li { (missing) } } }
            }
        }
        h3 { "Plan" }
        ol.plan {
            @for step in &response.plan {
                li data-move=(enum_name(step.kind())) {
                    (step.action)
                    @if !step.needs_scope.is_empty() { " " span.needs { "needs " (step.needs_scope) } }
                    @if !step.reversible { " " span.irreversible { "cannot be undone" } }
                }
            }
        }
        @if !response.verification.is_empty() {
            h3 { "Verification" }
            table.fields {
                tr { th { "check" } th { "if it holds" } th { "if not" } }
                @for check in &response.verification {
                    tr { td { (check.check) } td { (check.if_true) } td { (check.if_false) } }
                }
            }
        }
        details {
            summary { "Observations behind the confidence" }
            ul {
                @for observation in &confidence.observations {
                    li { code { (format!("{:+}", observation.weight)) } " "
                        (enum_name(observation.source())) ": " (observation.detail) }
                }
            }
        }
        @if let Some(handoff) = &response.handoff {
            details {
                summary { "Handoff record" }
                table.fields {
                    tr { th { "fingerprint mode" } td { (handoff.fingerprint_mode) } }
                    tr { th { "policy" } td { (handoff.policy) } }
                    tr { th { "effect" } td { (handoff.effect_atomicity) } }
                    tr { th { "effect count" } td { (handoff.effect_count_evidence) } }
                    @for line in &handoff.history_summary { tr { th { "history" } td { (line) } } }
                }
            }
        }
    }
}

/// A plan beyond the signed-in credential: the cause still, and whose move
/// it is.
fn stopped(refusal: &Refusal) -> Markup {
    html! {
        p.diagnosis-stopped data-reason=(refusal.reason.as_deref().unwrap_or_default()) {
            @match refusal.reason.as_deref() {
                Some(reason) if reason.starts_with("PLAN_") => {
                    "The next move is beyond this credential (" code { (reason) } "): "
                    (refusal.message) ". Hand it to someone who holds that scope."
                }
                _ => { "No diagnosis: " (refusal.message) }
            }
        }
    }
}
