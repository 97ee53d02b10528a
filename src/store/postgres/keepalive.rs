//! TCP keepalive and `TCP_USER_TIMEOUT` on idemd's sockets to Postgres, at
//! both ends.
//!
//! A primary that vanishes without a word (a failover that sends no RST, a
//! partition) leaves every socket to it open to nobody. Without keepalive an
//! idle one is never found out, and one whose data goes unacknowledged is
//! given up only after `tcp_retries2` (about 15 minutes), holding its pool
//! slot. With it, an idle connection to nobody ends after the idle time plus
//! a few probes, and one with unacknowledged data after the user timeout.
//! The server side gets the same settings as session settings (see
//! [`DatabaseKeepalive::server_settings`]), so Postgres ends the sessions of
//! a replica that vanished and releases the row locks its transactions held.
//!
//! Why the client side takes this roundabout way: sqlx 0.9 opens the
//! `TcpStream` itself (sqlx-core `net::connect_tcp`) and has no hook to reach
//! the socket, before or after connecting. So after each new connection to
//! the database, every socket of this process whose peer is the address of
//! a host of the database's URL (any of them: the pool follows the primary
//! from one to another) is found (`/proc/self/fd`), duplicated with `pidfd_getfd(2)` (a
//! new descriptor for the same open socket, so options set through it apply
//! to sqlx's) and configured. Configuring a socket again that already is
//! changes nothing, so "every socket peering the database" needs no record
//! of which socket belongs to which connection, and a descriptor closed and
//! reused meanwhile is configured only if it, too, peers the database.
//!
//! Linux only. Elsewhere, or where the kernel refuses `pidfd_getfd` (older
//! than 5.6, a seccomp filter), idemd warns once and goes on: every store
//! call is still bounded by `IDEMD_DB_CALL_TIMEOUT`.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use tracing::{debug, warn};

/// TCP keepalive and user timeout of the database connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatabaseKeepalive {
    idle: Duration,
    user_timeout: Duration,
}

impl DatabaseKeepalive {
    /// Between unanswered probes, once the connection has been idle.
    pub const PROBE_INTERVAL: Duration = Duration::from_secs(5);
    /// Unanswered probes after which the connection counts as dead.
    pub const PROBES: u32 = 3;
    /// Linux's largest `TCP_KEEPIDLE`.
    pub const MAX_IDLE: Duration = Duration::from_secs(32_767);
    /// Postgres reads `tcp_user_timeout` as milliseconds in an `int`.
    pub const MAX_USER_TIMEOUT: Duration = Duration::from_millis(i32::MAX as u64);

    /// Nothing set on either end: the system defaults.
    pub const OFF: Self = Self {
        idle: Duration::ZERO,
        user_timeout: Duration::ZERO,
    };

    /// Probes after `idle` without traffic (whole seconds, rounded up; zero
    /// turns keepalive and the user timeout off), and ends a connection
    /// whose sent data stays unacknowledged for `user_timeout` (whole
    /// milliseconds, rounded up; zero leaves the system default).
    pub fn new(idle: Duration, user_timeout: Duration) -> Result<Self, String> {
        if idle.is_zero() {
            return Ok(Self::OFF);
        }
        let idle = round_up_to(idle, Duration::from_secs(1));
        if idle > Self::MAX_IDLE {
            return Err(format!(
                "the database TCP keepalive idle time ({idle:?}) exceeds {:?}",
                Self::MAX_IDLE
            ));
        }
        let user_timeout = round_up_to(user_timeout, Duration::from_millis(1));
        if user_timeout > Self::MAX_USER_TIMEOUT {
            return Err(format!(
                "the database TCP user timeout ({user_timeout:?}) exceeds {:?}",
                Self::MAX_USER_TIMEOUT
            ));
        }
        Ok(Self { idle, user_timeout })
    }

    pub fn idle(&self) -> Duration {
        self.idle
    }

    pub fn user_timeout(&self) -> Duration {
        self.user_timeout
    }

    pub fn is_off(&self) -> bool {
        self.idle.is_zero()
    }

    /// The same for the server's end of each session: Postgres's own
    /// `tcp_keepalives_*` and `tcp_user_timeout` (12+, settable by any
    /// user; ignored on a Unix socket). None when off.
    pub(super) fn server_settings(&self) -> Vec<(&'static str, String)> {
        if self.is_off() {
            return Vec::new();
        }
        vec![
            ("tcp_keepalives_idle", self.idle.as_secs().to_string()),
            (
                "tcp_keepalives_interval",
                Self::PROBE_INTERVAL.as_secs().to_string(),
            ),
            ("tcp_keepalives_count", Self::PROBES.to_string()),
            (
                "tcp_user_timeout",
                self.user_timeout.as_millis().to_string(),
            ),
        ]
    }
}

impl Default for DatabaseKeepalive {
    /// The defaults of `idemd serve`: a dead idle connection is found out
    /// within about 30 s, as is one whose data goes unacknowledged.
    fn default() -> Self {
        Self {
            idle: Duration::from_secs(10),
            user_timeout: Duration::from_secs(30),
        }
    }
}

fn round_up_to(duration: Duration, unit: Duration) -> Duration {
    let units = duration.as_nanos().div_ceil(unit.as_nanos());
    let units = u32::try_from(units).unwrap_or(u32::MAX);
    unit.saturating_mul(units)
}

/// How long resolving the database's host name may take before this
/// connection's sockets are left as they are (the connection itself has
/// just resolved it).
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(1);

/// The client end: the sockets of this process that peer the database, at
/// any host of its URL. All of them, not only the one the pool points at
/// now: after a failover the pool, LISTEN and NOTIFY open their connections
/// to another host of the URL, and those need keepalive as much (the next
/// failover may be as silent). Every host of the URL is a database idemd
/// may use, so a socket peering any of them is one of idemd's to Postgres.
#[derive(Debug)]
pub(super) struct DatabaseSockets {
    /// `(host, port)` of each TCP host of the URL, in its order.
    hosts: Vec<(String, u16)>,
    keepalive: DatabaseKeepalive,
}

impl DatabaseSockets {
    /// None when there is nothing to do: keepalive off, or no host reached
    /// over TCP.
    pub(super) fn of(
        hosts: &[PgConnectOptions],
        keepalive: DatabaseKeepalive,
    ) -> Option<Arc<Self>> {
        if keepalive.is_off() {
            return None;
        }
        let hosts: Vec<(String, u16)> = hosts
            .iter()
            // sqlx connects to a Unix socket when one is named or the host
            // is a directory.
            .filter(|connect| {
                connect.get_socket().is_none() && !connect.get_host().starts_with('/')
            })
            // IPv6 literals keep their brackets in sqlx's options.
            .map(|connect| {
                (
                    connect.get_host().trim_matches(['[', ']']).to_owned(),
                    connect.get_port(),
                )
            })
            .collect();
        if hosts.is_empty() {
            return None;
        }
        Some(Arc::new(Self { hosts, keepalive }))
    }

    /// Configures every socket of this process that peers the database.
    /// Best effort: what fails is logged, never returned, since the
    /// connection works without it.
    pub(super) async fn configure(&self) {
        let mut peers = Vec::new();
        for (host, port) in &self.hosts {
            peers.extend(resolve(host, *port).await);
        }
        if peers.is_empty() {
            return;
        }
        let keepalive = self.keepalive;
        let configured =
            tokio::task::spawn_blocking(move || configure_sockets_peering(&peers, keepalive)).await;
        match configured {
            Ok(Ok(count)) => debug!(sockets = count, "database sockets given tcp keepalive"),
            Ok(Err(Unconfigurable::Refused(error))) => warn_once(&error),
            Ok(Err(Unconfigurable::Failed(error))) => {
                debug!(%error, "database sockets not given tcp keepalive this time");
            }
            Err(error) => debug!(%error, "the task configuring database sockets failed"),
        }
    }
}

/// The addresses of one host of the URL; none when it does not resolve in
/// time (its sockets keep their settings this time).
async fn resolve(host: &str, port: u16) -> Vec<SocketAddr> {
    if let Ok(address) = host.parse::<IpAddr>() {
        return vec![canonical(SocketAddr::new(address, port))];
    }
    let resolving = tokio::net::lookup_host((host, port));
    match tokio::time::timeout(RESOLVE_TIMEOUT, resolving).await {
        Ok(Ok(addresses)) => addresses.map(canonical).collect(),
        Ok(Err(error)) => {
            debug!(%error, "database host not resolved: its sockets keep their settings");
            Vec::new()
        }
        Err(_) => {
            debug!("database host not resolved in time: its sockets keep their settings");
            Vec::new()
        }
    }
}

/// Pool connections get keepalive as soon as they are open, before their
/// first use.
pub(super) fn configure_on_connect(
    pool: PgPoolOptions,
    sockets: Option<&Arc<DatabaseSockets>>,
) -> PgPoolOptions {
    let Some(sockets) = sockets else {
        return pool;
    };
    let sockets = Arc::clone(sockets);
    pool.after_connect(move |_connection, _metadata| {
        let sockets = Arc::clone(&sockets);
        Box::pin(async move {
            sockets.configure().await;
            Ok(())
        })
    })
}

/// Addresses compared as the kernel reports peers: an IPv4 peer of an
/// IPv6 socket shows as `::ffff:a.b.c.d`; flow and scope do not matter.
fn canonical(address: SocketAddr) -> SocketAddr {
    SocketAddr::new(address.ip().to_canonical(), address.port())
}

enum Unconfigurable {
    /// The system does not let us reach the sockets: nothing will.
    Refused(std::io::Error),
    /// This attempt failed; the next connection tries again.
    Failed(std::io::Error),
}

static REFUSAL_REPORTED: AtomicBool = AtomicBool::new(false);

fn warn_once(error: &std::io::Error) {
    if REFUSAL_REPORTED.swap(true, Ordering::Relaxed) {
        return;
    }
    warn!(
        %error,
        "database sockets get no tcp keepalive or user timeout on this system: a database \
         that vanishes silently is noticed only by each call's timeout (IDEMD_DB_CALL_TIMEOUT)"
    );
}

#[cfg(target_os = "linux")]
fn configure_sockets_peering(
    peers: &[SocketAddr],
    keepalive: DatabaseKeepalive,
) -> Result<usize, Unconfigurable> {
    use std::os::unix::ffi::OsStrExt;

    use rustix::io::Errno;
    use rustix::process::{PidfdFlags, PidfdGetfdFlags, getpid, pidfd_getfd, pidfd_open};

    let refused = |error: Errno| match error {
        Errno::PERM | Errno::ACCESS | Errno::NOSYS => Unconfigurable::Refused(error.into()),
        other => Unconfigurable::Failed(other.into()),
    };
    let this_process = pidfd_open(getpid(), PidfdFlags::empty()).map_err(refused)?;
    let descriptors = std::fs::read_dir("/proc/self/fd").map_err(Unconfigurable::Failed)?;
    let probes = socket2::TcpKeepalive::new()
        .with_time(keepalive.idle)
        .with_interval(DatabaseKeepalive::PROBE_INTERVAL)
        .with_retries(DatabaseKeepalive::PROBES);
    let user_timeout = Some(keepalive.user_timeout).filter(|timeout| !timeout.is_zero());
    let mut configured = 0;
    for entry in descriptors.flatten() {
        let Some(descriptor) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse().ok())
        else {
            continue;
        };
        // Closed since listed: gone, nothing to configure.
        let Ok(target) = std::fs::read_link(entry.path()) else {
            continue;
        };
        if !target.as_os_str().as_bytes().starts_with(b"socket:[") {
            continue;
        }
        let duplicate = match pidfd_getfd(&this_process, descriptor, PidfdGetfdFlags::empty()) {
            Ok(duplicate) => duplicate,
            Err(Errno::BADF) => continue,
            Err(error) => return Err(refused(error)),
        };
        let socket = socket2::SockRef::from(&duplicate);
        let Some(peer) = socket.peer_addr().ok().and_then(|peer| peer.as_socket()) else {
            continue;
        };
        if !peers.contains(&canonical(peer)) {
            continue;
        }
        let set = socket
            .set_tcp_keepalive(&probes)
            .and_then(|()| match user_timeout {
                Some(timeout) => socket.set_tcp_user_timeout(Some(timeout)),
                None => Ok(()),
            });
        match set {
            Ok(()) => configured += 1,
            // A socket closing under us refuses options; the others still get them.
            Err(error) => debug!(%error, "a database socket refused tcp keepalive"),
        }
    }
    Ok(configured)
}

#[cfg(not(target_os = "linux"))]
fn configure_sockets_peering(
    _peers: &[SocketAddr],
    _keepalive: DatabaseKeepalive,
) -> Result<usize, Unconfigurable> {
    Err(Unconfigurable::Refused(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "only implemented on Linux",
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_rounded_up_to_what_the_kernel_and_postgres_take() {
        let keepalive =
            DatabaseKeepalive::new(Duration::from_millis(1_500), Duration::from_micros(2_500))
                .expect("valid");
        assert_eq!(keepalive.idle(), Duration::from_secs(2));
        assert_eq!(keepalive.user_timeout(), Duration::from_millis(3));
        assert_eq!(
            keepalive.server_settings(),
            [
                ("tcp_keepalives_idle", "2".to_owned()),
                ("tcp_keepalives_interval", "5".to_owned()),
                ("tcp_keepalives_count", "3".to_owned()),
                ("tcp_user_timeout", "3".to_owned()),
            ]
        );
    }

    #[test]
    fn zero_idle_turns_both_off_and_out_of_range_values_are_refused() {
        let off = DatabaseKeepalive::new(Duration::ZERO, Duration::from_secs(30)).expect("valid");
        assert_eq!(off, DatabaseKeepalive::OFF);
        assert!(off.server_settings().is_empty());
        assert!(DatabaseKeepalive::new(Duration::from_secs(32_768), Duration::ZERO).is_err());
        assert!(
            DatabaseKeepalive::new(
                Duration::from_secs(10),
                DatabaseKeepalive::MAX_USER_TIMEOUT + Duration::from_millis(1)
            )
            .is_err()
        );
        assert_eq!(
            DatabaseKeepalive::new(Duration::from_secs(10), Duration::from_secs(30)),
            Ok(DatabaseKeepalive::default())
        );
    }

    #[test]
    fn unix_socket_urls_have_no_tcp_sockets_to_configure() {
        let keepalive = DatabaseKeepalive::default();
        for url in [
            "postgres://postgres@%2Fvar%2Frun%2Fpostgresql/idemd",
            "postgres://postgres@localhost/idemd?host=/var/run/postgresql",
        ] {
            let connect: PgConnectOptions = url.parse().expect("a url");
            assert!(
                DatabaseSockets::of(&[connect], keepalive).is_none(),
                "{url}"
            );
        }
        let tcp: PgConnectOptions = "postgres://postgres@[::1]:5433/idemd"
            .parse()
            .expect("a url");
        let sockets = DatabaseSockets::of(std::slice::from_ref(&tcp), keepalive).expect("tcp");
        assert_eq!(sockets.hosts, [("::1".to_owned(), 5433)]);
        assert!(DatabaseSockets::of(&[tcp], DatabaseKeepalive::OFF).is_none());
    }

    #[test]
    fn every_tcp_host_of_a_multi_host_url_is_matched() {
        let hosts: Vec<PgConnectOptions> = [
            "postgres://postgres@db-a:5433/idemd",
            "postgres://postgres@%2Fvar%2Frun%2Fpostgresql/idemd",
            "postgres://postgres@10.0.0.2/idemd",
        ]
        .iter()
        .map(|url| url.parse().expect("a url"))
        .collect();
        let sockets = DatabaseSockets::of(&hosts, DatabaseKeepalive::default()).expect("tcp");
        assert_eq!(
            sockets.hosts,
            [("db-a".to_owned(), 5433), ("10.0.0.2".to_owned(), 5432)]
        );
    }
}
