//! Shape kernels: `fp.constant`, `fp.reshape`, `fp.flatten`, `fp.transpose`,
//! `fp.concat`, `fp.split`, `fp.pad`, `fp.strided_slice`, `fp.gather`,
//! `fp.depth_to_space`, `fp.space_to_depth`, `fp.tile` and `fp.resize`. They
//! move elements without arithmetic, so they run on every dtype, quantized
//! storage included; padding a quantized tensor with zero writes its zero point
//! (per tensor, or per index of the quantized axis). The exception is linear and
//! cubic `fp.resize`, which interpolates float tensors in f64 exactly as ONNX's
//! reference implementation (`onnx/reference/ops/op_resize.py`) does.
//!
//! Result shapes follow the dialect's own rules (`qopt_dialect_fp::reshape_target`
//! and friends) applied to the operands' actual shapes, so a dynamic batch
//! dimension works as the verifier promised.

use super::{float_map, one, operand, to_usize, zero_points, Real};
use crate::error::{bail, InterpError};
use crate::registry::{Kernel, KernelContext, KernelResults};
use crate::tensor::{map_tensor, Tensor};
use ndarray::{ArrayD, ArrayViewD, Axis, IxDyn, Slice};
use qopt_dialect_fp::attrs;
use qopt_dialect_fp::op_names as fp_op;
use qopt_dialect_fp::shape::normalize_axis;
use qopt_dialect_fp::{NearestMode, ResizeMode, ResizeParams};
use qopt_ir_core::AttrData;

kernel_table! {
    fp_op::CONSTANT => constant, fp_op::RESHAPE => reshape, fp_op::FLATTEN => flatten,
    fp_op::TRANSPOSE => transpose, fp_op::CONCAT => concat, fp_op::SPLIT => split, fp_op::PAD => pad,
    fp_op::STRIDED_SLICE => strided_slice, fp_op::GATHER => gather,
    fp_op::DEPTH_TO_SPACE => depth_to_space, fp_op::SPACE_TO_DEPTH => space_to_depth,
    fp_op::TILE => tile, fp_op::RESIZE => resize,
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

/// The rank-4 operand of `fp.depth_to_space` / `fp.space_to_depth`, its
/// block size, whether the mode is CRD, and its shape.
fn depth_space_operand<'t>(
    kc: &KernelContext<'_>,
    ops: &[&'t Tensor],
) -> Result<(&'t Tensor, usize, bool, [usize; 4]), InterpError> {
    let x = operand(ops, 0)?;
    let (b, crd) = qopt_dialect_fp::depth_space_params(kc.ctx, kc.attrs).map_err(InterpError::new)?;
    let &[n, c, h, w] = x.shape() else { bail!("input must have rank 4, got shape {:?}", x.shape()) };
    Ok((x, b as usize, crd, [n, c, h, w]))
}

/// `fp.depth_to_space` (DCR or CRD, as ONNX).
pub(crate) fn depth_to_space(
    kc: &mut KernelContext<'_>,
    ops: &[&Tensor],
) -> Result<KernelResults, InterpError> {
    let (x, b, crd, [n, c, h, w]) = depth_space_operand(kc, ops)?;
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
    let (x, b, crd, [n, c, h, w]) = depth_space_operand(kc, ops)?;
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

// ---- resize -----------------------------------------------------------------

/// One resized dimension: for each output index, `n` input indices (already
/// clamped into the input) and their weights.
#[derive(Debug)]
struct AxisTaps {
    n: usize,
    index: Vec<usize>,
    weight: Vec<f64>,
}

/// The widest filter `antialias` may build (taps per output index): a scale
/// that small cannot come from a real model and would only exhaust memory.
const MAX_TAPS: usize = 1 << 16;

/// The weights of the neighbours of a coordinate whose distance past its
/// left neighbour is `ratio` (in (0, 1]), as the reference's `_*_coeffs`.
/// Cubic weights are computed in f32, as there: ONNX's `cubic_coeff_a` is an
/// f32 attribute, and numpy computes with an f32 scalar in f32.
fn resize_weights(ratio: f64, scale: f64, p: &ResizeParams) -> Result<Vec<f64>, InterpError> {
    let a = p.cubic_coeff_a as f32;
    let f = |v: f64| v as f32;
    let normalized = |coeffs: Vec<f64>| {
        let sum = coeffs.iter().fold(0.0, |acc, &c| acc + c);
        coeffs.into_iter().map(|c| c / sum).collect::<Vec<f64>>()
    };
    // A filter stretched by 1 / scale, from `start` on (antialias).
    let stretched = |half_width: f64| -> Result<(i64, f64), InterpError> {
        let s = scale.min(1.0);
        let start = (-half_width / s).floor() + 1.0;
        if 2.0 * (1.0 - start) > MAX_TAPS as f64 {
            bail!("scale {scale} is too small for an antialiasing filter");
        }
        Ok((start as i64, s))
    };
    Ok(match (p.mode, p.antialias) {
        (ResizeMode::Nearest, _) => {
            let right = ratio.fract() == 0.0
                || match p.nearest {
                    NearestMode::RoundPreferFloor => ratio > 0.5,
                    NearestMode::RoundPreferCeil => ratio >= 0.5,
                    NearestMode::Floor => false,
                    NearestMode::Ceil => true,
                };
            if right {
                vec![0.0, 1.0]
            } else {
                vec![1.0, 0.0]
            }
        }
        (ResizeMode::Linear, false) => vec![1.0 - ratio, ratio],
        (ResizeMode::Linear, true) => {
            let (start, s) = stretched(1.0)?;
            let footprint = 2 - 2 * start;
            normalized(
                (start..start + footprint)
                    .map(|i| (1.0 - ((i as f64 - ratio) * s).abs()).clamp(0.0, 1.0))
                    .collect(),
            )
        }
        (ResizeMode::Cubic, false) => {
            // Distances 1 + r, r, 1 − r and 2 − r, each rounded to f32.
            let near = |t: f32| ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0;
            let far = |t: f32| ((a * t - 5.0 * a) * t + 8.0 * a) * t - 4.0 * a;
            let q = 1.0 - ratio;
            [far(f(ratio + 1.0)), near(f(ratio)), near(f(q)), far(f(q + 1.0))].map(f64::from).to_vec()
        }
        (ResizeMode::Cubic, true) => {
            let (start, s) = stretched(2.0)?;
            let end = 2 - start;
            // `None` beyond distance 2: the reference's f64 0.0 there makes its
            // array f64, so the normalization divides in f64, else in f32.
            let coeff = |x: f64| {
                let x = x.abs();
                let x2 = x * x;
                let x3 = x * x2;
                if x <= 1.0 {
                    Some((a + 2.0) * f(x3) - (a + 3.0) * f(x2) + 1.0)
                } else if x < 2.0 {
                    Some(a * f(x3) - 5.0 * a * f(x2) + 8.0 * a * f(x) - 4.0 * a)
                } else {
                    None
                }
            };
            let coeffs: Vec<Option<f32>> = (start..end).map(|i| coeff(s * (i as f64 - ratio))).collect();
            let sum = coeffs.iter().fold(0.0f32, |acc, c| acc + c.unwrap_or(0.0));
            if coeffs.contains(&None) {
                coeffs.iter().map(|c| c.map_or(0.0, f64::from) / f64::from(sum)).collect()
            } else {
                coeffs.iter().map(|c| f64::from(c.unwrap_or(0.0) / sum)).collect()
            }
        }
    })
}

/// The taps of one dimension resized from `input` to `output` elements: the
/// reference's `_interpolate_1d_along_axis` (neighbour window, edge clamping,
/// `exclude_outside` renormalization), one output index at a time.
fn axis_taps(input: usize, output: usize, scale: f64, p: &ResizeParams) -> Result<AxisTaps, InterpError> {
    let mut taps = AxisTaps { n: 0, index: Vec::new(), weight: Vec::new() };
    if output == 0 {
        return Ok(taps);
    }
    if input == 0 {
        bail!("cannot resize an empty dimension to {output} elements");
    }
    let last = input as i64 - 1;
    for y in 0..output {
        let x = p.coordinates.source(y as f64, input, output, scale);
        let x_int = x.floor();
        let ratio = if x == x_int { 1.0 } else { x - x_int };
        let mut weights = resize_weights(ratio, scale, p)?;
        let n = weights.len();
        if y == 0 {
            if output.checked_mul(n).is_none_or(|t| t as u64 > crate::exec::MAX_ELEMENTS) {
                bail!("{output} outputs of {n} taps each exceed the interpreter's limit");
            }
            taps.n = n;
            taps.index.reserve(n * output);
            taps.weight.reserve(n * output);
        } else if n != taps.n {
            bail!("the filter width changed within a dimension ({} and {n} taps)", taps.n);
        }
        // The n indices nearest to x, ties to the smaller (the reference pads
        // the input by ceil(n / 2) edge values and works in padded indices).
        let pad = n.div_ceil(2) as i64;
        let padded = x + pad as f64;
        let whole = padded.floor();
        let frac = padded - whole;
        let half = (n / 2) as i64;
        let offset = if n % 2 == 0 {
            if frac == 0.0 {
                -half
            } else {
                1 - half
            }
        } else {
            let base = -(((n - 1) / 2) as i64);
            if frac <= 0.5 {
                base
            } else {
                base + 1
            }
        };
        let first = (whole as i64).saturating_add(offset).saturating_sub(pad);
        if p.exclude_outside {
            for (k, w) in weights.iter_mut().enumerate() {
                let i = first.saturating_add(k as i64);
                if i < 0 || i > last {
                    *w = 0.0;
                }
            }
            let sum = 0.0 + numpy_sum(&weights);
            let sum = if sum == 0.0 { 1.0 } else { sum };
            weights.iter_mut().for_each(|w| *w /= sum);
        }
        for (k, &w) in weights.iter().enumerate() {
            taps.index.push(first.saturating_add(k as i64).clamp(0, last) as usize);
            taps.weight.push(w);
        }
    }
    Ok(taps)
}

/// The sum of `a` as numpy's `sum` over a contiguous axis takes it
/// (pairwise summation): fewer than 8 values one after the other, up to 128
/// in eight interleaved partial sums, more split in two halves (a multiple
/// of 8 first) summed alike. Iterative, with an explicit stack of halves.
fn numpy_sum(a: &[f64]) -> f64 {
    fn block(a: &[f64]) -> f64 {
        if a.len() < 8 {
            return a.iter().fold(-0.0, |acc, &v| acc + v);
        }
        let mut r = [0.0f64; 8];
        r.copy_from_slice(&a[..8]);
        let whole = a.len() - a.len() % 8;
        for chunk in a[8..whole].chunks_exact(8) {
            for (acc, &v) in r.iter_mut().zip(chunk) {
                *acc += v;
            }
        }
        let res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        a[whole..].iter().fold(res, |acc, &v| acc + v)
    }
    enum Task {
        Sum(usize, usize),
        Add,
    }
    let mut tasks = vec![Task::Sum(0, a.len())];
    let mut partial: Vec<f64> = Vec::new();
    while let Some(task) = tasks.pop() {
        match task {
            Task::Sum(start, n) if n <= 128 => partial.push(block(&a[start..start + n])),
            Task::Sum(start, n) => {
                let half = n / 2 - (n / 2) % 8;
                tasks.extend([Task::Add, Task::Sum(start + half, n - half), Task::Sum(start, half)]);
            }
            Task::Add => {
                let right = partial.pop().unwrap_or(0.0);
                let left = partial.pop().unwrap_or(0.0);
                partial.push(left + right);
            }
        }
    }
    partial.pop().unwrap_or(0.0)
}

/// `src` (row-major, `shape`) resized along `axis` to `output` elements:
/// each output element the weighted sum of its taps in f64, summed as numpy
/// sums the reference's products: from 0 in tap order, pairwise
/// ([`numpy_sum`]) when `axis` is the last one of size above 1 (the taps are
/// then numpy's contiguous reduction axis).
fn interpolate_axis(src: &[f64], shape: &[usize], axis: usize, taps: &AxisTaps, output: usize) -> Vec<f64> {
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let input = shape[axis];
    let mut dst = vec![0.0f64; outer * output * inner];
    if inner == 0 {
        return dst;
    }
    if inner == 1 {
        let mut products = vec![0.0f64; taps.n];
        for (o, row) in dst.chunks_exact_mut(output).enumerate() {
            let from = &src[o * input..][..input];
            for (y, d) in row.iter_mut().enumerate() {
                for (k, prod) in products.iter_mut().enumerate() {
                    *prod = taps.weight[y * taps.n + k] * from[taps.index[y * taps.n + k]];
                }
                *d = 0.0 + numpy_sum(&products);
            }
        }
        return dst;
    }
    for (o, block) in dst.chunks_exact_mut(output * inner).enumerate() {
        for (y, row) in block.chunks_exact_mut(inner).enumerate() {
            for k in 0..taps.n {
                let (i, w) = (taps.index[y * taps.n + k], taps.weight[y * taps.n + k]);
                let from = &src[(o * input + i) * inner..][..inner];
                for (d, &v) in row.iter_mut().zip(from) {
                    *d += w * v;
                }
            }
        }
    }
    dst
}

/// Linear or cubic resize of a float array: every dimension that changes,
/// in order, in f64, rounded once at the end.
fn resize_interpolated<T: Real + Into<f64>>(
    a: &ArrayD<T>,
    plans: &[Option<AxisTaps>],
    out_shape: &[usize],
) -> Result<ArrayD<T>, InterpError> {
    let mut shape = a.shape().to_vec();
    let mut values: Vec<f64> = a.iter().map(|&v| v.into()).collect();
    for (axis, plan) in plans.iter().enumerate() {
        if let Some(taps) = plan {
            values = interpolate_axis(&values, &shape, axis, taps, out_shape[axis]);
            shape[axis] = out_shape[axis];
        }
    }
    ArrayD::from_shape_vec(IxDyn(&shape), values.into_iter().map(T::from_f64).collect()).map_err(shape_err)
}

/// Nearest resize of any array: the one tap of each output index, copied.
fn resize_nearest<T: Clone>(a: &ArrayD<T>, plans: &[Option<AxisTaps>]) -> ArrayD<T> {
    let mut out = a.as_standard_layout().into_owned();
    for (axis, plan) in plans.iter().enumerate() {
        if let Some(taps) = plan {
            // Of the two neighbours, the one of weight 1.
            let picks: Vec<usize> = taps
                .index
                .chunks_exact(taps.n.max(1))
                .zip(taps.weight.chunks_exact(taps.n.max(1)))
                .map(|(i, w)| if w[0] == 1.0 { i[0] } else { i[taps.n - 1] })
                .collect();
            out = out.select(Axis(axis), &picks);
        }
    }
    out
}

/// `fp.resize` (ONNX Resize): each dimension whose size or scale changes is
/// resampled in turn; nearest copies values (any dtype, quantized storage
/// included), linear and cubic interpolate float tensors in f64 and round
/// once, like ONNX's reference. The one difference: nearest copies its pick,
/// so an infinite or NaN neighbour of weight 0 does not leak in as NaN
/// (`0 · inf`), as it does in the reference's weighted sum.
pub(crate) fn resize(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    let x = operand(ops, 0)?;
    let params = qopt_dialect_fp::resize_params(kc.ctx, kc.attrs, x.rank()).map_err(InterpError::new)?;
    let mut out_shape = Vec::with_capacity(x.rank());
    for (axis, &input) in x.shape().iter().enumerate() {
        let output = params.out_size(axis, input as i64).map_err(InterpError::new)?;
        out_shape.push(to_usize(output, "resized size")?);
    }
    let elements = out_shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d as u64));
    if elements.is_none_or(|n| n > crate::exec::MAX_ELEMENTS) {
        bail!(
            "the result shape {out_shape:?} exceeds the interpreter's limit of {} elements",
            crate::exec::MAX_ELEMENTS
        );
    }
    let mut plans = Vec::with_capacity(x.rank());
    for (axis, (&input, &output)) in x.shape().iter().zip(&out_shape).enumerate() {
        let scale = params.scales[axis];
        let keep = qopt_dialect_fp::resize_keeps_dimension(input as i64, output as i64, scale);
        plans.push(if keep { None } else { Some(axis_taps(input, output, scale, &params)?) });
    }
    if params.mode == ResizeMode::Nearest {
        return one(map_tensor!(x, a => resize_nearest(a, &plans)));
    }
    one(float_map!(x, fp_op::RESIZE, a => resize_interpolated(a, &plans, &out_shape)?))
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

    /// Runs `fp.resize` on `x` with `attrs` (`.qir` syntax, braces included)
    /// and returns the shape and values.
    fn resized(ctx: &mut Context, x: &Tensor, attrs: &str) -> (Vec<usize>, Vec<f64>) {
        let y = run(ctx, resize, &[x], attrs, &[]);
        (y.shape().to_vec(), y.to_f64_vec())
    }

    fn assert_close(got: &[f64], want: &[f64], tol: f64) {
        assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() <= tol, "{got:?} vs {want:?}");
        }
    }

    #[test]
    fn resize_nearest_onnx_examples() {
        let mut ctx = Context::new();
        // ONNX's resize_upsample_scales_nearest: half_pixel, round_prefer_floor.
        let x = f32t(&[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
        let (shape, v) = resized(&mut ctx, &x, "{scales = [1.0, 1.0, 2.0, 3.0], sizes = [1, 1, 4, 6]}");
        assert_eq!(shape, [1, 1, 4, 6]);
        let top = [1.0, 1.0, 1.0, 2.0, 2.0, 2.0];
        let bottom = [3.0, 3.0, 3.0, 4.0, 4.0, 4.0];
        assert_eq!(v, [top, top, bottom, bottom].concat());
        // resize_downsample_scales_nearest: 2x4 scaled by 0.6 is 1x2 (floor(1.2), floor(2.4)).
        let x = f32t(&[1, 1, 2, 4], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
        let (shape, v) = resized(&mut ctx, &x, "{scales = [1.0, 1.0, 0.6, 0.6], sizes = [1, 1, -1, -1]}");
        assert_eq!((shape, v), (vec![1, 1, 1, 2], vec![1.0, 3.0]));
        // The four roundings on 1-D, asymmetric ×2.5 (x = y / 2.5: 0, 0.4, 0.8,
        // 1.2, 1.6, 2.0, 2.4) and on tf_half_pixel_for_nn ((y + 0.5) / 2: 0.25,
        // 0.75, 1.25, 1.75, 2.25 and 2.75, the last two clamped to the last element).
        let x = f32t(&[3], &[10.0, 20.0, 30.0]);
        for (nearest, want) in [
            ("round_prefer_floor", [10.0, 10.0, 20.0, 20.0, 30.0, 30.0, 30.0]),
            ("round_prefer_ceil", [10.0, 10.0, 20.0, 20.0, 30.0, 30.0, 30.0]),
            ("floor", [10.0, 10.0, 10.0, 20.0, 20.0, 30.0, 30.0]),
            ("ceil", [10.0, 20.0, 20.0, 30.0, 30.0, 30.0, 30.0]),
        ] {
            let attrs = format!(
                "{{coordinate_transformation_mode = \"asymmetric\", nearest_mode = \"{nearest}\", scales = [2.5], sizes = [-1]}}"
            );
            assert_eq!(resized(&mut ctx, &x, &attrs).1, want, "{nearest}");
        }
        let attrs =
            "{coordinate_transformation_mode = \"tf_half_pixel_for_nn\", scales = [2.0], sizes = [6]}";
        assert_eq!(resized(&mut ctx, &x, attrs).1, [10.0, 20.0, 20.0, 30.0, 30.0, 30.0]);
        // A tie: asymmetric ×2 maps y = 1 to x = 0.5.
        let x2 = f32t(&[2], &[10.0, 20.0]);
        let tie = |mode: &str| {
            format!("{{coordinate_transformation_mode = \"asymmetric\", nearest_mode = \"{mode}\", scales = [2.0], sizes = [4]}}")
        };
        assert_eq!(resized(&mut ctx, &x2, &tie("round_prefer_floor")).1, [10.0, 10.0, 20.0, 20.0]);
        assert_eq!(resized(&mut ctx, &x2, &tie("round_prefer_ceil")).1, [10.0, 20.0, 20.0, 20.0]);
    }

    #[test]
    fn resize_linear_onnx_examples() {
        let mut ctx = Context::new();
        let x = f32t(&[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
        // resize_upsample_scales_linear (half_pixel): borders clamp to the edge.
        let (shape, v) =
            resized(&mut ctx, &x, "{mode = \"linear\", scales = [1.0, 1.0, 2.0, 2.0], sizes = [1, 1, 4, 4]}");
        assert_eq!(shape, [1, 1, 4, 4]);
        #[rustfmt::skip]
        let want = [1.0, 1.25, 1.75, 2.0, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3.0, 3.25, 3.75, 4.0];
        assert_eq!(v, want);
        // resize_upsample_scales_linear_align_corners.
        let attrs = "{coordinate_transformation_mode = \"align_corners\", mode = \"linear\", \
                     scales = [1.0, 1.0, 2.0, 2.0], sizes = [1, 1, 4, 4]}";
        let third = 1.0 / 3.0;
        let row = |a: f64| [a, a + third, a + 2.0 * third, a + 1.0];
        let want = [row(1.0), row(1.0 + 2.0 * third), row(1.0 + 4.0 * third), row(3.0)].concat();
        assert_close(&resized(&mut ctx, &x, attrs).1, &want, 1e-6);
        // resize_downsample_scales_linear: 2x4 by 0.6 → 1x2.
        let x = f32t(&[1, 1, 2, 4], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
        let attrs = "{mode = \"linear\", scales = [1.0, 1.0, 0.6, 0.6], sizes = [1, 1, 1, 2]}";
        assert_close(&resized(&mut ctx, &x, attrs).1, &[2.6666666, 4.3333333], 1e-6);
        // Antialiased 4 → 2 by 0.6 (half_pixel): x = 1/3 and 2. The triangle
        // stretched to half-width 1/0.6 weighs indices −1..2 (−1 clamped to 0)
        // by (0.2, 0.8, 0.6, 0) / 1.6 and 0..3 by (0, 0.4, 1, 0.4) / 1.8: 1.375
        // and 3 along a row 1, 2, 3, 4; on both dimensions (rows step by 4)
        // 2.875, 4.5, 9.375 and 11, as ONNX's reference gives.
        let x = f32t(&[1, 1, 4, 4], &(1..=16).map(|v| v as f32).collect::<Vec<_>>());
        let attrs =
            "{antialias = true, mode = \"linear\", scales = [1.0, 1.0, 0.6, 0.6], sizes = [1, 1, 2, 2]}";
        assert_eq!(resized(&mut ctx, &x, attrs).1, [2.875, 4.5, 9.375, 11.0]);
        // pytorch_half_pixel on an output of size 1 samples at −0.5: the first element.
        let x = f32t(&[4], &[1.0, 2.0, 3.0, 4.0]);
        let attrs = "{coordinate_transformation_mode = \"pytorch_half_pixel\", mode = \"linear\", scales = [0.25], sizes = [1]}";
        assert_eq!(resized(&mut ctx, &x, attrs).1, [1.0]);
        let attrs = "{mode = \"linear\", scales = [0.25], sizes = [1]}";
        assert_eq!(resized(&mut ctx, &x, attrs).1, [2.5]);
    }

    #[test]
    fn resize_cubic_and_exclude_outside() {
        let mut ctx = Context::new();
        // Asymmetric ×2: even outputs fall on input samples, whose cubic weights are (0, 0, 1, 0).
        let x = f32t(&[4], &[1.0, -2.0, 5.0, 3.5]);
        let attrs = "{coordinate_transformation_mode = \"asymmetric\", mode = \"cubic\", scales = [2.0], sizes = [8]}";
        let v = resized(&mut ctx, &x, attrs).1;
        assert_eq!([v[0], v[2], v[4], v[6]], [1.0, -2.0, 5.0, 3.5]);
        // Halfway between samples, with A = −0.5, the weights are (−1, 9, 9, −1) / 16.
        let attrs = "{coordinate_transformation_mode = \"asymmetric\", cubic_coeff_a = -0.5 : f32, mode = \"cubic\", scales = [2.0], sizes = [8]}";
        let v = resized(&mut ctx, &x, attrs).1;
        assert_eq!(v[3], (-1.0 + 9.0 * -2.0 + 9.0 * 5.0 - 3.5) / 16.0);
        // A constant stays constant, with or without exclude_outside.
        let c = f32t(&[1, 5], &[2.0; 5]);
        for extra in ["", "exclude_outside = true, ", "antialias = true, "] {
            let attrs = format!("{{{extra}mode = \"cubic\", scales = [1.0, 0.7], sizes = [1, 3]}}");
            assert_close(&resized(&mut ctx, &c, &attrs).1, &[2.0; 3], 1e-6);
        }
        // exclude_outside at the border: x = −0.25 has neighbours −2..1 at
        // distances 1.75, 0.75, 0.25, 1.25; the two outside get weight 0 and
        // the rest renormalize: with A = −0.75, 0.87890625 on 0 and
        // −0.10546875 on 1, so (0.87890625 − 3 · 0.10546875) / 0.7734375 = 8/11.
        let x = f32t(&[2], &[1.0, 3.0]);
        let attrs = "{exclude_outside = true, mode = \"cubic\", scales = [2.0], sizes = [4]}";
        let v = resized(&mut ctx, &x, attrs).1;
        assert_eq!(v[0], f64::from(8.0f32 / 11.0));
    }

    #[test]
    fn resize_copies_quantized_storage_and_checks_attributes() {
        let mut ctx = Context::new();
        let q = Tensor::U8(
            ndarray::ArrayD::from_shape_vec(IxDyn(&[1, 1, 2, 2]), vec![0u8, 7, 128, 255]).unwrap(),
        );
        let y = run(&mut ctx, resize, &[&q], "{scales = [1.0, 1.0, 2.0, 1.0], sizes = [1, 1, 4, 2]}", &[]);
        let want = vec![0u8, 7, 0, 7, 128, 255, 128, 255];
        assert_eq!(y, Tensor::U8(ndarray::ArrayD::from_shape_vec(IxDyn(&[1, 1, 4, 2]), want).unwrap()));
        // Linear needs floats.
        let err = run_err(
            &mut ctx,
            resize,
            &[&q],
            "{mode = \"linear\", scales = [1.0, 1.0, 2.0, 1.0], sizes = [1, 1, 4, 2]}",
        );
        assert!(err.contains("does not support"), "{err}");
        let x = f32t(&[2], &[1.0, 2.0]);
        for (attrs, want) in [
            ("{scales = [2.0]}", "needs 'sizes'"),
            ("{scales = [0.0], sizes = [4]}", "finite and positive"),
            ("{mode = \"bicubic\", scales = [2.0], sizes = [4]}", "'mode' must be one of"),
            (
                "{coordinate_transformation_mode = \"tf_crop_and_resize\", scales = [2.0], sizes = [4]}",
                "must be one of",
            ),
            ("{antialias = true, scales = [2.0], sizes = [4]}", "'antialias' applies to linear and cubic"),
            (
                "{cubic_coeff_a = -0.5, mode = \"linear\", scales = [2.0], sizes = [4]}",
                "'cubic_coeff_a' applies to cubic",
            ),
        ] {
            let err = run_err(&mut ctx, resize, &[&x], attrs);
            assert!(err.contains(want), "{attrs}: {err}");
        }
        let huge = run_err(&mut ctx, resize, &[&x], "{scales = [1.0e12], sizes = [-1]}");
        assert!(huge.contains("limit"), "{huge}");
        let empty = f32t(&[0], &[]);
        assert!(run_err(&mut ctx, resize, &[&empty], "{scales = [2.0], sizes = [3]}").contains("empty"));
        let (shape, _) = resized(&mut ctx, &empty, "{scales = [2.0], sizes = [-1]}");
        assert_eq!(shape, [0]);
    }
}
