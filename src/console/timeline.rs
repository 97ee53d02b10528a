//! An operation's history as a timeline: each attempt a span from its start
//! to how it ended, the stretches where the outcome was unknown, renewals
//! and refused stale or late writes counted on the attempt they hit, and
//! reconciliations and expiry as markers. Pure: built from Lookup's history
//! entries, drawn by the operation page.

use chrono::{DateTime, Utc};

use crate::proto::HistoryEntry;

/// How an attempt ended, or that it has not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanEnd {
    Running,
    Succeeded,
    Failed,
    /// RETRYABLE: certainly not applied; a later attempt runs.
    Retryable,
    /// Reported UNKNOWN, or its deadline passed, or the sweeper marked it.
    Unknown,
    /// Its owner stopped renewing and another Claim took it over.
    TakenOver,
    /// Its owner stopped renewing; nobody has taken it over yet.
    LeaseExpired,
    /// Settled from outside (a reconciliation).
    Reconciled,
}

impl SpanEnd {
    pub fn as_str(self) -> &'static str {
        match self {
            SpanEnd::Running => "running",
            SpanEnd::Succeeded => "succeeded",
            SpanEnd::Failed => "failed",
            SpanEnd::Retryable => "retryable",
            SpanEnd::Unknown => "unknown",
            SpanEnd::TakenOver => "taken over",
            SpanEnd::LeaseExpired => "lease expired",
            SpanEnd::Reconciled => "reconciled",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    pub attempt: u32,
    pub fence: u64,
    pub started: DateTime<Utc>,
    pub ended: DateTime<Utc>,
    pub end: SpanEnd,
    /// Lease renewals (coalesced entries count each renewal).
    pub renewals: u64,
    /// Writes with a superseded fence, refused.
    pub stale_writes_refused: u64,
    /// Writes after the attempt's deadline, refused.
    pub late_writes_refused: u64,
}

/// A stretch of time in which nobody knew whether the effect happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gap {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// Still unknown at the end of the timeline.
    pub open: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    pub at: DateTime<Utc>,
    pub event: String,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Timeline {
    pub spans: Vec<Span>,
    pub gaps: Vec<Gap>,
    pub markers: Vec<Marker>,
    /// Refused writes that no attempt span was open for.
    pub stray_refusals: u64,
    /// Claims of the key with another request, refused and counted
    /// (CONFLICTING_CLAIM_REFUSED): not a step of any attempt.
    pub conflicting_claims_refused: u64,
}

impl Timeline {
    /// The first and last instants the timeline covers.
    pub fn bounds(&self) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        let starts = self
            .spans
            .iter()
            .map(|span| span.started)
            .chain(self.gaps.iter().map(|gap| gap.from))
            .chain(self.markers.iter().map(|marker| marker.at));
        let ends = self
            .spans
            .iter()
            .map(|span| span.ended)
            .chain(self.gaps.iter().map(|gap| gap.to))
            .chain(self.markers.iter().map(|marker| marker.at));
        Some((starts.min()?, ends.max()?))
    }
}

fn at(entry: &HistoryEntry) -> DateTime<Utc> {
    entry
        .at
        .as_ref()
        .and_then(|at| DateTime::<Utc>::from_timestamp(at.seconds, at.nanos.max(0) as u32))
        .unwrap_or_default()
}

/// An entry stands for `count` events when the store coalesced them.
fn times(entry: &HistoryEntry) -> u64 {
    entry.count.max(1)
}

/// Builds the timeline of `history` (oldest first) as of `now`; an attempt
/// still open at the end is running, or its lease expired when
/// `lease_expired` says so.
pub fn timeline(history: &[HistoryEntry], now: DateTime<Utc>, lease_expired: bool) -> Timeline {
    let mut timeline = Timeline::default();
    let mut open_span: Option<Span> = None;
    let mut open_gap: Option<DateTime<Utc>> = None;
    let close = |timeline: &mut Timeline, span: &mut Option<Span>, when, end| {
        if let Some(mut span) = span.take() {
            span.ended = when;
            span.end = end;
            timeline.spans.push(span);
        }
    };
    for entry in history {
        let when = at(entry);
        match entry.event.as_str() {
            "CLAIMED" | "RETRY_STARTED" | "TAKEN_OVER" | "RETRIED_AFTER_FAILURE" => {
                close(&mut timeline, &mut open_span, when, SpanEnd::TakenOver);
                if let Some(from) = open_gap.take() {
                    timeline.gaps.push(Gap {
                        from,
                        to: when,
                        open: false,
                    });
                }
                open_span = Some(Span {
                    attempt: entry.attempt,
                    fence: entry.fence,
                    started: when,
                    ended: when,
                    end: SpanEnd::Running,
                    renewals: 0,
                    stale_writes_refused: 0,
                    late_writes_refused: 0,
                });
            }
            "RENEWED" => {
                if let Some(span) = open_span.as_mut() {
                    span.renewals += times(entry);
                }
            }
            "COMPLETED" => close(&mut timeline, &mut open_span, when, SpanEnd::Succeeded),
            "FAILED" => close(&mut timeline, &mut open_span, when, SpanEnd::Failed),
            "RETRY_SCHEDULED" => close(&mut timeline, &mut open_span, when, SpanEnd::Retryable),
            "OUTCOME_UNKNOWN" | "MARKED_UNKNOWN" | "DEADLINE_EXCEEDED" => {
                close(&mut timeline, &mut open_span, when, SpanEnd::Unknown);
                open_gap.get_or_insert(when);
            }
            "CONFLICTING_CLAIM_REFUSED" => timeline.conflicting_claims_refused += times(entry),
            "STALE_WRITE_REFUSED" | "LATE_WRITE_REFUSED" => {
                let stale = entry.event == "STALE_WRITE_REFUSED";
                // A refused write belongs to the attempt of its fence, which
                // may have ended already.
                let span = open_span
                    .as_mut()
                    .filter(|span| span.fence == entry.fence)
                    .or_else(|| {
                        timeline
                            .spans
                            .iter_mut()
                            .rev()
                            .find(|span| span.fence == entry.fence)
                    });
                match span {
                    Some(span) if stale => span.stale_writes_refused += times(entry),
                    Some(span) => span.late_writes_refused += times(entry),
                    None => timeline.stray_refusals += times(entry),
                }
            }
            event => {
                if event == "RECONCILED" {
                    close(&mut timeline, &mut open_span, when, SpanEnd::Reconciled);
                    if let Some(from) = open_gap.take() {
                        timeline.gaps.push(Gap {
                            from,
                            to: when,
                            open: false,
                        });
                    }
                }
                timeline.markers.push(Marker {
                    at: when,
                    event: event.to_owned(),
                    detail: entry.detail.clone(),
                });
            }
        }
    }
    if let Some(mut span) = open_span.take() {
        span.ended = now.max(span.started);
        span.end = if lease_expired {
            SpanEnd::LeaseExpired
        } else {
            SpanEnd::Running
        };
        if lease_expired {
            open_gap.get_or_insert(span.ended);
        }
        timeline.spans.push(span);
    }
    if let Some(from) = open_gap {
        timeline.gaps.push(Gap {
            from,
            to: now.max(from),
            open: true,
        });
    }
    timeline
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(event: &str, seconds: i64, attempt: u32, fence: u64) -> HistoryEntry {
        HistoryEntry {
            event: event.to_owned(),
            at: Some(pbjson_types::Timestamp {
                seconds: 1_700_000_000 + seconds,
                nanos: 0,
            }),
            attempt,
            fence,
            count: 1,
            ..Default::default()
        }
    }

    fn time(seconds: i64) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp(1_700_000_000 + seconds, 0).expect("a time")
    }

    #[test]
    fn refused_conflicting_claims_are_counted_beside_the_attempts() {
        let mut conflicts = entry("CONFLICTING_CLAIM_REFUSED", 5, 1, 1);
        conflicts.count = 4;
        let history = vec![
            entry("CLAIMED", 0, 1, 1),
            conflicts,
            entry("COMPLETED", 9, 1, 1),
        ];
        let timeline = timeline(&history, time(10), false);
        assert_eq!(timeline.conflicting_claims_refused, 4);
        assert_eq!(timeline.spans.len(), 1);
        assert_eq!(timeline.spans[0].end, SpanEnd::Succeeded);
        assert!(timeline.markers.is_empty());
    }

    #[test]
    fn attempts_become_spans_ended_by_their_outcome() {
        // (history, lease expired at the end, expected span ends, open gaps)
        let cases: Vec<(Vec<HistoryEntry>, bool, Vec<SpanEnd>, usize)> = vec![
            (
                vec![entry("CLAIMED", 0, 1, 1), entry("COMPLETED", 2, 1, 1)],
                false,
                vec![SpanEnd::Succeeded],
                0,
            ),
            (
                vec![entry("CLAIMED", 0, 1, 1)],
                false,
                vec![SpanEnd::Running],
                0,
            ),
            (
                vec![entry("CLAIMED", 0, 1, 1)],
                true,
                vec![SpanEnd::LeaseExpired],
                1,
            ),
            (
                vec![
                    entry("CLAIMED", 0, 1, 1),
                    entry("TAKEN_OVER", 30, 2, 2),
                    entry("COMPLETED", 31, 2, 2),
                ],
                false,
                vec![SpanEnd::TakenOver, SpanEnd::Succeeded],
                0,
            ),
            (
                vec![
                    entry("CLAIMED", 0, 1, 1),
                    entry("RETRY_SCHEDULED", 1, 1, 1),
                    entry("RETRY_STARTED", 5, 2, 2),
                    entry("FAILED", 6, 2, 2),
                ],
                false,
                vec![SpanEnd::Retryable, SpanEnd::Failed],
                0,
            ),
            (
                vec![
                    entry("CLAIMED", 0, 1, 1),
                    entry("FAILED", 1, 1, 1),
                    entry("RETRIED_AFTER_FAILURE", 5, 2, 2),
                    entry("COMPLETED", 6, 2, 2),
                ],
                false,
                vec![SpanEnd::Failed, SpanEnd::Succeeded],
                0,
            ),
            (
                vec![entry("CLAIMED", 0, 1, 1), entry("OUTCOME_UNKNOWN", 3, 1, 1)],
                false,
                vec![SpanEnd::Unknown],
                1,
            ),
        ];
        for (history, lease_expired, ends, open_gaps) in cases {
            let built = timeline(&history, time(100), lease_expired);
            let got: Vec<SpanEnd> = built.spans.iter().map(|span| span.end).collect();
            assert_eq!(got, ends, "{history:?}");
            assert_eq!(
                built.gaps.iter().filter(|gap| gap.open).count(),
                open_gaps,
                "{history:?}"
            );
        }
    }

    #[test]
    fn an_unknown_stretch_closes_when_reconciled_and_refusals_land_on_their_attempt() {
        let mut renewals = entry("RENEWED", 1, 1, 1);
        renewals.count = 12;
        let mut stale = entry("STALE_WRITE_REFUSED", 50, 1, 1);
        stale.count = 3;
        let history = vec![
            entry("CLAIMED", 0, 1, 1),
            renewals,
            entry("OUTCOME_UNKNOWN", 10, 1, 1),
            stale,
            entry("RECONCILED", 60, 1, 2),
            entry("LATE_WRITE_REFUSED", 61, 9, 9),
        ];
        let built = timeline(&history, time(100), false);
        assert_eq!(built.spans.len(), 1);
        let span = &built.spans[0];
        assert_eq!((span.renewals, span.stale_writes_refused), (12, 3));
        assert_eq!(
            built.gaps,
            vec![Gap {
                from: time(10),
                to: time(60),
                open: false
            }]
        );
        assert_eq!(built.markers.len(), 1);
        assert_eq!(built.markers[0].event, "RECONCILED");
        assert_eq!(built.stray_refusals, 1);
        assert_eq!(built.bounds(), Some((time(0), time(60))));
    }
}
