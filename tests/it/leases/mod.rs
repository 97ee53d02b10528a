//! Lease expiry, takeovers, stale owners, the attempt budget and reconciliation.
//!
//! `owners`: what each owner may still write once its lease ran out, the
//! budget and the releases; `earlier_attempt`: what a new owner is told of
//! the attempt it took over, and how long a reconciler must wait for it.

use std::time::Duration;

use idemd::proto;

use crate::harness::*;

mod earlier_attempt;
mod owners;

const LEASE_MS: u64 = 150;

fn short_lease_claim(key: &str, max_attempts: u32) -> proto::ClaimRequest {
    proto::ClaimRequest {
        lease: millis(LEASE_MS),
        max_attempts,
        ..claim_json("payments.charge", key, r#"{"amount":5}"#)
    }
}

async fn sleep_past_lease() {
    tokio::time::sleep(Duration::from_millis(LEASE_MS + 100)).await;
}
