//! At most one call per operation in a store's write paths at a time, on
//! this replica.
//!
//! A call whose operation's row another session holds waits for the row
//! lock (up to the session's `lock_timeout`) on a pool connection. Without
//! this bound, every call of that operation waited on a connection of its
//! own: six Renews of one held row took a pool of four and delayed an
//! unrelated tenant's Claim by the whole lock timeout. Calls of one
//! operation would take the row lock one after another anyway; here the
//! later ones wait in the replica, holding nothing, and their wait still
//! counts against `--db-call-timeout`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::OwnedMutexGuard;

use crate::domain::{Target, TenantId};

#[derive(Debug, Default)]
pub(super) struct OneAtATime {
    turns: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// A call's turn at one operation; the next one's when dropped.
pub(super) struct Turn<'a> {
    guard: Option<OwnedMutexGuard<()>>,
    /// Held while waiting too, so that a call dropped while it waits
    /// still forgets the turn once nobody needs it.
    entry: Option<Arc<tokio::sync::Mutex<()>>>,
    key: String,
    owner: &'a OneAtATime,
    /// Another call had the turn first: what it did may change what this
    /// one finds.
    waited: bool,
}

impl Turn<'_> {
    /// Whether another call held the turn when this one asked for it.
    pub(super) fn waited(&self) -> bool {
        self.waited
    }
}

impl OneAtATime {
    /// Waits for the turn of `target` of `tenant`.
    pub(super) async fn turn(&self, tenant: TenantId, target: &Target) -> Turn<'_> {
        let key = match target {
            Target::Id(id) => format!("{}/id/{}", tenant.0, id.0),
            Target::Scope(scope) => format!(
                "{}/scope/{}/{}/{}",
                tenant.0,
                scope.operation.len(),
                scope.operation,
                scope.key
            ),
        };
        let entry = match self.turns.lock() {
            Ok(mut turns) => Some(Arc::clone(turns.entry(key.clone()).or_default())),
            Err(_) => None,
        };
        let mut turn = Turn {
            guard: None,
            entry,
            key,
            owner: self,
            waited: false,
        };
        if let Some(entry) = &turn.entry {
            turn.guard = match Arc::clone(entry).try_lock_owned() {
                Ok(guard) => Some(guard),
                Err(_) => {
                    turn.waited = true;
                    Some(Arc::clone(entry).lock_owned().await)
                }
            };
        }
        turn
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        drop(self.entry.take());
        let Ok(mut turns) = self.owner.turns.lock() else {
            return;
        };
        // Nobody else holds or waits for it: forget it.
        if turns
            .get(&self.key)
            .is_some_and(|turn| Arc::strong_count(turn) == 1)
        {
            turns.remove(&self.key);
        }
    }
}
