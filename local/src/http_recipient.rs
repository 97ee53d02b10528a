//! The `idemd-local dispatch` binary's recipient: an HTTP/1.1 POST of the
//! entry's payload to the entry's `recipient` URL (`http://` only), with the
//! idempotency key in the `Idempotency-Key` header.
//!
//! 2xx is accepted (the body is the answer), 4xx refused for good; a
//! connection that could not be made is not delivered; anything after the
//! request may have been sent (a 5xx, a lost answer) is unknown.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::header::{CONTENT_TYPE, HOST};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::dispatch::{Delivered, Recipient};
use crate::outbox::Entry;

#[derive(Debug, Clone)]
pub struct HttpRecipient {
    /// Connecting, and the whole exchange, each within this.
    pub timeout: Duration,
}

impl Default for HttpRecipient {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(10),
        }
    }
}

impl Recipient for HttpRecipient {
    async fn deliver(&self, entry: &Entry, idempotency_key: &str) -> Delivered {
        let refused = |message: String| Delivered::Refused {
            code: "BAD_RECIPIENT".into(),
            message,
        };
        let uri: hyper::Uri = match entry.recipient.parse() {
            Ok(uri) => uri,
            Err(error) => return refused(format!("recipient is not a URL: {error}")),
        };
        if uri.scheme_str() != Some("http") {
            return refused("recipient: only http:// URLs".into());
        }
        let Some(authority) = uri.authority().cloned() else {
            return refused("recipient: the URL names no host".into());
        };
        let address = format!(
            "{}:{}",
            authority.host(),
            authority.port_u16().unwrap_or(80)
        );
        let stream = match tokio::time::timeout(self.timeout, TcpStream::connect(&address)).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(error)) => {
                return Delivered::NotDelivered {
                    message: format!("connecting to {address}: {error}"),
                };
            }
            Err(_) => {
                return Delivered::NotDelivered {
                    message: format!("connecting to {address}: timed out"),
                };
            }
        };
        let exchange = async {
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
            let connection = tokio::spawn(connection);
            let path = uri.path_and_query().map_or("/", |path| path.as_str());
            let request = Request::post(path)
                .header(HOST, authority.as_str())
                .header(CONTENT_TYPE, "application/octet-stream")
                .header("idempotency-key", idempotency_key)
                .body(Full::new(Bytes::from(entry.payload.clone())))
                .map_err(|error| Box::new(error) as Box<dyn std::error::Error + Send + Sync>);
            let response = sender.send_request(request?).await?;
            let status = response.status();
            let body = response.into_body().collect().await?.to_bytes();
            connection.abort();
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>((status, body))
        };
        match tokio::time::timeout(self.timeout, exchange).await {
            Ok(Ok((status, body))) if status.is_success() => Delivered::Accepted(body.to_vec()),
            Ok(Ok((status, body))) if status.is_client_error() => Delivered::Refused {
                code: status.as_str().to_owned(),
                message: String::from_utf8_lossy(&body).into_owned(),
            },
            Ok(Ok((status, _))) => Delivered::Unknown {
                message: format!("the recipient answered {status}"),
            },
            Ok(Err(error)) => Delivered::Unknown {
                message: format!("the exchange broke: {error}"),
            },
            Err(_) => Delivered::Unknown {
                message: "the recipient did not answer in time".into(),
            },
        }
    }
}
