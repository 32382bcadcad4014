//! Which ops and values quantization touches: an op's [`QuantizableOp`]
//! interface, the `fp` ops that run on stored integers unchanged, and the
//! float tensors that have a quantized form.

use qopt_dialect_fp::op_names as fp_op;
use qopt_dialect_fp::shape;
use qopt_ir_core::interfaces::QuantizableOp;
use qopt_ir_core::{Context, Module, OpId, Type, TypeData};

/// The [`QuantizableOp`] interface of `op`'s definition, if it has one.
pub fn quantizable<'c>(ctx: &'c Context, module: &Module, op: OpId) -> Option<&'c QuantizableOp> {
    ctx.op_def(module.op_name(op))?.interfaces.get::<QuantizableOp>()
}

/// Whether `op` is an `fp` op that can run on stored integers unchanged
/// (`quant-semantics.md` §9): it is quant-agnostic as it stands
/// ([`qopt_dialect_fp::is_quant_agnostic`]: the `QuantAgnostic` trait, and
/// nearest mode for `fp.resize`), and an `fp.pad` pads with 0 (the zero
/// point) in constant mode.
pub fn runs_on_integers(ctx: &Context, module: &Module, op: OpId) -> bool {
    let name = ctx.op_name_str(module.op_name(op));
    if !name.starts_with("fp.") || !qopt_dialect_fp::is_quant_agnostic(ctx, module, op) {
        return false;
    }
    if name == fp_op::PAD {
        let value = module.op_attr(ctx, op, "value").and_then(|a| ctx.attr_as_f64(a)).unwrap_or(0.0);
        let mode = module.op_attr(ctx, op, "mode").and_then(|a| ctx.attr_as_str(a)).unwrap_or("constant");
        return value == 0.0 && mode == "constant";
    }
    true
}

/// Whether `ty` is a ranked tensor of f32, f16 or bf16.
pub fn is_float_tensor(ctx: &Context, ty: Type) -> bool {
    matches!(ctx.type_data(ty), TypeData::Tensor { .. })
        && shape::is_float_element(ctx, ctx.element_type(ty))
        && {
            // f64 has no quantized form (its expressed types are f32, f16, bf16).
            ctx.element_type(ty) != ctx.common().f64
        }
}
