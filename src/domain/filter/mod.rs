//! The filter language of ListOperations: what support staff type to find
//! operations (`state:unknown op:payments.* age>10m`), parsed into an
//! [`OperationFilter`] and rendered back in one canonical form by its
//! `Display`, so that `parse(render(filter)) == filter` and two filters that
//! mean the same render the same (a page token is bound to that text).
//!
//! Terms are separated by whitespace and all must hold. A value may be
//! double-quoted, with `\"` and `\\` as its only escapes, so that a key (any
//! UTF-8) can hold spaces and quotes. Refusals name the 1-based character
//! position of what is wrong and what was expected there ([`FilterError`]).
//!
//! Pure: the store turns a filter into SQL with bound values only, and every
//! time in it (age, leases, deadlines) is compared with the database's clock.

use std::collections::BTreeSet;
use std::fmt;

use super::model::{HistoryEvent, OperationId, State};

mod parse;

/// The longest filter text, in bytes.
pub const MAX_FILTER_BYTES: usize = 1024;
/// The most terms one filter may have.
pub const MAX_FILTER_TERMS: usize = 16;

/// The oldest age a filter may name: 100 years, far beyond any retention,
/// and small enough that `now - age` never leaves the range of a timestamp.
pub const MAX_AGE_SECONDS: u64 = 36_500 * 86_400;

/// A state an operation may be asked to be in. `Unresolved` is the meaning
/// ListUnresolved has (UNKNOWN, or IN_PROGRESS whose lease expired by the
/// database clock: `OperationRecord::unresolved`), not a stored state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StateMatch {
    InProgress,
    Succeeded,
    Failed,
    RetryWait,
    Unknown,
    Expired,
    Unresolved,
}

impl StateMatch {
    pub const ALL: [StateMatch; 7] = [
        StateMatch::InProgress,
        StateMatch::Succeeded,
        StateMatch::Failed,
        StateMatch::RetryWait,
        StateMatch::Unknown,
        StateMatch::Expired,
        StateMatch::Unresolved,
    ];

    pub fn as_str(self) -> &'static str {
        match self.stored() {
            Some(state) => state.as_str(),
            None => "unresolved",
        }
    }

    /// The stored state this term names; `None` for `unresolved`.
    pub fn stored(self) -> Option<State> {
        match self {
            StateMatch::InProgress => Some(State::InProgress),
            StateMatch::Succeeded => Some(State::Succeeded),
            StateMatch::Failed => Some(State::Failed),
            StateMatch::RetryWait => Some(State::RetryWait),
            StateMatch::Unknown => Some(State::Unknown),
            StateMatch::Expired => Some(State::Expired),
            StateMatch::Unresolved => None,
        }
    }

    fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.as_str() == name)
    }
}

/// `op:NAME` (exact) or `op:PREFIX*` (every name that starts with PREFIX).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum OperationMatch {
    Exact(String),
    Prefix(String),
}

impl OperationMatch {
    /// The names a prefix covers are the half-open range [prefix, upper):
    /// names are ASCII and compared byte by byte (Postgres `COLLATE "C"`,
    /// SQLite's BINARY), so `upper` is the prefix with its last character
    /// raised by one. A range, unlike LIKE, has no wildcard (`_`) to escape
    /// and reads the scope index by its leading columns.
    pub fn prefix_upper_bound(prefix: &str) -> String {
        let mut chars: Vec<char> = prefix.chars().collect();
        if let Some(last) = chars.pop() {
            chars.push(char::from_u32(u32::from(last) + 1).unwrap_or(char::MAX));
        }
        chars.into_iter().collect()
    }
}

/// How a number in a term compares: `:` is equality.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Comparison {
    Equal,
    Greater,
    GreaterOrEqual,
    Less,
    LessOrEqual,
}

impl Comparison {
    pub const ALL: [Comparison; 5] = [
        Comparison::Equal,
        Comparison::Greater,
        Comparison::GreaterOrEqual,
        Comparison::Less,
        Comparison::LessOrEqual,
    ];

    /// As written in a filter.
    pub fn as_str(self) -> &'static str {
        match self {
            Comparison::Equal => ":",
            Comparison::Greater => ">",
            Comparison::GreaterOrEqual => ">=",
            Comparison::Less => "<",
            Comparison::LessOrEqual => "<=",
        }
    }
}

/// `age>DUR` and its kin: the database's now minus created_at, compared
/// with a whole number of seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AgeBound {
    /// Never [`Comparison::Equal`]: ages are continuous.
    pub comparison: Comparison,
    pub seconds: u64,
}

/// `attempts>N` and its kin: the current or last attempt's number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AttemptsBound {
    pub comparison: Comparison,
    pub attempts: u32,
}

/// `conflicts>N` and its kin: how many Claims with another request were
/// refused (IDEMPOTENCY_KEY_REUSED) and counted on the operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConflictsBound {
    pub comparison: Comparison,
    /// At most `i64::MAX`, the column's range.
    pub conflicts: u64,
}

/// The name a history event has in a filter (`last:taken_over`): its stored
/// name in lower case.
pub fn event_term(event: HistoryEvent) -> String {
    event.as_str().to_ascii_lowercase()
}

/// What a ListOperations caller asked for. Every field that is set must
/// hold; the default matches every operation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct OperationFilter {
    /// Any one of these (empty: any state).
    pub states: BTreeSet<StateMatch>,
    pub operation: Option<OperationMatch>,
    pub key: Option<String>,
    pub id: Option<OperationId>,
    pub age: Option<AgeBound>,
    pub attempts: Option<AttemptsBound>,
    /// The operation had a takeover (its `taken_over_fence` is set).
    pub taken_over: bool,
    /// IN_PROGRESS or UNKNOWN and its attempt deadline has passed by the
    /// database clock (`OperationRecord::attempt_deadline_passed`).
    pub deadline_passed: bool,
    pub conflicts: Option<ConflictsBound>,
    /// At least one Claim with another request was refused and counted
    /// (`conflicts > 0`).
    pub conflicted: bool,
    /// The event of the operation's latest history entry (for a coalesced
    /// entry, its event; past the history cap, `history_truncated`).
    pub last_event: Option<HistoryEvent>,
    /// Another tenant, by name: for admin credentials only, which the
    /// transport checks (the domain knows no credentials).
    pub tenant: Option<String>,
}

/// A filter refused: where (1-based character position) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at character {position}: {problem}")]
pub struct FilterError {
    pub position: usize,
    pub problem: FilterProblem,
}

/// What was wrong with a filter, and what was expected instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterProblem {
    #[error("the filter is {bytes} bytes long; expected at most {MAX_FILTER_BYTES}")]
    TooLong { bytes: usize },
    #[error("expected at most {MAX_FILTER_TERMS} terms")]
    TooManyTerms,
    #[error(
        "expected a field name (state, op, key, id, age, attempts, conflicts, is, last, tenant)"
    )]
    ExpectedField,
    #[error(
        "unknown field `{field}`; expected one of state, op, key, id, age, attempts, conflicts, \
         is, last, tenant"
    )]
    UnknownField { field: String },
    #[error("expected `:` or a comparison after `{field}`")]
    ExpectedOperator { field: &'static str },
    #[error("`{field}` takes {expected}, not `{operator}`")]
    WrongOperator {
        field: &'static str,
        operator: &'static str,
        expected: &'static str,
    },
    #[error("bad value for `{field}`: expected {expected}")]
    BadValue {
        field: &'static str,
        expected: &'static str,
    },
    #[error("`{field}` is given twice; expected each field at most once")]
    Repeated { field: &'static str },
    #[error("expected a closing `\"` for the quoted value")]
    UnterminatedQuote,
    #[error("expected `\\\"` or `\\\\` after `\\` in a quoted value")]
    BadEscape,
    #[error("expected whitespace after the closing `\"`")]
    ExpectedSpace,
    #[error("expected a quoted value: `\"` and `\\` may appear only inside quotes")]
    QuoteNeeded,
}

fn render_duration(seconds: u64, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
    if seconds == 0 {
        return formatter.write_str("0s");
    }
    let parts = [
        (seconds / 86_400, 'd'),
        (seconds % 86_400 / 3_600, 'h'),
        (seconds % 3_600 / 60, 'm'),
        (seconds % 60, 's'),
    ];
    for (amount, unit) in parts {
        if amount > 0 {
            write!(formatter, "{amount}{unit}")?;
        }
    }
    Ok(())
}

/// A text value as the parser reads it back: bare when it can be, quoted
/// (escaping `"` and `\`) otherwise.
fn render_text(value: &str, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
    let bare = !value.is_empty()
        && !value
            .chars()
            .any(|character| character.is_whitespace() || character == '"' || character == '\\');
    if bare {
        return formatter.write_str(value);
    }
    formatter.write_str("\"")?;
    for character in value.chars() {
        if character == '"' || character == '\\' {
            formatter.write_str("\\")?;
        }
        write!(formatter, "{character}")?;
    }
    formatter.write_str("\"")
}

/// The canonical text: one term per field in a fixed order, states in one
/// order, durations in their largest units, values quoted only when they
/// must be.
impl fmt::Display for OperationFilter {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut separator = "";
        let mut next_term = |formatter: &mut fmt::Formatter<'_>| {
            let written = formatter.write_str(separator);
            separator = " ";
            written
        };
        if !self.states.is_empty() {
            next_term(formatter)?;
            formatter.write_str("state:")?;
            let names: Vec<&str> = self.states.iter().map(|state| state.as_str()).collect();
            formatter.write_str(&names.join(","))?;
        }
        if let Some(operation) = &self.operation {
            next_term(formatter)?;
            match operation {
                OperationMatch::Exact(name) => write!(formatter, "op:{name}")?,
                OperationMatch::Prefix(prefix) => write!(formatter, "op:{prefix}*")?,
            }
        }
        if let Some(key) = &self.key {
            next_term(formatter)?;
            formatter.write_str("key:")?;
            render_text(key, formatter)?;
        }
        if let Some(id) = self.id {
            next_term(formatter)?;
            write!(formatter, "id:{}", id.0.hyphenated())?;
        }
        if let Some(age) = self.age {
            next_term(formatter)?;
            write!(formatter, "age{}", age.comparison.as_str())?;
            render_duration(age.seconds, formatter)?;
        }
        if let Some(attempts) = self.attempts {
            next_term(formatter)?;
            write!(
                formatter,
                "attempts{}{}",
                attempts.comparison.as_str(),
                attempts.attempts
            )?;
        }
        if let Some(conflicts) = self.conflicts {
            next_term(formatter)?;
            write!(
                formatter,
                "conflicts{}{}",
                conflicts.comparison.as_str(),
                conflicts.conflicts
            )?;
        }
        if self.taken_over {
            next_term(formatter)?;
            formatter.write_str("is:taken_over")?;
        }
        if self.deadline_passed {
            next_term(formatter)?;
            formatter.write_str("is:deadline_passed")?;
        }
        if self.conflicted {
            next_term(formatter)?;
            formatter.write_str("is:conflicted")?;
        }
        if let Some(event) = self.last_event {
            next_term(formatter)?;
            write!(formatter, "last:{}", event_term(event))?;
        }
        if let Some(tenant) = &self.tenant {
            next_term(formatter)?;
            formatter.write_str("tenant:")?;
            render_text(tenant, formatter)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
