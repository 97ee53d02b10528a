//! Times, states and ages as support staff read them.

use chrono::{DateTime, Utc};

use crate::proto::{HistoryEntry, Operation, OperationState};

/// The history event of a refused conflicting Claim, as the server writes it.
pub const CONFLICTING_CLAIM_REFUSED: &str = "CONFLICTING_CLAIM_REFUSED";

/// `refused conflicting claim ×N`: how support staff read a count of Claims
/// refused with IDEMPOTENCY_KEY_REUSED.
pub fn conflicts(count: u64) -> String {
    format!("refused conflicting claim ×{count}")
}

/// An operation's refused conflicting Claims and when the last one was:
/// `-` when there were none.
pub fn operation_conflicts(operation: &Operation) -> String {
    if operation.conflicts == 0 {
        return "-".to_owned();
    }
    format!(
        "{}, last at {}",
        conflicts(operation.conflicts),
        time(operation.last_conflict_at.as_ref())
    )
}

/// An operation's counted replays and Pending answers, as of the last flush
/// of the replicas' counts (they lag by its interval, a few seconds):
/// `about 7 replays (the last at …), 4 Pending answers`, or `-` when none
/// was counted.
pub fn operation_answers(operation: &Operation) -> String {
    if operation.replays == 0 && operation.pendings == 0 {
        return "-".to_owned();
    }
    let mut text = format!("about {} replays", operation.replays);
    if operation.replays > 0 {
        text.push_str(&format!(
            " (the last at {})",
            time(operation.last_replay_at.as_ref())
        ));
    }
    text.push_str(&format!(", {} Pending answers", operation.pendings));
    text
}

/// The same request under other new keys lately, as the replica that
/// answered saw it: `-` when none; a warning at the threshold.
pub fn operation_same_request(operation: &Operation) -> String {
    match (
        operation.same_request_keys,
        operation.suspected_new_key_retry,
    ) {
        (0 | 1, _) => "-".to_owned(),
        (keys, false) => format!("{keys} operations with this same request lately"),
        (keys, true) => format!(
            "{keys} operations with this same request lately, each under its own key: \
             the caller may make a new idempotency key per retry instead of per intent"
        ),
    }
}

/// A history entry's detail as shown: its own, or for a coalesced entry of
/// refused conflicting Claims (which has none), how many it stands for.
pub fn history_detail(entry: &HistoryEntry) -> String {
    if entry.event == CONFLICTING_CLAIM_REFUSED && entry.detail.is_empty() {
        return conflicts(entry.count);
    }
    entry.detail.clone()
}

/// UTC to the second; `-` when absent.
pub fn time(at: Option<&pbjson_types::Timestamp>) -> String {
    timestamp(at).map_or_else(
        || "-".to_owned(),
        |at| at.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
    )
}

pub fn timestamp(at: Option<&pbjson_types::Timestamp>) -> Option<DateTime<Utc>> {
    at.and_then(|at| DateTime::<Utc>::from_timestamp(at.seconds, at.nanos.max(0) as u32))
}

pub fn state(state: i32) -> OperationState {
    OperationState::try_from(state).unwrap_or(OperationState::Unspecified)
}

/// The state's name without its enum prefix: `SUCCEEDED`.
pub fn state_name(state: OperationState) -> &'static str {
    let name = state.as_str_name();
    name.strip_prefix("OPERATION_STATE_").unwrap_or(name)
}

/// How long ago, by this machine's clock: `45s`, `12m05s`, `3h07m`, `2d04h`.
pub fn age(created_at: Option<&pbjson_types::Timestamp>, now: DateTime<Utc>) -> String {
    let Some(created_at) = created_at else {
        return "-".to_owned();
    };
    duration((now.timestamp() - created_at.seconds).max(0))
}

/// Whole seconds as `45s`, `12m05s`, `3h07m`, `2d04h`.
pub fn duration(seconds: i64) -> String {
    let (days, hours, minutes) = (seconds / 86_400, seconds / 3600 % 24, seconds / 60 % 60);
    match seconds {
        ..60 => format!("{seconds}s"),
        60..3600 => format!("{minutes}m{:02}s", seconds % 60),
        3600..86_400 => format!("{}h{minutes:02}m", seconds / 3600),
        _ => format!("{days}d{hours:02}h"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_at_a_glance() {
        for (seconds, text) in [
            (0, "0s"),
            (59, "59s"),
            (60, "1m00s"),
            (725, "12m05s"),
            (11_220, "3h07m"),
            (187_200, "2d04h"),
        ] {
            assert_eq!(duration(seconds), text);
        }
    }
}

#[cfg(test)]
mod conflict_tests {
    use super::*;

    #[test]
    fn refused_conflicting_claims_read_as_a_count() {
        let entry = HistoryEntry {
            event: CONFLICTING_CLAIM_REFUSED.to_owned(),
            count: 7,
            ..Default::default()
        };
        assert_eq!(history_detail(&entry), "refused conflicting claim ×7");
        let renewed = HistoryEntry {
            event: "RENEWED".to_owned(),
            detail: "kept".to_owned(),
            count: 7,
            ..Default::default()
        };
        assert_eq!(history_detail(&renewed), "kept");
        let mut operation = Operation::default();
        assert_eq!(operation_conflicts(&operation), "-");
        assert_eq!(operation_answers(&operation), "-");
        operation.pendings = 4;
        assert_eq!(
            operation_answers(&operation),
            "about 0 replays, 4 Pending answers"
        );
        operation.replays = 7;
        assert_eq!(
            operation_answers(&operation),
            "about 7 replays (the last at -), 4 Pending answers"
        );
        operation.conflicts = 3;
        operation.last_conflict_at = Some(pbjson_types::Timestamp {
            seconds: 1_700_000_000,
            nanos: 0,
        });
        assert_eq!(
            operation_conflicts(&operation),
            "refused conflicting claim ×3, last at 2023-11-14T22:13:20Z"
        );
    }
}
