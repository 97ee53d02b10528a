use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = idemd::config::Cli::parse();
    idemd::telemetry::init(cli.log_format);
    match idemd::run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error, "idemd failed");
            eprintln!("idemd: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}
