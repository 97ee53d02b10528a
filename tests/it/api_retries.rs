//! Retrying the API itself: lost replies of Claim, Complete and Fail.

use idemd::proto;
use tonic::Code;

use crate::harness::*;

async fn a_resent_claim_with_its_token_gets_the_same_acquired_answer(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let request = proto::ClaimRequest {
        claim_token: b"attempt-7f3a".to_vec(),
        ..claim_json("payments.charge", "k", r#"{"amount":1}"#)
    };
    world.server.faults.arm("Claim", Fault::LoseReply);

    let lost = client
        .claim(authorized(token, request.clone()))
        .await
        .expect_err("reply lost");
    assert_eq!(lost.code(), Code::Unavailable);
    let resent = client
        .claim(authorized(token, request.clone()))
        .await
        .expect("resent")
        .into_inner();
    let again = client
        .claim(authorized(token, request))
        .await
        .expect("resent")
        .into_inner();

    assert_eq!(outcome_name(&resent), "acquired");
    let first = ownership(&resent).expect("ownership");
    let second = ownership(&again).expect("ownership");
    assert_eq!((first.fence, first.attempt), (second.fence, second.attempt));
    assert_eq!(first.attempt, 1, "the attempt is counted once");
    let history = history(&mut client, token, &first.operation_id).await;
    assert_eq!(events(&history), ["CLAIMED"]);

    // Without the token the same Claim is somebody else's: Pending.
    let other = client
        .claim(authorized(
            token,
            claim_json("payments.charge", "k", r#"{"amount":1}"#),
        ))
        .await
        .expect("claim")
        .into_inner();
    assert_eq!(outcome_name(&other), "pending");
}

/// A claim_token derived from a message id (a mistake: tokens are random per
/// attempt) makes a duplicate delivery look like the owner re-sending its
/// Claim. Once the owner has written under its fence (here a Renew), the
/// token is spent: the duplicate is told Pending, then the replay, and runs
/// no effect; only the owner's Claim re-sent before that write gets the
/// fence again.
async fn a_token_repeated_after_the_owner_renewed_never_gets_the_fence_again(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let delivery = || proto::ClaimRequest {
        claim_token: b"msg-0001".to_vec(),
        ..claim_json("orders.ship", "order-1", r#"{"order":1}"#)
    };
    let mut effects = 0;
    let first = claim_owned(&mut client, token, delivery()).await;
    effects += 1;
    client
        .renew(authorized(
            token,
            proto::RenewRequest {
                operation_id: first.operation_id.clone(),
                fence: first.fence,
                lease: None,
            },
        ))
        .await
        .expect("renew");

    // The duplicate delivery, while the first one's effect runs.
    let duplicate = client
        .claim(authorized(token, delivery()))
        .await
        .expect("claim")
        .into_inner();
    assert_eq!(outcome_name(&duplicate), "pending", "{duplicate:?}");
    if ownership(&duplicate).is_some() {
        effects += 1;
    }

    complete(&mut client, token, &first, "shipped").await;
    let after = client
        .claim(authorized(token, delivery()))
        .await
        .expect("claim")
        .into_inner();
    assert_eq!(outcome_name(&after), "completed");
    assert_eq!(effects, 1);
    let history = history(&mut client, token, &first.operation_id).await;
    assert_eq!(events(&history), ["CLAIMED", "RENEWED", "COMPLETED"]);
}

async fn a_resent_complete_gets_the_original_ok_and_records_once(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let claimed = client
        .claim(authorized(token, claim_json("payments.charge", "k", "{}")))
        .await
        .expect("claim")
        .into_inner();
    let owner = ownership(&claimed).expect("acquired").clone();
    let complete = |body: &str| proto::CompleteRequest {
        operation_id: owner.operation_id.clone(),
        fence: owner.fence,
        result: result(body),
    };
    world.server.faults.arm("Complete", Fault::LoseReply);

    let lost = client
        .complete(authorized(token, complete("ok")))
        .await
        .expect_err("reply lost");
    assert_eq!(lost.code(), Code::Unavailable);
    let resent = client
        .complete(authorized(token, complete("ok")))
        .await
        .expect("original OK")
        .into_inner();
    assert_eq!(resent.state, proto::OperationState::Succeeded as i32);

    let different = client
        .complete(authorized(token, complete("something else")))
        .await
        .expect_err("same fence, another request");
    assert_status(&different, Code::FailedPrecondition, "REQUEST_MISMATCH");
    let history = history(&mut client, token, &owner.operation_id).await;
    assert_eq!(events(&history), ["CLAIMED", "COMPLETED"]);
}

async fn a_resent_fail_gets_the_original_ok_and_records_once(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let claimed = client
        .claim(authorized(token, claim_json("payments.charge", "k", "{}")))
        .await
        .expect("claim")
        .into_inner();
    let owner = ownership(&claimed).expect("acquired").clone();
    let fail = proto::FailRequest {
        operation_id: owner.operation_id.clone(),
        fence: owner.fence,
        disposition: proto::FailDisposition::Terminal as i32,
        error: Some(proto::OperationError {
            code: "card_declined".into(),
            message: "insufficient funds".into(),
            ..Default::default()
        }),
        retry_after: None,
    };
    world.server.faults.arm("Fail", Fault::LoseReply);

    let lost = client
        .fail(authorized(token, fail.clone()))
        .await
        .expect_err("reply lost");
    assert_eq!(lost.code(), Code::Unavailable);
    let resent = client
        .fail(authorized(token, fail))
        .await
        .expect("original OK")
        .into_inner();
    assert_eq!(resent.state, proto::OperationState::Failed as i32);
    assert_eq!(resent.reason, proto::FailureReason::Terminal as i32);

    // Complete after FAILED is refused.
    let complete = client
        .complete(authorized(
            token,
            proto::CompleteRequest {
                operation_id: owner.operation_id.clone(),
                fence: owner.fence,
                result: result("too late"),
            },
        ))
        .await
        .expect_err("terminal");
    assert_eq!(complete.code(), Code::FailedPrecondition);
    let history = history(&mut client, token, &owner.operation_id).await;
    assert_eq!(events(&history), ["CLAIMED", "FAILED"]);
}

store_tests!(
    a_resent_claim_with_its_token_gets_the_same_acquired_answer,
    a_token_repeated_after_the_owner_renewed_never_gets_the_fence_again,
    a_resent_complete_gets_the_original_ok_and_records_once,
    a_resent_fail_gets_the_original_ok_and_records_once,
    a_resent_write_gets_its_original_answer_after_the_record_moved_on,
    a_resent_write_after_a_later_write_is_lease_lost_as_the_proto_says,
    a_receipt_answer_left_by_another_write_is_not_trusted,
);

/// A re-sent write is answered with what the original write answered, kept
/// with its receipt, however the record moved on since (DESIGN: "A re-sent
/// write gets the answer the original got").
async fn a_resent_write_gets_its_original_answer_after_the_record_moved_on(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let claim = |key: &str| claim_json("payments.charge", key, "{}");

    // Fail RETRYABLE, then the retry's new attempt: the re-sent Fail still
    // hears RETRY_WAIT and its retry_after, not the new attempt's IN_PROGRESS.
    let first = client
        .claim(authorized(token, claim("retried")))
        .await
        .expect("claim")
        .into_inner();
    let owner = ownership(&first).expect("acquired").clone();
    let fail = proto::FailRequest {
        operation_id: owner.operation_id.clone(),
        fence: owner.fence,
        disposition: proto::FailDisposition::Retryable.into(),
        error: Some(proto::OperationError {
            code: "timeout".into(),
            ..Default::default()
        }),
        retry_after: millis(50),
    };
    let original = client
        .fail(authorized(token, fail.clone()))
        .await
        .expect("fail")
        .into_inner();
    assert_eq!(original.state(), proto::OperationState::RetryWait);
    tokio::time::sleep(std::time::Duration::from_millis(80)).await;
    let retry = client
        .claim(authorized(token, claim("retried")))
        .await
        .expect("claim")
        .into_inner();
    assert_eq!(outcome_name(&retry), "acquired");
    let resent = client
        .fail(authorized(token, fail))
        .await
        .expect("the original OK")
        .into_inner();
    assert_eq!(resent.state(), proto::OperationState::RetryWait);
    assert!(resent.retry_after.is_some(), "{resent:?}");

    // Reconcile NOT_APPLIED, then a new owner with a new fence: the re-sent
    // Reconcile still hears the fence it took.
    let stalled = client
        .claim(authorized(
            token,
            proto::ClaimRequest {
                lease: millis(50),
                max_attempt_duration: millis(100),
                ..claim("reconciled")
            },
        ))
        .await
        .expect("claim")
        .into_inner();
    let stalled = ownership(&stalled).expect("acquired").clone();
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    let reconcile = proto::ReconcileRequest {
        tenant: String::new(),
        operation_id: stalled.operation_id.clone(),
        expected_fence: stalled.fence,
        resolution: Some(proto::reconcile_request::Resolution::NotApplied(
            proto::NotApplied {},
        )),
    };
    let reconciled = client
        .reconcile(authorized(token, reconcile.clone()))
        .await
        .expect("reconcile")
        .into_inner();
    let next_owner = client
        .claim(authorized(token, claim("reconciled")))
        .await
        .expect("claim")
        .into_inner();
    let next_owner = ownership(&next_owner).expect("acquired").clone();
    assert!(next_owner.fence > reconciled.fence);
    let resent = client
        .reconcile(authorized(token, reconcile))
        .await
        .expect("the original OK")
        .into_inner();
    assert_eq!(
        (resent.state(), resent.fence),
        (proto::OperationState::RetryWait, reconciled.fence)
    );

    // Complete, then the result expires into a tombstone: the re-sent
    // Complete still hears SUCCEEDED.
    let done = client
        .claim(authorized(token, claim("expired")))
        .await
        .expect("claim")
        .into_inner();
    let done = ownership(&done).expect("acquired").clone();
    let complete = proto::CompleteRequest {
        operation_id: done.operation_id.clone(),
        fence: done.fence,
        result: result("ok"),
    };
    client
        .complete(authorized(token, complete.clone()))
        .await
        .expect("complete");
    world.backend.age_retention().await;
    world
        .store
        .sweep(100, sweep_policy(chrono::TimeDelta::hours(1)))
        .await
        .expect("sweep");
    let resent = client
        .complete(authorized(token, complete))
        .await
        .expect("the original OK")
        .into_inner();
    assert_eq!(resent.state(), proto::OperationState::Succeeded);
}

fn fail_retryable(owner: &proto::Ownership) -> proto::FailRequest {
    proto::FailRequest {
        operation_id: owner.operation_id.clone(),
        fence: owner.fence,
        disposition: proto::FailDisposition::Retryable.into(),
        error: Some(proto::OperationError {
            code: "timeout".into(),
            ..Default::default()
        }),
        retry_after: millis(10),
    }
}

/// Issue 17, item 7, as the proto states it: one receipt is kept per
/// operation. Until a later write is recorded, a re-sent write gets its
/// original answer; after one, it is a stale write (LEASE_LOST), and the
/// client looks the operation up.
async fn a_resent_write_after_a_later_write_is_lease_lost_as_the_proto_says(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let claim = || claim_json("payments.charge", "k", "{}");
    let first = client
        .claim(authorized(token, claim()))
        .await
        .expect("claim")
        .into_inner();
    let owner_a = ownership(&first).expect("acquired").clone();
    client
        .fail(authorized(token, fail_retryable(&owner_a)))
        .await
        .expect("fail");
    tokio::time::sleep(std::time::Duration::from_millis(40)).await;
    let retry = client
        .claim(authorized(token, claim()))
        .await
        .expect("claim")
        .into_inner();
    let owner_b = ownership(&retry).expect("acquired").clone();

    // No later write yet: the original answer.
    let resent = client
        .fail(authorized(token, fail_retryable(&owner_a)))
        .await
        .expect("the original answer")
        .into_inner();
    assert_eq!(resent.state(), proto::OperationState::RetryWait);

    // B completes: A's receipt is gone, and A's re-send is stale.
    client
        .complete(authorized(
            token,
            proto::CompleteRequest {
                operation_id: owner_b.operation_id.clone(),
                fence: owner_b.fence,
                result: result("ok"),
            },
        ))
        .await
        .expect("complete");
    let stale = client
        .fail(authorized(token, fail_retryable(&owner_a)))
        .await
        .expect_err("a later write was recorded");
    assert_status(&stale, Code::Aborted, "LEASE_LOST");
    let (_, metadata) = error_info(&stale);
    assert_eq!(
        metadata.get("current_fence"),
        Some(&owner_b.fence.to_string())
    );
    assert_eq!(metadata.get("state").map(String::as_str), Some("SUCCEEDED"));
}

/// Issue 17, item 9: a binary from before the receipt's answer columns
/// updates the receipt and leaves the answer another write left. Read as
/// the new receipt's answer, a re-sent Complete would hear RETRY_WAIT, where
/// the proto promises SUCCEEDED.
async fn a_receipt_answer_left_by_another_write_is_not_trusted(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let claim = || claim_json("payments.charge", "k", "{}");
    let first = client
        .claim(authorized(token, claim()))
        .await
        .expect("claim")
        .into_inner();
    let owner_a = ownership(&first).expect("acquired").clone();
    client
        .fail(authorized(token, fail_retryable(&owner_a)))
        .await
        .expect("fail");
    tokio::time::sleep(std::time::Duration::from_millis(40)).await;
    let retry = client
        .claim(authorized(token, claim()))
        .await
        .expect("claim")
        .into_inner();
    let owner_b = ownership(&retry).expect("acquired").clone();
    let complete = proto::CompleteRequest {
        operation_id: owner_b.operation_id.clone(),
        fence: owner_b.fence,
        result: result("ok"),
    };
    client
        .complete(authorized(token, complete.clone()))
        .await
        .expect("complete");
    // As the older binary would have left it: B's receipt, A's answer.
    let older_binary: &'static str = Box::leak(
        format!(
            "UPDATE operations SET last_write_state = 'retry_wait', \
             last_write_answer_fence = {}",
            owner_a.fence
        )
        .into_boxed_str(),
    );
    assert_eq!(world.backend.execute(older_binary).await, 1);

    let resent = client
        .complete(authorized(token, complete))
        .await
        .expect("the original OK")
        .into_inner();
    assert_eq!(resent.state(), proto::OperationState::Succeeded);
}
