//! What a connection tells each of its calls: its addresses and the verdict
//! on its client certificate. The accept loop makes it once per connection
//! (`app::connections`); tonic puts it in every request's extensions (as
//! the connection's `ConnectInfo`), where admission reads it.

use tonic::transport::server::TcpConnectInfo;

use crate::auth::PeerCertificate;

#[derive(Debug, Clone)]
pub struct ConnectionInfo {
    pub tcp: TcpConnectInfo,
    pub certificate: PeerCertificate,
}
