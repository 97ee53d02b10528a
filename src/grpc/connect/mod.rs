//! The Connect protocol's unary JSON mapping (<https://connectrpc.com/docs/protocol>)
//! on the API's paths, so that callers without a gRPC stack (curl, shell
//! scripts) call the same RPCs: `POST /idem.v1.IdempotencyService/Claim`,
//! `Content-Type: application/json`, the request message in the proto3 JSON
//! mapping.
//!
//! A JSON call is not served by handlers of its own: it is translated into
//! the gRPC call it stands for and handed to the very service a gRPC call
//! reaches (observed, admitted, decoded with the decode limit, handled,
//! mapped to a status by status.rs), and the gRPC answer is translated back.
//! The JSON body is read only when the gRPC service reads its body, so after
//! authentication and admission, as for gRPC, and is bounded as a gRPC
//! message is: admission charges the replica's byte budget
//! (`--max-request-bytes-in-flight`) with its `Content-Length` (or, without
//! one, the most a JSON body may be) before reading it, and its map fields
//! are counted before anything is decoded ([`codec`]). Requests with a gRPC
//! content type pass through untouched.

mod codec;
mod json_error;
mod request;
mod response;
#[cfg(test)]
mod tests;

use std::convert::Infallible;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::future::Either;
use tonic::Status;
use tonic::codegen::http::{self, HeaderMap, StatusCode, header};
use tonic::server::NamedService;

use super::admission::JsonBodyBytes;
use super::observe::ApiMethod;
use super::{ApiFuture, ApiService};
use codec::codec_of;
use json_error::{error_response, form_refusal};
use request::{connect_timeout, grpc_request};
use response::connect_response;

/// How much larger than the decode limit a JSON body may be: bytes fields
/// grow by a third in base64, and field names and quotes add to it. The
/// message the body decodes to is held to the decode limit itself.
const JSON_BODY_FACTOR: usize = 2;

/// The API service, also speaking Connect's unary JSON.
#[derive(Clone)]
pub struct Connect<S> {
    inner: S,
    /// The API's decode limit; JSON bodies get [`JSON_BODY_FACTOR`] times it.
    max_request_bytes: usize,
    /// The API's encode limit, which bounds the answer read back.
    max_response_bytes: usize,
}

impl<S> Connect<S> {
    pub fn new(inner: S, max_request_bytes: usize, max_response_bytes: usize) -> Self {
        Self {
            inner,
            max_request_bytes,
            max_response_bytes,
        }
    }
}

impl<S: NamedService> NamedService for Connect<S> {
    const NAME: &'static str = S::NAME;
}

/// The media type of a request, without parameters, lowercased.
fn media_type(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    let media_type = value.split(';').next().unwrap_or_default().trim();
    Some(media_type.to_ascii_lowercase())
}

/// A gRPC call (`application/grpc`, `application/grpc+proto`, …): asked on
/// every call, so it reads the header's bytes without copying them.
fn is_grpc(headers: &HeaderMap) -> bool {
    const GRPC: &[u8] = b"application/grpc";
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.as_bytes().get(..GRPC.len()))
        .is_some_and(|prefix| prefix.eq_ignore_ascii_case(GRPC))
}

impl<S: ApiService> tower::Service<http::Request<tonic::body::Body>> for Connect<S> {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    /// A gRPC call passes through in the inner service's own future (no
    /// second allocation per RPC); only a Connect call is boxed.
    type Future = Either<S::Future, ApiFuture>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        // The clone that was polled ready serves this call (tower's rule).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        if is_grpc(request.headers()) {
            return Either::Left(inner.call(request));
        }
        let max_request_bytes = self.max_request_bytes;
        let max_json_bytes = max_request_bytes.saturating_mul(JSON_BODY_FACTOR);
        let max_response_bytes = self.max_response_bytes;
        Either::Right(Box::pin(async move {
            if request.method() != http::Method::POST {
                return Ok(form_refusal(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "the API takes POST",
                    Some((header::ALLOW, "POST")),
                ));
            }
            if media_type(request.headers()).as_deref() != Some("application/json") {
                return Ok(form_refusal(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "the API takes application/grpc or application/json",
                    Some((header::ACCEPT, "application/grpc, application/json")),
                ));
            }
            let compressed = request
                .headers()
                .get(header::CONTENT_ENCODING)
                .is_some_and(|encoding| encoding.as_bytes() != b"identity");
            if compressed {
                // Connect's rule for an encoding the server does not support.
                return Ok(form_refusal(
                    StatusCode::NOT_IMPLEMENTED,
                    "request bodies are taken uncompressed",
                    Some((header::ACCEPT_ENCODING, "identity")),
                ));
            }
            let Some(codec) = codec_of(ApiMethod::from_path(request.uri().path())) else {
                return Ok(error_response(&Status::unimplemented("no such method")));
            };
            let timeout = match connect_timeout(request.headers()) {
                Ok(timeout) => timeout.map(Duration::from_millis),
                Err(status) => return Ok(error_response(&status)),
            };
            // Read no further than its Content-Length (a body longer than
            // it says is refused as too large) nor the JSON limit; charged
            // to the replica's byte budget at admission, before it is read.
            let json_bytes = request
                .headers()
                .get(header::CONTENT_LENGTH)
                .and_then(|length| length.to_str().ok())
                .and_then(|length| length.parse::<usize>().ok())
                .map_or(max_json_bytes, |length| length.min(max_json_bytes));
            let mut request = request;
            request.extensions_mut().insert(JsonBodyBytes(json_bytes));
            let request = match grpc_request(request, &codec, json_bytes, max_request_bytes) {
                Ok(request) => request,
                Err(status) => return Ok(error_response(&status)),
            };
            // A deadline that has passed on arrival: nothing is run (a Claim
            // must not create an operation its caller no longer waits for).
            if timeout.is_some_and(|timeout| timeout.is_zero()) {
                return Ok(error_response(&Status::deadline_exceeded(
                    "the call's Connect-Timeout-Ms passed",
                )));
            }
            let answered = async {
                let response = inner.call(request).await?;
                Ok(connect_response(response, &codec, max_response_bytes).await)
            };
            let Some(timeout) = timeout else {
                return answered.await;
            };
            // The whole call within the caller's deadline, as tonic bounds a
            // gRPC call by its grpc-timeout (which a Connect request reaches
            // tonic without); past it the call is dropped and answered as a
            // Connect server does. No ErrorInfo: REQUEST_TIMEOUT is the
            // server's own timeout, and a gRPC caller hears of its deadline
            // from its own stack, without one, too.
            match tokio::time::timeout(timeout, answered).await {
                Ok(answer) => answer,
                Err(_) => Ok(error_response(&Status::deadline_exceeded(
                    "the call's Connect-Timeout-Ms passed",
                ))),
            }
        }))
    }
}
