//! The API listener's HTTP/2 bounds: streams per connection, keepalive and
//! the connection's age.
//! Built once for production and for tests, so both serve alike.

use std::time::Duration;

/// Streams (calls) one connection may have open at once by default.
const DEFAULT_MAX_CONCURRENT_STREAMS: u32 = 100;
/// How often, by default, a connection that sent nothing is pinged.
const DEFAULT_HTTP2_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
/// How long, by default, a ping may go unanswered before the connection closes.
const DEFAULT_HTTP2_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);
/// Age at which a connection is sent GOAWAY by default.
const DEFAULT_MAX_CONNECTION_AGE: Duration = Duration::from_secs(30 * 60);
/// What its calls under way get after that by default: more than the
/// default request timeout (60 s), so that none is cut off.
const DEFAULT_MAX_CONNECTION_AGE_GRACE: Duration = Duration::from_secs(70);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSettings {
    /// Advertised in SETTINGS_MAX_CONCURRENT_STREAMS; a peer that opens more
    /// has them refused. Unbounded, one connection could hold any number of
    /// calls, each with its buffers.
    pub max_concurrent_streams: u32,
    /// HTTP/2 PING interval, so a peer that vanished without a FIN (a
    /// crashed node, a dropped NAT entry) does not hold its connection and
    /// its calls for ever.
    pub http2_keepalive_interval: Duration,
    pub http2_keepalive_timeout: Duration,
    /// Age at which a connection is sent GOAWAY: a peer that answers PINGs
    /// is never idle, and without an age would keep its slot for ever.
    pub max_connection_age: Duration,
    /// How long after GOAWAY the calls under way may finish before the
    /// connection is closed regardless.
    pub max_connection_age_grace: Duration,
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self {
            max_concurrent_streams: DEFAULT_MAX_CONCURRENT_STREAMS,
            http2_keepalive_interval: DEFAULT_HTTP2_KEEPALIVE_INTERVAL,
            http2_keepalive_timeout: DEFAULT_HTTP2_KEEPALIVE_TIMEOUT,
            max_connection_age: DEFAULT_MAX_CONNECTION_AGE,
            max_connection_age_grace: DEFAULT_MAX_CONNECTION_AGE_GRACE,
        }
    }
}

impl ServerSettings {
    /// A tonic server with these bounds; TLS and routes are the caller's.
    pub fn server(&self) -> tonic::transport::Server {
        // HTTP/1.1 too, for the Connect JSON mapping (curl's default);
        // gRPC itself needs HTTP/2 and gets it.
        tonic::transport::Server::builder()
            .accept_http1(true)
            .max_concurrent_streams(self.max_concurrent_streams)
            .http2_keepalive_interval(Some(self.http2_keepalive_interval))
            .http2_keepalive_timeout(Some(self.http2_keepalive_timeout))
            .max_connection_age(self.max_connection_age)
            .max_connection_age_grace(self.max_connection_age_grace)
    }
}
