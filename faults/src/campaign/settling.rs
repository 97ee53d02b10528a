//! After the faults: the reconciler drains what is unresolved with the
//! provider's evidence, and the callers come back, round after round.

use std::sync::Arc;
use std::time::Duration;

use idemd_client::proto::{self, reconcile_request::Resolution};
use idemd_client::{Error, OperationState};
use tokio::time::{Instant, sleep};

use super::stats::add;
use super::world::{Intent, World, result};
use crate::lock::locked;
use crate::rng::Rng;

/// Rounds of reconciling and delivering again after the faults stop.
const SETTLING_ROUNDS: u64 = 3;

/// The reconciler drains what is unresolved, then every caller comes back
/// once; as a reconciler that keeps running would, it drains again what
/// those deliveries left unresolved, and their callers come back, for at
/// most [`SETTLING_ROUNDS`].
pub(super) async fn settle_rounds(
    world: &Arc<World>,
    intents: &[Arc<Intent>],
    rng: &mut Rng,
) -> Result<Settling, String> {
    let reconciler_started = Instant::now();
    let mut unresolved = None;
    let mut unsettled = intents.to_vec();
    let mut rounds = 0u64;
    let mut settled_in_later_rounds = 0u64;
    while !unsettled.is_empty() && rounds < SETTLING_ROUNDS {
        rounds += 1;
        let left = world
            .reconcile_all()
            .await
            .map_err(|error| format!("the reconciler failed: {error:?}"))?
            as u64;
        unresolved.get_or_insert(left);
        let before = unsettled.len() as u64;
        unsettled = world.settle(&unsettled, rng).await;
        if rounds > 1 {
            settled_in_later_rounds += before - unsettled.len() as u64;
        }
    }
    let unresolved = unresolved.unwrap_or(0);
    let reconciliation = reconciler_started.elapsed();
    Ok(Settling {
        unresolved,
        rounds,
        settled_in_later_rounds,
        took: reconciliation,
    })
}

/// What the settling rounds did.
pub(super) struct Settling {
    /// ListUnresolved once the reconciler had drained it the first time.
    pub(super) unresolved: u64,
    pub(super) rounds: u64,
    pub(super) settled_in_later_rounds: u64,
    /// How long reconciling and settling took.
    pub(super) took: Duration,
}

// The reconciler's calls and the callers' coming back.
impl World {
    pub(super) async fn list_unresolved(&self) -> Result<Vec<proto::Operation>, Error> {
        let client = &self.clients[0];
        let mut operations = Vec::new();
        let mut page_token = String::new();
        loop {
            let page = client
                .list_unresolved(proto::ListUnresolvedRequest {
                    operation: String::new(),
                    page_size: 500,
                    page_token,
                })
                .await?;
            operations.extend(page.operations);
            if page.next_page_token.is_empty() {
                return Ok(operations);
            }
            page_token = page.next_page_token;
        }
    }

    /// The reconciler: drains ListUnresolved with the provider's evidence
    /// (the effect found: succeeded with its result; not found: not applied,
    /// which the server allows only once the attempt deadline has passed).
    async fn reconcile_all(&self) -> Result<usize, Error> {
        // Every dead owner's lease has run out by then.
        sleep(self.settings.lease + Duration::from_millis(300)).await;
        let give_up = Instant::now() + self.settings.attempt_duration * 4 + Duration::from_secs(10);
        loop {
            let unresolved = self.list_unresolved().await?;
            if unresolved.is_empty() || Instant::now() > give_up {
                return Ok(unresolved.len());
            }
            for operation in unresolved {
                let resolution = match self.provider.lookup(&operation.operation_id) {
                    Some(body) => Resolution::Succeeded(result(body)),
                    None => Resolution::NotApplied(proto::NotApplied {}),
                };
                let not_applied = matches!(resolution, Resolution::NotApplied(_));
                let reconciled = self.clients[0]
                    .reconcile(proto::ReconcileRequest {
                        operation_id: operation.operation_id.clone(),
                        expected_fence: operation.fence,
                        resolution: Some(resolution),
                        tenant: String::new(),
                    })
                    .await;
                match reconciled {
                    Ok(_) if not_applied => add(&self.stats.reconciler_not_applied),
                    Ok(_) => add(&self.stats.reconciler_succeeded),
                    // Still running, or moved on meanwhile: the next round.
                    Err(Error::FailedPrecondition { .. } | Error::LeaseLost { .. }) => {}
                    Err(error) => return Err(error),
                }
            }
            sleep(Duration::from_millis(300)).await;
        }
    }

    /// After the reconciler: each intent delivered once more (a caller that
    /// comes back). Returns those still not SUCCEEDED.
    async fn settle(self: &Arc<Self>, intents: &[Arc<Intent>], rng: &mut Rng) -> Vec<Arc<Intent>> {
        let answers = self
            .each_intent(intents, rng, |world, intent, mut rng| async move {
                world.deliver_until_settled(&intent, &mut rng).await;
                let operation_id = locked(&intent.operation_id).clone();
                let settled = match operation_id {
                    Some(operation_id) => world.clients[0]
                        .lookup_operation(&operation_id)
                        .await
                        .is_ok_and(|stored| stored.state == OperationState::Succeeded as i32),
                    None => false,
                };
                (!settled).then_some(intent)
            })
            .await;
        answers.into_iter().flatten().collect()
    }
}
