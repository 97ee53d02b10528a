//! The API listener's bounds, seen from a raw HTTP/2 client that can do what
//! a tonic client never does: declare a message and not send it, stall
//! halfway through a body, read the server's SETTINGS. These bounds are the
//! transport's, not the store's: the tests run on the embedded store only.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use idemd::app::{ConnectionSettings, ServerSettings};
use idemd::grpc::admission::AdmissionSettings;
use idemd::proto;
use idemd::proto::idempotency_service_client::IdempotencyServiceClient;
use prost::Message;
use tokio::net::TcpStream;
use tonic::codegen::{Bytes, http};
use tonic::transport::Channel;
use tonic::{Code, Status};

use crate::harness::{
    Backend, ServerConfig, World, assert_status, authorized, claim_json, fresh_uuid, outcome_name,
    test_limits,
};

/// How long a test waits for an answer the server owes it. Not a timing
/// assertion: a bound that is missing shows as no answer at all, and the
/// test fails here instead of hanging.
const OWED_ANSWER: Duration = Duration::from_secs(10);

pub type RawSender = h2::client::SendRequest<Bytes>;
pub type RawConnection = h2::client::Connection<TcpStream, Bytes>;

/// An HTTP/2 connection to the API, driven by nobody yet.
pub async fn raw_connect(addr: SocketAddr) -> (RawSender, RawConnection) {
    let tcp = TcpStream::connect(addr).await.expect("connect");
    h2::client::handshake(tcp).await.expect("h2 handshake")
}

/// The same, its connection driven by a task of its own.
pub async fn raw_client(addr: SocketAddr) -> RawSender {
    let (sender, connection) = raw_connect(addr).await;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    sender
}

/// The headers of a call of the API's `method`, with a bearer token or none.
pub fn call_headers(addr: SocketAddr, method: &str, token: Option<&str>) -> http::Request<()> {
    let mut builder = http::Request::builder()
        .method("POST")
        .uri(format!("http://{addr}/idem.v1.IdempotencyService/{method}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    if let Some(token) = token {
        builder = builder.header("authorization", format!("Bearer {token}"));
    }
    builder.body(()).expect("a request")
}

/// gRPC's message prefix: uncompressed, `length` bytes follow.
pub fn message_prefix(length: usize) -> Bytes {
    let length = u32::try_from(length).expect("a length gRPC can frame");
    let mut prefix = vec![0_u8];
    prefix.extend_from_slice(&length.to_be_bytes());
    Bytes::from(prefix)
}

pub fn framed(message: &impl Message) -> Bytes {
    let body = message.encode_to_vec();
    let mut framed = message_prefix(body.len()).to_vec();
    framed.extend_from_slice(&body);
    Bytes::from(framed)
}

/// The status of a response: in its headers (trailers-only, as every
/// refusal is) or, after the body, in its trailers.
pub async fn status_of(response: http::Response<h2::RecvStream>) -> Status {
    if let Some(status) = Status::from_header_map(response.headers()) {
        return status;
    }
    let mut body = response.into_body();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.expect("response body");
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    let trailers = body.trailers().await.expect("trailers").expect("some");
    Status::from_header_map(&trailers).expect("a grpc-status")
}

/// Sends `headers` and `data`, leaving the request body open unless `end`,
/// and returns the status the server answers with.
pub async fn answer_to(
    sender: &RawSender,
    headers: http::Request<()>,
    data: Bytes,
    end: bool,
) -> Status {
    let mut sender = sender.clone().ready().await.expect("a stream");
    let (response, mut body) = sender.send_request(headers, false).expect("send");
    body.send_data(data, end).expect("data");
    let response = tokio::time::timeout(OWED_ANSWER, response)
        .await
        .expect("the server answers without the rest of the body")
        .expect("a response");
    // Kept open until answered: the body never ended.
    drop(body);
    status_of(response).await
}

#[tokio::test]
async fn each_connection_is_offered_a_bounded_number_of_streams() {
    let config = ServerConfig {
        server: ServerSettings {
            max_concurrent_streams: 7,
            ..ServerSettings::default()
        },
        ..ServerConfig::default()
    };
    let world = World::start_configured(Backend::sqlite().await, test_limits(), config).await;
    let (sender, mut connection) = raw_connect(world.server.addr).await;
    let call = answer_to(
        &sender,
        call_headers(world.server.addr, "Lookup", Some(&world.tenant_a)),
        framed(&proto::LookupRequest {
            target: Some(proto::lookup_request::Target::OperationId(
                fresh_uuid().to_string(),
            )),
            include_history: false,
            ..Default::default()
        }),
        true,
    );
    // One round trip: the server's SETTINGS came before its answer.
    let status = tokio::select! {
        status = call => status,
        ended = &mut connection => panic!("the connection ended: {ended:?}"),
    };
    assert_status(&status, Code::NotFound, "OPERATION_NOT_FOUND");
    assert_eq!(connection.max_concurrent_send_streams(), 7);
}

#[tokio::test]
async fn a_message_longer_than_any_legal_request_is_refused_from_its_length_prefix() {
    let limits = test_limits();
    let limit = limits.max_request_bytes();
    let world = World::start_with(Backend::sqlite().await, limits.clone()).await;
    let sender = raw_client(world.server.addr).await;

    // One byte over the limit is declared; 16 KiB of it are sent, and the
    // stream stays open. The answer comes from the prefix alone: the server
    // neither waits for nor buffers the rest.
    let mut data = message_prefix(limit + 1).to_vec();
    data.extend_from_slice(&[0_u8; 16 * 1024]);
    let status = answer_to(
        &sender,
        call_headers(world.server.addr, "Complete", Some(&world.tenant_a)),
        Bytes::from(data),
        false,
    )
    .await;
    assert_status(&status, Code::ResourceExhausted, "REQUEST_TOO_LARGE");

    // The connection still serves, and the largest legal request is decoded
    // (then judged: its operation does not exist).
    let mut client = world.client().await;
    let metadata_entry = |index: usize| {
        let name = format!("m{index:02}");
        let value = "v".repeat(limits.max_metadata_entry_bytes - name.len());
        (name, value)
    };
    let largest = proto::CompleteRequest {
        operation_id: fresh_uuid().to_string(),
        fence: u64::MAX,
        result: Some(proto::Result {
            body: vec![0xff; limits.max_result_bytes],
            content_type: "t".repeat(limits.max_content_type_bytes),
            metadata: (0..limits.max_metadata_entries)
                .map(metadata_entry)
                .collect::<HashMap<_, _>>(),
        }),
    };
    assert!(largest.encoded_len() < limit);
    let status = client
        .complete(authorized(&world.tenant_a, largest))
        .await
        .expect_err("no such operation");
    assert_status(&status, Code::NotFound, "OPERATION_NOT_FOUND");
    let status = answer_to(
        &sender,
        call_headers(world.server.addr, "Claim", Some(&world.tenant_a)),
        framed(&claim_json("payments.charge", "after-refusal", "{}")),
        true,
    )
    .await;
    assert_eq!(status.code(), Code::Ok, "{status:?}");
}

#[tokio::test]
async fn a_request_body_that_stalls_is_cut_off_by_the_request_timeout() {
    let config = ServerConfig {
        admission: AdmissionSettings {
            request_timeout: Duration::from_millis(300),
            ..AdmissionSettings::default()
        },
        ..ServerConfig::default()
    };
    let world = World::start_configured(Backend::sqlite().await, test_limits(), config).await;
    let sender = raw_client(world.server.addr).await;

    // A hundred bytes declared, ten sent, then nothing.
    let mut data = message_prefix(100).to_vec();
    data.extend_from_slice(&[0_u8; 10]);
    let status = answer_to(
        &sender,
        call_headers(world.server.addr, "Claim", Some(&world.tenant_a)),
        Bytes::from(data),
        false,
    )
    .await;
    assert_status(&status, Code::DeadlineExceeded, "REQUEST_TIMEOUT");

    let claimed = world
        .client()
        .await
        .claim(authorized(
            &world.tenant_a,
            claim_json("payments.charge", "in-time", "{}"),
        ))
        .await
        .expect("a call in time is served")
        .into_inner();
    assert_eq!(outcome_name(&claimed), "acquired");
}

/// Whether the server closes `stream` (end of file, or a reset) before the
/// test's patience runs out; a connection it keeps open fails the test.
pub async fn closed_by_the_server(mut stream: TcpStream) -> bool {
    use tokio::io::AsyncReadExt;
    let mut buffer = [0_u8; 64];
    loop {
        match tokio::time::timeout(OWED_ANSWER, stream.read(&mut buffer)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            // What an HTTP/2 server sends first (its SETTINGS): read on.
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test]
async fn connections_that_send_nothing_are_closed_after_the_handshake_timeout() {
    let config = ServerConfig {
        connections: ConnectionSettings {
            handshake_timeout: Duration::from_millis(200),
            ..ConnectionSettings::default()
        },
        ..ServerConfig::default()
    };
    let world = World::start_configured(Backend::sqlite().await, test_limits(), config).await;
    let mut silent = Vec::new();
    for _ in 0..100 {
        silent.push(
            TcpStream::connect(world.server.addr)
                .await
                .expect("connect"),
        );
    }
    let mut closed = tokio::task::JoinSet::new();
    for stream in silent {
        closed.spawn(closed_by_the_server(stream));
    }
    let closed = closed.join_all().await;
    assert_eq!(closed.iter().filter(|closed| **closed).count(), 100);

    let claimed = world
        .client()
        .await
        .claim(authorized(
            &world.tenant_a,
            claim_json("payments.charge", "after-silence", "{}"),
        ))
        .await
        .expect("a real client is served")
        .into_inner();
    assert_eq!(outcome_name(&claimed), "acquired");
}

#[tokio::test]
async fn the_connection_past_the_limit_is_closed_at_once() {
    let config = ServerConfig {
        connections: ConnectionSettings {
            max_connections: 3,
            ..ConnectionSettings::default()
        },
        ..ServerConfig::default()
    };
    let world = World::start_configured(Backend::sqlite().await, test_limits(), config).await;
    let mut open = Vec::new();
    for _ in 0..3 {
        open.push(
            TcpStream::connect(world.server.addr)
                .await
                .expect("connect"),
        );
    }
    // Accepted in order: the fourth finds no place and is closed, while the
    // first three (silent, well within the handshake timeout) stay open.
    let fourth = TcpStream::connect(world.server.addr)
        .await
        .expect("connect");
    assert!(closed_by_the_server(fourth).await);
    let rendered = world.server.application.service.metrics().render();
    assert!(
        rendered.contains("idemd_connections_refused_total 1"),
        "{rendered}"
    );

    // Closed connections give their place back.
    drop(open);
    for attempt in 0.. {
        let channel = Channel::from_shared(format!("http://{}", world.server.addr))
            .expect("uri")
            .connect()
            .await;
        let called = match channel {
            Ok(channel) => {
                IdempotencyServiceClient::new(channel)
                    .claim(authorized(
                        &world.tenant_a,
                        claim_json("payments.charge", "after-limit", "{}"),
                    ))
                    .await
            }
            Err(error) => Err(Status::unavailable(error.to_string())),
        };
        match called {
            Ok(_) => break,
            Err(status) => {
                assert!(attempt < 200, "never served again: {status:?}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

#[tokio::test]
async fn a_peer_that_stops_answering_pings_is_closed_by_http2_keepalive() {
    use tokio::io::AsyncWriteExt;
    let config = ServerConfig {
        server: ServerSettings {
            http2_keepalive_interval: Duration::from_millis(100),
            http2_keepalive_timeout: Duration::from_millis(100),
            ..ServerSettings::default()
        },
        // Longer than the test waits: only keepalive can close the peer.
        connections: ConnectionSettings {
            idle_timeout: Duration::from_secs(60),
            ..ConnectionSettings::default()
        },
        ..ServerConfig::default()
    };
    let world = World::start_configured(Backend::sqlite().await, test_limits(), config).await;
    // A client preface and an empty SETTINGS frame, then silence: no
    // SETTINGS ack, no PING ack, ever.
    let mut stream = TcpStream::connect(world.server.addr)
        .await
        .expect("connect");
    stream
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .expect("preface");
    assert!(closed_by_the_server(stream).await);
}
