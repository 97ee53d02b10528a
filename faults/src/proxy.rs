//! A fault-injecting TCP proxy of our own, between the clients and a replica
//! (HTTP/2, faults per request and per response) or between the replicas and
//! Postgres (raw bytes, faults per connection: a frozen connection).
//!
//! HTTP/2 is read frame by frame (9-byte header, then the payload) but never
//! rewritten: the first HEADERS frame of a stream from the client is a new
//! request, the first HEADERS frame of a stream from the server is its
//! response (the handler has returned: what it wrote is committed).
//! - lose a reply: the response's HEADERS frame is not forwarded and the
//!   connection is cut, so the client sees a transport error after the server
//!   acted (and every other call on that connection is cut with it);
//! - delay a reply: the response is held before it is forwarded;
//! - reset a request mid-stream: its HEADERS frame is forwarded, then the
//!   connection is cut before its body, so the server sees a half request;
//! - freeze: nothing is forwarded in either direction until thawed, while
//!   the connections stay open (a database connection that hangs).
//!
//! Duplicated requests need HTTP/2 terminated (new streams, HPACK state of
//! their own): the duplicating stage in `duplicator/` does that, in front
//! of this proxy.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::lock::locked;
use crate::rng::Rng;

const PREFACE_LEN: usize = 24;
const FRAME_HEADER_LEN: usize = 9;
const HEADERS: u8 = 0x1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// gRPC over cleartext HTTP/2 (prior knowledge, as tonic speaks it).
    Http2,
    /// Bytes as they come (Postgres): only freezing applies.
    Raw,
}

/// Random faults, as probabilities per request or response.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct FaultRates {
    pub(crate) lose_reply: f64,
    pub(crate) delay_reply: f64,
    pub(crate) max_delay: Duration,
    pub(crate) reset_request: f64,
    /// Per request, in the duplicating stage (`duplicator/`): sent a second
    /// time while the original is in flight, or after it was answered.
    pub(crate) duplicate_at_once: f64,
    pub(crate) duplicate_after_answer: f64,
}

/// A fault for one numbered request or response (1-based, over all
/// connections), for tests and schedules that need it exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Armed {
    LoseReply,
    DelayReply(Duration),
    ResetRequest,
}

#[derive(Debug, Default)]
pub(crate) struct ProxyCounters {
    pub(crate) connections: AtomicU64,
    pub(crate) requests: AtomicU64,
    pub(crate) responses: AtomicU64,
    pub(crate) replies_lost: AtomicU64,
    pub(crate) replies_delayed: AtomicU64,
    pub(crate) requests_reset: AtomicU64,
}

impl ProxyCounters {
    pub(crate) fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::SeqCst)
    }
}

#[derive(Debug)]
struct Shared {
    protocol: Protocol,
    rates: Mutex<FaultRates>,
    armed_requests: Mutex<HashMap<u64, Armed>>,
    armed_replies: Mutex<HashMap<u64, Armed>>,
    counters: ProxyCounters,
    frozen: watch::Sender<bool>,
    seed: Mutex<Rng>,
}

/// A proxy listening on `addr`, forwarding to one upstream.
#[derive(Debug)]
pub(crate) struct Proxy {
    pub(crate) addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl Proxy {
    pub(crate) async fn start(
        upstream: SocketAddr,
        protocol: Protocol,
        seed: u64,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (frozen, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            protocol,
            rates: Mutex::new(FaultRates::default()),
            armed_requests: Mutex::default(),
            armed_replies: Mutex::default(),
            counters: ProxyCounters::default(),
            frozen,
            seed: Mutex::new(Rng::seeded(seed)),
        });
        let accepting = shared.clone();
        let accept = tokio::spawn(async move {
            while let Ok((downstream, _)) = listener.accept().await {
                let shared = accepting.clone();
                tokio::spawn(async move {
                    // A down upstream (a killed replica) is a refused
                    // connection for the client too.
                    let Ok(upstream) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    shared.counters.connections.fetch_add(1, Ordering::SeqCst);
                    relay(downstream, upstream, shared).await;
                });
            }
        });
        Ok(Self {
            addr,
            shared,
            accept,
        })
    }

    pub(crate) fn set_rates(&self, rates: FaultRates) {
        *locked(&self.shared.rates) = rates;
    }

    #[cfg(test)]
    pub(crate) fn arm_request(&self, number: u64, fault: Armed) {
        locked(&self.shared.armed_requests).insert(number, fault);
    }

    #[cfg(test)]
    pub(crate) fn arm_reply(&self, number: u64, fault: Armed) {
        locked(&self.shared.armed_replies).insert(number, fault);
    }

    /// While frozen, no byte is forwarded either way; connections stay open.
    pub(crate) fn set_frozen(&self, frozen: bool) {
        self.shared.frozen.send_replace(frozen);
    }

    pub(crate) fn counters(&self) -> &ProxyCounters {
        &self.shared.counters
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn relay(downstream: TcpStream, upstream: TcpStream, shared: Arc<Shared>) {
    let _ = downstream.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let (down_read, down_write) = downstream.into_split();
    let (up_read, up_write) = upstream.into_split();
    let connection_rng = locked(&shared.seed).fork();
    let (mut request_rng, mut reply_rng) = {
        let mut rng = connection_rng;
        (rng.fork(), rng.fork())
    };
    // Whichever direction ends first ends the connection: both halves are
    // dropped, which closes both sockets.
    match shared.protocol {
        Protocol::Raw => {
            tokio::select! {
                () = copy_raw(down_read, up_write, &shared) => {}
                () = copy_raw(up_read, down_write, &shared) => {}
            }
        }
        Protocol::Http2 => {
            tokio::select! {
                () = forward_requests(down_read, up_write, &shared, &mut request_rng) => {}
                () = forward_replies(up_read, down_write, &shared, &mut reply_rng) => {}
            }
        }
    }
}

async fn thawed(shared: &Shared) {
    let mut frozen = shared.frozen.subscribe();
    let _ = frozen.wait_for(|frozen| !*frozen).await;
}

async fn copy_raw(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    shared: &Shared,
) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        thawed(shared).await;
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}

/// One HTTP/2 frame: its 9-byte header and payload, as read.
struct Frame {
    header: [u8; FRAME_HEADER_LEN],
    payload: Vec<u8>,
}

impl Frame {
    async fn read(from: &mut (impl AsyncRead + Unpin)) -> Option<Self> {
        let mut header = [0u8; FRAME_HEADER_LEN];
        from.read_exact(&mut header).await.ok()?;
        let length =
            usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
        let mut payload = vec![0u8; length];
        from.read_exact(&mut payload).await.ok()?;
        Some(Self { header, payload })
    }

    fn kind(&self) -> u8 {
        self.header[3]
    }

    fn stream(&self) -> u32 {
        u32::from_be_bytes([
            self.header[5],
            self.header[6],
            self.header[7],
            self.header[8],
        ]) & 0x7fff_ffff
    }

    async fn write(&self, to: &mut (impl AsyncWrite + Unpin)) -> bool {
        to.write_all(&self.header).await.is_ok() && to.write_all(&self.payload).await.is_ok()
    }
}

async fn forward_requests(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    shared: &Shared,
    rng: &mut Rng,
) {
    let mut preface = [0u8; PREFACE_LEN];
    if from.read_exact(&mut preface).await.is_err() || to.write_all(&preface).await.is_err() {
        return;
    }
    let mut streams = HashSet::new();
    while let Some(frame) = Frame::read(&mut from).await {
        let mut reset = false;
        if frame.kind() == HEADERS && frame.stream() != 0 && streams.insert(frame.stream()) {
            let number = shared.counters.requests.fetch_add(1, Ordering::SeqCst) + 1;
            let armed = locked(&shared.armed_requests).remove(&number);
            let rate = locked(&shared.rates).reset_request;
            reset = armed == Some(Armed::ResetRequest) || (armed.is_none() && rng.chance(rate));
        }
        thawed(shared).await;
        if !frame.write(&mut to).await {
            return;
        }
        if reset {
            let _ = to.flush().await;
            shared
                .counters
                .requests_reset
                .fetch_add(1, Ordering::SeqCst);
            return;
        }
    }
}

async fn forward_replies(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    shared: &Shared,
    rng: &mut Rng,
) {
    let mut streams = HashSet::new();
    while let Some(frame) = Frame::read(&mut from).await {
        if frame.kind() == HEADERS && frame.stream() != 0 && streams.insert(frame.stream()) {
            let number = shared.counters.responses.fetch_add(1, Ordering::SeqCst) + 1;
            let armed = locked(&shared.armed_replies).remove(&number);
            let rates = *locked(&shared.rates);
            let fault = armed.or_else(|| {
                if rng.chance(rates.lose_reply) {
                    Some(Armed::LoseReply)
                } else if rng.chance(rates.delay_reply) {
                    Some(Armed::DelayReply(
                        rng.between(Duration::from_millis(1), rates.max_delay),
                    ))
                } else {
                    None
                }
            });
            match fault {
                Some(Armed::LoseReply) => {
                    shared.counters.replies_lost.fetch_add(1, Ordering::SeqCst);
                    return;
                }
                Some(Armed::DelayReply(delay)) => {
                    shared
                        .counters
                        .replies_delayed
                        .fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(delay).await;
                }
                Some(Armed::ResetRequest) | None => {}
            }
        }
        thawed(shared).await;
        if !frame.write(&mut to).await {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::mpsc;

    const DATA: u8 = 0x0;

    fn frame(kind: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let length = payload.len();
        let mut bytes = vec![
            (length >> 16) as u8,
            (length >> 8) as u8,
            length as u8,
            kind,
            0,
        ];
        bytes.extend_from_slice(&stream.to_be_bytes());
        bytes.extend_from_slice(payload);
        bytes
    }

    /// An upstream that answers each request HEADERS frame with a HEADERS
    /// frame on the same stream, and reports every frame (kind, stream) it
    /// got; `None` when the connection ended.
    async fn upstream() -> (SocketAddr, mpsc::UnboundedReceiver<Option<(u8, u32)>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (seen, frames) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((mut connection, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut preface = [0u8; PREFACE_LEN];
                    if connection.read_exact(&mut preface).await.is_err() {
                        return;
                    }
                    while let Some(got) = Frame::read(&mut connection).await {
                        let _ = seen.send(Some((got.kind(), got.stream())));
                        if got.kind() == HEADERS {
                            let reply = frame(HEADERS, got.stream(), b"reply");
                            if connection.write_all(&reply).await.is_err() {
                                break;
                            }
                        }
                    }
                    let _ = seen.send(None);
                });
            }
        });
        (addr, frames)
    }

    async fn send_request(proxy: &Proxy, stream: u32) -> TcpStream {
        let mut client = TcpStream::connect(proxy.addr).await.expect("connect");
        let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        bytes.extend(frame(HEADERS, stream, b"request"));
        bytes.extend(frame(DATA, stream, b"body"));
        client.write_all(&bytes).await.expect("write");
        client
    }

    async fn read_to_end(client: &mut TcpStream) -> Vec<u8> {
        let mut received = Vec::new();
        let _ = client.read_to_end(&mut received).await;
        received
    }

    #[tokio::test]
    async fn frames_pass_both_ways_unchanged() {
        let (addr, mut frames) = upstream().await;
        let proxy = Proxy::start(addr, Protocol::Http2, 1).await.expect("proxy");
        let mut client = send_request(&proxy, 1).await;
        let mut reply = vec![0u8; FRAME_HEADER_LEN + 5];
        client.read_exact(&mut reply).await.expect("reply");
        assert_eq!(reply, frame(HEADERS, 1, b"reply"));
        assert_eq!(frames.recv().await, Some(Some((HEADERS, 1))));
        assert_eq!(frames.recv().await, Some(Some((DATA, 1))));
        assert_eq!(ProxyCounters::get(&proxy.counters().requests), 1);
        assert_eq!(ProxyCounters::get(&proxy.counters().responses), 1);
    }

    #[tokio::test]
    async fn a_lost_reply_is_cut_after_the_server_got_the_whole_request() {
        let (addr, mut frames) = upstream().await;
        let proxy = Proxy::start(addr, Protocol::Http2, 1).await.expect("proxy");
        proxy.arm_reply(1, Armed::LoseReply);
        let mut client = send_request(&proxy, 1).await;
        assert_eq!(frames.recv().await, Some(Some((HEADERS, 1))));
        assert_eq!(frames.recv().await, Some(Some((DATA, 1))));
        assert!(read_to_end(&mut client).await.is_empty(), "no reply byte");
        assert_eq!(ProxyCounters::get(&proxy.counters().replies_lost), 1);
        // The next connection is not affected.
        let mut next = send_request(&proxy, 1).await;
        let mut reply = vec![0u8; FRAME_HEADER_LEN + 5];
        next.read_exact(&mut reply).await.expect("reply");
        assert_eq!(reply, frame(HEADERS, 1, b"reply"));
    }

    #[tokio::test]
    async fn a_reset_request_reaches_the_server_without_its_body() {
        let (addr, mut frames) = upstream().await;
        let proxy = Proxy::start(addr, Protocol::Http2, 1).await.expect("proxy");
        proxy.arm_request(1, Armed::ResetRequest);
        let mut client = send_request(&proxy, 1).await;
        assert_eq!(frames.recv().await, Some(Some((HEADERS, 1))));
        // The server's answer to the headers may or may not have come through
        // before the cut; its body never reached the server.
        let _ = read_to_end(&mut client).await;
        assert_eq!(frames.recv().await, Some(None));
        assert_eq!(ProxyCounters::get(&proxy.counters().requests_reset), 1);
    }

    #[tokio::test]
    async fn a_delayed_reply_still_arrives() {
        let (addr, _frames) = upstream().await;
        let proxy = Proxy::start(addr, Protocol::Http2, 1).await.expect("proxy");
        proxy.arm_reply(1, Armed::DelayReply(Duration::from_millis(50)));
        let started = tokio::time::Instant::now();
        let mut client = send_request(&proxy, 1).await;
        let mut reply = vec![0u8; FRAME_HEADER_LEN + 5];
        client.read_exact(&mut reply).await.expect("reply");
        assert_eq!(reply, frame(HEADERS, 1, b"reply"));
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert_eq!(ProxyCounters::get(&proxy.counters().replies_delayed), 1);
    }

    #[tokio::test]
    async fn random_faults_follow_their_rates() {
        let (addr, _frames) = upstream().await;
        let proxy = Proxy::start(addr, Protocol::Http2, 9).await.expect("proxy");
        proxy.set_rates(FaultRates {
            lose_reply: 1.0,
            ..FaultRates::default()
        });
        let mut client = send_request(&proxy, 1).await;
        assert!(read_to_end(&mut client).await.is_empty());
        assert_eq!(ProxyCounters::get(&proxy.counters().replies_lost), 1);
    }

    #[tokio::test]
    async fn a_frozen_raw_connection_forwards_nothing_until_thawed() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            if let Ok((mut connection, _)) = listener.accept().await {
                let mut buffer = [0u8; 4];
                while connection.read_exact(&mut buffer).await.is_ok() {
                    if connection.write_all(&buffer).await.is_err() {
                        return;
                    }
                }
            }
        });
        let proxy = Proxy::start(addr, Protocol::Raw, 1).await.expect("proxy");
        let mut client = TcpStream::connect(proxy.addr).await.expect("connect");
        client.write_all(b"ping").await.expect("write");
        let mut echo = [0u8; 4];
        client.read_exact(&mut echo).await.expect("echo");
        assert_eq!(&echo, b"ping");

        proxy.set_frozen(true);
        client.write_all(b"pong").await.expect("write");
        let held =
            tokio::time::timeout(Duration::from_millis(200), client.read_exact(&mut echo)).await;
        assert!(held.is_err(), "nothing is forwarded while frozen");
        proxy.set_frozen(false);
        client.read_exact(&mut echo).await.expect("echo after thaw");
        assert_eq!(&echo, b"pong");
    }
}
