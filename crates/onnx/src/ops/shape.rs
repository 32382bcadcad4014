//! Shape ops: `Flatten`, `Reshape`, `Transpose`, `Concat`, `Split`, `Pad`,
//! `Slice`, `Gather`, `DepthToSpace`, `SpaceToDepth`, `Tile`, `Resize` → the
//! fp op of the same job; `Squeeze` and `Unsqueeze` → `fp.reshape` to the
//! computed shape; `Identity` forwards its input.
//!
//! `Shape` and `Size` of a value become constant data (shapes are static
//! after import), which [`crate::fold`] computes on; `Expand` of a computed
//! value is `fp.tile` (after `fp.reshape` where it adds dimensions).
//!
//! Inputs that ONNX passes as tensors but fp holds as attributes (the
//! target shape, split sizes, pads, slice bounds, axes) must be constants.
//! Older opsets pass some of them as attributes; both forms are read.

use super::elementwise::float_attr;
use super::ConvertFn;
use super::{normalize_axis, AttrList};
use crate::import::NodeCx;
use crate::onnx::data_type as dt;
use crate::tensor::{element_count, TensorData};
use qopt_dialect_fp::op_names as fp_op;
use qopt_ir_core::{ValueId, DYNAMIC};

/// The ONNX op types this family converts, with their converters.
pub(crate) const CONVERTERS: &[(&str, ConvertFn)] = &[
    ("Concat", concat),
    ("DepthToSpace", depth_to_space),
    ("Expand", expand),
    ("Flatten", flatten),
    ("Gather", gather),
    ("Identity", identity),
    ("Pad", pad),
    ("Reshape", reshape),
    ("Resize", resize),
    ("Shape", shape),
    ("Size", size),
    ("Slice", slice),
    ("SpaceToDepth", space_to_depth),
    ("Split", split),
    ("Squeeze", squeeze),
    ("Tile", tile),
    ("Transpose", transpose),
    ("Unsqueeze", unsqueeze),
];

/// `Shape` (with opset 15's `start` / `end`): the input's static shape as an
/// int64 constant.
pub(super) fn shape(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let dims = static_shape(cx)?;
    let rank = dims.len() as i64;
    let clamp = |v: i64| if v < 0 { (v + rank).max(0) } else { v.min(rank) } as usize;
    let start = clamp(cx.attrs().int("start", 0)?);
    let end = clamp(cx.attrs().int("end", rank)?);
    let picked = dims.get(start..end.max(start)).unwrap_or_default();
    let bytes = picked.iter().flat_map(|d| d.to_le_bytes()).collect();
    let data = TensorData::new(&cx.output_name(0), vec![picked.len() as i64], dt::INT64, bytes);
    cx.set_const_output(0, data)
}

/// `Size`: the input's static element count as an int64 scalar constant.
pub(super) fn size(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let count = element_count(&static_shape(cx)?)?;
    let count = i64::try_from(count).map_err(|_| "the element count overflows int64")?;
    let data = TensorData::new(&cx.output_name(0), vec![], dt::INT64, count.to_le_bytes().to_vec());
    cx.set_const_output(0, data)
}

/// The shape of input 0, which must be static.
fn static_shape(cx: &NodeCx<'_, '_>) -> Result<Vec<i64>, String> {
    let dims = cx.input_shape(0)?;
    if dims.contains(&DYNAMIC) {
        return Err("the input's shape is not static; fix the model's input shapes with --input-shape".into());
    }
    Ok(dims)
}

/// `Expand` of a computed value: the broadcast of the input and the
/// (constant) target shape, as `fp.tile` of the input with size-1
/// dimensions repeated, after an `fp.reshape` that prepends any new ones.
pub(super) fn expand(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let target = cx.const_ints(1)?.ok_or("input #1 (shape) is missing")?;
    let mut x = cx.input(0)?;
    let shape = cx.shape(x)?;
    let rank = shape.len().max(target.len());
    let mut padded = vec![1; rank - shape.len()];
    padded.extend_from_slice(&shape);
    let mut repeats = vec![1; rank];
    for (i, &t) in target.iter().enumerate() {
        let d = &mut repeats[rank - target.len() + i];
        let s = padded[rank - target.len() + i];
        match (s, t) {
            (s, t) if s == t || t == 1 => {}
            (1, t) if t > 1 => *d = t,
            _ => return Err(format!("shape {shape:?} does not broadcast to {target:?}")),
        }
    }
    if padded != shape {
        x = reshape_to(cx, x, &padded)?;
    }
    if repeats.iter().all(|&r| r == 1) {
        return cx.set_output(0, x);
    }
    let r = cx.ctx().i64_array_attr(&repeats);
    let attrs = cx.ctx().dict_attr(&[("repeats", r)]);
    let y = cx.emit(fp_op::TILE, &[x], attrs)?;
    cx.set_output(0, y)
}

/// `DepthToSpace` → `fp.depth_to_space` with `blocksize` and `mode`.
pub(super) fn depth_to_space(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let blocksize = cx.attrs().opt_int("blocksize")?.ok_or("needs a 'blocksize' attribute")?;
    let mode = cx.attrs().string("mode", "DCR")?;
    let x = cx.input(0)?;
    let i64_ty = cx.ctx().common().i64;
    let b = cx.ctx().int_attr(i128::from(blocksize), i64_ty);
    let m = cx.ctx().string_attr(&mode);
    let attrs = cx.ctx().dict_attr(&[("blocksize", b), ("mode", m)]);
    let y = cx.emit(fp_op::DEPTH_TO_SPACE, &[x], attrs)?;
    cx.set_output(0, y)
}

/// `SpaceToDepth` → `fp.space_to_depth` with `blocksize` and `mode` (opset
/// 28; DCR before, which is also the default).
pub(super) fn space_to_depth(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let blocksize = cx.attrs().opt_int("blocksize")?.ok_or("needs a 'blocksize' attribute")?;
    let mode = cx.attrs().string("mode", "DCR")?;
    let x = cx.input(0)?;
    let i64_ty = cx.ctx().common().i64;
    let b = cx.ctx().int_attr(i128::from(blocksize), i64_ty);
    let mut entries = vec![("blocksize", b)];
    if mode != "DCR" {
        entries.push(("mode", cx.ctx().string_attr(&mode)));
    }
    let attrs = cx.ctx().dict_attr(&entries);
    let y = cx.emit(fp_op::SPACE_TO_DEPTH, &[x], attrs)?;
    cx.set_output(0, y)
}

/// `Tile` → `fp.tile`; the repeats input must be constant.
pub(super) fn tile(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let repeats = cx.const_ints(1)?.ok_or("the repeats input must be a constant")?;
    let x = cx.input(0)?;
    let r = cx.ctx().i64_array_attr(&repeats);
    let attrs = cx.ctx().dict_attr(&[("repeats", r)]);
    let y = cx.emit(fp_op::TILE, &[x], attrs)?;
    cx.set_output(0, y)
}

/// The data of constant input `i` of a `Resize`, `None` when absent or empty
/// (ONNX passes an empty tensor for the unused one of scales and sizes).
fn resize_input(cx: &NodeCx<'_, '_>, i: usize) -> Result<Option<crate::tensor::TensorData>, String> {
    Ok(cx.const_input(i)?.filter(|d| d.dims.iter().product::<i64>() != 0))
}

/// `Resize` (opsets 11 to 19) → `fp.resize`. The constant scales or sizes
/// (over `axes` from opset 18) become the size and coordinate scale of every
/// dimension: with scales, `floor(in · scale)` (-1, computed when the op
/// runs, for a dynamic input size) and the scale itself; with sizes, the size
/// and `out / in` (or one common factor under `keep_aspect_ratio_policy`
/// `not_larger` / `not_smaller`, the sizes then rounded half up). `roi` only
/// matters to `tf_crop_and_resize`, which is not supported (and so does
/// `extrapolation_value`, which is read and ignored).
pub(super) fn resize(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let attrs = cx.attrs();
    let mode = attrs.string("mode", "nearest")?;
    if !matches!(mode.as_str(), "nearest" | "linear" | "cubic") {
        return Err(format!("mode '{mode}' is not nearest, linear or cubic"));
    }
    let coordinates = attrs.string("coordinate_transformation_mode", "half_pixel")?;
    match coordinates.as_str() {
        "half_pixel"
        | "half_pixel_symmetric"
        | "pytorch_half_pixel"
        | "align_corners"
        | "asymmetric"
        | "tf_half_pixel_for_nn" => {}
        "tf_crop_and_resize" => {
            return Err("coordinate_transformation_mode 'tf_crop_and_resize' (a crop to the roi input, \
                        extrapolation_value outside it) is not supported"
                .into())
        }
        other => return Err(format!("coordinate_transformation_mode '{other}' is not known")),
    }
    // Read to be ignored: only tf_crop_and_resize, rejected above, samples
    // outside the input; every other mode clamps to the edge, so the value
    // never shows (exporters write the default 0 on any Resize).
    attrs.float("extrapolation_value", 0.0)?;
    let nearest_mode = attrs.string("nearest_mode", "round_prefer_floor")?;
    if !matches!(nearest_mode.as_str(), "round_prefer_floor" | "round_prefer_ceil" | "floor" | "ceil") {
        return Err(format!(
            "nearest_mode '{nearest_mode}' is not round_prefer_floor, round_prefer_ceil, floor or ceil"
        ));
    }
    let flag = |name: &str| -> Result<bool, String> {
        match attrs.int(name, 0)? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(format!("{name} must be 0 or 1, got {v}")),
        }
    };
    let (exclude_outside, antialias) = (flag("exclude_outside")?, flag("antialias")?);
    if mode == "nearest" && (exclude_outside || antialias) {
        return Err("exclude_outside and antialias are not supported with mode 'nearest' (they apply to \
                    linear and cubic interpolation)"
            .into());
    }
    let cubic_coeff_a = f64::from(attrs.float("cubic_coeff_a", -0.75)?);
    let policy = attrs.string("keep_aspect_ratio_policy", "stretch")?;
    if !matches!(policy.as_str(), "stretch" | "not_larger" | "not_smaller") {
        return Err(format!("keep_aspect_ratio_policy '{policy}' is not stretch, not_larger or not_smaller"));
    }
    let x = cx.input(0)?;
    let shape = cx.shape(x)?;
    let rank = shape.len();
    let axes: Vec<usize> = match attrs.opt_ints("axes")? {
        None => (0..rank).collect(),
        Some(axes) => {
            let axes = axes.iter().map(|&a| normalize_axis(a, rank)).collect::<Result<Vec<_>, _>>()?;
            if (1..axes.len()).any(|i| axes[..i].contains(&axes[i])) {
                return Err("'axes' lists a dimension twice".into());
            }
            axes
        }
    };
    let scales_in = resize_input(cx, 2)?;
    let sizes_in = resize_input(cx, 3)?;
    let mut scales = vec![1.0f64; rank];
    let mut sizes: Vec<i64> = shape.iter().map(|&d| if d < 0 { -1 } else { d }).collect();
    match (scales_in, sizes_in) {
        (Some(_), Some(_)) => return Err("only one of the scales and sizes inputs may be given".into()),
        (None, None) => return Err("needs the scales or the sizes input".into()),
        (Some(data), None) => {
            let given = data.floats()?;
            if given.len() != axes.len() {
                return Err(format!("{} scales for {} dimensions", given.len(), axes.len()));
            }
            for (&a, &scale) in axes.iter().zip(&given) {
                if !(scale.is_finite() && scale > 0.0) {
                    return Err(format!("scale {scale} of dimension {a} is not positive"));
                }
                scales[a] = scale;
                if shape[a] >= 0 {
                    sizes[a] = qopt_dialect_fp::resize_scaled_size(shape[a], scale)?;
                }
            }
        }
        (None, Some(data)) => {
            let given = data.ints()?;
            if given.len() != axes.len() {
                return Err(format!("{} sizes for {} dimensions", given.len(), axes.len()));
            }
            let mut ratios = Vec::with_capacity(axes.len());
            for (&a, &size) in axes.iter().zip(&given) {
                if size < 0 {
                    return Err(format!("size {size} of dimension {a} is negative"));
                }
                if shape[a] <= 0 {
                    let what = if shape[a] < 0 { "unknown" } else { "0" };
                    return Err(format!(
                        "dimension {a}'s input size is {what}, so sizes cannot give its scale (fix dynamic sizes \
                         with --batch or --input-shape)"
                    ));
                }
                ratios.push(size as f64 / shape[a] as f64);
            }
            let common = match policy.as_str() {
                "not_larger" => ratios.iter().copied().reduce(f64::min),
                "not_smaller" => ratios.iter().copied().reduce(f64::max),
                _ => None,
            };
            for (k, (&a, &size)) in axes.iter().zip(&given).enumerate() {
                match common {
                    Some(scale) => {
                        scales[a] = scale;
                        sizes[a] = (scale * shape[a] as f64 + 0.5) as i64;
                    }
                    None => {
                        scales[a] = ratios[k];
                        sizes[a] = size;
                    }
                }
                if !(scales[a].is_finite() && scales[a] > 0.0) {
                    return Err(format!("size {size} of dimension {a} gives no positive scale"));
                }
            }
        }
    }
    let ctx = cx.ctx();
    let mut list = AttrList::default();
    let s = ctx.i64_array_attr(&sizes);
    list.push("sizes", s);
    let f64_ty = ctx.common().f64;
    let items: Vec<_> = scales.iter().map(|&v| ctx.float_attr(v, f64_ty)).collect();
    let s = ctx.array_attr(&items);
    list.push("scales", s);
    if mode != "nearest" {
        let m = ctx.string_attr(&mode);
        list.push("mode", m);
    }
    if coordinates != "half_pixel" {
        let c = ctx.string_attr(&coordinates);
        list.push("coordinate_transformation_mode", c);
    }
    if mode == "nearest" && nearest_mode != "round_prefer_floor" {
        let n = ctx.string_attr(&nearest_mode);
        list.push("nearest_mode", n);
    }
    if mode == "cubic" && cubic_coeff_a != -0.75 {
        let f32_ty = ctx.common().f32;
        let a = ctx.float_attr(cubic_coeff_a, f32_ty);
        list.push("cubic_coeff_a", a);
    }
    for (name, on) in [("exclude_outside", exclude_outside), ("antialias", antialias)] {
        if on {
            let t = ctx.bool_attr(true);
            list.push(name, t);
        }
    }
    let attrs = list.dict(ctx);
    let y = cx.emit(fp_op::RESIZE, &[x], attrs)?;
    cx.set_output(0, y)
}

/// `Gather` → `fp.gather` with the node's `axis` (default 0); the indices
/// are an operand (constant ones become an `fp.constant`). Indices that are
/// the stored integers of a quantized value make a table lookup
/// ([`super::lookup`]).
pub(super) fn gather(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let axis = cx.attrs().int("axis", 0)?;
    if super::lookup::gather_lookup(cx, axis)? {
        return Ok(());
    }
    let (x, indices) = (cx.input(0)?, cx.input(1)?);
    let i64_ty = cx.ctx().common().i64;
    let axis = cx.ctx().int_attr(i128::from(axis), i64_ty);
    let attrs = cx.ctx().dict_attr(&[("axis", axis)]);
    let y = cx.emit(fp_op::GATHER, &[x, indices], attrs)?;
    cx.set_output(0, y)
}

/// Appends `fp.reshape` of `x` to the static shape `target`. A 0 in `shape`
/// means "copy the input size" to fp.reshape, so a zero-sized target
/// dimension can only be spelled where the input has 0 at the same index.
pub(super) fn reshape_to(cx: &mut NodeCx<'_, '_>, x: ValueId, target: &[i64]) -> Result<ValueId, String> {
    let input = cx.shape(x)?;
    if target.iter().enumerate().any(|(i, &d)| d == 0 && input.get(i) != Some(&0)) {
        return Err("reshaping to a shape with zero-sized dimensions is not supported".into());
    }
    let ctx = cx.ctx();
    let shape = ctx.i64_array_attr(target);
    let dict = ctx.dict_attr(&[("shape", shape)]);
    cx.emit(fp_op::RESHAPE, &[x], dict)
}

pub(super) fn identity(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    cx.forward_input()
}

pub(super) fn flatten(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let axis = cx.attrs().int("axis", 1)?;
    let x = cx.input(0)?;
    let ctx = cx.ctx();
    let mut list = AttrList::default();
    if axis != 1 {
        let a = ctx.i64_attr(axis);
        list.push("axis", a);
    }
    let dict = list.dict(ctx);
    let y = cx.emit(fp_op::FLATTEN, &[x], dict)?;
    cx.set_output(0, y)
}

pub(super) fn reshape(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let x = cx.input(0)?;
    let shape = cx.const_ints(1)?.ok_or("input #1 (shape) is missing")?;
    if cx.attrs().int("allowzero", 0)? != 0 && shape.contains(&0) {
        return Err("allowzero = 1 with a 0 in the shape (a zero-sized dimension) is not supported".into());
    }
    let ctx = cx.ctx();
    let target = ctx.i64_array_attr(&shape);
    let dict = ctx.dict_attr(&[("shape", target)]);
    let y = cx.emit(fp_op::RESHAPE, &[x], dict)?;
    cx.set_output(0, y)
}

pub(super) fn transpose(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let perm = cx.attrs().opt_ints("perm")?;
    let x = cx.input(0)?;
    let ctx = cx.ctx();
    let mut list = AttrList::default();
    if let Some(perm) = perm {
        let p = ctx.i64_array_attr(&perm);
        list.push("perm", p);
    }
    let dict = list.dict(ctx);
    let y = cx.emit(fp_op::TRANSPOSE, &[x], dict)?;
    cx.set_output(0, y)
}

pub(super) fn concat(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let axis = cx.attrs().opt_int("axis")?.ok_or("attribute 'axis' is missing")?;
    let mut operands = Vec::new();
    let mut i = 0;
    while cx.input_name(i).is_some() {
        operands.push(cx.input(i)?);
        i += 1;
    }
    let ctx = cx.ctx();
    let a = ctx.i64_attr(axis);
    let dict = ctx.dict_attr(&[("axis", a)]);
    let y = cx.emit(fp_op::CONCAT, &operands, dict)?;
    cx.set_output(0, y)
}

pub(super) fn split(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let attrs = cx.attrs();
    let x = cx.input(0)?;
    let shape = cx.shape(x)?;
    let axis = attrs.int("axis", 0)?;
    let dim = shape[normalize_axis(axis, shape.len())?];
    let parts = cx.num_outputs();
    let sizes = if cx.opset() >= 13 { cx.const_ints(1)? } else { attrs.opt_ints("split")? };
    let sizes = match (sizes, attrs.opt_int("num_outputs")?) {
        (Some(sizes), _) => sizes,
        // Opset 18: equal chunks of ⌈dim / n⌉, the last one smaller.
        (None, Some(n)) => {
            if n < 1 || n as usize != parts {
                return Err(format!("attribute 'num_outputs' is {n} but the node has {parts} outputs"));
            }
            let (d, k) = (i128::from(dim), i128::from(n));
            let chunk = (d + k - 1) / k;
            let last = d - chunk * (k - 1);
            if last < 0 {
                return Err(format!("dimension {dim} cannot be split into {n} chunks of {chunk}"));
            }
            // Both fit: 0 ≤ last ≤ chunk ≤ dim.
            let mut sizes = vec![chunk as i64; n as usize - 1];
            sizes.push(last as i64);
            sizes
        }
        (None, None) => {
            let n = parts as i64;
            if n == 0 || dim % n != 0 {
                return Err(format!("dimension {dim} cannot be split evenly into {parts} outputs"));
            }
            vec![dim / n; parts]
        }
    };
    if sizes.len() != parts {
        return Err(format!("{} split sizes for {parts} outputs", sizes.len()));
    }
    let ctx = cx.ctx();
    let mut list = AttrList::default();
    if axis != 0 {
        let a = ctx.i64_attr(axis);
        list.push("axis", a);
    }
    let s = ctx.i64_array_attr(&sizes);
    list.push("sizes", s);
    let dict = list.dict(ctx);
    let results = cx.emit_all(fp_op::SPLIT, &[x], dict)?;
    for (i, v) in results.into_iter().enumerate() {
        cx.set_output(i, v)?;
    }
    Ok(())
}

pub(super) fn pad(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let attrs = cx.attrs();
    let mode = attrs.string("mode", "constant")?;
    if !matches!(mode.as_str(), "constant" | "reflect" | "edge") {
        return Err(format!("mode '{mode}' is not supported (constant, reflect and edge are)"));
    }
    let x = cx.input(0)?;
    let rank = cx.shape(x)?.len();
    let elem = cx.element(x);
    // Opset 11 moved pads and the value from attributes to inputs.
    let (pads, value) = match attrs.opt_ints("pads")? {
        Some(pads) => (pads, f64::from(attrs.float("value", 0.0)?)),
        None => {
            let pads = cx.const_ints(1)?.ok_or("input #1 (pads) is missing")?;
            let value = match cx.const_input(2)? {
                Some(data) => match data.floats()?[..] {
                    [v] => v,
                    _ => return Err("input #2 (constant_value) must hold one value".into()),
                },
                None => 0.0,
            };
            (pads, value)
        }
    };
    let axes = cx.const_ints(3)?;
    let full = match axes {
        None => pads,
        Some(axes) => {
            if pads.len() != 2 * axes.len() {
                return Err(format!("{} pads for {} axes", pads.len(), axes.len()));
            }
            let mut full = vec![0; 2 * rank];
            for (j, &axis) in axes.iter().enumerate() {
                let a = normalize_axis(axis, rank)?;
                full[a] = pads[j];
                full[rank + a] = pads[axes.len() + j];
            }
            full
        }
    };
    if full.iter().any(|&p| p < 0) {
        return Err("negative pads (cropping) are not supported".into());
    }
    let ctx = cx.ctx();
    let mut list = AttrList::default();
    let p = ctx.i64_array_attr(&full);
    list.push("pads", p);
    if mode != "constant" {
        let m = ctx.string_attr(&mode);
        list.push("mode", m);
    }
    if value != 0.0 {
        let v = float_attr(ctx, value, elem);
        list.push("value", v);
    }
    let dict = list.dict(ctx);
    let y = cx.emit(fp_op::PAD, &[x], dict)?;
    cx.set_output(0, y)
}

pub(super) fn slice(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let x = cx.input(0)?;
    let begin = cx.const_ints(1)?.ok_or("input #1 (starts) is missing")?;
    let end = cx.const_ints(2)?.ok_or("input #2 (ends) is missing")?;
    let axes = cx.const_ints(3)?;
    let steps = cx.const_ints(4)?;
    let ctx = cx.ctx();
    let mut list = AttrList::default();
    for (name, values) in [("begin", Some(begin)), ("end", Some(end)), ("axes", axes), ("strides", steps)] {
        if let Some(values) = values {
            let a = ctx.i64_array_attr(&values);
            list.push(name, a);
        }
    }
    let dict = list.dict(ctx);
    let y = cx.emit(fp_op::STRIDED_SLICE, &[x], dict)?;
    cx.set_output(0, y)
}

/// The `axes` of Squeeze / Unsqueeze: an input from opset 13, an attribute before.
fn squeeze_axes(cx: &NodeCx<'_, '_>) -> Result<Option<Vec<i64>>, String> {
    if cx.opset() >= 13 {
        cx.const_ints(1)
    } else {
        cx.attrs().opt_ints("axes")
    }
}

pub(super) fn squeeze(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let x = cx.input(0)?;
    let shape = cx.shape(x)?;
    let mut keep = vec![true; shape.len()];
    match squeeze_axes(cx)? {
        Some(axes) => {
            for axis in axes {
                let a = normalize_axis(axis, shape.len())?;
                if shape[a] != 1 {
                    return Err(format!("cannot squeeze dimension {a} of size {}", shape[a]));
                }
                keep[a] = false;
            }
        }
        None => keep.iter_mut().zip(&shape).for_each(|(k, &d)| *k = d != 1),
    }
    let target: Vec<i64> = shape.iter().zip(&keep).filter(|(_, &k)| k).map(|(&d, _)| d).collect();
    if target == shape {
        return cx.forward_input();
    }
    let y = reshape_to(cx, x, &target)?;
    cx.set_output(0, y)
}

pub(super) fn unsqueeze(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let x = cx.input(0)?;
    let shape = cx.shape(x)?;
    let axes = squeeze_axes(cx)?.ok_or("axes are missing")?;
    let rank = shape.len() + axes.len();
    let mut inserted = vec![false; rank];
    for axis in axes {
        let a = normalize_axis(axis, rank)?;
        if std::mem::replace(&mut inserted[a], true) {
            return Err(format!("axis {a} is listed twice"));
        }
    }
    let mut dims = shape.iter();
    let target: Vec<i64> =
        inserted.iter().map(|&new| if new { 1 } else { dims.next().copied().unwrap_or(1) }).collect();
    let y = reshape_to(cx, x, &target)?;
    cx.set_output(0, y)
}
