//! Tests of the pure state machine in `transition.rs` against DESIGN.md
//! ("State machine" and "Retrying the API itself").
//!
//! The stores draw a new fence whenever `effects.takes_new_fence()`; [`Sim`]
//! emulates that with a counter and `Effects::with_fence`, then applies
//! `update.next` as the new record, exactly as a store would inside its
//! transaction. The first Claim of a scope, the `(none)` row, is an insert
//! made by the stores, not a decision of `transition.rs`: [`inserted_record`]
//! mirrors it so that every other row starts from a realistic record.

use chrono::{DateTime, TimeDelta, Utc};
use proptest::prelude::*;
use uuid::Uuid;

use super::command::{
    ClaimCommand, CompleteCommand, FailCommand, FailDisposition, ReconcileCommand, RenewCommand,
    Resolution,
};
use super::error::{Error, Refusal};
use super::model::Writer;
use super::model::{
    ErrorReport, FailureReason, Fence, Fingerprint, HistoryEvent, NewHistoryEntry, OperationId,
    OperationRecord, Outcome, PreviousAttempt, RequestDigest, Scope, State, SuccessResult,
    TenantId, WriteReceipt,
};
use super::transition::{
    Answer, ClaimAnswer, Decision, Effects, PendingReason, decide_claim, decide_complete,
    decide_fail, decide_reconcile, decide_renew, decide_sweep,
};

// ---------------------------------------------------------------------------
// Fixture
// ---------------------------------------------------------------------------

const FIRST_FENCE: Fence = 10;
const MAX_ATTEMPTS: u32 = 5;
const OWNER: &[u8] = b"owner-1";
const OTHER: &[u8] = b"other-client";
const CODE: &str = "card_declined";

fn secs(seconds: i64) -> TimeDelta {
    TimeDelta::seconds(seconds)
}

fn lease() -> TimeDelta {
    secs(30)
}

fn max_attempt_duration() -> TimeDelta {
    TimeDelta::minutes(5)
}

fn retention() -> TimeDelta {
    TimeDelta::hours(24)
}

/// The fixed `now` the fresh record is claimed at.
fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp(1_750_000_000, 0).expect("a valid instant")
}

/// `t0` plus some seconds.
fn at(offset_secs: i64) -> DateTime<Utc> {
    t0() + secs(offset_secs)
}

fn op_id() -> OperationId {
    OperationId(Uuid::from_u128(0x0197_7a2b_0000_7000_8000_0000_0000_0001))
}

fn fingerprint(byte: u8) -> Fingerprint {
    Fingerprint([byte; 32])
}

fn the_fingerprint() -> Fingerprint {
    fingerprint(1)
}

fn scope() -> Scope {
    Scope {
        operation: "payments.charge".into(),
        key: "order-42".into(),
    }
}

fn claim_as(token: &[u8]) -> ClaimCommand {
    ClaimCommand {
        scope: scope(),
        fingerprint: the_fingerprint(),
        claim_token: token.to_vec(),
        lease: lease(),
        max_attempt_duration: max_attempt_duration(),
        max_attempts: MAX_ATTEMPTS,
        retention: retention(),
        operation_deadline: None,
    }
}

/// What a store inserts for the `(none) → Claim` row: IN_PROGRESS, attempt 1,
/// the fence it drew, a lease capped at the attempt deadline.
fn inserted_record(command: &ClaimCommand, fence: Fence, now: DateTime<Utc>) -> OperationRecord {
    let attempt_deadline_at = now + command.max_attempt_duration;
    OperationRecord {
        operation_id: op_id(),
        tenant_id: TenantId(7),
        scope: command.scope.clone(),
        fingerprint: command.fingerprint,
        state: State::InProgress,
        fence,
        attempt: 1,
        max_attempts: command.max_attempts,
        claim_token: command.claim_token.clone(),
        taken_over_from: None,
        lease_duration: command.lease,
        max_attempt_duration: command.max_attempt_duration,
        retention: command.retention,
        lease_expires_at: Some((now + command.lease).min(attempt_deadline_at)),
        attempt_deadline_at: Some(attempt_deadline_at),
        retry_at: None,
        operation_deadline_at: command.operation_deadline.map(|deadline| now + deadline),
        outcome: None,
        outcome_kind: None,
        last_write: None,
        created_at: now,
        updated_at: now,
        completed_at: None,
        retain_until: None,
    }
}

/// A fresh IN_PROGRESS record: attempt 1 of 5, fence 10, lease 30 s, attempt
/// deadline 5 min, retention 24 h, no operation deadline, claimed at `t0`.
fn fresh() -> OperationRecord {
    inserted_record(&claim_as(OWNER), FIRST_FENCE, t0())
}

/// How long a tombstone is kept before the store deletes it.
fn tombstone_retention() -> TimeDelta {
    TimeDelta::days(7)
}

fn result(body: &str) -> SuccessResult {
    SuccessResult {
        body: body.as_bytes().to_vec(),
        content_type: "application/json".into(),
        metadata: [("provider_ref".to_owned(), "ch_1".to_owned())].into(),
    }
}

fn report(code: &str) -> ErrorReport {
    ErrorReport {
        code: code.into(),
        message: "the provider said no".into(),
        ..ErrorReport::default()
    }
}

fn renew_cmd(fence: Fence, lease: Option<TimeDelta>) -> RenewCommand {
    RenewCommand {
        operation_id: op_id(),
        fence,
        lease,
    }
}

fn complete_cmd(fence: Fence, body: &str) -> CompleteCommand {
    CompleteCommand {
        operation_id: op_id(),
        fence,
        result: result(body),
    }
}

fn fail_cmd(fence: Fence, disposition: FailDisposition, retry_after: TimeDelta) -> FailCommand {
    FailCommand {
        operation_id: op_id(),
        fence,
        disposition,
        error: report(CODE),
        retry_after,
    }
}

fn reconcile_cmd(expected_fence: Fence, resolution: Resolution) -> ReconcileCommand {
    ReconcileCommand {
        operation_id: op_id(),
        expected_fence,
        resolution,
    }
}

fn refused(refusal: Refusal, state: State) -> Error {
    Error::Refused {
        refusal,
        operation_id: op_id(),
        state,
    }
}

fn lease_lost(current_fence: Fence, state: State) -> Error {
    Error::LeaseLost {
        operation_id: op_id(),
        current_fence,
        state,
    }
}

fn entry(
    event: HistoryEvent,
    from: State,
    to: State,
    fence: Fence,
    attempt: u32,
    detail: &str,
) -> NewHistoryEntry {
    NewHistoryEntry {
        event,
        from_state: Some(from),
        to_state: to,
        fence,
        attempt,
        detail: detail.into(),
    }
}

/// One operation as a store would hold it, with the store's fence sequence
/// and the database clock.
#[derive(Debug, Clone)]
struct Sim {
    record: OperationRecord,
    now: DateTime<Utc>,
    next_fence: Fence,
}

/// One applied decision.
#[derive(Debug, Clone)]
struct Step {
    before: OperationRecord,
    /// As the store writes them: stamped with the drawn fence.
    effects: Effects,
    answer: Result<Answer, Error>,
    drawn_fence: Option<Fence>,
}

impl Sim {
    fn new() -> Self {
        Self::with(fresh())
    }

    fn with(record: OperationRecord) -> Self {
        Self {
            now: record.updated_at,
            next_fence: record.fence + 1,
            record,
        }
    }

    /// The fresh record, adjusted.
    fn fresh_with(adjust: impl FnOnce(&mut OperationRecord)) -> Self {
        let mut record = fresh();
        adjust(&mut record);
        Self::with(record)
    }

    /// A record on its last allowed attempt (a Claim with max_attempts 1).
    fn last_attempt() -> Self {
        Self::with(inserted_record(
            &ClaimCommand {
                max_attempts: 1,
                ..claim_as(OWNER)
            },
            FIRST_FENCE,
            t0(),
        ))
    }

    fn step(&mut self, decide: impl FnOnce(&OperationRecord, DateTime<Utc>) -> Decision) -> Step {
        let before = self.record.clone();
        let Decision { effects, answer } = decide(&self.record, self.now);
        let drawn_fence = effects.takes_new_fence().then(|| {
            let fence = self.next_fence;
            self.next_fence += 1;
            fence
        });
        let effects = match drawn_fence {
            Some(fence) => effects.with_fence(fence),
            None => effects,
        };
        if let Some(update) = &effects.update {
            self.record = update.next.clone();
        }
        Step {
            before,
            effects,
            answer,
            drawn_fence,
        }
    }

    fn claim(&mut self, command: &ClaimCommand) -> Step {
        self.step(|record, now| decide_claim(record, command, now))
    }

    fn claim_as(&mut self, token: &[u8]) -> Step {
        self.claim(&claim_as(token))
    }

    fn renew(&mut self, fence: Fence) -> Step {
        self.renew_for(fence, None)
    }

    fn renew_for(&mut self, fence: Fence, lease: Option<TimeDelta>) -> Step {
        let command = renew_cmd(fence, lease);
        self.step(|record, now| decide_renew(record, &command, now))
    }

    fn complete(&mut self, fence: Fence, body: &str) -> Step {
        let command = complete_cmd(fence, body);
        self.step(|record, now| decide_complete(record, &command, now))
    }

    fn fail(&mut self, fence: Fence, disposition: FailDisposition, retry_after: TimeDelta) -> Step {
        let command = fail_cmd(fence, disposition, retry_after);
        self.step(|record, now| decide_fail(record, &command, now))
    }

    fn reconcile(&mut self, expected_fence: Fence, resolution: Resolution) -> Step {
        let command = reconcile_cmd(expected_fence, resolution);
        self.step(|record, now| decide_reconcile(record, &command, now))
    }

    /// The sweeper's decision, applied; `None` when it leaves the record alone.
    fn sweep(&mut self) -> Option<Step> {
        let decision = decide_sweep(&self.record, self.now, tombstone_retention())?;
        Some(self.step(|_, _| decision))
    }
}

impl Step {
    fn claim_answer(&self) -> ClaimAnswer {
        match &self.answer {
            Ok(Answer::Claim(answer)) => *answer,
            other => panic!("expected a Claim answer, got {other:?}"),
        }
    }

    /// Asserts the write took effect (now or earlier).
    fn written(&self) -> &Self {
        assert_eq!(self.answer, Ok(Answer::Written), "{self:#?}");
        self
    }

    fn error(&self) -> &Error {
        match &self.answer {
            Err(error) => error,
            Ok(answer) => panic!("expected an error, got {answer:?}"),
        }
    }

    fn next(&self) -> &OperationRecord {
        &self
            .effects
            .update
            .as_ref()
            .expect("the decision writes the record")
            .next
    }

    fn history(&self) -> &NewHistoryEntry {
        self.effects
            .history
            .as_ref()
            .expect("the decision appends history")
    }

    fn assert_no_effects(&self) {
        assert!(
            self.effects.is_empty(),
            "expected no write and no history: {:#?}",
            self.effects
        );
        assert_eq!(self.drawn_fence, None);
    }

    /// A refusal that is recorded: history only, the record untouched.
    fn assert_only_history(&self, expected: NewHistoryEntry) {
        assert_eq!(
            self.effects.update, None,
            "a refusal never writes the record"
        );
        assert_eq!(self.drawn_fence, None);
        assert_eq!(self.history(), &expected);
    }
}

fn assert_pending(step: &Step, reason: PendingReason, retry_after: TimeDelta) {
    assert_eq!(
        step.claim_answer(),
        ClaimAnswer::Pending {
            reason,
            retry_after
        }
    );
    step.assert_no_effects();
}

/// Every state a record can be in, each reached by real transitions from the
/// fresh record (the tombstone by the sweeper), with a `now` that
/// makes the state what its name says.
fn every_state() -> Vec<(&'static str, Sim)> {
    let mut states = Vec::new();

    let mut live = Sim::new();
    live.now = at(1);
    states.push(("IN_PROGRESS with a live lease", live));

    let mut expired = Sim::new();
    expired.now = at(31);
    states.push(("IN_PROGRESS with an expired lease", expired));

    let mut reported = Sim::new();
    reported.now = at(1);
    reported
        .fail(FIRST_FENCE, FailDisposition::Unknown, secs(0))
        .written();
    reported.now = at(2);
    states.push(("UNKNOWN reported by the owner", reported));

    let mut marked = Sim::last_attempt();
    marked.now = at(31);
    assert_eq!(
        marked.claim_as(OTHER).claim_answer(),
        ClaimAnswer::NeedsReconciliation
    );
    states.push(("UNKNOWN marked by a Claim", marked));

    let mut not_due = Sim::new();
    not_due.now = at(1);
    not_due
        .fail(FIRST_FENCE, FailDisposition::Retryable, secs(10))
        .written();
    not_due.now = at(5);
    states.push(("RETRY_WAIT not due", not_due.clone()));

    let mut due = not_due;
    due.now = at(11);
    states.push(("RETRY_WAIT due", due));

    let mut succeeded = Sim::new();
    succeeded.now = at(1);
    succeeded.complete(FIRST_FENCE, "ok").written();
    succeeded.now = at(2);
    states.push(("SUCCEEDED", succeeded.clone()));

    let mut failed = Sim::new();
    failed.now = at(1);
    failed
        .fail(FIRST_FENCE, FailDisposition::Terminal, secs(0))
        .written();
    failed.now = at(2);
    states.push(("FAILED", failed));

    let mut swept = succeeded;
    swept.now = at(1) + retention() + secs(1);
    swept.sweep().expect("past retention");
    assert_eq!(swept.record.state, State::Expired);
    states.push(("tombstone", swept));

    states
}

fn terminal_states() -> Vec<(&'static str, Sim)> {
    every_state()
        .into_iter()
        .filter(|(_, sim)| sim.record.state.is_terminal())
        .collect()
}

// ---------------------------------------------------------------------------
// (none) → Claim
// ---------------------------------------------------------------------------

#[test]
fn first_claim_record_is_a_live_first_attempt_the_state_machine_accepts() {
    let mut sim = Sim::new();
    assert_eq!(sim.record.state, State::InProgress);
    assert_eq!(sim.record.attempt, 1);
    assert_eq!(sim.record.fence, FIRST_FENCE);
    assert_eq!(sim.record.lease_expires_at, Some(at(30)));
    assert_eq!(sim.record.attempt_deadline_at, Some(at(300)));

    sim.now = at(1);
    assert_eq!(sim.claim_as(OWNER).claim_answer(), ClaimAnswer::Acquired);
    assert_pending(&sim.claim_as(OTHER), PendingReason::InProgress, secs(29));
    sim.renew(FIRST_FENCE).written();
}

// ---------------------------------------------------------------------------
// any → Claim, different fingerprint; tombstone → Claim
// ---------------------------------------------------------------------------

#[test]
fn claim_with_a_different_fingerprint_is_key_reused_in_every_state() {
    for (name, mut sim) in every_state() {
        for token in [OWNER, OTHER, b"".as_slice()] {
            let before = sim.record.clone();
            let step = sim.claim(&ClaimCommand {
                fingerprint: fingerprint(2),
                ..claim_as(token)
            });
            assert_eq!(
                step.answer,
                Err(Error::KeyReused {
                    operation_id: op_id()
                }),
                "{name}"
            );
            step.assert_no_effects();
            assert_eq!(sim.record, before, "{name}");
        }
    }
}

#[test]
fn claim_on_a_tombstone_is_result_expired_never_a_new_execution() {
    let (_, mut sim) = every_state()
        .into_iter()
        .find(|(_, sim)| sim.record.state == State::Expired)
        .expect("a tombstone");
    for token in [OWNER, OTHER, b"".as_slice()] {
        let step = sim.claim_as(token);
        assert_eq!(
            step.answer,
            Err(Error::ResultExpired {
                operation_id: op_id()
            })
        );
        step.assert_no_effects();
    }
}

// ---------------------------------------------------------------------------
// IN_PROGRESS, live lease → Claim
// ---------------------------------------------------------------------------

#[test]
fn resent_claim_with_the_owners_token_gets_the_same_acquired_without_writing() {
    let mut sim = Sim::new();
    for offset in [0, 1, 29] {
        sim.now = at(offset);
        let step = sim.claim_as(OWNER);
        assert_eq!(step.claim_answer(), ClaimAnswer::Acquired);
        step.assert_no_effects();
        assert_eq!(sim.record, fresh(), "not counted as another attempt");
    }
}

#[test]
fn claim_with_another_token_on_a_live_lease_is_pending_for_the_remaining_lease() {
    let mut sim = Sim::new();
    sim.now = at(12);
    assert_pending(&sim.claim_as(OTHER), PendingReason::InProgress, secs(18));
    assert_pending(&sim.claim_as(b""), PendingReason::InProgress, secs(18));
    sim.now = at(30) - TimeDelta::milliseconds(1);
    assert_pending(
        &sim.claim_as(OTHER),
        PendingReason::InProgress,
        TimeDelta::milliseconds(1),
    );
    assert_eq!(sim.record, fresh());
}

#[test]
fn claim_without_a_token_never_counts_as_the_owner() {
    let mut sim = Sim::with(inserted_record(&claim_as(b""), FIRST_FENCE, t0()));
    sim.now = at(5);
    assert_pending(&sim.claim_as(b""), PendingReason::InProgress, secs(25));
}

#[test]
fn pending_retry_after_follows_a_renewed_lease() {
    let mut sim = Sim::new();
    sim.now = at(20);
    sim.renew(FIRST_FENCE).written();
    sim.now = at(25);
    assert_pending(&sim.claim_as(OTHER), PendingReason::InProgress, secs(25));
}

#[test]
fn resent_claim_after_a_takeover_is_told_reconcile_first_again() {
    let mut sim = Sim::new();
    sim.now = at(31);
    let previous = PreviousAttempt {
        state: State::InProgress,
        fence: FIRST_FENCE,
    };
    let takeover = sim.claim_as(b"taker");
    assert_eq!(
        takeover.claim_answer(),
        ClaimAnswer::ReconcileFirst(previous)
    );
    let after_takeover = sim.record.clone();

    sim.now = at(32);
    let resent = sim.claim_as(b"taker");
    assert_eq!(resent.claim_answer(), ClaimAnswer::ReconcileFirst(previous));
    resent.assert_no_effects();
    assert_eq!(sim.record, after_takeover);

    // The replaced owner's own token no longer identifies the owner.
    assert_pending(&sim.claim_as(OWNER), PendingReason::InProgress, secs(29));
}

// ---------------------------------------------------------------------------
// IN_PROGRESS expired / UNKNOWN, budget left → Claim → ReconcileFirst
// ---------------------------------------------------------------------------

#[test]
fn expired_lease_with_budget_left_is_taken_over_with_reconcile_first() {
    let mut sim = Sim::new();
    sim.now = at(30); // the instant the lease expires counts as expired
    let step = sim.claim_as(b"taker");
    let previous = PreviousAttempt {
        state: State::InProgress,
        fence: FIRST_FENCE,
    };
    assert_eq!(step.claim_answer(), ClaimAnswer::ReconcileFirst(previous));
    assert_eq!(step.drawn_fence, Some(11));
    let next = step.next();
    assert_eq!(next.state, State::InProgress);
    assert_eq!(next.fence, 11);
    assert_eq!(next.attempt, 2);
    assert_eq!(next.claim_token, b"taker".to_vec());
    assert_eq!(next.taken_over_from, Some(previous));
    assert_eq!(next.lease_duration, lease());
    assert_eq!(next.lease_expires_at, Some(at(60)));
    assert_eq!(next.attempt_deadline_at, Some(at(330)));
    assert_eq!(next.retry_at, None);
    assert_eq!(next.updated_at, at(30));
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::TakenOver,
            State::InProgress,
            State::InProgress,
            11,
            2,
            "lease expired"
        )
    );
}

#[test]
fn unknown_outcome_with_budget_left_is_taken_over_with_reconcile_first() {
    let mut sim = Sim::new();
    sim.now = at(1);
    sim.fail(FIRST_FENCE, FailDisposition::Unknown, secs(0))
        .written();
    sim.now = at(2);
    let step = sim.claim_as(b"taker");
    let previous = PreviousAttempt {
        state: State::Unknown,
        fence: FIRST_FENCE,
    };
    assert_eq!(step.claim_answer(), ClaimAnswer::ReconcileFirst(previous));
    assert_eq!(step.drawn_fence, Some(11));
    let next = step.next();
    assert_eq!(
        (next.state, next.fence, next.attempt),
        (State::InProgress, 11, 2)
    );
    assert_eq!(next.taken_over_from, Some(previous));
    assert_eq!(next.lease_expires_at, Some(at(32)));
    assert_eq!(next.attempt_deadline_at, Some(at(302)));
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::TakenOver,
            State::Unknown,
            State::InProgress,
            11,
            2,
            "outcome unknown"
        )
    );
}

#[test]
fn new_attempt_lease_is_capped_at_its_attempt_deadline() {
    let mut sim = Sim::new();
    sim.now = at(31);
    let step = sim.claim(&ClaimCommand {
        lease: TimeDelta::minutes(10),
        ..claim_as(b"taker")
    });
    assert!(matches!(
        step.claim_answer(),
        ClaimAnswer::ReconcileFirst(_)
    ));
    assert_eq!(step.next().attempt_deadline_at, Some(at(331)));
    assert_eq!(step.next().lease_expires_at, Some(at(331)));
}

#[test]
fn takeovers_count_against_the_attempt_budget() {
    let mut sim = Sim::new();
    for attempt in 2..=MAX_ATTEMPTS {
        sim.now += secs(31);
        let previous_fence = sim.record.fence;
        let step = sim.claim_as(format!("taker-{attempt}").as_bytes());
        assert_eq!(
            step.claim_answer(),
            ClaimAnswer::ReconcileFirst(PreviousAttempt {
                state: State::InProgress,
                fence: previous_fence,
            })
        );
        assert_eq!(sim.record.attempt, attempt);
        assert_eq!(sim.record.fence, previous_fence + 1);
    }
    sim.now += secs(31);
    let step = sim.claim_as(b"one-too-many");
    assert_eq!(step.claim_answer(), ClaimAnswer::NeedsReconciliation);
    assert_eq!(step.drawn_fence, None);
    assert_eq!(sim.record.state, State::Unknown);
    assert_eq!(sim.record.attempt, MAX_ATTEMPTS);
}

// ---------------------------------------------------------------------------
// IN_PROGRESS expired / UNKNOWN, budget spent → NeedsReconciliation
// ---------------------------------------------------------------------------

#[test]
fn expired_lease_with_budget_spent_is_marked_unknown_then_needs_reconciliation_without_writing() {
    let mut sim = Sim::fresh_with(|record| record.attempt = MAX_ATTEMPTS);
    sim.now = at(31);
    let step = sim.claim_as(OTHER);
    assert_eq!(step.claim_answer(), ClaimAnswer::NeedsReconciliation);
    assert_eq!(step.drawn_fence, None);
    let next = step.next();
    assert_eq!(next.state, State::Unknown);
    assert_eq!(next.fence, FIRST_FENCE);
    assert_eq!(next.attempt, MAX_ATTEMPTS);
    assert_eq!(next.claim_token, OWNER.to_vec(), "the owner is unchanged");
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::MarkedUnknown,
            State::InProgress,
            State::Unknown,
            FIRST_FENCE,
            MAX_ATTEMPTS,
            "attempt budget spent"
        )
    );

    let marked = sim.record.clone();
    for token in [OTHER, OWNER, b"third".as_slice()] {
        sim.now += secs(100);
        let again = sim.claim_as(token);
        assert_eq!(again.claim_answer(), ClaimAnswer::NeedsReconciliation);
        again.assert_no_effects();
    }
    assert_eq!(sim.record, marked);
}

#[test]
fn unknown_reported_with_budget_spent_needs_reconciliation_without_writing() {
    let mut sim = Sim::last_attempt();
    sim.now = at(1);
    sim.fail(FIRST_FENCE, FailDisposition::Unknown, secs(0))
        .written();
    sim.now = at(400);
    let step = sim.claim_as(OTHER);
    assert_eq!(step.claim_answer(), ClaimAnswer::NeedsReconciliation);
    step.assert_no_effects();
}

#[test]
fn expired_lease_past_the_operation_deadline_is_marked_unknown_even_with_budget_left() {
    let mut sim = Sim::fresh_with(|record| record.operation_deadline_at = Some(at(20)));
    sim.now = at(31);
    let step = sim.claim_as(OTHER);
    assert_eq!(step.claim_answer(), ClaimAnswer::NeedsReconciliation);
    assert_eq!(step.drawn_fence, None);
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::MarkedUnknown,
            State::InProgress,
            State::Unknown,
            FIRST_FENCE,
            1,
            "operation deadline passed"
        )
    );
    // UNKNOWN past the operation deadline: nothing more to write.
    let again = sim.claim_as(OTHER);
    assert_eq!(again.claim_answer(), ClaimAnswer::NeedsReconciliation);
    again.assert_no_effects();
}

// ---------------------------------------------------------------------------
// RETRY_WAIT → Claim
// ---------------------------------------------------------------------------

/// A retryable failure at t0+1 with retry_after 10 s: RETRY_WAIT, due at t0+11.
fn retry_wait(adjust: impl FnOnce(&mut OperationRecord)) -> Sim {
    let mut sim = Sim::fresh_with(adjust);
    sim.now = at(1);
    sim.fail(FIRST_FENCE, FailDisposition::Retryable, secs(10))
        .written();
    assert_eq!(sim.record.state, State::RetryWait);
    assert_eq!(sim.record.retry_at, Some(at(11)));
    sim
}

#[test]
fn due_retry_is_acquired_with_a_new_fence_and_the_next_attempt() {
    let mut sim = retry_wait(|_| {});
    sim.now = at(11); // exactly due
    let step = sim.claim_as(b"retrier");
    assert_eq!(step.claim_answer(), ClaimAnswer::Acquired);
    assert_eq!(step.drawn_fence, Some(11));
    let next = step.next();
    assert_eq!(
        (next.state, next.fence, next.attempt),
        (State::InProgress, 11, 2)
    );
    assert_eq!(next.taken_over_from, None, "a retry is not a takeover");
    assert_eq!(next.claim_token, b"retrier".to_vec());
    assert_eq!(next.retry_at, None);
    assert_eq!(next.lease_expires_at, Some(at(41)));
    assert_eq!(next.attempt_deadline_at, Some(at(311)));
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::RetryStarted,
            State::RetryWait,
            State::InProgress,
            11,
            2,
            ""
        )
    );
    // And the retrier re-sending its Claim is told Acquired again.
    sim.now = at(12);
    let resent = sim.claim_as(b"retrier");
    assert_eq!(resent.claim_answer(), ClaimAnswer::Acquired);
    resent.assert_no_effects();
}

#[test]
fn retry_not_yet_due_is_pending_until_retry_at() {
    let mut sim = retry_wait(|_| {});
    let before = sim.record.clone();
    sim.now = at(4);
    for token in [OTHER, OWNER, b"".as_slice()] {
        assert_pending(&sim.claim_as(token), PendingReason::RetryScheduled, secs(7));
    }
    assert_eq!(sim.record, before);
}

#[test]
fn due_retry_with_budget_spent_fails_attempts_exhausted() {
    // Fail RETRYABLE on the last attempt ends the operation at once, so a
    // RETRY_WAIT on the last attempt comes from a NOT_APPLIED reconciliation
    // (pinned end to end below); here it is built directly.
    let mut sim = Sim::with(OperationRecord {
        state: State::RetryWait,
        attempt: MAX_ATTEMPTS,
        lease_expires_at: None,
        retry_at: Some(at(11)),
        ..fresh()
    });
    sim.now = at(11);
    let step = sim.claim_as(b"retrier");
    assert_eq!(step.claim_answer(), ClaimAnswer::Completed);
    assert_eq!(step.drawn_fence, None);
    let next = step.next();
    assert_eq!(next.state, State::Failed);
    assert_eq!(next.fence, FIRST_FENCE);
    assert_eq!(next.attempt, MAX_ATTEMPTS);
    assert!(matches!(
        &next.outcome,
        Some(Outcome::Failed { reason: FailureReason::AttemptsExhausted, error })
            if error.code == "attempts_exhausted"
    ));
    assert_eq!(next.outcome_kind, Some(State::Failed));
    assert_eq!(next.completed_at, Some(at(11)));
    assert_eq!(next.retain_until, Some(at(11) + retention()));
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::Failed,
            State::RetryWait,
            State::Failed,
            FIRST_FENCE,
            MAX_ATTEMPTS,
            "attempts_exhausted"
        )
    );
    let replay = sim.claim_as(OTHER);
    assert_eq!(replay.claim_answer(), ClaimAnswer::Completed);
    replay.assert_no_effects();
}

#[test]
fn due_retry_past_the_operation_deadline_fails_deadline_exceeded() {
    let mut sim = retry_wait(|record| record.operation_deadline_at = Some(at(60)));
    sim.now = at(60);
    let step = sim.claim_as(b"retrier");
    assert_eq!(step.claim_answer(), ClaimAnswer::Completed);
    assert_eq!(step.drawn_fence, None);
    let next = step.next();
    assert_eq!(
        (next.state, next.fence, next.attempt),
        (State::Failed, FIRST_FENCE, 1)
    );
    assert!(matches!(
        &next.outcome,
        Some(Outcome::Failed { reason: FailureReason::DeadlineExceeded, error })
            if error.code == "deadline_exceeded"
    ));
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::DeadlineExceeded,
            State::RetryWait,
            State::Failed,
            FIRST_FENCE,
            1,
            "deadline_exceeded"
        )
    );
}

// ---------------------------------------------------------------------------
// SUCCEEDED / FAILED → Claim
// ---------------------------------------------------------------------------

#[test]
fn claim_on_succeeded_or_failed_replays_completed_without_writing() {
    for (name, mut sim) in terminal_states() {
        if sim.record.state == State::Expired {
            continue;
        }
        for token in [OWNER, OTHER, b"".as_slice()] {
            let step = sim.claim_as(token);
            assert_eq!(step.claim_answer(), ClaimAnswer::Completed, "{name}");
            step.assert_no_effects();
        }
    }
}

// ---------------------------------------------------------------------------
// IN_PROGRESS f → Renew f
// ---------------------------------------------------------------------------

#[test]
fn renew_with_the_current_fence_extends_the_lease_from_now() {
    let mut sim = Sim::new();
    sim.now = at(10);
    let step = sim.renew(FIRST_FENCE);
    step.written();
    assert_eq!(step.drawn_fence, None);
    let next = step.next();
    assert_eq!(next.lease_expires_at, Some(at(40)));
    assert_eq!(
        (next.state, next.fence, next.attempt),
        (State::InProgress, FIRST_FENCE, 1)
    );
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::Renewed,
            State::InProgress,
            State::InProgress,
            FIRST_FENCE,
            1,
            ""
        )
    );
}

#[test]
fn renew_may_ask_for_another_lease_length() {
    let mut sim = Sim::new();
    sim.now = at(10);
    let step = sim.renew_for(FIRST_FENCE, Some(secs(60)));
    step.written();
    assert_eq!(step.next().lease_expires_at, Some(at(70)));
    assert_eq!(
        step.next().lease_duration,
        lease(),
        "the default lease is kept"
    );
}

#[test]
fn renew_is_capped_at_the_attempt_deadline() {
    let mut sim = Sim::new();
    sim.now = at(290);
    let step = sim.renew(FIRST_FENCE);
    step.written();
    assert_eq!(step.next().lease_expires_at, Some(at(300)));
    sim.now = at(299);
    let step = sim.renew_for(FIRST_FENCE, Some(TimeDelta::hours(1)));
    assert_eq!(step.next().lease_expires_at, Some(at(300)));
}

#[test]
fn renew_by_an_owner_whose_lease_ran_out_unreplaced_extends_it_again() {
    let mut sim = Sim::new();
    sim.now = at(45);
    sim.renew(FIRST_FENCE).written();
    assert_eq!(sim.record.lease_expires_at, Some(at(75)));
    assert_pending(&sim.claim_as(OTHER), PendingReason::InProgress, secs(30));
}

#[test]
fn renew_at_or_after_the_attempt_deadline_is_refused_as_a_late_write() {
    for offset in [300, 301, 10_000] {
        let mut sim = Sim::new();
        sim.now = at(offset);
        let step = sim.renew(FIRST_FENCE);
        assert_eq!(
            step.error(),
            &refused(Refusal::AttemptDeadlinePassed, State::InProgress)
        );
        step.assert_only_history(entry(
            HistoryEvent::LateWriteRefused,
            State::InProgress,
            State::InProgress,
            FIRST_FENCE,
            1,
            "renew",
        ));
        assert_eq!(sim.record, fresh());
    }
}

#[test]
fn stale_fence_cannot_renew_after_takeover() {
    let mut sim = Sim::new();
    sim.now = at(31);
    sim.claim_as(b"taker");
    let after_takeover = sim.record.clone();
    sim.now = at(32);
    let step = sim.renew(FIRST_FENCE);
    assert_eq!(step.error(), &lease_lost(11, State::InProgress));
    step.assert_only_history(entry(
        HistoryEvent::StaleWriteRefused,
        State::InProgress,
        State::InProgress,
        FIRST_FENCE,
        2,
        "renew",
    ));
    assert_eq!(sim.record, after_takeover);
}

#[test]
fn renew_is_refused_once_the_attempt_is_no_longer_in_progress() {
    let cases: Vec<(&str, Sim, Error)> = every_state()
        .into_iter()
        .filter_map(|(name, sim)| {
            let expected = match sim.record.state {
                State::Succeeded | State::Failed | State::Expired => {
                    refused(Refusal::OperationTerminal, sim.record.state)
                }
                State::Unknown | State::RetryWait => {
                    refused(Refusal::StateForbids, sim.record.state)
                }
                State::InProgress => return None,
            };
            Some((name, sim, expected))
        })
        .collect();
    assert_eq!(cases.len(), 7);
    for (name, mut sim, expected) in cases {
        let before = sim.record.clone();
        let step = sim.renew(FIRST_FENCE);
        assert_eq!(step.error(), &expected, "{name}");
        step.assert_no_effects();
        assert_eq!(sim.record, before, "{name}");
    }
}

// ---------------------------------------------------------------------------
// IN_PROGRESS f → Complete f
// ---------------------------------------------------------------------------

#[test]
fn complete_with_the_current_fence_succeeds_and_keeps_a_receipt() {
    let mut sim = Sim::new();
    sim.now = at(10);
    let command = complete_cmd(FIRST_FENCE, "ok");
    let step = sim.complete(FIRST_FENCE, "ok");
    step.written();
    assert_eq!(step.drawn_fence, None);
    let next = step.next();
    assert_eq!(
        (next.state, next.fence, next.attempt),
        (State::Succeeded, FIRST_FENCE, 1)
    );
    assert_eq!(next.outcome, Some(Outcome::Succeeded(result("ok"))));
    assert_eq!(next.outcome_kind, Some(State::Succeeded));
    assert_eq!(next.lease_expires_at, None);
    assert_eq!(next.completed_at, Some(at(10)));
    assert_eq!(next.retain_until, Some(at(10) + retention()));
    assert_eq!(
        next.last_write,
        Some(WriteReceipt {
            fence: FIRST_FENCE,
            digest: command.digest(),
            writer: Writer::Owner,
        })
    );
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::Completed,
            State::InProgress,
            State::Succeeded,
            FIRST_FENCE,
            1,
            ""
        )
    );
}

#[test]
fn owner_whose_lease_ran_out_unreplaced_may_still_complete_before_its_attempt_deadline() {
    let mut sim = Sim::new();
    sim.now = at(299);
    let step = sim.complete(FIRST_FENCE, "ok");
    step.written();
    assert_eq!(step.next().state, State::Succeeded);
}

#[test]
fn owner_marked_unknown_by_a_claim_may_still_complete_before_its_attempt_deadline() {
    let mut sim = Sim::last_attempt();
    sim.now = at(31);
    assert_eq!(
        sim.claim_as(OTHER).claim_answer(),
        ClaimAnswer::NeedsReconciliation
    );
    sim.now = at(40);
    let step = sim.complete(FIRST_FENCE, "ok");
    step.written();
    assert_eq!(step.next().state, State::Succeeded);
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::Completed,
            State::Unknown,
            State::Succeeded,
            FIRST_FENCE,
            1,
            ""
        )
    );
}

#[test]
fn owner_marked_unknown_by_a_claim_may_still_fail_before_its_attempt_deadline() {
    let mut sim = Sim::last_attempt();
    sim.now = at(31);
    sim.claim_as(OTHER);
    sim.now = at(40);
    let step = sim.fail(FIRST_FENCE, FailDisposition::Retryable, secs(1));
    step.written();
    assert!(matches!(
        step.next().outcome,
        Some(Outcome::Failed {
            reason: FailureReason::AttemptsExhausted,
            ..
        })
    ));
}

#[test]
fn complete_at_or_after_the_attempt_deadline_is_refused_as_a_late_write() {
    let mut expired = Sim::new();
    expired.now = at(300);
    let mut marked = Sim::last_attempt();
    marked.now = at(31);
    marked.claim_as(OTHER);
    marked.now = at(300);
    for (mut sim, state) in [(expired, State::InProgress), (marked, State::Unknown)] {
        let before = sim.record.clone();
        let step = sim.complete(FIRST_FENCE, "late");
        assert_eq!(
            step.error(),
            &refused(Refusal::AttemptDeadlinePassed, state)
        );
        step.assert_only_history(entry(
            HistoryEvent::LateWriteRefused,
            state,
            state,
            FIRST_FENCE,
            1,
            "complete",
        ));
        assert_eq!(sim.record, before);
    }
}

#[test]
fn stale_fence_cannot_complete_after_takeover() {
    let mut sim = Sim::new();
    sim.now = at(31);
    sim.claim_as(b"taker");
    let after_takeover = sim.record.clone();
    sim.now = at(40);
    let step = sim.complete(FIRST_FENCE, "late");
    assert_eq!(step.error(), &lease_lost(11, State::InProgress));
    step.assert_only_history(entry(
        HistoryEvent::StaleWriteRefused,
        State::InProgress,
        State::InProgress,
        FIRST_FENCE,
        2,
        "complete",
    ));
    assert_eq!(sim.record, after_takeover);
    // The new owner still can.
    sim.complete(11, "ok").written();
}

#[test]
fn resent_complete_with_same_fence_and_digest_is_written_without_effects() {
    let mut sim = Sim::new();
    sim.now = at(10);
    sim.complete(FIRST_FENCE, "ok").written();
    let completed = sim.record.clone();
    // Even after the attempt deadline: it is the original answer, not a write.
    for offset in [11, 400] {
        sim.now = at(offset);
        let step = sim.complete(FIRST_FENCE, "ok");
        step.written();
        step.assert_no_effects();
    }
    assert_eq!(sim.record, completed);
}

#[test]
fn complete_resent_with_another_result_is_request_mismatch() {
    let mut sim = Sim::new();
    sim.now = at(10);
    sim.complete(FIRST_FENCE, "ok").written();
    let step = sim.complete(FIRST_FENCE, "different");
    assert_eq!(
        step.error(),
        &refused(Refusal::RequestMismatch, State::Succeeded)
    );
    step.assert_no_effects();
}

#[test]
fn complete_after_the_owner_failed_is_refused() {
    let mut sim = Sim::new();
    sim.now = at(10);
    sim.fail(FIRST_FENCE, FailDisposition::Terminal, secs(0))
        .written();
    let failed = sim.record.clone();
    let step = sim.complete(FIRST_FENCE, "ok");
    // Same fence, another request: FAILED_PRECONDITION with the state.
    assert_eq!(
        step.error(),
        &refused(Refusal::RequestMismatch, State::Failed)
    );
    step.assert_no_effects();
    assert_eq!(sim.record, failed);
}

#[test]
fn complete_on_a_failed_record_without_a_receipt_for_that_fence_is_operation_terminal() {
    let mut sim = Sim::with(OperationRecord {
        state: State::Failed,
        outcome: Some(Outcome::Failed {
            reason: FailureReason::Terminal,
            error: report(CODE),
        }),
        outcome_kind: Some(State::Failed),
        lease_expires_at: None,
        ..fresh()
    });
    sim.now = at(10);
    let step = sim.complete(FIRST_FENCE, "ok");
    assert_eq!(
        step.error(),
        &refused(Refusal::OperationTerminal, State::Failed)
    );
    step.assert_no_effects();
}

// ---------------------------------------------------------------------------
// IN_PROGRESS f → Fail f
// ---------------------------------------------------------------------------

#[test]
fn fail_terminal_ends_failed_with_the_callers_error() {
    let mut sim = Sim::new();
    sim.now = at(10);
    let command = fail_cmd(FIRST_FENCE, FailDisposition::Terminal, secs(0));
    let step = sim.fail(FIRST_FENCE, FailDisposition::Terminal, secs(0));
    step.written();
    assert_eq!(step.drawn_fence, None);
    let next = step.next();
    assert_eq!(
        (next.state, next.fence, next.attempt),
        (State::Failed, FIRST_FENCE, 1)
    );
    assert_eq!(
        next.outcome,
        Some(Outcome::Failed {
            reason: FailureReason::Terminal,
            error: report(CODE)
        })
    );
    assert_eq!(next.outcome_kind, Some(State::Failed));
    assert_eq!(next.completed_at, Some(at(10)));
    assert_eq!(next.retain_until, Some(at(10) + retention()));
    assert_eq!(
        next.last_write,
        Some(WriteReceipt {
            fence: FIRST_FENCE,
            digest: command.digest(),
            writer: Writer::Owner,
        })
    );
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::Failed,
            State::InProgress,
            State::Failed,
            FIRST_FENCE,
            1,
            CODE
        )
    );
}

#[test]
fn fail_retryable_with_budget_schedules_a_retry() {
    let mut sim = Sim::new();
    sim.now = at(10);
    let step = sim.fail(FIRST_FENCE, FailDisposition::Retryable, secs(15));
    step.written();
    assert_eq!(step.drawn_fence, None);
    let next = step.next();
    assert_eq!(
        (next.state, next.fence, next.attempt),
        (State::RetryWait, FIRST_FENCE, 1)
    );
    assert_eq!(next.retry_at, Some(at(25)));
    assert_eq!(next.lease_expires_at, None);
    assert_eq!(next.outcome, None);
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::RetryScheduled,
            State::InProgress,
            State::RetryWait,
            FIRST_FENCE,
            1,
            CODE
        )
    );
}

#[test]
fn fail_retryable_without_budget_fails_attempts_exhausted() {
    let mut sim = Sim::last_attempt();
    sim.now = at(10);
    let step = sim.fail(FIRST_FENCE, FailDisposition::Retryable, secs(15));
    step.written();
    let next = step.next();
    assert_eq!(next.state, State::Failed);
    assert_eq!(
        next.outcome,
        Some(Outcome::Failed {
            reason: FailureReason::AttemptsExhausted,
            error: report(CODE)
        })
    );
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::Failed,
            State::InProgress,
            State::Failed,
            FIRST_FENCE,
            1,
            CODE
        )
    );
}

#[test]
fn fail_retryable_that_would_retry_past_the_operation_deadline_fails_deadline_exceeded() {
    // Retry due at t0+20: a deadline at t0+20 is too late, t0+21 is not.
    let mut sim = Sim::fresh_with(|record| record.operation_deadline_at = Some(at(20)));
    sim.now = at(10);
    let step = sim.fail(FIRST_FENCE, FailDisposition::Retryable, secs(10));
    step.written();
    assert_eq!(
        step.next().outcome,
        Some(Outcome::Failed {
            reason: FailureReason::DeadlineExceeded,
            error: report(CODE)
        })
    );
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::DeadlineExceeded,
            State::InProgress,
            State::Failed,
            FIRST_FENCE,
            1,
            CODE
        )
    );

    let mut sim = Sim::fresh_with(|record| record.operation_deadline_at = Some(at(21)));
    sim.now = at(10);
    let step = sim.fail(FIRST_FENCE, FailDisposition::Retryable, secs(10));
    assert_eq!(step.next().state, State::RetryWait);
}

#[test]
fn fail_unknown_leaves_the_outcome_unknown() {
    let mut sim = Sim::new();
    sim.now = at(10);
    let step = sim.fail(FIRST_FENCE, FailDisposition::Unknown, secs(0));
    step.written();
    assert_eq!(step.drawn_fence, None);
    let next = step.next();
    assert_eq!(
        (next.state, next.fence, next.attempt),
        (State::Unknown, FIRST_FENCE, 1)
    );
    assert_eq!(next.lease_expires_at, None);
    assert_eq!(next.outcome, None);
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::OutcomeUnknown,
            State::InProgress,
            State::Unknown,
            FIRST_FENCE,
            1,
            CODE
        )
    );
}

#[test]
fn resent_fail_is_written_without_effects_even_after_a_new_owner_took_over() {
    let mut sim = retry_wait(|_| {});
    sim.now = at(2);
    let resent = sim.fail(FIRST_FENCE, FailDisposition::Retryable, secs(10));
    resent.written();
    resent.assert_no_effects();

    sim.now = at(11);
    assert_eq!(
        sim.claim_as(b"retrier").claim_answer(),
        ClaimAnswer::Acquired
    );
    let retried = sim.record.clone();
    sim.now = at(12);
    let resent = sim.fail(FIRST_FENCE, FailDisposition::Retryable, secs(10));
    resent.written();
    resent.assert_no_effects();
    assert_eq!(sim.record, retried);
}

#[test]
fn fail_resent_with_another_request_is_request_mismatch() {
    let mut sim = Sim::new();
    sim.now = at(10);
    sim.fail(FIRST_FENCE, FailDisposition::Unknown, secs(0))
        .written();
    for (disposition, retry_after) in [
        (FailDisposition::Terminal, secs(0)),
        (FailDisposition::Retryable, secs(0)),
        (FailDisposition::Unknown, secs(5)),
    ] {
        let step = sim.fail(FIRST_FENCE, disposition, retry_after);
        assert_eq!(
            step.error(),
            &refused(Refusal::RequestMismatch, State::Unknown)
        );
        step.assert_no_effects();
    }
    let step = sim.complete(FIRST_FENCE, "it worked after all");
    assert_eq!(
        step.error(),
        &refused(Refusal::RequestMismatch, State::Unknown)
    );
}

#[test]
fn stale_fence_cannot_fail_after_takeover() {
    for disposition in [
        FailDisposition::Terminal,
        FailDisposition::Retryable,
        FailDisposition::Unknown,
    ] {
        let mut sim = Sim::new();
        sim.now = at(31);
        sim.claim_as(b"taker");
        let after_takeover = sim.record.clone();
        let step = sim.fail(FIRST_FENCE, disposition, secs(1));
        assert_eq!(step.error(), &lease_lost(11, State::InProgress));
        step.assert_only_history(entry(
            HistoryEvent::StaleWriteRefused,
            State::InProgress,
            State::InProgress,
            FIRST_FENCE,
            2,
            "fail",
        ));
        assert_eq!(sim.record, after_takeover);
    }
}

#[test]
fn stale_fence_is_refused_and_recorded_in_every_state() {
    for (name, mut sim) in every_state() {
        let before = sim.record.clone();
        let current = before.fence;
        for stale in [current - 1, current + 1] {
            let steps = [
                ("renew", sim.renew(stale)),
                ("complete", sim.complete(stale, "x")),
                ("fail", sim.fail(stale, FailDisposition::Terminal, secs(0))),
                ("reconcile", sim.reconcile(stale, Resolution::NotApplied)),
            ];
            for (rpc, step) in steps {
                assert_eq!(
                    step.error(),
                    &lease_lost(current, before.state),
                    "{name} {rpc}"
                );
                step.assert_only_history(entry(
                    HistoryEvent::StaleWriteRefused,
                    before.state,
                    before.state,
                    stale,
                    before.attempt,
                    rpc,
                ));
            }
        }
        assert_eq!(sim.record, before, "{name}");
    }
}

// ---------------------------------------------------------------------------
// Reconcile
// ---------------------------------------------------------------------------

#[test]
fn reconcile_on_a_live_lease_is_refused_lease_still_live() {
    let mut sim = Sim::new();
    sim.now = at(29);
    for resolution in [
        Resolution::Succeeded(result("ok")),
        Resolution::Failed(report(CODE)),
        Resolution::NotApplied,
    ] {
        let step = sim.reconcile(FIRST_FENCE, resolution);
        assert_eq!(
            step.error(),
            &refused(Refusal::LeaseStillLive, State::InProgress)
        );
        step.assert_no_effects();
    }
}

/// The unresolved states a Reconcile may resolve, before the attempt deadline.
fn unresolved_states() -> Vec<(&'static str, Sim)> {
    every_state()
        .into_iter()
        .filter(|(_, sim)| sim.record.unresolved(sim.now) || sim.record.state == State::RetryWait)
        .collect()
}

#[test]
fn reconcile_succeeded_or_failed_resolves_every_unresolved_state_with_a_new_fence() {
    let states = unresolved_states();
    assert_eq!(states.len(), 5);
    for (name, sim) in states {
        for (resolution, state, detail) in [
            (
                Resolution::Succeeded(result("found")),
                State::Succeeded,
                "succeeded",
            ),
            (Resolution::Failed(report(CODE)), State::Failed, "failed"),
        ] {
            let mut sim = sim.clone();
            let before = sim.record.clone();
            let command = reconcile_cmd(before.fence, resolution.clone());
            let step = sim.reconcile(before.fence, resolution);
            step.written();
            assert_eq!(step.drawn_fence, Some(before.fence + 1), "{name}");
            let next = step.next();
            assert_eq!(next.state, state, "{name}");
            assert_eq!(next.fence, before.fence + 1, "{name}");
            assert_eq!(
                next.attempt, before.attempt,
                "a reconciler is not an attempt"
            );
            let expected_outcome = match state {
                State::Succeeded => Outcome::Succeeded(result("found")),
                _ => Outcome::Failed {
                    reason: FailureReason::Terminal,
                    error: report(CODE),
                },
            };
            assert_eq!(next.outcome, Some(expected_outcome), "{name}");
            assert_eq!(next.completed_at, Some(sim.now));
            assert_eq!(next.retain_until, Some(sim.now + retention()));
            assert_eq!(
                next.last_write,
                Some(WriteReceipt {
                    fence: before.fence,
                    digest: command.digest(),
                    writer: Writer::Reconciler,
                }),
                "the receipt names the fence the reconciler expected"
            );
            assert_eq!(
                step.history(),
                &entry(
                    HistoryEvent::Reconciled,
                    before.state,
                    state,
                    before.fence + 1,
                    before.attempt,
                    detail
                ),
                "{name}"
            );
        }
    }
}

#[test]
fn not_applied_before_the_attempt_deadline_is_refused_attempt_still_running() {
    for (name, mut sim) in unresolved_states() {
        if sim.record.state == State::RetryWait {
            continue;
        }
        let before = sim.record.clone();
        let step = sim.reconcile(before.fence, Resolution::NotApplied);
        assert_eq!(
            step.error(),
            &refused(Refusal::AttemptStillRunning, before.state),
            "{name}"
        );
        step.assert_no_effects();
    }
}

#[test]
fn not_applied_after_the_attempt_deadline_releases_a_retry_due_now_with_a_new_fence() {
    for (name, mut sim) in unresolved_states() {
        if sim.record.state == State::RetryWait {
            continue;
        }
        sim.now = at(300);
        let before = sim.record.clone();
        let step = sim.reconcile(before.fence, Resolution::NotApplied);
        step.written();
        assert_eq!(step.drawn_fence, Some(11), "{name}");
        let next = step.next();
        assert_eq!((next.state, next.fence), (State::RetryWait, 11), "{name}");
        assert_eq!(next.retry_at, Some(at(300)));
        assert_eq!(next.lease_expires_at, None);
        assert_eq!(next.attempt, before.attempt);
        assert_eq!(
            step.history(),
            &entry(
                HistoryEvent::Reconciled,
                before.state,
                State::RetryWait,
                11,
                before.attempt,
                "not_applied"
            ),
            "{name}"
        );
    }
}

#[test]
fn not_applied_on_retry_wait_is_allowed_before_the_attempt_deadline() {
    let mut sim = retry_wait(|_| {});
    sim.now = at(5);
    let step = sim.reconcile(FIRST_FENCE, Resolution::NotApplied);
    step.written();
    assert_eq!(step.next().state, State::RetryWait);
    assert_eq!(step.next().retry_at, Some(at(5)), "due now, not at t0+11");
    assert_eq!(step.next().fence, 11);
}

#[test]
fn not_applied_then_claim_starts_a_new_attempt_acquired() {
    let mut sim = Sim::new();
    sim.now = at(300);
    sim.reconcile(FIRST_FENCE, Resolution::NotApplied).written();
    let step = sim.claim_as(b"retrier");
    assert_eq!(step.claim_answer(), ClaimAnswer::Acquired);
    assert_eq!(step.drawn_fence, Some(12));
    assert_eq!((sim.record.fence, sim.record.attempt), (12, 2));
}

#[test]
fn not_applied_with_budget_spent_ends_attempts_exhausted_on_the_next_claim() {
    let mut sim = Sim::last_attempt();
    sim.now = at(31);
    assert_eq!(
        sim.claim_as(OTHER).claim_answer(),
        ClaimAnswer::NeedsReconciliation
    );
    sim.now = at(300);
    sim.reconcile(FIRST_FENCE, Resolution::NotApplied).written();
    assert_eq!(sim.record.fence, 11);
    let step = sim.claim_as(OTHER);
    assert_eq!(step.claim_answer(), ClaimAnswer::Completed);
    assert_eq!(sim.record.state, State::Failed);
    assert_eq!(sim.record.fence, 11);
    assert!(matches!(
        sim.record.outcome,
        Some(Outcome::Failed {
            reason: FailureReason::AttemptsExhausted,
            ..
        })
    ));
    // The old owner's late write is stale; a write with the reconciler's fence
    // finds a terminal record.
    let step = sim.complete(FIRST_FENCE, "ok");
    assert_eq!(step.error(), &lease_lost(11, State::Failed));
    let step = sim.complete(11, "ok");
    assert_eq!(
        step.error(),
        &refused(Refusal::OperationTerminal, State::Failed)
    );
    step.assert_no_effects();
}

#[test]
fn resent_reconcile_is_written_without_effects_even_after_the_record_moved_on() {
    let mut sim = Sim::new();
    sim.now = at(31);
    sim.reconcile(FIRST_FENCE, Resolution::Succeeded(result("found")))
        .written();
    let reconciled = sim.record.clone();
    sim.now = at(32);
    let step = sim.reconcile(FIRST_FENCE, Resolution::Succeeded(result("found")));
    step.written();
    step.assert_no_effects();
    assert_eq!(sim.record, reconciled);

    let mut sim = Sim::new();
    sim.now = at(300);
    sim.reconcile(FIRST_FENCE, Resolution::NotApplied).written();
    sim.claim_as(b"retrier");
    let retried = sim.record.clone();
    let step = sim.reconcile(FIRST_FENCE, Resolution::NotApplied);
    step.written();
    step.assert_no_effects();
    assert_eq!(sim.record, retried);
}

#[test]
fn reconcile_resent_with_another_resolution_is_request_mismatch() {
    let mut sim = Sim::new();
    sim.now = at(31);
    sim.reconcile(FIRST_FENCE, Resolution::Succeeded(result("found")))
        .written();
    let step = sim.reconcile(FIRST_FENCE, Resolution::Failed(report(CODE)));
    assert_eq!(
        step.error(),
        &refused(Refusal::RequestMismatch, State::Succeeded)
    );
    step.assert_no_effects();
}

#[test]
fn late_owner_complete_after_a_reconcile_is_lease_lost_not_request_mismatch() {
    let mut sim = Sim::new();
    sim.now = at(31);
    sim.reconcile(FIRST_FENCE, Resolution::Succeeded(result("found")))
        .written();
    let reconciled = sim.record.clone();
    sim.now = at(40);
    // The same bytes the reconciler stored: still another request.
    for body in ["found", "mine"] {
        let step = sim.complete(FIRST_FENCE, body);
        assert_eq!(step.error(), &lease_lost(11, State::Succeeded));
        step.assert_only_history(entry(
            HistoryEvent::StaleWriteRefused,
            State::Succeeded,
            State::Succeeded,
            FIRST_FENCE,
            1,
            "complete",
        ));
    }
    let step = sim.fail(FIRST_FENCE, FailDisposition::Unknown, secs(0));
    assert_eq!(step.error(), &lease_lost(11, State::Succeeded));
    assert_eq!(sim.record, reconciled);
}

#[test]
fn reconcile_on_a_terminal_record_is_refused_operation_terminal() {
    for (name, mut sim) in terminal_states() {
        let before = sim.record.clone();
        for resolution in [
            Resolution::Succeeded(result("found")),
            Resolution::Failed(report(CODE)),
            Resolution::NotApplied,
        ] {
            let step = sim.reconcile(before.fence, resolution);
            assert_eq!(
                step.error(),
                &refused(Refusal::OperationTerminal, before.state),
                "{name}"
            );
            step.assert_no_effects();
        }
    }
}

// ---------------------------------------------------------------------------
// Sweeper: terminal past retention → tombstone; tombstone → Claim
// ---------------------------------------------------------------------------

#[test]
fn sweeper_turns_a_terminal_record_past_retention_into_a_tombstone() {
    let mut succeeded = Sim::new();
    succeeded.now = at(1);
    succeeded.complete(FIRST_FENCE, "ok").written();
    let mut failed = Sim::new();
    failed.now = at(1);
    failed
        .fail(FIRST_FENCE, FailDisposition::Terminal, secs(0))
        .written();
    for (mut sim, kind) in [(succeeded, State::Succeeded), (failed, State::Failed)] {
        let retain_until = at(1) + retention();
        assert_eq!(sim.record.retain_until, Some(retain_until));
        sim.now = retain_until - TimeDelta::milliseconds(1);
        assert!(sim.sweep().is_none(), "{kind:?} swept before retention");

        sim.now = retain_until;
        let before = sim.record.clone();
        let step = sim.sweep().expect("retention passed");
        assert_eq!(step.drawn_fence, None);
        let next = step.next();
        assert_eq!(next.state, State::Expired);
        assert_eq!(next.outcome, None, "a tombstone keeps no result");
        assert_eq!(
            next.outcome_kind,
            Some(kind),
            "but says which outcome it had"
        );
        assert_eq!(next.fingerprint, before.fingerprint);
        assert_eq!(next.operation_id, before.operation_id);
        assert_eq!(next.scope, before.scope);
        assert_eq!(
            next.retain_until,
            Some(retain_until + tombstone_retention())
        );
        assert_eq!(
            step.history(),
            &entry(
                HistoryEvent::Expired,
                kind,
                State::Expired,
                FIRST_FENCE,
                1,
                "retention passed"
            )
        );

        // Tombstone → Claim: never a new execution.
        let claim = sim.claim_as(OTHER);
        assert_eq!(
            claim.answer,
            Err(Error::ResultExpired {
                operation_id: op_id()
            })
        );
        claim.assert_no_effects();
    }
}

#[test]
fn sweeper_never_changes_a_tombstone() {
    let (_, mut sim) = every_state()
        .into_iter()
        .find(|(_, sim)| sim.record.state == State::Expired)
        .expect("a tombstone");
    let tombstone = sim.record.clone();
    sim.now += tombstone_retention() + TimeDelta::days(1);
    // Deleting it is the store's; the record itself never changes.
    if let Some(step) = sim.sweep() {
        assert_eq!(step.effects.update, None, "{step:#?}");
    }
    assert_eq!(sim.record, tombstone);
}

#[test]
fn sweeper_never_sweeps_unresolved_or_running_records() {
    for (name, sim) in every_state() {
        if sim.record.state.is_terminal() {
            continue;
        }
        for later in [secs(0), TimeDelta::days(2), TimeDelta::days(400)] {
            let mut sim = sim.clone();
            sim.now += later;
            let before = sim.record.clone();
            assert!(sim.sweep().is_none(), "{name} swept after {later}");
            assert_eq!(sim.record, before);
        }
    }
}

#[test]
fn sweeper_ends_a_retry_past_the_operation_deadline_as_deadline_exceeded() {
    let mut sim = retry_wait(|record| record.operation_deadline_at = Some(at(60)));
    sim.now = at(60) - TimeDelta::milliseconds(1);
    assert!(sim.sweep().is_none());
    sim.now = at(60);
    let step = sim.sweep().expect("the operation deadline passed");
    assert_eq!(step.drawn_fence, None);
    let next = step.next();
    assert_eq!(
        (next.state, next.fence, next.attempt),
        (State::Failed, FIRST_FENCE, 1)
    );
    assert!(matches!(
        &next.outcome,
        Some(Outcome::Failed { reason: FailureReason::DeadlineExceeded, error })
            if error.code == "deadline_exceeded"
    ));
    assert_eq!(next.retain_until, Some(at(60) + retention()));
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::DeadlineExceeded,
            State::RetryWait,
            State::Failed,
            FIRST_FENCE,
            1,
            "deadline_exceeded"
        )
    );
    // Then it expires like any terminal record.
    sim.now = at(60) + retention();
    assert_eq!(
        sim.sweep().expect("retention passed").next().state,
        State::Expired
    );
}

// ---------------------------------------------------------------------------
// Terminal records never change
// ---------------------------------------------------------------------------

#[test]
fn terminal_records_never_change_under_any_command() {
    for (name, sim) in terminal_states() {
        let start = sim.now;
        for later in [secs(0), TimeDelta::hours(1), TimeDelta::days(3)] {
            let mut sim = sim.clone();
            sim.now = start + later;
            let before = sim.record.clone();
            let current = before.fence;
            let mut steps = Vec::new();
            for token in [OWNER, OTHER, b"".as_slice()] {
                steps.push(sim.claim_as(token));
                steps.push(sim.claim(&ClaimCommand {
                    fingerprint: fingerprint(3),
                    ..claim_as(token)
                }));
            }
            for fence in [current - 1, current, current + 1] {
                steps.push(sim.renew(fence));
                steps.push(sim.complete(fence, "ok"));
                steps.push(sim.complete(fence, "other"));
                for disposition in [
                    FailDisposition::Terminal,
                    FailDisposition::Retryable,
                    FailDisposition::Unknown,
                ] {
                    steps.push(sim.fail(fence, disposition, secs(1)));
                }
                steps.push(sim.reconcile(fence, Resolution::Succeeded(result("ok"))));
                steps.push(sim.reconcile(fence, Resolution::Failed(report(CODE))));
                steps.push(sim.reconcile(fence, Resolution::NotApplied));
            }
            for step in &steps {
                assert_eq!(step.effects.update, None, "{name}: {step:#?}");
                if let Some(history) = &step.effects.history {
                    assert_eq!(history.event, HistoryEvent::StaleWriteRefused, "{name}");
                    assert_eq!(history.to_state, before.state);
                }
            }
            assert_eq!(sim.record, before, "{name}");
        }
    }
}

// ---------------------------------------------------------------------------
// Invariants over random sequences of events
// ---------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Config {
    max_attempts: u32,
    lease_secs: i64,
    max_attempt_secs: i64,
    retention_secs: i64,
    operation_deadline_secs: Option<i64>,
}

#[derive(Debug, Clone)]
enum FencePick {
    Current,
    /// Some fence the operation had before (or has now).
    Earlier(usize),
    /// A fence the sequence has not handed out yet.
    Unissued(u64),
}

#[derive(Debug, Clone)]
enum Event {
    Advance {
        millis: i64,
    },
    Claim {
        token: u8,
        reused_key: bool,
        lease_secs: i64,
    },
    Renew {
        fence: FencePick,
        lease_secs: Option<i64>,
    },
    Complete {
        fence: FencePick,
        body: u8,
    },
    Fail {
        fence: FencePick,
        disposition: FailDisposition,
        retry_secs: i64,
        code: u8,
    },
    Reconcile {
        fence: FencePick,
        resolution: u8,
        body: u8,
    },
    /// The sweeper passes.
    Sweep,
}

fn config_strategy() -> impl Strategy<Value = Config> {
    (
        1u32..=4,
        1i64..=60,
        5i64..=300,
        30i64..=3_600,
        prop::option::of(20i64..=1_200),
    )
        .prop_map(
            |(
                max_attempts,
                lease_secs,
                max_attempt_secs,
                retention_secs,
                operation_deadline_secs,
            )| {
                Config {
                    max_attempts,
                    lease_secs,
                    max_attempt_secs,
                    retention_secs,
                    operation_deadline_secs,
                }
            },
        )
}

fn fence_strategy() -> impl Strategy<Value = FencePick> {
    prop_oneof![
        4 => Just(FencePick::Current),
        2 => any::<usize>().prop_map(FencePick::Earlier),
        1 => (0u64..3).prop_map(FencePick::Unissued),
    ]
}

fn disposition_strategy() -> impl Strategy<Value = FailDisposition> {
    prop_oneof![
        1 => Just(FailDisposition::Terminal),
        2 => Just(FailDisposition::Retryable),
        2 => Just(FailDisposition::Unknown),
    ]
}

fn event_strategy() -> impl Strategy<Value = Event> {
    prop_oneof![
        5 => prop_oneof![0i64..=2_000, 0i64..=70_000, 0i64..=700_000]
            .prop_map(|millis| Event::Advance { millis }),
        4 => (0u8..4, prop::bool::weighted(0.1), 1i64..=90).prop_map(
            |(token, reused_key, lease_secs)| Event::Claim { token, reused_key, lease_secs }
        ),
        2 => (fence_strategy(), prop::option::of(1i64..=90))
            .prop_map(|(fence, lease_secs)| Event::Renew { fence, lease_secs }),
        1 => (fence_strategy(), 0u8..2).prop_map(|(fence, body)| Event::Complete { fence, body }),
        3 => (fence_strategy(), disposition_strategy(), 0i64..=120, 0u8..2).prop_map(
            |(fence, disposition, retry_secs, code)| Event::Fail { fence, disposition, retry_secs, code }
        ),
        2 => (fence_strategy(), 0u8..3, 0u8..2)
            .prop_map(|(fence, resolution, body)| Event::Reconcile { fence, resolution, body }),
        1 => Just(Event::Sweep),
    ]
}

/// Tokens 1..=3 are clients; 0 is a Claim without a token.
fn token(index: u8) -> Vec<u8> {
    match index {
        0 => Vec::new(),
        _ => format!("client-{index}").into_bytes(),
    }
}

/// A lease handed to an owner: `[from, until)`.
#[derive(Debug, Clone, Copy)]
struct Grant {
    fence: Fence,
    from: DateTime<Utc>,
    until: DateTime<Utc>,
}

/// What the store and an observer see of one operation under random events.
struct Run {
    sim: Sim,
    first: ClaimCommand,
    /// Every fence the record has carried, in order.
    issued: Vec<Fence>,
    grants: Vec<Grant>,
}

impl Run {
    fn new(config: &Config) -> Self {
        let first = ClaimCommand {
            lease: secs(config.lease_secs),
            max_attempt_duration: secs(config.max_attempt_secs),
            max_attempts: config.max_attempts,
            retention: secs(config.retention_secs),
            operation_deadline: config.operation_deadline_secs.map(secs),
            ..claim_as(&token(1))
        };
        let sim = Sim::with(inserted_record(&first, FIRST_FENCE, t0()));
        let until = sim.record.lease_expires_at.expect("a first lease");
        Self {
            sim,
            first,
            issued: vec![FIRST_FENCE],
            grants: vec![Grant {
                fence: FIRST_FENCE,
                from: t0(),
                until,
            }],
        }
    }

    fn pick(&self, pick: &FencePick) -> Fence {
        match pick {
            FencePick::Current => self.sim.record.fence,
            FencePick::Earlier(index) => self.issued[index % self.issued.len()],
            FencePick::Unissued(ahead) => self.sim.next_fence + ahead,
        }
    }

    fn grant(&mut self, fence: Fence) {
        let until = self
            .sim
            .record
            .lease_expires_at
            .expect("an owner has a lease");
        match self.grants.iter_mut().find(|grant| grant.fence == fence) {
            Some(grant) => grant.until = until,
            None => self.grants.push(Grant {
                fence,
                from: self.sim.now,
                until,
            }),
        }
    }

    fn play(&mut self, event: &Event) {
        let now = self.sim.now;
        let step = match event {
            Event::Advance { millis } => {
                self.sim.now += TimeDelta::milliseconds(*millis);
                return;
            }
            Event::Sweep => {
                let before = self.sim.record.clone();
                let retention_passed = before.retain_until.is_some_and(|until| until <= now);
                let due = match before.state {
                    State::Succeeded | State::Failed => retention_passed,
                    State::RetryWait => before.operation_deadline_at.is_some_and(|at| at <= now),
                    _ => false,
                };
                match self.sim.sweep() {
                    Some(step) => self.check_sweep(&step),
                    None => assert!(!due, "the sweeper skipped a due record: {before:#?}"),
                }
                return;
            }
            Event::Claim {
                token: index,
                reused_key,
                lease_secs,
            } => {
                let command = ClaimCommand {
                    fingerprint: if *reused_key {
                        fingerprint(2)
                    } else {
                        the_fingerprint()
                    },
                    claim_token: token(*index),
                    lease: secs(*lease_secs),
                    ..self.first.clone()
                };
                let step = self.sim.claim(&command);
                self.check_claim(&step, &command);
                step
            }
            Event::Renew { fence, lease_secs } => {
                let command = renew_cmd(self.pick(fence), lease_secs.map(secs));
                let step = self
                    .sim
                    .step(|record, now| decide_renew(record, &command, now));
                self.check_owner_write(&step, command.fence, None);
                if step.effects.update.is_some() {
                    assert_eq!(step.before.state, State::InProgress);
                    self.grant(command.fence);
                }
                step
            }
            Event::Complete { fence, body } => {
                let command = complete_cmd(self.pick(fence), &format!("body-{body}"));
                let step = self
                    .sim
                    .step(|record, now| decide_complete(record, &command, now));
                self.check_owner_write(&step, command.fence, Some(command.digest()));
                step
            }
            Event::Fail {
                fence,
                disposition,
                retry_secs,
                code,
            } => {
                let command = FailCommand {
                    error: report(&format!("code-{code}")),
                    ..fail_cmd(self.pick(fence), *disposition, secs(*retry_secs))
                };
                let step = self
                    .sim
                    .step(|record, now| decide_fail(record, &command, now));
                self.check_owner_write(&step, command.fence, Some(command.digest()));
                step
            }
            Event::Reconcile {
                fence,
                resolution,
                body,
            } => {
                let resolution = match resolution {
                    0 => Resolution::Succeeded(result(&format!("found-{body}"))),
                    1 => Resolution::Failed(report(&format!("code-{body}"))),
                    _ => Resolution::NotApplied,
                };
                let command = reconcile_cmd(self.pick(fence), resolution);
                let step = self
                    .sim
                    .step(|record, now| decide_reconcile(record, &command, now));
                self.check_reconcile(&step, &command);
                step
            }
        };
        self.check_any(&step);
        if step.effects.update.is_some() && self.sim.record.state != State::InProgress {
            // The owner reported, or was marked: its lease ends now.
            let now = self.sim.now;
            if let Some(grant) = self
                .grants
                .iter_mut()
                .find(|grant| grant.fence == step.before.fence)
            {
                grant.until = grant.until.min(now);
            }
        }
        if let Some(fence) = step.drawn_fence {
            self.issued.push(fence);
        }
        self.check_one_live_owner();
    }

    /// Invariants every decision keeps.
    fn check_any(&self, step: &Step) {
        let before = &step.before;
        let after = &self.sim.record;
        let now = self.sim.now;

        // The fence never decreases; it changes only by drawing a new one.
        assert!(
            after.fence >= before.fence,
            "the fence went back: {step:#?}"
        );
        match step.drawn_fence {
            Some(drawn) => {
                assert!(drawn > *self.issued.iter().max().expect("issued"));
                assert_eq!(after.fence, drawn);
            }
            None => assert_eq!(after.fence, before.fence),
        }

        // A terminal record never changes.
        if before.state.is_terminal() {
            assert_eq!(
                step.effects.update, None,
                "a terminal record changed: {step:#?}"
            );
            assert_eq!(after, before);
        }

        // The attempt budget holds, and attempts only count up.
        assert!(after.attempt <= after.max_attempts, "{step:#?}");
        assert!(after.attempt >= before.attempt);

        // A refusal never writes the record; a refused stale write leaves
        // history only.
        if let Err(error) = &step.answer {
            assert_eq!(step.effects.update, None, "{step:#?}");
            assert_eq!(after, before);
            match error {
                Error::LeaseLost {
                    current_fence,
                    state,
                    ..
                } => {
                    assert_eq!(*current_fence, before.fence);
                    assert_eq!(*state, before.state);
                    let history = step.effects.history.as_ref().expect("recorded");
                    assert_eq!(history.event, HistoryEvent::StaleWriteRefused);
                    assert_ne!(
                        history.fence, before.fence,
                        "refused a current fence as stale"
                    );
                    assert_eq!(history.from_state, Some(before.state));
                    assert_eq!(history.to_state, before.state);
                    assert_eq!(history.attempt, before.attempt);
                }
                Error::Refused { refusal, state, .. } => {
                    assert_eq!(*state, before.state);
                    if let Some(history) = &step.effects.history {
                        assert_eq!(*refusal, Refusal::AttemptDeadlinePassed);
                        assert_eq!(history.event, HistoryEvent::LateWriteRefused);
                        assert_eq!(history.fence, before.fence);
                    }
                }
                Error::KeyReused { .. } | Error::ResultExpired { .. } => {
                    assert!(step.effects.is_empty());
                }
                other => panic!("unexpected error {other:?}"),
            }
        }

        // Every write comes with its history entry, describing it.
        if let Some(update) = &step.effects.update {
            let history = step.effects.history.as_ref().expect("a write is recorded");
            assert_eq!(history.from_state, Some(before.state));
            assert_eq!(history.to_state, update.next.state);
            assert_eq!(history.fence, update.next.fence);
            assert_eq!(history.attempt, update.next.attempt);
            assert_eq!(update.next.updated_at, now);
            assert_eq!(update.next.operation_id, before.operation_id);
            assert_eq!(update.next.tenant_id, before.tenant_id);
            assert_eq!(update.next.scope, before.scope);
            assert_eq!(update.next.fingerprint, before.fingerprint);
            assert_eq!(update.next.max_attempts, before.max_attempts);
            assert_eq!(update.next.created_at, before.created_at);
        }

        // No lease outlives its attempt.
        if after.state == State::InProgress {
            let lease = after.lease_expires_at.expect("IN_PROGRESS has a lease");
            let deadline = after.attempt_deadline_at.expect("and an attempt deadline");
            assert!(
                lease <= deadline,
                "lease {lease} past the deadline {deadline}"
            );
        }
        if after.state.is_terminal() {
            assert!(
                after.outcome_kind == Some(State::Succeeded)
                    || after.outcome_kind == Some(State::Failed)
            );
        }
    }

    fn check_claim(&mut self, step: &Step, command: &ClaimCommand) {
        let before = &step.before;
        if command.fingerprint != before.fingerprint {
            assert_eq!(
                step.answer,
                Err(Error::KeyReused {
                    operation_id: before.operation_id
                })
            );
            return;
        }
        if before.state == State::Expired {
            assert_eq!(
                step.answer,
                Err(Error::ResultExpired {
                    operation_id: before.operation_id
                })
            );
            return;
        }
        let answer = step.claim_answer();
        let after = self.sim.record.clone();
        match answer {
            ClaimAnswer::Acquired | ClaimAnswer::ReconcileFirst(_) => {
                assert_eq!(after.state, State::InProgress);
                assert!(
                    !after.lease_expired(self.sim.now),
                    "granted an expired lease"
                );
                if step.effects.update.is_some() {
                    // A new owner: a new fence and one more attempt.
                    assert!(step.effects.takes_new_fence());
                    assert_eq!(after.attempt, before.attempt + 1);
                    assert_eq!(after.claim_token, command.claim_token);
                    match answer {
                        ClaimAnswer::ReconcileFirst(previous) => {
                            assert!(before.unresolved(self.sim.now));
                            assert_eq!(
                                previous,
                                PreviousAttempt {
                                    state: before.state,
                                    fence: before.fence
                                }
                            );
                        }
                        _ => assert_eq!(before.state, State::RetryWait),
                    }
                } else {
                    // The owner re-sending its Claim.
                    assert!(!command.claim_token.is_empty());
                    assert_eq!(command.claim_token, before.claim_token);
                    assert_eq!(
                        answer == ClaimAnswer::Acquired,
                        before.taken_over_from.is_none()
                    );
                }
                self.grant(after.fence);
            }
            ClaimAnswer::Pending { retry_after, .. } => {
                step.assert_no_effects();
                assert!(retry_after > TimeDelta::zero());
            }
            ClaimAnswer::Completed => {
                assert!(after.state.is_terminal());
                assert!(!step.effects.takes_new_fence());
            }
            ClaimAnswer::NeedsReconciliation => {
                assert_eq!(after.state, State::Unknown);
                assert!(!step.effects.takes_new_fence());
            }
        }
        if !matches!(
            answer,
            ClaimAnswer::Acquired | ClaimAnswer::ReconcileFirst(_)
        ) {
            assert_eq!(after.attempt, before.attempt);
        }
    }

    fn check_owner_write(&self, step: &Step, fence: Fence, digest: Option<RequestDigest>) {
        let before = &step.before;
        let resent = digest.is_some_and(|digest| {
            before.last_write
                == Some(WriteReceipt {
                    fence,
                    digest,
                    writer: Writer::Owner,
                })
        });
        assert!(
            !step.effects.takes_new_fence(),
            "an owner write draws no fence"
        );
        if step.effects.update.is_some() {
            // Every successful write carries the current fence.
            assert_eq!(fence, before.fence, "{step:#?}");
            assert!(matches!(before.state, State::InProgress | State::Unknown));
            assert!(!before.attempt_deadline_passed(self.sim.now));
            assert_eq!(self.sim.record.attempt, before.attempt);
        }
        if step.answer == Ok(Answer::Written) && step.effects.is_empty() {
            assert!(resent, "answered OK without writing: {step:#?}");
        }
        if resent {
            assert_eq!(step.answer, Ok(Answer::Written));
            step.assert_no_effects();
        } else if fence != before.fence {
            assert!(
                matches!(step.answer, Err(Error::LeaseLost { .. })),
                "{step:#?}"
            );
            assert_eq!(
                step.effects.history.as_ref().map(|history| history.fence),
                Some(fence)
            );
        }
    }

    fn check_reconcile(&self, step: &Step, command: &ReconcileCommand) {
        let before = &step.before;
        let resent = before.last_write
            == Some(WriteReceipt {
                fence: command.expected_fence,
                digest: command.digest(),
                writer: Writer::Reconciler,
            });
        if step.effects.update.is_some() {
            assert_eq!(command.expected_fence, before.fence, "{step:#?}");
            assert!(
                step.effects.takes_new_fence(),
                "a reconciler takes a new fence"
            );
            assert!(!before.state.is_terminal());
            assert!(before.state != State::InProgress || before.lease_expired(self.sim.now));
            assert_eq!(self.sim.record.attempt, before.attempt);
        }
        let same_fence_other_request = before.last_write.is_some_and(|receipt| {
            receipt.writer == Writer::Reconciler && receipt.fence == command.expected_fence
        });
        if resent {
            assert_eq!(step.answer, Ok(Answer::Written));
            step.assert_no_effects();
        } else if same_fence_other_request {
            // DESIGN: the same fence with another request is FAILED_PRECONDITION.
            assert!(
                matches!(
                    step.answer,
                    Err(Error::Refused {
                        refusal: Refusal::RequestMismatch,
                        ..
                    })
                ),
                "{step:#?}"
            );
        } else if command.expected_fence != before.fence {
            assert!(
                matches!(step.answer, Err(Error::LeaseLost { .. })),
                "{step:#?}"
            );
            assert_eq!(
                step.effects.history.as_ref().map(|history| history.fence),
                Some(command.expected_fence)
            );
        }
    }

    /// The sweeper only expires terminal records past retention and ends
    /// retries past the operation deadline; it never touches unresolved ones.
    fn check_sweep(&self, step: &Step) {
        let before = &step.before;
        let now = self.sim.now;
        let next = step.next();
        let history = step.history();
        assert_eq!(step.drawn_fence, None);
        assert_eq!((next.fence, next.attempt), (before.fence, before.attempt));
        assert_eq!(history.from_state, Some(before.state));
        assert_eq!(history.to_state, next.state);
        assert_eq!(history.fence, next.fence);
        assert_eq!(next.fingerprint, before.fingerprint);
        assert_eq!(next.operation_id, before.operation_id);
        match before.state {
            State::Succeeded | State::Failed => {
                assert!(before.retain_until.is_some_and(|until| until <= now));
                assert_eq!(next.state, State::Expired);
                assert_eq!(next.outcome, None);
                assert_eq!(next.outcome_kind, Some(before.state));
                assert!(next.retain_until.is_some_and(|until| until > now));
            }
            State::RetryWait => {
                assert!(before.operation_deadline_at.is_some_and(|at| at <= now));
                assert_eq!(next.state, State::Failed);
                assert!(matches!(
                    next.outcome,
                    Some(Outcome::Failed {
                        reason: FailureReason::DeadlineExceeded,
                        ..
                    })
                ));
            }
            other => panic!("the sweeper changed a record in state {other:?}: {step:#?}"),
        }
    }

    /// No two owners' leases overlap in time.
    fn check_one_live_owner(&self) {
        for (index, first) in self.grants.iter().enumerate() {
            for second in &self.grants[index + 1..] {
                assert!(
                    first.until <= second.from || second.until <= first.from,
                    "two live owners: {first:?} and {second:?}"
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 1_000,
        // Only this file is ours to write: shrunk failures are printed, not saved.
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_event_sequences_keep_the_state_machine_invariants(
        config in config_strategy(),
        events in prop::collection::vec(event_strategy(), 1..80),
    ) {
        let mut run = Run::new(&config);
        for event in &events {
            run.play(event);
        }
    }
}

#[test]
fn the_invariant_checker_catches_two_live_owners() {
    // The proptest's overlap check must be able to fail.
    let run = Run {
        sim: Sim::new(),
        first: claim_as(OWNER),
        issued: vec![FIRST_FENCE, 11],
        grants: vec![
            Grant {
                fence: FIRST_FENCE,
                from: at(0),
                until: at(30),
            },
            Grant {
                fence: 11,
                from: at(29),
                until: at(59),
            },
        ],
    };
    let caught = std::panic::catch_unwind(|| run.check_one_live_owner());
    assert!(caught.is_err());
}
