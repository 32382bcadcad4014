//! `qnn.lookup`: a unary elementwise function of a quantized tensor of at most
//! 8-bit storage, computed exactly through a table with one entry per stored
//! input value (`docs/quant-semantics.md` §7.5).
//!
//! The table is data, so the op computes any function of one element (sigmoid,
//! tanh, gelu, hard_swish, ...) without float arithmetic; `fuse` builds it from
//! the float op's own kernel. The result type is written: its parameters are the
//! ones the table's entries were quantized with, which the op cannot infer.

use super::{describe, expect_shape, tensor};
use crate::quant_params::storage_range;
use qopt_ir_core::{dense_values_i128, type_to_string, Arity, AttrData, OpDef, OpView, Traits, TypeData};

qopt_ir_core::op_name_constants! {
    LOOKUP = "qnn.lookup",
}

/// The widest input storage `qnn.lookup` takes: 2^8 table entries.
pub const MAX_LOOKUP_BITS: u8 = 8;

pub(crate) fn ops() -> Vec<OpDef> {
    vec![OpDef::new(names::LOOKUP, "elementwise table lookup: out = table[q − storage_min]")
        .description(
            "`qnn.lookup(x) {table}`: each stored value `q` of `x` becomes `table[q − qmin]`, `qmin` being \
             the input's storage minimum (`docs/quant-semantics.md` §7.5). `x` is quantized per tensor with \
             storage of at most 8 bits; the result is quantized per tensor, has `x`'s shape, and its type \
             is written (the table's entries are stored values of it). `table` is a rank-1 dense integer \
             attribute with one entry per storage value of `x` (`qmax − qmin + 1`: 256 for i8 and u8, 255 \
             for `i8<-127:127>`), each within the result's storage range. `fuse` makes it from \
             `dequantize → unary float op → quantize` (ops with the `LookupActivation` interface), so it \
             computes exactly what those three did.\n\n\
             ```\n%y = qnn.lookup(%x) {table = dense<[0, 0, 0, -2, -3, -3, -3, -2, 0, 2, 5, 9, 13, 18, 24, 28]> : tensor<16xi8>} : \
             (tensor<1x8x!qnn.uniform<i4:f32, 0.5:0>>) -> tensor<1x8x!qnn.uniform<i8:f32, 0.125:0>>\n```",
        )
        .operands(Arity::Exact(1))
        .traits(Traits::PURE | Traits::ELEMENTWISE)
        .verifier(verify_lookup)]
}

fn verify_lookup(v: &OpView<'_>) -> Result<(), String> {
    let ctx = v.ctx;
    let x = tensor(ctx, v.operand_type(0), "input")?;
    let result = tensor(ctx, v.result_type(0), "result")?;
    let qx = x.per_tensor_quant(ctx)?;
    let qout = result.per_tensor_quant(ctx)?;
    if qx.storage.width > MAX_LOOKUP_BITS {
        return Err(format!(
            "input storage must be at most {MAX_LOOKUP_BITS} bits wide (a table entry per stored value), got {}",
            type_to_string(ctx, x.elem)
        ));
    }
    expect_shape("result", result.shape, x.shape, "the input's")?;
    let table = v.attr("table").ok_or("needs a 'table' attribute: dense<...> : tensor<Nxi..>")?;
    let (qmin, qmax) = storage_range(qx);
    let entries = qmax - qmin + 1;
    let bad = || {
        format!(
            "'table' must be a dense<...> : tensor<{entries}x..> of integers (one entry per storage value of the \
             input), got {}",
            describe(ctx, table)
        )
    };
    let AttrData::Dense(d) = ctx.attr_data(table) else { return Err(bad()) };
    let is_int = matches!(ctx.type_data(ctx.element_type(d.ty)), TypeData::Int(_));
    let shape = ctx.tensor_shape(d.ty).unwrap_or(&[]);
    if !is_int || shape.len() != 1 {
        return Err(bad());
    }
    if shape[0] != entries {
        return Err(format!(
            "'table' has {} entries but the input's storage range [{qmin}, {qmax}] has {entries} values",
            shape[0]
        ));
    }
    let values = dense_values_i128(ctx, d).ok_or_else(bad)?;
    let (lo, hi) = storage_range(qout);
    if let Some((i, e)) = values.iter().enumerate().find(|(_, &e)| e < i128::from(lo) || e > i128::from(hi)) {
        return Err(format!(
            "'table' entry {i} (for input {}) is {e}, outside the result's storage range [{lo}, {hi}]",
            qmin + i as i64
        ));
    }
    Ok(())
}
