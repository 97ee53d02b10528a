//! One campaign: real replicas on one store, proxies in front of them, the
//! provider, workers delivering intents with twists, faults on a schedule and
//! at random, then a reconciler, a settling pass and the checks.
//!
//! A module for each step, in the order a campaign runs them: `setup`
//! (store, replicas, proxies, clients), `workload` (the intents and their
//! twists, on the `world` every step shares), `schedule` (the faults),
//! `settling` (the reconciler and the callers coming back), `checks` and
//! `report`.

mod checks;
mod external;
mod outages;
mod report;
mod schedule;
mod settings;
mod settling;
mod setup;
mod stats;
mod workload;
mod world;

use std::path::Path;
use std::sync::Arc;

use tokio::time::Instant;

pub(crate) use report::{Report, print_table};
pub(crate) use settings::Language;
pub(crate) use settings::{Backend, Settings};

use crate::rng::Rng;
use report::Tally;
use schedule::Schedule;
use setup::Store;
use world::World;

/// Runs one campaign in `directory` (created; the caller removes it).
pub(crate) async fn run(
    backend: Backend,
    settings: Settings,
    directory: &Path,
) -> Result<Report, String> {
    let started = Instant::now();
    let mut rng = Rng::seeded(settings.seed);
    std::fs::create_dir_all(directory).map_err(|error| format!("mkdir: {error}"))?;
    let store = Store::create(backend, directory, &mut rng).await?;
    let postgres = store.postgres.clone();
    let formation = store.formation.clone();
    let outcome = campaign(backend, &settings, directory, &mut rng, store).await;
    if let Some(formation) = formation {
        let _ = tokio::task::spawn_blocking(move || drop(formation)).await;
    }
    // The last handle: dropping it stops the cluster (off the runtime's
    // threads, as pg_ctl blocks).
    if let Some(postgres) = postgres {
        let _ = tokio::task::spawn_blocking(move || drop(postgres)).await;
    }
    let mut report = outcome?;
    report.elapsed = started.elapsed();
    Ok(report)
}

/// The workload under faults, the faults stopped, the settling rounds, the
/// checks; the replicas run until the checks are done.
async fn campaign(
    backend: Backend,
    settings: &Settings,
    directory: &Path,
    rng: &mut Rng,
    store: Store,
) -> Result<Report, String> {
    let (processes, proxies, clients, token) =
        setup::start_replicas(settings, directory, rng, store).await?;
    let mut world = World::new(settings.clone(), clients);
    // Out of process: the provider over HTTP, and the worker of the chosen
    // language, ready before the faults start.
    let mut _provider_server = None;
    if settings.language.external() {
        let server =
            external::ProviderServer::start(world.provider.clone(), world.stats.clone()).await?;
        let worker = external::Worker::start(
            settings.language,
            directory,
            &proxies.targets(),
            &token,
            server.addr,
        )
        .await?;
        world.worker = Some(worker);
        _provider_server = Some(server);
    }
    let world = Arc::new(world);
    let postgres = processes.postgres.clone();
    let schedule = Schedule::start(processes, settings, rng);
    let intents = workload::run(&world, rng).await;
    let (processes, injected) = schedule.stop().await?;
    proxies.calm();
    let settling = settling::settle_rounds(&world, &intents, rng).await?;
    let verified = checks::verify(&world, &intents, rng).await?;
    drop(processes);
    if let Some(postgres) = &postgres {
        checks::no_statement_failed_since(&world, postgres, &injected.failed_statements).await?;
    }
    let tally = Tally {
        world: &world,
        proxies: &proxies,
        injected: &injected,
        settling: &settling,
        verified: &verified,
    };
    Ok(report::build(backend, &tally))
}
