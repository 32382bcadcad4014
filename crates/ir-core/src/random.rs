//! [`SplitMix64`] (Steele, Lea and Flood, 2014): a 64-bit state advanced by
//! a constant and mixed by two multiply-xorshift rounds. It is tiny, passes
//! BigCrush and is fully determined by its seed on every platform, which is
//! all qopt needs of randomness (random test inputs, property tests, the
//! fuzzer's mutations); no dependency is worth it. Normal samples use the
//! Box–Muller transform, both values of each pair in turn.

/// A SplitMix64 generator with a spare normal sample.
#[derive(Clone, Debug)]
pub struct SplitMix64 {
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

    /// Uniform over the integers `lo..=hi` (`lo <= hi`; swapped bounds give
    /// `lo`), by Lemire's multiply-shift (the bias is below 2^-31 for spans up
    /// to 2^33).
    pub fn int_in(&mut self, lo: i128, hi: i128) -> i128 {
        if hi <= lo {
            return lo;
        }
        let span = (hi - lo + 1) as u128;
        if span > u128::from(u64::MAX) {
            // The full 64-bit range: every bit pattern is one value.
            return lo + i128::from(self.next_u64());
        }
        lo + ((u128::from(self.next_u64()) * span) >> 64) as i128
    }

    /// [`SplitMix64::int_in`] for `i64` bounds.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        self.int_in(lo.into(), hi.into()) as i64
    }

    /// Uniform in `[lo, hi)`, from 53 random bits.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.next_f64()
    }

    /// Uniform f32 in `[lo, hi)`, from 24 random bits.
    pub fn uniform_f32(&mut self, lo: f32, hi: f32) -> f32 {
        let unit = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * unit
    }

    /// `n` values of [`SplitMix64::uniform_f32`].
    pub fn vec_f32(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform_f32(lo, hi)).collect()
    }

    /// Uniform in `0..n` by the remainder (`n > 0`; slightly biased for huge `n`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// One of `items` (not empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}
