//! Admission of API calls: the tower layer between the observed service and
//! the generated one, which decides before a handler runs (and, for what it
//! can, before the request body is read) whether a call is served at all.
//! Health and reflection are not behind it.
//!
//! In order: it authenticates the call from its `authorization` header
//! before the body is polled (a caller without credentials cannot make the
//! server read, let alone buffer, a byte of its body) and hands the tenant
//! to the handler in the request's extensions; it bounds each call's time
//! ([`AdmissionSettings::request_timeout`]: a request body that stalls
//! halfway is cut off, not held); and it answers the codec's refusal of an
//! oversized message in idemd's own terms.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tonic::Status;
use tonic::codegen::http;
use tonic::server::NamedService;

use crate::auth::Authenticator;
use crate::domain::{Error, TenantId};

/// Longest a call may take by default: twice the default `--max-wait`, so a
/// Claim that waits its whole cap still has time to answer.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// What tonic's codec says when a message's length prefix exceeds the
/// decode limit (the body is not buffered by then).
const DECODE_LIMIT_MESSAGE: &str = "decoded message length too large";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionSettings {
    /// Longest a call may take, reading its request included; must exceed
    /// the longest Claim `wait`.
    pub request_timeout: Duration,
}

impl Default for AdmissionSettings {
    fn default() -> Self {
        Self {
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }
}

/// The tenant a call was admitted for, in its request's extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Authenticated(pub TenantId);

/// What every call of one server shares.
struct Shared {
    settings: AdmissionSettings,
    authenticator: Authenticator,
    /// The API's decode limit, named in the answer to a larger message.
    max_request_bytes: usize,
}

/// The API service behind admission.
#[derive(Clone)]
pub struct Admitted<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> Admitted<S> {
    pub fn new(
        inner: S,
        settings: AdmissionSettings,
        authenticator: Authenticator,
        max_request_bytes: usize,
    ) -> Self {
        Self {
            inner,
            shared: Arc::new(Shared {
                settings,
                authenticator,
                max_request_bytes,
            }),
        }
    }
}

impl<S: NamedService> NamedService for Admitted<S> {
    const NAME: &'static str = S::NAME;
}

/// A refusal, as a trailers-only gRPC response.
fn refusal(error: Error) -> http::Response<tonic::body::Body> {
    Status::from(error).into_http()
}

/// tonic's codec refuses a message over the decode limit with OUT_OF_RANGE
/// and no details, from its length prefix. gRPC's convention for that is
/// RESOURCE_EXHAUSTED, and every idemd error carries an ErrorInfo: the
/// refusal is answered as `REQUEST_TOO_LARGE`. Handlers never answer
/// OUT_OF_RANGE, and an encoding error would come in trailers, not here.
fn explain_decode_limit(
    response: http::Response<tonic::body::Body>,
    limit: usize,
) -> http::Response<tonic::body::Body> {
    let refused_by_codec = Status::from_header_map(response.headers()).is_some_and(|status| {
        status.code() == tonic::Code::OutOfRange && status.message().contains(DECODE_LIMIT_MESSAGE)
    });
    if refused_by_codec {
        refusal(Error::RequestTooLarge { limit })
    } else {
        response
    }
}

impl<S> tower::Service<http::Request<tonic::body::Body>> for Admitted<S>
where
    S: tower::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, mut request: http::Request<tonic::body::Body>) -> Self::Future {
        // The clone that was polled ready serves this call (tower's rule).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let shared = self.shared.clone();
        Box::pin(async move {
            let timeout = shared.settings.request_timeout;
            let admitted = async {
                let authorization = request
                    .headers()
                    .get(http::header::AUTHORIZATION)
                    .and_then(|value| value.to_str().ok());
                let tenant = match shared.authenticator.tenant(authorization).await {
                    Ok(tenant) => tenant,
                    Err(refused) => return Ok(refusal(refused)),
                };
                request.extensions_mut().insert(Authenticated(tenant));
                // Only now is the body read: the generated service decodes it.
                inner.call(request).await
            };
            // Authentication waits, the body is read, the handler runs and
            // the answer is encoded: the timeout bounds all of it.
            let Ok(response) = tokio::time::timeout(timeout, admitted).await else {
                return Ok(refusal(Error::RequestTimeout { timeout }));
            };
            Ok(explain_decode_limit(response?, shared.max_request_bytes))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_codecs_decode_limit_is_answered_as_request_too_large() {
        let too_large = Status::out_of_range(
            "Error, decoded message length too large: found 9 bytes, the limit is: 8 bytes",
        );
        let answered = explain_decode_limit(too_large.into_http(), 8);
        let status = Status::from_header_map(answered.headers()).expect("a status");
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);

        let other = Status::out_of_range("something else");
        let answered = explain_decode_limit(other.into_http(), 8);
        let status = Status::from_header_map(answered.headers()).expect("a status");
        assert_eq!(status.code(), tonic::Code::OutOfRange);
    }
}
