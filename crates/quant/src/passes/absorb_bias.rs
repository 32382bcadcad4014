//! `absorb-bias{data=PATH}`: bias absorption (Nagel et al. 2019, "Data-Free
//! Quantization", §4.1.1), on the float model after `fold-bn` (and usually
//! `equalize`), before `insert-observers`.
//!
//! A pair is `layer1 → fp.relu → layer2` (conv2d, conv1d or dense; layer2 may
//! be depthwise), layer1's result used only by the relu and the relu's only
//! by layer2's activation operand (`equalize`'s pair finding). With `m[c]` the
//! smallest value of layer1's output channel `c` over the calibration data
//! and `a[c] = fraction · max(0, m[c])`:
//!
//! ```text
//! b1'[c] = b1[c] − a[c]
//! b2'[o] = b2[o] + Σ_{c,k} W2[o,c,k] · a[c]        (dense, and conv with one group)
//! b2'[c] = b2[c] + a[c] · Σ_k W2[c,0,k]            (depthwise)
//! ```
//!
//! because `relu(x − a) + a = relu(x)` for `x ≥ a ≥ 0`, and a layer2 without
//! padding sees every tap of its window inside its input, so the constant
//! `−a[c]` on every input position comes out as `−W2 · a`. Outputs are
//! unchanged wherever layer1's outputs stay at or above `a` — on every
//! calibration sample, and in general only there: the pass is exact over
//! the reals on the calibrated range, not everywhere. So it declares the
//! relation `calibrated-range` ([`Relation::CalibratedRange`]): `--verify-equiv`
//! proves it assuming the minima it records (below; the `fp` dialect's
//! rule `relu-of-value-above-its-recorded-channel-minimum-is-shifted-relu`
//! states `relu(y) = relu(y − p) + p` for `0 ≤ p ≤` the recorded minimum,
//! and `conv2d-of-channel-shifted-input-shifts-bias` and its kin move the
//! shift into layer2's bias). A layer1 whose minimum is negative on a
//! channel moves nothing there. It lowers the range the activation
//! quantizer of the relu's output must cover by `a` per channel.
//!
//! What is not a pair, and what the pass says:
//!
//! - `fp.clip` between the layers (ReLU6): `clip(x − a, 0, 6) + a` caps at
//!   `6 + a`, not 6, and one clip cannot hold a bound per channel; a warning
//!   at the clip, counted in `skipped-clip-pairs` (`equalize{relu6-to-relu=true}`
//!   first turns such clips into relus, which changes the model);
//! - a layer2 with padding: its border would read 0 where the absorbed model
//!   expects `a`; a warning at it, counted in `skipped-padded`;
//! - a result or relu with several users (a residual add): the shift would
//!   reach them too; counted in `skipped-shared-outputs`, silently;
//! - non-constant weights or biases and grouped convs that are not depthwise:
//!   a warning at the layer.
//!
//! **Statistics in the IR.** The minima are recorded on layer1 as
//! `qnn.bias_absorption = {absorbed, channel_min, samples}`
//! (`absorption_record.rs`), `channel_min` with the original bias (stored +
//! `absorbed`). A layer that holds its minima is not measured again: a rerun
//! moves only `a − absorbed` (nothing, with the same `fraction`), hand-edited
//! minima are applied as written, and when every pair has minima no data is
//! read. All minima are measured in one run of the model as it stands before
//! any change (`paired_run.rs`, float results); applying the pairs in body
//! order then keeps them right for chains (conv → depthwise → conv): each
//! absorption leaves layer2's output unchanged on the data, so the minima of
//! a layer that is layer2 of one pair and layer1 of the next still hold.
//!
//! Errors (nothing is changed): data needed but not given, a missing or
//! unreadable data file, samples that do not fit, a malformed record or one
//! of the wrong size (at the layer), a non-finite minimum (at the layer).
//! Statistics: `absorbed-pairs`, `channels-absorbed`, `layers-measured`,
//! `calibration-samples`, `skipped-padded`, `skipped-clip-pairs`,
//! `skipped-shared-outputs`.
//!
//! ```text
//! // m = [-1, 0.5] on the data: a = [0, 0.5]; with W2 = [[2, 3]]: b2 += 3 · 0.5
//! %h = fp.dense(%x, %w1, %b1) ...  %r = fp.relu(%h) ...  %y = fp.dense(%r, %w2, %b2) ...
//! // after: b1' = b1 − [0, 0.5], b2' = b2 + [1.5], and on %h
//! //   {qnn.bias_absorption = {absorbed = dense<[0.0, 0.5]>, channel_min = dense<[-1.0, 0.5]>, samples = 6}}
//! ```

use crate::channels::{channel_blocks, result_values};
use crate::layer_pairs::{follow, read_constant, second_input_axis, Follow, Names};
use crate::quantizable::quantizable;
use crate::records::bias_absorption::{AbsorptionRecord, MeasuredMinima};
use crate::records::bias_correction::subtract_from_bias;
use crate::records::hints::is_skipped;
use crate::runs::data::{check_counts, DataSettings};
use crate::runs::data::{threads_option, worker_threads, COUNT_OPTIONS};
use crate::runs::paired_run::{ChannelShift, PairedRun, RunData, RunFailure, Sweeps, Watcher};
use qopt_interp::{KernelRegistry, Tensor};
use qopt_ir_core::equivalence::Relation;
use qopt_ir_core::interfaces::QuantizableOp;
use qopt_ir_core::pass::{OptionKind, OptionSpec, PassOptions};
use qopt_ir_core::PassInfo;
use qopt_ir_core::PassResult;
use qopt_ir_core::{
    constant_value, BadOptionValue, Context, Diagnostic, Diagnostics, FxHashMap, FxHashSet, Module, OpId,
    Pass, PassContext, PassError, PassOutcome, Severity,
};
use std::time::Instant;

/// The `absorb-bias` pass; see the module docs.
pub struct AbsorbBias;

const INFO: PassInfo = PassInfo {
    name: "absorb-bias",
    summary: "bias absorption: move the part of a layer's bias its relu never cuts (its calibrated minimum) into the next layer",
    preserves_semantics: false,
    // Exact over the reals where layer1's outputs stay at or above the
    // minima it records (`qnn.bias_absorption`), so proven under
    // `calibrated-range`, which assumes them.
    equivalence: Some(Relation::CalibratedRange),
    description: "Bias absorption (Nagel et al. 2019, Data-Free Quantization §4.1.1): for each pair `layer1 → fp.relu → \
     layer2` (conv2d, conv1d or dense, layer2 possibly depthwise, each result with one user), with `m[c]` \
     the smallest value of layer1's output channel c over the calibration data and `a = fraction · max(0, \
     m)`, subtracts `a` from layer1's bias and adds `W2 · a` (summed over input channels and taps; `a[c] · \
     Σ_k W2[c]` for a depthwise layer2) to layer2's. `relu(x − a) + a = relu(x)` for `x ≥ a ≥ 0`, so the \
     model is unchanged wherever layer1's outputs stay at or above their calibrated minima (exact on the \
     calibrated range only: `--verify-equiv` proves it under `calibrated-range`, assuming the recorded \
     minima). Pairs with `fp.clip` (ReLU6) between the \
     layers, a padded layer2 or shared results are skipped. The minima are recorded on layer1 \
     (`qnn.bias_absorption`); a layer that holds them is not measured again, and when every pair holds \
     them no data is read. Run it after `fold-bn` (and `equalize`), before `insert-observers`.\n\n\
     ```\n\
     %h = fp.conv2d(%x, %w1, %b1) ...; %r = fp.relu(%h) ...; %y = fp.conv2d(%r, %w2, %b2) ...\n\
     // -> %b1' = %b1 − a, %b2' = %b2 + W2 · a, %h {qnn.bias_absorption = {absorbed = ..., channel_min = \
     ..., samples = 500}}\n\
     ```",
};

impl Pass for AbsorbBias {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn options(&self) -> Vec<OptionSpec> {
        let mut options = vec![OptionSpec::new("data", OptionKind::String, "").reads_file().help(
            "calibration data: a .npy, an .npz (one member per argument) or a directory of them; needed unless \
             every pair's first layer holds its minima",
        )];
        // batches, batch-size and func as calibrate reads them.
        options.extend(DataSettings::options("").into_iter().filter(|o| o.name != "data"));
        options.push(
            OptionSpec::new("fraction", OptionKind::Float, "1.0")
                .help("the part of each positive minimum to absorb, in (0, 1]"),
        );
        options.push(threads_option());
        options
    }

    fn check_options(&self, options: &PassOptions) -> Result<(), BadOptionValue> {
        check_counts(options, &COUNT_OPTIONS)?;
        let fraction = options.float("fraction");
        if !(fraction > 0.0 && fraction <= 1.0) {
            let message = format!("'fraction' must be in (0, 1], got {fraction}");
            return Err(BadOptionValue::new("fraction", message));
        }
        Ok(())
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, options: &PassOptions) -> PassResult {
        self.check_options(options).map_err(|e| PassError::from(e.message))?;
        let fraction = options.float("fraction");
        let threads = worker_threads(options)?;
        let func_name = options.string("func").trim_start_matches('@').to_string();
        let func = match module.lookup_symbol(cx.ctx, &func_name) {
            Some(op) if module.op_name(op) == qopt_ir_core::OpName::FUNC => op,
            _ => return Err(format!("there is no function @{func_name} to run (set 'func')").into()),
        };
        let names = Names::new(cx.ctx);
        let found = find_pairs(cx, module, func, &names)?;
        cx.add_stat("skipped-clip-pairs", found.clip_pairs);
        cx.add_stat("skipped-padded", found.padded);
        cx.add_stat("skipped-shared-outputs", found.shared_outputs);
        let pairs = found.pairs;

        let unmeasured: Vec<&Pair> = pairs.iter().filter(|p| p.record.measured.is_none()).collect();
        let mut measured: FxHashMap<OpId, MeasuredMinima> = FxHashMap::default();
        let mut samples = 0;
        if let Some(first) = unmeasured.first() {
            if options.string("data").is_empty() {
                let message = format!(
                    "absorb-bias needs calibration data ('data=FILE') to measure the minima of {} layer(s) \
                     without a '{}' record, this one first",
                    unmeasured.len(),
                    crate::records::bias_absorption::BIAS_ABSORPTION
                );
                return Err(PassError::at_op(cx.ctx, module, first.first, message));
            }
            let settings = DataSettings::read(options)?;
            // Owned: the run borrows the context immutably while the kernels live in it.
            let kernels = KernelRegistry::of_or_standard(cx.ctx).into_owned();
            let start = Instant::now();
            let (ctx, m) = (&*cx.ctx, &*module);
            let data = settings.open(ctx, m)?;
            let (calls, leftover) = data.calls(settings.batches);
            samples = calls * data.per_call;
            measured = measure(ctx, m, &kernels, func, &unmeasured, RunData { data: &data, calls }, threads)?;
            cx.add_phase("run-samples", start.elapsed());
            leftover.into_iter().for_each(|w| cx.warn(w));
        }

        let (mut absorbed_pairs, mut channels_absorbed) = (0u64, 0u64);
        let measured_now = measured.len() as u64;
        for pair in pairs {
            let mut record = pair.record;
            if let Some(minima) = measured.remove(&pair.first) {
                record.measured = Some(minima);
            }
            let Some(minima) = &record.measured else { continue };
            let target: Vec<f64> = minima.channel_min.iter().map(|&m| fraction * m.max(0.0)).collect();
            let delta: Vec<f64> = target.iter().zip(&record.absorbed).map(|(t, a)| t - a).collect();
            if delta.iter().any(|&d| d != 0.0) {
                let into_next =
                    absorbed_into_next(&pair.weight2, &pair.weight2_shape, pair.input_axis, &delta);
                let negated: Vec<f64> = into_next.iter().map(|v| -v).collect();
                subtract_from_bias(cx.ctx, module, pair.first, &pair.q1, &delta)
                    .map_err(|e| PassError::at_op(cx.ctx, module, pair.first, e))?;
                subtract_from_bias(cx.ctx, module, pair.second, &pair.q2, &negated)
                    .map_err(|e| PassError::at_op(cx.ctx, module, pair.second, e))?;
                absorbed_pairs += 1;
            }
            channels_absorbed += target.iter().filter(|&&t| t > 0.0).count() as u64;
            record.absorbed = target;
            record
                .store(cx.ctx, module, pair.first)
                .map_err(|e| PassError::at_op(cx.ctx, module, pair.first, e))?;
        }
        cx.add_stats(&[
            ("absorbed-pairs", absorbed_pairs),
            ("channels-absorbed", channels_absorbed),
            ("layers-measured", measured_now),
            ("calibration-samples", samples as u64),
        ]);
        Ok(PassOutcome::from_changed(absorbed_pairs > 0 || measured_now > 0))
    }
}

/// One `layer1 → relu → layer2` pair.
struct Pair {
    first: OpId,
    second: OpId,
    q1: QuantizableOp,
    q2: QuantizableOp,
    /// layer1's result channel axis and channel count.
    axis: usize,
    channels: usize,
    /// layer2's constant weight and the axis of its input channels.
    weight2_shape: Vec<usize>,
    weight2: Vec<f64>,
    input_axis: usize,
    /// What layer1 already records.
    record: AbsorptionRecord,
}

/// The pairs of a function, in body order, and what was skipped.
struct Pairs {
    pairs: Vec<Pair>,
    clip_pairs: u64,
    padded: u64,
    shared_outputs: u64,
}

/// Finds the pairs in `func`'s body, warning about those that cannot be
/// absorbed; a malformed record is an error (all of them reported).
fn find_pairs(
    cx: &mut PassContext<'_>,
    module: &Module,
    func: OpId,
    names: &Names,
) -> Result<Pairs, PassError> {
    let ctx = &*cx.ctx;
    let mut found = Pairs { pairs: Vec::new(), clip_pairs: 0, padded: 0, shared_outputs: 0 };
    let mut warnings: Vec<(OpId, String)> = Vec::new();
    let mut errors = Vec::new();
    let Some(entry) =
        (module.num_regions(func) == 1).then(|| module.blocks(module.region(func, 0)).next()).flatten()
    else {
        return Err(PassError::at_op(ctx, module, func, "the function has no body"));
    };
    for first in module.block_ops(entry) {
        if !names.is_layer(module, first) || module.num_results(first) != 1 {
            continue;
        }
        let (second, between) = match follow(module, names, module.result(first, 0)) {
            Follow::Layer(second, Some(between)) => (second, between),
            Follow::Shared => {
                found.shared_outputs += 1;
                continue;
            }
            Follow::Layer(_, None) | Follow::Nothing => continue,
        };
        if module.op_name(between) == names.clip {
            found.clip_pairs += 1;
            warnings.push((
                between,
                "absorb-bias: pair skipped: fp.clip's upper bound would move (clip(x − a, 0, max) + a caps at \
                 max + a, and one clip has no bound per channel); equalize{relu6-to-relu=true} would turn it into \
                 fp.relu, changing the model"
                    .to_string(),
            ));
            continue;
        }
        if is_skipped(ctx, module, first) || is_skipped(ctx, module, second) {
            continue;
        }
        let padding = module
            .op_attr(ctx, second, "pad")
            .and_then(|a| ctx.attr_as_array(a))
            .is_some_and(|pads| pads.iter().any(|&p| ctx.attr_as_int(p) != Some(0)));
        if padding {
            found.padded += 1;
            warnings.push((
                second,
                "absorb-bias: pair skipped: this layer pads its input, and its border would read 0 where the \
                 absorbed model needs the absorbed amount"
                    .to_string(),
            ));
            continue;
        }
        match read_pair(ctx, module, first, second) {
            Ok(Some((mut pair, channels))) => match AbsorptionRecord::load(ctx, module, first, channels) {
                Ok(record) => {
                    pair.record = record;
                    found.pairs.push(pair);
                }
                Err(e) => errors.push(Diagnostic::at_op(ctx, module, first, Severity::Error, e)),
            },
            Ok(None) => {}
            Err((op, reason)) => warnings.push((op, format!("absorb-bias: pair skipped: {reason}"))),
        }
    }
    if !errors.is_empty() {
        return Err(Diagnostics(errors).into());
    }
    for (op, message) in warnings {
        cx.warn_at(module, op, message);
    }
    Ok(found)
}

/// The pair `first → relu → second` with layer2's weight read, and layer1's
/// channel count; `Ok(None)` when the ops have no weight or bias position,
/// an error (at the op to blame) when a pair cannot be absorbed.
fn read_pair(
    ctx: &Context,
    module: &Module,
    first: OpId,
    second: OpId,
) -> Result<Option<(Pair, usize)>, (OpId, String)> {
    let (Some(q1), Some(q2)) = (quantizable(ctx, module, first), quantizable(ctx, module, second)) else {
        return Ok(None);
    };
    let (Some(_), Some(b1), Some(w2), Some(b2)) = (q1.weight, q1.bias, q2.weight, q2.bias) else {
        return Ok(None);
    };
    for (op, b) in [(first, b1), (second, b2)] {
        let operands = module.num_operands(op);
        if b > operands {
            return Err((op, "the op lacks operands before its bias".into()));
        }
        if b < operands && constant_value(ctx, module, module.operand(op, b)).is_none() {
            return Err((op, "its bias is not a constant".into()));
        }
    }
    let dims = ctx.tensor_shape(module.value_type(module.result(first, 0))).unwrap_or(&[]).to_vec();
    let axis =
        q1.channel_axis_for_rank(dims.len()).ok_or((first, "its result has no channel axis".to_string()))?;
    let channels = usize::try_from(dims[axis])
        .ok()
        .filter(|&c| c > 0)
        .ok_or((first, "its result has a dynamic channel count".to_string()))?;
    let input_axis = second_input_axis(ctx, module, second).map_err(|e| (second, e))?;
    if w2 >= module.num_operands(second) {
        return Err((second, "it has no weight operand".into()));
    }
    let (weight2_shape, weight2) = read_constant(ctx, module, module.operand(second, w2))
        .ok_or((second, "its weight is not a float constant of static shape".to_string()))?;
    let fits = weight2_shape.len() >= 2
        && weight2_shape[input_axis] == channels
        && (input_axis == 1 || weight2_shape[1] == 1);
    if !fits {
        return Err((second, format!("its weight does not read {channels} input channels")));
    }
    if weight2.iter().any(|w| !w.is_finite()) {
        return Err((second, "its weight is not finite".into()));
    }
    let pair = Pair {
        first,
        second,
        q1: q1.clone(),
        q2: q2.clone(),
        axis,
        channels,
        weight2_shape,
        weight2,
        input_axis,
        record: AbsorptionRecord::none(channels),
    };
    Ok(Some((pair, channels)))
}

/// What absorbing `amounts` (one per input channel of layer2) adds to each
/// output channel of layer2: `Σ_{c,k} W2[o,c,k] · amounts[c]` when the input
/// channels are on weight axis 1 (dense, a conv with one group), and
/// `amounts[o] · Σ_k W2[o,0,k]` when on axis 0 (depthwise).
pub(crate) fn absorbed_into_next(
    weight: &[f64],
    shape: &[usize],
    input_axis: usize,
    amounts: &[f64],
) -> Vec<f64> {
    let outputs = shape[0];
    let inputs = shape.get(1).copied().unwrap_or(1).max(1);
    let taps: usize = shape.get(2..).map_or(1, |d| d.iter().product::<usize>()).max(1);
    let mut added = vec![0.0f64; outputs];
    for (i, w) in weight.iter().enumerate() {
        let o = i / (inputs * taps);
        let c = if input_axis == 0 { o } else { (i / taps) % inputs };
        added[o] += w * amounts[c];
    }
    added
}

/// Runs the data through the model as it stands and returns, for each pair
/// without recorded minima, layer1's per-channel minima with its original
/// bias (the measured minima + what was absorbed already).
fn measure(
    ctx: &Context,
    module: &Module,
    kernels: &KernelRegistry,
    func: OpId,
    pairs: &[&Pair],
    data: RunData<'_>,
    threads: usize,
) -> Result<FxHashMap<OpId, MeasuredMinima>, PassError> {
    let located = |f: RunFailure| -> PassError {
        match f.op {
            Some(op) => PassError::at_op(ctx, module, op, f.message),
            None => f.message.into(),
        }
    };
    let run = PairedRun::new(ctx, module, kernels, func, threads).map_err(located)?;
    let watched: FxHashSet<OpId> = pairs.iter().map(|p| p.first).collect();
    let mut watcher = Minima {
        pairs: pairs.iter().map(|p| (p.first, *p)).collect(),
        minima: FxHashMap::default(),
        measured: FxHashMap::default(),
    };
    run.run(data, &watched, &FxHashMap::default(), Sweeps::One, &mut watcher, "absorb-bias")
        .map_err(located)?;
    Ok(watcher.measured)
}

/// The watcher of `absorb-bias`: layer1's channel minima in the float model.
struct Minima<'p> {
    pairs: FxHashMap<OpId, &'p Pair>,
    /// Per layer1, the minima so far and the samples seen.
    minima: FxHashMap<OpId, (Vec<f64>, usize)>,
    measured: FxHashMap<OpId, MeasuredMinima>,
}

impl Watcher for Minima<'_> {
    fn observe(&mut self, op: OpId, _quant: &Tensor, float: &Tensor) -> Result<(), String> {
        let Some(pair) = self.pairs.get(&op) else { return Ok(()) };
        let (minima, samples) =
            self.minima.entry(op).or_insert_with(|| (vec![f64::INFINITY; pair.channels], 0));
        lower_minima(minima, float, pair.axis)?;
        *samples += float.shape().first().copied().unwrap_or(1);
        Ok(())
    }

    fn finish(&mut self, op: OpId) -> Result<Option<ChannelShift>, String> {
        let Some(pair) = self.pairs.get(&op) else { return Ok(None) };
        let (minima, samples) =
            self.minima.remove(&op).unwrap_or_else(|| (vec![f64::INFINITY; pair.channels], 0));
        if let Some(c) = minima.iter().position(|v| !v.is_finite()) {
            return Err(format!("the minimum of output channel {c} is not finite on the calibration data"));
        }
        let channel_min = minima.iter().zip(&pair.record.absorbed).map(|(m, a)| m + a).collect();
        self.measured.insert(op, MeasuredMinima { channel_min, samples: samples as i64 });
        Ok(None)
    }
}

/// Lowers each of `minima` (one per channel on `axis`) to the smallest value
/// of its channel in `tensor` (NaN if one is NaN).
fn lower_minima(minima: &mut [f64], tensor: &Tensor, axis: usize) -> Result<(), String> {
    let values = result_values(tensor, axis, minima.len())?;
    for (channel, run) in channel_blocks(values, tensor.shape(), axis) {
        let m = &mut minima[channel];
        for &v in run {
            let v = f64::from(v);
            // NaN sticks, so the caller reports it.
            if v.is_nan() || v < *m {
                *m = v;
            }
            if m.is_nan() {
                break;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{absorbed_into_next, lower_minima};
    use qopt_interp::Tensor;

    /// Dense [2 out, 3 in]: each output adds its row times the amounts.
    /// Conv [2 out, 3 in, 1, 2]: the taps of each input channel sum first.
    /// Depthwise [3, 1, 2, 1]: channel c adds amounts[c] times its taps.
    #[test]
    fn absorbed_amounts_follow_the_input_channel_axis() {
        let dense = [1.0, 2.0, 3.0, -1.0, 0.5, 0.0];
        assert_eq!(absorbed_into_next(&dense, &[2, 3], 1, &[1.0, 10.0, 100.0]), [321.0, 4.0]);
        let conv = [1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 0.0, -1.0, 0.0, 0.0, 0.0, 0.5];
        assert_eq!(absorbed_into_next(&conv, &[2, 3, 1, 2], 1, &[1.0, 10.0, 100.0]), [642.0, 49.0]);
        let depthwise = [1.0, 2.0, -1.0, 0.0, 0.25, 0.25];
        assert_eq!(absorbed_into_next(&depthwise, &[3, 1, 2, 1], 0, &[1.0, 10.0, 100.0]), [3.0, -10.0, 50.0]);
    }

    #[test]
    fn minima_are_per_channel_over_batches_and_positions() {
        let a = Tensor::from_f32(&[1, 2, 2], vec![3.0, -1.0, 5.0, 4.0]).unwrap();
        let b = Tensor::from_f32(&[1, 2, 2], vec![2.0, 0.5, 6.0, 7.0]).unwrap();
        let minima = |tensors: &[&Tensor]| {
            let mut m = vec![f64::INFINITY; 2];
            tensors.iter().try_for_each(|t| lower_minima(&mut m, t, 1)).map(|()| m)
        };
        assert_eq!(minima(&[&a, &b]).unwrap(), [-1.0, 4.0]);
        let nan = Tensor::from_f32(&[1, 2, 2], vec![f32::NAN, 9.0, 1.0, 1.0]).unwrap();
        assert!(minima(&[&nan, &a]).unwrap()[0].is_nan());
        assert!(lower_minima(&mut [0.0; 3], &a, 1).is_err());
    }
}
