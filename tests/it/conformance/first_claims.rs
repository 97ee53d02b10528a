//! First claims: a scope's first Claim, stored as the domain decided it.

use std::sync::Arc;

use chrono::TimeDelta;
use idemd::domain::*;
use tokio::sync::Barrier;

use super::fixture::*;
use crate::harness::*;
use idemd::service::DrawOperationId as _;

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
            acted_by: None,
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

store_tests!(
    a_first_claim_stores_exactly_what_the_domain_decided,
    a_first_claim_is_stored_in_progress_with_lease_deadlines_and_history,
    a_second_scope_gets_its_own_record_and_a_higher_fence,
    concurrent_first_claims_of_one_scope_acquire_exactly_once,
);
