//! Types on the way to ONNX: which IR types ONNX can hold and how, the
//! checks that make an export exact, and the byte encodings of initializers.
//!
//! A quantized type is exported as its storage integer type with its scale
//! and zero point as initializers. It must be:
//! - of f32 expressed type (the only one whose quantize ONNX computes as
//!   qopt does, dividing in f32);
//! - stored in 4, 8 or 16 bits (ONNX's INT4/UINT4, INT8/UINT8,
//!   INT16/UINT16; the 4- and 16-bit ones from opset 21), or in i32 for
//!   constants, which only `DequantizeLinear` reads (biases);
//! - of f32 scales, as ONNX stores them: the integer ops' multipliers are
//!   computed from the exact scale, so rounding one would change results
//!   (i32 constants excepted: dequantize reads `f32(scale)` anyway);
//! - of the storage type's full range where an op computes the value:
//!   ONNX saturates to the full range, so a narrowed range (`i8<-127:127>`)
//!   is only exact where nothing saturates to it: constants, and the values
//!   that data movement, relu, lookup tables and identities produce from
//!   values already in range.

use crate::onnx::data_type as dt;
use qopt_dialect_fp::op_names as fp_op;
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_dialect_qnn::quant_params::{
    accumulator_overflow, add_operand_dropped, quant_element, AccumulatorOverflow, AddOperandDropped,
};
use qopt_ir_core::{
    type_to_string, AttrData, BlockId, Context, DenseElements, FloatKind, IntType, Module, OpId, QuantParams,
    QuantType, Signedness, Type, TypeData, ValueId, DYNAMIC,
};
use std::sync::Arc;

/// How an op's result comes about, for the narrowed-range rule.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Role {
    /// An `fp.constant`: its stored values are the data.
    Constant,
    /// Moved, selected or looked up from values of the same type (in range).
    InRange,
    /// Computed and saturated to the type's range.
    Computed,
}

/// The ops whose quantized results hold only values of their operands (or,
/// for `qnn.lookup`, table entries the verifier keeps in range).
const IN_RANGE_OPS: &[&str] = &[qnn_op::OBSERVE, qnn_op::CAST_HINT, qnn_op::STOP_FUSION, qnn_op::LOOKUP];

fn role(ctx: &Context, module: &Module, op: OpId) -> Role {
    let name = ctx.op_name_str(module.op_name(op));
    if name == fp_op::CONSTANT {
        Role::Constant
    } else if IN_RANGE_OPS.contains(&name) || qopt_dialect_fp::is_quant_agnostic(ctx, module, op) {
        Role::InRange
    } else {
        Role::Computed
    }
}

/// Every reason `op` or its results cannot be exported as they are.
pub(super) fn check_op(ctx: &Context, module: &Module, op: OpId) -> Vec<String> {
    let mut problems = Vec::new();
    if let Some(rounding) = module.op_attr(ctx, op, qopt_dialect_qnn::Rounding::ATTR) {
        let mode = ctx.attr_as_str(rounding).unwrap_or("");
        if mode != qopt_dialect_qnn::Rounding::default().name() {
            problems.push(format!(
                "rounding = \"{mode}\" cannot be written: ONNX has no rounding attribute, ONNX Runtime rounds \
                 these ops in f32 half to even whatever it says, and qimport reads them back with qopt's default \
                 half_away_from_zero"
            ));
        }
    }
    problems.extend(check_arithmetic(ctx, module, op));
    let role = role(ctx, module, op);
    let results = module.num_results(op);
    for (i, v) in module.results(op).enumerate() {
        if let Err(e) = check_type(ctx, module.value_type(v), role) {
            problems.push(if results == 1 { format!("result: {e}") } else { format!("result #{i}: {e}") });
        }
    }
    problems
}

/// Where qopt's integer arithmetic leaves the real-number sum that ONNX
/// computes: a conv or dense whose i32 accumulator can wrap (qopt wraps it,
/// `quant-semantics.md` §6; ONNX's DQ → float op → Q form, and the QLinear
/// kernels as ONNX defines them, do not), with `quant-lint`'s own bound
/// ([`accumulator_overflow`]); and a `qnn.add` whose finer operand's
/// multiplier rounds to 0 (scales more than 2^31 apart, §7.1), which qopt
/// drops and ONNX adds.
fn check_arithmetic(ctx: &Context, module: &Module, op: OpId) -> Vec<String> {
    let name = ctx.op_name_str(module.op_name(op));
    let operand = |i| (i < module.num_operands(op)).then(|| module.operand(op, i));
    let mut problems = Vec::new();
    let weight_axis = match name {
        qnn_op::CONV2D | qnn_op::CONV2D_RELU | qnn_op::DENSE | qnn_op::DENSE_RELU => Some(0),
        qnn_op::CONV_TRANSPOSE2D | qnn_op::CONV_TRANSPOSE2D_RELU => Some(1),
        _ => None,
    };
    if let Some(weight_axis) = weight_axis {
        if let (Some(x), Some(w)) = (operand(0), operand(1)) {
            if let Some(AccumulatorOverflow { channel, bound, limit }) =
                accumulator_overflow(ctx, module, x, (w, weight_axis), operand(2), 32)
            {
                problems.push(format!(
                    "the i32 accumulator can wrap: output channel {channel} reaches |acc| ≤ {bound} (limit \
                     {limit}); qopt wraps it and ONNX computes the unwrapped sum, so the file would compute \
                     another model (quant-lint reports it too): use narrower activations or weights, or a \
                     smaller bias"
                ));
            }
        }
    }
    if matches!(name, qnn_op::ADD | qnn_op::SUB) && module.num_results(op) == 1 {
        let q = |v: Option<ValueId>| v.and_then(|v| quant_element(ctx, module.value_type(v)));
        if let (Some(a), Some(b), Some(out)) = (q(operand(0)), q(operand(1)), q(Some(module.result(op, 0)))) {
            if let Some(AddOperandDropped { operand, scale, other_scale }) = add_operand_dropped(a, b, out) {
                problems.push(format!(
                    "operand #{operand} (scale {scale:e}) contributes nothing: the other's scale {other_scale:e} \
                     is more than 2^31 times larger, so its multiplier rounds to 0 in qopt's shared-shift sum \
                     (quant-semantics.md §7.1) while ONNX adds it: give the operands scales within 2^31 of \
                     each other"
                ));
            }
        }
    }
    problems
}

/// Why `ty` cannot be the type of an exported value in role `role`, if it cannot.
fn check_type(ctx: &Context, ty: Type, role: Role) -> Result<(), String> {
    let shape = ctx
        .tensor_shape(ty)
        .ok_or_else(|| format!("{} is not a tensor; ONNX values are tensors", short(ctx, ty)))?;
    if shape.iter().any(|&d| d == DYNAMIC || d < 0) {
        return Err(format!("{} has a dynamic shape; the export needs static shapes", short(ctx, ty)));
    }
    let elem = ctx.element_type(ty);
    match ctx.type_data(elem) {
        TypeData::Quant(q) => check_quant(ctx, elem, q, role),
        _ => scalar_data_type(ctx, elem).map(|_| ()),
    }
}

fn check_quant(ctx: &Context, elem: Type, q: &QuantType, role: Role) -> Result<(), String> {
    let text = short(ctx, elem);
    let mut reasons = Vec::new();
    if q.expressed != FloatKind::F32 {
        reasons.push(format!(
            "its expressed type is {}; only f32 quantized types are exported (ONNX quantizes other scale types \
             in their own precision)",
            q.expressed.keyword()
        ));
    }
    let IntType { width, signedness } = q.storage;
    let bias_like = role == Role::Constant && width == 32 && signedness != Signedness::Unsigned;
    if !matches!(width, 4 | 8 | 16) && !bias_like {
        reasons.push(format!(
            "{}{width} storage has no ONNX quantized type (INT4/UINT4, INT8/UINT8, INT16/UINT16, and INT32 for \
             constants)",
            if signedness == Signedness::Unsigned { 'u' } else { 'i' }
        ));
    }
    if q.is_narrowed() && role == Role::Computed {
        reasons.push(format!(
            "its storage range [{}, {}] is narrower than the type's; ONNX saturates to the full range [{}, {}], \
             which differs whenever a value falls outside (only constants and moved values may be narrowed)",
            q.storage_min,
            q.storage_max,
            q.storage.min_value(),
            q.storage.max_value()
        ));
    }
    if !bias_like {
        let scales: Vec<f64> = match &q.params {
            QuantParams::PerTensor { scale, .. } => vec![*scale],
            QuantParams::PerAxis { scales, .. } => scales.to_vec(),
        };
        if let Some(s) = scales.iter().find(|&&s| f64::from(s as f32) != s) {
            reasons.push(format!(
                "scale {s} is not an f32 value; ONNX stores scales as float, and the integer ops' multipliers \
                 read the exact scale"
            ));
        }
    }
    if reasons.is_empty() {
        Ok(())
    } else {
        Err(format!("{text}: {}", reasons.join("; ")))
    }
}

/// Why `QuantizeLinear` to quantized element type `elem` (a `fake_quant`'s
/// `type`, which no value carries) would not be exact, if it would not.
pub(super) fn check_quantize_target(ctx: &Context, elem: Type) -> Result<(), String> {
    match ctx.type_data(elem) {
        TypeData::Quant(q) => check_quant(ctx, elem, q, Role::Computed),
        _ => Err(format!("{} is not a quantized type", short(ctx, elem))),
    }
}

/// The ONNX element type of a non-quantized IR element type: the importer's
/// mapping (`tensor::onnx_data_type`), without the 4-bit integers, which
/// only quantized types (with their opset 21 check) export.
fn scalar_data_type(ctx: &Context, elem: Type) -> Result<i32, String> {
    match crate::tensor::onnx_data_type(ctx, elem) {
        Some(t) if t != dt::INT4 && t != dt::UINT4 => Ok(t),
        _ => Err(format!("element type {} has no ONNX type", short(ctx, elem))),
    }
}

/// The ONNX type of a quantized type's stored integers.
pub(super) fn storage_data_type(q: &QuantType) -> Result<i32, String> {
    let unsigned = q.storage.signedness == Signedness::Unsigned;
    Ok(match (q.storage.width, unsigned) {
        (4, false) => dt::INT4,
        (4, true) => dt::UINT4,
        (8, false) => dt::INT8,
        (8, true) => dt::UINT8,
        (16, false) => dt::INT16,
        (16, true) => dt::UINT16,
        (32, false) => dt::INT32,
        (w, _) => return Err(format!("{}{w} storage has no ONNX type", if unsigned { 'u' } else { 'i' })),
    })
}

/// The ONNX element type and dims of a static tensor type (quantized
/// elements as their storage type).
pub(super) fn onnx_tensor(ctx: &Context, ty: Type) -> Result<(i32, Vec<i64>), String> {
    let shape = ctx
        .tensor_shape(ty)
        .ok_or_else(|| format!("{} is not a tensor; ONNX values are tensors", short(ctx, ty)))?;
    if shape.iter().any(|&d| d == DYNAMIC || d < 0) {
        return Err(format!("{} has a dynamic shape; the export needs static shapes", short(ctx, ty)));
    }
    let elem = ctx.element_type(ty);
    let data_type = match ctx.type_data(elem) {
        TypeData::Quant(q) => storage_data_type(q)?,
        _ => scalar_data_type(ctx, elem)?,
    };
    Ok((data_type, shape.to_vec()))
}

/// Like [`onnx_tensor`] for a graph input or output, which cannot be
/// quantized: ONNX graph values carry no quantization parameters.
pub(super) fn graph_value(ctx: &Context, ty: Type) -> Result<(i32, Vec<i64>), String> {
    if let TypeData::Quant(_) = ctx.type_data(ctx.element_type(ty)) {
        return Err(format!(
            "{} is quantized, and ONNX graph inputs and outputs carry no quantization parameters; dequantize \
             it in the function (or quantize its float input there)",
            short(ctx, ty)
        ));
    }
    onnx_tensor(ctx, ty)
}

/// The `raw_data` of a dense constant as ONNX type `data_type`: the
/// elements as stored (a splat repeated), 4-bit ones two to a byte.
pub(super) fn initializer_bytes(
    ctx: &Context,
    dense: &DenseElements,
    data_type: i32,
) -> Result<Arc<[u8]>, String> {
    let count = qopt_ir_core::static_num_elements(ctx, dense.ty).ok_or("a constant needs a static shape")?;
    let count = usize::try_from(count).map_err(|_| "the constant is too large")?;
    let expanded: Arc<[u8]> = if dense.splat {
        let mut bytes = Vec::with_capacity(dense.bytes.len().saturating_mul(count));
        for _ in 0..count {
            bytes.extend_from_slice(&dense.bytes);
        }
        bytes.into()
    } else {
        dense.bytes.clone()
    };
    if super::graph::is_4bit(data_type) {
        return Ok(super::graph::pack_4bit(&expanded).into());
    }
    Ok(expanded)
}

/// The parameters of a quantized type as ONNX's Q/DQ inputs take them.
pub(super) struct ParamTensors {
    /// The scales, as f32.
    pub scales: Vec<f32>,
    pub zero_points: Vec<i64>,
    /// The quantized axis of a per-axis type.
    pub axis: Option<u32>,
}

/// A quantized type's scales (as f32), zero points and axis.
pub(super) fn param_tensors(q: &QuantType) -> ParamTensors {
    match &q.params {
        QuantParams::PerTensor { scale, zero_point } => {
            ParamTensors { scales: vec![*scale as f32], zero_points: vec![*zero_point], axis: None }
        }
        QuantParams::PerAxis { axis, scales, zero_points } => ParamTensors {
            scales: scales.iter().map(|&s| s as f32).collect(),
            zero_points: zero_points.to_vec(),
            axis: Some(*axis),
        },
    }
}

/// Integers as ONNX type `data_type`'s little-endian elements (4-bit ones packed).
pub(super) fn encode_ints(values: &[i64], data_type: i32) -> Result<Vec<u8>, String> {
    if super::graph::is_4bit(data_type) {
        let nibbles: Vec<u8> = values.iter().map(|&v| v as u8).collect();
        return Ok(super::graph::pack_4bit(&nibbles));
    }
    let width = super::graph::element_bytes(data_type)
        .ok_or_else(|| format!("cannot encode integers as {}", dt::name(data_type)))?;
    Ok(values.iter().flat_map(|v| v.to_le_bytes()[..width].to_vec()).collect())
}

/// One float as ONNX float type `data_type`'s bytes (rounded to nearest even).
pub(super) fn encode_float(value: f64, data_type: i32) -> Result<Vec<u8>, String> {
    let kind = match data_type {
        dt::FLOAT => FloatKind::F32,
        dt::DOUBLE => FloatKind::F64,
        dt::FLOAT16 => FloatKind::F16,
        dt::BFLOAT16 => FloatKind::BF16,
        other => return Err(format!("{} is not a float type", dt::name(other))),
    };
    let bits = qopt_ir_core::f64_to_bits(value, kind);
    Ok(bits.to_le_bytes()[..kind.bits() as usize / 8].to_vec())
}

/// The opsets the function's contents need beyond 17: `(op, opset, what)`.
pub(super) fn required_opset(ctx: &Context, module: &Module, block: BlockId) -> Vec<(OpId, i64, String)> {
    let mut needs = Vec::new();
    for op in module.block_ops(block) {
        let name = ctx.op_name_str(module.op_name(op));
        if name == fp_op::GELU {
            needs.push((op, 20, "Gelu".to_string()));
        }
        if name == fp_op::SPACE_TO_DEPTH
            && module.op_attr(ctx, op, "mode").and_then(|a| ctx.attr_as_str(a)).is_some_and(|m| m != "DCR")
        {
            needs.push((op, 28, "SpaceToDepth's mode CRD".to_string()));
        }
        // A quantized type is written where a result has it and where an
        // attribute names it (`qnn.fake_quant {type = ...}` on float values).
        let attr_types = module.op_attrs(op);
        let attr_types = match ctx.attr_data(attr_types) {
            AttrData::Dict(entries) => entries
                .iter()
                .filter_map(|&(_, a)| match ctx.attr_data(a) {
                    AttrData::Type(t) => Some(*t),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        let types = module.results(op).map(|v| module.value_type(v)).chain(attr_types);
        for ty in types {
            if let Some(q) = qopt_dialect_qnn::quant_params::quant_element(ctx, ty) {
                if matches!(q.storage.width, 4 | 16) {
                    let what = format!("{}-bit quantization", q.storage.width);
                    needs.push((op, 21, what));
                    break;
                }
            }
        }
    }
    needs
}

/// `ty` as `.qir` spells it, cut after 80 characters (per-axis types list
/// every scale).
pub(super) fn short(ctx: &Context, ty: Type) -> String {
    let text = type_to_string(ctx, ty);
    match text.char_indices().nth(80) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// True if `v` is exactly an f32 value.
pub(super) fn is_f32(v: f64) -> bool {
    f64::from(v as f32) == v || v.is_nan()
}
