//! [`ObserverStats`]: the statistics of one `qnn.observe`, read from and written
//! back to its attributes (`docs/quant-semantics.md` §8).
//!
//! Every statistic lives in the IR, so this record is the whole state of an
//! observer between passes: `calibrate` loads it, folds data in and stores it;
//! `insert-fakeq` loads it and asks a range method for a range. Storing what was
//! loaded reproduces the attributes (floats are f32 both ways, counts i64), which
//! is what makes "calibrate on A, save, calibrate on B" equal "calibrate on A + B".

use crate::calibration::channel_means::ChannelMeans;
use crate::calibration::histogram::Histogram;
use qopt_dialect_fp::{attrs, shape};
use qopt_ir_core::{
    dense_values_f64, dense_values_i128, AttrData, Attribute, Context, DenseElements, Module, OpId,
};

/// The attributes of a `qnn.observe` that this record owns; others are kept as they are.
const OWNED: [&str; 9] =
    ["min", "max", "samples", "histogram", "hist_min", "hist_max", "observer", "mean", "mean_count"];

/// Statistics and configuration of one observer.
#[derive(Clone, Debug, PartialEq)]
pub struct ObserverStats {
    /// The observer kind (`observer` attribute; `minmax` when absent).
    pub observer: String,
    /// The per-channel axis, normalized to the operand's rank.
    pub axis: Option<usize>,
    /// Number of channels: the axis' size, or 1 without an axis.
    pub channels: usize,
    /// Running minimum per channel; empty until data was seen.
    pub min: Vec<f32>,
    /// Running maximum per channel; empty until data was seen.
    pub max: Vec<f32>,
    /// Batches observed.
    pub samples: i64,
    /// Histogram size to collect (`bins`).
    pub bins: Option<usize>,
    /// Moving-average weight of the newest batch (`averaging_constant`).
    pub averaging_constant: Option<f32>,
    /// The percentile a percentile range method uses for this value (`percentile`).
    pub percentile: Option<f64>,
    /// Collected histogram, if any.
    pub histogram: Option<Histogram>,
    /// Per-channel means, when the observer has a `mean_axis`.
    pub means: Option<ChannelMeans>,
    /// Per-batch (min, max) per channel that a chunk keeps for an observer
    /// whose merge depends on batch order (`moving-average`); never stored.
    pub batch_ranges: Vec<(Vec<f32>, Vec<f32>)>,
}

impl ObserverStats {
    /// Reads the observe op `op` (its attributes and operand type).
    pub fn load(ctx: &Context, module: &Module, op: OpId) -> Result<ObserverStats, String> {
        let dict = module.op_attrs(op);
        let observer = attrs::string_in(ctx, dict, "observer", "minmax")?.to_string();
        let operand_ty = module.value_type(module.operand(op, 0));
        let dims = ctx.tensor_shape(operand_ty).ok_or("the observed value is not a ranked tensor")?.to_vec();
        let axis = match attrs::opt_int_in(ctx, dict, "axis")? {
            Some(a) => Some(shape::normalize_axis(a, dims.len()).map_err(|e| format!("'axis': {e}"))?),
            None => None,
        };
        let channels = match axis {
            Some(a) if dims[a] < 0 => {
                return Err("per-channel statistics need a static channel dimension".into())
            }
            Some(a) => dims[a] as usize,
            None => 1,
        };
        let (min, max) = match (ctx.dict_get(dict, "min"), ctx.dict_get(dict, "max")) {
            (Some(lo), Some(hi)) => {
                (f32_values(ctx, lo, channels, "min")?, f32_values(ctx, hi, channels, "max")?)
            }
            _ => (Vec::new(), Vec::new()),
        };
        let samples = attrs::opt_int_in(ctx, dict, "samples")?.unwrap_or(0);
        let bins = attrs::opt_int_in(ctx, dict, "bins")?.map(|b| b.max(1) as usize);
        let averaging_constant = attrs::opt_float_in(ctx, dict, "averaging_constant")?.map(|c| c as f32);
        let percentile = attrs::opt_float_in(ctx, dict, "percentile")?;
        let histogram = match ctx.dict_get(dict, "histogram") {
            Some(h) => {
                let counts = match ctx.attr_data(h) {
                    AttrData::Dense(d) => {
                        dense_values_i128(ctx, d).ok_or("'histogram' is not integer data")?
                    }
                    _ => return Err("'histogram' must be a dense tensor of counts".into()),
                };
                let counts: Vec<i64> = counts.into_iter().map(|c| c as i64).collect();
                let lo = attrs::opt_float_in(ctx, dict, "hist_min")?.ok_or("'histogram' needs 'hist_min'")?;
                let hi = attrs::opt_float_in(ctx, dict, "hist_max")?.ok_or("'histogram' needs 'hist_max'")?;
                Some(Histogram::from_stored(counts, lo as f32, hi as f32)?)
            }
            None => None,
        };
        let means = ChannelMeans::load(ctx, dict, &dims)?;
        Ok(ObserverStats {
            observer,
            axis,
            channels,
            min,
            max,
            samples,
            bins,
            averaging_constant,
            percentile,
            histogram,
            means,
            batch_ranges: Vec::new(),
        })
    }

    /// The same configuration with no data: where a calibration chunk starts.
    pub fn empty_like(&self) -> ObserverStats {
        ObserverStats {
            min: Vec::new(),
            max: Vec::new(),
            samples: 0,
            histogram: None,
            means: self.means.as_ref().map(ChannelMeans::empty_like),
            batch_ranges: Vec::new(),
            ..self.clone()
        }
    }

    /// Whether any data was observed.
    pub fn has_data(&self) -> bool {
        !self.min.is_empty()
    }

    /// Widens the running min/max with `(lo, hi)` per channel.
    pub fn widen(&mut self, lo: &[f32], hi: &[f32]) {
        if self.min.is_empty() {
            self.min = lo.to_vec();
            self.max = hi.to_vec();
            return;
        }
        for (m, &v) in self.min.iter_mut().zip(lo) {
            *m = m.min(v);
        }
        for (m, &v) in self.max.iter_mut().zip(hi) {
            *m = m.max(v);
        }
    }

    /// Writes the statistics into the attributes of `op`, keeping attributes it
    /// does not own.
    pub fn store(&self, ctx: &mut Context, module: &mut Module, op: OpId) -> Result<(), String> {
        let mut dict = module.op_attrs(op);
        for key in OWNED {
            dict = ctx.dict_remove(dict, key);
        }
        if self.observer != "minmax" || ctx.dict_get(module.op_attrs(op), "observer").is_some() {
            let kind = ctx.string_attr(&self.observer);
            dict = ctx.dict_set(dict, "observer", kind);
        }
        if self.has_data() {
            let (lo, hi) = (self.f32_attr(ctx, &self.min)?, self.f32_attr(ctx, &self.max)?);
            dict = ctx.dict_set(dict, "min", lo);
            dict = ctx.dict_set(dict, "max", hi);
        }
        let samples = ctx.i64_attr(self.samples);
        dict = ctx.dict_set(dict, "samples", samples);
        if let Some(h) = self.histogram.as_ref().filter(|h| h.total() > 0) {
            let i64_ty = ctx.common().i64;
            let ty = ctx.tensor_type(&[h.bins() as i64], i64_ty);
            let counts: Vec<i128> = h.counts().iter().map(|&c| c as i128).collect();
            let dense = DenseElements::from_i128(ctx, ty, &counts)?;
            let f32_ty = ctx.common().f32;
            let (counts, lo, hi) = (
                ctx.dense_attr(dense),
                ctx.float_attr(h.hist_min() as f64, f32_ty),
                ctx.float_attr(h.hist_max() as f64, f32_ty),
            );
            dict = ctx.dict_set(dict, "histogram", counts);
            dict = ctx.dict_set(dict, "hist_min", lo);
            dict = ctx.dict_set(dict, "hist_max", hi);
        }
        if let Some(means) = &self.means {
            for (key, value) in means.attrs(ctx)? {
                dict = ctx.dict_set(dict, key, value);
            }
        }
        module.set_op_attrs(op, dict);
        Ok(())
    }

    /// A float attribute, or per channel a `dense<...> : tensor<Cxf32>`.
    fn f32_attr(&self, ctx: &mut Context, values: &[f32]) -> Result<Attribute, String> {
        let f32_ty = ctx.common().f32;
        if self.axis.is_none() {
            return Ok(ctx.float_attr(values.first().copied().unwrap_or(0.0) as f64, f32_ty));
        }
        let ty = ctx.tensor_type(&[values.len() as i64], f32_ty);
        let wide: Vec<f64> = values.iter().map(|&v| v as f64).collect();
        Ok(ctx.dense_attr(DenseElements::from_f64(ctx, ty, &wide)?))
    }
}

/// `min` or `max` as one f32 per channel.
fn f32_values(ctx: &Context, attr: Attribute, channels: usize, name: &str) -> Result<Vec<f32>, String> {
    let values = match ctx.attr_data(attr) {
        AttrData::Dense(d) => dense_values_f64(ctx, d, ctx.element_type(d.ty))
            .ok_or_else(|| format!("'{name}' is not float data"))?,
        _ => vec![ctx.attr_as_f64(attr).ok_or_else(|| format!("'{name}' must be a float"))?],
    };
    if values.len() != channels {
        return Err(format!(
            "'{name}' has {} values but the observer has {channels} channel(s)",
            values.len()
        ));
    }
    if values.iter().any(|v| v.is_nan()) {
        return Err(format!("'{name}' holds NaN"));
    }
    Ok(values.into_iter().map(|v| v as f32).collect())
}
