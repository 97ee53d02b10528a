//! Reading a filter's text: a scanner that splits it into terms (field,
//! comparison, value, and where each starts), then each term judged and
//! added to the filter, with the position of anything refused.

use uuid::Uuid;

use super::{
    AgeBound, AttemptsBound, Comparison, ConflictsBound, FilterError, FilterProblem,
    MAX_AGE_SECONDS, MAX_FILTER_BYTES, MAX_FILTER_TERMS, OperationFilter, OperationMatch,
    StateMatch, event_term,
};
use crate::domain::model::{HistoryEvent, OperationId};

/// The bounds of DESIGN.md: keys are 1–255 bytes, operation names 1–128
/// characters of `[A-Za-z0-9._/-]`. A value past them can match nothing, so
/// it is refused as a mistake rather than answered with an empty page.
const MAX_KEY_BYTES: usize = 255;
const MAX_OPERATION_CHARS: usize = 128;
const MAX_TENANT_BYTES: usize = 255;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    State,
    Op,
    Key,
    Id,
    Age,
    Attempts,
    Conflicts,
    Is,
    Last,
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
            "conflicts" => Field::Conflicts,
            "is" => Field::Is,
            "last" => Field::Last,
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
            Field::Conflicts => "conflicts",
            Field::Is => "is",
            Field::Last => "last",
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

pub(super) const STATE_VALUES: &str = "in_progress, succeeded, failed, retry_wait, unknown, expired or \
                            unresolved, separated by commas";
pub(super) const IS_VALUES: &str = "taken_over, deadline_passed or conflicted";
/// Every history event in lower case, as [`HistoryEvent::ALL`] orders them
/// (a test holds the two together).
pub(super) const LAST_VALUES: &str = "a history event: claimed, taken_over, retry_started, \
     marked_unknown, renewed, completed, failed, deadline_exceeded, retry_scheduled, \
     outcome_unknown, reconciled, stale_write_refused, late_write_refused, \
     conflicting_claim_refused, expired, forgotten or history_truncated";
pub(super) const EQUALITY: &str = "`:`";
pub(super) const ORDERING: &str = "`>`, `>=`, `<` or `<=`";

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
        let wants_equality = !matches!(term.field, Field::Age | Field::Attempts | Field::Conflicts);
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
            Field::Conflicts => {
                if self.conflicts.is_some() {
                    return repeated(field);
                }
                let digits_only = !term.value.is_empty()
                    && term
                        .value
                        .chars()
                        .all(|character| character.is_ascii_digit());
                // The column is a signed 64-bit count.
                let Some(conflicts) = digits_only
                    .then(|| term.value.parse::<i64>().ok())
                    .flatten()
                    .and_then(|conflicts| u64::try_from(conflicts).ok())
                else {
                    return bad_value("a whole number of refused conflicting claims");
                };
                self.conflicts = Some(ConflictsBound {
                    comparison: term.comparison,
                    conflicts,
                });
            }
            Field::Is => match term.value.as_str() {
                "taken_over" if self.taken_over => return repeated("is:taken_over"),
                "taken_over" => self.taken_over = true,
                "deadline_passed" if self.deadline_passed => {
                    return repeated("is:deadline_passed");
                }
                "deadline_passed" => self.deadline_passed = true,
                "conflicted" if self.conflicted => return repeated("is:conflicted"),
                "conflicted" => self.conflicted = true,
                _ => return bad_value(IS_VALUES),
            },
            Field::Last => {
                if self.last_event.is_some() {
                    return repeated(field);
                }
                let Some(event) = HistoryEvent::ALL
                    .into_iter()
                    .find(|event| event_term(*event) == term.value)
                else {
                    return bad_value(LAST_VALUES);
                };
                self.last_event = Some(event);
            }
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
