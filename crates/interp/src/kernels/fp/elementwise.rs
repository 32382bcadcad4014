//! Elementwise kernels: `fp.add`, `fp.sub`, `fp.mul`, `fp.div` with numpy
//! broadcasting, and `fp.relu`, `fp.sigmoid`, `fp.tanh`, `fp.clip`. `fp.relu`
//! also runs on quantized storage: values below the zero point become the zero
//! point (per tensor or per axis), which is max(x, 0) in real terms.

use super::{float_map, one, operand, unsupported, zero_points, Real};
use crate::error::{bail, InterpError};
use crate::registry::{Kernel, KernelContext, KernelResults};
use crate::tensor::Tensor;
use ndarray::{ArrayD, Axis, IxDyn, Zip};
use qopt_dialect_fp::op_names as fp_op;
use qopt_dialect_fp::{attrs, shape::broadcast};

/// `fp.leaky_relu`: x for x ≥ 0 (and NaN), alpha · x for x < 0; the
/// product of two f32 is exact in f64, so rounding it once is f32's product.
pub(crate) fn leaky_relu(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    let alpha = qopt_dialect_fp::leaky_relu_alpha(kc.ctx, kc.attrs).map_err(InterpError::new)?;
    one(
        float_map!(operand(ops, 0)?, fp_op::LEAKY_RELU, a => map_in_f64(a, |x| if x < 0.0 { alpha * x } else { x })),
    )
}

kernel_table! {
    fp_op::ADD => add, fp_op::SUB => sub, fp_op::MUL => mul, fp_op::DIV => div, fp_op::RELU => relu,
    fp_op::SIGMOID => sigmoid, fp_op::TANH => tanh, fp_op::GELU => gelu, fp_op::ERF => erf_kernel,
    fp_op::EXP => exp, fp_op::LOG => log, fp_op::SQRT => sqrt, fp_op::RECIPROCAL => reciprocal,
    fp_op::NEG => neg, fp_op::ABS => abs, fp_op::SOFTPLUS => softplus,
    fp_op::HARD_SIGMOID => hard_sigmoid, fp_op::HARD_SWISH => hard_swish, fp_op::LEAKY_RELU => leaky_relu,
    fp_op::MAX => max,
    fp_op::MIN => min, fp_op::POW => pow, fp_op::PRELU => prelu, fp_op::CLIP => clip,
}

/// `f(a, b)` element by element with numpy broadcasting.
pub(crate) fn broadcast_with<T: Copy, U>(
    a: &ArrayD<T>,
    b: &ArrayD<T>,
    f: impl Fn(T, T) -> U,
) -> Result<ArrayD<U>, InterpError> {
    if a.shape() == b.shape() {
        // The common case (a residual add): one pass over two row-major slices.
        if let (Some(xs), Some(ys)) = (a.as_slice(), b.as_slice()) {
            let out: Vec<U> = crate::simd::wide(|| xs.iter().zip(ys).map(|(&x, &y)| f(x, y)).collect());
            return ArrayD::from_shape_vec(a.raw_dim(), out).map_err(|e| InterpError::new(e.to_string()));
        }
        return Ok(Zip::from(a).and(b).map_collect(|&x, &y| f(x, y)));
    }
    let sa: Vec<i64> = a.shape().iter().map(|&d| d as i64).collect();
    let sb: Vec<i64> = b.shape().iter().map(|&d| d as i64).collect();
    let out: Vec<usize> = broadcast(&sa, &sb)?.iter().map(|&d| d as usize).collect();
    // One operand whole, the other constant over runs of the whole one (a
    // per-channel scale, a scalar): a scalar loop per run, which vectorizes.
    if let (Some(xs), Some(ys)) = (a.as_slice(), b.as_slice()) {
        let values = if a.shape() == out.as_slice() {
            crate::simd::wide(|| per_run(&out, xs, ys, b.shape(), &f))
        } else if b.shape() == out.as_slice() {
            crate::simd::wide(|| per_run(&out, ys, xs, a.shape(), |y, x| f(x, y)))
        } else {
            None
        };
        if let Some(values) = values {
            return ArrayD::from_shape_vec(IxDyn(&out), values).map_err(|e| InterpError::new(e.to_string()));
        }
    }
    let (Some(av), Some(bv)) = (a.broadcast(IxDyn(&out)), b.broadcast(IxDyn(&out))) else {
        bail!("shapes {:?} and {:?} cannot be broadcast", a.shape(), b.shape());
    };
    Ok(Zip::from(&av).and(&bv).map_collect(|&x, &y| f(x, y)))
}

/// `f(full, small)` over a whole operand and one that is constant over runs
/// of it ([`runs`]); `None` when `small` does not broadcast that way.
#[inline(always)]
fn per_run<T: Copy, U>(
    out: &[usize],
    full: &[T],
    small: &[T],
    small_shape: &[usize],
    f: impl Fn(T, T) -> U,
) -> Option<Vec<U>> {
    let (inner, period) = runs(out, small_shape)?;
    let mut values = Vec::with_capacity(full.len());
    for (i, chunk) in full.chunks(inner.max(1)).enumerate() {
        let s = small[i % period];
        values.extend(chunk.iter().map(|&x| f(x, s)));
    }
    Some(values)
}

/// How an operand of shape `small` broadcasts to `out` when it is constant
/// over contiguous runs of the result: `(run length, number of distinct
/// runs)`. That is the case when `small`, aligned to the right, is 1 on some
/// leading and some trailing dimensions and equal to `out` in between.
fn runs(out: &[usize], small: &[usize]) -> Option<(usize, usize)> {
    let pad = out.len().checked_sub(small.len())?;
    let dims: Vec<usize> = std::iter::repeat_n(1, pad).chain(small.iter().copied()).collect();
    // Without a dimension other than 1 the operand is one value for the whole result.
    let first = dims.iter().position(|&d| d != 1).unwrap_or(0);
    let last = dims.iter().rposition(|&d| d != 1).map_or(0, |i| i + 1);
    if (first..last).any(|i| dims[i] != out[i]) {
        return None;
    }
    Some((out[last..].iter().product(), dims[first..last].iter().product()))
}

/// `fp.add` and friends. The operations are generic (not `fn` pointers) so
/// each kernel's loop inlines its arithmetic and vectorizes.
fn binary(
    ops: &[&Tensor],
    name: &str,
    f32op: impl Fn(f32, f32) -> f32,
    f64op: impl Fn(f64, f64) -> f64,
) -> Result<KernelResults, InterpError> {
    let (a, b) = (operand(ops, 0)?, operand(ops, 1)?);
    match (a, b) {
        (Tensor::F32(x), Tensor::F32(y)) => one(Tensor::F32(broadcast_with(x, y, f32op)?)),
        (Tensor::F64(x), Tensor::F64(y)) => one(Tensor::F64(broadcast_with(x, y, f64op)?)),
        _ if a.dtype() != b.dtype() => {
            bail!("operands have different dtypes: {} and {}", a.dtype(), b.dtype())
        }
        _ => Err(unsupported(name, a)),
    }
}

/// `fp.add`.
pub(crate) fn add(_: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    binary(ops, fp_op::ADD, |x, y| x + y, |x, y| x + y)
}

/// `fp.max`: NaN if either operand is.
pub(crate) fn max(_: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    binary(
        ops,
        fp_op::MAX,
        |x, y| if x.is_nan() || y.is_nan() { f32::NAN } else { x.max(y) },
        |x, y| {
            if x.is_nan() || y.is_nan() {
                f64::NAN
            } else {
                x.max(y)
            }
        },
    )
}

/// `fp.min`: NaN if either operand is.
pub(crate) fn min(_: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    binary(
        ops,
        fp_op::MIN,
        |x, y| if x.is_nan() || y.is_nan() { f32::NAN } else { x.min(y) },
        |x, y| {
            if x.is_nan() || y.is_nan() {
                f64::NAN
            } else {
                x.min(y)
            }
        },
    )
}

/// `fp.pow`.
pub(crate) fn pow(_: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    binary(ops, fp_op::POW, f32::powf, f64::powf)
}

/// `fp.prelu`: x, or slope · x below 0.
pub(crate) fn prelu(_: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    binary(ops, fp_op::PRELU, |x, s| if x < 0.0 { x * s } else { x }, |x, s| if x < 0.0 { x * s } else { x })
}

/// `fp.sub`.
pub(crate) fn sub(_: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    binary(ops, fp_op::SUB, |x, y| x - y, |x, y| x - y)
}

/// `fp.mul`.
pub(crate) fn mul(_: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    binary(ops, fp_op::MUL, |x, y| x * y, |x, y| x * y)
}

/// `fp.div` (IEEE division: x / 0 is ±inf or NaN).
pub(crate) fn div(_: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    binary(ops, fp_op::DIV, |x, y| x / y, |x, y| x / y)
}

fn relu_real<T: Real>(a: &ArrayD<T>) -> ArrayD<T> {
    // `v < 0` is false for NaN, so NaN stays NaN.
    a.mapv(|v| if v < T::zero() { T::zero() } else { v })
}

fn relu_int<T: Copy + Ord + TryFrom<i64>>(
    a: &ArrayD<T>,
    zps: &[i64],
    axis: Option<usize>,
) -> Result<ArrayD<T>, InterpError> {
    let conv = |z: i64| {
        T::try_from(z).map_err(|_| InterpError::new(format!("zero point {z} does not fit the storage type")))
    };
    match axis {
        None => {
            let z = conv(zps.first().copied().unwrap_or(0))?;
            Ok(a.mapv(|v| v.max(z)))
        }
        Some(axis) => {
            if axis >= a.ndim() || a.shape()[axis] != zps.len() {
                bail!("per-axis zero points along axis {axis} do not fit shape {:?}", a.shape());
            }
            let mut out = a.clone();
            for (i, mut lane) in out.axis_iter_mut(Axis(axis)).enumerate() {
                let z = conv(zps[i])?;
                lane.mapv_inplace(|v| v.max(z));
            }
            Ok(out)
        }
    }
}

/// `fp.relu`: max(x, 0); on quantized storage, max(q, zero point).
pub(crate) fn relu(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    let x = operand(ops, 0)?;
    let out = match x {
        Tensor::F32(a) => Tensor::F32(relu_real(a)),
        Tensor::F64(a) => Tensor::F64(relu_real(a)),
        _ => {
            let elem = kc.result_element(0)?;
            let (zps, axis) = zero_points(kc.ctx, elem).unwrap_or((vec![0], None));
            match x {
                Tensor::I8(a) => Tensor::I8(relu_int(a, &zps, axis)?),
                Tensor::U8(a) => Tensor::U8(relu_int(a, &zps, axis)?),
                Tensor::I16(a) => Tensor::I16(relu_int(a, &zps, axis)?),
                Tensor::I32(a) => Tensor::I32(relu_int(a, &zps, axis)?),
                Tensor::I64(a) => Tensor::I64(relu_int(a, &zps, axis)?),
                other => return Err(unsupported(fp_op::RELU, other)),
            }
        }
    };
    one(out)
}

fn sigmoid_real<T: Real>(a: &ArrayD<T>) -> ArrayD<T> {
    a.mapv(|v| T::one() / (T::one() + (-v).exp()))
}

/// `fp.sigmoid`: 1 / (1 + exp(-x)).
pub(crate) fn sigmoid(_: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    one(float_map!(operand(ops, 0)?, fp_op::SIGMOID, a => sigmoid_real(a)))
}

/// `fp.tanh`.
pub(crate) fn tanh(_: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    one(float_map!(operand(ops, 0)?, fp_op::TANH, a => a.mapv(Real::tanh)))
}

/// `fp.gelu`: `x · Φ(x)` exactly (`approximate = "none"`) or with the tanh
/// approximation, computed in f64 and rounded once.
pub(crate) fn gelu(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    let tanh_form = attrs::one_of_in(kc.ctx, kc.attrs, "approximate", "none", &["none", "tanh"])? == "tanh";
    let f = move |x: f64| {
        if tanh_form {
            let inner = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
            0.5 * x * (1.0 + inner.tanh())
        } else {
            0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2))
        }
    };
    one(float_map!(operand(ops, 0)?, fp_op::GELU, a => map_in_f64(a, f)))
}

/// `f` on every element, computed in f64 and rounded once to the element type.
fn map_in_f64<T: Real + Into<f64>>(a: &ArrayD<T>, f: impl Fn(f64) -> f64) -> ArrayD<T> {
    match a.as_slice() {
        // A plain loop over the slice, which vectorizes where `f` does.
        Some(values) => {
            let out: Vec<T> =
                crate::simd::wide(|| values.iter().map(|&v| T::from_f64(f(v.into()))).collect());
            ArrayD::from_shape_vec(a.raw_dim(), out).unwrap_or_else(|_| a.mapv(|v| T::from_f64(f(v.into()))))
        }
        None => a.mapv(|v| T::from_f64(f(v.into()))),
    }
}

/// Unary kernels that compute each element in f64 and round once.
macro_rules! unary_in_f64 {
    ($($(#[$doc:meta])* $kernel:ident, $name:expr, |$x:ident| $body:expr;)*) => {
        $(
            $(#[$doc])*
            pub(crate) fn $kernel(_: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
                one(float_map!(operand(ops, 0)?, $name, a => map_in_f64(a, |$x: f64| $body)))
            }
        )*
    };
}

unary_in_f64! {
    /// `fp.erf`: [`erf`] in f64, rounded once.
    erf_kernel, fp_op::ERF, |x| erf(x);
    /// `fp.exp`.
    exp, fp_op::EXP, |x| x.exp();
    /// `fp.log`.
    log, fp_op::LOG, |x| x.ln();
    /// `fp.sqrt`.
    sqrt, fp_op::SQRT, |x| x.sqrt();
    /// `fp.reciprocal`.
    reciprocal, fp_op::RECIPROCAL, |x| 1.0 / x;
    /// `fp.neg`.
    neg, fp_op::NEG, |x| -x;
    /// `fp.abs`.
    abs, fp_op::ABS, |x| x.abs();
    /// `fp.softplus`: max(x, 0) + ln(1 + e^(−|x|)), which does not overflow.
    softplus, fp_op::SOFTPLUS, |x| x.max(0.0) + (-x.abs()).exp().ln_1p();
    /// `fp.hard_swish`: x · clip(x/6 + 1/2, 0, 1).
    hard_swish, fp_op::HARD_SWISH, |x| x * (x * (1.0 / 6.0) + 0.5).clamp(0.0, 1.0);
}

/// `fp.hard_sigmoid`: clip(alpha · x + beta, 0, 1).
pub(crate) fn hard_sigmoid(
    kc: &mut KernelContext<'_>,
    ops: &[&Tensor],
) -> Result<KernelResults, InterpError> {
    let (alpha, beta) = qopt_dialect_fp::hard_sigmoid_params(kc.ctx, kc.attrs).map_err(InterpError::new)?;
    one(
        float_map!(operand(ops, 0)?, fp_op::HARD_SIGMOID, a => map_in_f64(a, |x| (alpha * x + beta).clamp(0.0, 1.0))),
    )
}

/// The error function, to about 1e-15 relative: its Taylor series below
/// |x| = 2.5, and 1 − erfc(x) with erfc's continued fraction above (erf is
/// ±1 in f64 beyond |x| = 6).
pub(crate) fn erf(x: f64) -> f64 {
    let a = x.abs();
    if a.is_nan() {
        return x;
    }
    let value = if a < 2.5 {
        // erf(x) = 2/√π · Σ (−1)^n x^(2n+1) / (n! (2n+1))
        let (mut term, mut sum, mut n) = (a, a, 0.0f64);
        let a2 = a * a;
        while term.abs() > 1e-17 * sum.abs() {
            n += 1.0;
            term *= -a2 / n;
            sum += term / (2.0 * n + 1.0);
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else if a < 6.0 {
        // erfc(a) = exp(−a²)/√π · 1/(a + 1/2/(a + 1/(a + 3/2/(a + ...)))), evaluated backwards.
        let mut f = a;
        for k in (1..60).rev() {
            f = a + (k as f64 / 2.0) / f;
        }
        1.0 - (-a * a).exp() / (std::f64::consts::PI.sqrt() * f)
    } else {
        1.0
    };
    value.copysign(x)
}

fn clip_real<T: Real>(a: &ArrayD<T>, lo: f64, hi: f64) -> ArrayD<T> {
    let (lo, hi) = (T::from_f64(lo), T::from_f64(hi));
    a.mapv(|v| {
        if v < lo {
            lo
        } else if v > hi {
            hi
        } else {
            v
        }
    })
}

/// `fp.clip {min, max}` (missing bounds are unbounded).
pub(crate) fn clip(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    let lo = attrs::opt_float_in(kc.ctx, kc.attrs, "min")?.unwrap_or(f64::NEG_INFINITY);
    let hi = attrs::opt_float_in(kc.ctx, kc.attrs, "max")?.unwrap_or(f64::INFINITY);
    if lo > hi {
        bail!("'min' {lo} is greater than 'max' {hi}");
    }
    one(float_map!(operand(ops, 0)?, fp_op::CLIP, a => clip_real(a, lo, hi)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_broadcasts_agree_with_the_general_one() {
        assert_eq!(runs(&[2, 3, 4, 5], &[1, 3, 1, 1]), Some((20, 3)));
        assert_eq!(runs(&[2, 3, 4, 5], &[3, 4, 1]), Some((5, 12)));
        assert_eq!(runs(&[2, 3, 4, 5], &[]), Some((120, 1)));
        assert_eq!(runs(&[2, 3, 4, 5], &[3, 1, 5]), None);
        let full =
            ArrayD::from_shape_fn(IxDyn(&[2, 3, 4, 5]), |i| (i[0] * 60 + i[1] * 20 + i[2] * 5 + i[3]) as f32);
        for small_shape in [&[1, 3, 1, 1][..], &[3, 4, 1], &[5], &[2, 1, 1, 1], &[3, 1, 5], &[1]] {
            let small = ArrayD::from_shape_fn(IxDyn(small_shape), |i| {
                1.0 + ndarray::Dimension::slice(&i).iter().sum::<usize>() as f32
            });
            let (fa, sa) = (full.view(), small.broadcast(full.raw_dim()).unwrap());
            let want_ab = Zip::from(&fa).and(&sa).map_collect(|&x, &y| x - y);
            let want_ba = Zip::from(&sa).and(&fa).map_collect(|&x, &y| x - y);
            assert_eq!(broadcast_with(&full, &small, |x, y| x - y).unwrap(), want_ab, "{small_shape:?}");
            assert_eq!(broadcast_with(&small, &full, |x, y| x - y).unwrap(), want_ba, "{small_shape:?}");
        }
    }
    use crate::kernels::fp::tests::{f32t, run, run_err};
    use qopt_ir_core::Context;

    #[test]
    fn broadcasting_arithmetic() {
        let a = f32t(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let b = f32t(&[3], &[10., 20., 30.]);
        let c = f32t(&[2, 1], &[1., 2.]);
        let mut ctx = Context::new();
        assert_eq!(run(&mut ctx, add, &[&a, &b], "{}", &[]), f32t(&[2, 3], &[11., 22., 33., 14., 25., 36.]));
        assert_eq!(run(&mut ctx, sub, &[&a, &c], "{}", &[]), f32t(&[2, 3], &[0., 1., 2., 2., 3., 4.]));
        assert_eq!(run(&mut ctx, mul, &[&c, &b], "{}", &[]), f32t(&[2, 3], &[10., 20., 30., 20., 40., 60.]));
        let s = f32t(&[], &[2.]);
        assert_eq!(run(&mut ctx, div, &[&a, &s], "{}", &[]), f32t(&[2, 3], &[0.5, 1., 1.5, 2., 2.5, 3.]));
        let bad = f32t(&[4], &[0.; 4]);
        let mut kc = KernelContext::new(&ctx, qopt_ir_core::Attribute::EMPTY_DICT, &[]);
        let e = add(&mut kc, &[&a, &bad]).unwrap_err();
        assert!(e.message.contains("cannot be broadcast"), "{e}");
        let i = Tensor::I32(ndarray::arr1(&[1]).into_dyn());
        assert!(add(&mut kc, &[&i, &i]).is_err());
        assert!(add(&mut kc, &[&a, &i]).is_err());
    }

    #[test]
    fn activations() {
        let mut ctx = Context::new();
        let x = f32t(&[4], &[-2., -0.5, 0., 3.]);
        assert_eq!(run(&mut ctx, relu, &[&x], "{}", &[]), f32t(&[4], &[0., 0., 0., 3.]));
        let n = f32t(&[1], &[f32::NAN]);
        assert!(run(&mut ctx, relu, &[&n], "{}", &[]).as_f32().unwrap()[[0]].is_nan());
        assert_eq!(
            run(&mut ctx, clip, &[&x], "{min = -1.0 : f32, max = 1.0 : f32}", &[]),
            f32t(&[4], &[-1., -0.5, 0., 1.])
        );
        assert_eq!(run(&mut ctx, clip, &[&x], "{min = 0.0 : f32}", &[]), f32t(&[4], &[0., 0., 0., 3.]));
        let s = run(&mut ctx, sigmoid, &[&f32t(&[3], &[0., 100., -100.])], "{}", &[]);
        assert_eq!(s.to_f64_vec(), vec![0.5, 1.0, (1.0f32 / (1.0 + 100f32.exp())) as f64]);
        let t = run(&mut ctx, tanh, &[&f32t(&[2], &[0., 1.])], "{}", &[]);
        assert_eq!(t, f32t(&[2], &[0., 1f32.tanh()]));
    }

    #[test]
    fn quantized_relu_clamps_at_zero_point() {
        let mut ctx = Context::new();
        let q = Tensor::I8(ndarray::arr1(&[-128i8, -3, 0, 5]).into_dyn());
        let out = run(&mut ctx, relu, &[&q], "{}", &["tensor<4x!qnn.uniform<i8:f32, 0.5:-3>>"]);
        assert_eq!(out, Tensor::I8(ndarray::arr1(&[-3i8, -3, 0, 5]).into_dyn()));
        let q = Tensor::U8(ndarray::arr2(&[[0u8, 9], [0, 9]]).into_dyn());
        let out = run(&mut ctx, relu, &[&q], "{}", &["tensor<2x2x!qnn.uniform<u8:f32:0, {0.1:1, 0.1:10}>>"]);
        assert_eq!(out, Tensor::U8(ndarray::arr2(&[[1u8, 9], [10, 10]]).into_dyn()));
    }

    #[test]
    fn gelu_exact_and_tanh() {
        let mut ctx = Context::new();
        let x = f32t(&[4], &[-3.0, -1.0, 1.0, 2.5]);
        let y = run(&mut ctx, gelu, &[&x], "{}", &[]).to_f64_vec();
        // x·Φ(x) from the normal CDF: Φ(1) = 0.8413447460685429, Φ(−3) = 0.0013498980316301.
        let want =
            [-3.0 * 0.0013498980316301, -0.15865525393145707, 0.8413447460685429, 2.5 * 0.9937903346742238];
        for (got, want) in y.iter().zip(want) {
            assert!((got - want).abs() <= 2e-7 * want.abs().max(1e-3), "{got} vs {want}");
        }
        let y = run(&mut ctx, gelu, &[&x], "{approximate = \"tanh\"}", &[]).to_f64_vec();
        assert!((y[2] - 0.8411919906082768).abs() < 1e-7, "{}", y[2]);
        assert!(run_err(&mut ctx, gelu, &[&x], "{approximate = \"fast\"}").contains("approximate"));
    }

    #[test]
    fn erf_kernel_rounds_once_to_f32() {
        let mut ctx = Context::new();
        let xs = [-7.0f32, -2.6, -1.0, -0.0, 1e-20, 0.5, 1.0, 2.4, 3.5, f32::INFINITY];
        let y = run(&mut ctx, erf_kernel, &[&f32t(&[xs.len()], &xs)], "{}", &[]).to_f64_vec();
        for (x, got) in xs.iter().zip(&y) {
            assert_eq!(*got, f64::from(erf(f64::from(*x)) as f32), "erf({x})");
        }
        // erf(1) = 0.8427007929497149 rounds to the f32 0.84270079; tails are ±1, -0 stays -0.
        assert_eq!(y[6], f64::from(0.842_700_8_f32));
        assert_eq!((y[0], y[9]), (-1.0, 1.0));
        assert!(y[3] == 0.0 && y[3].is_sign_negative());
        let nan = run(&mut ctx, erf_kernel, &[&f32t(&[1], &[f32::NAN])], "{}", &[]).to_f64_vec();
        assert!(nan[0].is_nan());
    }

    #[test]
    fn erf_matches_reference_values() {
        // erf at a few points (Abramowitz & Stegun table 7.1 and the tails).
        for (x, want) in [
            (0.0, 0.0),
            (0.5, 0.5204998778130465),
            (1.0, 0.8427007929497149),
            (2.0, 0.9953222650189527),
            (2.4, 0.9993114861033555),
            (2.6, 0.9997639655834707),
            (3.5, 0.9999992569016276),
            (-1.0, -0.8427007929497149),
        ] {
            assert!((erf(x) - want).abs() < 1e-14, "erf({x}) = {} vs {want}", erf(x));
        }
        assert_eq!(erf(7.0), 1.0);
        assert!(erf(f64::NAN).is_nan());
    }

    #[test]
    fn unary_math() {
        let mut ctx = Context::new();
        let x = f32t(&[5], &[-2.0, -0.5, 0.0, 1.0, 4.0]);
        let got =
            |kernel: Kernel, attrs: &str, ctx: &mut Context| run(ctx, kernel, &[&x], attrs, &[]).to_f64_vec();
        let close =
            |a: &[f64], b: &[f64]| a.iter().zip(b).all(|(p, q)| (p - q).abs() <= 1e-6 * q.abs().max(1.0));
        let e = std::f64::consts::E;
        assert!(close(&got(exp, "{}", &mut ctx), &[e.powi(-2), (-0.5f64).exp(), 1.0, e, e.powi(4)]));
        assert_eq!(got(neg, "{}", &mut ctx), [2.0, 0.5, -0.0, -1.0, -4.0]);
        assert_eq!(got(abs, "{}", &mut ctx), [2.0, 0.5, 0.0, 1.0, 4.0]);
        assert_eq!(got(reciprocal, "{}", &mut ctx), [-0.5, -2.0, f64::INFINITY, 1.0, 0.25]);
        let s = got(sqrt, "{}", &mut ctx);
        assert!(s[0].is_nan() && s[2..] == [0.0, 1.0, 2.0]);
        let l = got(log, "{}", &mut ctx);
        assert!(l[0].is_nan() && l[2] == f64::NEG_INFINITY && l[3] == 0.0);
        let sp = got(softplus, "{}", &mut ctx);
        assert!(close(
            &sp,
            &[
                (1.0 + e.powi(-2)).ln(),
                (1.0 + (-0.5f64).exp()).ln(),
                2f64.ln(),
                (1.0 + e).ln(),
                (1.0 + e.powi(4)).ln()
            ]
        ));
        // hard swish: x · clip(x/6 + 0.5, 0, 1); hard sigmoid with ONNX's defaults and MobileNetV3's.
        assert!(close(
            &got(hard_swish, "{}", &mut ctx),
            &[-2.0 / 6.0, -0.5 * (5.0 / 12.0), 0.0, 1.0 * (2.0 / 3.0), 4.0]
        ));
        assert!(close(&got(hard_sigmoid, "{}", &mut ctx), &[0.1, 0.4, 0.5, 0.7, 1.0]));
        let hs = got(hard_sigmoid, "{alpha = 0.5 : f32, beta = 0.0 : f32}", &mut ctx);
        assert!(close(&hs, &[0.0, 0.0, 0.0, 0.5, 1.0]));
        let huge = run(&mut ctx, softplus, &[&f32t(&[1], &[100.0])], "{}", &[]).to_f64_vec();
        assert_eq!(huge, [100.0], "softplus does not overflow");
    }

    #[test]
    fn max_min_pow_prelu() {
        let mut ctx = Context::new();
        let (a, b) = (f32t(&[4], &[-2.0, 1.0, f32::NAN, 3.0]), f32t(&[1], &[0.5]));
        let got = |kernel: Kernel, ctx: &mut Context| run(ctx, kernel, &[&a, &b], "{}", &[]).to_f64_vec();
        let mx = got(max, &mut ctx);
        assert!(mx[0] == 0.5 && mx[1] == 1.0 && mx[2].is_nan() && mx[3] == 3.0);
        let mn = got(min, &mut ctx);
        assert!(mn[0] == -2.0 && mn[1] == 0.5 && mn[2].is_nan() && mn[3] == 0.5);
        let p = run(&mut ctx, pow, &[&f32t(&[3], &[4.0, 2.0, 9.0]), &b], "{}", &[]).to_f64_vec();
        assert_eq!(p, [2.0, 2f32.sqrt() as f64, 3.0]);
        let r = got(prelu, &mut ctx);
        assert!(r[0] == -1.0 && r[1] == 1.0 && r[2].is_nan() && r[3] == 3.0);
    }
}
