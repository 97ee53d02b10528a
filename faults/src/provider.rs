//! The simulated provider, shared by every worker: it performs every request
//! it gets (keeping that to once is idemd's and the client's job), records
//! each effect under the operation's stable reference, answers lookups by
//! it, and, for callers that ask, honours the reference as an idempotency key.

use crate::lock::locked;
use std::collections::HashMap;
use std::sync::Mutex;

#[derive(Debug, Default)]
pub(crate) struct Provider {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Every effect performed, per reference, in order.
    effects: HashMap<String, Vec<Vec<u8>>>,
    performed: u64,
    /// Requests that the idempotency key turned into a replay of the first
    /// effect (they did not take effect again).
    absorbed_by_key: u64,
}

impl Provider {
    /// Performs the effect for `reference` and returns its body. With
    /// `honour_key`, a reference that already took effect gets the first
    /// effect's body back and nothing happens again.
    pub(crate) fn perform(&self, reference: &str, honour_key: bool) -> Vec<u8> {
        let mut state = locked(&self.state);
        if honour_key && let Some(first) = state.effects.get(reference).and_then(|b| b.first()) {
            let first = first.clone();
            state.absorbed_by_key += 1;
            return first;
        }
        state.performed += 1;
        let body = format!(
            "{{\"reference\":\"{reference}\",\"effect\":{}}}",
            state.performed
        )
        .into_bytes();
        state
            .effects
            .entry(reference.to_owned())
            .or_default()
            .push(body.clone());
        body
    }

    /// The first effect performed for `reference`, if any.
    pub(crate) fn lookup(&self, reference: &str) -> Option<Vec<u8>> {
        let state = locked(&self.state);
        state
            .effects
            .get(reference)
            .and_then(|bodies| bodies.first().cloned())
    }

    /// Every effect performed (duplicates included).
    pub(crate) fn performed(&self) -> u64 {
        locked(&self.state).performed
    }

    /// Effects beyond the first, over all references: each is a side effect
    /// that happened twice.
    pub(crate) fn duplicates(&self) -> u64 {
        let state = locked(&self.state);
        state
            .effects
            .values()
            .map(|bodies| bodies.len().saturating_sub(1) as u64)
            .sum()
    }

    pub(crate) fn absorbed_by_key(&self) -> u64 {
        locked(&self.state).absorbed_by_key
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effects_are_recorded_and_found_by_reference() {
        let provider = Provider::default();
        assert_eq!(provider.lookup("a"), None);
        let body = provider.perform("a", false);
        assert_eq!(provider.lookup("a"), Some(body));
        assert_eq!(provider.lookup("b"), None);
        assert_eq!((provider.performed(), provider.duplicates()), (1, 0));
    }

    #[test]
    fn a_repeated_request_without_the_key_is_a_duplicate_effect() {
        let provider = Provider::default();
        let first = provider.perform("a", false);
        let second = provider.perform("a", false);
        assert_ne!(first, second);
        assert_eq!(provider.lookup("a"), Some(first));
        assert_eq!((provider.performed(), provider.duplicates()), (2, 1));
    }

    #[test]
    fn the_idempotency_key_replays_the_first_effect() {
        let provider = Provider::default();
        let first = provider.perform("a", true);
        assert_eq!(provider.perform("a", true), first);
        assert_eq!((provider.performed(), provider.duplicates()), (1, 0));
        assert_eq!(provider.absorbed_by_key(), 1);
    }
}
