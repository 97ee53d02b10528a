//! A span and a latency sample for every call of the API, as a tower layer
//! around the generated service rather than code in each handler. The span's
//! parent is the caller's W3C trace context (`traceparent`, `tracestate`).
//! Health and reflection calls are not wrapped: probes would drown the traces.
//!
//! Every name the layer hands to tracing and metrics is a `&'static str`
//! from a fixed set: the API's methods, else `unknown`, and the gRPC codes. A
//! peer may send any path; a name it invents must not become a span name or
//! a label value (a permanent series per name), nor cost an allocation.

use super::{ApiFuture, ApiService};
use std::convert::Infallible;
use std::task::{Context, Poll};
use std::time::Instant;

use opentelemetry::propagation::Extractor;
use tonic::codegen::http;
use tonic::server::NamedService;
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::metrics::Metrics;

/// Declares [`ApiMethod`] from the service's name and its methods, so the
/// label value, the span name and the lookup come from one list.
macro_rules! api_methods {
    ($service:literal: $($method:ident),+ $(,)?) => {
        /// The service whose methods [`ApiMethod`] lists.
        pub const API_SERVICE: &str = $service;

        /// A method of the API (proto/idem/v1/idempotency.proto), or
        /// `Unknown` for any other path a peer calls.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ApiMethod {
            $($method,)+
            Unknown,
        }

        impl ApiMethod {
            /// Every method the service serves (`Unknown` is not one).
            pub const SERVED: &[ApiMethod] = &[$(ApiMethod::$method),+];

            /// The method's name, as in the proto; the `rpc` label value.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ApiMethod::$method => stringify!($method),)+
                    ApiMethod::Unknown => "unknown",
                }
            }

            /// `service/method`, OpenTelemetry's span name for an RPC.
            pub fn span_name(self) -> &'static str {
                match self {
                    $(ApiMethod::$method => concat!($service, "/", stringify!($method)),)+
                    ApiMethod::Unknown => concat!($service, "/unknown"),
                }
            }
        }
    };
}

api_methods!("idem.v1.IdempotencyService": Claim, Renew, Complete, Fail, Lookup, Reconcile, ListUnresolved, ListOperations, Forget, GetPolicy, Hold, Release, ListHolds, Diagnose);

impl ApiMethod {
    /// The method a request path (`/idem.v1.IdempotencyService/Claim`) names.
    pub fn from_path(path: &str) -> Self {
        let Some((service, method)) = path.strip_prefix('/').and_then(|path| path.split_once('/'))
        else {
            return ApiMethod::Unknown;
        };
        if service != API_SERVICE {
            return ApiMethod::Unknown;
        }
        ApiMethod::SERVED
            .iter()
            .copied()
            .find(|served| served.as_str() == method)
            .unwrap_or(ApiMethod::Unknown)
    }
}

/// The `code` label value: the code's name as tonic spells it (`Ok`,
/// `InvalidArgument`, …).
pub fn code_label(code: tonic::Code) -> &'static str {
    use tonic::Code;
    match code {
        Code::Ok => "Ok",
        Code::Cancelled => "Cancelled",
        Code::Unknown => "Unknown",
        Code::InvalidArgument => "InvalidArgument",
        Code::DeadlineExceeded => "DeadlineExceeded",
        Code::NotFound => "NotFound",
        Code::AlreadyExists => "AlreadyExists",
        Code::PermissionDenied => "PermissionDenied",
        Code::ResourceExhausted => "ResourceExhausted",
        Code::FailedPrecondition => "FailedPrecondition",
        Code::Aborted => "Aborted",
        Code::OutOfRange => "OutOfRange",
        Code::Unimplemented => "Unimplemented",
        Code::Internal => "Internal",
        Code::Unavailable => "Unavailable",
        Code::DataLoss => "DataLoss",
        Code::Unauthenticated => "Unauthenticated",
    }
}

/// `str` equality for a `const` assertion (`==` on `str` is not `const`).
const fn same_name(left: &str, right: &str) -> bool {
    let (left, right) = (left.as_bytes(), right.as_bytes());
    if left.len() != right.len() {
        return false;
    }
    let mut index = 0;
    while index < left.len() {
        if left[index] != right[index] {
            return false;
        }
        index += 1;
    }
    true
}

/// How long a call waited by its own request (a Claim's `wait` for a
/// pending operation), set by its handler on the response: the latency
/// histogram leaves it out, so that long polls do not read as slow calls
/// (the wait has a histogram of its own, `idemd_claim_wait_seconds`).
#[derive(Debug, Clone, Copy)]
pub struct Waited(pub std::time::Duration);

/// The API service, observed.
#[derive(Clone)]
pub struct Observed<S> {
    inner: S,
    metrics: Metrics,
}

impl<S: NamedService> Observed<S> {
    pub fn new(inner: S, metrics: Metrics) -> Self {
        // The span names and labels are those of the API's methods: wrapping
        // another service would name its calls wrongly.
        const {
            assert!(
                same_name(S::NAME, API_SERVICE),
                "Observed wraps the idem.v1.IdempotencyService service only"
            );
        }
        Self { inner, metrics }
    }
}

impl<S: NamedService> NamedService for Observed<S> {
    const NAME: &'static str = S::NAME;
}

struct HeaderExtractor<'a>(&'a http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// The caller's trace context, when it sent one. Without any of the
/// propagator's headers extraction would only return the current context,
/// which a new server span gets anyway: skipping it saves the parse.
fn caller_context(headers: &http::HeaderMap) -> Option<opentelemetry::Context> {
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator
            .fields()
            .any(|field| headers.contains_key(field))
            .then(|| propagator.extract(&HeaderExtractor(headers)))
    })
}

/// OpenTelemetry's rule for gRPC servers: these codes are the server's fault.
fn is_server_error(code: tonic::Code) -> bool {
    use tonic::Code;
    matches!(
        code,
        Code::Unknown
            | Code::DeadlineExceeded
            | Code::Unimplemented
            | Code::Internal
            | Code::Unavailable
            | Code::DataLoss
    )
}

impl<S: ApiService + NamedService> tower::Service<http::Request<tonic::body::Body>>
    for Observed<S>
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = ApiFuture;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let method = ApiMethod::from_path(request.uri().path());
        let span = tracing::info_span!(
            "grpc.server",
            otel.name = method.span_name(),
            otel.kind = "server",
            otel.status_code = tracing::field::Empty,
            rpc.system = "grpc",
            rpc.service = API_SERVICE,
            rpc.method = method.as_str(),
            rpc.grpc.status_code = tracing::field::Empty,
            idem.operation = tracing::field::Empty,
            idem.outcome = tracing::field::Empty,
            idem.fence = tracing::field::Empty,
        );
        if let Some(parent) = caller_context(request.headers()) {
            // Without an exporter there is no OpenTelemetry layer to take it.
            let _ = span.set_parent(parent);
        }

        // The clone that was polled ready serves this call (tower's rule).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let metrics = self.metrics.clone();
        let started = Instant::now();
        let call_span = span.clone();
        let in_flight = metrics.request_in_flight();
        Box::pin(
            async move {
                let response = inner.call(request).await?;
                drop(in_flight);
                // Unary errors travel trailers-only, in the headers; success
                // sends its status in trailers, after this point.
                let code = response
                    .headers()
                    .get("grpc-status")
                    .map_or(tonic::Code::Ok, |value| {
                        tonic::Code::from_bytes(value.as_bytes())
                    });
                call_span.record("rpc.grpc.status_code", code as i32);
                if is_server_error(code) {
                    call_span.record("otel.status_code", "ERROR");
                }
                let waited = response
                    .extensions()
                    .get::<Waited>()
                    .map_or(std::time::Duration::ZERO, |waited| waited.0);
                metrics.rpc_latency(
                    method.as_str(),
                    code_label(code),
                    started.elapsed().saturating_sub(waited),
                );
                Ok(response)
            }
            .instrument(span),
        )
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;
    use crate::grpc::server::IdempotencyApi;
    use crate::proto::idempotency_service_server::IdempotencyServiceServer;

    #[test]
    fn the_method_list_is_the_services_own() {
        assert_eq!(
            <IdempotencyServiceServer<IdempotencyApi> as NamedService>::NAME,
            API_SERVICE
        );
        let descriptors = prost_types::FileDescriptorSet::decode(crate::proto::FILE_DESCRIPTOR_SET)
            .expect("the built descriptor set decodes");
        let (package, service) = API_SERVICE.rsplit_once('.').expect("package.Service");
        let proto_methods: Vec<&str> = descriptors
            .file
            .iter()
            .filter(|file| file.package() == package)
            .flat_map(|file| &file.service)
            .filter(|described| described.name() == service)
            .flat_map(|described| &described.method)
            .map(|method| method.name())
            .collect();
        let listed: Vec<&str> = ApiMethod::SERVED
            .iter()
            .map(|method| method.as_str())
            .collect();
        assert_eq!(listed, proto_methods);
    }

    #[test]
    fn paths_name_a_served_method_or_unknown() {
        for method in ApiMethod::SERVED {
            let path = format!("/{API_SERVICE}/{}", method.as_str());
            assert_eq!(ApiMethod::from_path(&path), *method);
            assert_eq!(method.span_name(), &path[1..]);
        }
        for path in [
            "/idem.v1.IdempotencyService/Invented",
            "/idem.v1.IdempotencyService/claim",
            "/idem.v1.IdempotencyService/Claim/more",
            "/idem.v1.IdempotencyService/",
            "/other.v1.Service/Claim",
            "/Claim",
            "",
        ] {
            assert_eq!(ApiMethod::from_path(path), ApiMethod::Unknown, "{path}");
        }
        assert_eq!(ApiMethod::Unknown.as_str(), "unknown");
        assert_eq!(
            ApiMethod::Unknown.span_name(),
            "idem.v1.IdempotencyService/unknown"
        );
    }

    #[test]
    fn code_labels_are_the_codes_names() {
        for value in 0..=16 {
            let code = tonic::Code::from(value);
            assert_eq!(code_label(code), format!("{code:?}"));
        }
    }
}
