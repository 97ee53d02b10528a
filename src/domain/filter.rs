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

use uuid::Uuid;

use super::model::{OperationId, State};

/// The longest filter text, in bytes.
pub const MAX_FILTER_BYTES: usize = 1024;
/// The most terms one filter may have.
pub const MAX_FILTER_TERMS: usize = 16;
/// The bounds of DESIGN.md: keys are 1–255 bytes, operation names 1–128
/// characters of `[A-Za-z0-9._/-]`. A value past them can match nothing, so
/// it is refused as a mistake rather than answered with an empty page.
const MAX_KEY_BYTES: usize = 255;
const MAX_OPERATION_CHARS: usize = 128;
const MAX_TENANT_BYTES: usize = 255;
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
    #[error("expected a field name (state, op, key, id, age, attempts, is, tenant)")]
    ExpectedField,
    #[error(
        "unknown field `{field}`; expected one of state, op, key, id, age, attempts, is, tenant"
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    State,
    Op,
    Key,
    Id,
    Age,
    Attempts,
    Is,
    Tenant,
}

impl Field {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "state" => Field::State,
            "op" => Field::Op,
            "key" => Field::Key,
            "id" => Field::Id,
            "age" => Field::Age,
            "attempts" => Field::Attempts,
            "is" => Field::Is,
            "tenant" => Field::Tenant,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Field::State => "state",
            Field::Op => "op",
            Field::Key => "key",
            Field::Id => "id",
            Field::Age => "age",
            Field::Attempts => "attempts",
            Field::Is => "is",
            Field::Tenant => "tenant",
        }
    }
}

/// One `field OPERATOR value` as written, with where each part starts
/// (0-based character indexes; errors add one).
struct Term {
    start: usize,
    field: Field,
    comparison: Comparison,
    comparison_at: usize,
    value: String,
    value_at: usize,
}

fn refuse<T>(index: usize, problem: FilterProblem) -> Result<T, FilterError> {
    Err(FilterError {
        position: index + 1,
        problem,
    })
}

/// Reads the filter text into terms, without judging their values.
struct Scanner {
    chars: Vec<char>,
    at: usize,
}

impl Scanner {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn skip_whitespace(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.at += 1;
        }
    }

    fn term(&mut self) -> Result<Term, FilterError> {
        let start = self.at;
        while self
            .peek()
            .is_some_and(|character| character.is_ascii_alphanumeric() || character == '_')
        {
            self.at += 1;
        }
        if self.at == start {
            return refuse(start, FilterProblem::ExpectedField);
        }
        let name: String = self.chars[start..self.at].iter().collect();
        let Some(field) = Field::parse(&name) else {
            return refuse(start, FilterProblem::UnknownField { field: name });
        };
        let comparison_at = self.at;
        let comparison = match (self.peek(), self.chars.get(self.at + 1).copied()) {
            (Some('>'), Some('=')) => Comparison::GreaterOrEqual,
            (Some('<'), Some('=')) => Comparison::LessOrEqual,
            (Some('>'), _) => Comparison::Greater,
            (Some('<'), _) => Comparison::Less,
            (Some(':'), _) => Comparison::Equal,
            _ => {
                return refuse(
                    comparison_at,
                    FilterProblem::ExpectedOperator {
                        field: field.name(),
                    },
                );
            }
        };
        self.at += comparison.as_str().chars().count();
        let value_at = self.at;
        let value = if self.peek() == Some('"') {
            self.quoted()?
        } else {
            self.unquoted()?
        };
        Ok(Term {
            start,
            field,
            comparison,
            comparison_at,
            value,
            value_at,
        })
    }

    fn unquoted(&mut self) -> Result<String, FilterError> {
        let start = self.at;
        while let Some(character) = self.peek().filter(|character| !character.is_whitespace()) {
            if character == '"' || character == '\\' {
                return refuse(self.at, FilterProblem::QuoteNeeded);
            }
            self.at += 1;
        }
        Ok(self.chars[start..self.at].iter().collect())
    }

    fn quoted(&mut self) -> Result<String, FilterError> {
        let opening = self.at;
        self.at += 1;
        let mut value = String::new();
        loop {
            match self.peek() {
                None => return refuse(opening, FilterProblem::UnterminatedQuote),
                Some('"') => {
                    self.at += 1;
                    break;
                }
                Some('\\') => match self.chars.get(self.at + 1).copied() {
                    Some(escaped @ ('"' | '\\')) => {
                        value.push(escaped);
                        self.at += 2;
                    }
                    _ => return refuse(self.at, FilterProblem::BadEscape),
                },
                Some(character) => {
                    value.push(character);
                    self.at += 1;
                }
            }
        }
        if self
            .peek()
            .is_some_and(|character| !character.is_whitespace())
        {
            return refuse(self.at, FilterProblem::ExpectedSpace);
        }
        Ok(value)
    }
}

fn is_operation_char(character: char) -> bool {
    character.is_ascii_alphanumeric() || matches!(character, '.' | '_' | '/' | '-')
}

/// `90s`, `10m`, `2h`, `7d`, or several of them largest unit first
/// (`1h30m`), each unit at most once; whole seconds.
fn parse_duration(text: &str) -> Option<u64> {
    const UNITS: [(char, u64); 4] = [('d', 86_400), ('h', 3_600), ('m', 60), ('s', 1)];
    let mut rest = text;
    let mut next_unit = 0;
    let mut total: u64 = 0;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        // Twelve digits of any unit already pass the cap; more could overflow.
        if digits == 0 || digits > 12 {
            return None;
        }
        let amount: u64 = rest[..digits].parse().ok()?;
        let unit = rest[digits..].chars().next()?;
        let position = UNITS[next_unit..]
            .iter()
            .position(|(name, _)| *name == unit)?;
        let (_, seconds) = UNITS[next_unit + position];
        next_unit += position + 1;
        total = total.checked_add(amount.checked_mul(seconds)?)?;
        rest = &rest[digits + unit.len_utf8()..];
    }
    (total <= MAX_AGE_SECONDS).then_some(total)
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

const STATE_VALUES: &str = "in_progress, succeeded, failed, retry_wait, unknown, expired or \
                            unresolved, separated by commas";
const EQUALITY: &str = "`:`";
const ORDERING: &str = "`>`, `>=`, `<` or `<=`";

impl OperationFilter {
    /// Reads a filter; an empty (or all-whitespace) text matches everything.
    pub fn parse(text: &str) -> Result<Self, FilterError> {
        if text.len() > MAX_FILTER_BYTES {
            // The first character that does not fit.
            let mut fits = 0;
            let position = text
                .chars()
                .take_while(|character| {
                    fits += character.len_utf8();
                    fits <= MAX_FILTER_BYTES
                })
                .count();
            return refuse(position, FilterProblem::TooLong { bytes: text.len() });
        }
        let mut scanner = Scanner {
            chars: text.chars().collect(),
            at: 0,
        };
        let mut filter = OperationFilter::default();
        let mut terms = 0;
        loop {
            scanner.skip_whitespace();
            if scanner.peek().is_none() {
                return Ok(filter);
            }
            if terms == MAX_FILTER_TERMS {
                return refuse(scanner.at, FilterProblem::TooManyTerms);
            }
            terms += 1;
            let term = scanner.term()?;
            filter.add(term)?;
        }
    }

    fn add(&mut self, term: Term) -> Result<(), FilterError> {
        let field = term.field.name();
        let bad_value =
            |expected| refuse(term.value_at, FilterProblem::BadValue { field, expected });
        let repeated = |field| refuse(term.start, FilterProblem::Repeated { field });
        let wants_equality = term.field != Field::Age && term.field != Field::Attempts;
        if wants_equality && term.comparison != Comparison::Equal {
            return refuse(
                term.comparison_at,
                FilterProblem::WrongOperator {
                    field,
                    operator: term.comparison.as_str(),
                    expected: EQUALITY,
                },
            );
        }
        match term.field {
            Field::State => {
                // A list, and the one field that may be given again: each
                // term adds to the states any one of which may match.
                for name in term.value.split(',') {
                    let Some(state) = StateMatch::parse(name) else {
                        return bad_value(STATE_VALUES);
                    };
                    self.states.insert(state);
                }
            }
            Field::Op => {
                if self.operation.is_some() {
                    return repeated(field);
                }
                let (name, prefix) = match term.value.strip_suffix('*') {
                    Some(prefix) => (prefix, true),
                    None => (term.value.as_str(), false),
                };
                let chars = name.chars().count();
                if chars == 0 || chars > MAX_OPERATION_CHARS || !name.chars().all(is_operation_char)
                {
                    return bad_value(
                        "an operation name (1-128 characters of A-Z a-z 0-9 . _ / -), \
                         or a prefix of one followed by `*`",
                    );
                }
                self.operation = Some(if prefix {
                    OperationMatch::Prefix(name.to_owned())
                } else {
                    OperationMatch::Exact(name.to_owned())
                });
            }
            Field::Key => {
                if self.key.is_some() {
                    return repeated(field);
                }
                if term.value.is_empty() || term.value.len() > MAX_KEY_BYTES {
                    return bad_value("a key of 1-255 bytes (quoted if it has spaces or quotes)");
                }
                self.key = Some(term.value);
            }
            Field::Id => {
                if self.id.is_some() {
                    return repeated(field);
                }
                let Ok(uuid) = Uuid::parse_str(&term.value) else {
                    return bad_value("an operation_id (a UUID)");
                };
                self.id = Some(OperationId(uuid));
            }
            Field::Age => {
                if self.age.is_some() {
                    return repeated(field);
                }
                if term.comparison == Comparison::Equal {
                    return refuse(
                        term.comparison_at,
                        FilterProblem::WrongOperator {
                            field,
                            operator: term.comparison.as_str(),
                            expected: ORDERING,
                        },
                    );
                }
                let Some(seconds) = parse_duration(&term.value) else {
                    return bad_value(
                        "a duration such as 90s, 10m, 2h, 7d or 1h30m (largest unit first, \
                         at most 36500d)",
                    );
                };
                self.age = Some(AgeBound {
                    comparison: term.comparison,
                    seconds,
                });
            }
            Field::Attempts => {
                if self.attempts.is_some() {
                    return repeated(field);
                }
                let digits_only = !term.value.is_empty()
                    && term
                        .value
                        .chars()
                        .all(|character| character.is_ascii_digit());
                let Some(attempts) = digits_only
                    .then(|| term.value.parse::<u32>().ok())
                    .flatten()
                else {
                    return bad_value("a whole number of attempts");
                };
                self.attempts = Some(AttemptsBound {
                    comparison: term.comparison,
                    attempts,
                });
            }
            Field::Is => match term.value.as_str() {
                "taken_over" if self.taken_over => return repeated("is:taken_over"),
                "taken_over" => self.taken_over = true,
                "deadline_passed" if self.deadline_passed => {
                    return repeated("is:deadline_passed");
                }
                "deadline_passed" => self.deadline_passed = true,
                _ => return bad_value("taken_over or deadline_passed"),
            },
            Field::Tenant => {
                if self.tenant.is_some() {
                    return repeated(field);
                }
                if term.value.is_empty() || term.value.len() > MAX_TENANT_BYTES {
                    return bad_value("a tenant name of 1-255 bytes");
                }
                self.tenant = Some(term.value);
            }
        }
        Ok(())
    }
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
        if self.taken_over {
            next_term(formatter)?;
            formatter.write_str("is:taken_over")?;
        }
        if self.deadline_passed {
            next_term(formatter)?;
            formatter.write_str("is:deadline_passed")?;
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
#[path = "filter_tests.rs"]
mod tests;
