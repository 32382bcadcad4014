//! The toy accelerator's own calibration method, added to qopt's range-method
//! registry from outside qopt: `insert-fakeq{method=accel-headroom}`.
//!
//! The accelerator's firmware saturates silently, so its vendor quantizes
//! with headroom: the observed min-max range widened by an eighth of its width
//! on each side, so that inputs a little beyond what calibration saw still fit.
//! It needs only the min-max statistics every observer keeps.

use qopt_quant::{ObserverStats, RangeMethod, RangeTarget};

/// Fraction of the observed width added below the minimum and above the maximum.
pub const HEADROOM: f64 = 0.125;

/// `accel-headroom`: min-max plus [`HEADROOM`] on each side.
pub struct AccelHeadroom;

impl RangeMethod for AccelHeadroom {
    fn name(&self) -> &'static str {
        "accel-headroom"
    }

    fn summary(&self) -> &'static str {
        "the toy accelerator's range: min-max widened by 1/8 of its width on each side"
    }

    fn range(&self, stats: &ObserverStats, _target: &RangeTarget) -> Result<Vec<(f64, f64)>, String> {
        Ok(stats
            .min
            .iter()
            .zip(&stats.max)
            .map(|(&lo, &hi)| {
                let (lo, hi) = (lo as f64, hi as f64);
                let margin = (hi - lo) * HEADROOM;
                (lo - margin, hi + margin)
            })
            .collect())
    }
}
