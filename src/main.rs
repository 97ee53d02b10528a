use clap::Parser;

// jemalloc, not glibc's malloc: 7-14% less CPU per operation under load, a few MiB
// more resident (bench/README.md, "Where the time goes").
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = idemd::config::Cli::parse();
    let telemetry = match idemd::telemetry::init(
        cli.log_format,
        idemd::telemetry::TraceExport::from_environment(),
    ) {
        Ok(telemetry) => telemetry,
        Err(error) => {
            eprintln!("idemd: cannot set up tracing: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let outcome = idemd::run(cli).await;
    telemetry.shutdown().await;
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        // `idemd ops` exit codes are API for scripts (docs/operating.md);
        // the message is for the person at the terminal, not the log.
        Err(error) => match error.downcast_ref::<idemd::app::OpsFailure>() {
            Some(failure) => {
                eprintln!("idemd: {failure}");
                std::process::ExitCode::from(failure.exit_code)
            }
            None => {
                tracing::error!(%error, "idemd failed");
                eprintln!("idemd: {error}");
                std::process::ExitCode::FAILURE
            }
        },
    }
}
