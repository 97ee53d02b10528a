//! `idemd-local dispatch`: delivers the outbox of one schema through the
//! idemd service (local/README.md).

use std::time::Duration;

use clap::{Parser, Subcommand};
use idemd_local::dispatch::{DispatchSettings, Dispatcher};
use idemd_local::http_recipient::HttpRecipient;
use idemd_local::{Local, Schema};
use sqlx::postgres::PgPoolOptions;

#[derive(Debug, Parser)]
#[command(name = "idemd-local", about = "idemd-local's outbox dispatcher")]
struct Command {
    #[command(subcommand)]
    verb: Verb,
}

#[derive(Debug, Subcommand)]
enum Verb {
    /// Delivers unsent outbox entries (HTTP POST to each entry's recipient
    /// URL, through the service's execute-once) until SIGINT or SIGTERM.
    Dispatch(DispatchFlags),
}

#[derive(Debug, clap::Args)]
struct DispatchFlags {
    /// The application's database, where the outbox is.
    #[arg(long, env = "DATABASE_URL")]
    database_url: String,
    /// The schema idemd-local was migrated into.
    #[arg(long, env = "IDEMD_LOCAL_SCHEMA", default_value = "idemd")]
    schema: String,
    /// The idemd service.
    #[arg(long, env = "IDEMD_ADDR", default_value = "http://127.0.0.1:50051")]
    idemd_addr: String,
    /// A token of the tenant the deliveries run under.
    #[arg(long, env = "IDEMD_TOKEN")]
    token: String,
    /// Entries read per pass.
    #[arg(long, env = "IDEMD_LOCAL_BATCH", default_value_t = 100)]
    batch: i64,
    /// The pause after a pass that found nothing.
    #[arg(long, env = "IDEMD_LOCAL_IDLE", default_value = "500ms", value_parser = humantime::parse_duration)]
    idle: Duration,
    /// The lease of each delivery at the service.
    #[arg(long, env = "IDEMD_LOCAL_LEASE", default_value = "10s", value_parser = humantime::parse_duration)]
    lease: Duration,
    /// For fault tests: sleep between a delivery's record at the service and
    /// the entry's mark.
    #[arg(long, hide = true, value_parser = humantime::parse_duration)]
    pause_before_mark: Option<Duration>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Verb::Dispatch(flags) = Command::parse().verb;
    let local = Local::new(Schema::new(&flags.schema)?);
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect(&flags.database_url)
        .await?;
    let client = idemd_client::Client::connect(&flags.idemd_addr, &flags.token).await?;
    let dispatcher = Dispatcher::new(pool, &local, client, HttpRecipient::default()).with_settings(
        DispatchSettings {
            batch: flags.batch,
            idle: flags.idle,
            lease: flags.lease,
            pause_before_mark: flags.pause_before_mark,
        },
    );
    eprintln!(
        "idemd-local: dispatching the outbox of schema {}",
        flags.schema
    );
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    dispatcher
        .run_until(async move {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
        })
        .await;
    eprintln!("idemd-local: stopped");
    Ok(())
}
