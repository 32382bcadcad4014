//! Quantized ops as ONNX's and ONNX Runtime's integer ops (the QOperator
//! format), for the 8-bit types ONNX Runtime implements them for (one of
//! int8 and uint8 for activations and results; int8 weights, or uint8 ones
//! with uint8 activations):
//!
//! | qnn op | ONNX |
//! |---|---|
//! | `conv2d[_relu]` | `QLinearConv` (bias INT32 as is) |
//! | `dense[_relu]` with a bias | `com.microsoft.QGemm {transB = 1}` |
//! | `dense[_relu]` without one, constant weight | `QLinearMatMul` of the transposed weight |
//! | `add`, `mul` | `com.microsoft.QLinearAdd`, `QLinearMul` |
//! | `concat` | `com.microsoft.QLinearConcat` |
//! | `avg_pool2d`, `global_avg_pool2d` | `com.microsoft.QLinearAveragePool`, `QLinearGlobalAveragePool` |
//!
//! A relu form's clamp at the output zero point (and at `quantize(relu_max)`)
//! is the integer op's own saturation when the zero point is the storage
//! minimum and `relu_max` does not bind; otherwise the op is followed by
//! dequantize → `Relu` / `Clip` → quantize, which is exact (the activation's
//! results lie on the grid). Every other op, and these ops on other storage
//! widths, are written as QDQ ([`super::qdq`]), which is what
//! [`Written::No`] asks for.

use super::graph::{AttrValue, MICROSOFT_DOMAIN};
use super::qdq::{relu_of, write_relu};
use super::OpCx;
use qopt_dialect_qnn::fixed_point::{quantize_f32, scale_f32};
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_dialect_qnn::quant_params::per_tensor;
use qopt_ir_core::{dense_values_i128, ValueId};

/// Whether an exporter wrote the op, or leaves it to the QDQ form.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Written {
    Yes,
    No,
}

type ExportFn = fn(&mut OpCx<'_, '_>) -> Result<Written, String>;

/// The QOperator exporter of qnn op `name`, if it has one.
pub(super) fn exporter(name: &str) -> Option<ExportFn> {
    let f: ExportFn = match name {
        qnn_op::CONV2D | qnn_op::CONV2D_RELU => conv,
        qnn_op::DENSE | qnn_op::DENSE_RELU => dense,
        qnn_op::ADD => |cx| binary(cx, "QLinearAdd"),
        qnn_op::MUL => |cx| binary(cx, "QLinearMul"),
        qnn_op::CONCAT => concat,
        qnn_op::AVG_POOL2D => avg_pool,
        qnn_op::GLOBAL_AVG_POOL2D => global_avg_pool,
        _ => return None,
    };
    Some(f)
}

/// True if every value has one 8-bit quantized storage type, int8 or uint8:
/// the QLinear ops ONNX Runtime implements take and give one of them
/// throughout (ONNX allows mixing; ONNX Runtime has no kernel for it).
fn one_8bit_type(cx: &OpCx<'_, '_>, values: &[ValueId]) -> bool {
    let storage = values.first().and_then(|&v| cx.quant(v)).map(|q| q.storage);
    storage
        .is_some_and(|s| s.width == 8 && values.iter().all(|&v| cx.quant(v).is_some_and(|q| q.storage == s)))
}

/// True if the activation `x`, weight `w` and result `y` of a conv or dense
/// are a combination ONNX Runtime's `QLinearConv`, `QLinearMatMul` and
/// `QGemm` implement: `x` and `y` of one 8-bit type, `w` int8, or uint8
/// with a uint8 `x`.
fn weighted_types_run(cx: &OpCx<'_, '_>, x: ValueId, w: ValueId, y: ValueId) -> bool {
    let (Some(qx), Some(qw)) = (cx.quant(x), cx.quant(w)) else { return false };
    let w_ok = qw.storage.width == 8
        && (qw.storage.signedness != qopt_ir_core::Signedness::Unsigned || qx.storage == qw.storage);
    one_8bit_type(cx, &[x, y]) && w_ok
}

/// `[x, x_scale, x_zero_point]`: a quantized operand as QLinear ops take it.
fn with_params(cx: &mut OpCx<'_, '_>, v: ValueId) -> Result<Vec<String>, String> {
    let stored = cx.stored(v)?;
    let p = cx.params(v)?;
    Ok(vec![stored, p.scale, p.zero_point])
}

/// The output tensor of a relu form's integer op, and whether the clamp
/// still has to be applied after it: not when the result's zero point is its
/// storage minimum (so saturation clamps at real 0) and `relu_max`, if any,
/// quantizes to the storage maximum or above.
fn relu_after(cx: &OpCx<'_, '_>) -> Result<Option<Option<f64>>, String> {
    let Some(relu_max) = relu_of(cx)? else { return Ok(None) };
    let q = cx.quant_of(cx.result())?;
    let p = per_tensor(q).ok_or("a per-axis result")?;
    let clamps_at_zero = p.zero_point == q.storage_min;
    let top_binds = relu_max.is_some_and(|max| {
        quantize_f32(max as f32, scale_f32(p.scale), p.zero_point, q.storage_min, q.storage_max)
            < q.storage_max
    });
    Ok((!clamps_at_zero || top_binds).then_some(relu_max))
}

/// Binds the op's result to `integer`, the integer op's output, after the
/// relu clamp when [`relu_after`] says it is needed.
fn finish(cx: &mut OpCx<'_, '_>, integer: String, relu: Option<Option<f64>>) -> Result<Written, String> {
    let y = cx.result();
    let Some(relu_max) = relu else {
        cx.bind(y, integer);
        return Ok(Written::Yes);
    };
    // The integer op's result has the op's result type, so it dequantizes with it.
    let p = cx.params(y)?;
    let dequantized = cx.fresh_value("dequantized");
    cx.node("DequantizeLinear", vec![integer, p.scale, p.zero_point], vec![dequantized.clone()], Vec::new());
    let activated = cx.fresh_value("float");
    write_relu(cx, relu_max, dequantized, activated.clone())?;
    let output = cx.fresh_value("");
    cx.quantize_into(activated, y, output.clone())?;
    cx.bind(y, output);
    Ok(Written::Yes)
}

fn conv(cx: &mut OpCx<'_, '_>) -> Result<Written, String> {
    let operands = cx.operands();
    let (x, w) = (operands[0], operands[1]);
    if !weighted_types_run(cx, x, w, cx.result()) {
        return Ok(Written::No);
    }
    let relu = relu_after(cx)?;
    let attributes = super::fp::conv_attributes(cx, 2)?;
    let y = cx.result();
    let mut inputs = with_params(cx, x)?;
    inputs.extend(with_params(cx, w)?);
    let p = cx.params(y)?;
    inputs.extend([p.scale, p.zero_point]);
    if let Some(&b) = operands.get(2) {
        inputs.push(cx.stored(b)?);
    }
    let integer = cx.fresh_value(if relu.is_some() { "linear" } else { "" });
    cx.node("QLinearConv", inputs, vec![integer.clone()], attributes);
    finish(cx, integer, relu)
}

/// `dense`: `QGemm` with the bias, `QLinearMatMul` of the transposed
/// constant weight without one (`QGemm` for a computed weight); a
/// non-matrix input is reshaped to a matrix and back around it.
fn dense(cx: &mut OpCx<'_, '_>) -> Result<Written, String> {
    let operands = cx.operands();
    let (x, w) = (operands[0], operands[1]);
    let y = cx.result();
    if !weighted_types_run(cx, x, w, y) {
        return Ok(Written::No);
    }
    let relu = relu_after(cx)?;
    let (x_shape, y_shape) = (cx.shape(x)?, cx.shape(y)?);
    let x_inputs = with_params(cx, x)?;
    let p_y = cx.params(y)?;
    let transposed = match (operands.get(2), cx.constant_data(w)) {
        (None, Some(data)) => Some(transposed_weight(cx, w, data)?),
        _ => None,
    };
    let w_inputs = match &transposed {
        Some(wt) => {
            let p = cx.params(w)?;
            vec![wt.clone(), p.scale, p.zero_point]
        }
        None => with_params(cx, w)?,
    };
    let bias = match operands.get(2) {
        Some(&b) => Some(cx.stored(b)?),
        None => None,
    };
    let integer = cx.fresh_value(if relu.is_some() { "linear" } else { "" });
    let x_name = x_inputs[0].clone();
    super::fp::gemm_reshaped(
        cx,
        &x_shape,
        &y_shape,
        |cx, x2, out| {
            let mut inputs = vec![x2, x_inputs[1].clone(), x_inputs[2].clone()];
            inputs.extend(w_inputs);
            if transposed.is_some() {
                inputs.extend([p_y.scale, p_y.zero_point]);
                cx.node("QLinearMatMul", inputs, vec![out], Vec::new());
            } else {
                inputs.push(bias.unwrap_or_default());
                inputs.extend([p_y.scale, p_y.zero_point]);
                cx.node_in(MICROSOFT_DOMAIN, "QGemm", inputs, vec![out], vec![("transB", AttrValue::Int(1))]);
            }
            Ok(())
        },
        &x_name,
        &integer,
    )?;
    finish(cx, integer, relu)
}

/// The K×N transpose of the N×K constant weight `w` as an initializer of its
/// storage type (per-output-channel parameters become per column, which is
/// how `QLinearMatMul` reads a 1-D `b_scale`).
fn transposed_weight(
    cx: &mut OpCx<'_, '_>,
    w: ValueId,
    data: &qopt_ir_core::DenseElements,
) -> Result<String, String> {
    let shape = cx.shape(w)?;
    let [n, k] = shape[..] else { return Err(format!("the weight has shape {shape:?}, not N×K")) };
    let values = dense_values_i128(cx.ctx(), data).ok_or("the weight does not hold integers")?;
    let (n, k) = (n as usize, k as usize);
    let transposed: Vec<i64> = (0..k * n).map(|i| values[(i % n) * k + i / n] as i64).collect();
    let q = cx.quant_of(w)?;
    let data_type = super::types::storage_data_type(q)?;
    let raw = super::types::encode_ints(&transposed, data_type)?;
    Ok(cx.initializer("weight_transposed", vec![k as i64, n as i64], data_type, raw))
}

fn binary(cx: &mut OpCx<'_, '_>, op_type: &'static str) -> Result<Written, String> {
    let (a, b, y) = (cx.operand(0)?, cx.operand(1)?, cx.result());
    if !one_8bit_type(cx, &[a, b, y]) {
        return Ok(Written::No);
    }
    let mut inputs = with_params(cx, a)?;
    inputs.extend(with_params(cx, b)?);
    let p = cx.params(y)?;
    inputs.extend([p.scale, p.zero_point]);
    let output = cx.fresh_value("");
    cx.node_in(MICROSOFT_DOMAIN, op_type, inputs, vec![output.clone()], Vec::new());
    cx.bind(y, output);
    Ok(Written::Yes)
}

fn concat(cx: &mut OpCx<'_, '_>) -> Result<Written, String> {
    let mut values = cx.operands();
    let y = cx.result();
    values.push(y);
    if !one_8bit_type(cx, &values) {
        return Ok(Written::No);
    }
    values.pop();
    let axis = qopt_dialect_fp::attrs::opt_int_in(cx.ctx(), cx.attrs(), "axis")?.ok_or("no 'axis'")?;
    let p = cx.params(y)?;
    let mut inputs = vec![p.scale, p.zero_point];
    for v in values {
        inputs.extend(with_params(cx, v)?);
    }
    let output = cx.fresh_value("");
    cx.node_in(
        MICROSOFT_DOMAIN,
        "QLinearConcat",
        inputs,
        vec![output.clone()],
        vec![("axis", AttrValue::Int(axis))],
    );
    cx.bind(y, output);
    Ok(Written::Yes)
}

/// The `QLinear…Pool` inputs `[x, x_scale, x_zp, y_scale, y_zp]`, or `None`
/// when the types are not 8-bit.
fn pool_inputs(cx: &mut OpCx<'_, '_>) -> Result<Option<Vec<String>>, String> {
    let (x, y) = (cx.operand(0)?, cx.result());
    if !one_8bit_type(cx, &[x, y]) {
        return Ok(None);
    }
    let mut inputs = with_params(cx, x)?;
    let p = cx.params(y)?;
    inputs.extend([p.scale, p.zero_point]);
    Ok(Some(inputs))
}

fn avg_pool(cx: &mut OpCx<'_, '_>) -> Result<Written, String> {
    let Some(inputs) = pool_inputs(cx)? else { return Ok(Written::No) };
    let mut attributes = super::fp::avg_pool_attributes(cx)?;
    attributes.push(("channels_last", AttrValue::Int(0)));
    let y = cx.result();
    let output = cx.fresh_value("");
    cx.node_in(MICROSOFT_DOMAIN, "QLinearAveragePool", inputs, vec![output.clone()], attributes);
    cx.bind(y, output);
    Ok(Written::Yes)
}

fn global_avg_pool(cx: &mut OpCx<'_, '_>) -> Result<Written, String> {
    let Some(inputs) = pool_inputs(cx)? else { return Ok(Written::No) };
    let y = cx.result();
    let output = cx.fresh_value("");
    let attributes = vec![("channels_last", AttrValue::Int(0))];
    cx.node_in(MICROSOFT_DOMAIN, "QLinearGlobalAveragePool", inputs, vec![output.clone()], attributes);
    cx.bind(y, output);
    Ok(Written::Yes)
}
