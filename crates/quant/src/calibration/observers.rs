//! The built-in observers (see [`Observer`] for the chunk-and-merge contract):
//!
//! | name | keeps | merge |
//! |---|---|---|
//! | `minmax` | running min and max, per channel with `axis` | min of mins, max of maxes: exact in any order |
//! | `moving-average` | `min ← min + c·(batch_min − min)` per batch (f32), the first batch's own range to start | folds the later chunk's per-batch ranges in sample order |
//! | `histogram` | min and max as `minmax`, plus a [`Histogram`] on the power-of-two grid (per tensor) | re-bins onto the union's grid and adds counts: exact |
//!
//! Every observer counts batches in `samples`.

use crate::calibration::batch::{value_range, ObservedBatch};
use crate::calibration::histogram::Histogram;
use crate::calibration::methods::Observer;
use crate::calibration::stats::ObserverStats;
use std::sync::Arc;

/// The default `bins` of the histogram observer.
pub const DEFAULT_BINS: usize = 2048;

/// The default `averaging_constant` of the moving-average observer (PyTorch's).
pub const DEFAULT_AVERAGING_CONSTANT: f32 = 0.01;

/// The built-in observers, default first.
pub(crate) fn builtin() -> Vec<Arc<dyn Observer>> {
    vec![Arc::new(MinMax), Arc::new(MovingAverage), Arc::new(HistogramObserver)]
}

/// Per-channel (min, max) of one batch.
fn batch_range(stats: &ObserverStats, batch: &ObservedBatch<'_>) -> (Vec<f32>, Vec<f32>) {
    let mut lo = vec![f32::INFINITY; stats.channels];
    let mut hi = vec![f32::NEG_INFINITY; stats.channels];
    if stats.axis.is_none() {
        (lo[0], hi[0]) = batch.range.or_else(|| value_range(batch.values)).unwrap_or((lo[0], hi[0]));
    } else {
        batch.for_each_channel(stats.axis, |c, v| {
            lo[c] = lo[c].min(v);
            hi[c] = hi[c].max(v);
        });
    }
    (lo, hi)
}

/// `minmax`: the running minimum and maximum.
pub struct MinMax;

impl Observer for MinMax {
    fn name(&self) -> &'static str {
        "minmax"
    }
    fn summary(&self) -> &'static str {
        "running minimum and maximum (per channel with 'axis')"
    }
    fn observe(&self, partial: &mut ObserverStats, batch: &ObservedBatch<'_>) -> Result<(), String> {
        if batch.values.is_empty() {
            return Ok(());
        }
        let (lo, hi) = batch_range(partial, batch);
        partial.widen(&lo, &hi);
        partial.samples += 1;
        Ok(())
    }
    fn merge(&self, stats: &mut ObserverStats, later: ObserverStats) -> Result<(), String> {
        if later.has_data() {
            stats.widen(&later.min, &later.max);
        }
        stats.samples += later.samples;
        Ok(())
    }
}

/// `moving-average`: an exponential moving average of each batch's min and max.
pub struct MovingAverage;

impl Observer for MovingAverage {
    fn name(&self) -> &'static str {
        "moving-average"
    }
    fn summary(&self) -> &'static str {
        "exponential moving average of each batch's min and max ('averaging_constant')"
    }
    fn observe(&self, partial: &mut ObserverStats, batch: &ObservedBatch<'_>) -> Result<(), String> {
        if batch.values.is_empty() {
            return Ok(());
        }
        partial.batch_ranges.push(batch_range(partial, batch));
        partial.samples += 1;
        Ok(())
    }
    fn merge(&self, stats: &mut ObserverStats, later: ObserverStats) -> Result<(), String> {
        let c = stats.averaging_constant.unwrap_or(DEFAULT_AVERAGING_CONSTANT);
        for (lo, hi) in later.batch_ranges {
            if !stats.has_data() {
                stats.min = lo;
                stats.max = hi;
                continue;
            }
            for (m, v) in stats.min.iter_mut().zip(lo) {
                *m += c * (v - *m);
            }
            for (m, v) in stats.max.iter_mut().zip(hi) {
                *m += c * (v - *m);
            }
        }
        stats.samples += later.samples;
        Ok(())
    }
}

/// `histogram`: min and max plus a histogram of every value.
pub struct HistogramObserver;

impl Observer for HistogramObserver {
    fn name(&self) -> &'static str {
        "histogram"
    }
    fn summary(&self) -> &'static str {
        "min, max and an exactly mergeable histogram of 'bins' bins (per tensor)"
    }
    fn check(&self, stats: &ObserverStats) -> Result<(), String> {
        if stats.axis.is_some() {
            return Err("the histogram observer is per tensor; remove 'axis' or use 'minmax'".into());
        }
        Ok(())
    }
    fn observe(&self, partial: &mut ObserverStats, batch: &ObservedBatch<'_>) -> Result<(), String> {
        let bins = partial.bins.unwrap_or(DEFAULT_BINS);
        let histogram = partial.histogram.get_or_insert_with(|| Histogram::empty(bins));
        let counted = match batch.range {
            Some(range) => histogram.add_in_range(batch.values, range)?,
            None => histogram.add_observed(batch.values)?,
        };
        if let Some((lo, hi)) = counted {
            partial.widen(&[lo], &[hi]);
            partial.samples += 1;
        }
        Ok(())
    }
    fn merge(&self, stats: &mut ObserverStats, later: ObserverStats) -> Result<(), String> {
        if let Some(h) = &later.histogram {
            let bins = stats.bins.unwrap_or(h.bins());
            stats.histogram.get_or_insert_with(|| Histogram::empty(bins)).merge(h)?;
        }
        MinMax.merge(stats, later)
    }
}
