//! A small seeded generator (SplitMix64): the campaign's plan is reproducible
//! from its seed, and no dependency is needed for it.

use std::time::Duration;

#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn seeded(seed: u64) -> Self {
        Self(seed)
    }

    pub(crate) fn from_entropy() -> Self {
        let mut bytes = [0u8; 8];
        // Without entropy the campaign still runs, just with a fixed seed.
        let _ = getrandom::fill(&mut bytes);
        Self(u64::from_le_bytes(bytes))
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A generator for a sub-task, independent of this one's later draws.
    pub(crate) fn fork(&mut self) -> Self {
        Self(self.next_u64())
    }

    /// Uniform in `0..bound` (0 when `bound` is 0).
    pub(crate) fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 {
            return 0;
        }
        self.next_u64() % bound
    }

    /// True with probability `probability`.
    pub(crate) fn chance(&mut self, probability: f64) -> bool {
        let unit = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        unit < probability
    }

    /// Uniform between `low` and `high` (millisecond steps).
    pub(crate) fn between(&mut self, low: Duration, high: Duration) -> Duration {
        let low_ms = low.as_millis() as u64;
        let high_ms = high.as_millis() as u64;
        Duration::from_millis(low_ms + self.below(high_ms.saturating_sub(low_ms) + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_draws() {
        let (mut first, mut second) = (Rng::seeded(7), Rng::seeded(7));
        let first: Vec<u64> = (0..5).map(|_| first.next_u64()).collect();
        let second: Vec<u64> = (0..5).map(|_| second.next_u64()).collect();
        assert_eq!(first, second);
        assert_ne!(first[0], first[1]);
    }

    #[test]
    fn draws_stay_in_their_bounds() {
        let mut rng = Rng::seeded(1);
        for _ in 0..1000 {
            assert!(rng.below(3) < 3);
            let drawn = rng.between(Duration::from_millis(5), Duration::from_millis(9));
            assert!((Duration::from_millis(5)..=Duration::from_millis(9)).contains(&drawn));
        }
        assert!(!rng.chance(0.0));
        assert!(rng.chance(1.0));
    }
}
