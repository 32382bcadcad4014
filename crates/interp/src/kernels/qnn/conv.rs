//! `qnn.conv2d` and `qnn.conv2d_relu` (§6), by im2col + GEMM, and
//! [`QuantConv2d`], the same computation with its parameters given explicitly.
//!
//! The input and the weight are centered on their zero points first (the
//! weight per output channel), so the zero padding of the shared im2col
//! (`fp::conv::conv2d_gemm`) is exactly "a padded position reads `zp_x`". The
//! GEMM is the exact f64 one, or the i32 wrapping one when the data could
//! exceed f64's exact integers (see `accumulate`); the output stage adds the
//! bias, wraps to 32 bits and requantizes per channel.

use super::accumulate::{exact_gemm, exact_in_f64, wrapping_gemm, Centered, OutputStage, Relu, Sums};
use super::{narrow, result_quant, rounding, weighted_operands, WeightedOperands};
use crate::error::InterpError;
use crate::kernels::fp::conv::{conv2d_gemm, ConvShape, Window2};
use crate::kernels::fp::one;
use crate::registry::{Kernel, KernelContext, KernelResults};
use crate::tensor::Tensor;
use qopt_dialect_fp::attrs::ConvAttrs;
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_dialect_qnn::Rounding;

kernel_table! {
    qnn_op::CONV2D => conv2d, qnn_op::CONV2D_RELU => conv2d_relu,
}

/// A quantized 2-D convolution (NCHW) with explicit parameters: exactly what
/// `qnn.conv2d` (or `qnn.conv2d_relu`, with `relu`) computes with these
/// attributes (`docs/quant-semantics.md` §6).
///
/// For kernels of downstream ops that compute a `qnn` convolution with
/// parameters fixed by hardware rather than written as attributes: they read
/// their own attributes, fill this in, and call [`QuantConv2d::run`].
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct QuantConv2d {
    /// `[stride_h, stride_w]`, each at least 1.
    pub stride: [usize; 2],
    /// `[top, left, bottom, right]`.
    pub pad: [usize; 4],
    /// `[dilation_h, dilation_w]`, each at least 1.
    pub dilation: [usize; 2],
    /// Channel groups, at least 1.
    pub groups: usize,
    /// How requantization breaks ties.
    pub rounding: Rounding,
    /// The fused activation: none, relu (the `_relu` form), or relu
    /// clamped at `relu_max` too.
    pub relu: Relu,
}

impl QuantConv2d {
    /// Runs the convolution on `ops` = `[x, w]` or `[x, w, b]`, taking scales
    /// and zero points from the operand and result types of `kc` (which must
    /// be those of a `qnn.conv2d`: `x` and the result quantized per tensor,
    /// `w` per tensor or per axis 0, `b` an i32 tensor of the output channels).
    pub fn run(&self, kc: &KernelContext<'_>, ops: &[&Tensor]) -> Result<Tensor, InterpError> {
        let win =
            Window2 { stride: self.stride, pad: self.pad, dilation: self.dilation, groups: self.groups };
        let WeightedOperands { x: (x, xq), w: (w, wq), bias } = weighted_operands(kc, ops)?;
        let shape = ConvShape::new(x.shape(), w.shape(), &win)?;
        let stage =
            OutputStage::new(xq, (wq, 0), result_quant(kc)?, bias, shape.o, self.relu, self.rounding)?;
        let (xc, wc) = (Centered::new(x, xq, "input")?, Centered::new(w, wq, "weight")?);
        let p = shape.oh * shape.ow;
        let len = shape.n * shape.o * p;
        let sums = if exact_in_f64(xc.max_abs, wc.max_abs, shape.taps()) {
            let mut out = vec![0f64; len];
            conv2d_gemm(&xc.as_f64(), &wc.as_f64(), &shape, &win, 0.0, &mut out, exact_gemm)?;
            Sums::Exact(out)
        } else {
            let mut out = vec![0i32; len];
            conv2d_gemm(&xc.as_wrapped(), &wc.as_wrapped(), &shape, &win, 0, &mut out, wrapping_gemm)?;
            Sums::Wrapped(out)
        };
        // Outputs are N×O×(H'·W'): runs of p values per channel.
        let values = stage.apply_all(&sums, p, shape.o);
        narrow(kc, &[shape.n, shape.o, shape.oh, shape.ow], values)
    }
}

fn conv(kc: &KernelContext<'_>, ops: &[&Tensor], relu: bool) -> Result<KernelResults, InterpError> {
    let relu = Relu::of(kc.ctx, kc.attrs, relu);
    let attrs = ConvAttrs::read_in(kc.ctx, kc.attrs, 2)?;
    let win = Window2::from_attrs(&attrs, 2)?;
    let conv = QuantConv2d {
        stride: win.stride,
        pad: win.pad,
        dilation: win.dilation,
        groups: win.groups,
        rounding: rounding(kc)?,
        relu,
    };
    one(conv.run(kc, ops)?)
}

/// `qnn.conv2d`.
pub(crate) fn conv2d(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    conv(kc, ops, false)
}

/// `qnn.conv2d_relu`.
pub(crate) fn conv2d_relu(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    conv(kc, ops, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::fp::tests::{run_typed, run_typed_err};
    use crate::kernels::qnn::tests::{i16t, i32t, i8t, u8t};
    use proptest::prelude::*;
    use qopt_dialect_qnn::fixed_point::{
        quantize_f32, quantize_multiplier, requantize, saturate, saturate_relu, wrap32,
    };
    use qopt_ir_core::Context;

    /// `tensor<{shape}x{elem}>`.
    fn ty(shape: &[usize], elem: &str) -> String {
        let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
        format!("tensor<{}x{elem}>", dims.join("x"))
    }

    #[test]
    fn padding_reads_the_zero_point() {
        // 1×1×3×3 u8 input with zero point 10 holding 10 + (0..9); 2×2 kernel of
        // ones; pad 1, stride 2: windows at (-1,-1), (-1,1), (1,-1), (1,1). The
        // scales make M = 1, so the outputs are the sums themselves.
        let mut ctx = Context::new();
        let x = u8t(&[1, 1, 3, 3], &[10, 11, 12, 13, 14, 15, 16, 17, 18]);
        let w = i8t(&[1, 1, 2, 2], &[1, 1, 1, 1]);
        let types = [
            ty(&[1, 1, 3, 3], "!qnn.uniform<u8:f32, 0.5:10>"),
            ty(&[1, 1, 2, 2], "!qnn.uniform<i8:f32, 2.0:0>"),
        ];
        let out = ty(&[1, 1, 2, 2], "!qnn.uniform<i8:f32, 1.0:0>");
        let y = run_typed(
            &mut ctx,
            conv2d,
            &[&x, &w],
            &[&types[0], &types[1]],
            "{pad = [1, 1, 1, 1], stride = [2, 2]}",
            &[&out],
        );
        assert_eq!(y, i8t(&[1, 1, 2, 2], &[0, 1 + 2, 3 + 6, 4 + 5 + 7 + 8]));
    }

    #[test]
    fn dilation_groups_bias_and_per_axis_weights() {
        let mut ctx = Context::new();
        // Dilation 2: a 2×2 kernel [[1, 0], [0, 1]] over 5×5 (0..25, zp 0) reads
        // x[i][j] + x[i+2][j+2].
        let x = i8t(&[1, 1, 5, 5], &(0..25).collect::<Vec<i8>>());
        let w = i8t(&[1, 1, 2, 2], &[1, 0, 0, 1]);
        let xt = ty(&[1, 1, 5, 5], "!qnn.uniform<i8:f32, 1.0:0>");
        let wt = ty(&[1, 1, 2, 2], "!qnn.uniform<i8:f32, 1.0:0>");
        let y = run_typed(
            &mut ctx,
            conv2d,
            &[&x, &w],
            &[&xt, &wt],
            "{dilation = [2, 2]}",
            &[&ty(&[1, 1, 3, 3], "!qnn.uniform<i8:f32, 1.0:0>")],
        );
        assert_eq!(y, i8t(&[1, 1, 3, 3], &[12, 14, 16, 22, 24, 26, 32, 34, 36]));
        // Two groups, per-channel weight scales and zero points, bias. Input
        // (zp 1) [[2, 3]] in channel 0 and [[4, 5]] in channel 1 → centered
        // [1, 2] and [3, 4]. Channel 0: w 3 (zp 1) → 2·v + 10; M = 1·0.5 / 1.
        // Channel 1: w −2 (zp −4) → 2·v − 4; M = 1·0.25 / 1.
        let x = i8t(&[1, 2, 1, 2], &[2, 3, 4, 5]);
        let w = i8t(&[2, 1, 1, 1], &[3, -2]);
        let b = i32t(&[2], &[10, -4]);
        let types = [
            ty(&[1, 2, 1, 2], "!qnn.uniform<i8:f32, 1.0:1>"),
            ty(&[2, 1, 1, 1], "!qnn.uniform<i8:f32:0, {0.5:1, 0.25:-4}>"),
            ty(&[2], "i32"),
        ];
        let out = ty(&[1, 2, 1, 2], "!qnn.uniform<i8:f32, 1.0:0>");
        let ts: Vec<&str> = types.iter().map(String::as_str).collect();
        let y = run_typed(&mut ctx, conv2d, &[&x, &w, &b], &ts, "{groups = 2}", &[&out]);
        // Channel 0: (2 + 10)·0.5 = 6, (4 + 10)·0.5 = 7. Channel 1: (6 − 4)·0.25 =
        // 0.5 → 1 (half away from zero), (8 − 4)·0.25 = 1.
        assert_eq!(y, i8t(&[1, 2, 1, 2], &[6, 7, 1, 1]));
        let y = run_typed(
            &mut ctx,
            conv2d,
            &[&x, &w, &b],
            &ts,
            "{groups = 2, rounding = \"half_to_even\"}",
            &[&out],
        );
        assert_eq!(y, i8t(&[1, 2, 1, 2], &[6, 7, 0, 1]));
    }

    #[test]
    fn relu_clamps_at_the_zero_point_and_saturation() {
        let mut ctx = Context::new();
        // 1×1 conv of [−3, 0, 3, 100] with weight 1 at M = 1, output zp −2, narrowed
        // storage [−100, 100]: conv gives v − 2 saturated, relu max(v − 2, −2).
        let x = i8t(&[1, 1, 1, 4], &[-3, 0, 3, 100]);
        let w = i8t(&[1, 1, 1, 1], &[1]);
        let xt = ty(&[1, 1, 1, 4], "!qnn.uniform<i8:f32, 1.0:0>");
        let wt = ty(&[1, 1, 1, 1], "!qnn.uniform<i8:f32, 2.0:0>");
        let out = ty(&[1, 1, 1, 4], "!qnn.uniform<i8<-100:100>:f32, 1.0:-2>");
        let plain = run_typed(&mut ctx, conv2d, &[&x, &w], &[&xt, &wt], "{}", &[&out]);
        assert_eq!(plain, i8t(&[1, 1, 1, 4], &[-8, -2, 4, 100]));
        let relu = run_typed(&mut ctx, conv2d_relu, &[&x, &w], &[&xt, &wt], "{}", &[&out]);
        assert_eq!(relu, i8t(&[1, 1, 1, 4], &[-2, -2, 4, 100]));
        // Low saturation: −128 · 2 · 127 at M = 1 saturates to the narrowed −100.
        let x = i8t(&[1, 1, 1, 1], &[-128]);
        let w = i8t(&[1, 1, 1, 1], &[127]);
        let y = run_typed(
            &mut ctx,
            conv2d,
            &[&x, &w],
            &[&ty(&[1, 1, 1, 1], "!qnn.uniform<i8:f32, 1.0:0>"), &wt],
            "{}",
            &[&ty(&[1, 1, 1, 1], "!qnn.uniform<i8<-100:100>:f32, 1.0:-2>")],
        );
        assert_eq!(y, i8t(&[1, 1, 1, 1], &[-100]));
    }

    #[test]
    fn wide_storage_wraps_at_32_bits() {
        // i32 storage: products of full-range values leave f64's exact integers,
        // so the kernel takes the wrapping path, and the sum (which overflows
        // i32) wraps as §6 says: M = 1, so the output is wrap32(sum) itself.
        let mut ctx = Context::new();
        let x = i32t(&[1, 2, 1, 1], &[i32::MAX, i32::MAX]);
        let w = i32t(&[1, 2, 1, 1], &[i32::MAX, 3]);
        let xt = ty(&[1, 2, 1, 1], "!qnn.uniform<i32:f32, 1.0:0>");
        let wt = ty(&[1, 2, 1, 1], "!qnn.uniform<i32:f32, 1.0:0>");
        let out = ty(&[1, 1, 1, 1], "!qnn.uniform<i32:f32, 1.0:0>");
        let y = run_typed(&mut ctx, conv2d, &[&x, &w], &[&xt, &wt], "{}", &[&out]);
        let max = i128::from(i32::MAX);
        assert_eq!(y, i32t(&[1, 1, 1, 1], &[wrap32(max * max + max * 3)]));
        // i16 storage stays on the f64 path (one tap of 2^15 · 2^15).
        let x = i16t(&[1, 1, 1, 2], &[-32768, 32767]);
        let w = i16t(&[1, 1, 1, 1], &[32767]);
        let xt = ty(&[1, 1, 1, 2], "!qnn.uniform<i16:f32, 1.0:0>");
        let wt = ty(&[1, 1, 1, 1], "!qnn.uniform<i16:f32, 1.0:0>");
        let out = ty(&[1, 1, 1, 2], "!qnn.uniform<i32:f32, 1.0:0>");
        let y = run_typed(&mut ctx, conv2d, &[&x, &w], &[&xt, &wt], "{}", &[&out]);
        assert_eq!(y, i32t(&[1, 1, 1, 2], &[-32768 * 32767, 32767 * 32767]));
    }

    #[test]
    fn bad_operands() {
        let mut ctx = Context::new();
        let x = i8t(&[1, 2, 2, 2], &[0; 8]);
        let w = i8t(&[1, 2, 1, 1], &[0; 2]);
        let xt = ty(&[1, 2, 2, 2], "!qnn.uniform<i8:f32, 1.0:0>");
        let wt = ty(&[1, 2, 1, 1], "!qnn.uniform<i8:f32, 1.0:0>");
        let out = ty(&[1, 1, 2, 2], "!qnn.uniform<i8:f32, 1.0:0>");
        let b = crate::kernels::fp::tests::f32t(&[1], &[0.]);
        let e = run_typed_err(&mut ctx, conv2d, &[&x, &w, &b], &[&xt, &wt, "tensor<1xf32>"], "{}", &[&out]);
        assert!(e.contains("bias must be an i32 tensor of shape [1]"), "{e}");
        let e = run_typed_err(&mut ctx, conv2d, &[&x, &w], &[&xt, &wt], "{groups = 2}", &[&out]);
        assert!(e.contains("channels"), "{e}");
        let wt3 = ty(&[1, 2, 1, 1], "!qnn.uniform<i8:f32:1, {1.0:0, 1.0:0}>");
        let e = run_typed_err(&mut ctx, conv2d, &[&x, &w], &[&xt, &wt3], "{}", &[&out]);
        assert!(e.contains("per axis 0"), "{e}");
        let xt_axis = ty(&[1, 2, 2, 2], "!qnn.uniform<i8:f32:1, {1.0:0, 1.0:0}>");
        let e = run_typed_err(&mut ctx, conv2d, &[&x, &w], &[&xt_axis, &wt], "{}", &[&out]);
        assert!(e.contains("input must be quantized per tensor"), "{e}");
        let e = run_typed_err(&mut ctx, conv2d, &[&x], &[&xt], "{}", &[&out]);
        assert!(e.contains("expects at least 2 operand(s), got 1"), "{e}");
        let e = run_typed_err(&mut ctx, conv2d, &[&x, &w], &[&xt, &wt], "{stride = [0, 1]}", &[&out]);
        assert!(e.contains("stride"), "{e}");
    }

    /// A random convolution problem: stored data, parameters, and the storage
    /// of the operands (u8 input and i8 weight and result, or, when `wide`,
    /// i32 everywhere so that sums leave f64's exact range and wrap).
    struct Case {
        x: Vec<i64>,
        x_shape: [usize; 4],
        w: Vec<i64>,
        w_shape: [usize; 4],
        b: Vec<i32>,
        zp_x: i64,
        zp_w: Vec<i64>,
        zp_out: i64,
        s_x: f64,
        s_w: Vec<f64>,
        s_out: f64,
        conv: QuantConv2d,
        out_hw: [usize; 2],
        wide: bool,
    }

    impl Case {
        fn range(&self) -> (i64, i64) {
            if self.wide {
                (i32::MIN.into(), i32::MAX.into())
            } else {
                (-128, 127)
            }
        }

        /// The definition of §6, one output at a time in i64/i128.
        fn reference(&self) -> Vec<i64> {
            let ([n, c, h, wd], [o, cg, kh, kw]) = (self.x_shape, self.w_shape);
            let [oh, ow] = self.out_hw;
            let win = &self.conv;
            let (qmin, qmax) = self.range();
            let og = o / win.groups;
            let mut out = Vec::new();
            for ni in 0..n {
                for oc in 0..o {
                    let g = oc / og;
                    let (m, shift) = quantize_multiplier((self.s_x * self.s_w[oc]) / self.s_out).unwrap();
                    for y in 0..oh {
                        for xx in 0..ow {
                            let mut acc = i128::from(self.b[oc]);
                            for ci in 0..cg {
                                for ki in 0..kh {
                                    for kj in 0..kw {
                                        let iy = (y * win.stride[0] + ki * win.dilation[0]) as i64
                                            - win.pad[0] as i64;
                                        let ix = (xx * win.stride[1] + kj * win.dilation[1]) as i64
                                            - win.pad[1] as i64;
                                        let xv = if iy < 0 || ix < 0 || iy >= h as i64 || ix >= wd as i64 {
                                            self.zp_x
                                        } else {
                                            self.x[((ni * c + g * cg + ci) * h + iy as usize) * wd
                                                + ix as usize]
                                        };
                                        let wv = self.w[((oc * cg + ci) * kh + ki) * kw + kj];
                                        acc += i128::from(xv - self.zp_x) * i128::from(wv - self.zp_w[oc]);
                                    }
                                }
                            }
                            let r = requantize(i64::from(wrap32(acc)), m, shift, win.rounding);
                            let yv = i128::from(r) + i128::from(self.zp_out);
                            out.push(match win.relu {
                                Relu::None => saturate(yv, qmin, qmax),
                                Relu::Plain => saturate_relu(yv, self.zp_out, qmin, qmax),
                                // The bound quantized as qnn.quantize does (§3.1).
                                Relu::UpTo(max) => {
                                    let top =
                                        quantize_f32(max as f32, self.s_out as f32, self.zp_out, qmin, qmax);
                                    saturate_relu(yv, self.zp_out, qmin, top)
                                }
                            });
                        }
                    }
                }
            }
            out
        }

        /// The kernel's answer.
        fn run(&self) -> Vec<i64> {
            let storage = if self.wide { ["i32", "i32", "i32"] } else { ["u8", "i8", "i8"] };
            let entries: Vec<String> =
                self.s_w.iter().zip(&self.zp_w).map(|(s, z)| format!("{s:?}:{z}")).collect();
            let o = self.w_shape[0];
            let out_shape = [self.x_shape[0], o, self.out_hw[0], self.out_hw[1]];
            let types = [
                ty(&self.x_shape, &format!("!qnn.uniform<{}:f32, {:?}:{}>", storage[0], self.s_x, self.zp_x)),
                ty(&self.w_shape, &format!("!qnn.uniform<{}:f32:0, {{{}}}>", storage[1], entries.join(", "))),
                ty(&[o], "i32"),
            ];
            let out = ty(
                &out_shape,
                &format!("!qnn.uniform<{}:f32, {:?}:{}>", storage[2], self.s_out, self.zp_out),
            );
            let win = &self.conv;
            let relu_max = match win.relu {
                Relu::UpTo(max) => format!(", relu_max = {max:?} : f64"),
                _ => String::new(),
            };
            let attrs = format!(
                "{{stride = [{}, {}], pad = [{}, {}, {}, {}], dilation = [{}, {}], groups = {}, rounding = \"{}\"{relu_max}}}",
                win.stride[0], win.stride[1], win.pad[0], win.pad[1], win.pad[2], win.pad[3],
                win.dilation[0], win.dilation[1], win.groups, win.rounding.name()
            );
            let (x, w) = if self.wide {
                let narrow = |v: &[i64]| v.iter().map(|&v| v as i32).collect::<Vec<_>>();
                (i32t(&self.x_shape, &narrow(&self.x)), i32t(&self.w_shape, &narrow(&self.w)))
            } else {
                (
                    u8t(&self.x_shape, &self.x.iter().map(|&v| v as u8).collect::<Vec<_>>()),
                    i8t(&self.w_shape, &self.w.iter().map(|&v| v as i8).collect::<Vec<_>>()),
                )
            };
            let b = i32t(&[o], &self.b);
            let ts: Vec<&str> = types.iter().map(String::as_str).collect();
            let kernel = if win.relu == Relu::None { conv2d } else { conv2d_relu };
            let got = run_typed(&mut Context::new(), kernel, &[&x, &w, &b], &ts, &attrs, &[&out]);
            got.to_f64_vec().iter().map(|&v| v as i64).collect()
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        /// The im2col + GEMM kernel equals the direct definition on random
        /// shapes, windows, per-channel parameters and data, on the exact f64
        /// path (8-bit storage) and the wrapping one (32-bit storage).
        #[test]
        fn matches_the_direct_definition(
            (n, groups, cg, og, h, wd) in (1usize..3, 1usize..3, 1usize..4, 1usize..3, 1usize..7, 1usize..7),
            (kh, kw, sh, sw, dh, dw) in (1usize..4, 1usize..4, 1usize..3, 1usize..3, 1usize..3, 1usize..3),
            pad in proptest::array::uniform4(0usize..3),
            (zp_x, zp_out, relu, mode, wide) in (0i64..256, -128i64..128, 0usize..4, 0usize..3, any::<bool>()),
            seed in any::<u64>(),
        ) {
            let (c, o) = (cg * groups, og * groups);
            let eff_h = dh * (kh - 1) + 1;
            let eff_w = dw * (kw - 1) + 1;
            prop_assume!(h + pad[0] + pad[2] >= eff_h && wd + pad[1] + pad[3] >= eff_w);
            let out_hw = [(h + pad[0] + pad[2] - eff_h) / sh + 1, (wd + pad[1] + pad[3] - eff_w) / sw + 1];
            // A small deterministic generator (xorshift) for the data.
            let mut state = seed | 1;
            let mut next = move || { state ^= state << 13; state ^= state >> 7; state ^= state << 17; state };
            let (x, w): (Vec<i64>, Vec<i64>) = if wide {
                (
                    (0..n * c * h * wd).map(|_| i64::from(next() as i32)).collect(),
                    (0..o * cg * kh * kw).map(|_| i64::from(next() as i32)).collect(),
                )
            } else {
                (
                    (0..n * c * h * wd).map(|_| (next() % 256) as i64).collect(),
                    (0..o * cg * kh * kw).map(|_| (next() % 256) as i64 - 128).collect(),
                )
            };
            let scales: &[f64] = if wide { &[1.0, 0.5, 2.0, 0.25] } else { &[0.01, 0.02, 0.005, 0.013] };
            let case = Case {
                x,
                x_shape: [n, c, h, wd],
                w,
                w_shape: [o, cg, kh, kw],
                b: (0..o).map(|_| (next() % 20001) as i32 - 10000).collect(),
                zp_x,
                zp_w: (0..o).map(|_| (next() % 11) as i64 - 5).collect(),
                zp_out,
                s_x: if wide { 1.0 } else { 0.05 },
                s_w: (0..o).map(|_| scales[(next() % 4) as usize]).collect(),
                s_out: if wide { 1.0 } else { 0.1 },
                conv: QuantConv2d {
                    stride: [sh, sw],
                    pad,
                    dilation: [dh, dw],
                    groups,
                    rounding: [Rounding::HalfAwayFromZero, Rounding::HalfToEven, Rounding::HalfUp][mode],
                    // A ReLU6 bound, and one between two output steps.
                    relu: [Relu::None, Relu::Plain, Relu::UpTo(6.0), Relu::UpTo(0.37)][relu],
                },
                out_hw,
                wide,
            };
            prop_assert_eq!(case.run(), case.reference());
        }
    }
}
