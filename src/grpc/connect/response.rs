//! The Connect answer for the gRPC one: the message back to JSON, the
//! application's metadata as headers.

use http_body_util::{BodyExt, Limited};
use tonic::codegen::http::{self, HeaderMap, StatusCode, header};
use tonic::{Code, Status};

use super::codec::Codec;
use super::json_error::{error_response, json_response};
use crate::domain::Error;
use crate::grpc::status::to_status;

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
pub(super) fn copy_metadata(
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
pub(super) async fn connect_response(
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
        .unwrap_or_else(|| to_status(Error::Internal("an answer ended without a status".into())));
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
        return error_response(&to_status(error));
    };
    match (codec.response)(message) {
        Ok(json) => with_metadata(json_response(StatusCode::OK, json)),
        Err(status) => error_response(&status),
    }
}
