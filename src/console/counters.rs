//! The dashboard's numbers, read from this replica's own metrics (the text
//! `/metrics` serves), so the console and Prometheus never disagree. Pure.

use std::collections::BTreeMap;

/// One sample of the Prometheus text exposition: metric name, labels, value.
type Sample<'a> = (&'a str, Vec<(&'a str, &'a str)>, f64);

/// One sample line of the Prometheus text exposition. None for comments,
/// blank lines and anything else.
fn sample(line: &str) -> Option<Sample<'_>> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let (series, value) = line.rsplit_once(' ')?;
    let value: f64 = value.parse().ok()?;
    let Some((name, labels)) = series.split_once('{') else {
        return Some((series, Vec::new(), value));
    };
    let labels = labels.strip_suffix('}')?;
    // The values idemd's metrics carry are fixed names, ids and allow-listed
    // operation names: none holds `",` (the exporter would escape a quote).
    let pairs = labels
        .split("\",")
        .filter(|pair| !pair.is_empty())
        .filter_map(|pair| {
            let (label, value) = pair.split_once("=\"")?;
            Some((label, value.trim_end_matches('"')))
        })
        .collect();
    Some((name, pairs, value))
}

/// Which series count: all of them, or only one tenant's (when metrics
/// carry the tenant label, a non-admin sees only its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Whose<'a> {
    Everyone,
    Tenant(&'a str),
}

/// The sum of `name`'s series, by the value of `by` (absent: ""), counting
/// only the series that carry `label=value` for every pair of `only`.
pub fn sum_by(
    text: &str,
    name: &str,
    by: &str,
    only: &[(&str, &str)],
    whose: Whose<'_>,
) -> BTreeMap<String, f64> {
    let mut sums = BTreeMap::new();
    for (series, labels, value) in text.lines().filter_map(sample) {
        if series != name {
            continue;
        }
        let label = |wanted: &str| {
            labels
                .iter()
                .find(|(label, _)| *label == wanted)
                .map(|(_, value)| *value)
        };
        if only
            .iter()
            .any(|(wanted, value)| label(wanted) != Some(*value))
        {
            continue;
        }
        if let Whose::Tenant(tenant) = whose
            && label("tenant") != Some(tenant)
        {
            continue;
        }
        *sums
            .entry(label(by).unwrap_or_default().to_owned())
            .or_insert(0.0) += value;
    }
    sums
}

/// The sum of every series of `name` that `only` and `whose` admit.
pub fn total(text: &str, name: &str, only: &[(&str, &str)], whose: Whose<'_>) -> f64 {
    // Not `.sum()`: an f64 sum of nothing is -0, which a page would show.
    sum_by(text, name, "", only, whose)
        .values()
        .fold(0.0, |total, value| total + value)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# HELP idemd_claims_total Claims by outcome.
# TYPE idemd_claims_total counter
idemd_claims_total{operation="payments.charge",outcome="acquired",tenant="1"} 5
idemd_claims_total{operation="payments.charge",outcome="conflict",tenant="1"} 2
idemd_claims_total{operation="other",outcome="conflict",tenant="2"} 3
idemd_claims_total{operation="other",outcome="replayed",tenant="2"} 7
idemd_unresolved_operations 4
idemd_claim_wait_seconds_bucket{le="0.5"} 9
"#;

    #[test]
    fn series_are_summed_by_a_label_and_narrowed_by_others() {
        let conflicts = sum_by(
            TEXT,
            "idemd_claims_total",
            "operation",
            &[("outcome", "conflict")],
            Whose::Everyone,
        );
        assert_eq!(conflicts.get("payments.charge"), Some(&2.0));
        assert_eq!(conflicts.get("other"), Some(&3.0));
        let outcomes = sum_by(TEXT, "idemd_claims_total", "outcome", &[], Whose::Everyone);
        assert_eq!(outcomes.get("replayed"), Some(&7.0));
        assert_eq!(
            total(TEXT, "idemd_unresolved_operations", &[], Whose::Everyone),
            4.0
        );
        let none = total(TEXT, "idemd_claims_wait", &[], Whose::Everyone);
        assert!(none == 0.0 && none.is_sign_positive(), "{none}");
    }

    #[test]
    fn a_tenant_sees_only_its_own_series() {
        let own = sum_by(
            TEXT,
            "idemd_claims_total",
            "outcome",
            &[],
            Whose::Tenant("1"),
        );
        assert_eq!(own.get("acquired"), Some(&5.0));
        assert_eq!(own.get("replayed"), None);
        assert_eq!(
            total(TEXT, "idemd_unresolved_operations", &[], Whose::Tenant("1")),
            0.0,
            "a series without the tenant label is nobody's own"
        );
    }
}
