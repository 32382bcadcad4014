//! `BatchNormalization` (inference) → `fp.batch_norm`; `LayerNormalization`
//! (inference) → `fp.layer_norm`; `Softmax` →
//! `fp.softmax`. Before opset 13 Softmax normalizes over all dimensions
//! from `axis` on (default 1) as one: that is `fp.softmax` over the last
//! axis when `axis` is the last dimension, and otherwise `fp.flatten` at
//! `axis`, `fp.softmax` over the flattened tail, `fp.reshape` back.

use super::shape::reshape_to;
use super::ConvertFn;
use super::{normalize_axis, AttrList};
use crate::import::NodeCx;
use qopt_dialect_fp::op_names as fp_op;
use qopt_ir_core::Attribute;

/// The ONNX op types this family converts, with their converters.
pub(crate) const CONVERTERS: &[(&str, ConvertFn)] = &[
    ("BatchNormalization", batch_normalization),
    ("InstanceNormalization", instance_normalization),
    ("LayerNormalization", layer_normalization),
    ("Softmax", softmax),
];

/// `InstanceNormalization` → `fp.instance_norm` with its `epsilon`.
pub(super) fn instance_normalization(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let epsilon = f64::from(cx.attrs().float("epsilon", 1e-5)?);
    let (x, scale, bias) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    let f32_ty = cx.ctx().common().f32;
    let epsilon = cx.ctx().float_attr(epsilon, f32_ty);
    let attrs = cx.ctx().dict_attr(&[("epsilon", epsilon)]);
    let y = cx.emit(fp_op::INSTANCE_NORM, &[x, scale, bias], attrs)?;
    cx.set_output(0, y)
}

/// `LayerNormalization` (opset 17, inference) → `fp.layer_norm` with its
/// `axis` and `epsilon`; the optional mean and inverse-deviation outputs
/// (training) are an error when a model uses them.
pub(super) fn layer_normalization(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    if (1..cx.num_outputs()).any(|i| cx.has_output(i)) {
        return Err("the Mean and InvStdDev outputs (training) are not supported".into());
    }
    let axis = cx.attrs().int("axis", -1)?;
    let epsilon = f64::from(cx.attrs().float("epsilon", 1e-5)?);
    // The precision of the statistics: the interpreter uses f64, at least as precise as any.
    cx.attrs().int("stash_type", 1)?;
    let x = cx.input(0)?;
    let scale = cx.input(1)?;
    let mut operands = vec![x, scale];
    if let Some(bias) = cx.opt_input(2)? {
        operands.push(bias);
    }
    let (f32_ty, i64_ty) = (cx.ctx().common().f32, cx.ctx().common().i64);
    let axis = cx.ctx().int_attr(i128::from(axis), i64_ty);
    let epsilon = cx.ctx().float_attr(epsilon, f32_ty);
    let attrs = cx.ctx().dict_attr(&[("axis", axis), ("epsilon", epsilon)]);
    let y = cx.emit(fp_op::LAYER_NORM, &operands, attrs)?;
    cx.set_output(0, y)
}

pub(super) fn batch_normalization(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let attrs = cx.attrs();
    if attrs.int("training_mode", 0)? != 0 || (1..cx.num_outputs()).any(|i| cx.has_output(i)) {
        return Err("training mode (running mean and variance outputs) is not supported".into());
    }
    let epsilon = attrs.float("epsilon", 1e-5)?;
    // Only training updates the running statistics with it.
    attrs.opt_float("momentum")?;
    let operands = (0..5).map(|i| cx.input(i)).collect::<Result<Vec<_>, _>>()?;
    let ctx = cx.ctx();
    let f32 = ctx.common().f32;
    let eps = ctx.float_attr(f64::from(epsilon), f32);
    let dict = ctx.dict_attr(&[("epsilon", eps)]);
    let y = cx.emit(fp_op::BATCH_NORM, &operands, dict)?;
    cx.set_output(0, y)
}

pub(super) fn softmax(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let x = cx.input(0)?;
    let shape = cx.shape(x)?;
    let rank = shape.len();
    let opset13 = cx.opset() >= 13;
    let axis = cx.attrs().int("axis", if opset13 { -1 } else { 1 })?;
    let index = normalize_axis(axis, rank)?;
    let mut list = AttrList::default();
    if opset13 || index + 1 == rank {
        let ctx = cx.ctx();
        if axis != -1 {
            let a = ctx.i64_attr(axis);
            list.push("axis", a);
        }
        let dict = list.dict(ctx);
        let y = cx.emit(fp_op::SOFTMAX, &[x], dict)?;
        return cx.set_output(0, y);
    }
    let ctx = cx.ctx();
    let a = ctx.i64_attr(index as i64);
    let flatten_attrs = ctx.dict_attr(&[("axis", a)]);
    let flat = cx.emit(fp_op::FLATTEN, &[x], flatten_attrs)?;
    let soft = cx.emit(fp_op::SOFTMAX, &[flat], Attribute::EMPTY_DICT)?;
    let y = reshape_to(cx, soft, &shape)?;
    cx.set_output(0, y)
}
