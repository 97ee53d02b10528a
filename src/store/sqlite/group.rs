//! Group commit on the embedded store's one writer connection.
//!
//! Every write runs on the one writer connection, one at a time. Instead of
//! a transaction (and an fsync) each, the writes that arrive while a commit
//! is under way share the next transaction: each runs inside a savepoint of
//! the open transaction (so a failing write undoes only itself), then waits
//! until a committer task commits everything written so far and tells each
//! write of its epoch how the commit went. Nobody hears "done" before the
//! commit that holds their write is on disk; if it fails, every write of it
//! hears UNAVAILABLE (and is safe to re-send). Alone, a write commits at
//! once: the committer only waits for the writes already queued on the
//! writer, never for a timer.
//!
//! Each statement is a hand-off to the connection's own thread and back, and
//! those hand-offs, not SQLite, are most of a write's cost here (see
//! bench/README.md). So a kept write's savepoint is not released by a
//! statement of its own: the next write's `SAVEPOINT` releases it in the same
//! hand-off, or the `COMMIT`, which releases every savepoint. And a write
//! whose first statement is known when it begins ([`GroupWriter::begin_with`])
//! sends its savepoint statements in front of that statement, in one hand-off
//! (sqlx runs a `;`-separated query as its statements in turn, on the
//! connection's thread).
//!
//! A write that is one query and nothing else (a first claim, an owner
//! write's common case: [`GroupWriter::write_one`]) is not a member at all:
//! it is queued, and the committer, holding the writer (so that the members'
//! transaction is not open meanwhile), hands every queued one to the queued
//! writer ([`super::queued`]), which runs them in one transaction of its own
//! on a connection and thread of its own, commits them together and answers
//! each: one hand-off for the whole group, where a member pays one (or its
//! task's wake-up) for each of its steps.

use std::ops::{Deref, DerefMut};
use std::path::PathBuf;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use sqlx::pool::PoolConnection;
use sqlx::sqlite::{Sqlite, SqliteConnection, SqlitePool};
use tokio::sync::{Mutex, Notify, OwnedMutexGuard, oneshot, watch};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, warn};

use super::super::acquire::AcquireWaits;
use super::super::dialect::statement_span;
use super::super::error::{StoreError, StoreResult};
use super::queued::{Queued, QueuedWriter};
use crate::domain::Error;

/// The writer's state: its connection while a transaction is open (given
/// back to the pool after each commit, so that migrations, tests and tools
/// can use the writer between groups), and the transaction the writes of
/// the current epoch share.
pub(super) struct WriterState {
    connection: Option<PoolConnection<Sqlite>>,
    /// A transaction is open, shared by the writes of `epoch`.
    open: bool,
    /// A write stopped (its caller went away) inside its savepoint: the next
    /// one rolls the savepoint back first.
    member_open: bool,
    /// The last write's savepoint holds writes to keep and is still open:
    /// the next write's savepoint statement releases it first (or COMMIT
    /// does).
    kept: bool,
    /// A statement that opened a member's savepoint together with the
    /// member's first statement failed, and which of them failed is not
    /// known: the group is rolled back, not committed (see
    /// [`GroupWriter::begin_with`]).
    poisoned: bool,
    epoch: Arc<Epoch>,
}

/// The commit of one group of writes, and how it went.
struct Epoch {
    outcome: watch::Sender<Option<Result<(), Error>>>,
}

impl Epoch {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            outcome: watch::channel(None).0,
        })
    }
}

/// The most one-query writes one group runs before it commits, so that a
/// stream of them cannot keep a transaction open (and its writes
/// unanswered) without end.
const MOST_QUEUED_PER_GROUP: usize = 256;

type Queue = Arc<StdMutex<std::collections::VecDeque<Queued>>>;

pub(super) struct GroupWriter {
    pool: SqlitePool,
    /// One-query writes waiting for the committer.
    queue: Queue,
    /// Runs them, a group at a time.
    queued_writer: Arc<QueuedWriter>,
    state: Arc<Mutex<WriterState>>,
    commit_wanted: Arc<Notify>,
    acquire_timeout: Duration,
    /// Taken by the first write, which starts the committer (a store may be
    /// opened outside a runtime).
    committer: StdMutex<Option<Committer>>,
    closed: CancellationToken,
    /// Writes waiting for their place on the writer, and their waits.
    waits: AcquireWaits,
}

struct Committer {
    state: Arc<Mutex<WriterState>>,
    queue: Queue,
    queued_writer: Arc<QueuedWriter>,
    commit_wanted: Arc<Notify>,
    closed: CancellationToken,
}

/// One write's place in the shared transaction; derefs to the writer's
/// connection. [`GroupWriter::commit`] or [`GroupWriter::rollback`] ends it;
/// dropped without either (its caller went away), its writes are undone.
pub(crate) struct Member {
    guard: OwnedMutexGuard<WriterState>,
    commit_wanted: Arc<Notify>,
}

impl Drop for Member {
    fn drop(&mut self) {
        // Whatever this member leaves open must still be committed (or, if
        // it stopped mid-write, rolled back by the committer first).
        self.commit_wanted.notify_one();
    }
}

impl Deref for Member {
    type Target = SqliteConnection;

    fn deref(&self) -> &SqliteConnection {
        // A member exists only while the connection is there (see `begin`).
        self.guard
            .connection
            .as_deref()
            .unwrap_or_else(|| unreachable!("a member holds the writer's connection"))
    }
}

impl DerefMut for Member {
    fn deref_mut(&mut self) -> &mut SqliteConnection {
        self.guard
            .connection
            .as_deref_mut()
            .unwrap_or_else(|| unreachable!("a member holds the writer's connection"))
    }
}

fn statement(name: &'static str) -> tracing::Span {
    statement_span("sqlite", name)
}

async fn execute(connection: &mut SqliteConnection, sql: &'static str) -> StoreResult<()> {
    sqlx::query(sql)
        .execute(&mut *connection)
        .instrument(statement(sql))
        .await?;
    Ok(())
}

/// Runs statements without parameters (`;`-separated) in one hand-off to the
/// connection's thread.
async fn execute_script(connection: &mut SqliteConnection, sql: &'static str) -> StoreResult<()> {
    sqlx::raw_sql(sql)
        .execute(&mut *connection)
        .instrument(statement(sql))
        .await?;
    Ok(())
}

/// Undoes a member's writes and ends its savepoint.
const UNDO_MEMBER: &str = "ROLLBACK TO member; RELEASE member";

impl GroupWriter {
    /// The writer of the database at `path`, whose connection `pool` gives.
    pub(super) fn new(
        pool: SqlitePool,
        path: PathBuf,
        acquire_timeout: Duration,
    ) -> Result<Self, Error> {
        let queued_writer = QueuedWriter::start(path, acquire_timeout)
            .map(Arc::new)
            .map_err(|error| {
                Error::Internal(format!("cannot start the writer's thread: {error}"))
            })?;
        let state = Arc::new(Mutex::new(WriterState {
            connection: None,
            open: false,
            member_open: false,
            kept: false,
            poisoned: false,
            epoch: Epoch::new(),
        }));
        let commit_wanted = Arc::new(Notify::new());
        let closed = CancellationToken::new();
        let queue = Queue::default();
        Ok(Self {
            committer: StdMutex::new(Some(Committer {
                state: Arc::clone(&state),
                queue: Arc::clone(&queue),
                queued_writer: Arc::clone(&queued_writer),
                commit_wanted: Arc::clone(&commit_wanted),
                closed: closed.clone(),
            })),
            pool,
            queue,
            queued_writer,
            state,
            commit_wanted,
            acquire_timeout,
            closed,
            waits: AcquireWaits::default(),
        })
    }

    /// Writes waiting for their place on the writer now.
    #[cfg(test)]
    pub(super) fn waiting(&self) -> u64 {
        self.waits.totals().waiting
    }

    /// A place in the shared transaction: waits for the writer (at most the
    /// acquire timeout), opens the transaction if none is, and a savepoint.
    pub(super) async fn begin(&self) -> StoreResult<Member> {
        let member = self.place().await?;
        let pool = self.pool.clone();
        detached(async move {
            let mut member = member;
            let opening = prepare_member(&mut member.guard, &pool).await?;
            execute_script(&mut member, opening.savepoint()).await?;
            member.guard.member_open = true;
            Ok(member)
        })
        .await
    }

    /// [`GroupWriter::begin`] and the write's first statement, in one
    /// hand-off: `first` runs the statement [`Opening::pick`] chooses, whose
    /// text starts with the savepoint statements this member needs
    /// ([`with_savepoint!`]).
    ///
    /// Had that query failed, whether the savepoint statements ran before
    /// the failing one is not known: if `RELEASE` ran and `SAVEPOINT` did
    /// not, undoing this member would undo the member before it, which keeps
    /// its writes. So a failure rolls back the whole group: every write of it
    /// hears UNAVAILABLE (each safe to re-send), as on a failed commit.
    pub(super) async fn begin_with<T, First>(&self, first: First) -> StoreResult<(Member, T)>
    where
        T: Send + 'static,
        First: for<'c> FnOnce(&'c mut SqliteConnection, Opening) -> BoxFuture<'c, StoreResult<T>>
            + Send
            + 'static,
    {
        let member = self.place().await?;
        let pool = self.pool.clone();
        detached(async move {
            let mut member = member;
            let opening = prepare_member(&mut member.guard, &pool).await?;
            // Sent in this step whatever happens to the caller: once it is,
            // the savepoint is this member's to undo if it stops.
            member.guard.member_open = true;
            match first(&mut member, opening).await {
                Ok(value) => Ok((member, value)),
                Err(error) => {
                    member.guard.poisoned = true;
                    Err(error)
                }
            }
        })
        .await
    }

    /// A write that is one query: queued, it runs with the other queued
    /// writes of its group on the queued writer's connection, in one
    /// transaction ([`QueuedWriter`]); its answer is given once the commit
    /// that holds it is on disk. Waits at most the acquire timeout for all
    /// of it.
    ///
    /// The query runs once queued, whether or not its caller still waits
    /// (as a statement does once sent): a write whose caller went away may
    /// still be committed, and is answered again to a re-sent call. Should it
    /// fail, which of its statements ran is not known, so its whole group is
    /// rolled back.
    pub(super) async fn write_one<T, Query>(&self, query: Query) -> StoreResult<T>
    where
        T: Send + 'static,
        Query: FnOnce(&rusqlite::Connection) -> Result<T, Error> + Send + 'static,
    {
        if self.closed.is_cancelled() {
            return Err(Error::unavailable("the embedded store is closed").into());
        }
        self.start_committer_once();
        let (answer, answered) = oneshot::channel();
        let (committed_sender, committed) = oneshot::channel();
        // The query's spans stay children of the caller's, on the writer's
        // thread.
        let caller = tracing::Span::current();
        let queued = Queued {
            query: Box::new(move |connection| {
                let value = caller.in_scope(|| query(connection))?;
                // The caller may have gone: the write stands anyway.
                let _ = answer.send(value);
                Ok(())
            }),
            committed: committed_sender,
        };
        self.queue
            .lock()
            .map_err(|_| Error::Internal("the writer's queue is poisoned".into()))?
            .push_back(queued);
        self.commit_wanted.notify_one();
        tokio::time::timeout(self.acquire_timeout, committed)
            .await
            .map_err(|_| Error::unavailable("the embedded store's writer is busy"))?
            .map_err(|_| Error::unavailable("the embedded store's writer stopped"))??;
        answered
            .await
            .map_err(|_| Error::Internal("a committed write left no answer".into()).into())
    }

    /// Waits for the writer (at most the acquire timeout).
    async fn place(&self) -> StoreResult<Member> {
        self.start_committer_once();
        let guard = self
            .waits
            .time(tokio::time::timeout(
                self.acquire_timeout,
                Arc::clone(&self.state).lock_owned(),
            ))
            .await
            .map_err(|_| Error::unavailable("the embedded store's writer is busy"))?;
        Ok(Member {
            guard,
            commit_wanted: Arc::clone(&self.commit_wanted),
        })
    }

    /// Keeps the member's writes and waits for the commit that holds them.
    /// Its savepoint stays open until the next member's savepoint statement
    /// or the commit releases it: no statement (and no hand-off) of its own.
    pub(super) async fn commit(&self, member: Member) -> StoreResult<()> {
        let mut member = member;
        member.guard.member_open = false;
        member.guard.kept = true;
        self.await_commit(member).await
    }

    /// Undoes the member's writes. It still waits for its group's commit:
    /// what it read (and answers with) may be another member's write, which
    /// must be durable first.
    pub(super) async fn rollback(&self, member: Member) -> StoreResult<()> {
        let member = detached(async move {
            let mut member = member;
            execute_script(&mut member, UNDO_MEMBER).await?;
            member.guard.member_open = false;
            Ok(member)
        })
        .await?;
        self.await_commit(member).await
    }

    async fn await_commit(&self, member: Member) -> StoreResult<()> {
        let mut outcome = member.guard.epoch.outcome.subscribe();
        drop(member);
        self.commit_wanted.notify_one();
        let committed = outcome
            .wait_for(Option::is_some)
            .await
            .map_err(|_| Error::unavailable("the embedded store's writer stopped"))?;
        match committed.as_ref() {
            Some(Ok(())) => Ok(()),
            Some(Err(error)) => Err(StoreError::Domain(error.clone())),
            None => Err(Error::unavailable("the commit has no outcome").into()),
        }
    }

    /// Commits what is open (the connection goes back to the pool, which can
    /// then close) and stops the committer.
    pub(super) async fn close(&self) {
        let mut state = self.state.lock().await;
        self.closed.cancel();
        // Its members hear how it went from their epoch.
        let _ = commit_open(&mut state).await;
        // Queued writes that will never run hear so now (their senders go).
        if let Ok(mut queue) = self.queue.lock() {
            queue.clear();
        }
        self.queued_writer.stop().await;
    }

    fn start_committer_once(&self) {
        let Ok(mut committer) = self.committer.lock() else {
            return;
        };
        if committer.is_none() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if let Some(committer) = committer.take() {
            runtime.spawn(committer.run());
        }
    }
}

impl Drop for GroupWriter {
    fn drop(&mut self) {
        self.closed.cancel();
    }
}

impl Committer {
    async fn run(self) {
        loop {
            tokio::select! {
                () = self.commit_wanted.notified() => {}
                () = self.closed.cancelled() => return,
            }
            // The members' transaction is committed first (they hear how
            // it went from their epoch): one transaction at a time.
            let mut state = self.state.lock().await;
            let _ = commit_open(&mut state).await;
            // Writes queued before this lock form the next group.
            let mut group = Vec::new();
            while group.len() < MOST_QUEUED_PER_GROUP && !self.closed.is_cancelled() {
                let Some(queued) = self.next_queued() else {
                    break;
                };
                group.push(queued);
            }
            if !group.is_empty() {
                self.queued_writer.run(group).await;
            }
            drop(state);
            if self.queue.lock().is_ok_and(|queue| !queue.is_empty()) {
                self.commit_wanted.notify_one();
            }
        }
    }

    fn next_queued(&self) -> Option<Queued> {
        self.queue.lock().ok()?.pop_front()
    }
}

/// Runs a step that changes the writer's transaction (BEGIN IMMEDIATE,
/// SAVEPOINT, RELEASE, ROLLBACK TO) together with the bookkeeping that
/// records it, on a task of its own, so that a caller that goes away
/// meanwhile (a client gone, a deadline) cannot stop it in between. SQLite
/// runs a statement once it is sent, whether or not anybody waits for the
/// answer; had the step stopped there, the writer's state would disagree
/// with the connection's, and the next write would hear "cannot start a
/// transaction within a transaction" or "no such savepoint" (INTERNAL), as
/// would every write after it. The step holds the writer's guard (inside its
/// [`Member`]); a member nobody awaits any more is dropped on that task and
/// undone by the committer, as any abandoned member is.
async fn detached<T: Send + 'static>(
    step: impl Future<Output = StoreResult<T>> + Send + 'static,
) -> StoreResult<T> {
    // Its statements' spans stay children of the caller's.
    match tokio::spawn(step.instrument(tracing::Span::current())).await {
        Ok(outcome) => outcome,
        Err(error) if error.is_cancelled() => {
            Err(Error::unavailable("the embedded store's writer is shutting down").into())
        }
        Err(error) => Err(Error::Internal(format!("a writer step failed: {error}")).into()),
    }
}

/// How a member's savepoint is opened: after a kept member, whose savepoint
/// it releases first, or not.
#[derive(Clone, Copy, Debug)]
pub(super) enum Opening {
    Fresh,
    AfterKept,
}

impl Opening {
    /// The savepoint statements alone.
    fn savepoint(self) -> &'static str {
        self.pick(&with_savepoint!(""))
    }

    /// The text of `statement` this opening runs.
    pub(super) fn pick(self, statement: &OpenedStatement) -> &'static str {
        match self {
            Opening::Fresh => statement.fresh,
            Opening::AfterKept => statement.after_kept,
        }
    }
}

/// A statement with the savepoint statements of each [`Opening`] in front.
pub(super) struct OpenedStatement {
    fresh: &'static str,
    after_kept: &'static str,
}

/// The [`OpenedStatement`] of a statement's literal text (pieces that
/// `concat!` takes); of `""`, the savepoint statements alone.
macro_rules! with_savepoint {
    ($($statement:expr),+ $(,)?) => {
        $crate::store::sqlite::group::OpenedStatement::new(
            concat!("SAVEPOINT member; ", $($statement),+),
            concat!("RELEASE member; SAVEPOINT member; ", $($statement),+),
        )
    };
}
pub(super) use with_savepoint;

impl OpenedStatement {
    pub(super) const fn new(fresh: &'static str, after_kept: &'static str) -> Self {
        Self { fresh, after_kept }
    }
}

/// Gives the writer's state a connection and an open transaction, and says
/// how this member's savepoint is to be opened; the caller sends it.
async fn prepare_member(state: &mut WriterState, pool: &SqlitePool) -> StoreResult<Opening> {
    if state.connection.is_none() {
        state.connection = Some(pool.acquire().await?);
    }
    let Some(connection) = state.connection.as_deref_mut() else {
        return Err(Error::Internal("the writer has no connection".into()).into());
    };
    undo_stopped_member(&mut state.member_open, connection).await?;
    if !state.open {
        // The write lock before the first read: no other writer (another
        // process, a tenant command) runs in between.
        if let Err(error) = execute(connection, "BEGIN IMMEDIATE").await {
            state.connection = None;
            return Err(error);
        }
        state.open = true;
    }
    // Forgotten before the statement: had the release failed, the kept
    // savepoint stays open inside the transaction, and COMMIT still keeps
    // it (a later ROLLBACK TO finds the newest savepoint of the name).
    Ok(if std::mem::take(&mut state.kept) {
        Opening::AfterKept
    } else {
        Opening::Fresh
    })
}

/// A member whose caller stopped waiting mid-write left its savepoint open:
/// what it wrote is undone, never committed.
async fn undo_stopped_member(
    member_open: &mut bool,
    connection: &mut SqliteConnection,
) -> StoreResult<()> {
    if *member_open {
        execute_script(connection, UNDO_MEMBER).await?;
        *member_open = false;
    }
    Ok(())
}

/// Commits the open transaction, if any, tells its epoch how it went, starts
/// the next epoch and gives the connection back to the pool; says how it
/// went (with nothing open, nothing to tell: Ok).
async fn commit_open(state: &mut WriterState) -> Result<(), Error> {
    if !state.open {
        return Ok(());
    }
    let Some(connection) = state.connection.as_deref_mut() else {
        return Ok(());
    };
    let committed = match undo_stopped_member(&mut state.member_open, connection).await {
        Ok(()) if std::mem::take(&mut state.poisoned) => {
            Err(Error::unavailable("a write of the group failed as it began").into())
        }
        Ok(()) => execute(connection, "COMMIT").await,
        Err(error) => Err(error),
    };
    let outcome = match committed {
        Ok(()) => Ok(()),
        Err(error) => {
            warn!(%error, "embedded store commit failed; its writes answer UNAVAILABLE");
            let _ = execute(connection, "ROLLBACK").await;
            Err(Error::unavailable("the embedded store could not commit"))
        }
    };
    // COMMIT released every savepoint (ROLLBACK, too).
    state.open = false;
    state.member_open = false;
    state.kept = false;
    state.poisoned = false;
    // Back to the pool between groups (a failed one's connection is not
    // trusted again: the pool opens a new one).
    let connection = state.connection.take();
    if outcome.is_err()
        && let Some(mut connection) = connection
    {
        connection.close_on_drop();
    }
    let finished = std::mem::replace(&mut state.epoch, Epoch::new());
    finished.outcome.send_replace(Some(outcome.clone()));
    outcome
}

#[cfg(test)]
mod tests {
    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};

    use super::*;

    fn options_for(directory: &std::path::Path) -> SqliteConnectOptions {
        SqliteConnectOptions::new()
            .filename(directory.join("group.db"))
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
    }

    async fn writer_on_a_fresh_file() -> (GroupWriter, SqlitePool, std::path::PathBuf) {
        #[expect(clippy::disallowed_methods, reason = "a test names its own directory")]
        let directory = std::env::temp_dir().join(format!("idemd-group-{}", uuid::Uuid::now_v7()));
        std::fs::create_dir_all(&directory).expect("temp dir");
        let options = options_for(&directory);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await
            .expect("opens");
        sqlx::query("CREATE TABLE effects (name TEXT PRIMARY KEY)")
            .execute(&pool)
            .await
            .expect("creates");
        (
            GroupWriter::new(
                pool.clone(),
                directory.join("group.db"),
                Duration::from_secs(5),
            )
            .expect("starts"),
            pool,
            directory,
        )
    }

    async fn insert(member: &mut Member, name: &str) {
        sqlx::query("INSERT INTO effects (name) VALUES ($1)")
            .bind(name)
            .execute(&mut **member)
            .await
            .expect("inserts");
    }

    const INSERT_OPENED: OpenedStatement =
        with_savepoint!("INSERT INTO effects (name) VALUES ($1)");

    /// A write that inserts `name` as its first statement, sent with its
    /// savepoint statements ([`GroupWriter::begin_with`]).
    async fn begin_inserting(writer: &GroupWriter, name: &str) -> StoreResult<Member> {
        let name = name.to_owned();
        let (member, ()) = writer
            .begin_with(move |connection, opening| {
                Box::pin(async move {
                    sqlx::query(opening.pick(&INSERT_OPENED))
                        .bind(name)
                        .execute(&mut *connection)
                        .await?;
                    Ok(())
                })
            })
            .await?;
        Ok(member)
    }

    /// A write that inserts `name`: its first statement sent with its
    /// savepoint statements, or after them.
    async fn write_of(writer: &GroupWriter, name: &str, opened: bool) -> StoreResult<Member> {
        if opened {
            begin_inserting(writer, name).await
        } else {
            let mut member = writer.begin().await?;
            insert(&mut member, name).await;
            Ok(member)
        }
    }

    async fn names(pool: &SqlitePool) -> Vec<String> {
        sqlx::query_scalar("SELECT name FROM effects ORDER BY name")
            .fetch_all(pool)
            .await
            .expect("reads")
    }

    /// Polls `future` until it has returned Pending `awaits` times, then
    /// drops it on its next wake-up: a caller that goes away at that await,
    /// after what it waited for (a statement's answer) has arrived.
    async fn abandoned_after<F: Future>(awaits: usize, future: F) -> Option<F::Output> {
        let mut future = std::pin::pin!(future);
        let mut left = awaits;
        std::future::poll_fn(move |context| {
            if left == 0 {
                return std::task::Poll::Ready(None);
            }
            left -= 1;
            future.as_mut().poll(context).map(Some)
        })
        .await
    }

    /// A caller that goes away while a control statement (BEGIN IMMEDIATE,
    /// SAVEPOINT, RELEASE, ROLLBACK TO) is on the writer's connection must
    /// not leave the writer's bookkeeping behind SQLite's: the next write
    /// would hear "cannot start a transaction within a transaction" or "no
    /// such savepoint" (INTERNAL), and after the first, every write would.
    /// Cancelled at every await of a committed and of a rolled-back write.
    #[tokio::test]
    async fn a_write_abandoned_at_any_await_leaves_the_writer_usable() {
        let (writer, pool, directory) = writer_on_a_fresh_file().await;
        let mut finished = 0;
        for awaits in 0..40 {
            for keep in [true, false] {
                let name = format!("abandoned-{awaits:02}-{keep}");
                let write = async {
                    let member = write_of(&writer, &name, awaits % 2 == 1).await?;
                    if keep {
                        writer.commit(member).await
                    } else {
                        writer.rollback(member).await
                    }
                };
                if abandoned_after(awaits, write).await.is_some() {
                    finished += 1;
                }
                let mut next = writer.begin().await.unwrap_or_else(|error| {
                    panic!("the write after one abandoned at await {awaits} ({keep}): {error}")
                });
                insert(&mut next, &format!("next-{awaits:02}-{keep}")).await;
                writer.commit(next).await.unwrap_or_else(|error| {
                    panic!("the write after one abandoned at await {awaits} ({keep}): {error}")
                });
            }
        }
        assert!(finished > 0, "the last writes ran to their end unabandoned");
        writer.close().await;
        let kept = names(&pool).await;
        assert_eq!(
            kept.iter().filter(|name| name.starts_with("next-")).count(),
            80,
            "every acknowledged write is there"
        );
        assert!(
            !kept
                .iter()
                .any(|name| name.ends_with("-false") && name.starts_with("abandoned-")),
            "a rolled-back write stays undone: {kept:?}"
        );
        pool.close().await;
        let _ = std::fs::remove_dir_all(directory);
    }

    #[tokio::test]
    async fn concurrent_writes_commit_together_and_each_hears_of_its_commit() {
        let (writer, pool, directory) = writer_on_a_fresh_file().await;
        let writer = Arc::new(writer);
        let writes: Vec<_> = (0..20)
            .map(|index| {
                let writer = Arc::clone(&writer);
                tokio::spawn(async move {
                    let mut member = writer.begin().await.expect("a place");
                    insert(&mut member, &format!("effect-{index:02}")).await;
                    writer.commit(member).await
                })
            })
            .collect();
        for write in writes {
            write.await.expect("joined").expect("committed");
        }
        writer.close().await;
        assert_eq!(
            names(&pool).await.len(),
            20,
            "every acknowledged write is there"
        );
        pool.close().await;
        let _ = std::fs::remove_dir_all(directory);
    }

    /// Kept, rolled-back and abandoned writes sharing commits: a kept
    /// write's savepoint is released only by the next write's savepoint
    /// statement (sent alone or before its first statement) or the commit,
    /// so an undone write after it must undo only itself.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn undone_writes_in_a_shared_commit_leave_the_kept_ones() {
        let (writer, pool, directory) = writer_on_a_fresh_file().await;
        let writer = Arc::new(writer);
        let writes: Vec<_> = (0..60)
            .map(|index| {
                let writer = Arc::clone(&writer);
                tokio::spawn(async move {
                    // Every outcome after every kind of begin.
                    let name = format!("effect-{index:02}");
                    let member = write_of(&writer, &name, index % 2 == 1)
                        .await
                        .expect("a place");
                    match index % 3 {
                        0 => writer.rollback(member).await,
                        1 => {
                            drop(member);
                            Ok(())
                        }
                        _ => writer.commit(member).await,
                    }
                })
            })
            .collect();
        for write in writes {
            write.await.expect("joined").expect("settled");
        }
        writer.close().await;
        let expected: Vec<String> = (0..60)
            .filter(|index| index % 3 == 2)
            .map(|index| format!("effect-{index:02}"))
            .collect();
        assert_eq!(names(&pool).await, expected);
        pool.close().await;
        let _ = std::fs::remove_dir_all(directory);
    }

    #[tokio::test]
    async fn a_rolled_back_or_abandoned_write_is_undone_and_the_others_stand() {
        let (writer, pool, directory) = writer_on_a_fresh_file().await;
        let mut kept = writer.begin().await.expect("a place");
        insert(&mut kept, "kept").await;
        writer.commit(kept).await.expect("committed");

        let mut undone = writer.begin().await.expect("a place");
        insert(&mut undone, "rolled back").await;
        writer.rollback(undone).await.expect("rolled back");

        // A caller that went away mid-write: its member is dropped with its
        // savepoint open.
        let mut abandoned = writer.begin().await.expect("a place");
        insert(&mut abandoned, "abandoned").await;
        drop(abandoned);

        let mut after = writer.begin().await.expect("a place");
        insert(&mut after, "after").await;
        writer.commit(after).await.expect("committed");
        writer.close().await;
        assert_eq!(names(&pool).await, ["after", "kept"]);
        pool.close().await;
        let _ = std::fs::remove_dir_all(directory);
    }

    /// A one-query write of `name`, queued for the committer.
    async fn queued_insert(writer: &GroupWriter, name: &str) -> StoreResult<()> {
        let name = name.to_owned();
        writer
            .write_one(move |connection| {
                connection
                    .execute("INSERT INTO effects (name) VALUES ($1)", [name])
                    .map_err(|error| Error::Internal(format!("database error: {error}")))?;
                Ok(())
            })
            .await
    }

    /// Queued one-query writes and members, interleaved, take turns on the
    /// file (a members' transaction is committed before a queued group
    /// runs): each hears of its commit only, and every acknowledged write is
    /// there.
    #[tokio::test]
    async fn queued_writes_and_members_take_turns() {
        let (writer, pool, directory) = writer_on_a_fresh_file().await;
        let writer = Arc::new(writer);
        let mut tasks = Vec::new();
        for index in 0..40 {
            let writer = Arc::clone(&writer);
            tasks.push(tokio::spawn(async move {
                let name = format!("effect-{index:02}");
                if index % 4 == 0 {
                    let member = write_of(&writer, &name, index % 8 == 0).await?;
                    writer.commit(member).await
                } else {
                    queued_insert(&writer, &name).await
                }
            }));
        }
        for task in tasks {
            task.await.expect("joined").expect("committed");
        }
        writer.close().await;
        let expected: Vec<String> = (0..40).map(|index| format!("effect-{index:02}")).collect();
        assert_eq!(names(&pool).await, expected);
        let after = queued_insert(&writer, "after close").await;
        assert!(
            matches!(after, Err(StoreError::Domain(Error::Unavailable { .. }))),
            "a closed writer takes no write: {after:?}"
        );
        pool.close().await;
        let _ = std::fs::remove_dir_all(directory);
    }

    /// A queued write that fails rolls back its whole group: the queued
    /// write before it hears UNAVAILABLE, the one after it is not run; the
    /// member that held the writer meanwhile commits on its own; the writer
    /// goes on.
    #[tokio::test]
    async fn a_failed_queued_write_fails_its_whole_group() {
        let (writer, pool, directory) = writer_on_a_fresh_file().await;
        let writer = Arc::new(writer);
        let mut member = writer.begin().await.expect("a place");
        insert(&mut member, "member").await;
        // Queued while the member holds the writer: one group after it.
        let queued = ["queued", "member", "not run"].map(|name| {
            let writer = Arc::clone(&writer);
            tokio::spawn(async move { queued_insert(&writer, name).await })
        });
        while writer.queue.lock().map(|queue| queue.len()).unwrap_or(0) < 3 {
            tokio::task::yield_now().await;
        }
        writer.commit(member).await.expect("the member commits");
        let [kept, duplicate, after_it] = queued;
        let duplicate = duplicate.await.expect("joined");
        assert!(
            matches!(duplicate, Err(StoreError::Domain(Error::Internal(_)))),
            "the duplicate fails: {duplicate:?}"
        );
        for (name, outcome) in [
            ("the queued write before it", kept.await.expect("joined")),
            ("the queued write after it", after_it.await.expect("joined")),
        ] {
            assert!(
                matches!(outcome, Err(StoreError::Domain(Error::Unavailable { .. }))),
                "{name}'s group is not committed: {outcome:?}"
            );
        }
        queued_insert(&writer, "after").await.expect("committed");
        writer.close().await;
        assert_eq!(names(&pool).await, ["after", "member"]);
        pool.close().await;
        let _ = std::fs::remove_dir_all(directory);
    }

    /// A queued write that panics rolls back its group (each of its writes
    /// hears UNAVAILABLE); the queued writer's thread survives it and the
    /// next write commits.
    #[tokio::test]
    async fn a_panicking_queued_write_fails_its_group_and_the_writer_goes_on() {
        let (writer, pool, directory) = writer_on_a_fresh_file().await;
        let panicked = writer
            .write_one(|connection| -> Result<(), Error> {
                connection
                    .execute("INSERT INTO effects (name) VALUES ('rolled back')", [])
                    .map_err(|error| Error::Internal(format!("database error: {error}")))?;
                panic!("a write that panics after its statement");
            })
            .await;
        assert!(
            matches!(panicked, Err(StoreError::Domain(Error::Unavailable { .. }))),
            "the panicking write hears UNAVAILABLE: {panicked:?}"
        );
        queued_insert(&writer, "after").await.expect("committed");
        writer.close().await;
        assert_eq!(names(&pool).await, ["after"]);
        pool.close().await;
        let _ = std::fs::remove_dir_all(directory);
    }

    /// A write whose first statement, sent with its savepoint statements,
    /// fails: which of them ran is not known, so its whole group is rolled
    /// back and every write of it hears UNAVAILABLE; the writer goes on.
    #[tokio::test]
    async fn a_failed_opened_statement_fails_its_whole_group() {
        let (writer, pool, directory) = writer_on_a_fresh_file().await;
        let writer = Arc::new(writer);
        let mut first = writer.begin().await.expect("a place");
        insert(&mut first, "first").await;
        // Queued on the writer before the committer: the same group.
        let failing = tokio::spawn({
            let writer = Arc::clone(&writer);
            async move { begin_inserting(&writer, "first").await.map(drop) }
        });
        while writer.waiting() == 0 {
            tokio::task::yield_now().await;
        }
        let first_commit = writer.commit(first).await;
        let failed = failing.await.expect("joined");
        assert!(
            matches!(failed, Err(StoreError::Database(_))),
            "the duplicate fails: {failed:?}"
        );
        assert!(
            matches!(
                &first_commit,
                Err(StoreError::Domain(Error::Unavailable { .. }))
            ),
            "its group is not committed: {first_commit:?}"
        );
        let after = begin_inserting(&writer, "after").await.expect("a place");
        writer.commit(after).await.expect("committed");
        writer.close().await;
        assert_eq!(names(&pool).await, ["after"]);
        pool.close().await;
        let _ = std::fs::remove_dir_all(directory);
    }

    /// A caller that goes away while its BEGIN IMMEDIATE waits for the write
    /// lock (a client gone, a per-call timeout): the statement still runs
    /// on the connection's worker once the lock is free. The writer must
    /// know that its transaction is open; it did not, and every later write
    /// failed with "cannot start a transaction within a transaction" (the
    /// connection went back to the pool inside the transaction) until the
    /// process restarted. Found by the fault campaign (faults/).
    #[tokio::test]
    async fn a_write_cancelled_during_begin_leaves_the_writer_usable() {
        use sqlx::Connection;

        let (writer, pool, directory) = writer_on_a_fresh_file().await;
        // Another process's writer holds the write lock.
        let mut other = sqlx::SqliteConnection::connect_with(&options_for(&directory))
            .await
            .expect("connects");
        sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut other)
            .await
            .expect("holds the lock");
        let cancelled = tokio::time::timeout(Duration::from_millis(200), writer.begin()).await;
        assert!(cancelled.is_err(), "the BEGIN waits for the lock");
        sqlx::query("COMMIT")
            .execute(&mut other)
            .await
            .expect("frees the lock");

        for name in ["after-1", "after-2"] {
            let mut member = writer.begin().await.expect("a place");
            insert(&mut member, name).await;
            writer.commit(member).await.expect("committed");
        }
        writer.close().await;
        other.close().await.expect("closes");
        assert_eq!(names(&pool).await, ["after-1", "after-2"]);
        pool.close().await;
        let _ = std::fs::remove_dir_all(directory);
    }
}
