//! Table lookups: `qnn.lookup` as ONNX writes it (qexport's form, exact in
//! ONNX Runtime):
//!
//! ```text
//! index = Cast(x) {to = INT32 or INT64}          x quantized, at most 8 bits
//! table = DequantizeLinear(entries, s, zp)        a constant of 2^bits entries
//! y     = Gather(table, index) {axis = 0}
//! ```
//!
//! The `Cast` binds its output to the stored integers of `x` (which nothing
//! else may read: the IR has no integer arithmetic on them), and the
//! `Gather` becomes `qnn.lookup(x) {table}` with the entries' quantized type
//! as its result, then `qnn.dequantize`, which is what ONNX's `Gather` of the
//! dequantized table gives. `Gather` counts negative indices from the end,
//! so the entry of stored value `q` is `entries[q mod 2^bits]`. A
//! `QuantizeLinear` after it to the entries' type quantizes the dequantized
//! entries back to themselves (`docs/quant-semantics.md` §10).

use crate::import::NodeCx;
use crate::onnx::data_type as dt;
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_dialect_qnn::quant_params::quant_element;
use qopt_ir_core::{dense_values_i128, Attribute, DenseElements, QuantParams};

/// `Cast` of a quantized value of at most 8 bits to INT32 or INT64: binds
/// the stored integers and returns true; false for any other cast.
pub(super) fn cast_stored_integers(cx: &mut NodeCx<'_, '_>, to: i64) -> Result<bool, String> {
    if to != i64::from(dt::INT32) && to != i64::from(dt::INT64) || cx.is_const_input(0) {
        return Ok(false);
    }
    let x = cx.input(0)?;
    let ty = cx.value_type(x);
    match quant_element(cx.ctx_ref(), ty) {
        Some(q) if q.storage.width <= qopt_dialect_qnn::MAX_LOOKUP_BITS => {}
        _ => return Ok(false),
    }
    cx.set_stored_integers_output(x)?;
    Ok(true)
}

/// `Gather` of a dequantized table by the stored integers of `x`: emits
/// `qnn.lookup` and `qnn.dequantize`; false when the indices are not
/// stored integers.
pub(super) fn gather_lookup(cx: &mut NodeCx<'_, '_>, axis: i64) -> Result<bool, String> {
    let Some(x) = cx.stored_integers_input(1) else { return Ok(false) };
    let qx = quant_element(cx.ctx_ref(), cx.value_type(x)).cloned().ok_or("the indices are not quantized")?;
    if axis != 0 {
        return Err(format!("a lookup table Gather must be along axis 0, not {axis}"));
    }
    let table = cx.input(0)?;
    let entries = cx.dequantized_constant(table).ok_or(
        "a lookup Gather (indices cast from a quantized value) must read a DequantizeLinear of a constant",
    )?;
    let q_out =
        quant_element(cx.ctx_ref(), cx.value_type(entries)).cloned().ok_or("the table is not quantized")?;
    if !matches!(q_out.params, QuantParams::PerTensor { .. }) {
        return Err("the lookup table must be quantized per tensor".into());
    }
    let size = 1usize << qx.storage.width;
    let values = cx
        .constant_value(entries)
        .and_then(|d| dense_values_i128(cx.ctx_ref(), d))
        .ok_or("the lookup table does not hold integers")?;
    if values.len() != size {
        return Err(format!(
            "the lookup table has {} entries, but a {}-bit index needs {size}",
            values.len(),
            qx.storage.width
        ));
    }
    let picked: Vec<i128> =
        (qx.storage_min..=qx.storage_max).map(|q| values[q.rem_euclid(size as i64) as usize]).collect();
    let entry_type = cx.ctx_ref().element_type(cx.value_type(entries));
    let storage = cx.ctx().intern_type(qopt_ir_core::TypeData::Int(q_out.storage));
    let table_ty = cx.ctx().tensor_type(&[picked.len() as i64], storage);
    let table_attr = DenseElements::from_i128(cx.ctx(), table_ty, &picked)?;
    let table_attr = cx.ctx().dense_attr(table_attr);
    let attrs = cx.ctx().dict_attr(&[("table", table_attr)]);
    let shape = cx.shape(x)?;
    let result_ty = cx.ctx().tensor_type(&shape, entry_type);
    let looked_up = cx.emit_typed_with(qnn_op::LOOKUP, &[x], attrs, result_ty)?;
    let y = cx.emit(qnn_op::DEQUANTIZE, &[looked_up], Attribute::EMPTY_DICT)?;
    cx.note_lookup_table(table);
    cx.set_output(0, y)?;
    Ok(true)
}
