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
    // Claimed, not yet completed: completed later, so that no probe is left
    // for the campaign's reconciler to find.
    let mut unfinished = Vec::new();
    for number in 0u64.. {
        tokio::select! {
            _ = stop.wait_for(|stop| *stop) => break,
            () = sleep(PROBE_EVERY) => {}
        }
        let started = Instant::now();
        if write(&client, number, &mut unfinished).await {
            if let Some(since) = failing_since.take() {
                outages.push(since.elapsed());
            }
            finish(&client, &mut unfinished).await;
        } else {
            failing_since.get_or_insert(started);
        }
    }
    let give_up = Instant::now() + Duration::from_secs(60);
    while !unfinished.is_empty() && Instant::now() < give_up {
        finish(&client, &mut unfinished).await;
        sleep(PROBE_EVERY).await;
    }
    outages
}

/// Completes what earlier probes claimed but could not complete.
async fn finish(client: &Client, unfinished: &mut Vec<proto::Ownership>) {
    let mut left = Vec::new();
    for ownership in unfinished.drain(..) {
        if !complete(client, &ownership).await {
            left.push(ownership);
        }
    }
    *unfinished = left;
}

async fn complete(client: &Client, ownership: &proto::Ownership) -> bool {
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
        .await;
    completed.is_ok()
}

async fn write(client: &Client, number: u64, unfinished: &mut Vec<proto::Ownership>) -> bool {
    // prost's Duration, named through the request (the client re-exports
    // no prost types).
    let mut lease = proto::ClaimRequest::default().lease.unwrap_or_default();
    lease.seconds = 300;
    let claimed = client
        .claim(proto::ClaimRequest {
            scope: Some(proto::Scope {
                operation: "faults.probe".into(),
                key: format!("probe-{number}-{}", std::process::id()),
            }),
            request_identity: Some(proto::claim_request::RequestIdentity::JsonPayload(
                "{}".into(),
            )),
            // Outlives any outage: completed late, never taken over.
            lease: Some(lease),
            ..Default::default()
        })
        .await;
    let ownership = match claimed.map(|response| response.outcome) {
        Ok(Some(Outcome::Acquired(acquired))) => acquired.ownership,
        _ => None,
    };
    let Some(ownership) = ownership else {
        return false;
    };
    if complete(client, &ownership).await {
        return true;
    }
    unfinished.push(ownership);
    false
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
