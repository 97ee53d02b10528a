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
    let (first, last) = (renewed.at.expect("at"), renewed.last_at.expect("last_at"));
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

async fn past_the_cap_entries_are_counted_into_a_truncation_entry_and_the_end_is_kept(
    backend: Backend,
) {
    skip_fences(&backend).await;
    let world = World::start(backend.with_history_cap(10)).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let owner = claim(&mut client, token, "capped").await;
    let operation_id = owner.operation_id.as_str();

    // Alternating refusals never coalesce with the entry before them.
    let mut stale_fence = 0;
    for _ in 0..20 {
        stale_fence += 1;
        renew(&mut client, token, operation_id, stale_fence)
            .await
            .expect_err("stale");
        stale_fence += 1;
        complete(&mut client, token, operation_id, stale_fence)
            .await
            .expect_err("stale");
    }
    renew(&mut client, token, operation_id, owner.fence)
        .await
        .expect("the owner renews");
    complete(&mut client, token, operation_id, owner.fence)
        .await
        .expect("the owner completes");
    for _ in 0..5 {
        stale_fence += 1;
        renew(&mut client, token, operation_id, stale_fence)
            .await
            .expect_err("stale");
    }
    world.backend.age_retention().await;
    let swept = world
        .store
        .sweep(100, sweep_policy(chrono::TimeDelta::days(7)))
        .await
        .expect("sweeps");
    assert_eq!(swept.tombstoned, 1);
    renew(&mut client, token, operation_id, 1)
        .await
        .expect_err("stale");

    let history = history(&mut client, token, operation_id).await;
    let mut expected = vec!["CLAIMED"];
    expected.extend(["STALE_WRITE_REFUSED"; 8]);
    expected.extend([
        "HISTORY_TRUNCATED",
        "COMPLETED",
        "HISTORY_TRUNCATED",
        "EXPIRED",
        "HISTORY_TRUNCATED",
    ]);
    assert_eq!(events(&history), expected);
    assert!(history.len() <= 10 + 4, "the cap, the end and its markers");
    assert_eq!(
        history
            .iter()
            .map(|entry| entry.sequence)
            .collect::<Vec<_>>(),
        (1..=14).collect::<Vec<u64>>()
    );
    assert!(history[1..9].iter().all(|entry| entry.count == 1));
    // 40 refusals and a renewal: 8 have entries, the rest are counted.
    let truncated = &history[9];
    assert_eq!(
        (
            truncated.count,
            truncated.fence,
            truncated.last_fence,
            truncated.attempt
        ),
        (33, 9, owner.fence, 1)
    );
    let first = truncated.at.expect("at");
    let last = truncated.last_at.expect("last_at");
    assert!((first.seconds, first.nanos) < (last.seconds, last.nanos));
    assert_eq!((history[10].fence, history[10].count), (owner.fence, 1));
    assert_eq!(
        (history[11].count, history[11].last_fence),
        (5, stale_fence)
    );
    assert_eq!(
        (history[12].from_state, history[12].to_state),
        (
            proto::OperationState::Succeeded as i32,
            proto::OperationState::Expired as i32
        )
    );
    assert_eq!((history[13].count, history[13].fence), (1, 1));
}

/// A Lookup by id asking for one page of history.
async fn history_page(
    client: &mut Client,
    token: &str,
    operation_id: &str,
    page_size: u32,
    page_token: &str,
) -> Result<proto::LookupResponse, tonic::Status> {
    client
        .lookup(authorized(
            token,
            proto::LookupRequest {
                tenant: String::new(),
                target: Some(proto::lookup_request::Target::OperationId(
                    operation_id.into(),
                )),
                include_history: true,
                history_page_size: page_size,
                history_page_token: page_token.into(),
            },
        ))
        .await
        .map(tonic::Response::into_inner)
}

/// 1 + `refusals` entries: alternating refusals never coalesce.
async fn operation_with_history(
    client: &mut Client,
    token: &str,
    key: &str,
    refusals: u64,
) -> proto::Ownership {
    let owner = claim(client, token, key).await;
    for stale_fence in 1..=refusals {
        let refused = if stale_fence % 2 == 1 {
            renew(
                client,
                token,
                &owner.operation_id,
                owner.fence + stale_fence,
            )
            .await
            .map(|_| ())
        } else {
            complete(
                client,
                token,
                &owner.operation_id,
                owner.fence + stale_fence,
            )
            .await
            .map(|_| ())
        };
        refused.expect_err("stale");
    }
    owner
}

fn assert_invalid_page_token(status: &tonic::Status) {
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    let fields = violated_fields(status);
    assert_eq!(fields, ["history_page_token"]);
}

async fn lookup_pages_through_history_in_order_and_refuses_tampered_tokens(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let owner = operation_with_history(&mut client, token, "paged", 24).await;
    let operation_id = owner.operation_id.as_str();

    let whole = history_page(&mut client, token, operation_id, 1000, "")
        .await
        .expect("one page");
    assert_eq!(whole.history.len(), 25);
    assert_eq!(whole.next_history_page_token, "", "nothing follows");

    let mut concatenated = Vec::new();
    let mut page_sizes = Vec::new();
    let mut page_token = String::new();
    let mut tokens = Vec::new();
    loop {
        let page = history_page(&mut client, token, operation_id, 10, &page_token)
            .await
            .expect("a page");
        page_sizes.push(page.history.len());
        concatenated.extend(page.history);
        if page.next_history_page_token.is_empty() {
            break;
        }
        page_token = page.next_history_page_token;
        tokens.push(page_token.clone());
    }
    assert_eq!(page_sizes, [10, 10, 5]);
    assert_eq!(
        concatenated, whole.history,
        "the pages are the history, in order"
    );

    // A token asks for history by itself; the default page is 100.
    let implied = client
        .lookup(authorized(
            token,
            proto::LookupRequest {
                target: Some(proto::lookup_request::Target::OperationId(
                    operation_id.into(),
                )),
                history_page_token: tokens[0].clone(),
                ..Default::default()
            },
        ))
        .await
        .expect("the next page")
        .into_inner();
    assert_eq!(implied.history, whole.history[10..]);

    // Anything but an unchanged token of this operation is refused.
    let mut edited = tokens[0].clone().into_bytes();
    edited[3] = if edited[3] == b'A' { b'B' } else { b'A' };
    let edited = String::from_utf8(edited).expect("ascii");
    for tampered in [edited, format!("{}A", tokens[0]), tokens[0][1..].to_owned()] {
        let refused = history_page(&mut client, token, operation_id, 10, &tampered)
            .await
            .expect_err("tampered");
        assert_invalid_page_token(&refused);
    }
    let other = claim(&mut client, token, "other").await;
    let refused = history_page(&mut client, token, &other.operation_id, 10, &tokens[0])
        .await
        .expect_err("another operation's token");
    assert_invalid_page_token(&refused);
}

async fn counts_grow_past_32_bits(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let owner = claim(&mut client, token, "counted").await;
    let operation_id = owner.operation_id.as_str();

    // The one-statement path (Renew), as if 2^31 - 1 renewals had been
    // counted already.
    renew(&mut client, token, operation_id, owner.fence)
        .await
        .expect("renewed");
    world
        .backend
        .execute("UPDATE operation_history SET count = 2147483647 WHERE sequence = 2")
        .await;
    for _ in 0..2 {
        renew(&mut client, token, operation_id, owner.fence)
            .await
            .expect("renewed");
    }
    // The locked path (a refusal), likewise.
    renew(&mut client, token, operation_id, owner.fence + 1)
        .await
        .expect_err("stale");
    world
        .backend
        .execute("UPDATE operation_history SET count = 2147483647 WHERE sequence = 3")
        .await;
    for _ in 0..2 {
        renew(&mut client, token, operation_id, owner.fence + 1)
            .await
            .expect_err("stale");
    }

    let history = history(&mut client, token, operation_id).await;
    let counts: Vec<(&str, u64)> = history
        .iter()
        .map(|entry| (entry.event.as_str(), entry.count))
        .collect();
    assert_eq!(
        counts,
        [
            ("CLAIMED", 1),
            ("RENEWED", 2_147_483_649),
            ("STALE_WRITE_REFUSED", 2_147_483_649)
        ]
    );
}

store_tests!(
    a_thousand_renewals_of_one_owner_are_one_entry,
    a_thousand_stale_writes_with_as_many_fences_are_one_entry_per_rpc,
    past_the_cap_entries_are_counted_into_a_truncation_entry_and_the_end_is_kept,
    lookup_pages_through_history_in_order_and_refuses_tampered_tokens,
    counts_grow_past_32_bits,
);
