//! One tenant on a fresh store and the service over it, with the calls the
//! gRPC handlers would make: what every part of the conformance suite stands on.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use idemd::domain::*;
use idemd::service::{IdempotencyService, WriteReply};
use idemd::store::{Applied, Store};

use crate::harness::*;

/// One tenant on a fresh store, the service over it, and the calls the gRPC
/// handlers would make.
pub(super) struct Fixture {
    pub(super) backend: Backend,
    pub(super) store: Arc<dyn Store>,
    service: ServiceUnderTest,
    pub(super) tenant: TenantId,
}

/// What a Renew, Complete, Fail or Reconcile answered, with the record as it
/// then stands.
pub(super) struct Written {
    pub(super) answer: Result<Answer>,
    pub(super) record: OperationRecord,
    /// The database clock of the write, or of the read after a refusal.
    pub(super) now: DateTime<Utc>,
    pub(super) record_changed: bool,
}

impl Fixture {
    pub(super) async fn new(backend: Backend) -> Self {
        let store = backend.store();
        let tenant = tenant(store.as_ref(), "conformance").await;
        Self {
            backend,
            service: ServiceUnderTest::over(store.clone()),
            store,
            tenant,
        }
    }

    pub(super) fn service(&self) -> &IdempotencyService {
        &self.service.service
    }

    /// A Claim as the handler makes it, without `wait`.
    pub(super) async fn claim(
        &self,
        command: &ClaimCommand,
    ) -> (Result<ClaimAnswer>, OperationRecord) {
        self.claim_as(self.tenant, command).await
    }

    pub(super) async fn claim_as(
        &self,
        tenant: TenantId,
        command: &ClaimCommand,
    ) -> (Result<ClaimAnswer>, OperationRecord) {
        claim_through(self.service(), tenant, command).await
    }

    /// A raw store transition with a decision the test writes: what a store
    /// keeps of values no decision of the service would produce.
    pub(super) async fn transition(
        &self,
        operation_id: OperationId,
        decide: impl Fn(&OperationRecord, DateTime<Utc>) -> Decision + Send + Sync,
    ) -> Applied {
        self.store
            .transition(self.tenant, &Target::Id(operation_id), &decide)
            .await
            .expect("the store answers")
            .expect("the operation exists")
    }

    pub(super) async fn renew(&self, owner: &OperationRecord, lease: Option<TimeDelta>) -> Written {
        let command = RenewCommand {
            operation_id: owner.operation_id,
            fence: owner.fence,
            lease,
        };
        self.written(owner.operation_id, async {
            self.service().renew(self.tenant, &command).await
        })
        .await
    }

    pub(super) async fn complete(&self, owner: &OperationRecord, result: SuccessResult) -> Written {
        let command = CompleteCommand {
            operation_id: owner.operation_id,
            fence: owner.fence,
            result,
        };
        self.written(owner.operation_id, async {
            self.service().complete(self.tenant, &command).await
        })
        .await
    }

    pub(super) async fn fail(
        &self,
        owner: &OperationRecord,
        disposition: FailDisposition,
        retry_after: TimeDelta,
    ) -> Written {
        self.fail_with(&FailCommand {
            operation_id: owner.operation_id,
            fence: owner.fence,
            disposition,
            error: ErrorReport {
                code: "upstream_503".into(),
                message: "the provider said no".into(),
                metadata: Metadata::from([("region".into(), "eu".into())]),
            },
            retry_after,
            clock_margin: TimeDelta::zero(),
        })
        .await
    }

    pub(super) async fn fail_with(&self, command: &FailCommand) -> Written {
        self.written(command.operation_id, async {
            self.service().fail(self.tenant, command).await
        })
        .await
    }

    pub(super) async fn reconcile(
        &self,
        record: &OperationRecord,
        resolution: Resolution,
    ) -> Written {
        let command = ReconcileCommand {
            operation_id: record.operation_id,
            expected_fence: record.fence,
            resolution,
            clock_margin: TimeDelta::zero(),
        };
        self.written(record.operation_id, async {
            let acted_by = ActedBy {
                credential: "token:reconciler".into(),
                admin_on_behalf: false,
            };
            self.service()
                .reconcile(self.tenant, &command, &acted_by)
                .await
        })
        .await
    }

    /// Runs one write through the service. The service answers a refusal
    /// with the error alone, so the record is read before and after it: a
    /// refusal that changed the record shows as `record_changed`.
    async fn written(
        &self,
        operation_id: OperationId,
        write: impl Future<Output = Result<WriteReply>>,
    ) -> Written {
        let target = Target::Id(operation_id);
        let before = self.lookup_as(self.tenant, &target, false).await;
        match write.await {
            Ok(reply) => Written {
                answer: Ok(Answer::Written),
                record: reply.record,
                now: reply.now,
                record_changed: reply.changed,
            },
            Err(error) => {
                let after = self
                    .lookup_as(self.tenant, &target, false)
                    .await
                    .expect("a refused write leaves its operation");
                Written {
                    answer: Err(error),
                    record_changed: before.map(|found| found.record) != Some(after.record.clone()),
                    record: after.record,
                    now: after.now,
                }
            }
        }
    }

    /// A Lookup as the handler makes it; `None` for NOT_FOUND.
    pub(super) async fn lookup_as(
        &self,
        tenant: TenantId,
        target: &Target,
        include_history: bool,
    ) -> Option<Found> {
        lookup_through(self.service(), tenant, target, include_history).await
    }

    pub(super) async fn find(
        &self,
        operation_id: OperationId,
    ) -> Option<(OperationRecord, Vec<HistoryEntry>)> {
        self.lookup_as(self.tenant, &Target::Id(operation_id), true)
            .await
            .map(|found| (found.record, found.history))
    }

    pub(super) async fn history(&self, operation_id: OperationId) -> Vec<HistoryEntry> {
        self.find(operation_id).await.expect("exists").1
    }

    pub(super) async fn events(&self, operation_id: OperationId) -> Vec<String> {
        event_names(&self.history(operation_id).await)
    }

    /// A ListUnresolved page as the handler asks for it.
    pub(super) async fn list_unresolved_as(
        &self,
        tenant: TenantId,
        query: &UnresolvedQuery,
    ) -> UnresolvedPage {
        self.service()
            .list_unresolved(tenant, query)
            .await
            .expect("the service answers")
    }
}

pub(super) async fn tenant(store: &dyn Store, name: &str) -> TenantId {
    let token = create_tenant(store, name).await;
    store
        .authenticate(&idemd::auth::token_sha256(&token))
        .await
        .expect("auth")
        .expect("an active tenant")
        .tenant
}

/// A Claim through the service. A refused Claim is answered with the error
/// alone, so the record it left is looked up by scope.
pub(super) async fn claim_through(
    service: &IdempotencyService,
    tenant: TenantId,
    command: &ClaimCommand,
) -> (Result<ClaimAnswer>, OperationRecord) {
    match service.claim(tenant, command, Duration::ZERO).await {
        Ok(reply) => (
            Ok(reply.answer),
            reply
                .record
                .expect("nothing is held in the conformance suite"),
        ),
        Err(error) => {
            let target = Target::Scope(command.scope.clone());
            let found = lookup_through(service, tenant, &target, false)
                .await
                .expect("a refused claim leaves its record");
            (Err(error), found.record)
        }
    }
}

async fn lookup_through(
    service: &IdempotencyService,
    tenant: TenantId,
    target: &Target,
    include_history: bool,
) -> Option<Found> {
    // The whole history: more than any test writes.
    let history = include_history.then_some(HistoryPage {
        after: 0,
        limit: 10_000,
        of: None,
    });
    match service.lookup(tenant, target, history).await {
        Ok(found) => Some(found),
        Err(Error::NotFound) => None,
        Err(error) => panic!("the service answers a lookup: {error:?}"),
    }
}

pub(super) fn event_names(history: &[HistoryEntry]) -> Vec<String> {
    history.iter().map(|entry| entry.event.clone()).collect()
}

pub(super) fn command(key: &str, lease_ms: i64) -> ClaimCommand {
    ClaimCommand {
        lease: TimeDelta::milliseconds(lease_ms),
        ..claim_command(key)
    }
}

pub(super) fn success(body: &str) -> SuccessResult {
    SuccessResult {
        body: body.as_bytes().to_vec(),
        content_type: "application/json".into(),
        metadata: Metadata::from([("provider".into(), "test".into())]),
    }
}

/// This host's clock: the tests that check a store answers with the database's
/// clock compare the two (they agree within seconds on a test machine).
#[expect(
    clippy::disallowed_methods,
    reason = "compares the database's clock with this host's"
)]
pub(super) fn host_clock() -> DateTime<Utc> {
    Utc::now()
}

pub(super) async fn sleep_ms(millis: u64) {
    tokio::time::sleep(Duration::from_millis(millis)).await;
}

pub(super) fn acquired(claimed: (Result<ClaimAnswer>, OperationRecord)) -> OperationRecord {
    assert_eq!(claimed.0, Ok(ClaimAnswer::Acquired), "{:?}", claimed.1);
    claimed.1
}

/// The record a transition returned, as it reads back: timestamps at the
/// stores' precision (microseconds), lease lengths in milliseconds.
pub(super) fn second_as_stored(record: &OperationRecord) -> OperationRecord {
    use chrono::SubsecRound;
    let micros = |moment: Option<DateTime<Utc>>| moment.map(|moment| moment.trunc_subsecs(6));
    OperationRecord {
        lease_expires_at: micros(record.lease_expires_at),
        attempt_deadline_at: micros(record.attempt_deadline_at),
        retry_at: micros(record.retry_at),
        operation_deadline_at: micros(record.operation_deadline_at),
        completed_at: micros(record.completed_at),
        retain_until: micros(record.retain_until),
        updated_at: record.updated_at.trunc_subsecs(6),
        created_at: record.created_at.trunc_subsecs(6),
        lease_duration: TimeDelta::milliseconds(record.lease_duration.num_milliseconds()),
        ..record.clone()
    }
}
