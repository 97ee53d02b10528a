//! The one-line answer to the support question "did it happen, and is it
//! safe to retry?", from the state the server reports. Pure, so the mapping
//! is pinned by a table test rather than by reading the printing code.

use crate::proto::OperationState;

pub(super) fn support_answer(state: OperationState, lease_expired: bool) -> &'static str {
    match state {
        OperationState::Succeeded => "the effect happened; a retry replays the result",
        OperationState::Failed => "it failed terminally; a retry replays the failure",
        OperationState::InProgress if lease_expired => {
            "outcome unknown: check the provider, then reconcile"
        }
        OperationState::InProgress => "an attempt is running; do not retry yet",
        OperationState::Unknown => "outcome unknown: check the provider, then reconcile",
        OperationState::RetryWait => {
            "the effect did not happen; a retry is scheduled and the next Claim executes it"
        }
        OperationState::Expired => {
            "the result expired; the scope refuses new Claims until its tombstone is deleted"
        }
        // A server newer than this CLI, or a malformed answer: say so
        // rather than guess.
        OperationState::Unspecified => "state not reported: ask the server's operators",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_state_answers_the_support_question() {
        let cases = [
            (
                OperationState::Succeeded,
                false,
                "the effect happened; a retry replays",
            ),
            (
                OperationState::Failed,
                false,
                "failed terminally; a retry replays the failure",
            ),
            (OperationState::InProgress, false, "do not retry yet"),
            (
                OperationState::InProgress,
                true,
                "outcome unknown: check the provider",
            ),
            (
                OperationState::Unknown,
                false,
                "outcome unknown: check the provider",
            ),
            (OperationState::RetryWait, false, "a retry is scheduled"),
            (OperationState::Expired, false, "the result expired"),
            (OperationState::Unspecified, false, "not reported"),
        ];
        for (state, lease_expired, expected) in cases {
            let answer = support_answer(state, lease_expired);
            assert!(
                answer.contains(expected),
                "{state:?} (lease expired: {lease_expired}): {answer:?}"
            );
        }
    }
}
