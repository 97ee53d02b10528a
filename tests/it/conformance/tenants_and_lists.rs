//! Tenants and lists: tenants kept apart, revoked, and ListUnresolved's pages.

use chrono::{DateTime, TimeDelta, Utc};
use idemd::domain::transition::decide_complete;
use idemd::domain::*;

use super::fixture::*;
use crate::harness::*;

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

store_tests!(
    tenants_never_see_or_write_each_others_operations,
    revoked_tenants_no_longer_authenticate_and_names_are_reusable,
    list_unresolved_pages_oldest_first_and_skips_resolved_and_live_ones,
);
