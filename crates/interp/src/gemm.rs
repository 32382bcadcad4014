//! Single-threaded f32 GEMM for the float kernels: `C = A·B` or `C += A·B`,
//! row-major with leading dimensions, B given either as is or as Bᵀ.
//!
//! On x86_64 CPUs with AVX-512F (detected at run time; std caches the answer)
//! this is a BLIS-style packed GEMM:
//!
//! - the columns of C are cut into blocks of `NC` = 2304 and the depth into
//!   blocks of `KC` = 256; each `KC`×`NC` block of B is packed into column panels
//!   of `NR` = 48 (three zmm registers), k-major, so a panel row is one
//!   contiguous 192-byte line pair;
//! - each `MC`×`KC` block of A (`MC` = 192) is packed into row panels of
//!   `MR` = 8, k-major, so the microkernel reads 8 consecutive floats per step
//!   and broadcasts them;
//! - the microkernel keeps an `MR`×`NR` tile of C in 24 zmm accumulators over
//!   the whole `KC` depth (one `vfmadd231ps` per accumulator per step: 24 FMAs
//!   for 3 vector loads and 8 broadcasts), then adds it to C. Column edges use
//!   a narrower kernel (16 or 32 columns) and masked loads/stores; row edges are
//!   packed with zero rows and only the valid rows are stored.
//! - B may also be a convolution's patch matrix ([`Patches`], for
//!   [`sgemm_patches`]): its panels are then packed straight from the input
//!   image (im2col one `KC`×`NR` panel at a time, masked loads supplying the
//!   zero padding), so the unrolled matrix — up to 9× the input — is never
//!   written to memory and read back; a per-row bias is added when the tile
//!   is first stored;
//! - blocks of B at most `4·NR` wide read A in place instead of packing it (each
//!   A element feeds too few FMAs to pay for its packing), and products of a
//!   few rows with a transposed B (a dense layer on a small batch) are plain
//!   dot products.
//!
//! A packed B panel (`KC`·`NR` floats, 48 KiB) is reused from L1/L2 by every
//! row panel of the `MC` block, and the packed A block (`MC`·`KC`, 192 KiB)
//! stays in L2 while the column panels stream past it. Packing buffers live in
//! a thread-local `Vec`, so a call allocates nothing once warm.
//!
//! Accuracy: every element of C is an f32 sum of its K products formed by
//! fused multiply-adds: in increasing k order within a `KC` block, the blocks
//! added to C in order (the dot-product path: 16 interleaved partial sums, then
//! a tree). Any such order keeps the error within the usual bound
//! `K·u·Σ|a||b|` (u = 2⁻²⁴) of an f32 dot product, as for matrixmultiply's
//! sgemm, which orders its sums differently again; results differ from it
//! only by rounding. Nothing is read from C when not accumulating, so garbage
//! (even NaN) in C does not leak.
//!
//! Elsewhere (no AVX-512F, other architectures) it calls ndarray's
//! `general_mat_mul` (matrixmultiply) on strided views of the same slices.
//!
//! This file depends only on std and ndarray: the GEMM benchmark includes it
//! as a module. The AVX-512 intrinsics (and safe `#[target_feature]` functions)
//! need rustc 1.89, the workspace's declared `rust-version`.

use ndarray::linalg::general_mat_mul;
use ndarray::{ArrayView2, ArrayViewMut2, ShapeBuilder};

/// `c = a·b` (`c += a·b` when `accumulate`) on row-major slices: `a` is m×k
/// with row stride `lda`, `b` k×n with row stride `ldb`, `c` m×n with row
/// stride `ldc`. Errors (and leaves `c` untouched) if a leading dimension is
/// smaller than its row length or a slice is too short.
#[allow(clippy::too_many_arguments)]
pub(crate) fn sgemm(
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    lda: usize,
    b: &[f32],
    ldb: usize,
    c: &mut [f32],
    ldc: usize,
    accumulate: bool,
) -> Result<(), String> {
    let a = Mat::new("A", a, m, k, lda, 1)?;
    let b = Mat::new("B", b, k, n, ldb, 1)?;
    gemm(false, a, b, c, ldc, accumulate)
}

/// [`sgemm`] with B given transposed: `bt` is n×k row-major with row stride
/// `ldbt` (a dense layer's weight), and `c = a·btᵀ` (or `+=`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn sgemm_bt(
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    lda: usize,
    bt: &[f32],
    ldbt: usize,
    c: &mut [f32],
    ldc: usize,
    accumulate: bool,
) -> Result<(), String> {
    let a = Mat::new("A", a, m, k, lda, 1)?;
    let b = Mat::new("Bᵀ", bt, k, n, 1, ldbt)?;
    gemm(false, a, b, c, ldc, accumulate)
}

/// `c = a·b` (`c += a·b` when `accumulate`) on views: the packed GEMM when `a`
/// and `c` are contiguous row-major and `b` or `bᵀ` is, else (or if the sizes
/// disagree) `general_mat_mul`, which panics on mismatched shapes as before.
pub(crate) fn sgemm_view(
    a: ArrayView2<'_, f32>,
    b: ArrayView2<'_, f32>,
    accumulate: bool,
    mut c: ArrayViewMut2<'_, f32>,
) {
    let ((m, k), n) = (a.dim(), b.ncols());
    if let (Some(aa), Some(cc)) = (a.as_slice(), c.as_slice_mut()) {
        let done = if let Some(bb) = b.as_slice() {
            sgemm(m, k, n, aa, k, bb, n, cc, n, accumulate)
        } else if let Some(bt) = b.t().as_slice() {
            sgemm_bt(m, k, n, aa, k, bt, k, cc, n, accumulate)
        } else {
            Err(String::new())
        };
        if done.is_ok() {
            return;
        }
    }
    general_mat_mul(1.0, &a, &b, if accumulate { 1.0 } else { 0.0 }, &mut c);
}

/// The patch matrix (im2col) of a 2-D convolution of one sample and channel
/// group, described instead of stored: row (ci·kh + ki)·kw + kj, column
/// oy·ow + ox is `x[ci][iy][ix]` with iy = oy·sh + ki·dh − pt and
/// ix = ox·sw + kj·dw − pl, or 0 where (iy, ix) is outside the h×w input.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Patches<'a> {
    /// The group's `c`×`h`×`w` input channels, row-major.
    pub x: &'a [f32],
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub kh: usize,
    pub kw: usize,
    /// (sh, sw), each at least 1.
    pub stride: [usize; 2],
    /// Top and left padding (pt, pl).
    pub pad: [usize; 2],
    /// (dh, dw).
    pub dilation: [usize; 2],
    pub oh: usize,
    pub ow: usize,
}

impl Patches<'_> {
    /// Rows (taps) and columns (output positions), or an error if `x` is
    /// too short, a stride is 0 or a size overflows.
    fn dims(&self) -> Result<(usize, usize), String> {
        let too_large = || "patch matrix: size overflows".to_string();
        let need = self.c.checked_mul(self.h).and_then(|v| v.checked_mul(self.w)).ok_or_else(too_large)?;
        if self.x.len() < need {
            return Err(format!("patch matrix: input needs {need} elements, the slice has {}", self.x.len()));
        }
        if self.stride.contains(&0) {
            return Err("patch matrix: stride 0".to_string());
        }
        let k = self.c.checked_mul(self.kh).and_then(|v| v.checked_mul(self.kw)).ok_or_else(too_large)?;
        // Input coordinates (a few vectors past the last output too) are
        // computed in isize.
        let fits = |o: usize, s: usize, k: usize, d: usize, pad: usize| {
            o.checked_add(64)?
                .checked_mul(s)?
                .checked_add(k.checked_mul(d)?)?
                .checked_add(pad)?
                .checked_add(64)
        };
        let y = fits(self.oh, self.stride[0], self.kh, self.dilation[0], self.pad[0]);
        let x = fits(self.ow, self.stride[1], self.kw, self.dilation[1], self.pad[1]);
        let far = y.zip(x).map(|(y, x)| y.max(x).max(self.h).max(self.w));
        if far.is_none_or(|v| v > isize::MAX as usize / 2) {
            return Err(too_large());
        }
        Ok((k, self.oh.checked_mul(self.ow).ok_or_else(too_large)?))
    }
}

/// `c = a·P + bias` for a convolution's patch matrix P ([`Patches`], k×n)
/// without materialising P: the AVX-512 GEMM packs its B panels straight from
/// the input image. `a` is m×k with row stride `lda`, `c` m×n with row stride
/// `ldc`, `bias` (if any) has m entries, one per row of C. Returns `Ok(false)`
/// and leaves `c` untouched when the CPU lacks AVX-512F (the caller then
/// unrolls P itself); errors if a size does not fit.
#[allow(clippy::too_many_arguments)]
pub(crate) fn sgemm_patches(
    m: usize,
    a: &[f32],
    lda: usize,
    p: &Patches<'_>,
    bias: Option<&[f32]>,
    c: &mut [f32],
    ldc: usize,
) -> Result<bool, String> {
    let (k, n) = p.dims()?;
    let a = Mat::new("A", a, m, k, lda, 1)?;
    if bias.is_some_and(|b| b.len() < m) {
        return Err(format!("bias: needs {m} elements"));
    }
    #[cfg(target_arch = "x86_64")]
    if avx512::available() {
        check_c(m, n, c, ldc)?;
        if m == 0 || n == 0 {
            return Ok(true);
        }
        if k == 0 {
            for (i, row) in c.chunks_mut(ldc).take(m).enumerate() {
                row[..n].fill(bias.map_or(0.0, |b| b[i]));
            }
            return Ok(true);
        }
        PACK.with(|cell| {
            let mut buf = cell.take();
            // SAFETY: `avx512::available()` checked that the CPU supports
            // AVX-512F, the only target feature `avx512::gemm` enables.
            unsafe { avx512::gemm(a, avx512::B::Patches(*p, n), c, ldc, false, bias, &mut buf) };
            cell.set(buf);
        });
        return Ok(true);
    }
    let _ = (a, n, c, ldc);
    Ok(false)
}

/// Checks that `c` holds an m×n matrix with row stride `ldc`.
fn check_c(m: usize, n: usize, c: &[f32], ldc: usize) -> Result<(), String> {
    if ldc < n {
        return Err(format!("C: leading dimension {ldc} is smaller than {n}"));
    }
    let need = span(m, n, ldc, 1).ok_or("C: size overflows")?;
    if c.len() < need {
        return Err(format!("C: {m}×{n} needs {need} elements, the slice has {}", c.len()));
    }
    Ok(())
}

/// A read-only strided matrix: element (i, j) is `data[i·rs + j·cs]`, and
/// [`Mat::new`] has checked that every such index is in bounds.
#[derive(Clone, Copy)]
struct Mat<'a> {
    data: &'a [f32],
    rows: usize,
    cols: usize,
    rs: usize,
    cs: usize,
}

impl<'a> Mat<'a> {
    /// A `rows`×`cols` matrix over `data` with strides (`rs`, `cs`), one of
    /// them 1 and the other at least the extent of that dimension.
    fn new(
        what: &str,
        data: &'a [f32],
        rows: usize,
        cols: usize,
        rs: usize,
        cs: usize,
    ) -> Result<Mat<'a>, String> {
        let ld_ok = (cs == 1 && rs >= cols) || (rs == 1 && cs >= rows);
        if !ld_ok {
            return Err(format!(
                "{what}: leading dimension {} is smaller than {}",
                rs.max(cs),
                cols.max(rows)
            ));
        }
        let need = span(rows, cols, rs, cs).ok_or_else(|| format!("{what}: size overflows"))?;
        if data.len() < need {
            return Err(format!("{what}: {rows}×{cols} needs {need} elements, the slice has {}", data.len()));
        }
        Ok(Mat { data, rows, cols, rs, cs })
    }

    /// The matrix as an ndarray view.
    fn view(&self) -> Result<ArrayView2<'a, f32>, String> {
        let data = &self.data[..span(self.rows, self.cols, self.rs, self.cs).unwrap_or(0)];
        ArrayView2::from_shape((self.rows, self.cols).strides((self.rs, self.cs)), data)
            .map_err(|e| e.to_string())
    }
}

/// Elements a `rows`×`cols` matrix with strides (`rs`, `cs`) spans: one past
/// its last element's index (0 when empty), or `None` on overflow.
fn span(rows: usize, cols: usize, rs: usize, cs: usize) -> Option<usize> {
    if rows == 0 || cols == 0 {
        return Some(0);
    }
    (rows - 1).checked_mul(rs)?.checked_add((cols - 1).checked_mul(cs)?)?.checked_add(1)
}

/// Checks `c` and dispatches: the AVX-512 kernel if the CPU has it and
/// `portable_only` is false, else matrixmultiply.
fn gemm(
    portable_only: bool,
    a: Mat<'_>,
    b: Mat<'_>,
    c: &mut [f32],
    ldc: usize,
    accumulate: bool,
) -> Result<(), String> {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    debug_assert_eq!(b.rows, k);
    check_c(m, n, c, ldc)?;
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        if !accumulate {
            c.chunks_mut(ldc).take(m).for_each(|row| row[..n].fill(0.0));
        }
        return Ok(());
    }
    #[cfg(target_arch = "x86_64")]
    if !portable_only && avx512::available() {
        PACK.with(|cell| {
            let mut buf = cell.take();
            // SAFETY: `avx512::available()` checked that the CPU supports
            // AVX-512F, the only target feature `avx512::gemm` enables.
            unsafe { avx512::gemm(a, avx512::B::Mat(b), c, ldc, accumulate, None, &mut buf) };
            cell.set(buf);
        });
        return Ok(());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = portable_only;
    portable(a, b, c, ldc, accumulate)
}

#[cfg(target_arch = "x86_64")]
thread_local! {
    /// The packing buffers of this thread's GEMMs (taken out for a call).
    static PACK: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
}

/// `general_mat_mul` on strided views of the checked slices.
fn portable(a: Mat<'_>, b: Mat<'_>, c: &mut [f32], ldc: usize, accumulate: bool) -> Result<(), String> {
    let (av, bv) = (a.view()?, b.view()?);
    let need = span(a.rows, b.cols, ldc, 1).unwrap_or(0);
    let mut cv = ArrayViewMut2::from_shape((a.rows, b.cols).strides((ldc, 1)), &mut c[..need])
        .map_err(|e| e.to_string())?;
    general_mat_mul(1.0, &av, &bv, if accumulate { 1.0 } else { 0.0 }, &mut cv);
    Ok(())
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{Mat, Patches};
    use std::arch::x86_64::*;

    /// The B operand: a strided matrix, or a convolution's patch matrix (with
    /// its checked n) whose panels are packed straight from the input.
    #[derive(Clone, Copy)]
    pub(super) enum B<'a> {
        Mat(Mat<'a>),
        Patches(Patches<'a>, usize),
    }

    /// Rows of an A panel (broadcast one at a time).
    const MR: usize = 8;
    /// Columns of a packed B panel: `NV` zmm vectors of 16 floats.
    const NV: usize = 3;
    const NR: usize = 16 * NV;
    /// Depth of a packed block.
    const KC: usize = 256;
    /// Rows of an A block (a multiple of `MR`).
    const MC: usize = 192;
    /// Columns of a packed B block (a multiple of `NR`).
    const NC: usize = 48 * NR;
    /// Blocks of B at most this wide read A in place instead of packing it:
    /// each A element then feeds only a few tiles, and packing it (a strided
    /// gather) would cost more than the FMAs it feeds.
    const DIRECT_A_MAX_N: usize = 4 * NR;

    /// Products of at most this many rows with a transposed B (a dense layer
    /// on a small batch) are dot products of contiguous rows: packing Bᵀ
    /// would cost as much as the arithmetic, and most of a tile's rows
    /// would be padding.
    const DOTS_MAX_M: usize = MR / 2;

    /// Whether the CPU has AVX-512F (std caches the CPUID probe).
    pub(super) fn available() -> bool {
        is_x86_feature_detected!("avx512f")
    }

    /// `c = a·b` (or `+=`) for a checked `a` (m×k), `b` (k×n) and `c` (m×n
    /// with row stride `ldc`, `ldc ≥ n`, long enough), m, n, k > 0, plus
    /// `bias[i]` on row i when given (at least m entries; not with
    /// `accumulate`). `buf` is scratch for the packed blocks.
    #[target_feature(enable = "avx512f")]
    pub(super) fn gemm(
        a: Mat<'_>,
        b: B<'_>,
        c: &mut [f32],
        ldc: usize,
        accumulate: bool,
        bias: Option<&[f32]>,
        buf: &mut Vec<f32>,
    ) {
        let (m, k) = (a.rows, a.cols);
        let n = match b {
            B::Mat(b) => b.cols,
            B::Patches(_, n) => n,
        };
        if let B::Mat(b) = b {
            if m <= DOTS_MAX_M && a.cs == 1 && b.rs == 1 && bias.is_none() {
                return dots(a, b, c, ldc, accumulate);
            }
        }
        let b_len = KC * n.min(NC).next_multiple_of(NR);
        let a_len = if n <= DIRECT_A_MAX_N { 0 } else { KC * m.min(MC).next_multiple_of(MR) };
        // 16 floats of slack to start the B block on a 64-byte boundary. The
        // packing writes every element it later reads (padding included), so
        // old contents can stay.
        if buf.len() < b_len + a_len + 16 {
            buf.resize(b_len + a_len + 16, 0.0);
        }
        let skew = buf.as_ptr().align_offset(64).min(16);
        let (bpack, apack) = buf[skew..].split_at_mut(b_len);
        for jc in (0..n).step_by(NC) {
            let nc = NC.min(n - jc);
            let direct_a = nc <= DIRECT_A_MAX_N;
            for pc in (0..k).step_by(KC) {
                let kc = KC.min(k - pc);
                // Column panel j of the block is bpack[j·NR·kc..], width a
                // multiple of 16 (zero-padded), k-major.
                for jr in (0..nc).step_by(NR) {
                    let w = NR.min(nc - jr);
                    let dst = &mut bpack[jr * kc..];
                    match b {
                        B::Mat(b) => {
                            let start = pc * b.rs + (jc + jr) * b.cs;
                            if b.cs == 1 {
                                pack_rows(dst, b.data, start, b.rs, w, kc);
                            } else {
                                pack_lines(dst, b.data, start, b.cs, b.rs, w, w.next_multiple_of(16), kc);
                            }
                        }
                        B::Patches(p, _) => pack_patches(dst, &p, pc, kc, jc + jr, w),
                    }
                }
                let load_c = accumulate || pc > 0;
                for ic in (0..m).step_by(MC) {
                    let mc = MC.min(m - ic);
                    // Row panel i of the block is apack[i·MR·kc..], MR wide
                    // (zero-padded), k-major; or A itself when `direct_a`.
                    if !direct_a {
                        for ir in (0..mc).step_by(MR) {
                            let (start, h) = ((ic + ir) * a.rs + pc * a.cs, MR.min(mc - ir));
                            pack_lines(&mut apack[ir * kc..], a.data, start, a.rs, a.cs, h, MR, kc);
                        }
                    }
                    for jr in (0..nc).step_by(NR) {
                        let w = NR.min(nc - jr);
                        let bp = &bpack[jr * kc..];
                        for ir in (0..mc).step_by(MR) {
                            let h = MR.min(mc - ir);
                            // Rows past the edge repeat the last one; their
                            // sums are not stored.
                            let (ap, rows, step) = if direct_a {
                                let rows: [usize; MR] = std::array::from_fn(|i| i.min(h - 1) * a.rs);
                                (&a.data[(ic + ir) * a.rs + pc * a.cs..], rows, a.cs)
                            } else {
                                (&apack[ir * kc..], std::array::from_fn(|i| i), MR)
                            };
                            let ct = &mut c[(ic + ir) * ldc + jc + jr..];
                            let bias = if load_c { None } else { bias.map(|b| &b[ic + ir..][..h]) };
                            let panel = Panel { a: ap, rows, step, b: bp, kc, bias };
                            match w.div_ceil(16) {
                                1 => tile::<1>(panel, ct, ldc, h, w, load_c),
                                2 => tile::<2>(panel, ct, ldc, h, w, load_c),
                                _ => tile::<NV>(panel, ct, ldc, h, w, load_c),
                            }
                        }
                    }
                }
            }
        }
    }

    /// `c[i·ldc + j] (+)= Σ_p a[i, p]·b[p, j]` as dot products of the rows
    /// of `a` and the columns of `b`, both contiguous (`a.cs == b.rs == 1`).
    #[target_feature(enable = "avx512f")]
    fn dots(a: Mat<'_>, b: Mat<'_>, c: &mut [f32], ldc: usize, accumulate: bool) {
        let k = a.cols;
        for i in 0..a.rows {
            let x = &a.data[i * a.rs..][..k];
            for j in 0..b.cols {
                let y = &b.data[j * b.cs..][..k];
                let mut acc = _mm512_setzero_ps();
                for p in (0..k).step_by(16) {
                    let mask = ((1u32 << (k - p).min(16)) - 1) as __mmask16;
                    // SAFETY: the lanes read are x[p + l] and y[p + l] for
                    // p + l < k = x.len() = y.len(), and p < k.
                    let (xv, yv) = unsafe {
                        (
                            _mm512_maskz_loadu_ps(mask, x.as_ptr().add(p)),
                            _mm512_maskz_loadu_ps(mask, y.as_ptr().add(p)),
                        )
                    };
                    acc = _mm512_fmadd_ps(xv, yv, acc);
                }
                let dot = _mm512_reduce_add_ps(acc);
                let out = &mut c[i * ldc + j];
                *out = if accumulate { *out + dot } else { dot };
            }
        }
    }

    /// Packs `n` ≤ `NR` columns of `depth` rows of a row-major B (row stride
    /// `rs`, first element `src[start]`) into `dst` k-major, rows padded with
    /// zeros to a multiple of 16. `Mat::new` checked the source indices.
    #[target_feature(enable = "avx512f")]
    fn pack_rows(dst: &mut [f32], src: &[f32], start: usize, rs: usize, n: usize, depth: usize) {
        let width = n.next_multiple_of(16);
        let dst = &mut dst[..width * depth];
        let src = &src[start..];
        // The last row read starts at (depth−1)·rs and is n long.
        assert!(n <= NR && (n == 0 || src.len() >= (depth - 1) * rs + n));
        for (p, row) in dst.chunks_exact_mut(width).enumerate() {
            for (v, out) in row.chunks_exact_mut(16).enumerate() {
                let lanes = (n - 16 * v).min(16);
                let mask = ((1u32 << lanes) - 1) as __mmask16;
                // SAFETY: the lanes read are src[p·rs + 16v + l] for
                // 16v + l < n, below (depth−1)·rs + n ≤ src.len() (assert),
                // and the base p·rs + 16v is too; `out` holds 16 floats.
                unsafe {
                    let x = _mm512_maskz_loadu_ps(mask, src.as_ptr().add(p * rs + 16 * v));
                    _mm512_storeu_ps(out.as_mut_ptr(), x);
                }
            }
        }
    }

    /// Packs `n` lines of `depth` contiguous elements of `src` into `dst`
    /// k-major and `width` wide: `dst[p·width + t] = src[start + t·ts + p]`
    /// for t < n, 0 for n ≤ t < width. `ps` must be 1 (rows of A, rows of a
    /// transposed B; else unit-stride B goes to [`pack_rows`]); `Mat::new`
    /// checked the source indices.
    #[allow(clippy::too_many_arguments)]
    fn pack_lines(
        dst: &mut [f32],
        src: &[f32],
        start: usize,
        ts: usize,
        ps: usize,
        n: usize,
        width: usize,
        depth: usize,
    ) {
        debug_assert_eq!(ps, 1);
        let dst = &mut dst[..width * depth];
        // Packed row by packed row, so the stores are contiguous and the
        // compiler cannot turn the strided stores into (slow) scatters.
        let lines: [&[f32]; NR] =
            std::array::from_fn(|t| if t < n { &src[start + t * ts..][..depth] } else { &[] });
        for (p, row) in dst.chunks_exact_mut(width).enumerate() {
            for (d, line) in row[..n].iter_mut().zip(&lines) {
                *d = line[p];
            }
            row[n..].fill(0.0);
        }
    }

    /// Packs columns `j0..j0 + n` (n ≤ `NR`) of rows `k0..k0 + depth` of a
    /// patch matrix into `dst` like [`pack_rows`]: k-major, rows padded with
    /// zeros to a multiple of 16. This is im2col done panel by panel, so the
    /// patch matrix is never stored: each packed row is a few runs of one
    /// input row (one run per output row the panel's columns touch), read
    /// with masked loads that give the zero padding for free. `p.dims()`
    /// has checked the sizes and that k0 + depth ≤ its rows.
    #[target_feature(enable = "avx512f")]
    fn pack_patches(dst: &mut [f32], p: &Patches<'_>, k0: usize, depth: usize, j0: usize, n: usize) {
        let width = n.next_multiple_of(16);
        let dst = &mut dst[..width * depth];
        // The panel's columns as runs within one output row:
        // (first packed column t, oy, first ox, length).
        let mut runs = [(0, 0, 0, 0); NR];
        let (mut nruns, mut t) = (0, 0);
        while t < n && nruns < NR {
            let (oy, ox) = ((j0 + t) / p.ow, (j0 + t) % p.ow);
            let len = (p.ow - ox).min(n - t);
            runs[nruns] = (t, oy, ox, len);
            (nruns, t) = (nruns + 1, t + len);
        }
        let ([sh, sw], [dh, dw], [pt, pl]) = (p.stride, p.dilation, p.pad);
        let plane = p.h * p.w;
        // Row k0 + r is tap (ki, kj) of input channel ci, stepped along.
        let taps = p.kh * p.kw;
        let (mut ci, mut ki, mut kj) = (k0 / taps, k0 % taps / p.kw, k0 % p.kw);
        for row in dst.chunks_exact_mut(width) {
            let img = &p.x[ci * plane..][..plane];
            let y_off = (ki * dh) as isize - pt as isize;
            let x_off = (kj * dw) as isize - pl as isize;
            row[n..].fill(0.0);
            for &(t, oy, ox, len) in &runs[..nruns] {
                let out = &mut row[t..t + len];
                let iy = (oy * sh) as isize + y_off;
                if iy < 0 || iy >= p.h as isize {
                    out.fill(0.0);
                    continue;
                }
                let line = &img[iy as usize * p.w..][..p.w];
                // The input column of out[0]; out[e] reads base + e·sw.
                let base = (ox * sw) as isize + x_off;
                match sw {
                    1 => gather_run::<1>(out, line, base),
                    2 => gather_run::<2>(out, line, base),
                    _ => {
                        for (e, o) in out.iter_mut().enumerate() {
                            let ix = base + (e * sw) as isize;
                            *o = if (0..p.w as isize).contains(&ix) { line[ix as usize] } else { 0.0 };
                        }
                    }
                }
            }
            kj += 1;
            if kj == p.kw {
                (kj, ki) = (0, ki + 1);
                if ki == p.kh {
                    (ki, ci) = (0, ci + 1);
                }
            }
        }
    }

    /// `out[e] = line[base + e·S]` where that index is inside `line`, else 0,
    /// for S = 1 or 2, 16 outputs per step: each step loads the `16·S`
    /// elements from `base + 16·S·q` with a mask of the in-bounds ones (and
    /// for S = 2 keeps the even ones with a permute).
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn gather_run<const S: usize>(out: &mut [f32], line: &[f32], base: isize) {
        let w = line.len() as isize;
        let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        for (q, chunk) in out.chunks_mut(16).enumerate() {
            let lanes = chunk.len();
            let b = base + (16 * S * q) as isize;
            // Elements f of the span b.. that are inside the line: lo ≤ f < hi.
            let span = (S * (lanes - 1) + 1) as isize;
            let lo = (-b).clamp(0, span);
            let hi = (w - b).clamp(lo, span);
            let bits = ((1u64 << hi) - 1) & !((1u64 << lo) - 1);
            let store = ((1u32 << lanes) - 1) as __mmask16;
            let src = line.as_ptr().wrapping_offset(b);
            // SAFETY: the lanes loaded are elements b + f of `line` with
            // lo ≤ f < hi, so 0 ≤ b + f < w = line.len(); masked-off lanes are
            // not accessed (and do not fault), and `wrapping_offset` forms the
            // possibly out-of-bounds base pointers without undefined behaviour.
            // The store writes chunk[..lanes] only.
            unsafe {
                let v = if S == 1 {
                    _mm512_maskz_loadu_ps(bits as __mmask16, src)
                } else {
                    let v0 = _mm512_maskz_loadu_ps(bits as __mmask16, src);
                    let v1 = _mm512_maskz_loadu_ps((bits >> 16) as __mmask16, src.wrapping_add(16));
                    _mm512_permutex2var_ps(v0, even, v1)
                };
                _mm512_mask_storeu_ps(chunk.as_mut_ptr(), store, v);
            }
        }
    }

    /// The operands of one tile: row i of A at step p is
    /// `a[rows[i] + p·step]`, B is a packed panel `b[p·16V + j]`, p < `kc`;
    /// `bias[i]` (at least h entries) is added to row i of a tile that does
    /// not load C.
    struct Panel<'a> {
        a: &'a [f32],
        rows: [usize; MR],
        step: usize,
        b: &'a [f32],
        kc: usize,
        bias: Option<&'a [f32]>,
    }

    /// One `MR`×`16·V` tile: `c[i·ldc + j] (+)= Σ_p A(i, p)·B(p, j)` for
    /// i < `h`, j < `w` (adding to C when `load_c`), with
    /// `16·(V−1) < w ≤ 16·V` and `h ≤ MR`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn tile<const V: usize>(x: Panel<'_>, c: &mut [f32], ldc: usize, h: usize, w: usize, load_c: bool) {
        let Panel { a, rows, step, b, kc, bias } = x;
        let last_a = rows.iter().max().map_or(0, |&r| r + (kc - 1) * step);
        assert!(kc > 0 && last_a < a.len() && b.len() >= kc * 16 * V);
        assert!((1..=MR).contains(&h) && w > 16 * (V - 1) && w <= 16 * V);
        assert!(c.len() >= (h - 1) * ldc + w && bias.is_none_or(|b| b.len() >= h));
        let mut acc = [[_mm512_setzero_ps(); V]; MR];
        let (mut ap, mut bp) = (a.as_ptr(), b.as_ptr());
        for _ in 0..kc {
            let mut bv = [_mm512_setzero_ps(); V];
            for (v, r) in bv.iter_mut().enumerate() {
                // SAFETY: the loop runs kc times and advances bp by 16·V, so it
                // reads b[..kc·16·V], in bounds by the assert.
                *r = unsafe { _mm512_loadu_ps(bp.add(16 * v)) };
            }
            for (row, &off) in acc.iter_mut().zip(&rows) {
                // SAFETY: at step p this reads a[off + p·step] ≤ last_a < a.len().
                let ai = _mm512_set1_ps(unsafe { *ap.add(off) });
                for (r, &bj) in row.iter_mut().zip(&bv) {
                    *r = _mm512_fmadd_ps(ai, bj, *r);
                }
            }
            // wrapping_add: after the last step the pointers may be past the
            // slices, but they are not read there.
            ap = ap.wrapping_add(step);
            bp = bp.wrapping_add(16 * V);
        }
        let cp = c.as_mut_ptr();
        for v in 0..V {
            let lanes = (w - 16 * v).min(16);
            let mask = ((1u32 << lanes) - 1) as __mmask16;
            for (i, row) in acc.iter().enumerate().take(h) {
                // SAFETY: i < h and 16v + lane < w for the lanes in the mask,
                // so every accessed index i·ldc + 16v + lane is below
                // (h−1)·ldc + w ≤ c.len(); masked-off lanes are not accessed,
                // and the base index i·ldc + 16v < c.len() too.
                unsafe {
                    let p = cp.add(i * ldc + 16 * v);
                    let mut r = row[v];
                    if load_c {
                        r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(mask, p));
                    } else if let Some(bias) = bias {
                        r = _mm512_add_ps(r, _mm512_set1_ps(bias[i]));
                    }
                    _mm512_mask_storeu_ps(p, mask, r);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic pseudo-random value in [-1, 1).
    fn val(seed: &mut u64) -> f32 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((*seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    /// Runs one GEMM through `portable_only` and checks it against an f64
    /// reference, elementwise within 1e-5·Σ|a||b|; entries of `c` outside
    /// the m×n block must be untouched.
    #[allow(clippy::too_many_arguments)]
    fn check(
        portable_only: bool,
        m: usize,
        k: usize,
        n: usize,
        pad: usize,
        bt: bool,
        accumulate: bool,
        seed: &mut u64,
    ) {
        let (lda, ldb, ldc) = (k + pad, if bt { k } else { n } + 2 * pad, n + 3 * pad);
        let a: Vec<f32> = (0..m * lda).map(|_| val(seed)).collect();
        let b_rows = if bt { n } else { k };
        let b: Vec<f32> = (0..b_rows * ldb).map(|_| val(seed)).collect();
        let c0: Vec<f32> = (0..m * ldc).map(|_| val(seed)).collect();
        let mut c = c0.clone();
        let bat = |p: usize, j: usize| if bt { b[j * ldb + p] } else { b[p * ldb + j] };
        let am = Mat::new("A", &a, m, k, lda, 1).unwrap();
        let bm = if bt { Mat::new("Bᵀ", &b, k, n, 1, ldb) } else { Mat::new("B", &b, k, n, ldb, 1) }.unwrap();
        gemm(portable_only, am, bm, &mut c, ldc, accumulate).unwrap();
        for i in 0..m {
            for j in 0..ldc {
                let got = c[i * ldc + j];
                if j >= n {
                    assert_eq!(got.to_bits(), c0[i * ldc + j].to_bits(), "pad touched at {i},{j}");
                    continue;
                }
                let (mut want, mut mag) = (if accumulate { c0[i * ldc + j] as f64 } else { 0.0 }, 0.0f64);
                mag += want.abs();
                for p in 0..k {
                    let prod = a[i * lda + p] as f64 * bat(p, j) as f64;
                    want += prod;
                    mag += prod.abs();
                }
                let err = (got as f64 - want).abs();
                assert!(
                    err <= 1e-5 * mag.max(f64::MIN_POSITIVE),
                    "m={m} k={k} n={n} pad={pad} bt={bt} acc={accumulate}: c[{i},{j}] = {got}, want {want}"
                );
            }
        }
    }

    const SIZES: [usize; 11] = [1, 2, 3, 7, 15, 16, 17, 31, 33, 64, 100];

    fn sweep(portable_only: bool) {
        let mut seed = 7;
        for (t, &m) in SIZES.iter().enumerate() {
            for (u, &k) in SIZES.iter().enumerate() {
                for (v, &n) in SIZES.iter().enumerate() {
                    let pad = (t + u + v) % 3 * 5;
                    let (bt, accumulate) = ((t + v) % 2 == 1, (u + v) % 2 == 0);
                    check(portable_only, m, k, n, pad, bt, accumulate, &mut seed);
                }
            }
        }
    }

    #[test]
    fn matches_reference_on_edge_shapes() {
        sweep(false);
    }

    #[test]
    fn fallback_matches_reference() {
        sweep(true);
    }

    #[test]
    fn spans_several_blocks() {
        // Crosses the KC, MC and NC block boundaries, with M and N edges.
        let mut seed = 11;
        for &(m, k, n) in &[(9, 513, 2305), (200, 257, 50)] {
            for bt in [false, true] {
                check(false, m, k, n, 1, bt, !bt, &mut seed);
            }
        }
    }

    /// The fused im2col GEMM equals the product with the unrolled patch
    /// matrix (within the f32 bound), over strides 1–3, paddings that cover
    /// whole taps, dilation, narrow and wide rows, several KC blocks, and a
    /// bias; or reports that the CPU lacks AVX-512F.
    #[test]
    fn patches_match_unrolled_product() {
        let mut seed = 3;
        // (c, h, w, kh, kw, stride, pad, dilation, m)
        type Case = (usize, usize, usize, usize, usize, [usize; 2], [usize; 4], [usize; 2], usize);
        let cases: [Case; 7] = [
            (3, 9, 11, 3, 3, [1, 1], [1, 1, 1, 1], [1, 1], 5),
            (2, 13, 40, 7, 7, [2, 2], [3, 3, 3, 3], [1, 1], 9),
            (4, 6, 5, 2, 3, [3, 3], [0, 2, 1, 4], [2, 1], 8),
            (1, 1, 3, 1, 2, [1, 1], [0, 0, 0, 2], [1, 2], 1),
            (30, 7, 7, 3, 3, [1, 1], [1, 1, 1, 1], [1, 1], 17),
            (2, 3, 70, 1, 3, [2, 2], [0, 5, 0, 5], [1, 3], 3),
            (1, 50, 52, 3, 3, [1, 1], [1, 1, 1, 1], [1, 1], 2),
        ];
        for (case, &(c, h, w, kh, kw, stride, pad, dilation, m)) in cases.iter().enumerate() {
            let oh = (h + pad[0] + pad[2] - dilation[0] * (kh - 1) - 1) / stride[0] + 1;
            let ow = (w + pad[1] + pad[3] - dilation[1] * (kw - 1) - 1) / stride[1] + 1;
            let (k, n) = (c * kh * kw, oh * ow);
            let x: Vec<f32> = (0..c * h * w).map(|_| val(&mut seed)).collect();
            let a: Vec<f32> = (0..m * k).map(|_| val(&mut seed)).collect();
            let bias: Vec<f32> = (0..m).map(|_| val(&mut seed)).collect();
            let mut unrolled = vec![0f32; k * n];
            for (row, r) in unrolled.chunks_mut(n).enumerate() {
                let (ci, ki, kj) = (row / (kh * kw), row / kw % kh, row % kw);
                for (j, v) in r.iter_mut().enumerate() {
                    let iy = ((j / ow) * stride[0] + ki * dilation[0]) as isize - pad[0] as isize;
                    let ix = ((j % ow) * stride[1] + kj * dilation[1]) as isize - pad[1] as isize;
                    if (0..h as isize).contains(&iy) && (0..w as isize).contains(&ix) {
                        *v = x[(ci * h + iy as usize) * w + ix as usize];
                    }
                }
            }
            let p = Patches { x: &x, c, h, w, kh, kw, stride, pad: [pad[0], pad[1]], dilation, oh, ow };
            let mut got = vec![f32::NAN; m * n];
            let use_bias = case % 2 == 0;
            let fused = sgemm_patches(m, &a, k, &p, use_bias.then_some(&bias[..]), &mut got, n).unwrap();
            #[cfg(target_arch = "x86_64")]
            assert_eq!(fused, avx512::available());
            if !fused {
                assert!(got.iter().all(|v| v.is_nan()));
                continue;
            }
            for i in 0..m {
                for j in 0..n {
                    let (mut want, mut mag) = (if use_bias { bias[i] as f64 } else { 0.0 }, 0.0f64);
                    mag += want.abs();
                    for q in 0..k {
                        let prod = a[i * k + q] as f64 * unrolled[q * n + j] as f64;
                        want += prod;
                        mag += prod.abs();
                    }
                    let err = (got[i * n + j] as f64 - want).abs();
                    assert!(
                        err <= 1e-5 * mag.max(f64::MIN_POSITIVE),
                        "case {case}: c[{i},{j}] = {}, want {want}",
                        got[i * n + j]
                    );
                }
            }
        }
        let p = Patches {
            x: &[0.0; 3],
            c: 1,
            h: 2,
            w: 2,
            kh: 1,
            kw: 1,
            stride: [1, 1],
            pad: [0, 0],
            dilation: [1, 1],
            oh: 2,
            ow: 2,
        };
        assert!(sgemm_patches(1, &[1.0], 1, &p, None, &mut [0.0; 4], 4).unwrap_err().contains("input"));
        let p = Patches { x: &[0.0; 4], stride: [0, 1], ..p };
        assert!(sgemm_patches(1, &[1.0], 1, &p, None, &mut [0.0; 4], 4).unwrap_err().contains("stride"));
        let p = Patches { stride: [1, 1], oh: usize::MAX, ..p };
        assert!(sgemm_patches(1, &[1.0], 1, &p, None, &mut [0.0; 4], 4).is_err());
    }

    #[test]
    fn does_not_read_c_unless_accumulating() {
        let a = [1.0f32, 2.0];
        let b = [3.0f32, 4.0];
        let mut c = [f32::NAN];
        sgemm(1, 2, 1, &a, 2, &b, 1, &mut c, 1, false).unwrap();
        assert_eq!(c, [11.0]);
        let mut c = [f32::NAN, f32::NAN];
        sgemm(1, 0, 2, &a, 0, &b, 2, &mut c, 2, false).unwrap();
        assert_eq!(c, [0.0, 0.0]);
        let mut c = [5.0f32, f32::NAN];
        sgemm_bt(1, 2, 1, &a, 2, &b, 2, &mut c, 1, true).unwrap();
        assert_eq!(c[0], 16.0);
        assert!(c[1].is_nan());
    }

    #[test]
    fn rejects_short_slices_and_leading_dimensions() {
        let x = [0.0f32; 6];
        let mut c = [0.0f32; 4];
        assert!(sgemm(2, 3, 2, &x[..5], 3, &x, 2, &mut c, 2, false).unwrap_err().contains("A"));
        assert!(sgemm(2, 3, 2, &x, 2, &x, 2, &mut c, 2, false).unwrap_err().contains("leading"));
        assert!(sgemm(2, 3, 2, &x, 3, &x, 2, &mut c[..3], 2, false).unwrap_err().contains("C"));
        assert!(sgemm_bt(2, 3, 2, &x, 3, &x[..5], 3, &mut c, 2, false).unwrap_err().contains("Bᵀ"));
        assert!(sgemm(2, 3, usize::MAX, &x, 3, &x, usize::MAX, &mut c, usize::MAX, false).is_err());
        assert_eq!(c, [0.0; 4]);
    }

    #[test]
    fn views_take_the_fast_path_or_fall_back() {
        let a = ndarray::Array2::from_shape_fn((5, 7), |(i, j)| (i * 7 + j) as f32 * 0.25);
        let w = ndarray::Array2::from_shape_fn((6, 7), |(i, j)| (i as f32 - j as f32) * 0.5);
        let want = a.dot(&w.t());
        let mut c = ndarray::Array2::zeros((5, 6));
        sgemm_view(a.view(), w.t(), false, c.view_mut());
        assert_eq!(c, want);
        // A strided (non-contiguous) B goes to general_mat_mul.
        let wt = w.t().to_owned();
        let wide = ndarray::concatenate![ndarray::Axis(1), wt, wt];
        let strided = wide.slice(ndarray::s![.., ..;2]);
        let mut c2 = ndarray::Array2::ones((5, 6));
        sgemm_view(a.view(), strided, true, c2.view_mut());
        assert_eq!(c2, a.dot(&strided) + 1.0);
    }
}
