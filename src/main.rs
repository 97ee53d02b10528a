use clap::Parser;

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
        Err(error) => {
            tracing::error!(%error, "idemd failed");
            eprintln!("idemd: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}
