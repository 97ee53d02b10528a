//! History per operation: how entries coalesce, and Lookup's view of them.

use idemd::proto;
use tonic::Code;

use crate::harness::*;

/// Claims a new scope and returns its owner.
async fn claim(client: &mut Client, token: &str, key: &str) -> proto::Ownership {
    let claimed = client
        .claim(authorized(
            token,
            claim_json("payments.charge", key, r#"{"amount":1}"#),
        ))
        .await
        .expect("claim")
        .into_inner();
    ownership(&claimed).expect("acquired").clone()
}

async fn renew(
    client: &mut Client,
    token: &str,
    operation_id: &str,
    fence: u64,
) -> Result<proto::RenewResponse, tonic::Status> {
    client
        .renew(authorized(
            token,
            proto::RenewRequest {
                operation_id: operation_id.into(),
                fence,
                lease: None,
            },
        ))
        .await
        .map(tonic::Response::into_inner)
}

async fn complete(
    client: &mut Client,
    token: &str,
    operation_id: &str,
    fence: u64,
) -> Result<proto::CompleteResponse, tonic::Status> {
    client
        .complete(authorized(
            token,
            proto::CompleteRequest {
                operation_id: operation_id.into(),
                fence,
                result: result(r#"{"charge":"ch_1"}"#),
            },
        ))
        .await
        .map(tonic::Response::into_inner)
}

/// Moves the fence sequence to 5000, so that the next owner's fence has
/// many earlier (stale) fences below it.
async fn skip_fences(backend: &Backend) {
    let statement = match backend {
        Backend::Postgres { .. } => "SELECT setval('operation_fence', 5000)",
        Backend::Sqlite { .. } => {
            "UPDATE operation_fence SET last_fence = 5000 WHERE singleton = 1"
        }
    };
    backend.execute(statement).await;
}

async fn a_thousand_renewals_of_one_owner_are_one_entry(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let owner = claim(&mut client, token, "renewed").await;

    for _ in 0..1000 {
        renew(&mut client, token, &owner.operation_id, owner.fence)
            .await
            .expect("renewed");
    }
    complete(&mut client, token, &owner.operation_id, owner.fence)
        .await
        .expect("completed");

    let history = history(&mut client, token, &owner.operation_id).await;
    assert_eq!(events(&history), ["CLAIMED", "RENEWED", "COMPLETED"]);
    let renewed = &history[1];
    assert_eq!(renewed.count, 1000);
    assert_eq!(
        (renewed.fence, renewed.last_fence),
        (owner.fence, owner.fence)
    );
    let (first, last) = (
        renewed.at.expect("at"),
        renewed.last_at.expect("last_at"),
    );
    assert!(
        (first.seconds, first.nanos) < (last.seconds, last.nanos),
        "first and last renewal: {first:?} {last:?}"
    );
    assert_eq!(
        history
            .iter()
            .map(|entry| entry.sequence)
            .collect::<Vec<_>>(),
        [1, 2, 3]
    );
}

async fn a_thousand_stale_writes_with_as_many_fences_are_one_entry_per_rpc(backend: Backend) {
    skip_fences(&backend).await;
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let owner = claim(&mut client, token, "stale").await;
    assert!(
        owner.fence > 2002,
        "fences 1..=2002 are stale: {}",
        owner.fence
    );

    for stale_fence in 1..=1000 {
        let refused = renew(&mut client, token, &owner.operation_id, stale_fence)
            .await
            .expect_err("stale");
        assert_status(&refused, Code::Aborted, "LEASE_LOST");
    }
    for stale_fence in 2000..=2002 {
        let refused = complete(&mut client, token, &owner.operation_id, stale_fence)
            .await
            .expect_err("stale");
        assert_status(&refused, Code::Aborted, "LEASE_LOST");
    }

    let history = history(&mut client, token, &owner.operation_id).await;
    assert_eq!(
        events(&history),
        ["CLAIMED", "STALE_WRITE_REFUSED", "STALE_WRITE_REFUSED"]
    );
    let renewals = &history[1];
    assert_eq!(
        (
            renewals.detail.as_str(),
            renewals.count,
            renewals.fence,
            renewals.last_fence
        ),
        ("renew", 1000, 1, 1000)
    );
    let completions = &history[2];
    assert_eq!(
        (
            completions.detail.as_str(),
            completions.count,
            completions.fence,
            completions.last_fence
        ),
        ("complete", 3, 2000, 2002)
    );
    assert_eq!(history[0].last_fence, owner.fence, "an entry of its own");
}

store_tests!(
    a_thousand_renewals_of_one_owner_are_one_entry,
    a_thousand_stale_writes_with_as_many_fences_are_one_entry_per_rpc,
);
