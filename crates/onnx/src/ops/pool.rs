//! Pooling: `MaxPool` → `fp.max_pool2d` / `fp.max_pool1d`, `AveragePool` →
//! `fp.avg_pool2d`, `GlobalAveragePool` → `fp.global_avg_pool2d`. Window
//! attributes as for `Conv` (`auto_pad` included), plus `ceil_mode` and
//! `count_include_pad`; attributes equal to the fp defaults are left out.
//! Not supported: MaxPool's `Indices` output and `storage_order`, dilated
//! or 1-D average pooling.

use super::ConvertFn;
use super::{spatial_ints, window_pads, AttrList};
use crate::import::NodeCx;
use qopt_dialect_fp::op_names as fp_op;
use qopt_ir_core::{Attribute, ValueId};

/// The ONNX op types this family converts, with their converters.
pub(crate) const CONVERTERS: &[(&str, ConvertFn)] =
    &[("AveragePool", average_pool), ("GlobalAveragePool", global_average_pool), ("MaxPool", max_pool)];

pub(super) fn max_pool(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    if cx.has_output(1) {
        return Err("the Indices output is not supported".into());
    }
    if cx.attrs().int("storage_order", 0)? != 0 {
        return Err("attribute 'storage_order' = 1 is not supported".into());
    }
    pool(cx, true)
}

pub(super) fn average_pool(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    pool(cx, false)
}

fn pool(cx: &mut NodeCx<'_, '_>, max: bool) -> Result<(), String> {
    let x = cx.input(0)?;
    let shape = cx.shape(x)?;
    let dict = pool_attrs(cx, &shape, max)?;
    let op = match (max, shape.len()) {
        (true, 3) => fp_op::MAX_POOL1D,
        (true, _) => fp_op::MAX_POOL2D,
        (false, _) => fp_op::AVG_POOL2D,
    };
    let y = cx.emit(op, &[x], dict)?;
    cx.set_output(0, y)
}

/// The attributes of the fp (or qnn) pool a `MaxPool` (`max`) or
/// `AveragePool`-like node over an input of `shape` becomes.
pub(super) fn pool_attrs(cx: &mut NodeCx<'_, '_>, shape: &[i64], max: bool) -> Result<Attribute, String> {
    let attrs = cx.attrs();
    let n = shape.len().saturating_sub(2);
    let supported = if max { 1..=2 } else { 2..=2 };
    if !supported.contains(&n) {
        let what = if max { "1-D and 2-D" } else { "2-D" };
        return Err(format!("only {what} pooling is supported (input rank {})", shape.len()));
    }
    let kernel = attrs.opt_ints("kernel_shape")?.ok_or("attribute 'kernel_shape' is missing")?;
    if kernel.len() != n {
        return Err(format!("attribute 'kernel_shape' has {} values, expected {n}", kernel.len()));
    }
    let strides = spatial_ints(&attrs, "strides", n, 1)?;
    let dilations = spatial_ints(&attrs, "dilations", n, 1)?;
    if !max && dilations.iter().any(|&d| d != 1) {
        return Err("dilated average pooling is not supported".into());
    }
    let pads = window_pads(&attrs, &shape[2..], &kernel, &strides, &dilations)?;
    let ceil_mode = attrs.int("ceil_mode", 0)? != 0;
    let count_include_pad = attrs.int("count_include_pad", 0)? != 0;
    let ctx = cx.ctx();
    let mut list = AttrList::default();
    let k = ctx.i64_array_attr(&kernel);
    list.push("kernel", k);
    list.ints_unless(ctx, "stride", &strides, &vec![1; n]);
    list.ints_unless(ctx, "pad", &pads, &vec![0; 2 * n]);
    if max {
        list.ints_unless(ctx, "dilation", &dilations, &vec![1; n]);
    }
    if ceil_mode {
        let t = ctx.bool_attr(true);
        list.push("ceil_mode", t);
    }
    if !max && count_include_pad {
        let t = ctx.bool_attr(true);
        list.push("count_include_pad", t);
    }
    Ok(list.dict(ctx))
}

pub(super) fn global_average_pool(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let x: ValueId = cx.input(0)?;
    let rank = cx.shape(x)?.len();
    if rank != 4 {
        return Err(format!("only 2-D global pooling (N×C×H×W) is supported, input rank is {rank}"));
    }
    let y = cx.emit(fp_op::GLOBAL_AVG_POOL2D, &[x], qopt_ir_core::Attribute::EMPTY_DICT)?;
    cx.set_output(0, y)
}
