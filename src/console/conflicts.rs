//! The conflicts page's numbers: Claims refused with IDEMPOTENCY_KEY_REUSED,
//! grouped by operation name over the last day, from the database (every
//! replica's refusals), not from this replica's counters.
//!
//! The page reads them through the API like every other page: one
//! ListOperations of `is:conflicted` (the operations whose refused Claims
//! were counted, `Operation.conflicts`, with `last_conflict_at`), newest
//! first, at most [`READ`] operations, tenant-scoped as the credential is
//! (an admin's across tenants, with the tenant on each row). Each operation
//! places all its refusals in the hour of its last one: the per-hour shape
//! is as exact as that, and the totals are exact for the operations read.

use std::collections::HashMap;

use chrono::{DateTime, TimeDelta, Utc};

use crate::proto::Operation;
use crate::support::format;

/// The window, in hours, oldest first on the page.
pub const WINDOW_HOURS: usize = 24;
/// Operations one page read reads: one ListOperations page.
pub const READ: u32 = 1000;
/// The filter the page reads by.
pub const FILTER: &str = "is:conflicted";

/// One operation name's refusals in the window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// Named only in an admin's listing (across tenants).
    pub tenant: String,
    pub operation: String,
    /// Refusals per hour, oldest first, each operation's counted at the hour
    /// of its last refusal.
    pub per_hour: Vec<u64>,
    pub refusals: u64,
    /// Operations (keys) refused.
    pub operations: u64,
    pub last_at: DateTime<Utc>,
}

/// Groups `operations` by tenant and name, keeping those whose last refusal
/// was within the window before `now`; most refusals first.
pub fn groups(operations: &[Operation], now: DateTime<Utc>) -> Vec<Group> {
    let hours = i64::try_from(WINDOW_HOURS).unwrap_or(i64::MAX);
    let mut grouped: HashMap<(String, String), Group> = HashMap::new();
    for operation in operations {
        let Some(last) = format::timestamp(operation.last_conflict_at.as_ref()) else {
            continue;
        };
        if operation.conflicts == 0 {
            continue;
        }
        // The database's clock may run a little ahead of this replica's.
        let hours_ago = (now - last).max(TimeDelta::zero()).num_hours();
        if hours_ago >= hours {
            continue;
        }
        let bucket = WINDOW_HOURS - 1 - usize::try_from(hours_ago).unwrap_or(0);
        let name = operation
            .scope
            .as_ref()
            .map(|scope| scope.operation.clone())
            .unwrap_or_default();
        let group = grouped
            .entry((operation.tenant.clone(), name.clone()))
            .or_insert_with(|| Group {
                tenant: operation.tenant.clone(),
                operation: name,
                per_hour: vec![0; WINDOW_HOURS],
                refusals: 0,
                operations: 0,
                last_at: last,
            });
        group.per_hour[bucket] = group.per_hour[bucket].saturating_add(operation.conflicts);
        group.refusals = group.refusals.saturating_add(operation.conflicts);
        group.operations += 1;
        group.last_at = group.last_at.max(last);
    }
    let mut groups: Vec<Group> = grouped.into_values().collect();
    groups.sort_by(|a, b| {
        b.refusals
            .cmp(&a.refusals)
            .then_with(|| a.tenant.cmp(&b.tenant))
            .then_with(|| a.operation.cmp(&b.operation))
    });
    groups
}

/// The operation list a group links to: its conflicted operations.
pub fn group_filter(group: &Group) -> String {
    let mut filter = format!("{FILTER} op:{}", group.operation);
    if !group.tenant.is_empty() {
        let quoted = group.tenant.replace('\\', "\\\\").replace('"', "\\\"");
        filter.push_str(&format!(" tenant:\"{quoted}\""));
    }
    filter
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Scope;

    fn refused(tenant: &str, name: &str, conflicts: u64, at: DateTime<Utc>) -> Operation {
        Operation {
            tenant: tenant.into(),
            scope: Some(Scope {
                operation: name.into(),
                key: "k".into(),
            }),
            conflicts,
            last_conflict_at: Some(pbjson_types::Timestamp {
                seconds: at.timestamp(),
                nanos: 0,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn refusals_are_grouped_by_tenant_and_name_in_the_hour_of_the_last_one() {
        let now = DateTime::parse_from_rfc3339("2026-12-03T12:00:00Z")
            .expect("valid")
            .to_utc();
        let hour = TimeDelta::hours(1);
        let groups = groups(
            &[
                refused("", "payments.charge", 3, now - TimeDelta::minutes(5)),
                refused(
                    "",
                    "payments.charge",
                    2,
                    now - hour * 2 - TimeDelta::minutes(1),
                ),
                refused("", "emails.send", 1, now - TimeDelta::minutes(1)),
                // Outside the window: left out.
                refused("", "emails.send", 9, now - hour * 25),
                // Another tenant's (an admin's listing): its own group.
                refused("b", "payments.charge", 1, now),
            ],
            now,
        );
        let summary: Vec<_> = groups
            .iter()
            .map(|g| {
                (
                    g.tenant.as_str(),
                    g.operation.as_str(),
                    g.refusals,
                    g.operations,
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("", "payments.charge", 5, 2),
                ("", "emails.send", 1, 1),
                ("b", "payments.charge", 1, 1),
            ]
        );
        let charge = &groups[0].per_hour;
        assert_eq!(charge.len(), WINDOW_HOURS);
        assert_eq!(charge[WINDOW_HOURS - 1], 3);
        assert_eq!(charge[WINDOW_HOURS - 3], 2);
        assert_eq!(charge.iter().sum::<u64>(), 5);
        assert_eq!(group_filter(&groups[0]), "is:conflicted op:payments.charge");
        assert_eq!(
            group_filter(&groups[2]),
            "is:conflicted op:payments.charge tenant:\"b\""
        );
    }
}
