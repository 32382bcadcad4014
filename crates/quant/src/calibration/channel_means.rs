//! [`ChannelMeans`]: the mean of an observed value per channel, which
//! `insert-fakeq` uses to correct the bias of the layer the value feeds
//! (`bias_correction.rs`).
//!
//! An observer records means when it has a `mean_axis` (insert-observers sets
//! it on the input of a conv or dense). Each row of an observed tensor (an
//! index of its dimension 0: one sample in a batch) contributes its per-channel
//! mean, rounded once to a multiple of [`UNIT`]; the rows' contributions are
//! summed as integers. Integer sums do not depend on the order or grouping of
//! the rows, so calibrating on two threads or one, or on A then B rather than
//! A + B, gives the same bits, as for every other statistic.
//!
//! Stored attributes: `mean` (`dense<…> : tensor<Cxf64>`, the sum ÷ `mean_count`)
//! and `mean_count` (rows seen). Loading rebuilds the integer sums exactly from
//! them while a sum stays below 2^51 units (|mean| × rows below 2^27), which
//! [`ChannelMeans::observe`] and [`ChannelMeans::merge`] enforce with an error
//! rather than store an inexact sum.

use crate::calibration::batch::ObservedBatch;
use crate::channels::channel_blocks;
use qopt_dialect_fp::{attrs, shape};
use qopt_ir_core::{dense_values_f64, AttrData, Attribute, Context, DenseElements};

/// The grid each row's mean is rounded to: 2^−24.
pub const UNIT: f64 = 1.0 / (1u64 << 24) as f64;

/// The largest magnitude of a stored sum, in units, that the f64 mean
/// reproduces exactly on loading (2^51).
const MAX_SUM: i128 = 1 << 51;

/// Per-channel means of an observed value (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelMeans {
    /// The channel axis, normalized to the observed value's rank.
    pub axis: usize,
    /// Rows seen.
    pub count: i64,
    /// Per channel, the sum over rows of the row's mean in units of [`UNIT`].
    pub sums: Vec<i128>,
}

impl ChannelMeans {
    /// No data yet, for `channels` channels along `axis`.
    pub fn new(axis: usize, channels: usize) -> ChannelMeans {
        ChannelMeans { axis, count: 0, sums: vec![0; channels] }
    }

    /// Reads `mean_axis`, `mean` and `mean_count` of an observer's attribute
    /// dictionary; `None` without `mean_axis`.
    pub fn load(ctx: &Context, dict: Attribute, dims: &[i64]) -> Result<Option<ChannelMeans>, String> {
        let Some(axis) = attrs::opt_int_in(ctx, dict, "mean_axis")? else { return Ok(None) };
        let axis = shape::normalize_axis(axis, dims.len()).map_err(|e| format!("'mean_axis': {e}"))?;
        if dims[axis] < 0 {
            return Err("'mean_axis' needs a static dimension".into());
        }
        let mut means = ChannelMeans::new(axis, dims[axis] as usize);
        let count = attrs::opt_int_in(ctx, dict, "mean_count")?.unwrap_or(0);
        let values = match ctx.dict_get(dict, "mean") {
            None => return Ok(Some(means)),
            Some(attr) => match ctx.attr_data(attr) {
                AttrData::Dense(d) => {
                    dense_values_f64(ctx, d, ctx.element_type(d.ty)).ok_or("'mean' is not float data")?
                }
                _ => return Err("'mean' must be a dense tensor with one value per channel".into()),
            },
        };
        if values.len() != means.sums.len() {
            return Err(format!(
                "'mean' has {} values but 'mean_axis' has {} channels",
                values.len(),
                means.sums.len()
            ));
        }
        if count <= 0 {
            return Err("'mean' needs a positive 'mean_count'".into());
        }
        for (sum, &mean) in means.sums.iter_mut().zip(&values) {
            let units = (mean * count as f64 / UNIT).round();
            if !units.is_finite() || units.abs() >= MAX_SUM as f64 {
                return Err(format!("'mean' value {mean} over {count} rows is too large to accumulate"));
            }
            *sum = units as i128;
        }
        means.count = count;
        Ok(Some(means))
    }

    /// The same axis and channels with no data.
    pub fn empty_like(&self) -> ChannelMeans {
        ChannelMeans::new(self.axis, self.sums.len())
    }

    /// Adds every row of `batch`.
    pub fn observe(&mut self, batch: &ObservedBatch<'_>) -> Result<(), String> {
        let shape = batch.shape;
        if self.axis >= shape.len() || shape[self.axis] != self.sums.len() {
            return Err(format!(
                "observed a tensor of shape {shape:?}, whose axis {} does not have {} channels",
                self.axis,
                self.sums.len()
            ));
        }
        // Rows are the indices of dimension 0, unless the channels are on it.
        let rows = if self.axis == 0 { 1 } else { shape[0] };
        let row_len = batch.values.len() / rows.max(1);
        let per_channel = (row_len / self.sums.len().max(1)).max(1) as f64;
        let mut row_sums = vec![0.0f64; self.sums.len()];
        for row in batch.values.chunks(row_len.max(1)).take(rows) {
            row_sums.iter_mut().for_each(|s| *s = 0.0);
            for (channel, run) in channel_blocks(row, shape, self.axis) {
                row_sums[channel] += sum_f64(run);
            }
            for (sum, &s) in self.sums.iter_mut().zip(&row_sums) {
                *sum += (s / per_channel / UNIT).round() as i128;
            }
        }
        self.count += rows as i64;
        self.check()
    }

    /// Adds the rows of `later`.
    pub fn merge(&mut self, later: &ChannelMeans) -> Result<(), String> {
        if later.sums.len() != self.sums.len() {
            return Err("channel means of different sizes cannot be merged".into());
        }
        self.sums.iter_mut().zip(&later.sums).for_each(|(s, &l)| *s += l);
        self.count += later.count;
        self.check()
    }

    fn check(&self) -> Result<(), String> {
        if self.sums.iter().any(|s| s.abs() >= MAX_SUM) {
            return Err(format!(
                "the calibration data is too large in magnitude to average per channel exactly (|mean| × rows \
                 reached 2^27 after {} rows; the means serve insert-fakeq's bias correction): check the data \
                 for values far outside what the model takes; in hand-edited IR, removing 'mean_axis' from this \
                 observer calibrates without the means",
                self.count
            ));
        }
        Ok(())
    }

    /// The mean per channel (empty before any data).
    pub fn means(&self) -> Vec<f64> {
        if self.count == 0 {
            return Vec::new();
        }
        self.sums.iter().map(|&s| s as f64 * UNIT / self.count as f64).collect()
    }

    /// `mean` and `mean_count` attributes, or nothing before any data.
    pub fn attrs(&self, ctx: &mut Context) -> Result<Vec<(&'static str, Attribute)>, String> {
        if self.count == 0 {
            return Ok(Vec::new());
        }
        let f64_ty = ctx.common().f64;
        let ty = ctx.tensor_type(&[self.sums.len() as i64], f64_ty);
        let mean = ctx.dense_attr(DenseElements::from_f64(ctx, ty, &self.means())?);
        Ok(vec![("mean", mean), ("mean_count", ctx.i64_attr(self.count))])
    }
}

/// The sum of `values` in f64, in eight interleaved partial sums added in a
/// fixed order (so it vectorizes, and the result depends only on the values).
fn sum_f64(values: &[f32]) -> f64 {
    let mut lanes = [0.0f64; 8];
    let mut chunks = values.chunks_exact(8);
    for chunk in &mut chunks {
        for (lane, &v) in lanes.iter_mut().zip(chunk) {
            *lane += v as f64;
        }
    }
    let tail: f64 = chunks.remainder().iter().map(|&v| v as f64).sum();
    ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7])) + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch<'a>(values: &'a [f32], shape: &'a [usize]) -> ObservedBatch<'a> {
        ObservedBatch { values, shape, range: None }
    }

    #[test]
    fn means_per_channel_over_rows() {
        let mut m = ChannelMeans::new(1, 2);
        // Two rows of 2 channels × 2 positions.
        m.observe(&batch(&[1.0, 3.0, -2.0, -2.0, 5.0, 7.0, 0.5, 1.5], &[2, 2, 2])).unwrap();
        assert_eq!(m.count, 2);
        assert_eq!(m.means(), vec![4.0, -0.5]);
    }

    #[test]
    fn rows_in_any_grouping_give_the_same_sums() {
        let values: Vec<f32> = (0..60).map(|i| ((i * 37) % 11) as f32 * 0.1 - 0.3).collect();
        let mut whole = ChannelMeans::new(1, 3);
        whole.observe(&batch(&values, &[6, 3, 10])).unwrap();
        let mut parts = ChannelMeans::new(1, 3);
        for row in values.chunks(30) {
            let mut part = parts.empty_like();
            part.observe(&batch(row, &[3, 3, 10])).unwrap();
            parts.merge(&part).unwrap();
        }
        assert_eq!(whole, parts);
    }

    #[test]
    fn huge_sums_are_refused() {
        let mut m = ChannelMeans::new(1, 1);
        let err = m.observe(&batch(&[3.0e8], &[1, 1])).unwrap_err();
        assert!(err.contains("too large"), "{err}");
    }
}
