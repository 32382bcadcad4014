//! QDQ: `QuantizeLinear` → `qnn.quantize`, `DequantizeLinear` →
//! `qnn.dequantize`, with `!qnn.uniform` types built from the constant
//! scale and zero point: per tensor (one scale; `axis` is ignored, as ONNX
//! says) or per axis (`axis`, default 1, one scale per index), storage from the zero point's type
//! (int8, uint8, int16, uint16, int32; uint8 without a zero point, as
//! ONNX), expressed type from the scale's.
//!
//! A `DequantizeLinear` of a constant (quantized weights, int32 biases)
//! makes a quantized `fp.constant` holding the stored integers; of a
//! computed value, that value must already carry the same quantized type
//! (the output of the matching `QuantizeLinear`). Blocked quantization
//! (`block_size`, opset 21) is not supported.
//!
//! Opset 23 added `QuantizeLinear`'s `precision` (the type the division
//! `x / y_scale` runs in, by default the scale's) and `DequantizeLinear`'s
//! `output_dtype` (by default the scale's type). `qnn.quantize` divides in f32
//! and `qnn.dequantize` produces the scale's type, so other values are errors.

use super::ConvertFn;
use crate::import::NodeCx;
use crate::onnx::data_type as dt;
use crate::tensor::float_kind;
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_ir_core::{
    type_to_string, Attribute, Context, IntType, QuantParams, QuantType, Signedness, Type, TypeData,
};

/// The ONNX op types this family converts, with their converters.
pub(crate) const CONVERTERS: &[(&str, ConvertFn)] =
    &[("DequantizeLinear", dequantize_linear), ("QuantizeLinear", quantize_linear)];

/// The storage type of quantized values of ONNX type `data_type`.
fn storage(data_type: i32) -> Result<IntType, String> {
    let (width, signedness) = match data_type {
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
    let expressed = float_kind(scale.data_type).ok_or_else(|| {
        format!("scale '{}' must be a float tensor, not {}", scale.name, dt::name(scale.data_type))
    })?;
    let scales = scale.floats()?;
    let (storage, zero_points) = match cx.const_input(2)? {
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

fn quantized_tensor(ctx: &mut Context, shape: &[i64], q: QuantType) -> Type {
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
