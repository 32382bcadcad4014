//! QOperator models: ONNX's and ONNX Runtime's integer ops → the `qnn` op
//! doing the same job.
//!
//! | ONNX | qnn |
//! |---|---|
//! | `QLinearConv` (2-D) | `qnn.conv2d` (bias INT32 as its i32 operand) |
//! | `QLinearMatMul` with a constant K×N `b` | `qnn.dense` with the N×K transpose |
//! | `com.microsoft.QGemm` (`alpha = 1`, `transA = 0`, with `y_scale`) | `qnn.dense` (C as the i32 bias) |
//! | `com.microsoft.QLinearAdd`, `QLinearMul` | `qnn.add`, `qnn.mul` |
//! | `com.microsoft.QLinearConcat` | `qnn.concat` |
//! | `com.microsoft.QLinearAveragePool`, `QLinearGlobalAveragePool` (NCHW) | `qnn.avg_pool2d`, `qnn.global_avg_pool2d` |
//!
//! Each quantized input comes with its scale and zero point inputs, which
//! must be constants: a constant input becomes a quantized `fp.constant`
//! (per axis 0 for per-channel weights), a computed one must already carry
//! that type (the output of a `QuantizeLinear` or another QLinear op). The
//! output type is per tensor, from the output scale and zero point.
//!
//! ONNX leaves the integer arithmetic of these ops to the runtime (ONNX
//! Runtime requantizes in f32 and rounds half to even); the qnn ops are
//! qopt's fixed-point arithmetic of `docs/quant-semantics.md` §6–7, which
//! agrees with it within one step of the output. Exported by qexport, the
//! same ops come back exactly.

use super::quant::{quant_type_from, quantized_tensor, storage};
use super::{spatial_ints, window_pads, AttrList, ConvertFn};
use crate::import::NodeCx;
use crate::onnx::data_type as dt;
use qopt_dialect_fp::op_names as fp_op;
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_ir_core::{Attribute, QuantParams, Type, TypeData, ValueId};

/// The standard-domain op types this family converts.
pub(crate) const CONVERTERS: &[(&str, ConvertFn)] =
    &[("QLinearConv", qlinear_conv), ("QLinearMatMul", qlinear_matmul)];

/// The `com.microsoft` op types this family converts.
pub(crate) const MICROSOFT_CONVERTERS: &[(&str, ConvertFn)] = &[
    ("QGemm", qgemm),
    ("QLinearAdd", |cx| binary(cx, qnn_op::ADD, fp_op::ADD)),
    ("QLinearAveragePool", qlinear_average_pool),
    ("QLinearConcat", qlinear_concat),
    ("QLinearGlobalAveragePool", qlinear_global_average_pool),
    ("QLinearMul", |cx| binary(cx, qnn_op::MUL, fp_op::MUL)),
];

/// Input `data` with its `scale` and `zero_point` inputs as a quantized
/// value: a constant becomes a quantized `fp.constant` (per axis along
/// `axis` when the scale has several entries); a computed value must
/// already have that type.
fn quantized_input(
    cx: &mut NodeCx<'_, '_>,
    data: usize,
    scale: usize,
    zero_point: usize,
    axis: i64,
) -> Result<ValueId, String> {
    let scale_data = cx.const_input(scale)?.ok_or_else(|| format!("input #{scale} (a scale) is missing"))?;
    let zp = cx.const_input(zero_point)?;
    if cx.is_const_input(data) {
        let d = cx.const_input(data)?.ok_or("missing constant")?;
        if zp.as_ref().is_some_and(|zp| zp.data_type != d.data_type) {
            return Err(format!(
                "input #{data}'s zero point has another type than its {}",
                dt::name(d.data_type)
            ));
        }
        let q = quant_type_from(&scale_data, zp.as_ref(), &d.dims, axis, storage(d.data_type)?)?;
        let elem = cx.ctx().quant_type(q);
        return cx.constant(&d, elem);
    }
    let x = cx.input(data)?;
    let shape = cx.shape(x)?;
    let ty = cx.value_type(x);
    let TypeData::Quant(actual) = cx.ctx_ref().type_data(cx.element(x)).clone() else {
        return Err(format!(
            "input #{data} has type {}; it must be a constant or a quantized value (the output of a \
             QuantizeLinear or of another QLinear op)",
            qopt_ir_core::type_to_string(cx.ctx(), ty)
        ));
    };
    let expected = quant_type_from(&scale_data, zp.as_ref(), &shape, axis, actual.storage)?;
    if expected != actual {
        let expected = quantized_tensor(cx.ctx(), &shape, expected);
        return Err(format!(
            "input #{data} has type {} but its scale and zero point describe {}",
            qopt_ir_core::type_to_string(cx.ctx(), ty),
            qopt_ir_core::type_to_string(cx.ctx(), expected)
        ));
    }
    Ok(x)
}

/// The per-tensor quantized result type of `shape` from the output `scale`
/// and `zero_point` inputs.
fn output_type(
    cx: &mut NodeCx<'_, '_>,
    scale: usize,
    zero_point: usize,
    shape: &[i64],
) -> Result<Type, String> {
    let scale_data =
        cx.const_input(scale)?.ok_or_else(|| format!("input #{scale} (the output scale) is missing"))?;
    let zp = cx.const_input(zero_point)?;
    let q = quant_type_from(&scale_data, zp.as_ref(), shape, 0, storage(dt::UINT8)?)?;
    if !matches!(q.params, QuantParams::PerTensor { .. }) {
        return Err("the output must be quantized per tensor".into());
    }
    Ok(quantized_tensor(cx.ctx(), shape, q))
}

/// The result shape fp op `op` infers for float operands of the shapes of
/// `operands`, with attributes `attrs`.
fn inferred_shape(
    cx: &mut NodeCx<'_, '_>,
    op: &str,
    operands: &[ValueId],
    attrs: Attribute,
) -> Result<Vec<i64>, String> {
    let f32_ty = cx.ctx().common().f32;
    let mut types = Vec::with_capacity(operands.len());
    for &v in operands {
        let shape = cx.shape(v)?;
        types.push(cx.ctx().tensor_type(&shape, f32_ty));
    }
    let name = cx.ctx().op_name(op);
    let infer =
        cx.ctx().op_def(name).and_then(|d| d.infer_types).ok_or_else(|| format!("{op} has no inference"))?;
    let results = infer(cx.ctx(), &types, attrs)?;
    let ty = *results.first().ok_or("no result")?;
    cx.ctx().tensor_shape(ty).map(<[i64]>::to_vec).ok_or_else(|| "not a tensor".into())
}

/// `QLinearConv` → `qnn.conv2d` with `Conv`'s window attributes.
fn qlinear_conv(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let x = quantized_input(cx, 0, 1, 2, 1)?;
    let w = quantized_input(cx, 3, 4, 5, 0)?;
    let (x_shape, w_shape) = (cx.shape(x)?, cx.shape(w)?);
    if x_shape.len() != 4 || w_shape.len() != 4 {
        return Err(format!("only 2-D QLinearConv is supported (input rank {})", x_shape.len()));
    }
    let attrs = cx.attrs();
    let kernel = w_shape[2..].to_vec();
    if let Some(k) = attrs.opt_ints("kernel_shape")? {
        if k != kernel {
            return Err(format!(
                "attribute 'kernel_shape' {k:?} differs from the weight's kernel {kernel:?}"
            ));
        }
    }
    let strides = spatial_ints(&attrs, "strides", 2, 1)?;
    let dilations = spatial_ints(&attrs, "dilations", 2, 1)?;
    let pads = window_pads(&attrs, &x_shape[2..], &kernel, &strides, &dilations)?;
    let group = attrs.int("group", 1)?;
    let ctx = cx.ctx();
    let mut list = AttrList::default();
    list.ints_unless(ctx, "stride", &strides, &[1, 1]);
    list.ints_unless(ctx, "pad", &pads, &[0; 4]);
    list.ints_unless(ctx, "dilation", &dilations, &[1, 1]);
    if group != 1 {
        let g = ctx.i64_attr(group);
        list.push("groups", g);
    }
    let dict = list.dict(ctx);
    let mut operands = vec![x, w];
    operands.extend(cx.opt_input(8)?);
    let shape = inferred_shape(cx, fp_op::CONV2D, &[x, w], dict)?;
    let ty = output_type(cx, 6, 7, &shape)?;
    let y = cx.emit_typed_with(qnn_op::CONV2D, &operands, dict, ty)?;
    cx.set_output(0, y)
}

/// The N×K weight of a dense layer from the K×N constant input `data`
/// (scale and zero point per tensor or per column): its transpose, per axis 0.
fn transposed_weight(
    cx: &mut NodeCx<'_, '_>,
    data: usize,
    scale: usize,
    zero_point: usize,
) -> Result<ValueId, String> {
    let computed =
        || format!("input #{data} (B) must be a constant: qnn has no integer product of two computed values");
    if !cx.is_const_input(data) {
        return Err(computed());
    }
    let d = cx.const_input(data)?.ok_or_else(computed)?;
    let t =
        d.transposed_2d().ok_or_else(|| format!("input #{data} (B) must be 2-D, has dims {:?}", d.dims))?;
    let scale_data = cx.const_input(scale)?.ok_or("B's scale is missing")?;
    let zp = cx.const_input(zero_point)?;
    let q = quant_type_from(&scale_data, zp.as_ref(), &t.dims, 0, storage(t.data_type)?)?;
    let elem = cx.ctx().quant_type(q);
    cx.constant(&t, elem)
}

/// `QLinearMatMul(a, B)` with a constant K×N `B` → `qnn.dense(a, Bᵀ)`.
fn qlinear_matmul(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let a = quantized_input(cx, 0, 1, 2, 1)?;
    let w = transposed_weight(cx, 3, 4, 5)?;
    let shape = inferred_shape(cx, fp_op::DENSE, &[a, w], Attribute::EMPTY_DICT)?;
    let ty = output_type(cx, 6, 7, &shape)?;
    let y = cx.emit_typed(qnn_op::DENSE, &[a, w], ty)?;
    cx.set_output(0, y)
}

/// `com.microsoft.QGemm(A, B, C)` with `alpha = 1`, `transA = 0` and an
/// output scale → `qnn.dense(A, W, C)`, `W` being `B` with `transB = 1`, else
/// the transpose of the constant `B`.
fn qgemm(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let attrs = cx.attrs();
    if attrs.float("alpha", 1.0)? != 1.0 || attrs.int("transA", 0)? != 0 {
        return Err("only QGemm with alpha = 1 and transA = 0 is supported".into());
    }
    if cx.input_name(7).is_none() {
        return Err("QGemm without y_scale (a float output) is not supported".into());
    }
    let a = quantized_input(cx, 0, 1, 2, 1)?;
    let w = if attrs.int("transB", 0)? != 0 {
        quantized_input(cx, 3, 4, 5, 0)?
    } else {
        transposed_weight(cx, 3, 4, 5)?
    };
    let mut operands = vec![a, w];
    operands.extend(cx.opt_input(6)?);
    let shape = inferred_shape(cx, fp_op::DENSE, &[a, w], Attribute::EMPTY_DICT)?;
    let ty = output_type(cx, 7, 8, &shape)?;
    let y = cx.emit_typed(qnn_op::DENSE, &operands, ty)?;
    cx.set_output(0, y)
}

/// `QLinearAdd`, `QLinearMul` → `qnn.add`, `qnn.mul` (numpy broadcasting).
fn binary(cx: &mut NodeCx<'_, '_>, op: &str, float_op: &str) -> Result<(), String> {
    let a = quantized_input(cx, 0, 1, 2, 1)?;
    let b = quantized_input(cx, 3, 4, 5, 1)?;
    let shape = inferred_shape(cx, float_op, &[a, b], Attribute::EMPTY_DICT)?;
    let ty = output_type(cx, 6, 7, &shape)?;
    let y = cx.emit_typed(op, &[a, b], ty)?;
    cx.set_output(0, y)
}

/// `QLinearConcat(y_scale, y_zero_point, (x, x_scale, x_zero_point)…)` → `qnn.concat`.
fn qlinear_concat(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let axis = cx.attrs().opt_int("axis")?.ok_or("attribute 'axis' is missing")?;
    let count = cx.node_input_count();
    if count < 5 || !(count - 2).is_multiple_of(3) {
        return Err(format!(
            "{count} inputs are not y_scale, y_zero_point and triples of x, scale, zero point"
        ));
    }
    let mut operands = Vec::new();
    for i in (2..count).step_by(3) {
        operands.push(quantized_input(cx, i, i + 1, i + 2, 1)?);
    }
    let a = cx.ctx().i64_attr(axis);
    let dict = cx.ctx().dict_attr(&[("axis", a)]);
    let shape = inferred_shape(cx, fp_op::CONCAT, &operands, dict)?;
    let ty = output_type(cx, 0, 1, &shape)?;
    let y = cx.emit_typed_with(qnn_op::CONCAT, &operands, dict, ty)?;
    cx.set_output(0, y)
}

/// ONNX Runtime's pools take NHWC input with `channels_last = 1`; qnn's are NCHW.
fn check_channels_first(cx: &NodeCx<'_, '_>) -> Result<(), String> {
    if cx.attrs().int("channels_last", 0)? != 0 {
        return Err("channels_last = 1 (NHWC) is not supported".into());
    }
    Ok(())
}

fn qlinear_global_average_pool(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    check_channels_first(cx)?;
    let x = quantized_input(cx, 0, 1, 2, 1)?;
    let shape = inferred_shape(cx, fp_op::GLOBAL_AVG_POOL2D, &[x], Attribute::EMPTY_DICT)?;
    let ty = output_type(cx, 3, 4, &shape)?;
    let y = cx.emit_typed(qnn_op::GLOBAL_AVG_POOL2D, &[x], ty)?;
    cx.set_output(0, y)
}

fn qlinear_average_pool(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    check_channels_first(cx)?;
    let x = quantized_input(cx, 0, 1, 2, 1)?;
    let x_shape = cx.shape(x)?;
    let dict = super::pool::pool_attrs(cx, &x_shape, false)?;
    let shape = inferred_shape(cx, fp_op::AVG_POOL2D, &[x], dict)?;
    let ty = output_type(cx, 3, 4, &shape)?;
    let y = cx.emit_typed_with(qnn_op::AVG_POOL2D, &[x], dict, ty)?;
    cx.set_output(0, y)
}
