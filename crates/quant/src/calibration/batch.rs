//! [`ObservedBatch`]: what one interpreter call hands every observer of a
//! value, with the value range computed once for all of them.

use crate::channels::channel_blocks;

/// One batch of observed values: what one interpreter call produced for the
/// observed value, as f32 in C order (quantized values already dequantized).
pub struct ObservedBatch<'a> {
    /// The values; every one is finite (`calibrate` reports NaN and ±inf at
    /// the observer before any observer sees them).
    pub values: &'a [f32],
    /// The tensor's shape.
    pub shape: &'a [usize],
    /// The smallest and largest value (`None` for no values), computed once for
    /// every observer ([`value_range`]).
    pub range: Option<(f32, f32)>,
}

/// The smallest and largest of `values`, or `None` if there are none or any is
/// NaN or infinite. One pass in independent lanes, so it vectorizes: this runs
/// on every observed tensor of every calibration batch.
pub fn value_range(values: &[f32]) -> Option<(f32, f32)> {
    const LANES: usize = 16;
    let first = *values.first()?;
    let (mut lo, mut hi, mut bad) = ([first; LANES], [first; LANES], [false; LANES]);
    let mut chunks = values.chunks_exact(LANES);
    for chunk in &mut chunks {
        for k in 0..LANES {
            let v = chunk[k];
            lo[k] = if v < lo[k] { v } else { lo[k] };
            hi[k] = if v > hi[k] { v } else { hi[k] };
            bad[k] |= !v.is_finite();
        }
    }
    for &v in chunks.remainder() {
        lo[0] = lo[0].min(v);
        hi[0] = hi[0].max(v);
        bad[0] |= !v.is_finite();
    }
    if bad.iter().any(|&b| b) {
        return None;
    }
    let lo = lo.iter().fold(f32::INFINITY, |m, &v| m.min(v));
    let hi = hi.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    Some((lo, hi))
}

impl ObservedBatch<'_> {
    /// Calls `f(channel, value)` for every element, where `channel` is the
    /// element's coordinate along `axis` (0 for every element when `axis` is
    /// `None`).
    pub fn for_each_channel(&self, axis: Option<usize>, mut f: impl FnMut(usize, f32)) {
        let Some(axis) = axis.filter(|&a| a < self.shape.len()) else {
            self.values.iter().for_each(|&v| f(0, v));
            return;
        };
        for (channel, run) in channel_blocks(self.values, self.shape, axis) {
            run.iter().for_each(|&v| f(channel, v));
        }
    }
}
