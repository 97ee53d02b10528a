//! Where the database is and what sits in front of it: the hosts of a
//! multi-host DATABASE_URL and which of them is the primary now, and the
//! start-up checks that a pooler between idemd and Postgres keeps what idemd
//! relies on.
//!
//! sqlx 0.9 takes one host per URL and ignores `target_session_attrs` (it
//! warns and connects to whatever answers), so idemd reads both itself:
//! `postgres://user@db-a:5432,db-b:5432/idemd?target_session_attrs=read-write`
//! names the candidates in order, and a [`PrimaryTracker`] probes them, as
//! libpq would at connect time, but also while serving: the pool's connect
//! options follow the first host that accepts writes, and connections opened
//! before a switch are closed at their next acquire instead of being handed
//! to a call (a standby answers every write with "read-only transaction").
//! While no host accepts writes, the pool keeps its last target and calls
//! answer UNAVAILABLE, as for any unreachable database.
//!
//! Behind a pooler: idemd keeps named prepared statements, its session
//! settings (sent in the startup packet's `options`) and a LISTEN on its
//! connections, so every server session must stay with one idemd connection
//! for that connection's life. PgBouncer's `pool_mode = session` does that;
//! `transaction` and `statement` do not, and are refused at start-up
//! ([`check_sessions`]).

use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool};
use sqlx::{Connection, Row};
use tracing::{info, warn};

use super::keepalive::DatabaseSockets;

/// Which sessions a DATABASE_URL accepts, libpq's `target_session_attrs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SessionAttrs {
    /// Whichever host answers first (libpq's default).
    Any,
    /// A host that accepts writes: not in recovery, not read-only.
    ReadWrite,
}

/// A DATABASE_URL read: one connect options per host, in the URL's order.
#[derive(Debug, Clone)]
pub(crate) struct DatabaseTargets {
    pub(crate) hosts: Vec<PgConnectOptions>,
    pub(crate) attrs: SessionAttrs,
}

impl DatabaseTargets {
    /// Reads `postgres://[userinfo@]host[:port][,host[:port]…][/db][?…]`.
    /// The error never echoes the URL: it may hold a password.
    pub(crate) fn parse(url: &str) -> Result<Self, String> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or("DATABASE_URL is not a URL (postgres://…)")?;
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path_and_query) = rest.split_at(authority_end);
        let (userinfo, hosts) = match authority.rsplit_once('@') {
            Some((userinfo, hosts)) => (format!("{userinfo}@"), hosts),
            None => (String::new(), authority),
        };
        let (path, query) = match path_and_query.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (path_and_query, None),
        };
        let mut attrs = SessionAttrs::Any;
        let mut kept = Vec::new();
        for pair in query.into_iter().flat_map(|query| query.split('&')) {
            match pair.split_once('=') {
                Some(("target_session_attrs", value)) => {
                    attrs = match value {
                        "any" => SessionAttrs::Any,
                        "read-write" | "primary" => SessionAttrs::ReadWrite,
                        other => {
                            return Err(format!(
                                "DATABASE_URL's target_session_attrs={other} is not supported: \
                                 idemd writes, so use read-write (or primary, the same here) or any"
                            ));
                        }
                    }
                }
                _ if pair.is_empty() => {}
                _ => kept.push(pair),
            }
        }
        let query = if kept.is_empty() {
            String::new()
        } else {
            format!("?{}", kept.join("&"))
        };
        let hosts = hosts
            .split(',')
            .map(|host| {
                format!("{scheme}://{userinfo}{host}{path}{query}")
                    .parse::<PgConnectOptions>()
                    .map_err(|error| format!("invalid DATABASE_URL: {error}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { hosts, attrs })
    }

    /// Whether idemd has to pick and follow a host: more than one, or a host
    /// that must accept writes.
    pub(crate) fn needs_tracking(&self) -> bool {
        self.hosts.len() > 1 || self.attrs == SessionAttrs::ReadWrite
    }
}

/// How often the primary is checked while serving, and how long one host's
/// check may take. A failover is followed within about one interval plus
/// the check after the new primary accepts writes.
const CHECK_INTERVAL: Duration = Duration::from_millis(500);
const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// Whether a connected host takes this session: for read-write, neither in
/// recovery (a standby) nor read-only (`default_transaction_read_only`, as
/// libpq checks it).
async fn accepts(connection: &mut PgConnection, attrs: SessionAttrs) -> Result<bool, sqlx::Error> {
    if attrs == SessionAttrs::Any {
        sqlx::query("SELECT 1").execute(&mut *connection).await?;
        return Ok(true);
    }
    let read_only: bool = sqlx::query_scalar(
        "SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on'",
    )
    .fetch_one(&mut *connection)
    .await?;
    Ok(!read_only)
}

/// Connects to `host` and checks it, all within [`CHECK_TIMEOUT`].
async fn probe(host: &PgConnectOptions, attrs: SessionAttrs) -> Result<bool, String> {
    let checked = tokio::time::timeout(CHECK_TIMEOUT, async {
        let mut connection = PgConnection::connect_with(host).await?;
        let accepted = accepts(&mut connection, attrs).await;
        // A checked connection is no use afterwards; dropping it closes the
        // socket without a round trip that a frozen host would not answer.
        drop(connection);
        accepted
    })
    .await;
    match checked {
        Ok(Ok(accepted)) => Ok(accepted),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err(format!("no answer within {CHECK_TIMEOUT:?}")),
    }
}

async fn probe_owned(host: PgConnectOptions, attrs: SessionAttrs) -> Result<bool, String> {
    probe(&host, attrs).await
}

/// `host:port` of a host, for the log (no credentials).
fn host_name(host: &PgConnectOptions) -> String {
    format!("{}:{}", host.get_host(), host.get_port())
}

/// The first host, in the URL's order, that takes the session; all are
/// probed at once, so one frozen host costs one timeout, not one each.
async fn find_target(targets: &DatabaseTargets) -> Result<usize, String> {
    let probes: Vec<_> = targets
        .hosts
        .iter()
        .map(|host| tokio::spawn(probe_owned(host.clone(), targets.attrs)))
        .collect();
    let mut answers = Vec::with_capacity(probes.len());
    for probe in probes {
        answers.push(
            probe
                .await
                .unwrap_or_else(|error| Err(format!("the probe failed: {error}"))),
        );
    }
    if let Some(index) = answers.iter().position(|answer| answer == &Ok(true)) {
        return Ok(index);
    }
    let seen: Vec<String> = targets
        .hosts
        .iter()
        .zip(&answers)
        .map(|(host, answer)| match answer {
            Ok(_) => format!("{} does not accept writes", host_name(host)),
            Err(error) => format!("{}: {error}", host_name(host)),
        })
        .collect();
    Err(seen.join("; "))
}

/// The host the pool connects to now, and when it last changed.
pub(crate) struct PrimaryTracker {
    /// Each host's options as the pool connects with them (the session
    /// settings included): what [`PrimaryTracker::current`] hands the pool.
    targets: DatabaseTargets,
    /// The client end of the keepalive, for the connection that checks
    /// the primary.
    sockets: Option<Arc<DatabaseSockets>>,
    state: Mutex<Current>,
}

struct Current {
    index: usize,
    /// Connections opened before this were opened to another host (or to
    /// this one while it was not the primary): closed at their next acquire.
    switched_at: Instant,
}

impl PrimaryTracker {
    /// Finds the host to start on; fails when none takes the session.
    /// `targets` carry the session settings: the pool gets them as they are
    /// after every move.
    pub(crate) async fn start(
        targets: DatabaseTargets,
        sockets: Option<Arc<DatabaseSockets>>,
    ) -> Result<Arc<Self>, String> {
        let index = find_target(&targets)
            .await
            .map_err(|seen| format!("no host in DATABASE_URL accepts idemd's sessions: {seen}"))?;
        info!(
            host = %host_name(&targets.hosts[index]),
            hosts = targets.hosts.len(),
            "connecting to the database's primary"
        );
        Ok(Arc::new(Self {
            targets,
            sockets,
            state: Mutex::new(Current {
                index,
                switched_at: Instant::now(),
            }),
        }))
    }

    pub(crate) fn current(&self) -> PgConnectOptions {
        let index = self.state.lock().expect("tracker state").index;
        self.targets.hosts[index].clone()
    }

    /// Whether a pool connection `age` old was opened to the current target.
    /// Whether the primary moved after `moment`: a connection the pool
    /// vetted then may be on the old one.
    pub(crate) fn switched_after(&self, moment: Instant) -> bool {
        self.state.lock().expect("tracker state").switched_at > moment
    }

    pub(crate) fn is_current(&self, age: Duration) -> bool {
        let switched_at = self.state.lock().expect("tracker state").switched_at;
        Instant::now()
            .checked_sub(age)
            .is_some_and(|opened| opened >= switched_at)
    }

    /// Checks the current target every [`CHECK_INTERVAL`] on a connection
    /// of its own; when it stops taking the session, finds the one that
    /// does and points `pool` there. Runs until the pool closes.
    pub(crate) async fn follow(self: Arc<Self>, pool: PgPool) {
        let mut checking: Option<PgConnection> = None;
        let mut reported_none = false;
        while !pool.is_closed() {
            tokio::time::sleep(CHECK_INTERVAL).await;
            let current = self.current();
            let healthy = tokio::time::timeout(CHECK_TIMEOUT, async {
                if checking.is_none() {
                    checking = Some(PgConnection::connect_with(&current).await?);
                    if let Some(sockets) = &self.sockets {
                        sockets.configure().await;
                    }
                }
                let connection = checking.as_mut().expect("connected above");
                accepts(connection, self.targets.attrs).await
            })
            .await;
            if matches!(healthy, Ok(Ok(true))) {
                continue;
            }
            // Dropped, not closed: the host may not answer a goodbye.
            checking = None;
            match find_target(&self.targets).await {
                Ok(index) => {
                    reported_none = false;
                    let mut state = self.state.lock().expect("tracker state");
                    let moved = index != state.index;
                    state.index = index;
                    // Also when the same host came back: what was opened to
                    // it while it was down or a standby must go.
                    state.switched_at = Instant::now();
                    drop(state);
                    pool.set_connect_options(self.current());
                    if moved {
                        warn!(
                            host = %host_name(&self.targets.hosts[index]),
                            "the database's primary moved: following it"
                        );
                    }
                }
                Err(seen) => {
                    if !reported_none {
                        warn!(hosts = %seen, "no database host accepts writes now; calls answer UNAVAILABLE until one does");
                        reported_none = true;
                    }
                }
            }
        }
    }
}

/// The pool's `before_acquire`: a connection opened before the last switch
/// of primary is closed (hard: no goodbye to a host that may not answer)
/// instead of being handed to a call.
pub(crate) fn close_if_opened_before_a_switch(
    tracker: &Arc<PrimaryTracker>,
) -> impl Fn(
    &mut PgConnection,
    sqlx::pool::PoolConnectionMetadata,
) -> futures_util::future::BoxFuture<'_, Result<bool, sqlx::Error>>
+ Send
+ Sync
+ 'static {
    let tracker = Arc::clone(tracker);
    move |_connection, metadata| {
        let current = tracker.is_current(metadata.age);
        Box::pin(async move {
            match current {
                true => Ok(true),
                // An error, not Ok(false): sqlx closes a refused connection
                // with a goodbye round trip, an erroring one without.
                false => Err(sqlx::Error::Configuration(
                    "opened before the database's primary moved".into(),
                )),
            }
        })
    }
}

/// What the server says when a pooler refuses a startup parameter: sqlx's
/// `extra_float_digits`, or the `options` that carry idemd's session
/// settings.
pub(crate) fn explain_connect_error(error: &sqlx::Error) -> Option<String> {
    let message = error.as_database_error()?.message();
    message.contains("unsupported startup parameter").then(|| {
        format!(
            "the database refused a startup parameter ({message}): a connection pooler such \
             as PgBouncer sits in front of it. Add `ignore_startup_parameters = \
             extra_float_digits, options` to pgbouncer.ini, run the pool idemd uses with \
             `pool_mode = session`, and set idemd's session settings (lock_timeout, \
             statement_timeout, …), which it sends in the startup packet's options, on its \
             role instead (docs/operating.md, \"Behind PgBouncer\")"
        )
    })
}

/// Checks, at start-up, that every session setting idemd sends took effect
/// and that a connection keeps its server session: a pooler that drops the
/// startup `options`, or hands each transaction to another server session
/// (PgBouncer's `pool_mode = transaction` or `statement`), would silently
/// lose the timeouts, the prepared statements and LISTEN. Two connections
/// of its own, outside the pool (which may have room for one), and the
/// simple query protocol, which a transaction pooler cannot split.
pub(crate) async fn check_sessions(
    connect: &PgConnectOptions,
    sent: &[(&'static str, String)],
) -> Result<(), String> {
    let failed = |error: sqlx::Error| format!("checking the database's sessions: {error}");
    let mut first = PgConnection::connect_with(connect).await.map_err(failed)?;
    let names: Vec<String> = sent.iter().map(|(name, _)| format!("'{name}'")).collect();
    // The names are idemd's own constants, never input.
    let effective: Vec<(String, String)> = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "SELECT name, setting FROM pg_settings WHERE name IN ({})",
        names.join(", ")
    )))
    .fetch_all(&mut first)
    .await
    .map_err(failed)?
    .iter()
    .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
    .collect::<Result<_, sqlx::Error>>()
    .map_err(failed)?;
    let differing: Vec<String> = sent
        .iter()
        .filter_map(|(name, value)| {
            let found = effective
                .iter()
                .find(|(effective, _)| effective == name)
                .map(|(_, setting)| setting.as_str());
            (found != Some(value.as_str())).then(|| {
                format!(
                    "{name} is {} instead of {value}",
                    found.unwrap_or("unknown")
                )
            })
        })
        .collect();
    if !differing.is_empty() {
        return Err(format!(
            "idemd's session settings did not take effect ({}): a connection pooler ignoring \
             the startup packet's options? Set them on idemd's role (ALTER ROLE … SET \
             lock_timeout = …), or connect directly (docs/operating.md, \"Behind PgBouncer\")",
            differing.join(", ")
        ));
    }
    // With a pooler in transaction mode, a connection's server session is
    // lent per transaction. Another connection's transaction, begun while
    // the first is idle, then most likely gets the first one's session
    // (PgBouncer reuses the last one released) and the first continues on
    // another. Without a pooler, or in session mode, a connection's backend
    // never changes, so this never refuses a server that keeps sessions.
    let mut second = PgConnection::connect_with(connect).await.map_err(failed)?;
    for _ in 0..3 {
        let before = backend_pid(&mut first).await.map_err(failed)?;
        sqlx::raw_sql("BEGIN; SELECT 1")
            .execute(&mut second)
            .await
            .map_err(failed)?;
        let after = backend_pid(&mut first).await.map_err(failed)?;
        sqlx::raw_sql("ROLLBACK")
            .execute(&mut second)
            .await
            .map_err(failed)?;
        if before != after {
            return Err(
                "a database connection changed server sessions between two statements: a \
                 connection pooler in transaction or statement mode (PgBouncer's \
                 pool_mode = transaction). idemd keeps prepared statements, session settings \
                 and LISTEN on its connections: set `pool_mode = session` for idemd's \
                 database in pgbouncer.ini, or connect directly (docs/operating.md, \
                 \"Behind PgBouncer\")"
                    .to_owned(),
            );
        }
    }
    // Closed, not dropped: the database answered just now, and a pooler
    // keeps a server session whose client said goodbye.
    let _ = first.close().await;
    let _ = second.close().await;
    Ok(())
}

async fn backend_pid(connection: &mut PgConnection) -> Result<i32, sqlx::Error> {
    sqlx::raw_sql("SELECT pg_backend_pid()")
        .fetch_one(connection)
        .await?
        .try_get(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_multi_host_url_gives_one_target_per_host_in_order() {
        let targets = DatabaseTargets::parse(
            "postgres://idemd:secret@db-a:5433,db-b,[::1]:5434/records?sslmode=disable&target_session_attrs=read-write",
        )
        .expect("parsed");
        assert_eq!(targets.attrs, SessionAttrs::ReadWrite);
        let hosts: Vec<_> = targets
            .hosts
            .iter()
            .map(|host| (host.get_host().to_owned(), host.get_port()))
            .collect();
        assert_eq!(
            hosts,
            [
                ("db-a".to_owned(), 5433),
                ("db-b".to_owned(), 5432),
                ("[::1]".to_owned(), 5434)
            ]
        );
        for host in &targets.hosts {
            assert_eq!(host.get_username(), "idemd");
            assert_eq!(host.get_database(), Some("records"));
        }
        assert!(targets.needs_tracking());
    }

    #[test]
    fn one_host_without_attrs_needs_no_tracking() {
        let targets = DatabaseTargets::parse("postgres://idemd@db/records").expect("parsed");
        assert_eq!(targets.hosts.len(), 1);
        assert!(!targets.needs_tracking());
        let targets = DatabaseTargets::parse("postgres://db/records?target_session_attrs=primary")
            .expect("parsed");
        assert!(targets.needs_tracking());
    }

    #[test]
    fn session_attrs_idemd_cannot_write_through_are_refused_without_echoing_the_url() {
        let error = DatabaseTargets::parse(
            "postgres://idemd:secret@db/records?target_session_attrs=standby",
        )
        .expect_err("refused");
        assert!(error.contains("target_session_attrs=standby"), "{error}");
        assert!(!error.contains("secret"), "{error}");
    }
}
