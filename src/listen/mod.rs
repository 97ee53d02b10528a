//! Where the API and the web console accept connections: a bounded accept
//! loop over TCP (connections counted, handshakes and idleness timed out)
//! and the TLS identities both serve, loaded at start-up and reloaded when
//! their files change. Below `console` and `app`, which both listen.

mod connections;
mod tls;

pub use connections::{Connection, ConnectionSettings, incoming};
pub(crate) use tls::Loaded as LoadedTls;
pub use tls::ServerTls;
pub(crate) use tls::{TlsFiles, refuse_unasked_plaintext, reload_every};
