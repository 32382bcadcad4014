//! Whether a bias correction helps: a layer's correction is kept only when
//! it lowers the error of the layer's **quantized output** on the data.
//!
//! Subtracting the mean error of each channel always lowers the mean squared
//! error of the layer's result itself, but what the next layer reads is that
//! result through its activation and its fake quant, and there a shift can
//! move values across rounding steps or into the clipped range and make the
//! error larger (ReLU layers whose mean error comes from values that the
//! activation clips anyway are the usual case). So each layer followed by an
//! optional `fp.relu` or `fp.clip` and then a per-tensor `qnn.fake_quant`
//! ([`OutputStage`]) keeps a uniform sample of its result elements in both
//! models ([`ResultSample`], Vitter's reservoir algorithm L: at most
//! [`SAMPLE_LIMIT`] elements, a bounded number of random draws per batch),
//! and [`Verdict::of`] compares the squared error of the stage's output
//! against the float model's activated result with and without the
//! correction. A layer whose output goes anywhere else keeps its correction.

use crate::channels::channel_blocks;
use qopt_dialect_fp::op_names as fp_op;
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_dialect_qnn::quant_params::{per_tensor, quant_element, storage_range};
use qopt_ir_core::{AttrData, Context, Module, OpId, SplitMix64, ValueId};

/// The most result elements a layer's sample keeps.
pub(super) const SAMPLE_LIMIT: usize = 1 << 16;

/// The activation and fake quant a layer's result goes through.
#[derive(Copy, Clone, Debug)]
pub(super) struct OutputStage {
    low: f64,
    high: f64,
    scale: f64,
    zero_point: f64,
    qmin: f64,
    qmax: f64,
}

impl OutputStage {
    /// The stage after `op`'s result when it is one relu or clip (optional)
    /// and then one per-tensor fake quant, each the only user of the value
    /// before it.
    pub fn find(ctx: &Context, module: &Module, op: OpId) -> Option<OutputStage> {
        let only_user = |v: ValueId| {
            let mut uses = module.uses(v);
            match (uses.next(), uses.next()) {
                (Some(u), None) => Some(u.op),
                _ => None,
            }
        };
        let (mut low, mut high) = (f64::NEG_INFINITY, f64::INFINITY);
        let mut user = only_user(module.result(op, 0))?;
        if module.op_is(ctx, user, fp_op::RELU) || module.op_is(ctx, user, fp_op::CLIP) {
            if module.op_is(ctx, user, fp_op::RELU) {
                low = 0.0;
            } else {
                let attrs = module.op_attrs(user);
                low = qopt_dialect_fp::attrs::opt_float_in(ctx, attrs, "min").ok()?.unwrap_or(low);
                high = qopt_dialect_fp::attrs::opt_float_in(ctx, attrs, "max").ok()?.unwrap_or(high);
            }
            user = only_user(module.result(user, 0))?;
        }
        if !module.op_is(ctx, user, qnn_op::FAKE_QUANT) {
            return None;
        }
        let AttrData::Type(ty) = ctx.attr_data(module.op_attr(ctx, user, "type")?) else { return None };
        let q = quant_element(ctx, *ty)?;
        let params = per_tensor(q)?;
        let (qmin, qmax) = storage_range(q);
        (params.scale > 0.0).then_some(OutputStage {
            low,
            high,
            scale: params.scale,
            zero_point: params.zero_point as f64,
            qmin: qmin as f64,
            qmax: qmax as f64,
        })
    }

    /// The activated value, as the float model passes it on.
    fn activate(&self, y: f64) -> f64 {
        y.max(self.low).min(self.high)
    }

    /// The activated and fake-quantized value, as the fake-quant model passes it on.
    fn quantize(&self, y: f64) -> f64 {
        let q =
            ((self.activate(y) / self.scale).round_ties_even() + self.zero_point).clamp(self.qmin, self.qmax);
        (q - self.zero_point) * self.scale
    }
}

/// A uniform sample of a layer's result elements: (channel, fake-quant
/// value, float value).
pub(super) struct ResultSample {
    items: Vec<(u32, f32, f32)>,
    /// Elements offered so far.
    seen: u64,
    /// The stream index of the next element to take once the sample is full.
    next: u64,
    /// Algorithm L's running weight.
    weight: f64,
    rng: SplitMix64,
}

impl ResultSample {
    /// An empty sample drawing from `seed`.
    pub fn new(seed: u64) -> ResultSample {
        ResultSample { items: Vec::new(), seen: 0, next: 0, weight: 1.0, rng: SplitMix64::new(seed) }
    }

    /// Offers one batch of the layer's result in both models (C order, the
    /// channel on `axis`).
    pub fn offer(&mut self, quant: &[f32], float: &[f32], shape: &[usize], axis: usize) {
        let blocks = channel_blocks(quant, shape, axis).zip(channel_blocks(float, shape, axis));
        for ((channel, q_run), (_, f_run)) in blocks {
            let start = self.seen;
            let end = start + q_run.len() as u64;
            while self.items.len() < SAMPLE_LIMIT && self.seen < end {
                let i = (self.seen - start) as usize;
                self.items.push((channel as u32, q_run[i], f_run[i]));
                self.seen += 1;
                if self.items.len() == SAMPLE_LIMIT {
                    self.weight = self.draw_weight();
                    self.next = self.seen + self.skip();
                }
            }
            while self.items.len() == SAMPLE_LIMIT && self.next < end {
                let i = (self.next - start) as usize;
                let slot = self.rng.below(SAMPLE_LIMIT as u64) as usize;
                self.items[slot] = (channel as u32, q_run[i], f_run[i]);
                self.weight *= self.draw_weight();
                self.next += 1 + self.skip();
            }
            self.seen = end;
        }
    }

    /// `exp(ln(u) / k)` for a uniform `u` in (0, 1].
    fn draw_weight(&mut self) -> f64 {
        ((1.0 - self.rng.next_f64()).ln() / SAMPLE_LIMIT as f64).exp()
    }

    /// Elements to pass over before the next one taken.
    fn skip(&mut self) -> u64 {
        let u = 1.0 - self.rng.next_f64();
        let skip = (u.ln() / (1.0 - self.weight).ln()).floor();
        if skip.is_finite() && skip >= 0.0 {
            skip.min(u64::MAX as f64 / 2.0) as u64
        } else {
            u64::MAX / 2
        }
    }
}

/// The squared error of a layer's quantized output against the float
/// model's activated result over its sample, with and without a correction.
#[derive(Copy, Clone, Debug)]
pub(super) struct Verdict {
    /// With the correction the means call for.
    pub with: f64,
    /// With the float bias (no correction).
    pub without: f64,
    /// Elements compared.
    pub elements: usize,
}

impl Verdict {
    /// The verdict on correcting by `target` (per channel) a layer whose
    /// sampled fake-quant results were computed with `stored` subtracted
    /// from its float bias.
    pub fn of(stage: &OutputStage, sample: &ResultSample, stored: &[f64], target: &[f64]) -> Verdict {
        let (mut with, mut without) = (0.0, 0.0);
        for &(c, q, f) in &sample.items {
            let c = c as usize;
            let floor = stage.activate(f64::from(f));
            let uncorrected = f64::from(q) + stored.get(c).copied().unwrap_or(0.0);
            let corrected = uncorrected - target.get(c).copied().unwrap_or(0.0);
            without += (stage.quantize(uncorrected) - floor).powi(2);
            with += (stage.quantize(corrected) - floor).powi(2);
        }
        Verdict { with, without, elements: sample.items.len() }
    }

    /// Whether the correction is kept: it does not raise the error.
    pub fn keeps(&self) -> bool {
        self.with <= self.without
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_is_uniform_over_a_long_stream() {
        let mut sample = ResultSample::new(7);
        let n = 4 * SAMPLE_LIMIT;
        let values: Vec<f32> = (0..n).map(|i| i as f32).collect();
        // Four batches of one channel.
        for batch in values.chunks(SAMPLE_LIMIT) {
            sample.offer(batch, batch, &[1, batch.len()], 0);
        }
        assert_eq!(sample.items.len(), SAMPLE_LIMIT);
        assert_eq!(sample.seen, n as u64);
        // Each quarter of the stream holds about a quarter of the sample.
        let mut quarters = [0usize; 4];
        for &(_, q, f) in &sample.items {
            assert_eq!(q, f);
            quarters[(q as usize) / SAMPLE_LIMIT] += 1;
        }
        for count in quarters {
            let share = count as f64 / SAMPLE_LIMIT as f64;
            assert!((share - 0.25).abs() < 0.02, "{quarters:?}");
        }
    }

    #[test]
    fn a_correction_is_kept_only_where_it_lowers_the_quantized_output_error() {
        // A relu and steps of 0.1.
        let stage = OutputStage {
            low: 0.0,
            high: f64::INFINITY,
            scale: 0.1,
            zero_point: 0.0,
            qmin: -128.0,
            qmax: 127.0,
        };
        // Float results 0.05, quantized ones 0.45: subtracting the mean error
        // 0.4 brings them to 0.05, which rounds to 0 (error 0.05, not 0.35).
        let mut sample = ResultSample::new(1);
        sample.offer(&[0.45; 8], &[0.05; 8], &[1, 8], 0);
        assert!(Verdict::of(&stage, &sample, &[0.0], &[0.4]).keeps());
        // The mean error comes from values the relu clips anyway (-5 read as
        // -3), while the live half is exact: subtracting the mean (1.0) pushes
        // the live half under the floor.
        let mut sample = ResultSample::new(1);
        let float = [-5.0, -5.0, -5.0, -5.0, 0.3, 0.3, 0.3, 0.3];
        let quant = [-3.0, -3.0, -3.0, -3.0, 0.3, 0.3, 0.3, 0.3];
        sample.offer(&quant, &float, &[1, 8], 0);
        let verdict = Verdict::of(&stage, &sample, &[0.0], &[1.0]);
        assert!(!verdict.keeps(), "{verdict:?}");
        assert!(verdict.without < 1e-12 && (verdict.with - 4.0 * 0.09).abs() < 1e-6, "{verdict:?}");
    }
}
