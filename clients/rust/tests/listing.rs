//! `Client::list_operations` against the real `idemd` binary, on both
//! stores: a filter names exactly its operations, pages return each once,
//! and a filter that does not parse is refused naming the field.

mod support;

use std::collections::BTreeSet;

use idemd_client::{Error, proto};
use support::*;

async fn claim(client: &idemd_client::Client, operation: &str, key: &str) -> String {
    let response = client
        .claim(claim_json(operation, key, r#"{"amount":1}"#))
        .await
        .expect("claim");
    match response.outcome {
        Some(proto::claim_response::Outcome::Acquired(acquired)) => {
            acquired.ownership.expect("ownership").operation_id
        }
        other => panic!("acquired expected, got {other:?}"),
    }
}

both_stores!(a_filter_names_exactly_its_operations_page_by_page);

async fn a_filter_names_exactly_its_operations_page_by_page(store: Store) {
    let world = World::start(store).await;
    let client = world.client().await;
    let mut charges = BTreeSet::new();
    for key in ["a", "b", "c"] {
        charges.insert(claim(&client, "payments.charge", key).await);
    }
    claim(&client, "orders.create", "d").await;

    let mut seen = BTreeSet::new();
    let mut pages = 0;
    let mut page_token = String::new();
    loop {
        let page = client
            .list_operations(proto::ListOperationsRequest {
                filter: "op:payments.* state:in_progress".into(),
                page_size: 1,
                page_token: page_token.clone(),
                order: proto::list_operations_request::Order::OldestFirst.into(),
            })
            .await
            .expect("a page");
        pages += 1;
        for operation in page.operations {
            assert!(
                seen.insert(operation.operation_id.clone()),
                "listed twice: {operation:?}"
            );
        }
        if page.next_page_token.is_empty() {
            break;
        }
        page_token = page.next_page_token;
    }
    assert_eq!(seen, charges);
    assert!(pages >= 3, "{pages} pages of one");

    let refused = client
        .list_operations(proto::ListOperationsRequest {
            filter: "state:nonsense".into(),
            ..Default::default()
        })
        .await;
    match refused {
        Err(Error::InvalidArgument {
            field_violations, ..
        }) => assert!(
            field_violations
                .iter()
                .any(|violation| violation.field == "filter"),
            "{field_violations:?}"
        ),
        other => panic!("INVALID_ARGUMENT on the filter expected, got {other:?}"),
    }
    world.finish().await;
}
