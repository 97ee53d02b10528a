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
//! authentication and admission, as for gRPC. Requests with a gRPC content
//! type pass through untouched.

use super::{ApiFuture, ApiService};
use futures_util::future::Either;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD_NO_PAD;
use bytes::{BufMut, Bytes, BytesMut};
use http_body::Frame;
use http_body_util::{BodyExt, Limited};
use prost::Message;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tonic::codegen::http::{self, HeaderMap, HeaderValue, StatusCode, header};
use tonic::server::NamedService;
use tonic::{Code, Status};

use super::observe::ApiMethod;
use crate::domain::{Error, FieldViolation};
use crate::proto;

/// How much larger than the decode limit a JSON body may be: bytes fields
/// grow by a third in base64, and field names and quotes add to it. The
/// message the body decodes to is held to the decode limit itself.
const JSON_BODY_FACTOR: usize = 2;

/// Translates one method's JSON body to its protobuf message and its
/// protobuf answer back to JSON.
struct Codec {
    request: fn(&[u8]) -> Result<Vec<u8>, Status>,
    response: fn(&[u8]) -> Result<Vec<u8>, Status>,
}

fn codec_of(method: ApiMethod) -> Option<Codec> {
    fn codec<Req, Resp>() -> Codec
    where
        Req: Message + DeserializeOwned,
        Resp: Message + Default + Serialize,
    {
        Codec {
            request: json_to_message::<Req>,
            response: message_to_json::<Resp>,
        }
    }
    Some(match method {
        ApiMethod::Claim => codec::<proto::ClaimRequest, proto::ClaimResponse>(),
        ApiMethod::Renew => codec::<proto::RenewRequest, proto::RenewResponse>(),
        ApiMethod::Complete => codec::<proto::CompleteRequest, proto::CompleteResponse>(),
        ApiMethod::Fail => codec::<proto::FailRequest, proto::FailResponse>(),
        ApiMethod::Lookup => codec::<proto::LookupRequest, proto::LookupResponse>(),
        ApiMethod::Reconcile => codec::<proto::ReconcileRequest, proto::ReconcileResponse>(),
        ApiMethod::ListUnresolved => {
            codec::<proto::ListUnresolvedRequest, proto::ListUnresolvedResponse>()
        }
        ApiMethod::Unknown => return None,
    })
}

fn json_to_message<M: Message + DeserializeOwned>(json: &[u8]) -> Result<Vec<u8>, Status> {
    // An empty body is the empty message, as Connect's own servers take it.
    let json = if json.iter().all(u8::is_ascii_whitespace) {
        b"{}".as_slice()
    } else {
        json
    };
    let message: M = serde_json::from_slice(json).map_err(|error| {
        Status::from(Error::InvalidArgument(vec![FieldViolation {
            field: String::new(),
            description: format!("the body is not the request message in JSON: {error}"),
        }]))
    })?;
    Ok(message.encode_to_vec())
}

fn message_to_json<M: Message + Default + Serialize>(bytes: &[u8]) -> Result<Vec<u8>, Status> {
    let message = M::decode(bytes)
        .map_err(|error| Status::from(Error::internal_from("an answer did not decode", &error)))?;
    serde_json::to_vec(&message)
        .map_err(|error| Status::from(Error::internal_from("an answer did not encode", &error)))
}

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

/// Connect's name of a code (its JSON error's `code`).
fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "ok",
        Code::Cancelled => "canceled",
        Code::Unknown => "unknown",
        Code::InvalidArgument => "invalid_argument",
        Code::DeadlineExceeded => "deadline_exceeded",
        Code::NotFound => "not_found",
        Code::AlreadyExists => "already_exists",
        Code::PermissionDenied => "permission_denied",
        Code::ResourceExhausted => "resource_exhausted",
        Code::FailedPrecondition => "failed_precondition",
        Code::Aborted => "aborted",
        Code::OutOfRange => "out_of_range",
        Code::Unimplemented => "unimplemented",
        Code::Internal => "internal",
        Code::Unavailable => "unavailable",
        Code::DataLoss => "data_loss",
        Code::Unauthenticated => "unauthenticated",
    }
}

/// The HTTP status Connect answers a code with.
fn http_status(code: Code) -> StatusCode {
    match code {
        Code::Ok => StatusCode::OK,
        Code::Cancelled => StatusCode::REQUEST_TIMEOUT,
        Code::Unknown | Code::Internal | Code::DataLoss => StatusCode::INTERNAL_SERVER_ERROR,
        Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => {
            StatusCode::BAD_REQUEST
        }
        Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::AlreadyExists | Code::Aborted => StatusCode::CONFLICT,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        Code::Unimplemented => StatusCode::NOT_IMPLEMENTED,
        Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Code::Unauthenticated => StatusCode::UNAUTHORIZED,
    }
}

#[derive(Serialize)]
struct ErrorDetail {
    #[serde(rename = "type")]
    type_name: String,
    value: String,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    code: &'static str,
    #[serde(skip_serializing_if = "str::is_empty")]
    message: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    details: Vec<ErrorDetail>,
}

/// Every google.rpc detail the status carries, as Connect's `details`: the
/// message's full name and its protobuf bytes in unpadded base64.
fn error_details(status: &Status) -> Vec<ErrorDetail> {
    let Ok(carried) = tonic_types::pb::Status::decode(status.details()) else {
        return Vec::new();
    };
    carried
        .details
        .into_iter()
        .map(|any| ErrorDetail {
            type_name: any
                .type_url
                .rsplit_once('/')
                .map_or(any.type_url.as_str(), |(_, name)| name)
                .to_owned(),
            value: STANDARD_NO_PAD.encode(&any.value),
        })
        .collect()
}

fn json_response(status: StatusCode, body: Vec<u8>) -> http::Response<tonic::body::Body> {
    let mut response = http::Response::new(tonic::body::Body::new(http_body_util::Full::new(
        Bytes::from(body),
    )));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// A status as Connect's JSON error.
fn error_response(status: &Status) -> http::Response<tonic::body::Body> {
    let body = ErrorBody {
        code: code_name(status.code()),
        message: status.message(),
        details: error_details(status),
    };
    let json = serde_json::to_vec(&body).unwrap_or_else(|_| br#"{"code":"internal"}"#.to_vec());
    json_response(http_status(status.code()), json)
}

/// A refusal of the request's form (method, media type), before the API
/// service sees it.
fn form_refusal(
    http_status: StatusCode,
    message: &str,
    extra: Option<(header::HeaderName, &'static str)>,
) -> http::Response<tonic::body::Body> {
    let status = Status::unimplemented(message);
    let mut response = error_response(&status);
    *response.status_mut() = http_status;
    if let Some((name, value)) = extra {
        response
            .headers_mut()
            .insert(name, HeaderValue::from_static(value));
    }
    response
}

/// The request body handed to the gRPC service: nothing is read from the
/// JSON body until the gRPC service polls it (after admission), and then
/// all of it, bounded, turned into one gRPC message frame.
struct TranslatedBody {
    pending: Option<PendingFrame>,
}

/// The one gRPC frame, once the JSON body is read and translated.
type PendingFrame = Pin<Box<dyn Future<Output = Result<Bytes, Status>> + Send>>;

impl http_body::Body for TranslatedBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let Some(pending) = self.pending.as_mut() else {
            return Poll::Ready(None);
        };
        let frame = match pending.as_mut().poll(context) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(frame) => frame,
        };
        self.pending = None;
        Poll::Ready(Some(frame.map(Frame::data)))
    }

    fn is_end_stream(&self) -> bool {
        self.pending.is_none()
    }
}

/// One gRPC message frame: uncompressed, its length, the message.
fn grpc_frame(message: &[u8]) -> Result<Bytes, Status> {
    let length = u32::try_from(message.len()).map_err(|_| {
        Status::from(Error::RequestTooLarge {
            limit: u32::MAX as usize,
        })
    })?;
    let mut frame = BytesMut::with_capacity(5 + message.len());
    frame.put_u8(0);
    frame.put_u32(length);
    frame.put_slice(message);
    Ok(frame.freeze())
}

/// `Connect-Timeout-Ms` (at most ten digits) as `grpc-timeout`, which the
/// handlers read (a Claim's wait stays within it).
fn grpc_timeout(headers: &HeaderMap) -> Result<Option<HeaderValue>, Status> {
    Ok(connect_timeout(headers)?.and_then(|millis| {
        // gRPC allows eight digits: longer timeouts go in seconds.
        let value = if millis < 100_000_000 {
            format!("{millis}m")
        } else {
            format!("{}S", millis / 1000)
        };
        HeaderValue::from_str(&value).ok()
    }))
}

/// `Connect-Timeout-Ms` in milliseconds, if the caller sent one.
fn connect_timeout(headers: &HeaderMap) -> Result<Option<u64>, Status> {
    let Some(value) = headers.get("connect-timeout-ms") else {
        return Ok(None);
    };
    let millis = value
        .to_str()
        .ok()
        .filter(|digits| !digits.is_empty() && digits.len() <= 10)
        .and_then(|digits| digits.parse::<u64>().ok())
        .ok_or_else(|| {
            Status::from(Error::InvalidArgument(vec![FieldViolation {
                field: "Connect-Timeout-Ms".into(),
                description: "must be a positive number of milliseconds, at most ten digits".into(),
            }]))
        })?;
    Ok(Some(millis))
}

/// The gRPC request a Connect request stands for.
fn grpc_request(
    request: http::Request<tonic::body::Body>,
    codec: &Codec,
    max_json_bytes: usize,
    limit: usize,
) -> Result<http::Request<tonic::body::Body>, Status> {
    let timeout = grpc_timeout(request.headers())?;
    if let Some(version) = request.headers().get("connect-protocol-version")
        && version.as_bytes() != b"1"
    {
        return Err(Status::from(Error::InvalidArgument(vec![FieldViolation {
            field: "Connect-Protocol-Version".into(),
            description: "must be 1".into(),
        }])));
    }
    let (mut parts, body) = request.into_parts();
    // The caller's own headers (authorization, trace context) stay; what
    // describes the JSON body or claims to be gRPC's goes.
    let headers = &mut parts.headers;
    let described_the_body = headers
        .keys()
        .filter(|name| {
            let name = name.as_str();
            name.starts_with("content-")
                || name.starts_with("connect-")
                || name.starts_with("grpc-")
                || name == "accept-encoding"
                || name == "te"
        })
        .cloned()
        .collect::<Vec<_>>();
    for name in described_the_body {
        headers.remove(name);
    }
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    headers.insert(header::TE, HeaderValue::from_static("trailers"));
    if let Some(timeout) = timeout {
        headers.insert("grpc-timeout", timeout);
    }
    let translate = codec.request;
    let translated = async move {
        let json = Limited::new(body, max_json_bytes)
            .collect()
            .await
            .map_err(|error| {
                if error.is::<http_body_util::LengthLimitError>() {
                    Status::from(Error::RequestTooLarge { limit })
                } else {
                    Status::from_error(error)
                }
            })?
            .to_bytes();
        grpc_frame(&translate(&json)?)
    };
    let body = TranslatedBody {
        pending: Some(Box::pin(translated)),
    };
    Ok(http::Request::from_parts(
        parts,
        tonic::body::Body::new(body),
    ))
}

/// Whether a gRPC response header or trailer is the protocol's own (it
/// describes gRPC's framing or carries the status, which the Connect answer
/// says its own way) rather than the application's metadata.
fn is_grpc_protocol_header(name: &header::HeaderName) -> bool {
    matches!(
        name.as_str(),
        "grpc-status"
            | "grpc-message"
            | "grpc-status-details-bin"
            | "grpc-encoding"
            | "grpc-accept-encoding"
    ) || name == header::CONTENT_TYPE
        || name == header::CONTENT_LENGTH
        || name == header::TE
        || name == header::TRAILER
}

/// The gRPC answer's metadata on the Connect answer, as Connect's unary
/// responses carry it: headers as HTTP headers, trailers as HTTP headers
/// prefixed `trailer-`. A trailers-only gRPC answer (a refusal) has only
/// trailers, sent in its headers. What describes gRPC's framing or the
/// status is left out.
fn copy_metadata(
    response: &mut http::Response<tonic::body::Body>,
    headers: Option<&HeaderMap>,
    trailers: Option<&HeaderMap>,
) {
    let target = response.headers_mut();
    for (name, value) in headers.into_iter().flatten() {
        if !is_grpc_protocol_header(name) {
            target.append(name.clone(), value.clone());
        }
    }
    for (name, value) in trailers.into_iter().flatten() {
        if is_grpc_protocol_header(name) {
            continue;
        }
        if let Ok(prefixed) = header::HeaderName::try_from(format!("trailer-{name}")) {
            target.append(prefixed, value.clone());
        }
    }
}

/// The Connect answer for the gRPC one.
async fn connect_response(
    response: http::Response<tonic::body::Body>,
    codec: &Codec,
    max_response_bytes: usize,
) -> http::Response<tonic::body::Body> {
    // A trailers-only answer: refused before or by the handler.
    if let Some(status) = Status::from_header_map(response.headers()) {
        let mut answer = error_response(&status);
        copy_metadata(&mut answer, None, Some(response.headers()));
        return answer;
    }
    let (parts, body) = response.into_parts();
    // A message frame (header included) and the trailers.
    let limit = max_response_bytes.saturating_add(5);
    let collected = match Limited::new(body, limit).collect().await {
        Ok(collected) => collected,
        Err(error) => return error_response(&Status::from_error(error)),
    };
    let status = collected
        .trailers()
        .and_then(Status::from_header_map)
        .unwrap_or_else(|| {
            Status::from(Error::Internal("an answer ended without a status".into()))
        });
    let trailers = collected.trailers().cloned();
    let with_metadata = |mut answer: http::Response<tonic::body::Body>| {
        copy_metadata(&mut answer, Some(&parts.headers), trailers.as_ref());
        answer
    };
    if status.code() != Code::Ok {
        return with_metadata(error_response(&status));
    }
    let body = collected.to_bytes();
    // The request asked for no compression: the flag byte is 0.
    let message = match body.get(..5) {
        Some([0, length @ ..]) => {
            let length = u32::from_be_bytes([length[0], length[1], length[2], length[3]]);
            body.get(5..)
                .filter(|message| message.len() as u64 == u64::from(length))
        }
        _ => None,
    };
    let Some(message) = message else {
        let error = Error::Internal("an answer was not one uncompressed message".into());
        return error_response(&Status::from(error));
    };
    match (codec.response)(message) {
        Ok(json) => with_metadata(json_response(StatusCode::OK, json)),
        Err(status) => error_response(&status),
    }
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
            let request = match grpc_request(request, &codec, max_json_bytes, max_request_bytes) {
                Ok(request) => request,
                Err(status) => return Ok(error_response(&status)),
            };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_calls_are_known_by_their_media_type_in_any_case() {
        let headers = |content_type: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
            headers
        };
        for grpc in [
            "application/grpc",
            "application/grpc+proto",
            "Application/GRPC",
        ] {
            assert!(is_grpc(&headers(grpc)), "{grpc}");
        }
        for other in ["application/json", "application/grp", "text/plain"] {
            assert!(!is_grpc(&headers(other)), "{other}");
        }
        assert!(!is_grpc(&HeaderMap::new()));
    }

    #[test]
    fn codes_answer_with_connects_http_statuses() {
        assert_eq!(
            http_status(Code::FailedPrecondition),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(http_status(Code::Unauthenticated), StatusCode::UNAUTHORIZED);
        assert_eq!(
            http_status(Code::ResourceExhausted),
            StatusCode::TOO_MANY_REQUESTS
        );
        assert_eq!(
            http_status(Code::Unavailable),
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(
            http_status(Code::DeadlineExceeded),
            StatusCode::GATEWAY_TIMEOUT
        );
        assert_eq!(code_name(Code::Cancelled), "canceled");
    }

    /// The caller's own headers reach the gRPC service as metadata; what
    /// described the JSON body or belongs to either protocol does not.
    #[test]
    fn the_callers_headers_pass_as_metadata_and_the_protocols_do_not() {
        let codec = codec_of(ApiMethod::Claim).expect("a codec");
        let mut request = http::Request::new(tonic::body::Body::empty());
        for (name, value) in [
            ("authorization", "Bearer idem_token"),
            (
                "traceparent",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            ),
            ("tracestate", "vendor=1"),
            ("x-request-id", "req-7"),
            ("content-type", "application/json"),
            ("content-length", "42"),
            ("connect-protocol-version", "1"),
            ("connect-timeout-ms", "1500"),
            ("accept-encoding", "gzip"),
            ("grpc-encoding", "gzip"),
        ] {
            request
                .headers_mut()
                .insert(name, HeaderValue::from_static(value));
        }
        let translated = grpc_request(request, &codec, 1024, 512).expect("translated");
        let headers = translated.headers();
        let mut names: Vec<&str> = headers.keys().map(header::HeaderName::as_str).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "authorization",
                "content-type",
                "grpc-timeout",
                "te",
                "traceparent",
                "tracestate",
                "x-request-id"
            ]
        );
        assert_eq!(headers["authorization"], "Bearer idem_token");
        assert_eq!(headers["x-request-id"], "req-7");
        assert_eq!(headers["content-type"], "application/grpc");
        assert_eq!(headers["grpc-timeout"], "1500m");
    }

    /// Response headers stay headers, trailers become `trailer-` headers;
    /// the status and gRPC's framing headers are the Connect answer's own.
    #[test]
    fn response_metadata_becomes_headers_and_trailer_headers() {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/grpc"));
        headers.insert("grpc-encoding", HeaderValue::from_static("identity"));
        headers.insert("x-served-by", HeaderValue::from_static("replica-1"));
        let mut trailers = HeaderMap::new();
        trailers.insert("grpc-status", HeaderValue::from_static("14"));
        trailers.insert("grpc-message", HeaderValue::from_static("down"));
        trailers.insert("grpc-status-details-bin", HeaderValue::from_static("AAAA"));
        trailers.insert("grpc-retry-pushback-ms", HeaderValue::from_static("250"));
        trailers.insert("x-cost-bin", HeaderValue::from_static("AQI"));
        let mut answer = json_response(StatusCode::OK, b"{}".to_vec());
        copy_metadata(&mut answer, Some(&headers), Some(&trailers));
        let mut names: Vec<&str> = answer
            .headers()
            .keys()
            .map(header::HeaderName::as_str)
            .collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "content-type",
                "trailer-grpc-retry-pushback-ms",
                "trailer-x-cost-bin",
                "x-served-by"
            ]
        );
        assert_eq!(answer.headers()["content-type"], "application/json");
        assert_eq!(answer.headers()["trailer-grpc-retry-pushback-ms"], "250");
        assert_eq!(answer.headers()["trailer-x-cost-bin"], "AQI");
    }

    #[test]
    fn connect_timeouts_become_grpc_timeouts() {
        let mut headers = HeaderMap::new();
        headers.insert("connect-timeout-ms", HeaderValue::from_static("1500"));
        let timeout = grpc_timeout(&headers).expect("valid").expect("a timeout");
        assert_eq!(timeout, "1500m");
        headers.insert("connect-timeout-ms", HeaderValue::from_static("9999999999"));
        let timeout = grpc_timeout(&headers).expect("valid").expect("a timeout");
        assert_eq!(timeout, "9999999S");
        headers.insert("connect-timeout-ms", HeaderValue::from_static("soon"));
        assert!(grpc_timeout(&headers).is_err());
    }
}
