//! A proxy stage that duplicates requests faithfully: it terminates HTTP/2
//! (h2's server side towards the clients, one h2 client connection of its own
//! towards the next hop per client connection), so a request it sends a
//! second time is a new stream with its own id and its own HPACK encoding,
//! as a retrying load balancer or a client library would send it. Re-sending
//! frames on a connection cannot do that: HPACK state and stream ids are the
//! connection's.
//!
//! Every request is forwarded as it arrives (headers at once, then its body
//! and trailers) and recorded. For a chosen fraction the very same request
//! (method, path, headers with the authorization, body, trailers) goes out a
//! second time on the same upstream connection:
//! - at once: as soon as the original's body is complete, while the original
//!   is still in flight at the server;
//! - after the answer: once the original's response has fully come back.
//!
//! The client gets one of the two responses (drawn up front) and the other
//! is read to its end and dropped: the server acted on both.
//!
//! The campaign chains it in front of the frame proxy (`proxy.rs`), whose
//! faults (lost, delayed replies, requests reset mid-stream) therefore also
//! hit the copies. When the upstream connection ends (the frame proxy cut it)
//! the client's connection is closed with every call on it, as it would be
//! without this stage.

use std::collections::HashMap;
use std::future::{Future, poll_fn};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

mod streams;

use bytes::Bytes;
use h2::RecvStream;
use h2::client::SendRequest;
use h2::server::SendResponse;
use http::Request;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use crate::lock::locked;
use crate::proxy::FaultRates;
use crate::rng::Rng;
use streams::{Head, copy_body, drain, open, relay, send_again};

/// Whose response the client gets when a request was sent twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    Original,
    Copy,
}

/// A request sent a second time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Duplicate {
    /// While the original is in flight.
    AtOnce(Answer),
    /// After the original's response came back.
    AfterAnswer(Answer),
}

#[derive(Debug, Default)]
pub(crate) struct DuplicatorCounters {
    pub(crate) requests: AtomicU64,
    pub(crate) duplicated_at_once: AtomicU64,
    pub(crate) duplicated_after_answer: AtomicU64,
    /// Duplicated requests whose client got the copy's response.
    pub(crate) answered_by_copy: AtomicU64,
}

#[derive(Debug)]
struct Shared {
    upstream: SocketAddr,
    rates: Mutex<FaultRates>,
    armed: Mutex<HashMap<u64, Duplicate>>,
    counters: DuplicatorCounters,
    seed: Mutex<Rng>,
}

impl Shared {
    /// Numbers the request (1-based, over all connections) and decides
    /// whether it is sent twice: an armed fault for its number, else the
    /// rates.
    fn decide(&self, rng: &mut Rng) -> Option<Duplicate> {
        let number = self.counters.requests.fetch_add(1, Ordering::SeqCst) + 1;
        let armed = locked(&self.armed).remove(&number);
        if armed.is_some() {
            return armed;
        }
        let rates = *locked(&self.rates);
        let answer = if rng.chance(0.5) {
            Answer::Original
        } else {
            Answer::Copy
        };
        if rng.chance(rates.duplicate_at_once) {
            Some(Duplicate::AtOnce(answer))
        } else if rng.chance(rates.duplicate_after_answer) {
            Some(Duplicate::AfterAnswer(answer))
        } else {
            None
        }
    }
}

/// The duplicating stage, listening on `addr`, forwarding to one upstream.
#[derive(Debug)]
pub(crate) struct Duplicator {
    pub(crate) addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl Duplicator {
    pub(crate) async fn start(upstream: SocketAddr, seed: u64) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            upstream,
            rates: Mutex::new(FaultRates::default()),
            armed: Mutex::default(),
            counters: DuplicatorCounters::default(),
            seed: Mutex::new(Rng::seeded(seed)),
        });
        let accepting = shared.clone();
        let accept = tokio::spawn(async move {
            while let Ok((downstream, _)) = listener.accept().await {
                tokio::spawn(serve(downstream, accepting.clone()));
            }
        });
        Ok(Self {
            addr,
            shared,
            accept,
        })
    }

    /// Only the duplication rates apply here.
    pub(crate) fn set_rates(&self, rates: FaultRates) {
        *locked(&self.shared.rates) = rates;
    }

    #[cfg(test)]
    pub(crate) fn arm(&self, number: u64, duplicate: Duplicate) {
        locked(&self.shared.armed).insert(number, duplicate);
    }

    pub(crate) fn counters(&self) -> &DuplicatorCounters {
        &self.shared.counters
    }
}

impl Drop for Duplicator {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// What a stream's handler needs of its connection.
#[derive(Clone)]
struct ConnectionHandle {
    upstream: SendRequest<Bytes>,
    /// A handler whose upstream call failed with the connection asks for the
    /// client's connection to be cut (rather than resetting its stream).
    cut: Arc<Notify>,
    /// Ends (the sender is dropped) once the client's connection is gone.
    closed: watch::Receiver<()>,
}

/// One client connection: its own upstream connection, and a handler task
/// per request. Ends, closing the client's connection, when either side
/// ends.
async fn serve(downstream: TcpStream, shared: Arc<Shared>) {
    let _ = downstream.set_nodelay(true);
    // A down upstream (a killed replica) is a closed connection for the
    // client too.
    let Ok(upstream) = TcpStream::connect(shared.upstream).await else {
        return;
    };
    let _ = upstream.set_nodelay(true);
    let Ok((sender, upstream_connection)) = h2::client::handshake(upstream).await else {
        return;
    };
    let mut upstream_open = tokio::spawn(upstream_connection);
    // Declared before the server connection so that it is dropped after it:
    // a handler waiting on `closed` wakes once the socket is already closed.
    let (_closed_sender, closed) = watch::channel(());
    let Ok(mut server) = h2::server::handshake(downstream).await else {
        upstream_open.abort();
        return;
    };
    let mut rng = locked(&shared.seed).fork();
    let handle = ConnectionHandle {
        upstream: sender,
        cut: Arc::new(Notify::new()),
        closed,
    };
    loop {
        tokio::select! {
            _ = &mut upstream_open => break,
            () = handle.cut.notified() => break,
            accepted = server.accept() => {
                let Some(Ok((request, respond))) = accepted else {
                    break;
                };
                let duplicate = shared.decide(&mut rng);
                tokio::spawn(forward(request, respond, handle.clone(), duplicate, shared.clone()));
            }
        }
    }
    drop(server);
    upstream_open.abort();
}

/// `work`, unless the client resets its stream first (it gave up on the
/// call: its task was aborted, or its deadline passed). Dropping the upstream
/// stream then resets it at the server too, as the client's reset would.
async fn unless_reset<T>(
    respond: &mut SendResponse<Bytes>,
    work: impl Future<Output = T>,
) -> Option<T> {
    tokio::select! {
        output = work => Some(output),
        _ = poll_fn(|context| respond.poll_reset(context)) => None,
    }
}

/// An upstream call failed. A stream the server reset is reset for the
/// client with the same reason; anything else is the connection's failure
/// (cut by the frame proxy, the replica gone): the client's connection is cut
/// too, and this handler waits for that so that its stream is not reset
/// first (a reset would reach the client as a status, not as the cut).
async fn upstream_failed(
    error: &h2::Error,
    respond: &mut SendResponse<Bytes>,
    handle: &mut ConnectionHandle,
) {
    match error.reason() {
        Some(reason) if error.is_reset() && error.is_remote() => respond.send_reset(reason),
        _ => {
            handle.cut.notify_one();
            while handle.closed.changed().await.is_ok() {}
        }
    }
}

/// One request from the client: forwarded, perhaps duplicated, answered.
async fn forward(
    request: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    mut handle: ConnectionHandle,
    duplicate: Option<Duplicate>,
    shared: Arc<Shared>,
) {
    let (parts, body) = request.into_parts();
    let head = Head::new(parts);
    let opened = unless_reset(
        &mut respond,
        open(&handle.upstream, &head, body.is_end_stream()),
    )
    .await;
    let (original, stream) = match opened {
        None => return,
        Some(Err(error)) => return upstream_failed(&error, &mut respond, &mut handle).await,
        Some(Ok(opened)) => opened,
    };
    let recording = tokio::spawn(copy_body(body, stream));
    let count = |counter: &AtomicU64| counter.fetch_add(1, Ordering::SeqCst);
    let answered = match duplicate {
        None => original,
        Some(Duplicate::AtOnce(answer)) => {
            let Some(Ok(Ok(recorded))) = unless_reset(&mut respond, recording).await else {
                return;
            };
            let copy = match send_again(&handle.upstream, &head, &recorded).await {
                Ok(copy) => copy,
                Err(error) => return upstream_failed(&error, &mut respond, &mut handle).await,
            };
            count(&shared.counters.duplicated_at_once);
            match answer {
                Answer::Original => {
                    tokio::spawn(drain(copy));
                    original
                }
                Answer::Copy => {
                    count(&shared.counters.answered_by_copy);
                    tokio::spawn(drain(original));
                    copy
                }
            }
        }
        Some(Duplicate::AfterAnswer(answer)) => {
            let Some(Ok(Ok(recorded))) = unless_reset(&mut respond, recording).await else {
                return;
            };
            match answer {
                Answer::Original => {
                    let response = match unless_reset(&mut respond, original).await {
                        None => return,
                        Some(Err(error)) => {
                            return upstream_failed(&error, &mut respond, &mut handle).await;
                        }
                        Some(Ok(response)) => response,
                    };
                    // The client has its answer; the copy follows it.
                    if relay(response, &mut respond).await.is_ok()
                        && let Ok(copy) = send_again(&handle.upstream, &head, &recorded).await
                    {
                        count(&shared.counters.duplicated_after_answer);
                        let _ = drain(copy).await;
                    }
                    return;
                }
                Answer::Copy => {
                    match unless_reset(&mut respond, drain(original)).await {
                        None => return,
                        Some(Err(error)) => {
                            return upstream_failed(&error, &mut respond, &mut handle).await;
                        }
                        Some(Ok(())) => {}
                    }
                    match send_again(&handle.upstream, &head, &recorded).await {
                        Ok(copy) => {
                            count(&shared.counters.duplicated_after_answer);
                            count(&shared.counters.answered_by_copy);
                            copy
                        }
                        Err(error) => {
                            return upstream_failed(&error, &mut respond, &mut handle).await;
                        }
                    }
                }
            }
        }
    };
    match unless_reset(&mut respond, answered).await {
        None => {}
        Some(Err(error)) => upstream_failed(&error, &mut respond, &mut handle).await,
        Some(Ok(response)) => {
            let _ = relay(response, &mut respond).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{HeaderMap, Method, Response};
    use std::time::Duration;
    use tokio::sync::mpsc;
    use tokio::time::Instant;

    /// What the test upstream saw of one request.
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Seen {
        path: String,
        authorization: Option<String>,
        body: Vec<u8>,
        trailers: Option<HeaderMap>,
        /// When its head arrived, and how many responses had been sent then.
        arrived: Instant,
        answered_before: u64,
    }

    /// A real HTTP/2 server (h2) that answers each request after `delay`
    /// with "answer-N" (N: its arrival number) and a `grpc-status` trailer,
    /// and reports every request it got.
    async fn upstream(delay: Duration) -> (SocketAddr, mpsc::UnboundedReceiver<Seen>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (seen, requests) = mpsc::unbounded_channel();
        let arrivals = Arc::new(AtomicU64::new(0));
        let answers = Arc::new(AtomicU64::new(0));
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (seen, arrivals, answers) = (seen.clone(), arrivals.clone(), answers.clone());
                tokio::spawn(async move {
                    let mut connection = h2::server::handshake(socket).await.expect("handshake");
                    while let Some(Ok((request, mut respond))) = connection.accept().await {
                        let (seen, arrivals, answers) =
                            (seen.clone(), arrivals.clone(), answers.clone());
                        tokio::spawn(async move {
                            let number = arrivals.fetch_add(1, Ordering::SeqCst) + 1;
                            let arrived = Instant::now();
                            let answered_before = answers.load(Ordering::SeqCst);
                            let path = request.uri().path().to_owned();
                            let authorization = request
                                .headers()
                                .get("authorization")
                                .and_then(|value| value.to_str().ok())
                                .map(str::to_owned);
                            let mut body = request.into_body();
                            let mut bytes = Vec::new();
                            while let Some(chunk) = body.data().await {
                                let chunk = chunk.expect("chunk");
                                let _ = body.flow_control().release_capacity(chunk.len());
                                bytes.extend_from_slice(&chunk);
                            }
                            let trailers = body.trailers().await.expect("trailers");
                            let _ = seen.send(Seen {
                                path,
                                authorization,
                                body: bytes,
                                trailers,
                                arrived,
                                answered_before,
                            });
                            tokio::time::sleep(delay).await;
                            let mut stream = respond
                                .send_response(Response::new(()), false)
                                .expect("response");
                            stream
                                .send_data(Bytes::from(format!("answer-{number}")), false)
                                .expect("data");
                            let mut trailers = HeaderMap::new();
                            trailers.insert("grpc-status", "0".parse().expect("value"));
                            stream.send_trailers(trailers).expect("trailers");
                            answers.fetch_add(1, Ordering::SeqCst);
                        });
                    }
                });
            }
        });
        (addr, requests)
    }

    fn request_trailers() -> HeaderMap {
        let mut trailers = HeaderMap::new();
        trailers.insert("x-checksum", "abc".parse().expect("value"));
        trailers
    }

    /// One call through the stage: headers with an authorization, a body in
    /// two chunks, trailers. Returns the response's body and trailers.
    async fn call(addr: SocketAddr) -> Result<(String, Option<HeaderMap>), h2::Error> {
        let socket = TcpStream::connect(addr).await.expect("connect");
        let (sender, connection) = h2::client::handshake(socket).await?;
        tokio::spawn(connection);
        let request = Request::builder()
            .method(Method::POST)
            .uri(format!("http://{addr}/idem.v1.Idempotency/Claim"))
            .header("authorization", "Bearer token-1")
            .body(())
            .expect("request");
        let mut sender = sender.ready().await?;
        let (response, mut stream) = sender.send_request(request, false)?;
        stream.send_data(Bytes::from_static(b"hello "), false)?;
        stream.send_data(Bytes::from_static(b"world"), false)?;
        stream.send_trailers(request_trailers())?;
        let mut body = response.await?.into_body();
        let mut bytes = Vec::new();
        while let Some(chunk) = body.data().await {
            bytes.extend_from_slice(&chunk?);
        }
        let trailers = body.trailers().await?;
        Ok((String::from_utf8(bytes).expect("utf-8"), trailers))
    }

    fn the_request(seen: &Seen) {
        assert_eq!(seen.path, "/idem.v1.Idempotency/Claim");
        assert_eq!(seen.authorization.as_deref(), Some("Bearer token-1"));
        assert_eq!(seen.body, b"hello world");
        assert_eq!(seen.trailers, Some(request_trailers()));
    }

    fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::SeqCst)
    }

    #[tokio::test]
    async fn requests_pass_through_unchanged() {
        let (addr, mut seen) = upstream(Duration::ZERO).await;
        let duplicator = Duplicator::start(addr, 1).await.expect("start");
        let (body, trailers) = call(duplicator.addr).await.expect("call");
        assert_eq!(body, "answer-1");
        assert_eq!(
            trailers.and_then(|t| t.get("grpc-status").cloned()),
            Some("0".parse().expect("value"))
        );
        the_request(&seen.recv().await.expect("seen"));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(seen.try_recv().is_err(), "sent once");
        let counters = duplicator.counters();
        assert_eq!(get(&counters.requests), 1);
        assert_eq!(get(&counters.duplicated_at_once), 0);
        assert_eq!(get(&counters.duplicated_after_answer), 0);
    }

    #[tokio::test]
    async fn a_request_duplicated_at_once_reaches_the_server_twice_while_in_flight() {
        let (addr, mut seen) = upstream(Duration::from_millis(300)).await;
        let duplicator = Duplicator::start(addr, 1).await.expect("start");
        duplicator.arm(1, Duplicate::AtOnce(Answer::Copy));
        let (body, _) = call(duplicator.addr).await.expect("call");
        // The client got the copy's response: the second the server took.
        assert_eq!(body, "answer-2");
        let (first, second) = (seen.recv().await.expect("1"), seen.recv().await.expect("2"));
        the_request(&first);
        the_request(&second);
        assert_eq!(
            second.answered_before, 0,
            "sent before the original's answer"
        );
        assert!(second.arrived - first.arrived < Duration::from_millis(300));
        let counters = duplicator.counters();
        assert_eq!(get(&counters.duplicated_at_once), 1);
        assert_eq!(get(&counters.answered_by_copy), 1);
        assert_eq!(get(&counters.duplicated_after_answer), 0);
    }

    #[tokio::test]
    async fn a_request_duplicated_after_the_answer_follows_it() {
        let (addr, mut seen) = upstream(Duration::from_millis(50)).await;
        let duplicator = Duplicator::start(addr, 1).await.expect("start");
        duplicator.arm(1, Duplicate::AfterAnswer(Answer::Original));
        let (body, _) = call(duplicator.addr).await.expect("call");
        assert_eq!(body, "answer-1");
        let (first, second) = (seen.recv().await.expect("1"), seen.recv().await.expect("2"));
        the_request(&first);
        the_request(&second);
        assert_eq!(second.answered_before, 1, "sent once the original answered");
        // The next call on a new connection is answered by the server's third.
        let (body, _) = call(duplicator.addr).await.expect("call");
        assert_eq!(body, "answer-3");
        let counters = duplicator.counters();
        assert_eq!(get(&counters.requests), 2);
        assert_eq!(get(&counters.duplicated_after_answer), 1);
        assert_eq!(get(&counters.answered_by_copy), 0);
    }

    #[tokio::test]
    async fn the_copy_sent_after_the_answer_can_be_the_answer() {
        let (addr, mut seen) = upstream(Duration::from_millis(20)).await;
        let duplicator = Duplicator::start(addr, 1).await.expect("start");
        duplicator.arm(1, Duplicate::AfterAnswer(Answer::Copy));
        let (body, _) = call(duplicator.addr).await.expect("call");
        assert_eq!(body, "answer-2");
        let (_, second) = (seen.recv().await.expect("1"), seen.recv().await.expect("2"));
        the_request(&second);
        assert_eq!(second.answered_before, 1);
        assert_eq!(get(&duplicator.counters().answered_by_copy), 1);
    }

    #[tokio::test]
    async fn random_duplicates_follow_their_rates() {
        let (addr, mut seen) = upstream(Duration::ZERO).await;
        let duplicator = Duplicator::start(addr, 5).await.expect("start");
        duplicator.set_rates(FaultRates {
            duplicate_at_once: 1.0,
            ..FaultRates::default()
        });
        call(duplicator.addr).await.expect("call");
        seen.recv().await.expect("1");
        seen.recv().await.expect("2");
        assert_eq!(get(&duplicator.counters().duplicated_at_once), 1);
    }

    /// The upstream connection cut after the request (a lost reply in the
    /// frame proxy): the client sees its connection end, not a status.
    #[tokio::test]
    async fn a_cut_upstream_connection_cuts_the_clients() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut connection = h2::server::handshake(socket).await.expect("handshake");
                    // The first request's head arrives; then the connection
                    // is dropped without an answer.
                    let _ = connection.accept().await;
                });
            }
        });
        let duplicator = Duplicator::start(addr, 1).await.expect("start");
        let error = call(duplicator.addr).await.expect_err("cut");
        assert!(
            !error.is_reset(),
            "the connection ended, no stream reset: {error:?}"
        );
        assert!(error.is_io() || error.is_go_away(), "{error:?}");
    }
}
