//! `fp.batch_norm` (inference), `fp.bias_add`, `fp.softmax`, `fp.layer_norm`
//! and `fp.instance_norm`.

use super::{one, operand, unsupported, Real};
use crate::error::{bail, InterpError};
use crate::registry::{Kernel, KernelContext, KernelResults};
use crate::tensor::Tensor;
use ndarray::{ArrayD, Axis};
use qopt_dialect_fp::attrs;
use qopt_dialect_fp::op_names as fp_op;
use qopt_dialect_fp::shape::normalize_axis;

kernel_table! {
    fp_op::BATCH_NORM => batch_norm, fp_op::BIAS_ADD => bias_add, fp_op::SOFTMAX => softmax,
    fp_op::LAYER_NORM => layer_norm, fp_op::INSTANCE_NORM => instance_norm,
}

/// `fp.layer_norm`: each block of the dimensions from `axis` on is
/// normalized by its mean and population variance in f64, then scaled and
/// shifted elementwise, and rounded once.
pub(crate) fn layer_norm(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    let x = operand(ops, 0)?;
    if !matches!(x, Tensor::F32(_) | Tensor::F64(_)) {
        return Err(unsupported(fp_op::LAYER_NORM, x));
    }
    let shape = x.shape().to_vec();
    let (axis, epsilon) =
        qopt_dialect_fp::layer_norm_params(kc.ctx, kc.attrs, shape.len()).map_err(InterpError::new)?;
    let block: usize = shape[axis..].iter().product();
    let values = x.to_f64_vec();
    let scale = operand(ops, 1)?.to_f64_vec();
    let bias = match ops.get(2) {
        Some(b) => b.to_f64_vec(),
        None => vec![0.0; block],
    };
    if scale.len() != block || bias.len() != block {
        bail!(
            "scale and bias need {block} elements (the normalized shape), got {} and {}",
            scale.len(),
            bias.len()
        );
    }
    let mut out = Vec::with_capacity(values.len());
    for row in values.chunks(block.max(1)) {
        let (mean, inv) = mean_and_inverse_deviation(row, epsilon);
        out.extend(row.iter().zip(&scale).zip(&bias).map(|((v, s), b)| (v - mean) * inv * s + b));
    }
    rounded_like(x, &shape, out)
}

/// The mean of `block` and 1/√(population variance + `epsilon`), in f64.
fn mean_and_inverse_deviation(block: &[f64], epsilon: f64) -> (f64, f64) {
    let n = block.len() as f64;
    let mean = block.iter().sum::<f64>() / n;
    let var = block.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    (mean, 1.0 / (var + epsilon).sqrt())
}

/// `values` as a tensor of `shape` and `x`'s float type, each rounded once.
fn rounded_like(x: &Tensor, shape: &[usize], values: Vec<f64>) -> Result<KernelResults, InterpError> {
    let build = |e: ndarray::ShapeError| InterpError::new(e.to_string());
    one(match x {
        Tensor::F32(_) => Tensor::F32(
            ArrayD::from_shape_vec(ndarray::IxDyn(shape), values.iter().map(|&v| v as f32).collect())
                .map_err(build)?,
        ),
        _ => Tensor::F64(ArrayD::from_shape_vec(ndarray::IxDyn(shape), values).map_err(build)?),
    })
}

/// `fp.instance_norm`: each N×C plane normalized by its own mean and
/// population variance in f64, then `· scale[c] + bias[c]`, rounded once.
pub(crate) fn instance_norm(
    kc: &mut KernelContext<'_>,
    ops: &[&Tensor],
) -> Result<KernelResults, InterpError> {
    let x = operand(ops, 0)?;
    if !matches!(x, Tensor::F32(_) | Tensor::F64(_)) || x.rank() < 3 {
        return Err(unsupported(fp_op::INSTANCE_NORM, x));
    }
    let epsilon = qopt_dialect_fp::instance_norm_epsilon(kc.ctx, kc.attrs).map_err(InterpError::new)?;
    let shape = x.shape().to_vec();
    let (channels, plane) = (shape[1], shape[2..].iter().product::<usize>());
    let (scale, bias) = (operand(ops, 1)?.to_f64_vec(), operand(ops, 2)?.to_f64_vec());
    if scale.len() != channels || bias.len() != channels {
        bail!("scale and bias need {channels} elements, got {} and {}", scale.len(), bias.len());
    }
    let values = x.to_f64_vec();
    let mut out = Vec::with_capacity(values.len());
    for (i, block) in values.chunks(plane.max(1)).enumerate() {
        let c = i % channels.max(1);
        let (mean, inv) = mean_and_inverse_deviation(block, epsilon);
        out.extend(block.iter().map(|v| (v - mean) * inv * scale[c] + bias[c]));
    }
    rounded_like(x, &shape, out)
}

/// Multiplies slice `i` of `x` along `axis` by `a[i]` and adds `b[i]`, in
/// one pass that reads `x` and writes the result.
fn scale_shift<T: Real>(x: &ArrayD<T>, axis: usize, a: &[T], b: &[T]) -> ArrayD<T> {
    let x = x.as_standard_layout();
    let inner: usize = x.shape()[axis + 1..].iter().product();
    let c = x.shape()[axis].max(1);
    let mut out = Vec::with_capacity(x.len());
    for (i, chunk) in x.as_slice().unwrap_or_default().chunks(inner.max(1)).enumerate() {
        let (s, t) = (a[i % c], b[i % c]);
        out.extend(chunk.iter().map(|&v| v * s + t));
    }
    // A standard-layout array is a slice, so `out` has every element.
    ArrayD::from_shape_vec(x.raw_dim(), out).unwrap_or_else(|_| x.to_owned())
}

fn vector<T: Real>(t: &Tensor, c: usize, what: &str) -> Result<Vec<f64>, InterpError> {
    if t.shape() != [c] {
        bail!("{what} must have shape [{c}], got {:?}", t.shape());
    }
    Ok(t.to_f64_vec())
}

fn batch_norm_real<T: Real>(x: &ArrayD<T>, params: &[&Tensor], eps: f64) -> Result<ArrayD<T>, InterpError> {
    if x.ndim() < 2 {
        bail!("input must have rank 2 or more, got {:?}", x.shape());
    }
    let c = x.shape()[1];
    let scale = vector::<T>(params[0], c, "scale")?;
    let bias = vector::<T>(params[1], c, "bias")?;
    let mean = vector::<T>(params[2], c, "mean")?;
    let var = vector::<T>(params[3], c, "variance")?;
    // y = x·a + (bias - mean·a), a = scale / sqrt(var + eps); folded in f64.
    let a: Vec<f64> = (0..c).map(|i| scale[i] / (var[i] + eps).sqrt()).collect();
    let shift: Vec<T> = (0..c).map(|i| T::from_f64(bias[i] - mean[i] * a[i])).collect();
    let a: Vec<T> = a.into_iter().map(T::from_f64).collect();
    Ok(scale_shift(x, 1, &a, &shift))
}

/// `fp.batch_norm(x, scale, bias, mean, var) {epsilon}`.
pub(crate) fn batch_norm(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    let eps = attrs::float_in(kc.ctx, kc.attrs, "epsilon", qopt_dialect_fp::BATCH_NORM_EPSILON)?;
    let x = operand(ops, 0)?;
    operand(ops, 4)?;
    if ops[1..5].iter().any(|p| p.dtype() != x.dtype()) {
        bail!("operands have different dtypes");
    }
    match x {
        Tensor::F32(a) => one(Tensor::F32(batch_norm_real(a, &ops[1..5], eps)?)),
        Tensor::F64(a) => one(Tensor::F64(batch_norm_real(a, &ops[1..5], eps)?)),
        other => Err(unsupported(fp_op::BATCH_NORM, other)),
    }
}

/// `fp.bias_add(x, b) {axis}`.
pub(crate) fn bias_add(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    let (x, b) = (operand(ops, 0)?, operand(ops, 1)?);
    let axis = normalize_axis(attrs::int_in(kc.ctx, kc.attrs, "axis", 1)?, x.rank())?;
    let c = x.shape()[axis];
    if b.shape() != [c] {
        bail!("bias must have shape [{c}], got {:?}", b.shape());
    }
    match (x, b) {
        (Tensor::F32(x), Tensor::F32(b)) => {
            one(Tensor::F32(scale_shift(x, axis, &vec![1.0; c], &b.iter().copied().collect::<Vec<_>>())))
        }
        (Tensor::F64(x), Tensor::F64(b)) => {
            one(Tensor::F64(scale_shift(x, axis, &vec![1.0; c], &b.iter().copied().collect::<Vec<_>>())))
        }
        _ if x.dtype() != b.dtype() => bail!("operands have different dtypes"),
        _ => Err(unsupported(fp_op::BIAS_ADD, x)),
    }
}

fn softmax_real<T: Real>(x: &ArrayD<T>, axis: usize) -> ArrayD<T> {
    let mut out = x.to_owned();
    for mut lane in out.lanes_mut(Axis(axis)) {
        // Subtracting the max keeps exp from overflowing.
        let max = lane.iter().fold(None, |m: Option<T>, &v| match m {
            Some(m) if v <= m => Some(m),
            Some(m) if v > m => Some(v),
            Some(m) => Some(m),
            None => Some(v),
        });
        let Some(max) = max else { continue };
        let mut sum = T::zero();
        for v in lane.iter_mut() {
            *v = (*v - max).exp();
            sum = sum + *v;
        }
        for v in lane.iter_mut() {
            *v = *v / sum;
        }
    }
    out
}

/// `fp.softmax(x) {axis}` (default -1).
pub(crate) fn softmax(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    let x = operand(ops, 0)?;
    let axis = normalize_axis(attrs::int_in(kc.ctx, kc.attrs, "axis", -1)?, x.rank())?;
    match x {
        Tensor::F32(a) => one(Tensor::F32(softmax_real(a, axis))),
        Tensor::F64(a) => one(Tensor::F64(softmax_real(a, axis))),
        other => Err(unsupported(fp_op::SOFTMAX, other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::fp::tests::{f32t, iota, run, run_err};
    use qopt_ir_core::Context;

    #[test]
    fn batch_norm_and_bias() {
        let mut ctx = Context::new();
        let x = iota(&[1, 2, 1, 2]);
        let (s, b) = (f32t(&[2], &[2., 1.]), f32t(&[2], &[1., -1.]));
        let (m, v) = (f32t(&[2], &[1., 0.]), f32t(&[2], &[4., 0.25]));
        let y = run(&mut ctx, batch_norm, &[&x, &s, &b, &m, &v], "{epsilon = 0.0 : f32}", &[]);
        // ch0: 2·(x-1)/2 + 1 = x; ch1: (x - 0)/0.5 - 1 = 2x - 1.
        assert_eq!(y, f32t(&[1, 2, 1, 2], &[0., 1., 3., 5.]));
        let y = run(&mut ctx, bias_add, &[&x, &b], "{}", &[]);
        assert_eq!(y, f32t(&[1, 2, 1, 2], &[1., 2., 1., 2.]));
        let b3 = f32t(&[2], &[10., 20.]);
        let y = run(&mut ctx, bias_add, &[&iota(&[2, 2]), &b3], "{axis = -1}", &[]);
        assert_eq!(y, f32t(&[2, 2], &[10., 21., 12., 23.]));
        assert!(run_err(&mut ctx, bias_add, &[&x, &f32t(&[3], &[0.; 3])], "{}").contains("shape [2]"));
    }

    #[test]
    fn softmax_stable() {
        let mut ctx = Context::new();
        let x = f32t(&[2, 2], &[0., 0., 1000., 1000. + 2f32.ln()]); // exp(1000) overflows f32 without the max shift; 1000 + ln 2 is rounded to f32
        let y = run(&mut ctx, softmax, &[&x], "{}", &[]);
        assert!(y.all_close(&f32t(&[2, 2], &[0.5, 0.5, 1. / 3., 2. / 3.]), 1e-4, 0.0), "{y:?}");
        let y = run(&mut ctx, softmax, &[&f32t(&[2, 1], &[1., 3.])], "{axis = 0}", &[]);
        let e = (2f32).exp();
        assert!(y.all_close(&f32t(&[2, 1], &[1. / (1. + e), e / (1. + e)]), 1e-6, 0.0));
    }

    #[test]
    fn layer_norm_over_the_last_axis() {
        let mut ctx = Context::new();
        let x = f32t(&[2, 2], &[1.0, 3.0, -2.0, 2.0]);
        let (g, b) = (f32t(&[2], &[1.0, 2.0]), f32t(&[2], &[0.0, 1.0]));
        let y = run(&mut ctx, layer_norm, &[&x, &g, &b], "{epsilon = 0.0 : f32}", &[]).to_f64_vec();
        // Rows normalize to [-1, 1]; then · [1, 2] + [0, 1].
        assert_eq!(y, [-1.0, 3.0, -1.0, 3.0]);
        let y = run(&mut ctx, layer_norm, &[&x, &g], "{}", &[]).to_f64_vec();
        assert!((y[1] - 2.0 / (1.0f64 + 1e-5).sqrt()).abs() < 1e-6, "{y:?}");
    }

    #[test]
    fn instance_norm_per_plane() {
        let mut ctx = Context::new();
        // Two channels of 1×2 planes: [1, 3] and [-2, 2].
        let x = f32t(&[1, 2, 1, 2], &[1.0, 3.0, -2.0, 2.0]);
        let (s, b) = (f32t(&[2], &[1.0, 2.0]), f32t(&[2], &[0.0, 1.0]));
        let y = run(&mut ctx, instance_norm, &[&x, &s, &b], "{epsilon = 0.0 : f32}", &[]).to_f64_vec();
        assert_eq!(y, [-1.0, 1.0, -1.0, 3.0]);
    }
}
