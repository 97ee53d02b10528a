//! Invariants over random sequences of events

use chrono::{DateTime, TimeDelta, Utc};
use proptest::prelude::*;

use crate::command::{ClaimCommand, FailCommand, FailDisposition, ReconcileCommand, Resolution};
use crate::error::{Error, Refusal};
use crate::guarded::{GuardedWrite, complete_write, fail_write, renew_write};
use crate::model::{
    FailureReason, Fence, HistoryEvent, OnFailed, OperationRecord, Outcome, PreviousAttempt,
    RequestDigest, State, Writer,
};
use crate::transition::{
    Answer, ClaimAnswer, NOT_APPLIED_WITH_GRANT, PendingReason, decide_complete, decide_fail,
    decide_reconcile, decide_renew,
};

use crate::transition_tests::{
    FIRST_FENCE, OTHER, OWNER, Sim, Step, at, claim_as, complete_cmd, fail_cmd, fingerprint,
    inserted_record, reconcile_cmd, renew_cmd, report, result, secs, t0, the_fingerprint,
};

#[derive(Debug, Clone)]
struct Config {
    clock_margin_secs: i64,
    max_attempts: u32,
    lease_secs: i64,
    max_attempt_secs: i64,
    retention_secs: i64,
    operation_deadline_secs: Option<i64>,
    /// The operation's policy says `on_failed: new_attempt`.
    new_attempt_on_failed: bool,
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
        /// An administrator's hold is in force.
        held: bool,
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
        0i64..=5,
        1u32..=4,
        1i64..=60,
        5i64..=300,
        30i64..=3_600,
        prop::option::of(20i64..=1_200),
        any::<bool>(),
    )
        .prop_map(
            |(
                clock_margin_secs,
                max_attempts,
                lease_secs,
                max_attempt_secs,
                retention_secs,
                operation_deadline_secs,
                new_attempt_on_failed,
            )| {
                Config {
                    clock_margin_secs,
                    max_attempts,
                    lease_secs,
                    max_attempt_secs,
                    retention_secs,
                    operation_deadline_secs,
                    new_attempt_on_failed,
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
        1 => Just(FailDisposition::NotStarted),
    ]
}

fn event_strategy() -> impl Strategy<Value = Event> {
    prop_oneof![
        5 => prop_oneof![0i64..=2_000, 0i64..=70_000, 0i64..=700_000]
            .prop_map(|millis| Event::Advance { millis }),
        4 => (0u8..4, prop::bool::weighted(0.1), 1i64..=90, prop::bool::weighted(0.2)).prop_map(
            |(token, reused_key, lease_secs, held)| Event::Claim { token, reused_key, lease_secs, held }
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
    /// The attempts that may have started their effect since the operation
    /// ended, with their deadlines. An attempt whose owner reported that its
    /// effect did not happen (RETRYABLE, or a decline: NOT_STARTED) leaves
    /// the list; the attempts it took over stay until their deadlines.
    in_doubt: Vec<(Fence, Option<DateTime<Utc>>)>,
}

impl Run {
    fn new(config: &Config) -> Self {
        let first = ClaimCommand {
            lease: secs(config.lease_secs),
            max_attempt_duration: secs(config.max_attempt_secs),
            max_attempts: config.max_attempts,
            retention: secs(config.retention_secs),
            operation_deadline: config.operation_deadline_secs.map(secs),
            clock_margin: secs(config.clock_margin_secs),
            on_failed: if config.new_attempt_on_failed {
                OnFailed::NewAttempt
            } else {
                OnFailed::Replay
            },
            ..claim_as(&token(1))
        };
        let mut sim = Sim::with(inserted_record(&first, FIRST_FENCE, t0()));
        sim.clock_margin = first.clock_margin;
        let until = sim.record.lease_expires_at.expect("a first lease");
        let first_deadline = sim.record.attempt_deadline_at;
        Self {
            sim,
            first,
            issued: vec![FIRST_FENCE],
            grants: vec![Grant {
                fence: FIRST_FENCE,
                from: t0(),
                until,
            }],
            in_doubt: vec![(FIRST_FENCE, first_deadline)],
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
        // An owner that reports its own effect did not happen.
        let mut no_effect = None;
        let step = match event {
            Event::Advance { millis } => {
                self.sim.now += TimeDelta::milliseconds(*millis);
                return;
            }
            Event::Sweep => {
                self.play_sweep();
                return;
            }
            Event::Claim {
                token: index,
                reused_key,
                lease_secs,
                held,
            } => {
                let command = ClaimCommand {
                    fingerprint: if *reused_key {
                        fingerprint(2)
                    } else {
                        the_fingerprint()
                    },
                    claim_token: token(*index),
                    lease: secs(*lease_secs),
                    held: held.then(|| secs(30)),
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
                self.check_guarded_write(&step, &renew_write(&command));
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
                self.check_guarded_write(&step, &complete_write(&command));
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
                    clock_margin: self.first.clock_margin,
                    ..fail_cmd(self.pick(fence), *disposition, secs(*retry_secs))
                };
                // A terminal failure says so too: FAILED, the effect did not
                // happen (the attempts it took over may still be in doubt).
                if matches!(
                    command.disposition,
                    FailDisposition::NotStarted
                        | FailDisposition::Retryable
                        | FailDisposition::Terminal
                ) {
                    no_effect = Some(command.fence);
                }
                self.play_fail(&command)
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
                let command = ReconcileCommand {
                    clock_margin: self.first.clock_margin,
                    ..reconcile_cmd(self.pick(fence), resolution)
                };
                let step = self
                    .sim
                    .step(|record, now| decide_reconcile(record, &command, now));
                self.check_reconcile(&step, &command);
                step
            }
        };
        self.check_any(&step);
        self.check_doubt(&step, no_effect);
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

    fn play_sweep(&mut self) {
        let now = self.sim.now;
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
    }

    fn play_fail(&mut self, command: &FailCommand) -> Step {
        let step = self
            .sim
            .step(|record, now| decide_fail(record, command, now));
        self.check_owner_write(&step, command.fence, Some(command.digest()));
        // A decline (NOT_STARTED) always takes the locked path.
        if let Some(guarded) = fail_write(command) {
            self.check_guarded_write(&step, &guarded);
        }
        step
    }

    /// The one-statement path of an owner write (guard + write) must do
    /// exactly what the locked path decides, whenever its guard holds: the
    /// same record, the same history entry, the same answer.
    fn check_guarded_write(&self, step: &Step, guarded: &GuardedWrite) {
        let before = &step.before;
        let now = self.sim.now;
        if !guarded.guard.holds(before, now) {
            return;
        }
        let update = step
            .effects
            .update
            .as_ref()
            .unwrap_or_else(|| panic!("the guard held but nothing was written: {before:#?}"));
        assert!(!update.takes_new_fence, "owner writes keep the fence");
        assert_eq!(
            update.next,
            guarded.write.apply(before, now),
            "guarded write and decision disagree on {before:#?}"
        );
        assert_eq!(step.effects.history, Some(guarded.history(before)));
        assert_eq!(
            guarded.coalesce_key(),
            guarded.history(before).coalesce_key(),
            "the one-statement path coalesces as the locked path does"
        );
        assert_eq!(
            guarded.kept_past_cap(),
            guarded.history(before).kept_past_cap(),
            "the one-statement path caps history as the locked path does"
        );
        assert_eq!(step.answer, Ok(Answer::Written));
    }

    /// A takeover is told a deadline no earlier than that of any attempt
    /// that may have started its effect: until then that effect may still be
    /// in flight; and it settles that deadline plus the clock margin later.
    /// A fresh attempt (Acquired) is started only when no other attempt's
    /// effect can still be in flight. An attempt that declined (NOT_STARTED)
    /// or failed RETRYABLE never had an effect of its own, so it does not
    /// extend the doubt, and does not end the doubt of the one it replaced.
    fn check_doubt(&mut self, step: &Step, no_effect: Option<Fence>) {
        let owner = self.sim.record.fence;
        let now = self.sim.now;
        let margin = self.first.clock_margin;
        match &step.answer {
            Ok(Answer::Claim(ClaimAnswer::ReconcileFirst(doubt))) => {
                assert_eq!(doubt.settles_at, doubt.previous.settles_at(margin));
                if let Some(told) = doubt.previous.attempt_deadline_at {
                    for (fence, deadline) in &self.in_doubt {
                        assert!(
                            *fence == owner || deadline.is_none_or(|deadline| deadline <= told),
                            "a takeover was told the doubt ends at {told}, but attempt \
                             {fence} may run its effect until {deadline:?}: {step:#?}"
                        );
                    }
                }
            }
            Ok(Answer::Claim(ClaimAnswer::Acquired)) if step.effects.update.is_some() => {
                for (fence, deadline) in &self.in_doubt {
                    assert!(
                        deadline.is_some_and(|deadline| deadline + margin <= now),
                        "a fresh attempt was acquired at {now}, but attempt {fence} may run \
                         its effect until {deadline:?} (+{margin}): {step:#?}"
                    );
                }
            }
            _ => {}
        }
        if step.effects.update.is_none() {
            return;
        }
        if let Some(fence) = no_effect {
            self.in_doubt.retain(|(doubtful, _)| *doubtful != fence);
        }
        // An ended operation starts no attempt, so nothing it doubted
        // matters any more; except a FAILED one whose policy opted in to a
        // new attempt: what it doubted is still in doubt for that attempt.
        let may_start_again = self.sim.record.state == State::Failed
            && self.sim.record.on_failed == OnFailed::NewAttempt;
        if self.sim.record.state.is_terminal() && !may_start_again {
            self.in_doubt.clear();
        }
        if let Some(fence) = step.drawn_fence
            && self.sim.record.state == State::InProgress
        {
            self.in_doubt
                .push((fence, self.sim.record.attempt_deadline_at));
        }
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

        // A terminal record never changes (but for counted conflicts,
        // evidence kept beside it); but a Claim may start a new attempt of
        // a FAILED one whose policy opted in.
        let retried_after_failure = step
            .effects
            .history
            .as_ref()
            .is_some_and(|history| history.event == HistoryEvent::RetriedAfterFailure);
        if retried_after_failure {
            assert_eq!(before.state, State::Failed, "{step:#?}");
            assert_eq!(before.on_failed, OnFailed::NewAttempt, "{step:#?}");
            assert_eq!(after.state, State::InProgress);
            assert_eq!((after.outcome.as_ref(), after.outcome_kind), (None, None));
            assert_eq!((after.completed_at, after.retain_until), (None, None));
        } else if before.state.is_terminal() {
            assert_eq!(
                step.effects.update, None,
                "a terminal record changed: {step:#?}"
            );
            let without_evidence = OperationRecord {
                conflicts: before.conflicts,
                last_conflict_at: before.last_conflict_at,
                ..after.clone()
            };
            assert_eq!(without_evidence, *before);
        }
        // Conflicts only count up, one per counted refusal.
        let counted = u64::from(step.effects.conflict);
        assert_eq!(after.conflicts, before.conflicts + counted, "{step:#?}");

        // The attempt budget holds, and attempts only count up.
        assert!(after.attempt <= after.max_attempts, "{step:#?}");
        assert!(after.attempt >= before.attempt);

        // A refusal never writes the record; a refused stale write leaves
        // history only.
        if let Err(error) = &step.answer {
            assert_eq!(step.effects.update, None, "{step:#?}");
            let without_evidence = OperationRecord {
                conflicts: before.conflicts,
                last_conflict_at: before.last_conflict_at,
                ..after.clone()
            };
            assert_eq!(without_evidence, *before);
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
                Error::KeyReused { .. } => {
                    // Counted and recorded: never a write of the record.
                    assert_eq!(step.effects.update, None);
                    assert!(step.effects.conflict);
                    let history = step.effects.history.as_ref().expect("recorded");
                    assert_eq!(history.event, HistoryEvent::ConflictingClaimRefused);
                    assert_eq!(history.to_state, before.state);
                    assert_eq!(history.fence, before.fence);
                }
                Error::ResultExpired { .. } => {
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
            // The budget grows only by the one attempt a NOT_APPLIED grants
            // when it was spent.
            let granted = history.detail == NOT_APPLIED_WITH_GRANT
                || (history.event == HistoryEvent::RetriedAfterFailure
                    && history.detail.contains("one more attempt granted"));
            let expected_budget = if granted {
                before.attempt + 1
            } else {
                before.max_attempts
            };
            assert_eq!(update.next.max_attempts, expected_budget, "{step:#?}");
            if granted {
                assert!(
                    before.attempt >= before.max_attempts,
                    "granted within budget"
                );
            }
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
                    // A new owner: a new fence and one more attempt, never
                    // while a hold is in force.
                    assert!(command.held.is_none(), "{step:#?}");
                    assert!(step.effects.takes_new_fence());
                    assert_eq!(after.attempt, before.attempt + 1);
                    assert_eq!(after.claim_token, command.claim_token);
                    match answer {
                        // A retry still doubting the attempt it took over.
                        ClaimAnswer::ReconcileFirst(doubt)
                            if matches!(before.state, State::RetryWait | State::Failed) =>
                        {
                            assert_eq!(Some(doubt.previous), before.taken_over_from);
                            assert!(
                                doubt
                                    .previous
                                    .may_still_run(self.sim.now, command.clock_margin)
                            );
                        }
                        ClaimAnswer::ReconcileFirst(doubt) => {
                            assert!(before.unresolved(self.sim.now));
                            assert_eq!(
                                doubt.previous,
                                PreviousAttempt {
                                    state: before.state,
                                    fence: before.fence,
                                    attempt_deadline_at: before.attempt_deadline_at,
                                }
                            );
                        }
                        _ => assert!(
                            before.state == State::RetryWait
                                || (before.state == State::Failed
                                    && before.on_failed == OnFailed::NewAttempt),
                            "{step:#?}"
                        ),
                    }
                } else {
                    // The owner re-sending its Claim, before it wrote: a
                    // token repeated after a Renew never gets the fence.
                    assert!(!command.claim_token.is_empty());
                    assert_eq!(command.claim_token, before.claim_token);
                    assert!(!before.owner_renewed(), "{step:#?}");
                    assert_eq!(
                        answer == ClaimAnswer::Acquired,
                        before.taken_over_from.is_none()
                    );
                }
                self.grant(after.fence);
            }
            ClaimAnswer::Pending {
                retry_after,
                reason,
            } => {
                step.assert_no_effects();
                assert!(retry_after > TimeDelta::zero());
                if reason == PendingReason::Held {
                    assert!(command.held.is_some());
                }
            }
            ClaimAnswer::Completed => {
                assert!(after.state.is_terminal());
                assert!(!step.effects.takes_new_fence());
                // An opted-in FAILED operation is replayed only past its
                // deadline, or to the Claim that started the failed attempt.
                if before.state == State::Failed && before.on_failed == OnFailed::NewAttempt {
                    assert!(
                        before
                            .operation_deadline_at
                            .is_some_and(|deadline| deadline <= self.sim.now)
                            || (!command.claim_token.is_empty()
                                && command.claim_token == before.claim_token),
                        "{step:#?}"
                    );
                }
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
            before.last_write.is_some_and(|receipt| {
                (receipt.fence, receipt.digest, receipt.writer) == (fence, digest, Writer::Owner)
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
        let resent = before.last_write.is_some_and(|receipt| {
            (receipt.fence, receipt.digest, receipt.writer)
                == (command.expected_fence, command.digest(), Writer::Reconciler)
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
                let taken_over_may_still_run = before
                    .taken_over_from
                    .is_some_and(|previous| previous.may_still_run(now, self.first.clock_margin));
                if taken_over_may_still_run {
                    // The attempt this retry took over may still land its
                    // effect: FAILED would say it did not; a reconciler decides.
                    assert_eq!(next.state, State::Unknown, "{step:#?}");
                    assert_eq!(next.outcome, None);
                } else {
                    assert_eq!(next.state, State::Failed, "{step:#?}");
                    assert!(matches!(
                        next.outcome,
                        Some(Outcome::Failed {
                            reason: FailureReason::DeadlineExceeded,
                            ..
                        })
                    ));
                }
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
        in_doubt: Vec::new(),
    };
    let caught = std::panic::catch_unwind(|| run.check_one_live_owner());
    assert!(caught.is_err());
}

#[test]
fn the_invariant_checker_catches_a_doubt_told_to_end_too_soon() {
    // The first attempt's deadline is at 300; pretend another attempt that
    // may have run its effect lasts until 400: a takeover told 300 is caught.
    let mut sim = Sim::new();
    sim.now = at(31);
    let step = sim.claim_as(OTHER);
    let mut run = Run {
        sim,
        first: claim_as(OWNER),
        issued: vec![FIRST_FENCE, 11],
        grants: Vec::new(),
        in_doubt: vec![(9, Some(at(400)))],
    };
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run.check_doubt(&step, None)
    }));
    assert!(caught.is_err());
}
