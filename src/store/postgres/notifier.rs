//! NOTIFY of state changes, after commit, batched, on a connection of its
//! own, with an asynchronous commit.
//!
//! Postgres serialises the commits of every transaction that notifies,
//! cluster-wide, so a NOTIFY inside each write transaction would cap the
//! whole fleet's writes. Instead a write that changed an operation's state
//! hands its operation_id to this notifier once it has committed; one task
//! gathers what arrives meanwhile and sends it as few notifications as fit,
//! from one connection outside the pool. A notifying transaction takes a
//! transaction id and so a commit record: the session commits it without
//! waiting for the WAL flush (`synchronous_commit = off`), since nothing of
//! it needs to survive a crash, and changes that follow one another closely
//! share a notification (they wait at most `COALESCE_WINDOW`). Best effort:
//! waiters poll anyway, so a lost notification costs latency, never
//! correctness.
//!
//! Both connections follow the pool's target: after a failover
//! ([`super::topology`] points the pool at another host), the NOTIFY
//! connection is dropped before its next send and opened again to the new
//! primary, and the LISTEN connection is dropped within
//! [`TARGET_CHECK_INTERVAL`] and listened on again there. Dropped, not
//! closed: the old primary may not answer a goodbye. Meanwhile a waiting
//! Claim misses nothing: it polls the record (every 500 ms at most) whether
//! or not a notification wakes it first.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgListener, PgPool, PgPoolOptions};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, warn};

use super::super::dialect::statement_span;
use super::keepalive::{self, DatabaseSockets};
use crate::backoff::Backoff;
use crate::domain::OperationId;

/// The channel state changes are announced on; the payload is a
/// comma-separated list of operation_ids.
pub(super) const CHANGES_CHANNEL: &str = "idemd_operation_changed";

/// Postgres refuses payloads of 8000 bytes or more.
const MAX_PAYLOAD_BYTES: usize = 7_900;
/// Changes queued beyond this are dropped (waiters poll).
const QUEUE_CAPACITY: usize = 16_384;
/// At most this many changes go out per statement.
const MAX_BATCH: usize = 4_096;
/// Pauses before connecting again to send notifications: doubling while
/// connecting or sending keeps failing, back to the first after a send.
const RECONNECT_FIRST_PAUSE: Duration = Duration::from_millis(100);
const RECONNECT_MAX_PAUSE: Duration = Duration::from_secs(10);
/// After a notification, changes gather this long before the next one, so a
/// busy replica sends a few notifications a second, not one per write.
const COALESCE_WINDOW: Duration = Duration::from_millis(5);

#[derive(Clone)]
pub(super) struct Notifier {
    sender: mpsc::Sender<OperationId>,
    /// Taken by the first change, which starts the sending task (stores are
    /// built outside a runtime too).
    receiver: Arc<Mutex<Option<mpsc::Receiver<OperationId>>>>,
    /// The store's pool, for the options it connects with now: the current
    /// primary's.
    pool: PgPool,
    sockets: Option<Arc<DatabaseSockets>>,
    closed: CancellationToken,
}

impl Notifier {
    pub(super) fn new(pool: PgPool, sockets: Option<Arc<DatabaseSockets>>) -> Self {
        let (sender, receiver) = mpsc::channel(QUEUE_CAPACITY);
        Self {
            sender,
            receiver: Arc::new(Mutex::new(Some(receiver))),
            pool,
            sockets,
            closed: CancellationToken::new(),
        }
    }

    /// Queues a committed state change for the other replicas.
    pub(super) fn changed(&self, operation_id: OperationId) {
        if self.closed.is_cancelled() {
            return;
        }
        self.start_once();
        if self.sender.try_send(operation_id).is_err() {
            debug!("change notification queue full: dropped (waiters poll)");
        }
    }

    /// Sends what is queued and stops.
    pub(super) fn close(&self) {
        self.closed.cancel();
    }

    fn start_once(&self) {
        let Ok(mut receiver) = self.receiver.lock() else {
            return;
        };
        let Some(receiver) = receiver.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(send_changes(
            receiver,
            self.pool.clone(),
            self.sockets.clone(),
            self.closed.clone(),
        ));
    }
}

async fn send_changes(
    mut receiver: mpsc::Receiver<OperationId>,
    pool: PgPool,
    sockets: Option<Arc<DatabaseSockets>>,
    closed: CancellationToken,
) {
    // The connection, and the pool options it was opened with.
    let mut connection: Option<(PgConnection, Arc<PgConnectOptions>)> = None;
    let mut backoff = Backoff::new(RECONNECT_FIRST_PAUSE, RECONNECT_MAX_PAUSE);
    let mut batch = Vec::with_capacity(MAX_BATCH);
    loop {
        let received = tokio::select! {
            received = receiver.recv_many(&mut batch, MAX_BATCH) => received,
            () = closed.cancelled() => {
                receiver.close();
                receiver.recv_many(&mut batch, MAX_BATCH).await
            }
        };
        if received == 0 {
            break;
        }
        if !closed.is_cancelled() {
            // What follows closely rides along.
            tokio::time::sleep(COALESCE_WINDOW).await;
            while batch.len() < MAX_BATCH {
                match receiver.try_recv() {
                    Ok(operation_id) => batch.push(operation_id),
                    Err(_) => break,
                }
            }
        }
        let payloads = payloads(&batch);
        batch.clear();
        let connect = pool.connect_options();
        if connection
            .as_ref()
            .is_some_and(|(_, opened_with)| !Arc::ptr_eq(opened_with, &connect))
        {
            // The primary moved: dropped, not closed (the old one may not
            // answer), and opened again to the new one.
            connection = None;
        }
        if connection.is_none() {
            let options = connect
                .as_ref()
                .clone()
                .options([("synchronous_commit", "off")]);
            let connecting = async {
                let opened = PgConnection::connect_with(&options).await?;
                if let Some(sockets) = &sockets {
                    sockets.configure().await;
                }
                Ok(opened)
            };
            let opened = tokio::time::timeout(CONNECTION_TIMEOUT, connecting)
                .await
                .unwrap_or_else(|_| Err(timed_out("connecting to NOTIFY")));
            match opened {
                Ok(opened) => connection = Some((opened, connect)),
                Err(error) => {
                    warn!(%error, "cannot connect to send change notifications; waiters poll");
                    tokio::time::sleep(backoff.pause()).await;
                    continue;
                }
            }
        }
        let Some((open, _)) = connection.as_mut() else {
            continue;
        };
        let sending =
            sqlx::query("SELECT pg_notify($1, payload) FROM unnest($2::text[]) AS payload")
                .bind(CHANGES_CHANNEL)
                .bind(&payloads)
                .execute(&mut *open)
                .instrument(statement_span("postgresql", "NOTIFY operations changed"));
        // Bounded: a connection the network swallowed must not stop the
        // sender for good.
        let sent = tokio::time::timeout(CONNECTION_TIMEOUT, sending)
            .await
            .unwrap_or_else(|_| Err(timed_out("sending NOTIFY")));
        match sent {
            Ok(_) => backoff.reset(),
            Err(error) => {
                warn!(%error, "change notifications not sent; waiters poll");
                connection = None;
                tokio::time::sleep(backoff.pause()).await;
            }
        }
    }
    if let Some((open, _)) = connection {
        let _ = open.close().await;
    }
}

/// How long the LISTEN connection may stay silent before it is checked: a
/// database gone without closing the socket sends nothing either.
const LISTEN_CHECK_INTERVAL: Duration = Duration::from_secs(10);
/// How often the LISTEN connection looks whether the pool's target moved
/// (a failover followed): it then listens again on the new primary.
const TARGET_CHECK_INTERVAL: Duration = Duration::from_millis(500);
/// How long connecting, LISTEN, each check and each NOTIFY may take before
/// the connection counts as lost.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(5);

fn timed_out(what: &str) -> sqlx::Error {
    sqlx::Error::Io(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("{what} took longer than {CONNECTION_TIMEOUT:?}"),
    ))
}

/// Listens for other replicas' changes on a connection of its own, outside
/// the store's pool (so a pool of one connection still serves calls), to
/// the host `target` (the store's pool) connects to now, and calls
/// `changed` for each operation heard of. Resets `backoff` once listening;
/// returns when the connection is lost or fails its check (a `SELECT 1`
/// after each silent [`LISTEN_CHECK_INTERVAL`], answered within
/// [`CONNECTION_TIMEOUT`]), or when `target` moved to another host, for the
/// caller to pause and listen again.
pub(super) async fn listen(
    target: &PgPool,
    sockets: Option<&Arc<DatabaseSockets>>,
    changed: &(dyn Fn(OperationId) + Send + Sync),
    backoff: &mut Backoff,
) -> Result<(), sqlx::Error> {
    let connect = target.connect_options();
    // PgListener reconnects through a pool: this one holds its one
    // connection and nothing else.
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(CONNECTION_TIMEOUT)
        .max_lifetime(None)
        .idle_timeout(None);
    let pool =
        keepalive::configure_on_connect(pool, sockets).connect_lazy_with(connect.as_ref().clone());
    let listening = async {
        let mut listener = tokio::time::timeout(CONNECTION_TIMEOUT, async {
            let mut listener = PgListener::connect_with(&pool).await?;
            // A lost connection is reported, not silently replaced: the
            // caller's backoff paces reconnection.
            listener.eager_reconnect(false);
            listener.listen(CHANGES_CHANNEL).await?;
            Ok::<_, sqlx::Error>(listener)
        })
        .await
        .map_err(|_| timed_out("connecting to LISTEN"))??;
        backoff.reset();
        let mut silent_since = tokio::time::Instant::now();
        loop {
            if !Arc::ptr_eq(&target.connect_options(), &connect) {
                return Err(sqlx::Error::Io(std::io::Error::new(
                    std::io::ErrorKind::ConnectionAborted,
                    "the database's primary moved: listening there",
                )));
            }
            match tokio::time::timeout(TARGET_CHECK_INTERVAL, listener.try_recv()).await {
                Ok(Ok(Some(notification))) => {
                    silent_since = tokio::time::Instant::now();
                    changed_operations(notification.payload()).for_each(changed);
                }
                Ok(Ok(None)) => {
                    return Err(sqlx::Error::Io(std::io::Error::new(
                        std::io::ErrorKind::ConnectionAborted,
                        "the LISTEN connection was lost",
                    )));
                }
                Ok(Err(error)) => return Err(error),
                Err(_) if silent_since.elapsed() < LISTEN_CHECK_INTERVAL => {}
                Err(_) => {
                    tokio::time::timeout(
                        CONNECTION_TIMEOUT,
                        sqlx::query("SELECT 1").execute(&mut listener),
                    )
                    .instrument(statement_span("postgresql", "SELECT 1 (LISTEN check)"))
                    .await
                    .map_err(|_| timed_out("checking the LISTEN connection"))??;
                    silent_since = tokio::time::Instant::now();
                }
            }
        }
    };
    let outcome = listening.await;
    // Not awaited: a connection the network swallowed may never close.
    drop(pool);
    outcome
}

/// The operation_ids, comma-separated, in as few payloads as fit.
fn payloads(changed: &[OperationId]) -> Vec<String> {
    let mut payloads = Vec::new();
    let mut current = String::new();
    for operation_id in changed {
        let id = operation_id.to_string();
        if !current.is_empty() && current.len() + 1 + id.len() > MAX_PAYLOAD_BYTES {
            payloads.push(std::mem::take(&mut current));
        }
        if !current.is_empty() {
            current.push(',');
        }
        current.push_str(&id);
    }
    if !current.is_empty() {
        payloads.push(current);
    }
    payloads
}

/// The operation_ids of one notification (old replicas send one per payload).
pub(super) fn changed_operations(payload: &str) -> impl Iterator<Item = OperationId> + '_ {
    payload
        .split(',')
        .filter_map(|id| uuid::Uuid::parse_str(id.trim()).ok())
        .map(OperationId)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::DrawOperationId as _;

    #[test]
    fn payloads_stay_under_the_postgres_limit_and_round_trip() {
        let ids: Vec<OperationId> = (0..1_000).map(|_| OperationId::generate()).collect();
        let payloads = payloads(&ids);
        assert!(payloads.len() > 1);
        assert!(payloads.iter().all(|payload| payload.len() < 8_000));
        let back: Vec<OperationId> = payloads
            .iter()
            .flat_map(|payload| changed_operations(payload).collect::<Vec<_>>())
            .collect();
        assert_eq!(back, ids);
        assert!(super::payloads(&[]).is_empty());
    }
}
