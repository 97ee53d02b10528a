//! The conformance suite: the state machine of DESIGN.md driven through
//! `IdempotencyService` (the claim loop, its unlocked replay path, the owner
//! writes, reconciliation, lookups and lists, exactly as the gRPC handlers
//! call them) over each store, and run unchanged against every store (see
//! `store_tests!`). A store passes when it persists exactly what each decision
//! said, settles races in the database, keeps tenants apart and keeps every
//! value as it was given. Tests of raw store behaviour (a second insert, a
//! transition whose decision the test writes, races held open by a pause
//! hook, sweeps, tenant administration) call the `Store` itself.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use idemd::domain::transition::{
    decide_claim, decide_complete, decide_reconcile, decide_renew, takeover_detail,
};
use idemd::domain::*;
use idemd::service::{IdempotencyService, WriteReply};
use idemd::store::{Applied, Store};
use tokio::sync::{Barrier, Semaphore};

use crate::harness::*;

/// One tenant on a fresh store, the service over it, and the calls the gRPC
/// handlers would make.
struct Fixture {
    backend: Backend,
    store: Arc<dyn Store>,
    service: ServiceUnderTest,
    tenant: TenantId,
}

/// What a Renew, Complete, Fail or Reconcile answered, with the record as it
/// then stands.
struct Written {
    answer: Result<Answer>,
    record: OperationRecord,
    /// The database clock of the write, or of the read after a refusal.
    now: DateTime<Utc>,
    record_changed: bool,
}

impl Fixture {
    async fn new(backend: Backend) -> Self {
        let store = backend.store();
        let tenant = tenant(store.as_ref(), "conformance").await;
        Self {
            backend,
            service: ServiceUnderTest::over(store.clone()),
            store,
            tenant,
        }
    }

    fn service(&self) -> &IdempotencyService {
        &self.service.service
    }

    /// A Claim as the handler makes it, without `wait`.
    async fn claim(&self, command: &ClaimCommand) -> (Result<ClaimAnswer>, OperationRecord) {
        self.claim_as(self.tenant, command).await
    }

    async fn claim_as(
        &self,
        tenant: TenantId,
        command: &ClaimCommand,
    ) -> (Result<ClaimAnswer>, OperationRecord) {
        claim_through(self.service(), tenant, command).await
    }

    /// A raw store transition with a decision the test writes: what a store
    /// keeps of values no decision of the service would produce.
    async fn transition(
        &self,
        operation_id: OperationId,
        decide: impl Fn(&OperationRecord, DateTime<Utc>) -> Decision + Send + Sync,
    ) -> Applied {
        self.store
            .transition(self.tenant, &Target::Id(operation_id), &decide)
            .await
            .expect("the store answers")
            .expect("the operation exists")
    }

    async fn renew(&self, owner: &OperationRecord, lease: Option<TimeDelta>) -> Written {
        let command = RenewCommand {
            operation_id: owner.operation_id,
            fence: owner.fence,
            lease,
        };
        self.written(owner.operation_id, async {
            self.service().renew(self.tenant, &command).await
        })
        .await
    }

    async fn complete(&self, owner: &OperationRecord, result: SuccessResult) -> Written {
        let command = CompleteCommand {
            operation_id: owner.operation_id,
            fence: owner.fence,
            result,
        };
        self.written(owner.operation_id, async {
            self.service().complete(self.tenant, &command).await
        })
        .await
    }

    async fn fail(
        &self,
        owner: &OperationRecord,
        disposition: FailDisposition,
        retry_after: TimeDelta,
    ) -> Written {
        self.fail_with(&FailCommand {
            operation_id: owner.operation_id,
            fence: owner.fence,
            disposition,
            error: ErrorReport {
                code: "upstream_503".into(),
                message: "the provider said no".into(),
                metadata: Metadata::from([("region".into(), "eu".into())]),
            },
            retry_after,
            clock_margin: TimeDelta::zero(),
        })
        .await
    }

    async fn fail_with(&self, command: &FailCommand) -> Written {
        self.written(command.operation_id, async {
            self.service().fail(self.tenant, command).await
        })
        .await
    }

    async fn reconcile(&self, record: &OperationRecord, resolution: Resolution) -> Written {
        let command = ReconcileCommand {
            operation_id: record.operation_id,
            expected_fence: record.fence,
            resolution,
            clock_margin: TimeDelta::zero(),
        };
        self.written(record.operation_id, async {
            self.service().reconcile(self.tenant, &command).await
        })
        .await
    }

    /// Runs one write through the service. The service answers a refusal
    /// with the error alone, so the record is read before and after it: a
    /// refusal that changed the record shows as `record_changed`.
    async fn written(
        &self,
        operation_id: OperationId,
        write: impl Future<Output = Result<WriteReply>>,
    ) -> Written {
        let target = Target::Id(operation_id);
        let before = self.lookup_as(self.tenant, &target, false).await;
        match write.await {
            Ok(reply) => Written {
                answer: Ok(Answer::Written),
                record: reply.record,
                now: reply.now,
                record_changed: reply.changed,
            },
            Err(error) => {
                let after = self
                    .lookup_as(self.tenant, &target, false)
                    .await
                    .expect("a refused write leaves its operation");
                Written {
                    answer: Err(error),
                    record_changed: before.map(|found| found.record) != Some(after.record.clone()),
                    record: after.record,
                    now: after.now,
                }
            }
        }
    }

    /// A Lookup as the handler makes it; `None` for NOT_FOUND.
    async fn lookup_as(
        &self,
        tenant: TenantId,
        target: &Target,
        include_history: bool,
    ) -> Option<Found> {
        lookup_through(self.service(), tenant, target, include_history).await
    }

    async fn find(
        &self,
        operation_id: OperationId,
    ) -> Option<(OperationRecord, Vec<HistoryEntry>)> {
        self.lookup_as(self.tenant, &Target::Id(operation_id), true)
            .await
            .map(|found| (found.record, found.history))
    }

    async fn history(&self, operation_id: OperationId) -> Vec<HistoryEntry> {
        self.find(operation_id).await.expect("exists").1
    }

    async fn events(&self, operation_id: OperationId) -> Vec<String> {
        event_names(&self.history(operation_id).await)
    }

    /// A ListUnresolved page as the handler asks for it.
    async fn list_unresolved_as(
        &self,
        tenant: TenantId,
        query: &UnresolvedQuery,
    ) -> UnresolvedPage {
        self.service()
            .list_unresolved(tenant, query)
            .await
            .expect("the service answers")
    }
}

async fn tenant(store: &dyn Store, name: &str) -> TenantId {
    let token = create_tenant(store, name).await;
    store
        .authenticate(&idemd::auth::token_sha256(&token))
        .await
        .expect("auth")
        .expect("an active tenant")
        .tenant
}

/// A Claim through the service. A refused Claim is answered with the error
/// alone, so the record it left is looked up by scope.
async fn claim_through(
    service: &IdempotencyService,
    tenant: TenantId,
    command: &ClaimCommand,
) -> (Result<ClaimAnswer>, OperationRecord) {
    match service.claim(tenant, command, Duration::ZERO).await {
        Ok(reply) => (Ok(reply.answer), reply.record),
        Err(error) => {
            let target = Target::Scope(command.scope.clone());
            let found = lookup_through(service, tenant, &target, false)
                .await
                .expect("a refused claim leaves its record");
            (Err(error), found.record)
        }
    }
}

async fn lookup_through(
    service: &IdempotencyService,
    tenant: TenantId,
    target: &Target,
    include_history: bool,
) -> Option<Found> {
    // The whole history: more than any test writes.
    let history = include_history.then_some(HistoryPage {
        after: 0,
        limit: 10_000,
        of: None,
    });
    match service.lookup(tenant, target, history).await {
        Ok(found) => Some(found),
        Err(Error::NotFound) => None,
        Err(error) => panic!("the service answers a lookup: {error:?}"),
    }
}

fn event_names(history: &[HistoryEntry]) -> Vec<String> {
    history.iter().map(|entry| entry.event.clone()).collect()
}

fn command(key: &str, lease_ms: i64) -> ClaimCommand {
    ClaimCommand {
        lease: TimeDelta::milliseconds(lease_ms),
        ..claim_command(key)
    }
}

fn success(body: &str) -> SuccessResult {
    SuccessResult {
        body: body.as_bytes().to_vec(),
        content_type: "application/json".into(),
        metadata: Metadata::from([("provider".into(), "test".into())]),
    }
}

/// This host's clock: the tests that check a store answers with the database's
/// clock compare the two (they agree within seconds on a test machine).
#[expect(
    clippy::disallowed_methods,
    reason = "compares the database's clock with this host's"
)]
fn host_clock() -> DateTime<Utc> {
    Utc::now()
}

async fn sleep_ms(millis: u64) {
    tokio::time::sleep(Duration::from_millis(millis)).await;
}

fn acquired(claimed: (Result<ClaimAnswer>, OperationRecord)) -> OperationRecord {
    assert_eq!(claimed.0, Ok(ClaimAnswer::Acquired), "{:?}", claimed.1);
    claimed.1
}

// ---- first claims ----------------------------------------------------------

async fn a_first_claim_stores_exactly_what_the_domain_decided(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    for (key, lease_ms, deadline) in [
        ("short-lease", 1_500, None),
        // Longer than the attempt: capped at the attempt deadline.
        ("long-lease", 120_000, Some(TimeDelta::seconds(90))),
    ] {
        let command = ClaimCommand {
            operation_deadline: deadline,
            ..command(key, lease_ms)
        };
        let operation_id = OperationId::generate();
        let stored = fixture
            .store
            .insert_new(fixture.tenant, operation_id, &command)
            .await
            .expect("insert")
            .expect("a fresh scope");
        let first = decide_first_claim(&command);
        assert_eq!(
            stored,
            first.record(
                operation_id,
                fixture.tenant,
                &command,
                stored.fence,
                stored.created_at
            ),
            "{key}"
        );
        let (_, history) = fixture.find(operation_id).await.expect("exists");
        let claimed = first.history_with_fence(stored.fence);
        assert_eq!(
            history
                .iter()
                .map(|entry| (
                    entry.event.as_str(),
                    entry.from_state,
                    entry.to_state,
                    entry.fence
                ))
                .collect::<Vec<_>>(),
            [(
                claimed.event.as_str(),
                claimed.from_state,
                claimed.to_state,
                claimed.fence
            )],
            "{key}"
        );
    }
}

async fn a_first_claim_is_stored_in_progress_with_lease_deadlines_and_history(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let command = ClaimCommand {
        claim_token: b"attempt-1".to_vec(),
        operation_deadline: Some(TimeDelta::minutes(10)),
        ..command("k", 30_000)
    };
    let record = acquired(fixture.claim(&command).await);

    assert_eq!(record.state, State::InProgress);
    assert_eq!(record.tenant_id, fixture.tenant);
    assert_eq!(record.scope, command.scope);
    assert_eq!(record.fingerprint, command.fingerprint);
    assert_eq!((record.attempt, record.max_attempts), (1, 5));
    assert_eq!(record.claim_token, b"attempt-1");
    assert!(record.fence >= 1);
    assert_eq!(record.lease_duration, TimeDelta::seconds(30));
    assert_eq!(record.max_attempt_duration, TimeDelta::seconds(60));
    assert_eq!(record.retention, TimeDelta::hours(1));
    let created = record.created_at;
    assert_eq!(record.updated_at, created);
    assert_eq!(
        record.lease_expires_at,
        Some(created + TimeDelta::seconds(30))
    );
    assert_eq!(
        record.attempt_deadline_at,
        Some(created + TimeDelta::seconds(60))
    );
    assert_eq!(
        record.operation_deadline_at,
        Some(created + TimeDelta::minutes(10))
    );
    assert_eq!(
        (record.outcome.clone(), record.last_write, record.retry_at),
        (None, None, None)
    );
    let clock_skew = (host_clock() - created).abs();
    assert!(
        clock_skew < TimeDelta::seconds(5),
        "the database clock: {created}"
    );

    // Read back by id and by scope: the very record the insert returned.
    let (found, history) = fixture.find(record.operation_id).await.expect("exists");
    assert_eq!(found, record);
    let by_scope = fixture
        .lookup_as(fixture.tenant, &Target::Scope(command.scope.clone()), false)
        .await
        .expect("exists");
    assert_eq!(by_scope.record, record);
    assert!(by_scope.history.is_empty(), "history only when asked for");
    assert_eq!(
        history,
        [HistoryEntry {
            sequence: 1,
            event: "CLAIMED".into(),
            from_state: None,
            to_state: State::InProgress,
            fence: record.fence,
            last_fence: record.fence,
            attempt: 1,
            detail: String::new(),
            count: 1,
            first_at: created,
            last_at: created,
        }]
    );

    // The scope is taken: a second insert inserts nothing.
    let again = fixture
        .store
        .insert_new(fixture.tenant, OperationId::generate(), &command)
        .await
        .expect("insert");
    assert!(again.is_none());
}

async fn a_second_scope_gets_its_own_record_and_a_higher_fence(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let first = acquired(fixture.claim(&command("k1", 30_000)).await);
    let other_operation = ClaimCommand {
        scope: Scope {
            operation: "orders.create".into(),
            key: "k1".into(),
        },
        ..command("k1", 30_000)
    };
    let second = acquired(fixture.claim(&other_operation).await);
    let third = acquired(fixture.claim(&command("k2", 30_000)).await);

    assert_ne!(first.operation_id, second.operation_id);
    assert!(first.fence < second.fence && second.fence < third.fence);
}

async fn concurrent_first_claims_of_one_scope_acquire_exactly_once(backend: Backend) {
    const CLAIMS: usize = 32;
    let fixture = Fixture::new(backend).await;
    let start = Arc::new(Barrier::new(CLAIMS));
    let tasks: Vec<_> = (0..CLAIMS)
        .map(|_| {
            let service = fixture.service().clone();
            let tenant = fixture.tenant;
            let start = start.clone();
            tokio::spawn(async move {
                start.wait().await;
                claim_through(&service, tenant, &command("hot", 30_000)).await
            })
        })
        .collect();
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.expect("task"));
    }

    let winners: Vec<_> = answers
        .iter()
        .filter(|(answer, _)| *answer == Ok(ClaimAnswer::Acquired))
        .collect();
    assert_eq!(winners.len(), 1, "{answers:?}");
    let winner = &winners[0].1;
    for (answer, record) in &answers {
        assert_eq!(record.operation_id, winner.operation_id);
        assert_eq!(record.fence, winner.fence);
        assert!(
            *answer == Ok(ClaimAnswer::Acquired)
                || matches!(
                    answer,
                    Ok(ClaimAnswer::Pending {
                        reason: PendingReason::InProgress,
                        ..
                    })
                ),
            "{answer:?}"
        );
    }
    assert_eq!(fixture.events(winner.operation_id).await, ["CLAIMED"]);
}

// ---- claims on an existing record ---------------------------------------------

async fn a_live_lease_answers_pending_its_own_token_acquired_and_another_request_conflict(
    backend: Backend,
) {
    let fixture = Fixture::new(backend).await;
    let owner_command = ClaimCommand {
        claim_token: b"attempt-1".to_vec(),
        ..command("k", 30_000)
    };
    let owner = acquired(fixture.claim(&owner_command).await);

    let (other, unchanged) = fixture.claim(&command("k", 30_000)).await;
    let Ok(ClaimAnswer::Pending {
        reason: PendingReason::InProgress,
        retry_after,
    }) = other
    else {
        panic!("expected Pending, got {other:?}");
    };
    assert!(retry_after > TimeDelta::seconds(25) && retry_after <= TimeDelta::seconds(30));
    assert_eq!(unchanged, owner);

    let (resent, same) = fixture.claim(&owner_command).await;
    assert_eq!(resent, Ok(ClaimAnswer::Acquired));
    assert_eq!((same.fence, same.attempt), (owner.fence, 1));

    let different_request = ClaimCommand {
        fingerprint: fingerprint::of_bytes(b"another request"),
        ..command("k", 30_000)
    };
    let (conflict, unchanged) = fixture.claim(&different_request).await;
    assert_eq!(
        conflict,
        Err(Error::KeyReused {
            operation_id: owner.operation_id
        })
    );
    assert_eq!(unchanged, owner);
    assert_eq!(fixture.events(owner.operation_id).await, ["CLAIMED"]);
}

async fn an_expired_lease_is_taken_over_with_reconcile_first_until_the_budget_is_spent(
    backend: Backend,
) {
    let fixture = Fixture::new(backend).await;
    let lease_ms = 40;
    let budget_of_two = ClaimCommand {
        max_attempts: 2,
        ..command("k", lease_ms)
    };
    let first = acquired(fixture.claim(&budget_of_two).await);
    sleep_ms(80).await;

    let (answer, second) = fixture.claim(&budget_of_two).await;
    assert_eq!(
        answer,
        Ok(ClaimAnswer::ReconcileFirst(Doubt {
            previous: PreviousAttempt {
                state: State::InProgress,
                fence: first.fence,
                attempt_deadline_at: first.attempt_deadline_at,
            },
            settles_at: first.attempt_deadline_at,
        }))
    );
    assert_eq!(second.state, State::InProgress);
    assert_eq!(second.attempt, 2);
    assert!(second.fence > first.fence);
    assert_eq!(second.operation_id, first.operation_id);
    // The takeover's record is what the store keeps.
    assert_eq!(
        fixture.find(first.operation_id).await.expect("exists").0,
        second_as_stored(&second)
    );
    sleep_ms(80).await;

    let (answer, spent) = fixture.claim(&budget_of_two).await;
    assert_eq!(answer, Ok(ClaimAnswer::NeedsReconciliation));
    assert_eq!(spent.state, State::Unknown);
    assert_eq!(spent.fence, second.fence, "marking unknown takes no fence");
    let (again, unchanged) = fixture.claim(&budget_of_two).await;
    assert_eq!(again, Ok(ClaimAnswer::NeedsReconciliation));
    assert_eq!(unchanged.state, State::Unknown);

    let history = fixture.history(first.operation_id).await;
    assert_eq!(
        event_names(&history),
        ["CLAIMED", "TAKEN_OVER", "MARKED_UNKNOWN"]
    );
    assert_eq!(history[1].from_state, Some(State::InProgress));
    assert_eq!(
        (history[1].fence, history[1].attempt),
        (second.fence, 2),
        "the history entry carries the fence the store drew"
    );
    assert_eq!(
        history[1].detail,
        takeover_detail(&PreviousAttempt {
            state: State::InProgress,
            fence: first.fence,
            attempt_deadline_at: first.attempt_deadline_at,
        }),
        "why, and the replaced attempt's deadline"
    );
    assert!(
        history[1]
            .detail
            .starts_with("lease expired; previous attempt deadline ")
    );
    assert_eq!(
        (history[2].from_state, history[2].to_state),
        (Some(State::InProgress), State::Unknown)
    );
}

/// The record a transition returned, as it reads back: timestamps at the
/// stores' precision (microseconds), lease lengths in milliseconds.
fn second_as_stored(record: &OperationRecord) -> OperationRecord {
    use chrono::SubsecRound;
    let micros = |moment: Option<DateTime<Utc>>| moment.map(|moment| moment.trunc_subsecs(6));
    OperationRecord {
        lease_expires_at: micros(record.lease_expires_at),
        attempt_deadline_at: micros(record.attempt_deadline_at),
        retry_at: micros(record.retry_at),
        operation_deadline_at: micros(record.operation_deadline_at),
        completed_at: micros(record.completed_at),
        retain_until: micros(record.retain_until),
        updated_at: record.updated_at.trunc_subsecs(6),
        created_at: record.created_at.trunc_subsecs(6),
        lease_duration: TimeDelta::milliseconds(record.lease_duration.num_milliseconds()),
        ..record.clone()
    }
}

// ---- owner writes ------------------------------------------------------------

async fn renew_extends_the_lease_but_never_past_the_attempt_deadline(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let short_attempt = ClaimCommand {
        max_attempt_duration: TimeDelta::seconds(2),
        ..command("k", 1_000)
    };
    let owner = acquired(fixture.claim(&short_attempt).await);

    let renewed = fixture.renew(&owner, Some(TimeDelta::hours(1))).await;
    assert_eq!(renewed.answer, Ok(Answer::Written));
    assert!(renewed.record_changed);
    assert_eq!(
        renewed.record.lease_expires_at, owner.attempt_deadline_at,
        "capped at the attempt deadline"
    );
    let stored = fixture.find(owner.operation_id).await.expect("exists").0;
    assert_eq!(stored.lease_expires_at, owner.attempt_deadline_at);
    assert_eq!(stored.updated_at, renewed.now);
    assert_eq!(
        fixture.events(owner.operation_id).await,
        ["CLAIMED", "RENEWED"]
    );
}

async fn complete_stores_the_result_replays_it_and_answers_a_resend_once(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let owner = acquired(fixture.claim(&command("k", 30_000)).await);

    let completed = fixture.complete(&owner, success(r#"{"charge":1}"#)).await;
    assert_eq!(completed.answer, Ok(Answer::Written));
    let (stored, _) = fixture.find(owner.operation_id).await.expect("exists");
    assert_eq!(stored.state, State::Succeeded);
    assert_eq!(
        stored.outcome,
        Some(Outcome::Succeeded(success(r#"{"charge":1}"#)))
    );
    assert_eq!(stored.outcome_kind, Some(State::Succeeded));
    assert_eq!(stored.completed_at, Some(completed.now));
    assert_eq!(
        stored.retain_until,
        Some(completed.now + TimeDelta::hours(1))
    );
    assert_eq!(stored.lease_expires_at, None);
    let receipt = stored.last_write.expect("a receipt");
    assert_eq!(
        (receipt.fence, receipt.writer),
        (owner.fence, Writer::Owner)
    );

    let (replay, _) = fixture.claim(&command("k", 30_000)).await;
    assert_eq!(replay, Ok(ClaimAnswer::Completed));
    let resent = fixture.complete(&owner, success(r#"{"charge":1}"#)).await;
    assert_eq!(resent.answer, Ok(Answer::Written));
    assert!(!resent.record_changed);
    let changed = fixture.complete(&owner, success(r#"{"charge":2}"#)).await;
    assert!(
        matches!(
            changed.answer,
            Err(Error::Refused {
                refusal: Refusal::RequestMismatch,
                ..
            })
        ),
        "{:?}",
        changed.answer
    );
    assert_eq!(
        fixture.find(owner.operation_id).await.expect("exists").0,
        stored,
        "terminal records never change"
    );
    assert_eq!(
        fixture.events(owner.operation_id).await,
        ["CLAIMED", "COMPLETED"]
    );
}

async fn a_terminal_failure_is_stored_and_replayed(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let owner = acquired(fixture.claim(&command("k", 30_000)).await);

    let failed = fixture
        .fail(&owner, FailDisposition::Terminal, TimeDelta::zero())
        .await;
    assert_eq!(failed.answer, Ok(Answer::Written));
    let (stored, history) = fixture.find(owner.operation_id).await.expect("exists");
    assert_eq!(stored.state, State::Failed);
    let Some(Outcome::Failed { reason, error }) = &stored.outcome else {
        panic!("expected a failure, got {:?}", stored.outcome);
    };
    assert_eq!(*reason, FailureReason::Terminal);
    assert_eq!(error.code, "upstream_503");
    assert_eq!(error.message, "the provider said no");
    assert_eq!(error.metadata["region"], "eu");
    assert_eq!(event_names(&history), ["CLAIMED", "FAILED"]);
    let (replay, _) = fixture.claim(&command("k", 30_000)).await;
    assert_eq!(replay, Ok(ClaimAnswer::Completed));
    let late = fixture.complete(&owner, success("late")).await;
    assert!(
        matches!(
            late.answer,
            Err(Error::Refused {
                state: State::Failed,
                ..
            })
        ),
        "{:?}",
        late.answer
    );
}

async fn a_retryable_failure_waits_then_releases_within_the_budget(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let budget_of_two = ClaimCommand {
        max_attempts: 2,
        ..command("k", 30_000)
    };
    let owner = acquired(fixture.claim(&budget_of_two).await);

    let failed = fixture
        .fail(
            &owner,
            FailDisposition::Retryable,
            // Long enough that the claim below is early even on a loaded machine.
            TimeDelta::milliseconds(1_500),
        )
        .await;
    assert_eq!(failed.record.state, State::RetryWait);
    let stored = fixture.find(owner.operation_id).await.expect("exists").0;
    assert_eq!(stored.state, State::RetryWait);
    assert_eq!(
        stored.retry_at,
        Some(failed.now + TimeDelta::milliseconds(1_500))
    );
    let (early, _) = fixture.claim(&budget_of_two).await;
    assert!(
        matches!(
            early,
            Ok(ClaimAnswer::Pending {
                reason: PendingReason::RetryScheduled,
                ..
            })
        ),
        "{early:?}"
    );
    sleep_ms(1_600).await;

    let (due, second) = fixture.claim(&budget_of_two).await;
    assert_eq!(due, Ok(ClaimAnswer::Acquired));
    assert_eq!(second.attempt, 2);
    assert!(second.fence > owner.fence);
    let exhausted = fixture
        .fail(
            &second,
            FailDisposition::Retryable,
            TimeDelta::milliseconds(150),
        )
        .await;
    assert_eq!(exhausted.record.state, State::Failed);
    let stored = fixture.find(owner.operation_id).await.expect("exists").0;
    assert!(matches!(
        stored.outcome,
        Some(Outcome::Failed {
            reason: FailureReason::AttemptsExhausted,
            ..
        })
    ));
    assert_eq!(
        fixture.events(owner.operation_id).await,
        ["CLAIMED", "RETRY_SCHEDULED", "RETRY_STARTED", "FAILED"]
    );
}

async fn an_unknown_outcome_is_taken_over_with_reconcile_first(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let owner = acquired(fixture.claim(&command("k", 30_000)).await);
    let reported = fixture
        .fail(&owner, FailDisposition::Unknown, TimeDelta::zero())
        .await;
    assert_eq!(reported.record.state, State::Unknown);
    assert_eq!(
        fixture
            .find(owner.operation_id)
            .await
            .expect("exists")
            .0
            .state,
        State::Unknown
    );

    let (answer, next) = fixture.claim(&command("k", 30_000)).await;
    assert_eq!(
        answer,
        Ok(ClaimAnswer::ReconcileFirst(Doubt {
            previous: PreviousAttempt {
                state: State::Unknown,
                fence: owner.fence,
                attempt_deadline_at: owner.attempt_deadline_at,
            },
            settles_at: owner.attempt_deadline_at,
        }))
    );
    assert_eq!((next.state, next.attempt), (State::InProgress, 2));
    assert_eq!(
        fixture.events(owner.operation_id).await,
        ["CLAIMED", "OUTCOME_UNKNOWN", "TAKEN_OVER"]
    );
}

async fn stale_fences_are_refused_and_their_repeats_coalesce_in_history(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let stale = acquired(fixture.claim(&command("k", 40)).await);
    sleep_ms(80).await;
    let (_, current) = fixture.claim(&command("k", 30_000)).await;

    for _ in 0..3 {
        let refused = fixture.renew(&stale, None).await;
        assert_eq!(
            refused.answer,
            Err(Error::LeaseLost {
                operation_id: stale.operation_id,
                current_fence: current.fence,
                state: State::InProgress,
            })
        );
        assert!(!refused.record_changed);
    }
    let late = fixture.complete(&stale, success("late")).await;
    assert!(matches!(late.answer, Err(Error::LeaseLost { .. })));

    let (stored, history) = fixture.find(stale.operation_id).await.expect("exists");
    assert_eq!(
        stored,
        second_as_stored(&current),
        "refusals change nothing"
    );
    assert_eq!(
        event_names(&history),
        [
            "CLAIMED",
            "TAKEN_OVER",
            "STALE_WRITE_REFUSED",
            "STALE_WRITE_REFUSED"
        ]
    );
    let renewals = &history[2];
    assert_eq!(
        (renewals.fence, renewals.detail.as_str(), renewals.count),
        (stale.fence, "renew", 3)
    );
    assert!(renewals.last_at >= renewals.first_at);
    assert_eq!(
        (history[3].detail.as_str(), history[3].count),
        ("complete", 1)
    );
    assert_eq!(
        history
            .iter()
            .map(|entry| entry.sequence)
            .collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
}

// ---- reconciliation --------------------------------------------------------

async fn reconcile_resolves_unknown_and_expired_operations_with_a_new_fence(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let unknown = acquired(fixture.claim(&command("unknown", 30_000)).await);
    let unknown = fixture
        .fail(&unknown, FailDisposition::Unknown, TimeDelta::zero())
        .await
        .record;
    // Past its lease and its attempt deadline, so that FAILED is evidence.
    let expired = ClaimCommand {
        max_attempt_duration: TimeDelta::milliseconds(60),
        ..command("expired", 40)
    };
    let expired = acquired(fixture.claim(&expired).await);
    let live = acquired(fixture.claim(&command("live", 30_000)).await);
    sleep_ms(80).await;

    let found = fixture
        .reconcile(&unknown, Resolution::Succeeded(success("found")))
        .await;
    assert_eq!(found.answer, Ok(Answer::Written));
    assert_eq!(found.record.state, State::Succeeded);
    assert!(found.record.fence > unknown.fence);
    let stored = fixture.find(unknown.operation_id).await.expect("exists").0;
    assert_eq!(stored.fence, found.record.fence);
    assert_eq!(
        stored.last_write.map(|receipt| receipt.writer),
        Some(Writer::Reconciler)
    );

    let not_found = fixture
        .reconcile(
            &expired,
            Resolution::Failed(ErrorReport {
                code: "not_at_provider".into(),
                ..ErrorReport::default()
            }),
        )
        .await;
    assert_eq!(not_found.record.state, State::Failed);
    assert_eq!(
        fixture
            .find(expired.operation_id)
            .await
            .expect("exists")
            .0
            .state,
        State::Failed
    );

    let refused = fixture
        .reconcile(&live, Resolution::Succeeded(success("x")))
        .await;
    assert!(matches!(
        refused.answer,
        Err(Error::Refused {
            refusal: Refusal::LeaseStillLive,
            ..
        })
    ));
    assert_eq!(
        fixture.events(unknown.operation_id).await,
        ["CLAIMED", "OUTCOME_UNKNOWN", "RECONCILED"]
    );
    assert_eq!(
        fixture.events(expired.operation_id).await,
        ["CLAIMED", "RECONCILED"]
    );
}

async fn not_applied_waits_for_the_attempt_deadline_then_releases_for_a_new_attempt(
    backend: Backend,
) {
    let fixture = Fixture::new(backend).await;
    let short_attempt = ClaimCommand {
        max_attempt_duration: TimeDelta::milliseconds(2_000),
        ..command("k", 30_000)
    };
    let owner = acquired(fixture.claim(&short_attempt).await);
    let unknown = fixture
        .fail(&owner, FailDisposition::Unknown, TimeDelta::zero())
        .await
        .record;

    let early = fixture.reconcile(&unknown, Resolution::NotApplied).await;
    assert!(matches!(
        early.answer,
        Err(Error::Refused {
            refusal: Refusal::AttemptStillRunning,
            ..
        })
    ));
    sleep_ms(2_100).await;
    let released = fixture.reconcile(&unknown, Resolution::NotApplied).await;
    assert_eq!(released.answer, Ok(Answer::Written));
    assert_eq!(released.record.state, State::RetryWait);
    assert!(released.record.fence > owner.fence);

    let (answer, next) = fixture.claim(&short_attempt).await;
    assert_eq!(answer, Ok(ClaimAnswer::Acquired));
    assert_eq!(next.attempt, 2);
    assert!(next.fence > released.record.fence);
}

/// A budget spent on unknown outcomes ends in NeedsReconciliation; NOT_APPLIED
/// (the effect provably never happened) grants one more attempt, stored with
/// the record and recorded in history, so the next Claim executes instead of
/// failing ATTEMPTS_EXHAUSTED.
async fn not_applied_with_the_budget_spent_grants_one_more_attempt(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let one_attempt = ClaimCommand {
        max_attempts: 1,
        max_attempt_duration: TimeDelta::milliseconds(300),
        ..command("budget", 100)
    };
    let owner = acquired(fixture.claim(&one_attempt).await);
    sleep_ms(400).await; // lease and attempt deadline pass
    let (answer, spent) = fixture.claim(&one_attempt).await;
    assert_eq!(answer, Ok(ClaimAnswer::NeedsReconciliation));
    assert_eq!((spent.attempt, spent.max_attempts), (1, 1));

    let released = fixture.reconcile(&spent, Resolution::NotApplied).await;
    assert_eq!(released.answer, Ok(Answer::Written));
    assert_eq!(released.record.max_attempts, 2, "the grant is stored");
    let (reread, history) = fixture.find(owner.operation_id).await.expect("exists");
    assert_eq!(reread.max_attempts, 2);
    assert_eq!(
        history.last().map(|entry| entry.detail.as_str()),
        Some(idemd::domain::transition::NOT_APPLIED_WITH_GRANT)
    );

    let (answer, next) = fixture.claim(&one_attempt).await;
    assert_eq!(answer, Ok(ClaimAnswer::Acquired));
    assert_eq!((next.attempt, next.max_attempts), (2, 2));
}

// ---- tenants, lists ---------------------------------------------------------

async fn tenants_never_see_or_write_each_others_operations(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let other = tenant(fixture.store.as_ref(), "other").await;
    let owner = acquired(fixture.claim(&command("k", 40)).await);
    sleep_ms(80).await;

    for target in [
        Target::Id(owner.operation_id),
        Target::Scope(owner.scope.clone()),
    ] {
        let found = fixture.lookup_as(other, &target, true).await;
        assert!(found.is_none(), "{target:?}");
        let command = CompleteCommand {
            operation_id: owner.operation_id,
            fence: owner.fence,
            result: success("x"),
        };
        // The store itself: the service writes by id only, but its claim
        // loop transitions by scope, so both must stay within the tenant.
        let decide = |record: &OperationRecord, now| decide_complete(record, &command, now);
        let written = fixture
            .store
            .transition(other, &target, &decide)
            .await
            .expect("transition");
        assert!(written.is_none(), "{target:?}");
    }
    let listed = fixture
        .list_unresolved_as(
            other,
            &UnresolvedQuery {
                operation: None,
                limit: 100,
                after: None,
            },
        )
        .await;
    assert!(listed.records.is_empty());

    // The same scope under the other tenant is another operation.
    let (answer, theirs) = fixture.claim_as(other, &command("k", 30_000)).await;
    assert_eq!(answer, Ok(ClaimAnswer::Acquired));
    assert_ne!(theirs.operation_id, owner.operation_id);
    assert_eq!(
        fixture.find(owner.operation_id).await.expect("exists").0,
        owner
    );
}

async fn revoked_tenants_no_longer_authenticate_and_names_are_reusable(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let store = fixture.store.as_ref();
    let token = create_tenant(store, "short-lived").await;
    let hash = idemd::auth::token_sha256(&token);
    let first = store
        .authenticate(&hash)
        .await
        .expect("auth")
        .expect("active")
        .tenant;
    let duplicate = store
        .create_tenant("short-lived", &idemd::auth::token_sha256("another"))
        .await;
    assert!(
        matches!(duplicate, Err(Error::InvalidArgument(_))),
        "{duplicate:?}"
    );

    assert!(store.revoke_tenant("short-lived").await.expect("revoke"));
    assert!(!store.revoke_tenant("short-lived").await.expect("revoke"));
    assert_eq!(store.authenticate(&hash).await.expect("auth"), None);
    let successor = tenant(store, "short-lived").await;
    assert!(successor.0 > first.0, "tenant ids are never reused");
}

async fn list_unresolved_pages_oldest_first_and_skips_resolved_and_live_ones(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let mut unresolved = Vec::new();
    for index in 0..5 {
        let record = acquired(
            fixture
                .claim(&command(&format!("stalled-{index}"), 40))
                .await,
        );
        unresolved.push(record);
    }
    let reported = acquired(fixture.claim(&command("reported", 30_000)).await);
    fixture
        .fail(&reported, FailDisposition::Unknown, TimeDelta::zero())
        .await;
    unresolved.push(reported);
    let other_operation = ClaimCommand {
        scope: Scope {
            operation: "orders.create".into(),
            key: "stalled".into(),
        },
        ..command("stalled", 40)
    };
    unresolved.push(acquired(fixture.claim(&other_operation).await));
    let done = acquired(fixture.claim(&command("done", 40)).await);
    fixture.complete(&done, success("ok")).await;
    acquired(fixture.claim(&command("live", 30_000)).await);
    sleep_ms(80).await;

    let mut expected: Vec<(DateTime<Utc>, OperationId)> = unresolved
        .iter()
        .map(|record| (record.created_at, record.operation_id))
        .collect();
    expected.sort();
    let mut listed = Vec::new();
    let mut after = None;
    loop {
        let page = fixture
            .list_unresolved_as(
                fixture.tenant,
                &UnresolvedQuery {
                    operation: None,
                    limit: 2,
                    after,
                },
            )
            .await;
        assert!(page.records.len() <= 2);
        let Some(last) = page.records.last() else {
            break;
        };
        after = Some((last.created_at, last.operation_id));
        listed.extend(
            page.records
                .iter()
                .map(|record| (record.created_at, record.operation_id)),
        );
    }
    assert_eq!(listed, expected);

    let only_orders = fixture
        .list_unresolved_as(
            fixture.tenant,
            &UnresolvedQuery {
                operation: Some("orders.create".into()),
                limit: 1000,
                after: None,
            },
        )
        .await;
    assert_eq!(
        only_orders
            .records
            .iter()
            .map(|record| record.scope.key.as_str())
            .collect::<Vec<_>>(),
        ["stalled"]
    );
    assert!((host_clock() - only_orders.now).abs() < TimeDelta::seconds(5));
}

// ---- retention ---------------------------------------------------------------

async fn sweep_tombstones_results_ends_late_retries_and_deletes_old_tombstones(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let no_retention = |key: &str| ClaimCommand {
        retention: TimeDelta::zero(),
        ..command(key, 40)
    };
    let mut results = Vec::new();
    for index in 0..3 {
        let owner = acquired(fixture.claim(&no_retention(&format!("done-{index}"))).await);
        fixture.complete(&owner, success("ok")).await;
        results.push(owner);
    }
    // Retention of its own, so that it stays FAILED once the sweeper ends it.
    let late_retry = ClaimCommand {
        operation_deadline: Some(TimeDelta::milliseconds(1_500)),
        ..command("late-retry", 40)
    };
    let retrying = acquired(fixture.claim(&late_retry).await);
    let scheduled = fixture
        .fail(
            &retrying,
            FailDisposition::Retryable,
            TimeDelta::milliseconds(20),
        )
        .await;
    assert_eq!(scheduled.record.state, State::RetryWait);
    let unknown = acquired(fixture.claim(&no_retention("unknown")).await);
    fixture
        .fail(&unknown, FailDisposition::Unknown, TimeDelta::zero())
        .await;
    acquired(fixture.claim(&no_retention("stalled")).await);
    sleep_ms(1_600).await;

    // Batches of two: the backlog takes several sweeps, none does work twice.
    let tombstone_retention = TimeDelta::hours(1);
    let first = fixture
        .store
        .sweep(2, sweep_policy(tombstone_retention))
        .await
        .expect("sweep");
    assert_eq!(first.tombstoned + first.deadline_exceeded, 2);
    let mut total = first;
    loop {
        let report = fixture
            .store
            .sweep(2, sweep_policy(tombstone_retention))
            .await
            .expect("sweep");
        if report.total() == 0 {
            break;
        }
        total.tombstoned += report.tombstoned;
        total.deadline_exceeded += report.deadline_exceeded;
        total.deleted += report.deleted;
    }
    assert_eq!(
        (total.tombstoned, total.deadline_exceeded, total.deleted),
        (3, 1, 0)
    );

    let (tombstone, history) = fixture.find(results[0].operation_id).await.expect("kept");
    assert_eq!(tombstone.state, State::Expired);
    assert_eq!(tombstone.outcome, None, "the result is gone");
    assert_eq!(tombstone.outcome_kind, Some(State::Succeeded));
    assert_eq!(tombstone.fingerprint, results[0].fingerprint);
    let expired_at = history.last().expect("history").last_at;
    assert_eq!(
        tombstone.retain_until,
        Some(expired_at + tombstone_retention)
    );
    assert_eq!(event_names(&history), ["CLAIMED", "COMPLETED", "EXPIRED"]);
    let (refused, _) = fixture.claim(&no_retention("done-0")).await;
    assert_eq!(
        refused,
        Err(Error::ResultExpired {
            operation_id: results[0].operation_id
        })
    );
    let (retry, retry_history) = fixture.find(retrying.operation_id).await.expect("kept");
    assert!(matches!(
        retry.outcome,
        Some(Outcome::Failed {
            reason: FailureReason::DeadlineExceeded,
            ..
        })
    ));
    assert_eq!(
        event_names(&retry_history),
        ["CLAIMED", "RETRY_SCHEDULED", "DEADLINE_EXCEEDED"]
    );
    let (unresolved, _) = fixture
        .find(unknown.operation_id)
        .await
        .expect("never swept");
    assert_eq!(unresolved.state, State::Unknown);

    // Past the tombstones' own retention they go, with their history, and
    // the scope starts afresh with a higher fence than any before.
    fixture.backend.age_retention().await;
    let mut deleted = 0;
    loop {
        let report = fixture
            .store
            .sweep(2, sweep_policy(tombstone_retention))
            .await
            .expect("sweep");
        deleted += report.deleted;
        if report.total() == 0 {
            break;
        }
    }
    assert_eq!(deleted, 3);
    assert!(fixture.find(results[0].operation_id).await.is_none());
    assert_eq!(
        fixture
            .backend
            .count(
                "SELECT count(*) FROM operation_history \
                 WHERE operation_id NOT IN (SELECT operation_id FROM operations)"
            )
            .await,
        0,
        "history is deleted with its operation"
    );
    let highest_fence = [&results[..], &[retrying, unknown]]
        .concat()
        .iter()
        .map(|record| record.fence)
        .max()
        .expect("fences");
    let (answer, fresh) = fixture.claim(&no_retention("done-0")).await;
    assert_eq!(answer, Ok(ClaimAnswer::Acquired));
    assert_ne!(fresh.operation_id, results[0].operation_id);
    assert!(fresh.fence > highest_fence);
}

// ---- bounds and values -------------------------------------------------------

async fn values_at_their_bounds_are_stored_and_read_back_exactly(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    // 255 bytes of key, multibyte characters included; 128 characters of operation.
    let key = format!("{}x", "é".repeat(127));
    assert_eq!(key.len(), 255);
    let operation = format!("a.{}", "b/-_".repeat(32))
        .chars()
        .take(128)
        .collect::<String>();
    assert_eq!(operation.chars().count(), 128);
    let command = ClaimCommand {
        scope: Scope {
            operation,
            key: key.clone(),
        },
        fingerprint: Fingerprint([0xff; 32]),
        claim_token: (0..64).map(|byte| (byte * 4) as u8).collect(),
        lease: TimeDelta::hours(1),
        max_attempt_duration: TimeDelta::hours(24),
        max_attempts: 100,
        retention: TimeDelta::days(30),
        operation_deadline: Some(TimeDelta::days(30)),
        clock_margin: TimeDelta::zero(),
    };
    let owner = acquired(fixture.claim(&command).await);
    assert_eq!(
        fixture.find(owner.operation_id).await.expect("exists").0,
        owner
    );

    // Keys are compared byte for byte: case, spacing and normalisation matter.
    for variant in [
        key.to_uppercase().chars().take(100).collect::<String>(),
        format!("{key} ").chars().skip(2).collect(),
        format!("{}x", "e\u{301}".repeat(50)),
    ] {
        let distinct = ClaimCommand {
            scope: Scope {
                key: variant.clone(),
                ..command.scope.clone()
            },
            ..command.clone()
        };
        let (answer, _) = fixture.claim(&distinct).await;
        assert_eq!(answer, Ok(ClaimAnswer::Acquired), "{variant:?}");
    }

    let result = SuccessResult {
        body: (0..1024 * 1024).map(|index| (index % 251) as u8).collect(),
        content_type: "c".repeat(255),
        metadata: (0..16)
            .map(|index| (format!("{index:02}{}", "k".repeat(126)), "v".repeat(128)))
            .collect(),
    };
    let completed = fixture.complete(&owner, result.clone()).await;
    assert_eq!(completed.answer, Ok(Answer::Written));
    let stored = fixture.find(owner.operation_id).await.expect("exists").0;
    assert_eq!(stored.outcome, Some(Outcome::Succeeded(result)));

    let failing = acquired(
        fixture
            .claim(&ClaimCommand {
                scope: Scope {
                    operation: "payments.charge".into(),
                    key: "failing".into(),
                },
                ..command.clone()
            })
            .await,
    );
    let error = ErrorReport {
        code: "e".repeat(255),
        message: "ü".repeat(2048),
        metadata: Metadata::from([("quote".into(), "\"'\\".into())]),
    };
    let failure = FailCommand {
        operation_id: failing.operation_id,
        fence: failing.fence,
        disposition: FailDisposition::Terminal,
        error: error.clone(),
        retry_after: TimeDelta::zero(),
        clock_margin: TimeDelta::zero(),
    };
    fixture.fail_with(&failure).await;
    let stored = fixture.find(failing.operation_id).await.expect("exists").0;
    assert_eq!(
        stored.outcome,
        Some(Outcome::Failed {
            reason: FailureReason::Terminal,
            error
        })
    );
}

async fn timestamps_keep_microseconds(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let owner = acquired(fixture.claim(&command("k", 30_000)).await);
    let precise = DateTime::parse_from_rfc3339("2031-02-03T04:05:06.123456Z")
        .expect("valid")
        .to_utc();
    let with_nanos = precise + TimeDelta::nanoseconds(789);
    // A write no decision makes, to see what the store keeps of each value.
    let applied = fixture
        .transition(owner.operation_id, |record, _now| Decision {
            effects: Effects {
                update: Some(Update {
                    next: OperationRecord {
                        retain_until: Some(precise),
                        retry_at: Some(with_nanos),
                        ..record.clone()
                    },
                    takes_new_fence: false,
                }),
                history: None,
            },
            answer: Ok(Answer::Written),
        })
        .await;
    assert!(applied.record_changed);
    let stored = fixture.find(owner.operation_id).await.expect("exists").0;
    assert_eq!(stored.retain_until, Some(precise));
    assert_eq!(
        stored.retry_at,
        Some(precise),
        "below a microsecond is dropped"
    );
    assert_eq!(
        fixture.events(owner.operation_id).await,
        ["CLAIMED"],
        "no history was asked for"
    );
}

// ---- races -----------------------------------------------------------------

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

/// Every owner write's common case, written once through `Store::write` (on
/// Postgres: one guarded statement, which never stops at the pause hook of
/// the locked path) and once through the locked `Store::transition`, from
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
        if matches!(fixture.backend, Backend::Postgres { .. }) {
            assert_eq!(entered, 0, "{name}: Postgres writes it in one statement");
        }
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
    a_first_claim_is_stored_in_progress_with_lease_deadlines_and_history,
    a_first_claim_stores_exactly_what_the_domain_decided,
    a_second_scope_gets_its_own_record_and_a_higher_fence,
    concurrent_first_claims_of_one_scope_acquire_exactly_once,
    a_live_lease_answers_pending_its_own_token_acquired_and_another_request_conflict,
    an_expired_lease_is_taken_over_with_reconcile_first_until_the_budget_is_spent,
    renew_extends_the_lease_but_never_past_the_attempt_deadline,
    complete_stores_the_result_replays_it_and_answers_a_resend_once,
    a_terminal_failure_is_stored_and_replayed,
    a_retryable_failure_waits_then_releases_within_the_budget,
    an_unknown_outcome_is_taken_over_with_reconcile_first,
    stale_fences_are_refused_and_their_repeats_coalesce_in_history,
    reconcile_resolves_unknown_and_expired_operations_with_a_new_fence,
    not_applied_waits_for_the_attempt_deadline_then_releases_for_a_new_attempt,
    not_applied_with_the_budget_spent_grants_one_more_attempt,
    tenants_never_see_or_write_each_others_operations,
    revoked_tenants_no_longer_authenticate_and_names_are_reusable,
    list_unresolved_pages_oldest_first_and_skips_resolved_and_live_ones,
    sweep_tombstones_results_ends_late_retries_and_deletes_old_tombstones,
    values_at_their_bounds_are_stored_and_read_back_exactly,
    timestamps_keep_microseconds,
    a_renew_racing_a_takeover_loses_to_the_takeover_that_locked_first,
    a_late_complete_racing_a_reconcile_loses_to_the_reconcile_that_locked_first,
);
