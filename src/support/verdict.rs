//! The support question — did the effect happen, is it safe for the caller
//! to retry, what should be done next — answered from what Lookup reports.
//! Pure, so the mapping is pinned by a table test rather than by reading the
//! code that prints or renders it.

use crate::proto::OperationState;

/// What Lookup says about an operation that the answer depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    pub state: OperationState,
    /// IN_PROGRESS whose owner stopped renewing (by the database's clock).
    pub lease_expired: bool,
    /// Whether the attempt budget has attempts left.
    pub attempts_left: bool,
    /// A FAILED operation whose policy says `on_failed: new_attempt`: a
    /// Claim starts a new attempt.
    pub failed_gets_new_attempt: bool,
}

/// Whether the effect happened, as far as idemd's record can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Happened {
    Yes,
    No,
    /// An attempt is running: not yet.
    NotYet,
    /// The record cannot tell: the provider must be asked.
    Unknown,
}

impl Happened {
    pub fn as_str(self) -> &'static str {
        match self {
            Happened::Yes => "yes",
            Happened::No => "no",
            Happened::NotYet => "not yet",
            Happened::Unknown => "unknown",
        }
    }
}

/// The three answers, each a sentence a support engineer can pass on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub happened: Happened,
    /// One line: the CLI's answer, the console's headline.
    pub headline: &'static str,
    pub retry: &'static str,
    pub next: &'static str,
}

const UNKNOWN_HEADLINE: &str = "outcome unknown: check the provider, then reconcile";
const RECONCILE_NEXT: &str = "Look the effect up at the provider by the operation's reference, \
     then reconcile: SUCCEEDED with its result, FAILED with its error, or NOT_APPLIED once \
     the last attempt's deadline has passed.";

pub fn verdict(facts: Facts) -> Verdict {
    let unknown_retry = if facts.attempts_left {
        "A retry is told ReconcileFirst: it must look the provider up before acting, and \
         executes only if the effect is not there."
    } else {
        "A retry is told NeedsReconciliation and does not execute until someone reconciles."
    };
    match facts.state {
        OperationState::Succeeded => Verdict {
            happened: Happened::Yes,
            headline: "the effect happened; a retry replays the result",
            retry: "Safe: a retry replays the stored result and executes nothing.",
            next: "Nothing: the caller's retry gets the result.",
        },
        OperationState::Failed if facts.failed_gets_new_attempt => Verdict {
            happened: Happened::No,
            headline: "it failed; its policy lets a retry start a new attempt",
            retry: "Safe: the effect did not happen, and a retry (the same request, same \
                    key) is a new attempt, which executes; once the operation deadline has \
                    passed it replays the failure.",
            next: "Nothing, unless the caller should try again: then it retries the same \
                   request with the same key.",
        },
        OperationState::Failed => Verdict {
            happened: Happened::No,
            headline: "it failed terminally; a retry replays the failure",
            retry: "Safe: a retry replays the failure. Retrying the same request unchanged \
                    cannot succeed; a new intent needs a new key.",
            next: "Nothing, unless the failure was wrong: then the caller sends a new \
                   request with a new key.",
        },
        OperationState::InProgress if facts.lease_expired => Verdict {
            happened: Happened::Unknown,
            headline: UNKNOWN_HEADLINE,
            retry: unknown_retry,
            next: RECONCILE_NEXT,
        },
        OperationState::InProgress => Verdict {
            happened: Happened::NotYet,
            headline: "an attempt is running; do not retry yet",
            retry: "A retry waits (Pending) and never runs beside the attempt.",
            next: "Wait: the attempt ends by its deadline at the latest.",
        },
        OperationState::Unknown => Verdict {
            happened: Happened::Unknown,
            headline: UNKNOWN_HEADLINE,
            retry: unknown_retry,
            next: RECONCILE_NEXT,
        },
        OperationState::RetryWait => Verdict {
            happened: Happened::No,
            headline: "the effect did not happen; a retry is scheduled and the next Claim executes it",
            retry: "Safe: the next Claim after the retry time executes a new attempt.",
            next: "Nothing: the caller's retry executes it.",
        },
        OperationState::Expired => Verdict {
            happened: Happened::Unknown,
            headline: "the result expired; the scope refuses new Claims until its tombstone is deleted",
            retry: "A retry is answered RESULT_EXPIRED and executes nothing.",
            next: "The result is gone; a new intent needs a new key.",
        },
        // A server newer than this code, or a malformed answer: say so
        // rather than guess.
        OperationState::Unspecified => Verdict {
            happened: Happened::Unknown,
            headline: "state not reported: ask the server's operators",
            retry: "Unknown: treat it as unsafe.",
            next: "Ask the server's operators.",
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_state_answers_the_three_support_questions() {
        use OperationState::*;
        let cases = [
            (
                Succeeded,
                false,
                true,
                Happened::Yes,
                "a retry replays the result",
                "replays the stored result",
            ),
            (
                Failed,
                false,
                true,
                Happened::No,
                "a retry replays the failure",
                "new intent needs a new key",
            ),
            (
                InProgress,
                false,
                true,
                Happened::NotYet,
                "do not retry yet",
                "waits (Pending)",
            ),
            (
                InProgress,
                true,
                true,
                Happened::Unknown,
                "check the provider",
                "ReconcileFirst",
            ),
            (
                InProgress,
                true,
                false,
                Happened::Unknown,
                "check the provider",
                "NeedsReconciliation",
            ),
            (
                Unknown,
                false,
                true,
                Happened::Unknown,
                "check the provider",
                "ReconcileFirst",
            ),
            (
                Unknown,
                false,
                false,
                Happened::Unknown,
                "check the provider",
                "NeedsReconciliation",
            ),
            (
                RetryWait,
                false,
                true,
                Happened::No,
                "a retry is scheduled",
                "executes a new attempt",
            ),
            (
                Expired,
                false,
                true,
                Happened::Unknown,
                "the result expired",
                "RESULT_EXPIRED",
            ),
            (
                Unspecified,
                false,
                true,
                Happened::Unknown,
                "not reported",
                "unsafe",
            ),
        ];
        for (state, lease_expired, attempts_left, happened, headline, retry) in cases {
            let facts = Facts {
                state,
                lease_expired,
                attempts_left,
                failed_gets_new_attempt: false,
            };
            let answer = verdict(facts);
            assert_eq!(answer.happened, happened, "{facts:?}");
            assert!(answer.headline.contains(headline), "{facts:?}: {answer:?}");
            assert!(answer.retry.contains(retry), "{facts:?}: {answer:?}");
            assert!(!answer.next.is_empty(), "{facts:?}");
        }
        let opted_in = verdict(Facts {
            state: Failed,
            lease_expired: false,
            attempts_left: false,
            failed_gets_new_attempt: true,
        });
        assert_eq!(opted_in.happened, Happened::No);
        assert!(opted_in.headline.contains("start a new attempt"));
        assert!(opted_in.retry.contains("is a new attempt, which executes"));
        // Only a FAILED operation's answer depends on it.
        for state in [Succeeded, InProgress, Unknown, RetryWait, Expired] {
            let facts = |failed_gets_new_attempt| Facts {
                state,
                lease_expired: false,
                attempts_left: true,
                failed_gets_new_attempt,
            };
            assert_eq!(verdict(facts(true)), verdict(facts(false)), "{state:?}");
        }
    }
}
