//! The first Claim of a scope: Postgres's INSERT_OR_FIND
//! (postgres/sql/insert_or_find.sql) and SQLite's insert_first_claim
//! (sqlite/sql/insert_first_claim.sql) against [`decide_first_claim`].

use proptest::prelude::*;
use sqlx::PgPool;

use super::{Backend, CASES, Fixture, TempSqlite, claim_command, failed, for_random, millis};
use crate::domain::{HistoryCap, OnFailed, OperationId, decide_first_claim};
use crate::store::ClaimStart;
use crate::store::postgres::{MIGRATOR, PostgresStore};

#[derive(Debug, Clone)]
struct FirstClaimInput {
    lease_ms: i64,
    attempt_ms: i64,
    max_attempts: u32,
    retention_ms: i64,
    operation_deadline_ms: Option<i64>,
    claim_token: Vec<u8>,
    fingerprint: [u8; 32],
    failed_gets_new_attempt: bool,
}

/// Lengths in whole seconds meet often (a lease as long as its attempt),
/// other lengths anywhere within ten minutes.
fn length() -> impl Strategy<Value = i64> {
    prop_oneof![(1i64..4).prop_map(|seconds| seconds * 1_000), 1i64..600_000]
}

prop_compose! {
    fn inputs()(
        lease_ms in length(),
        attempt_ms in length(),
        max_attempts in 1u32..20,
        retention_ms in 1i64..100_000_000,
        operation_deadline_ms in proptest::option::of(-60_000i64..6_000_000),
        claim_token in proptest::collection::vec(any::<u8>(), 0..24),
        fingerprint in any::<[u8; 32]>(),
        failed_gets_new_attempt in any::<bool>(),
    ) -> FirstClaimInput {
        FirstClaimInput {
            lease_ms,
            attempt_ms,
            max_attempts,
            retention_ms,
            operation_deadline_ms,
            claim_token,
            fingerprint,
            failed_gets_new_attempt,
        }
    }
}

/// The record and CLAIMED entry each store inserts are what
/// [`decide_first_claim`] says at the insert's clock, with the fence drawn;
/// a second Claim of the scope reads that record and inserts nothing.
async fn first_claims_are_decide_first_claim(backend: Backend) {
    let fixture = Fixture::new(&backend, HistoryCap::default()).await;
    for_random(CASES, inputs(), move |input| {
        let fixture = fixture.clone();
        Box::pin(async move {
            let mut command = claim_command(
                millis(input.lease_ms),
                millis(input.attempt_ms),
                input.max_attempts,
            );
            command.retention = millis(input.retention_ms);
            command.operation_deadline = input.operation_deadline_ms.map(millis);
            command.claim_token = input.claim_token;
            command.fingerprint = crate::domain::Fingerprint(input.fingerprint);
            command.on_failed = OnFailed::from_stored(input.failed_gets_new_attempt);
            let operation_id = OperationId::generate();
            let started = fixture
                .store
                .insert_or_find(fixture.tenant, operation_id, &command)
                .await
                .map_err(failed)?;
            let Some(ClaimStart::Inserted(record)) = started else {
                return Err(failed(format!("not inserted: {started:?}")));
            };
            let first = decide_first_claim(&command);
            let now = record.created_at;
            let spec = first.record(operation_id, fixture.tenant, &command, record.fence, now);
            prop_assert_eq!(&record, &spec);
            let history = fixture.history(operation_id).await?;
            let claimed = first.history_with_fence(record.fence);
            let event = claimed.event.as_str();
            let spec = super::stored(&claimed, 1, event, &claimed.detail, now);
            prop_assert_eq!(history, vec![spec]);

            let again = fixture
                .store
                .insert_or_find(fixture.tenant, OperationId::generate(), &command)
                .await
                .map_err(failed)?;
            match again {
                Some(ClaimStart::Existing(found)) => prop_assert_eq!(found.record, record),
                other => return Err(failed(format!("a second claim found {other:?}"))),
            }
            Ok(())
        })
    })
    .await;
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn postgres_insert_or_find_is_decide_first_claim(pool: PgPool) {
    first_claims_are_decide_first_claim(Backend::Postgres(PostgresStore::from_pool(pool))).await;
}

#[tokio::test]
async fn sqlite_insert_first_claim_is_decide_first_claim() {
    let sqlite = TempSqlite::open().await;
    first_claims_are_decide_first_claim(sqlite.backend()).await;
    sqlite.close().await;
}
