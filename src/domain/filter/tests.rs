//! The filter language: what parses to what, every refusal with its
//! position, and the canonical text read back to the same filter.

use std::collections::BTreeSet;

use proptest::prelude::*;
use uuid::Uuid;

use super::parse::{EQUALITY, IS_VALUES, LAST_VALUES, ORDERING, STATE_VALUES};
use super::*;
use crate::domain::model::HistoryEvent;

fn states(list: &[StateMatch]) -> BTreeSet<StateMatch> {
    list.iter().copied().collect()
}

fn parsed(text: &str) -> OperationFilter {
    OperationFilter::parse(text).unwrap_or_else(|error| panic!("{text:?} must parse: {error}"))
}

#[test]
fn filters_parse_to_what_they_say_and_render_canonically() {
    let id = Uuid::parse_str("0196e0c6-0f4e-7b1c-9d2e-3c4b5a697887").expect("a UUID");
    let cases: Vec<(&str, OperationFilter, &str)> = vec![
        ("", OperationFilter::default(), ""),
        ("  \t ", OperationFilter::default(), ""),
        (
            "state:unknown",
            OperationFilter {
                states: states(&[StateMatch::Unknown]),
                ..Default::default()
            },
            "state:unknown",
        ),
        (
            "state:unresolved,failed state:failed",
            OperationFilter {
                states: states(&[StateMatch::Failed, StateMatch::Unresolved]),
                ..Default::default()
            },
            "state:failed,unresolved",
        ),
        (
            "op:payments.*  state:in_progress,succeeded,retry_wait,expired",
            OperationFilter {
                states: states(&[
                    StateMatch::InProgress,
                    StateMatch::Succeeded,
                    StateMatch::RetryWait,
                    StateMatch::Expired,
                ]),
                operation: Some(OperationMatch::Prefix("payments.".into())),
                ..Default::default()
            },
            "state:in_progress,succeeded,retry_wait,expired op:payments.*",
        ),
        (
            "op:payments.charge",
            OperationFilter {
                operation: Some(OperationMatch::Exact("payments.charge".into())),
                ..Default::default()
            },
            "op:payments.charge",
        ),
        (
            r#"key:"order 42 \"a\" \\ b""#,
            OperationFilter {
                key: Some(r#"order 42 "a" \ b"#.into()),
                ..Default::default()
            },
            r#"key:"order 42 \"a\" \\ b""#,
        ),
        (
            r#"key:"plain""#,
            OperationFilter {
                key: Some("plain".into()),
                ..Default::default()
            },
            "key:plain",
        ),
        (
            "key:ünïcødé/42",
            OperationFilter {
                key: Some("ünïcødé/42".into()),
                ..Default::default()
            },
            "key:ünïcødé/42",
        ),
        (
            "id:0196E0C6-0F4E-7B1C-9D2E-3C4B5A697887",
            OperationFilter {
                id: Some(OperationId(id)),
                ..Default::default()
            },
            "id:0196e0c6-0f4e-7b1c-9d2e-3c4b5a697887",
        ),
        (
            "age>90s",
            OperationFilter {
                age: Some(AgeBound {
                    comparison: Comparison::Greater,
                    seconds: 90,
                }),
                ..Default::default()
            },
            "age>1m30s",
        ),
        (
            "age<=1d2h3m4s",
            OperationFilter {
                age: Some(AgeBound {
                    comparison: Comparison::LessOrEqual,
                    seconds: 86_400 + 2 * 3_600 + 3 * 60 + 4,
                }),
                ..Default::default()
            },
            "age<=1d2h3m4s",
        ),
        (
            "age>=7d",
            OperationFilter {
                age: Some(AgeBound {
                    comparison: Comparison::GreaterOrEqual,
                    seconds: 7 * 86_400,
                }),
                ..Default::default()
            },
            "age>=7d",
        ),
        (
            "age<0s",
            OperationFilter {
                age: Some(AgeBound {
                    comparison: Comparison::Less,
                    seconds: 0,
                }),
                ..Default::default()
            },
            "age<0s",
        ),
        (
            "attempts:2",
            OperationFilter {
                attempts: Some(AttemptsBound {
                    comparison: Comparison::Equal,
                    attempts: 2,
                }),
                ..Default::default()
            },
            "attempts:2",
        ),
        (
            "attempts>=3",
            OperationFilter {
                attempts: Some(AttemptsBound {
                    comparison: Comparison::GreaterOrEqual,
                    attempts: 3,
                }),
                ..Default::default()
            },
            "attempts>=3",
        ),
        (
            "is:deadline_passed is:taken_over tenant:acme",
            OperationFilter {
                taken_over: true,
                deadline_passed: true,
                tenant: Some("acme".into()),
                ..Default::default()
            },
            "is:taken_over is:deadline_passed tenant:acme",
        ),
        (
            "conflicts>3",
            OperationFilter {
                conflicts: Some(ConflictsBound {
                    comparison: Comparison::Greater,
                    conflicts: 3,
                }),
                ..Default::default()
            },
            "conflicts>3",
        ),
        (
            "conflicts:0",
            OperationFilter {
                conflicts: Some(ConflictsBound {
                    comparison: Comparison::Equal,
                    conflicts: 0,
                }),
                ..Default::default()
            },
            "conflicts:0",
        ),
        (
            "last:reconciled is:conflicted tenant:acme is:taken_over conflicts<=9223372036854775807",
            OperationFilter {
                conflicts: Some(ConflictsBound {
                    comparison: Comparison::LessOrEqual,
                    conflicts: 9_223_372_036_854_775_807,
                }),
                taken_over: true,
                conflicted: true,
                last_event: Some(HistoryEvent::Reconciled),
                tenant: Some("acme".into()),
                ..Default::default()
            },
            "conflicts<=9223372036854775807 is:taken_over is:conflicted last:reconciled tenant:acme",
        ),
        (
            "last:conflicting_claim_refused",
            OperationFilter {
                last_event: Some(HistoryEvent::ConflictingClaimRefused),
                ..Default::default()
            },
            "last:conflicting_claim_refused",
        ),
        (
            r#"last:"taken_over""#,
            OperationFilter {
                last_event: Some(HistoryEvent::TakenOver),
                ..Default::default()
            },
            "last:taken_over",
        ),
        (
            r#"tenant:"big co""#,
            OperationFilter {
                tenant: Some("big co".into()),
                ..Default::default()
            },
            r#"tenant:"big co""#,
        ),
    ];
    for (text, expected, canonical) in cases {
        let filter = parsed(text);
        assert_eq!(filter, expected, "{text:?}");
        assert_eq!(filter.to_string(), canonical, "{text:?}");
        assert_eq!(parsed(canonical), filter, "{canonical:?}");
    }
}

#[test]
fn every_refusal_names_its_position_and_what_was_expected() {
    let sixteen = "state:failed ".repeat(16);
    let seventeen = format!("{sixteen}op:x");
    let long = format!("key:{}", "k".repeat(MAX_FILTER_BYTES));
    let cases: Vec<(&str, usize, FilterProblem)> = vec![
        (
            "sate:unknown",
            1,
            FilterProblem::UnknownField {
                field: "sate".into(),
            },
        ),
        (
            "state:failed bogus",
            14,
            FilterProblem::UnknownField {
                field: "bogus".into(),
            },
        ),
        (":x", 1, FilterProblem::ExpectedField),
        ("state:failed >3", 14, FilterProblem::ExpectedField),
        (
            "state=failed",
            6,
            FilterProblem::ExpectedOperator { field: "state" },
        ),
        ("op", 3, FilterProblem::ExpectedOperator { field: "op" }),
        (
            "state>failed",
            6,
            FilterProblem::WrongOperator {
                field: "state",
                operator: ">",
                expected: EQUALITY,
            },
        ),
        (
            "age:10m",
            4,
            FilterProblem::WrongOperator {
                field: "age",
                operator: ":",
                expected: ORDERING,
            },
        ),
        (
            "state:done",
            7,
            FilterProblem::BadValue {
                field: "state",
                expected: STATE_VALUES,
            },
        ),
        (
            "state:failed,",
            7,
            FilterProblem::BadValue {
                field: "state",
                expected: STATE_VALUES,
            },
        ),
        (
            "state:",
            7,
            FilterProblem::BadValue {
                field: "state",
                expected: STATE_VALUES,
            },
        ),
        (
            "op:pay ments",
            8,
            FilterProblem::UnknownField {
                field: "ments".into(),
            },
        ),
        ("op:pay*ments", 4, op_value()),
        ("op:*", 4, op_value()),
        ("op:café", 4, op_value()),
        ("key:\"\"", 5, key_value()),
        (
            "id:not-a-uuid",
            4,
            FilterProblem::BadValue {
                field: "id",
                expected: "an operation_id (a UUID)",
            },
        ),
        ("age>10", 5, duration_value()),
        ("age>10x", 5, duration_value()),
        ("age>30m1h", 5, duration_value()),
        ("age>1h1h", 5, duration_value()),
        ("age>36501d", 5, duration_value()),
        ("age>99999999999999d", 5, duration_value()),
        ("attempts>-1", 10, attempts_value()),
        ("attempts:+1", 10, attempts_value()),
        ("attempts:4294967296", 10, attempts_value()),
        (
            "is:stale",
            4,
            FilterProblem::BadValue {
                field: "is",
                expected: IS_VALUES,
            },
        ),
        ("conflicts>-1", 11, conflicts_value()),
        ("conflicts:+1", 11, conflicts_value()),
        ("conflicts:", 11, conflicts_value()),
        // One past the column's range.
        ("conflicts>9223372036854775808", 11, conflicts_value()),
        ("state:failed last:bogus", 19, last_value()),
        ("last:TAKEN_OVER", 6, last_value()),
        ("last:", 6, last_value()),
        (
            "last>claimed",
            5,
            FilterProblem::WrongOperator {
                field: "last",
                operator: ">",
                expected: EQUALITY,
            },
        ),
        (
            "last:claimed last:renewed",
            14,
            FilterProblem::Repeated { field: "last" },
        ),
        (
            "conflicts>1 conflicts<3",
            13,
            FilterProblem::Repeated { field: "conflicts" },
        ),
        (
            "is:conflicted is:conflicted",
            15,
            FilterProblem::Repeated {
                field: "is:conflicted",
            },
        ),
        (
            "tenant:\"\"",
            8,
            FilterProblem::BadValue {
                field: "tenant",
                expected: "a tenant name of 1-255 bytes",
            },
        ),
        ("op:a op:b", 6, FilterProblem::Repeated { field: "op" }),
        ("key:a key:b", 7, FilterProblem::Repeated { field: "key" }),
        ("age>1m age<1h", 8, FilterProblem::Repeated { field: "age" }),
        (
            "attempts:1 attempts:2",
            12,
            FilterProblem::Repeated { field: "attempts" },
        ),
        (
            "is:taken_over is:taken_over",
            15,
            FilterProblem::Repeated {
                field: "is:taken_over",
            },
        ),
        (
            "tenant:a tenant:b",
            10,
            FilterProblem::Repeated { field: "tenant" },
        ),
        (
            "id:0196e0c6-0f4e-7b1c-9d2e-3c4b5a697887 id:0196e0c6-0f4e-7b1c-9d2e-3c4b5a697887",
            41,
            FilterProblem::Repeated { field: "id" },
        ),
        ("key:\"open", 5, FilterProblem::UnterminatedQuote),
        ("key:\"a\\nb\"", 7, FilterProblem::BadEscape),
        ("key:\"a\"b", 8, FilterProblem::ExpectedSpace),
        ("key:a\"b", 6, FilterProblem::QuoteNeeded),
        ("key:a\\b", 6, FilterProblem::QuoteNeeded),
        (&seventeen, 209, FilterProblem::TooManyTerms),
        (
            &long,
            MAX_FILTER_BYTES + 1,
            FilterProblem::TooLong {
                bytes: MAX_FILTER_BYTES + 4,
            },
        ),
    ];
    for (text, position, problem) in cases {
        let refused = OperationFilter::parse(text).expect_err(&format!("{text:?} must be refused"));
        assert_eq!(
            refused,
            FilterError {
                position,
                problem: problem.clone()
            },
            "{text:?}"
        );
        assert!(
            refused
                .to_string()
                .starts_with(&format!("at character {position}: ")),
            "{refused}"
        );
    }
    // Sixteen terms are allowed; a key of 255 bytes is, 256 are not.
    assert_eq!(parsed(&sixteen).states, states(&[StateMatch::Failed]));
    assert!(OperationFilter::parse(&format!("key:{}", "k".repeat(255))).is_ok());
    assert_eq!(
        OperationFilter::parse(&format!("key:{}", "k".repeat(256))),
        Err(FilterError {
            position: 5,
            problem: key_value()
        })
    );
}

#[test]
fn positions_count_characters_not_bytes() {
    assert_eq!(
        OperationFilter::parse("key:é bogus:1").map_err(|error| error.position),
        Err(7)
    );
    let multibyte = format!("key:{}", "é".repeat(600));
    assert_eq!(
        OperationFilter::parse(&multibyte).map_err(|error| error.position),
        // 4 ASCII bytes, then 510 two-byte characters fit in 1024 bytes.
        Err(4 + 510 + 1)
    );
}

fn op_value() -> FilterProblem {
    FilterProblem::BadValue {
        field: "op",
        expected: "an operation name (1-128 characters of A-Z a-z 0-9 . _ / -), \
                   or a prefix of one followed by `*`",
    }
}

fn key_value() -> FilterProblem {
    FilterProblem::BadValue {
        field: "key",
        expected: "a key of 1-255 bytes (quoted if it has spaces or quotes)",
    }
}

fn duration_value() -> FilterProblem {
    FilterProblem::BadValue {
        field: "age",
        expected: "a duration such as 90s, 10m, 2h, 7d or 1h30m (largest unit first, \
                   at most 36500d)",
    }
}

fn attempts_value() -> FilterProblem {
    FilterProblem::BadValue {
        field: "attempts",
        expected: "a whole number of attempts",
    }
}

fn conflicts_value() -> FilterProblem {
    FilterProblem::BadValue {
        field: "conflicts",
        expected: "a whole number of refused conflicting claims",
    }
}

fn last_value() -> FilterProblem {
    FilterProblem::BadValue {
        field: "last",
        expected: LAST_VALUES,
    }
}

#[test]
fn every_history_event_is_a_last_term_and_the_refusal_lists_them_all() {
    let listed = LAST_VALUES
        .trim_start_matches("a history event: ")
        .replace(" or ", ", ");
    let listed: Vec<&str> = listed.split(", ").collect();
    let events: Vec<String> = HistoryEvent::ALL.into_iter().map(event_term).collect();
    assert_eq!(listed, events);
    for event in HistoryEvent::ALL {
        let text = format!("last:{}", event_term(event));
        assert_eq!(parsed(&text).last_event, Some(event), "{text}");
        assert_eq!(parsed(&text).to_string(), text);
    }
}

fn any_text() -> impl Strategy<Value = String> {
    // Any characters, spaces, quotes, backslashes and newlines included.
    prop_oneof!["[a-z0-9]{1,12}", "(.|\n|\"|\\\\| ){1,30}",]
}

fn any_comparison() -> impl Strategy<Value = Comparison> {
    proptest::sample::select(Comparison::ALL.to_vec())
}

fn any_filter() -> impl Strategy<Value = OperationFilter> {
    let operation = prop_oneof![
        "[A-Za-z0-9._/-]{1,40}".prop_map(OperationMatch::Exact),
        "[A-Za-z0-9._/-]{1,40}".prop_map(OperationMatch::Prefix),
    ];
    let age = (any_comparison(), 0..=MAX_AGE_SECONDS).prop_map(|(comparison, seconds)| AgeBound {
        comparison: if comparison == Comparison::Equal {
            Comparison::Greater
        } else {
            comparison
        },
        seconds,
    });
    let attempts =
        (any_comparison(), any::<u32>()).prop_map(|(comparison, attempts)| AttemptsBound {
            comparison,
            attempts,
        });
    let conflicts = (any_comparison(), 0..=i64::MAX as u64).prop_map(|(comparison, conflicts)| {
        ConflictsBound {
            comparison,
            conflicts,
        }
    });
    let evidence = (
        proptest::option::of(conflicts),
        any::<bool>(),
        proptest::option::of(proptest::sample::select(HistoryEvent::ALL.to_vec())),
    );
    (
        proptest::collection::btree_set(proptest::sample::select(StateMatch::ALL.to_vec()), 0..4),
        proptest::option::of(operation),
        proptest::option::of(any_text()),
        proptest::option::of(any::<u128>().prop_map(|bits| OperationId(Uuid::from_u128(bits)))),
        proptest::option::of(age),
        proptest::option::of(attempts),
        any::<bool>(),
        any::<bool>(),
        proptest::option::of(any_text()),
        evidence,
    )
        .prop_map(
            |(
                states,
                operation,
                key,
                id,
                age,
                attempts,
                taken_over,
                deadline_passed,
                tenant,
                (conflicts, conflicted, last_event),
            )| {
                OperationFilter {
                    states,
                    operation,
                    key,
                    id,
                    age,
                    attempts,
                    taken_over,
                    deadline_passed,
                    conflicts,
                    conflicted,
                    last_event,
                    tenant,
                }
            },
        )
}

proptest! {
    #[test]
    fn the_canonical_text_parses_back_to_the_same_filter(filter in any_filter()) {
        let text = filter.to_string();
        prop_assert_eq!(OperationFilter::parse(&text), Ok(filter.clone()), "{}", text);
        // Canonical: rendering what was read gives the same text again.
        prop_assert_eq!(parsed(&text).to_string(), text);
    }

    #[test]
    fn any_text_is_parsed_or_refused_within_it(text in "(.|\n){0,80}") {
        if let Err(error) = OperationFilter::parse(&text) {
            prop_assert!(error.position >= 1);
            prop_assert!(error.position <= text.chars().count() + 1, "{}", error);
        }
    }
}

#[test]
fn a_prefix_covers_the_names_below_its_upper_bound() {
    for (prefix, upper) in [
        ("payments.", "payments/"),
        ("a_", "a`"),
        ("x/9", "x/:"),
        ("Z", "["),
    ] {
        assert_eq!(OperationMatch::prefix_upper_bound(prefix), upper);
        let below = |name: &str| name >= prefix && name < upper;
        assert!(below(&format!("{prefix}zzz")), "{prefix}");
        assert!(below(prefix));
        assert!(!below(upper));
    }
    assert!("payments.charge" < "payments/");
    assert!("payments-x" < "payments.");
}
