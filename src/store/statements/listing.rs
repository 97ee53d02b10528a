//! ListOperations' statement, built from the filter's terms: SQL text that
//! comes only from this file's literals, and values that are only ever bound
//! ([`Piece`]), never formatted into the text. The pieces are the same for
//! both databases; `bind.rs` pushes them into sqlx's `QueryBuilder`, which
//! writes each database's own placeholders.
//!
//! Every time is compared with the database clock `now` read in the same
//! transaction: an age is `created_at` against `now - age`, a lease or an
//! attempt deadline against `now`.

use chrono::{DateTime, TimeDelta, Utc};
use uuid::Uuid;

use super::super::sql::{operation_columns, unresolved_sql};
use crate::domain::filter::{Comparison, OperationMatch};
use crate::domain::{ListOrder, OperationsQuery, TenantSelection};

/// One piece of the statement: text, or a value to bind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    Sql(&'static str),
    Text(String),
    Integer(i64),
    Id(Uuid),
    Moment(DateTime<Utc>),
}

/// The statement for one page of `query` at `now`.
pub(crate) fn operations_statement(query: &OperationsQuery, now: DateTime<Utc>) -> Vec<Piece> {
    let mut pieces = vec![Piece::Sql(concat!(
        "SELECT ",
        operation_columns!(),
        // By the tenants' primary key, one lookup per row of the page.
        ", (SELECT name FROM tenants WHERE tenants.tenant_id = operations.tenant_id) \
         AS tenant_name FROM operations WHERE TRUE"
    ))];
    let filter = &query.filter;
    match &query.tenants {
        TenantSelection::Own(tenant) => {
            pieces.extend([Piece::Sql(" AND tenant_id = "), Piece::Integer(tenant.0)]);
        }
        TenantSelection::Named(name) => pieces.extend([
            Piece::Sql(" AND tenant_id IN (SELECT tenant_id FROM tenants WHERE name = "),
            Piece::Text(name.clone()),
            Piece::Sql(")"),
        ]),
        TenantSelection::All => {}
    }
    if !filter.states.is_empty() {
        // Any one of the states: the stored ones by name, `unresolved` by
        // the rule ListUnresolved reads with.
        pieces.push(Piece::Sql(" AND (FALSE"));
        let stored: Vec<&'static str> = filter
            .states
            .iter()
            .filter_map(|state| state.stored())
            .map(|state| state.as_str())
            .collect();
        if let Some((first, rest)) = stored.split_first() {
            pieces.extend([
                Piece::Sql(" OR state IN ("),
                Piece::Text((*first).to_owned()),
            ]);
            for state in rest {
                pieces.extend([Piece::Sql(", "), Piece::Text((*state).to_owned())]);
            }
            pieces.push(Piece::Sql(")"));
        }
        if filter.states.len() > stored.len() {
            pieces.extend([
                Piece::Sql(concat!(" OR (", unresolved_sql!(@before_now))),
                Piece::Moment(now),
                Piece::Sql("))"),
            ]);
        }
        pieces.push(Piece::Sql(")"));
    }
    match &filter.operation {
        Some(OperationMatch::Exact(name)) => {
            pieces.extend([Piece::Sql(" AND operation = "), Piece::Text(name.clone())]);
        }
        Some(OperationMatch::Prefix(prefix)) => pieces.extend([
            Piece::Sql(" AND operation >= "),
            Piece::Text(prefix.clone()),
            Piece::Sql(" AND operation < "),
            Piece::Text(OperationMatch::prefix_upper_bound(prefix)),
        ]),
        None => {}
    }
    if let Some(key) = &filter.key {
        pieces.extend([
            Piece::Sql(" AND idempotency_key = "),
            Piece::Text(key.clone()),
        ]);
    }
    if let Some(id) = filter.id {
        pieces.extend([Piece::Sql(" AND operation_id = "), Piece::Id(id.0)]);
    }
    if let Some(age) = filter.age {
        // age = now - created_at, so `age > d` is `created_at < now - d`:
        // the comparison turns around. The parser caps an age far inside
        // chrono's range; saturating keeps that a non-issue here too.
        let seconds = i64::try_from(age.seconds).unwrap_or(i64::MAX);
        let born_by = TimeDelta::try_seconds(seconds)
            .and_then(|age| now.checked_sub_signed(age))
            .unwrap_or(DateTime::<Utc>::MIN_UTC);
        let created = match age.comparison {
            Comparison::Greater => " AND created_at < ",
            Comparison::GreaterOrEqual => " AND created_at <= ",
            Comparison::Less => " AND created_at > ",
            Comparison::LessOrEqual => " AND created_at >= ",
            Comparison::Equal => " AND created_at = ",
        };
        pieces.extend([Piece::Sql(created), Piece::Moment(born_by)]);
    }
    if let Some(attempts) = filter.attempts {
        let attempt = match attempts.comparison {
            Comparison::Equal => " AND attempt = ",
            Comparison::Greater => " AND attempt > ",
            Comparison::GreaterOrEqual => " AND attempt >= ",
            Comparison::Less => " AND attempt < ",
            Comparison::LessOrEqual => " AND attempt <= ",
        };
        pieces.extend([
            Piece::Sql(attempt),
            Piece::Integer(i64::from(attempts.attempts)),
        ]);
    }
    if let Some(conflicts) = filter.conflicts {
        let counted = match conflicts.comparison {
            Comparison::Equal => " AND conflicts = ",
            Comparison::Greater => " AND conflicts > ",
            Comparison::GreaterOrEqual => " AND conflicts >= ",
            Comparison::Less => " AND conflicts < ",
            Comparison::LessOrEqual => " AND conflicts <= ",
        };
        // The parser keeps the count within the column's range.
        let conflicts = i64::try_from(conflicts.conflicts).unwrap_or(i64::MAX);
        pieces.extend([Piece::Sql(counted), Piece::Integer(conflicts)]);
    }
    if filter.taken_over {
        pieces.push(Piece::Sql(" AND taken_over_fence IS NOT NULL"));
    }
    if filter.conflicted {
        pieces.push(Piece::Sql(" AND conflicts > 0"));
    }
    if let Some(event) = filter.last_event {
        // The latest history entry, by the history's primary key
        // (operation_id, sequence) read backwards: one index probe per row
        // the listing reads, no column to maintain on every write.
        pieces.extend([
            Piece::Sql(
                " AND (SELECT h.event FROM operation_history AS h \
                 WHERE h.operation_id = operations.operation_id \
                 ORDER BY h.sequence DESC LIMIT 1) = ",
            ),
            Piece::Text(event.as_str().to_owned()),
        ]);
    }
    if filter.deadline_passed {
        // `OperationRecord::attempt_deadline_passed`: no deadline, or one at
        // or before now.
        pieces.extend([
            Piece::Sql(
                " AND state IN ('in_progress', 'unknown') \
                 AND (attempt_deadline_at IS NULL OR attempt_deadline_at <= ",
            ),
            Piece::Moment(now),
            Piece::Sql(")"),
        ]);
    }
    let (after, order) = match query.order {
        ListOrder::OldestFirst => (
            " AND (created_at, operation_id) > (",
            " ORDER BY created_at, operation_id LIMIT ",
        ),
        ListOrder::NewestFirst => (
            " AND (created_at, operation_id) < (",
            " ORDER BY created_at DESC, operation_id DESC LIMIT ",
        ),
    };
    if let Some((created_at, operation_id)) = query.after {
        pieces.extend([
            Piece::Sql(after),
            Piece::Moment(created_at),
            Piece::Sql(", "),
            Piece::Id(operation_id.0),
            Piece::Sql(")"),
        ]);
    }
    pieces.extend([Piece::Sql(order), Piece::Integer(i64::from(query.limit))]);
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{OperationFilter, TenantId};

    fn statement(filter: &str, tenants: TenantSelection) -> (String, Vec<Piece>) {
        let query = OperationsQuery {
            filter: OperationFilter::parse(filter).expect("a valid filter"),
            tenants,
            order: ListOrder::OldestFirst,
            limit: 10,
            after: None,
        };
        let pieces = operations_statement(&query, DateTime::<Utc>::UNIX_EPOCH);
        let text = pieces
            .iter()
            .map(|piece| match piece {
                Piece::Sql(text) => (*text).to_owned(),
                _ => "?".to_owned(),
            })
            .collect();
        let values = pieces
            .into_iter()
            .filter(|piece| !matches!(piece, Piece::Sql(_)))
            .collect();
        (text, values)
    }

    #[test]
    fn caller_input_is_only_ever_bound() {
        let hostile = r#"key:"x' OR 1=1 --" tenant:"t'; DROP TABLE operations; --""#;
        let (text, values) = statement(hostile, TenantSelection::Named("t'; DROP".into()));
        assert!(!text.contains("OR 1=1"), "{text}");
        assert!(!text.contains("DROP"), "{text}");
        assert!(values.contains(&Piece::Text("x' OR 1=1 --".into())));
    }

    #[test]
    fn conflict_and_last_event_terms_bind_their_values() {
        let (text, values) = statement(
            "conflicts>=3 is:conflicted last:taken_over",
            TenantSelection::Own(TenantId(3)),
        );
        assert!(text.contains(" AND conflicts >= ?"), "{text}");
        assert!(text.contains(" AND conflicts > 0"), "{text}");
        assert!(
            text.contains("ORDER BY h.sequence DESC LIMIT 1) = ?"),
            "{text}"
        );
        assert_eq!(
            values,
            vec![
                Piece::Integer(3),
                Piece::Integer(3),
                Piece::Text("TAKEN_OVER".into()),
                Piece::Integer(10),
            ]
        );
    }

    #[test]
    fn unresolved_is_listunresolveds_rule_and_prefixes_are_ranges() {
        let (text, values) = statement(
            "state:unresolved,failed op:pay*",
            TenantSelection::Own(TenantId(3)),
        );
        assert!(text.contains(unresolved_sql!(@before_now)), "{text}");
        assert!(text.contains("operation >= ? AND operation < ?"), "{text}");
        assert_eq!(
            values,
            vec![
                Piece::Integer(3),
                Piece::Text("failed".into()),
                Piece::Moment(DateTime::<Utc>::UNIX_EPOCH),
                Piece::Text("pay".into()),
                Piece::Text("paz".into()),
                Piece::Integer(10),
            ]
        );
    }
}
