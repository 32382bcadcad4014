//! Error metrics between a reference value and another, as running sums.
//!
//! [`ErrorStats`] keeps only sums (Σref², Σx², Σref·x, Σ(ref−x)², Σ|ref−x|,
//! max |ref−x|, count), so statistics of chunks computed on different threads
//! [`merge`](ErrorStats::merge) into exactly the statistics of the whole batch
//! (up to summation order), and no value has to be kept for the whole run.
//!
//! Definitions (ref is the reference model's value, x the other's):
//! - SQNR dB = 10·log10(Σref² / Σ(ref−x)²): +∞ when the values are equal, −∞
//!   when ref is all zeros and x is not; NaN if any value is NaN.
//! - cosine = Σref·x / √(Σref²·Σx²): 1 when both are all zeros, 0 when only
//!   one is.
//! - max and mean absolute error of ref−x.

/// Running sums of the error between a reference and another value.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct ErrorStats {
    count: u64,
    ref_sq: f64,
    other_sq: f64,
    dot: f64,
    err_sq: f64,
    abs_err: f64,
    max_abs_err: f64,
}

impl ErrorStats {
    /// The statistics of `reference` against `other` (equal lengths; extra
    /// elements of the longer one are ignored).
    pub fn of(reference: &[f64], other: &[f64]) -> ErrorStats {
        let mut s = ErrorStats::default();
        for (&r, &x) in reference.iter().zip(other) {
            let e = r - x;
            s.count += 1;
            s.ref_sq += r * r;
            s.other_sq += x * x;
            s.dot += r * x;
            s.err_sq += e * e;
            s.abs_err += e.abs();
            s.max_abs_err = nan_max(s.max_abs_err, e.abs());
        }
        s
    }

    /// Adds the statistics of more elements.
    pub fn merge(&mut self, o: &ErrorStats) {
        self.count += o.count;
        self.ref_sq += o.ref_sq;
        self.other_sq += o.other_sq;
        self.dot += o.dot;
        self.err_sq += o.err_sq;
        self.abs_err += o.abs_err;
        self.max_abs_err = nan_max(self.max_abs_err, o.max_abs_err);
    }

    /// Signal-to-quantization-noise ratio in dB (see the module docs).
    pub fn sqnr_db(&self) -> f64 {
        if self.err_sq.is_nan() || self.ref_sq.is_nan() {
            return f64::NAN;
        }
        if self.err_sq == 0.0 {
            return f64::INFINITY;
        }
        10.0 * (self.ref_sq / self.err_sq).log10()
    }

    /// Cosine similarity (see the module docs).
    pub fn cosine(&self) -> f64 {
        match (self.ref_sq == 0.0, self.other_sq == 0.0) {
            (true, true) => 1.0,
            (true, false) | (false, true) => 0.0,
            (false, false) => self.dot / (self.ref_sq * self.other_sq).sqrt(),
        }
    }

    /// The largest |ref − x|.
    pub fn max_abs_error(&self) -> f64 {
        self.max_abs_err
    }

    /// The mean |ref − x| (0 for no elements).
    pub fn mean_abs_error(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.abs_err / self.count as f64
        }
    }
}

/// The larger of `a` and `b`, NaN if either is (`f64::max` would drop a NaN,
/// hiding a NaN error).
fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_values_have_infinite_sqnr_and_cosine_1() {
        let s = ErrorStats::of(&[1.0, -2.0, 3.0], &[1.0, -2.0, 3.0]);
        assert_eq!(s.sqnr_db(), f64::INFINITY);
        assert_eq!(s.cosine(), 1.0);
        assert_eq!((s.max_abs_error(), s.mean_abs_error()), (0.0, 0.0));
    }

    #[test]
    fn sqnr_and_cosine_match_hand_computed_values() {
        // Σref² = 1 + 4 = 5; errors 0.1 and -0.2: Σe² = 0.05; 10·log10(100) = 20 dB.
        let s = ErrorStats::of(&[1.0, 2.0], &[0.9, 2.2]);
        assert!((s.sqnr_db() - 20.0).abs() < 1e-9, "{}", s.sqnr_db());
        // cos = (0.9 + 4.4) / √(5 · (0.81 + 4.84))
        let want = 5.3 / (5.0f64 * 5.65).sqrt();
        assert!((s.cosine() - want).abs() < 1e-12);
        assert!((s.max_abs_error() - 0.2).abs() < 1e-12);
        assert!((s.mean_abs_error() - 0.15).abs() < 1e-12);
        // Orthogonal and opposite vectors.
        assert_eq!(ErrorStats::of(&[1.0, 0.0], &[0.0, 1.0]).cosine(), 0.0);
        assert!((ErrorStats::of(&[1.0, 2.0], &[-1.0, -2.0]).cosine() + 1.0).abs() < 1e-12);
    }

    #[test]
    fn zeros_and_nan_are_defined() {
        assert_eq!(ErrorStats::of(&[0.0, 0.0], &[0.0, 0.0]).cosine(), 1.0);
        let s = ErrorStats::of(&[0.0, 0.0], &[1.0, 0.0]);
        assert_eq!(s.sqnr_db(), f64::NEG_INFINITY);
        assert_eq!(s.cosine(), 0.0);
        let n = ErrorStats::of(&[1.0, 2.0], &[f64::NAN, 2.0]);
        assert!(n.sqnr_db().is_nan());
        assert!(n.max_abs_error().is_nan());
    }

    #[test]
    fn merged_chunks_equal_the_whole() {
        let (r, x) = ([1.0, -2.0, 3.0, 0.5], [1.1, -2.0, 2.5, 0.0]);
        let whole = ErrorStats::of(&r, &x);
        let mut parts = ErrorStats::of(&r[..1], &x[..1]);
        parts.merge(&ErrorStats::of(&r[1..], &x[1..]));
        assert!((whole.sqnr_db() - parts.sqnr_db()).abs() < 1e-12);
        assert!((whole.cosine() - parts.cosine()).abs() < 1e-12);
        assert_eq!(whole.max_abs_error(), parts.max_abs_error());
        assert!((whole.mean_abs_error() - parts.mean_abs_error()).abs() < 1e-12);
    }
}
