//! `accel.dma_in` and `accel.dma_out`: transfers between host memory and
//! accelerator memory, and the `dma-out-in` canonicalization that drops a
//! round trip through the host.
//!
//! In value they are identities (the result is the operand, same type), so
//! they are `Pure`: `cse` merges two transfers of one value, and `dce` or
//! `canonicalize` drop a transfer nobody reads. They mark where data crosses
//! the bus, which is what a code generator for the accelerator schedules.

use qopt_dialect_fp::shape::{is_dynamic, tensor_parts};
use qopt_ir_core::{
    type_to_string, Arity, Attribute, Context, OpDef, OpId, OpView, RewritePattern, Rewriter, Traits, Type,
};
use smallvec::{smallvec, SmallVec};

pub(crate) fn ops() -> Vec<OpDef> {
    vec![
        OpDef::new("accel.dma_in", "copy a tensor from host memory into accelerator memory")
            .description(
                "`accel.dma_in(x)`: the same tensor, now in accelerator memory. The value and type are \
                 unchanged; the tensor must have a static shape (a DMA descriptor holds its byte count). \
                 `accel-lower` puts one before each operand of an accelerator op.\n\n\
                 ```\n%a = accel.dma_in(%x) : (tensor<1x8x4x4x!qnn.uniform<i8:f32, 0.05:-3>>) \
                 -> tensor<1x8x4x4x!qnn.uniform<i8:f32, 0.05:-3>>\n```",
            )
            .operands(Arity::Exact(1))
            .traits(Traits::PURE | Traits::SAME_OPERANDS_AND_RESULT_TYPE | Traits::QUANT_AGNOSTIC)
            .verifier(verify_dma)
            .infer(infer_same),
        OpDef::new("accel.dma_out", "copy a tensor from accelerator memory back to host memory")
            .description(
                "`accel.dma_out(x)`: the same tensor, back in host memory. The value and type are \
                 unchanged; the tensor must have a static shape. `accel-lower` puts one after each \
                 accelerator op; `canonicalize` removes `accel.dma_in(accel.dma_out(x))` round trips \
                 (pattern `dma-out-in`), so chained accelerator ops keep their data on the device.\n\n\
                 ```\n%h = accel.dma_out(%y) : (tensor<1x16x4x4x!qnn.uniform<i8:f32, 0.1:-128>>) \
                 -> tensor<1x16x4x4x!qnn.uniform<i8:f32, 0.1:-128>>\n```",
            )
            .operands(Arity::Exact(1))
            .traits(Traits::PURE | Traits::SAME_OPERANDS_AND_RESULT_TYPE | Traits::QUANT_AGNOSTIC)
            .verifier(verify_dma)
            .infer(infer_same),
    ]
}

fn verify_dma(v: &OpView<'_>) -> Result<(), String> {
    let ty = v.operand_type(0);
    match tensor_parts(v.ctx, ty) {
        Some((shape, _)) if !shape.iter().any(|&d| is_dynamic(d)) => Ok(()),
        _ => Err(format!(
            "can only move tensors of static shape (a DMA descriptor holds the byte count), got {}",
            type_to_string(v.ctx, ty)
        )),
    }
}

/// The result has the operand's type.
fn infer_same(
    _ctx: &mut Context,
    operands: &[Type],
    _attrs: Attribute,
) -> Result<SmallVec<[Type; 1]>, String> {
    match operands {
        [ty] => Ok(smallvec![*ty]),
        _ => Err(format!("expects 1 operand, found {}", operands.len())),
    }
}

/// `dma-out-in`: `accel.dma_in(accel.dma_out(x))` is `x`, already in
/// accelerator memory. The `dma_out` stays while the host still reads it and
/// is erased as dead otherwise.
#[derive(Copy, Clone, Debug, Default)]
pub struct DmaOutIn;

impl RewritePattern for DmaOutIn {
    fn name(&self) -> &str {
        "dma-out-in"
    }
    fn root(&self) -> Option<&str> {
        Some("accel.dma_in")
    }
    fn match_and_rewrite(&self, op: OpId, rewriter: &mut Rewriter<'_>) -> bool {
        let module = &*rewriter.module;
        if module.num_operands(op) != 1 || module.num_results(op) != 1 {
            return false;
        }
        let out = module.defining_op(module.operand(op, 0));
        if out.is_none() || rewriter.ctx.op_name_str(module.op_name(out)) != "accel.dma_out" {
            return false;
        }
        if module.num_operands(out) != 1 {
            return false;
        }
        let on_device = module.operand(out, 0);
        // Both ops keep their operand's type, so the replacement has the type
        // of every use it takes over.
        if module.value_type(on_device) != module.value_type(module.result(op, 0)) {
            return false;
        }
        rewriter.replace_op(op, &[on_device]).is_ok()
    }
}
