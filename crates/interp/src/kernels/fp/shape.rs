//! Shape kernels: `fp.constant`, `fp.reshape`, `fp.flatten`, `fp.transpose`,
//! `fp.concat`, `fp.split`, `fp.pad`, `fp.strided_slice`. They move elements
//! without arithmetic, so they run on every dtype, quantized storage included;
//! padding a quantized tensor with zero writes its zero point (per tensor, or per
//! index of the quantized axis).
//!
//! Result shapes follow the dialect's own rules (`qopt_dialect_fp::reshape_target`
//! and friends) applied to the operands' actual shapes, so a dynamic batch
//! dimension works as the verifier promised.

use super::{one, operand, to_usize, zero_points};
use crate::error::{bail, InterpError};
use crate::registry::{Kernel, KernelContext, KernelResults};
use crate::tensor::{map_tensor, Tensor};
use ndarray::{ArrayD, ArrayViewD, Axis, IxDyn, Slice};
use qopt_dialect_fp::attrs;
use qopt_dialect_fp::op_names as fp_op;
use qopt_dialect_fp::shape::normalize_axis;
use qopt_ir_core::AttrData;

/// The kernels of this family, by op name.
pub(crate) fn kernels() -> Vec<(&'static str, Kernel)> {
    vec![
        (fp_op::CONSTANT, constant),
        (fp_op::RESHAPE, reshape),
        (fp_op::FLATTEN, flatten),
        (fp_op::TRANSPOSE, transpose),
        (fp_op::CONCAT, concat),
        (fp_op::SPLIT, split),
        (fp_op::PAD, pad),
        (fp_op::STRIDED_SLICE, strided_slice),
        (fp_op::GATHER, gather),
        (fp_op::DEPTH_TO_SPACE, depth_to_space),
        (fp_op::SPACE_TO_DEPTH, space_to_depth),
        (fp_op::TILE, tile),
    ]
}

fn shape_err(e: ndarray::ShapeError) -> InterpError {
    InterpError::new(e.to_string())
}

fn dims_i64(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&d| d as i64).collect()
}

/// `fp.constant`: the tensor of its dense `value`.
pub(crate) fn constant(kc: &mut KernelContext<'_>, _: &[&Tensor]) -> Result<KernelResults, InterpError> {
    let Some(value) = kc.ctx.dict_get(kc.attrs, "value") else { bail!("needs a 'value' attribute") };
    let AttrData::Dense(d) = kc.ctx.attr_data(value) else { bail!("'value' is not a dense attribute") };
    one(Tensor::from_dense(kc.ctx, d)?)
}

/// Reshapes `x` (row-major) to `shape`.
fn reshaped(x: &Tensor, shape: &[usize]) -> Result<Tensor, InterpError> {
    if shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d)) != Some(x.len()) {
        bail!("cannot reshape {} into {shape:?}", x.describe());
    }
    Ok(map_tensor!(x, a => a
        .as_standard_layout()
        .into_owned()
        .into_shape_with_order(IxDyn(shape))
        .map_err(shape_err)?))
}

/// `fp.reshape` (ONNX Reshape: 0 copies a size, -1 is inferred).
pub(crate) fn reshape(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    let x = operand(ops, 0)?;
    let target =
        attrs::opt_int_array_in(kc.ctx, kc.attrs, "shape", None)?.ok_or("needs a 'shape' attribute")?;
    let shape = qopt_dialect_fp::reshape_target(&dims_i64(x.shape()), &target)?;
    let shape: Vec<usize> = shape.iter().map(|&d| to_usize(d, "reshaped size")).collect::<Result<_, _>>()?;
    one(reshaped(x, &shape)?)
}

/// `fp.flatten`: 2-D, the dimensions before `axis` times those from it on.
pub(crate) fn flatten(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    let x = operand(ops, 0)?;
    let rank = x.rank() as i64;
    let axis = attrs::int_in(kc.ctx, kc.attrs, "axis", 1)?;
    if axis < -rank || axis > rank {
        bail!("'axis' {axis} is out of range for rank {rank}");
    }
    let axis = if axis < 0 { axis + rank } else { axis } as usize;
    let outer: usize = x.shape()[..axis].iter().product();
    let inner: usize = x.shape()[axis..].iter().product();
    one(reshaped(x, &[outer, inner])?)
}

/// `fp.transpose`: permutes dimensions (reversed by default).
pub(crate) fn transpose(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    let x = operand(ops, 0)?;
    let perm = qopt_dialect_fp::transpose_perm(kc.ctx, kc.attrs, x.rank())?;
    one(map_tensor!(x, a => a.view().permuted_axes(IxDyn(&perm)).as_standard_layout().into_owned()))
}

/// `fp.gather`: slices of `x` along `axis` picked by `indices` (i32 or i64;
/// negative ones count from the end).
pub(crate) fn gather(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    let (x, indices) = (operand(ops, 0)?, operand(ops, 1)?);
    let axis =
        normalize_axis(attrs::int_in(kc.ctx, kc.attrs, "axis", 0)?, x.rank()).map_err(InterpError::new)?;
    let size = x.shape()[axis] as i64;
    let raw: Vec<i64> = match indices {
        Tensor::I64(a) => a.iter().copied().collect(),
        Tensor::I32(a) => a.iter().map(|&v| i64::from(v)).collect(),
        other => bail!("indices must be i32 or i64, got {}", other.dtype()),
    };
    let picks = raw
        .iter()
        .map(|&i| {
            let j = if i < 0 { i + size } else { i };
            usize::try_from(j).ok().filter(|_| j < size).ok_or_else(|| {
                InterpError::new(format!("index {i} is out of range for dimension {axis} of size {size}"))
            })
        })
        .collect::<Result<Vec<usize>, _>>()?;
    let mut shape: Vec<usize> = x.shape()[..axis].to_vec();
    shape.extend_from_slice(indices.shape());
    shape.extend_from_slice(&x.shape()[axis + 1..]);
    one(map_tensor!(x, a => {
        let picked = a.select(Axis(axis), &picks).as_standard_layout().into_owned();
        picked.into_shape_with_order(IxDyn(&shape)).map_err(shape_err)?
    }))
}

/// `a` viewed with shape `split`, its axes permuted by `perm`, and laid out
/// anew with shape `out`: the reshape–transpose–reshape of the ONNX
/// definitions of DepthToSpace and SpaceToDepth.
fn regroup<T: Clone>(
    a: &ArrayD<T>,
    split: &[usize],
    perm: &[usize],
    out: &[usize],
) -> Result<ArrayD<T>, InterpError> {
    let a = a.as_standard_layout();
    let view = a.view().into_shape_with_order(IxDyn(split)).map_err(shape_err)?;
    let moved = view.permuted_axes(IxDyn(perm)).as_standard_layout().into_owned();
    moved.into_shape_with_order(IxDyn(out)).map_err(shape_err)
}

/// `fp.depth_to_space` (DCR or CRD, as ONNX).
pub(crate) fn depth_to_space(
    kc: &mut KernelContext<'_>,
    ops: &[&Tensor],
) -> Result<KernelResults, InterpError> {
    let x = operand(ops, 0)?;
    let (b, crd) = qopt_dialect_fp::depth_space_params(kc.ctx, kc.attrs).map_err(InterpError::new)?;
    let b = b as usize;
    let &[n, c, h, w] = x.shape() else { bail!("input must have rank 4, got shape {:?}", x.shape()) };
    if c % (b * b) != 0 {
        bail!("channels ({c}) must be divisible by blocksize² ({})", b * b);
    }
    let cb = c / (b * b);
    let out = [n, cb, h * b, w * b];
    let (split, perm) = if crd {
        ([n, cb, b, b, h, w], [0, 1, 4, 2, 5, 3])
    } else {
        ([n, b, b, cb, h, w], [0, 3, 4, 1, 5, 2])
    };
    one(map_tensor!(x, a => regroup(a, &split, &perm, &out)?))
}

/// `fp.space_to_depth` (DCR or CRD, as ONNX opset 28; the inverse of
/// `fp.depth_to_space` in the same mode).
pub(crate) fn space_to_depth(
    kc: &mut KernelContext<'_>,
    ops: &[&Tensor],
) -> Result<KernelResults, InterpError> {
    let x = operand(ops, 0)?;
    let (b, crd) = qopt_dialect_fp::depth_space_params(kc.ctx, kc.attrs).map_err(InterpError::new)?;
    let b = b as usize;
    let &[n, c, h, w] = x.shape() else { bail!("input must have rank 4, got shape {:?}", x.shape()) };
    if h % b != 0 || w % b != 0 {
        bail!("height ({h}) and width ({w}) must be divisible by blocksize ({b})");
    }
    // Channel c·b² + i·b + j (CRD) or (i·b + j)·C + c (DCR) takes the pixel at
    // offset (i, j) of each block.
    let perm = if crd { [0, 1, 3, 5, 2, 4] } else { [0, 3, 5, 1, 2, 4] };
    let (split, out) = ([n, c, h / b, b, w / b, b], [n, c * b * b, h / b, w / b]);
    one(map_tensor!(x, a => regroup(a, &split, &perm, &out)?))
}

/// `fp.tile`: the input copied into every block of the repeated shape.
pub(crate) fn tile(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    let x = operand(ops, 0)?;
    let repeats = qopt_dialect_fp::tile_repeats(kc.ctx, kc.attrs, x.rank()).map_err(InterpError::new)?;
    let shape = x.shape().to_vec();
    let out: Vec<usize> = shape.iter().zip(&repeats).map(|(&d, &r)| d * r as usize).collect();
    one(map_tensor!(x, a => {
        let a = a.as_standard_layout();
        ArrayD::from_shape_fn(IxDyn(&out), |index| {
            let at: Vec<usize> = (0..shape.len()).map(|d| index[d] % shape[d].max(1)).collect();
            a[IxDyn(&at)]
        })
    }))
}

fn concat_views<T: Clone>(arrays: &[&ArrayD<T>], axis: usize) -> Result<ArrayD<T>, InterpError> {
    let views: Vec<ArrayViewD<'_, T>> = arrays.iter().map(|a| a.view()).collect();
    ndarray::concatenate(Axis(axis), &views).map_err(shape_err)
}

/// Collects the `$variant` arrays of every tensor in `$ops`, then runs `$body`
/// on them; tensors of another dtype are an error.
macro_rules! same_dtype {
    ($ops:expr, $($variant:ident)|* , $arrays:ident => $body:expr) => {
        match $ops[0] {
            $(Tensor::$variant(_) => {
                let mut $arrays = Vec::with_capacity($ops.len());
                for t in $ops {
                    match t {
                        Tensor::$variant(a) => $arrays.push(a),
                        other => bail!("operands have different dtypes: {} and {}", $ops[0].dtype(), other.dtype()),
                    }
                }
                Tensor::$variant($body)
            })*
        }
    };
}

/// `fp.concat`: joins operands along `axis`.
pub(crate) fn concat(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    let first = operand(ops, 0)?;
    let axis = attrs::opt_int_in(kc.ctx, kc.attrs, "axis")?.ok_or("needs an 'axis' attribute")?;
    let axis = normalize_axis(axis, first.rank())?;
    if ops.iter().any(|t| t.rank() != first.rank()) {
        bail!("concatenated tensors must share one rank");
    }
    one(
        same_dtype!(ops, F32 | F64 | I8 | U8 | I16 | I32 | I64 | Bool, arrays => concat_views(&arrays, axis)?),
    )
}

/// `fp.split`: cuts the operand along `axis` into parts of `sizes`.
pub(crate) fn split(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    let x = operand(ops, 0)?;
    let axis = normalize_axis(attrs::int_in(kc.ctx, kc.attrs, "axis", 0)?, x.rank())?;
    let sizes =
        attrs::opt_int_array_in(kc.ctx, kc.attrs, "sizes", None)?.ok_or("needs a 'sizes' attribute")?;
    let sizes: Vec<usize> = sizes.iter().map(|&s| to_usize(s, "'sizes'")).collect::<Result<_, _>>()?;
    if sizes.iter().try_fold(0usize, |acc, &s| acc.checked_add(s)) != Some(x.shape()[axis]) {
        bail!("'sizes' {sizes:?} do not add up to dimension {axis} of {}", x.describe());
    }
    let mut start = 0usize;
    let mut parts = KernelResults::new();
    for &size in &sizes {
        let slice = Slice::from(start..start + size);
        parts.push(map_tensor!(x, a => a.slice_axis(Axis(axis), slice).to_owned()));
        start += size;
    }
    Ok(parts)
}

/// Source index along one axis of padded position `i` (`begin` padding in front
/// of `size` elements) for "reflect" and "edge" modes.
fn pad_source(i: usize, begin: usize, size: usize, reflect: bool) -> usize {
    let j = i as isize - begin as isize;
    let last = size as isize - 1;
    let k = if reflect {
        // Mirror without repeating the edge; the verifier keeps pads < size.
        let period = 2 * last.max(1);
        let m = j.rem_euclid(period);
        if m > last {
            period - m
        } else {
            m
        }
    } else {
        j.clamp(0, last)
    };
    k.clamp(0, last.max(0)) as usize
}

/// Pads with the values of the tensor itself ("reflect" or "edge"), one axis at a time.
fn pad_from_self<T: Clone>(x: &ArrayD<T>, pads: &[usize], reflect: bool) -> ArrayD<T> {
    let rank = x.ndim();
    let mut out = x.clone();
    for ax in 0..rank {
        let (b, e) = (pads[ax], pads[rank + ax]);
        if b == 0 && e == 0 {
            continue;
        }
        let size = out.shape()[ax];
        let idx: Vec<usize> = (0..size + b + e).map(|i| pad_source(i, b, size, reflect)).collect();
        out = out.select(Axis(ax), &idx);
    }
    out
}

/// Pads with constant `fill` (one value, or one per index of `axis`).
fn pad_constant<T: Clone>(x: &ArrayD<T>, pads: &[usize], fill: &[T], axis: Option<usize>) -> ArrayD<T> {
    let rank = x.ndim();
    let shape: Vec<usize> = (0..rank).map(|i| x.shape()[i] + pads[i] + pads[rank + i]).collect();
    let mut out = ArrayD::from_elem(IxDyn(&shape), fill[0].clone());
    if let Some(axis) = axis {
        for (i, mut lane) in out.axis_iter_mut(Axis(axis)).enumerate() {
            lane.fill(fill[i.min(fill.len() - 1)].clone());
        }
    }
    out.slice_each_axis_mut(|d| {
        let i = d.axis.index();
        Slice::from(pads[i]..pads[i] + x.shape()[i])
    })
    .assign(x);
    out
}

/// Fill values of a constant pad on integer storage: `value` itself, or the zero
/// point(s) of a quantized result (the value is then 0 in real terms).
fn int_fill<T: TryFrom<i64>>(
    zps: Option<&(Vec<i64>, Option<usize>)>,
    value: f64,
) -> Result<Vec<T>, InterpError> {
    let raw = match zps {
        Some((zps, _)) => zps.clone(),
        None => {
            if value.fract() != 0.0 || !value.is_finite() {
                bail!("cannot pad an integer tensor with {value}");
            }
            vec![value as i64]
        }
    };
    raw.into_iter()
        .map(|v| {
            T::try_from(v)
                .map_err(|_| InterpError::new(format!("pad value {v} does not fit the storage type")))
        })
        .collect()
}

/// `fp.pad` (ONNX Pad: "constant", "reflect" or "edge").
pub(crate) fn pad(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    let x = operand(ops, 0)?;
    let rank = x.rank();
    let pads = attrs::opt_int_array_in(kc.ctx, kc.attrs, "pads", Some(2 * rank))?
        .ok_or("needs a 'pads' attribute")?;
    let pads: Vec<usize> = pads.iter().map(|&p| to_usize(p, "'pads'")).collect::<Result<_, _>>()?;
    let mode = attrs::one_of_in(kc.ctx, kc.attrs, "mode", "constant", &["constant", "reflect", "edge"])?;
    let value = attrs::float_in(kc.ctx, kc.attrs, "value", 0.0)?;
    if mode != "constant" {
        if let Some(ax) = (0..rank).find(|&i| {
            let (size, b, e) = (x.shape()[i], pads[i], pads[rank + i]);
            (b > 0 || e > 0) && (size == 0 || (mode == "reflect" && (b >= size || e >= size)))
        }) {
            bail!("\"{mode}\" padding of dimension {ax} does not fit its size {}", x.shape()[ax]);
        }
        let reflect = mode == "reflect";
        return one(map_tensor!(x, a => pad_from_self(a, &pads, reflect)));
    }
    let elem = kc.result_element(0)?;
    let zps = zero_points(kc.ctx, elem);
    let axis = zps.as_ref().and_then(|(_, axis)| *axis);
    if let Some(ax) = axis {
        if ax >= rank || zps.as_ref().is_some_and(|(z, _)| z.len() != x.shape()[ax]) {
            bail!("per-axis zero points along axis {ax} do not fit {}", x.describe());
        }
    }
    let out = match x {
        Tensor::F32(a) => Tensor::F32(pad_constant(a, &pads, &[value as f32], None)),
        Tensor::F64(a) => Tensor::F64(pad_constant(a, &pads, &[value], None)),
        Tensor::I8(a) => Tensor::I8(pad_constant(a, &pads, &int_fill(zps.as_ref(), value)?, axis)),
        Tensor::U8(a) => Tensor::U8(pad_constant(a, &pads, &int_fill(zps.as_ref(), value)?, axis)),
        Tensor::I16(a) => Tensor::I16(pad_constant(a, &pads, &int_fill(zps.as_ref(), value)?, axis)),
        Tensor::I32(a) => Tensor::I32(pad_constant(a, &pads, &int_fill(zps.as_ref(), value)?, axis)),
        Tensor::I64(a) => Tensor::I64(pad_constant(a, &pads, &int_fill(zps.as_ref(), value)?, axis)),
        Tensor::Bool(a) => Tensor::Bool(pad_constant(a, &pads, &[value != 0.0], None)),
    };
    one(out)
}

/// Indices a slice takes from a dimension of `size` (ONNX Slice semantics).
fn slice_indices(size: usize, begin: i64, end: i64, stride: i64) -> Vec<usize> {
    let len = qopt_dialect_fp::slice_len(size as i64, begin, end, stride).max(0) as usize;
    if len == 0 {
        return Vec::new();
    }
    let dim = size as i128;
    let wrap = |v: i128| if v < 0 { v + dim } else { v };
    let first =
        if stride > 0 { wrap(begin as i128).clamp(0, dim) } else { wrap(begin as i128).clamp(0, dim - 1) };
    (0..len as i128).map(|k| (first + k * stride as i128) as usize).collect()
}

/// `fp.strided_slice` (ONNX Slice: negative indices count from the back, then clamp).
pub(crate) fn strided_slice(
    kc: &mut KernelContext<'_>,
    ops: &[&Tensor],
) -> Result<KernelResults, InterpError> {
    let x = operand(ops, 0)?;
    let axes = qopt_dialect_fp::slice_axes(kc.ctx, kc.attrs, x.rank())?;
    let mut out = x.clone();
    for a in &axes {
        let size = out.shape()[a.axis];
        if a.stride == 1 {
            let idx = slice_indices(size, a.begin, a.end, 1);
            let range = idx.first().map_or(0..0, |&s| s..s + idx.len());
            out = map_tensor!(&out, t => t.slice_axis(Axis(a.axis), Slice::from(range)).to_owned());
        } else {
            let idx = slice_indices(size, a.begin, a.end, a.stride);
            out = map_tensor!(&out, t => t.select(Axis(a.axis), &idx));
        }
    }
    one(out)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{f32t, iota, run, run_all, run_err};
    use super::*;
    use qopt_ir_core::Context;

    #[test]
    fn reshape_and_flatten() {
        let mut ctx = Context::new();
        let x = iota(&[2, 3, 4]);
        let r = run(&mut ctx, reshape, &[&x], "{shape = [0, -1]}", &["tensor<2x12xf32>"]);
        assert_eq!(r.shape(), [2, 12]);
        assert_eq!(r.to_f64_vec(), x.to_f64_vec());
        let f = run(&mut ctx, flatten, &[&x], "{axis = 2}", &["tensor<6x4xf32>"]);
        assert_eq!(f.shape(), [6, 4]);
        let f0 = run(&mut ctx, flatten, &[&x], "{axis = 0}", &["tensor<1x24xf32>"]);
        assert_eq!(f0.shape(), [1, 24]);
        assert!(run_all(&mut ctx, reshape, &[&x], "{shape = [5, -1]}", &["tensor<5x5xf32>"]).is_err());
    }

    #[test]
    fn transpose_permutes() {
        let mut ctx = Context::new();
        let x = iota(&[2, 3]);
        let t = run(&mut ctx, transpose, &[&x], "{}", &["tensor<3x2xf32>"]);
        assert_eq!(t.to_f64_vec(), [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
        let x = iota(&[1, 2, 2, 2]);
        let t = run(&mut ctx, transpose, &[&x], "{perm = [0, 2, 3, 1]}", &["tensor<1x2x2x2xf32>"]);
        assert_eq!(t.to_f64_vec(), [0.0, 4.0, 1.0, 5.0, 2.0, 6.0, 3.0, 7.0]);
    }

    #[test]
    fn concat_and_split_are_inverse() {
        let mut ctx = Context::new();
        let a = iota(&[2, 1]);
        let b = f32t(&[2, 2], &[10.0, 11.0, 12.0, 13.0]);
        let c = run(&mut ctx, concat, &[&a, &b], "{axis = -1}", &["tensor<2x3xf32>"]);
        assert_eq!(c.to_f64_vec(), [0.0, 10.0, 11.0, 1.0, 12.0, 13.0]);
        let parts = run_all(
            &mut ctx,
            split,
            &[&c],
            "{axis = 1, sizes = [1, 2]}",
            &["tensor<2x1xf32>", "tensor<2x2xf32>"],
        )
        .unwrap();
        assert_eq!(parts[0], a);
        assert_eq!(parts[1], b);
        let i = Tensor::I32(ndarray::arr2(&[[1]]).into_dyn());
        let e = run_all(&mut ctx, concat, &[&a, &i], "{axis = 0}", &["tensor<3x1xf32>"]).unwrap_err();
        assert!(e.message.contains("different dtypes"), "{e}");
    }

    #[test]
    fn pad_modes() {
        let mut ctx = Context::new();
        let x = f32t(&[3], &[1.0, 2.0, 3.0]);
        let c = run(&mut ctx, pad, &[&x], "{pads = [2, 1], value = 9.0}", &["tensor<6xf32>"]);
        assert_eq!(c.to_f64_vec(), [9.0, 9.0, 1.0, 2.0, 3.0, 9.0]);
        let r = run(&mut ctx, pad, &[&x], "{pads = [2, 2], mode = \"reflect\"}", &["tensor<7xf32>"]);
        assert_eq!(r.to_f64_vec(), [3.0, 2.0, 1.0, 2.0, 3.0, 2.0, 1.0]);
        let e = run(&mut ctx, pad, &[&x], "{pads = [2, 1], mode = \"edge\"}", &["tensor<6xf32>"]);
        assert_eq!(e.to_f64_vec(), [1.0, 1.0, 1.0, 2.0, 3.0, 3.0]);
        let x2 = iota(&[2, 2]);
        let p = run(&mut ctx, pad, &[&x2], "{pads = [1, 0, 0, 1]}", &["tensor<3x3xf32>"]);
        assert_eq!(p.to_f64_vec(), [0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 2.0, 3.0, 0.0]);
    }

    #[test]
    fn pad_quantized_writes_the_zero_point() {
        let mut ctx = Context::new();
        let x = Tensor::U8(ndarray::arr1(&[200u8, 7]).into_dyn());
        let p = run(&mut ctx, pad, &[&x], "{pads = [1, 1]}", &["tensor<4x!qnn.uniform<u8:f32, 0.5:128>>"]);
        assert_eq!(p, Tensor::U8(ndarray::arr1(&[128u8, 200, 7, 128]).into_dyn()));
        let x = Tensor::I8(ndarray::arr2(&[[1i8], [2]]).into_dyn());
        let p = run(
            &mut ctx,
            pad,
            &[&x],
            "{pads = [0, 1, 0, 0]}",
            &["tensor<2x2x!qnn.uniform<i8:f32:0, {0.5:-3, 0.5:4}>>"],
        );
        assert_eq!(p, Tensor::I8(ndarray::arr2(&[[-3i8, 1], [4, 2]]).into_dyn()));
    }

    #[test]
    fn strided_slices() {
        let mut ctx = Context::new();
        let x = iota(&[6]);
        let s = run(
            &mut ctx,
            strided_slice,
            &[&x],
            "{begin = [1], end = [5], strides = [2]}",
            &["tensor<2xf32>"],
        );
        assert_eq!(s.to_f64_vec(), [1.0, 3.0]);
        let s = run(
            &mut ctx,
            strided_slice,
            &[&x],
            "{begin = [-1], end = [-7], strides = [-2]}",
            &["tensor<3xf32>"],
        );
        assert_eq!(s.to_f64_vec(), [5.0, 3.0, 1.0]);
        let s = run(&mut ctx, strided_slice, &[&x], "{begin = [-2], end = [100]}", &["tensor<2xf32>"]);
        assert_eq!(s.to_f64_vec(), [4.0, 5.0]);
        let x = iota(&[2, 3]);
        let s =
            run(&mut ctx, strided_slice, &[&x], "{begin = [1], end = [3], axes = [1]}", &["tensor<2x2xf32>"]);
        assert_eq!(s.to_f64_vec(), [1.0, 2.0, 4.0, 5.0]);
        let e =
            run(&mut ctx, strided_slice, &[&x], "{begin = [5], end = [9], axes = [0]}", &["tensor<0x3xf32>"]);
        assert_eq!(e.shape(), [0, 3]);
    }

    #[test]
    fn gather_picks_slices() {
        let mut ctx = Context::new();
        let table = f32t(&[3, 2], &[0.0, 1.0, 10.0, 11.0, 20.0, 21.0]);
        let ids = Tensor::I64(ndarray::ArrayD::from_shape_vec(IxDyn(&[2, 2]), vec![2, 0, -1, 1]).unwrap());
        let y = run(&mut ctx, gather, &[&table, &ids], "{}", &[]);
        assert_eq!(y.shape(), [2, 2, 2]);
        assert_eq!(y.to_f64_vec(), [20.0, 21.0, 0.0, 1.0, 20.0, 21.0, 10.0, 11.0]);
        let cols = Tensor::I32(ndarray::ArrayD::from_shape_vec(IxDyn(&[1]), vec![1]).unwrap());
        assert_eq!(
            run(&mut ctx, gather, &[&table, &cols], "{axis = 1}", &[]).to_f64_vec(),
            [1.0, 11.0, 21.0]
        );
        let bad = Tensor::I64(ndarray::ArrayD::from_shape_vec(IxDyn(&[1]), vec![3]).unwrap());
        assert!(run_err(&mut ctx, gather, &[&table, &bad], "{}").contains("out of range"));
    }

    #[test]
    fn depth_space_round_trip_and_tile() {
        let mut ctx = Context::new();
        // ONNX's DepthToSpace example, DCR: 1×8×2×3 with values 0..48 becomes 1×2×4×6.
        let x = iota(&[1, 8, 2, 3]);
        let y = run(&mut ctx, depth_to_space, &[&x], "{blocksize = 2}", &[]);
        assert_eq!(y.shape(), [1, 2, 4, 6]);
        let v = y.to_f64_vec();
        assert_eq!(&v[..6], &[0.0, 12.0, 1.0, 13.0, 2.0, 14.0]);
        assert_eq!(&v[6..12], &[24.0, 36.0, 25.0, 37.0, 26.0, 38.0]);
        // CRD: the first row interleaves channels 0 and 1.
        let crd = run(&mut ctx, depth_to_space, &[&x], "{blocksize = 2, mode = \"CRD\"}", &[]).to_f64_vec();
        assert_eq!(&crd[..6], &[0.0, 6.0, 1.0, 7.0, 2.0, 8.0]);
        // SpaceToDepth undoes DepthToSpace in the same mode.
        let back = run(&mut ctx, space_to_depth, &[&y], "{blocksize = 2}", &[]);
        assert_eq!(back.shape(), [1, 8, 2, 3]);
        assert_eq!(back.to_f64_vec(), x.to_f64_vec());
        let crd_y = run(&mut ctx, depth_to_space, &[&x], "{blocksize = 2, mode = \"CRD\"}", &[]);
        let crd_back = run(&mut ctx, space_to_depth, &[&crd_y], "{blocksize = 2, mode = \"CRD\"}", &[]);
        assert_eq!(crd_back.to_f64_vec(), x.to_f64_vec());
        // One 2×2 block of two channels (values 0..8): CRD keeps each channel's
        // pixels together, DCR interleaves the channels per pixel.
        let s = iota(&[1, 2, 2, 2]);
        let crd = run(&mut ctx, space_to_depth, &[&s], "{blocksize = 2, mode = \"CRD\"}", &[]);
        assert_eq!(crd.shape(), [1, 8, 1, 1]);
        assert_eq!(crd.to_f64_vec(), [0., 1., 2., 3., 4., 5., 6., 7.]);
        let dcr = run(&mut ctx, space_to_depth, &[&s], "{blocksize = 2}", &[]);
        assert_eq!(dcr.to_f64_vec(), [0., 4., 1., 5., 2., 6., 3., 7.]);
        let t = run(&mut ctx, tile, &[&f32t(&[2, 2], &[1.0, 2.0, 3.0, 4.0])], "{repeats = [1, 2]}", &[]);
        assert_eq!(
            (t.shape().to_vec(), t.to_f64_vec()),
            (vec![2, 4], vec![1.0, 2.0, 1.0, 2.0, 3.0, 4.0, 3.0, 4.0])
        );
    }
}
