//! `Gemm` and `MatMul`.
//!
//! `Gemm` (`Y = alpha · A' · B' + beta · C`) becomes `fp.dense` when `A` is
//! 2-D, not transposed and `alpha` is 1: the dense weight is N×K, which is
//! `B` itself with `transB = 1`; with `transB = 0` a constant `B` is
//! transposed at import (a new constant) and a computed one through
//! `fp.transpose`. `C` is the dense bias when `beta` is 1 and it is [N] (or
//! a constant [1, N]); otherwise it is added after, scaled by `beta`. Any
//! other Gemm is `fp.transpose` / `fp.matmul` / `fp.mul` / `fp.add`.
//!
//! `MatMul` is `fp.matmul`; a 1-D operand is reshaped to a matrix first
//! (`[K]` → `[1, K]` on the left, `[K, 1]` on the right) and the inserted
//! dimension is reshaped away from the result, as numpy does.

use super::shape::reshape_to;
use super::ConvertFn;
use crate::import::NodeCx;
use qopt_dialect_fp::op_names as fp_op;
use qopt_ir_core::{Attribute, ValueId};

/// The ONNX op types this family converts, with their converters.
pub(crate) const CONVERTERS: &[(&str, ConvertFn)] = &[("Gemm", gemm), ("MatMul", matmul)];

fn transpose_2d(cx: &mut NodeCx<'_, '_>, v: ValueId) -> Result<ValueId, String> {
    let ctx = cx.ctx();
    let perm = ctx.i64_array_attr(&[1, 0]);
    let dict = ctx.dict_attr(&[("perm", perm)]);
    cx.emit(fp_op::TRANSPOSE, &[v], dict)
}

/// `v · factor` unless `factor` is 1.
fn scale(cx: &mut NodeCx<'_, '_>, v: ValueId, factor: f32) -> Result<ValueId, String> {
    if factor == 1.0 {
        return Ok(v);
    }
    let elem = cx.element(v);
    let s = cx.scalar(f64::from(factor), elem)?;
    cx.emit(fp_op::MUL, &[v, s], Attribute::EMPTY_DICT)
}

pub(super) fn gemm(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let attrs = cx.attrs();
    let (trans_a, trans_b) = (attrs.int("transA", 0)? != 0, attrs.int("transB", 0)? != 0);
    let (alpha, beta) = (attrs.float("alpha", 1.0)?, attrs.float("beta", 1.0)?);
    let a = cx.input(0)?;
    let a_rank = cx.shape(a)?.len();
    if a_rank != 2 {
        return Err(format!("input A must be 2-D, got rank {a_rank}"));
    }
    let has_c = cx.input_name(2).is_some();
    if !trans_a && alpha == 1.0 {
        // The N×K weight of fp.dense.
        let w = match (trans_b, cx.is_const_input(1)) {
            (true, _) => cx.input(1)?,
            (false, true) => {
                let data = cx.const_input(1)?.ok_or("input B is missing")?;
                let t = data.transposed_2d().ok_or("input B must be 2-D")?;
                let elem = crate::tensor::element_type(cx.ctx(), t.data_type)?;
                cx.constant(&t, elem)?
            }
            (false, false) => {
                let b = cx.input(1)?;
                transpose_2d(cx, b)?
            }
        };
        let n = *cx.shape(w)?.first().ok_or("input B must be 2-D")?;
        let bias = if has_c && beta == 1.0 { dense_bias(cx, n)? } else { None };
        if let Some(b) = bias {
            super::quant::exact_bias_scales(cx, a, w, b)?;
        }
        let mut operands = vec![a, w];
        operands.extend(bias);
        let mut y = cx.emit(fp_op::DENSE, &operands, Attribute::EMPTY_DICT)?;
        if has_c && bias.is_none() {
            let c = cx.input(2)?;
            let c = scale(cx, c, beta)?;
            y = cx.emit(fp_op::ADD, &[y, c], Attribute::EMPTY_DICT)?;
        }
        return cx.set_output(0, y);
    }
    let a = if trans_a { transpose_2d(cx, a)? } else { a };
    let b = cx.input(1)?;
    let b = if trans_b { transpose_2d(cx, b)? } else { b };
    let product = cx.emit(fp_op::MATMUL, &[a, b], Attribute::EMPTY_DICT)?;
    let mut y = scale(cx, product, alpha)?;
    if has_c {
        let c = cx.input(2)?;
        let c = scale(cx, c, beta)?;
        y = cx.emit(fp_op::ADD, &[y, c], Attribute::EMPTY_DICT)?;
    }
    cx.set_output(0, y)
}

/// Input C as a dense bias of `n` elements, if it is one: a [N] value, or a
/// constant [1, N] (re-shaped at import).
fn dense_bias(cx: &mut NodeCx<'_, '_>, n: i64) -> Result<Option<ValueId>, String> {
    if cx.is_const_input(2) {
        let data = cx.const_input(2)?.ok_or("input C is missing")?;
        if data.dims == [1, n] {
            let elem = crate::tensor::element_type(cx.ctx(), data.data_type)?;
            return cx.constant(&data.with_dims(vec![n]), elem).map(Some);
        }
    }
    let c = cx.input(2)?;
    Ok((cx.shape(c)? == [n]).then_some(c))
}

pub(super) fn matmul(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let a = cx.input(0)?;
    let b = cx.input(1)?;
    let (a_shape, b_shape) = (cx.shape(a)?, cx.shape(b)?);
    let a = match a_shape[..] {
        [k] => reshape_to(cx, a, &[1, k])?,
        _ => a,
    };
    let b = match b_shape[..] {
        [k] => reshape_to(cx, b, &[k, 1])?,
        _ => b,
    };
    let mut y = cx.emit(fp_op::MATMUL, &[a, b], Attribute::EMPTY_DICT)?;
    if a_shape.len() == 1 || b_shape.len() == 1 {
        let mut shape = cx.shape(y)?;
        let rank = shape.len();
        if b_shape.len() == 1 {
            shape.remove(rank - 1);
        }
        if a_shape.len() == 1 {
            shape.remove(rank - 2);
        }
        y = reshape_to(cx, y, &shape)?;
    }
    cx.set_output(0, y)
}
