//! Request input at the edge: payloads bounded before parsing, JSON numbers
//! that must not merge, bounds that clamp rather than refuse, opaque page
//! tokens, and an ErrorInfo reason on every error.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use chrono::{NaiveDate, TimeDelta};
use idemd::domain::{ErrorReason, HistoryEvent, Limits, OperationId};
use idemd::grpc::page_token;
use idemd::proto;
use idemd::proto::claim_request::RequestIdentity;
use tonic::{Code, Request, Status};
use tonic_types::StatusExt;

use crate::harness::*;

fn violated_fields(status: &Status) -> Vec<String> {
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert_eq!(error_info(status).0, "INVALID_REQUEST");
    status
        .get_details_bad_request()
        .expect("BadRequest")
        .field_violations
        .into_iter()
        .map(|violation| violation.field)
        .collect()
}

fn lookup_scope(key: &str) -> proto::LookupRequest {
    proto::LookupRequest {
        target: Some(proto::lookup_request::Target::Scope(
            scope("payments.charge", key).expect("scope"),
        )),
        include_history: false,
        ..Default::default()
    }
}

async fn assert_nothing_stored(client: &mut Client, token: &str, key: &str) {
    let status = client
        .lookup(authorized(token, lookup_scope(key)))
        .await
        .expect_err("nothing was stored");
    assert_status(&status, Code::NotFound, "OPERATION_NOT_FOUND");
}

async fn payloads_above_the_bound_are_refused_before_parsing_and_change_nothing(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let bound = Limits::default().max_payload_bytes;
    assert_eq!(bound, 64 * 1024);

    // One byte over, and not JSON at all: refused for its size alone, which
    // is only possible if the parser never ran.
    let oversized_json = "[".repeat(bound + 1);
    let status = client
        .claim(authorized(
            token,
            claim_json("payments.charge", "large-json", &oversized_json),
        ))
        .await
        .expect_err("too large");
    assert_eq!(violated_fields(&status), ["json_payload"]);
    let description = &status
        .get_details_bad_request()
        .expect("BadRequest")
        .field_violations[0]
        .description;
    assert!(description.contains("65536 bytes"), "{description}");

    let oversized_bytes = proto::ClaimRequest {
        scope: scope("payments.charge", "large-bytes"),
        request_identity: Some(RequestIdentity::BytesPayload(vec![7; bound + 1])),
        ..Default::default()
    };
    let status = client
        .claim(authorized(token, oversized_bytes))
        .await
        .expect_err("too large");
    assert_eq!(violated_fields(&status), ["bytes_payload"]);
    assert_nothing_stored(&mut client, token, "large-json").await;
    assert_nothing_stored(&mut client, token, "large-bytes").await;

    // At the bound exactly, a document is fingerprinted and claimed.
    let padding = "x".repeat(bound - r#"{"note":""}"#.len());
    let at_the_bound = format!(r#"{{"note":"{padding}"}}"#);
    assert_eq!(at_the_bound.len(), bound);
    let claimed = client
        .claim(authorized(
            token,
            claim_json("payments.charge", "at-the-bound", &at_the_bound),
        ))
        .await
        .expect("at the bound")
        .into_inner();
    assert_eq!(outcome_name(&claimed), "acquired");
}

async fn a_float_that_a_double_rounds_to_a_claimed_amount_is_refused_not_replayed(
    backend: Backend,
) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let provider = Provider::default();
    for (key, claimed, other) in [
        (
            "two-to-the-53",
            r#"{"amount":9007199254740992}"#,
            r#"{"amount":9007199254740993.0}"#,
        ),
        (
            "two-to-the-52",
            r#"{"amount":4503599627370496}"#,
            r#"{"amount":4503599627370496.5}"#,
        ),
    ] {
        let first = attempt(
            &mut client,
            token,
            claim_json("payments.charge", key, claimed),
            &provider,
        )
        .await;
        assert_eq!(first, Attempt::Executed);
        // Before the fix, this other amount had the first one's fingerprint
        // and was answered with the first one's result.
        let status = client
            .claim(authorized(token, claim_json("payments.charge", key, other)))
            .await
            .expect_err("another amount is never a replay");
        assert_eq!(violated_fields(&status), ["json_payload"], "{other}");
    }
    assert_eq!(provider.effects(), 2);
}

async fn a_wait_above_the_cap_is_clamped_to_it_not_refused(backend: Backend) {
    let max_wait = Duration::from_millis(300);
    let limits = Limits {
        max_wait: TimeDelta::from_std(max_wait).expect("small"),
        ..test_limits()
    };
    let world = World::start_with(backend, limits).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let request = proto::ClaimRequest {
        lease: millis(60_000),
        ..claim_json("payments.charge", "k", "{}")
    };
    let owner = client
        .claim(authorized(token, request.clone()))
        .await
        .expect("claim")
        .into_inner();
    assert_eq!(outcome_name(&owner), "acquired");

    let started = Instant::now();
    let waited = client
        .claim(authorized(
            token,
            proto::ClaimRequest {
                wait: millis(3_600_000),
                ..request.clone()
            },
        ))
        .await
        .expect("a long wait is clamped, not refused")
        .into_inner();
    let elapsed = started.elapsed();
    assert_eq!(outcome_name(&waited), "pending");
    assert!(
        elapsed >= max_wait - Duration::from_millis(50) && elapsed < Duration::from_secs(10),
        "waited {elapsed:?} for a cap of {max_wait:?}"
    );

    let negative = client
        .claim(authorized(
            token,
            proto::ClaimRequest {
                wait: Some(pbjson_types::Duration {
                    seconds: -1,
                    nanos: 0,
                }),
                ..request
            },
        ))
        .await
        .expect_err("negative");
    assert_eq!(violated_fields(&negative), ["wait"]);
}

async fn an_attempt_shorter_than_the_lease_it_asks_for_is_refused(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let status = client
        .claim(authorized(
            token,
            proto::ClaimRequest {
                lease: millis(10_000),
                max_attempt_duration: millis(5_000),
                ..claim_json("payments.charge", "k", "{}")
            },
        ))
        .await
        .expect_err("an attempt shorter than its lease");
    assert_eq!(violated_fields(&status), ["max_attempt_duration"]);
    assert_nothing_stored(&mut client, token, "k").await;
}

async fn metadata_is_bounded_per_entry_key_and_value_together(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let claimed = client
        .claim(authorized(token, claim_json("payments.charge", "k", "{}")))
        .await
        .expect("claim")
        .into_inner();
    let owner = ownership(&claimed).expect("acquired").clone();
    let complete = |name: usize, value: usize| proto::CompleteRequest {
        operation_id: owner.operation_id.clone(),
        fence: owner.fence,
        result: Some(proto::Result {
            body: b"{}".to_vec(),
            content_type: "application/json".into(),
            metadata: HashMap::from([("k".repeat(name), "v".repeat(value))]),
        }),
    };

    // Each under 256 bytes, 300 together: one entry too large.
    let status = client
        .complete(authorized(token, complete(200, 100)))
        .await
        .expect_err("an entry of 300 bytes");
    assert_eq!(violated_fields(&status), ["result.metadata"]);
    let still = client
        .lookup(authorized(token, lookup_scope("k")))
        .await
        .expect("lookup")
        .into_inner();
    assert_eq!(
        still.operation.expect("operation").state,
        proto::OperationState::InProgress as i32
    );

    client
        .complete(authorized(token, complete(128, 128)))
        .await
        .expect("an entry of 256 bytes");
}

/// Claims `count` operations with a lease that runs out at once, so that
/// each is listed as unresolved.
async fn unresolved_operations(client: &mut Client, token: &str, count: usize) -> Vec<String> {
    let mut operation_ids = Vec::new();
    for index in 0..count {
        let claimed = client
            .claim(authorized(
                token,
                proto::ClaimRequest {
                    lease: millis(10),
                    ..claim_json("payments.charge", &format!("expiring-{index}"), "{}")
                },
            ))
            .await
            .expect("claim")
            .into_inner();
        operation_ids.push(ownership(&claimed).expect("acquired").operation_id.clone());
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    operation_ids
}

fn page(page_size: u32, page_token: &str) -> proto::ListUnresolvedRequest {
    proto::ListUnresolvedRequest {
        operation: String::new(),
        page_size,
        page_token: page_token.into(),
    }
}

async fn page_size_above_the_maximum_is_clamped_and_tokens_page_on(backend: Backend) {
    let limits = Limits {
        max_page_size: 2,
        ..test_limits()
    };
    let world = World::start_with(backend, limits).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let expected = unresolved_operations(&mut client, token, 3).await;

    let first = client
        .list_unresolved(authorized(token, page(500, "")))
        .await
        .expect("a large page size is clamped, not refused")
        .into_inner();
    assert_eq!(first.operations.len(), 2);
    // Opaque: nothing of the record shows through.
    assert!(
        !expected
            .iter()
            .any(|operation_id| first.next_page_token.contains(operation_id.as_str())),
        "{}",
        first.next_page_token
    );
    let second = client
        .list_unresolved(authorized(token, page(500, &first.next_page_token)))
        .await
        .expect("the next page")
        .into_inner();
    let listed: Vec<String> = first
        .operations
        .iter()
        .chain(&second.operations)
        .map(|operation| operation.operation_id.clone())
        .collect();
    assert_eq!(listed, expected);
    assert_eq!(second.next_page_token, "");
}

async fn page_tokens_with_a_time_no_store_accepts_are_invalid_argument(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    unresolved_operations(&mut client, token, 1).await;

    let year = |year| {
        NaiveDate::from_ymd_opt(year, 1, 1)
            .and_then(|date| date.and_hms_opt(0, 0, 0))
            .expect("a year chrono holds")
            .and_utc()
    };
    let operation_id = OperationId(fresh_uuid());
    // chrono accepts 5000 BC; Postgres does not, and answered INTERNAL.
    let before_postgres = year(-5000);
    let old_form = format!("v1.{}.{}", before_postgres.timestamp_micros(), operation_id);
    for refused in [
        old_form,
        page_token::encode(before_postgres, operation_id),
        page_token::encode(year(10_000), operation_id),
        page_token::encode(year(1999), operation_id),
        "not a token".to_owned(),
    ] {
        let status = client
            .list_unresolved(authorized(token, page(10, &refused)))
            .await
            .expect_err("not a token from a previous response");
        assert_eq!(violated_fields(&status), ["page_token"], "{refused}");
    }
    let in_range = client
        .list_unresolved(authorized(
            token,
            page(10, &page_token::encode(year(2000), operation_id)),
        ))
        .await
        .expect("a token in range")
        .into_inner();
    assert_eq!(in_range.operations.len(), 1);
}

async fn every_error_carries_an_error_info_reason(backend: Backend) {
    let world = World::start(backend).await;
    let mut client = world.client().await;
    let claim = claim_json("payments.charge", "k", "{}");

    let missing = client
        .claim(Request::new(claim.clone()))
        .await
        .expect_err("no token");
    assert_status(&missing, Code::Unauthenticated, "MISSING_CREDENTIALS");
    let unknown = client
        .claim(authorized("idem_not-a-real-token", claim.clone()))
        .await
        .expect_err("unknown token");
    assert_status(&unknown, Code::Unauthenticated, "INVALID_CREDENTIALS");
    let mut basic = Request::new(claim.clone());
    basic.metadata_mut().insert(
        "authorization",
        "Basic dXNlcjpwYXNz".parse().expect("ascii"),
    );
    let not_bearer = client.claim(basic).await.expect_err("not a bearer token");
    assert_status(&not_bearer, Code::Unauthenticated, "INVALID_CREDENTIALS");

    let not_found = client
        .lookup(authorized(&world.tenant_a, lookup_scope("k")))
        .await
        .expect_err("nothing stored");
    assert_status(&not_found, Code::NotFound, "OPERATION_NOT_FOUND");
    assert!(error_info(&not_found).1.is_empty());

    let invalid = client
        .claim(authorized(
            &world.tenant_a,
            claim_json("payments.charge", "", "{}"),
        ))
        .await
        .expect_err("empty key");
    assert_eq!(violated_fields(&invalid), ["scope.key"]);

    // A record the server cannot read is its own fault: INTERNAL.
    let claimed = client
        .claim(authorized(&world.tenant_a, claim.clone()))
        .await
        .expect("claim")
        .into_inner();
    assert_eq!(outcome_name(&claimed), "acquired");
    world
        .backend
        .execute("UPDATE operations SET taken_over_state = 'corrupt', taken_over_fence = 1")
        .await;
    let internal = client
        .lookup(authorized(&world.tenant_a, lookup_scope("k")))
        .await
        .expect_err("an unreadable record");
    assert_status(&internal, Code::Internal, "INTERNAL");
    assert_eq!(internal.message(), "internal error");

    world.store.close().await;
    let unavailable = client
        .claim(authorized(&world.tenant_a, claim))
        .await
        .expect_err("database gone");
    assert_status(&unavailable, Code::Unavailable, "STORE_UNAVAILABLE");
    assert!(unavailable.get_details_retry_info().is_some());
}

store_tests!(
    payloads_above_the_bound_are_refused_before_parsing_and_change_nothing,
    a_float_that_a_double_rounds_to_a_claimed_amount_is_refused_not_replayed,
    a_wait_above_the_cap_is_clamped_to_it_not_refused,
    an_attempt_shorter_than_the_lease_it_asks_for_is_refused,
    metadata_is_bounded_per_entry_key_and_value_together,
    page_size_above_the_maximum_is_clamped_and_tokens_page_on,
    page_tokens_with_a_time_no_store_accepts_are_invalid_argument,
    every_error_carries_an_error_info_reason,
);

// ---- the documentation names exactly what the code sends -------------------

fn repository_file(path: &str) -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .expect("a file of the repository")
}

/// The UPPER_SNAKE words of `text`.
fn upper_snake_words(text: &str) -> std::collections::BTreeSet<String> {
    text.split(|character: char| !(character.is_ascii_uppercase() || character == '_'))
        .filter(|word| word.len() > 2 && word.contains(|character: char| character != '_'))
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_error_reason_is_documented_in_the_proto_and_the_api_docs() {
    let proto = repository_file("proto/idem/v1/idempotency.proto");
    let proto_header = proto
        .split("syntax = \"proto3\";")
        .next()
        .expect("the header comment");
    let api = repository_file("docs/api.md");
    let errors_section = api
        .split("\n## Errors\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("docs/api.md has an Errors section");
    for reason in ErrorReason::ALL.map(ErrorReason::as_str) {
        assert!(
            proto_header.contains(&format!("//   {reason} ")),
            "{reason}: list it in the proto's header comment"
        );
        assert!(
            errors_section.contains(&format!("`{reason}`")),
            "{reason}: list it in docs/api.md's Errors section"
        );
    }
}

/// Every event the domain writes; the match below stops compiling when one
/// is added, until it is listed here too.
const HISTORY_EVENTS: [HistoryEvent; 18] = [
    HistoryEvent::Claimed,
    HistoryEvent::TakenOver,
    HistoryEvent::RetryStarted,
    HistoryEvent::RetriedAfterFailure,
    HistoryEvent::MarkedUnknown,
    HistoryEvent::Renewed,
    HistoryEvent::Completed,
    HistoryEvent::Failed,
    HistoryEvent::RetryScheduled,
    HistoryEvent::OutcomeUnknown,
    HistoryEvent::Reconciled,
    HistoryEvent::DeadlineExceeded,
    HistoryEvent::StaleWriteRefused,
    HistoryEvent::LateWriteRefused,
    HistoryEvent::Expired,
    HistoryEvent::Forgotten,
    HistoryEvent::HistoryTruncated,
    HistoryEvent::ConflictingClaimRefused,
];

fn listed(event: HistoryEvent) -> bool {
    match event {
        HistoryEvent::Claimed
        | HistoryEvent::TakenOver
        | HistoryEvent::RetryStarted
        | HistoryEvent::RetriedAfterFailure
        | HistoryEvent::MarkedUnknown
        | HistoryEvent::Renewed
        | HistoryEvent::Completed
        | HistoryEvent::Failed
        | HistoryEvent::RetryScheduled
        | HistoryEvent::OutcomeUnknown
        | HistoryEvent::Reconciled
        | HistoryEvent::DeadlineExceeded
        | HistoryEvent::StaleWriteRefused
        | HistoryEvent::LateWriteRefused
        | HistoryEvent::Expired
        | HistoryEvent::Forgotten
        | HistoryEvent::HistoryTruncated
        | HistoryEvent::ConflictingClaimRefused => HISTORY_EVENTS.contains(&event),
    }
}

#[test]
fn the_proto_documents_exactly_the_history_events_that_are_written() {
    assert!(HISTORY_EVENTS.into_iter().all(listed));
    let proto = repository_file("proto/idem/v1/idempotency.proto");
    let event_comment = proto
        .split("message HistoryEntry {")
        .nth(1)
        .and_then(|rest| rest.split("string event = 2;").next())
        .expect("HistoryEntry.event has a comment");
    let written: std::collections::BTreeSet<String> = HISTORY_EVENTS
        .map(|event| event.as_str().to_owned())
        .into_iter()
        .collect();
    assert_eq!(upper_snake_words(event_comment), written);
}
