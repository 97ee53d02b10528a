//! A span and a latency sample for every call of the API, as a tower layer
//! around the generated service rather than code in each handler. The span's
//! parent is the caller's W3C trace context (`traceparent`, `tracestate`).
//! Health and reflection calls are not wrapped: probes would drown the traces.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use opentelemetry::propagation::Extractor;
use tonic::codegen::http;
use tonic::server::NamedService;
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::metrics::Metrics;

/// The API service, observed.
#[derive(Clone)]
pub struct Observed<S> {
    inner: S,
    metrics: Metrics,
}

impl<S> Observed<S> {
    pub fn new(inner: S, metrics: Metrics) -> Self {
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

impl<S> tower::Service<http::Request<tonic::body::Body>> for Observed<S>
where
    S: tower::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = Infallible,
        > + NamedService
        + Clone
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

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let method = request
            .uri()
            .path()
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned();
        let parent = opentelemetry::global::get_text_map_propagator(|propagator| {
            propagator.extract(&HeaderExtractor(request.headers()))
        });
        let span = tracing::info_span!(
            "grpc.server",
            otel.name = format!("{}/{method}", S::NAME),
            otel.kind = "server",
            otel.status_code = tracing::field::Empty,
            rpc.system = "grpc",
            rpc.service = S::NAME,
            rpc.method = method.as_str(),
            rpc.grpc.status_code = tracing::field::Empty,
            idem.operation = tracing::field::Empty,
            idem.outcome = tracing::field::Empty,
            idem.fence = tracing::field::Empty,
        );
        // Without an exporter there is no OpenTelemetry layer to take it.
        let _ = span.set_parent(parent);

        // The clone that was polled ready serves this call (tower's rule).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let metrics = self.metrics.clone();
        let started = Instant::now();
        let call_span = span.clone();
        Box::pin(
            async move {
                let response = inner.call(request).await?;
                // Unary errors travel trailers-only, in the headers; success
                // sends its status in trailers, after this point.
                let code = response
                    .headers()
                    .get("grpc-status")
                    .and_then(|value| value.to_str().ok())
                    .and_then(|value| value.parse::<i32>().ok())
                    .map_or(tonic::Code::Ok, tonic::Code::from);
                call_span.record("rpc.grpc.status_code", code as i32);
                if is_server_error(code) {
                    call_span.record("otel.status_code", "ERROR");
                }
                metrics.rpc_latency(&method, &format!("{code:?}"), started.elapsed());
                Ok(response)
            }
            .instrument(span),
        )
    }
}
