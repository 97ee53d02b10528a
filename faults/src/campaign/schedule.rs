//! The fault schedule: one fault at a time (a replica killed, the database
//! restarted, killed or frozen, a window of failing statements), and, on
//! Postgres, idemd backends terminated at random alongside it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::sleep;

use super::outages;
use super::settings::Settings;
use super::setup::{Processes, blocking};
use crate::database;
use crate::process::Postgres;
use crate::rng::Rng;

#[derive(Debug, Default)]
pub(super) struct FaultCounts {
    pub(super) replica_kills: u64,
    pub(super) database_restarts: u64,
    pub(super) database_kills: u64,
    pub(super) database_freezes: u64,
    pub(super) statement_failure_windows: u64,
    pub(super) primary_kills: u64,
    pub(super) switchovers: u64,
    /// (Failover) Nodes rewound after their timeline diverged.
    pub(super) rewinds: u64,
}

/// What the faults did, counted once they stopped.
pub(super) struct Injected {
    pub(super) counts: FaultCounts,
    pub(super) backends_terminated: u64,
    /// Statements the trigger failed, per SQLSTATE (Postgres; empty on the
    /// embedded store).
    pub(super) failed_statements: BTreeMap<&'static str, u64>,
    /// (Failover) The outages the write probes saw, one per outage.
    pub(super) outages: Vec<Duration>,
}

/// The running schedule and terminator, until [`Schedule::stop`].
pub(super) struct Schedule {
    stop: watch::Sender<bool>,
    faults: JoinHandle<(Processes, FaultCounts, Result<(), String>)>,
    terminator: Option<JoinHandle<u64>>,
    probes: Vec<JoinHandle<Vec<Duration>>>,
    postgres: Option<Arc<Postgres>>,
}

impl Schedule {
    /// Hands the processes to the schedule, which does its faults to them
    /// until [`Schedule::stop`].
    pub(super) fn start(processes: Processes, settings: &Settings, rng: &mut Rng) -> Self {
        let (stop, stopped) = watch::channel(false);
        let postgres = processes.postgres.clone();
        let terminator = postgres.clone().map(|postgres| {
            tokio::spawn(terminate_backends_at_random(
                postgres,
                settings.terminate_every,
                rng.fork(),
                stopped.clone(),
            ))
        });
        // Straight to each replica: what a client sees of a failover.
        let probes = match &processes.formation {
            Some(_) => processes
                .replicas
                .iter()
                .map(|replica| {
                    tokio::spawn(outages::probe(
                        replica.addr().to_string(),
                        replica.token().to_owned(),
                        stopped.clone(),
                    ))
                })
                .collect(),
            None => Vec::new(),
        };
        let faults = tokio::spawn(inject_faults(
            processes,
            settings.fault_every,
            settings.statement_failure_rate,
            rng.fork(),
            stopped,
        ));
        Self {
            stop,
            faults,
            terminator,
            probes,
            postgres,
        }
    }

    /// Stops the faults (the last one ends first) and gives the processes
    /// back; the database's failing statements are switched off for good.
    pub(super) async fn stop(self) -> Result<(Processes, Injected), String> {
        self.stop.send_replace(true);
        let (processes, counts, injected) = self
            .faults
            .await
            .map_err(|error| format!("the fault task failed: {error}"))?;
        injected?;
        let backends_terminated = match self.terminator {
            Some(terminator) => terminator
                .await
                .map_err(|error| format!("the terminator failed: {error}"))?,
            None => 0,
        };
        // The schedule ends every window it opens; switched off once more, so
        // that the reconciler and the settling pass certainly run without.
        let failed_statements = match &self.postgres {
            Some(postgres) => {
                blocking(postgres, |postgres| {
                    database::set_failure_rate(postgres, 0.0)
                })
                .await?;
                blocking(postgres, database::injected_failures).await?
            }
            None => Default::default(),
        };
        let mut outages = Vec::new();
        for probe in self.probes {
            outages.extend(
                probe
                    .await
                    .map_err(|error| format!("a probe failed: {error}"))?,
            );
        }
        let injected = Injected {
            counts,
            backends_terminated,
            failed_statements,
            outages,
        };
        Ok((processes, injected))
    }
}

#[derive(Debug, Clone, Copy)]
enum Fault {
    KillReplica,
    RestartDatabase,
    KillDatabase,
    FreezeDatabase,
    /// A window during which a fraction of the statements on `operations`
    /// fail with a transient SQLSTATE (the trigger's switch on, then off).
    FailStatements,
    /// (Failover) SIGKILL of the primary's postmaster; its keeper restarts it.
    KillPrimary,
    /// (Failover) `pg_autoctl perform switchover`.
    Switchover,
}

/// The fault schedule: one fault at a time, a random pause apart, cycling
/// through the plan with random targets and durations; until `stop`.
async fn inject_faults(
    mut processes: Processes,
    every: Duration,
    statement_failure_rate: f64,
    mut rng: Rng,
    mut stop: watch::Receiver<bool>,
) -> (Processes, FaultCounts, Result<(), String>) {
    let plan: &[Fault] = if processes.formation.is_some() {
        // The database's faults alone: the outages measured are its own.
        &[Fault::KillPrimary, Fault::Switchover]
    } else if processes.postgres.is_some() {
        &[
            Fault::KillReplica,
            Fault::FailStatements,
            Fault::RestartDatabase,
            Fault::KillReplica,
            Fault::FreezeDatabase,
            Fault::FailStatements,
            Fault::KillReplica,
            Fault::KillDatabase,
        ]
    } else {
        &[Fault::KillReplica]
    };
    let mut counts = FaultCounts::default();
    let mut step = 0;
    let outcome = loop {
        let pause = rng.between(every / 2, every * 3 / 2);
        tokio::select! {
            _ = stop.wait_for(|stop| *stop) => break Ok(()),
            () = sleep(pause) => {}
        }
        let fault = plan[step % plan.len()];
        step += 1;
        let done = match (fault, &processes.postgres, &processes.database_proxy) {
            (Fault::KillReplica, _, _) => {
                let index = rng.below(processes.replicas.len() as u64) as usize;
                let replica = &mut processes.replicas[index];
                replica.kill();
                counts.replica_kills += 1;
                sleep(rng.between(Duration::from_millis(200), Duration::from_millis(1500))).await;
                replica.start().await
            }
            (Fault::RestartDatabase, Some(postgres), _) => {
                counts.database_restarts += 1;
                blocking(postgres, Postgres::restart).await
            }
            (Fault::KillDatabase, Some(postgres), _) => {
                counts.database_kills += 1;
                match blocking(postgres, Postgres::kill).await {
                    Ok(()) => {
                        sleep(rng.between(Duration::from_millis(100), Duration::from_millis(800)))
                            .await;
                        blocking(postgres, Postgres::start).await
                    }
                    Err(error) => Err(error),
                }
            }
            (Fault::FreezeDatabase, _, Some(proxy)) => {
                counts.database_freezes += 1;
                proxy.set_frozen(true);
                sleep(rng.between(Duration::from_millis(500), Duration::from_millis(2500))).await;
                proxy.set_frozen(false);
                Ok(())
            }
            (Fault::FailStatements, Some(postgres), _) => {
                counts.statement_failure_windows += 1;
                let window = rng.between(Duration::from_millis(1000), Duration::from_millis(4000));
                match blocking(postgres, move |postgres| {
                    database::set_failure_rate(postgres, statement_failure_rate)
                })
                .await
                {
                    Ok(()) => {
                        sleep(window).await;
                        blocking(postgres, |postgres| {
                            database::set_failure_rate(postgres, 0.0)
                        })
                        .await
                    }
                    Err(error) => Err(error),
                }
            }
            (Fault::KillPrimary, _, _) => match processes.formation.clone() {
                Some(formation) => {
                    counts.primary_kills += 1;
                    in_blocking(move || formation.kill_primary()).await
                }
                None => Ok(()),
            },
            (Fault::Switchover, _, _) => match processes.formation.clone() {
                Some(formation) => {
                    counts.switchovers += 1;
                    in_blocking(move || formation.switchover()).await
                }
                None => Ok(()),
            },
            _ => Ok(()),
        };
        if let Err(error) = done {
            break Err(error);
        }
    };
    if let Some(formation) = &processes.formation {
        counts.rewinds = formation.rewinds();
    }
    (processes, counts, outcome)
}

async fn in_blocking(
    action: impl FnOnce() -> Result<(), String> + Send + 'static,
) -> Result<(), String> {
    tokio::task::spawn_blocking(action)
        .await
        .map_err(|error| format!("a blocking task failed: {error}"))?
}

/// Terminates one or two random idemd backends at random pauses, alongside
/// the schedule, until `stop`; how many it terminated. A round that finds
/// the database down (restarting) terminates nothing.
async fn terminate_backends_at_random(
    postgres: Arc<Postgres>,
    every: Duration,
    mut rng: Rng,
    mut stop: watch::Receiver<bool>,
) -> u64 {
    let mut terminated = 0;
    loop {
        let pause = rng.between(every / 2, every * 3 / 2);
        tokio::select! {
            _ = stop.wait_for(|stop| *stop) => return terminated,
            () = sleep(pause) => {}
        }
        let count = 1 + rng.below(2);
        if let Ok(ended) = blocking(&postgres, move |postgres| {
            database::terminate_backends(postgres, count)
        })
        .await
        {
            terminated += ended;
        }
    }
}
