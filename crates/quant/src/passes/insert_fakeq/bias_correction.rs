//! Bias correction from channel means (NNCF's "fast bias correction"), the
//! step of `insert-fakeq{bias-correction=true}` after a weight is fake-quantized.
//!
//! Rounding a layer's weight W to W_q shifts its output by (W_q − W)·x. Over
//! the calibration data the mean of that shift, per output channel, is the
//! layer applied to the mean input with weight W_q − W and no bias; it is a
//! systematic error (the same for every input) that the bias can absorb:
//!
//! ```text
//! b' = b − mean over positions of op(x̄, W_q − W)
//! ```
//!
//! where x̄ has the activation's shape (batch 1) and holds, on each channel,
//! that channel's observed mean (`qnn.observe`'s `mean`, see
//! `channel_means.rs`). The layer is run by its interpreter kernel, so padding
//! and groups count exactly and any weighted op with a kernel is corrected,
//! and W_q comes from the `qnn.fake_quant` kernel: the correction uses the
//! semantics the model is run with, not a copy of them.
//!
//! What was subtracted is added to the op's `qnn.bias_correction` record
//! (`bias_record.rs`), so `bias-correct` can rebuild the float bias.

use crate::channels::{channel_blocks_mut, channel_sums};
use crate::records::bias_correction::{subtract_from_bias, BiasRecord};
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_interp::{KernelContext, KernelRegistry, Tensor};
use qopt_ir_core::interfaces::QuantizableOp;
use qopt_ir_core::{constant_value, AttrData, Context, Module, OpId, Type, ValueId};

/// Subtracts from the bias of `op` the mean output shift its fake-quantized
/// weight causes on inputs whose channels have the means `means`, adding a
/// bias operand if it has none. Returns whether the bias changed.
pub(crate) fn correct_bias(
    ctx: &mut Context,
    module: &mut Module,
    op: OpId,
    q: &QuantizableOp,
    means: &[f64],
    kernels: &KernelRegistry,
) -> Result<bool, String> {
    let (Some(w), Some(&x), Some(b)) = (q.weight, q.activations.first(), q.bias) else {
        return Err("the op has no weight, activation or bias operand".into());
    };
    let operands = module.num_operands(op);
    if w >= operands || x >= operands || b > operands {
        return Err("the op lacks the weight or activation operand".into());
    }
    let weight_delta = weight_rounding_error(ctx, module, module.operand(op, w), kernels)?;
    let shift = mean_output_shift(ctx, module, op, q, x, weight_delta, means, kernels)?;
    if shift.iter().all(|&s| s == 0.0) {
        return Ok(false);
    }
    let mut record = BiasRecord::load(ctx, module, op, shift.len())?;
    subtract_from_bias(ctx, module, op, q, &shift)?;
    record.correction.iter_mut().zip(&shift).for_each(|(c, s)| *c += s);
    record.store(ctx, module, op)?;
    Ok(true)
}

/// `W_q − W` for a weight operand `fake_quant(W)` with constant `W`, as f32.
fn weight_rounding_error(
    ctx: &mut Context,
    module: &Module,
    weight: ValueId,
    kernels: &KernelRegistry,
) -> Result<Tensor, String> {
    let fq = module.defining_op(weight);
    if fq.is_none() || !module.op_is(ctx, fq, qnn_op::FAKE_QUANT) {
        return Err("the weight is not fake-quantized".into());
    }
    let constant = module.operand(fq, 0);
    let attr = constant_value(ctx, module, constant).ok_or("the weight is not a constant")?;
    let AttrData::Dense(d) = ctx.attr_data(attr) else {
        return Err("the weight is not a dense constant".into());
    };
    let original = Tensor::from_dense(ctx, d).map_err(|e| e.message)?;
    let ty = module.value_type(constant);
    let kernel = kernels.get(qnn_op::FAKE_QUANT).ok_or("no kernel runs qnn.fake_quant")?;
    let types = [ty];
    let mut kc = KernelContext::new(ctx, module.op_attrs(fq), &types).with_operand_types(&types);
    let rounded = kernel(&mut kc, &[&original]).map_err(|e| e.message)?;
    let rounded = rounded.first().ok_or("fake_quant returned nothing")?;
    let delta: Vec<f32> =
        rounded.to_f64_vec().iter().zip(original.to_f64_vec()).map(|(q, w)| (q - w) as f32).collect();
    Tensor::from_f32(original.shape(), delta).map_err(|e| e.message)
}

/// Per output channel, the mean over every other axis of `op` run on the
/// channel means (batch 1) with weight `delta` and no bias.
#[allow(clippy::too_many_arguments)]
fn mean_output_shift(
    ctx: &mut Context,
    module: &Module,
    op: OpId,
    q: &QuantizableOp,
    x: usize,
    delta: Tensor,
    means: &[f64],
    kernels: &KernelRegistry,
) -> Result<Vec<f64>, String> {
    let name = ctx.op_name_str(module.op_name(op)).to_string();
    let kernel = kernels.get(&name).ok_or_else(|| format!("no kernel runs {name}"))?;
    let input_dims = batch_one(ctx, module.value_type(module.operand(op, x)))?;
    let result_dims = batch_one(ctx, module.value_type(module.result(op, 0)))?;
    let (Some(in_axis), Some(out_axis)) =
        (q.channel_axis_for_rank(input_dims.len()), q.channel_axis_for_rank(result_dims.len()))
    else {
        return Err("the op's channel axis is unknown".into());
    };
    if input_dims[in_axis] != means.len() {
        return Err(format!("{} channel means for {} input channels", means.len(), input_dims[in_axis]));
    }
    let mut values = vec![0.0f32; input_dims.iter().product()];
    for (channel, run) in channel_blocks_mut(&mut values, &input_dims, in_axis) {
        run.fill(means[channel] as f32);
    }
    let input = Tensor::from_f32(&input_dims, values).map_err(|e| e.message)?;

    let f32_ty = ctx.common().f32;
    let as_i64 = |d: &[usize]| d.iter().map(|&v| v as i64).collect::<Vec<_>>();
    let operand_types = [ctx.tensor_type(&as_i64(&input_dims), f32_ty), {
        let d = as_i64(delta.shape());
        ctx.tensor_type(&d, f32_ty)
    }];
    let result_types = [ctx.tensor_type(&as_i64(&result_dims), f32_ty)];
    let mut kc =
        KernelContext::new(ctx, module.op_attrs(op), &result_types).with_operand_types(&operand_types);
    let out = kernel(&mut kc, &[&input, &delta]).map_err(|e| e.message)?;
    let out = out.first().ok_or("the kernel returned nothing")?;
    let channels = result_dims[out_axis];
    let sums = channel_sums(&out.to_f64_vec(), &result_dims, out_axis, channels);
    let per_channel = (out.len() / channels.max(1)).max(1) as f64;
    Ok(sums.into_iter().map(|s| s / per_channel).collect())
}

/// The static shape of `ty` with a batch of 1; an error for other dynamic dimensions.
fn batch_one(ctx: &Context, ty: Type) -> Result<Vec<usize>, String> {
    let dims = ctx.tensor_shape(ty).ok_or("an operand is not a ranked tensor")?;
    dims.iter()
        .enumerate()
        .map(|(i, &d)| match (i, d) {
            (0, _) if dims.len() > 1 => Ok(1),
            (_, d) if d >= 0 => Ok(d as usize),
            _ => Err("an operand has a dynamic dimension besides the batch".to_string()),
        })
        .collect()
}
