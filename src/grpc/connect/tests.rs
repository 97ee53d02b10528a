use tonic::Code;
use tonic::codegen::http::HeaderValue;

use super::json_error::{code_name, http_status, json_response};
use super::request::{grpc_request, grpc_timeout};
use super::response::copy_metadata;
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
