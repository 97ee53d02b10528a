//! The checks at the end: every intent's stored record against what was
//! acknowledged and against the provider, nothing left unresolved, no
//! statement failed once the faults were off; and the verdicts the run
//! passes or fails on.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use idemd_client::{OperationState, proto};

use super::settling::Settling;
use super::setup::blocking;
use super::stats::get;
use super::world::{Intent, World};
use crate::database;
use crate::lock::locked;
use crate::process::Postgres;
use crate::rng::Rng;

/// How many times the end-of-run checks send one Lookup before counting the
/// operation's acknowledged results as lost.
const LOOKUP_TRIES: u32 = 5;

/// What the stored records showed.
pub(super) struct Verified {
    /// Intents whose record is SUCCEEDED with the provider's first effect.
    pub(super) settled: u64,
    /// Acknowledged results that differ from the stored one.
    pub(super) lost: u64,
    /// History entries of Fail NOT_STARTED.
    pub(super) declined: u64,
    pub(super) unresolved_at_the_end: u64,
}

/// A statement that the trigger failed after the faults were switched off
/// (`failed_statements` was read then) is a violation.
pub(super) async fn no_statement_failed_since(
    world: &World,
    postgres: &Arc<Postgres>,
    failed_statements: &BTreeMap<&'static str, u64>,
) -> Result<(), String> {
    let at_the_end = blocking(postgres, database::injected_failures).await?;
    if at_the_end != *failed_statements {
        world.stats.violation(format!(
            "statements failed after the faults were switched off: {failed_statements:?} \
             before the reconciler, {at_the_end:?} at the end"
        ));
    }
    Ok(())
}

/// The verdicts: each must hold for the run to pass.
pub(super) fn verdicts(
    world: &World,
    settling: &Settling,
    verified: &Verified,
) -> Vec<(&'static str, bool)> {
    let stats = &world.stats;
    vec![
        ("zero duplicate effects", world.provider.duplicates() == 0),
        ("zero lost acknowledged results", verified.lost == 0),
        (
            "every conflict rejected",
            get(&stats.conflicts_rejected) == get(&stats.conflicts_sent),
        ),
        (
            "zero unresolved after reconciliation",
            settling.unresolved == 0 && verified.unresolved_at_the_end == 0,
        ),
        (
            "every intent settled",
            verified.settled == world.settings.operations as u64,
        ),
    ]
}

/// Every intent's stored record checked, then ListUnresolved once more.
pub(super) async fn verify(
    world: &Arc<World>,
    intents: &[Arc<Intent>],
    rng: &mut Rng,
) -> Result<Verified, String> {
    let (settled, lost, declined) = world.verify_all(intents, rng).await;
    let unresolved_at_the_end = world
        .list_unresolved()
        .await
        .map_err(|error| format!("ListUnresolved failed: {error:?}"))?
        .len() as u64;
    Ok(Verified {
        settled,
        lost,
        declined,
        unresolved_at_the_end,
    })
}

// Each intent's stored record, read back once the settling rounds are done.
impl World {
    /// The intent's operation as stored, with its whole history.
    async fn stored(
        &self,
        intent: &Intent,
    ) -> Result<(proto::Operation, Vec<proto::HistoryEntry>), String> {
        let operation_id = locked(&intent.operation_id)
            .clone()
            .ok_or("no operation_id")?;
        let mut history = Vec::new();
        let mut page_token = String::new();
        loop {
            let request = proto::LookupRequest {
                target: Some(proto::lookup_request::Target::OperationId(
                    operation_id.clone(),
                )),
                include_history: true,
                history_page_size: 1000,
                history_page_token: page_token,
                tenant: String::new(),
            };
            // A read, so safe to send again: one failed call (a replica
            // still following the last primary, a reply the proxy lost) is
            // no evidence of a lost record; what it answered in the end is.
            let mut tries = 0;
            let found = loop {
                tries += 1;
                match self.clients[0].lookup(request.clone()).await {
                    Ok(found) => break found,
                    Err(error) if tries < LOOKUP_TRIES => {
                        eprintln!("verify: lookup of {operation_id} failed ({error}); again");
                        tokio::time::sleep(Duration::from_secs(2)).await;
                    }
                    Err(error) => return Err(format!("{error} ({tries} tries)")),
                }
            };
            history.extend(found.history);
            if found.next_history_page_token.is_empty() {
                return found
                    .operation
                    .map(|operation| (operation, history))
                    .ok_or_else(|| "an answer without its operation".to_owned());
            }
            page_token = found.next_history_page_token;
        }
    }

    /// [`World::verify`] for every intent, summed: (settled, lost, declined).
    async fn verify_all(
        self: &Arc<Self>,
        intents: &[Arc<Intent>],
        rng: &mut Rng,
    ) -> (u64, u64, u64) {
        let answers = self
            .each_intent(intents, rng, |world, intent, _rng| async move {
                world.verify(&intent).await
            })
            .await;
        answers
            .into_iter()
            .fold((0, 0, 0), |(settled, lost, declined), answer| {
                (
                    settled + u64::from(answer.0),
                    lost + answer.1,
                    declined + answer.2,
                )
            })
    }

    /// The intent's stored state compared with what was acknowledged and with
    /// the provider. Returns (settled, lost acknowledged results, attempts
    /// declined before their effect).
    async fn verify(&self, intent: &Intent) -> (bool, u64, u64) {
        let acknowledged = locked(&intent.acknowledged).clone();
        let Some(operation_id) = locked(&intent.operation_id).clone() else {
            self.stats
                .violation(format!("key {} never got an operation", intent.key));
            return (false, acknowledged.len() as u64, 0);
        };
        let (stored, history) = match self.stored(intent).await {
            Ok(found) => found,
            Err(error) => {
                self.stats
                    .violation(format!("lookup of {operation_id} failed: {error}"));
                return (false, acknowledged.len() as u64, 0);
            }
        };
        let declined = history
            .iter()
            .filter(|entry| entry.detail == "not_started")
            .count() as u64;
        let body = stored.result.map(|stored| stored.body);
        let settled = stored.state == OperationState::Succeeded as i32 && body.is_some();
        let lost = acknowledged
            .iter()
            .filter(|acknowledged| body.as_ref() != Some(*acknowledged))
            .count() as u64;
        if settled && body != self.provider.lookup(&operation_id) {
            self.stats.violation(format!(
                "{operation_id}: the stored result is not the provider's first effect"
            ));
        }
        if !settled {
            self.stats.violation(format!(
                "{operation_id} (key {}) is not settled: state {}, history {:?}",
                intent.key,
                stored.state,
                history
                    .iter()
                    .map(|entry| format!("{} {}", entry.event, entry.detail))
                    .collect::<Vec<_>>()
            ));
        }
        (settled, lost, declined)
    }
}
