//! `ReduceMean`, `ReduceMax`, `ReduceMin`, `ReduceSum` → `fp.reduce_*`. The
//! axes come from the `axes` attribute (`ReduceSum` before opset 13, the
//! others before 18) or from the optional second input, which must then be
//! constant; no axes reduce every dimension, except that with
//! `noop_with_empty_axes = 1` the node passes its input through.
//! `keepdims` (default 1) becomes the op's `keepdims`.

use super::ConvertFn;
use crate::import::NodeCx;
use qopt_dialect_fp::op_names as fp_op;

/// The ONNX op types this family converts, with their converters.
pub(crate) const CONVERTERS: &[(&str, ConvertFn)] = &[
    ("ReduceMax", |cx| reduce(cx, fp_op::REDUCE_MAX, 18)),
    ("ReduceMean", |cx| reduce(cx, fp_op::REDUCE_MEAN, 18)),
    ("ReduceMin", |cx| reduce(cx, fp_op::REDUCE_MIN, 18)),
    ("ReduceSum", |cx| reduce(cx, fp_op::REDUCE_SUM, 13)),
];

/// One reduction; from opset `axes_input_since` on, the axes are input 1.
fn reduce(cx: &mut NodeCx<'_, '_>, op: &str, axes_input_since: i64) -> Result<(), String> {
    let axes =
        if cx.opset() >= axes_input_since { cx.const_ints(1)? } else { cx.attrs().opt_ints("axes")? };
    let keepdims = cx.attrs().int("keepdims", 1)? != 0;
    let noop_when_empty = cx.attrs().int("noop_with_empty_axes", 0)? != 0;
    let axes = axes.unwrap_or_default();
    if axes.is_empty() && noop_when_empty {
        return cx.forward_input();
    }
    let x = cx.input(0)?;
    let mut entries = Vec::new();
    if !axes.is_empty() {
        let a = cx.ctx().i64_array_attr(&axes);
        entries.push(("axes", a));
    }
    if !keepdims {
        let k = cx.ctx().bool_attr(false);
        entries.push(("keepdims", k));
    }
    let attrs = cx.ctx().dict_attr(&entries);
    let y = cx.emit(op, &[x], attrs)?;
    cx.set_output(0, y)
}
