//! Bounds at the door (issue 25, item 5): what a caller sends cannot make
//! the server misreport its own health, and what a background task does
//! cannot die unseen. Transport bounds that need no store run on the
//! embedded store only.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use idemd::app::{ConnectionSettings, ServerSettings};
use idemd::auth::AuthSettings;
use idemd::grpc::admission::AdmissionSettings;
use idemd::proto;
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tonic::codegen::Bytes;
use tonic::{Code, Status};

use crate::harness::{
    Backend, ProcessData, ServerConfig, World, assert_status, authorized, claim_json,
    claim_once_admitted, fresh_uuid, outcome_name, test_limits,
};
use crate::transport::{
    RawSender, answer_to, call_headers, closed_by_the_server, framed, message_prefix, raw_client,
    raw_connect,
};

/// `message` framed as one uncompressed gRPC message.
fn frame(message: &[u8]) -> Bytes {
    let mut data = message_prefix(message.len()).to_vec();
    data.extend_from_slice(message);
    Bytes::from(data)
}

/// The `idemd_rpc_duration_seconds` series of `rpc` with status `code`.
fn rpc_series_seen(rendered: &str, rpc: &str, code: &str) -> bool {
    rendered.lines().any(|line| {
        line.starts_with("idemd_rpc_duration_seconds_count")
            && line.contains(&format!("rpc=\"{rpc}\""))
            && line.contains(&format!("code=\"{code}\""))
    })
}

#[tokio::test]
async fn malformed_protobuf_is_invalid_argument_and_counted_as_the_callers_error() {
    let world = World::start(Backend::sqlite().await).await;
    let addr = world.server.addr;
    let sender = raw_client(addr).await;
    let token = Some(world.tenant_a.as_str());
    let cases: [(&str, &str, &[u8]); 3] = [
        // operation_id (field 1, a string) with bytes that are not UTF-8.
        (
            "invalid UTF-8 in a string",
            "Renew",
            &[0x0a, 0x02, 0xff, 0xfe],
        ),
        // Field 1 with wire type 6, which protobuf does not have.
        ("a bad wire type", "Renew", &[0x0e, 0x01]),
        // operation_id declared 16 bytes long, 2 sent.
        ("a truncated message", "Complete", &[0x0a, 0x10, b'a', b'b']),
    ];
    for (what, method, message) in cases {
        let status = answer_to(
            &sender,
            call_headers(addr, method, token),
            frame(message),
            true,
        )
        .await;
        assert_eq!(status.code(), Code::InvalidArgument, "{what}: {status:?}");
        assert_status(&status, Code::InvalidArgument, "INVALID_REQUEST");
    }
    let rendered = world.server.application.service.metrics().render();
    for rpc in ["Renew", "Complete"] {
        assert!(
            rpc_series_seen(&rendered, rpc, "InvalidArgument"),
            "{rpc} not counted as InvalidArgument:\n{rendered}"
        );
        assert!(
            !rpc_series_seen(&rendered, rpc, "Internal"),
            "{rpc} counted as Internal:\n{rendered}"
        );
    }
}

// ---- authentication cannot be queued into an outage -------------------------

/// Passes one direction of a proxied connection on, each chunk held
/// `delay` first.
async fn pass_on(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, delay: Duration) {
    let mut chunk = vec![0_u8; 64 * 1024];
    loop {
        let read = match from.read(&mut chunk).await {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return;
            }
            Ok(read) => read,
        };
        tokio::time::sleep(delay).await;
        if to.write_all(&chunk[..read]).await.is_err() {
            return;
        }
    }
}

/// A TCP proxy to `upstream` that holds every chunk `delay` before passing
/// it on, each way: a database that far away. Stops when dropped.
struct DelayingProxy {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl DelayingProxy {
    async fn start(upstream: SocketAddr, delay: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                connections.spawn(async move {
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    tokio::join!(
                        pass_on(client_read, server_write, delay),
                        pass_on(server_read, client_write, delay),
                    );
                });
            }
        });
        Self { addr, task }
    }
}

impl Drop for DelayingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Whether a status is a refusal to serve (shed, queued full, out of
/// share), as opposed to an answer.
fn is_refusal(status: &Status) -> bool {
    matches!(
        status.code(),
        Code::Unavailable | Code::ResourceExhausted | Code::DeadlineExceeded
    )
}

/// The case: the database 5 ms away each way, one process without
/// credentials streaming fresh random well-formed tokens, and a real tenant
/// working beside it, whose token's cached verdict expires (and is looked
/// up again) several times during the flood. Not one of the tenant's calls
/// may be refused.
#[sqlx::test(migrator = "idemd::store::postgres::MIGRATOR")]
async fn a_flood_of_unknown_tokens_does_not_shed_a_real_tenants_calls(
    _: sqlx::postgres::PgPoolOptions,
    connect: sqlx::postgres::PgConnectOptions,
) {
    let upstream = tokio::net::lookup_host((connect.get_host(), connect.get_port()))
        .await
        .expect("the test database's address")
        .next()
        .expect("an address");
    let proxy = DelayingProxy::start(upstream, Duration::from_millis(5)).await;
    let proxied = connect.host("127.0.0.1").port(proxy.addr.port());
    let config = ServerConfig {
        admission: AdmissionSettings {
            max_in_flight: 16,
            ..AdmissionSettings::default()
        },
        auth: AuthSettings {
            cache_ttl: Duration::from_millis(300),
            ..AuthSettings::default()
        },
        ..ServerConfig::default()
    };
    let world =
        World::start_configured(Backend::postgres(proxied).await, test_limits(), config).await;

    // The tenant has been served before the flood: its token is one this
    // replica has seen granted (a token first seen during the flood cannot
    // be told from a random one).
    world
        .client()
        .await
        .claim(authorized(
            &world.tenant_a,
            claim_json("payments.charge", "before-the-flood", "{}"),
        ))
        .await
        .expect("served before the flood");
    let flooding = Duration::from_secs(3);
    let until = tokio::time::Instant::now() + flooding;
    let mut flood = tokio::task::JoinSet::new();
    for _ in 0..32 {
        let mut client = world.client().await;
        flood.spawn(async move {
            let mut served = 0_usize;
            while tokio::time::Instant::now() < until {
                let token = idemd::auth::generate_token().expect("a token");
                let key = format!("flood-{}", fresh_uuid());
                let answer = client
                    .claim(authorized(
                        &token,
                        claim_json("payments.charge", &key, "{}"),
                    ))
                    .await;
                served += usize::from(answer.is_ok());
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            served
        });
    }
    let mut tenant = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let mut client = world.client().await;
        let token = world.tenant_a.clone();
        tenant.spawn(async move {
            let (mut served, mut refused) = (0_usize, Vec::new());
            while tokio::time::Instant::now() < until {
                let key = format!("real-{}", fresh_uuid());
                match client
                    .claim(authorized(
                        &token,
                        claim_json("payments.charge", &key, "{}"),
                    ))
                    .await
                {
                    Ok(_) => served += 1,
                    Err(status) if is_refusal(&status) => refused.push(status),
                    Err(status) => panic!("the real tenant's Claim failed: {status:?}"),
                }
            }
            (served, refused)
        });
    }
    let flood_served: usize = flood.join_all().await.into_iter().sum();
    let (mut served, mut refused) = (0, Vec::new());
    for (task_served, task_refused) in tenant.join_all().await {
        served += task_served;
        refused.extend(task_refused);
    }
    assert_eq!(flood_served, 0, "a random token was served");
    assert!(served > 0, "the real tenant was never served");
    assert!(
        refused.is_empty(),
        "{} of the real tenant's {} Claims were refused, the first: {:?}",
        refused.len(),
        refused.len() + served,
        refused.first()
    );
    drop(proxy);
}

// ---- memory by bytes, not only by counts -------------------------------------

/// A call of `method` whose message declares `length` bytes and sends only
/// the first kilobyte, its stream left open: it holds whatever admission
/// gave it until dropped.
async fn half_sent(
    sender: &RawSender,
    addr: SocketAddr,
    method: &str,
    token: &str,
    length: usize,
) -> (h2::client::ResponseFuture, h2::SendStream<Bytes>) {
    let mut sender = sender.clone().ready().await.expect("a stream");
    let (response, mut body) = sender
        .send_request(call_headers(addr, method, Some(token)), false)
        .expect("send");
    let mut data = message_prefix(length).to_vec();
    data.extend_from_slice(&[0_u8; 1024]);
    body.send_data(Bytes::from(data), false).expect("data");
    (response, body)
}

#[tokio::test]
async fn request_bytes_in_flight_are_bounded_by_the_replicas_budget() {
    let limit = test_limits().max_request_bytes();
    let config = ServerConfig {
        admission: AdmissionSettings {
            max_request_bytes_in_flight: 3 * limit,
            ..AdmissionSettings::default()
        },
        ..ServerConfig::default()
    };
    let world = World::start_configured(Backend::sqlite().await, test_limits(), config).await;
    let addr = world.server.addr;
    let sender = raw_client(addr).await;

    // Three calls of the largest legal message, their bodies still coming,
    // take the whole budget (within the counts: 3 of 1024 calls in flight).
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(half_sent(&sender, addr, "Complete", &world.tenant_a, limit - 1).await);
    }
    // Give the server the time to admit them.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let shed = answer_to(
        &sender,
        call_headers(addr, "Complete", Some(&world.tenant_b)),
        message_prefix(limit / 2),
        false,
    )
    .await;
    assert_status(&shed, Code::Unavailable, "OVERLOADED");
    assert!(retry_delay(&shed).is_some(), "RetryInfo: {shed:?}");

    // The bytes come back when the calls end.
    for (response, mut body) in held {
        body.send_reset(h2::Reason::CANCEL);
        drop(response);
    }
    let mut client = world.client().await;
    claim_once_admitted(
        &mut client,
        &world.tenant_b,
        "after",
        (Code::Unavailable, "OVERLOADED"),
        "the budget",
    )
    .await;
}

/// A Connect call of `method` whose JSON body declares `length` bytes
/// (`Content-Length`) and sends only its first kilobyte, its stream left
/// open.
async fn half_sent_json(
    sender: &RawSender,
    addr: SocketAddr,
    method: &str,
    token: &str,
    length: usize,
) -> (h2::client::ResponseFuture, h2::SendStream<Bytes>) {
    let mut sender = sender.clone().ready().await.expect("a stream");
    let headers = tonic::codegen::http::Request::builder()
        .method("POST")
        .uri(format!("http://{addr}/idem.v1.IdempotencyService/{method}"))
        .header("content-type", "application/json")
        .header("content-length", length.to_string())
        .header("authorization", format!("Bearer {token}"))
        .body(())
        .expect("a request");
    let (response, mut body) = sender.send_request(headers, false).expect("send");
    let mut data = b"{\"operationId\":\"".to_vec();
    data.resize(1024, b'x');
    body.send_data(Bytes::from(data), false).expect("data");
    (response, body)
}

/// A Connect call's JSON body is charged to the same budget as a gRPC
/// message, by its Content-Length, before it is read: two JSON bodies on
/// their way take the whole budget, and the next call is shed. (Before,
/// a JSON body was read and translated uncharged: the third call was
/// admitted.)
#[tokio::test]
async fn connect_json_bodies_in_flight_are_charged_to_the_budget() {
    let limit = test_limits().max_request_bytes();
    let config = ServerConfig {
        admission: AdmissionSettings {
            max_request_bytes_in_flight: 3 * limit,
            ..AdmissionSettings::default()
        },
        ..ServerConfig::default()
    };
    let world = World::start_configured(Backend::sqlite().await, test_limits(), config).await;
    let addr = world.server.addr;
    let sender = raw_client(addr).await;

    // Within the JSON limit (twice the decode limit), half the budget each.
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(half_sent_json(&sender, addr, "Complete", &world.tenant_a, 3 * limit / 2).await);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let shed = answer_to(
        &sender,
        call_headers(addr, "Complete", Some(&world.tenant_b)),
        message_prefix(limit / 2),
        false,
    )
    .await;
    assert_status(&shed, Code::Unavailable, "OVERLOADED");
    assert!(retry_delay(&shed).is_some(), "RetryInfo: {shed:?}");

    // The bytes come back when the calls end.
    for (response, mut body) in held {
        body.send_reset(h2::Reason::CANCEL);
        drop(response);
    }
    let mut client = world.client().await;
    claim_once_admitted(
        &mut client,
        &world.tenant_b,
        "after-json",
        (Code::Unavailable, "OVERLOADED"),
        "the budget",
    )
    .await;
}

/// Over Connect, a map past its bound is refused naming the field before
/// the body is decoded: a field after the map that does not decode is not
/// what the answer is about.
#[tokio::test]
async fn a_json_map_past_its_bound_is_refused_before_decoding() {
    let world = World::start(Backend::sqlite().await).await;
    let metadata: serde_json::Map<String, serde_json::Value> = (0..110_000)
        .map(|index| (short_key(index), serde_json::Value::String(String::new())))
        .collect();
    let body = serde_json::json!({
        "operationId": uuid::Uuid::new_v4().to_string(),
        "fence": "1",
        "result": {"metadata": metadata, "body": 12345},
    });
    let answer =
        crate::connect::call(world.server.addr, "Complete", Some(&world.tenant_a), body).await;
    let text = answer.body.to_string();
    assert_eq!(answer.status, 400, "{text}");
    assert!(text.contains("invalid_argument"), "{text}");
    assert!(text.contains("result.metadata"), "{text}");
}

fn retry_delay(status: &Status) -> Option<Duration> {
    use tonic_types::StatusExt;
    status.get_details_retry_info()?.retry_delay
}

/// A three-character key, distinct for each index below 62³.
fn short_key(index: usize) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    [index / (62 * 62), index / 62, index]
        .iter()
        .map(|digit| char::from(DIGITS[digit % 62]))
        .collect()
}

/// A Complete whose result metadata has `entries` three-byte keys (nine
/// bytes an entry on the wire: the 120,000 keys are 1.08 MB).
fn complete_with_metadata(entries: usize) -> proto::CompleteRequest {
    proto::CompleteRequest {
        operation_id: uuid::Uuid::new_v4().to_string(),
        fence: 1,
        result: Some(proto::Result {
            body: Vec::new(),
            content_type: "application/json".into(),
            metadata: (0..entries)
                .map(|index| (short_key(index), String::new()))
                .collect::<HashMap<_, _>>(),
        }),
    }
}

/// The peak memory of a real server taking `calls` concurrent Completes
/// with results of `result_bytes` each (on `data`'s store), over its
/// memory before them; and how many were served.
async fn peak_growth_under_large_completes(
    data: &ProcessData,
    args: &[&str],
    calls: usize,
    result_bytes: usize,
) -> (u64, u64, usize) {
    let token = data.create_tenant("memory");
    let daemon = data.serve(args).await;
    let mut owners = Vec::new();
    let mut client = daemon.client().await;
    for _ in 0..calls {
        let key = format!("large-{}", fresh_uuid());
        let claimed = client
            .claim(authorized(
                &token,
                claim_json("payments.charge", &key, "{}"),
            ))
            .await
            .expect("claimed")
            .into_inner();
        let ownership = crate::harness::ownership(&claimed)
            .expect("acquired")
            .clone();
        owners.push(ownership);
    }
    let before = daemon.peak_rss_bytes();
    let body = vec![b'x'; result_bytes];
    let mut completes = tokio::task::JoinSet::new();
    for ownership in owners {
        // A connection each, as many clients would.
        let mut client = daemon.client().await;
        let token = token.clone();
        let body = body.clone();
        completes.spawn(async move {
            client
                .complete(authorized(
                    &token,
                    proto::CompleteRequest {
                        operation_id: ownership.operation_id,
                        fence: ownership.fence,
                        result: Some(proto::Result {
                            body,
                            content_type: "application/octet-stream".into(),
                            metadata: HashMap::new(),
                        }),
                    },
                ))
                .await
        });
    }
    let served = completes
        .join_all()
        .await
        .into_iter()
        .filter(Result::is_ok)
        .count();
    let peak = daemon.peak_rss_bytes();
    (before, peak, served)
}

const MIB: u64 = 1024 * 1024;

/// The measurement, short: 128 concurrent Completes with 1 MiB
/// results. The peak stays within what the budget allows (64 MiB of
/// messages, about four times that in memory) instead of growing with the
/// calls. Long version (the figures in docs/operating.md): IDEMD_BOUNDS_CALLS=250.
#[sqlx::test(migrator = "idemd::store::postgres::MIGRATOR")]
async fn large_results_in_flight_do_not_grow_memory_past_the_budget(
    _: sqlx::postgres::PgPoolOptions,
    connect: sqlx::postgres::PgConnectOptions,
) {
    let calls = std::env::var("IDEMD_BOUNDS_CALLS")
        .ok()
        .and_then(|calls| calls.parse().ok())
        .unwrap_or(128);
    let data = Backend::postgres(connect).await.into_process_data().await;
    let budget = std::env::var("IDEMD_BOUNDS_BUDGET").unwrap_or_else(|_| "67108864".into());
    let args = ["--max-request-bytes-in-flight", budget.as_str()];
    let (before, peak, served) =
        peak_growth_under_large_completes(&data, &args, calls, 1024 * 1024).await;
    eprintln!(
        "{calls} Completes of 1 MiB, budget {budget} bytes: {served} served, peak RSS {} MiB (from {} MiB)",
        peak / MIB,
        before / MIB
    );
    assert!(served > 0, "none served");
    let growth = peak.saturating_sub(before);
    assert!(
        growth < 320 * MIB,
        "the peak grew by {} MiB with {calls} calls in flight",
        growth / MIB
    );
}

/// A message with far more map entries than the bound is refused naming
/// the field, over a real connection (src/grpc/codec.rs's tests show the
/// count comes before the map is built).
#[tokio::test]
async fn a_map_past_its_bound_is_refused_naming_the_field() {
    let world = World::start(Backend::sqlite().await).await;
    let message = complete_with_metadata(110_000);
    assert!(message.encoded_len() < test_limits().max_request_bytes());
    let status = world
        .client()
        .await
        .complete(authorized(&world.tenant_a, message))
        .await
        .expect_err("refused");
    assert_status(&status, Code::InvalidArgument, "INVALID_REQUEST");
    assert_eq!(
        crate::harness::violated_fields(&status),
        ["result.metadata"],
        "{status:?}"
    );
}

// ---- connection slots without credentials ------------------------------------

/// A TCP connection to `addr` from the loopback address `source`.
async fn connect_from(source: [u8; 4], addr: SocketAddr) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket
        .bind((std::net::Ipv4Addr::from(source), 0).into())
        .expect("bind a loopback source");
    socket.connect(addr).await.expect("connect")
}

#[tokio::test]
async fn one_source_address_cannot_hold_every_connection_slot() {
    let config = ServerConfig {
        connections: ConnectionSettings {
            max_connections_per_source: 3,
            ..ConnectionSettings::default()
        },
        ..ServerConfig::default()
    };
    let world = World::start_configured(Backend::sqlite().await, test_limits(), config).await;
    let addr = world.server.addr;
    let mut open = Vec::new();
    for _ in 0..3 {
        open.push(connect_from([127, 0, 0, 1], addr).await);
    }
    // The fourth from the same address is closed at once...
    assert!(closed_by_the_server(connect_from([127, 0, 0, 1], addr).await).await);
    // ...while another address is served.
    let other = connect_from([127, 0, 0, 2], addr).await;
    let (sender, connection) = h2::client::handshake(other).await.expect("h2 handshake");
    tokio::spawn(connection);
    let status = claim_a_fresh_key(&sender, addr, &world.tenant_a).await;
    assert_eq!(status.code(), Code::Ok, "{status:?}");
    let rendered = world.server.application.service.metrics().render();
    assert!(
        rendered.contains("idemd_connections_refused_total 1"),
        "{rendered}"
    );

    // A closed connection gives its source's place back.
    drop(open.pop());
    for attempt in 0.. {
        let again = connect_from([127, 0, 0, 1], addr).await;
        if let Ok(Ok((sender, connection))) =
            tokio::time::timeout(Duration::from_secs(2), h2::client::handshake(again)).await
        {
            tokio::spawn(connection);
            let status = claim_a_fresh_key(&sender, addr, &world.tenant_a).await;
            if status.code() == Code::Ok {
                break;
            }
        }
        assert!(attempt < 200, "the source's place never came back");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_connection_that_answers_pings_is_closed_past_its_age_and_grace() {
    let config = ServerConfig {
        server: ServerSettings {
            max_connection_age: Duration::from_millis(300),
            max_connection_age_grace: Duration::from_millis(300),
            // PINGs often, answered by the peer: never idle.
            http2_keepalive_interval: Duration::from_millis(50),
            ..ServerSettings::default()
        },
        ..ServerConfig::default()
    };
    let world = World::start_configured(Backend::sqlite().await, test_limits(), config).await;
    let addr = world.server.addr;
    let (sender, connection) = raw_connect(addr).await;
    let driven = tokio::spawn(connection);
    // A call whose body never ends, holding the connection busy past its
    // age: the grace ends it.
    let held = half_sent(&sender, addr, "Complete", &world.tenant_a, 4096).await;
    let ended = tokio::time::timeout(Duration::from_secs(5), driven).await;
    assert!(
        ended.is_ok(),
        "the connection outlived its age and grace by seconds"
    );
    drop(held);
    // A client reconnects and is served.
    let claimed = world
        .client()
        .await
        .claim(authorized(
            &world.tenant_a,
            claim_json("payments.charge", "after-age", "{}"),
        ))
        .await
        .expect("served");
    assert_eq!(outcome_name(&claimed.into_inner()), "acquired");
}

/// A Claim of a fresh key on `sender`'s connection: its status.
async fn claim_a_fresh_key(sender: &RawSender, addr: SocketAddr, token: &str) -> Status {
    let key = format!("fresh-{}", fresh_uuid());
    answer_to(
        sender,
        call_headers(addr, "Claim", Some(token)),
        framed(&claim_json("payments.charge", &key, "{}")),
        true,
    )
    .await
}
