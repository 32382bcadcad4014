//! `qnn.conv_transpose2d` and `qnn.conv_transpose2d_relu` (§6.2): the
//! transposed convolution of the input and the weight centered on their zero
//! points (the weight per output channel, its axis 1), then the output stage
//! of §6 per output channel.
//!
//! The sums are exact integers: when the data bound allows (every real
//! model's 8-bit data) they are the f32 or f64 transposed convolution of the
//! float kernel (GEMM then scatter), exact for the reason `accumulate` gives,
//! since each output sums at most C/groups·kH·kW products; otherwise a direct
//! scatter in wrapping i64 arithmetic, exact modulo 2^64 and so modulo 2^32,
//! which is all `wrap32(sum + b)` reads.

use super::accumulate::{exact_in_f32, exact_in_f64, Centered, OutputStage, Relu, Sums};
use super::{narrow, result_quant, rounding, weighted_operands, WeightedOperands};
use crate::error::{bail, InterpError};
use crate::kernels::fp::conv::{conv_transpose2d_real, ConvTransposeShape, Window2};
use crate::kernels::fp::one;
use crate::registry::{Kernel, KernelContext, KernelResults};
use crate::tensor::Tensor;
use ndarray::{ArrayD, IxDyn};
use qopt_dialect_fp::attrs::ConvTransposeAttrs;
use qopt_dialect_qnn::op_names as qnn_op;

kernel_table! {
    qnn_op::CONV_TRANSPOSE2D => conv_transpose2d, qnn_op::CONV_TRANSPOSE2D_RELU => conv_transpose2d_relu,
}

/// The weight axis holding the output channels (of one group).
const WEIGHT_CHANNEL_AXIS: usize = 1;

fn conv_transpose(kc: &KernelContext<'_>, ops: &[&Tensor], relu: bool) -> Result<KernelResults, InterpError> {
    let relu = Relu::of(kc.ctx, kc.attrs, relu);
    let attrs = ConvTransposeAttrs::read_in(kc.ctx, kc.attrs, 2)?;
    let win = Window2::from_attrs(&attrs.window, 2)?;
    let padding = |i: usize| {
        usize::try_from(attrs.output_padding[i]).map_err(|_| InterpError::new("negative output padding"))
    };
    let output_padding = [padding(0)?, padding(1)?];
    let WeightedOperands { x: (x, xq), w: (w, wq), bias } = weighted_operands(kc, ops)?;
    let shape = ConvTransposeShape::new(x.shape(), w.shape(), &win, output_padding)?;
    if win.groups != 1 && qopt_dialect_qnn::quant_params::axis(wq).is_some() {
        bail!("a weight quantized per axis 1 needs one group, got {}", win.groups);
    }
    let stage = OutputStage::new(
        xq,
        (wq, WEIGHT_CHANNEL_AXIS),
        result_quant(kc)?,
        bias,
        shape.o,
        relu,
        rounding(kc)?,
    )?;
    let (xc, wc) = (Centered::new(x, xq, "input")?, Centered::new(w, wq, "weight")?);
    let taps = shape.cg * shape.kh * shape.kw;
    let err = |e: ndarray::ShapeError| InterpError::new(e.to_string());
    let sums = if exact_in_f32(xc.max_abs, wc.max_abs, taps) {
        let as_array = |c: &Centered, dims: &[usize]| ArrayD::from_shape_vec(IxDyn(dims), c.as_f32());
        let (xa, wa) = (as_array(&xc, x.shape()).map_err(err)?, as_array(&wc, w.shape()).map_err(err)?);
        let out = conv_transpose2d_real(&xa, &wa, None, &win, output_padding)?;
        Sums::Exact(out.iter().map(|&v| f64::from(v)).collect())
    } else if exact_in_f64(xc.max_abs, wc.max_abs, taps) {
        let as_array = |c: &Centered, dims: &[usize]| ArrayD::from_shape_vec(IxDyn(dims), c.as_f64());
        let (xa, wa) = (as_array(&xc, x.shape()).map_err(err)?, as_array(&wc, w.shape()).map_err(err)?);
        let out = conv_transpose2d_real(&xa, &wa, None, &win, output_padding)?;
        Sums::Exact(out.into_raw_vec_and_offset().0)
    } else {
        Sums::Wrapped(wrapping_scatter(&xc.values, &wc.values, &shape, &win))
    };
    let plane = shape.oh * shape.ow;
    let values = stage.apply_all(&sums, plane, shape.o);
    one(narrow(kc, &[shape.n, shape.o, shape.oh, shape.ow], values)?)
}

/// The transposed convolution's sums of the centered `x` and `w`, each input
/// value scattered to the outputs its taps land on, in wrapping i64 (exact
/// modulo 2^64), returned modulo 2^32.
fn wrapping_scatter(x: &[i64], w: &[i64], shape: &ConvTransposeShape, win: &Window2) -> Vec<i32> {
    let ConvTransposeShape { n, c, h, w: wd, o, cg, og, kh, kw, oh, ow } = *shape;
    let [sh, sw] = win.stride;
    let [dh, dw] = win.dilation;
    let (pt, pl) = (win.pad[0], win.pad[1]);
    let mut acc = vec![0i64; n * o * oh * ow];
    for ni in 0..n {
        for ci in 0..c {
            let group = ci / cg;
            for i in 0..h {
                for j in 0..wd {
                    let xv = x[((ni * c + ci) * h + i) * wd + j];
                    for oc in 0..og {
                        let channel = group * og + oc;
                        for ki in 0..kh {
                            let Some(oy) = (i * sh + ki * dh).checked_sub(pt).filter(|&y| y < oh) else {
                                continue;
                            };
                            for kj in 0..kw {
                                let Some(ox) = (j * sw + kj * dw).checked_sub(pl).filter(|&v| v < ow) else {
                                    continue;
                                };
                                let wv = w[((ci * og + oc) * kh + ki) * kw + kj];
                                let at = ((ni * o + channel) * oh + oy) * ow + ox;
                                acc[at] = acc[at].wrapping_add(xv.wrapping_mul(wv));
                            }
                        }
                    }
                }
            }
        }
    }
    acc.into_iter().map(|v| v as i32).collect()
}

/// `qnn.conv_transpose2d`.
pub(crate) fn conv_transpose2d(
    kc: &mut KernelContext<'_>,
    ops: &[&Tensor],
) -> Result<KernelResults, InterpError> {
    conv_transpose(kc, ops, false)
}

/// `qnn.conv_transpose2d_relu`.
pub(crate) fn conv_transpose2d_relu(
    kc: &mut KernelContext<'_>,
    ops: &[&Tensor],
) -> Result<KernelResults, InterpError> {
    conv_transpose(kc, ops, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::fp::tests::{run_typed, run_typed_err};
    use crate::kernels::qnn::tests::{i32t, i8t};
    use qopt_ir_core::Context;

    #[test]
    fn each_input_value_scatters_its_taps() {
        // docs/quant-semantics.md §6.2's example: centered x [2, 4], taps
        // [1, −2], M = 1.
        let mut ctx = Context::new();
        let x = i8t(&[1, 1, 1, 2], &[3, 5]);
        let w = i8t(&[1, 1, 1, 2], &[1, -2]);
        let types =
            ["tensor<1x1x1x2x!qnn.uniform<i8:f32, 0.5:1>>", "tensor<1x1x1x2x!qnn.uniform<i8:f32, 0.25:0>>"];
        let out4 = "tensor<1x1x1x4x!qnn.uniform<i8:f32, 0.125:0>>";
        let y = run_typed(&mut ctx, conv_transpose2d, &[&x, &w], &types, "{stride = [1, 2]}", &[out4]);
        assert_eq!(y, i8t(&[1, 1, 1, 4], &[2, -4, 4, -8]));
        let out3 = "tensor<1x1x1x3x!qnn.uniform<i8:f32, 0.125:0>>";
        let y = run_typed(&mut ctx, conv_transpose2d, &[&x, &w], &types, "{}", &[out3]);
        assert_eq!(y, i8t(&[1, 1, 1, 3], &[2, 0, -8]));
        // Padding crops the full result; output padding adds a row of bias.
        let y = run_typed(
            &mut ctx,
            conv_transpose2d,
            &[&x, &w],
            &types,
            "{pad = [0, 1, 0, 0]}",
            &["tensor<1x1x1x2x!qnn.uniform<i8:f32, 0.125:0>>"],
        );
        assert_eq!(y, i8t(&[1, 1, 1, 2], &[0, -8]));
    }

    #[test]
    fn per_channel_weights_bias_and_relu() {
        // Two output channels on the weight's axis 1, scales 0.5 and 0.25
        // with zero points 1 and −1; x = [1, 2] (zp 0, scale 1); output
        // scale 1, zp −3. Channel 0: taps (3 − 1) = 2 → [2, 4] + b 1 = [3, 5]
        // ·0.5 = [1.5, 2.5] → [2, 3] (half away from zero) − 3. Channel 1:
        // taps (−5 + 1) = −4 → [−4, −8] + b 0, ·0.25 = [−1, −2] − 3.
        let mut ctx = Context::new();
        let x = i8t(&[1, 1, 1, 2], &[1, 2]);
        let w = i8t(&[1, 2, 1, 1], &[3, -5]);
        let b = i32t(&[2], &[1, 0]);
        let types = [
            "tensor<1x1x1x2x!qnn.uniform<i8:f32, 1.0:0>>",
            "tensor<1x2x1x1x!qnn.uniform<i8:f32:1, {0.5:1, 0.25:-1}>>",
            "tensor<2xi32>",
        ];
        let out = "tensor<1x2x1x2x!qnn.uniform<i8:f32, 1.0:-3>>";
        let y = run_typed(&mut ctx, conv_transpose2d, &[&x, &w, &b], &types, "{}", &[out]);
        assert_eq!(y, i8t(&[1, 2, 1, 2], &[-1, 0, -4, -5]));
        let y = run_typed(&mut ctx, conv_transpose2d_relu, &[&x, &w, &b], &types, "{}", &[out]);
        assert_eq!(y, i8t(&[1, 2, 1, 2], &[-1, 0, -3, -3]));
        // Per axis 0 is not a transposed convolution's output axis.
        let axis0 = "tensor<1x2x1x1x!qnn.uniform<i8:f32:0, {0.5:1}>>";
        let e = run_typed_err(&mut ctx, conv_transpose2d, &[&x, &w], &[types[0], axis0], "{}", &[out]);
        assert!(e.contains("per axis 1"), "{e}");
    }

    #[test]
    fn the_wrapping_scatter_equals_the_exact_sums_modulo_2_pow_32() {
        // A grouped, strided, dilated, padded case with data small enough
        // for the exact path: both paths agree.
        let (n, c, h, w, og, kh, kw) = (2, 4, 3, 5, 3, 2, 3);
        let win = Window2 { stride: [2, 1], pad: [1, 0, 0, 2], dilation: [1, 2], groups: 2 };
        let shape = ConvTransposeShape::new(&[n, c, h, w], &[c, og, kh, kw], &win, [1, 0]).unwrap();
        let xs: Vec<i64> = (0..n * c * h * w).map(|i| (i as i64 * 37 % 255) - 127).collect();
        let ws: Vec<i64> = (0..c * og * kh * kw).map(|i| (i as i64 * 53 % 255) - 127).collect();
        let wrapped = wrapping_scatter(&xs, &ws, &shape, &win);
        let f =
            |v: &[i64], d: &[usize]| ArrayD::from_shape_vec(IxDyn(d), v.iter().map(|&v| v as f64).collect());
        let exact = conv_transpose2d_real(
            &f(&xs, &[n, c, h, w]).unwrap(),
            &f(&ws, &[c, og, kh, kw]).unwrap(),
            None,
            &win,
            [1, 0],
        )
        .unwrap();
        let exact: Vec<i32> = exact.iter().map(|&v| v as i64 as i32).collect();
        assert_eq!(wrapped, exact);
        // And with values that overflow i32: modulo 2^32 of the i128 sum.
        let big = [i64::from(i32::MAX), i64::from(i32::MIN)];
        let shape = ConvTransposeShape::new(
            &[1, 2, 1, 1],
            &[2, 1, 1, 1],
            &Window2 { stride: [1, 1], pad: [0; 4], dilation: [1, 1], groups: 1 },
            [0, 0],
        )
        .unwrap();
        let win1 = Window2 { stride: [1, 1], pad: [0; 4], dilation: [1, 1], groups: 1 };
        let sum = i128::from(big[0]) * i128::from(big[0]) + i128::from(big[1]) * i128::from(big[1]);
        assert_eq!(wrapping_scatter(&big, &big, &shape, &win1), vec![sum as i32]);
    }
}
