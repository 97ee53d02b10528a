//! Diagnose (issue 23): what the evidence a caller brings means, beside what
//! idemd holds, and the next safe moves. Pure, as the transitions are: the
//! service reads the facts, this module decides, the handler answers.
//!
//! - [`secrets`]: evidence that carries a secret is refused first.
//! - [`map`]: the diagnosis map, one arm per cause, and escalations.
//! - [`confidence`]: the score, from independent observations.
//! - [`authority`]: where the caller's scopes and constraints stop a plan.
//! - [`handoff`]: the record for whoever takes over.

pub mod authority;
pub mod confidence;
pub mod evidence;
pub mod facts;
pub mod handoff;
pub mod map;
pub mod report;
pub mod secrets;
#[cfg(test)]
mod tests;

pub use authority::{Stop, check};
pub use evidence::{
    Authority, Candidates, Constraints, DiagnoseCommand, Evidence, Granted, Mode, ProviderEvidence,
    ProviderFinding, Symptom,
};
pub use facts::Facts;
pub use report::{
    Cause, Check, Confidence, Diagnosis, Handoff, Layer, Level, MoveKind, Needs, Observation,
    Report, Source, Step, Verdict,
};
pub use secrets::{SecretKind, find_secret, refuse_secrets};

/// Diagnoses one operation: the map, the confidence of what it found, and
/// the handoff record. The caller's authority is checked apart
/// ([`check`]), since an escalation is answered whatever it is.
pub fn diagnose(facts: &Facts<'_>, evidence: &Evidence, candidates: &Candidates) -> Report {
    let finding = map::find(facts, evidence, candidates);
    let verdict = if finding.missing.is_empty() {
        Verdict::Diagnosed
    } else {
        Verdict::Escalate
    };
    let handoff = handoff::handoff(facts, evidence, finding.matched_mode, candidates);
    Report {
        verdict,
        diagnosis: finding.diagnosis,
        also: finding.also,
        plan: finding.plan,
        verification: finding.verification,
        confidence: confidence::score(finding.observations),
        missing: finding.missing,
        handoff,
    }
}
