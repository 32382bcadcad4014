//! `fp.conv2d` and `fp.conv1d` by im2col + GEMM (ONNX Conv, NCHW / NCL).
//!
//! For each sample and channel group the input patches form a
//! (C/groups·kH·kW) × (H'·W') matrix that is multiplied by the group's weight
//! rows (O/groups × C/groups·kH·kW). For f32 on a CPU with AVX-512F that matrix
//! is never stored: [`conv2d_fused`] hands its description to
//! `crate::gemm::sgemm_patches`, whose GEMM packs panels of it straight from
//! the input and adds the bias as it stores the output. Otherwise (f64, other
//! CPUs) the patches are unrolled into a buffer and multiplied with
//! [`Real::gemm`] (matrixmultiply), accumulating into an output pre-filled with
//! the bias. A 1×1 kernel with stride 1 and no padding multiplies the input
//! directly. `fp.conv1d` is the 2-D case with H = 1.
//!
//! `fp.conv_transpose2d` and `fp.conv_transpose1d` (ONNX ConvTranspose) run
//! the other way round: for each sample and group one GEMM multiplies the
//! group's transposed weight ((O/g·kH·kW) × C/g) by its input channels
//! (C/g × H·W) into a column buffer, which col2im scatter-adds into the output,
//! pre-filled with the bias ([`conv_transpose2d_real`]). The sums are in the
//! element type, as for the convolutions: each GEMM entry is a sum over the
//! group's input channels, and each output value adds the entries that land
//! on it, tap by tap.

use super::{expect_rank, operand, to_usize, unsupported, Real};
use crate::error::{bail, InterpError};
use crate::registry::{Kernel, KernelContext, KernelResults};
use crate::simd::Isa;
use crate::tensor::Tensor;
use ndarray::{s, ArrayD, ArrayView2, ArrayViewMut2, IxDyn};
use qopt_dialect_fp::attrs::{ConvAttrs, ConvTransposeAttrs};
use qopt_dialect_fp::op_names as fp_op;
use qopt_dialect_fp::shape::{conv_out, conv_transpose_out};
use smallvec::smallvec;

kernel_table! {
    fp_op::CONV2D => conv2d, fp_op::CONV1D => conv1d, fp_op::CONV_TRANSPOSE2D => conv_transpose2d,
    fp_op::CONV_TRANSPOSE1D => conv_transpose1d,
}

/// Window parameters of a 2-D convolution, as sizes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Window2 {
    pub stride: [usize; 2],
    /// top, left, bottom, right
    pub pad: [usize; 4],
    pub dilation: [usize; 2],
    pub groups: usize,
}

impl Window2 {
    pub(crate) fn from_attrs(a: &ConvAttrs, n: usize) -> Result<Window2, InterpError> {
        let u = |v: i64| to_usize(v, "window parameters");
        Ok(if n == 2 {
            Window2 {
                stride: [u(a.stride[0])?, u(a.stride[1])?],
                pad: [u(a.pad[0])?, u(a.pad[1])?, u(a.pad[2])?, u(a.pad[3])?],
                dilation: [u(a.dilation[0])?, u(a.dilation[1])?],
                groups: u(a.groups)?,
            }
        } else {
            Window2 {
                stride: [1, u(a.stride[0])?],
                pad: [0, u(a.pad[0])?, 0, u(a.pad[1])?],
                dilation: [1, u(a.dilation[0])?],
                groups: u(a.groups)?,
            }
        })
    }
}

/// The sizes of a 2-D convolution of an N×C×H×W input with an O×(C/g)×kH×kW
/// weight, checked against each other and the window.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConvShape {
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub o: usize,
    /// Input channels per group.
    pub cg: usize,
    pub kh: usize,
    pub kw: usize,
    pub oh: usize,
    pub ow: usize,
}

impl ConvShape {
    /// The sizes of a convolution of input shape `xs` with weight shape `ws`
    /// under `win`, or an error naming the mismatch.
    pub(crate) fn new(xs: &[usize], ws: &[usize], win: &Window2) -> Result<ConvShape, InterpError> {
        let (&[n, c, h, w], &[o, cg, kh, kw]) = (xs, ws) else {
            bail!("input and weight must have rank 4, got {xs:?} and {ws:?}");
        };
        let g = win.groups;
        if g == 0 || cg.checked_mul(g) != Some(c) || o % g != 0 {
            bail!("input has {c} channels and weight {ws:?} with {g} group(s): need C = groups·{cg} and O divisible by groups");
        }
        let [sh, sw] = win.stride;
        let [dh, dw] = win.dilation;
        let [pt, pl, pb, pr] = win.pad;
        let i = |v: usize| i64::try_from(v).map_err(|_| InterpError::new(format!("size {v} is too large")));
        let oh = to_usize(conv_out(i(h)?, i(kh)?, i(sh)?, i(pt)?, i(pb)?, i(dh)?)?, "output height")?;
        let ow = to_usize(conv_out(i(w)?, i(kw)?, i(sw)?, i(pl)?, i(pr)?, i(dw)?)?, "output width")?;
        // The patch matrix and the output are allocated: their sizes must fit
        // (the input and weight sizes do, they are arrays already).
        let sizes = || -> Option<()> {
            let p = oh.checked_mul(ow)?;
            cg.checked_mul(kh)?.checked_mul(kw)?.checked_mul(p)?;
            n.checked_mul(o)?.checked_mul(p)?;
            Some(())
        };
        if sizes().is_none() {
            bail!("the convolution of {xs:?} with {ws:?} is too large");
        }
        Ok(ConvShape { n, c, h, w, o, cg, kh, kw, oh, ow })
    }

    /// Taps per output value: C/g·kH·kW.
    pub(crate) fn taps(&self) -> usize {
        self.cg * self.kh * self.kw
    }
}

/// A 2-D convolution as GEMMs: for each sample and channel group, the group's
/// input patches are unrolled into a (C/g·kH·kW) × (H'·W') matrix (`zero`
/// where a patch reads padding) and `gemm(weights, patches, out)` computes the
/// group's O/g × H'·W' block of `out` (N×O×H'×W', row-major) from its weight
/// rows. A 1×1 kernel with stride 1 and no padding passes the input directly.
/// `x` and `w` are row-major with the sizes of `shape`.
pub(crate) fn conv2d_gemm<T: Copy>(
    x: &[T],
    w: &[T],
    shape: &ConvShape,
    win: &Window2,
    zero: T,
    out: &mut [T],
    mut gemm: impl FnMut(ArrayView2<'_, T>, ArrayView2<'_, T>, ArrayViewMut2<'_, T>),
) -> Result<(), InterpError> {
    let ConvShape { n, c, h, w: wd, o, cg, kh, kw, oh, ow } = *shape;
    let g = win.groups;
    let og = o / g;
    let k = shape.taps();
    let p = oh * ow;
    let wmat = ArrayView2::from_shape((o, k), w).map_err(|e| InterpError::new(e.to_string()))?;
    if x.len() != n * c * h * wd || out.len() != n * o * p {
        bail!("convolution buffers do not match shape {shape:?}");
    }
    let direct = kh == 1 && kw == 1 && win.stride == [1, 1] && win.pad == [0; 4];
    let mut col = if direct { Vec::new() } else { vec![zero; k * p] };
    let plane = h * wd;
    for ni in 0..n {
        for gi in 0..g {
            let xin = &x[(ni * c + gi * cg) * plane..(ni * c + (gi + 1) * cg) * plane];
            let cols = if direct {
                ArrayView2::from_shape((k, p), xin)
            } else {
                im2col(xin, &mut col, [cg, h, wd], [kh, kw], [oh, ow], win, zero);
                ArrayView2::from_shape((k, p), &col[..])
            }
            .map_err(|e| InterpError::new(e.to_string()))?;
            let wg = wmat.slice(s![gi * og..(gi + 1) * og, ..]);
            let dst = &mut out[(ni * o + gi * og) * p..(ni * o + (gi + 1) * og) * p];
            let dst = ArrayViewMut2::from_shape((og, p), dst).map_err(|e| InterpError::new(e.to_string()))?;
            gemm(wg, cols, dst);
        }
    }
    Ok(())
}

/// [`conv2d_gemm`] for f32 without the patch matrix: for each sample and
/// group, `out = weights·patches + bias` by [`crate::gemm::sgemm_patches`],
/// whose AVX-512 GEMM packs its B panels straight from the input. `Ok(false)`
/// (nothing written) when the CPU lacks AVX-512F. `bias` has O entries.
pub(crate) fn conv2d_fused(
    x: &[f32],
    w: &[f32],
    shape: &ConvShape,
    win: &Window2,
    bias: Option<&[f32]>,
    out: &mut [f32],
) -> Result<bool, InterpError> {
    let ConvShape { n, c, h, w: wd, o, cg, kh, kw, oh, ow } = *shape;
    let (g, k, p, plane) = (win.groups, shape.taps(), oh * ow, h * wd);
    let og = o / g;
    if x.len() != n * c * plane
        || w.len() != o * k
        || out.len() != n * o * p
        || bias.is_some_and(|b| b.len() != o)
    {
        bail!("convolution buffers do not match shape {shape:?}");
    }
    for ni in 0..n {
        for gi in 0..g {
            let patches = crate::gemm::Patches {
                x: &x[(ni * c + gi * cg) * plane..][..cg * plane],
                c: cg,
                h,
                w: wd,
                kh,
                kw,
                stride: win.stride,
                pad: [win.pad[0], win.pad[1]],
                dilation: win.dilation,
                oh,
                ow,
            };
            let a = &w[gi * og * k..][..og * k];
            let dst = &mut out[(ni * o + gi * og) * p..][..og * p];
            let bias = bias.map(|b| &b[gi * og..][..og]);
            if !crate::gemm::sgemm_patches(og, a, k, &patches, bias, dst, p).map_err(InterpError::new)? {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// 2-D convolution of N×C×H×W `x` with O×(C/g)×kH×kW `w` and optional [O] bias.
pub(crate) fn conv2d_real<T: Real>(
    x: &ArrayD<T>,
    w: &ArrayD<T>,
    b: Option<&ArrayD<T>>,
    win: &Window2,
) -> Result<ArrayD<T>, InterpError> {
    let shape = ConvShape::new(x.shape(), w.shape(), win)?;
    let (n, o, p) = (shape.n, shape.o, shape.oh * shape.ow);
    if let Some(b) = b {
        if b.shape() != [o] {
            bail!("bias must have shape [{o}], got {:?}", b.shape());
        }
    }
    let x = x.as_standard_layout();
    let w = w.as_standard_layout();
    let (Some(xd), Some(wdata)) = (x.as_slice(), w.as_slice()) else { bail!("non-contiguous operand") };
    let b = b.map(|b| b.as_standard_layout());
    let bias = b.as_ref().and_then(|b| b.as_slice());
    let mut out = vec![T::zero(); n * o * p];
    if win.groups == shape.c && o == shape.c && shape.cg == 1 {
        depthwise_on(Isa::best(), xd, wdata, &shape, win, bias, &mut out);
        return ArrayD::from_shape_vec(IxDyn(&[n, o, shape.oh, shape.ow]), out)
            .map_err(|e| InterpError::new(e.to_string()));
    }
    let direct = shape.kh == 1 && shape.kw == 1 && win.stride == [1, 1] && win.pad == [0; 4];
    if !direct && T::conv_fused(xd, wdata, &shape, win, bias, &mut out)? {
        return ArrayD::from_shape_vec(IxDyn(&[n, o, shape.oh, shape.ow]), out)
            .map_err(|e| InterpError::new(e.to_string()));
    }
    if let Some(b) = &b {
        for (chunk, &bv) in out.chunks_mut(p.max(1)).zip(b.iter().cycle()) {
            chunk.fill(bv);
        }
    }
    conv2d_gemm(xd, wdata, &shape, win, T::zero(), &mut out, |wg, cols, dst| {
        T::gemm(wg, cols, b.is_some(), dst)
    })?;
    ArrayD::from_shape_vec(IxDyn(&[n, o, shape.oh, shape.ow]), out)
        .map_err(|e| InterpError::new(e.to_string()))
}

crate::simd::widened! {
    /// [`depthwise`] compiled for `isa`: the same arithmetic in wider
    /// registers, so the same bits on every path.
    pub(crate) fn depthwise_on<T: Real>(
        x: &[T],
        w: &[T],
        shape: &ConvShape,
        win: &Window2,
        bias: Option<&[T]>,
        out: &mut [T],
    ) = depthwise;
}

/// A depthwise convolution (one input and one output channel per group) done
/// directly, one channel at a time. The zero-padded input rows are split by
/// row-stride phase (plane `pr` holds padded rows pr, pr + sh, ...), so every
/// tap reads one plane at a fixed offset for every output: the sums are
/// accumulated on a grid of oh rows as wide as a padded input row, each tap
/// one contiguous multiply-add over the whole grid (which vectorizes), and
/// output column ox is grid column ox·sw. A column stride above 1 computes
/// the skipped columns too: more multiply-adds, but contiguous ones, where
/// column phases would need strided copies. One output channel per group
/// would make each GEMM a single row, far from its speed.
#[inline(always)]
fn depthwise<T: Real>(x: &[T], w: &[T], shape: &ConvShape, win: &Window2, bias: Option<&[T]>, out: &mut [T]) {
    let ConvShape { n, c, h, w: wd, kh, kw, oh, ow, .. } = *shape;
    if oh == 0 || ow == 0 {
        return;
    }
    let [sh, sw] = win.stride;
    let [dh, dw] = win.dilation;
    let (pt, pl) = (win.pad[0], win.pad[1]);
    // Grid columns: every padded column an output's first tap reads, and the
    // taps' reach beyond the last. Plane rows: every output row plus the
    // largest row shift, and one spare so the grid's unused tail stays inside.
    let grid_w = (ow - 1) * sw + (kw - 1) * dw + 1;
    let shift_r = (kh - 1) * dh / sh;
    let plane_rows = oh + shift_r + 1;
    let plane_len = plane_rows * grid_w;
    // The grid is rounded up to whole blocks of 16; `planes` has that much slack at its end.
    let grid_len = (oh * grid_w).div_ceil(16) * 16;
    let mut planes = vec![T::zero(); sh * plane_len + 16];
    let mut grid = vec![T::zero(); grid_len];
    let mut taps: Vec<(T, usize)> = Vec::with_capacity(kh * kw);
    // Padded column j is input column j − pl: valid for lo..hi.
    let lo = pl.min(grid_w);
    let hi = (wd + pl).clamp(lo, grid_w);
    for ni in 0..n {
        for ci in 0..c {
            let xc = &x[(ni * c + ci) * h * wd..][..h * wd];
            for pr in 0..sh {
                let plane = &mut planes[pr * plane_len..][..plane_len];
                for r in 0..plane_rows {
                    let dst = &mut plane[r * grid_w..][..grid_w];
                    let y = (r * sh + pr).wrapping_sub(pt);
                    if y >= h || lo == hi {
                        dst.fill(T::zero());
                        continue;
                    }
                    dst[..lo].fill(T::zero());
                    dst[hi..].fill(T::zero());
                    dst[lo..hi].copy_from_slice(&xc[y * wd..][..hi - lo]);
                }
            }
            let kc = &w[ci * kh * kw..][..kh * kw];
            taps.clear();
            for ki in 0..kh {
                let (pr, sr) = ((ki * dh) % sh, (ki * dh) / sh);
                for kj in 0..kw {
                    taps.push((kc[ki * kw + kj], pr * plane_len + sr * grid_w + kj * dw));
                }
            }
            let start = bias.map_or(T::zero(), |b| b[ci]);
            accumulate_taps(&planes, &taps, start, &mut grid);
            let oc = &mut out[(ni * c + ci) * oh * ow..][..oh * ow];
            for (row, g) in oc.chunks_exact_mut(ow).zip(grid.chunks(grid_w)) {
                if sw == 1 {
                    row.copy_from_slice(&g[..ow]);
                } else {
                    for (o, chunk) in row.iter_mut().zip(g.chunks(sw)) {
                        *o = chunk[0];
                    }
                }
            }
        }
    }
}

/// `grid[i] = start + Σ weight · planes[offset + i]` over `taps` (weight,
/// offset), in blocks of 64 outputs, then 16, then one: a block's sums stay
/// in registers across the taps, and 64 of them are enough independent
/// additions to hide the adder's latency. Every `offset + grid.len()` is
/// within `planes`. Each output's sum runs over the taps in order, whatever
/// its block, so the result does not depend on the blocking.
#[inline(always)]
fn accumulate_taps<T: Real>(planes: &[T], taps: &[(T, usize)], start: T, grid: &mut [T]) {
    let mut base = 0;
    base += taps_in_blocks::<T, 64>(planes, taps, start, &mut grid[base..], base);
    base += taps_in_blocks::<T, 16>(planes, taps, start, &mut grid[base..], base);
    taps_in_blocks::<T, 1>(planes, taps, start, &mut grid[base..], base);
}

/// [`accumulate_taps`] over the whole blocks of `N` in `grid`, whose first
/// output is number `base`; returns how many outputs it wrote.
#[inline(always)]
fn taps_in_blocks<T: Real, const N: usize>(
    planes: &[T],
    taps: &[(T, usize)],
    start: T,
    grid: &mut [T],
    base: usize,
) -> usize {
    let mut done = 0;
    for block in grid.chunks_exact_mut(N) {
        let mut acc = [start; N];
        for &(wv, offset) in taps {
            let src = &planes[offset + base + done..][..N];
            for l in 0..N {
                acc[l] = acc[l] + wv * src[l];
            }
        }
        block.copy_from_slice(&acc);
        done += N;
    }
    done
}

/// Unrolls the patches of one channel group (`cg`×`h`×`w`, row-major in `x`)
/// into `col`, (cg·kh·kw) rows of oh·ow, `zero` where a patch reads padding.
fn im2col<T: Copy>(
    x: &[T],
    col: &mut [T],
    [cg, h, w]: [usize; 3],
    [kh, kw]: [usize; 2],
    [oh, ow]: [usize; 2],
    win: &Window2,
    zero: T,
) {
    let [sh, sw] = win.stride;
    let [dh, dw] = win.dilation;
    let (pt, pl) = (win.pad[0] as isize, win.pad[1] as isize);
    let p = oh * ow;
    for ci in 0..cg {
        let xc = &x[ci * h * w..(ci + 1) * h * w];
        for ki in 0..kh {
            for kj in 0..kw {
                let row = &mut col[((ci * kh + ki) * kw + kj) * p..][..p];
                // Output columns ox read input column ox·sw + off.
                let off = (kj * dw) as isize - pl;
                let lo = if off >= 0 { 0 } else { ((-off) as usize).div_ceil(sw) }.min(ow);
                let hi = if (w as isize) <= off { 0 } else { (w as isize - off) as usize }
                    .div_ceil(sw)
                    .clamp(lo, ow);
                for oy in 0..oh {
                    let dst = &mut row[oy * ow..(oy + 1) * ow];
                    let iy = (oy * sh + ki * dh) as isize - pt;
                    if iy < 0 || iy >= h as isize {
                        dst.fill(zero);
                        continue;
                    }
                    let src = &xc[iy as usize * w..(iy as usize + 1) * w];
                    dst[..lo].fill(zero);
                    dst[hi..].fill(zero);
                    if lo == hi {
                        // Every column of this tap reads padding (a tap left or
                        // right of the whole input); there is no start to read from.
                        continue;
                    }
                    // lo ≥ ⌈−off / sw⌉ and hi ≤ ⌈(w − off) / sw⌉ keep the reads in `src`.
                    let start = (lo as isize * sw as isize + off) as usize;
                    if sw == 1 {
                        dst[lo..hi].copy_from_slice(&src[start..start + (hi - lo)]);
                    } else {
                        for (d, s) in dst[lo..hi].iter_mut().zip(src[start..].iter().step_by(sw)) {
                            *d = *s;
                        }
                    }
                }
            }
        }
    }
}

/// A 1-D operand (N×C×L) viewed as 2-D (N×C×1×L); a 2-D one (`n` = 2) as is.
fn lift<T: Clone>(a: &ArrayD<T>, n: usize) -> Result<std::borrow::Cow<'_, ArrayD<T>>, InterpError> {
    if n == 2 {
        return Ok(std::borrow::Cow::Borrowed(a));
    }
    let &[s0, s1, s2] = a.shape() else { bail!("operand must have rank 3, got shape {:?}", a.shape()) };
    a.as_standard_layout()
        .into_owned()
        .into_shape_with_order(IxDyn(&[s0, s1, 1, s2]))
        .map(std::borrow::Cow::Owned)
        .map_err(|e| InterpError::new(e.to_string()))
}

/// A 2-D result (N×O×1×L) of a 1-D op back as N×O×L; as is when `n` = 2.
fn drop_h<T>(a: ArrayD<T>, n: usize) -> Result<ArrayD<T>, InterpError> {
    if n == 2 {
        return Ok(a);
    }
    let &[s0, s1, _, s3] = a.shape() else { bail!("result must have rank 4, got shape {:?}", a.shape()) };
    a.into_shape_with_order(IxDyn(&[s0, s1, s3])).map_err(|e| InterpError::new(e.to_string()))
}

fn conv(kc: &mut KernelContext<'_>, ops: &[&Tensor], n: usize) -> Result<KernelResults, InterpError> {
    let attrs = ConvAttrs::read_in(kc.ctx, kc.attrs, n)?;
    let win = Window2::from_attrs(&attrs, n)?;
    let (x, w) = (operand(ops, 0)?, operand(ops, 1)?);
    let b = ops.get(2).copied();
    expect_rank(x, n + 2, "input")?;
    expect_rank(w, n + 2, "weight")?;
    let out = match (x, w, b) {
        (Tensor::F32(x), Tensor::F32(w), None) => {
            Tensor::F32(drop_h(conv2d_real(&*lift(x, n)?, &*lift(w, n)?, None, &win)?, n)?)
        }
        (Tensor::F32(x), Tensor::F32(w), Some(Tensor::F32(b))) => {
            Tensor::F32(drop_h(conv2d_real(&*lift(x, n)?, &*lift(w, n)?, Some(b), &win)?, n)?)
        }
        (Tensor::F64(x), Tensor::F64(w), None) => {
            Tensor::F64(drop_h(conv2d_real(&*lift(x, n)?, &*lift(w, n)?, None, &win)?, n)?)
        }
        (Tensor::F64(x), Tensor::F64(w), Some(Tensor::F64(b))) => {
            Tensor::F64(drop_h(conv2d_real(&*lift(x, n)?, &*lift(w, n)?, Some(b), &win)?, n)?)
        }
        _ if x.dtype() != w.dtype() || b.is_some_and(|b| b.dtype() != x.dtype()) => {
            bail!("operands have different dtypes")
        }
        _ => return Err(unsupported("convolution", x)),
    };
    Ok(smallvec![out])
}

/// `fp.conv2d`.
pub(crate) fn conv2d(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    conv(kc, ops, 2)
}

/// `fp.conv1d`.
pub(crate) fn conv1d(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    conv(kc, ops, 1)
}

/// The sizes of a 2-D transposed convolution of an N×C×H×W input with a
/// C×(O/g)×kH×kW weight, checked against each other and the window.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConvTransposeShape {
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub o: usize,
    /// Input channels per group.
    pub cg: usize,
    /// Output channels per group.
    pub og: usize,
    pub kh: usize,
    pub kw: usize,
    pub oh: usize,
    pub ow: usize,
}

impl ConvTransposeShape {
    /// The sizes of a transposed convolution of input shape `xs` with weight
    /// shape `ws` under `win` and `output_padding` (rows, columns), or an
    /// error naming the mismatch.
    pub(crate) fn new(
        xs: &[usize],
        ws: &[usize],
        win: &Window2,
        output_padding: [usize; 2],
    ) -> Result<ConvTransposeShape, InterpError> {
        let (&[n, c, h, w], &[wc, og, kh, kw]) = (xs, ws) else {
            bail!("input and weight must have rank 4, got {xs:?} and {ws:?}");
        };
        let g = win.groups;
        if g == 0 || c % g != 0 || wc != c {
            bail!(
                "input has {c} channels and weight {ws:?} with {g} group(s): need the weight's dimension 0 \
                 to be C and C divisible by groups"
            );
        }
        let Some(o) = og.checked_mul(g) else {
            bail!("{og} output channels per group in {g} groups overflow")
        };
        let i = |v: usize| i64::try_from(v).map_err(|_| InterpError::new(format!("size {v} is too large")));
        let [sh, sw] = win.stride;
        let [dh, dw] = win.dilation;
        let [pt, pl, pb, pr] = win.pad;
        let [oph, opw] = output_padding;
        let oh = conv_transpose_out(i(h)?, i(kh)?, i(sh)?, i(pt)?, i(pb)?, i(dh)?, i(oph)?)
            .map_err(|e| InterpError::new(format!("along the height: {e}")))?;
        let ow = conv_transpose_out(i(w)?, i(kw)?, i(sw)?, i(pl)?, i(pr)?, i(dw)?, i(opw)?)
            .map_err(|e| InterpError::new(format!("along the width: {e}")))?;
        let (oh, ow) = (to_usize(oh, "output height")?, to_usize(ow, "output width")?);
        // The column buffer, the transposed weight and the output are
        // allocated: their sizes must fit.
        let sizes = || -> Option<()> {
            og.checked_mul(kh)?.checked_mul(kw)?.checked_mul(h.checked_mul(w)?)?;
            n.checked_mul(o)?.checked_mul(oh.checked_mul(ow)?)?;
            Some(())
        };
        if sizes().is_none() {
            bail!("the transposed convolution of {xs:?} with {ws:?} is too large");
        }
        Ok(ConvTransposeShape { n, c, h, w, o, cg: c / g, og, kh, kw, oh, ow })
    }
}

/// 2-D transposed convolution of N×C×H×W `x` with C×(O/g)×kH×kW `w`, optional
/// [O] bias, window `win` and `output_padding` (rows, columns at the end).
pub(crate) fn conv_transpose2d_real<T: Real>(
    x: &ArrayD<T>,
    w: &ArrayD<T>,
    b: Option<&ArrayD<T>>,
    win: &Window2,
    output_padding: [usize; 2],
) -> Result<ArrayD<T>, InterpError> {
    let shape = ConvTransposeShape::new(x.shape(), w.shape(), win, output_padding)?;
    let ConvTransposeShape { n, c, h, w: wd, o, cg, og, kh, kw, oh, ow } = shape;
    if let Some(b) = b {
        if b.shape() != [o] {
            bail!("bias must have shape [{o}], got {:?}", b.shape());
        }
    }
    let x = x.as_standard_layout();
    let w = w.as_standard_layout();
    let (Some(xd), Some(wdata)) = (x.as_slice(), w.as_slice()) else { bail!("non-contiguous operand") };
    let (g, m, p, plane) = (win.groups, og * kh * kw, h * wd, oh * ow);
    let mut out = vec![T::zero(); n * o * plane];
    if let Some(b) = b {
        for (chunk, &bv) in out.chunks_mut(plane.max(1)).zip(b.iter().cycle()) {
            chunk.fill(bv);
        }
    }
    if m == 0 || cg == 0 {
        // No taps or no input channels: the bias alone.
        return ArrayD::from_shape_vec(IxDyn(&[n, o, oh, ow]), out)
            .map_err(|e| InterpError::new(e.to_string()));
    }
    // Each group's weight rows (C/g of them, O/g·kH·kW long) transposed into
    // an (O/g·kH·kW) × C/g matrix, so the GEMM reads both operands row-major.
    let mut wt = vec![T::zero(); g * m * cg];
    for gi in 0..g {
        let src = &wdata[gi * cg * m..][..cg * m];
        let dst = &mut wt[gi * m * cg..][..m * cg];
        for ci in 0..cg {
            for r in 0..m {
                dst[r * cg + ci] = src[ci * m + r];
            }
        }
    }
    let mut col = vec![T::zero(); m * p];
    let err = |e: ndarray::ShapeError| InterpError::new(e.to_string());
    for ni in 0..n {
        for gi in 0..g {
            let a = ArrayView2::from_shape((m, cg), &wt[gi * m * cg..][..m * cg]).map_err(err)?;
            let xg = ArrayView2::from_shape((cg, p), &xd[(ni * c + gi * cg) * p..][..cg * p]).map_err(err)?;
            T::gemm(a, xg, false, ArrayViewMut2::from_shape((m, p), &mut col[..]).map_err(err)?);
            let dst = &mut out[(ni * o + gi * og) * plane..][..og * plane];
            col2im_add(&col, dst, og, [h, wd], [kh, kw], [oh, ow], win);
        }
    }
    ArrayD::from_shape_vec(IxDyn(&[n, o, oh, ow]), out).map_err(|e| InterpError::new(e.to_string()))
}

/// Adds the column buffer of one sample and group (`og`·kh·kw rows of h·w,
/// row (oc·kh + ki)·kw + kj holding tap (ki, kj) of output channel oc for
/// every input position) into that group's `og` output planes of oh×ow:
/// input position (iy, ix) lands on (iy·sh + ki·dh − pt, ix·sw + kj·dw − pl),
/// and is dropped outside the plane.
fn col2im_add<T: Real>(
    col: &[T],
    out: &mut [T],
    og: usize,
    [h, w]: [usize; 2],
    [kh, kw]: [usize; 2],
    [oh, ow]: [usize; 2],
    win: &Window2,
) {
    let [sh, sw] = win.stride;
    let [dh, dw] = win.dilation;
    let (pt, pl) = (win.pad[0] as isize, win.pad[1] as isize);
    let p = h * w;
    for oc in 0..og {
        let plane = &mut out[oc * oh * ow..][..oh * ow];
        for ki in 0..kh {
            for kj in 0..kw {
                let row = &col[((oc * kh + ki) * kw + kj) * p..][..p];
                // Input column ix lands on output column ix·sw + off: the
                // valid run lo..hi keeps it inside 0..ow.
                let off = (kj * dw) as isize - pl;
                let lo = if off >= 0 { 0 } else { ((-off) as usize).div_ceil(sw) }.min(w);
                let hi = if (ow as isize) <= off { 0 } else { (ow as isize - off) as usize }
                    .div_ceil(sw)
                    .clamp(lo, w);
                if lo == hi {
                    continue;
                }
                let start = (lo as isize * sw as isize + off) as usize;
                for iy in 0..h {
                    let oy = (iy * sh + ki * dh) as isize - pt;
                    if oy < 0 || oy >= oh as isize {
                        continue;
                    }
                    let src = &row[iy * w + lo..iy * w + hi];
                    let dst = &mut plane[oy as usize * ow..][..ow];
                    if sw == 1 {
                        for (d, &s) in dst[start..start + (hi - lo)].iter_mut().zip(src) {
                            *d = *d + s;
                        }
                    } else {
                        for (d, &s) in dst[start..].iter_mut().step_by(sw).zip(src) {
                            *d = *d + s;
                        }
                    }
                }
            }
        }
    }
}

fn conv_transpose(
    kc: &mut KernelContext<'_>,
    ops: &[&Tensor],
    n: usize,
) -> Result<KernelResults, InterpError> {
    let attrs = ConvTransposeAttrs::read_in(kc.ctx, kc.attrs, n)?;
    let win = Window2::from_attrs(&attrs.window, n)?;
    let u = |v: i64| to_usize(v, "output padding");
    let output_padding = if n == 2 {
        [u(attrs.output_padding[0])?, u(attrs.output_padding[1])?]
    } else {
        [0, u(attrs.output_padding[0])?]
    };
    let (x, w) = (operand(ops, 0)?, operand(ops, 1)?);
    let b = ops.get(2).copied();
    expect_rank(x, n + 2, "input")?;
    expect_rank(w, n + 2, "weight")?;
    let out = match (x, w, b) {
        (Tensor::F32(x), Tensor::F32(w), None) => Tensor::F32(drop_h(
            conv_transpose2d_real(&*lift(x, n)?, &*lift(w, n)?, None, &win, output_padding)?,
            n,
        )?),
        (Tensor::F32(x), Tensor::F32(w), Some(Tensor::F32(b))) => Tensor::F32(drop_h(
            conv_transpose2d_real(&*lift(x, n)?, &*lift(w, n)?, Some(b), &win, output_padding)?,
            n,
        )?),
        (Tensor::F64(x), Tensor::F64(w), None) => Tensor::F64(drop_h(
            conv_transpose2d_real(&*lift(x, n)?, &*lift(w, n)?, None, &win, output_padding)?,
            n,
        )?),
        (Tensor::F64(x), Tensor::F64(w), Some(Tensor::F64(b))) => Tensor::F64(drop_h(
            conv_transpose2d_real(&*lift(x, n)?, &*lift(w, n)?, Some(b), &win, output_padding)?,
            n,
        )?),
        _ if x.dtype() != w.dtype() || b.is_some_and(|b| b.dtype() != x.dtype()) => {
            bail!("operands have different dtypes")
        }
        _ => return Err(unsupported("transposed convolution", x)),
    };
    Ok(smallvec![out])
}

/// `fp.conv_transpose2d`.
pub(crate) fn conv_transpose2d(
    kc: &mut KernelContext<'_>,
    ops: &[&Tensor],
) -> Result<KernelResults, InterpError> {
    conv_transpose(kc, ops, 2)
}

/// `fp.conv_transpose1d`.
pub(crate) fn conv_transpose1d(
    kc: &mut KernelContext<'_>,
    ops: &[&Tensor],
) -> Result<KernelResults, InterpError> {
    conv_transpose(kc, ops, 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::fp::tests::{f32t, iota, run, run_err};
    use qopt_ir_core::Context;

    /// Direct (slow) convolution, the definition, to check im2col against.
    fn naive(x: &Tensor, w: &Tensor, b: Option<&Tensor>, win: &Window2) -> Tensor {
        let (x, w) = (x.as_f32().unwrap(), w.as_f32().unwrap());
        let (n, c, h, wd) = (x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3]);
        let (o, cg, kh, kw) = (w.shape()[0], w.shape()[1], w.shape()[2], w.shape()[3]);
        let og = o / win.groups;
        let oh = (h + win.pad[0] + win.pad[2] - win.dilation[0] * (kh - 1) - 1) / win.stride[0] + 1;
        let ow = (wd + win.pad[1] + win.pad[3] - win.dilation[1] * (kw - 1) - 1) / win.stride[1] + 1;
        let mut out = vec![0f32; n * o * oh * ow];
        for ni in 0..n {
            for oc in 0..o {
                let gi = oc / og;
                for y in 0..oh {
                    for xx in 0..ow {
                        let mut acc = b.map_or(0.0, |b| b.as_f32().unwrap()[[oc]]);
                        for ci in 0..cg {
                            for ki in 0..kh {
                                for kj in 0..kw {
                                    let iy = (y * win.stride[0] + ki * win.dilation[0]) as isize
                                        - win.pad[0] as isize;
                                    let ix = (xx * win.stride[1] + kj * win.dilation[1]) as isize
                                        - win.pad[1] as isize;
                                    if iy >= 0 && ix >= 0 && (iy as usize) < h && (ix as usize) < wd {
                                        acc += x[[ni, gi * cg + ci, iy as usize, ix as usize]]
                                            * w[[oc, ci, ki, kj]];
                                    }
                                }
                            }
                        }
                        out[((ni * o + oc) * oh + y) * ow + xx] = acc;
                    }
                }
            }
        }
        let _ = c;
        f32t(&[n, o, oh, ow], &out)
    }

    #[test]
    fn hand_computed() {
        let mut ctx = Context::new();
        // 1×1×3×3 input 0..8, 2×2 kernel of ones, pad 1 stride 2: windows at
        // (-1,-1), (-1,1), (1,-1), (1,1).
        let x = iota(&[1, 1, 3, 3]);
        let w = f32t(&[1, 1, 2, 2], &[1.; 4]);
        let y = run(&mut ctx, conv2d, &[&x, &w], "{pad = [1, 1, 1, 1], stride = [2, 2]}", &[]);
        assert_eq!(y, f32t(&[1, 1, 2, 2], &[0., 1. + 2., 3. + 6., 4. + 5. + 7. + 8.]));
        // Dilation 2 on a 3×3 kernel over 5×5 reads the corners and edges' middles.
        let x = iota(&[1, 1, 5, 5]);
        let w = f32t(&[1, 1, 2, 2], &[1., 0., 0., 1.]);
        let y = run(&mut ctx, conv2d, &[&x, &w], "{dilation = [2, 2]}", &[]);
        assert_eq!(y, f32t(&[1, 1, 3, 3], &[12., 14., 16., 22., 24., 26., 32., 34., 36.]));
        // Bias, two groups (each output sees its own channel).
        let x = iota(&[1, 2, 1, 2]);
        let w = f32t(&[2, 1, 1, 1], &[10., 100.]);
        let b = f32t(&[2], &[1., 2.]);
        let y = run(&mut ctx, conv2d, &[&x, &w, &b], "{groups = 2}", &[]);
        assert_eq!(y, f32t(&[1, 2, 1, 2], &[1., 11., 202., 302.]));
        // conv1d, pad [1, 0].
        let x = f32t(&[1, 1, 3], &[1., 2., 3.]);
        let w = f32t(&[1, 1, 2], &[1., 10.]);
        let y = run(&mut ctx, conv1d, &[&x, &w], "{pad = [1, 0]}", &[]);
        assert_eq!(y, f32t(&[1, 1, 3], &[10., 21., 32.]));
    }

    #[test]
    fn matches_direct_convolution() {
        let cases = [
            Window2 { stride: [1, 1], pad: [1, 1, 1, 1], dilation: [1, 1], groups: 1 },
            Window2 { stride: [2, 3], pad: [0, 2, 1, 0], dilation: [1, 2], groups: 2 },
            Window2 { stride: [1, 1], pad: [0, 0, 0, 0], dilation: [1, 1], groups: 1 },
            Window2 { stride: [3, 1], pad: [2, 2, 2, 2], dilation: [2, 1], groups: 4 },
        ];
        for (i, win) in cases.iter().enumerate() {
            let kernel = if i == 2 { 1 } else { 3 };
            let x = Tensor::F32(iota(&[2, 4, 7, 6]).as_f32().unwrap().mapv(|v| (v * 0.37).sin()));
            let w = Tensor::F32(
                iota(&[8, 4 / win.groups, kernel, kernel]).as_f32().unwrap().mapv(|v| (v * 0.11).cos()),
            );
            let b = iota(&[8]);
            let (Tensor::F32(xa), Tensor::F32(wa), Tensor::F32(ba)) = (&x, &w, &b) else { unreachable!() };
            let got = Tensor::F32(conv2d_real(xa, wa, Some(ba), win).unwrap());
            let want = naive(&x, &w, Some(&b), win);
            assert!(got.all_close(&want, 1e-5, 1e-5), "case {i}: {got:?}\n{want:?}");
        }
        // Depthwise (one channel per group): the direct kernel, with strides,
        // dilations, asymmetric padding and taps wholly in the padding.
        let depthwise = [
            (Window2 { stride: [1, 1], pad: [1, 1, 1, 1], dilation: [1, 1], groups: 4 }, 3),
            (Window2 { stride: [2, 2], pad: [0, 1, 1, 0], dilation: [1, 1], groups: 4 }, 3),
            (Window2 { stride: [1, 3], pad: [2, 0, 2, 3], dilation: [2, 2], groups: 4 }, 3),
            (Window2 { stride: [2, 1], pad: [0, 0, 0, 0], dilation: [1, 1], groups: 4 }, 5),
        ];
        for (i, (win, kernel)) in depthwise.iter().enumerate() {
            let x = Tensor::F32(iota(&[2, 4, 7, 6]).as_f32().unwrap().mapv(|v| (v * 0.37).sin()));
            let w = Tensor::F32(iota(&[4, 1, *kernel, *kernel]).as_f32().unwrap().mapv(|v| (v * 0.11).cos()));
            let b = iota(&[4]);
            let (Tensor::F32(xa), Tensor::F32(wa), Tensor::F32(ba)) = (&x, &w, &b) else { unreachable!() };
            let got = Tensor::F32(conv2d_real(xa, wa, Some(ba), win).unwrap());
            let want = naive(&x, &w, Some(&b), win);
            assert!(got.all_close(&want, 1e-5, 1e-5), "depthwise case {i}: {got:?}\n{want:?}");
            // Every vector ISA the CPU has computes the same bits as the baseline.
            let shape = ConvShape::new(xa.shape(), wa.shape(), win).unwrap();
            let (xs, ws, bs) = (xa.as_slice().unwrap(), wa.as_slice().unwrap(), ba.as_slice().unwrap());
            let run = |isa| {
                let mut out = vec![0.0f32; shape.n * shape.o * shape.oh * shape.ow];
                depthwise_on(isa, xs, ws, &shape, win, Some(bs), &mut out);
                out
            };
            let base = run(Isa::Base);
            for isa in [Isa::Avx512, Isa::Avx2] {
                if Isa::best() <= isa {
                    assert_eq!(run(isa), base, "depthwise case {i} on {isa:?}");
                } else if i == 0 {
                    eprintln!("skipping the {isa:?} depthwise path: this CPU does not have it");
                }
            }
        }
    }

    #[test]
    fn taps_entirely_in_the_padding() {
        // A 1-wide input, a 1×2 kernel with dilation 2 and 2 columns of right
        // padding: the second tap reads only padding. Likewise on the left.
        let mut ctx = Context::new();
        let x = f32t(&[1, 1, 1, 1], &[3.]);
        let w = f32t(&[1, 1, 1, 2], &[1., 10.]);
        let y = run(&mut ctx, conv2d, &[&x, &w], "{dilation = [1, 2], pad = [0, 0, 0, 2]}", &[]);
        assert_eq!(y, f32t(&[1, 1, 1, 1], &[3.]));
        let y = run(&mut ctx, conv2d, &[&x, &w], "{dilation = [1, 2], pad = [0, 2, 0, 0]}", &[]);
        assert_eq!(y, f32t(&[1, 1, 1, 1], &[30.]));
    }

    #[test]
    fn bad_operands() {
        let mut ctx = Context::new();
        let x = iota(&[1, 3, 4, 4]);
        let w = iota(&[2, 2, 3, 3]);
        assert!(run_err(&mut ctx, conv2d, &[&x, &w], "{}").contains("channels"));
        let w = iota(&[2, 3, 5, 5]);
        assert!(run_err(&mut ctx, conv2d, &[&x, &w], "{}").contains("larger than the padded input"));
        assert!(run_err(&mut ctx, conv2d, &[&x], "{}").contains("operand"));
        let w = iota(&[2, 3, 3, 3]);
        assert!(run_err(&mut ctx, conv2d, &[&x, &w], "{stride = [0, 1]}").contains("stride"));
    }

    /// The definition of a transposed convolution, in f64: every input value
    /// times every tap, added where it lands (`win` and `output_padding` as
    /// the kernel takes them).
    fn naive_transpose(
        x: &ArrayD<f32>,
        w: &ArrayD<f32>,
        b: Option<&[f32]>,
        win: &Window2,
        output_padding: [usize; 2],
    ) -> (Vec<usize>, Vec<f64>) {
        let (n, c, h, wd) = (x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3]);
        let (og, kh, kw) = (w.shape()[1], w.shape()[2], w.shape()[3]);
        let g = win.groups;
        let (cg, o) = (c / g, og * g);
        let full = |i: usize, k: usize, s: usize, d: usize, op: usize| s * (i - 1) + op + d * (k - 1) + 1;
        let oh = full(h, kh, win.stride[0], win.dilation[0], output_padding[0]) - win.pad[0] - win.pad[2];
        let ow = full(wd, kw, win.stride[1], win.dilation[1], output_padding[1]) - win.pad[1] - win.pad[3];
        let mut out = vec![0f64; n * o * oh * ow];
        for ni in 0..n {
            for oc in 0..o {
                let bias = b.map_or(0.0, |b| f64::from(b[oc]));
                out[(ni * o + oc) * oh * ow..][..oh * ow].fill(bias);
            }
            for ci in 0..c {
                let gi = ci / cg;
                for oc in 0..og {
                    for iy in 0..h {
                        for ix in 0..wd {
                            for ki in 0..kh {
                                for kj in 0..kw {
                                    let y = (iy * win.stride[0] + ki * win.dilation[0]) as isize
                                        - win.pad[0] as isize;
                                    let xx = (ix * win.stride[1] + kj * win.dilation[1]) as isize
                                        - win.pad[1] as isize;
                                    if y < 0 || xx < 0 || y as usize >= oh || xx as usize >= ow {
                                        continue;
                                    }
                                    let at = ((ni * o + gi * og + oc) * oh + y as usize) * ow + xx as usize;
                                    out[at] +=
                                        f64::from(x[[ni, ci, iy, ix]]) * f64::from(w[[ci, oc, ki, kj]]);
                                }
                            }
                        }
                    }
                }
            }
        }
        (vec![n, o, oh, ow], out)
    }

    /// A small deterministic generator (64-bit LCG) for the random cases.
    struct Lcg(u64);

    impl Lcg {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            self.0 >> 33
        }
        /// Uniform in lo..=hi.
        fn range(&mut self, lo: usize, hi: usize) -> usize {
            lo + (self.next() as usize) % (hi - lo + 1)
        }
        /// Uniform in [-1, 1).
        fn value(&mut self) -> f32 {
            (self.next() % 2001) as f32 / 1000.0 - 1.0
        }
        fn tensor(&mut self, shape: &[usize]) -> ArrayD<f32> {
            let len = shape.iter().product();
            ArrayD::from_shape_vec(IxDyn(shape), (0..len).map(|_| self.value()).collect()).unwrap()
        }
    }

    #[test]
    fn transpose_onnx_examples() {
        let mut ctx = Context::new();
        // ONNX's ConvTranspose examples: a 3×3 input 0..8, two output channels of 3×3 ones.
        let x = iota(&[1, 1, 3, 3]);
        let ones = f32t(&[1, 2, 3, 3], &[1.; 18]);
        let y = run(&mut ctx, conv_transpose2d, &[&x, &ones], "{}", &[]);
        let plane = [
            0., 1., 3., 3., 2., 3., 8., 15., 12., 7., 9., 21., 36., 27., 15., 9., 20., 33., 24., 13., 6.,
            13., 21., 15., 8.,
        ];
        assert_eq!(y, f32t(&[1, 2, 5, 5], &[plane, plane].concat()));
        // strides [3, 2], pads [1, 2, 1, 2]: 1×2×7×3.
        let y = run(&mut ctx, conv_transpose2d, &[&x, &ones], "{pad = [1, 2, 1, 2], stride = [3, 2]}", &[]);
        let plane = [1., 1., 3., 1., 1., 3., 7., 4., 9., 7., 4., 9., 7., 4., 9., 13., 7., 15., 13., 7., 15.];
        assert_eq!(y, f32t(&[1, 2, 7, 3], &[plane, plane].concat()));
        // strides [3, 2] with output_padding [1, 1]: 1×2×10×8, the last row and column zero.
        let y =
            run(&mut ctx, conv_transpose2d, &[&x, &ones], "{output_padding = [1, 1], stride = [3, 2]}", &[]);
        assert_eq!(y.shape(), [1, 2, 10, 8]);
        let v = y.to_f64_vec();
        assert_eq!(&v[24..32], &[3., 3., 7., 4., 9., 5., 5., 0.]);
        assert!(v[72..80].iter().all(|&e| e == 0.0));
        // Dilations [2, 2].
        let x = f32t(&[1, 1, 3, 3], &[3., 8., 1., 9., 5., 7., 3., 2., 6.]);
        let w = f32t(&[1, 1, 2, 2], &[7., 2., 1., 9.]);
        let y = run(&mut ctx, conv_transpose2d, &[&x, &w], "{dilation = [2, 2]}", &[]);
        let want = [
            21., 56., 13., 16., 2., 63., 35., 67., 10., 14., 24., 22., 76., 76., 21., 9., 5., 88., 45., 63.,
            3., 2., 33., 18., 54.,
        ];
        assert_eq!(y, f32t(&[1, 1, 5, 5], &want));
        // Two groups of one channel each.
        let x = iota(&[1, 2, 3, 3]);
        let w = f32t(&[2, 1, 3, 3], &[1.; 18]);
        let y = run(&mut ctx, conv_transpose2d, &[&x, &w], "{groups = 2}", &[]).to_f64_vec();
        assert_eq!(&y[25..30], &[9., 19., 30., 21., 11.]);
        assert_eq!(y[25 + 12], 117.);
        // 1-D, with a bias.
        let x = f32t(&[1, 1, 3], &[0., 1., 2.]);
        let w = f32t(&[1, 2, 3], &[1.; 6]);
        let b = f32t(&[2], &[0.5, -1.]);
        let y = run(&mut ctx, conv_transpose1d, &[&x, &w, &b], "{}", &[]);
        assert_eq!(y, f32t(&[1, 2, 5], &[0.5, 1.5, 3.5, 3.5, 2.5, -1., 0., 2., 2., 1.]));
    }

    #[test]
    fn transpose_matches_the_definition() {
        let mut rng = Lcg(0x5eed);
        let mut cases = 0;
        while cases < 300 {
            let (sh, sw) = (rng.range(1, 3), rng.range(1, 3));
            let (dh, dw) = (rng.range(1, 2), rng.range(1, 2));
            let (kh, kw) = (rng.range(1, 4), rng.range(1, 4));
            let (h, wd) = (rng.range(1, 6), rng.range(1, 6));
            let cg = rng.range(1, 3);
            let groups = [1, 2, 3][rng.range(0, 2)];
            // Depthwise-style (one input and one output channel per group) in about a third.
            let (cg, og) = if rng.range(0, 2) == 0 { (1, 1) } else { (cg, rng.range(1, 3)) };
            let c = cg * groups;
            let op = [rng.range(0, sh.max(dh) - 1), rng.range(0, sw.max(dw) - 1)];
            let full_h = sh * (h - 1) + op[0] + dh * (kh - 1) + 1;
            let full_w = sw * (wd - 1) + op[1] + dw * (kw - 1) + 1;
            let pad = [rng.range(0, 2), rng.range(0, 2), rng.range(0, 2), rng.range(0, 2)];
            if pad[0] + pad[2] >= full_h || pad[1] + pad[3] >= full_w {
                continue;
            }
            cases += 1;
            let win = Window2 { stride: [sh, sw], pad, dilation: [dh, dw], groups };
            let n = rng.range(1, 2);
            let x = rng.tensor(&[n, c, h, wd]);
            let w = rng.tensor(&[c, og, kh, kw]);
            let b: Vec<f32> = (0..og * groups).map(|_| rng.value()).collect();
            let bias = ArrayD::from_shape_vec(IxDyn(&[og * groups]), b.clone()).unwrap();
            let with_bias = rng.range(0, 1) == 1;
            let got = conv_transpose2d_real(&x, &w, with_bias.then_some(&bias), &win, op).unwrap();
            let (shape, want) = naive_transpose(&x, &w, with_bias.then_some(&b[..]), &win, op);
            assert_eq!(got.shape(), &shape[..], "case {cases}: {win:?} {op:?}");
            for (i, (&g, &e)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (f64::from(g) - e).abs() <= 1e-5 * (1.0 + e.abs()),
                    "case {cases} {win:?} {op:?} at {i}: {g} vs {e}"
                );
            }
            // f64 agrees too, to f64 rounding.
            let got64 =
                conv_transpose2d_real(&x.mapv(f64::from), &w.mapv(f64::from), None, &win, op).unwrap();
            let (_, want64) = naive_transpose(&x, &w, None, &win, op);
            for (&g, &e) in got64.iter().zip(&want64) {
                assert!((g - e).abs() <= 1e-12 * (1.0 + e.abs()));
            }
        }
    }

    #[test]
    fn transpose_bad_operands() {
        let mut ctx = Context::new();
        let x = iota(&[1, 3, 4, 4]);
        // The weight's dimension 0 is the input channels.
        let w = iota(&[2, 3, 3, 3]);
        assert!(run_err(&mut ctx, conv_transpose2d, &[&x, &w], "{}").contains("channels"));
        let w = iota(&[3, 2, 3, 3]);
        assert!(run_err(&mut ctx, conv_transpose2d, &[&x, &w], "{groups = 2}").contains("divisible"));
        assert!(run_err(&mut ctx, conv_transpose2d, &[&x, &w], "{output_padding = [1, 0]}")
            .contains("'output_padding' values must be smaller than the stride or the dilation"));
        assert!(run_err(&mut ctx, conv_transpose2d, &[&x, &w], "{pad = [3, 0, 3, 0]}")
            .contains("remove the whole output"));
        let b = iota(&[3]);
        assert!(run_err(&mut ctx, conv_transpose2d, &[&x, &w, &b], "{}").contains("bias must have shape [2]"));
        assert!(run_err(&mut ctx, conv_transpose2d, &[&x], "{}").contains("operand"));
        let x64 = Tensor::F64(ndarray::ArrayD::zeros(IxDyn(&[1, 3, 4, 4])));
        assert!(run_err(&mut ctx, conv_transpose2d, &[&x64, &w], "{}").contains("dtypes"));
        assert!(run_err(&mut ctx, conv_transpose1d, &[&x, &w], "{}").contains("rank 3"));
    }
}
