//! `insert-fakeq`: turns every `qnn.observe` into a `qnn.fake_quant` whose
//! parameters come from the observer's statistics, and fake-quantizes the
//! weight of every quantized op from its constant values.
//!
//! **Activations.** The range method (`method`, a [`RangeMethod`] from the
//! registry: `minmax`, `percentile`, `entropy`, `mse`, or a downstream one)
//! turns the statistics into a range `[lo, hi]`; the range is widened to
//! contain 0 (so zero padding and relu stay exact) and converted to scale and
//! zero point for `activation-type` with `activation-scheme`
//! (`docs/quantization.md` gives the formulas). An observer without
//! statistics is an error at its location; an observer of an already
//! quantized value is removed (it is the identity).
//!
//! **Weights.** An op with the `QuantizableOp` interface whose activation
//! operands are quantized (observed or fake-quantized) gets its constant weight
//! fake-quantized with `weight-type` and `weight-scheme`, per channel along the
//! interface's `weight_channel_axis` when `per-channel` is set, from the
//! constant's own min and max; an op marked `qnn.skip` (the user skipped it)
//! keeps its float weights, and so does an op whose output (after its relu or
//! clip) is kept float by `qnn.cast_hint {kind = "float"}`. Biases stay float (Quantization II quantizes
//! them to i32). Constants in activation positions of quantized ops (a matmul
//! by a constant, an add of one) are fake-quantized per tensor with the
//! activation settings. Values already behind a `qnn.fake_quant` are left as
//! they are.
//!
//! **Storage hints.** An observer with `storage = "iN"` (or `"uN"`; put there
//! by `insert-observers` from a `qnn.cast_hint`) is quantized to that storage
//! instead of `activation-type`, with the same scheme; the op whose result
//! (after its fused relu or clip) it observes gets weights of `min(N, 8)` bits
//! with `weight-type`'s signedness and scheme, so a layer hinted i16 is W8A16
//! and one hinted i4 is W4A4 whatever `weight-type` says.
//!
//! ```text
//! // before
//! %o = qnn.observe(%x) {max = 2.0 : f32, min = -1.0 : f32, samples = 4} : (tensor<1x8xf32>) -> tensor<1x8xf32>
//! %y = fp.dense(%o, %w, %b) : ...
//! // after insert-fakeq (i8 asymmetric: scale 3/255, zero point round(-128 + 1/(3/255)) = -43)
//! %o = qnn.fake_quant(%x) {type = !qnn.uniform<i8:f32, 0.0117647061:-43>} : ...
//! %wq = qnn.fake_quant(%w) {type = !qnn.uniform<i8:f32:0, {...}>} : ...
//! %y = fp.dense(%o, %wq, %b) : ...
//! ```

mod bias_correction;
pub(crate) mod wide_concat;

use crate::calibration::methods::{QuantMethods, RangeMethod, RangeTarget};
use crate::calibration::stats::ObserverStats;
use crate::quantizable::{is_float_tensor, quantizable};
use crate::records::hints::{is_kept_float, is_skipped, storage_kind, STORAGE};
use crate::records::scheme::{Scheme, DEGENERATE_SCALE};
use bias_correction::correct_bias;
use qopt_dialect_qnn::fixed_point::scale_f32;
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_interp::KernelRegistry;
use qopt_ir_core::interfaces::{FusedActivation, QuantizableOp};
use qopt_ir_core::pass::{OptionKind, OptionSpec, PassOptions};
use qopt_ir_core::BadOptionValue;
use qopt_ir_core::PassInfo;
use qopt_ir_core::PassResult;
use qopt_ir_core::{
    constant_value, dense_values_f64, AttrData, Context, Diagnostic, Diagnostics, FloatKind, FxHashMap,
    IntType, Module, OpId, OperationState, Pass, PassContext, PassError, PassOutcome, QuantParams, Severity,
    Type, TypeData, ValueDef, ValueId,
};
use std::sync::Arc;
use wide_concat::{wide_concat_observers, WIDE};

/// The `insert-fakeq` pass; see the module docs.
pub struct InsertFakeq;

/// `weight-method=auto` searches weight ranges for the least squared error
/// for weight types narrower than this. Clipping trades the error of a few
/// large weights for finer steps everywhere; from 8 bits the steps are fine
/// enough that, once bias correction removes the mean error, the concentrated
/// clipping error costs more than it saves.
const AUTO_MSE_BELOW_BITS: u8 = 8;

/// `percentile` is in (0, 100] ([`Pass::check_options`]).
fn check_percentile(options: &PassOptions) -> Result<(), BadOptionValue> {
    let percentile = options.float("percentile");
    if !(percentile > 0.0 && percentile <= 100.0) {
        let message = format!("'percentile' must be in (0, 100], got {percentile}");
        return Err(BadOptionValue::new("percentile", message));
    }
    Ok(())
}

const INFO: PassInfo = PassInfo {
    name: "insert-fakeq",
    summary: "replace observers by qnn.fake_quant with calibrated parameters and fake-quantize weights",
    preserves_semantics: false,
    equivalence: None,
    description: "Replaces each `qnn.observe` by a `qnn.fake_quant` whose type comes from the observer's \
     statistics through a range method (`method`), widened to contain 0, for `activation-type` \
     and `activation-scheme`. The constant weight of every op whose activations are quantized \
     gets a `qnn.fake_quant` too (`weight-type`, `weight-scheme`, per channel by default). \
     Biases stay float. An observer with `storage = \"iN\"` (from a `qnn.cast_hint`) is quantized \
     to that storage, and the op producing its value gets `min(N, 8)`-bit weights.\n\n\
     ```\n\
     %o = qnn.observe(%x) {max = 2.0 : f32, min = -1.0 : f32, samples = 4} ...\n\
     // -> %o = qnn.fake_quant(%x) {type = !qnn.uniform<i8:f32, 0.0117647061:-43>} ...\n\
     ```",
};

impl Pass for InsertFakeq {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn options(&self) -> Vec<OptionSpec> {
        let string_list = || OptionKind::Enum(&["asymmetric", "symmetric"]);
        vec![
            OptionSpec::new("activation-type", OptionKind::String, "i8")
                .help("storage of activations: iN or uN with N from 2 to 16"),
            OptionSpec::new("weight-type", OptionKind::String, "i8")
                .help("storage of weights: iN or uN with N from 2 to 16"),
            OptionSpec::new("activation-scheme", string_list(), "asymmetric")
                .help("asymmetric (a zero point) or symmetric (real 0 at the middle of the range)"),
            OptionSpec::new("weight-scheme", OptionKind::Enum(&["symmetric", "asymmetric"]), "symmetric")
                .help("asymmetric (a zero point) or symmetric (real 0 at the middle of the range)"),
            OptionSpec::new("per-channel", OptionKind::Bool, "true")
                .help("weights get one scale per output channel (the op's weight channel axis)"),
            OptionSpec::new("narrow-range", OptionKind::Bool, "false")
                .help("signed types drop their most negative value (i8<-127:127>), so symmetric ranges are symmetric"),
            OptionSpec::new("reduce-range", OptionKind::Bool, "false").help(
                "weights use half their storage range (i8 -> i8<-64:63>, u8 -> u8<0:127>), as ONNX Runtime's \
                 reduce_range: on x86 CPUs without VNNI every conv and dense can then use the fast \
                 u8 x s8 instructions exactly (docs/codegen-x86.md)",
            ),
            OptionSpec::new("power-of-two-scales", OptionKind::Bool, "false")
                .help("round every scale up to a power of two (hardware that rescales by shifting)"),
            OptionSpec::new("weight-method", OptionKind::Enum(&["auto", "mse", "minmax"]), "auto").help(
                "weight ranges: mse (per channel, the clipping of the min-max range with the least squared \
                 error), minmax, or auto (mse for weight types under 8 bits, minmax from 8)",
            ),
            OptionSpec::new("bias-correction", OptionKind::Bool, "true").help(
                "correct the bias of each conv and dense for the mean shift its weight rounding causes on \
                 the calibrated channel means (observers with 'mean_axis')",
            ),
            OptionSpec::new("method", OptionKind::String, "minmax")
                .help("range method for activations: minmax, percentile, entropy, mse, or a registered one"),
            OptionSpec::new("percentile", OptionKind::Float, "99.99").help("the percentile of method=percentile"),
        ]
    }

    /// The storage types parse, and `percentile` is only given with the
    /// method that reads it.
    fn check_options(&self, options: &PassOptions) -> Result<(), BadOptionValue> {
        for (type_option, scheme_option) in
            [("activation-type", "activation-scheme"), ("weight-type", "weight-scheme")]
        {
            Scheme::read(options, type_option, scheme_option)
                .map_err(|e| BadOptionValue::new(type_option, e))?;
        }
        check_percentile(options)?;
        let method = options.string("method");
        if options.is_explicit("percentile") && method != "percentile" {
            let message = format!(
                "'percentile' is read only by method=percentile, and the method is '{method}': \
                 add method=percentile or leave 'percentile' out"
            );
            return Err(BadOptionValue::new("percentile", message));
        }
        Ok(())
    }

    /// The range method is registered.
    fn check_options_against(&self, ctx: &Context, options: &PassOptions) -> Result<(), BadOptionValue> {
        QuantMethods::of(ctx)
            .find_range_method(options.string("method"))
            .map(|_| ())
            .map_err(|e| BadOptionValue::new("method", e))
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, options: &PassOptions) -> PassResult {
        let config = Config::read(cx.ctx, options)?;
        let observers: Vec<OpId> =
            module.ops_where(|op| module.op_is(cx.ctx, op, qnn_op::OBSERVE) && module.num_operands(op) == 1);
        let fake_quant = cx.ctx.op_name(qnn_op::FAKE_QUANT);

        let (lacking, histogram_error) = check_histograms(cx.ctx, module, &observers, &config)?;
        // Decide every observer's type first, so errors are reported together and nothing changes on failure.
        let mut errors: Vec<Diagnostic> = histogram_error.into_iter().collect();
        // Per observer: what replaces it (nothing for a quantized value).
        let mut plans: Vec<(OpId, Option<ActivationPlan>)> = Vec::new();
        let wide = wide_concat_observers(cx.ctx, module, &observers);
        for &op in &observers {
            let operand = module.operand(op, 0);
            if !is_float_tensor(cx.ctx, module.value_type(operand)) {
                plans.push((op, None));
                continue;
            }
            if lacking.contains(&op) {
                continue;
            }
            match observer_plan(cx.ctx, module, op, &config, wide.contains(&op)) {
                Ok(plan) => plans.push((op, Some(plan))),
                Err(e) => errors.push(Diagnostic::at_op(cx.ctx, module, op, Severity::Error, e)),
            }
        }
        if !errors.is_empty() {
            return Err(Diagnostics(errors).into());
        }
        // Ops whose activations are quantized, and the weight storage of
        // those whose output has a storage hint, found before the observers go.
        let quantized_ops = quantized_ops(cx.ctx, module);
        let hinted_weights = hinted_weight_storage(cx.ctx, module, &observers);
        let mut means_of: FxHashMap<ValueId, Vec<f64>> = FxHashMap::default();

        let mut activations = 0u64;
        for (op, plan) in plans {
            let input = module.operand(op, 0);
            let output = module.result(op, 0);
            match plan {
                Some(ActivationPlan { ty, means, observed }) => {
                    let attrs = {
                        let t = cx.ctx.type_attr(ty);
                        match observed {
                            Some((lo, hi)) => {
                                let f32_ty = cx.ctx.common().f32;
                                let lo = cx.ctx.float_attr(f64::from(lo), f32_ty);
                                let hi = cx.ctx.float_attr(f64::from(hi), f32_ty);
                                cx.ctx.dict_attr(&[
                                    ("calibrated_max", hi),
                                    ("calibrated_min", lo),
                                    ("type", t),
                                ])
                            }
                            None => cx.ctx.dict_attr(&[("type", t)]),
                        }
                    };
                    let value_ty = module.value_type(input);
                    let loc = module.op_loc(op);
                    let fq = module.create_op(
                        OperationState::new(fake_quant)
                            .operands(&[input])
                            .results(&[value_ty])
                            .attrs(attrs)
                            .loc(loc),
                    );
                    module.insert_op_before(op, fq);
                    module.replace_all_uses(output, module.result(fq, 0));
                    if let Some(means) = means.filter(|_| config.bias_correction) {
                        means_of.insert(module.result(fq, 0), means);
                    }
                    activations += 1;
                }
                None => module.replace_all_uses(output, input),
            }
            module.erase_op(op).map_err(|e| format!("cannot remove an observer: {e:?}"))?;
        }

        // Owned, since bias correction creates types in the context the registry lives in.
        let kernels = KernelRegistry::of_or_standard(cx.ctx).into_owned();
        let mut weights = 0u64;
        let mut corrected = 0u64;
        let mut constants = 0u64;
        let mut cache: FxHashMap<(ValueId, Type), ValueId> = FxHashMap::default();
        for op in quantized_ops {
            let Some(q) = quantizable(cx.ctx, module, op).cloned() else { continue };
            if let Some(w) = q.weight.filter(|&w| w < module.num_operands(op)) {
                let axis = q.weight_channel_axis.filter(|&axis| {
                    config.per_channel && holds_each_output_channel(cx.ctx, module, op, &q, axis)
                });
                let hinted = hinted_weights.get(&op).map(|&storage| config.weight_scheme_for(storage));
                let scheme = hinted.as_ref().unwrap_or(&config.weight);
                let mse = match config.weight_method {
                    WeightMethod::Mse => true,
                    WeightMethod::Minmax => false,
                    WeightMethod::Auto => scheme.storage.width < AUTO_MSE_BELOW_BITS,
                };
                let weight = WeightPlan { scheme, axis, mse };
                match fake_quantize_operand(cx.ctx, module, op, w, &weight, &mut cache) {
                    Ok(true) => {
                        weights += 1;
                        let input = q.activations.first().map(|&x| module.operand(op, x));
                        if let Some(means) = input.and_then(|x| means_of.get(&x)) {
                            match correct_bias(cx.ctx, module, op, &q, means, &kernels) {
                                Ok(changed) => corrected += changed as u64,
                                Err(e) => cx.warn_at(module, op, format!("bias not corrected: {e}")),
                            }
                        }
                    }
                    Ok(false) => {}
                    Err(e) => cx.warn_at(module, op, format!("weight left float: {e}")),
                }
            }
            for i in q.activation_operands(module.num_operands(op)) {
                if constant_value(cx.ctx, module, module.operand(op, i)).is_some() {
                    let constant = WeightPlan { scheme: &config.activation, axis: None, mse: false };
                    match fake_quantize_operand(cx.ctx, module, op, i, &constant, &mut cache) {
                        Ok(true) => constants += 1,
                        Ok(false) => {}
                        Err(e) => cx.warn_at(module, op, format!("constant operand {i} left float: {e}")),
                    }
                }
            }
        }
        cx.add_stat("activations", activations);
        cx.add_stat("weights", weights);
        cx.add_stat("biases-corrected", corrected);
        cx.add_stat("constant-operands", constants);
        Ok(PassOutcome::from_changed(!observers.is_empty() || weights + constants > 0))
    }
}

/// Whether weight axis `axis` of weighted op `op` has one entry per output
/// channel, so that per-channel weights give each its own scale: a grouped
/// transposed convolution's axis 1 holds one group's channels only, and its
/// weight is then quantized per tensor. Unknown sizes count as a match.
fn holds_each_output_channel(
    ctx: &Context,
    module: &Module,
    op: OpId,
    q: &QuantizableOp,
    axis: usize,
) -> bool {
    let Some(w) = q.weight.filter(|&w| w < module.num_operands(op)) else { return true };
    let (w_ty, y_ty) = (module.value_type(module.operand(op, w)), module.value_type(module.result(op, 0)));
    let (Some(w_shape), Some(y_shape)) = (ctx.tensor_shape(w_ty), ctx.tensor_shape(y_ty)) else {
        return true;
    };
    let Some(channel_axis) = q.channel_axis_for_rank(y_shape.len()) else { return true };
    match (w_shape.get(axis), y_shape.get(channel_axis)) {
        (Some(&entries), Some(&channels)) if entries >= 0 && channels >= 0 => entries == channels,
        _ => true,
    }
}

/// The pass's options, checked.
struct Config {
    activation: Scheme,
    weight: Scheme,
    method: Arc<dyn RangeMethod>,
    percentile: f64,
    per_channel: bool,
    weight_method: WeightMethod,
    bias_correction: bool,
    narrow_range: bool,
    reduce_range: bool,
}

/// The `weight-method` option.
#[derive(Clone, Copy)]
enum WeightMethod {
    Mse,
    Minmax,
    /// mse below [`AUTO_MSE_BELOW_BITS`], minmax from there.
    Auto,
}

impl Config {
    fn read(ctx: &Context, options: &PassOptions) -> Result<Config, PassError> {
        let activation = Scheme::read(options, "activation-type", "activation-scheme")?;
        let mut weight = Scheme::read(options, "weight-type", "weight-scheme")?;
        if options.bool("reduce-range") {
            weight.reduce_range();
        }
        let method = QuantMethods::of(ctx).find_range_method(options.string("method"))?.clone();
        check_percentile(options)?;
        let percentile = options.float("percentile");
        let weight_method = match options.string("weight-method") {
            "mse" => WeightMethod::Mse,
            "minmax" => WeightMethod::Minmax,
            _ => WeightMethod::Auto,
        };
        Ok(Config {
            activation,
            weight,
            method,
            percentile,
            per_channel: options.bool("per-channel"),
            weight_method,
            bias_correction: options.bool("bias-correction"),
            narrow_range: options.bool("narrow-range"),
            reduce_range: options.bool("reduce-range"),
        })
    }

    /// The activation scheme for an observer's `storage` hint.
    fn activation_scheme_for(&self, storage: IntType) -> Scheme {
        self.activation.with_storage(storage, self.narrow_range)
    }

    /// The weight scheme of an op whose output is hinted `output` storage:
    /// `min(N, 8)` bits, `weight-type`'s signedness, scheme and range options.
    fn weight_scheme_for(&self, output: IntType) -> Scheme {
        let storage = IntType { width: output.width.min(8), signedness: self.weight.storage.signedness };
        let mut scheme = self.weight.with_storage(storage, self.narrow_range);
        if self.reduce_range {
            scheme.reduce_range();
        }
        scheme
    }
}

/// The `storage` attribute of observer `op`, if it has one; a value that is
/// not a storage (iN or uN, N from 2 to 16) is an error.
fn observer_storage(ctx: &Context, module: &Module, op: OpId) -> Result<Option<IntType>, String> {
    let Some(attr) = module.op_attr(ctx, op, STORAGE) else { return Ok(None) };
    match ctx.attr_as_str(attr).and_then(storage_kind) {
        Some(storage) => Ok(Some(storage)),
        None => Err(format!("'{STORAGE}' must be a storage type iN or uN with N from 2 to 16, like \"i16\"")),
    }
}

/// The weight storage hint of each op whose result (after its chain of relu
/// or clip) an observer with a `storage` attribute observes.
fn hinted_weight_storage(ctx: &Context, module: &Module, observers: &[OpId]) -> FxHashMap<OpId, IntType> {
    let mut hinted = FxHashMap::default();
    for &op in observers {
        let Ok(Some(storage)) = observer_storage(ctx, module, op) else { continue };
        let mut def = module.defining_op(module.operand(op, 0));
        while !def.is_none()
            && module.num_operands(def) > 0
            && ctx
                .op_def(module.op_name(def))
                .is_some_and(|d| d.interfaces.get::<FusedActivation>().is_some())
        {
            def = module.defining_op(module.operand(def, 0));
        }
        if !def.is_none() && quantizable(ctx, module, def).is_some_and(|q| q.weight.is_some()) {
            hinted.insert(def, storage);
        }
    }
    hinted
}

/// What replaces an observer of a float value.
struct ActivationPlan {
    /// The `qnn.fake_quant` type.
    ty: Type,
    /// The channel means the observer recorded, for bias correction.
    means: Option<Vec<f64>>,
    /// The per-tensor range calibration observed (`calibrated_min`,
    /// `calibrated_max` on the fake_quant, for `quant-lint`).
    observed: Option<(f32, f32)>,
}

/// The observers without the histogram the range method needs, and one
/// error at the first of them (the fix is the same for every observer).
fn check_histograms(
    ctx: &mut Context,
    module: &Module,
    observers: &[OpId],
    config: &Config,
) -> Result<(Vec<OpId>, Option<Diagnostic>), PassError> {
    if !config.method.needs_histogram() {
        return Ok((Vec::new(), None));
    }
    let mut lacking = Vec::new();
    for &op in observers {
        let stats = ObserverStats::load(ctx, module, op)?;
        if stats.has_data() && stats.histogram.as_ref().is_none_or(|h| h.total() == 0) {
            lacking.push(op);
        }
    }
    let Some(&first) = lacking.first() else { return Ok((lacking, None)) };
    let others = match lacking.len() - 1 {
        0 => String::new(),
        1 => " (nor does 1 other)".to_string(),
        n => format!(" (nor do {n} others)"),
    };
    let message = format!(
        "method '{}' needs a histogram, but this observer has none{others}: observe with \
         insert-observers{{observer=histogram}} (in quantize: leave 'observer' out or set observer=histogram)",
        config.method.name()
    );
    let error = Diagnostic::at_op(ctx, module, first, Severity::Error, message);
    Ok((lacking, Some(error)))
}

/// The plan for observer `op`, from its statistics; `wide`: the observer
/// of a concat of very different ranges (`wide_concat.rs`), stored in 16
/// bits unless it has a storage of its own.
fn observer_plan(
    ctx: &mut Context,
    module: &Module,
    op: OpId,
    config: &Config,
    wide: bool,
) -> Result<ActivationPlan, String> {
    let stats = ObserverStats::load(ctx, module, op)?;
    if !stats.has_data() {
        return Err("this observer has no statistics; run calibrate before insert-fakeq".into());
    }
    let storage = observer_storage(ctx, module, op)?;
    let storage = storage.or((wide && config.activation.storage.width < WIDE.width).then_some(WIDE));
    let hinted = storage.map(|storage| config.activation_scheme_for(storage));
    let scheme = hinted.as_ref().unwrap_or(&config.activation);
    let target = RangeTarget {
        qmin: scheme.qmin,
        qmax: scheme.qmax,
        symmetric: scheme.symmetric,
        percentile: stats.percentile.unwrap_or(config.percentile),
    };
    let ranges = config.method.range(&stats, &target)?;
    if ranges.len() != stats.channels
        || ranges.iter().any(|(lo, hi)| !(lo.is_finite() && hi.is_finite() && lo <= hi))
    {
        return Err(format!("range method '{}' returned an invalid range {ranges:?}", config.method.name()));
    }
    let value_ty = module.value_type(module.operand(op, 0));
    let expressed = float_kind(ctx, value_ty).ok_or("the observed value is not a float tensor")?;
    let params = params_for(scheme, &ranges, stats.axis);
    let q = scheme.quant_type(expressed, params);
    let observed = match (stats.axis, stats.min.as_slice(), stats.max.as_slice()) {
        (None, [lo], [hi]) if lo <= hi => Some((*lo, *hi)),
        _ => None,
    };
    let means = stats.means.map(|m| m.means()).filter(|m| !m.is_empty());
    Ok(ActivationPlan { ty: ctx.quant_type(q), means, observed })
}

/// Per-tensor parameters for one range, per-axis for several.
fn params_for(scheme: &Scheme, ranges: &[(f64, f64)], axis: Option<usize>) -> QuantParams {
    match (axis, ranges) {
        (Some(axis), _) => {
            let (scales, zero_points): (Vec<f64>, Vec<i64>) =
                ranges.iter().map(|&(lo, hi)| scheme.params(lo, hi)).unzip();
            QuantParams::PerAxis { axis: axis as u32, scales: scales.into(), zero_points: zero_points.into() }
        }
        (None, [(lo, hi), ..]) => {
            let (scale, zero_point) = scheme.params(*lo, *hi);
            QuantParams::PerTensor { scale, zero_point }
        }
        (None, []) => QuantParams::PerTensor { scale: DEGENERATE_SCALE as f64, zero_point: 0 },
    }
}

/// The float kind of a float tensor type's elements.
fn float_kind(ctx: &Context, ty: Type) -> Option<FloatKind> {
    match ctx.type_data(ctx.element_type(ty)) {
        TypeData::Float(k @ (FloatKind::F32 | FloatKind::F16 | FloatKind::BF16)) => Some(*k),
        _ => None,
    }
}

/// Ops with the `QuantizableOp` interface whose activation operands are all
/// quantized (come from `qnn.observe` or `qnn.fake_quant`, or are constants),
/// except those marked `qnn.skip`: their weights stay float.
fn quantized_ops(ctx: &Context, module: &Module) -> Vec<OpId> {
    let quantized_value = |v: ValueId| match module.value_def(v) {
        ValueDef::Result { op, .. } => {
            module.op_is(ctx, op, qnn_op::OBSERVE)
                || module.op_is(ctx, op, qnn_op::FAKE_QUANT)
                || constant_value(ctx, module, v).is_some()
        }
        ValueDef::BlockArg { .. } => false,
    };
    module.ops_where(|op| {
        let Some(q) = quantizable(ctx, module, op) else { return false };
        if is_skipped(ctx, module, op) || output_kept_float(ctx, module, op) {
            return false;
        }
        let activations = q.activation_operands(module.num_operands(op));
        let real: Vec<usize> = activations
            .iter()
            .copied()
            .filter(|&i| constant_value(ctx, module, module.operand(op, i)).is_none())
            .collect();
        !real.is_empty() && activations.iter().all(|&i| quantized_value(module.operand(op, i)))
    })
}

/// Whether `op`'s result, or the result of the relu or clip chain that is its
/// only user, is kept float by a `qnn.cast_hint {kind = "float"}`: the layer
/// then computes in float, with float weights.
fn output_kept_float(ctx: &Context, module: &Module, op: OpId) -> bool {
    let mut value = match module.results(op).collect::<Vec<_>>()[..] {
        [result] => result,
        _ => return false,
    };
    loop {
        let next = module.users(value);
        if next.iter().any(|&u| is_kept_float(ctx, module, u)) {
            return true;
        }
        match next[..] {
            [user]
                if module.num_results(user) == 1
                    && ctx
                        .op_def(module.op_name(user))
                        .is_some_and(|d| d.interfaces.get::<FusedActivation>().is_some()) =>
            {
                value = module.result(user, 0)
            }
            _ => return false,
        }
    }
}

/// How a constant operand is quantized.
struct WeightPlan<'a> {
    scheme: &'a Scheme,
    /// Per channel along this axis.
    axis: Option<usize>,
    /// Search each channel's range for the least squared error ([`mse_range`]).
    mse: bool,
}

/// Puts a `qnn.fake_quant` on constant operand `index` of `op`, with
/// parameters from the constant's values (per channel along the plan's axis).
/// Returns whether it did; `Ok(false)` when the operand is already fake-quantized.
fn fake_quantize_operand(
    ctx: &mut Context,
    module: &mut Module,
    op: OpId,
    index: usize,
    plan: &WeightPlan<'_>,
    cache: &mut FxHashMap<(ValueId, Type), ValueId>,
) -> Result<bool, String> {
    let (scheme, axis) = (plan.scheme, plan.axis);
    let value = module.operand(op, index);
    let def = module.defining_op(value);
    if !def.is_none() && module.op_is(ctx, def, qnn_op::FAKE_QUANT) {
        return Ok(false);
    }
    let value_ty = module.value_type(value);
    let expressed = float_kind(ctx, value_ty).ok_or("it is not an f32, f16 or bf16 tensor")?;
    let attr = constant_value(ctx, module, value).ok_or("it is not a constant")?;
    let values = match ctx.attr_data(attr) {
        AttrData::Dense(d) => {
            dense_values_f64(ctx, d, ctx.element_type(d.ty)).ok_or("its values cannot be read")?
        }
        _ => return Err("it is not a dense constant".into()),
    };
    if values.iter().any(|v| !v.is_finite()) {
        return Err("it holds NaN or infinity".into());
    }
    let shape = ctx.tensor_shape(value_ty).ok_or("it is not a ranked tensor")?.to_vec();
    let axis = axis.filter(|&a| a < shape.len() && shape[a] > 0);
    let channels = channel_values(&values, &shape, axis);
    let mut ranges = channel_ranges(scheme, &channels, plan.mse);
    widen_dead_channels(&mut ranges);
    let params = params_for(scheme, &ranges, axis);
    let q = scheme.quant_type(expressed, params);
    let elem = ctx.quant_type(q);
    let key = (value, elem);
    let fake = match cache.get(&key) {
        Some(&v) => v,
        None => {
            let name = ctx.op_name(qnn_op::FAKE_QUANT);
            let attrs = {
                let t = ctx.type_attr(elem);
                ctx.dict_attr(&[("type", t)])
            };
            let loc = if def.is_none() { module.op_loc(op) } else { module.op_loc(def) };
            let fq = module.create_op(
                OperationState::new(name).operands(&[value]).results(&[value_ty]).attrs(attrs).loc(loc),
            );
            if def.is_none() {
                module.insert_op_before(op, fq);
            } else {
                module.insert_op_after(def, fq);
            }
            let v = module.result(fq, 0);
            cache.insert(key, v);
            v
        }
    };
    module.set_operand(op, index, fake);
    Ok(true)
}

/// Gives each all-zero channel of a per-channel weight (a dead channel,
/// common in trained networks) the widest range of the other channels. Its
/// weights are 0 at any scale, but its scale also sets its bias's
/// (`s_in · s_w`): the degenerate scale of an empty range (2^-23) would put
/// any real bias on that channel outside i32 and keep the whole layer float.
fn widen_dead_channels(ranges: &mut [(f64, f64)]) {
    let widest = ranges
        .iter()
        .copied()
        .filter(|&(lo, hi)| lo != 0.0 || hi != 0.0)
        .max_by(|a, b| (a.1 - a.0).total_cmp(&(b.1 - b.0)));
    if let (Some(widest), true) = (widest, ranges.len() > 1) {
        for range in ranges.iter_mut().filter(|r| r.0 == 0.0 && r.1 == 0.0) {
            *range = widest;
        }
    }
}

/// The values of each index along `axis` (all values as one channel without one).
fn channel_values(values: &[f64], shape: &[i64], axis: Option<usize>) -> Vec<Vec<f64>> {
    let Some(axis) = axis else { return vec![values.to_vec()] };
    let channels = shape[axis].max(1) as usize;
    let inner: usize = shape[axis + 1..].iter().map(|&d| d.max(1) as usize).product::<usize>().max(1);
    let mut out = vec![Vec::with_capacity(values.len() / channels); channels];
    for (i, &v) in values.iter().enumerate() {
        out[(i / inner) % channels].push(v);
    }
    out
}

/// The coarse steps of [`mse_range`]: α = 1 − k/32 for k = 0 … 16 (down to 1/2),
/// then α ± j/128 for j = 1 … 3 around the best.
const MSE_COARSE: u32 = 16;

/// The range `[α·lo, α·hi]`, α in [1/2, 1], whose fake quantization of `values`
/// (exactly as `qnn.fake_quant` computes it) has the least squared error; ties
/// keep the wider range. Clipping a few outliers buys a finer step for the rest.
/// A coarse grid of α finds the basin, a finer one around it the minimum.
fn mse_range(scheme: &Scheme, values: &[f64], (lo, hi): (f64, f64)) -> (f64, f64) {
    let values: Vec<f32> = values.iter().map(|&v| v as f32).collect();
    let error = |alpha: f64| -> f64 {
        let (scale, zp) = scheme.params(lo * alpha, hi * alpha);
        let s = scale_f32(scale);
        let (zp, qmin, qmax) = (zp as f32, scheme.qmin as f32, scheme.qmax as f32);
        values
            .iter()
            .map(|&v| {
                // `fake_quant_f32` for finite values, in plain f32 operations so
                // the loop vectorizes: adding and subtracting 1.5·2^23 rounds
                // half to even for |t| < 2^22, and larger |t| saturate anyway.
                const MAGIC: f32 = 12_582_912.0;
                let t = (v / s).clamp(-4_194_304.0, 4_194_304.0);
                let q = ((t + MAGIC) - MAGIC + zp).clamp(qmin, qmax);
                let d = ((q - zp) * s - v) as f64;
                d * d
            })
            .sum()
    };
    let mut best = (1.0, error(1.0));
    let consider = |alpha: f64, best: &mut (f64, f64)| {
        let e = error(alpha);
        if e < best.1 || (e == best.1 && alpha > best.0) {
            *best = (alpha, e);
        }
    };
    for k in 1..=MSE_COARSE {
        consider(1.0 - f64::from(k) / f64::from(2 * MSE_COARSE), &mut best);
    }
    let coarse = best.0;
    for j in [-3.0, -2.0, -1.0, 1.0, 2.0, 3.0] {
        let alpha = coarse + j / 128.0;
        if (0.5..1.0).contains(&alpha) {
            consider(alpha, &mut best);
        }
    }
    (lo * best.0, hi * best.0)
}

/// The range of each channel: min-max, or the [`mse_range`] search, which runs
/// on every core for large weights (channels are independent, so the result
/// does not depend on how they are split).
fn channel_ranges(scheme: &Scheme, channels: &[Vec<f64>], mse: bool) -> Vec<(f64, f64)> {
    let one = |c: &Vec<f64>| {
        let range = c.iter().fold((0.0f64, 0.0f64), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        if mse {
            mse_range(scheme, c, range)
        } else {
            range
        }
    };
    let total: usize = channels.iter().map(Vec::len).sum();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(channels.len().max(1));
    if !mse || total < (1 << 16) || threads < 2 {
        return channels.iter().map(one).collect();
    }
    let per_thread = channels.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let parts: Vec<_> = channels
            .chunks(per_thread)
            .map(|part| scope.spawn(move || part.iter().map(one).collect::<Vec<_>>()))
            .collect();
        parts
            .into_iter()
            .flat_map(|p| p.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use qopt_dialect_qnn::fixed_point::fake_quant_f32;

    /// The vectorizable rounding in [`mse_range`] is `fake_quant_f32` exactly.
    #[test]
    fn fast_fake_quant_matches_the_semantics() {
        const MAGIC: f32 = 12_582_912.0;
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..200_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let v = f32::from_bits((state >> 32) as u32);
            let s = f32::from_bits(0x3000_0000 + ((state >> 8) as u32 % 0x1800_0000));
            if !v.is_finite() {
                continue;
            }
            let (zp, qmin, qmax) = ((state % 7) as i64 - 3, -128i64, 127i64);
            let t = (v / s).clamp(-4_194_304.0, 4_194_304.0);
            let q = ((t + MAGIC) - MAGIC + zp as f32).clamp(qmin as f32, qmax as f32);
            let fast = (q - zp as f32) * s;
            assert_eq!(fast.to_bits(), fake_quant_f32(v, s, zp, qmin, qmax).to_bits(), "v={v} s={s} zp={zp}");
        }
    }
}
