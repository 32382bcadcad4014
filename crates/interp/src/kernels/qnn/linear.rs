//! `qnn.dense` and `qnn.dense_relu` (§6): `x` (…×K) against `w` (N×K) by one
//! GEMM of the centered operands, then the output stage of `accumulate`
//! (bias, `wrap32`, per-channel requantization, relu clamp, saturation).

use super::accumulate::{exact_gemm, exact_in_f64, wrapping_gemm, Centered, OutputStage, Relu, Sums};
use super::{narrow, result_quant, rounding, weighted_operands, WeightedOperands};
use crate::error::{bail, InterpError};
use crate::kernels::fp::one;
use crate::registry::{Kernel, KernelContext, KernelResults};
use crate::tensor::Tensor;
use ndarray::{ArrayView2, ArrayViewMut2};
use qopt_dialect_qnn::op_names as qnn_op;

kernel_table! {
    qnn_op::DENSE => dense, qnn_op::DENSE_RELU => dense_relu,
}

fn dense_kernel(kc: &KernelContext<'_>, ops: &[&Tensor], relu: bool) -> Result<KernelResults, InterpError> {
    let WeightedOperands { x: (x, xq), w: (w, wq), bias } = weighted_operands(kc, ops)?;
    let Some((&k, lead)) = x.shape().split_last() else { bail!("input must have rank 1 or more (…×K)") };
    let &[channels, wk] = w.shape() else {
        bail!("weight must have rank 2 (N×K), got shape {:?}", w.shape())
    };
    if wk != k {
        bail!("input has {k} features (last dimension) but the weight {:?} expects {wk}", w.shape());
    }
    let rows: usize = lead.iter().product();
    let Some(len) = rows.checked_mul(channels) else {
        bail!("the output of {:?} · {:?}ᵀ is too large", x.shape(), w.shape())
    };
    let relu = Relu::of(kc.ctx, kc.attrs, relu);
    let stage = OutputStage::new(xq, (wq, 0), result_quant(kc)?, bias, channels, relu, rounding(kc)?)?;
    let (xc, wc) = (Centered::new(x, xq, "input")?, Centered::new(w, wq, "weight")?);
    let shape_err = |e: ndarray::ShapeError| InterpError::new(e.to_string());
    // out (rows×N) = x (rows×K) · wᵀ (K×N).
    let sums = if exact_in_f64(xc.max_abs, wc.max_abs, k) {
        let (xv, wv) = (xc.as_f64(), wc.as_f64());
        let mut out = vec![0f64; len];
        exact_gemm(
            ArrayView2::from_shape((rows, k), &xv).map_err(shape_err)?,
            ArrayView2::from_shape((channels, k), &wv).map_err(shape_err)?.t(),
            ArrayViewMut2::from_shape((rows, channels), &mut out).map_err(shape_err)?,
        );
        Sums::Exact(out)
    } else {
        let (xv, wv) = (xc.as_wrapped(), wc.as_wrapped());
        let mut out = vec![0i32; len];
        wrapping_gemm(
            ArrayView2::from_shape((rows, k), &xv).map_err(shape_err)?,
            ArrayView2::from_shape((channels, k), &wv).map_err(shape_err)?.t(),
            ArrayViewMut2::from_shape((rows, channels), &mut out).map_err(shape_err)?,
        );
        Sums::Wrapped(out)
    };
    // Outputs are rows×N: each value its own channel, in turn.
    let values = stage.apply_all(&sums, 1, channels);
    let mut shape = x.shape().to_vec();
    if let Some(last) = shape.last_mut() {
        *last = channels;
    }
    one(narrow(kc, &shape, values)?)
}

/// `qnn.dense`.
pub(crate) fn dense(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    dense_kernel(kc, ops, false)
}

/// `qnn.dense_relu`.
pub(crate) fn dense_relu(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    dense_kernel(kc, ops, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::fp::tests::{run_typed, run_typed_err};
    use crate::kernels::qnn::tests::{i16t, i32t, i8t, u8t};
    use qopt_ir_core::Context;

    const X: &str = "tensor<1x3x!qnn.uniform<u8:f32, 0.5:128>>";
    const W: &str = "tensor<2x3x!qnn.uniform<i8:f32:0, {0.25:0, 0.125:0}>>";
    const OUT: &str = "tensor<1x2x!qnn.uniform<i8:f32, 0.25:-10>>";

    #[test]
    fn worked_example() {
        // §6: dense gives [−2, −19], dense_relu [−2, −10].
        let mut ctx = Context::new();
        let x = u8t(&[1, 3], &[130, 126, 128]);
        let w = i8t(&[2, 3], &[4, 1, 9, -8, 8, 3]);
        let b = i32t(&[2], &[10, -4]);
        let types = [X, W, "tensor<2xi32>"];
        assert_eq!(run_typed(&mut ctx, dense, &[&x, &w, &b], &types, "{}", &[OUT]), i8t(&[1, 2], &[-2, -19]));
        assert_eq!(
            run_typed(&mut ctx, dense_relu, &[&x, &w, &b], &types, "{}", &[OUT]),
            i8t(&[1, 2], &[-2, -10])
        );
        // Without the bias: channel 0 is 6 · 0.5 = 3 → −7; channel 1 is −32 · 0.25 = −8 → −18.
        assert_eq!(run_typed(&mut ctx, dense, &[&x, &w], &[X, W], "{}", &[OUT]), i8t(&[1, 2], &[-7, -18]));
    }

    #[test]
    fn rounding_ties_and_ranks() {
        let mut ctx = Context::new();
        // M = 0.5; sums 1, 3, −1, −3 are the ties 0.5, 1.5, −0.5, −1.5.
        let x = i8t(&[2, 2, 1], &[1, 3, -1, -3]);
        let w = i8t(&[1, 1], &[1]);
        let xt = "tensor<2x2x1x!qnn.uniform<i8:f32, 1.0:0>>";
        let wt = "tensor<1x1x!qnn.uniform<i8:f32, 0.5:0>>";
        let out = "tensor<2x2x1x!qnn.uniform<i8:f32, 1.0:0>>";
        let cases = [
            ("half_away_from_zero", [1, 2, -1, -2]),
            ("half_to_even", [0, 2, 0, -2]),
            ("half_up", [1, 2, 0, -1]),
        ];
        for (mode, want) in cases {
            let y = run_typed(
                &mut ctx,
                dense,
                &[&x, &w],
                &[xt, wt],
                &format!("{{rounding = \"{mode}\"}}"),
                &[out],
            );
            assert_eq!(y, i8t(&[2, 2, 1], &want), "{mode}");
        }
        // Rank-1 input, i16 storage with saturation to u8 at both ends.
        let x = i16t(&[2], &[1000, -1000]);
        let w = i8t(&[2, 2], &[1, 0, 0, 1]);
        let y = run_typed(
            &mut ctx,
            dense,
            &[&x, &w],
            &["tensor<2x!qnn.uniform<i16:f32, 1.0:0>>", "tensor<2x2x!qnn.uniform<i8:f32, 1.0:0>>"],
            "{}",
            &["tensor<2x!qnn.uniform<u8:f32, 1.0:3>>"],
        );
        assert_eq!(y, u8t(&[2], &[255, 0]));
    }

    #[test]
    fn wrapping_path_and_errors() {
        let mut ctx = Context::new();
        // i32 storage: (2^31 − 1)² · 2 + bias wraps exactly like i32 adds.
        let x = i32t(&[1, 2], &[i32::MAX, i32::MAX]);
        let w = i32t(&[1, 2], &[i32::MAX, i32::MAX]);
        let b = i32t(&[1], &[5]);
        let t = "tensor<1x2x!qnn.uniform<i32:f32, 1.0:0>>";
        let y = run_typed(
            &mut ctx,
            dense,
            &[&x, &w, &b],
            &[t, t, "tensor<1xi32>"],
            "{}",
            &["tensor<1x1x!qnn.uniform<i32:f32, 1.0:0>>"],
        );
        let want = i32::MAX.wrapping_mul(i32::MAX).wrapping_mul(2).wrapping_add(5);
        assert_eq!(y, i32t(&[1, 1], &[want]));
        let e = run_typed_err(
            &mut ctx,
            dense,
            &[&x, &i32t(&[1, 3], &[0; 3])],
            &[t, "tensor<1x3x!qnn.uniform<i32:f32, 1.0:0>>"],
            "{}",
            &[t],
        );
        assert!(e.contains("2 features"), "{e}");
        let e = run_typed_err(
            &mut ctx,
            dense,
            &[&x, &w, &i32t(&[2], &[0; 2])],
            &[t, t, "tensor<2xi32>"],
            "{}",
            &[t],
        );
        assert!(e.contains("bias must be an i32 tensor of shape [1]"), "{e}");
        let wt = "tensor<1x2x!qnn.uniform<i32:f32:0, {1.0:0, 1.0:0}>>";
        let e = run_typed_err(&mut ctx, dense, &[&x, &w], &[t, wt], "{}", &[t]);
        assert!(e.contains("weight has 2 per-channel parameter entries but 1 output channels"), "{e}");
    }
}
