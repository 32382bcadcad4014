//! `quantize-constants`: the quantized values of constants become constants
//! of quantized type, and biases become i32, so that `fuse` finds integer
//! operands everywhere a quantized op needs them.
//!
//! - **Constants.** `qnn.quantize(c)` of a constant `c` becomes a constant of
//!   the quantize's result type holding `quantize(c)`, computed as the
//!   `qnn.quantize` kernel does (`docs/quant-semantics.md` §3.1). Exact: the
//!   same stored values either way.
//! - **Biases.** A float constant bias of a weighted op (the `QuantizableOp`
//!   interface's bias operand: conv, dense) whose activation and weight are
//!   both dequantized (`qnn.dequantize` of a per-tensor activation and of a
//!   weight quantized per tensor or per output channel) becomes
//!   `qnn.dequantize` of an i32 constant in units of `s_x·s_w[c]` with zero
//!   point 0: `b_q[c] = rne(b[c] / (s_x ⊗₆₄ s_w[c]))` (§6.1). This rounds the
//!   bias by at most half a unit of the accumulator, far below the output's
//!   step, so the pass does not claim to preserve semantics. A bias that
//!   would not fit i32 (a channel whose weights are all but zero) stays float
//!   with a warning at the op; `quant-lint` reports the island it leaves. The
//!   bias of an op marked `qnn.skip` stays float (the op does).
//!
//! ```text
//! %w = fp.constant() {value = dense<[[0.5, -0.25]]> : tensor<1x2xf32>} : () -> tensor<1x2xf32>
//! %wq = qnn.quantize(%w) : (tensor<1x2xf32>) -> tensor<1x2x!qnn.uniform<i8:f32, 0.25:0>>
//! // becomes
//! %wq = fp.constant() {value = dense<[[2, -1]]> : tensor<1x2x!qnn.uniform<i8:f32, 0.25:0>>} : ...
//! ```
//!
//! Statistics: `quantized-constants`, `quantized-biases`.

use crate::quantizable::quantizable;
use crate::records::hints::is_skipped;
use qopt_dialect_fp::constants::{create_constant, erase_if_unused_constant};
use qopt_dialect_qnn::fixed_point::{quantize_f32, scale_f32};
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_dialect_qnn::quant_params::{params, quant_element};
use qopt_ir_core::equivalence::Relation;
use qopt_ir_core::pass::PassOptions;
use qopt_ir_core::PassInfo;
use qopt_ir_core::PassResult;
use qopt_ir_core::{
    constant_value, dense_values_f64, static_num_elements, AttrData, Context, DenseElements, FloatKind,
    InsertPoint, IntType, Module, OpId, OperationState, Pass, PassContext, PassError, PassOutcome,
    QuantParams, QuantType, Rewriter, Signedness, Type, ValueId,
};

/// The `quantize-constants` pass; see the module docs.
pub struct QuantizeConstants;

const INFO: PassInfo = PassInfo {
    name: "quantize-constants",
    summary: "fold qnn.quantize of constants into quantized constants, and quantize biases to i32",
    description:
        "Replaces `qnn.quantize(c)` of a constant by a constant of the quantized type holding the same \
     stored values (exact), and the float constant bias of a conv or dense whose activation and \
     weight are dequantized by `qnn.dequantize` of an i32 constant in units of s_x·s_w[c], zero \
     point 0, rounded half to even (`docs/quant-semantics.md` §6.1). A bias that would not fit i32 \
     stays float with a warning. Statistics: `quantized-constants`, `quantized-biases`.",
    preserves_semantics: false,
    // Checked against the `qnn` ops' definitions as quantize(float op(dequantize)):
    // the wiring, attributes and types are proven, the integer rounding is not.
    equivalence: Some(Relation::Requantization),
};

impl Pass for QuantizeConstants {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, _options: &PassOptions) -> PassResult {
        let constants = quantize_constant_operands(cx.ctx, module)?;
        let mut biases = 0;
        let weighted: Vec<OpId> =
            module.ops_where(|op| quantizable(cx.ctx, module, op).is_some_and(|q| q.bias.is_some()));
        for op in weighted {
            match bias_plan(cx.ctx, module, op) {
                Ok(Some(plan)) => {
                    quantize_bias(cx.ctx, module, op, plan)
                        .map_err(|e| PassError::at_op(cx.ctx, module, op, e))?;
                    biases += 1;
                }
                Ok(None) => {}
                Err(BiasSkipped(reason)) => cx.warn_at(module, op, format!("the bias stays float: {reason}")),
            }
        }
        cx.add_stat("quantized-constants", constants);
        cx.add_stat("quantized-biases", biases);
        Ok(PassOutcome::from_changed(constants + biases > 0))
    }
}

/// Folds every `qnn.quantize` of a constant; returns how many.
fn quantize_constant_operands(ctx: &mut Context, module: &mut Module) -> Result<u64, PassError> {
    let quantizes: Vec<OpId> =
        module.ops_where(|op| module.op_is(ctx, op, qnn_op::QUANTIZE) && module.num_operands(op) == 1);
    let mut done = 0;
    for op in quantizes {
        let source = module.operand(op, 0);
        let Some(value) = constant_value(ctx, module, source) else { continue };
        let result_ty = module.value_type(module.result(op, 0));
        let quantized =
            quantize_dense(ctx, value, result_ty).map_err(|e| PassError::at_op(ctx, module, op, e))?;
        let attr = ctx.dense_attr(quantized);
        let loc = module.op_loc(op);
        let mut rewriter = Rewriter::new(ctx, module);
        rewriter.set_insertion_point(InsertPoint::Before(op));
        rewriter.set_loc(loc);
        let constant = create_constant(&mut rewriter, attr)
            .map_err(|e| PassError::at_op(rewriter.ctx, rewriter.module, op, e))?;
        rewriter.replace_all_uses(rewriter.module.result(op, 0), constant);
        // invariant: the quantize has no uses left.
        let _ = rewriter.erase_op(op);
        erase_if_unused_constant(ctx, module, source);
        done += 1;
    }
    Ok(done)
}

/// The stored values of `quantize(value)` for the quantized tensor type
/// `ty`: per element `quantize_f32` with the element's parameters (§3.1).
fn quantize_dense(ctx: &Context, value: qopt_ir_core::Attribute, ty: Type) -> Result<DenseElements, String> {
    let AttrData::Dense(d) = ctx.attr_data(value) else { return Err("the constant is not dense".into()) };
    let q = quant_element(ctx, ty).ok_or("the result is not a quantized tensor")?.clone();
    if !matches!(q.expressed, FloatKind::F32) {
        return Err("only constants quantized from f32 are folded".into());
    }
    let values =
        dense_values_f64(ctx, d, ctx.element_type(d.ty)).ok_or("the constant has no numeric values")?;
    let shape: Vec<usize> =
        ctx.tensor_shape(ty).ok_or("unranked result")?.iter().map(|&d| d as usize).collect();
    let entries = params(&q);
    // Elements run in C order: the per-axis index of element i is
    // (i / inner) % channels, inner being the product of the later dimensions.
    let (inner, channels) = match &q.params {
        QuantParams::PerTensor { .. } => (1, 1),
        QuantParams::PerAxis { axis, .. } => {
            let axis = *axis as usize;
            (
                shape.iter().skip(axis + 1).product::<usize>().max(1),
                shape.get(axis).copied().unwrap_or(1).max(1),
            )
        }
    };
    let stored: Vec<i128> = values
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let p = entries[((i / inner) % channels).min(entries.len() - 1)];
            i128::from(quantize_f32(v as f32, scale_f32(p.scale), p.zero_point, q.storage_min, q.storage_max))
        })
        .collect();
    DenseElements::from_i128(ctx, ty, &stored)
}

/// Why a bias stays float.
struct BiasSkipped(String);

/// What a bias becomes: its operand index, values, and per-channel scales.
struct BiasPlan {
    index: usize,
    values: Vec<i128>,
    scales: Vec<f64>,
    per_channel: bool,
}

/// The quantized bias of `op`, `Ok(None)` when the op is not in the shape
/// this pass handles (no constant float bias, operands not dequantized), or
/// `Err` when it is but the bias cannot be represented.
fn bias_plan(ctx: &Context, module: &Module, op: OpId) -> Result<Option<BiasPlan>, BiasSkipped> {
    let Some(iface) = quantizable(ctx, module, op).filter(|_| !is_skipped(ctx, module, op)) else {
        return Ok(None);
    };
    let (Some(b), Some(w), [x]) = (iface.bias, iface.weight, iface.activations.as_slice()) else {
        return Ok(None);
    };
    if module.num_operands(op) <= b {
        return Ok(None);
    }
    let dequantized = |i: usize| -> Option<QuantType> {
        let def = module.defining_op(module.operand(op, i));
        if def.is_none() || !module.op_is(ctx, def, qnn_op::DEQUANTIZE) {
            return None;
        }
        quant_element(ctx, module.value_type(module.operand(def, 0))).cloned()
    };
    let (Some(qx), Some(qw)) = (dequantized(*x), dequantized(w)) else { return Ok(None) };
    let bias = module.operand(op, b);
    let Some(value) = constant_value(ctx, module, bias) else { return Ok(None) };
    let AttrData::Dense(d) = ctx.attr_data(value) else { return Ok(None) };
    if ctx.element_type(d.ty) != ctx.common().f32 {
        return Ok(None);
    }
    let Some(values) = dense_values_f64(ctx, d, ctx.element_type(d.ty)) else { return Ok(None) };
    let QuantParams::PerTensor { scale: s_x, .. } = qx.params else {
        return Err(BiasSkipped("the activation is quantized per axis".into()));
    };
    let weight_scales: Vec<f64> = match &qw.params {
        QuantParams::PerTensor { scale, .. } => vec![*scale; values.len()],
        QuantParams::PerAxis { axis, scales, .. }
            if Some(*axis as usize) == iface.weight_channel_axis && scales.len() == values.len() =>
        {
            scales.to_vec()
        }
        QuantParams::PerAxis { .. } => {
            return Err(BiasSkipped(format!(
                "the weight is not quantized per output channel (one scale per channel on axis {})",
                iface.weight_channel_axis.unwrap_or(0)
            )))
        }
    };
    let per_channel = matches!(qw.params, QuantParams::PerAxis { .. });
    let scales: Vec<f64> = weight_scales.iter().map(|&s_w| s_x * s_w).collect();
    let mut stored = Vec::with_capacity(values.len());
    for (c, (&v, &s)) in values.iter().zip(&scales).enumerate() {
        let q = (v / s).round_ties_even();
        if !(s.is_normal() && s > 0.0 && (i32::MIN as f64..=i32::MAX as f64).contains(&q)) {
            return Err(BiasSkipped(format!(
                "channel {c}'s bias {v} is {q:e} units of s_x·s_w = {s:e}, outside i32 (re-calibrate, or \
                 check the weights of that channel)"
            )));
        }
        stored.push(q as i128);
    }
    Ok(Some(BiasPlan { index: b, values: stored, scales, per_channel }))
}

/// Puts `dequantize(i32 constant)` in place of `op`'s bias operand.
fn quantize_bias(ctx: &mut Context, module: &mut Module, op: OpId, plan: BiasPlan) -> Result<(), String> {
    let old = module.operand(op, plan.index);
    let float_ty = module.value_type(old);
    let n = static_num_elements(ctx, float_ty).ok_or("the bias has no static shape")? as i64;
    let params = if plan.per_channel {
        QuantParams::PerAxis {
            axis: 0,
            scales: plan.scales.into_boxed_slice(),
            zero_points: vec![0; n as usize].into_boxed_slice(),
        }
    } else {
        QuantParams::PerTensor { scale: plan.scales.first().copied().unwrap_or(1.0), zero_point: 0 }
    };
    let storage = IntType { width: 32, signedness: Signedness::Signless };
    let q = QuantType {
        storage,
        storage_min: i32::MIN as i64,
        storage_max: i32::MAX as i64,
        expressed: FloatKind::F32,
        params,
    };
    let elem = ctx.quant_type(q);
    let ty = ctx.tensor_type(&[n], elem);
    let attr = ctx.dense_attr(DenseElements::from_i128(ctx, ty, &plan.values)?);
    let loc = module.op_loc(op);
    let mut rewriter = Rewriter::new(ctx, module);
    rewriter.set_insertion_point(InsertPoint::Before(op));
    rewriter.set_loc(loc);
    let constant = create_constant(&mut rewriter, attr)?;
    let dequantize = dequantize_of(&mut rewriter, constant, float_ty);
    rewriter.set_operand(op, plan.index, dequantize);
    erase_if_unused_constant(ctx, module, old);
    Ok(())
}

/// `qnn.dequantize(value)` with result type `float_ty`, at the insertion point.
fn dequantize_of(rewriter: &mut Rewriter<'_>, value: ValueId, float_ty: Type) -> ValueId {
    let name = rewriter.ctx.op_name(qnn_op::DEQUANTIZE);
    let op = rewriter.create(OperationState::new(name).operands(&[value]).results(&[float_ty]));
    rewriter.module.result(op, 0)
}
