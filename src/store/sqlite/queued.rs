//! The connection that runs the embedded store's one-query writes (a first
//! claim, the common case of an owner's Renew, Complete and Fail), a whole
//! group at a time, on a thread of its own, driven directly through
//! rusqlite.
//!
//! Why not the sqlx writer connection, which every other write uses: each
//! statement on a sqlx SQLite connection is a hand-off to that connection's
//! own thread and back (two thread wake-ups), and with every write waiting
//! for the one before it, those hand-offs, not SQLite, paced the embedded
//! store (bench/README.md, "Where the time goes"). Here the committer hands
//! a whole group over at once: this thread opens the transaction, runs every
//! write of it back to back, commits (one fsync for all) and answers each,
//! then tells the committer, which holds the writer meanwhile, so the sqlx
//! writer connection has no transaction open while this one has.
//!
//! rusqlite links sqlx's own SQLite library (one `libsqlite3-sys` in the
//! build), so SQLite's file locks know every connection of the process. The
//! connection is opened as the writer's are (`synchronous=FULL`,
//! `foreign_keys=ON`, the file in WAL, the acquire timeout as its busy
//! timeout) and checked the same way; it is opened when the first group
//! comes (after the migrations), and again after a group that failed.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use tokio::sync::oneshot;
use tracing::{error, warn};

use super::super::error::{StoreError, StoreResult};
use super::required_settings;
use super::rusqlite_rows::Failure;
use crate::domain::Error;

/// A one-query write, as this thread runs it inside the group's
/// transaction; it sends its own answer (see `GroupWriter::write_one`).
pub(super) type QueuedQuery = Box<dyn FnOnce(&Connection) -> Result<(), Error> + Send>;

/// A one-query write waiting for its group, and where to tell it how its
/// group's commit went.
pub(super) struct Queued {
    pub(super) query: QueuedQuery,
    pub(super) committed: oneshot::Sender<StoreResult<()>>,
}

enum Job {
    /// Run these writes in one transaction; say when they are answered.
    Group(Vec<Queued>, oneshot::Sender<()>),
    /// Close the connection and stop; say when it is closed.
    Stop(oneshot::Sender<()>),
}

/// The thread's handle: hands it groups, stops it.
pub(super) struct QueuedWriter {
    jobs: mpsc::Sender<Job>,
}

impl QueuedWriter {
    /// Starts the thread (its connection is opened by the first group).
    pub(super) fn start(path: PathBuf, busy_timeout: Duration) -> std::io::Result<Self> {
        let (jobs, received) = mpsc::channel();
        std::thread::Builder::new()
            .name("idemd-sqlite-queued".into())
            .spawn(move || {
                let mut thread = Thread {
                    path,
                    busy_timeout,
                    connection: None,
                };
                thread.serve(&received);
            })?;
        Ok(Self { jobs })
    }

    /// Runs `group` in one transaction and answers each of its writes;
    /// returns once all are answered. Should the thread have stopped, each
    /// hears UNAVAILABLE.
    pub(super) async fn run(&self, group: Vec<Queued>) {
        let (done, finished) = oneshot::channel();
        // Had the thread stopped, the group is dropped with the job: each
        // write's sender goes, and it hears that the writer stopped.
        if self.jobs.send(Job::Group(group, done)).is_ok() {
            let _ = finished.await;
        }
    }

    /// Closes the connection and stops the thread; returns once the
    /// connection is closed.
    pub(super) async fn stop(&self) {
        let (done, stopped) = oneshot::channel();
        if self.jobs.send(Job::Stop(done)).is_ok() {
            let _ = stopped.await;
        }
    }
}

struct Thread {
    path: PathBuf,
    busy_timeout: Duration,
    /// Opened by the first group; dropped (closed) after a failed one.
    connection: Option<Connection>,
}

impl Thread {
    fn serve(&mut self, jobs: &mpsc::Receiver<Job>) {
        while let Ok(job) = jobs.recv() {
            match job {
                Job::Group(group, done) => {
                    let ran = catch_unwind(AssertUnwindSafe(|| self.run_group(group)));
                    if ran.is_err() {
                        // A write panicked: the rest of its group went with the
                        // unwinding (each hears that the writer stopped:
                        // UNAVAILABLE), and its transaction goes with the
                        // connection (closed, so rolled back). The thread goes on.
                        self.connection = None;
                        error!("a queued write panicked; its group was rolled back");
                    }
                    let _ = done.send(());
                }
                Job::Stop(done) => {
                    self.connection = None;
                    let _ = done.send(());
                    return;
                }
            }
        }
    }

    /// One transaction for the whole group: each write runs once, in turn;
    /// should one fail, the ones after it do not run, the transaction is
    /// rolled back and every write of the group hears UNAVAILABLE (the
    /// failing one its own error), each safe to re-send. Otherwise one COMMIT
    /// (one fsync) and each hears how it went.
    fn run_group(&mut self, group: Vec<Queued>) {
        let connection = match self.begin() {
            Ok(connection) => connection,
            Err(error) => {
                let error = error.into_domain();
                for queued in group {
                    let _ = queued.committed.send(Err(error.clone().into()));
                }
                // Not trusted again: the next group opens a new one.
                self.connection = None;
                return;
            }
        };
        let mut ran = Vec::with_capacity(group.len());
        let mut failed = false;
        for queued in group {
            if failed {
                let _ = queued.committed.send(Err(group_failed().into()));
                continue;
            }
            match (queued.query)(connection) {
                Ok(()) => ran.push(queued.committed),
                Err(error) => {
                    failed = true;
                    let _ = queued.committed.send(Err(error.into()));
                }
            }
        }
        let outcome = if failed {
            let _ = connection.execute_batch("ROLLBACK");
            Err(group_failed())
        } else {
            connection.execute_batch("COMMIT").map_err(|error| {
                warn!(%error, "embedded store commit failed; its writes answer UNAVAILABLE");
                let _ = connection.execute_batch("ROLLBACK");
                Error::unavailable("the embedded store could not commit")
            })
        };
        if outcome.is_err() {
            // Not trusted again: the next group opens a new one.
            self.connection = None;
        }
        for committed in ran {
            let _ = committed.send(outcome.clone().map_err(StoreError::Domain));
        }
    }

    /// The connection, with a transaction open that holds the write lock.
    fn begin(&mut self) -> Result<&Connection, Failure> {
        let connection = match self.connection.take() {
            Some(connection) => connection,
            None => self.open()?,
        };
        connection.execute_batch("BEGIN IMMEDIATE")?;
        Ok(self.connection.insert(connection))
    }

    /// A connection as the sqlx writer has its own, checked as it is
    /// (`verify_connection`): the file is the writer's, already in WAL.
    fn open(&self) -> Result<Connection, Failure> {
        let connection = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        connection.busy_timeout(self.busy_timeout)?;
        connection.pragma_update(None, "synchronous", "FULL")?;
        connection.pragma_update(None, "foreign_keys", true)?;
        let journal_mode: String =
            connection.pragma_query_value(None, "journal_mode", |row| row.get(0))?;
        let synchronous: i64 =
            connection.pragma_query_value(None, "synchronous", |row| row.get(0))?;
        let foreign_keys: i64 =
            connection.pragma_query_value(None, "foreign_keys", |row| row.get(0))?;
        required_settings(&journal_mode, synchronous, foreign_keys)
            .map_err(|refused| Failure::Domain(Error::Internal(refused)))?;
        Ok(connection)
    }
}

fn group_failed() -> Error {
    Error::unavailable("a write of the group failed")
}
