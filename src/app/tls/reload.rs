//! Reloading the TLS files when they change: cert-manager and SPIRE rotate
//! certificates (and CA bundles) in place, and a restart to pick them up
//! would drop every connection. The files are read every interval and
//! compared with what was last tried; a changed set that makes a valid
//! configuration replaces the one in force for new connections (those
//! already open keep theirs, and finish their calls); one that does not is
//! logged and counted, and the one in force stays. A set that changed
//! halfway (the certificate written, not yet its key) fails, and is tried
//! again as soon as the rest of it lands.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{error, info};

use super::{Contents, ServerTls, TlsFiles};
use crate::metrics::Metrics;

/// Reads the files every `interval` until `stop`, starting from `contents`
/// (what start-up loaded).
pub(in crate::app) async fn reload_every(
    tls: ServerTls,
    files: TlsFiles,
    mut tried: Contents,
    interval: Duration,
    metrics: Metrics,
    stop: CancellationToken,
) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    // The last reason the files could not be read, logged once until it
    // changes: a file missing for a minute is one error, not twelve.
    let mut unreadable: Option<String> = None;
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            () = stop.cancelled() => return,
        }
        let contents = match files.read() {
            Ok(contents) => contents,
            Err(reason) => {
                if unreadable.as_ref() != Some(&reason) {
                    error!(
                        listener = files.listener,
                        error = %reason,
                        "tls files unreadable: the ones in force stay"
                    );
                    metrics.tls_reload_failed();
                    unreadable = Some(reason);
                }
                continue;
            }
        };
        unreadable = None;
        if contents == tried {
            continue;
        }
        match files.build(&contents) {
            Ok(loaded) => {
                info!(
                    listener = files.listener,
                    certificate_sha256 = %loaded.fingerprint,
                    "tls files reloaded: new connections use them"
                );
                tls.replace(loaded);
            }
            Err(reason) => {
                error!(
                    listener = files.listener,
                    error = %reason,
                    "tls files changed but cannot be used: the ones in force stay"
                );
                metrics.tls_reload_failed();
            }
        }
        tried = contents;
    }
}
