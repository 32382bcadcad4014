//! Quantized ops in QDQ form: the float op between `DequantizeLinear` of its
//! operands and `QuantizeLinear` to its result type, the form ONNX Runtime's
//! quantizer writes and its QDQ transformers fuse into integer kernels.
//!
//! | qnn op | ONNX |
//! |---|---|
//! | `quantize`, `dequantize` | `QuantizeLinear`, `DequantizeLinear` (`axis` when per axis) |
//! | `requantize` | `DequantizeLinear` → `QuantizeLinear` |
//! | `fake_quant` | `QuantizeLinear` → `DequantizeLinear` |
//! | `conv2d[_relu]` | DQ(x), DQ(w), DQ(b) → `Conv` → [`Relu` \| `Clip(0, relu_max)`] → Q |
//! | `dense[_relu]` | DQ(x), DQ(w), DQ(b) → `Gemm {transB = 1}` → [`Relu` \| `Clip`] → Q |
//! | `add`, `mul`, `concat` | DQ of each operand → `Add`, `Mul`, `Concat` → Q |
//! | `avg_pool2d`, `global_avg_pool2d` | DQ → `AveragePool`, `GlobalAveragePool` → Q |
//! | `lookup` | [`lookup`]: `Cast` → `Gather` of the dequantized table → Q |
//! | `observe`, `cast_hint`, `stop_fusion` | nothing (identities) |
//!
//! The i32 bias `b` of a conv or dense is an INT32 initializer behind a
//! `DequantizeLinear` with scales `f32(s_x · s_w[c])` and zero point 0, per
//! output channel like the weight, as ONNX Runtime expects; qimport gives it
//! back the exact scales `s_x ⊗₆₄ s_w[c]` the integer op implies.
//!
//! In ONNX these are float computations rounded once by `QuantizeLinear`
//! (ties to even); qopt's integer ops requantize in fixed point
//! (`docs/quant-semantics.md` §6–7), so ONNX Runtime agrees within one step
//! of the output, not bit for bit. `qnn.lookup`, requantize chains and the
//! conversions are exact.

use super::graph::AttrValue;
use super::{fp, OpCx};
use crate::onnx::data_type as dt;
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_dialect_qnn::quant_params::params;
use qopt_ir_core::{dense_values_i128, ValueId};

/// Writes one qnn op.
pub(super) type ExportFn = fn(&mut OpCx<'_, '_>) -> Result<(), String>;

/// The QDQ exporter of qnn op `name`.
pub(super) fn exporter(name: &str) -> Option<ExportFn> {
    let f: ExportFn = match name {
        qnn_op::QUANTIZE => quantize,
        qnn_op::DEQUANTIZE => dequantize,
        // The operand as float (its DequantizeLinear), quantized to the result.
        qnn_op::REQUANTIZE => quantize,
        qnn_op::FAKE_QUANT => fake_quant,
        qnn_op::OBSERVE | qnn_op::CAST_HINT | qnn_op::STOP_FUSION => identity,
        qnn_op::CONV2D | qnn_op::CONV2D_RELU => |cx| weighted(cx, Weighted::Conv),
        qnn_op::CONV_TRANSPOSE2D | qnn_op::CONV_TRANSPOSE2D_RELU => {
            |cx| weighted(cx, Weighted::ConvTranspose)
        }
        qnn_op::DENSE | qnn_op::DENSE_RELU => |cx| weighted(cx, Weighted::Dense),
        qnn_op::ADD => |cx| elementwise(cx, "Add"),
        qnn_op::SUB => |cx| elementwise(cx, "Sub"),
        qnn_op::MUL => |cx| elementwise(cx, "Mul"),
        qnn_op::PRELU => prelu,
        qnn_op::CONCAT => concat,
        qnn_op::AVG_POOL2D => avg_pool,
        qnn_op::GLOBAL_AVG_POOL2D => global_avg_pool,
        qnn_op::LOOKUP => lookup,
        _ => return None,
    };
    Some(f)
}

fn quantize(cx: &mut OpCx<'_, '_>) -> Result<(), String> {
    let x = cx.float(cx.operand(0)?)?;
    let y = cx.result();
    let output = cx.fresh_value("");
    cx.quantize_into(x, y, output.clone())?;
    cx.bind(y, output);
    Ok(())
}

fn dequantize(cx: &mut OpCx<'_, '_>) -> Result<(), String> {
    let float = cx.dequantize_here(cx.operand(0)?)?;
    let y = cx.result();
    cx.bind(y, float);
    Ok(())
}

/// `fake_quant(x) {type}`: `QuantizeLinear` then `DequantizeLinear` with the type's parameters.
fn fake_quant(cx: &mut OpCx<'_, '_>) -> Result<(), String> {
    let x = cx.float(cx.operand(0)?)?;
    let ty = cx.ctx().dict_get(cx.attrs(), "type").ok_or("qnn.fake_quant has no 'type'")?;
    let qopt_ir_core::AttrData::Type(elem) = cx.ctx().attr_data(ty) else {
        return Err("'type' is not a type".into());
    };
    let elem = *elem;
    super::types::check_quantize_target(cx.ctx(), elem)?;
    let stored = cx.fresh_value("quantized");
    let params = cx.ex.param_names(elem, &stored)?;
    let axis: Vec<(&'static str, AttrValue)> =
        params.axis.map(|a| vec![("axis", AttrValue::Int(a))]).unwrap_or_default();
    cx.node(
        "QuantizeLinear",
        vec![x, params.scale.clone(), params.zero_point.clone()],
        vec![stored.clone()],
        axis.clone(),
    );
    let y = cx.result();
    let output = cx.fresh_value("");
    cx.node("DequantizeLinear", vec![stored, params.scale, params.zero_point], vec![output.clone()], axis);
    cx.bind(y, output);
    Ok(())
}

fn identity(cx: &mut OpCx<'_, '_>) -> Result<(), String> {
    let x = cx.operand(0)?;
    let y = cx.result();
    cx.alias(y, x);
    Ok(())
}

#[derive(Copy, Clone, PartialEq, Eq)]
pub(super) enum Weighted {
    Conv,
    ConvTranspose,
    Dense,
}

/// The float activation a relu form applies: `Relu`, or `Clip(0, relu_max)`;
/// `None` for the plain ops.
pub(super) fn relu_of(cx: &OpCx<'_, '_>) -> Result<Option<Option<f64>>, String> {
    let name = cx.ctx().op_name_str(cx.module().op_name(cx.op));
    if ![qnn_op::CONV2D_RELU, qnn_op::CONV_TRANSPOSE2D_RELU, qnn_op::DENSE_RELU].contains(&name) {
        return Ok(None);
    }
    Ok(Some(qopt_dialect_fp::attrs::opt_float_in(cx.ctx(), cx.attrs(), "relu_max")?))
}

/// Appends `Relu(x)` or `Clip(x, 0, relu_max)` into `y`.
pub(super) fn write_relu(
    cx: &mut OpCx<'_, '_>,
    relu_max: Option<f64>,
    x: String,
    y: String,
) -> Result<(), String> {
    match relu_max {
        None => cx.node("Relu", vec![x], vec![y], Vec::new()),
        Some(max) => {
            if !super::types::is_f32(max) {
                return Err(format!("relu_max = {max} is not an f32 value, as ONNX's Clip bounds are here"));
            }
            let zero = cx.float_scalar("relu_min", 0.0, dt::FLOAT)?;
            let top = cx.float_scalar("relu_max", max, dt::FLOAT)?;
            cx.node("Clip", vec![x, zero, top], vec![y], Vec::new());
        }
    }
    Ok(())
}

/// The bias `b` of a conv or dense as the float input ONNX Runtime expects:
/// its INT32 data behind `DequantizeLinear` with scales `f32(s_x · s_w[c])`
/// and zero point 0 (per output channel, axis 0, when the weight is).
pub(super) fn dequantized_bias(
    cx: &mut OpCx<'_, '_>,
    x: ValueId,
    w: ValueId,
    b: ValueId,
) -> Result<String, String> {
    let (qx, qw) = (cx.quant_of(x)?, cx.quant_of(w)?);
    let s_x = params(qx).first().map(|p| p.scale).ok_or("no activation scale")?;
    let scales: Vec<f32> = params(qw).iter().map(|p| (s_x * p.scale) as f32).collect();
    if let Some(s) = scales.iter().find(|s| !s.is_normal()) {
        return Err(format!("the bias scale s_x · s_w = {s} is not a normal f32 number"));
    }
    if cx.constant_data(b).is_none() {
        return Err(
            "the bias is computed, not a constant; ONNX Runtime expects biases as initializers".into()
        );
    }
    let data = cx.stored(b)?;
    let per_axis = scales.len() > 1 || qopt_dialect_qnn::quant_params::axis(qw).is_some();
    let dims = if per_axis { vec![scales.len() as i64] } else { Vec::new() };
    let raw: Vec<u8> = scales.iter().flat_map(|s| s.to_le_bytes()).collect();
    let scale = cx.initializer("bias_scale", dims.clone(), dt::FLOAT, raw);
    let zero_point = cx.initializer("bias_zero_point", dims, dt::INT32, vec![0; 4 * scales.len()]);
    let output = cx.fresh_value("bias");
    let attributes = if per_axis { vec![("axis", AttrValue::Int(0))] } else { Vec::new() };
    cx.node("DequantizeLinear", vec![data, scale, zero_point], vec![output.clone()], attributes);
    Ok(output)
}

/// `conv2d[_relu]` and `dense[_relu]`: the float op on the dequantized
/// operands, the activation, then `QuantizeLinear`.
fn weighted(cx: &mut OpCx<'_, '_>, kind: Weighted) -> Result<(), String> {
    let operands = cx.operands();
    let (x, w) = (cx.operand(0)?, cx.operand(1)?);
    let mut inputs = vec![cx.float(x)?, cx.float(w)?];
    if let Some(&b) = operands.get(2) {
        inputs.push(dequantized_bias(cx, x, w, b)?);
    }
    let relu = relu_of(cx)?;
    let y = cx.result();
    let float = cx.fresh_value("float");
    let linear = if relu.is_some() { cx.fresh_value("linear") } else { float.clone() };
    match kind {
        Weighted::Conv => {
            let attributes = super::fp::conv_attributes(cx, 2)?;
            cx.node("Conv", inputs, vec![linear.clone()], attributes);
        }
        Weighted::ConvTranspose => {
            let attributes = super::fp::conv_transpose_attributes(cx, 2)?;
            cx.node("ConvTranspose", inputs, vec![linear.clone()], attributes);
        }
        Weighted::Dense => {
            let (x_shape, y_shape) = (cx.shape(x)?, cx.shape(y)?);
            let x_name = inputs[0].clone();
            let rest = inputs[1..].to_vec();
            fp::gemm_reshaped(
                cx,
                &x_shape,
                &y_shape,
                |cx, x, out| {
                    let mut inputs = vec![x];
                    inputs.extend(rest);
                    cx.node("Gemm", inputs, vec![out], vec![("transB", AttrValue::Int(1))]);
                    Ok(())
                },
                &x_name,
                &linear,
            )?;
        }
    }
    if let Some(relu_max) = relu {
        write_relu(cx, relu_max, linear, float.clone())?;
    }
    let output = cx.fresh_value("");
    cx.quantize_into(float, y, output.clone())?;
    cx.bind(y, output);
    Ok(())
}

/// `qnn.prelu(x, slope)`: `PRelu` of the dequantized input and the float
/// slope, quantized to the result.
fn prelu(cx: &mut OpCx<'_, '_>) -> Result<(), String> {
    let x = cx.float(cx.operand(0)?)?;
    let slope = cx.float(cx.operand(1)?)?;
    let float = cx.fresh_value("float");
    cx.node("PRelu", vec![x, slope], vec![float.clone()], Vec::new());
    quantize_result(cx, float)
}

fn elementwise(cx: &mut OpCx<'_, '_>, op_type: &'static str) -> Result<(), String> {
    let a = cx.float(cx.operand(0)?)?;
    let b = cx.float(cx.operand(1)?)?;
    let float = cx.fresh_value("float");
    cx.node(op_type, vec![a, b], vec![float.clone()], Vec::new());
    quantize_result(cx, float)
}

/// Quantizes `float` to the op's result type and binds the result.
fn quantize_result(cx: &mut OpCx<'_, '_>, float: String) -> Result<(), String> {
    let y = cx.result();
    let output = cx.fresh_value("");
    cx.quantize_into(float, y, output.clone())?;
    cx.bind(y, output);
    Ok(())
}

fn concat(cx: &mut OpCx<'_, '_>) -> Result<(), String> {
    let mut inputs = Vec::new();
    for v in cx.operands() {
        inputs.push(cx.float(v)?);
    }
    let axis = qopt_dialect_fp::attrs::opt_int_in(cx.ctx(), cx.attrs(), "axis")?.ok_or("no 'axis'")?;
    let float = cx.fresh_value("float");
    cx.node("Concat", inputs, vec![float.clone()], vec![("axis", AttrValue::Int(axis))]);
    quantize_result(cx, float)
}

fn avg_pool(cx: &mut OpCx<'_, '_>) -> Result<(), String> {
    let x = cx.float(cx.operand(0)?)?;
    let attributes = fp::avg_pool_attributes(cx)?;
    let float = cx.fresh_value("float");
    cx.node("AveragePool", vec![x], vec![float.clone()], attributes);
    quantize_result(cx, float)
}

fn global_avg_pool(cx: &mut OpCx<'_, '_>) -> Result<(), String> {
    let x = cx.float(cx.operand(0)?)?;
    let float = cx.fresh_value("float");
    cx.node("GlobalAveragePool", vec![x], vec![float.clone()], Vec::new());
    quantize_result(cx, float)
}

/// `qnn.lookup(x) {table}`, exactly, in both formats:
///
/// ```text
/// index = Cast(x) {to = INT32}                   the stored values
/// table = DequantizeLinear(entries, s_out, zp_out)  2^bits reals, index q at q mod 2^bits
/// y     = QuantizeLinear(Gather(table, index), s_out, zp_out)
/// ```
///
/// `Gather` counts negative indices from the end, so the entry of a
/// negative stored value `q` sits at `2^bits + q`; entries outside the
/// input's storage range are never read (they hold the output zero point).
/// Quantizing a dequantized entry gives it back (`docs/quant-semantics.md`
/// §10), so `y` holds the table's entries; qimport reads the three nodes
/// back as `qnn.lookup`.
fn lookup(cx: &mut OpCx<'_, '_>) -> Result<(), String> {
    let x = cx.operand(0)?;
    let y = cx.result();
    let (qx, qy) = (cx.quant_of(x)?, cx.quant_of(y)?);
    let table = cx.ctx().dict_get(cx.attrs(), "table").ok_or("qnn.lookup has no 'table'")?;
    let qopt_ir_core::AttrData::Dense(d) = cx.ctx().attr_data(table) else {
        return Err("'table' is not dense".into());
    };
    let entries = dense_values_i128(cx.ctx(), d).ok_or("'table' does not hold integers")?;
    let bits = u32::from(qx.storage.width);
    let size = 1usize << bits;
    let zp_out = params(qy).first().map(|p| p.zero_point).ok_or("no output parameters")?;
    let mut rotated = vec![zp_out; size];
    for (i, &e) in entries.iter().enumerate() {
        let q = qx.storage_min + i as i64;
        rotated[q.rem_euclid(size as i64) as usize] = e as i64;
    }
    let stored_type = super::types::storage_data_type(qy)?;
    let raw = super::types::encode_ints(&rotated, stored_type)?;
    let entries_name = cx.initializer("table", vec![size as i64], stored_type, raw);
    let input = cx.stored(x)?;
    let index = cx.fresh_value("index");
    cx.node("Cast", vec![input], vec![index.clone()], vec![("to", AttrValue::Int(i64::from(dt::INT32)))]);
    let elem = cx.ctx().element_type(cx.value_type(y));
    let table_params = cx.ex.param_names(elem, &entries_name)?;
    let reals = cx.fresh_value("table_dequantized");
    cx.node(
        "DequantizeLinear",
        vec![entries_name, table_params.scale, table_params.zero_point],
        vec![reals.clone()],
        Vec::new(),
    );
    let float = cx.fresh_value("float");
    cx.node("Gather", vec![reals, index], vec![float.clone()], vec![("axis", AttrValue::Int(0))]);
    quantize_result(cx, float)
}
