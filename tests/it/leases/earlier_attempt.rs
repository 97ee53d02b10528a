//! What a new owner is told of the attempt it took over (ReconcileFirst's
//! previous_attempt_deadline, handed on by declines), and how long a
//! reconciler must wait before it says the effect did not happen.

use std::time::Duration;

use idemd::domain::Limits;
use idemd::proto;
use idemd::proto::claim_response::Outcome;
use tonic::Code;

use crate::harness::*;

use super::{LEASE_MS, short_lease_claim, sleep_past_lease};

fn as_std(duration: Option<&pbjson_types::Duration>) -> Duration {
    let duration = duration.expect("a duration");
    Duration::new(
        u64::try_from(duration.seconds).expect("not negative"),
        u32::try_from(duration.nanos).expect("not negative"),
    )
}

fn reconcile_first(response: &proto::ClaimResponse) -> &proto::ReconcileFirst {
    let Some(Outcome::ReconcileFirst(takeover)) = &response.outcome else {
        panic!("expected ReconcileFirst, got {response:?}");
    };
    takeover
}

async fn a_takeover_reports_the_time_left_until_the_previous_attempts_deadline(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let attempt_duration = Duration::from_secs(60);
    // A's lease is short, to be taken over; B's is long, so that B's
    // re-sends below meet B's live lease however slow the machine is (not a
    // takeover of B).
    let claim = |claim_token: &[u8]| proto::ClaimRequest {
        max_attempt_duration: millis(60_000),
        claim_token: claim_token.to_vec(),
        lease: if claim_token == b"owner-a" {
            millis(LEASE_MS)
        } else {
            millis(30_000)
        },
        ..short_lease_claim("k", 5)
    };

    // Owner A's lease runs out long before its attempt deadline.
    let sent_first = std::time::Instant::now();
    let first = client
        .claim(authorized(token, claim(b"owner-a")))
        .await
        .expect("claim")
        .into_inner();
    let owner_a = ownership(&first).expect("acquired").clone();
    sleep_past_lease().await;

    let second = client
        .claim(authorized(token, claim(b"owner-b")))
        .await
        .expect("claim")
        .into_inner();
    let elapsed = sent_first.elapsed();
    let takeover = reconcile_first(&second);
    assert_eq!(takeover.previous_fence, owner_a.fence);
    let left = as_std(takeover.previous_attempt_deadline.as_ref());
    // What is left of A's attempt: at most its whole duration, and at least
    // what remained of it when B's answer arrived.
    assert!(left <= attempt_duration, "{left:?}");
    assert!(
        left >= attempt_duration - elapsed,
        "{left:?} after {elapsed:?}"
    );
    // B's own attempt deadline is counted from the takeover: later than A's.
    let owner_b = takeover.ownership.clone().expect("ownership");
    assert!(as_std(owner_b.attempt_deadline.as_ref()) > left);

    // B re-sends its Claim (a lost reply): ReconcileFirst again, with what
    // is left of the same deadline by then.
    let resent = client
        .claim(authorized(token, claim(b"owner-b")))
        .await
        .expect("re-sent claim")
        .into_inner();
    let again = reconcile_first(&resent);
    assert_eq!(again.previous_fence, owner_a.fence);
    assert_eq!(
        again.ownership.as_ref().map(|o| o.fence),
        Some(owner_b.fence)
    );
    let left_again = as_std(again.previous_attempt_deadline.as_ref());
    assert!(
        left_again > Duration::ZERO && left_again <= left,
        "{left_again:?}"
    );

    // The TAKEN_OVER entry keeps the deadline too.
    let history = history(&mut client, token, &owner_a.operation_id).await;
    assert_eq!(events(&history), ["CLAIMED", "TAKEN_OVER"]);
    assert!(
        history[1]
            .detail
            .starts_with("lease expired; previous attempt deadline 20"),
        "{}",
        history[1].detail
    );
}

async fn a_takeover_after_the_previous_attempts_deadline_reports_zero(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    // The attempt deadline is the lease: both have passed at the takeover.
    let claim = proto::ClaimRequest {
        max_attempt_duration: millis(LEASE_MS),
        ..short_lease_claim("k", 5)
    };
    let first = client
        .claim(authorized(token, claim.clone()))
        .await
        .expect("claim")
        .into_inner();
    let owner_a = ownership(&first).expect("acquired").clone();
    sleep_past_lease().await;

    let second = client
        .claim(authorized(token, claim))
        .await
        .expect("claim")
        .into_inner();
    let takeover = reconcile_first(&second);
    assert_eq!(takeover.previous_fence, owner_a.fence);
    assert_eq!(
        takeover.previous_attempt_deadline,
        Some(pbjson_types::Duration::default()),
        "zero once the deadline has passed: a provider lookup is trustworthy now"
    );
}

fn decline(ownership: &proto::Ownership) -> proto::FailRequest {
    proto::FailRequest {
        operation_id: ownership.operation_id.clone(),
        fence: ownership.fence,
        disposition: proto::FailDisposition::NotStarted as i32,
        error: Some(proto::OperationError {
            code: "not_started".into(),
            ..Default::default()
        }),
        retry_after: None,
    }
}

/// The long fault run's liveness failure, end to end: a takeover that
/// declines (Fail NOT_STARTED) hands on the doubt it took over, with the
/// earlier attempt's deadline, however many decline in turn.
async fn a_declined_takeover_hands_on_the_earlier_attempts_deadline(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let attempt = Duration::from_secs(60);
    let gap = Duration::from_millis(1_500);
    let claim = |claim_token: &[u8]| proto::ClaimRequest {
        max_attempt_duration: millis(60_000),
        claim_token: claim_token.to_vec(),
        ..short_lease_claim("k", 5)
    };
    let first = client
        .claim(authorized(token, claim(b"owner-a")))
        .await
        .expect("claim")
        .into_inner();
    let owner_a = ownership(&first).expect("acquired").clone();
    // A's lease runs out; its effect may run until its deadline, 60 s after
    // its Claim. Every later attempt's deadline is at least `gap` later.
    tokio::time::sleep(gap).await;

    let mut previous_fence = owner_a.fence;
    for taker in [b"owner-b".as_slice(), b"owner-c", b"owner-d"] {
        let taken = client
            .claim(authorized(token, claim(taker)))
            .await
            .expect("claim")
            .into_inner();
        let takeover = reconcile_first(&taken);
        assert_eq!(takeover.previous_fence, previous_fence);
        let left = as_std(takeover.previous_attempt_deadline.as_ref());
        // A's deadline, not a decliner's: at least `gap` has passed since A
        // claimed, so at most attempt - gap is left of it (a decliner's own
        // deadline would leave nearly the whole attempt).
        assert!(
            left <= attempt - gap,
            "{}: told {left:?}, more than is left of the first attempt",
            String::from_utf8_lossy(taker)
        );
        assert!(left > attempt / 2, "{left:?}");
        let owner = takeover.ownership.clone().expect("ownership");
        let failed = client
            .fail(authorized(token, decline(&owner)))
            .await
            .expect("decline")
            .into_inner();
        assert_eq!(failed.state(), proto::OperationState::Unknown);
        previous_fence = owner.fence;
    }
    let history = history(&mut client, token, &owner_a.operation_id).await;
    assert_eq!(
        events(&history),
        [
            "CLAIMED",
            "TAKEN_OVER",
            "OUTCOME_UNKNOWN",
            "TAKEN_OVER",
            "OUTCOME_UNKNOWN",
            "TAKEN_OVER",
            "OUTCOME_UNKNOWN"
        ]
    );
    assert_eq!(history[2].detail, "not_started");
}

/// A decline of an attempt that took over nothing releases the operation
/// for the next attempt at once; NOT_STARTED takes no retry_after.
async fn a_declined_fresh_attempt_is_released_at_once(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let first = client
        .claim(authorized(token, claim_json("payments.charge", "k", "{}")))
        .await
        .expect("claim")
        .into_inner();
    let owner = ownership(&first).expect("acquired").clone();

    let with_delay = proto::FailRequest {
        retry_after: millis(1_000),
        ..decline(&owner)
    };
    let refused = client
        .fail(authorized(token, with_delay))
        .await
        .expect_err("retry_after with NOT_STARTED");
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert_eq!(violated_fields(&refused), ["retry_after"]);

    let failed = client
        .fail(authorized(token, decline(&owner)))
        .await
        .expect("decline")
        .into_inner();
    assert_eq!(failed.state(), proto::OperationState::RetryWait);
    let next = client
        .claim(authorized(token, claim_json("payments.charge", "k", "{}")))
        .await
        .expect("claim")
        .into_inner();
    assert_eq!(outcome_name(&next), "acquired");
    assert_eq!(ownership(&next).map(|o| o.attempt), Some(2));
}

/// Issue 17, item 4: B took over A's attempt (whose effect may still land
/// until A's deadline) and failed RETRYABLE: B's own effect did not happen,
/// which says nothing of A's. The retry after it must be told to reconcile
/// first, about A, not Acquired ("no earlier attempt can have taken effect").
async fn a_retry_after_a_retryable_takeover_is_told_the_earlier_attempt_may_still_run(
    backend: Backend,
) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let claim = proto::ClaimRequest {
        max_attempt_duration: millis(60_000),
        ..short_lease_claim("k", 5)
    };
    let first = client
        .claim(authorized(token, claim.clone()))
        .await
        .expect("claim")
        .into_inner();
    let owner_a = ownership(&first).expect("acquired").clone();
    sleep_past_lease().await;
    let second = client
        .claim(authorized(token, claim.clone()))
        .await
        .expect("claim")
        .into_inner();
    let owner_b = reconcile_first(&second)
        .ownership
        .clone()
        .expect("ownership");
    client
        .fail(authorized(
            token,
            proto::FailRequest {
                operation_id: owner_b.operation_id.clone(),
                fence: owner_b.fence,
                disposition: proto::FailDisposition::Retryable.into(),
                error: None,
                retry_after: millis(10),
            },
        ))
        .await
        .expect("fail");
    tokio::time::sleep(Duration::from_millis(50)).await;

    let third = client
        .claim(authorized(token, claim))
        .await
        .expect("claim")
        .into_inner();
    let told = reconcile_first(&third);
    assert_eq!(told.previous_fence, owner_a.fence, "the doubt is about A");
    let left = as_std(told.previous_attempt_deadline.as_ref());
    assert!(
        left > Duration::from_secs(50) && left <= Duration::from_secs(60),
        "{left:?}"
    );
    let history = history(&mut client, token, &owner_a.operation_id).await;
    assert_eq!(
        events(&history),
        ["CLAIMED", "TAKEN_OVER", "RETRY_SCHEDULED", "RETRY_STARTED"]
    );
    assert!(
        history[3]
            .detail
            .starts_with("earlier attempt may still be in flight; previous attempt deadline 20"),
        "{}",
        history[3].detail
    );
}

/// Issue 17, item 8: FAILED says the effect did not happen, as NOT_APPLIED
/// does; a reconciler reading "not found" at the provider while a stalled
/// owner's call is in flight must not record it before the deadline.
async fn reconcile_failed_waits_for_the_attempt_deadline_as_not_applied_does(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let claim = proto::ClaimRequest {
        max_attempt_duration: millis(LEASE_MS * 3),
        ..short_lease_claim("k", 5)
    };
    let first = client
        .claim(authorized(token, claim))
        .await
        .expect("claim")
        .into_inner();
    let owner = ownership(&first).expect("acquired").clone();
    let failed = proto::ReconcileRequest {
        tenant: String::new(),
        operation_id: owner.operation_id.clone(),
        expected_fence: owner.fence,
        resolution: Some(proto::reconcile_request::Resolution::Failed(
            proto::OperationError {
                code: "not_found".into(),
                ..Default::default()
            },
        )),
    };
    sleep_past_lease().await;
    let early = client
        .reconcile(authorized(token, failed.clone()))
        .await
        .expect_err("the attempt may still be running");
    assert_status(&early, Code::FailedPrecondition, "ATTEMPT_STILL_RUNNING");

    tokio::time::sleep(Duration::from_millis(LEASE_MS * 3)).await;
    let reconciled = client
        .reconcile(authorized(token, failed))
        .await
        .expect("after the deadline")
        .into_inner();
    assert_eq!(reconciled.state(), proto::OperationState::Failed);
}

/// Issue 17, item 5: a forward step of the database clock would shorten the
/// doubt a new owner is told while the old owner counts on its own clock.
/// The configured margin is added to previous_attempt_deadline and to the
/// wait before NOT_APPLIED.
async fn the_clock_margin_extends_the_doubt_told_and_the_wait_before_not_applied(backend: Backend) {
    let margin = Duration::from_secs(2);
    let limits = Limits {
        clock_margin: chrono::TimeDelta::from_std(margin).expect("a small duration"),
        ..test_limits()
    };
    let world = World::start_with(backend, limits).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    // Long enough that A's attempt is still running at the takeover.
    let attempt = Duration::from_millis(LEASE_MS * 8);
    let claim = proto::ClaimRequest {
        max_attempt_duration: millis(LEASE_MS * 8),
        ..short_lease_claim("k", 5)
    };
    let first = client
        .claim(authorized(token, claim.clone()))
        .await
        .expect("claim")
        .into_inner();
    let owner_a = ownership(&first).expect("acquired").clone();
    sleep_past_lease().await;
    let second = client
        .claim(authorized(token, claim))
        .await
        .expect("claim")
        .into_inner();
    let told = as_std(reconcile_first(&second).previous_attempt_deadline.as_ref());
    assert!(
        told > margin && told <= margin + attempt,
        "A's deadline (not yet passed) plus the margin: {told:?}"
    );

    // A reconciler waits for A's (and B's) deadline plus the margin.
    let owner_b = ownership_of(&second);
    let not_applied = proto::ReconcileRequest {
        tenant: String::new(),
        operation_id: owner_a.operation_id.clone(),
        expected_fence: owner_b.fence,
        resolution: Some(proto::reconcile_request::Resolution::NotApplied(
            proto::NotApplied {},
        )),
    };
    tokio::time::sleep(attempt + Duration::from_millis(100)).await;
    let early = client
        .reconcile(authorized(token, not_applied.clone()))
        .await
        .expect_err("within the margin");
    assert_status(&early, Code::FailedPrecondition, "ATTEMPT_STILL_RUNNING");
    tokio::time::sleep(margin).await;
    client
        .reconcile(authorized(token, not_applied))
        .await
        .expect("past the deadline and the margin");
}

fn ownership_of(response: &proto::ClaimResponse) -> proto::Ownership {
    reconcile_first(response)
        .ownership
        .clone()
        .expect("ownership")
}

store_tests!(
    a_takeover_reports_the_time_left_until_the_previous_attempts_deadline,
    a_takeover_after_the_previous_attempts_deadline_reports_zero,
    a_declined_takeover_hands_on_the_earlier_attempts_deadline,
    a_declined_fresh_attempt_is_released_at_once,
    a_retry_after_a_retryable_takeover_is_told_the_earlier_attempt_may_still_run,
    reconcile_failed_waits_for_the_attempt_deadline_as_not_applied_does,
    the_clock_margin_extends_the_doubt_told_and_the_wait_before_not_applied,
);
