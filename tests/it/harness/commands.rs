//! The domain's own inputs as a test writes them (a first Claim, a sweep
//! policy, the limits), and a state change made straight on a store.

use chrono::TimeDelta;
use idemd::domain::Limits;
use idemd::store::Store;

/// Claims `key` and completes it directly on `store` (no gRPC): a state
/// change, for the tests that watch what a store announces.
pub async fn claim_and_complete(
    store: &impl Store,
    tenant: idemd::domain::TenantId,
    key: &str,
) -> idemd::domain::OperationRecord {
    use idemd::domain::{CompleteCommand, OperationId, OperationRecord, SuccessResult, Target};
    use idemd::service::DrawOperationId as _;
    let record = store
        .insert_new(tenant, OperationId::generate(), &claim_command(key))
        .await
        .expect("insert")
        .expect("new");
    let complete = CompleteCommand {
        operation_id: record.operation_id,
        fence: record.fence,
        result: SuccessResult::default(),
    };
    let decide = |record: &OperationRecord, now| {
        idemd::domain::transition::decide_complete(record, &complete, now)
    };
    store
        .transition(tenant, &Target::Id(record.operation_id), &decide)
        .await
        .expect("complete")
        .expect("row");
    record
}

/// A first Claim of `key` as the domain sees it (the service's and the
/// stores' own input): a JSON-free byte fingerprint of the key, a 30 s lease
/// within a 60 s attempt, five attempts, an hour's retention. Tests change
/// what they need with `..claim_command(key)`.
pub fn claim_command(key: &str) -> idemd::domain::ClaimCommand {
    idemd::domain::ClaimCommand {
        scope: idemd::domain::Scope {
            operation: "payments.charge".into(),
            key: key.into(),
        },
        fingerprint: idemd::domain::fingerprint::of_bytes(key.as_bytes()),
        claim_token: Vec::new(),
        lease: TimeDelta::seconds(30),
        max_attempt_duration: TimeDelta::seconds(60),
        max_attempts: 5,
        retention: TimeDelta::hours(1),
        operation_deadline: None,
        on_failed: idemd::domain::OnFailed::Replay,
        clock_margin: TimeDelta::zero(),
        previous_fingerprints: Vec::new(),
        held: None,
    }
}

/// Short leases so expiry tests need no long sleeps.
/// Retention with tombstones kept for `tombstone_retention` and no clock
/// margin (as [`test_limits`]).
pub fn sweep_policy(tombstone_retention: TimeDelta) -> idemd::domain::SweepPolicy {
    idemd::domain::SweepPolicy {
        tombstone_retention,
        clock_margin: TimeDelta::zero(),
    }
}

/// No clock margin: the tests that wait for an attempt deadline wait for it
/// alone; the margin's own tests set one.
pub fn test_limits() -> Limits {
    Limits {
        min_lease: TimeDelta::milliseconds(10),
        clock_margin: TimeDelta::zero(),
        ..Limits::default()
    }
}
