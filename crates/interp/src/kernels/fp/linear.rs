//! `fp.dense` (x·Wᵀ + b), `fp.matmul` (numpy matmul with broadcast batch
//! dimensions) and `fp.batch_matmul`, all by GEMM ([`Real::gemm`]).

use super::{one, operand, unsupported, Real};
use crate::error::{bail, InterpError};
use crate::registry::{Kernel, KernelContext, KernelResults};
use crate::tensor::Tensor;
use ndarray::{Array2, ArrayD, ArrayView2, Axis, Dimension, Ix2, IxDyn};
use qopt_dialect_fp::op_names as fp_op;
use qopt_dialect_fp::shape::broadcast;

kernel_table! {
    fp_op::DENSE => dense, fp_op::MATMUL => matmul, fp_op::BATCH_MATMUL => batch_matmul,
}

fn shape_err(e: ndarray::ShapeError) -> InterpError {
    InterpError::new(e.to_string())
}

/// `x` (…×K) · `w`ᵀ (`w` N×K) + `b` ([N]).
pub(crate) fn dense_real<T: Real>(
    x: &ArrayD<T>,
    w: &ArrayD<T>,
    b: Option<&ArrayD<T>>,
) -> Result<ArrayD<T>, InterpError> {
    let Some(&k) = x.shape().last() else { bail!("input must have rank 1 or more") };
    if w.ndim() != 2 || w.shape()[1] != k {
        bail!("weight must be N×{k}, got {:?}", w.shape());
    }
    let n = w.shape()[0];
    if let Some(b) = b {
        if b.shape() != [n] {
            bail!("bias must have shape [{n}], got {:?}", b.shape());
        }
    }
    let rows = x.len().checked_div(k).unwrap_or_else(|| x.shape()[..x.ndim() - 1].iter().product());
    let mut shape = x.shape().to_vec();
    if let Some(last) = shape.last_mut() {
        *last = n;
    }
    if rows <= GEMV_ROWS {
        let (xs, ws) = (x.as_standard_layout(), w.as_standard_layout());
        let bias = b.map(|b| b.as_standard_layout());
        if let (Some(xd), Some(wd)) = (xs.as_slice(), ws.as_slice()) {
            let bias = bias.as_ref().and_then(|b| b.as_slice());
            let out = gemv_rows_on(crate::simd::Isa::best(), xd, wd, bias, [rows, k, n]);
            return ArrayD::from_shape_vec(IxDyn(&shape), out).map_err(shape_err);
        }
    }
    let xs = x.as_standard_layout();
    let xv = ArrayView2::from_shape((rows, k), xs.as_slice().unwrap_or(&[])).map_err(shape_err)?;
    let wv = w.view().into_dimensionality::<Ix2>().map_err(shape_err)?;
    let mut out = match b {
        Some(b) => {
            let row = b.view().into_shape_with_order((1, n)).map_err(shape_err)?;
            row.broadcast((rows, n))
                .map(|v| v.to_owned())
                .ok_or_else(|| InterpError::new("bias broadcast"))?
        }
        None => Array2::zeros((rows, n)),
    };
    T::gemm(xv, wv.t(), b.is_some(), out.view_mut());
    out.into_shape_with_order(IxDyn(&shape)).map_err(shape_err)
}

/// Up to this many input rows, `fp.dense` takes dot products with the
/// weight rows directly ([`gemv_rows`]) instead of a GEMM that would pack the
/// whole weight for a few rows.
const GEMV_ROWS: usize = 4;

crate::simd::widened! {
    /// [`gemv_rows`] compiled for `isa`.
    fn gemv_rows_on<T: Real>(x: &[T], w: &[T], bias: Option<&[T]>, dims: [usize; 3]) -> Vec<T> = gemv_rows;
}

/// `x · wᵀ (+ bias)` for row-major `x` (rows × k) and `w` (n × k), one dot
/// product per output.
#[inline(always)]
fn gemv_rows<T: Real>(x: &[T], w: &[T], bias: Option<&[T]>, [rows, k, n]: [usize; 3]) -> Vec<T> {
    let mut out = Vec::with_capacity(rows * n);
    for r in 0..rows {
        let xr = &x[r * k..][..k];
        for j in 0..n {
            let start = bias.map_or(T::zero(), |b| b[j]);
            out.push(start + dot(xr, &w[j * k..][..k]));
        }
    }
    out
}

/// A dot product in [`LANES`] independent partial sums (so it vectorizes),
/// added pairwise at the end.
#[inline(always)]
fn dot<T: Real>(a: &[T], b: &[T]) -> T {
    let mut acc = [T::zero(); LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..LANES {
            acc[i] = acc[i] + x[i] * y[i];
        }
    }
    let mut tail = T::zero();
    for (&x, &y) in ra.iter().zip(rb) {
        tail = tail + x * y;
    }
    let mut width = LANES;
    while width > 1 {
        width /= 2;
        for i in 0..width {
            acc[i] = acc[i] + acc[i + width];
        }
    }
    acc[0] + tail
}

/// Partial sums of [`dot`]: four AVX-512 registers of f32 (eight AVX2, sixteen
/// SSE), enough independent additions to hide the adder's latency; the same
/// count on every ISA keeps the summation order, and so the bits, the same.
const LANES: usize = 64;

/// `fp.dense`.
pub(crate) fn dense(_: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    let (x, w) = (operand(ops, 0)?, operand(ops, 1)?);
    match (x, w, ops.get(2)) {
        (Tensor::F32(x), Tensor::F32(w), None) => one(Tensor::F32(dense_real(x, w, None)?)),
        (Tensor::F32(x), Tensor::F32(w), Some(Tensor::F32(b))) => {
            one(Tensor::F32(dense_real(x, w, Some(b))?))
        }
        (Tensor::F64(x), Tensor::F64(w), None) => one(Tensor::F64(dense_real(x, w, None)?)),
        (Tensor::F64(x), Tensor::F64(w), Some(Tensor::F64(b))) => {
            one(Tensor::F64(dense_real(x, w, Some(b))?))
        }
        _ if x.dtype() != w.dtype() => bail!("operands have different dtypes"),
        _ => Err(unsupported(fp_op::DENSE, x)),
    }
}

/// Matrix products over the last two dimensions; the leading dimensions
/// broadcast when `broadcast_batch`, else must be equal.
pub(crate) fn matmul_real<T: Real>(
    a: &ArrayD<T>,
    b: &ArrayD<T>,
    broadcast_batch: bool,
) -> Result<ArrayD<T>, InterpError> {
    if a.ndim() < 2 || b.ndim() < 2 {
        bail!("operands must have rank 2 or more, got {:?} and {:?}", a.shape(), b.shape());
    }
    let (ra, rb) = (a.ndim(), b.ndim());
    let (m, k) = (a.shape()[ra - 2], a.shape()[ra - 1]);
    let (k2, n) = (b.shape()[rb - 2], b.shape()[rb - 1]);
    if k != k2 {
        bail!("inner dimensions differ: {:?} · {:?}", a.shape(), b.shape());
    }
    let (ba, bb) = (&a.shape()[..ra - 2], &b.shape()[..rb - 2]);
    let batch: Vec<usize> = if broadcast_batch {
        let to = |s: &[usize]| s.iter().map(|&d| d as i64).collect::<Vec<_>>();
        broadcast(&to(ba), &to(bb))?.iter().map(|&d| d as usize).collect()
    } else {
        if ba != bb {
            bail!("batch dimensions differ: {:?} and {:?}", a.shape(), b.shape());
        }
        ba.to_vec()
    };
    let full = |tail: [usize; 2]| -> Vec<usize> { batch.iter().copied().chain(tail).collect() };
    let av = a.broadcast(IxDyn(&full([m, k]))).ok_or_else(|| InterpError::new("lhs batch broadcast"))?;
    let bv = b.broadcast(IxDyn(&full([k, n]))).ok_or_else(|| InterpError::new("rhs batch broadcast"))?;
    let mut out = ArrayD::<T>::zeros(IxDyn(&full([m, n])));
    for idx in ndarray::indices(IxDyn(&batch)) {
        let (mut x, mut y, mut z) = (av.view(), bv.view(), out.view_mut());
        for &i in idx.slice() {
            x = x.index_axis_move(Axis(0), i);
            y = y.index_axis_move(Axis(0), i);
            z = z.index_axis_move(Axis(0), i);
        }
        let x = x.into_dimensionality::<Ix2>().map_err(shape_err)?;
        let y = y.into_dimensionality::<Ix2>().map_err(shape_err)?;
        let z = z.into_dimensionality::<Ix2>().map_err(shape_err)?;
        T::gemm(x, y, false, z);
    }
    Ok(out)
}

fn matmul_kernel(ops: &[&Tensor], broadcast_batch: bool, name: &str) -> Result<KernelResults, InterpError> {
    let (a, b) = (operand(ops, 0)?, operand(ops, 1)?);
    match (a, b) {
        (Tensor::F32(x), Tensor::F32(y)) => one(Tensor::F32(matmul_real(x, y, broadcast_batch)?)),
        (Tensor::F64(x), Tensor::F64(y)) => one(Tensor::F64(matmul_real(x, y, broadcast_batch)?)),
        _ if a.dtype() != b.dtype() => bail!("operands have different dtypes"),
        _ => Err(unsupported(name, a)),
    }
}

/// `fp.matmul`.
pub(crate) fn matmul(_: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    matmul_kernel(ops, true, fp_op::MATMUL)
}

/// `fp.batch_matmul`.
pub(crate) fn batch_matmul(_: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    let a = operand(ops, 0)?;
    if a.rank() != 3 || operand(ops, 1)?.rank() != 3 {
        bail!("operands must have rank 3");
    }
    matmul_kernel(ops, false, fp_op::BATCH_MATMUL)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::fp::tests::{f32t, iota, run, run_err};
    use qopt_ir_core::Context;

    #[test]
    fn gemv_rows_match_a_plain_sum_on_every_isa() {
        use crate::simd::Isa;
        let (rows, k, n) = (3, 37, 5);
        let x: Vec<f32> = (0..rows * k).map(|i| (i as f32 * 0.3).sin()).collect();
        let w: Vec<f32> = (0..n * k).map(|i| (i as f32 * 0.7).cos()).collect();
        let b: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let base = gemv_rows_on(Isa::Base, &x, &w, Some(&b), [rows, k, n]);
        for r in 0..rows {
            for j in 0..n {
                let want: f64 =
                    b[j] as f64 + (0..k).map(|i| x[r * k + i] as f64 * w[j * k + i] as f64).sum::<f64>();
                assert!((base[r * n + j] as f64 - want).abs() < 1e-4, "({r}, {j})");
            }
        }
        for isa in [Isa::Avx512, Isa::Avx2] {
            if Isa::best() <= isa {
                assert_eq!(gemv_rows_on(isa, &x, &w, Some(&b), [rows, k, n]), base, "{isa:?}");
            } else {
                eprintln!("skipping the {isa:?} dense path: this CPU does not have it");
            }
        }
    }

    #[test]
    fn dense_cases() {
        let mut ctx = Context::new();
        let x = f32t(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let w = f32t(&[2, 3], &[1., 0., 0., 1., 1., 1.]);
        let b = f32t(&[2], &[0.5, -1.]);
        assert_eq!(run(&mut ctx, dense, &[&x, &w, &b], "{}", &[]), f32t(&[2, 2], &[1.5, 5., 4.5, 14.]));
        assert_eq!(run(&mut ctx, dense, &[&x, &w], "{}", &[]), f32t(&[2, 2], &[1., 6., 4., 15.]));
        // Rank 3 and rank 1 inputs.
        let x3 = f32t(&[1, 2, 3], &[1., 2., 3., 4., 5., 6.]);
        assert_eq!(run(&mut ctx, dense, &[&x3, &w], "{}", &[]), f32t(&[1, 2, 2], &[1., 6., 4., 15.]));
        let x1 = f32t(&[3], &[1., 2., 3.]);
        assert_eq!(run(&mut ctx, dense, &[&x1, &w], "{}", &[]), f32t(&[2], &[1., 6.]));
        let bad = f32t(&[2, 4], &[0.; 8]);
        assert!(run_err(&mut ctx, dense, &[&x, &bad], "{}").contains("weight"));
    }

    #[test]
    fn matmul_cases() {
        let mut ctx = Context::new();
        let a = iota(&[2, 1, 2, 3]);
        let b = iota(&[3, 3, 1]);
        let y = run(&mut ctx, matmul, &[&a, &b], "{}", &[]);
        assert_eq!(y.shape(), &[2, 3, 2, 1]);
        // a[1, 0] = [[6, 7, 8], [9, 10, 11]], b[2] = [6, 7, 8]ᵀ.
        let ya = y.as_f32().unwrap();
        assert_eq!(ya[[1, 2, 0, 0]], 6. * 6. + 7. * 7. + 8. * 8.);
        assert_eq!(ya[[1, 2, 1, 0]], 9. * 6. + 10. * 7. + 11. * 8.);
        assert_eq!(ya[[0, 0, 0, 0]], 0. * 0. + 1. * 1. + 2. * 2.);
        let a = iota(&[2, 2, 2]);
        let i = f32t(&[2, 2, 2], &[1., 0., 0., 1., 2., 0., 0., 2.]);
        let y = run(&mut ctx, batch_matmul, &[&a, &i], "{}", &[]);
        assert_eq!(y, f32t(&[2, 2, 2], &[0., 1., 2., 3., 8., 10., 12., 14.]));
        let c = iota(&[3, 2, 2]);
        assert!(run_err(&mut ctx, batch_matmul, &[&a, &c], "{}").contains("batch"));
        assert!(run_err(&mut ctx, matmul, &[&a, &iota(&[3, 2])], "{}").contains("inner"));
    }
}
