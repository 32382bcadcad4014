//! `qnn.avg_pool2d` and `qnn.global_avg_pool2d` (§7.4): the exact sum of
//! `q − zp_in` over each window, requantized with the multiplier of
//! `s_in / (n · s_out)` for the window's divisor `n`, plus `zp_out`,
//! saturated. The windows and divisors are those of `fp.avg_pool2d`
//! (`crate::kernels::fp::pool::window_sums`).

use super::{ints, narrow, per_tensor, quant_operand, result_quant, rounding};
use crate::error::{bail, InterpError};
use crate::kernels::fp::one;
use crate::kernels::fp::pool::{geometry, out_shape, window_sums};
use crate::registry::{Kernel, KernelContext, KernelResults};
use crate::tensor::Tensor;
use qopt_dialect_fp::attrs::PoolAttrs;
use qopt_dialect_qnn::fixed_point::{quantize_multiplier, requantize, saturate, Rounding};
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_dialect_qnn::quant_params::storage_range;
use qopt_ir_core::QuantType;

kernel_table! {
    qnn_op::AVG_POOL2D => avg_pool2d, qnn_op::GLOBAL_AVG_POOL2D => global_avg_pool2d,
}

/// The output of one window: `requantize(sum; M_n) + zp_out`, saturated,
/// with `M_n = s_in ⊘₆₄ (n ⊗₆₄ s_out)`; `zp_out` for an empty window.
struct Averager {
    s_in: f64,
    s_out: f64,
    zp_out: i64,
    range: (i64, i64),
    rounding: Rounding,
    /// Multipliers by divisor, computed on first use.
    by_count: Vec<Option<(i32, i32)>>,
}

impl Averager {
    fn new(input: &QuantType, output: &QuantType, rounding: Rounding) -> Result<Averager, InterpError> {
        let (pin, pout) = (per_tensor(input, "input")?, per_tensor(output, "result")?);
        Ok(Averager {
            s_in: pin.scale,
            s_out: pout.scale,
            zp_out: pout.zero_point,
            range: storage_range(output),
            rounding,
            by_count: Vec::new(),
        })
    }

    fn average(&mut self, sum: i64, count: usize) -> Result<i64, InterpError> {
        if count == 0 {
            return Ok(saturate(i128::from(self.zp_out), self.range.0, self.range.1));
        }
        if self.by_count.len() <= count {
            self.by_count.resize(count + 1, None);
        }
        let (m, n) = match self.by_count[count] {
            Some(mn) => mn,
            None => {
                let real = self.s_in / (count as f64 * self.s_out);
                let mn = quantize_multiplier(real).map_err(InterpError::new)?;
                self.by_count[count] = Some(mn);
                mn
            }
        };
        let y = i128::from(requantize(sum, m, n, self.rounding)) + i128::from(self.zp_out);
        Ok(saturate(y, self.range.0, self.range.1))
    }
}

/// The stored values of the input with its zero point subtracted, and the
/// input's quantized type.
fn centered<'a>(
    kc: &KernelContext<'a>,
    ops: &[&Tensor],
) -> Result<(Vec<i64>, Vec<usize>, &'a QuantType), InterpError> {
    let (x, xq) = quant_operand(kc, ops, 0, "input")?;
    if x.rank() != 4 {
        bail!("input must have rank 4 (NxCxHxW), got shape {:?}", x.shape());
    }
    let zp = per_tensor(xq, "input")?.zero_point;
    let stored = ints(x, "input")?;
    Ok((stored.iter().map(|&q| q - zp).collect(), x.shape().to_vec(), xq))
}

/// `qnn.avg_pool2d` (attributes of `fp.avg_pool2d`, and `rounding`).
pub(crate) fn avg_pool2d(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    let (values, shape, xq) = centered(kc, ops)?;
    let attrs = PoolAttrs::read_in(kc.ctx, kc.attrs, 2, false)?;
    let g = geometry(&shape, &attrs, 2)?;
    let mut avg = Averager::new(xq, result_quant(kc)?, rounding(kc)?)?;
    let out = window_sums(&values, &g, attrs.count_include_pad, 0i64, |s, v| s + v)
        .into_iter()
        .map(|(sum, count)| avg.average(sum, count))
        .collect::<Result<Vec<i64>, _>>()?;
    one(narrow(kc, &out_shape(&g, 2), out)?)
}

/// `qnn.global_avg_pool2d`: N×C×H×W → N×C×1×1, divisor H·W.
pub(crate) fn global_avg_pool2d(
    kc: &mut KernelContext<'_>,
    ops: &[&Tensor],
) -> Result<KernelResults, InterpError> {
    let (values, shape, xq) = centered(kc, ops)?;
    let mut avg = Averager::new(xq, result_quant(kc)?, rounding(kc)?)?;
    let plane = shape[2] * shape[3];
    let out = if plane == 0 {
        (0..shape[0] * shape[1]).map(|_| avg.average(0, 0)).collect::<Result<Vec<i64>, _>>()?
    } else {
        values.chunks(plane).map(|p| avg.average(p.iter().sum(), plane)).collect::<Result<Vec<i64>, _>>()?
    };
    one(narrow(kc, &[shape[0], shape[1], 1, 1], out)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::fp::tests::run_typed;
    use crate::kernels::qnn::tests::{i8t, u8t};
    use qopt_ir_core::Context;

    const IN: &str = "tensor<1x1x2x3x!qnn.uniform<u8:f32, 0.5:10>>";

    /// §7.4's example: windows of 2×2 (stride 1) over
    /// [[10, 12, 15], [11, 13, 20]] − 10 = [[0, 2, 5], [1, 3, 10]]: sums 6 and
    /// 20, means 1.5 and 5 in input steps = 0.75 and 2.5 real; at scale 0.25
    /// that is 3 and 10 steps, plus zp_out −5.
    #[test]
    fn average_pool_example() {
        let mut ctx = Context::new();
        let x = u8t(&[1, 1, 2, 3], &[10, 12, 15, 11, 13, 20]);
        let out = "tensor<1x1x1x2x!qnn.uniform<i8:f32, 0.25:-5>>";
        let y = run_typed(&mut ctx, avg_pool2d, &[&x], &[IN], "{kernel = [2, 2]}", &[out]);
        assert_eq!(y.to_f64_vec(), [-2.0, 5.0]);
        // Global: sum 21 over 6 = 3.5 steps = 1.75 real = 7 at 0.25, −5 → 2.
        let out = "tensor<1x1x1x1x!qnn.uniform<i8:f32, 0.25:-5>>";
        let y = run_typed(&mut ctx, global_avg_pool2d, &[&x], &[IN], "{}", &[out]);
        assert_eq!(y.to_f64_vec(), [2.0]);
    }

    /// Ties follow `rounding`, and padding counts in the divisor only with
    /// `count_include_pad`.
    #[test]
    fn rounding_and_padding() {
        let mut ctx = Context::new();
        let x = i8t(&[1, 1, 1, 2], &[1, 2]);
        let t = "tensor<1x1x1x2x!qnn.uniform<i8:f32, 1.0:0>>";
        let out = "tensor<1x1x1x1x!qnn.uniform<i8:f32, 1.0:0>>";
        // mean 1.5: away from zero → 2, to even → 2; sum 3 over 2.
        let y = run_typed(&mut ctx, global_avg_pool2d, &[&x], &[t], "{rounding = \"half_to_even\"}", &[out]);
        assert_eq!(y.to_f64_vec(), [2.0]);
        let x = i8t(&[1, 1, 1, 2], &[1, 4]);
        // mean 2.5: half away → 3, to even → 2.
        let y = run_typed(&mut ctx, global_avg_pool2d, &[&x], &[t], "{}", &[out]);
        assert_eq!(y.to_f64_vec(), [3.0]);
        let y = run_typed(&mut ctx, global_avg_pool2d, &[&x], &[t], "{rounding = \"half_to_even\"}", &[out]);
        assert_eq!(y.to_f64_vec(), [2.0]);
        // A 1×2 window padded on the left: [pad, 1] then [4, pad].
        let attrs = "{kernel = [1, 2], stride = [1, 2], pad = [0, 1, 0, 1]}";
        let out2 = "tensor<1x1x1x2x!qnn.uniform<i8:f32, 1.0:0>>";
        let y = run_typed(&mut ctx, avg_pool2d, &[&i8t(&[1, 1, 1, 2], &[1, 4])], &[t], attrs, &[out2]);
        assert_eq!(y.to_f64_vec(), [1.0, 4.0]);
        let attrs = "{kernel = [1, 2], stride = [1, 2], pad = [0, 1, 0, 1], count_include_pad = true}";
        let y = run_typed(&mut ctx, avg_pool2d, &[&i8t(&[1, 1, 1, 2], &[1, 4])], &[t], attrs, &[out2]);
        assert_eq!(y.to_f64_vec(), [1.0, 2.0]);
    }

    proptest::proptest! {
        /// The kernel equals §7.4 computed directly, window by window in
        /// i128, on random shapes, windows, paddings, parameters and data.
        #[test]
        fn matches_the_direct_definition(
            (c, h, w) in (1usize..3, 1usize..7, 1usize..7),
            (kh, kw, sh, sw) in (1usize..4, 1usize..4, 1usize..3, 1usize..3),
            pads in proptest::array::uniform4(0usize..3),
            (include_pad, ceil, mode) in (proptest::bool::ANY, proptest::bool::ANY, 0usize..3),
            (zp_in, zp_out, s_in, s_out) in (-20i64..20, -20i64..20, 0.01f64..2.0, 0.01f64..2.0),
            seed in proptest::num::u64::ANY,
        ) {
            let pads = [pads[0].min(kh - 1), pads[1].min(kw - 1), pads[2].min(kh - 1), pads[3].min(kw - 1)];
            let out_size = |size: usize, k: usize, s: usize, lo: usize, hi: usize| -> Option<usize> {
                let span = (size + lo + hi).checked_sub(k)?;
                let mut o = span / s + 1;
                if ceil && span % s != 0 && (o * s) < size + lo {
                    o += 1;
                }
                Some(o)
            };
            let (Some(oh), Some(ow)) = (out_size(h, kh, sh, pads[0], pads[2]), out_size(w, kw, sw, pads[1], pads[3])) else {
                return Ok(());
            };
            let mut state = seed | 1;
            let mut next = move || { state ^= state << 13; state ^= state >> 7; state ^= state << 17; state };
            let x: Vec<i8> = (0..c * h * w).map(|_| next() as i8).collect();
            let rounding = [Rounding::HalfAwayFromZero, Rounding::HalfToEven, Rounding::HalfUp][mode];
            let mut want = Vec::new();
            for ch in 0..c {
                for oy in 0..oh {
                    for ox in 0..ow {
                        let (y0, x0) = ((oy * sh) as i64 - pads[0] as i64, (ox * sw) as i64 - pads[1] as i64);
                        let (mut sum, mut taps, mut padded) = (0i128, 0usize, 0usize);
                        for ky in 0..kh as i64 {
                            for kx in 0..kw as i64 {
                                let (iy, ix) = (y0 + ky, x0 + kx);
                                let in_padded = iy < (h + pads[2]) as i64 && ix < (w + pads[3]) as i64;
                                padded += usize::from(in_padded);
                                if iy >= 0 && ix >= 0 && (iy as usize) < h && (ix as usize) < w {
                                    sum += i128::from(x[(ch * h + iy as usize) * w + ix as usize]) - i128::from(zp_in);
                                    taps += 1;
                                }
                            }
                        }
                        let n = if include_pad { padded } else { taps };
                        let y = if n == 0 {
                            zp_out
                        } else {
                            let (m, k) = quantize_multiplier(s_in / (n as f64 * s_out)).unwrap();
                            requantize(sum as i64, m, k, rounding) + zp_out
                        };
                        want.push(y.clamp(-128, 127) as f64);
                    }
                }
            }
            let attrs = format!(
                "{{kernel = [{kh}, {kw}], stride = [{sh}, {sw}], pad = [{}, {}, {}, {}], ceil_mode = {ceil}, \
                 count_include_pad = {include_pad}, rounding = \"{}\"}}",
                pads[0], pads[1], pads[2], pads[3], rounding.name()
            );
            let tin = format!("tensor<1x{c}x{h}x{w}x!qnn.uniform<i8:f32, {s_in:?}:{zp_in}>>");
            let tout = format!("tensor<1x{c}x{oh}x{ow}x!qnn.uniform<i8:f32, {s_out:?}:{zp_out}>>");
            let got = run_typed(&mut Context::new(), avg_pool2d, &[&i8t(&[1, c, h, w], &x)], &[&tin], &attrs, &[&tout]);
            proptest::prop_assert_eq!(got.to_f64_vec(), want);
        }

        /// `qnn.global_avg_pool2d` equals §7.4 computed from the definitions
        /// alone: each plane's exact sum of `x − zp_x`, the multiplier of §4.2
        /// taken from the bits of `s_x ⊘₆₄ (n ⊗₆₄ s_out)` ([`multiplier_of`]),
        /// the rounding shift of §4.3 by its formulas ([`shift_of`]), on random
        /// shapes, i8/u8 storage on either side, parameters, roundings and data.
        /// A third of the cases keep `s_out = s_in` and another third halve it, so
        /// that `M = 1/n` or `2/n` puts exact ties in front of every rounding mode.
        #[test]
        fn global_matches_the_direct_definition(
            (n, c, h, w) in (1usize..3, 1usize..4, 1usize..10, 1usize..10),
            (signed_in, signed_out, mode) in (proptest::bool::ANY, proptest::bool::ANY, 0usize..3),
            (zp_in, zp_out) in (0i64..256, 0i64..256),
            (s_in, s_out, ratio) in (1e-3f64..4.0, 1e-3f64..4.0, 0usize..3),
            seed in proptest::num::u64::ANY,
        ) {
            let s_out = [s_out, s_in, s_in / 2.0][ratio];
            let range = |signed: bool| if signed { (-128i64, 127i64) } else { (0, 255) };
            let ((in_lo, in_hi), (out_lo, out_hi)) = (range(signed_in), range(signed_out));
            let (zp_in, zp_out) = (zp_in + in_lo, zp_out + out_lo);
            let mut state = seed | 1;
            let mut next = move || { state ^= state << 13; state ^= state >> 7; state ^= state << 17; state };
            let span = (in_hi - in_lo + 1) as u64;
            let x: Vec<i64> = (0..n * c * h * w).map(|_| in_lo + (next() % span) as i64).collect();
            let rounding = [Rounding::HalfAwayFromZero, Rounding::HalfToEven, Rounding::HalfUp][mode];
            let taps = h * w;
            let want: Vec<f64> = x
                .chunks(taps)
                .map(|plane| {
                    let v: i128 = plane.iter().map(|&q| i128::from(q - zp_in)).sum();
                    let (m, shift) = multiplier_of(s_in / (taps as f64 * s_out));
                    let y = shift_of(v * m, shift, rounding) + i128::from(zp_out);
                    y.clamp(i128::from(out_lo), i128::from(out_hi)) as f64
                })
                .collect();
            let storage = |signed: bool| if signed { "i8" } else { "u8" };
            let (sin, sout) = (storage(signed_in), storage(signed_out));
            let tin = format!("tensor<{n}x{c}x{h}x{w}x!qnn.uniform<{sin}:f32, {s_in:?}:{zp_in}>>");
            let tout = format!("tensor<{n}x{c}x1x1x!qnn.uniform<{sout}:f32, {s_out:?}:{zp_out}>>");
            let shape = [n, c, h, w];
            let input = if signed_in {
                i8t(&shape, &x.iter().map(|&q| q as i8).collect::<Vec<_>>())
            } else {
                u8t(&shape, &x.iter().map(|&q| q as u8).collect::<Vec<_>>())
            };
            let attrs = format!("{{rounding = \"{}\"}}", rounding.name());
            let got = run_typed(&mut Context::new(), global_avg_pool2d, &[&input], &[&tin], &attrs, &[&tout]);
            proptest::prop_assert_eq!(got.to_f64_vec(), want);
        }
    }

    /// §4.2 from the bits of `real` (a positive normal f64): `real = f·2^e`
    /// with the 53-bit significand `f·2^53`; `m` is `f·2^31` rounded half up,
    /// with the carry case; returns `m` and the total right shift `31 − e`.
    fn multiplier_of(real: f64) -> (i128, i64) {
        let bits = real.to_bits();
        let significand = i128::from(bits & ((1u64 << 52) - 1) | (1u64 << 52));
        let mut e = ((bits >> 52) & 0x7ff) as i64 - 1022;
        let mut m = (significand + (1 << 21)) >> 22;
        if m == 1 << 31 {
            m = 1 << 30;
            e += 1;
        }
        (m, 31 - e)
    }

    /// `R(x, s, mode)` by the formulas of §4.3.
    fn shift_of(x: i128, s: i64, mode: Rounding) -> i128 {
        if s <= 0 {
            return x * (1i128 << -s);
        }
        let (p, h) = (1i128 << s, 1i128 << (s - 1));
        match mode {
            Rounding::HalfAwayFromZero => x.signum() * (x.abs() + h).div_euclid(p),
            Rounding::HalfToEven => {
                let q = x.div_euclid(p);
                let r = x - q * p;
                if r > h || (r == h && q % 2 != 0) {
                    q + 1
                } else {
                    q
                }
            }
            Rounding::HalfUp => (x + h).div_euclid(p),
        }
    }
}
