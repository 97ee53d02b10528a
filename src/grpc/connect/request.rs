//! The gRPC request a Connect request stands for: its body read only when
//! the gRPC service polls it, and its deadline as `grpc-timeout`.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use http_body::Frame;
use http_body_util::{BodyExt, Limited};
use tonic::Status;
use tonic::codegen::http::{self, HeaderMap, HeaderValue, header};

use super::codec::Codec;
use crate::domain::{Error, FieldViolation};
use crate::grpc::status::to_status;

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
        to_status(Error::RequestTooLarge {
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
pub(super) fn grpc_timeout(headers: &HeaderMap) -> Result<Option<HeaderValue>, Status> {
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
pub(super) fn connect_timeout(headers: &HeaderMap) -> Result<Option<u64>, Status> {
    let Some(value) = headers.get("connect-timeout-ms") else {
        return Ok(None);
    };
    let millis = value
        .to_str()
        .ok()
        .filter(|digits| !digits.is_empty() && digits.len() <= 10)
        .and_then(|digits| digits.parse::<u64>().ok())
        .ok_or_else(|| {
            to_status(Error::InvalidArgument(vec![FieldViolation {
                field: "Connect-Timeout-Ms".into(),
                description: "must be a positive number of milliseconds, at most ten digits".into(),
            }]))
        })?;
    Ok(Some(millis))
}

/// The gRPC request a Connect request stands for.
pub(super) fn grpc_request(
    request: http::Request<tonic::body::Body>,
    codec: &Codec,
    max_json_bytes: usize,
    limit: usize,
) -> Result<http::Request<tonic::body::Body>, Status> {
    let timeout = grpc_timeout(request.headers())?;
    if let Some(version) = request.headers().get("connect-protocol-version")
        && version.as_bytes() != b"1"
    {
        return Err(to_status(Error::InvalidArgument(vec![FieldViolation {
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
                    to_status(Error::RequestTooLarge { limit })
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
