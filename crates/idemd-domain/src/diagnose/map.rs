//! The diagnosis map: what the evidence, beside the record, points to, and
//! the next safe moves. One arm per line of the map:
//!
//! | evidence | cause | first move |
//! |---|---|---|
//! | timeout before a response | ambiguous outcome | look up; answer with what is stored |
//! | concurrent duplicates | race | do not execute; wait, then replay |
//! | same key, another request | payload conflict | do not retry it; a new intent needs a new key |
//! | retry after a terminal validation, authorisation or policy failure | client defect | do not retry unchanged |
//! | in progress, no live owner | stuck in progress | let the lease expire, reconcile before any new attempt |
//! | the same request under many keys | new key per retry | one key per intent |
//! | frequent conflicts | unstable keys or payload | key per intent; canonical payload |
//! | a store that keeps growing | unbounded retention | a retention ceiling in the policy |
//!
//! Contradictions (the provider against the record) and evidence too old or
//! too early to support a move are escalations: the plan is to look and hand
//! over, and `missing` names what would settle it.

use chrono::{DateTime, TimeDelta, Utc};

use super::evidence::{
    Candidates, Evidence, Mode, ProviderEvidence, ProviderFinding, Symptom, status_code,
};
use super::facts::Facts;
use super::report::{Cause, Check, Diagnosis, Layer, Observation, Source, Step};
use crate::model::{FailureReason, Fingerprint, HistoryEvent, State};

/// From this many refused Claims of one operation on, conflicts are frequent.
pub const FREQUENT_CONFLICTS: u64 = 3;
/// Evidence older than this supports no move.
pub const EVIDENCE_MAX_AGE: TimeDelta = TimeDelta::hours(24);
/// Retention this long, with no policy ceiling, keeps a store growing.
pub const LONG_RETENTION: TimeDelta = TimeDelta::days(30);

/// What the map found, before scoring and the handoff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub diagnosis: Diagnosis,
    pub also: Vec<Diagnosis>,
    pub plan: Vec<Step>,
    pub verification: Vec<Check>,
    pub observations: Vec<Observation>,
    /// Non-empty: escalate.
    pub missing: Vec<String>,
    /// Which mode matched the caller's request, if it did.
    pub matched_mode: Option<Mode>,
}

impl Finding {
    fn new(cause: Cause, layer: Layer, meaning: impl Into<String>) -> Self {
        Finding {
            diagnosis: diagnosis(cause, layer, meaning),
            also: Vec::new(),
            plan: Vec::new(),
            verification: Vec::new(),
            observations: Vec::new(),
            missing: Vec::new(),
            matched_mode: None,
        }
    }

    fn step(mut self, step: Step) -> Self {
        self.plan.push(step);
        self
    }

    fn check(mut self, check: Check) -> Self {
        self.verification.push(check);
        self
    }

    fn saw(mut self, observation: Observation) -> Self {
        self.observations.push(observation);
        self
    }

    /// Turns the finding into an escalation: look, then hand over.
    fn escalate(mut self, missing: impl Into<String>) -> Self {
        self.missing.push(missing.into());
        self
    }
}

fn diagnosis(cause: Cause, layer: Layer, meaning: impl Into<String>) -> Diagnosis {
    Diagnosis {
        cause,
        layer,
        meaning: meaning.into(),
    }
}

/// A duration for people: "1h 2m", "45s", "0s".
pub fn span(delta: TimeDelta) -> String {
    let seconds = delta.num_seconds().max(0);
    let (days, hours, minutes, seconds) = (
        seconds / 86_400,
        seconds % 86_400 / 3_600,
        seconds % 3_600 / 60,
        seconds % 60,
    );
    let parts: Vec<String> = [(days, "d"), (hours, "h"), (minutes, "m"), (seconds, "s")]
        .into_iter()
        .filter(|(amount, _)| *amount > 0)
        .take(2)
        .map(|(amount, unit)| format!("{amount}{unit}"))
        .collect();
    if parts.is_empty() {
        "0s".to_owned()
    } else {
        parts.join(" ")
    }
}

fn at(moment: DateTime<Utc>) -> String {
    moment.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// How the caller's request compares with the stored one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Request {
    NotGiven,
    Same(Mode),
    Different,
}

fn compare(stored: Option<Fingerprint>, candidates: &Candidates) -> Request {
    match stored {
        _ if candidates.is_empty() => Request::NotGiven,
        None => Request::NotGiven,
        Some(stored) => candidates
            .iter()
            .find(|(_, fingerprint)| *fingerprint == stored)
            .map_or(Request::Different, |(mode, _)| Request::Same(*mode)),
    }
}

/// The map. `candidates` are the fingerprints of the request the caller
/// would send now (empty when it gave none).
pub fn find(facts: &Facts<'_>, evidence: &Evidence, candidates: &Candidates) -> Finding {
    let request = compare(facts.fingerprint(), candidates);
    let mut finding = choose(facts, evidence, request);
    if let Request::Same(mode) = request {
        finding.matched_mode = Some(mode);
        // The conflict arms weigh the comparison themselves.
        if !finding
            .observations
            .iter()
            .any(|observation| observation.source == Source::Fingerprint)
        {
            finding.observations.push(Observation::supporting(
                Source::Fingerprint,
                format!(
                    "the request the caller would send now matches the stored fingerprint \
                     (mode {}): the same intent",
                    mode.as_str()
                ),
            ));
        }
    }
    stale(facts, evidence, &mut finding);
    if !finding.missing.is_empty() {
        finding.plan.retain(|step| {
            matches!(
                step.kind,
                super::report::MoveKind::Look | super::report::MoveKind::Wait
            )
        });
        finding.plan.push(Step::hand_over(
            "Stop here and hand the handoff record to someone who can settle what is missing; \
             do not execute, retry or reconcile on this evidence",
        ));
    }
    finding
}

/// Evidence too old to describe the operation now.
fn stale(facts: &Facts<'_>, evidence: &Evidence, finding: &mut Finding) {
    let age = facts.now - evidence.observed_at;
    if evidence.symptom != Symptom::Unspecified && age > EVIDENCE_MAX_AGE {
        finding.missing.push(format!(
            "a fresh observation: this one is {} old (more than {})",
            span(age),
            span(EVIDENCE_MAX_AGE)
        ));
    }
    if let Some(provider) = evidence.provider
        && facts.now - provider.looked_at > EVIDENCE_MAX_AGE
    {
        finding.missing.push(format!(
            "a fresh provider lookup: this one is {} old",
            span(facts.now - provider.looked_at)
        ));
    }
}

fn choose(facts: &Facts<'_>, evidence: &Evidence, request: Request) -> Finding {
    let Some(record) = facts.record else {
        return nothing_stored(facts, evidence);
    };
    let duplicate_effect = evidence.symptom == Symptom::DuplicateEffect
        || evidence
            .provider
            .is_some_and(|provider| provider.finding == ProviderFinding::EffectFoundMoreThanOnce);
    let new_keys = evidence.new_key_for_retry || facts.suspected_new_key_retry;
    if new_keys {
        return new_key_per_retry(facts, evidence, duplicate_effect);
    }
    if duplicate_effect {
        return duplicate(facts, evidence);
    }
    if request == Request::Different || reported(evidence, "IDEMPOTENCY_KEY_REUSED") {
        return conflict(facts, evidence, request);
    }
    if evidence.symptom == Symptom::FrequentConflicts || record.conflicts >= FREQUENT_CONFLICTS {
        return unstable(facts, evidence, request);
    }
    if evidence.symptom == Symptom::StoreGrowing {
        return retention(facts);
    }
    if let Symptom::ErrorStatus { code, reason } = &evidence.symptom
        && let Some(finding) = refused_call(facts, *code, reason)
    {
        return finding;
    }
    by_state(facts, evidence)
}

fn reported(evidence: &Evidence, wanted: &str) -> bool {
    matches!(&evidence.symptom, Symptom::ErrorStatus { reason, .. } if reason == wanted)
}

fn caller_report(evidence: &Evidence) -> Option<Observation> {
    let said = match &evidence.symptom {
        Symptom::Unspecified => return None,
        Symptom::TimeoutBeforeResponse => "the call timed out before any answer".to_owned(),
        Symptom::ErrorStatus { code, reason } if reason.is_empty() => {
            format!("the call was answered with status {code}")
        }
        Symptom::ErrorStatus { code, reason } => {
            format!("the call was answered with status {code} ({reason})")
        }
        Symptom::ConcurrentDuplicates => "the request was sent more than once at a time".into(),
        Symptom::StuckInProgress => "the operation keeps answering Pending".into(),
        Symptom::DuplicateEffect => "the effect seems to have happened twice".into(),
        Symptom::FrequentConflicts => "Claims are often refused as key reuse".into(),
        Symptom::StoreGrowing => "the store keeps growing".into(),
    };
    Some(Observation::supporting(
        Source::CallerReport,
        format!("the caller reports: {said}"),
    ))
}

fn with_report(mut finding: Finding, evidence: &Evidence) -> Finding {
    if let Some(report) = caller_report(evidence) {
        finding.observations.insert(0, report);
    }
    finding
}

fn nothing_stored(facts: &Facts<'_>, evidence: &Evidence) -> Finding {
    let scope = facts.scope;
    if evidence.new_key_for_retry || facts.suspected_new_key_retry {
        return new_key_per_retry(facts, evidence, false);
    }
    let found_effect = evidence
        .provider
        .is_some_and(|provider| provider.finding != ProviderFinding::NoEffect);
    let cause = if evidence.symptom == Symptom::TimeoutBeforeResponse {
        Cause::AmbiguousOutcome
    } else {
        Cause::None
    };
    let finding = Finding::new(
        cause,
        Layer::Transport,
        format!(
            "Nothing is stored under {}/{}: no Claim of it reached idemd (or its record and \
             its tombstone have both passed retention). No owner was ever granted, so idemd \
             made no execution of it.",
            scope.operation, scope.key
        ),
    )
    .saw(Observation::supporting(
        Source::History,
        "no operation is stored under the scope (read from the database now)",
    ));
    let finding = with_report(finding, evidence);
    if found_effect {
        return finding
            .saw(Observation::against(
                Source::Provider,
                "the provider shows the effect, but no Claim of this scope is stored",
            ))
            .step(Step::look(
                "Find at the provider which request made the effect (its reference, the key \
                 it carried) before anything else",
            ))
            .escalate(
                "which caller or key made the effect the provider shows: idemd holds no \
                 operation under this scope, so it was made without a Claim of it, under \
                 another key or name, or long enough ago that its tombstone is gone",
            );
    }
    finding
        .step(Step::claim_attempt(
            "Claim again with the same key and the same request: nothing is stored, so this \
             Claim starts the operation, once; execute only on Acquired",
        ))
        .check(Check::new(
            "Look the scope up after that Claim",
            "attempt 1, one owner: the earlier call never reached idemd",
            "another attempt or state: someone else claimed it meanwhile; answer with what is \
             stored",
        ))
}

fn new_key_per_retry(facts: &Facts<'_>, evidence: &Evidence, duplicate_effect: bool) -> Finding {
    let mut finding = Finding::new(
        Cause::NewKeyPerRetry,
        Layer::CallerLogic,
        format!(
            "The same request arrived under {} different keys lately: the caller makes a new \
             idempotency key per retry (per transport attempt) instead of one per intent, so \
             every retry is a new operation to idemd and nothing stops a second effect.",
            facts.same_request_keys.max(2)
        ),
    );
    if facts.suspected_new_key_retry {
        finding = finding.saw(Observation::supporting(
            Source::Counters,
            format!(
                "{} operations of this tenant and name were created with this request within \
                 the new-key-retry window",
                facts.same_request_keys
            ),
        ));
    } else if facts.record.is_some() {
        finding = finding.saw(Observation::against(
            Source::Counters,
            format!(
                "only {} operation(s) with this request were seen within the window",
                facts.same_request_keys
            ),
        ));
    }
    if evidence.new_key_for_retry {
        finding = finding.saw(Observation::supporting(
            Source::CallerReport,
            "the caller says it made a new key for its retry",
        ));
    }
    if duplicate_effect {
        finding = finding.saw(Observation::supporting(
            Source::Provider,
            "the effect happened more than once, as separate keys allow",
        ));
    }
    finding
        .step(Step::change_caller(
            "Generate the key once per intent, persist it before the first attempt, and \
             reuse it (with a new claim_token) for every retry of that intent",
        ))
        .step(Step::look(
            "List this tenant's operations of this name created lately (idemd ops list) and \
             look at the provider for each: count the effects the separate keys made",
        ))
        .step(Step::hand_over(
            "Compensate any duplicate effect at the provider: to idemd each key was its own \
             intent, so it cannot undo one",
        ))
        .check(Check::new(
            "Retry once with the original key and look at Operation.same_request_keys",
            "it stays at 1 for a new intent: keys are per intent now",
            "it grows with each retry: keys are still made per attempt",
        ))
}

fn duplicate(facts: &Facts<'_>, evidence: &Evidence) -> Finding {
    let owners = facts.owners();
    let takeovers = facts.count(HistoryEvent::TakenOver);
    if takeovers > 0 && facts.count(HistoryEvent::Reconciled) == 0 {
        return with_report(
            Finding::new(
                Cause::ClientDefect,
                Layer::CallerLogic,
                format!(
                    "idemd granted {owners} owners one after the other, {takeovers} of them by \
                     a takeover that was told ReconcileFirst. A second effect means a taking-over \
                     caller executed without first checking the provider for the earlier \
                     attempt's effect."
                ),
            )
            .saw(Observation::supporting(
                Source::History,
                format!("{takeovers} takeover(s), no reconciliation, in the history"),
            ))
            .step(Step::change_caller(
                "On ReconcileFirst, look the provider up by the stable reference (operation_id \
                 or key) after previous_attempt_deadline, or pass the key to a provider that \
                 deduplicates; Complete if the effect is there",
            ))
            .step(Step::hand_over(
                "Compensate the extra effect at the provider",
            ))
            .check(Check::new(
                "Compare the provider's effects with the history's attempts",
                "one effect per taken-over attempt: the takeovers executed blind",
                "effects idemd has no attempt for: they came from outside idemd",
            )),
            evidence,
        );
    }
    with_report(
        Finding::new(
            Cause::Race,
            Layer::Concurrency,
            format!(
                "idemd granted {owners} owner(s) for this operation, one at a time; a second \
                 effect did not come through this operation's Claims."
            ),
        )
        .saw(Observation::against(
            Source::History,
            format!("the history shows {owners} owner(s) and no takeover"),
        ))
        .step(Step::look(
            "Find at the provider the reference and key of each effect",
        ))
        .escalate(
            "the provider's references for each effect: idemd's record shows a single owner, \
             so the other effect was made without a Claim of this scope (another key, another \
             operation name, or a path that bypasses idemd)",
        ),
        evidence,
    )
}

fn conflict(facts: &Facts<'_>, evidence: &Evidence, request: Request) -> Finding {
    let Some(record) = facts.record else {
        return nothing_stored(facts, evidence);
    };
    let mut finding = Finding::new(
        Cause::PayloadConflict,
        Layer::CallerRequest,
        "The same key carries another request (another amount, recipient or payload): a key \
         names one intent, so idemd refuses it (IDEMPOTENCY_KEY_REUSED) and will keep \
         refusing it; it never replays the first result for it nor executes it.",
    );
    finding = match request {
        Request::Different => finding.saw(Observation::supporting(
            Source::Fingerprint,
            "the request the caller would send now differs from the stored fingerprint",
        )),
        Request::Same(_) => finding.saw(Observation::against(
            Source::Fingerprint,
            "the request the caller would send now matches the stored fingerprint",
        )),
        Request::NotGiven => finding,
    };
    if record.conflicts > 0 {
        finding = finding.saw(Observation::supporting(
            Source::Counters,
            format!(
                "{} Claim(s) of this key were refused as key reuse",
                record.conflicts
            ),
        ));
    }
    if facts.count(HistoryEvent::ConflictingClaimRefused) > 0 {
        finding = finding.saw(Observation::supporting(
            Source::History,
            "the history records refused conflicting Claims",
        ));
    }
    if record.conflicts >= FREQUENT_CONFLICTS || evidence.symptom == Symptom::FrequentConflicts {
        finding.also.push(diagnosis(
            Cause::UnstableKeysOrPayload,
            Layer::CallerRequest,
            "conflicts are frequent: keys may be reused across intents",
        ));
    }
    with_report(finding, evidence)
        .step(Step::change_caller(
            "Do not send this request under this key again: it is refused, and must be",
        ))
        .step(Step::look(
            "Decide whether it is the same intent: if it is, find the field that changed \
             (a timestamp, a generated id, an unnormalised number) and leave it out of the \
             fingerprinted request",
        ))
        .step(Step::new_key(
            "If it is a new intent, give it a new key, generated once and persisted before \
             its first attempt",
        ))
        .check(Check::new(
            "Diagnose again with the request the caller means to send",
            "it matches: it was the same intent, now normalised",
            "it still differs: it is a new intent and needs its own key",
        ))
}

fn unstable(facts: &Facts<'_>, evidence: &Evidence, request: Request) -> Finding {
    let conflicts = facts.record.map_or(0, |record| record.conflicts);
    let meaning = if let Request::Same(_) = request {
        "Claims of this key are often refused although the request the caller sends now \
         matches: its payload normalisation is unstable (fields that change between \
         retries, key order or number formats outside json mode)."
    } else {
        "Claims of this key are often refused as key reuse: the caller reuses keys across \
         intents, or its payload normalisation is unstable."
    };
    let mut finding = Finding::new(Cause::UnstableKeysOrPayload, Layer::CallerRequest, meaning);
    if conflicts > 0 {
        finding = finding.saw(Observation::supporting(
            Source::Counters,
            format!("{conflicts} Claim(s) of this key were refused as key reuse"),
        ));
    }
    if facts.count(HistoryEvent::ConflictingClaimRefused) > 0 {
        finding = finding.saw(Observation::supporting(
            Source::History,
            "the history records refused conflicting Claims",
        ));
    }
    if let Request::Same(_) = request {
        finding = finding.saw(Observation::supporting(
            Source::Fingerprint,
            "the request sent now matches the stored fingerprint: the same intent produced \
             different requests",
        ));
    }
    with_report(finding, evidence)
        .step(Step::change_caller(
            "Derive the key from the intent (an order id), never from something shared by \
             intents (a customer id, a date)",
        ))
        .step(Step::change_caller(
            "Fingerprint only the business fields, in json mode (JCS canonicalises key order \
             and numbers), and leave out timestamps and generated ids",
        ))
        .check(Check::new(
            "Watch Operation.conflicts and idemd_conflicts_total after the change",
            "they stop growing: the keys and payloads are stable",
            "they still grow: find which field differs between two refused requests",
        ))
}

fn retention(facts: &Facts<'_>) -> Finding {
    let Some(record) = facts.record else {
        return Finding::new(Cause::None, Layer::Policy, "nothing stored");
    };
    match facts.retention_ceiling {
        None => {
            let mut finding = Finding::new(
                Cause::UnboundedRetention,
                Layer::Policy,
                format!(
                    "No operation policy bounds the retention of {}: each Claim may keep its \
                     result up to the server's maximum ({}), so the store grows with every \
                     intent for that long.",
                    record.scope.operation,
                    span(facts.server_max_retention)
                ),
            )
            .saw(Observation::supporting(
                Source::Policy,
                "no policy sets a retention ceiling for this name",
            ));
            if record.retention >= LONG_RETENTION {
                finding = finding.saw(Observation::supporting(
                    Source::Timing,
                    format!("this operation is retained for {}", span(record.retention)),
                ));
            }
            finding
                .step(Step::operator(
                    "Set an operation policy for this name with a retention default and \
                     ceiling no longer than the callers' retry horizon needs (idemd ops \
                     policy); the retry window still bounds it from below",
                ))
                .check(Check::new(
                    "GetPolicy for the name, then the count of stored operations a day later",
                    "a ceiling is in force and the count levels off",
                    "it keeps growing: more intents, or new keys per retry (same_request_keys)",
                ))
        }
        Some(ceiling) => Finding::new(
            Cause::None,
            Layer::Policy,
            format!(
                "Retention of {} is bounded by policy ({}): the store grows with the number \
                 of intents, not without bound.",
                record.scope.operation,
                span(ceiling)
            ),
        )
        .saw(Observation::against(
            Source::Policy,
            format!("a policy ceiling of {} is in force", span(ceiling)),
        ))
        .check(Check::new(
            "Look at Operation.same_request_keys on recent operations",
            "above 1: new keys per retry inflate the store",
            "1: the growth is real traffic",
        )),
    }
}

/// An error answer to the caller's call that the caller caused.
fn refused_call(facts: &Facts<'_>, code: u32, reason: &str) -> Option<Finding> {
    let finding = match code {
        status_code::INVALID_ARGUMENT
        | status_code::PERMISSION_DENIED
        | status_code::UNAUTHENTICATED => Finding::new(
            Cause::ClientDefect,
            Layer::CallerLogic,
            format!(
                "idemd refused the call itself (status {code}{}): a validation or \
                 authorisation failure is terminal for that request, and the same request \
                 will be refused the same way.",
                if reason.is_empty() {
                    String::new()
                } else {
                    format!(", {reason}")
                }
            ),
        )
        .saw(Observation::supporting(
            Source::CallerReport,
            format!("the caller was answered status {code}"),
        ))
        .step(Step::change_caller(
            "Do not retry unchanged: fix the request or the credential the error names",
        ))
        .check(Check::new(
            "Send the corrected request once",
            "it is admitted: the defect was in the request",
            "the same refusal: read the error's ErrorInfo and BadRequest details again",
        )),
        status_code::ABORTED => Finding::new(
            Cause::Race,
            Layer::Concurrency,
            "The owner's write was refused as stale (LEASE_LOST): another owner took the \
             operation over after this one's lease ran out. Only the current owner may write.",
        )
        .saw(Observation::supporting(
            Source::CallerReport,
            "the caller's write was answered ABORTED",
        ))
        .step(Step::look(
            "Look the operation up and answer with what is stored; never redo the effect",
        )),
        status_code::DEADLINE_EXCEEDED | status_code::UNAVAILABLE => return None,
        _ => return None,
    };
    let mut finding = finding;
    if let Some(record) = facts.record {
        finding = finding.saw(Observation::supporting(
            Source::History,
            format!(
                "the operation is {} at attempt {} (fence {})",
                record.state.as_str(),
                record.attempt,
                record.fence
            ),
        ));
    }
    Some(finding)
}

fn by_state(facts: &Facts<'_>, evidence: &Evidence) -> Finding {
    let Some(record) = facts.record else {
        return nothing_stored(facts, evidence);
    };
    let now = facts.now;
    let timed_out = matches!(&evidence.symptom, Symptom::TimeoutBeforeResponse)
        || matches!(&evidence.symptom, Symptom::ErrorStatus { code, .. }
        if *code == status_code::DEADLINE_EXCEEDED || *code == status_code::UNAVAILABLE);
    let history = Observation::supporting(
        Source::History,
        format!(
            "the history records {} owner(s); the operation is {} at attempt {} of {} (fence {})",
            facts.owners(),
            record.state.as_str(),
            record.attempt,
            record.max_attempts,
            record.fence
        ),
    );
    let finding = match record.state {
        State::InProgress if !record.lease_expired(now) => {
            let left = record
                .lease_expires_at
                .map_or(TimeDelta::zero(), |expiry| expiry - now);
            let lease = Observation::supporting(
                Source::Timing,
                format!("the owner's lease is live for {} more", span(left)),
            );
            if evidence.symptom == Symptom::ConcurrentDuplicates
                || evidence.symptom == Symptom::StuckInProgress && record.answers.pendings > 0
            {
                let mut finding = Finding::new(
                    Cause::Race,
                    Layer::Concurrency,
                    "Concurrent duplicates of one intent: idemd gave the operation to one \
                     owner, which is running it; every other Claim was told Pending and must \
                     not execute.",
                )
                .saw(history)
                .saw(lease);
                if record.answers.pendings > 0 {
                    finding = finding.saw(Observation::supporting(
                        Source::Counters,
                        format!(
                            "about {} Claim(s) were answered Pending",
                            record.answers.pendings
                        ),
                    ));
                }
                finding
                    .step(Step::wait(
                        "Do not execute; wait for the owner (at most until its lease runs out)",
                        left,
                    ))
                    .step(Step::replay(
                        "Claim again with the same key and request: the replay of the owner's \
                         outcome, or Pending again",
                    ))
                    .check(Check::new(
                        "Count the effects at the provider once the operation has ended",
                        "one: the race was settled by idemd",
                        "more: a duplicate executed without Acquired (a caller ignores Pending)",
                    ))
            } else if timed_out {
                ambiguous_in_progress(record.fence, left, history, lease)
            } else {
                Finding::new(
                    Cause::None,
                    Layer::None,
                    format!(
                        "An owner holds a live lease (renewed {} time(s)); it must end by its \
                         attempt deadline{}.",
                        facts.count(HistoryEvent::Renewed),
                        record
                            .attempt_deadline_at
                            .map(|deadline| format!(" at {}", at(deadline)))
                            .unwrap_or_default()
                    ),
                )
                .saw(history)
                .saw(lease)
                .step(Step::wait(
                    "Wait for the owner; Claim again after retry_after",
                    left,
                ))
            }
        }
        State::InProgress | State::Unknown => stuck(facts, evidence, history),
        State::RetryWait => {
            let due = record
                .retry_at
                .map_or(TimeDelta::zero(), |retry| retry - now);
            if evidence
                .provider
                .is_some_and(|p| p.finding == ProviderFinding::EffectFound)
            {
                Finding::new(
                    Cause::NeedsReconciliation,
                    Layer::Provider,
                    "The owner reported that the effect certainly did not happen (RETRYABLE), \
                     but the provider shows it: the owner's failure mapping is wrong, and the \
                     next attempt would make a second effect.",
                )
                .saw(history)
                .saw(Observation::against(
                    Source::Provider,
                    "the provider shows the effect a RETRYABLE failure said never happened",
                ))
                .step(Step::look("Confirm the effect's reference at the provider"))
                .escalate(
                    "which is right, the owner's RETRYABLE report or the provider: \
                     a reconciler who has confirmed the effect should Reconcile it SUCCEEDED \
                     before the retry at the due time",
                )
            } else {
                Finding::new(
                    Cause::None,
                    Layer::None,
                    format!(
                        "A retryable failure was recorded: the effect certainly did not happen, \
                         and the next attempt is due in {}.",
                        span(due)
                    ),
                )
                .saw(history)
                .saw(Observation::supporting(
                    Source::Timing,
                    format!("the retry is due in {}", span(due)),
                ))
                .step(Step::wait("Wait until the retry is due", due))
                .step(Step::claim_attempt(
                    "Claim again with the same key and request: Acquired starts the next attempt",
                ))
            }
        }
        State::Succeeded | State::Failed | State::Expired => {
            ended(facts, evidence, history, timed_out)
        }
    };
    with_report(finding, evidence)
}

fn ambiguous_in_progress(
    fence: u64,
    left: TimeDelta,
    history: Observation,
    lease: Observation,
) -> Finding {
    Finding::new(
        Cause::AmbiguousOutcome,
        Layer::Transport,
        format!(
            "The call timed out, but the operation is stored IN_PROGRESS with a live owner \
             (fence {fence}). If the lost answer was your own Claim's, re-send that Claim with \
             its claim_token to get the same Acquired; otherwise another owner runs it. Never \
             assume nothing happened."
        ),
    )
    .saw(history)
    .saw(lease)
    .step(Step::replay(
        "Re-send the same Claim (same key, request and claim_token): the same Acquired if it \
         was yours, else Pending; execute only on Acquired",
    ))
    .step(Step::wait(
        "On Pending, wait for the owner and Claim again",
        left,
    ))
    .check(Check::new(
        format!("Does the re-sent Claim answer Acquired with fence {fence}?"),
        "the lost answer was yours: run the effect once",
        "someone else owns it: wait and replay",
    ))
}

fn stuck(facts: &Facts<'_>, evidence: &Evidence, history: Observation) -> Finding {
    let Some(record) = facts.record else {
        return nothing_stored(facts, evidence);
    };
    let now = facts.now;
    let settles_at = facts.settles_at().unwrap_or(now);
    let settled = settles_at <= now;
    let spent = record.attempt >= record.max_attempts;
    let (cause, meaning) = if spent {
        (
            Cause::NeedsReconciliation,
            "The outcome is unknown and the attempt budget is spent: no Claim will start \
             another attempt; only a Reconcile from the provider's evidence settles it.",
        )
    } else {
        (
            Cause::StuckInProgress,
            "The operation is in progress with no live owner (its lease ran out, or the owner \
             reported an unknown outcome): the owner crashed or lost track, and lease or crash \
             recovery has not run. Its effect may have happened.",
        )
    };
    let mut finding = Finding::new(cause, Layer::OwnerRecovery, meaning)
        .saw(history)
        .saw(Observation::supporting(
            Source::Timing,
            if settled {
                format!(
                    "the last attempt's deadline (plus the clock margin) passed {} ago",
                    span(now - settles_at)
                )
            } else {
                format!(
                    "the last attempt may still be in flight for {}",
                    span(settles_at - now)
                )
            },
        ));
    if evidence.symptom == Symptom::TimeoutBeforeResponse {
        finding.also.push(diagnosis(
            Cause::AmbiguousOutcome,
            Layer::Transport,
            "the timed-out call's outcome is this operation's: look it up, never assume \
             nothing happened",
        ));
    }
    // A found effect is evidence at any time: only a search that finds
    // nothing must wait for the attempt to settle.
    let found = evidence
        .provider
        .is_some_and(|provider| provider.finding == ProviderFinding::EffectFound);
    if !settled && !found {
        finding = finding.step(Step::wait(
            "Let the attempt's deadline pass: until then its effect may still be in flight",
            settles_at - now,
        ));
    }
    match evidence.provider {
        None => finding
            .step(Step::look(format!(
                "Look the effect up at the provider by the stable reference (operation_id {} \
                 or the key), with a lookup sent after {}",
                record.operation_id,
                at(settles_at)
            )))
            .step(Step::reconcile(
                "Reconcile from what it shows: SUCCEEDED with the effect's result if it is \
                 there, NOT_APPLIED (a new attempt) if it is not",
            ))
            .check(Check::new(
                "The provider lookup, sent after the attempt settled",
                "the effect is there: Reconcile SUCCEEDED; never run it again",
                "it is not: Reconcile NOT_APPLIED, then Claim for a new attempt",
            )),
        Some(ProviderEvidence {
            finding: ProviderFinding::EffectFound,
            ..
        }) => finding
            .saw(Observation::supporting(
                Source::Provider,
                "the provider shows the effect once",
            ))
            .step(Step::reconcile(
                "Reconcile SUCCEEDED with the provider's result (operation_id and the current \
                 fence from Lookup); never run the effect again",
            ))
            .check(Check::new(
                "Look the operation up after the Reconcile",
                "SUCCEEDED: the Claims that follow replay it",
                "refused: read the error's state and look again",
            )),
        Some(ProviderEvidence {
            finding: ProviderFinding::NoEffect,
            looked_at,
        }) if looked_at < settles_at => finding
            .saw(Observation::against(
                Source::Provider,
                format!(
                    "the provider showed nothing, but the lookup was sent {} before the \
                     attempt settled: it proves nothing",
                    span(settles_at - looked_at)
                ),
            ))
            .step(Step::look(format!(
                "Look the provider up again after {}",
                at(settles_at)
            )))
            .escalate(format!(
                "a provider lookup sent after {} (the last attempt's deadline plus the clock \
                 margin): the one given was sent while the effect could still be in flight",
                at(settles_at)
            )),
        Some(ProviderEvidence {
            finding: ProviderFinding::NoEffect,
            looked_at,
        }) if record.updated_at > looked_at => finding
            .step(Step::look("Look the provider up again"))
            .escalate(format!(
                "a provider lookup newer than the operation's last change at {}",
                at(record.updated_at)
            )),
        Some(ProviderEvidence {
            finding: ProviderFinding::NoEffect,
            ..
        }) => finding
            .saw(Observation::supporting(
                Source::Provider,
                "the provider shows no effect, looked up after the attempt settled",
            ))
            .step(Step::reconcile(
                "Reconcile NOT_APPLIED (operation_id and the current fence from Lookup): it \
                 grants one new attempt",
            ))
            .step(Step::claim_attempt(
                "Claim again with the same key and request: Acquired starts the new attempt",
            ))
            .check(Check::new(
                "Count the effects at the provider after the new attempt",
                "one: recovered",
                "two: the earlier attempt's effect landed after all; compensate one",
            )),
        Some(ProviderEvidence {
            finding: ProviderFinding::EffectFoundMoreThanOnce,
            ..
        }) => finding.escalate("the provider's references for each effect"),
    }
}

fn ended(facts: &Facts<'_>, evidence: &Evidence, history: Observation, timed_out: bool) -> Finding {
    let Some(record) = facts.record else {
        return nothing_stored(facts, evidence);
    };
    let (outcome, kind) = match (record.state, record.outcome_kind) {
        (State::Expired, Some(kind)) => (
            format!(
                "ended {} and its result passed retention (a tombstone: Claims of the key are \
                 refused RESULT_EXPIRED, never executed again)",
                kind.as_str()
            ),
            kind,
        ),
        (State::Expired, None) => ("expired".to_owned(), State::Expired),
        (state, _) => (format!("ended {}", state.as_str()), state),
    };
    let provider = evidence.provider.map(|p| p.finding);
    let contradiction = match (kind, provider) {
        (State::Succeeded, Some(ProviderFinding::NoEffect)) => Some(
            "idemd stores a success, but the provider shows no effect: the owner completed \
             without an effect, or the lookup searched the wrong reference",
        ),
        (State::Failed, Some(ProviderFinding::EffectFound)) => Some(
            "idemd stores a failure, but the provider shows the effect: a FAILED outcome made \
             callers act as if nothing happened",
        ),
        _ => None,
    };
    if let Some(contradiction) = contradiction {
        return Finding::new(Cause::None, Layer::Provider, contradiction)
            .saw(history)
            .saw(Observation::against(Source::Provider, contradiction))
            .step(Step::look(
                "Check the provider by the stable reference (operation_id or key)",
            ))
            .escalate(format!(
                "which is right: the stored outcome ({}) or the provider's finding",
                kind.as_str()
            ));
    }
    let terminal_failure = kind == State::Failed
        && matches!(
            record.outcome.as_ref(),
            Some(crate::model::Outcome::Failed {
                reason: FailureReason::Terminal,
                ..
            })
        );
    let replays = record.answers.replays;
    if terminal_failure && (replays > 0 || matches!(evidence.symptom, Symptom::ErrorStatus { .. }))
    {
        let code = match record.outcome.as_ref() {
            Some(crate::model::Outcome::Failed { error, .. }) => error.code.clone(),
            _ => String::new(),
        };
        let mut finding = Finding::new(
            Cause::ClientDefect,
            Layer::CallerLogic,
            format!(
                "The operation ended with a terminal failure ({code}): a validation, \
                 authorisation or policy refusal. Retrying the same request replays that \
                 failure; it will never succeed unchanged."
            ),
        )
        .saw(history);
        if replays > 0 {
            finding = finding.saw(Observation::supporting(
                Source::Counters,
                format!("about {replays} retries were answered with the stored failure"),
            ));
        }
        return finding
            .step(Step::change_caller(
                "Do not retry unchanged: fix what the failure names (the request, the \
                 account's authorisation, the policy)",
            ))
            .step(Step::new_key(
                "Send the corrected request as a new intent under a new key",
            ))
            .check(Check::new(
                "Watch the replay count of this operation",
                "it stops growing: the caller stopped retrying",
                "it still grows: a retry loop ignores terminal failures",
            ));
    }
    let cause = if timed_out {
        Cause::AmbiguousOutcome
    } else {
        Cause::None
    };
    let layer = if timed_out {
        Layer::Transport
    } else {
        Layer::None
    };
    let mut finding = Finding::new(
        cause,
        layer,
        format!(
            "The operation {outcome}. {}",
            if timed_out {
                "The call that timed out has this answer: a Claim with the same key and \
                 request replays it; nothing will execute again."
            } else {
                "A Claim with the same key and request replays it."
            }
        ),
    )
    .saw(history);
    if let Some(completed) = record.completed_at {
        finding = finding.saw(Observation::supporting(
            Source::Timing,
            format!("it ended at {}", at(completed)),
        ));
    }
    if provider == Some(ProviderFinding::EffectFound) && kind == State::Succeeded {
        finding = finding.saw(Observation::supporting(
            Source::Provider,
            "the provider shows the effect once",
        ));
    }
    finding
        .step(Step::replay(
            "Claim again with the same key and request (or Lookup): answer with the stored \
             outcome; do not run the effect",
        ))
        .check(Check::new(
            "The Claim's answer",
            "Completed: the stored outcome, replayed",
            "RESULT_EXPIRED: the result passed retention; the outcome kind is in Lookup",
        ))
}
