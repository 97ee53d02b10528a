//! Races: what the database settles when two writers meet.

use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use idemd::domain::transition::{decide_claim, decide_complete, decide_reconcile, decide_renew};
use idemd::domain::*;
use idemd::store::Store;
use tokio::sync::Semaphore;

use super::fixture::*;
use crate::harness::*;

/// A record's values relative to its own clock (`updated_at`), so that two
/// operations written at different moments compare.
fn relative(record: &OperationRecord) -> impl PartialEq + std::fmt::Debug {
    let since = |moment: Option<DateTime<Utc>>| moment.map(|moment| moment - record.updated_at);
    (
        (record.state, record.attempt),
        (record.outcome.clone(), record.outcome_kind),
        record
            .last_write
            .map(|receipt| (receipt.digest, receipt.writer)),
        // A lease capped at the attempt deadline is capped, whatever its age.
        match record.lease_expires_at {
            capped if capped == record.attempt_deadline_at => Err("capped at the attempt deadline"),
            lease => Ok(since(lease)),
        },
        since(record.retry_at),
        since(record.completed_at),
        since(record.retain_until),
        since(record.attempt_deadline_at).map(|left| left > TimeDelta::zero()),
        record.lease_duration,
    )
}

/// Every owner write's common case, written once through `Store::write` (one
/// guarded statement, which never stops at the pause hook of the locked
/// path) and once through the locked `Store::transition`, from
/// the same record at the same age: the two must store the same thing.
async fn owner_writes_on_the_one_statement_path_store_what_the_locked_path_decides(
    backend: Backend,
) {
    use idemd::domain::guarded::{GuardedWrite, complete_write, fail_write, renew_write};
    use idemd::domain::transition::decide_fail;
    type WriteFor =
        dyn Fn(&OperationRecord, DateTime<Utc>) -> (GuardedWrite, Decision) + Send + Sync;
    let fixture = Fixture::new(backend).await;
    let locked_path_entered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counting_store = {
        let entered = locked_path_entered.clone();
        fixture.backend.paused(Arc::new(move || {
            entered.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::pin(async {}) as std::pin::Pin<Box<dyn Future<Output = ()> + Send>>
        }))
    };
    let failure = |disposition| FailCommand {
        operation_id: OperationId(uuid::Uuid::nil()),
        fence: 0,
        disposition,
        error: ErrorReport {
            code: "card_declined".into(),
            message: "declined".into(),
            metadata: [("psp".to_owned(), "acme".to_owned())].into(),
        },
        retry_after: match disposition {
            FailDisposition::Retryable => TimeDelta::seconds(3),
            _ => TimeDelta::zero(),
        },
        clock_margin: TimeDelta::zero(),
    };
    let cases: Vec<(&str, Box<WriteFor>)> = vec![
        (
            "renew",
            Box::new(|owner: &OperationRecord, now| {
                let command = RenewCommand {
                    operation_id: owner.operation_id,
                    fence: owner.fence,
                    lease: None,
                };
                (renew_write(&command), decide_renew(owner, &command, now))
            }),
        ),
        (
            "renew longer than the attempt",
            Box::new(|owner: &OperationRecord, now| {
                let command = RenewCommand {
                    operation_id: owner.operation_id,
                    fence: owner.fence,
                    lease: Some(TimeDelta::seconds(600)),
                };
                (renew_write(&command), decide_renew(owner, &command, now))
            }),
        ),
        (
            "complete",
            Box::new(|owner: &OperationRecord, now| {
                let command = CompleteCommand {
                    operation_id: owner.operation_id,
                    fence: owner.fence,
                    result: SuccessResult {
                        body: b"{\"charge\":\"ch_1\"}".to_vec(),
                        content_type: "application/json".into(),
                        metadata: [("psp".to_owned(), "acme".to_owned())].into(),
                    },
                };
                (
                    complete_write(&command),
                    decide_complete(owner, &command, now),
                )
            }),
        ),
    ];
    let mut cases = cases;
    for disposition in [
        FailDisposition::Terminal,
        FailDisposition::Retryable,
        FailDisposition::Unknown,
    ] {
        cases.push((
            disposition.as_str(),
            Box::new(move |owner: &OperationRecord, now| {
                let command = FailCommand {
                    operation_id: owner.operation_id,
                    fence: owner.fence,
                    ..failure(disposition)
                };
                let guarded =
                    fail_write(&command).expect("every disposition here has a common case");
                (guarded, decide_fail(owner, &command, now))
            }),
        ));
    }
    for (index, (name, write_for)) in cases.iter().enumerate() {
        let one = acquired(
            fixture
                .claim(&command(&format!("one-{index}"), 30_000))
                .await,
        );
        let other = acquired(
            fixture
                .claim(&command(&format!("other-{index}"), 30_000))
                .await,
        );
        let (guarded, _) = write_for(&one, one.updated_at);
        let before = locked_path_entered.load(std::sync::atomic::Ordering::SeqCst);
        let written = counting_store
            .write(fixture.tenant, guarded, &|record: &OperationRecord, now| {
                write_for(record, now).1
            })
            .await
            .expect("the store answers")
            .expect("the operation exists");
        let entered = locked_path_entered.load(std::sync::atomic::Ordering::SeqCst) - before;
        assert_eq!(entered, 0, "{name}: written in one statement");
        let locked = fixture
            .store
            .transition(
                fixture.tenant,
                &Target::Id(other.operation_id),
                &|record: &OperationRecord, now| write_for(record, now).1,
            )
            .await
            .expect("the store answers")
            .expect("the operation exists");
        assert!(written.answer.is_ok() && locked.answer.is_ok(), "{name}");
        assert_eq!(
            relative(&written.record),
            relative(&locked.record),
            "{name}"
        );
        assert_eq!(
            written.record.fence, one.fence,
            "{name}: owner writes keep the fence"
        );
        let events = |history: &[HistoryEntry]| {
            history
                .iter()
                .map(|entry| {
                    (
                        entry.event.clone(),
                        entry.from_state,
                        entry.to_state,
                        entry.detail.clone(),
                        entry.count,
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(
            events(&fixture.history(one.operation_id).await),
            events(&fixture.history(other.operation_id).await),
            "{name}: the same history"
        );
    }
}

/// A store whose transitions stop between their read and their write until
/// `release` gets a permit; `reached` gets one when a transition stops.
fn paused(backend: &Backend) -> (Arc<dyn Store>, Arc<Semaphore>, Arc<Semaphore>) {
    let reached = Arc::new(Semaphore::new(0));
    let release = Arc::new(Semaphore::new(0));
    let hook = {
        let reached = reached.clone();
        let release = release.clone();
        Arc::new(move || {
            let reached = reached.clone();
            let release = release.clone();
            Box::pin(async move {
                reached.add_permits(1);
                release.acquire().await.expect("open").forget();
            }) as std::pin::Pin<Box<dyn Future<Output = ()> + Send>>
        })
    };
    (backend.paused(hook), reached, release)
}

async fn a_renew_racing_a_takeover_loses_to_the_takeover_that_locked_first(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let tenant = fixture.tenant;
    let command = command("race", 50);
    let first = acquired(fixture.claim(&command).await);
    sleep_ms(100).await; // the lease expires

    let (paused_store, reached, release) = paused(&fixture.backend);
    let takeover = tokio::spawn({
        let command = command.clone();
        async move {
            let decide = |record: &OperationRecord, now| decide_claim(record, &command, now);
            paused_store
                .transition(tenant, &Target::Scope(command.scope.clone()), &decide)
                .await
        }
    });
    reached.acquire().await.expect("paused").forget(); // the takeover holds the lock

    let renew = tokio::spawn({
        let store = fixture.store.clone();
        let command = RenewCommand {
            operation_id: first.operation_id,
            fence: first.fence,
            lease: None,
        };
        async move {
            let decide = |record: &OperationRecord, now| decide_renew(record, &command, now);
            store
                .transition(tenant, &Target::Id(command.operation_id), &decide)
                .await
        }
    });
    sleep_ms(200).await;
    assert!(
        !renew.is_finished(),
        "the renew must wait for the takeover's lock"
    );
    release.add_permits(1);

    let takeover = takeover.await.expect("task").expect("ok").expect("row");
    let renew = renew.await.expect("task").expect("ok").expect("row");
    assert!(matches!(
        takeover.answer,
        Ok(Answer::Claim(ClaimAnswer::ReconcileFirst(_)))
    ));
    assert!(
        matches!(renew.answer, Err(Error::LeaseLost { current_fence, .. }) if current_fence == takeover.record.fence)
    );
    assert_eq!(
        fixture.events(first.operation_id).await,
        ["CLAIMED", "TAKEN_OVER", "STALE_WRITE_REFUSED"]
    );
}

async fn a_late_complete_racing_a_reconcile_loses_to_the_reconcile_that_locked_first(
    backend: Backend,
) {
    let fixture = Fixture::new(backend).await;
    let tenant = fixture.tenant;
    // The owner stalls past its lease and its attempt deadline: a
    // reconciler may then record FAILED ("not found" proves something).
    let stalling = ClaimCommand {
        max_attempt_duration: TimeDelta::milliseconds(80),
        ..command("race", 50)
    };
    let first = acquired(fixture.claim(&stalling).await);
    sleep_ms(100).await;

    let (paused_store, reached, release) = paused(&fixture.backend);
    let reconcile = tokio::spawn({
        let command = ReconcileCommand {
            operation_id: first.operation_id,
            expected_fence: first.fence,
            resolution: Resolution::Failed(ErrorReport {
                code: "not_found_at_provider".into(),
                ..ErrorReport::default()
            }),
            clock_margin: TimeDelta::zero(),
        };
        async move {
            let decide = |record: &OperationRecord, now| decide_reconcile(record, &command, now);
            paused_store
                .transition(tenant, &Target::Id(command.operation_id), &decide)
                .await
        }
    });
    reached.acquire().await.expect("paused").forget();

    let complete = tokio::spawn({
        let store = fixture.store.clone();
        let command = CompleteCommand {
            operation_id: first.operation_id,
            fence: first.fence,
            result: SuccessResult::default(),
        };
        async move {
            let decide = |record: &OperationRecord, now| decide_complete(record, &command, now);
            store
                .transition(tenant, &Target::Id(command.operation_id), &decide)
                .await
        }
    });
    sleep_ms(200).await;
    assert!(
        !complete.is_finished(),
        "the complete must wait for the reconcile's lock"
    );
    release.add_permits(1);

    let reconcile = reconcile.await.expect("task").expect("ok").expect("row");
    let complete = complete.await.expect("task").expect("ok").expect("row");
    assert!(matches!(reconcile.answer, Ok(Answer::Written)));
    assert_eq!(reconcile.record.state, State::Failed);
    assert!(
        matches!(complete.answer, Err(Error::LeaseLost { .. })),
        "{:?}",
        complete.answer
    );
    assert_eq!(
        fixture.events(first.operation_id).await,
        ["CLAIMED", "RECONCILED", "STALE_WRITE_REFUSED"]
    );
}

store_tests!(
    owner_writes_on_the_one_statement_path_store_what_the_locked_path_decides,
    a_renew_racing_a_takeover_loses_to_the_takeover_that_locked_first,
    a_late_complete_racing_a_reconcile_loses_to_the_reconcile_that_locked_first,
    a_conflict_holding_the_row_lock_never_breaks_the_owners_complete,
);

/// A refused conflicting Claim counts its evidence under the row lock (the
/// locked path); the owner's Complete waits for that lock (Postgres: its
/// one guarded statement, within its lock timeout) and must still take
/// effect, with its history entry after the conflict's: the count touches
/// neither the fence nor the state its guard reads.
async fn a_conflict_holding_the_row_lock_never_breaks_the_owners_complete(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let tenant = fixture.tenant;
    let command = command("race", 30_000);
    let (answer, owner) = fixture.claim(&command).await;
    assert_eq!(answer, Ok(ClaimAnswer::Acquired));

    let (paused_store, reached, release) = paused(&fixture.backend);
    let conflicting = ClaimCommand {
        fingerprint: Fingerprint([9; 32]),
        ..command.clone()
    };
    let conflict = tokio::spawn(async move {
        let decide = |record: &OperationRecord, now| decide_claim(record, &conflicting, now);
        paused_store
            .transition(tenant, &Target::Scope(conflicting.scope.clone()), &decide)
            .await
    });
    reached.acquire().await.expect("paused").forget(); // the conflict holds the lock

    let complete = async {
        // Inside the guarded statement's 100 ms lock timeout, so that it
        // waits for the lock and then runs, rather than falling back.
        let release = async {
            sleep_ms(70).await;
            release.add_permits(1);
        };
        let (written, ()) = tokio::join!(fixture.complete(&owner, success("ok")), release);
        written
    };
    let written = complete.await;
    assert_eq!(written.answer, Ok(Answer::Written));
    assert_eq!(written.record.state, State::Succeeded);
    let conflict = conflict.await.expect("task").expect("ok").expect("row");
    assert!(matches!(conflict.answer, Err(Error::KeyReused { .. })));
    assert!(!conflict.record_changed, "evidence is not a change");

    let (stored, _) = fixture.find(owner.operation_id).await.expect("exists");
    assert_eq!(stored.state, State::Succeeded);
    assert_eq!(stored.fence, owner.fence);
    assert_eq!(stored.conflicts, 1);
    assert_eq!(
        fixture.events(owner.operation_id).await,
        ["CLAIMED", "CONFLICTING_CLAIM_REFUSED", "COMPLETED"]
    );
}
