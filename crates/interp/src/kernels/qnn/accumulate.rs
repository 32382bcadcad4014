//! The integer core `qnn.conv2d` and `qnn.dense` share (§6): operands centered
//! on their zero points, the accumulation `Σ_k (x_k − zp_x)(w_k − zp_w[c])` by
//! GEMM, and the output stage `wrap32(sum + b[c])` → requantize → relu clamp →
//! saturate.
//!
//! **Why a float GEMM is exact here.** Centered values are integers; when
//! `K · max|x − zp_x| · max|w − zp_w| ≤ 2^53` (K taps per output), every
//! product and every partial sum of a dot product, in any order, is an integer
//! of magnitude at most 2^53, and every such integer is an f64. So each
//! multiply, add or fused multiply-add of the f64 GEMM (matrixmultiply's dgemm
//! through ndarray's `general_mat_mul`) rounds nothing, and the result is the
//! exact integer sum. For 8-bit storage the bound holds up to K = 2^37, so this
//! is the path every real model takes. The bound is checked on the actual data
//! ([`exact_in_f64`]); when it fails (16- or 32-bit storage with long
//! reductions) the sums are taken in i32 with wrapping adds and multiplies
//! ([`wrapping_gemm`]), which is exact modulo 2^32, and that is all §6 needs:
//! `wrap32(sum + b)` only depends on the sum modulo 2^32.

use super::{per_tensor, ParamIndex};
use crate::error::{bail, InterpError};
use crate::tensor::Tensor;
use ndarray::linalg::general_mat_mul;
use ndarray::{ArrayD, ArrayView2, ArrayViewMut2};
use qopt_dialect_qnn::fixed_point::{requantize, saturate, saturate_relu, wrap32, Rounding};
use qopt_dialect_qnn::quant_params::{conv_multipliers, relu_upper_bound, storage_range, Multiplier};
use qopt_ir_core::QuantType;

/// The centered values `q − zp` of a quantized tensor, row-major, and their
/// largest magnitude.
pub(super) struct Centered {
    pub values: Vec<i64>,
    pub max_abs: u64,
}

impl Centered {
    /// `q − zp` of every element of the quantized tensor `t` of element type
    /// `q`, with the zero point of each element's parameter entry; `what`
    /// names the tensor in errors. Stored values are within 32 bits of
    /// storage, so the difference is exact; `saturating_sub` only keeps
    /// out-of-contract `i64` data from overflowing.
    pub fn new(t: &Tensor, q: &QuantType, what: &str) -> Result<Centered, InterpError> {
        let index = ParamIndex::new(q, t.shape(), what)?;
        let zps: Vec<i64> = index.entries.iter().map(|p| p.zero_point).collect();
        Ok(match t {
            Tensor::I8(a) => center(a, &zps, index.inner),
            Tensor::U8(a) => center(a, &zps, index.inner),
            Tensor::I16(a) => center(a, &zps, index.inner),
            Tensor::I32(a) => center(a, &zps, index.inner),
            Tensor::I64(a) => center(a, &zps, index.inner),
            other => bail!("{what} must hold stored integers, got a {} tensor", other.dtype()),
        })
    }

    /// The values as f32 (exact: see [`exact_in_f32`], which bounds them).
    pub fn as_f32(&self) -> Vec<f32> {
        self.values.iter().map(|&v| v as f32).collect()
    }

    /// The values as f64 (exact: see [`exact_in_f64`], which bounds them).
    pub fn as_f64(&self) -> Vec<f64> {
        self.values.iter().map(|&v| v as f64).collect()
    }

    /// The values modulo 2^32, as i32 (`as` truncates: two's complement wrap).
    pub fn as_wrapped(&self) -> Vec<i32> {
        self.values.iter().map(|&v| v as i32).collect()
    }
}

/// [`Centered::new`] on one storage type: the row-major elements come in runs
/// of `inner` that share a parameter entry, the entries cycling (§2).
fn center<T: Copy + Into<i64>>(a: &ArrayD<T>, zps: &[i64], inner: usize) -> Centered {
    let a = a.as_standard_layout();
    let copied: Vec<T>;
    let data = match a.as_slice() {
        Some(data) => data,
        None => {
            copied = a.iter().copied().collect();
            &copied
        }
    };
    let mut values = Vec::with_capacity(data.len());
    let mut max_abs = 0u64;
    for (run, chunk) in data.chunks(inner.max(1)).enumerate() {
        let zp = zps.get(run % zps.len().max(1)).copied().unwrap_or(0);
        values.extend(chunk.iter().map(|&q| {
            let v = q.into().saturating_sub(zp);
            max_abs = max_abs.max(v.unsigned_abs());
            v
        }));
    }
    Centered { values, max_abs }
}

/// True if dot products of `taps` terms with factors bounded by `max_x` and
/// `max_w` are exact in f64 (see the module docs).
pub(super) fn exact_in_f64(max_x: u64, max_w: u64, taps: usize) -> bool {
    let bound = u128::from(max_x).checked_mul(u128::from(max_w)).and_then(|p| p.checked_mul(taps as u128));
    bound.is_some_and(|b| b <= 1u128 << 53)
}

/// True if such dot products are exact in f32 too: every partial sum an
/// integer of magnitude at most 2^24, which f32 holds (8-bit data with up to
/// about 500 taps, where f32 arithmetic is the faster path).
pub(super) fn exact_in_f32(max_x: u64, max_w: u64, taps: usize) -> bool {
    let bound = u128::from(max_x).checked_mul(u128::from(max_w)).and_then(|p| p.checked_mul(taps as u128));
    bound.is_some_and(|b| b <= 1u128 << 24)
}

/// `c = a · b` in f64; exact under [`exact_in_f64`].
pub(super) fn exact_gemm(a: ArrayView2<'_, f64>, b: ArrayView2<'_, f64>, mut c: ArrayViewMut2<'_, f64>) {
    general_mat_mul(1.0, &a, &b, 0.0, &mut c);
}

/// `c = a · b` with i32 wrapping arithmetic: every entry is the exact dot
/// product modulo 2^32.
pub(super) fn wrapping_gemm(a: ArrayView2<'_, i32>, b: ArrayView2<'_, i32>, mut c: ArrayViewMut2<'_, i32>) {
    c.fill(0);
    for (a_row, mut c_row) in a.rows().into_iter().zip(c.rows_mut()) {
        for (&aik, b_row) in a_row.iter().zip(b.rows()) {
            if aik != 0 {
                c_row.zip_mut_with(&b_row, |acc, &bkj| *acc = acc.wrapping_add(aik.wrapping_mul(bkj)));
            }
        }
    }
}

/// The sums `Σ (x − zp_x)(w − zp_w[c])` of every output, row-major: exact
/// (f64 path) or modulo 2^32 (wrapping path). Either gives the same
/// `wrap32(sum + b)`.
pub(super) enum Sums {
    Exact(Vec<f64>),
    Wrapped(Vec<i32>),
}

/// The activation fused into an output stage (§6).
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Relu {
    /// None: `qnn.conv2d`, `qnn.dense`.
    None,
    /// Clamp at the output zero point (real 0): the `_relu` forms.
    Plain,
    /// Clamp into [real 0, `relu_max`]: the `_relu` forms with `relu_max`
    /// (a fused ReLU6 has 6.0).
    UpTo(f64),
}

impl Relu {
    /// The activation of a `_relu` op (`relu`) whose attributes are `attrs`.
    pub fn of(ctx: &qopt_ir_core::Context, attrs: qopt_ir_core::Attribute, relu: bool) -> Relu {
        match (relu, qopt_dialect_qnn::relu_max_of(ctx, attrs)) {
            (false, _) => Relu::None,
            (true, None) => Relu::Plain,
            (true, Some(max)) => Relu::UpTo(max),
        }
    }
}

/// The output stage of §6 for each output channel `c`:
/// `y = requantize(wrap32(sum + b[c]); m_c, n_c, rounding) + zp_out`, then
/// `clamp(y, qmin, qmax)`, or `clamp(max(y, zp_out), qmin, qmax)` for the relu forms.
pub(super) struct OutputStage {
    multipliers: Vec<Multiplier>,
    bias: Option<Vec<i32>>,
    zero_point: i64,
    /// `(qmin, qmax)` of the result, `qmax` lowered to `quantize(relu_max)`
    /// when the relu form has one.
    range: (i64, i64),
    relu: bool,
    rounding: Rounding,
}

impl OutputStage {
    /// The stage for input type `x`, weight type `w` (per tensor or per axis
    /// `weight_axis`, its output channels), result type `out`, optional bias
    /// tensor and `channels` output channels. Multipliers are
    /// [`conv_multipliers`]: `(s_x ⊗₆₄ s_w[c]) ⊘₆₄ s_out` per channel.
    pub fn new(
        x: &QuantType,
        (w, weight_axis): (&QuantType, usize),
        out: &QuantType,
        bias: Option<&Tensor>,
        channels: usize,
        relu: Relu,
        rounding: Rounding,
    ) -> Result<OutputStage, InterpError> {
        per_tensor(x, "input")?;
        let out_params = per_tensor(out, "result")?;
        let zero_point = out_params.zero_point;
        let (qmin, _) = storage_range(out);
        // §6: the fused clip's bound, quantized like qnn.quantize (§3.1).
        let relu_max = if let Relu::UpTo(max) = relu { Some(max) } else { None };
        let qmax = relu_upper_bound(out, relu_max)?;
        if let Some(axis) = qopt_dialect_qnn::quant_params::axis(w) {
            if axis != weight_axis {
                bail!(
                    "weight must be quantized per tensor or per axis {weight_axis} (output channels), got axis {axis}"
                );
            }
        }
        let multipliers = conv_multipliers(x, w, out)?;
        if multipliers.len() != 1 && multipliers.len() != channels {
            bail!(
                "weight has {} per-channel parameter entries but {channels} output channels",
                multipliers.len()
            );
        }
        let bias = match bias {
            None => None,
            Some(Tensor::I32(b)) if b.shape() == [channels] => Some(b.iter().copied().collect()),
            Some(other) => {
                bail!("bias must be an i32 tensor of shape [{channels}], got {}", other.describe())
            }
        };
        let relu = !matches!(relu, Relu::None);
        Ok(OutputStage { multipliers, bias, zero_point, range: (qmin, qmax), relu, rounding })
    }

    /// The output value of channel `c` from its sum (exact, or congruent to it
    /// modulo 2^32).
    fn apply(&self, sum: i64, c: usize) -> i64 {
        let b = self.bias.as_ref().map_or(0, |b| b[c]);
        let acc = wrap32(i128::from(sum) + i128::from(b));
        let (m, n) = if self.multipliers.len() == 1 { self.multipliers[0] } else { self.multipliers[c] };
        let y = i128::from(requantize(i64::from(acc), m, n, self.rounding)) + i128::from(self.zero_point);
        let (qmin, qmax) = self.range;
        if self.relu {
            saturate_relu(y, self.zero_point, qmin, qmax)
        } else {
            saturate(y, qmin, qmax)
        }
    }

    /// Every output value from `sums` (row-major), which come in runs of
    /// `run` values of one output channel, the `channels` channels cycling
    /// (conv: runs of H'·W'; dense: runs of 1).
    pub fn apply_all(&self, sums: &Sums, run: usize, channels: usize) -> Vec<i64> {
        fn each<T: Copy>(
            stage: &OutputStage,
            sums: &[T],
            run: usize,
            channels: usize,
            int: fn(T) -> i64,
        ) -> Vec<i64> {
            let mut out = Vec::with_capacity(sums.len());
            for (j, chunk) in sums.chunks(run.max(1)).enumerate() {
                let c = j % channels.max(1);
                out.extend(chunk.iter().map(|&s| stage.apply(int(s), c)));
            }
            out
        }
        match sums {
            // The f64 sums are exact integers below 2^53.
            Sums::Exact(v) => each(self, v, run, channels, |s| s as i64),
            Sums::Wrapped(v) => each(self, v, run, channels, i64::from),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::arr2;

    #[test]
    fn exactness_bound() {
        // 8-bit operands: |x − zp| ≤ 255 and |w − zp| ≤ 255.
        assert!(exact_in_f64(255, 255, 1 << 37));
        assert!(exact_in_f64(1 << 8, 1 << 8, 1 << 37));
        assert!(!exact_in_f64(1 << 8, 1 << 8, (1 << 37) + 1));
        assert!(exact_in_f64(1 << 26, 1 << 27, 1));
        assert!(!exact_in_f64(u64::MAX, u64::MAX, 2));
        assert!(exact_in_f64(0, u64::MAX, usize::MAX));
    }

    #[test]
    fn wrapping_gemm_is_exact_mod_2_32() {
        let a = arr2(&[[i32::MAX, 2], [-3, 0]]);
        let b = arr2(&[[2, 1], [i32::MAX, -1]]);
        let mut c = arr2(&[[7, 7], [7, 7]]);
        wrapping_gemm(a.view(), b.view(), c.view_mut());
        let exact = |i: usize, j: usize| -> i128 {
            (0..2).map(|k| i128::from(a[[i, k]]) * i128::from(b[[k, j]])).sum()
        };
        for i in 0..2 {
            for j in 0..2 {
                assert_eq!(c[[i, j]], wrap32(exact(i, j)), "[{i}, {j}]");
            }
        }
    }
}
