//! The flags of `serve`, turned into the settings of the parts they configure
//! and checked on the way: config.rs only parses.

use std::time::Duration;

use chrono::TimeDelta;

use super::transport::ServerSettings;
use crate::auth::AuthSettings;
use crate::config::{BoundsArgs, DatabaseArgs, ServeArgs, TransportArgs};
use crate::domain::{HistoryCap, Limits};
use crate::error::BoxError;
use crate::grpc::admission::AdmissionSettings;
use crate::listen::ConnectionSettings;
use crate::metrics::LabelPolicy;
use crate::service::WaiterLimits;
use crate::store::open::{StoreLocation, StoreOptions};
use crate::store::postgres::SessionTimeouts;
use crate::sweeper::SweeperSettings;

/// Opening a store from the CLI's database flags: which store DATABASE_URL
/// (or its absence) names, and how to open it.
pub(super) fn store_options_from(database: &DatabaseArgs) -> Result<StoreOptions, BoxError> {
    Ok(StoreOptions {
        location: StoreLocation::of(database.database_url.as_deref(), &database.data_dir)?,
        max_connections: database.db_max_connections,
        acquire_timeout: database.db_acquire_timeout,
        call_timeout: database.db_call_timeout,
        session_timeouts: SessionTimeouts {
            lock_timeout: database.db_lock_timeout,
            statement_timeout: database.db_statement_timeout,
            idle_in_transaction_timeout: database.db_idle_in_transaction_timeout,
        },
        tcp_keepalive: database.db_tcp_keepalive,
        tcp_user_timeout: database.db_tcp_user_timeout,
        change_notifications: database.pg_notify,
        history_cap: HistoryCap {
            max_entries: database.max_history_entries,
        },
        single_node_durability_ok: database.single_node_durability_ok,
    })
}

pub(super) fn label_policy_from(args: &ServeArgs) -> LabelPolicy {
    LabelPolicy {
        operations: args
            .metrics_operations
            .iter()
            .map(|operation| operation.trim().to_owned())
            .filter(|operation| !operation.is_empty())
            .collect(),
        tenant: args.metrics_tenant_label,
    }
}

pub(super) fn sweeper_settings_from(args: &ServeArgs) -> Result<SweeperSettings, String> {
    Ok(SweeperSettings {
        interval: args.sweep_interval,
        batch: args.sweep_batch.max(1),
        tombstone_retention: delta(args.tombstone_retention)?,
        clock_margin: delta(args.bounds.clock_margin)?,
    })
}

fn delta(duration: Duration) -> Result<TimeDelta, String> {
    TimeDelta::from_std(duration).map_err(|_| format!("duration {duration:?} is too large"))
}

/// What a Claim that waits its whole cap needs beyond it, to answer.
const REQUEST_TIMEOUT_HEADROOM: Duration = Duration::from_secs(1);

pub(super) fn auth_settings_from(args: &ServeArgs) -> AuthSettings {
    AuthSettings {
        cache_ttl: args.auth_cache_ttl,
        negative_cache_ttl: args.auth_negative_cache_ttl,
        cache_entries: args.auth_cache_entries.max(1),
        lookup_concurrency: args.auth_lookup_concurrency.max(1),
        lookup_queue: args.auth_lookup_queue,
        lookup_queue_timeout: args.auth_lookup_queue_timeout,
    }
}

pub(super) fn waiter_limits_from(transport: &TransportArgs) -> WaiterLimits {
    WaiterLimits {
        per_replica: transport.max_waiters,
        per_tenant: transport.max_waiters_per_tenant,
    }
}

pub(super) fn connection_settings_from(
    transport: &TransportArgs,
) -> Result<ConnectionSettings, String> {
    let keepalive = transport
        .http2_keepalive_interval
        .saturating_add(transport.http2_keepalive_timeout);
    if transport.connection_idle_timeout <= keepalive {
        return Err(format!(
            "--connection-idle-timeout ({:?}) must exceed --http2-keepalive-interval plus \
             --http2-keepalive-timeout ({keepalive:?}), or live idle connections are closed",
            transport.connection_idle_timeout
        ));
    }
    Ok(ConnectionSettings {
        max_connections: transport.max_connections.max(1),
        max_connections_per_source: transport.max_connections_per_source,
        handshake_timeout: transport.handshake_timeout,
        idle_timeout: transport.connection_idle_timeout,
    })
}

pub(super) fn server_settings_from(transport: &TransportArgs) -> ServerSettings {
    ServerSettings {
        max_concurrent_streams: transport.max_concurrent_streams.max(1),
        http2_keepalive_interval: transport.http2_keepalive_interval,
        http2_keepalive_timeout: transport.http2_keepalive_timeout,
        max_connection_age: transport.max_connection_age,
        max_connection_age_grace: transport.max_connection_age_grace,
    }
}

pub(super) fn admission_settings_from(
    transport: &TransportArgs,
    bounds: &BoundsArgs,
) -> Result<AdmissionSettings, String> {
    if transport.request_timeout < bounds.max_wait.saturating_add(REQUEST_TIMEOUT_HEADROOM) {
        return Err(format!(
            "--request-timeout ({:?}) must be at least --max-wait ({:?}) plus {:?}",
            transport.request_timeout, bounds.max_wait, REQUEST_TIMEOUT_HEADROOM
        ));
    }
    Ok(AdmissionSettings {
        request_timeout: transport.request_timeout,
        max_in_flight: transport.max_in_flight.max(1),
        max_in_flight_per_tenant: transport.max_in_flight_per_tenant.max(1),
        max_request_bytes_in_flight: transport.max_request_bytes_in_flight.max(1),
    })
}

pub(super) fn limits_from(bounds: &BoundsArgs) -> Result<Limits, String> {
    let limits = Limits {
        min_lease: delta(bounds.min_lease)?,
        max_lease: delta(bounds.max_lease)?,
        default_lease: delta(bounds.default_lease)?,
        default_max_attempt_duration: delta(bounds.default_attempt_duration)?,
        max_attempt_duration: delta(bounds.max_attempt_duration)?,
        default_max_attempts: bounds.default_max_attempts,
        default_retention: delta(bounds.default_retention)?,
        max_retention: delta(bounds.max_retention)?,
        max_retry_after: delta(bounds.max_retry_after)?,
        max_result_bytes: bounds.max_result_bytes,
        max_payload_bytes: bounds.max_payload_bytes,
        max_wait: delta(bounds.max_wait)?,
        clock_margin: delta(bounds.clock_margin)?,
        ..Limits::default()
    };
    if !(limits.min_lease <= limits.default_lease && limits.default_lease <= limits.max_lease) {
        return Err("leases need min <= default <= max".into());
    }
    if limits.default_max_attempts == 0 || limits.default_max_attempts > limits.max_attempts {
        return Err(format!(
            "default max attempts must be 1-{}",
            limits.max_attempts
        ));
    }
    if limits.default_retention > limits.max_retention {
        return Err("default retention exceeds the maximum".into());
    }
    Ok(limits)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::config::{Cli, Command};

    #[test]
    fn serve_defaults_parse_into_valid_limits() {
        let cli = Cli::try_parse_from(["idemd", "serve"]).expect("defaults parse");
        let Command::Serve(args) = cli.command else {
            panic!("serve expected");
        };
        assert_eq!(limits_from(&args.bounds).expect("valid"), Limits::default());
        assert_eq!(
            args.result_cache_bytes,
            crate::service::cache::DEFAULT_BUDGET_BYTES,
            "servers and in-process applications cache alike"
        );
    }

    #[test]
    fn transport_defaults_are_the_built_in_ones() {
        let cli = Cli::try_parse_from(["idemd", "serve"]).expect("defaults parse");
        let Command::Serve(args) = cli.command else {
            panic!("serve expected");
        };
        assert_eq!(
            server_settings_from(&args.transport),
            ServerSettings::default()
        );
        assert_eq!(
            admission_settings_from(&args.transport, &args.bounds).expect("valid"),
            AdmissionSettings::default()
        );
        assert_eq!(auth_settings_from(&args), AuthSettings::default());
        assert_eq!(
            connection_settings_from(&args.transport).expect("valid"),
            ConnectionSettings::default()
        );
        assert_eq!(waiter_limits_from(&args.transport), WaiterLimits::default());
    }

    #[test]
    fn the_request_timeout_must_outlast_the_longest_wait() {
        let cli = Cli::try_parse_from([
            "idemd",
            "serve",
            "--max-wait",
            "30s",
            "--request-timeout",
            "30s",
        ])
        .expect("parses");
        let Command::Serve(args) = cli.command else {
            panic!("serve expected");
        };
        assert!(admission_settings_from(&args.transport, &args.bounds).is_err());
    }

    #[test]
    fn the_payload_bound_is_configurable() {
        let cli =
            Cli::try_parse_from(["idemd", "serve", "--max-payload-bytes", "1024"]).expect("parses");
        let Command::Serve(args) = cli.command else {
            panic!("serve expected");
        };
        assert_eq!(
            limits_from(&args.bounds).expect("valid").max_payload_bytes,
            1024
        );
    }
}
