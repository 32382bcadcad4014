//! `qnn.quantize`, `qnn.dequantize`, `qnn.requantize`, `qnn.fake_quant`, and the
//! identities `qnn.cast_hint`, `qnn.stop_fusion` and `qnn.observe`.
//!
//! Element by element with the parameter entry of each element (per tensor, or
//! per axis: the element's coordinate along the axis):
//!
//! - quantize: [`quantize_f32`] (§3.1); the input is f32 storage (f16 and bf16
//!   values arrive widened to f32, exactly);
//! - dequantize: [`dequantize_f32`] (§3.2), then rounded to f16 / bf16 when
//!   that is the expressed type (the value stays in f32 storage);
//! - fake_quant: [`fake_quant_f32`] with the `type` attribute's parameters
//!   (§3.4), rounded like dequantize;
//! - requantize: [`requantize`] with the entry's multiplier from
//!   [`requantize_multipliers`], plus the output zero point, saturated (§5).
//!
//! `observe`, `cast_hint` and `stop_fusion` return their operand (§8):
//! `observe`'s attributes hold statistics and never change values.

use super::{
    ints, narrow, per_tensor, quant_of, quant_operand, result_quant, rounding, typed_operand, ParamIndex,
};
use crate::error::{bail, InterpError};
use crate::kernels::fp::{one, operand};
use crate::registry::{Kernel, KernelContext, KernelResults};
use crate::tensor::Tensor;
use ndarray::ArrayD;
use qopt_dialect_qnn::fixed_point::{
    dequantize_f32, fake_quant_f32, quantize_f32, requantize as requantize_value, saturate, scale_f32,
};
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_dialect_qnn::quant_params::{check_quant_type, requantize_multipliers, storage_range};
use qopt_ir_core::{bits_to_f64, f64_to_bits, AttrData, FloatKind, QuantType, TypeData};

kernel_table! {
    qnn_op::QUANTIZE => quantize, qnn_op::DEQUANTIZE => dequantize, qnn_op::REQUANTIZE => requantize,
    qnn_op::FAKE_QUANT => fake_quant, qnn_op::CAST_HINT => identity, qnn_op::STOP_FUSION => identity,
    qnn_op::OBSERVE => identity,
}

/// The f32 input of quantize and fake_quant.
fn floats<'t>(t: &'t Tensor, what: &str) -> Result<&'t ArrayD<f32>, InterpError> {
    match t {
        Tensor::F32(a) => Ok(a),
        other => bail!("{what} must be an f32, f16 or bf16 tensor, got {}", other.dtype()),
    }
}

/// Rounds an f32 to the nearest value of `kind` (ties to even), kept in f32:
/// how a dequantized value of an f16 or bf16 expressed type is stored.
fn round_to(kind: FloatKind) -> fn(f32) -> f32 {
    match kind {
        FloatKind::F16 => |v| bits_to_f64(f64_to_bits(f64::from(v), FloatKind::F16), FloatKind::F16) as f32,
        FloatKind::BF16 => {
            |v| bits_to_f64(f64_to_bits(f64::from(v), FloatKind::BF16), FloatKind::BF16) as f32
        }
        FloatKind::F32 | FloatKind::F64 => |v| v,
    }
}

/// Per-entry `(f32 scale, zero point)` of `q`, for quantize and dequantize.
fn f32_params(index: &ParamIndex) -> Vec<(f32, i64)> {
    index.entries.iter().map(|p| (scale_f32(p.scale), p.zero_point)).collect()
}

/// `quantize` (§3.1) of every element of `x` with the parameters of `q`
/// (`what` names the tensor `q` belongs to, for errors).
fn quantized(x: &ArrayD<f32>, q: &QuantType, what: &str) -> Result<Vec<i64>, InterpError> {
    let index = ParamIndex::new(q, x.shape(), what)?;
    let params = f32_params(&index);
    let (qmin, qmax) = storage_range(q);
    Ok(x.iter()
        .enumerate()
        .map(|(i, &v)| {
            let (scale, zp) = params[index.of(i)];
            quantize_f32(v, scale, zp, qmin, qmax)
        })
        .collect())
}

/// `qnn.quantize` (§3.1).
pub(crate) fn quantize(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    let (x, _) = typed_operand(kc, ops, 0, "input")?;
    let x = floats(x, "input")?;
    let values = quantized(x, result_quant(kc)?, "result")?;
    one(narrow(kc, x.shape(), values)?)
}

/// `qnn.dequantize` (§3.2).
pub(crate) fn dequantize(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    let (t, q) = quant_operand(kc, ops, 0, "input")?;
    one(dequantize_tensor(t, q)?)
}

/// The real values of the stored integers `t` of quantized type `q`, as
/// `qnn.dequantize` computes them (§3.2): an f32 tensor of `t`'s shape.
pub fn dequantize_tensor(t: &Tensor, q: &QuantType) -> Result<Tensor, InterpError> {
    let stored = ints(t, "input")?;
    let index = ParamIndex::new(q, stored.shape(), "input")?;
    let params = f32_params(&index);
    let round = round_to(q.expressed);
    let values: Vec<f32> = stored
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let (scale, zp) = params[index.of(i)];
            round(dequantize_f32(v, zp, scale))
        })
        .collect();
    let out =
        ArrayD::from_shape_vec(stored.raw_dim(), values).map_err(|e| InterpError::new(e.to_string()))?;
    Ok(Tensor::F32(out))
}

/// `qnn.requantize` (§5): per input entry `(m, n) = quantize_multiplier(s_in ⊘₆₄ s_out)`,
/// `clamp(requantize(q − zp_in; m, n) + zp_out, qmin_out, qmax_out)`.
pub(crate) fn requantize(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    let (t, qin) = quant_operand(kc, ops, 0, "input")?;
    let qout = result_quant(kc)?;
    let out = per_tensor(qout, "result")?;
    let mode = rounding(kc)?;
    let stored = ints(t, "input")?;
    let index = ParamIndex::new(qin, stored.shape(), "input")?;
    let multipliers = requantize_multipliers(qin, qout)?;
    let (qmin, qmax) = storage_range(qout);
    let values: Vec<i64> = stored
        .iter()
        .enumerate()
        .map(|(i, &q)| {
            let entry = index.of(i);
            let ((m, n), zp_in) = (multipliers[entry], index.entries[entry].zero_point);
            let y = requantize_value(q.saturating_sub(zp_in), m, n, mode);
            saturate(i128::from(y) + i128::from(out.zero_point), qmin, qmax)
        })
        .collect();
    one(narrow(kc, stored.shape(), values)?)
}

/// `qnn.fake_quant {type = Q}` (§3.4).
pub(crate) fn fake_quant(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    let (x, _) = typed_operand(kc, ops, 0, "input")?;
    let x = floats(x, "input")?;
    let ctx = kc.ctx;
    let Some(attr) = ctx.dict_get(kc.attrs, "type") else {
        bail!("needs a 'type' attribute holding a quantized element type");
    };
    let q = match ctx.attr_data(attr) {
        AttrData::Type(ty) if matches!(ctx.type_data(*ty), TypeData::Quant(_)) => {
            quant_of(kc, *ty, "'type'")?
        }
        _ => bail!("'type' must be a quantized element type like !qnn.uniform<i8:f32, 0.1:0>"),
    };
    check_quant_type(q).map_err(|e| InterpError::new(format!("'type' is invalid: {e}")))?;
    let index = ParamIndex::new(q, x.shape(), "input")?;
    let params = f32_params(&index);
    let (qmin, qmax) = storage_range(q);
    let round = round_to(q.expressed);
    let values: Vec<f32> = x
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let (scale, zp) = params[index.of(i)];
            round(fake_quant_f32(v, scale, zp, qmin, qmax))
        })
        .collect();
    let out = ArrayD::from_shape_vec(x.raw_dim(), values).map_err(|e| InterpError::new(e.to_string()))?;
    one(Tensor::F32(out))
}

/// `qnn.cast_hint`, `qnn.stop_fusion`, `qnn.observe`: the operand, unchanged.
pub(crate) fn identity(_: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    one(operand(ops, 0)?.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::fp::tests::{f32t, run_typed, run_typed_err};
    use crate::kernels::qnn::tests::{i8t, u8t};
    use proptest::prelude::*;
    use qopt_ir_core::Context;

    const Q: &str = "tensor<7x!qnn.uniform<i8:f32, 0.5:-3>>";

    #[test]
    fn quantize_worked_example() {
        // §3.1, !qnn.uniform<i8:f32, 0.5:-3>.
        let mut ctx = Context::new();
        let x = f32t(&[7], &[1.25, 1.75, -0.25, 100.0, -70.0, f32::NAN, f32::INFINITY]);
        let y = run_typed(&mut ctx, quantize, &[&x], &["tensor<7xf32>"], "{}", &[Q]);
        assert_eq!(y, i8t(&[7], &[-1, 1, -3, 127, -128, -3, 127]));
        // The narrowed range saturates at -127; the f32 division makes 0.35 / 0.1 a tie.
        let x = f32t(&[4], &[-70.0, 0.35, 0.25, f32::NEG_INFINITY]);
        let y = run_typed(
            &mut ctx,
            quantize,
            &[&x],
            &["tensor<4xf32>"],
            "{}",
            &["tensor<4x!qnn.uniform<i8<-127:127>:f32, 0.1:0>>"],
        );
        assert_eq!(y, i8t(&[4], &[-127, 4, 2, -127]));
        // u8 storage.
        let x = f32t(&[3], &[-1.0, 0.0, 1.0]);
        let y = run_typed(
            &mut ctx,
            quantize,
            &[&x],
            &["tensor<3xf32>"],
            "{}",
            &["tensor<3x!qnn.uniform<u8:f32, 0.01:128>>"],
        );
        assert_eq!(y, u8t(&[3], &[28, 128, 228]));
    }

    #[test]
    fn per_axis_quantize_and_dequantize() {
        // §3.3.
        let mut ctx = Context::new();
        let ty = "tensor<2x3x!qnn.uniform<i8:f32:0, {0.1:0, 0.25:1}>>";
        let x = f32t(&[2, 3], &[0.35, -0.05, 20.0, 0.25, -0.125, 1.0]);
        let q = run_typed(&mut ctx, quantize, &[&x], &["tensor<2x3xf32>"], "{}", &[ty]);
        assert_eq!(q, i8t(&[2, 3], &[4, 0, 127, 2, 1, 5]));
        let back = run_typed(&mut ctx, dequantize, &[&q], &[ty], "{}", &["tensor<2x3xf32>"]);
        assert_eq!(back, f32t(&[2, 3], &[0.4, 0.0, 12.7, 0.25, 0.0, 1.0]));
        // Per axis 1 of a 2x2.
        let ty = "tensor<2x2x!qnn.uniform<i8:f32:1, {1.0:0, 0.5:0}>>";
        let q = run_typed(
            &mut ctx,
            quantize,
            &[&f32t(&[2, 2], &[1., 1., 2., 2.])],
            &["tensor<2x2xf32>"],
            "{}",
            &[ty],
        );
        assert_eq!(q, i8t(&[2, 2], &[1, 2, 2, 4]));
        let e = run_typed_err(
            &mut ctx,
            quantize,
            &[&f32t(&[3], &[0.; 3])],
            &["tensor<3xf32>"],
            "{}",
            &["tensor<3x!qnn.uniform<i8:f32:0, {1.0:0, 0.5:0}>>"],
        );
        assert!(e.contains("2 parameter entries but the dimension is 3"), "{e}");
    }

    #[test]
    fn dequantize_examples_and_f16() {
        let mut ctx = Context::new();
        let q = i8t(&[2], &[7, -128]);
        let ty = "tensor<2x!qnn.uniform<i8:f32, 0.5:-3>>";
        assert_eq!(
            run_typed(&mut ctx, dequantize, &[&q], &[ty], "{}", &["tensor<2xf32>"]),
            f32t(&[2], &[5.0, -62.5])
        );
        // f16 expressed type: 0.1 × 1 is rounded to the nearest f16, 1638 × 2^−14
        // (and to the nearest bf16, 205 × 2^−11).
        let q = i8t(&[1], &[1]);
        let ty = "tensor<1x!qnn.uniform<i8:f16, 0.1:0>>";
        let y = run_typed(&mut ctx, dequantize, &[&q], &[ty], "{}", &["tensor<1xf16>"]);
        assert_eq!(y, f32t(&[1], &[1638.0 / 16384.0]));
        let ty = "tensor<1x!qnn.uniform<i8:bf16, 0.1:0>>";
        let y = run_typed(&mut ctx, dequantize, &[&q], &[ty], "{}", &["tensor<1xbf16>"]);
        assert_eq!(y, f32t(&[1], &[205.0 / 2048.0]));
    }

    #[test]
    fn requantize_examples() {
        // §5: 0.5:2 → 0.2:10, default rounding.
        let mut ctx = Context::new();
        let (tin, tout) = ("tensor<4x!qnn.uniform<i8:f32, 0.5:2>>", "tensor<4x!qnn.uniform<i8:f32, 0.2:10>>");
        let q = i8t(&[4], &[7, -3, 127, -128]);
        assert_eq!(
            run_typed(&mut ctx, requantize, &[&q], &[tin], "{}", &[tout]),
            i8t(&[4], &[23, -3, 127, -128])
        );
        // Ties: v = ±5 is ±12.5 at M = 2.5 (zp_out 10).
        let modes = [("half_away_from_zero", [23, -3]), ("half_to_even", [22, -2]), ("half_up", [23, -2])];
        for (mode, want) in modes {
            let y = run_typed(
                &mut ctx,
                requantize,
                &[&i8t(&[2], &[7, -3])],
                &[&tin.replace('4', "2")],
                &format!("{{rounding = \"{mode}\"}}"),
                &[&tout.replace('4', "2")],
            );
            assert_eq!(y, i8t(&[2], &want), "{mode}");
        }
        // Per-axis input (§5): rows with M = 0.5 and M = 2.
        let tin = "tensor<2x3x!qnn.uniform<i8:f32:0, {0.1:0, 0.4:-1}>>";
        let q = i8t(&[2, 3], &[3, -3, 7, 1, -2, 5]);
        let y = run_typed(
            &mut ctx,
            requantize,
            &[&q],
            &[tin],
            "{}",
            &["tensor<2x3x!qnn.uniform<i8:f32, 0.2:0>>"],
        );
        assert_eq!(y, i8t(&[2, 3], &[2, -2, 4, 4, -2, 12]));
        // To u8 and to a narrowed range: saturation at both ends.
        let q = i8t(&[3], &[-128, 0, 127]);
        let tin = "tensor<3x!qnn.uniform<i8:f32, 1.0:0>>";
        let y = run_typed(
            &mut ctx,
            requantize,
            &[&q],
            &[tin],
            "{}",
            &["tensor<3x!qnn.uniform<u8:f32, 0.5:100>>"],
        );
        assert_eq!(y, u8t(&[3], &[0, 100, 255]));
        let y = run_typed(
            &mut ctx,
            requantize,
            &[&q],
            &[tin],
            "{}",
            &["tensor<3x!qnn.uniform<i8<-100:100>:f32, 1.0:0>>"],
        );
        assert_eq!(y, i8t(&[3], &[-100, 0, 100]));
        // Per-axis output is an error.
        let e = run_typed_err(
            &mut ctx,
            requantize,
            &[&q],
            &[tin],
            "{}",
            &["tensor<3x!qnn.uniform<i8:f32:0, {1.0:0, 1.0:0, 1.0:0}>>"],
        );
        assert!(e.contains("per tensor"), "{e}");
    }

    #[test]
    fn fake_quant_and_identities() {
        let mut ctx = Context::new();
        let x = f32t(&[5], &[0.35, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.04]);
        let y = run_typed(
            &mut ctx,
            fake_quant,
            &[&x],
            &["tensor<5xf32>"],
            "{type = !qnn.uniform<i8:f32, 0.1:0>}",
            &["tensor<5xf32>"],
        );
        let tenth = 0.1f32;
        assert_eq!(y, f32t(&[5], &[0.4, 0.0, 127.0 * tenth, -128.0 * tenth, 0.0]));
        let e =
            run_typed_err(&mut ctx, fake_quant, &[&x], &["tensor<5xf32>"], "{type = 3}", &["tensor<5xf32>"]);
        assert!(e.contains("'type' must be a quantized element type"), "{e}");
        let e = run_typed_err(&mut ctx, fake_quant, &[&x], &["tensor<5xf32>"], "{}", &["tensor<5xf32>"]);
        assert!(e.contains("needs a 'type'"), "{e}");
        // The identities, as registered.
        let registry = crate::registry::KernelRegistry::standard();
        for name in [qnn_op::OBSERVE, qnn_op::CAST_HINT, qnn_op::STOP_FUSION] {
            let kernel = registry.get(name).unwrap();
            let q = i8t(&[2], &[1, -1]);
            let ty = "tensor<2x!qnn.uniform<i8:f32, 0.1:0>>";
            assert_eq!(
                run_typed(&mut ctx, kernel, &[&q], &[ty], "{observer = \"minmax\"}", &[ty]),
                q,
                "{name}"
            );
            let same = run_typed(&mut ctx, kernel, &[&x], &["tensor<5xf32>"], "{}", &["tensor<5xf32>"]);
            assert!(same.bit_equal(&x), "{name}");
        }
    }

    proptest! {
        /// Quantize then dequantize is within half a step of every value in the
        /// representable range: |x − dequantize(quantize(x))| ≤ scale / 2 (up
        /// to the f32 rounding of the division and the product).
        #[test]
        fn round_trip_within_half_a_step(
            scale in 1e-3f64..10.0,
            zp in -20i64..20,
            frac in proptest::collection::vec(0.0f64..1.0, 1..16),
        ) {
            let s = scale_f32(scale);
            let (qmin, qmax) = (-128i64, 127i64);
            let lo = (qmin - zp) as f32 * s;
            let hi = (qmax - zp) as f32 * s;
            let xs: Vec<f32> = frac.iter().map(|&f| lo + (hi - lo) * f as f32).collect();
            let mut ctx = Context::new();
            let n = xs.len();
            let x = f32t(&[n], &xs);
            let ty = format!("tensor<{n}x!qnn.uniform<i8:f32, {scale:?}:{zp}>>");
            let fty = format!("tensor<{n}xf32>");
            let q = run_typed(&mut ctx, quantize, &[&x], &[&fty], "{}", &[&ty]);
            let back = run_typed(&mut ctx, dequantize, &[&q], &[&ty], "{}", &[&fty]);
            let back = back.as_f32().unwrap();
            for (&v, &b) in xs.iter().zip(back.iter()) {
                // Half a step, plus a few f32 ulps of the operands for the
                // roundings of ⊘ and ⊗.
                let slack = 4.0 * f32::EPSILON * (v.abs().max(b.abs()) + s);
                prop_assert!((v - b).abs() <= s / 2.0 + slack, "x = {v}, back = {b}, scale = {s}");
            }
        }
    }
}
