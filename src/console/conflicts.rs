//! Conflicts over time: the console samples this replica's conflict
//! counters (Claims refused IDEMPOTENCY_KEY_REUSED, by operation label and
//! tenant label when metrics carry it) once a minute and keeps an hour of
//! samples, so the conflicts page can show them per minute. The counters
//! themselves are the metrics' own; nothing here counts a conflict.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, PoisonError};

use super::counters::{Whose, sum_by};

/// Minutes of samples kept.
pub const MINUTES: usize = 60;

const CLAIMS: &str = "idemd_claims_total";
const CONFLICT: (&str, &str) = ("outcome", "conflict");

/// Cumulative conflicts by (tenant label, operation label) at one moment.
type Sample = BTreeMap<(String, String), f64>;

/// Reads one sample from the metrics text.
pub fn sample(metrics_text: &str) -> Sample {
    let mut sample = Sample::new();
    // By tenant first (empty when the label is off), then by operation.
    for tenant in sum_by(metrics_text, CLAIMS, "tenant", &[CONFLICT], Whose::Everyone).keys() {
        let only: Vec<(&str, &str)> = if tenant.is_empty() {
            vec![CONFLICT]
        } else {
            vec![CONFLICT, ("tenant", tenant.as_str())]
        };
        for (operation, count) in sum_by(metrics_text, CLAIMS, "operation", &only, Whose::Everyone)
        {
            // Without the tenant label, `only` also counted series that
            // carry one; there are none: the label is on for all or none.
            sample.insert((tenant.clone(), operation), count);
        }
    }
    sample
}

/// The last hour of samples, oldest first.
#[derive(Default)]
pub struct History {
    samples: Mutex<VecDeque<Sample>>,
}

/// One operation's conflicts, as the page shows them.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub operation: String,
    /// Per minute, oldest first, ending with the minute up to `now`.
    pub per_minute: Vec<f64>,
    pub last_hour: f64,
    pub since_start: f64,
}

impl History {
    pub fn record(&self, sample: Sample) {
        let mut samples = self.samples.lock().unwrap_or_else(PoisonError::into_inner);
        if samples.len() == MINUTES {
            samples.pop_front();
        }
        samples.push_back(sample);
    }

    /// Each operation's series up to `now` (a sample taken just now), for
    /// the tenants `whose` admits (a tenant's series only when the label
    /// is on).
    pub fn series(&self, now: &Sample, whose: Whose<'_>) -> Vec<Series> {
        let samples = self.samples.lock().unwrap_or_else(PoisonError::into_inner);
        let admitted = |tenant: &str| match whose {
            Whose::Everyone => true,
            Whose::Tenant(own) => tenant == own,
        };
        let by_operation = |sample: &Sample| {
            let mut sums: BTreeMap<String, f64> = BTreeMap::new();
            for ((tenant, operation), count) in sample {
                if admitted(tenant) {
                    *sums.entry(operation.clone()).or_insert(0.0) += count;
                }
            }
            sums
        };
        let points: Vec<BTreeMap<String, f64>> = samples
            .iter()
            .chain(std::iter::once(now))
            .map(by_operation)
            .collect();
        let latest = points.last().cloned().unwrap_or_default();
        latest
            .into_iter()
            .map(|(operation, since_start)| {
                let at =
                    |point: &BTreeMap<String, f64>| point.get(&operation).copied().unwrap_or(0.0);
                let per_minute: Vec<f64> = points
                    .windows(2)
                    .map(|pair| (at(&pair[1]) - at(&pair[0])).max(0.0))
                    .collect();
                let oldest = points.first().map_or(0.0, at);
                let last_hour = if samples.len() < MINUTES {
                    since_start
                } else {
                    since_start - oldest
                };
                Series {
                    operation,
                    per_minute,
                    last_hour,
                    since_start,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(charge: u32, refund: u32, tenant: &str) -> String {
        format!(
            "idemd_claims_total{{operation=\"charge\",outcome=\"conflict\",tenant=\"{tenant}\"}} {charge}\n\
             idemd_claims_total{{operation=\"refund\",outcome=\"conflict\",tenant=\"{tenant}\"}} {refund}\n\
             idemd_claims_total{{operation=\"charge\",outcome=\"acquired\",tenant=\"{tenant}\"}} 99\n"
        )
    }

    #[test]
    fn conflicts_are_counted_per_minute_per_operation() {
        let history = History::default();
        history.record(sample(&text(0, 0, "1")));
        history.record(sample(&text(2, 0, "1")));
        let now = sample(&text(5, 1, "1"));
        let series = history.series(&now, Whose::Everyone);
        let charge = series
            .iter()
            .find(|series| series.operation == "charge")
            .expect("charge");
        assert_eq!(charge.per_minute, vec![2.0, 3.0]);
        assert_eq!((charge.last_hour, charge.since_start), (5.0, 5.0));
        let refund = series
            .iter()
            .find(|series| series.operation == "refund")
            .expect("refund");
        assert_eq!(refund.per_minute, vec![0.0, 1.0]);
    }

    #[test]
    fn a_tenant_sees_only_its_own_conflicts() {
        let history = History::default();
        let mut both = sample(&text(3, 0, "1"));
        both.extend(sample(&text(7, 0, "2")));
        assert!(
            history
                .series(&both, Whose::Tenant("1"))
                .iter()
                .all(|series| series.since_start <= 3.0)
        );
        let all = history.series(&both, Whose::Everyone);
        let charge = all
            .iter()
            .find(|series| series.operation == "charge")
            .expect("charge");
        assert_eq!(charge.since_start, 10.0);
    }
}
