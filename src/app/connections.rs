//! The API's own accept loop, fed to tonic as a stream of connections, so
//! that connections are bounded before HTTP/2 sees them: at most
//! `max_connections` open at once (one more is accepted and closed at
//! once), a TLS handshake must finish within `handshake_timeout`, the first
//! bytes after it (the HTTP/2 preface) must come within the same time, and
//! a connection from which nothing is read for `idle_timeout` is closed
//! (HTTP/2 keepalive PINGs make every live peer answer well within it).
//! One source address may hold at most `max_connections_per_source` of
//! them, so that one peer (whose PING answers keep its connections from
//! ever being idle) cannot hold every slot; the connection's age is bounded
//! by the HTTP/2 server (`ServerSettings::max_connection_age`). An
//! accept error that is not one connection's (EMFILE, ENFILE, ENOBUFS…)
//! backs off instead of spinning.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::time::{Instant, Sleep};
use tokio_rustls::server::TlsStream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::{Connected, TcpConnectInfo};
use tracing::{debug, warn};

use super::tls::{Loaded, ServerTls};
use crate::auth::PeerCertificate;
use crate::grpc::peer::ConnectionInfo;
use crate::metrics::Metrics;

/// Connections open at once by default.
const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
/// Connections open at once from one source address by default: a tenth
/// of all, so that one peer cannot take them, and enough for a proxy's.
const DEFAULT_MAX_CONNECTIONS_PER_SOURCE: usize = 1024;
/// TLS handshake, and the first bytes after it, by default.
const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Read silence after which a connection is closed, by default: well above
/// the default HTTP/2 keepalive interval plus its timeout (30s + 10s).
const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// The first and the longest pause after an accept error of the process
/// (out of file descriptors, of buffers): the condition passes by itself
/// only as connections close, so retrying at once would spin.
const ACCEPT_BACKOFF_START: Duration = Duration::from_millis(5);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionSettings {
    pub max_connections: usize,
    /// 0: no cap per source address.
    pub max_connections_per_source: usize,
    pub handshake_timeout: Duration,
    pub idle_timeout: Duration,
}

impl Default for ConnectionSettings {
    fn default() -> Self {
        Self {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_source: DEFAULT_MAX_CONNECTIONS_PER_SOURCE,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
        }
    }
}

/// Accepted connections of `listener`, TLS done when `tls` is given (with
/// the configuration in force when each arrives, and its client
/// certificate judged), until the stream is dropped (tonic drops it when it
/// stops accepting; the listener closes with it).
pub fn incoming(
    listener: TcpListener,
    settings: ConnectionSettings,
    tls: Option<ServerTls>,
    metrics: Metrics,
) -> ReceiverStream<io::Result<Connection>> {
    // Handshaken connections wait here for tonic; their permits bound it.
    let (sender, receiver) = mpsc::channel(64);
    tokio::spawn(accept_loop(listener, settings, tls, metrics, sender));
    ReceiverStream::new(receiver)
}

/// Errors of one connection (it went away before it was accepted): the
/// next accept may well succeed. Any other error is the process's.
fn is_one_connections(error: &io::Error) -> bool {
    use io::ErrorKind::{
        ConnectionAborted, ConnectionRefused, ConnectionReset, Interrupted, TimedOut, WouldBlock,
    };
    matches!(
        error.kind(),
        ConnectionAborted
            | ConnectionRefused
            | ConnectionReset
            | Interrupted
            | TimedOut
            | WouldBlock
    )
}

/// Connections open per source address; an address with none has no
/// entry, so the map holds at most as many entries as connections.
#[derive(Clone, Default)]
struct Sources(Arc<Mutex<HashMap<IpAddr, usize>>>);

impl Sources {
    /// Counts a connection from `address` in, unless it has `limit` open.
    fn enter(&self, address: IpAddr, limit: usize) -> Option<SourceSlot> {
        let mut open = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(address).or_insert(0);
        if *count >= limit {
            return None;
        }
        *count += 1;
        Some(SourceSlot {
            sources: self.clone(),
            address,
        })
    }
}

/// A connection counted against its source address until dropped.
struct SourceSlot {
    sources: Sources,
    address: IpAddr,
}

impl Drop for SourceSlot {
    fn drop(&mut self) {
        let mut open = self
            .sources
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.address) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.address);
            }
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    settings: ConnectionSettings,
    tls: Option<ServerTls>,
    metrics: Metrics,
    sender: mpsc::Sender<io::Result<Connection>>,
) {
    let permits = Arc::new(Semaphore::new(settings.max_connections.max(1)));
    let sources = Sources::default();
    let mut backoff = ACCEPT_BACKOFF_START;
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = sender.closed() => return,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => {
                backoff = ACCEPT_BACKOFF_START;
                accepted
            }
            Err(error) if is_one_connections(&error) => continue,
            Err(error) => {
                warn!(%error, pause = ?backoff, "cannot accept connections: pausing");
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    () = sender.closed() => return,
                }
                backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                continue;
            }
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            // Closed at once: the peer sees the connection end and may try
            // another replica; waiting here would hold its socket anyway.
            metrics.connection_refused();
            debug!("connection refused: at the connection limit");
            drop(stream);
            continue;
        };
        let source_slot = match settings.max_connections_per_source {
            0 => None,
            limit => match sources.enter(peer.ip(), limit) {
                Some(slot) => Some(slot),
                None => {
                    metrics.connection_refused();
                    debug!("connection refused: its source address is at its limit");
                    drop(stream);
                    continue;
                }
            },
        };
        // No Nagle delay on replies: each is small and awaited.
        let _ = stream.set_nodelay(true);
        let tcp = TcpConnectInfo {
            local_addr: stream.local_addr().ok(),
            remote_addr: stream.peer_addr().ok(),
        };
        let settings = settings.clone();
        let tls = tls.clone();
        let sender = sender.clone();
        tokio::spawn(async move {
            let (transport, certificate, config) = match tls {
                None => (Transport::Plain(stream), PeerCertificate::NotAsked, None),
                Some(tls) => {
                    // Taken now: a reload during the handshake applies to
                    // the next connection, this one is judged as it began.
                    let config = tls.current();
                    let handshake = config.acceptor().accept(stream);
                    match tokio::time::timeout(settings.handshake_timeout, handshake).await {
                        Ok(Ok(stream)) => {
                            let certificate = config.judge(stream.get_ref().1);
                            (Transport::Tls(Box::new(stream)), certificate, Some(config))
                        }
                        Ok(Err(error)) => {
                            debug!(%error, "tls handshake failed");
                            return;
                        }
                        Err(_) => {
                            debug!("tls handshake timed out");
                            return;
                        }
                    }
                }
            };
            let connection = Connection {
                transport,
                info: ConnectionInfo { tcp, certificate },
                tls: config,
                silence: Box::pin(tokio::time::sleep(settings.handshake_timeout)),
                idle_timeout: settings.idle_timeout,
                _permit: permit,
                _source_slot: source_slot,
            };
            let _ = sender.send(Ok(connection)).await;
        });
    }
}

enum Transport {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

/// An accepted connection: closed when nothing is read from it for too
/// long, and counted against the limit until dropped.
pub struct Connection {
    transport: Transport,
    info: ConnectionInfo,
    /// The TLS configuration its handshake was made under.
    tls: Option<Arc<Loaded>>,
    /// When the connection is closed unless something is read before.
    silence: Pin<Box<Sleep>>,
    idle_timeout: Duration,
    _permit: OwnedSemaphorePermit,
    _source_slot: Option<SourceSlot>,
}

impl Connection {
    /// The TLS configuration its handshake was made under; None in plaintext.
    pub(crate) fn tls(&self) -> Option<&Arc<Loaded>> {
        self.tls.as_ref()
    }

    /// The peer's address.
    pub(crate) fn remote_addr(&self) -> Option<std::net::SocketAddr> {
        self.info.tcp.remote_addr
    }
}

impl Connected for Connection {
    type ConnectInfo = ConnectionInfo;

    fn connect_info(&self) -> ConnectionInfo {
        self.info.clone()
    }
}

impl AsyncRead for Connection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buffer.filled().len();
        let read = match &mut this.transport {
            Transport::Plain(stream) => Pin::new(stream).poll_read(context, buffer),
            Transport::Tls(stream) => Pin::new(stream.as_mut()).poll_read(context, buffer),
        };
        match read {
            Poll::Ready(Ok(())) => {
                if buffer.filled().len() > before {
                    let until = Instant::now() + this.idle_timeout;
                    this.silence.as_mut().reset(until);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => match this.silence.as_mut().poll(context) {
                Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "nothing read from the connection in time",
                ))),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.transport {
            Transport::Plain(stream) => Pin::new(stream).poll_write(context, bytes),
            Transport::Tls(stream) => Pin::new(stream.as_mut()).poll_write(context, bytes),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffers: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match &mut self.transport {
            Transport::Plain(stream) => Pin::new(stream).poll_write_vectored(context, buffers),
            Transport::Tls(stream) => {
                Pin::new(stream.as_mut()).poll_write_vectored(context, buffers)
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.transport {
            Transport::Plain(stream) => stream.is_write_vectored(),
            Transport::Tls(stream) => stream.is_write_vectored(),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.transport {
            Transport::Plain(stream) => Pin::new(stream).poll_flush(context),
            Transport::Tls(stream) => Pin::new(stream.as_mut()).poll_flush(context),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.transport {
            Transport::Plain(stream) => Pin::new(stream).poll_shutdown(context),
            Transport::Tls(stream) => Pin::new(stream.as_mut()).poll_shutdown(context),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_process_wide_accept_error_backs_off() {
        for kind in [
            io::ErrorKind::ConnectionAborted,
            io::ErrorKind::ConnectionReset,
            io::ErrorKind::Interrupted,
        ] {
            assert!(is_one_connections(&io::Error::from(kind)));
        }
        // EMFILE and ENFILE, as Linux numbers them.
        for errno in [24, 23] {
            assert!(!is_one_connections(&io::Error::from_raw_os_error(errno)));
        }
    }
}
