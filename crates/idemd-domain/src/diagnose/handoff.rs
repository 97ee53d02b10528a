//! The handoff record: what a person or agent taking the operation over
//! needs, in one place — the scope, the canonical payload definition, the
//! state and its history by attempt, what is known about the effect's
//! atomicity and reconciliation, the policy in force, and the evidence of
//! how many effects happened.

use std::collections::BTreeMap;

use super::evidence::{Candidates, Evidence, Mode, ProviderFinding};
use super::facts::Facts;
use super::map::span;
use super::report::Handoff;
use crate::model::{HistoryEvent, OnFailed, State};

pub fn handoff(
    facts: &Facts<'_>,
    evidence: &Evidence,
    matched: Option<Mode>,
    candidates: &Candidates,
) -> Handoff {
    let fingerprint_mode = match (matched, candidates.is_empty()) {
        (Some(mode), _) => mode.as_str().to_owned(),
        (None, true) => "unknown".to_owned(),
        (None, false) => "none of the request's modes matched".to_owned(),
    };
    let Some(record) = facts.record else {
        return Handoff {
            fingerprint_mode,
            history_summary: Vec::new(),
            effect_atomicity: "No operation is stored under this scope: idemd granted no \
                               owner, so it made no execution."
                .to_owned(),
            policy: String::new(),
            effect_count_evidence: provider_line(evidence).unwrap_or_default(),
        };
    };
    let mut by_attempt: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for entry in facts.history {
        let event = if entry.count > 1 {
            format!("{}×{}", entry.event, entry.count)
        } else {
            entry.event.clone()
        };
        by_attempt
            .entry(entry.attempt)
            .or_default()
            .push(format!("{event} (fence {})", entry.fence));
    }
    let history_summary = by_attempt
        .into_iter()
        .map(|(attempt, events)| format!("attempt {attempt}: {}", events.join(", ")))
        .collect();
    let reconciled = facts.count(HistoryEvent::Reconciled);
    let effect_atomicity = format!(
        "The effect lands outside idemd (at a provider): the record and the effect do not \
         commit together. idemd grants one owner at a time, fenced; an attempt's effect may \
         be in flight until its deadline plus the clock margin{}. {}",
        facts
            .settles_at()
            .map(|settles| format!(
                " (for the last attempt: {})",
                settles.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ))
            .unwrap_or_default(),
        match record.state {
            State::Unknown | State::InProgress if record.lease_expired(facts.now) => {
                "Its outcome is unknown: it needs reconciliation from the provider.".to_owned()
            }
            State::Unknown => {
                "Its outcome is unknown: it needs reconciliation from the provider.".to_owned()
            }
            _ if reconciled > 0 => format!("Reconciled {reconciled} time(s)."),
            _ => "It was never reconciled.".to_owned(),
        }
    );
    let policy = format!(
        "attempts {} of {}; lease {}; attempt duration {}; retention {}{}{}; on failure: {}",
        record.attempt,
        record.max_attempts,
        span(record.lease_duration),
        span(record.max_attempt_duration),
        span(record.retention),
        record
            .operation_deadline_at
            .map(|deadline| format!(
                "; operation deadline {}",
                deadline.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ))
            .unwrap_or_default(),
        match facts.retention_ceiling {
            Some(ceiling) => format!(" (policy ceiling {})", span(ceiling)),
            None => " (no policy ceiling)".to_owned(),
        },
        match record.on_failed {
            OnFailed::Replay => "replay",
            OnFailed::NewAttempt => "new attempt",
        }
    );
    let mut counts = vec![format!(
        "{} owner(s) granted (each may have executed once); {} takeover(s); {} reconciliation(s)",
        facts.owners(),
        facts.count(HistoryEvent::TakenOver),
        reconciled
    )];
    counts.push(format!(
        "{} operation(s) of this tenant and name carried this request lately (this replica's \
         window)",
        facts.same_request_keys
    ));
    if let Some(provider) = provider_line(evidence) {
        counts.push(provider);
    }
    Handoff {
        fingerprint_mode,
        history_summary,
        effect_atomicity,
        policy,
        effect_count_evidence: counts.join("; "),
    }
}

fn provider_line(evidence: &Evidence) -> Option<String> {
    evidence.provider.map(|provider| {
        format!(
            "the provider, as the caller reports: {}",
            match provider.finding {
                ProviderFinding::EffectFound => "the effect once",
                ProviderFinding::NoEffect => "no effect",
                ProviderFinding::EffectFoundMoreThanOnce => "the effect more than once",
            }
        )
    })
}
