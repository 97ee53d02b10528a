//! ListOperations (issue 20): the filter language against real stores, on
//! a seeded set of operations in every state that matters (live, succeeded,
//! failed, unknown by Fail UNKNOWN, unknown by an expired attempt, taken
//! over) and another tenant's; paging in both orders; tokens bound to their
//! filter; what a non-admin and an admin credential see; the scope and the
//! refusal of a malformed filter; and one call over Connect JSON.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use idemd::proto;
use idemd::proto::list_operations_request::Order;
use serde_json::json;
use tonic::Code;

use crate::harness::*;

store_tests!(
    each_filter_finds_exactly_its_operations,
    pages_of_two_return_every_match_once_in_either_order,
    a_token_made_for_another_filter_or_order_is_refused,
    an_admin_lists_every_tenant_by_name_and_may_narrow_to_one,
    a_non_admin_sees_only_its_tenant_and_may_not_name_one,
    an_operations_credential_may_not_list,
    a_malformed_filter_is_refused_naming_the_position,
    connect_json_lists_with_a_filter,
);

/// The seeded operations of tenant-a, by key, and what they hold.
struct Seeded {
    world: World,
    /// operation_id by key.
    ids: HashMap<&'static str, String>,
    /// The admin credential of tenant-a (scope `admin` only).
    admin: String,
    /// An operations-only credential of tenant-a.
    operations_only: String,
}

const TENANT_A_KEYS: [&str; 6] = [
    "claimed",
    "completed",
    "failed",
    "unknown-by-fail",
    "expired attempt",
    "taken-over",
];

fn fail(owned: &proto::Ownership, disposition: proto::FailDisposition) -> proto::FailRequest {
    proto::FailRequest {
        operation_id: owned.operation_id.clone(),
        fence: owned.fence,
        disposition: disposition.into(),
        error: Some(proto::OperationError {
            code: "declined".into(),
            ..Default::default()
        }),
        retry_after: None,
    }
}

/// Six operations of tenant-a, one of tenant-b, in this order (so created_at
/// order is the order of TENANT_A_KEYS).
async fn seed(backend: Backend) -> Seeded {
    let world = World::start(backend).await;
    let token = world.tenant_a.clone();
    let mut client = world.client().await;
    let mut ids = HashMap::new();
    let short = |operation: &str, key: &str| proto::ClaimRequest {
        lease: millis(50),
        max_attempt_duration: millis(50),
        ..claim_json(operation, key, "{}")
    };

    let claimed = claim_owned(
        &mut client,
        &token,
        claim_json("payments.charge", "claimed", "{}"),
    )
    .await;
    ids.insert("claimed", claimed.operation_id);

    let completed = claim_owned(
        &mut client,
        &token,
        claim_json("payments.charge", "completed", "{}"),
    )
    .await;
    client
        .complete(authorized(
            &token,
            proto::CompleteRequest {
                operation_id: completed.operation_id.clone(),
                fence: completed.fence,
                result: result("{}"),
            },
        ))
        .await
        .expect("complete");
    ids.insert("completed", completed.operation_id);

    let failed = claim_owned(
        &mut client,
        &token,
        claim_json("payments.refund", "failed", "{}"),
    )
    .await;
    client
        .fail(authorized(
            &token,
            fail(&failed, proto::FailDisposition::Terminal),
        ))
        .await
        .expect("fail terminal");
    ids.insert("failed", failed.operation_id);

    let unknown = claim_owned(
        &mut client,
        &token,
        claim_json("payments.refund", "unknown-by-fail", "{}"),
    )
    .await;
    client
        .fail(authorized(
            &token,
            fail(&unknown, proto::FailDisposition::Unknown),
        ))
        .await
        .expect("fail unknown");
    ids.insert("unknown-by-fail", unknown.operation_id);

    let stalled = claim_owned(
        &mut client,
        &token,
        short("orders.create", "expired attempt"),
    )
    .await;
    ids.insert("expired attempt", stalled.operation_id);
    // A short lease but a long attempt (the attempt's length is fixed by the
    // first Claim): its takeover below gets a live lease, not a dead one.
    let replaced = claim_owned(
        &mut client,
        &token,
        proto::ClaimRequest {
            max_attempt_duration: millis(60_000),
            ..short("orders.create", "taken-over")
        },
    )
    .await;
    ids.insert("taken-over", replaced.operation_id.clone());

    claim_owned(
        &mut client,
        &world.tenant_b,
        claim_json("payments.charge", "claimed", "{}"),
    )
    .await;

    // Both short leases run out (and the first one's attempt deadline); then
    // the second is taken over by a new attempt with a live lease.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let taken = client
        .claim(authorized(
            &token,
            claim_json("orders.create", "taken-over", "{}"),
        ))
        .await
        .expect("takeover")
        .into_inner();
    assert_eq!(outcome_name(&taken), "reconcile_first", "{taken:?}");
    assert_eq!(
        ownership(&taken).expect("owned").operation_id,
        replaced.operation_id
    );

    let admin = add_token(world.store.as_ref(), "tenant-a", "operator", "admin").await;
    let operations_only =
        add_token(world.store.as_ref(), "tenant-a", "payments", "operations").await;
    Seeded {
        world,
        ids,
        admin,
        operations_only,
    }
}

fn request(
    filter: &str,
    page_size: u32,
    page_token: &str,
    order: Order,
) -> proto::ListOperationsRequest {
    proto::ListOperationsRequest {
        filter: filter.into(),
        page_size,
        page_token: page_token.into(),
        order: order.into(),
    }
}

async fn list(
    client: &mut Client,
    token: &str,
    message: proto::ListOperationsRequest,
) -> Result<proto::ListOperationsResponse, tonic::Status> {
    client
        .list_operations(authorized(token, message))
        .await
        .map(tonic::Response::into_inner)
}

fn keys(operations: &[proto::Operation]) -> Vec<String> {
    operations
        .iter()
        .map(|operation| operation.scope.as_ref().expect("a scope").key.clone())
        .collect()
}

async fn each_filter_finds_exactly_its_operations(backend: Backend) {
    let seeded = seed(backend).await;
    let mut client = seeded.world.client().await;
    let token = &seeded.world.tenant_a;
    let failed_id = &seeded.ids["failed"];
    let by_id = format!("id:{failed_id}");
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("", TENANT_A_KEYS.to_vec()),
        (
            "state:unresolved",
            vec!["unknown-by-fail", "expired attempt"],
        ),
        (
            "state:in_progress",
            vec!["claimed", "expired attempt", "taken-over"],
        ),
        ("state:unknown", vec!["unknown-by-fail"]),
        ("state:succeeded,failed", vec!["completed", "failed"]),
        ("state:succeeded state:failed", vec!["completed", "failed"]),
        (
            "state:unresolved,succeeded",
            vec!["completed", "unknown-by-fail", "expired attempt"],
        ),
        ("state:retry_wait", vec![]),
        ("state:expired", vec![]),
        (
            "op:payments.*",
            vec!["claimed", "completed", "failed", "unknown-by-fail"],
        ),
        ("op:payments.refund", vec!["failed", "unknown-by-fail"]),
        ("op:payments", vec![]),
        ("op:orders.create", vec!["expired attempt", "taken-over"]),
        (
            "op:payments.refund state:unresolved",
            vec!["unknown-by-fail"],
        ),
        (r#"key:"expired attempt""#, vec!["expired attempt"]),
        ("key:claimed", vec!["claimed"]),
        (&by_id, vec!["failed"]),
        ("attempts>=2", vec!["taken-over"]),
        ("attempts>1", vec!["taken-over"]),
        (
            "attempts:1",
            vec![
                "claimed",
                "completed",
                "failed",
                "unknown-by-fail",
                "expired attempt",
            ],
        ),
        ("attempts<1", vec![]),
        ("attempts<=1 op:orders.*", vec!["expired attempt"]),
        ("is:taken_over", vec!["taken-over"]),
        ("is:deadline_passed", vec!["expired attempt"]),
        ("is:deadline_passed is:taken_over", vec![]),
        ("age<1h", TENANT_A_KEYS.to_vec()),
        ("age>=0s", TENANT_A_KEYS.to_vec()),
        ("age>1h", vec![]),
        (
            "age<=1d op:orders.* state:unresolved",
            vec!["expired attempt"],
        ),
    ];
    for (filter, expected) in cases {
        let page = list(
            &mut client,
            token,
            request(filter, 100, "", Order::Unspecified),
        )
        .await
        .unwrap_or_else(|status| panic!("{filter:?}: {status:?}"));
        assert_eq!(keys(&page.operations), expected, "{filter:?}");
        assert!(page.next_page_token.is_empty(), "{filter:?}");
        for operation in &page.operations {
            assert!(operation.result.is_none(), "no result bytes: {filter:?}");
            assert_eq!(operation.tenant, "", "a non-admin is not told the tenant");
        }
    }
}

async fn pages_of_two_return_every_match_once_in_either_order(backend: Backend) {
    let seeded = seed(backend).await;
    let mut client = seeded.world.client().await;
    let token = &seeded.world.tenant_a;
    for (order, expected) in [
        (Order::OldestFirst, TENANT_A_KEYS.to_vec()),
        (Order::Unspecified, TENANT_A_KEYS.to_vec()),
        (
            Order::NewestFirst,
            TENANT_A_KEYS.iter().rev().copied().collect(),
        ),
    ] {
        for (filter, wanted) in [
            ("", expected.clone()),
            (
                "state:in_progress",
                expected
                    .iter()
                    .copied()
                    .filter(|key| ["claimed", "expired attempt", "taken-over"].contains(key))
                    .collect::<Vec<_>>(),
            ),
        ] {
            let mut seen = Vec::new();
            let mut page_token = String::new();
            let mut pages = 0;
            loop {
                let page = list(&mut client, token, request(filter, 2, &page_token, order))
                    .await
                    .unwrap_or_else(|status| panic!("{order:?} {filter:?}: {status:?}"));
                assert!(page.operations.len() <= 2);
                seen.extend(keys(&page.operations));
                pages += 1;
                assert!(pages <= 10, "paging never ends");
                if page.next_page_token.is_empty() {
                    break;
                }
                page_token = page.next_page_token;
            }
            assert_eq!(seen, wanted, "{order:?} {filter:?}");
            let distinct: BTreeSet<&String> = seen.iter().collect();
            assert_eq!(distinct.len(), seen.len(), "each match once");
        }
    }
}

async fn a_token_made_for_another_filter_or_order_is_refused(backend: Backend) {
    let seeded = seed(backend).await;
    let mut client = seeded.world.client().await;
    let token = &seeded.world.tenant_a;
    let first = list(
        &mut client,
        token,
        request("op:payments.*", 2, "", Order::OldestFirst),
    )
    .await
    .expect("first page");
    assert!(!first.next_page_token.is_empty());
    let next = &first.next_page_token;
    // The same filter, written otherwise, is the same filter.
    let same = list(
        &mut client,
        token,
        request("  op:payments.*  ", 2, next, Order::Unspecified),
    )
    .await
    .expect("the same canonical filter and order");
    assert_eq!(keys(&same.operations), ["failed", "unknown-by-fail"]);
    for (filter, order) in [
        ("op:payments.refund", Order::OldestFirst),
        ("", Order::OldestFirst),
        ("op:payments.*", Order::NewestFirst),
    ] {
        let refused = list(&mut client, token, request(filter, 2, next, order))
            .await
            .expect_err("a token of another filter or order");
        assert_status(&refused, Code::InvalidArgument, "INVALID_REQUEST");
        assert_eq!(
            violated_fields(&refused),
            ["page_token"],
            "{filter:?} {order:?}"
        );
    }
    // Another tenant's selection: the admin listing every tenant.
    let refused = list(
        &mut client,
        &seeded.admin,
        request("op:payments.*", 2, next, Order::OldestFirst),
    )
    .await
    .expect_err("a token of another tenant selection");
    assert_eq!(violated_fields(&refused), ["page_token"]);
    let refused = list(
        &mut client,
        token,
        request("", 2, "not-a-token", Order::OldestFirst),
    )
    .await
    .expect_err("not a token");
    assert_eq!(violated_fields(&refused), ["page_token"]);
}

async fn an_admin_lists_every_tenant_by_name_and_may_narrow_to_one(backend: Backend) {
    let seeded = seed(backend).await;
    let mut client = seeded.world.client().await;
    let all = list(
        &mut client,
        &seeded.admin,
        request("", 100, "", Order::OldestFirst),
    )
    .await
    .expect("an admin lists");
    let tenants: Vec<(&str, String)> = all
        .operations
        .iter()
        .map(|operation| {
            (
                operation.tenant.as_str(),
                operation.scope.as_ref().expect("scope").key.clone(),
            )
        })
        .collect();
    let mut expected: Vec<(&str, String)> = TENANT_A_KEYS
        .iter()
        .map(|key| ("tenant-a", (*key).to_owned()))
        .collect();
    expected.push(("tenant-b", "claimed".to_owned()));
    assert_eq!(tenants, expected);

    let narrowed = list(
        &mut client,
        &seeded.admin,
        request("tenant:tenant-b", 100, "", Order::OldestFirst),
    )
    .await
    .expect("an admin narrows to a tenant");
    assert_eq!(keys(&narrowed.operations), ["claimed"]);
    assert_eq!(narrowed.operations[0].tenant, "tenant-b");

    let both = list(
        &mut client,
        &seeded.admin,
        request("key:claimed", 100, "", Order::NewestFirst),
    )
    .await
    .expect("a key across tenants");
    let owners: Vec<&str> = both.operations.iter().map(|o| o.tenant.as_str()).collect();
    assert_eq!(owners, ["tenant-b", "tenant-a"]);

    let nobody = list(
        &mut client,
        &seeded.admin,
        request("tenant:nobody", 100, "", Order::OldestFirst),
    )
    .await
    .expect("an unknown tenant is an empty page");
    assert!(nobody.operations.is_empty());
    assert!(nobody.next_page_token.is_empty());

    // Paging across tenants.
    let mut seen = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = list(
            &mut client,
            &seeded.admin,
            request("state:in_progress", 1, &page_token, Order::OldestFirst),
        )
        .await
        .expect("a page");
        seen.extend(
            page.operations
                .iter()
                .map(|o| format!("{}/{}", o.tenant, o.scope.as_ref().expect("scope").key)),
        );
        if page.next_page_token.is_empty() {
            break;
        }
        page_token = page.next_page_token;
    }
    assert_eq!(
        seen,
        [
            "tenant-a/claimed",
            "tenant-a/expired attempt",
            "tenant-a/taken-over",
            "tenant-b/claimed",
        ]
    );
}

async fn a_non_admin_sees_only_its_tenant_and_may_not_name_one(backend: Backend) {
    let seeded = seed(backend).await;
    let mut client = seeded.world.client().await;
    let mine = list(
        &mut client,
        &seeded.world.tenant_b,
        request("", 100, "", Order::OldestFirst),
    )
    .await
    .expect("tenant-b lists its own");
    assert_eq!(keys(&mine.operations), ["claimed"]);
    let tenant_a_ids: BTreeSet<&String> = seeded.ids.values().collect();
    assert!(
        mine.operations
            .iter()
            .all(|operation| !tenant_a_ids.contains(&operation.operation_id))
    );
    // Not even by its id.
    let by_id = format!("id:{}", seeded.ids["completed"]);
    let none = list(
        &mut client,
        &seeded.world.tenant_b,
        request(&by_id, 100, "", Order::OldestFirst),
    )
    .await
    .expect("a filter on another tenant's id");
    assert!(none.operations.is_empty());

    for filter in ["tenant:tenant-a", "state:unknown tenant:tenant-b"] {
        let refused = list(
            &mut client,
            &seeded.world.tenant_b,
            request(filter, 100, "", Order::OldestFirst),
        )
        .await
        .expect_err("a tenant term needs admin");
        assert_status(&refused, Code::PermissionDenied, "MISSING_SCOPE");
        assert_eq!(
            error_info(&refused).1.get("scope").map(String::as_str),
            Some("admin")
        );
    }
}

async fn an_operations_credential_may_not_list(backend: Backend) {
    let seeded = seed(backend).await;
    let mut client = seeded.world.client().await;
    let refused = list(
        &mut client,
        &seeded.operations_only,
        request("", 100, "", Order::OldestFirst),
    )
    .await
    .expect_err("operations alone may not list");
    assert_status(&refused, Code::PermissionDenied, "MISSING_SCOPE");
    assert_eq!(
        error_info(&refused).1.get("scope").map(String::as_str),
        Some("reconcile")
    );
}

async fn a_malformed_filter_is_refused_naming_the_position(backend: Backend) {
    use tonic_types::StatusExt;
    let seeded = seed(backend).await;
    let mut client = seeded.world.client().await;
    for (filter, position, words) in [
        ("sate:unknown", 1, "unknown field `sate`"),
        ("state:unknown age:10m", 18, "`age` takes"),
        ("op:a op:b", 6, "given twice"),
        ("state:done", 7, "bad value for `state`"),
    ] {
        let refused = list(
            &mut client,
            &seeded.world.tenant_a,
            request(filter, 100, "", Order::OldestFirst),
        )
        .await
        .expect_err("a malformed filter");
        assert_status(&refused, Code::InvalidArgument, "INVALID_REQUEST");
        let violations = refused
            .get_details_bad_request()
            .expect("a BadRequest")
            .field_violations;
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert_eq!(violations[0].field, "filter");
        let description = &violations[0].description;
        assert!(
            description.contains(&format!("at character {position}:")),
            "{filter:?}: {description}"
        );
        assert!(description.contains(words), "{filter:?}: {description}");
    }
    let refused = list(
        &mut client,
        &seeded.world.tenant_a,
        proto::ListOperationsRequest {
            order: 7,
            ..request("", 100, "", Order::OldestFirst)
        },
    )
    .await
    .expect_err("an unknown order");
    assert_eq!(violated_fields(&refused), ["order"]);
}

async fn connect_json_lists_with_a_filter(backend: Backend) {
    use crate::connect::call as post;
    let seeded = seed(backend).await;
    let addr = seeded.world.server.addr;
    let answer = post(
        addr,
        "ListOperations",
        Some(&seeded.admin),
        json!({ "filter": "state:unresolved", "pageSize": 1, "order": "ORDER_NEWEST_FIRST" }),
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let operations = answer.body["operations"].as_array().expect("operations");
    assert_eq!(operations.len(), 1, "{}", answer.body);
    assert_eq!(operations[0]["scope"]["key"], "expired attempt");
    assert_eq!(operations[0]["tenant"], "tenant-a");
    let next = answer.body["nextPageToken"].as_str().expect("a next page");
    let answer = post(
        addr,
        "ListOperations",
        Some(&seeded.admin),
        json!({ "filter": "state:unresolved", "pageSize": 1, "pageToken": next,
                "order": "ORDER_NEWEST_FIRST" }),
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(
        answer.body["operations"][0]["scope"]["key"],
        "unknown-by-fail"
    );

    let refused = post(
        addr,
        "ListOperations",
        Some(&seeded.world.tenant_a),
        json!({ "filter": "bogus" }),
    )
    .await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert_eq!(refused.body["code"], "invalid_argument");
}
