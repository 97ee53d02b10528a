//! Observability of the real binary: traces reach an OTLP collector with the
//! caller's trace as parent, /metrics counts exactly what happened, and JSON
//! logs name operations and traces without keys or payloads.
//!
//! These tests run the `idemd` executable itself (not the library in this
//! process), because tracing and its exporter are process-global; on each
//! store. Only the bound on metric labels is checked in this process: it
//! needs no exporter and no store.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use idemd::proto;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::trace::v1::Span;
use tonic::{Code, Request};

use crate::harness::{
    Backend, World, authorized, claim_json, free_port, millis, ownership, result, samples,
    store_tests,
};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_SPAN_ID: &str = "00f067aa0ba902b7";
const SECRET_KEY: &str = "order-key-do-not-log-7c1e";
const SECRET_PAYLOAD: &str = r#"{"card":"4242-secret-pan"}"#;

fn traced<T>(token: &str, message: T) -> Request<T> {
    let mut request = authorized(token, message);
    request.metadata_mut().insert(
        "traceparent",
        format!("00-{TRACE_ID}-{PARENT_SPAN_ID}-01")
            .parse()
            .expect("ascii"),
    );
    request
}

#[derive(Default, Clone)]
struct Collector(Arc<Mutex<Vec<Span>>>);

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let spans = request
            .into_inner()
            .resource_spans
            .into_iter()
            .flat_map(|resource| resource.scope_spans)
            .flat_map(|scope| scope.spans);
        self.0.lock().expect("spans").extend(spans);
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn attribute<'a>(
    span: &'a Span,
    key: &str,
) -> Option<&'a opentelemetry_proto::tonic::common::v1::any_value::Value> {
    span.attributes
        .iter()
        .find(|attribute| attribute.key == key)
        .and_then(|attribute| attribute.value.as_ref())
        .and_then(|value| value.value.as_ref())
}

async fn a_claim_is_traced_from_the_caller_into_the_database_and_logged_without_payloads(
    backend: Backend,
) {
    let database_system = match &backend {
        Backend::Postgres { .. } => "postgresql",
        Backend::Sqlite { .. } => "sqlite",
    };
    let collector = Collector::default();
    let collector_listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let collector_port = collector_listener.local_addr().expect("addr").port();
    let service = TraceServiceServer::new(collector.clone());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(
                collector_listener,
            )),
    );
    let data = backend.into_process_data().await;
    let token = data.create_tenant("observed");
    let server = data
        .serve_with(
            &[],
            &[
                (
                    "OTEL_EXPORTER_OTLP_ENDPOINT",
                    format!("http://127.0.0.1:{collector_port}"),
                ),
                ("OTEL_BSP_SCHEDULE_DELAY", "100".to_owned()),
                ("OTEL_SERVICE_NAME", "idemd-under-test".to_owned()),
                ("IDEMD_LOG_FORMAT", "json".to_owned()),
                ("RUST_LOG", "info".to_owned()),
            ],
        )
        .await;
    let mut client = server.client().await;

    let request = proto::ClaimRequest {
        lease: millis(50),
        ..claim_json("payments.charge", SECRET_KEY, SECRET_PAYLOAD)
    };
    let first = client
        .claim(traced(&token, request.clone()))
        .await
        .expect("claim")
        .into_inner();
    let stale = ownership(&first).expect("acquired").clone();
    let conflict = client
        .claim(traced(
            &token,
            claim_json("payments.charge", SECRET_KEY, r#"{"card":"other"}"#),
        ))
        .await
        .expect_err("conflict");
    assert_eq!(conflict.code(), Code::FailedPrecondition);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let takeover = client
        .claim(traced(&token, request))
        .await
        .expect("claim")
        .into_inner();
    assert!(ownership(&takeover).expect("takeover").fence > stale.fence);
    let refused = client
        .complete(traced(
            &token,
            proto::CompleteRequest {
                operation_id: stale.operation_id.clone(),
                fence: stale.fence,
                result: result("late"),
            },
        ))
        .await
        .expect_err("stale");
    assert_eq!(refused.code(), Code::Aborted);

    // Spans arrive in batches: wait for the first Claim's tree.
    let deadline = Instant::now() + Duration::from_secs(15);
    let spans = loop {
        let spans = collector.0.lock().expect("spans").clone();
        let ours: Vec<Span> = spans
            .into_iter()
            .filter(|span| hex(&span.trace_id) == TRACE_ID)
            .collect();
        let has_database_span = ours.iter().any(|span| span.name.starts_with("INSERT"));
        if ours
            .iter()
            .filter(|span| span.name == "idem.v1.IdempotencyService/Claim")
            .count()
            >= 3
            && has_database_span
        {
            break ours;
        }
        assert!(Instant::now() < deadline, "spans did not arrive: {ours:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    let by_id: BTreeMap<String, &Span> = spans
        .iter()
        .map(|span| (hex(&span.span_id), span))
        .collect();
    let claims: Vec<&Span> = spans
        .iter()
        .filter(|span| span.name == "idem.v1.IdempotencyService/Claim")
        .collect();
    for claim in &claims {
        assert_eq!(
            hex(&claim.parent_span_id),
            PARENT_SPAN_ID,
            "the caller's span is the parent"
        );
        assert_eq!(
            claim.kind,
            opentelemetry_proto::tonic::trace::v1::span::SpanKind::Server as i32
        );
        use opentelemetry_proto::tonic::common::v1::any_value::Value;
        assert_eq!(
            attribute(claim, "rpc.system"),
            Some(&Value::StringValue("grpc".into()))
        );
        assert_eq!(
            attribute(claim, "rpc.service"),
            Some(&Value::StringValue("idem.v1.IdempotencyService".into()))
        );
        assert_eq!(
            attribute(claim, "rpc.method"),
            Some(&Value::StringValue("Claim".into()))
        );
        assert_eq!(
            attribute(claim, "idem.operation"),
            Some(&Value::StringValue("payments.charge".into()))
        );
    }
    use opentelemetry_proto::tonic::common::v1::any_value::Value;
    let outcomes: Vec<_> = claims
        .iter()
        .filter_map(|claim| attribute(claim, "idem.outcome"))
        .collect();
    assert!(
        outcomes.contains(&&Value::StringValue("acquired".into())),
        "{outcomes:?}"
    );
    assert!(
        outcomes.contains(&&Value::StringValue("reconcile_first".into())),
        "{outcomes:?}"
    );
    let acquired = claims
        .iter()
        .find(|claim| {
            attribute(claim, "idem.outcome") == Some(&Value::StringValue("acquired".into()))
        })
        .expect("the first claim");
    assert_eq!(
        attribute(acquired, "idem.fence"),
        Some(&Value::IntValue(stale.fence as i64))
    );
    // The INSERT of the first Claim descends from its server span.
    let insert = spans
        .iter()
        .find(|span| span.name.starts_with("INSERT operations"))
        .expect("db span");
    let mut ancestor = hex(&insert.parent_span_id);
    let mut found = false;
    while let Some(parent) = by_id.get(&ancestor) {
        if parent.span_id == acquired.span_id {
            found = true;
            break;
        }
        ancestor = hex(&parent.parent_span_id);
    }
    assert!(
        found,
        "the database span is a child of the Claim's server span"
    );
    assert_eq!(
        attribute(insert, "db.system"),
        Some(&Value::StringValue(database_system.into()))
    );

    // Logs: JSON, one line per conflict, takeover and stale write, with the
    // operation and the trace; never the key or the payload.
    let log = server.log();
    let logs: Vec<&str> = log.lines().collect();
    let records: Vec<serde_json::Value> = logs
        .iter()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    assert_eq!(
        records.len(),
        logs.len(),
        "every log line is JSON: {logs:#?}"
    );
    for message in [
        "claim refused: idempotency key reused with a different request",
        "operation taken over: the new owner must reconcile first",
        "stale write refused",
    ] {
        let record = records
            .iter()
            .find(|record| record["message"] == message)
            .unwrap_or_else(|| panic!("no log line {message:?} in {logs:#?}"));
        assert_eq!(
            record["operation_id"],
            stale.operation_id.as_str(),
            "{record}"
        );
        assert_eq!(record["trace_id"], TRACE_ID, "{record}");
    }
    for line in &logs {
        assert!(
            !line.contains(SECRET_KEY),
            "a key leaked into the logs: {line}"
        );
        assert!(
            !line.contains("secret-pan"),
            "a payload leaked into the logs: {line}"
        );
        assert!(
            !line.contains(&token),
            "a token leaked into the logs: {line}"
        );
    }
}

async fn metrics_count_exactly_what_happened(backend: Backend) {
    let data = backend.into_process_data().await;
    let token = data.create_tenant("observed");
    let metrics_port = free_port();
    let server = data
        .serve_with(
            &[],
            &[
                ("IDEMD_METRICS_LISTEN", format!("127.0.0.1:{metrics_port}")),
                ("IDEMD_METRICS_OPERATIONS", "payments.charge".to_owned()),
                ("IDEMD_GAUGE_INTERVAL", "100ms".to_owned()),
            ],
        )
        .await;
    let mut client = server.client().await;
    let charge = |key: &str, body: &str| proto::ClaimRequest {
        lease: millis(50),
        ..claim_json("payments.charge", key, body)
    };
    let complete = |ownership: &proto::Ownership| proto::CompleteRequest {
        operation_id: ownership.operation_id.clone(),
        fence: ownership.fence,
        result: result("ok"),
    };

    // a: acquired, completed, replayed twice, one conflict.
    let a = client
        .claim(authorized(&token, charge("a", "{}")))
        .await
        .expect("claim")
        .into_inner();
    client
        .complete(authorized(&token, complete(ownership(&a).expect("a"))))
        .await
        .expect("complete");
    for _ in 0..2 {
        client
            .claim(authorized(&token, charge("a", "{}")))
            .await
            .expect("replay");
    }
    client
        .claim(authorized(&token, charge("a", r#"{"x":1}"#)))
        .await
        .expect_err("conflict");
    // b: acquired with a long lease, then a duplicate is pending; stays in progress.
    let long = |key: &str| proto::ClaimRequest {
        lease: millis(60_000),
        ..claim_json("payments.charge", key, "{}")
    };
    client
        .claim(authorized(&token, long("b")))
        .await
        .expect("claim");
    client
        .claim(authorized(&token, long("b")))
        .await
        .expect("pending");
    // c: acquired, lease expires, taken over, the stale owner is refused,
    // the new owner fails it as unknown: unresolved.
    let c1 = client
        .claim(authorized(&token, charge("c", "{}")))
        .await
        .expect("claim")
        .into_inner();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let c2 = client
        .claim(authorized(&token, charge("c", "{}")))
        .await
        .expect("takeover")
        .into_inner();
    client
        .complete(authorized(&token, complete(ownership(&c1).expect("c1"))))
        .await
        .expect_err("stale");
    let c2 = ownership(&c2).expect("c2").clone();
    let fail = proto::FailRequest {
        operation_id: c2.operation_id.clone(),
        fence: c2.fence,
        disposition: proto::FailDisposition::Unknown as i32,
        error: None,
        retry_after: None,
    };
    client
        .fail(authorized(&token, fail.clone()))
        .await
        .expect("fail");
    client
        .fail(authorized(&token, fail))
        .await
        .expect("re-sent fail: counted once");
    // Another operation name is not on the allow-list: `other`.
    client
        .claim(authorized(&token, claim_json("emails.send", "d", "{}")))
        .await
        .expect("claim");
    // Reconcile c from outside evidence.
    client
        .reconcile(authorized(
            &token,
            proto::ReconcileRequest {
                tenant: String::new(),
                operation_id: c2.operation_id.clone(),
                expected_fence: c2.fence,
                resolution: Some(proto::reconcile_request::Resolution::Succeeded(
                    result("found").expect("result"),
                )),
            },
        ))
        .await
        .expect("reconcile");

    tokio::time::sleep(Duration::from_millis(300)).await; // a gauge refresh
    let metrics = samples(&server.scrape(metrics_port).await);
    let expect = |series: &str, value: f64| {
        assert_eq!(
            metrics.get(series),
            Some(&value),
            "{series} in {metrics:#?}"
        );
    };
    let op = "operation=\"payments.charge\"";
    expect(
        &format!("idemd_claims_total{{{op},outcome=\"acquired\"}}"),
        3.0,
    );
    expect(
        &format!("idemd_claims_total{{{op},outcome=\"replayed\"}}"),
        2.0,
    );
    expect(
        &format!("idemd_claims_total{{{op},outcome=\"conflict\"}}"),
        1.0,
    );
    expect(
        &format!("idemd_claims_total{{{op},outcome=\"pending\"}}"),
        1.0,
    );
    expect(
        &format!("idemd_claims_total{{{op},outcome=\"reconcile_first\"}}"),
        1.0,
    );
    expect(
        "idemd_claims_total{operation=\"other\",outcome=\"acquired\"}",
        1.0,
    );
    expect(&format!("idemd_takeovers_total{{{op}}}"), 1.0);
    expect(
        &format!("idemd_stale_writes_refused_total{{{op},rpc=\"complete\"}}"),
        1.0,
    );
    expect(&format!("idemd_completions_total{{{op}}}"), 1.0);
    expect(
        &format!("idemd_failures_total{{disposition=\"unknown\",{op}}}"),
        1.0,
    );
    expect(
        &format!("idemd_reconciliations_total{{{op},resolution=\"succeeded\"}}"),
        1.0,
    );
    // Counted in the database: b (live lease) and d are in progress, nothing unresolved.
    expect("idemd_in_progress_operations{}", 2.0);
    expect("idemd_unresolved_operations{}", 0.0);
    expect("idemd_sweep_backlog{}", 0.0);
    expect("idemd_unresolved_oldest_age_seconds{}", 0.0);
    // Every call above took a pool connection (a reader, on the embedded
    // store), each counted with its wait; none is waiting now.
    expect("idemd_db_pool_waiting{}", 0.0);
    let acquires = metrics
        .get("idemd_db_pool_acquires_total{}")
        .copied()
        .unwrap_or_default();
    assert!(acquires >= 5.0, "pool acquires counted: {metrics:#?}");
    assert!(
        metrics.contains_key("idemd_db_pool_acquire_wait_microseconds_total{}"),
        "pool waits: {metrics:#?}"
    );
    assert!(
        metrics.keys().any(|series| series
            .starts_with("idemd_rpc_duration_seconds_count{code=\"Ok\",rpc=\"Claim\"}")),
        "latency per RPC: {metrics:#?}"
    );
    assert!(
        metrics
            .keys()
            .any(|series| series
                .starts_with("idemd_store_duration_seconds_count{call=\"transition\"}")),
        "latency per store call: {metrics:#?}"
    );
    assert!(metrics.contains_key("idemd_db_pool_max_connections{}"));
    // What any SRE's dashboard starts from: the build, readiness, the process.
    assert_eq!(
        metrics.get(&format!(
            "idemd_build_info{{version=\"{}\"}}",
            env!("CARGO_PKG_VERSION")
        )),
        Some(&1.0),
        "{metrics:#?}"
    );
    assert_eq!(metrics.get("idemd_serving{}"), Some(&1.0), "{metrics:#?}");
    for series in [
        "process_resident_memory_bytes{}",
        "process_open_fds{}",
        "process_threads{}",
        "process_start_time_seconds{}",
    ] {
        assert!(
            metrics.get(series).is_some_and(|value| *value > 0.0),
            "{series}: {metrics:#?}"
        );
    }
    // The database clock is this machine's: its measured offset is small.
    assert!(
        metrics
            .get("idemd_db_clock_offset_seconds{}")
            .is_some_and(|offset| offset.abs() < 1.0),
        "the clock offset gauge: {metrics:#?}"
    );
    assert!(
        metrics
            .keys()
            .all(|series| !series.contains("key=") && !series.contains("\"a\"")),
        "keys never become labels"
    );
}

/// A peer may call any path under the API's service; the unknown ones are
/// answered UNIMPLEMENTED. Each invented name must not become a label value:
/// that would be a permanent series per name, and /metrics would grow
/// without bound.
#[tokio::test]
async fn invented_method_names_share_one_unknown_series_and_metrics_stay_bounded() {
    let world = World::start(Backend::sqlite().await).await;
    let metrics = world.server.application.service.metrics();
    let mut grpc = tonic::client::Grpc::new(world.server.channel().await);
    let mut call_invented_method = async |index: usize| {
        grpc.ready().await.expect("channel ready");
        let path = format!("/idem.v1.IdempotencyService/InventedMethod{index}")
            .parse()
            .expect("path");
        let codec = tonic_prost::ProstCodec::<(), ()>::default();
        // With credentials: without, admission refuses any path first.
        let status = grpc
            .unary(authorized(&world.tenant_a, ()), path, codec)
            .await
            .expect_err("no such method");
        assert_eq!(status.code(), Code::Unimplemented);
    };

    call_invented_method(0).await;
    let after_one = metrics.render();
    for index in 1..50 {
        call_invented_method(index).await;
    }
    let after_fifty = metrics.render();

    assert!(
        !after_fifty.contains("InventedMethod"),
        "an invented method became a label value: {after_fifty}"
    );
    assert_eq!(
        samples(&after_fifty)
            .get("idemd_rpc_duration_seconds_count{code=\"Unimplemented\",rpc=\"unknown\"}"),
        Some(&50.0),
        "{after_fifty}"
    );
    // Only the sample values changed (a few more digits), no series was added.
    assert!(
        after_fifty.len() < after_one.len() + 256,
        "/metrics grew from {} to {} bytes",
        after_one.len(),
        after_fifty.len()
    );
}

/// A Claim that waits for a pending operation is not a slow Claim: its wait
/// is measured apart (`idemd_claim_wait_seconds`), its latency sample is
/// the work alone, and while it waits it counts as a request in flight.
async fn a_claims_wait_is_measured_apart_from_its_work(backend: Backend) {
    let world = World::start(backend).await;
    let metrics = world.server.application.service.metrics().clone();
    let mut owner = world.client().await;
    let mut waiter = world.client().await;
    let request = claim_json("orders.create", "order-wait", "{}");
    let acquired = owner
        .claim(authorized(&world.tenant_a, request.clone()))
        .await
        .expect("claim")
        .into_inner();
    let owned = ownership(&acquired).expect("acquired").clone();
    let token = world.tenant_a.clone();
    let waiting = tokio::spawn(async move {
        let request = proto::ClaimRequest {
            wait: millis(30_000),
            ..request
        };
        waiter.claim(authorized(&token, request)).await
    });
    let held_for = Duration::from_millis(1_200);
    tokio::time::sleep(held_for).await;
    let during = samples(&metrics.render());
    assert_eq!(
        during.get("idemd_requests_in_flight{}"),
        Some(&1.0),
        "the waiting Claim is in flight: {during:#?}"
    );
    owner
        .complete(authorized(
            &world.tenant_a,
            proto::CompleteRequest {
                operation_id: owned.operation_id,
                fence: owned.fence,
                result: result("done"),
            },
        ))
        .await
        .expect("complete");
    let answer = waiting.await.expect("task").expect("claim").into_inner();
    assert!(ownership(&answer).is_none(), "the waiter got the result");

    let after = samples(&metrics.render());
    let get = |series: &str| after.get(series).copied().unwrap_or_default();
    assert_eq!(get("idemd_claim_wait_seconds_count{}"), 1.0, "{after:#?}");
    let waited = get("idemd_claim_wait_seconds_sum{}");
    assert!(waited >= 1.0, "waited {waited} s: {after:#?}");
    // Both Claims' latencies together are far less than the one wait: the
    // wait is not in them.
    assert_eq!(
        get("idemd_rpc_duration_seconds_count{code=\"Ok\",rpc=\"Claim\"}"),
        2.0
    );
    let worked = get("idemd_rpc_duration_seconds_sum{code=\"Ok\",rpc=\"Claim\"}");
    assert!(
        worked < waited / 2.0,
        "Claims worked {worked} s and waited {waited} s: {after:#?}"
    );
    assert_eq!(get("idemd_requests_in_flight{}"), 0.0, "{after:#?}");
}

store_tests!(
    a_claim_is_traced_from_the_caller_into_the_database_and_logged_without_payloads,
    metrics_count_exactly_what_happened,
    a_claims_wait_is_measured_apart_from_its_work,
);
