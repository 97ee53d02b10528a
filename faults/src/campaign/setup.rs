//! What a campaign sets up before its workload: the store (a Postgres of its
//! own behind a raw proxy, or the embedded store's directory), the replicas,
//! the two proxy stages in front of each, and the clients that reach them.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use idemd_client::retry::RetryPolicy;
use idemd_client::{Client, ClientConfig};

use super::settings::{Backend, Settings};
use crate::database;
use crate::duplicator::{Duplicator, DuplicatorCounters};
use crate::formation::Formation;
use crate::process::{Postgres, Replica, StoreConfig, prepare_store};
use crate::proxy::{FaultRates, Protocol, Proxy, ProxyCounters};
use crate::rng::Rng;

/// The processes of one campaign, and the faults done to them.
pub(super) struct Processes {
    pub(super) replicas: Vec<Replica>,
    pub(super) postgres: Option<Arc<Postgres>>,
    pub(super) database_proxy: Option<Arc<Proxy>>,
    pub(super) formation: Option<Arc<Formation>>,
}

pub(super) async fn blocking<T: Send + 'static>(
    postgres: &Arc<Postgres>,
    action: impl FnOnce(&Postgres) -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    let postgres = postgres.clone();
    tokio::task::spawn_blocking(move || action(&postgres))
        .await
        .map_err(|error| format!("a blocking task failed: {error}"))?
}

/// The store a campaign runs on, and how its replicas reach it.
pub(super) struct Store {
    pub(super) postgres: Option<Arc<Postgres>>,
    pub(super) database_proxy: Option<Arc<Proxy>>,
    pub(super) formation: Option<Arc<Formation>>,
    /// For idemd's own migration, past the database proxy.
    pub(super) direct: StoreConfig,
    pub(super) for_replicas: StoreConfig,
    pub(super) replica_count: usize,
}

impl Store {
    /// A Postgres cluster of its own (behind a raw proxy that can freeze its
    /// connections) with two replicas, or the embedded store with one.
    pub(super) async fn create(
        backend: Backend,
        directory: &Path,
        rng: &mut Rng,
    ) -> Result<Self, String> {
        match backend {
            Backend::Postgres => {
                let pg_directory = directory.join("postgres");
                let postgres = tokio::task::spawn_blocking(move || Postgres::create(&pg_directory))
                    .await
                    .map_err(|error| format!("initdb task: {error}"))??;
                let proxy = Proxy::start(postgres.addr(), Protocol::Raw, rng.next_u64())
                    .await
                    .map_err(|error| format!("database proxy: {error}"))?;
                let direct = StoreConfig::Postgres {
                    url: postgres.url(),
                };
                let for_replicas = StoreConfig::Postgres {
                    url: format!("postgres://postgres@{}/postgres", proxy.addr),
                };
                Ok(Self {
                    postgres: Some(Arc::new(postgres)),
                    database_proxy: Some(Arc::new(proxy)),
                    formation: None,
                    direct,
                    for_replicas,
                    replica_count: 2,
                })
            }
            Backend::Failover => {
                let formation_directory = directory.join("formation");
                let formation =
                    tokio::task::spawn_blocking(move || Formation::create(&formation_directory))
                        .await
                        .map_err(|error| format!("formation task: {error}"))??;
                // The replicas and idemd's migration alike reach the primary
                // through the multi-host URL.
                let store = StoreConfig::Postgres {
                    url: formation.url(),
                };
                Ok(Self {
                    postgres: None,
                    database_proxy: None,
                    formation: Some(Arc::new(formation)),
                    direct: store.clone(),
                    for_replicas: store,
                    replica_count: 2,
                })
            }
            Backend::Embedded => {
                let store = StoreConfig::Embedded {
                    data_dir: directory.join("data"),
                };
                Ok(Self {
                    postgres: None,
                    database_proxy: None,
                    formation: None,
                    direct: store.clone(),
                    for_replicas: store,
                    replica_count: 1,
                })
            }
        }
    }
}

/// The two proxy stages in front of every replica: the duplicating stage
/// the clients reach, and the frame proxy behind it.
pub(super) struct Proxies {
    frames: Vec<Proxy>,
    duplicators: Vec<Duplicator>,
}

impl Proxies {
    /// No more faults and no more copies: what follows the faults runs
    /// without them.
    pub(super) fn calm(&self) {
        for proxy in &self.frames {
            proxy.set_rates(FaultRates::default());
        }
        for duplicator in &self.duplicators {
            duplicator.set_rates(FaultRates::default());
        }
    }

    /// Where the clients reach each replica: its duplicating stage.
    pub(super) fn targets(&self) -> Vec<String> {
        self.duplicators
            .iter()
            .map(|duplicator| duplicator.addr.to_string())
            .collect()
    }

    /// A frame proxies' counter, summed over the replicas.
    pub(super) fn forwarded(&self, counter: fn(&ProxyCounters) -> &AtomicU64) -> u64 {
        self.frames
            .iter()
            .map(|proxy| ProxyCounters::get(counter(proxy.counters())))
            .sum::<u64>()
    }

    /// A duplicating stages' counter, summed over the replicas.
    pub(super) fn duplicated(&self, counter: fn(&DuplicatorCounters) -> &AtomicU64) -> u64 {
        self.duplicators
            .iter()
            .map(|duplicator| counter(duplicator.counters()).load(Ordering::SeqCst))
            .sum::<u64>()
    }
}

/// Migrates the store, installs the database's faults, and starts the
/// replicas with their proxies and two client connections to each.
pub(super) async fn start_replicas(
    settings: &Settings,
    directory: &Path,
    rng: &mut Rng,
    store: Store,
) -> Result<(Processes, Proxies, Vec<Client>, String), String> {
    let direct = store.direct.clone();
    let token = tokio::task::spawn_blocking(move || prepare_store(&direct))
        .await
        .map_err(|error| format!("prepare task: {error}"))??;
    // On idemd's migrated schema, before any replica runs.
    if let Some(postgres) = &store.postgres {
        blocking(postgres, database::install).await?;
    }
    let mut processes = Processes {
        replicas: Vec::new(),
        postgres: store.postgres,
        database_proxy: store.database_proxy,
        formation: store.formation,
    };
    let mut proxies = Proxies {
        frames: Vec::new(),
        duplicators: Vec::new(),
    };
    let mut clients = Vec::new();
    for number in 0..store.replica_count {
        let mut replica = Replica::new(
            &format!("replica-{number}"),
            store.for_replicas.clone(),
            &token,
            directory,
        )?;
        replica.start().await?;
        let proxy = Proxy::start(replica.addr(), Protocol::Http2, rng.next_u64())
            .await
            .map_err(|error| format!("proxy: {error}"))?;
        proxy.set_rates(settings.rates);
        // The clients reach the frame proxy through the duplicating stage,
        // so that the copies it forges meet the frame proxy's faults too.
        let duplicator = Duplicator::start(proxy.addr, rng.next_u64())
            .await
            .map_err(|error| format!("duplicator: {error}"))?;
        duplicator.set_rates(settings.rates);
        // Two connections per replica: a cut connection takes every call on
        // it down, as it would in production.
        for _ in 0..2 {
            clients.push(connect(&duplicator, &token, rng).await?);
        }
        proxies.frames.push(proxy);
        proxies.duplicators.push(duplicator);
        processes.replicas.push(replica);
    }
    Ok((processes, proxies, clients, token))
}

async fn connect(duplicator: &Duplicator, token: &str, rng: &mut Rng) -> Result<Client, String> {
    Ok(Client::connect(&duplicator.addr.to_string(), token)
        .await
        .map_err(|error| format!("connect: {error:?}"))?
        .with_config(ClientConfig {
            retry: RetryPolicy {
                max_sends: 200,
                initial_backoff: Duration::from_millis(20),
                max_backoff: Duration::from_millis(300),
                total_deadline: Duration::from_secs(20),
            },
            call_timeout: Duration::from_secs(2),
        })
        .with_jitter_seed(rng.next_u64()))
}
