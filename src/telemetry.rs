//! Logs and traces. Messages are lowercase with structured fields; keys,
//! payloads, results and tokens are never logged nor put on spans.
//!
//! Traces go to an OTLP collector over gRPC when the standard variables say
//! so (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`;
//! `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER` and
//! `OTEL_TRACES_SAMPLER_ARG` are honoured) and are off otherwise. The caller's
//! W3C `traceparent` becomes the parent of each server span
//! (the gRPC layer in `grpc/observe.rs`).

use std::io::IsTerminal;

use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::config::LogFormat;
use crate::error::BoxError;

/// Where spans go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceExport {
    Off,
    /// Endpoint and everything else from the standard OTEL_* variables.
    FromEnvironment,
    /// An explicit collector endpoint (tests).
    Endpoint(String),
}

impl TraceExport {
    pub fn from_environment() -> Self {
        let set = |name: &str| std::env::var(name).is_ok_and(|value| !value.trim().is_empty());
        let disabled = std::env::var("OTEL_TRACES_EXPORTER").is_ok_and(|value| value == "none")
            || std::env::var("OTEL_SDK_DISABLED").is_ok_and(|value| value == "true");
        if !disabled
            && (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
        {
            TraceExport::FromEnvironment
        } else {
            TraceExport::Off
        }
    }
}

/// Keeps the exporter alive; [`Telemetry::shutdown`] flushes what is queued.
#[derive(Debug)]
pub struct Telemetry {
    tracer_provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Flushes and stops the exporter (last step of a graceful shutdown).
    pub async fn shutdown(self) {
        if let Some(provider) = self.tracer_provider {
            // The processor's flush blocks this thread until the export task,
            // which runs on the runtime, is done: not on a worker thread.
            let _ = tokio::task::spawn_blocking(move || {
                if let Err(error) = provider.shutdown() {
                    eprintln!("idemd: trace exporter shutdown: {error}");
                }
            })
            .await;
        }
    }
}

/// Installs the global subscriber. Must run inside the Tokio runtime when
/// traces are exported. A second call (tests) keeps the first subscriber.
pub fn init(format: LogFormat, export: TraceExport) -> Result<Telemetry, BoxError> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let tracer_provider = match &export {
        TraceExport::Off => None,
        TraceExport::FromEnvironment => Some(tracer_provider(None)?),
        TraceExport::Endpoint(endpoint) => Some(tracer_provider(Some(endpoint))?),
    };
    let otel_layer = tracer_provider
        .as_ref()
        .map(|provider| tracing_opentelemetry::layer().with_tracer(provider.tracer("idemd")));
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());

    // The MCP SDK (`idemd mcp`) logs whole requests and results at debug and
    // trace: tool arguments and answers, which may carry payloads and
    // evidence. Never those, whatever RUST_LOG asks for.
    let quiet_mcp_sdk = tracing_subscriber::filter::filter_fn(|metadata| {
        !(metadata.target().starts_with("rmcp") && *metadata.level() > tracing::Level::INFO)
    });
    let registry = tracing_subscriber::registry()
        .with(filter)
        .with(quiet_mcp_sdk)
        .with(otel_layer);
    let installed = match format {
        LogFormat::Json => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_ansi(false)
                    .flatten_event(true)
                    .with_current_span(false)
                    .with_writer(std::io::stderr),
            )
            .try_init(),
        LogFormat::Text => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(std::io::stderr().is_terminal())
                    .with_writer(std::io::stderr),
            )
            .try_init(),
    };
    if installed.is_err() {
        return Ok(Telemetry {
            tracer_provider: None,
        });
    }
    Ok(Telemetry { tracer_provider })
}

fn tracer_provider(endpoint: Option<&str>) -> Result<SdkTracerProvider, BoxError> {
    let mut exporter = opentelemetry_otlp::SpanExporter::builder().with_tonic();
    if let Some(endpoint) = endpoint {
        exporter = exporter.with_endpoint(endpoint);
    }
    let exporter = exporter.build()?;
    // The batch processor runs on the Tokio runtime: the tonic exporter needs
    // its reactor, which a plain background thread would not have.
    let processor =
        BatchSpanProcessor::builder(exporter, opentelemetry_sdk::runtime::Tokio).build();
    let mut resource = Resource::builder();
    if std::env::var("OTEL_SERVICE_NAME").is_err() {
        resource = resource.with_service_name("idemd");
    }
    Ok(SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(resource.build())
        .build())
}

/// The trace id of the current span, for log lines that support staff will
/// want to follow into the trace. None when traces are off or unsampled.
pub fn current_trace_id() -> Option<String> {
    let context = tracing::Span::current().context();
    let span = context.span();
    let span_context = span.span_context();
    span_context
        .is_valid()
        .then(|| span_context.trace_id().to_string())
}

/// At most one log line per `interval` for a kind of event that callers can
/// cause at will (a client re-sending a stale write in a loop), so that log
/// volume stays bounded; the line that is logged counts those left out
/// since the last one. Metrics still count every event.
#[derive(Debug)]
pub struct LogLimiter {
    interval: std::time::Duration,
    state: std::sync::Mutex<LimiterState>,
}

#[derive(Debug, Default)]
struct LimiterState {
    last: Option<std::time::Instant>,
    suppressed: u64,
}

impl LogLimiter {
    pub fn new(interval: std::time::Duration) -> Self {
        Self {
            interval,
            state: std::sync::Mutex::new(LimiterState::default()),
        }
    }

    /// Whether an event at `now` may be logged: `Some(n)` with the `n`
    /// events left out before it, or `None` (counted, not logged).
    pub fn admit(&self, now: std::time::Instant) -> Option<u64> {
        let Ok(mut state) = self.state.lock() else {
            return Some(0);
        };
        let due = state
            .last
            .is_none_or(|last| now.saturating_duration_since(last) >= self.interval);
        if !due {
            state.suppressed += 1;
            return None;
        }
        state.last = Some(now);
        Some(std::mem::take(&mut state.suppressed))
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::LogLimiter;

    #[test]
    fn the_limiter_admits_one_event_per_interval_and_counts_the_others() {
        let limiter = LogLimiter::new(Duration::from_secs(1));
        let start = Instant::now();
        let at = |millis| start + Duration::from_millis(millis);
        assert_eq!(limiter.admit(at(0)), Some(0));
        assert_eq!(limiter.admit(at(1)), None);
        assert_eq!(limiter.admit(at(500)), None);
        assert_eq!(limiter.admit(at(999)), None);
        assert_eq!(
            limiter.admit(at(1_000)),
            Some(3),
            "three left out before it"
        );
        assert_eq!(limiter.admit(at(1_200)), None);
        assert_eq!(limiter.admit(at(5_000)), Some(1));
        assert_eq!(limiter.admit(at(6_000)), Some(0));
    }
}
