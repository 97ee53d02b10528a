//! A real network partition: a private Postgres in a network namespace of
//! its own, reached over a veth pair, and packet filters in that namespace
//! that drop everything both ways (no RST, no ICMP), as a partitioned
//! network does. TCP keepalive and TCP_USER_TIMEOUT then have to do their
//! work: idle connections and a connection with a statement in flight are
//! noticed and closed within their bounds, not after the kernel's
//! retransmission limit (about 15 minutes), and the replica serves again
//! once the partition heals.

use std::net::Ipv4Addr;
use std::process::Command;
use std::time::{Duration, Instant};

use tonic::Code;

use super::*;

/// The keepalive settings under test: idle time, and the user timeout that
/// also ends a connection whose keepalive probes go unanswered.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(2);
const USER_TIMEOUT: Duration = Duration::from_secs(3);
/// Every store call's own bound, far beyond the keepalive's: only the TCP
/// settings can end a statement in flight sooner.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// A network namespace with a veth pair to this one, and a Postgres cluster
/// listening inside it; removed (cluster stopped, namespace deleted) on drop.
struct IsolatedPostgres {
    namespace: String,
    address: Ipv4Addr,
    data: PathBuf,
    log: PathBuf,
    binaries: ServerBinaries,
}

impl IsolatedPostgres {
    /// `None`, with the line a skipped test prints, where the machine does not
    /// allow network namespaces or packet filters.
    fn start(directory: &Path) -> Option<Self> {
        if !running_as_root() {
            skip("the partition test needs root (network namespaces, iptables)");
            return None;
        }
        let unique = std::process::id() % 10_000;
        let namespace = format!("idemd-part-{unique}");
        let probe = Command::new("ip")
            .args(["netns", "add", &namespace])
            .output();
        if !probe.is_ok_and(|output| output.status.success()) {
            skip("this machine does not allow `ip netns add` (CAP_NET_ADMIN)");
            return None;
        }
        let filter = Command::new("ip")
            .args(["netns", "exec", &namespace, "iptables", "-S"])
            .output();
        if !filter.is_ok_and(|output| output.status.success()) {
            let _ = Command::new("ip")
                .args(["netns", "del", &namespace])
                .status();
            skip(
                "iptables does not work in a network namespace here (tests/topology/run installs it)",
            );
            return None;
        }
        let subnet = 16 + (unique % 200) as u8;
        let (outside, inside) = (
            Ipv4Addr::new(10, 213, subnet, 1),
            Ipv4Addr::new(10, 213, subnet, 2),
        );
        let (host_end, inner_end) = (format!("idmh{unique}"), format!("idmn{unique}"));
        let binaries =
            ServerBinaries::find().expect("PostgreSQL's server binaries in /usr/lib/postgresql");
        let cluster = owned_directory(directory, "isolated-postgres");
        let isolated = Self {
            namespace: namespace.clone(),
            address: inside,
            data: cluster.join("data"),
            log: cluster.join("postgres.log"),
            binaries,
        };
        let ip = |args: &[&str]| run(Command::new("ip").args(args));
        ip(&[
            "link", "add", &host_end, "type", "veth", "peer", "name", &inner_end,
        ]);
        ip(&["link", "set", &inner_end, "netns", &namespace]);
        ip(&["addr", "add", &format!("{outside}/30"), "dev", &host_end]);
        ip(&["link", "set", &host_end, "up"]);
        let inside_ip = |args: &[&str]| {
            run(Command::new("ip")
                .args(["netns", "exec", &namespace, "ip"])
                .args(args))
        };
        inside_ip(&["addr", "add", &format!("{inside}/30"), "dev", &inner_end]);
        inside_ip(&["link", "set", &inner_end, "up"]);
        inside_ip(&["link", "set", "lo", "up"]);
        isolated.binaries.initdb(&isolated.data);
        let hba = isolated.data.join("pg_hba.conf");
        let mut rules = std::fs::read_to_string(&hba).expect("pg_hba.conf");
        rules.push_str(&format!("host all all {outside}/32 trust\n"));
        std::fs::write(&hba, rules).expect("pg_hba.conf");
        let options = format!(
            "-p 5432 -k {} -c listen_addresses={inside} -c fsync=off",
            cluster.display()
        );
        isolated.binaries.start(
            &["ip", "netns", "exec", &namespace],
            &isolated.data,
            &options,
            &isolated.log,
        );
        Some(isolated)
    }

    fn url(&self) -> String {
        format!("postgres://postgres@{}:5432/postgres", self.address)
    }

    /// Drops every packet in and out of the namespace, silently.
    fn partition(&self) {
        for chain in ["INPUT", "OUTPUT"] {
            run(Command::new("ip").args([
                "netns",
                "exec",
                &self.namespace,
                "iptables",
                "-A",
                chain,
                "-j",
                "DROP",
            ]));
        }
    }

    fn heal(&self) {
        for chain in ["INPUT", "OUTPUT"] {
            run(Command::new("ip").args([
                "netns",
                "exec",
                &self.namespace,
                "iptables",
                "-D",
                chain,
                "-j",
                "DROP",
            ]));
        }
    }

    /// This namespace's established TCP connections to the cluster: idemd's
    /// (the test keeps none open).
    fn established(&self) -> usize {
        let peer = format!("{:08X}:1538", u32::from_le_bytes(self.address.octets()));
        std::fs::read_to_string("/proc/net/tcp")
            .expect("/proc/net/tcp")
            .lines()
            .skip(1)
            .filter(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                fields.get(2) == Some(&peer.as_str()) && fields.get(3) == Some(&"01")
            })
            .count()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for IsolatedPostgres {
    fn drop(&mut self) {
        self.binaries.stop_immediately(&self.data);
        // Deleting the namespace deletes the veth pair with it.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.namespace])
            .status();
    }
}

#[ignore = "needs root, network namespaces and iptables: tests/topology/run"]
#[tokio::test(flavor = "multi_thread")]
async fn a_partition_is_noticed_within_the_keepalive_bounds_and_healed_from() {
    let directory = TempDir::new();
    let Some(database) = IsolatedPostgres::start(directory.path()) else {
        return;
    };
    let data = ProcessData::postgres_at(database.url());
    let migrated = data.command(&["migrate"]).output().expect("idemd migrate");
    assert!(
        migrated.status.success(),
        "{}",
        String::from_utf8_lossy(&migrated.stderr)
    );
    let token = data.create_tenant("tenant-a");
    let daemon = data
        .serve_with(
            &[],
            &[
                (
                    "IDEMD_DB_TCP_KEEPALIVE",
                    format!("{}s", KEEPALIVE_IDLE.as_secs()),
                ),
                (
                    "IDEMD_DB_TCP_USER_TIMEOUT",
                    format!("{}s", USER_TIMEOUT.as_secs()),
                ),
                (
                    "IDEMD_DB_CALL_TIMEOUT",
                    format!("{}s", CALL_TIMEOUT.as_secs()),
                ),
                ("IDEMD_DB_MAX_CONNECTIONS", "4".into()),
                ("IDEMD_READINESS_INTERVAL", "1s".into()),
                ("IDEMD_AUTH_CACHE_TTL", "60s".into()),
            ],
        )
        .await;
    let mut client = daemon.client().await;
    // Several calls at once, so that the pool holds more than one
    // connection, idle between calls.
    let warm: Vec<_> = (0..4)
        .map(|index| {
            let mut client = client.clone();
            let token = token.clone();
            tokio::spawn(async move {
                claim_complete_and_replay(&mut client, &token, &format!("warm-{index}")).await
            })
        })
        .collect();
    for call in warm {
        call.await.expect("joined");
    }
    let before = database.established();
    assert!(
        before >= 2,
        "idemd holds {before} connections: {}",
        daemon.log()
    );

    database.partition();
    let partitioned = Instant::now();
    // A statement in flight: its data goes unacknowledged, and the user
    // timeout ends its connection long before the call's own bound.
    let status = client
        .claim(authorized(
            &token,
            claim_json("payments.charge", "during", "{}"),
        ))
        .await
        .expect_err("the database is partitioned away");
    let in_flight = partitioned.elapsed();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(
        in_flight < USER_TIMEOUT + Duration::from_secs(5),
        "the call in flight ended after {in_flight:?}: {}",
        daemon.log()
    );
    // Idle connections: found out by keepalive probes, whose silence the
    // user timeout ends (idle time + one probe interval + user timeout).
    let idle_bound =
        KEEPALIVE_IDLE + Duration::from_secs(5) + USER_TIMEOUT + Duration::from_secs(5);
    eventually(
        idle_bound,
        "every connection to the partitioned database closed",
        || {
            let established = database.established();
            async move { established == 0 }
        },
    )
    .await;
    println!(
        "partition: the call in flight answered UNAVAILABLE after {in_flight:?}; every \
         connection closed after {:?} ({before} before)",
        partitioned.elapsed()
    );

    database.heal();
    let healed = Instant::now();
    eventually(
        Duration::from_secs(20),
        "serving again after the partition healed",
        || {
            let mut client = client.clone();
            let token = token.clone();
            async move {
                client
                    .claim(authorized(
                        &token,
                        claim_json("payments.charge", "after", "{}"),
                    ))
                    .await
                    .is_ok()
            }
        },
    )
    .await;
    println!(
        "partition: serving again {:?} after it healed",
        healed.elapsed()
    );
    let _ = database.log();
}
