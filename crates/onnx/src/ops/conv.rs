//! `Conv` → `fp.conv2d` (N×C×H×W) or `fp.conv1d` (N×C×L), with `group`,
//! `strides`, `dilations`, explicit `pads` or `auto_pad`, and the optional
//! bias; `ConvTranspose` → `fp.conv_transpose2d` or `fp.conv_transpose1d`, its
//! `auto_pad` and `output_shape` resolved into explicit `pad` and
//! `output_padding` ([`transpose_pads`]). Attributes equal to the fp defaults
//! are left out.

use super::ConvertFn;
use super::{spatial_ints, window_pads, AttrList};
use crate::attrs::NodeAttrs;
use crate::import::NodeCx;
use qopt_dialect_fp::op_names as fp_op;
use qopt_ir_core::ValueId;

/// The ONNX op types this family converts, with their converters.
pub(crate) const CONVERTERS: &[(&str, ConvertFn)] = &[("Conv", conv), ("ConvTranspose", conv_transpose)];

/// What `Conv` and `ConvTranspose` read alike: the operands, the input
/// shape, the weight's kernel (checked against `kernel_shape`), strides and
/// dilations, for 1-D or 2-D windows.
struct Window {
    operands: Vec<ValueId>,
    input_shape: Vec<i64>,
    kernel: Vec<i64>,
    strides: Vec<i64>,
    dilations: Vec<i64>,
}

impl Window {
    fn read(cx: &mut NodeCx<'_, '_>, attrs: &NodeAttrs<'_>, what: &str) -> Result<Window, String> {
        let x = cx.input(0)?;
        let w = cx.input(1)?;
        let bias = cx.opt_input(2)?;
        let (input_shape, w_shape) = (cx.shape(x)?, cx.shape(w)?);
        let n = input_shape.len().saturating_sub(2);
        if !(1..=2).contains(&n) || w_shape.len() != input_shape.len() {
            return Err(format!(
                "only 1-D and 2-D {what} are supported (input rank {}, weight rank {})",
                input_shape.len(),
                w_shape.len()
            ));
        }
        let kernel = w_shape[2..].to_vec();
        if let Some(k) = attrs.opt_ints("kernel_shape")? {
            if k != kernel {
                return Err(format!(
                    "attribute 'kernel_shape' {k:?} differs from the weight's kernel {kernel:?}"
                ));
            }
        }
        let strides = spatial_ints(attrs, "strides", n, 1)?;
        let dilations = spatial_ints(attrs, "dilations", n, 1)?;
        let mut operands = vec![x, w];
        operands.extend(bias);
        Ok(Window { operands, input_shape, kernel, strides, dilations })
    }

    fn spatial(&self) -> &[i64] {
        &self.input_shape[2..]
    }

    /// Emits `op_1d` or `op_2d` with the window attributes, `pads`, `group`
    /// and `extra` attributes (each left out when it is the default).
    fn emit(
        self,
        cx: &mut NodeCx<'_, '_>,
        [op_1d, op_2d]: [&str; 2],
        pads: &[i64],
        group: i64,
        extra: &[(&'static str, Vec<i64>, i64)],
    ) -> Result<(), String> {
        let n = self.kernel.len();
        let ctx = cx.ctx();
        let mut list = AttrList::default();
        list.ints_unless(ctx, "stride", &self.strides, &vec![1; n]);
        list.ints_unless(ctx, "pad", pads, &vec![0; 2 * n]);
        list.ints_unless(ctx, "dilation", &self.dilations, &vec![1; n]);
        for (name, values, default) in extra {
            list.ints_unless(ctx, name, values, &vec![*default; n]);
        }
        if group != 1 {
            let g = ctx.i64_attr(group);
            list.push("groups", g);
        }
        let dict = list.dict(ctx);
        let op = if n == 2 { op_2d } else { op_1d };
        let y = cx.emit(op, &self.operands, dict)?;
        cx.set_output(0, y)
    }
}

pub(super) fn conv(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let attrs = cx.attrs();
    let window = Window::read(cx, &attrs, "convolutions")?;
    if let [x, w, b] = window.operands[..] {
        super::quant::exact_bias_scales(cx, x, w, b)?;
    }
    let pads = window_pads(&attrs, window.spatial(), &window.kernel, &window.strides, &window.dilations)?;
    let group = attrs.int("group", 1)?;
    window.emit(cx, [fp_op::CONV1D, fp_op::CONV2D], &pads, group, &[])
}

/// `ConvTranspose` → `fp.conv_transpose2d` or `fp.conv_transpose1d`: the
/// weight (C×(O/group)×kernel) and bias pass as they are; `strides`,
/// `dilations`, `group` and the paddings from [`transpose_pads`] become the
/// op's attributes.
pub(super) fn conv_transpose(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let attrs = cx.attrs();
    let window = Window::read(cx, &attrs, "transposed convolutions")?;
    let (pads, output_padding) =
        transpose_pads(&attrs, window.spatial(), &window.kernel, &window.strides, &window.dilations)?;
    let group = attrs.int("group", 1)?;
    let ops = [fp_op::CONV_TRANSPOSE1D, fp_op::CONV_TRANSPOSE2D];
    window.emit(cx, ops, &pads, group, &[("output_padding", output_padding, 0)])
}

/// The explicit begin-then-end paddings and the output padding of a
/// `ConvTranspose` over input sizes `spatial`, resolving `auto_pad` and
/// `output_shape` as the ONNX spec says and, where the spec's formula gives
/// negative paddings, as ONNX Runtime does (checked on ONNX Runtime 1.32 by
/// `scripts/make_conv_transpose_fixtures.py`).
///
/// Without `output_shape`: `NOTSET` takes `pads` (default zeros) and
/// `output_padding` (default zeros) as they are; `VALID` has no padding;
/// `SAME_UPPER` and `SAME_LOWER` aim at the output size `input · stride`. With
/// a target output size (`output_shape`, which overrides `pads`, or the
/// `SAME_*` one), the total padding is `stride·(input − 1) + output_padding +
/// dilation·(kernel − 1) + 1 − target`: when it is not negative it is split in
/// two, the odd one at the end for `SAME_UPPER` and at the beginning
/// otherwise (`NOTSET`, `SAME_LOWER`, `VALID`). When it is negative, as ONNX
/// Runtime does: an explicit `output_shape` gets the missing positions as
/// output padding, at the end (the spec's formula would give `SAME_UPPER` a
/// negative begin padding); a `SAME_*` target is not reached, the output
/// stays at its full size without padding (as ONNX's shape inference says;
/// ONNX's reference implementation extends it instead).
fn transpose_pads(
    attrs: &NodeAttrs<'_>,
    spatial: &[i64],
    kernel: &[i64],
    strides: &[i64],
    dilations: &[i64],
) -> Result<(Vec<i64>, Vec<i64>), String> {
    let n = spatial.len();
    let mode = attrs.string("auto_pad", "NOTSET")?;
    if !["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"].contains(&mode.as_str()) {
        return Err(format!("auto_pad '{mode}' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID"));
    }
    let mut output_padding = spatial_ints(attrs, "output_padding", n, 0)?;
    if let Some(p) = output_padding.iter().find(|&&p| p < 0) {
        return Err(format!("attribute 'output_padding' has a negative value {p}"));
    }
    let output_shape = attrs.opt_ints("output_shape")?;
    let explicit = output_shape.is_some();
    // ONNX: with output_shape (or SAME padding) the pads are computed and `pads` is ignored.
    let written_pads = attrs.opt_ints("pads")?;
    let target: Option<Vec<i64>> = match output_shape {
        // Some exporters give the whole N×C×spatial shape.
        Some(shape) if shape.len() == n || shape.len() == n + 2 => Some(shape[shape.len() - n..].to_vec()),
        Some(shape) => {
            return Err(format!(
                "attribute 'output_shape' has {} values but the input has {n} spatial dimensions",
                shape.len()
            ))
        }
        None if mode.starts_with("SAME") => {
            let sizes: Option<Vec<i64>> = spatial
                .iter()
                .zip(strides)
                .map(|(&d, &s)| if d < 0 { None } else { d.checked_mul(s) })
                .collect();
            Some(sizes.ok_or(format!("auto_pad {mode} needs static spatial sizes"))?)
        }
        None => None,
    };
    let Some(target) = target else {
        if mode == "VALID" {
            return Ok((vec![0; 2 * n], output_padding));
        }
        let pads = written_pads.unwrap_or_else(|| vec![0; 2 * n]);
        if pads.len() != 2 * n {
            return Err(format!("attribute 'pads' has {} values, expected {}", pads.len(), 2 * n));
        }
        if let Some(p) = pads.iter().find(|&&p| p < 0) {
            return Err(format!("attribute 'pads' has a negative value {p}"));
        }
        return Ok((pads, output_padding));
    };
    let mut pads = vec![0; 2 * n];
    for i in 0..n {
        let (size, k, s, d) =
            (i128::from(spatial[i]), i128::from(kernel[i]), i128::from(strides[i]), i128::from(dilations[i]));
        if size < 1 || k < 1 || s < 1 || d < 1 {
            return Err("an output shape (output_shape or auto_pad) needs static sizes and positive windows"
                .to_string());
        }
        let want = i128::from(target[i]);
        if want < 1 {
            return Err(format!("attribute 'output_shape' has a size {want} below 1"));
        }
        let full = s * (size - 1) + i128::from(output_padding[i]) + (k - 1) * d + 1;
        let total = if explicit { full - want } else { (full - want).max(0) };
        if total >= 0 {
            let (small, large) = (total / 2, total - total / 2);
            let (begin, end) = if mode == "SAME_UPPER" { (small, large) } else { (large, small) };
            pads[i] = i64::try_from(begin).map_err(|_| "padding overflows")?;
            pads[n + i] = i64::try_from(end).map_err(|_| "padding overflows")?;
        } else {
            let (extra, padding) = (-total, i128::from(output_padding[i]));
            let limit = s.max(d);
            if padding + extra >= limit {
                return Err(format!(
                    "output size {want} along dimension {} is {extra} more than the {full} the input, kernel \
                     and output padding give; at most {} more (smaller than the stride or the dilation, \
                     whichever is larger) can be added",
                    2 + i,
                    (limit - 1 - padding).max(0)
                ));
            }
            output_padding[i] += i64::try_from(extra).map_err(|_| "padding overflows")?;
        }
    }
    Ok((pads, output_padding))
}
