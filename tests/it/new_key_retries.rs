//! The guard against a new idempotency key per retry (issue 23, item 2):
//! the same request under many new keys, within the window, is counted in
//! `idemd_suspected_new_key_retries_total` and shown by Lookup; retries
//! under one key are not. Through the real binary and its flags, on each
//! store.

use std::collections::HashMap;

use idemd::proto;

use crate::harness::*;
use crate::ops::{ops, succeeded};

store_tests!(ten_retries_with_fresh_keys_are_flagged_and_ten_with_one_key_are_not,);

const CHARGE: &str = r#"{"amount": 1200, "currency": "EUR", "customer": "c-17"}"#;

fn suspected(metrics: &HashMap<String, f64>) -> f64 {
    metrics
        .iter()
        .filter(|(series, _)| series.starts_with("idemd_suspected_new_key_retries_total{"))
        .map(|(_, value)| value)
        .sum()
}

async fn ten_retries_with_fresh_keys_are_flagged_and_ten_with_one_key_are_not(backend: Backend) {
    let data = backend.into_process_data().await;
    let token = data.create_tenant("retrying");
    let metrics_port = free_port();
    let server = data
        .serve_with(
            &[],
            &[
                ("IDEMD_METRICS_LISTEN", format!("127.0.0.1:{metrics_port}")),
                ("IDEMD_NEW_KEY_RETRY_WINDOW", "60s".to_owned()),
                ("IDEMD_NEW_KEY_RETRY_THRESHOLD", "3".to_owned()),
            ],
        )
        .await;
    let mut client = server.client().await;

    // A caller that retries a timed-out charge ten times under one key: one
    // operation, retries answered Pending; nothing suspected.
    let first = claim_owned(
        &mut client,
        &token,
        claim_json("payments.charge", "intent-1", CHARGE),
    )
    .await;
    for _ in 0..9 {
        let retry = client
            .claim(authorized(
                &token,
                claim_json("payments.charge", "intent-1", CHARGE),
            ))
            .await
            .expect("claim")
            .into_inner();
        assert_eq!(outcome_name(&retry), "pending");
    }
    let one_key = operation_by_id(&mut client, &token, &first.operation_id).await;
    assert_eq!(
        (one_key.same_request_keys, one_key.suspected_new_key_retry),
        (1, false)
    );
    assert_eq!(suspected(&samples(&server.scrape(metrics_port).await)), 0.0);

    // A caller that makes a new key for each of ten retries of another
    // charge: ten operations with one request; from the third on, suspected.
    let other = CHARGE.replace("c-17", "c-18");
    let mut operations = Vec::new();
    for retry in 0..10 {
        let owned = claim_owned(
            &mut client,
            &token,
            claim_json("payments.charge", &format!("attempt-{retry}"), &other),
        )
        .await;
        operations.push(owned.operation_id);
    }
    let last = operation_by_id(&mut client, &token, &operations[9]).await;
    assert_eq!(
        (last.same_request_keys, last.suspected_new_key_retry),
        (10, true)
    );
    assert_eq!(suspected(&samples(&server.scrape(metrics_port).await)), 8.0);
    // The first charge is still not suspected: other requests do not add up.
    let one_key = operation_by_id(&mut client, &token, &first.operation_id).await;
    assert!(!one_key.suspected_new_key_retry);

    // Diagnose flags it, and not the retries under one key.
    let diagnosis = |operation_id: &str| proto::DiagnoseRequest {
        target: Some(proto::diagnose_request::Target::OperationId(
            operation_id.to_owned(),
        )),
        evidence: Some(proto::DiagnoseEvidence {
            symptom: proto::Symptom::TimeoutBeforeResponse.into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let flagged = client
        .diagnose(authorized(&token, diagnosis(&operations[9])))
        .await
        .expect("diagnose")
        .into_inner();
    let cause = |response: &proto::DiagnoseResponse| {
        response
            .diagnosis
            .as_ref()
            .map(proto::Diagnosis::cause)
            .unwrap_or_default()
    };
    assert_eq!(cause(&flagged), proto::Cause::NewKeyPerRetry, "{flagged:?}");
    let one_key_diagnosis = client
        .diagnose(authorized(&token, diagnosis(&first.operation_id)))
        .await
        .expect("diagnose")
        .into_inner();
    assert_ne!(cause(&one_key_diagnosis), proto::Cause::NewKeyPerRetry);

    // `idemd ops show` says so to support staff.
    let shown = succeeded(&ops(&data, &server, &token, &["show", &operations[9]]));
    assert!(
        shown.contains("10 operations with this same request lately")
            && shown.contains("new idempotency key per retry"),
        "{shown}"
    );
}
