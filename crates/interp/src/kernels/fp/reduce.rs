//! Reductions: `fp.reduce_mean`, `fp.reduce_max`, `fp.reduce_min`,
//! `fp.reduce_sum`. Sums and means accumulate in f64 in row-major order and
//! round once; max and min propagate NaN.

use super::{one, operand, unsupported};
use crate::error::InterpError;
use crate::registry::{Kernel, KernelContext, KernelResults};
use crate::tensor::Tensor;
use ndarray::{ArrayD, IxDyn};
use qopt_dialect_fp::op_names as fp_op;

kernel_table! {
    fp_op::REDUCE_MEAN => reduce_mean, fp_op::REDUCE_MAX => reduce_max, fp_op::REDUCE_MIN => reduce_min,
    fp_op::REDUCE_SUM => reduce_sum,
}

#[derive(Copy, Clone)]
enum Kind {
    Mean,
    Max,
    Min,
    Sum,
}

/// Reduces `values` (row-major, `shape`) over the `reduced` dimensions:
/// each output element gathers the inputs whose kept coordinates match it.
fn reduce_f64(values: &[f64], shape: &[usize], reduced: &[bool], kind: Kind) -> (Vec<f64>, usize) {
    // The output index of each input element, by mixed-radix arithmetic over
    // the kept dimensions.
    let kept: Vec<usize> = shape.iter().zip(reduced).map(|(&d, &r)| if r { 1 } else { d }).collect();
    let out_len: usize = kept.iter().product();
    let count = if out_len == 0 { 0 } else { values.len() / out_len.max(1) };
    let (init, fold): (f64, fn(f64, f64) -> f64) = match kind {
        Kind::Mean | Kind::Sum => (0.0, |a, b| a + b),
        Kind::Max => (f64::NEG_INFINITY, |a, b| if a.is_nan() || b.is_nan() { f64::NAN } else { a.max(b) }),
        Kind::Min => (f64::INFINITY, |a, b| if a.is_nan() || b.is_nan() { f64::NAN } else { a.min(b) }),
    };
    let mut out = vec![init; out_len];
    let rank = shape.len();
    let mut coord = vec![0usize; rank];
    for &v in values {
        let mut index = 0;
        for d in 0..rank {
            index = index * kept[d] + if reduced[d] { 0 } else { coord[d] };
        }
        out[index] = fold(out[index], v);
        for d in (0..rank).rev() {
            coord[d] += 1;
            if coord[d] < shape[d] {
                break;
            }
            coord[d] = 0;
        }
    }
    if let Kind::Mean = kind {
        out.iter_mut().for_each(|v| *v /= count as f64);
    }
    (out, count)
}

fn reduce(
    kc: &mut KernelContext<'_>,
    ops: &[&Tensor],
    kind: Kind,
    name: &str,
) -> Result<KernelResults, InterpError> {
    let x = operand(ops, 0)?;
    let shape = x.shape().to_vec();
    let (reduced, keepdims) =
        qopt_dialect_fp::reduce_axes(kc.ctx, kc.attrs, shape.len()).map_err(InterpError::new)?;
    let out_shape = qopt_dialect_fp::reduced_dims(&shape, &reduced, keepdims, 1);
    let values: Vec<f64> = match x {
        Tensor::F32(_) | Tensor::F64(_) => x.to_f64_vec(),
        other => return Err(unsupported(name, other)),
    };
    let (out, _) = reduce_f64(&values, &shape, &reduced, kind);
    let build = |e: ndarray::ShapeError| InterpError::new(e.to_string());
    one(match x {
        Tensor::F32(_) => Tensor::F32(
            ArrayD::from_shape_vec(IxDyn(&out_shape), out.iter().map(|&v| v as f32).collect())
                .map_err(build)?,
        ),
        _ => Tensor::F64(ArrayD::from_shape_vec(IxDyn(&out_shape), out).map_err(build)?),
    })
}

/// `fp.reduce_mean`.
pub(crate) fn reduce_mean(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    reduce(kc, ops, Kind::Mean, fp_op::REDUCE_MEAN)
}

/// `fp.reduce_max`.
pub(crate) fn reduce_max(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    reduce(kc, ops, Kind::Max, fp_op::REDUCE_MAX)
}

/// `fp.reduce_min`.
pub(crate) fn reduce_min(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    reduce(kc, ops, Kind::Min, fp_op::REDUCE_MIN)
}

/// `fp.reduce_sum`.
pub(crate) fn reduce_sum(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    reduce(kc, ops, Kind::Sum, fp_op::REDUCE_SUM)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::fp::tests::{f32t, run};
    use qopt_ir_core::Context;

    #[test]
    fn reductions_over_axes() {
        let mut ctx = Context::new();
        // [[[0, 1, 2], [3, 4, 5]], [[6, 7, 8], [9, 10, 11]]]: 2×2×3.
        let x = f32t(&[2, 2, 3], &(0..12).map(|v| v as f32).collect::<Vec<_>>());
        let mean = run(&mut ctx, reduce_mean, &[&x], "{axes = [-1]}", &[]);
        assert_eq!((mean.shape().to_vec(), mean.to_f64_vec()), (vec![2, 2, 1], vec![1.0, 4.0, 7.0, 10.0]));
        let sum = run(&mut ctx, reduce_sum, &[&x], "{axes = [0, 2], keepdims = false}", &[]);
        assert_eq!(
            (sum.shape().to_vec(), sum.to_f64_vec()),
            (vec![2], vec![0.0 + 1.0 + 2.0 + 6.0 + 7.0 + 8.0, 3.0 + 4.0 + 5.0 + 9.0 + 10.0 + 11.0])
        );
        let max = run(&mut ctx, reduce_max, &[&x], "{axes = [1]}", &[]);
        assert_eq!(
            (max.shape().to_vec(), max.to_f64_vec()),
            (vec![2, 1, 3], vec![3.0, 4.0, 5.0, 9.0, 10.0, 11.0])
        );
        let min = run(&mut ctx, reduce_min, &[&x], "{}", &[]);
        assert_eq!((min.shape().to_vec(), min.to_f64_vec()), (vec![1, 1, 1], vec![0.0]));
        let nan = f32t(&[2], &[1.0, f32::NAN]);
        assert!(run(&mut ctx, reduce_max, &[&nan], "{}", &[]).to_f64_vec()[0].is_nan());
    }
}
