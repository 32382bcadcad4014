//! `bias-correct{data=PATH}`: empirical bias correction (AIMET's empirical
//! and NNCF's bias correction), on the fake-quant model after `insert-fakeq`;
//! the `quantize` pipeline runs it there unless `bias-correct=false`.
//!
//! For each conv or dense whose weight is fake-quantized (in the order of the
//! function body, which is a topological order), over the calibration data:
//!
//! ```text
//! e_c = mean over samples and positions of ( y_q[c] − y_f[c] )
//! b'_c = b_c − e_c
//! ```
//!
//! where `y_q` is the layer's result in the fake-quant model (quantized
//! weights, quantized activations, and the biases of the layers before it
//! already corrected) and `y_f` its result in the float model (every
//! `qnn.fake_quant` the identity, float biases). Layers are corrected in
//! order, so each layer's error is measured with every earlier correction in
//! place: the correction of a layer also takes back the mean error its input
//! still carries. A layer without a bias gets one; a depthwise or grouped conv
//! is run by its kernel like any other; a bias that `fold-bn` folded is an
//! ordinary bias here.
//!
//! **A correction must help.** A layer followed by an optional relu or clip
//! and a per-tensor fake quant keeps its correction only when it does not
//! raise the error of that quantized output on the data (a sample of the
//! result elements, `output_check.rs`); a rejected one leaves the float
//! bias, records `kept = false` and is named at `qopt -v` (an info event,
//! not a warning: the decision is right and needs nothing from the user).
//!
//! **Statistics in the IR.** The means are recorded on the layer as
//! `qnn.bias_correction = {correction, float_mean, quant_mean, samples}`
//! (`bias_record.rs`; both means with the float bias, so they do not depend
//! on the correction). A layer that already holds the means is not measured
//! again: its correction is `quant_mean − float_mean`, so a rerun changes
//! nothing, hand-edited means are applied as written, and removing the
//! means measures the layer again. `correction` also holds what
//! `insert-fakeq`'s fast bias correction subtracted, which the float model
//! adds back.
//!
//! **Running.** One sweep over the data per layer ([`PairedRun`]): each
//! sweep runs the ops after the previous layer up to this one on every batch
//! in both models, so a layer's correction is known before any later layer
//! runs, and each op runs once per batch, as in one run of the network. The
//! values a later sweep needs go to a scratch file in the temporary
//! directory, not memory: memory holds a few batches' activations and each
//! layer's channel sums, whatever the number of samples (the scratch file
//! grows with it); `batches=N` limits the samples. When every layer holds its
//! means, no data is read. On a terminal a progress bar labelled
//! `bias-correct` counts the samples over all sweeps.
//!
//! Errors (nothing is changed): a missing or unreadable data file, samples
//! that do not fit the function's arguments, a record of the wrong size, an
//! op without a kernel, a non-finite mean (at the layer); calls, ops with
//! regions or several blocks (at the op). With `skip-unsupported=true`
//! (what `quantize` passes) the last group and a missing kernel are a
//! warning instead, and the module is left as it is. Statistics:
//! `layers-measured`, `biases-corrected`, `corrections-rejected`,
//! `calibration-samples`.
//!
//! ```text
//! // before (after insert-fakeq{bias-correction=false})
//! %y = fp.conv2d(%xq, %wq, %b) : ...
//! // after bias-correct{data=calib.npy}
//! %y = fp.conv2d(%xq, %wq, %b2) {qnn.bias_correction = {correction = dense<[0.012, -0.003]> : tensor<2xf64>,
//!        float_mean = dense<[...]> : tensor<2xf64>, quant_mean = dense<[...]> : tensor<2xf64>, samples = 500}} : ...
//! ```

mod output_check;

use crate::channels::{channel_sums, result_values};
use crate::quantizable::quantizable;
use crate::records::bias_correction::subtract_from_bias;
use crate::records::bias_correction::{BiasRecord, MeasuredMeans};
use crate::records::hints::is_skipped;
use crate::runs::data::{check_counts, DataSettings};
use crate::runs::data::{worker_threads, COUNT_OPTIONS};
use crate::runs::paired_run::{ChannelShift, PairedRun, RunData, RunFailure, Sweeps, Watcher};
use output_check::{OutputStage, ResultSample, Verdict};
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_interp::{KernelRegistry, Tensor};
use qopt_ir_core::interfaces::QuantizableOp;
use qopt_ir_core::pass::{OptionKind, OptionSpec, PassOptions};
use qopt_ir_core::PassInfo;
use qopt_ir_core::PassResult;
use qopt_ir_core::{
    constant_value, AttrData, BadOptionValue, Context, Diagnostic, Diagnostics, FxHashMap, FxHashSet, Module,
    OpId, Pass, PassContext, PassError, PassOutcome, Severity,
};
use std::time::Instant;

/// The `bias-correct` pass; see the module docs.
pub struct BiasCorrect;

/// The option that turns a function outside the paired run's scope into a
/// warning (the `quantize` pipeline sets it).
pub(crate) const SKIP_UNSUPPORTED: &str = "skip-unsupported";

const INFO: PassInfo = PassInfo {
    name: "bias-correct",
    summary: "empirical bias correction: subtract each quantized layer's mean output error on the data from its bias",
    preserves_semantics: false,
    equivalence: None,
    description: "Runs the calibration data through the fake-quant model and the float model (every \
     `qnn.fake_quant` the identity) op by op, and for each conv or dense with a fake-quantized \
     weight, in order, subtracts from its bias the per-channel mean of (quantized result − float \
     result), so later layers are measured with the earlier corrections in place. Layers without \
     a bias get one. The measured means are kept on the layer (`qnn.bias_correction`); a layer \
     that holds them is not measured again, so a rerun changes nothing and edited means are \
     applied as written. A layer followed by an optional relu or clip and a per-tensor fake quant \
     keeps its correction only when it does not raise that quantized output's error on the data \
     (a rejected one keeps the float bias and is recorded as `kept = false`; `qopt -v` names it). Run it after \
     `insert-fakeq`.\n\n\
     ```\n\
     %y = fp.conv2d(%xq, %wq, %b) ...\n\
     // -> %y = fp.conv2d(%xq, %wq, %b2) {qnn.bias_correction = {correction = ..., float_mean = ..., \
     quant_mean = ..., samples = 500}} ...\n\
     ```",
};

impl Pass for BiasCorrect {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn options(&self) -> Vec<OptionSpec> {
        let mut options = DataSettings::calibration_options();
        options.push(OptionSpec::new(SKIP_UNSUPPORTED, OptionKind::Bool, "false").help(
            "a function the paired run cannot follow (calls, ops with regions, several blocks, an op without a \
             kernel) gets a warning and is left as it is, instead of an error",
        ));
        options
    }

    fn check_options(&self, options: &PassOptions) -> Result<(), BadOptionValue> {
        check_counts(options, &COUNT_OPTIONS)
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, options: &PassOptions) -> PassResult {
        let settings = DataSettings::read(options)?;
        let threads = worker_threads(options)?;
        let func = match module.lookup_symbol(cx.ctx, &settings.func) {
            Some(op) if module.op_name(op) == qopt_ir_core::OpName::FUNC => op,
            _ => {
                return Err(format!("there is no function @{} to correct (set 'func')", settings.func).into())
            }
        };
        let layers = find_layers(cx, module, func)?;
        if layers.is_empty() {
            cx.warn_unlocated(
                "bias-correct found no conv or dense with a fake-quantized weight; run insert-fakeq first",
            );
            return Ok(PassOutcome::Unchanged);
        }
        let mut measured: FxHashMap<OpId, (MeasuredMeans, Option<Verdict>)> = FxHashMap::default();
        let mut samples = 0;
        if layers.iter().any(|l| l.record.measured.is_none()) {
            // Owned: the run borrows the context immutably while the kernels live in it.
            let kernels = KernelRegistry::of_or_standard(cx.ctx).into_owned();
            if options.bool(SKIP_UNSUPPORTED) {
                if let Err(failure) = PairedRun::new(cx.ctx, module, &kernels, func, threads) {
                    let message = format!("bias-correct leaves the model as it is: {}", failure.message);
                    match failure.op {
                        Some(op) => cx.warn_at(module, op, message),
                        None => cx.warn_unlocated(message),
                    }
                    return Ok(PassOutcome::Unchanged);
                }
            }
            let start = Instant::now();
            let (ctx, m) = (&*cx.ctx, &*module);
            let data = settings.open(ctx, m)?;
            let (calls, leftover) = data.calls(settings.batches);
            samples = calls * data.per_call;
            measured = measure(ctx, m, &kernels, func, &layers, RunData { data: &data, calls }, threads)?;
            cx.add_phase("run-samples", start.elapsed());
            leftover.into_iter().for_each(|w| cx.warn(w));
        }

        let (mut corrected, mut rejected) = (0u64, 0u64);
        let measured_now = measured.len() as u64;
        for layer in layers {
            let mut record = layer.record;
            if let Some((means, verdict)) = measured.remove(&layer.op) {
                record.measured = Some(means);
                record.kept = verdict.is_none_or(|v| v.keeps());
                if let Some(v) = verdict.filter(|v| !v.keeps()) {
                    rejected += 1;
                    // The decision is the pass's to make and is recorded in
                    // the IR, so it is reported with `-v`, not as a warning.
                    let message = format!(
                        "bias correction rejected: it would raise the squared error of this layer's quantized \
                         output on the calibration data from {:.6e} to {:.6e} (over {} sampled elements); the \
                         float bias is kept (`kept = false` in '{}')",
                        v.without,
                        v.with,
                        v.elements,
                        crate::records::bias_correction::BIAS_CORRECTION
                    );
                    let note = Diagnostic::at_op(cx.ctx, module, layer.op, Severity::Note, message);
                    tracing::info!("{note}");
                }
            }
            let Some(means) = &record.measured else { continue };
            let target = kept_target(means, record.kept);
            let delta: Vec<f64> = target.iter().zip(&record.correction).map(|(t, c)| t - c).collect();
            if delta.iter().any(|&d| d != 0.0) {
                subtract_from_bias(cx.ctx, module, layer.op, &layer.q, &delta)
                    .map_err(|e| PassError::at_op(cx.ctx, module, layer.op, e))?;
                corrected += 1;
            }
            record.correction = target;
            record
                .store(cx.ctx, module, layer.op)
                .map_err(|e| PassError::at_op(cx.ctx, module, layer.op, e))?;
        }
        cx.add_stats(&[
            ("layers-measured", measured_now),
            ("biases-corrected", corrected),
            ("corrections-rejected", rejected),
            ("calibration-samples", samples as u64),
        ]);
        Ok(PassOutcome::from_changed(corrected > 0 || measured_now > 0))
    }
}

/// A conv or dense to correct.
struct Layer {
    op: OpId,
    q: QuantizableOp,
    /// The result's channel axis.
    axis: usize,
    /// Output channels.
    channels: usize,
    /// What the IR already records about its bias.
    record: BiasRecord,
    /// The activation and fake quant its result goes through, when that is
    /// how the next layer reads it: what decides whether a correction is kept.
    output: Option<OutputStage>,
}

/// The correction `means` call for, or none when it was rejected.
fn kept_target(means: &MeasuredMeans, kept: bool) -> Vec<f64> {
    let target = means.error();
    if kept {
        target
    } else {
        vec![0.0; target.len()]
    }
}

/// The layers of `func`'s body to correct, in body order: ops with a
/// weight and a bias position whose weight is fake-quantized, not marked
/// `qnn.skip`. One that cannot be corrected (a bias that is not a constant,
/// an unknown or dynamic channel count) gets a warning; a malformed record
/// is an error.
fn find_layers(cx: &mut PassContext<'_>, module: &Module, func: OpId) -> Result<Vec<Layer>, PassError> {
    let ctx = &*cx.ctx;
    let mut layers = Vec::new();
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    let Some(entry) =
        (module.num_regions(func) == 1).then(|| module.blocks(module.region(func, 0)).next()).flatten()
    else {
        return Err(format!("@{} has no body", ctx.op_name_str(module.op_name(func))).into());
    };
    for op in module.block_ops(entry) {
        let Some(q) = quantizable(ctx, module, op) else { continue };
        let (Some(w), Some(b)) = (q.weight, q.bias) else { continue };
        let operands = module.num_operands(op);
        if w >= operands || is_skipped(ctx, module, op) || module.num_results(op) == 0 {
            continue;
        }
        let weight_def = module.defining_op(module.operand(op, w));
        if weight_def.is_none() || !module.op_is(ctx, weight_def, qnn_op::FAKE_QUANT) {
            continue;
        }
        let dims = ctx.tensor_shape(module.value_type(module.result(op, 0))).unwrap_or(&[]).to_vec();
        let axis = q.channel_axis_for_rank(dims.len());
        let problem = match axis.map(|a| dims[a]) {
            _ if b > operands => Some("the op lacks operands before its bias".to_string()),
            _ if b < operands && constant_value(ctx, module, module.operand(op, b)).is_none() => {
                Some("its bias is not a constant".to_string())
            }
            None => Some("its result has no channel axis".to_string()),
            Some(c) if c <= 0 => Some("its result has a dynamic channel count".to_string()),
            Some(_) => None,
        };
        if let Some(problem) = problem {
            warnings.push((op, format!("bias not corrected: {problem}")));
            continue;
        }
        let (axis, channels) = match axis {
            Some(a) => (a, dims[a] as usize),
            None => continue,
        };
        match BiasRecord::load(ctx, module, op, channels) {
            Ok(record) => {
                let output = OutputStage::find(ctx, module, op);
                layers.push(Layer { op, q: q.clone(), axis, channels, record, output })
            }
            Err(e) => errors.push(Diagnostic::at_op(ctx, module, op, Severity::Error, e)),
        }
    }
    if !errors.is_empty() {
        return Err(Diagnostics(errors).into());
    }
    for (op, message) in warnings {
        cx.warn_at(module, op, message);
    }
    Ok(layers)
}

/// Runs the data through both models and returns, for each layer without
/// recorded means, its measured means (with the float bias) and, where its
/// output stage is known, the verdict on its correction; every layer's
/// kept correction is applied to its fake-quant results before later ops run.
fn measure(
    ctx: &Context,
    module: &Module,
    kernels: &KernelRegistry,
    func: OpId,
    layers: &[Layer],
    data: RunData<'_>,
    threads: usize,
) -> Result<FxHashMap<OpId, (MeasuredMeans, Option<Verdict>)>, PassError> {
    let located = |f: RunFailure| -> PassError {
        match f.op {
            Some(op) => PassError::at_op(ctx, module, op, f.message),
            None => f.message.into(),
        }
    };
    let run = PairedRun::new(ctx, module, kernels, func, threads).map_err(located)?;
    let watched: FxHashSet<OpId> = layers.iter().map(|l| l.op).collect();
    // The float model runs each corrected layer with its float bias.
    let mut float_biases = FxHashMap::default();
    for layer in layers.iter().filter(|l| l.record.correction.iter().any(|&c| c != 0.0)) {
        let b = layer.q.bias.unwrap_or(usize::MAX);
        if b >= module.num_operands(layer.op) {
            return Err(PassError::at_op(
                ctx,
                module,
                layer.op,
                "'qnn.bias_correction' records a correction but the op has no bias",
            ));
        }
        let float_bias =
            float_bias(ctx, module, layer, b).map_err(|e| PassError::at_op(ctx, module, layer.op, e))?;
        float_biases.insert(layer.op, (b, float_bias));
    }
    let mut watcher = MeanErrors {
        layers: layers.iter().map(|l| (l.op, l)).collect(),
        sums: FxHashMap::default(),
        measured: FxHashMap::default(),
    };
    run.run(data, &watched, &float_biases, Sweeps::PerWatchedOp, &mut watcher, "bias-correct")
        .map_err(located)?;
    Ok(watcher.measured)
}

/// The running sums of one layer's results over the batches so far.
#[derive(Default)]
struct ChannelSums {
    quant: ChannelMeans,
    float: ChannelMeans,
    /// Samples (first dimensions) seen.
    samples: usize,
    /// Result elements for the verdict, when the layer has an output stage.
    sample: Option<ResultSample>,
}

/// Per channel on an axis, the sum over every other axis of all tensors
/// added (summed per tensor, then in order, in f64), and the values per
/// channel added.
#[derive(Default)]
struct ChannelMeans {
    sums: Vec<f64>,
    count: usize,
}

impl ChannelMeans {
    fn add(&mut self, tensor: &Tensor, axis: usize, channels: usize) -> Result<(), String> {
        let values = result_values(tensor, axis, channels)?;
        let tensor_sums = channel_sums(values, tensor.shape(), axis, channels);
        self.sums.resize(channels, 0.0);
        self.sums.iter_mut().zip(tensor_sums).for_each(|(s, t)| *s += t);
        self.count += values.len() / channels.max(1);
        Ok(())
    }

    fn means(&self, channels: usize) -> Vec<f64> {
        let count = self.count.max(1) as f64;
        (0..channels).map(|c| self.sums.get(c).copied().unwrap_or(0.0) / count).collect()
    }
}

/// The watcher of `bias-correct`: each layer's channel means in both models,
/// then its correction as the shift later layers see.
struct MeanErrors<'l> {
    layers: FxHashMap<OpId, &'l Layer>,
    sums: FxHashMap<OpId, ChannelSums>,
    /// The means of layers without recorded ones, with the verdict on
    /// their correction.
    measured: FxHashMap<OpId, (MeasuredMeans, Option<Verdict>)>,
}

impl Watcher for MeanErrors<'_> {
    fn observe(&mut self, op: OpId, quant: &Tensor, float: &Tensor) -> Result<(), String> {
        let Some(layer) = self.layers.get(&op) else { return Ok(()) };
        let sums = self.sums.entry(op).or_default();
        sums.quant.add(quant, layer.axis, layer.channels)?;
        sums.float.add(float, layer.axis, layer.channels)?;
        sums.samples += quant.shape().first().copied().unwrap_or(1);
        if layer.output.is_some() && layer.record.measured.is_none() {
            let sample = sums
                .sample
                .get_or_insert_with(|| ResultSample::new(qopt_ir_core::EntityId::index(op) as u64));
            let (q, f) = (
                result_values(quant, layer.axis, layer.channels)?,
                result_values(float, layer.axis, layer.channels)?,
            );
            sample.offer(q, f, quant.shape(), layer.axis);
        }
        Ok(())
    }

    fn finish(&mut self, op: OpId) -> Result<Option<ChannelShift>, String> {
        let Some(layer) = self.layers.get(&op) else { return Ok(None) };
        let sums = self.sums.remove(&op).unwrap_or_default();
        let quant_mean = sums.quant.means(layer.channels);
        let float_mean = sums.float.means(layer.channels);
        if let Some(c) = quant_mean.iter().chain(&float_mean).position(|v| !v.is_finite()) {
            return Err(format!(
                "the mean of output channel {} is not finite on the calibration data",
                c % layer.channels
            ));
        }
        let correction = &layer.record.correction;
        let target = match &layer.record.measured {
            Some(recorded) => kept_target(recorded, layer.record.kept),
            None => {
                let means = MeasuredMeans {
                    // Measured with the stored bias; add back what it lacks of the float bias.
                    quant_mean: quant_mean.iter().zip(correction).map(|(q, c)| q + c).collect(),
                    float_mean,
                    samples: sums.samples as i64,
                };
                let verdict = layer
                    .output
                    .as_ref()
                    .zip(sums.sample.as_ref())
                    .map(|(stage, sample)| Verdict::of(stage, sample, correction, &means.error()));
                let target = kept_target(&means, verdict.is_none_or(|v| v.keeps()));
                self.measured.insert(op, (means, verdict));
                target
            }
        };
        // Later layers see this layer with its kept correction.
        let delta: Vec<f64> = target.iter().zip(correction).map(|(t, c)| t - c).collect();
        Ok(Some(ChannelShift { axis: layer.axis, delta }))
    }
}

/// The float model's bias of `layer`: its constant bias plus its recorded correction.
fn float_bias(ctx: &Context, module: &Module, layer: &Layer, b: usize) -> Result<Tensor, String> {
    let attr =
        constant_value(ctx, module, module.operand(layer.op, b)).ok_or("the bias is not a constant")?;
    let AttrData::Dense(d) = ctx.attr_data(attr) else {
        return Err("the bias is not a dense constant".into());
    };
    let bias = Tensor::from_dense(ctx, d).map_err(|e| e.message)?;
    if bias.len() != layer.channels {
        return Err(format!("the bias has {} values for {} output channels", bias.len(), layer.channels));
    }
    let values =
        bias.to_f64_vec().iter().zip(&layer.record.correction).map(|(b, c)| (b + c) as f32).collect();
    Tensor::from_f32(bias.shape(), values).map_err(|e| e.message)
}
