//! The console over HTTPS: the API's own accept loop (connections bounded
//! in number and per source address, the TLS handshake and the first bytes
//! under a timeout, silent connections closed; each handshake under the TLS
//! configuration in force, which the reload task replaces) as a listener
//! axum serves. No second TLS stack: the same rustls, the same files
//! loading and the same reload as the API's (`crate::app::tls`).

use std::io;
use std::net::SocketAddr;

use tokio::net::TcpListener;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

use crate::app::{Connection, ConnectionSettings, ServerTls, incoming};
use crate::metrics::Metrics;

/// Handshaken connections of the console's TLS listener.
pub struct TlsListener {
    connections: ReceiverStream<io::Result<Connection>>,
    local: SocketAddr,
}

impl TlsListener {
    pub fn new(
        listener: TcpListener,
        settings: ConnectionSettings,
        tls: ServerTls,
        metrics: Metrics,
    ) -> io::Result<Self> {
        let local = listener.local_addr()?;
        Ok(Self {
            connections: incoming(listener, settings, Some(tls), metrics),
            local,
        })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = Connection;
    type Addr = Option<SocketAddr>;

    async fn accept(&mut self) -> (Connection, Option<SocketAddr>) {
        loop {
            match self.connections.next().await {
                Some(Ok(connection)) => {
                    let peer = connection.remote_addr();
                    return (connection, peer);
                }
                // The accept loop reports no errors of its own (it backs
                // off and logs them); were one sent, the next connection
                // may well be fine.
                Some(Err(_)) => {}
                // The accept loop ends only when this listener is dropped.
                None => std::future::pending::<()>().await,
            }
        }
    }

    fn local_addr(&self) -> io::Result<Option<SocketAddr>> {
        Ok(Some(self.local))
    }
}
