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
use tracing::Dispatch;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::filter_fn;
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
    let tracer_provider = match &export {
        TraceExport::Off => None,
        TraceExport::FromEnvironment => Some(tracer_provider(None)?),
        TraceExport::Endpoint(endpoint) => Some(tracer_provider(Some(endpoint))?),
    };
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let tracer = tracer_provider
        .as_ref()
        .map(|provider| provider.tracer("idemd"));
    let logs = Logs {
        format,
        ansi: std::io::stderr().is_terminal(),
        level: std::env::var("RUST_LOG").ok(),
    };
    let installed = subscriber(&logs, tracer, std::io::stderr).try_init();
    if installed.is_err() {
        return Ok(Telemetry {
            tracer_provider: None,
        });
    }
    Ok(Telemetry { tracer_provider })
}

/// How log lines are written.
struct Logs {
    format: LogFormat,
    ansi: bool,
    /// `RUST_LOG`'s directives; INFO when unset or unreadable.
    level: Option<String>,
}

impl Logs {
    fn level(&self) -> EnvFilter {
        self.level
            .as_deref()
            .and_then(|directives| EnvFilter::try_new(directives).ok())
            .unwrap_or_else(|| EnvFilter::new("info"))
    }
}

/// The log lines (to `writer`) and, with a tracer, the exported spans,
/// behind one filter: the level asked for, minus what must never be logged,
/// and with no tracer minus the store's spans. A store call's, a statement's
/// and a batch's spans are for traces: on a log line they would add only the
/// database's name, and built for every call at INFO they cost a few per
/// cent of the server's CPU (bench/README.md, "Where the time goes").
///
/// One filter in front of every layer, not one per layer: with per-layer
/// filters (tracing-subscriber 0.3.23) a refused Claim's server and store
/// spans never reached the exporter on Postgres (tests/it/observability.rs),
/// for a cause not pinned down, and a `None` exporter layer counted as
/// wanting every span, so the store's were built for nobody.
fn subscriber<W>(
    logs: &Logs,
    tracer: Option<opentelemetry_sdk::trace::SdkTracer>,
    writer: W,
) -> Dispatch
where
    W: for<'writer> tracing_subscriber::fmt::MakeWriter<'writer> + Send + Sync + 'static,
{
    let exporting = tracer.is_some();
    let wanted = filter_fn(move |metadata| {
        never_secret(metadata)
            && (exporting || !(metadata.is_span() && metadata.target().starts_with(STORE_TARGET)))
    });
    let registry = tracing_subscriber::registry()
        .with(logs.level())
        .with(wanted)
        .with(tracer.map(|tracer| tracing_opentelemetry::layer().with_tracer(tracer)));
    match logs.format {
        LogFormat::Json => Dispatch::new(
            registry.with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_ansi(false)
                    .flatten_event(true)
                    .with_current_span(false)
                    .with_writer(writer),
            ),
        ),
        LogFormat::Text => Dispatch::new(
            registry.with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(logs.ansi)
                    .with_writer(writer),
            ),
        ),
    }
}

/// Where the store's spans come from: its modules.
const STORE_TARGET: &str = "idemd::store";

/// The MCP SDK (`idemd mcp`) logs whole requests and results at debug and
/// trace: tool arguments and answers, which may carry payloads and evidence.
/// Never those, whatever RUST_LOG asks for.
fn never_secret(metadata: &tracing::Metadata<'_>) -> bool {
    !(metadata.target().starts_with("rmcp") && *metadata.level() > tracing::Level::INFO)
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
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use super::{LogLimiter, Logs, subscriber};
    use crate::config::LogFormat;
    use crate::store::statement_span;

    /// What a subscriber writes, and the writer that writes there.
    fn captured() -> (
        Arc<Mutex<Vec<u8>>>,
        impl Fn() -> Written + Send + Sync + 'static,
    ) {
        let written = Arc::new(Mutex::new(Vec::new()));
        let into = Arc::clone(&written);
        (written, move || Written(Arc::clone(&into)))
    }

    fn text(written: &Mutex<Vec<u8>>) -> String {
        String::from_utf8(written.lock().expect("log").clone()).expect("utf-8")
    }

    fn logs(format: LogFormat) -> Logs {
        Logs {
            format,
            ansi: false,
            level: Some("info".to_owned()),
        }
    }

    struct Written(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Written {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("log").extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Keeps the names of the spans it is given.
    #[derive(Debug, Clone, Default)]
    struct Exported(Arc<Mutex<Vec<String>>>);

    impl opentelemetry_sdk::trace::SpanExporter for Exported {
        async fn export(
            &self,
            batch: Vec<opentelemetry_sdk::trace::SpanData>,
        ) -> opentelemetry_sdk::error::OTelSdkResult {
            let mut names = self.0.lock().expect("spans");
            names.extend(batch.into_iter().map(|span| span.name.into_owned()));
            Ok(())
        }
    }

    #[test]
    fn with_an_exporter_the_stores_spans_are_exported_and_log_lines_name_the_trace() {
        use opentelemetry::trace::TracerProvider as _;
        let exported = Exported::default();
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
            .with_simple_exporter(exported.clone())
            .build();
        let (written, writer) = captured();
        let dispatch = subscriber(
            &logs(LogFormat::Json),
            Some(provider.tracer("test")),
            writer,
        );
        tracing::dispatcher::with_default(&dispatch, || {
            // The statement's callsite is shared with the store tests that
            // run beside this one without a subscriber. With one dispatcher
            // alive, tracing-core computes a newly hit callsite's interest
            // from the hitting thread's default alone: a store test hitting
            // it first cached "never" and this test's statement span was not
            // built (seen once in CI). Rebuilt here, under this dispatcher,
            // after the callsite is surely registered.
            drop(statement_span("postgresql", "INSERT operations"));
            tracing::callsite::rebuild_interest_cache();
            exported.0.lock().expect("spans").clear();
            let request = tracing::info_span!("grpc.server", otel.name = "Claim");
            let _request = request.enter();
            {
                // A store call's span, as `#[instrument]` in store/paths.rs makes it.
                let _call =
                    tracing::info_span!(target: "idemd::store::paths", "store.insert_or_find")
                        .entered();
                drop(statement_span("postgresql", "INSERT operations").entered());
            }
            tracing::info!(
                trace_id = super::current_trace_id().as_deref(),
                "claim refused"
            );
        });
        let names = exported.0.lock().expect("spans").clone();
        assert!(names.contains(&"Claim".to_owned()), "{names:?}");
        assert!(
            names.contains(&"store.insert_or_find".to_owned()),
            "{names:?}"
        );
        assert!(names.contains(&"INSERT operations".to_owned()), "{names:?}");
        let line = text(&written);
        assert!(line.contains("\"trace_id\""), "{line}");
    }

    #[test]
    fn without_an_exporter_the_stores_spans_are_not_built_and_log_lines_keep_the_requests() {
        for (format, request_shown) in [
            (LogFormat::Text, "grpc.server{rpc.method=\"Claim\"}"),
            (LogFormat::Json, "\"grpc.server\""),
        ] {
            let (written, writer) = captured();
            let statement_built =
                tracing::dispatcher::with_default(&subscriber(&logs(format), None, writer), || {
                    let request = tracing::info_span!("grpc.server", rpc.method = "Claim");
                    let _request = request.enter();
                    let statement = statement_span("postgresql", "INSERT operations");
                    let _statement = statement.enter();
                    tracing::warn!(operation_id = "op-1", "stale write refused");
                    !statement.is_disabled()
                });
            let line = text(&written);
            assert!(
                !statement_built,
                "{format:?}: the statement's span was built"
            );
            assert!(line.contains("stale write refused"), "{format:?}: {line}");
            assert!(line.contains("op-1"), "{format:?}: {line}");
            assert!(line.contains(request_shown), "{format:?}: {line}");
            assert!(!line.contains("db.statement"), "{format:?}: {line}");
            assert!(!line.contains("postgresql"), "{format:?}: {line}");
        }
    }

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
