//! A call abandoned at any of its awaits (its client went away, its deadline
//! passed: tonic drops the handler's future) leaves the store as usable as
//! it found it. The next call is answered, never INTERNAL.
//!
//! Found by the Rust client's restart test: when its effect finished, the
//! client stopped its lease renewal, whose Renew was then in flight; the
//! embedded store's writer had sent a RELEASE (or a BEGIN IMMEDIATE) that
//! SQLite ran but the writer never recorded, and the Complete right after
//! heard "no such savepoint" (or "cannot start a transaction within a
//! transaction") as INTERNAL.

use idemd::domain::*;
use idemd::service::IdempotencyService;

use crate::harness::*;

store_tests!(a_write_abandoned_at_any_await_leaves_the_next_write_answered);

/// Polls `future` until it has returned Pending `awaits` times, then drops
/// it on its next wake-up: a caller that goes away at that await, after what
/// it waited for (a statement's answer) has arrived. `Some` if it finished
/// first.
async fn abandoned_after<F: Future>(awaits: usize, future: F) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    let mut left = awaits;
    std::future::poll_fn(move |context| {
        if left == 0 {
            return std::task::Poll::Ready(None);
        }
        left -= 1;
        future.as_mut().poll(context).map(Some)
    })
    .await
}

async fn acquire(service: &IdempotencyService, tenant: TenantId, key: &str) -> OperationRecord {
    let reply = service
        .claim(tenant, &claim_command(key), std::time::Duration::ZERO)
        .await
        .expect("claimed");
    assert_eq!(reply.answer, ClaimAnswer::Acquired);
    reply.record.expect("an acquired operation")
}

/// Renews (the write the client abandons) cut off at every await from the
/// first to past their end, each followed by a Renew that must be answered;
/// then the owner's Complete is stored and a duplicate Claim replays it.
async fn a_write_abandoned_at_any_await_leaves_the_next_write_answered(backend: Backend) {
    let store = backend.store();
    let token = create_tenant(store.as_ref(), "cancellation").await;
    let tenant = store
        .authenticate(&idemd::auth::token_sha256(&token))
        .await
        .expect("auth")
        .expect("an active tenant")
        .tenant;
    let service = ServiceUnderTest::over(store.clone());
    let service = &service.service;
    let owner = acquire(service, tenant, "order-1").await;
    let renew = RenewCommand {
        operation_id: owner.operation_id,
        fence: owner.fence,
        lease: None,
    };
    let mut finished = 0;
    // Where each await falls depends on how fast the database answers (an
    // answer already there is no await): several sweeps meet every window.
    for sweep in 0..8 {
        for awaits in 0..60 {
            if abandoned_after(awaits, service.renew(tenant, &renew))
                .await
                .is_some()
            {
                finished += 1;
            }
            let answered = service.renew(tenant, &renew).await;
            assert!(
                answered.is_ok(),
                "a Renew after one abandoned at await {awaits} (sweep {sweep}): {answered:?}"
            );
        }
    }
    assert!(finished > 0, "the last Renews ran to their end unabandoned");
    let completed = service
        .complete(
            tenant,
            &CompleteCommand {
                operation_id: owner.operation_id,
                fence: owner.fence,
                result: SuccessResult {
                    body: b"{\"charge\":1}".to_vec(),
                    content_type: "application/json".into(),
                    metadata: Metadata::new(),
                },
            },
        )
        .await
        .expect("completed");
    assert_eq!(completed.record.state, State::Succeeded);
    let replay = service
        .claim(tenant, &claim_command("order-1"), std::time::Duration::ZERO)
        .await
        .expect("replayed");
    assert!(
        matches!(replay.answer, ClaimAnswer::Completed),
        "{:?}",
        replay.answer
    );
}
