//! Pooling kernels: `fp.max_pool2d` / `fp.max_pool1d` (dilation, ceil_mode;
//! padding never wins the max; also on quantized storage),
//! `fp.avg_pool2d` (count_include_pad as ONNX Runtime: the window clipped to
//! the padded input counts) and `fp.global_avg_pool2d`.
//!
//! Max pooling is separable: each input row is reduced along W, then the
//! reduced rows along H, two linear passes, the second vectorized (see
//! `max_pool_any` for why this keeps the window loop's NaN and tie rules).
//! Average pools are direct loops over windows: their cost is linear in the
//! output times the window, small next to the convolutions around them.

use super::{expect_rank, one, operand, to_usize, unsupported, Lowest, Real};
use crate::error::{bail, InterpError};
use crate::registry::{Kernel, KernelContext, KernelResults};
use crate::tensor::Tensor;
use ndarray::{ArrayD, IxDyn};
use qopt_dialect_fp::attrs::PoolAttrs;
use qopt_dialect_fp::op_names as fp_op;
use qopt_dialect_fp::shape::pool_out;

kernel_table! {
    fp_op::MAX_POOL2D => max_pool2d, fp_op::MAX_POOL1D => max_pool1d, fp_op::AVG_POOL2D => avg_pool2d,
    fp_op::GLOBAL_AVG_POOL2D => global_avg_pool2d,
}

/// Window geometry of a 2-D pool (1-D pools use H = 1).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geometry {
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
    kernel: [usize; 2],
    stride: [usize; 2],
    /// top, left, bottom, right
    pad: [usize; 4],
    dilation: [usize; 2],
}

pub(crate) fn geometry(shape: &[usize], a: &PoolAttrs, spatial: usize) -> Result<Geometry, InterpError> {
    let u = |v: i64| to_usize(v, "pool parameters");
    let (h, w) = if spatial == 2 { (shape[2], shape[3]) } else { (1, shape[2]) };
    let (kernel, stride, pad, dilation) = if spatial == 2 {
        (
            [u(a.kernel[0])?, u(a.kernel[1])?],
            [u(a.stride[0])?, u(a.stride[1])?],
            [u(a.pad[0])?, u(a.pad[1])?, u(a.pad[2])?, u(a.pad[3])?],
            [u(a.dilation[0])?, u(a.dilation[1])?],
        )
    } else {
        (
            [1, u(a.kernel[0])?],
            [1, u(a.stride[0])?],
            [0, u(a.pad[0])?, 0, u(a.pad[1])?],
            [1, u(a.dilation[0])?],
        )
    };
    let i = |v: usize| v as i64;
    let oh = pool_out(i(h), i(kernel[0]), i(stride[0]), i(pad[0]), i(pad[2]), i(dilation[0]), a.ceil_mode)?;
    let ow = pool_out(i(w), i(kernel[1]), i(stride[1]), i(pad[1]), i(pad[3]), i(dilation[1]), a.ceil_mode)?;
    Ok(Geometry {
        n: shape[0],
        c: shape[1],
        h,
        w,
        oh: to_usize(oh, "output height")?,
        ow: to_usize(ow, "output width")?,
        kernel,
        stride,
        pad,
        dilation,
    })
}

pub(crate) fn out_shape(g: &Geometry, spatial: usize) -> Vec<usize> {
    if spatial == 2 {
        vec![g.n, g.c, g.oh, g.ow]
    } else {
        vec![g.n, g.c, g.ow]
    }
}

/// Input positions (along one axis) that window `o` covers.
fn taps(
    o: usize,
    stride: usize,
    pad: usize,
    dilation: usize,
    kernel: usize,
    size: usize,
) -> impl Iterator<Item = usize> {
    let start = (o * stride) as isize - pad as isize;
    (0..kernel).filter_map(move |k| {
        let i = start + (k * dilation) as isize;
        (i >= 0 && (i as usize) < size).then_some(i as usize)
    })
}

/// For each output position along one axis, the input positions its window
/// covers (padding dropped), computed once per pool instead of per window.
fn tap_table(
    out: usize,
    stride: usize,
    pad: usize,
    dilation: usize,
    kernel: usize,
    size: usize,
) -> Vec<Vec<usize>> {
    (0..out).map(|o| taps(o, stride, pad, dilation, kernel, size).collect()).collect()
}

/// For each output position along one axis, its window's taps inside the
/// input as (first input position, count); the taps are `first + t·dilation`
/// for t < count (padding dropped). Count 0 for a window wholly in padding.
fn tap_ranges(
    out: usize,
    stride: usize,
    pad: usize,
    dilation: usize,
    kernel: usize,
    size: usize,
) -> Vec<(usize, usize)> {
    (0..out)
        .map(|o| {
            let mut t = taps(o, stride, pad, dilation, kernel, size);
            let first = t.next();
            (first.unwrap_or(0), first.map_or(0, |_| 1 + t.count()))
        })
        .collect()
}

/// The max of `m` and `v` that skips NaN: `v` if it is larger or `m` is NaN.
/// Folded over a window, it gives the first of the largest non-NaN taps (NaN
/// only if all are NaN); integers have no NaN and take the plain max.
#[inline(always)]
#[allow(clippy::eq_op)] // `m != m` is the NaN test, generic over T.
fn max_skip_nan<T: Lowest>(m: T, v: T) -> T {
    if v > m || m != m {
        v
    } else {
        m
    }
}

/// Max pooling in two linear passes per plane: each input row's windows
/// along W into a row buffer, then the buffered rows of each window along H,
/// element by element across the output row (which vectorizes).
///
/// Semantics (of the plain window loop, row-major over the taps): the first
/// tap seeds the max, so a NaN there propagates, and a later tap replaces it
/// only if greater, so among equal maxima (±0) the first in row-major order
/// wins. Both passes fold in tap order with [`max_skip_nan`]: along W within
/// a row, then along H over the rows' results, which picks the same first
/// maximum; the NaN rule is applied by testing the window's first tap. A
/// window wholly in the padding gives `T::LOWEST`.
fn max_pool_any<T: Lowest>(x: &ArrayD<T>, g: &Geometry, spatial: usize) -> Result<ArrayD<T>, InterpError> {
    let x = x.as_standard_layout();
    let Some(xs) = x.as_slice() else { bail!("non-contiguous input") };
    let rows = tap_ranges(g.oh, g.stride[0], g.pad[0], g.dilation[0], g.kernel[0], g.h);
    let cols = tap_ranges(g.ow, g.stride[1], g.pad[1], g.dilation[1], g.kernel[1], g.w);
    let (dy, dx) = (g.dilation[0].max(1), g.dilation[1].max(1));
    let planes = g.n * g.c;
    let mut out = vec![T::LOWEST; planes * g.oh * g.ow];
    if g.oh * g.ow == 0 || g.h * g.w == 0 {
        return ArrayD::from_shape_vec(IxDyn(&out_shape(g, spatial)), out)
            .map_err(|e| InterpError::new(e.to_string()));
    }
    // Row iy of a plane reduced along W: hmax[iy·ow + ox].
    let mut hmax = vec![T::LOWEST; g.h * g.ow];
    for (plane, dst) in xs.chunks_exact(g.h * g.w).zip(out.chunks_exact_mut(g.oh * g.ow)) {
        for (line, hrow) in plane.chunks_exact(g.w).zip(hmax.chunks_exact_mut(g.ow)) {
            for (h, &(first, count)) in hrow.iter_mut().zip(&cols) {
                *h = if count == 0 {
                    T::LOWEST
                } else {
                    let taps = line[first..].iter().step_by(dx).take(count);
                    taps.skip(1).fold(line[first], |m, &v| max_skip_nan(m, v))
                };
            }
        }
        for (orow, &(first, count)) in dst.chunks_exact_mut(g.ow).zip(&rows) {
            if count == 0 {
                continue; // already LOWEST
            }
            orow.copy_from_slice(&hmax[first * g.ow..(first + 1) * g.ow]);
            for t in 1..count {
                let hrow = &hmax[(first + t * dy) * g.ow..][..g.ow];
                for (o, &v) in orow.iter_mut().zip(hrow) {
                    *o = max_skip_nan(*o, v);
                }
            }
            // The NaN rule: a NaN first tap is the result.
            let line = &plane[first * g.w..(first + 1) * g.w];
            for (o, &(cf, cc)) in orow.iter_mut().zip(&cols) {
                let v = line[cf];
                #[allow(clippy::eq_op)]
                if cc > 0 && v != v {
                    *o = v;
                }
            }
        }
    }
    ArrayD::from_shape_vec(IxDyn(&out_shape(g, spatial)), out).map_err(|e| InterpError::new(e.to_string()))
}

fn max_pool(
    kc: &mut KernelContext<'_>,
    ops: &[&Tensor],
    spatial: usize,
) -> Result<KernelResults, InterpError> {
    let x = operand(ops, 0)?;
    expect_rank(x, spatial + 2, "input")?;
    let attrs = PoolAttrs::read_in(kc.ctx, kc.attrs, spatial, true)?;
    let g = geometry(x.shape(), &attrs, spatial)?;
    let out = match x {
        Tensor::F32(a) => Tensor::F32(max_pool_any(a, &g, spatial)?),
        Tensor::F64(a) => Tensor::F64(max_pool_any(a, &g, spatial)?),
        Tensor::I8(a) => Tensor::I8(max_pool_any(a, &g, spatial)?),
        Tensor::U8(a) => Tensor::U8(max_pool_any(a, &g, spatial)?),
        Tensor::I16(a) => Tensor::I16(max_pool_any(a, &g, spatial)?),
        Tensor::I32(a) => Tensor::I32(max_pool_any(a, &g, spatial)?),
        Tensor::I64(a) => Tensor::I64(max_pool_any(a, &g, spatial)?),
        other => return Err(unsupported("max pooling", other)),
    };
    one(out)
}

/// `fp.max_pool2d`.
pub(crate) fn max_pool2d(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    max_pool(kc, ops, 2)
}

/// `fp.max_pool1d`.
pub(crate) fn max_pool1d(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    max_pool(kc, ops, 1)
}

fn avg_pool_real<T: Real>(x: &ArrayD<T>, g: &Geometry, include_pad: bool) -> Result<ArrayD<T>, InterpError> {
    let x = x.as_standard_layout();
    let Some(xs) = x.as_slice() else { bail!("non-contiguous input") };
    let out = window_sums(xs, g, include_pad, T::zero(), |sum, v| sum + v)
        .into_iter()
        .map(|(sum, count)| if count == 0 { T::zero() } else { sum / T::from_f64(count as f64) })
        .collect();
    ArrayD::from_shape_vec(IxDyn(&out_shape(g, 2)), out).map_err(|e| InterpError::new(e.to_string()))
}

/// Every window of an average pool over `xs` (N×C×H×W, row-major), in output
/// order: the sum of its input taps (`add` folded from `zero`, taps in
/// row-major order) and its divisor: the number of input taps, or with
/// `include_pad` the window clipped to the padded input
/// (`count_include_pad`, as ONNX Runtime). `fp.avg_pool2d` divides; the
/// quantized average pool requantizes.
pub(crate) fn window_sums<T: Copy, A: Copy>(
    xs: &[T],
    g: &Geometry,
    include_pad: bool,
    zero: A,
    add: impl Fn(A, T) -> A,
) -> Vec<(A, usize)> {
    let padded = |o: usize, axis: usize, size: usize| -> usize {
        let start = (o * g.stride[axis]) as isize - g.pad[axis] as isize;
        let end = (start + g.kernel[axis] as isize).min((size + g.pad[axis + 2]) as isize);
        (end - start).max(0) as usize
    };
    let rows = tap_table(g.oh, g.stride[0], g.pad[0], 1, g.kernel[0], g.h);
    let cols = tap_table(g.ow, g.stride[1], g.pad[1], 1, g.kernel[1], g.w);
    let mut out = Vec::with_capacity(g.n * g.c * g.oh * g.ow);
    for plane in xs.chunks(g.h * g.w).take(g.n * g.c) {
        for (oy, row_taps) in rows.iter().enumerate() {
            for (ox, col_taps) in cols.iter().enumerate() {
                let mut sum = zero;
                for &iy in row_taps {
                    let line = &plane[iy * g.w..(iy + 1) * g.w];
                    for &ix in col_taps {
                        sum = add(sum, line[ix]);
                    }
                }
                let count = if include_pad {
                    padded(oy, 0, g.h) * padded(ox, 1, g.w)
                } else {
                    row_taps.len() * col_taps.len()
                };
                out.push((sum, count));
            }
        }
    }
    out
}

/// `fp.avg_pool2d`.
pub(crate) fn avg_pool2d(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    let x = operand(ops, 0)?;
    expect_rank(x, 4, "input")?;
    let attrs = PoolAttrs::read_in(kc.ctx, kc.attrs, 2, false)?;
    let g = geometry(x.shape(), &attrs, 2)?;
    match x {
        Tensor::F32(a) => one(Tensor::F32(avg_pool_real(a, &g, attrs.count_include_pad)?)),
        Tensor::F64(a) => one(Tensor::F64(avg_pool_real(a, &g, attrs.count_include_pad)?)),
        other => Err(unsupported(fp_op::AVG_POOL2D, other)),
    }
}

fn global_avg_real<T: Real>(x: &ArrayD<T>) -> Result<ArrayD<T>, InterpError> {
    let s = x.shape();
    let (n, c, hw) = (s[0], s[1], s[2] * s[3]);
    let x = x.as_standard_layout();
    let Some(xs) = x.as_slice() else { bail!("non-contiguous input") };
    let out: Vec<T> = if hw == 0 {
        vec![T::zero(); n * c]
    } else {
        xs.chunks(hw).map(|p| p.iter().fold(T::zero(), |a, &v| a + v) / T::from_f64(hw as f64)).collect()
    };
    ArrayD::from_shape_vec(IxDyn(&[n, c, 1, 1]), out).map_err(|e| InterpError::new(e.to_string()))
}

/// `fp.global_avg_pool2d`: N×C×H×W → N×C×1×1.
pub(crate) fn global_avg_pool2d(
    _: &mut KernelContext<'_>,
    ops: &[&Tensor],
) -> Result<KernelResults, InterpError> {
    let x = operand(ops, 0)?;
    expect_rank(x, 4, "input")?;
    match x {
        Tensor::F32(a) => one(Tensor::F32(global_avg_real(a)?)),
        Tensor::F64(a) => one(Tensor::F64(global_avg_real(a)?)),
        other => Err(unsupported(fp_op::GLOBAL_AVG_POOL2D, other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::fp::tests::{f32t, iota, run, run_err};
    use qopt_ir_core::Context;

    #[test]
    fn max_pools() {
        let mut ctx = Context::new();
        let x = iota(&[1, 1, 4, 4]);
        let y = run(&mut ctx, max_pool2d, &[&x], "{kernel = [2, 2], stride = [2, 2]}", &[]);
        assert_eq!(y, f32t(&[1, 1, 2, 2], &[5., 7., 13., 15.]));
        // Padding never wins: a negative input padded with 1.
        let neg = Tensor::F32(x.as_f32().unwrap().mapv(|v| -v - 1.));
        let y =
            run(&mut ctx, max_pool2d, &[&neg], "{kernel = [2, 2], stride = [2, 2], pad = [1, 1, 1, 1]}", &[]);
        assert_eq!(y, f32t(&[1, 1, 3, 3], &[-1., -2., -4., -5., -6., -8., -13., -14., -16.]));
        // ceil_mode: 5 wide, kernel 2 stride 2 gives 3 windows, the last one partial.
        let x = f32t(&[1, 1, 5], &[1., 5., 2., 4., 3.]);
        let y = run(&mut ctx, max_pool1d, &[&x], "{kernel = [2], stride = [2], ceil_mode = true}", &[]);
        assert_eq!(y, f32t(&[1, 1, 3], &[5., 4., 3.]));
        let y = run(&mut ctx, max_pool1d, &[&x], "{kernel = [2], stride = [2]}", &[]);
        assert_eq!(y, f32t(&[1, 1, 2], &[5., 4.]));
        // Dilation 2: taps i and i + 2.
        let y = run(&mut ctx, max_pool1d, &[&x], "{kernel = [2], dilation = [2]}", &[]);
        assert_eq!(y, f32t(&[1, 1, 3], &[2., 5., 3.]));
        // Quantized storage.
        let q = Tensor::I8(ndarray::arr3(&[[[-5i8, 3, -128, 7]]]).into_dyn());
        let y = run(&mut ctx, max_pool1d, &[&q], "{kernel = [2], stride = [2]}", &[]);
        assert_eq!(y, Tensor::I8(ndarray::arr3(&[[[3i8, 7]]]).into_dyn()));
        assert!(run_err(&mut ctx, max_pool2d, &[&iota(&[1, 1, 4, 4])], "{}").contains("kernel"));
    }

    /// The separable max pool equals the plain window loop bit for bit,
    /// NaN and signed zeros included, over paddings, strides, dilations and
    /// ceil mode.
    #[test]
    fn max_pool_matches_window_loop() {
        let mut ctx = Context::new();
        let (h, w) = (7, 9);
        let mut seed = 5u64;
        let data: Vec<f32> = (0..2 * 3 * h * w)
            .map(|_| {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                match (seed >> 33) % 11 {
                    0 => f32::NAN,
                    1 => -0.0,
                    2 => 0.0,
                    r => r as f32 - 6.0,
                }
            })
            .collect();
        let x = f32t(&[2, 3, h, w], &data);
        for attrs in [
            "{kernel = [3, 3], stride = [2, 2], pad = [1, 1, 1, 1]}",
            "{kernel = [2, 3], stride = [1, 2], pad = [0, 2, 1, 0], dilation = [2, 1]}",
            "{kernel = [3, 2], stride = [3, 2], ceil_mode = true}",
            "{kernel = [1, 1]}",
        ] {
            let y = run(&mut ctx, max_pool2d, &[&x], attrs, &[]);
            let dict = parse_attrs(&mut ctx, attrs);
            let a = PoolAttrs::read_in(&ctx, dict, 2, true).unwrap();
            let g = geometry(x.shape(), &a, 2).unwrap();
            let mut want = Vec::new();
            for plane in data.chunks(h * w) {
                for oy in 0..g.oh {
                    for ox in 0..g.ow {
                        let (mut m, mut first) = (f32::NEG_INFINITY, true);
                        for iy in taps(oy, g.stride[0], g.pad[0], g.dilation[0], g.kernel[0], h) {
                            for ix in taps(ox, g.stride[1], g.pad[1], g.dilation[1], g.kernel[1], w) {
                                let v = plane[iy * w + ix];
                                if first || v > m {
                                    (m, first) = (v, false);
                                }
                            }
                        }
                        want.push(m);
                    }
                }
            }
            let got: Vec<u32> = y.as_f32().unwrap().iter().map(|v| v.to_bits()).collect();
            let want: Vec<u32> = want.iter().map(|v| v.to_bits()).collect();
            assert_eq!(got, want, "{attrs}");
        }
    }

    /// The attribute dictionary written in `.qir` syntax.
    fn parse_attrs(ctx: &mut Context, attrs: &str) -> qopt_ir_core::Attribute {
        ctx.set_allow_unregistered(true);
        let text = format!(
            "module {{\n  func.func @t() {{\n    test.k() {attrs} : () -> ()\n    func.return\n  }}\n}}\n"
        );
        let module = qopt_ir_core::parse_module(ctx, text.as_bytes(), "t.qir").unwrap();
        let func = module.top_level_ops().next().unwrap();
        let k = module.first_op(module.first_block(module.region(func, 0)));
        module.op_attrs(k)
    }

    #[test]
    fn avg_pools() {
        let mut ctx = Context::new();
        let x = iota(&[1, 1, 3, 3]);
        let attrs = "{kernel = [2, 2], stride = [2, 2], pad = [1, 1, 1, 1]}";
        // Windows: {0}, {1,2}, {3,6}, {4,5,7,8}.
        let y = run(&mut ctx, avg_pool2d, &[&x], attrs, &[]);
        assert_eq!(y, f32t(&[1, 1, 2, 2], &[0., 1.5, 4.5, 6.]));
        let attrs = "{kernel = [2, 2], stride = [2, 2], pad = [1, 1, 1, 1], count_include_pad = true}";
        let y = run(&mut ctx, avg_pool2d, &[&x], attrs, &[]);
        assert_eq!(y, f32t(&[1, 1, 2, 2], &[0., 0.75, 2.25, 6.]));
        // ceil_mode with count_include_pad: the last window is clipped to the
        // padded input (3 + 0), so it divides by 1, not 2.
        let x = f32t(&[1, 1, 1, 3], &[2., 4., 6.]);
        let attrs = "{kernel = [1, 2], stride = [1, 2], ceil_mode = true, count_include_pad = true}";
        let y = run(&mut ctx, avg_pool2d, &[&x], attrs, &[]);
        assert_eq!(y, f32t(&[1, 1, 1, 2], &[3., 6.]));
        let y = run(&mut ctx, global_avg_pool2d, &[&iota(&[1, 2, 2, 2])], "{}", &[]);
        assert_eq!(y, f32t(&[1, 2, 1, 1], &[1.5, 5.5]));
    }
}
