//! QDQ: `QuantizeLinear` → `qnn.quantize`, `DequantizeLinear` →
//! `qnn.dequantize`, with `!qnn.uniform` types built from the constant
//! scale and zero point: per tensor (one scale; `axis` is ignored, as ONNX
//! says) or per axis (`axis`, default 1, one scale per index), storage from the zero point's type
//! (int4, uint4, int8, uint8, int16, uint16, int32; uint8 without a zero
//! point, as ONNX), expressed type from the scale's.
//!
//! A `DequantizeLinear` of a constant (quantized weights, int32 biases)
//! makes a quantized `fp.constant` holding the stored integers; of a
//! computed value, that value must already carry the same quantized type
//! (the output of the matching `QuantizeLinear`). Blocked quantization
//! (`block_size`, opset 21) is not supported. The INT32 bias of a conv or
//! dense gets the exact scales `s_x ⊗₆₄ s_w[c]` its f32 scales round
//! ([`exact_bias_scales`]), so that `fuse` makes the integer op of the QDQ
//! pattern.
//!
//! Opset 23 added `QuantizeLinear`'s `precision` (the type the division
//! `x / y_scale` runs in, by default the scale's) and `DequantizeLinear`'s
//! `output_dtype` (by default the scale's type). `qnn.quantize` divides in f32
//! and `qnn.dequantize` produces the scale's type, so other values are errors.

use super::ConvertFn;
use crate::import::NodeCx;
use crate::onnx::data_type as dt;
use crate::tensor::{float_kind, TensorData};
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_ir_core::{
    type_to_string, Attribute, Context, IntType, QuantParams, QuantType, Signedness, Type, TypeData, ValueId,
};

/// The ONNX op types this family converts, with their converters.
pub(crate) const CONVERTERS: &[(&str, ConvertFn)] =
    &[("DequantizeLinear", dequantize_linear), ("QuantizeLinear", quantize_linear)];

/// The storage type of quantized values of ONNX type `data_type`.
pub(super) fn storage(data_type: i32) -> Result<IntType, String> {
    let (width, signedness) = match data_type {
        dt::INT4 => (4, Signedness::Signless),
        dt::UINT4 => (4, Signedness::Unsigned),
        dt::INT8 => (8, Signedness::Signless),
        dt::UINT8 => (8, Signedness::Unsigned),
        dt::INT16 => (16, Signedness::Signless),
        dt::UINT16 => (16, Signedness::Unsigned),
        dt::INT32 => (32, Signedness::Signless),
        other => return Err(format!("quantized type {} is not supported", dt::name(other))),
    };
    Ok(IntType { width, signedness })
}

/// The quantized element type of a Q or DQ node over a tensor of `shape`:
/// scale is input #1, zero point input #2; `default_storage` applies when
/// there is no zero point.
fn quant_type(cx: &NodeCx<'_, '_>, shape: &[i64], default_storage: IntType) -> Result<QuantType, String> {
    let attrs = cx.attrs();
    if attrs.int("block_size", 0)? != 0 {
        return Err("blocked quantization (block_size) is not supported".into());
    }
    // Read for per-tensor parameters too, where ONNX ignores it ("used only for
    // per-axis and blocked quantization"): exporters write it (the default 1,
    // or the channel axis) on per-tensor nodes as well.
    let axis = attrs.int("axis", 1)?;
    let scale = cx.const_input(1)?.ok_or("input #1 (scale) is missing")?;
    let zero_point = cx.const_input(2)?;
    quant_type_from(&scale, zero_point.as_ref(), shape, axis, default_storage)
}

/// The quantized element type that constant `scale` and `zero_point` give a
/// tensor of `shape`: per tensor for one scale, else per axis along `axis`;
/// storage from the zero point's type, `default_storage` without one.
pub(super) fn quant_type_from(
    scale: &TensorData,
    zero_point: Option<&TensorData>,
    shape: &[i64],
    axis: i64,
    default_storage: IntType,
) -> Result<QuantType, String> {
    let expressed = float_kind(scale.data_type).ok_or_else(|| {
        format!("scale '{}' must be a float tensor, not {}", scale.name, dt::name(scale.data_type))
    })?;
    let scales = scale.floats()?;
    let (storage, zero_points) = match zero_point {
        Some(zp) => (storage(zp.data_type)?, zp.ints()?),
        None => (default_storage, vec![0; scales.len()]),
    };
    if zero_points.len() != scales.len() {
        return Err(format!("{} scales but {} zero points", scales.len(), zero_points.len()));
    }
    let params = match (&scales[..], &zero_points[..]) {
        ([scale], [zero_point]) => QuantParams::PerTensor { scale: *scale, zero_point: *zero_point },
        _ => {
            if scale.dims.len() != 1 {
                return Err(format!(
                    "scale '{}' must be a scalar or 1-D, has dims {:?}",
                    scale.name, scale.dims
                ));
            }
            let axis = super::normalize_axis(axis, shape.len())?;
            if shape[axis] != scales.len() as i64 {
                return Err(format!(
                    "{} scales along axis {axis}, which has size {}",
                    scales.len(),
                    shape[axis]
                ));
            }
            QuantParams::PerAxis {
                axis: axis as u32,
                scales: scales.into_boxed_slice(),
                zero_points: zero_points.into_boxed_slice(),
            }
        }
    };
    let storage_min = i64::try_from(storage.min_value()).unwrap_or(i64::MIN);
    let storage_max = i64::try_from(storage.max_value()).unwrap_or(i64::MAX);
    let q = QuantType { storage, storage_min, storage_max, expressed, params };
    qopt_dialect_qnn::quant_params::check_quant_type(&q)?;
    Ok(q)
}

pub(super) fn quantized_tensor(ctx: &mut Context, shape: &[i64], q: QuantType) -> Type {
    let elem = ctx.quant_type(q);
    ctx.tensor_type(shape, elem)
}

/// The data type of the constant scale (input #1).
fn scale_data_type(cx: &NodeCx<'_, '_>) -> Result<i32, String> {
    Ok(cx.const_input(1)?.ok_or("input #1 (scale) is missing")?.data_type)
}

/// `QuantizeLinear`'s `precision` (opset 23): the division must run in f32,
/// as `qnn.quantize`'s does (`docs/quant-semantics.md` §3.1). Before opset 23
/// ONNX does not say, and the division is f32.
fn check_precision(cx: &NodeCx<'_, '_>) -> Result<(), String> {
    if cx.opset() < 23 {
        return Ok(());
    }
    let scale = scale_data_type(cx)?;
    let (precision, from) = match cx.attrs().int("precision", 0)? {
        0 => (scale, "the scale's type, the default of 'precision'"),
        p => (i32::try_from(p).unwrap_or(0), "'precision'"),
    };
    if precision != dt::FLOAT {
        return Err(format!(
            "the division x / y_scale runs in {} ({from}); only FLOAT is supported (qnn.quantize divides in f32)",
            dt::name(precision)
        ));
    }
    Ok(())
}

pub(super) fn quantize_linear(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    // Saturation choices concern float8 outputs only; integers always saturate.
    cx.attrs().int("saturate", 1)?;
    check_precision(cx)?;
    let x = cx.input(0)?;
    let shape = cx.shape(x)?;
    let default = match cx.attrs().opt_int("output_dtype")? {
        Some(t) if t != 0 => storage(t as i32)?,
        _ => storage(dt::UINT8)?,
    };
    let q = quant_type(cx, &shape, default)?;
    let ty = quantized_tensor(cx.ctx(), &shape, q);
    let y = cx.emit_typed(qnn_op::QUANTIZE, &[x], ty)?;
    cx.set_output(0, y)
}

pub(super) fn dequantize_linear(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    // Opset 23: `output_dtype` may only restate the scale's type, the type
    // qnn.dequantize produces.
    let output_dtype = cx.attrs().int("output_dtype", 0)?;
    if output_dtype != 0 {
        let scale = scale_data_type(cx)?;
        if output_dtype != i64::from(scale) {
            return Err(format!(
                "output_dtype {} differs from the scale's type {}; the output has the scale's type",
                dt::name(i32::try_from(output_dtype).unwrap_or(0)),
                dt::name(scale)
            ));
        }
    }
    let q = if cx.is_const_input(0) {
        let data = cx.const_input(0)?.ok_or("input #0 is missing")?;
        let q = quant_type(cx, &data.dims, storage(data.data_type)?)?;
        let zp_type = cx.const_input(2)?.map(|zp| zp.data_type);
        if zp_type.is_some_and(|t| t != data.data_type) {
            return Err(format!(
                "the zero point's type differs from the quantized tensor's {}",
                dt::name(data.data_type)
            ));
        }
        let elem = cx.ctx().quant_type(q);
        cx.constant(&data, elem)?
    } else {
        let x = cx.input(0)?;
        let shape = cx.shape(x)?;
        let ty = cx.value_type(x);
        let elem = cx.element(x);
        let TypeData::Quant(actual) = cx.ctx().type_data(elem).clone() else {
            return Err(format!(
                "input #0 has type {}; it must be a constant or the output of a QuantizeLinear",
                type_to_string(cx.ctx(), ty)
            ));
        };
        let expected = quant_type(cx, &shape, actual.storage)?;
        if expected != actual {
            let expected = quantized_tensor(cx.ctx(), &shape, expected);
            return Err(format!(
                "input #0 has type {} but this node's scale and zero point describe {}",
                type_to_string(cx.ctx(), ty),
                type_to_string(cx.ctx(), expected)
            ));
        }
        x
    };
    let y = cx.emit(qnn_op::DEQUANTIZE, &[q], Attribute::EMPTY_DICT)?;
    cx.set_output(0, y)
}

/// Gives the INT32 bias of a QDQ conv or dense its exact scales.
///
/// ONNX stores scales as f32, so the bias `DequantizeLinear` of a QDQ model
/// carries `f32(s_x · s_w[c])`, while the integer op the pattern stands for
/// has its bias in units of the exact product `s_x ⊗₆₄ s_w[c]`
/// (`docs/quant-semantics.md` §6.1), which `fuse` requires. When `b` is
/// `qnn.dequantize` of an i32 constant with zero points 0 whose every scale is
/// that product rounded to f32 (as ONNX Runtime's quantizer and qexport write
/// it), and `x` and `w` are dequantized with per-tensor and per-tensor or
/// per-axis-0 types, the constant gets the exact products. The dequantized
/// bias does not change: dequantize reads `f32(scale)`, which is the same.
pub(super) fn exact_bias_scales(
    cx: &mut NodeCx<'_, '_>,
    x: ValueId,
    w: ValueId,
    b: ValueId,
) -> Result<(), String> {
    let Some(bias) = cx.dequantized_constant(b) else { return Ok(()) };
    let (Some(xq), Some(wq)) = (cx.dequantized_value(x), cx.dequantized_value(w)) else { return Ok(()) };
    let ctx = cx.ctx_ref();
    let quant = |v: ValueId| qopt_dialect_qnn::quant_params::quant_element(ctx, cx.value_type(v)).cloned();
    let (Some(qb), Some(qx), Some(qw)) = (quant(bias), quant(xq), quant(wq)) else { return Ok(()) };
    let Some(s_x) = qopt_dialect_qnn::quant_params::per_tensor(&qx).map(|p| p.scale) else { return Ok(()) };
    if qb.storage.width != 32 || qopt_dialect_qnn::quant_params::params(&qb).iter().any(|p| p.zero_point != 0)
    {
        return Ok(());
    }
    let weight_scales: Vec<f64> =
        qopt_dialect_qnn::quant_params::params(&qw).iter().map(|p| p.scale).collect();
    let exact: Vec<f64> = match (&qb.params, &qw.params) {
        (QuantParams::PerTensor { .. }, QuantParams::PerTensor { .. }) => vec![s_x * weight_scales[0]],
        (QuantParams::PerAxis { axis: 0, scales, .. }, QuantParams::PerAxis { axis: 0, .. })
            if scales.len() == weight_scales.len() =>
        {
            weight_scales.iter().map(|&s_w| s_x * s_w).collect()
        }
        _ => return Ok(()),
    };
    let stored = qopt_dialect_qnn::quant_params::params(&qb);
    let rounded_is_stored = exact.iter().zip(&stored).all(|(&e, p)| f64::from(e as f32) == p.scale);
    let already_exact = exact.iter().zip(&stored).all(|(&e, p)| e == p.scale);
    if !rounded_is_stored || already_exact {
        return Ok(());
    }
    let params = match qb.params {
        QuantParams::PerTensor { .. } => QuantParams::PerTensor { scale: exact[0], zero_point: 0 },
        QuantParams::PerAxis { axis, .. } => QuantParams::PerAxis {
            axis,
            scales: exact.into_boxed_slice(),
            zero_points: vec![0; stored.len()].into_boxed_slice(),
        },
    };
    let q = QuantType { params, ..qb };
    if qopt_dialect_qnn::quant_params::check_quant_type(&q).is_err() {
        return Ok(());
    }
    let shape = cx.shape(bias)?;
    let ty = quantized_tensor(cx.ctx(), &shape, q);
    cx.retype_constant(bias, ty)
}
