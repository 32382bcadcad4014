//! `qnn.add`, `qnn.sub` and `qnn.mul` with numpy broadcasting, `qnn.concat`
//! and `qnn.prelu` (§7).
//!
//! - add: `R(v_a·m_a + v_b·m_b, 31 + n) + zp_out`, saturated, with the shared
//!   shift multipliers of [`add_multipliers`] and [`requantize_sum`] (§7.1);
//! - mul: `R(v_a·v_b·m, 31 + n) + zp_out`, saturated, with [`mul_multiplier`]
//!   (§7.2). The product of two 32-bit-storage values can exceed `i64`, so it
//!   is formed in `i128` and shifted with [`rounding_shift`], the `R` that
//!   [`requantize`](qopt_dialect_qnn::fixed_point::requantize) applies to
//!   `i64` values;
//! - concat: each input requantized to the output (§5 with its own
//!   multiplier), or copied when its scale and zero point are the output's,
//!   then joined along `axis` (§7.3);
//! - prelu: `v = x − zp_x` requantized with `s_x / s_out` when `v ≥ 0`, with
//!   `(s_x·|α|) / s_out` of its slope otherwise (`−v` for a negative slope),
//!   plus `zp_out`, saturated, with [`prelu_multipliers`] (§7.6).

use super::{ints, narrow, per_tensor, quant_operand, result_quant, rounding};
use crate::error::{bail, InterpError};
use crate::kernels::fp::elementwise::broadcast_with;
use crate::kernels::fp::one;
use crate::registry::{Kernel, KernelContext, KernelResults};
use crate::tensor::Tensor;
use ndarray::{ArrayD, ArrayViewD, Axis};
use qopt_dialect_fp::attrs;
use qopt_dialect_fp::shape::normalize_axis;
use qopt_dialect_qnn::fixed_point::{requantize, requantize_sum, rounding_shift, saturate};
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_dialect_qnn::quant_params::{
    add_multipliers, mul_multiplier, prelu_multipliers, requantize_multipliers, storage_range,
};
use qopt_ir_core::QuantType;

kernel_table! {
    qnn_op::ADD => add, qnn_op::SUB => sub, qnn_op::MUL => mul, qnn_op::CONCAT => concat,
    qnn_op::PRELU => prelu,
}

/// Both operands of add or mul, stored values widened, with their types and
/// the result's.
struct Binary<'a> {
    a: ArrayD<i64>,
    b: ArrayD<i64>,
    qa: &'a QuantType,
    qb: &'a QuantType,
    qout: &'a QuantType,
    zp_a: i64,
    zp_b: i64,
    zp_out: i64,
}

fn binary<'a>(kc: &KernelContext<'a>, ops: &[&Tensor]) -> Result<Binary<'a>, InterpError> {
    if ops.len() != 2 {
        bail!("expects 2 operands, got {}", ops.len());
    }
    let (a, qa) = quant_operand(kc, ops, 0, "lhs")?;
    let (b, qb) = quant_operand(kc, ops, 1, "rhs")?;
    let qout = result_quant(kc)?;
    Ok(Binary {
        a: ints(a, "lhs")?,
        b: ints(b, "rhs")?,
        qa,
        qb,
        qout,
        zp_a: per_tensor(qa, "lhs")?.zero_point,
        zp_b: per_tensor(qb, "rhs")?.zero_point,
        zp_out: per_tensor(qout, "result")?.zero_point,
    })
}

/// The result of a binary op from its broadcast values.
fn finish(kc: &KernelContext<'_>, values: ArrayD<i64>) -> Result<KernelResults, InterpError> {
    let shape = values.shape().to_vec();
    one(narrow(kc, &shape, values.into_iter().collect())?)
}

/// `qnn.add` (§7.1).
pub(crate) fn add(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    sum(kc, ops, 1)
}

/// `qnn.sub` (§7.1): `qnn.add` with `b`'s multiplier negated.
pub(crate) fn sub(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    sum(kc, ops, -1)
}

/// `a + sign·b`, requantized as §7.1 says.
fn sum(kc: &mut KernelContext<'_>, ops: &[&Tensor], sign: i32) -> Result<KernelResults, InterpError> {
    let Binary { a, b, qa, qb, qout, zp_a, zp_b, zp_out } = binary(kc, ops)?;
    let (qmin, qmax) = storage_range(qout);
    let (m_a, m_b, n) = add_multipliers(qa, qb, qout)?;
    // |m_b| < 2^31, so its negation is an i32 too.
    let m_b = sign * m_b;
    let mode = rounding(kc)?;
    let values = broadcast_with(&a, &b, |x, y| {
        let sum = requantize_sum(x.saturating_sub(zp_a), m_a, y.saturating_sub(zp_b), m_b, n, mode);
        saturate(i128::from(sum) + i128::from(zp_out), qmin, qmax)
    })?;
    finish(kc, values)
}

/// `qnn.mul` (§7.2).
pub(crate) fn mul(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    let Binary { a, b, qa, qb, qout, zp_a, zp_b, zp_out } = binary(kc, ops)?;
    let (qmin, qmax) = storage_range(qout);
    let (m, n) = mul_multiplier(qa, qb, qout)?;
    let mode = rounding(kc)?;
    let values = broadcast_with(&a, &b, |x, y| {
        // |v| < 2^33 for storage of at most 32 bits, so |v_a·v_b·m| < 2^97: exact
        // in i128 (saturating only for out-of-contract i64 data).
        let product = i128::from(x.saturating_sub(zp_a)).saturating_mul(i128::from(y.saturating_sub(zp_b)));
        let r = rounding_shift(product.saturating_mul(i128::from(m)), 31 + i64::from(n), mode);
        saturate(r.saturating_add(i128::from(zp_out)), qmin, qmax)
    })?;
    finish(kc, values)
}

/// `qnn.prelu(x, slope)` (§7.6): each side of zero requantized with its own
/// multiplier, the negative side's from the element's slope.
pub(crate) fn prelu(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    if ops.len() != 2 {
        bail!("expects 2 operands, got {}", ops.len());
    }
    let (x, qx) = quant_operand(kc, ops, 0, "input")?;
    let slope = ops[1];
    if !matches!(slope, Tensor::F32(_) | Tensor::F64(_)) {
        bail!("slope must be a float tensor, got {}", slope.describe());
    }
    let qout = result_quant(kc)?;
    let (zp_x, zp_out) = (per_tensor(qx, "input")?.zero_point, per_tensor(qout, "result")?.zero_point);
    let (qmin, qmax) = storage_range(qout);
    let slopes = slope.to_f64_vec();
    let ((m, n), negative) = prelu_multipliers(qx, qout, &slopes)?;
    let mode = rounding(kc)?;
    // Each slope element's index, broadcast against the input.
    let index = ArrayD::from_shape_vec(slope.shape(), (0..slopes.len() as i64).collect())
        .map_err(|e| InterpError::new(e.to_string()))?;
    let values = broadcast_with(&ints(x, "input")?, &index, |q, i| {
        let v = q.saturating_sub(zp_x);
        let y = if v >= 0 {
            requantize(v, m, n, mode)
        } else {
            match (negative[i as usize], slopes[i as usize] < 0.0) {
                (None, _) => 0,
                (Some((mc, nc)), false) => requantize(v, mc, nc, mode),
                (Some((mc, nc)), true) => requantize(-v, mc, nc, mode),
            }
        };
        saturate(i128::from(y) + i128::from(zp_out), qmin, qmax)
    })?;
    if values.shape() != x.shape() {
        bail!(
            "slope {:?} must broadcast to the input's shape {:?} without enlarging it",
            slope.shape(),
            x.shape()
        );
    }
    finish(kc, values)
}

/// `qnn.concat {axis}` (§7.3).
pub(crate) fn concat(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    let qout = result_quant(kc)?;
    let out = per_tensor(qout, "result")?;
    let (qmin, qmax) = storage_range(qout);
    let mode = rounding(kc)?;
    let Some(first) = ops.first() else { bail!("expects at least 1 operand, got 0") };
    let axis = attrs::opt_int_in(kc.ctx, kc.attrs, "axis")?.ok_or("needs an integer 'axis' attribute")?;
    let axis = normalize_axis(axis, first.rank()).map_err(|e| InterpError::new(format!("'axis': {e}")))?;
    let mut parts = Vec::with_capacity(ops.len());
    for i in 0..ops.len() {
        let what = format!("operand #{i}");
        let (t, q) = quant_operand(kc, ops, i, &what)?;
        let same_rest =
            t.rank() == first.rank() && (0..t.rank()).all(|d| d == axis || t.shape()[d] == first.shape()[d]);
        if !same_rest {
            bail!(
                "{what} has shape {:?} but operand #0 has {:?}; only dimension {axis} may differ",
                t.shape(),
                first.shape()
            );
        }
        let p = per_tensor(q, &what)?;
        let stored = ints(t, &what)?;
        let part = if p == out {
            // Multiplier exactly 1 (m = 2^30, shift 30): §5 gives
            // clamp(q − zp + zp, qmin, qmax), the value itself when in range.
            stored.mapv(|v| saturate(i128::from(v), qmin, qmax))
        } else {
            let multipliers = requantize_multipliers(q, qout)?;
            let &[(m, n)] = multipliers.as_slice() else { bail!("{what} must be quantized per tensor") };
            stored.mapv(|v| {
                let y = requantize(v.saturating_sub(p.zero_point), m, n, mode);
                saturate(i128::from(y) + i128::from(out.zero_point), qmin, qmax)
            })
        };
        parts.push(part);
    }
    let views: Vec<ArrayViewD<'_, i64>> = parts.iter().map(|a| a.view()).collect();
    let joined = ndarray::concatenate(Axis(axis), &views).map_err(|e| InterpError::new(e.to_string()))?;
    finish(kc, joined)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::fp::tests::{run_typed, run_typed_err};
    use crate::kernels::qnn::tests::{i8t, u8t};
    use qopt_ir_core::Context;

    const MODES: [&str; 3] = ["half_away_from_zero", "half_to_even", "half_up"];

    #[test]
    fn prelu_scales_each_side_and_channel() {
        // §7.6's example: x 0.5:0 over two channels, slopes [0.25, -0.5],
        // out 0.25:-2. Non-negative v: M = 2; channel 0's negative side
        // M = 0.5, channel 1's M = 1 on −v.
        let mut ctx = Context::new();
        let x = i8t(&[1, 2, 3], &[3, -3, -1, 2, -3, -128]);
        let slope = crate::kernels::fp::tests::f32t(&[2, 1], &[0.25, -0.5]);
        let types = ["tensor<1x2x3x!qnn.uniform<i8:f32, 0.5:0>>", "tensor<2x1xf32>"];
        let out = "tensor<1x2x3x!qnn.uniform<i8:f32, 0.25:-2>>";
        let y = run_typed(&mut ctx, prelu, &[&x, &slope], &types, "{}", &[out]);
        // 3·2 − 2 = 4; −3·0.5 = −1.5 → −2 (half away from zero) − 2 = −4;
        // −1·0.5 = −0.5 → −1 − 2 = −3; 2·2 − 2 = 2; 3·1 − 2 = 1; 128 − 2 = 126.
        assert_eq!(y, i8t(&[1, 2, 3], &[4, -4, -3, 2, 1, 126]));
        let y = run_typed(&mut ctx, prelu, &[&x, &slope], &types, "{rounding = \"half_to_even\"}", &[out]);
        assert_eq!(y, i8t(&[1, 2, 3], &[4, -4, -2, 2, 1, 126]));
        // A zero slope sends the negative side to the zero point; a slope
        // that would enlarge the input is refused.
        let zero = crate::kernels::fp::tests::f32t(&[1], &[0.0]);
        let y = run_typed(&mut ctx, prelu, &[&x, &zero], &[types[0], "tensor<1xf32>"], "{}", &[out]);
        assert_eq!(y, i8t(&[1, 2, 3], &[4, -2, -2, 2, -2, -2]));
        let wide = crate::kernels::fp::tests::f32t(&[2, 2, 3], &[0.5; 12]);
        let e = run_typed_err(&mut ctx, prelu, &[&x, &wide], &[types[0], "tensor<2x2x3xf32>"], "{}", &[out]);
        assert!(e.contains("without enlarging"), "{e}");
    }

    #[test]
    fn add_worked_example_every_mode() {
        // §7.1: a 0.5:0, b 0.25:4, out 1.0:0.
        let mut ctx = Context::new();
        let a = i8t(&[4], &[3, 5, -5, 127]);
        let b = i8t(&[4], &[6, 4, 4, 127]);
        let types = ["tensor<4x!qnn.uniform<i8:f32, 0.5:0>>", "tensor<4x!qnn.uniform<i8:f32, 0.25:4>>"];
        let out = "tensor<4x!qnn.uniform<i8:f32, 1.0:0>>";
        let want = [[2, 3, -3, 94], [2, 2, -2, 94], [2, 3, -2, 94]];
        for (mode, want) in MODES.iter().zip(want) {
            let y =
                run_typed(&mut ctx, add, &[&a, &b], &types, &format!("{{rounding = \"{mode}\"}}"), &[out]);
            assert_eq!(y, i8t(&[4], &want), "{mode}");
        }
    }

    #[test]
    fn add_broadcasts_and_saturates() {
        let mut ctx = Context::new();
        // [2, 3] + [3] with M_a = M_b = 1 into u8 with zp 100: saturates at 0 and 255.
        let a = i8t(&[2, 3], &[-128, 0, 127, 1, 2, 3]);
        let b = i8t(&[3], &[-100, 0, 100]);
        let types = ["tensor<2x3x!qnn.uniform<i8:f32, 1.0:0>>", "tensor<3x!qnn.uniform<i8:f32, 1.0:0>>"];
        let y =
            run_typed(&mut ctx, add, &[&a, &b], &types, "{}", &["tensor<2x3x!qnn.uniform<u8:f32, 1.0:100>>"]);
        assert_eq!(y, u8t(&[2, 3], &[0, 100, 255, 1, 102, 203]));
        let e = run_typed_err(
            &mut ctx,
            add,
            &[&a, &i8t(&[2], &[0, 0])],
            &[types[0], "tensor<2x!qnn.uniform<i8:f32, 1.0:0>>"],
            "{}",
            &[types[0]],
        );
        assert!(e.contains("broadcast"), "{e}");
    }

    #[test]
    fn mul_examples() {
        // §7.2: a, b 0.5:0 → 0.1:0, M = 2.5: 3·5 → 37.5, 1·1 → 2.5.
        let mut ctx = Context::new();
        let a = i8t(&[2], &[3, 1]);
        let b = i8t(&[2], &[5, 1]);
        let t = "tensor<2x!qnn.uniform<i8:f32, 0.5:0>>";
        let out = "tensor<2x!qnn.uniform<i8:f32, 0.1:0>>";
        let want = [[38, 3], [38, 2], [38, 3]];
        for (mode, want) in MODES.iter().zip(want) {
            let y =
                run_typed(&mut ctx, mul, &[&a, &b], &[t, t], &format!("{{rounding = \"{mode}\"}}"), &[out]);
            assert_eq!(y, i8t(&[2], &want), "{mode}");
        }
        // Broadcast of a scalar, zero points, saturation low: (−128 − 1)·(10 − 2) · 2.5 → −128.
        let a = i8t(&[2], &[-128, 3]);
        let s = i8t(&[], &[10]);
        let y = run_typed(
            &mut ctx,
            mul,
            &[&a, &s],
            &["tensor<2x!qnn.uniform<i8:f32, 0.5:1>>", "tensor<!qnn.uniform<i8:f32, 0.5:2>>"],
            "{}",
            &[out],
        );
        assert_eq!(y, i8t(&[2], &[-128, 40]));
    }

    #[test]
    fn concat_requantizes_or_copies() {
        // §7.3: the first input has the output's parameters and is copied; 3 in
        // the second (scale 0.25) becomes R(1.5) = 2.
        let mut ctx = Context::new();
        let a = i8t(&[1, 2], &[-128, 127]);
        let b = i8t(&[1, 3], &[3, -3, 5]);
        let types = ["tensor<1x2x!qnn.uniform<i8:f32, 0.5:0>>", "tensor<1x3x!qnn.uniform<i8:f32, 0.25:0>>"];
        let out = "tensor<1x5x!qnn.uniform<i8:f32, 0.5:0>>";
        let y = run_typed(&mut ctx, concat, &[&a, &b], &types, "{axis = 1}", &[out]);
        assert_eq!(y, i8t(&[1, 5], &[-128, 127, 2, -2, 3]));
        let y = run_typed(
            &mut ctx,
            concat,
            &[&a, &b],
            &types,
            "{axis = -1, rounding = \"half_to_even\"}",
            &[out],
        );
        assert_eq!(y, i8t(&[1, 5], &[-128, 127, 2, -2, 2]));
        // Axis 0, a u8 input requantized into i8 with a zero point shift and saturation.
        let u = u8t(&[1, 2], &[0, 255]);
        let y = run_typed(
            &mut ctx,
            concat,
            &[&a, &u],
            &[types[0], "tensor<1x2x!qnn.uniform<u8:f32, 1.0:128>>"],
            "{axis = 0}",
            &["tensor<2x2x!qnn.uniform<i8:f32, 0.5:0>>"],
        );
        assert_eq!(y, i8t(&[2, 2], &[-128, 127, -128, 127]));
        let e = run_typed_err(
            &mut ctx,
            concat,
            &[&a, &b],
            &types,
            "{axis = 0}",
            &["tensor<2x2x!qnn.uniform<i8:f32, 0.5:0>>"],
        );
        assert!(e.contains("only dimension 0 may differ"), "{e}");
        let e = run_typed_err(&mut ctx, concat, &[&a, &b], &types, "{}", &[out]);
        assert!(e.contains("axis"), "{e}");
    }
}
