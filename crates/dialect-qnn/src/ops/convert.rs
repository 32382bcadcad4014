//! Conversions between float and quantized tensors and between quantization
//! parameters: `qnn.quantize`, `qnn.dequantize`, `qnn.requantize`,
//! `qnn.fake_quant`, and the identity annotations `qnn.cast_hint` and
//! `qnn.stop_fusion`.
//!
//! Their arithmetic is `docs/quant-semantics.md` §3 and §5. Folders apply only
//! the rules §10 proves exact: `requantize` to its own type, and
//! `quantize(dequantize(q))` back to `q`'s type when the round trip is exact;
//! `dequantize(quantize(x))` is lossy and never folds.

use super::{describe, expect_shape, rounding_doc, rounding_in, tensor, ROUNDING_DEFAULT};
use crate::quant_params::{check_axis_fits, check_quant_type, params, quant_element, storage_range};
use qopt_ir_core::interfaces::Annotations;
use qopt_ir_core::{Arity, QuantType};
use qopt_ir_core::{
    AttrData, Attribute, Context, FloatKind, FoldResult, Module, OpDef, OpId, OpView, Traits, Type, TypeData,
};
use smallvec::{smallvec, SmallVec};

qopt_ir_core::op_name_constants! {
    QUANTIZE = "qnn.quantize", DEQUANTIZE = "qnn.dequantize", REQUANTIZE = "qnn.requantize",
    FAKE_QUANT = "qnn.fake_quant", CAST_HINT = "qnn.cast_hint", STOP_FUSION = "qnn.stop_fusion",
}

/// The attributes that record a calibrated range and never change values.
const CALIBRATED_RANGE: Annotations = Annotations(&["calibrated_min", "calibrated_max"]);

pub(crate) fn ops() -> Vec<OpDef> {
    vec![
        OpDef::new(names::QUANTIZE, "float to quantized: divide by the scale, round half to even, add the zero point, saturate")
            .description(
                "`qnn.quantize(x)` maps a float tensor (f32, f16 or bf16) to a quantized tensor of the same \
                 shape: `q = clamp(rne(x ⊘ f32(scale)) + zero_point, storage_min, storage_max)` with an f32 \
                 division (ONNX QuantizeLinear); NaN gives the zero point and ±inf saturate \
                 (`docs/quant-semantics.md` §3.1). The result type is written and carries the parameters, \
                 per tensor or per axis; its expressed type must be the input's element type. Optional \
                 `calibrated_min`, `calibrated_max` (floats, together, min ≤ max) record the range \
                 calibration observed, for `quant-lint`; they never change values.\n\n\
                 ```\n%q = qnn.quantize(%x) : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4x!qnn.uniform<u8:f32, 0.02:128>>\n\
                 %w = qnn.quantize(%wf) : (tensor<2x3xf32>) -> tensor<2x3x!qnn.uniform<i8<-127:127>:f32:0, {0.1:0, 0.25:0}>>\n```",
            )
            .operands(Arity::Exact(1))
            .traits(Traits::PURE | Traits::ELEMENTWISE)
            .verifier(verify_quantize)
            .folder(fold_quantize)
            .interface(CALIBRATED_RANGE),
        OpDef::new(names::DEQUANTIZE, "quantized to float: (q − zero_point) × scale in f32")
            .description(
                "`qnn.dequantize(q)` maps a quantized tensor to a float tensor of its expressed type and the \
                 same shape: `x = f32(q − zero_point) ⊗ f32(scale)`, rounded to f16/bf16 afterwards for those \
                 expressed types (`docs/quant-semantics.md` §3.2). The result type is inferred.\n\n\
                 ```\n%x = qnn.dequantize(%q) : (tensor<4x!qnn.uniform<i8:f32, 0.5:-3>>) -> tensor<4xf32>\n```",
            )
            .operands(Arity::Exact(1))
            .traits(Traits::PURE | Traits::ELEMENTWISE)
            .infer(infer_dequantize),
        OpDef::new(names::REQUANTIZE, "quantized to quantized with other parameters, in integers only")
            .description(concat!(
                "`qnn.requantize(q)` changes quantization parameters with a fixed-point multiplier per input \
                 parameter entry: `clamp(R((q − zp_in) × m, 31 + n) + zp_out, storage_min, storage_max)` with \
                 `M = s_in / s_out ≈ m × 2^(−31−n)` (`docs/quant-semantics.md` §4, §5). The input may be \
                 quantized per tensor or per axis; the written result type is per tensor, with the same shape.\n\n\
                 Attributes: ",
                rounding_doc!(),
                ".\n\nRequantizing to the input's own type folds to the input.\n\n\
                 ```\n%r = qnn.requantize(%q) {rounding = \"half_to_even\"} : (tensor<4x!qnn.uniform<i8:f32, 0.5:2>>) \
                 -> tensor<4x!qnn.uniform<i8:f32, 0.2:10>>\n```"
            ))
            .operands(Arity::Exact(1))
            .traits(Traits::PURE | Traits::ELEMENTWISE)
            .verifier(verify_requantize)
            .folder(fold_requantize)
            .interface(ROUNDING_DEFAULT),
        OpDef::new(names::FAKE_QUANT, "float to float through a quantized type: dequantize(quantize(x))")
            .description(
                "`qnn.fake_quant(x) {type = Q}` simulates quantization in float: element by element, \
                 `dequantize_Q(quantize_Q(x))` in f32 (`docs/quant-semantics.md` §3.4). `type` is a type \
                 attribute holding the quantized element type (not a tensor type); its expressed type must be \
                 `x`'s element type, and a per-axis type's axis must be a dimension of `x` with one parameter \
                 entry per index. The result has `x`'s type. `insert-fakeq` creates these; `expand-fakeq` \
                 turns each into `qnn.quantize` + `qnn.dequantize`. Optional `calibrated_min`, \
                 `calibrated_max` as on `qnn.quantize`.\n\n\
                 ```\n%y = qnn.fake_quant(%x) {type = !qnn.uniform<i8:f32, 0.05:0>} : (tensor<8xf32>) -> tensor<8xf32>\n```",
            )
            .operands(Arity::Exact(1))
            .traits(Traits::PURE | Traits::ELEMENTWISE | Traits::SAME_OPERANDS_AND_RESULT_TYPE)
            .infer(infer_fake_quant)
            .interface(CALIBRATED_RANGE),
        OpDef::new(names::CAST_HINT, "identity that marks the quantized kind a value should get")
            .description(
                "`qnn.cast_hint(x) {kind = \"...\"}` is the identity (TVM's `annotation.cast_hint`): \
                 partitioning and quantization passes read `kind` (a non-empty string) to decide how to \
                 treat the value. Any tensor type; the result has the operand's type. The quantization \
                 passes read these kinds on a float value (docs/quantization.md §13; `quantize-search` \
                 writes them):\n\n\
                 - `\"iN\"` or `\"uN\"`, N from 2 to 16 (`\"i16\"`, `\"i8\"`, `\"i4\"`): quantize the value with \
                 that storage instead of `activation-type`; the layer computing it (conv, dense, matmul, \
                 through its fused relu or clip) gets weights of min(N, 8) bits, so an i16 value comes \
                 from a W8A16 layer (the i32 accumulator bounds 16-bit activations times 8-bit weights; \
                 `quant-lint` checks it per layer). `insert-observers` removes the hint and records it as \
                 `storage` on the value's observer.\n\
                 - `\"float\"`: keep the value float (not observed); the layer computing it keeps float \
                 weights.\n\n\
                 Other kinds (`\"activation\"`, `\"weight\"`, ...) are left to other passes.\n\n\
                 ```\n%h = qnn.cast_hint(%x) {kind = \"i16\"} : (tensor<8xf32>) -> tensor<8xf32>\n```",
            )
            .operands(Arity::Exact(1))
            .traits(
                Traits::PURE | Traits::ELEMENTWISE | Traits::SAME_OPERANDS_AND_RESULT_TYPE | Traits::QUANT_AGNOSTIC,
            )
            .verifier(verify_cast_hint)
            .infer(infer_identity),
        OpDef::new(names::STOP_FUSION, "identity that fusion passes do not fuse across")
            .description(
                "`qnn.stop_fusion(x)` is the identity (TVM's `annotation.stop_fusion`): the `fuse` pass and \
                 backends never merge the producer and the consumers of this value into one kernel. Any tensor \
                 type; the result has the operand's type.\n\n\
                 ```\n%s = qnn.stop_fusion(%q) : (tensor<8x!qnn.uniform<i8:f32, 0.1:0>>) -> tensor<8x!qnn.uniform<i8:f32, 0.1:0>>\n```",
            )
            .operands(Arity::Exact(1))
            .traits(
                Traits::PURE | Traits::ELEMENTWISE | Traits::SAME_OPERANDS_AND_RESULT_TYPE | Traits::QUANT_AGNOSTIC,
            )
            .infer(infer_identity),
    ]
}

fn verify_quantize(v: &OpView<'_>) -> Result<(), String> {
    let ctx = v.ctx;
    let x = tensor(ctx, v.operand_type(0), "input")?;
    let r = tensor(ctx, v.result_type(0), "result")?;
    let kind = x.expressible_float(ctx)?;
    let q = r.quant(ctx)?;
    if q.expressed != kind {
        return Err(format!(
            "result's expressed type {} must be the input's element type {}",
            q.expressed.keyword(),
            kind.keyword()
        ));
    }
    calibrated_range(ctx, v.attrs())?;
    expect_shape("result", r.shape, x.shape, "the input's")
}

/// The optional `calibrated_min` and `calibrated_max` of `qnn.quantize` and
/// `qnn.fake_quant`: finite floats, given together, min ≤ max.
fn calibrated_range(ctx: &Context, attrs: Attribute) -> Result<(), String> {
    let lo = qopt_dialect_fp::attrs::opt_float_in(ctx, attrs, "calibrated_min")?;
    let hi = qopt_dialect_fp::attrs::opt_float_in(ctx, attrs, "calibrated_max")?;
    match (lo, hi) {
        (None, None) => Ok(()),
        (Some(lo), Some(hi)) if lo.is_finite() && hi.is_finite() && lo <= hi => Ok(()),
        (Some(lo), Some(hi)) => {
            Err(format!("'calibrated_min' ({lo}) and 'calibrated_max' ({hi}) must be finite, min ≤ max"))
        }
        _ => Err("'calibrated_min' and 'calibrated_max' come together".to_string()),
    }
}

fn infer_dequantize(
    ctx: &mut Context,
    operands: &[Type],
    _attrs: Attribute,
) -> Result<SmallVec<[Type; 1]>, String> {
    let [operand] = operands else { return Err(format!("expects 1 operand, found {}", operands.len())) };
    let (shape, expressed) = {
        let q = tensor(ctx, *operand, "input")?;
        let quant = q.quant(ctx)?;
        (q.shape.to_vec(), quant.expressed)
    };
    let elem = ctx.float_type(expressed);
    Ok(smallvec![ctx.tensor_type(&shape, elem)])
}

fn verify_requantize(v: &OpView<'_>) -> Result<(), String> {
    let ctx = v.ctx;
    let x = tensor(ctx, v.operand_type(0), "input")?;
    let r = tensor(ctx, v.result_type(0), "result")?;
    x.quant(ctx)?;
    r.per_tensor_quant(ctx)?;
    rounding_in(ctx, v.attrs())?;
    expect_shape("result", r.shape, x.shape, "the input's")
}

/// The `type` attribute of `qnn.fake_quant`: a valid quantized element type.
fn fake_quant_type(ctx: &Context, attrs: Attribute) -> Result<&QuantType, String> {
    let attr =
        ctx.dict_get(attrs, "type").ok_or("needs a 'type' attribute holding a quantized element type")?;
    let bad = || {
        format!(
            "'type' must be a quantized element type like !qnn.uniform<i8:f32, 0.1:0>, got {}",
            describe(ctx, attr)
        )
    };
    let AttrData::Type(ty) = ctx.attr_data(attr) else { return Err(bad()) };
    let TypeData::Quant(q) = ctx.type_data(*ty) else { return Err(bad()) };
    check_quant_type(q).map_err(|e| format!("'type' is invalid: {e}"))?;
    Ok(q)
}

fn infer_fake_quant(
    ctx: &mut Context,
    operands: &[Type],
    attrs: Attribute,
) -> Result<SmallVec<[Type; 1]>, String> {
    let [operand] = operands else { return Err(format!("expects 1 operand, found {}", operands.len())) };
    let x = tensor(ctx, *operand, "input")?;
    let kind = x.expressible_float(ctx)?;
    let q = fake_quant_type(ctx, attrs)?;
    calibrated_range(ctx, attrs)?;
    if q.expressed != kind {
        return Err(format!(
            "'type' has expressed type {} but the input's element type is {}",
            q.expressed.keyword(),
            kind.keyword()
        ));
    }
    check_axis_fits(q, x.shape).map_err(|e| format!("'type' does not fit the input: {e}"))?;
    Ok(smallvec![*operand])
}

fn verify_cast_hint(v: &OpView<'_>) -> Result<(), String> {
    let attr = v.attr("kind").ok_or("needs a 'kind' string attribute (like \"i8\" or \"activation\")")?;
    match v.ctx.attr_as_str(attr) {
        Some(kind) if !kind.is_empty() => Ok(()),
        _ => Err(format!("'kind' must be a non-empty string, got {}", describe(v.ctx, attr))),
    }
}

/// The result type of the identity ops: the operand's, which must be a tensor.
pub(crate) fn infer_identity(
    ctx: &mut Context,
    operands: &[Type],
    _attrs: Attribute,
) -> Result<SmallVec<[Type; 1]>, String> {
    let [operand] = operands else { return Err(format!("expects 1 operand, found {}", operands.len())) };
    tensor(ctx, *operand, "input")?;
    Ok(smallvec![*operand])
}

/// `requantize(x : T) -> T` is `x` (§10).
fn fold_requantize(
    _ctx: &mut Context,
    module: &Module,
    op: OpId,
    _constants: &[Option<Attribute>],
) -> Option<SmallVec<[FoldResult; 1]>> {
    if module.num_operands(op) != 1 || module.num_results(op) != 1 {
        return None;
    }
    let input = module.operand(op, 0);
    if module.value_type(input) != module.value_type(module.result(op, 0)) {
        return None;
    }
    Some(smallvec![FoldResult::Value(input)])
}

/// `quantize(dequantize(q : T)) -> T` is `q` when the round trip is exact (§10).
fn fold_quantize(
    ctx: &mut Context,
    module: &Module,
    op: OpId,
    _constants: &[Option<Attribute>],
) -> Option<SmallVec<[FoldResult; 1]>> {
    if module.num_operands(op) != 1 || module.num_results(op) != 1 {
        return None;
    }
    let producer = module.defining_op(module.operand(op, 0));
    if producer.is_none() || ctx.op_name_str(module.op_name(producer)) != names::DEQUANTIZE {
        return None;
    }
    if module.num_operands(producer) != 1 {
        return None;
    }
    let source = module.operand(producer, 0);
    let ty = module.value_type(module.result(op, 0));
    if module.value_type(source) != ty || !round_trip_is_exact(ctx, ty) {
        return None;
    }
    Some(smallvec![FoldResult::Value(source)])
}

/// True if dequantize then quantize with the element type of `ty` returns every
/// stored value unchanged (§10): expressed f32, storage of at most 16 bits, and
/// `max |q − zp| × f32(scale)` finite in f32 for every parameter entry.
pub(crate) fn round_trip_is_exact(ctx: &Context, ty: Type) -> bool {
    let Some(q) = quant_element(ctx, ty) else { return false };
    if q.expressed != FloatKind::F32 || q.storage.width > 16 {
        return false;
    }
    let (qmin, qmax) = storage_range(q);
    params(q).iter().all(|p| {
        let reach =
            (qmax as i128 - p.zero_point as i128).abs().max((qmin as i128 - p.zero_point as i128).abs());
        // Exact in f64: an integer below 2^18 times a 24-bit mantissa.
        reach as f64 * (p.scale as f32) as f64 <= f32::MAX as f64
    })
}
