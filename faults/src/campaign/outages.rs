//! The unavailability a client sees while the database fails over: a probe
//! that writes (a Claim of a fresh key, then its Complete) every
//! [`PROBE_EVERY`] straight to a replica, past the faulty proxies and
//! without retries, and records each outage: from the start of the first
//! write that failed to the end of the next one that succeeded.

use std::time::Duration;

use idemd_client::proto::{self, claim_response::Outcome};
use idemd_client::retry::RetryPolicy;
use idemd_client::{Client, ClientConfig};
use tokio::sync::watch;
use tokio::time::{Instant, sleep};

const PROBE_EVERY: Duration = Duration::from_millis(50);

/// Probes `address` until `stop`; the outages it saw.
pub(super) async fn probe(
    address: String,
    token: String,
    mut stop: watch::Receiver<bool>,
) -> Vec<Duration> {
    let mut outages = Vec::new();
    let Ok(client) = Client::connect(&address, &token).await else {
        return outages;
    };
    let client = client.with_config(ClientConfig {
        retry: RetryPolicy::none(),
        call_timeout: Duration::from_secs(2),
    });
    let mut failing_since: Option<Instant> = None;
    // One key at a time, re-sent with its claim_token until claimed and
    // completed: a Claim that committed but whose answer was lost in the
    // failover is resumed, never left for the campaign's reconciler.
    let mut number = 0u64;
    let mut owned: Option<proto::Ownership> = None;
    loop {
        tokio::select! {
            _ = stop.wait_for(|stop| *stop) => break,
            () = sleep(PROBE_EVERY) => {}
        }
        let started = Instant::now();
        if write(&client, number, &mut owned).await {
            number += 1;
            if let Some(since) = failing_since.take() {
                outages.push(since.elapsed());
            }
        } else {
            failing_since.get_or_insert(started);
        }
    }
    let give_up = Instant::now() + Duration::from_secs(60);
    while failing_since.is_some() && Instant::now() < give_up {
        if write(&client, number, &mut owned).await {
            failing_since = None;
        }
        sleep(PROBE_EVERY).await;
    }
    outages
}

/// Claims key `number` (unless `owned` already) and completes it; whether
/// it is done.
async fn write(client: &Client, number: u64, owned: &mut Option<proto::Ownership>) -> bool {
    let key = format!("probe-{number}-{}", std::process::id());
    if owned.is_none() {
        // prost's Duration, named through the request (the client
        // re-exports no prost types).
        let mut lease = proto::ClaimRequest::default().lease.unwrap_or_default();
        lease.seconds = 300;
        let claimed = client
            .claim(proto::ClaimRequest {
                scope: Some(proto::Scope {
                    operation: "faults.probe".into(),
                    key: key.clone(),
                }),
                request_identity: Some(proto::claim_request::RequestIdentity::JsonPayload(
                    "{}".into(),
                )),
                claim_token: key.into_bytes(),
                lease: Some(lease),
                ..Default::default()
            })
            .await;
        match claimed.map(|response| response.outcome) {
            Ok(Some(Outcome::Acquired(acquired))) => *owned = acquired.ownership,
            // Completed by an earlier send whose answer was lost.
            Ok(Some(Outcome::Completed(_))) => return true,
            _ => return false,
        }
    }
    let Some(ownership) = owned.as_ref() else {
        return false;
    };
    let completed = client
        .complete(proto::CompleteRequest {
            operation_id: ownership.operation_id.clone(),
            fence: ownership.fence,
            result: Some(proto::Result {
                body: b"{}".to_vec(),
                content_type: "application/json".into(),
                ..Default::default()
            }),
        })
        .await
        .is_ok();
    if completed {
        *owned = None;
    }
    completed
}

/// The `quantile` (0..=1) of `outages`, nearest rank; zero when none.
pub(super) fn quantile(outages: &[Duration], quantile: f64) -> Duration {
    let mut sorted = outages.to_vec();
    sorted.sort();
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((quantile * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}
