//! `Conv` → `fp.conv2d` (N×C×H×W) or `fp.conv1d` (N×C×L), with `group`,
//! `strides`, `dilations`, explicit `pads` or `auto_pad`, and the optional
//! bias. Attributes equal to the fp defaults are left out.

use super::ConvertFn;
use super::{spatial_ints, window_pads, AttrList};
use crate::import::NodeCx;
use qopt_dialect_fp::op_names as fp_op;

/// The ONNX op types this family converts, with their converters.
pub(crate) const CONVERTERS: &[(&str, ConvertFn)] = &[("Conv", conv)];

pub(super) fn conv(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let attrs = cx.attrs();
    let x = cx.input(0)?;
    let w = cx.input(1)?;
    let bias = cx.opt_input(2)?;
    let (x_shape, w_shape) = (cx.shape(x)?, cx.shape(w)?);
    let n = x_shape.len().saturating_sub(2);
    if !(1..=2).contains(&n) || w_shape.len() != x_shape.len() {
        return Err(format!(
            "only 1-D and 2-D convolutions are supported (input rank {}, weight rank {})",
            x_shape.len(),
            w_shape.len()
        ));
    }
    let kernel = &w_shape[2..];
    if let Some(k) = attrs.opt_ints("kernel_shape")? {
        if k != kernel {
            return Err(format!(
                "attribute 'kernel_shape' {k:?} differs from the weight's kernel {kernel:?}"
            ));
        }
    }
    let strides = spatial_ints(&attrs, "strides", n, 1)?;
    let dilations = spatial_ints(&attrs, "dilations", n, 1)?;
    let pads = window_pads(&attrs, &x_shape[2..], kernel, &strides, &dilations)?;
    let group = attrs.int("group", 1)?;
    let ctx = cx.ctx();
    let mut list = AttrList::default();
    list.ints_unless(ctx, "stride", &strides, &vec![1; n]);
    list.ints_unless(ctx, "pad", &pads, &vec![0; 2 * n]);
    list.ints_unless(ctx, "dilation", &dilations, &vec![1; n]);
    if group != 1 {
        let g = ctx.i64_attr(group);
        list.push("groups", g);
    }
    let dict = list.dict(ctx);
    let mut operands = vec![x, w];
    operands.extend(bias);
    let op = if n == 2 { fp_op::CONV2D } else { fp_op::CONV1D };
    let y = cx.emit(op, &operands, dict)?;
    cx.set_output(0, y)
}
