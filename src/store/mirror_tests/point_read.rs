//! The embedded store's point read (`Dialect::read_alone`,
//! sqlite/point_reads.rs: rusqlite, and its own decoding of the row) against
//! the read every other path runs (sqlx's reader pool, sqlx's decoding of
//! [`OperationRow`]): for records of every shape, by scope and by id, the
//! two read the same record, and neither reads another tenant's.
//!
//! [`OperationRow`]: crate::store::row::OperationRow

use chrono::TimeDelta;
use proptest::prelude::*;

use super::{CASES, Fixture, TempSqlite, any_state, claim_command, failed, for_random, millis};
use super::{offset, shape};
use crate::domain::{HistoryCap, Scope, Target, TenantId};
use crate::store::dialect::Dialect as _;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_point_read_is_the_pooled_read() {
    let sqlite = TempSqlite::open().await;
    let store = sqlite.store.clone();
    let fixture = Fixture::new(&sqlite.backend(), HistoryCap::default()).await;
    let inputs = (
        shape(any_state()),
        proptest::option::of(offset()),
        proptest::collection::vec(any::<u8>(), 0..24),
        "[a-zA-Z0-9 _é€-]{1,24}",
    );
    for_random(
        CASES * 2,
        inputs,
        move |(shape, operation_deadline, claim_token, key)| {
            let (store, fixture) = (store.clone(), fixture.clone());
            Box::pin(async move {
                let mut command = claim_command(millis(60_000), millis(60_000), 3);
                command.scope.key = format!("{key}-{}", uuid::Uuid::new_v4());
                command.operation_deadline = operation_deadline.map(millis);
                command.claim_token = claim_token;
                let claimed = fixture.claim(&command).await?;
                let record = fixture.set(shape.on(&claimed, claimed.created_at)).await?;
                let targets = [
                    Target::Scope(command.scope.clone()),
                    Target::Id(claimed.operation_id),
                ];
                for target in &targets {
                    let point = store.read_alone(fixture.tenant, target).await;
                    let (point, point_now) =
                        point.map_err(failed)?.ok_or_else(|| failed("no record"))?;
                    let pooled = store.pooled_read(fixture.tenant, target).await;
                    let (pooled, pooled_now) =
                        pooled.map_err(failed)?.ok_or_else(|| failed("no record"))?;
                    prop_assert_eq!(&point, &pooled);
                    prop_assert_eq!(&point, &record);
                    let apart = (point_now - pooled_now).abs();
                    prop_assert!(apart < TimeDelta::seconds(5), "clocks {apart} apart");
                    let stranger = TenantId(fixture.tenant.0 + 1_000_000);
                    let foreign = store.read_alone(stranger, target).await.map_err(failed)?;
                    prop_assert!(foreign.is_none(), "read another tenant's record");
                }
                let unused = Target::Scope(Scope {
                    operation: command.scope.operation.clone(),
                    key: format!("{}-unused", command.scope.key),
                });
                let nothing = store
                    .read_alone(fixture.tenant, &unused)
                    .await
                    .map_err(failed)?;
                prop_assert!(nothing.is_none(), "read a record of a scope nobody claimed");
                Ok(())
            })
        },
    )
    .await;
    sqlite.close().await;
}
