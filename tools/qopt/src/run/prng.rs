//! The deterministic random numbers behind `--random-inputs --seed N`.
//!
//! SplitMix64 (Steele, Lea and Flood, 2014): a 64-bit state advanced by a
//! constant and mixed by two multiply-xorshift rounds. It is tiny, passes
//! BigCrush and is fully determined by its seed on every platform, which is all
//! test inputs need; no dependency is worth it. Normal samples use the
//! Box–Muller transform, both values of each pair in turn.

/// A SplitMix64 generator with a spare normal sample.
pub(crate) struct SplitMix64 {
    state: u64,
    spare_normal: Option<f64>,
}

impl SplitMix64 {
    /// A generator whose whole sequence is determined by `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed, spare_normal: None }
    }

    /// The next 64 uniformly distributed bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), a multiple of 2^-53.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A standard normal sample (mean 0, variance 1).
    pub fn normal(&mut self) -> f64 {
        if let Some(z) = self.spare_normal.take() {
            return z;
        }
        // u1 in (0, 1] so the logarithm is finite.
        let u1 = 1.0 - self.next_f64();
        let u2 = self.next_f64();
        let radius = (-2.0 * u1.ln()).sqrt();
        let angle = std::f64::consts::TAU * u2;
        self.spare_normal = Some(radius * angle.sin());
        radius * angle.cos()
    }

    /// Uniform over the integers `lo..=hi` (`lo <= hi`), by Lemire's
    /// multiply-shift (the bias is below 2^-31 for spans up to 2^33).
    pub fn int_in(&mut self, lo: i128, hi: i128) -> i128 {
        let span = (hi - lo + 1) as u128;
        if span > u128::from(u64::MAX) {
            // The full 64-bit range: every bit pattern is one value.
            return lo + i128::from(self.next_u64());
        }
        lo + ((u128::from(self.next_u64()) * span) >> 64) as i128
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence_other_seed_other_sequence() {
        let take = |seed| {
            let mut r = SplitMix64::new(seed);
            (0..8).map(|_| r.next_u64()).collect::<Vec<_>>()
        };
        assert_eq!(take(7), take(7));
        assert_ne!(take(7), take(8));
        // The reference sequence of SplitMix64 from seed 0.
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn normal_samples_have_mean_0_and_variance_1() {
        let mut r = SplitMix64::new(42);
        let n = 20_000;
        let xs: Vec<f64> = (0..n).map(|_| r.normal()).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        assert!(mean.abs() < 0.03, "mean {mean}");
        assert!((var - 1.0).abs() < 0.05, "variance {var}");
        assert!(xs.iter().all(|x| x.is_finite()));
    }

    #[test]
    fn integers_cover_the_range_and_stay_inside() {
        let mut r = SplitMix64::new(1);
        let mut seen = [false; 16];
        for _ in 0..1000 {
            let v = r.int_in(-8, 7);
            assert!((-8..=7).contains(&v));
            seen[(v + 8) as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
        let full = r.int_in(i128::from(i64::MIN), i128::from(i64::MAX));
        assert!(i64::try_from(full).is_ok());
        assert_eq!(r.int_in(5, 5), 5);
    }
}
