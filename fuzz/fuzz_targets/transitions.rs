//! Every `decide_*` of the state machine on arbitrary records, commands and
//! clocks: never a panic, and the rules no input may break hold. Records are
//! drawn within what a store can hold (times in years 2000-9999, durations
//! within the bounds `Limits` lets into a record); commands are built by
//! `Limits` from arbitrary requests, as the handlers build them, and often
//! reuse the record's fence, fingerprint, claim token or digest so that
//! every branch is reached.

#![no_main]

use arbitrary::{Result, Unstructured};
use chrono::{DateTime, TimeDelta, Utc};
use idemd::domain::limits::Violations;
use idemd::domain::transition::{
    SweepPolicy, decide_claim, decide_complete, decide_fail, decide_reconcile, decide_renew,
    decide_sweep,
};
use idemd::domain::{
    ClaimRequested, CompleteRequested, Decision, ErrorReport, FailDisposition, FailRequested,
    FailureReason, Fingerprint, HistoryEvent, Limits, Metadata, OnFailed, OperationId,
    OperationRecord, Outcome, PreviousAttempt, ReconcileRequested, RenewRequested, RequestIdentity,
    Resolution, Scope, State, SuccessResult, TenantId, WriteAnswer, WriteReceipt, Writer,
    decide_first_claim,
};
use libfuzzer_sys::fuzz_target;
use uuid::Uuid;

/// 2000-01-01 and 9999-12-31, in microseconds since 1970.
const EARLIEST_MICROS: i64 = 946_684_800_000_000;
const LATEST_MICROS: i64 = 253_402_214_400_000_000;
const STATES: [State; 6] = [
    State::InProgress,
    State::Succeeded,
    State::Failed,
    State::RetryWait,
    State::Unknown,
    State::Expired,
];

fuzz_target!(|data: &[u8]| {
    let _ = run(&mut Unstructured::new(data));
});

fn run(input: &mut Unstructured<'_>) -> Result<()> {
    let limits = Limits::default();
    let now = moment(input)?;
    let record = record(input, now, &limits)?;
    let later = now + offset(input)?;
    match input.int_in_range(0..=5u8)? {
        0 => {
            let requested = claim_requested(input, &record)?;
            let Ok((command, _)) = limits.claim(requested, Violations::default()) else {
                return Ok(());
            };
            let first = decide_first_claim(&command);
            assert!(first.lease_expires_in <= first.attempt_deadline_in);
            let inserted = first.record(
                record.operation_id,
                record.tenant_id,
                &command,
                record.fence,
                now,
            );
            assert_eq!(inserted.state, State::InProgress);
            check(&record, &decide_claim(&record, &command, later));
            check(&inserted, &decide_claim(&inserted, &command, later));
        }
        1 => {
            let requested = RenewRequested {
                operation_id: record.operation_id,
                fence: fence_near(input, record.fence)?,
                lease: optional_duration(input, limits.max_lease)?,
            };
            if let Ok(command) = limits.renew(requested, Violations::default()) {
                check(&record, &decide_renew(&record, &command, later));
            }
        }
        2 => {
            let requested = CompleteRequested {
                operation_id: record.operation_id,
                fence: fence_near(input, record.fence)?,
                result: Some(success(input)?),
            };
            if let Ok(command) = limits.complete(requested, Violations::default()) {
                let record = with_receipt(input, record, command.fence, command.digest())?;
                check(&record, &decide_complete(&record, &command, later));
            }
        }
        3 => {
            let disposition = *input.choose(&[
                FailDisposition::Terminal,
                FailDisposition::Retryable,
                FailDisposition::Unknown,
            ])?;
            let requested = FailRequested {
                operation_id: record.operation_id,
                fence: fence_near(input, record.fence)?,
                disposition: input.arbitrary::<bool>()?.then_some(disposition),
                error: Some(error_report(input)?),
                retry_after: optional_duration(input, limits.max_retry_after)?,
            };
            if let Ok(command) = limits.fail(requested, Violations::default()) {
                let record = with_receipt(input, record, command.fence, command.digest())?;
                check(&record, &decide_fail(&record, &command, later));
            }
        }
        4 => {
            let resolution = match input.int_in_range(0..=2u8)? {
                0 => Resolution::Succeeded(success(input)?),
                1 => Resolution::Failed(error_report(input)?),
                _ => Resolution::NotApplied,
            };
            let requested = ReconcileRequested {
                operation_id: record.operation_id,
                expected_fence: fence_near(input, record.fence)?,
                resolution: Some(resolution),
            };
            if let Ok(command) = limits.reconcile(requested, Violations::default()) {
                let record = with_receipt(input, record, command.expected_fence, command.digest())?;
                check(&record, &decide_reconcile(&record, &command, later));
            }
        }
        _ => {
            let policy = SweepPolicy {
                tombstone_retention: duration(input, TimeDelta::days(365))?,
                clock_margin: duration(input, TimeDelta::seconds(10))?,
            };
            if let Some(decision) = decide_sweep(&record, later, policy) {
                assert!(matches!(
                    record.state,
                    State::Succeeded | State::Failed | State::RetryWait
                ));
                check_effects(&record, &decision);
            }
        }
    }
    Ok(())
}

/// The rules every decision keeps, whatever it decided.
fn check(record: &OperationRecord, decision: &Decision) {
    // A Claim may start a new attempt of a FAILED operation whose policy
    // opted in (on_failed: new_attempt); no other terminal record changes.
    if record.state.is_terminal() && !retried_after_failure(record, decision) {
        assert!(
            decision.effects.update.is_none(),
            "a terminal record changed: {record:?} -> {decision:?}"
        );
    }
    check_effects(record, decision);
}

fn retried_after_failure(record: &OperationRecord, decision: &Decision) -> bool {
    let retried = decision
        .effects
        .history
        .as_ref()
        .is_some_and(|history| history.event == HistoryEvent::RetriedAfterFailure);
    if retried {
        assert_eq!(record.state, State::Failed);
        assert_eq!(record.on_failed, OnFailed::NewAttempt);
    }
    retried
}

fn check_effects(record: &OperationRecord, decision: &Decision) {
    if let Some(update) = &decision.effects.update {
        let next = &update.next;
        assert_eq!(next.operation_id, record.operation_id);
        assert_eq!(next.scope, record.scope);
        assert_eq!(next.fingerprint, record.fingerprint);
        assert!(next.attempt >= record.attempt);
        // A retry after a failure grants one attempt past a spent budget.
        let granted = u32::from(retried_after_failure(record, decision));
        assert!(next.attempt <= record.max_attempts.max(record.attempt) + granted);
        if !update.takes_new_fence {
            assert_eq!(next.fence, record.fence);
        }
        if let Some(lease_expires_at) = next.lease_expires_at
            && next.state == State::InProgress
            && let Some(deadline) = next.attempt_deadline_at
        {
            assert!(lease_expires_at <= deadline, "a lease outlived its attempt");
        }
        let stamped = decision.effects.clone().with_fence(record.fence + 1);
        if update.takes_new_fence {
            let stamped_update = stamped.update.as_ref().expect("still an update");
            assert_eq!(stamped_update.next.fence, record.fence + 1);
        }
    }
    if decision.effects.update.is_some() {
        assert!(
            decision.effects.history.is_some(),
            "a transition without history"
        );
    }
}

fn moment(input: &mut Unstructured<'_>) -> Result<DateTime<Utc>> {
    let micros = input.int_in_range(EARLIEST_MICROS..=LATEST_MICROS)?;
    Ok(DateTime::from_timestamp_micros(micros).unwrap_or(DateTime::UNIX_EPOCH))
}

/// Mostly near the record's clock, where the rules turn.
fn offset(input: &mut Unstructured<'_>) -> Result<TimeDelta> {
    let millis = if input.arbitrary::<bool>()? {
        input.int_in_range(-5_000..=5_000i64)?
    } else {
        input.int_in_range(-40 * 86_400_000..=40 * 86_400_000i64)?
    };
    Ok(TimeDelta::milliseconds(millis))
}

fn around(input: &mut Unstructured<'_>, now: DateTime<Utc>) -> Result<Option<DateTime<Utc>>> {
    Ok(if input.arbitrary::<bool>()? {
        Some(now + offset(input)?)
    } else {
        None
    })
}

fn duration(input: &mut Unstructured<'_>, max: TimeDelta) -> Result<TimeDelta> {
    Ok(TimeDelta::milliseconds(
        input.int_in_range(0..=max.num_milliseconds())?,
    ))
}

/// Sometimes out of bounds on purpose: `Limits` must refuse those.
fn optional_duration(input: &mut Unstructured<'_>, max: TimeDelta) -> Result<Option<TimeDelta>> {
    Ok(match input.int_in_range(0..=3u8)? {
        0 => None,
        1 => Some(TimeDelta::milliseconds(input.int_in_range(-1_000..=1_000)?)),
        _ => Some(duration(input, max + TimeDelta::seconds(1))?),
    })
}

fn fence_near(input: &mut Unstructured<'_>, fence: u64) -> Result<u64> {
    Ok(match input.int_in_range(0..=3u8)? {
        0 | 1 => fence,
        2 => fence.saturating_sub(1),
        _ => input.arbitrary()?,
    })
}

fn text(input: &mut Unstructured<'_>, max: usize) -> Result<String> {
    let length = input.int_in_range(0..=max)?;
    Ok((0..length)
        .map(|_| input.int_in_range(b'a'..=b'z').map(char::from))
        .collect::<Result<String>>()?)
}

fn metadata(input: &mut Unstructured<'_>) -> Result<Metadata> {
    let entries = input.int_in_range(0..=3usize)?;
    (0..entries)
        .map(|_| Ok((text(input, 8)?, text(input, 8)?)))
        .collect()
}

fn success(input: &mut Unstructured<'_>) -> Result<SuccessResult> {
    Ok(SuccessResult {
        body: input.arbitrary()?,
        content_type: text(input, 12)?,
        metadata: metadata(input)?,
    })
}

fn error_report(input: &mut Unstructured<'_>) -> Result<ErrorReport> {
    Ok(ErrorReport {
        code: text(input, 12)?,
        message: text(input, 24)?,
        metadata: metadata(input)?,
    })
}

fn record(
    input: &mut Unstructured<'_>,
    now: DateTime<Utc>,
    limits: &Limits,
) -> Result<OperationRecord> {
    let state = *input.choose(&STATES)?;
    let max_attempts = input.int_in_range(1..=limits.max_attempts)?;
    let outcome_kind = match state {
        State::Succeeded | State::Failed => Some(state),
        State::Expired => Some(*input.choose(&[State::Succeeded, State::Failed])?),
        _ => None,
    };
    let outcome = match state {
        State::Succeeded => Some(Outcome::Succeeded(success(input)?)),
        State::Failed => Some(Outcome::Failed {
            reason: *input.choose(&[
                FailureReason::Terminal,
                FailureReason::AttemptsExhausted,
                FailureReason::DeadlineExceeded,
            ])?,
            error: error_report(input)?,
        }),
        _ => None,
    };
    let taken_over_from = if input.arbitrary::<bool>()? {
        Some(PreviousAttempt {
            state: *input.choose(&[State::InProgress, State::Unknown])?,
            fence: input.arbitrary()?,
            attempt_deadline_at: around(input, now)?,
        })
    } else {
        None
    };
    let fence = input.int_in_range(1..=u64::MAX - 1)?;
    Ok(OperationRecord {
        operation_id: OperationId(Uuid::from_bytes(input.arbitrary()?)),
        tenant_id: TenantId(input.arbitrary()?),
        scope: Scope {
            operation: "payments.charge".into(),
            key: text(input, 4)?,
        },
        fingerprint: Fingerprint(input.arbitrary()?),
        state,
        fence,
        attempt: input.int_in_range(1..=max_attempts)?,
        max_attempts,
        claim_token: input.arbitrary::<[u8; 2]>()?.to_vec(),
        // The owner renewed, an earlier owner did, or nobody.
        renewed_under_fence: *input.choose(&[Some(fence), Some(fence - 1), None])?,
        taken_over_from,
        lease_duration: duration(input, limits.max_lease)?.max(limits.min_lease),
        max_attempt_duration: duration(input, limits.max_attempt_duration)?.max(limits.min_lease),
        retention: duration(input, limits.max_retention)?,
        on_failed: *input.choose(&[OnFailed::Replay, OnFailed::NewAttempt])?,
        lease_expires_at: around(input, now)?,
        attempt_deadline_at: around(input, now)?,
        retry_at: around(input, now)?,
        operation_deadline_at: around(input, now)?,
        outcome,
        outcome_kind,
        last_write: None,
        created_at: now + offset(input)?,
        updated_at: now,
        completed_at: around(input, now)?,
        retain_until: around(input, now)?,
        conflicts: input.int_in_range(0..=3)?,
        last_conflict_at: around(input, now)?,
        answers: Default::default(),
    })
}

/// Often the record's last write was this very request (a re-send), or
/// another one with the same fence.
fn with_receipt(
    input: &mut Unstructured<'_>,
    record: OperationRecord,
    fence: u64,
    digest: idemd::domain::RequestDigest,
) -> Result<OperationRecord> {
    let now = record.updated_at;
    let last_write = match input.int_in_range(0..=2u8)? {
        0 => None,
        1 => Some(WriteReceipt {
            fence,
            digest,
            writer: *input.choose(&[Writer::Owner, Writer::Reconciler])?,
            answer: write_answer(input, fence, now)?,
        }),
        _ => Some(WriteReceipt {
            fence: fence_near(input, fence)?,
            digest: idemd::domain::RequestDigest(input.arbitrary()?),
            writer: *input.choose(&[Writer::Owner, Writer::Reconciler])?,
            answer: write_answer(input, fence, now)?,
        }),
    };
    Ok(OperationRecord {
        last_write,
        ..record
    })
}

/// The answer kept with a receipt: absent (receipts stored before answers
/// were kept), or any state the write could have left.
fn write_answer(
    input: &mut Unstructured<'_>,
    fence: u64,
    now: DateTime<Utc>,
) -> Result<Option<WriteAnswer>> {
    if input.arbitrary::<bool>()? {
        return Ok(None);
    }
    Ok(Some(WriteAnswer {
        state: *input.choose(&STATES)?,
        failure: if input.arbitrary::<bool>()? {
            Some(*input.choose(&[
                FailureReason::Terminal,
                FailureReason::AttemptsExhausted,
                FailureReason::DeadlineExceeded,
            ])?)
        } else {
            None
        },
        retry_at: around(input, now)?,
        fence: fence_near(input, fence)?,
    }))
}

fn claim_requested(
    input: &mut Unstructured<'_>,
    record: &OperationRecord,
) -> Result<ClaimRequested> {
    let limits = Limits::default();
    let identity = if input.arbitrary::<bool>()? {
        RequestIdentity::Fingerprint(record.fingerprint.0.to_vec())
    } else {
        RequestIdentity::BytesPayload(input.arbitrary()?)
    };
    let claim_token = if input.arbitrary::<bool>()? {
        record.claim_token.clone()
    } else {
        input.arbitrary::<[u8; 2]>()?.to_vec()
    };
    Ok(ClaimRequested {
        scope: Some(record.scope.clone()),
        identity: Some(identity),
        claim_token,
        lease: optional_duration(input, limits.max_lease)?,
        max_attempt_duration: optional_duration(input, limits.max_attempt_duration)?,
        max_attempts: input.int_in_range(0..=limits.max_attempts + 1)?,
        retention: optional_duration(input, limits.max_retention)?,
        operation_deadline: optional_duration(input, limits.max_operation_deadline)?,
        wait: optional_duration(input, limits.max_wait)?,
        previous_fingerprints: Vec::new(),
    })
}
