//! The confidence of a diagnosis, scored from the observations behind it:
//! how many independent sources support it and how good each is, less what
//! speaks against it. Never from the cause itself: a familiar pattern seen
//! through one caller report alone stays low.

use std::collections::BTreeSet;

use super::report::{Confidence, Level, Observation, Source};

/// What one source can add at most: measured facts (the request compared
/// byte for byte, the provider's own answer) outweigh the record's history
/// and times, which outweigh approximate counters and the policy, which
/// outweigh what the caller says it saw.
pub fn worth(source: Source) -> i32 {
    match source {
        Source::Fingerprint => 35,
        Source::Provider => 30,
        Source::History => 25,
        Source::Timing => 20,
        Source::Counters => 15,
        Source::Policy => 15,
        Source::CallerReport => 10,
    }
}

/// From this score on, a diagnosis is MEDIUM; from `HIGH`, HIGH.
pub const MEDIUM: u32 = 40;
pub const HIGH: u32 = 70;

/// Scores the observations: each source counts once for and once against
/// (a second observation of one source is not independent of the first),
/// and the score is clamped to 0-100.
pub fn score(mut observations: Vec<Observation>) -> Confidence {
    let mut counted: BTreeSet<(Source, bool)> = BTreeSet::new();
    let mut total: i32 = 0;
    for observation in &mut observations {
        let first = counted.insert((observation.source, observation.supports));
        observation.weight = match (first, observation.supports) {
            (false, _) => 0,
            (true, true) => worth(observation.source),
            (true, false) => -worth(observation.source),
        };
        total += observation.weight;
    }
    let score = u32::try_from(total.clamp(0, 100)).unwrap_or(0);
    let level = if score >= HIGH {
        Level::High
    } else if score >= MEDIUM {
        Level::Medium
    } else {
        Level::Low
    };
    Confidence {
        score,
        level,
        observations,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_caller_report_is_low_however_familiar_the_pattern() {
        let confidence = score(vec![Observation::supporting(
            Source::CallerReport,
            "timed out",
        )]);
        assert_eq!((confidence.score, confidence.level), (10, Level::Low));
    }

    #[test]
    fn independent_sources_add_up_and_repeats_of_one_source_do_not() {
        let repeated = score(vec![
            Observation::supporting(Source::CallerReport, "timed out"),
            Observation::supporting(Source::CallerReport, "timed out again"),
            Observation::supporting(Source::CallerReport, "and again"),
        ]);
        assert_eq!(repeated.score, 10);
        assert_eq!(repeated.observations[1].weight, 0);
        let independent = score(vec![
            Observation::supporting(Source::CallerReport, "timed out"),
            Observation::supporting(Source::History, "one owner"),
            Observation::supporting(Source::Timing, "lease live"),
            Observation::supporting(Source::Fingerprint, "same request"),
        ]);
        assert_eq!(independent.score, 90);
        assert_eq!(independent.level, Level::High);
    }

    #[test]
    fn what_speaks_against_lowers_the_score_and_it_never_goes_below_zero() {
        let mixed = score(vec![
            Observation::supporting(Source::History, "one owner"),
            Observation::supporting(Source::Timing, "lease live"),
            Observation::against(Source::Provider, "two effects at the provider"),
        ]);
        assert_eq!(mixed.score, 15);
        assert_eq!(mixed.level, Level::Low);
        let none = score(vec![Observation::against(Source::Fingerprint, "differs")]);
        assert_eq!(none.score, 0);
    }

    #[test]
    fn levels_change_at_their_thresholds() {
        let medium = score(vec![
            Observation::supporting(Source::History, "h"),
            Observation::supporting(Source::Counters, "c"),
        ]);
        assert_eq!((medium.score, medium.level), (40, Level::Medium));
        let high = score(vec![
            Observation::supporting(Source::Fingerprint, "f"),
            Observation::supporting(Source::Provider, "p"),
            Observation::supporting(Source::CallerReport, "r"),
        ]);
        assert_eq!((high.score, high.level), (75, Level::High));
    }
}
