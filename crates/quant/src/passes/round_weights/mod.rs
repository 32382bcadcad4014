//! `round-weights{data=PATH}`: adaptive rounding of fake-quantized weights
//! (AdaRound, Nagel et al. 2020; the math is in `adaround.rs`). Runs after
//! `insert-fakeq`, on layers whose weights are narrower than `bits-below`
//! (default 8: the 2- to 7-bit weights nearest rounding hurts most).
//!
//! For every `fp.conv2d`, `fp.conv1d` and `fp.dense` (any `groups`,
//! depthwise included) whose weight is `qnn.fake_quant` of a constant:
//!
//! 1. **Inputs.** One run of `@main` over the calibration data (read as
//!    `calibrate` reads it, in chunks over threads, merged in chunk order)
//!    accumulates each layer's input patch Gram matrix and patch sum
//!    (`layer_inputs.rs`). The inputs are those of the fake-quant model as
//!    given: quantized activations, earlier layers with their rounding before
//!    this pass (one data pass instead of one per layer; more under
//!    `max-gram-mb`, below, each on the same module).
//! 2. **Rounding.** Per output channel, floor or ceil of each `W/s`,
//!    minimizing the output error over those inputs (`adaround.rs`). With
//!    `bias-correction` (default) the error is the covariance part: the mean
//!    error goes to the bias (step 3), as `insert-fakeq`'s bias correction
//!    does for nearest rounding. A layer whose bias is not a constant gets the
//!    plain error instead.
//! 3. **Write back.** The weight constant becomes the chosen grid values
//!    `s·n` (as `qnn.dequantize` computes them, so the `qnn.fake_quant` keeps
//!    each bit and `quantize-constants` later stores exactly `n + zero point`;
//!    checked for every weight). With `bias-correction` the bias moves by the
//!    change of the mean output shift, `−s·(n − n_nearest)·E[p]` per channel:
//!    the bias keeps whatever correction it had for nearest rounding.
//!
//! **Memory.** A layer's statistics are a K×K f64 Gram matrix per group
//! (K = taps per output channel: a 512·3·3 conv has K = 4608, 170 MB), and
//! during a data pass each worker thread holds its own partial copy.
//! `max-gram-mb` (default 1024, MB of 10^6 bytes; 0: no limit) bounds the
//! matrices one data pass collects: layers are taken in program order into
//! as many passes as that needs (each a run of the calibration data through
//! the same module, so the result does not change), and each pass's
//! matrices are dropped once its layers are optimized. A layer whose
//! matrices alone exceed the limit keeps its nearest rounding, with a
//! warning at the layer: the Gram matrix is the method's whole view of the
//! data, and any smaller stand-in (fewer patches, a subset of taps, a block
//! diagonal) optimizes another objective than the layer's output error, with
//! no check that the result is not worse than nearest rounding.
//!
//! `time-budget` bounds the optimization (not the data pass): each layer
//! gets a share in proportion to its cost (channels × K² × iterations), the
//! first iterations are timed, and a layer that would overrun runs fewer
//! iterations, with a warning at the layer.
//!
//! Errors write nothing: a fake-quantized weight that is not a constant (at
//! the layer), non-finite layer inputs (at the layer), and the data errors of
//! `calibrate`. Layers it cannot handle (another op kind, a shared weight,
//! f16 types, a quantized axis other than the output channel) keep their
//! rounding, with a warning. Statistics: `layers-rounded`, `weights-changed`
//! (levels other than nearest rounding's), `channels-kept-nearest`,
//! `biases-adjusted`, `layers-cut-by-budget`, `error-percent-of-nearest` (the
//! summed output error, in percent of nearest rounding's), `weights-unsettled`
//! (relaxed roundings still between floor and ceil at the last iteration),
//! `data-passes`, `layers-over-gram-limit`.
//!
//! ```text
//! // before (i4 weights, scale 0.5: nearest rounding of [0.7, 0.7] is [0.5, 0.5])
//! %wq = qnn.fake_quant(%w) {type = !qnn.uniform<i4:f32:0, {0.5:0}>} : ...
//! // after round-weights{data=calib.npy}: the constant holds [0.5, 1.0] if that errs less on the data
//! ```

mod adaround;
mod layer_inputs;

use crate::quantizable::quantizable;
use crate::records::hints::is_skipped;
use crate::runs::data::CALIBRATION_DATA;
use crate::runs::data::{check_counts, chunk_calls, DataSettings};
use crate::runs::data::{threads_option, worker_threads, COUNT_OPTIONS};
use adaround::{optimize_layer, ChannelProblem, LayerProblem, Schedule};
use layer_inputs::{LayerInputs, Window};
use qopt_dialect_fp::constants::{create_constant, dense, erase_if_unused_constant};
use qopt_dialect_qnn::fixed_point::{dequantize_f32, quantize_f32, scale_f32};
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_dialect_qnn::quant_params::{axis, params_at, storage_range};
use qopt_interp::progress::Progress;
use qopt_interp::{Interpreter, KernelRegistry, Tensor};
use qopt_ir_core::pass::{OptionKind, OptionSpec, PassOptions};
use qopt_ir_core::PassInfo;
use qopt_ir_core::PassResult;
use qopt_ir_core::{
    constant_value, AttrData, BadOptionValue, Context, Diagnostic, Diagnostics, FloatKind, FxHashMap,
    InsertPoint, Module, OpId, Pass, PassContext, PassError, PassOutcome, QuantType, Rewriter, Severity,
    TypeData, ValueDef, ValueId,
};
use std::time::{Duration, Instant};

/// The `round-weights` pass; see the module docs.
pub struct RoundWeights;

const INFO: PassInfo = PassInfo {
    name: "round-weights",
    summary: "choose floor or ceil of each fake-quantized weight to minimize the layer's output error on data (AdaRound)",
    preserves_semantics: false,
    equivalence: None,
    description: "Adaptive rounding (Nagel et al. 2020, AdaRound) after `insert-fakeq`: for every conv and dense \
     whose weight is `qnn.fake_quant` of a constant of fewer than `bits-below` bits, chooses per weight \
     the level below or above `W/s` so that the layer's output error on the calibration data is \
     smallest (a relaxed rounding optimized with Adam from each layer's input Gram matrix), and \
     writes the weight constant back as exactly those grid values; with `bias-correction` the bias \
     moves by the change of the mean output error. `time-budget` bounds the optimization; \
     `max-gram-mb` bounds the Gram matrices one data pass holds (more passes, same result; a layer \
     above it alone keeps nearest rounding).\n\n\
     ```\n\
     %wq = qnn.fake_quant(%w) {type = !qnn.uniform<i4:f32:0, {0.5:0}>} ...\n\
     // -> %w holds values on the grid of 0.5: floor or ceil of each weight, whichever the data prefers\n\
     ```",
};

impl Pass for RoundWeights {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn options(&self) -> Vec<OptionSpec> {
        let mut options = DataSettings::options(CALIBRATION_DATA);
        options.extend([
            OptionSpec::new("iterations", OptionKind::Int, "2000")
                .help("Adam steps per layer (each uses every calibration sample through the Gram matrix)"),
            OptionSpec::new("time-budget", OptionKind::Float, "300").help(
                "seconds for the optimization of all layers, shared by cost; a layer that would overrun \
                 runs fewer iterations (0: no limit)",
            ),
            OptionSpec::new("regularization", OptionKind::Float, "0.1")
                .help("λ, the weight of the term that drives each relaxed rounding to floor or ceil"),
            OptionSpec::new("learning-rate", OptionKind::Float, "0.01").help("Adam's step size"),
            OptionSpec::new("warmup", OptionKind::Float, "0.2")
                .help("the fraction of iterations run without the rounding regularizer"),
            OptionSpec::new("bits-below", OptionKind::Int, "8")
                .help("round the weights of layers whose weight type has fewer bits than this (17: every type)"),
            OptionSpec::new("bias-correction", OptionKind::Bool, "true").help(
                "leave the mean output error to the bias: minimize the error's variance and move the bias \
                 by the change of its mean",
            ),
            threads_option(),
            OptionSpec::new("max-gram-mb", OptionKind::Float, "1024").help(
                "MB (10^6 bytes) of layer input Gram matrices one data pass collects (each worker thread holds a \
                 partial copy besides); more layers take more passes, and a layer above it alone keeps nearest \
                 rounding with a warning (0: no limit)",
            ),
        ]);
        options
    }

    fn check_options(&self, options: &PassOptions) -> Result<(), BadOptionValue> {
        check_counts(options, &COUNT_OPTIONS)?;
        let iterations = options.int("iterations");
        if iterations < 1 {
            return Err(BadOptionValue::new(
                "iterations",
                format!("'iterations' must be at least 1, got {iterations}"),
            ));
        }
        let float_in = |name: &'static str, ok: fn(f64) -> bool, want: &str| {
            let v = options.float(name);
            if ok(v) {
                Ok(())
            } else {
                Err(BadOptionValue::new(name, format!("'{name}' must be {want}, got {v}")))
            }
        };
        float_in("time-budget", |v| v >= 0.0, "at least 0 (0: no limit)")?;
        float_in("max-gram-mb", |v| v >= 0.0, "at least 0 (0: no limit)")?;
        float_in("regularization", |v| v >= 0.0, "at least 0")?;
        float_in("learning-rate", |v| v > 0.0, "greater than 0")?;
        float_in("warmup", |v| (0.0..1.0).contains(&v), "in [0, 1)")?;
        let bits = options.int("bits-below");
        if !(2..=33).contains(&bits) {
            return Err(BadOptionValue::new(
                "bits-below",
                format!("'bits-below' must be in [2, 33], got {bits}"),
            ));
        }
        Ok(())
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, options: &PassOptions) -> PassResult {
        let settings = Settings::read(options)?;
        let sites = find_layers(cx, module, &settings)?;
        if sites.is_empty() {
            return Ok(PassOutcome::Unchanged);
        }
        let (passes, over_limit) = gram_passes(&sites, settings.max_gram_bytes);
        for &i in &over_limit {
            let site = &sites[i];
            cx.add_stat("layers-over-gram-limit", 1);
            cx.warn_at(
                module,
                site.op,
                format!(
                    "round-weights leaves this layer's rounding as it is: its input statistics take {} bytes ({} \
                     group(s) of a {k}×{k} Gram matrix and a sum of {k}, f64), above max-gram-mb={}",
                    site.gram_bytes(),
                    site.window.groups(),
                    settings.max_gram_bytes / 1e6,
                    k = site.window.taps(),
                ),
            );
        }
        cx.add_stat("data-passes", passes.len() as u64);

        let mut plans: Vec<Option<(Vec<Vec<i64>>, LayerInputs)>> = (0..sites.len()).map(|_| None).collect();
        let mut cost_left: f64 = passes.iter().flatten().map(|&i| sites[i].cost()).sum();
        let (mut error, mut nearest_error) = (0.0, 0.0);
        let mut optimizing = Duration::ZERO;
        for pass in &passes {
            let start = Instant::now();
            let layers: Vec<&Layer> = pass.iter().map(|&i| &sites[i]).collect();
            let inputs = collect_inputs(cx.ctx, module, &settings, &layers)?;
            cx.add_phase("collect-inputs", start.elapsed());

            let start = Instant::now();
            let progress = Progress::new(pass.len(), "layers").with_label("round-weights");
            for (&index, mut inputs) in pass.iter().zip(inputs) {
                progress.redraw();
                progress.advance();
                let site = &sites[index];
                if inputs.patches == 0 {
                    cost_left -= site.cost();
                    let why = format!(
                        "it saw no calibration data (it is not reached from @{})",
                        settings.data.func
                    );
                    cx.warn_at(
                        module,
                        site.op,
                        format!("round-weights leaves this layer's rounding as it is: {why}"),
                    );
                    continue;
                }
                let budget = (settings.time_budget > 0.0).then(|| {
                    let spent = (optimizing + start.elapsed()).as_secs_f64();
                    let left = (settings.time_budget - spent).max(0.0);
                    Duration::from_secs_f64(left * site.cost() / cost_left.max(f64::MIN_POSITIVE))
                });
                cost_left -= site.cost();
                // The Gram matrices become the problem's metrics: none is held twice.
                let problem = site.problem(&mut inputs);
                let outcome = optimize_layer(&problem, &settings.schedule, settings.threads, budget);
                drop(problem);
                if outcome.iterations < settings.schedule.iterations {
                    cx.add_stat("layers-cut-by-budget", 1);
                    cx.warn_at(
                        module,
                        site.op,
                        format!(
                            "the time budget cut this layer's rounding optimization to {} of {} iterations",
                            outcome.iterations, settings.schedule.iterations
                        ),
                    );
                }
                for channel in &outcome.channels {
                    error += channel.error;
                    nearest_error += channel.nearest_error;
                    cx.add_stat("weights-unsettled", channel.unsettled as u64);
                }
                let levels: Vec<Vec<i64>> = outcome.channels.into_iter().map(|c| c.levels).collect();
                plans[index] = Some((levels, inputs));
            }
            progress.redraw();
            progress.finish();
            let elapsed = start.elapsed();
            optimizing += elapsed;
            cx.add_phase("optimize", elapsed);
        }

        let mut changed = false;
        let mut rounded = 0;
        for (site, plan) in sites.iter().zip(plans) {
            let Some((levels, inputs)) = plan else { continue };
            changed |= site.write_back(cx, module, &levels, &inputs)?;
            rounded += 1;
        }
        cx.add_stat("layers-rounded", rounded);
        if nearest_error > 0.0 {
            cx.add_stat("error-percent-of-nearest", (100.0 * error / nearest_error).round() as u64);
        }
        Ok(PassOutcome::from_changed(changed))
    }
}

/// The options, checked.
struct Settings {
    data: DataSettings,
    schedule: Schedule,
    time_budget: f64,
    bits_below: u32,
    bias_correction: bool,
    threads: usize,
    /// `max-gram-mb` in bytes; infinite for 0 (no limit).
    max_gram_bytes: f64,
}

impl Settings {
    fn read(options: &PassOptions) -> Result<Settings, PassError> {
        let threads = worker_threads(options)?;
        Ok(Settings {
            data: DataSettings::read(options)?,
            schedule: Schedule {
                iterations: usize::try_from(options.int("iterations"))
                    .map_err(|_| "'iterations' must be at least 1")?,
                warmup: options.float("warmup"),
                regularization: options.float("regularization"),
                learning_rate: options.float("learning-rate"),
            },
            time_budget: options.float("time-budget"),
            bits_below: options.int("bits-below").clamp(0, 64) as u32,
            bias_correction: options.bool("bias-correction"),
            threads,
            max_gram_bytes: match options.float("max-gram-mb") {
                mb if mb > 0.0 => mb * 1e6,
                0.0 => f64::INFINITY,
                mb => return Err(format!("'max-gram-mb' must be at least 0 (0: no limit), got {mb}").into()),
            },
        })
    }
}

/// A layer whose weight rounding is optimized.
struct Layer {
    op: OpId,
    /// The `qnn.fake_quant` of the weight.
    fake_quant: OpId,
    /// The weight constant it quantizes.
    weight: ValueId,
    /// Its values (C-order, output channel first) and shape.
    values: Vec<f32>,
    shape: Vec<usize>,
    /// The weight's quantized type.
    quant: QuantType,
    /// The layer's activation operand.
    input: ValueId,
    window: Window,
    /// The bias operand index, and whether the mean error goes to it.
    bias: usize,
    centered: bool,
}

impl Layer {
    /// Output channels.
    fn channels(&self) -> usize {
        self.shape[0]
    }

    /// The optimization's cost per iteration, up to a constant: per channel,
    /// K² for `M e`, plus the per-weight and per-channel work that dominates
    /// small K (depthwise layers).
    fn cost(&self) -> f64 {
        let k = self.window.taps() as f64;
        self.channels() as f64 * (k * k + 16.0 * k + 100.0)
    }

    /// Bytes of its input statistics: per group, a K×K Gram matrix and a
    /// patch sum of K, in f64.
    fn gram_bytes(&self) -> f64 {
        let k = self.window.taps() as f64;
        self.window.groups() as f64 * (k * k + k) * 8.0
    }

    /// Channel `c`'s f32 scale, zero point and storage range.
    fn grid(&self, c: usize) -> (f32, i64, i64, i64) {
        let p = params_at(&self.quant, c)
            .unwrap_or(qopt_dialect_qnn::quant_params::ScaleZp { scale: 1.0, zero_point: 0 });
        let (qmin, qmax) = storage_range(&self.quant);
        (scale_f32(p.scale), p.zero_point, qmin, qmax)
    }

    /// The rounding problems of every channel over the layer's inputs. The
    /// Gram matrices move into the problem (`inputs` keeps the sums and the
    /// patch count, which the write-back needs).
    fn problem(&self, inputs: &mut LayerInputs) -> LayerProblem {
        let k = self.window.taps();
        let n = inputs.patches.max(1) as f64;
        let metrics = std::mem::take(&mut inputs.gram)
            .into_iter()
            .zip(&inputs.sums)
            .map(|(mut m, sums)| {
                m.iter_mut().for_each(|g| *g /= n);
                if self.centered {
                    for i in 0..k {
                        for j in 0..k {
                            m[i * k + j] -= (sums[i] / n) * (sums[j] / n);
                        }
                    }
                }
                let scale = (0..k).map(|i| m[i * k + i]).sum::<f64>() / k.max(1) as f64;
                if scale > 0.0 && scale.is_finite() {
                    m.iter_mut().for_each(|v| *v /= scale);
                } else {
                    // Inputs that are always 0 (or constant, centered): every rounding errs alike.
                    m.iter_mut().for_each(|v| *v = 0.0);
                }
                m
            })
            .collect();
        let per_group = self.channels() / self.window.groups().max(1);
        let channels = self
            .values
            .chunks_exact(k)
            .enumerate()
            .map(|(c, row)| {
                let (s, zp, qmin, qmax) = self.grid(c);
                ChannelProblem {
                    target: row.iter().map(|&w| f64::from(w) / f64::from(s)).collect(),
                    nearest: row.iter().map(|&w| quantize_f32(w, s, zp, qmin, qmax) - zp).collect(),
                    levels: (qmin - zp, qmax - zp),
                    group: c / per_group.max(1),
                }
            })
            .collect();
        LayerProblem { metrics, channels }
    }

    /// Writes the chosen `levels` (per channel) into the weight and moves the
    /// bias by the change of the mean shift. Returns whether anything changed.
    fn write_back(
        &self,
        cx: &mut PassContext<'_>,
        module: &mut Module,
        levels: &[Vec<i64>],
        inputs: &LayerInputs,
    ) -> Result<bool, PassError> {
        let k = self.window.taps();
        let per_group = self.channels() / self.window.groups().max(1);
        let mut values = Vec::with_capacity(self.values.len());
        let mut bias_shift = vec![0.0f64; self.channels()];
        let (mut changed_weights, mut kept) = (0u64, 0u64);
        for (c, (row, chosen)) in self.values.chunks_exact(k).zip(levels).enumerate() {
            let (s, zp, qmin, qmax) = self.grid(c);
            let means = &inputs.sums[c / per_group.max(1)];
            let mut changed_here = 0;
            for (i, (&w, &n)) in row.iter().zip(chosen).enumerate() {
                let stored = n + zp;
                let value = dequantize_f32(stored, zp, s);
                // The fake quant must leave the written value as it is, bit for bit.
                if quantize_f32(value, s, zp, qmin, qmax) != stored || dequantize_f32(stored, zp, s) != value
                {
                    let message = format!("level {n} of output channel {c} is not exactly representable");
                    return Err(PassError::at_op(cx.ctx, module, self.op, message));
                }
                let nearest = quantize_f32(w, s, zp, qmin, qmax);
                if stored != nearest {
                    changed_here += 1;
                    bias_shift[c] +=
                        f64::from(s) * (stored - nearest) as f64 * means[i] / inputs.patches.max(1) as f64;
                }
                values.push(f64::from(value));
            }
            changed_weights += changed_here;
            kept += u64::from(changed_here == 0);
        }
        cx.add_stat("weights-changed", changed_weights);
        cx.add_stat("channels-kept-nearest", kept);
        let old: Vec<f64> = self.values.iter().map(|&v| f64::from(v)).collect();
        if values == old {
            return Ok(false);
        }
        let ctx = &mut *cx.ctx;
        let ty = module.value_type(self.weight);
        let attr = dense(ctx, ty, &values)?;
        let loc = module.op_loc(module.defining_op(self.weight));
        let mut rewriter = Rewriter::new(ctx, module);
        rewriter.set_insertion_point(InsertPoint::Before(self.fake_quant));
        rewriter.set_loc(loc);
        let new_weight = create_constant(&mut rewriter, attr)?;
        module.set_operand(self.fake_quant, 0, new_weight);
        erase_if_unused_constant(ctx, module, self.weight);
        if self.centered && bias_shift.iter().any(|&b| b != 0.0) {
            self.shift_bias(ctx, module, &bias_shift)?;
            cx.add_stat("biases-adjusted", 1);
        }
        Ok(true)
    }

    /// Subtracts `shift` from the layer's bias, adding a bias if it has none.
    fn shift_bias(&self, ctx: &mut Context, module: &mut Module, shift: &[f64]) -> Result<(), PassError> {
        let operands = module.num_operands(self.op);
        let (old, values) = if self.bias < operands {
            let bias = module.operand(self.op, self.bias);
            let values = constant_values(ctx, module, bias).ok_or("the bias is not a dense constant")?;
            (Some(bias), values)
        } else {
            (None, vec![0.0; shift.len()])
        };
        if values.len() != shift.len() {
            return Err(
                format!("the bias has {} values for {} output channels", values.len(), shift.len()).into()
            );
        }
        let corrected: Vec<f64> = values.iter().zip(shift).map(|(v, s)| v - s).collect();
        let ty = match old {
            Some(v) => module.value_type(v),
            None => {
                let elem = ctx.element_type(module.value_type(module.result(self.op, 0)));
                ctx.tensor_type(&[shift.len() as i64], elem)
            }
        };
        let attr = dense(ctx, ty, &corrected)?;
        let loc = match old.map(|v| module.defining_op(v)) {
            Some(def) if !def.is_none() => module.op_loc(def),
            _ => module.op_loc(self.op),
        };
        let mut rewriter = Rewriter::new(ctx, module);
        rewriter.set_insertion_point(InsertPoint::Before(self.op));
        rewriter.set_loc(loc);
        let new_bias = create_constant(&mut rewriter, attr)?;
        match old {
            Some(old) => {
                module.set_operand(self.op, self.bias, new_bias);
                erase_if_unused_constant(ctx, module, old);
            }
            None => {
                let mut all: Vec<ValueId> = (0..operands).map(|i| module.operand(self.op, i)).collect();
                all.push(new_bias);
                module.set_operands(self.op, &all);
            }
        }
        Ok(())
    }
}

/// The values of a dense constant, as f64.
fn constant_values(ctx: &Context, module: &Module, value: ValueId) -> Option<Vec<f64>> {
    let attr = constant_value(ctx, module, value)?;
    match ctx.attr_data(attr) {
        AttrData::Dense(d) => qopt_ir_core::dense_values_f64(ctx, d, ctx.element_type(d.ty)),
        _ => None,
    }
}

/// Every layer to optimize, in program order; warnings for layers left alone,
/// errors (all at once) for weights that cannot be read.
fn find_layers(
    cx: &mut PassContext<'_>,
    module: &Module,
    settings: &Settings,
) -> Result<Vec<Layer>, PassError> {
    let mut layers = Vec::new();
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    for op in module.walk_preorder(module.root()) {
        let ctx: &Context = cx.ctx;
        let Some(q) = quantizable(ctx, module, op) else { continue };
        if is_skipped(ctx, module, op) {
            continue;
        }
        let (Some(w), Some(&x)) = (q.weight, q.activations.first()) else { continue };
        if w >= module.num_operands(op) || x >= module.num_operands(op) {
            continue;
        }
        let fake_quant = module.defining_op(module.operand(op, w));
        if fake_quant.is_none() || !module.op_is(ctx, fake_quant, qnn_op::FAKE_QUANT) {
            continue;
        }
        let quant = match module.op_attr(ctx, fake_quant, "type").map(|a| ctx.attr_data(a)) {
            Some(AttrData::Type(t)) => match ctx.type_data(*t) {
                TypeData::Quant(q) => q.clone(),
                _ => continue,
            },
            _ => continue,
        };
        if u32::from(quant.storage.width) >= settings.bits_below {
            continue;
        }
        match layer_at(ctx, module, op, fake_quant, quant, x, q.bias.unwrap_or(usize::MAX), settings) {
            Ok(Ok(layer)) => layers.push(layer),
            Ok(Err(skip)) => warnings.push((op, skip)),
            Err(e) => errors.push(Diagnostic::at_op(ctx, module, op, Severity::Error, e)),
        }
    }
    if !errors.is_empty() {
        return Err(Diagnostics(errors).into());
    }
    for (op, why) in warnings {
        cx.warn_at(module, op, format!("round-weights leaves this layer's rounding as it is: {why}"));
    }
    Ok(layers)
}

/// The layer `op`: `Err` for an error, `Ok(Err(why))` for a layer left alone.
#[allow(clippy::too_many_arguments)]
fn layer_at(
    ctx: &Context,
    module: &Module,
    op: OpId,
    fake_quant: OpId,
    quant: QuantType,
    x: usize,
    bias: usize,
    settings: &Settings,
) -> Result<Result<Layer, String>, String> {
    let weight = module.operand(fake_quant, 0);
    let Some(attr) = constant_value(ctx, module, weight) else {
        return Err(
            "the fake-quantized weight is not a constant; round-weights rewrites weight constants".into()
        );
    };
    let AttrData::Dense(d) = ctx.attr_data(attr) else {
        return Err("the fake-quantized weight is not a dense constant".into());
    };
    let name = ctx.op_name_str(module.op_name(op)).to_string();
    if d.ty != module.value_type(weight)
        || ctx.element_type(d.ty) != ctx.common().f32
        || quant.expressed != FloatKind::F32
    {
        return Ok(Err("it handles f32 weights and types only".into()));
    }
    let tensor = Tensor::from_dense(ctx, d).map_err(|e| e.message)?;
    let Some(values) = tensor.as_f32().map(|a| a.iter().copied().collect::<Vec<f32>>()) else {
        return Ok(Err("it handles f32 weights only".into()));
    };
    let shape = tensor.shape().to_vec();
    let Some(window) = Window::of(ctx, module, op, &shape)? else {
        return Ok(Err(format!("it handles fp.conv2d, fp.conv1d and fp.dense, not {name}")));
    };
    if axis(&quant).is_some_and(|a| a != 0) {
        return Ok(Err("the weight is quantized along another axis than the output channel".into()));
    }
    if module.users(module.result(fake_quant, 0)).len() != 1 {
        return Ok(Err("its quantized weight is shared with other ops".into()));
    }
    let input = module.operand(op, x);
    let elem = ctx.element_type(module.value_type(input));
    if elem != ctx.common().f32 {
        return Ok(Err("its input is not f32".into()));
    }
    if window.taps() == 0 || values.is_empty() {
        return Ok(Err("its weight is empty".into()));
    }
    if shape.is_empty() || values.len() != shape[0] * window.taps() {
        return Err(format!("the weight of shape {shape:?} does not fit the layer"));
    }
    let bias_ok =
        bias >= module.num_operands(op) || constant_values(ctx, module, module.operand(op, bias)).is_some();
    Ok(Ok(Layer {
        op,
        fake_quant,
        weight,
        values,
        shape,
        quant,
        input,
        window,
        bias,
        centered: settings.bias_correction && bias_ok,
    }))
}

/// The layers' data passes under a limit of `max_bytes` of statistics per
/// pass: indices into `layers`, in program order, each pass as many layers as
/// fit; and the layers that do not fit alone.
fn gram_passes(layers: &[Layer], max_bytes: f64) -> (Vec<Vec<usize>>, Vec<usize>) {
    let (mut passes, mut over) = (Vec::new(), Vec::new());
    let (mut current, mut bytes): (Vec<usize>, f64) = (Vec::new(), 0.0);
    for (i, layer) in layers.iter().enumerate() {
        let size = layer.gram_bytes();
        if size > max_bytes {
            over.push(i);
            continue;
        }
        if !current.is_empty() && bytes + size > max_bytes {
            passes.push(std::mem::take(&mut current));
            bytes = 0.0;
        }
        current.push(i);
        bytes += size;
    }
    if !current.is_empty() {
        passes.push(current);
    }
    (passes, over)
}

/// What one chunk of calls produced: per layer, its inputs' statistics; or an
/// error, at the layer (by index) when one is to blame.
type ChunkResult = Result<Vec<LayerInputs>, (Option<usize>, String)>;

/// Each layer's input statistics over the calibration data.
fn collect_inputs(
    ctx: &Context,
    module: &Module,
    settings: &Settings,
    layers: &[&Layer],
) -> Result<Vec<LayerInputs>, PassError> {
    let data = settings.data.open(ctx, module)?;
    let (calls, _) = data.calls(settings.data.batches);
    let per_call = data.per_call;
    let func = module
        .lookup_symbol(ctx, &settings.data.func)
        .ok_or_else(|| format!("there is no function @{}", settings.data.func))?;
    let args: Vec<ValueId> = module
        .blocks(module.region(func, 0))
        .next()
        .map(|b| module.block_args(b).to_vec())
        .unwrap_or_default();
    // Which layers read each op result and each argument.
    let mut by_result: FxHashMap<(OpId, usize), Vec<usize>> = FxHashMap::default();
    let mut by_arg: Vec<(usize, usize)> = Vec::new();
    for (i, layer) in layers.iter().enumerate() {
        match module.value_def(layer.input) {
            ValueDef::Result { op, index } => by_result.entry((op, index as usize)).or_default().push(i),
            // An argument of another function or block is never seen: the layer gets no data.
            ValueDef::BlockArg { .. } => {
                if let Some(arg) = args.iter().position(|&a| a == layer.input) {
                    by_arg.push((arg, i));
                }
            }
        }
    }

    let kernels = &*KernelRegistry::of_or_standard(ctx);
    let mut prepared = Interpreter::new(ctx, module, kernels);
    prepared.prepare(&settings.data.func).map_err(|e| e.to_string())?;
    let fresh =
        || -> Vec<LayerInputs> { layers.iter().map(|l| LayerInputs::new(l.window.clone())).collect() };
    let mut merged = fresh();
    let per_chunk = chunk_calls(calls);
    let chunks = calls.div_ceil(per_chunk);
    let func_name = settings.data.func.as_str();
    let progress = Progress::new(calls * per_call, "samples").with_label("round-weights");
    let dataset = &data.dataset;
    // Rounds of one chunk per thread, merged in chunk order: memory stays at
    // `threads` partial sums, and the result does not depend on the thread count.
    for round in (0..chunks).step_by(settings.threads.max(1)) {
        let results: Vec<ChunkResult> = std::thread::scope(|scope| {
            let handles: Vec<_> = (round..chunks.min(round + settings.threads.max(1)))
                .map(|chunk| {
                    let (mut interp, fresh, by_result, by_arg) =
                        (prepared.fork(), &fresh, &by_result, &by_arg);
                    scope.spawn(move || {
                        let mut partial = fresh();
                        for call in chunk * per_chunk..((chunk + 1) * per_chunk).min(calls) {
                            let start = call * per_call;
                            let inputs = dataset.read(start, per_call).map_err(|e| (None, e.to_string()))?;
                            for &(arg, layer) in by_arg {
                                add_tensor(&mut partial[layer], &inputs[arg])
                                    .map_err(|e| (Some(layer), e))?;
                            }
                            let mut failure = None;
                            let mut hook = |op: OpId, results: &[Tensor]| {
                                for (index, tensor) in results.iter().enumerate() {
                                    let Some(readers) = by_result.get(&(op, index)) else { continue };
                                    for &layer in readers {
                                        if let Err(e) = add_tensor(&mut partial[layer], tensor) {
                                            failure.get_or_insert((Some(layer), e));
                                        }
                                    }
                                }
                            };
                            interp.run_with(func_name, &inputs, &mut hook).map_err(|e| {
                                (
                                    None,
                                    format!(
                                        "running @{func_name} on samples {start}..{}: {e}",
                                        start + per_call
                                    ),
                                )
                            })?;
                            if let Some(failure) = failure {
                                return Err(failure);
                            }
                        }
                        Ok(partial)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err((None, "a worker panicked".into()))))
                .collect()
        });
        let done = (chunks.min(round + settings.threads.max(1)) - round) * per_chunk;
        (0..(done.min(calls - round * per_chunk) * per_call)).for_each(|_| progress.advance());
        progress.redraw();
        for result in results {
            match result {
                Ok(partial) => merged.iter_mut().zip(&partial).for_each(|(m, p)| m.merge(p)),
                Err((Some(layer), message)) => {
                    progress.finish();
                    return Err(PassError::at_op(ctx, module, layers[layer].op, message));
                }
                Err((None, message)) => {
                    progress.finish();
                    return Err(message.into());
                }
            }
        }
    }
    progress.finish();
    merged.iter_mut().for_each(LayerInputs::finish);
    Ok(merged)
}

/// Adds one layer input tensor (f32) to `inputs`.
fn add_tensor(inputs: &mut LayerInputs, tensor: &Tensor) -> Result<(), String> {
    let Some(values) = tensor.as_f32() else {
        return Err(format!("the layer's input is a {} tensor, not f32", tensor.dtype()));
    };
    match values.as_slice() {
        Some(slice) => inputs.add(slice, tensor.shape()),
        None => inputs.add(&values.iter().copied().collect::<Vec<f32>>(), tensor.shape()),
    }
}
