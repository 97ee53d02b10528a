//! What the console's one search box was given: an operation_id, a filter,
//! `operation/key`, or a key alone (every operation carrying it). Pure.

use crate::domain::filter::OperationFilter;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Search {
    /// Nothing typed: the dashboard.
    Nothing,
    OperationId(String),
    /// A filter in the CLI's language, rendered canonically.
    Filter(String),
    Scope {
        operation: String,
        key: String,
    },
}

/// Reads the search box. In this order, so that each form wins where it
/// can be meant: a UUID is an operation_id; text that parses as a filter is
/// one; `operation/key` (split at the first `/`, both sides non-empty, no
/// space in the operation name) is a scope; anything else is a key alone,
/// searched as the filter `key:"…"`.
pub fn classify(text: &str) -> Search {
    let text = text.trim();
    if text.is_empty() {
        return Search::Nothing;
    }
    if uuid::Uuid::try_parse(text).is_ok() {
        return Search::OperationId(text.to_ascii_lowercase());
    }
    if let Ok(filter) = OperationFilter::parse(text) {
        return Search::Filter(filter.to_string());
    }
    if let Some((operation, key)) = text.split_once('/')
        && !operation.is_empty()
        && !key.is_empty()
        && !operation.contains(char::is_whitespace)
    {
        return Search::Scope {
            operation: operation.to_owned(),
            key: key.to_owned(),
        };
    }
    let by_key = OperationFilter {
        key: Some(text.to_owned()),
        ..OperationFilter::default()
    };
    Search::Filter(by_key.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_form_of_the_search_box_is_told_apart() {
        let scope = |operation: &str, key: &str| Search::Scope {
            operation: operation.into(),
            key: key.into(),
        };
        let filter = |text: &str| Search::Filter(text.into());
        let cases = [
            ("", Search::Nothing),
            ("   ", Search::Nothing),
            (
                "0192F0C4-1B2A-7C3D-8E4F-5A6B7C8D9E0F",
                Search::OperationId("0192f0c4-1b2a-7c3d-8e4f-5a6b7c8d9e0f".into()),
            ),
            (
                "state:unknown op:payments.*",
                filter("state:unknown op:payments.*"),
            ),
            (
                "payments.charge/order-17",
                scope("payments.charge", "order-17"),
            ),
            ("payments.charge/a/b", scope("payments.charge", "a/b")),
            ("order-17", filter("key:order-17")),
            ("has space", filter("key:\"has space\"")),
            ("/leading", filter("key:/leading")),
            ("a b/c", filter("key:\"a b/c\"")),
        ];
        for (text, expected) in cases {
            assert_eq!(classify(text), expected, "{text:?}");
        }
    }

    #[test]
    fn a_key_alone_is_searched_by_a_filter_that_parses_back_to_it() {
        for key in ["order-17", "with \"quotes\"", "back\\slash", "ключ", "x:y"] {
            let Search::Filter(text) = classify(key) else {
                panic!("{key:?} is a key");
            };
            let parsed = OperationFilter::parse(&text).expect("the filter parses");
            assert_eq!(parsed.key.as_deref(), Some(key), "{text}");
        }
    }
}
