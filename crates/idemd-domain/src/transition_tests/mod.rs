//! Tests of the pure state machine in `transition/` against DESIGN.md
//! ("State machine" and "Retrying the API itself").
//!
//! The stores draw a new fence whenever `effects.takes_new_fence()`; [`Sim`]
//! emulates that with a counter and `Effects::with_fence`, then applies
//! `update.next` as the new record, exactly as a store would inside its
//! transaction. The first Claim of a scope, the `(none)` row, is an insert
//! made by the stores, not a decision of `transition/`: [`inserted_record`]
//! mirrors it so that every other row starts from a realistic record.
//!
//! This module is the fixture; the tests live beside it by concern: `claim`,
//! `owner_writes` (Renew, Complete, Fail), `reconcile`, `sweep`, and
//! `invariants` (terminal records never change; the proptest model checker).

use chrono::{DateTime, TimeDelta, Utc};
use uuid::Uuid;

use super::command::{
    ClaimCommand, CompleteCommand, FailCommand, FailDisposition, ReconcileCommand, RenewCommand,
    Resolution,
};
use super::error::{Error, Refusal};
use super::model::{
    ErrorReport, FailureReason, Fence, Fingerprint, HistoryEvent, NewHistoryEntry, OperationId,
    OperationRecord, Outcome, PreviousAttempt, Scope, State, SuccessResult, TenantId,
};
use super::transition::{
    Answer, ClaimAnswer, Decision, Doubt, Effects, PendingReason, SweepPolicy, decide_claim,
    decide_complete, decide_fail, decide_first_claim, decide_reconcile, decide_renew, decide_sweep,
};

mod claim;
mod forget;
mod guarded;
mod invariants;
mod owner_writes;
mod reconcile;
mod sweep;

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
        on_failed: crate::OnFailed::Replay,
        clock_margin: TimeDelta::zero(),
        previous_fingerprints: Vec::new(),
        held: None,
    }
}

/// What a store inserts for the `(none) → Claim` row: the record the pure
/// first-claim decision describes, with the fence the store drew.
fn inserted_record(command: &ClaimCommand, fence: Fence, now: DateTime<Utc>) -> OperationRecord {
    decide_first_claim(command).record(op_id(), TenantId(7), command, fence, now)
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
        clock_margin: TimeDelta::zero(),
    }
}

fn reconcile_cmd(expected_fence: Fence, resolution: Resolution) -> ReconcileCommand {
    ReconcileCommand {
        operation_id: op_id(),
        expected_fence,
        resolution,
        clock_margin: TimeDelta::zero(),
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
    /// The server's clock margin for the commands the helpers below build
    /// (zero unless a test sets it).
    clock_margin: TimeDelta,
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
            clock_margin: TimeDelta::zero(),
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
        // As the stores count it: two columns, nothing else.
        if effects.conflict {
            self.record = self.record.with_conflict_counted(self.now);
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
        let command = ClaimCommand {
            clock_margin: self.clock_margin,
            ..claim_as(token)
        };
        self.claim(&command)
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
        let command = FailCommand {
            clock_margin: self.clock_margin,
            ..fail_cmd(fence, disposition, retry_after)
        };
        self.step(|record, now| decide_fail(record, &command, now))
    }

    fn reconcile(&mut self, expected_fence: Fence, resolution: Resolution) -> Step {
        let command = ReconcileCommand {
            clock_margin: self.clock_margin,
            ..reconcile_cmd(expected_fence, resolution)
        };
        self.step(|record, now| decide_reconcile(record, &command, now))
    }

    /// The sweeper's decision, applied; `None` when it leaves the record alone.
    fn sweep(&mut self) -> Option<Step> {
        let policy = SweepPolicy {
            tombstone_retention: tombstone_retention(),
            clock_margin: self.clock_margin,
        };
        let decision = decide_sweep(&self.record, self.now, policy)?;
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

    /// Why the decision ended the operation FAILED, if it did.
    fn failure_reason(&self) -> Option<FailureReason> {
        match &self.next().outcome {
            Some(Outcome::Failed { reason, .. }) => Some(*reason),
            _ => None,
        }
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

    /// A refused conflicting Claim: counted and recorded, nothing else.
    fn assert_conflict_counted(&self) {
        assert_eq!(
            self.effects.update, None,
            "a refusal never writes the record"
        );
        assert!(self.effects.conflict, "the conflict is counted");
        assert_eq!(self.drawn_fence, None);
        assert_eq!(
            self.history(),
            &NewHistoryEntry {
                event: HistoryEvent::ConflictingClaimRefused,
                from_state: Some(self.before.state),
                to_state: self.before.state,
                fence: self.before.fence,
                attempt: self.before.attempt,
                detail: String::new(),
            }
        );
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

/// ReconcileFirst about `previous`, as told with no clock margin.
fn reconcile_first(previous: PreviousAttempt) -> ClaimAnswer {
    ClaimAnswer::ReconcileFirst(Doubt {
        previous,
        settles_at: previous.attempt_deadline_at,
    })
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
