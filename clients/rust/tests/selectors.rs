//! Request selectors (docs/api.md, "Request selectors"): every shared vector
//! in testdata/selectors.json and every json vector of
//! testdata/fingerprints.json (the copied I-JSON rules), and
//! `Payload::selected_json` through `Client::execute_once` against the real
//! `idemd` binary on both stores: a change outside the selection replays, one
//! inside it conflicts. Effects are counted at the provider.

mod support;

use std::time::Duration;

use idemd_client::{Disposition, Error, Operation, Payload, Selector, SelectorError, Source};
use serde_json::Value;
use support::*;

fn shared(file: &str) -> Vec<Value> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("the shared vectors");
    let document: Value = serde_json::from_str(&text).expect("JSON");
    document["vectors"].as_array().expect("vectors").clone()
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[test]
fn every_shared_selector_vector() {
    let vectors = shared("selectors.json");
    assert!(vectors.len() >= 40, "{} vectors", vectors.len());
    for vector in vectors {
        let name = vector["name"].as_str().expect("name");
        let fields = &vector["selector"];
        let built = Selector::builder()
            .include(strings(&fields["include"]))
            .exclude(strings(&fields["exclude"]))
            .headers(strings(&fields["headers"]))
            .build();
        if vector["refused_at"] == "selector" {
            assert!(built.is_err(), "{name}: accepted");
            continue;
        }
        let selector = built.unwrap_or_else(|error| panic!("{name}: {error}"));
        let pairs: Vec<(String, String)> = vector["headers"]
            .as_array()
            .map(|pairs| {
                pairs
                    .iter()
                    .map(|pair| {
                        let pair = strings(pair);
                        (pair[0].clone(), pair[1].clone())
                    })
                    .collect()
            })
            .unwrap_or_default();
        let headers: Vec<(&str, &str)> = pairs
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        let body = vector["body"].as_str().expect("body");
        let canonical = selector.canonical(body, &headers);
        if vector["refused_at"] == "request" {
            assert!(
                matches!(canonical, Err(Error::InvalidArgument { .. })),
                "{name}: {canonical:?}"
            );
            continue;
        }
        let canonical = canonical.unwrap_or_else(|error| panic!("{name}: {error:?}"));
        assert_eq!(
            String::from_utf8_lossy(&canonical),
            vector["canonical"].as_str().expect("canonical"),
            "{name}"
        );
        let fingerprint = selector.fingerprint(body, &headers).expect("fingerprint");
        assert_eq!(
            hex(&fingerprint),
            vector["fingerprint"].as_str().expect("fingerprint"),
            "{name}"
        );
    }
}

#[test]
fn every_shared_json_fingerprint_vector_through_the_empty_selector() {
    let empty = Selector::builder().build().expect("empty");
    assert!(empty.is_empty());
    let mut checked = 0;
    for vector in shared("fingerprints.json") {
        if vector["mode"] != "json" {
            continue;
        }
        let name = vector["name"].as_str().expect("name");
        let input = vector["input"].as_str().expect("input");
        let fingerprint = empty.fingerprint(input, &[]);
        if vector.get("refused").is_some() {
            assert!(
                matches!(fingerprint, Err(Error::InvalidArgument { .. })),
                "{name}: accepted"
            );
        } else {
            let fingerprint = fingerprint.unwrap_or_else(|error| panic!("{name}: {error:?}"));
            assert_eq!(
                hex(&fingerprint),
                vector["fingerprint"].as_str().expect("fingerprint"),
                "{name}"
            );
        }
        checked += 1;
    }
    assert!(checked >= 60, "{checked} vectors");
}

#[test]
fn selector_errors_name_the_reason() {
    let refused = Selector::builder().include(["/a", "/a"]).build();
    assert_eq!(
        refused,
        Err(SelectorError::DuplicatePointer {
            list: "include",
            pointer: "/a".into()
        })
    );
    let empty = Selector::builder().build().expect("empty");
    assert_eq!(
        Payload::selected_json("{}", &empty),
        Ok(Payload::Json("{}".into()))
    );
}

fn charge(key: &str, payload: Payload) -> Operation {
    Operation {
        lease: Duration::from_secs(3),
        deadline: Duration::from_secs(30),
        ..Operation::new("payments.charge", key, payload)
    }
}

both_stores!(a_selector_replays_changes_outside_it_and_refuses_changes_inside);

async fn a_selector_replays_changes_outside_it_and_refuses_changes_inside(store: Store) {
    let world = World::start(store).await;
    let client = world.client().await;
    let provider = Provider::default();
    let selector = Selector::builder()
        .include(["/amount", "/currency"])
        .build()
        .expect("a selector");
    let payload = |document: &str| Payload::selected_json(document, &selector).expect("an object");
    let effect = |context: idemd_client::EffectContext| {
        let provider = provider.clone();
        async move { Disposition::Success(result(provider.perform(context.operation_id()))) }
    };
    let first = client
        .execute_once(
            &charge(
                "charge-1",
                payload(r#"{"amount":1000,"currency":"EUR","trace":"a"}"#),
            ),
            effect,
        )
        .await
        .expect("executed");
    let outside = client
        .execute_once(
            &charge(
                "charge-1",
                payload(r#"{"trace":"b","currency":"EUR","amount":1000}"#),
            ),
            effect,
        )
        .await
        .expect("replayed");
    assert_eq!(outside.operation_id, first.operation_id);
    assert_eq!(outside.source, Source::Replayed);
    assert_eq!(outside.outcome, first.outcome);
    let inside = client
        .execute_once(
            &charge(
                "charge-1",
                payload(r#"{"amount":1001,"currency":"EUR","trace":"a"}"#),
            ),
            effect,
        )
        .await;
    assert_eq!(
        inside,
        Err(Error::Conflict {
            operation_id: first.operation_id.clone()
        })
    );
    assert!(matches!(
        Payload::selected_json("[1]", &selector),
        Err(Error::InvalidArgument { .. })
    ));
    assert_eq!(provider.total(), 1);
    world.finish().await;
}
