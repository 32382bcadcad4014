//! The quantization parameters kernels are specialized for: a per-tensor
//! 8-bit type ([`ByteQuant`]) and the fixed-point multiplier of a
//! requantization with the shift plan the kernels use
//! ([`kernel_multiplier_and_shift`]).

use crate::buffer::ElementType;
use crate::error::{CodegenError, CodegenErrorKind};
use qopt_dialect_qnn::quant_params::{self, check_quant_type, storage_range};
use qopt_ir_core::{FloatKind, QuantType, Signedness};

/// One quantized side of a conversion: a per-tensor 8-bit type.
#[derive(Copy, Clone, PartialEq, Debug)]
pub struct ByteQuant {
    /// The buffer type of the stored values (`I8` or `U8`).
    pub element: ElementType,
    /// The scale as written in the type (f64).
    pub scale: f64,
    /// The stored value of real 0.
    pub zero_point: i32,
    /// Smallest stored value (the storage range, narrowed if the type narrows it).
    pub qmin: i32,
    /// Largest stored value.
    pub qmax: i32,
}

impl ByteQuant {
    /// The parameters of `q`, or an error when the type is invalid or outside
    /// what these kernels compile (`what` names the operand).
    pub fn of(q: &QuantType, what: &str) -> Result<ByteQuant, CodegenError> {
        check_quant_type(q)
            .map_err(|e| CodegenError::new(CodegenErrorKind::InvalidInput, format!("{what}: {e}")))?;
        let unsupported =
            |m: String| CodegenError::new(CodegenErrorKind::Unsupported, format!("{what}: {m}"));
        let Some(p) = quant_params::per_tensor(q) else {
            return Err(unsupported("per-axis parameters are not compiled yet (per tensor only)".into()));
        };
        if q.storage.width > 8 {
            return Err(unsupported(format!(
                "{}-bit storage is not compiled yet (8 bits at most)",
                q.storage.width
            )));
        }
        if q.expressed != FloatKind::F32 {
            return Err(unsupported("only f32 expressed types are compiled yet".into()));
        }
        let element = match q.storage.signedness {
            Signedness::Signless => ElementType::I8,
            Signedness::Unsigned => ElementType::U8,
        };
        let (qmin, qmax) = storage_range(q);
        // check_quant_type keeps zp and the range within the 8-bit storage.
        Ok(ByteQuant {
            element,
            scale: p.scale,
            zero_point: p.zero_point as i32,
            qmin: qmin as i32,
            qmax: qmax as i32,
        })
    }

    /// Whether the stored values are unsigned bytes.
    pub(crate) fn is_unsigned(&self) -> bool {
        self.element == ElementType::U8
    }
}

/// The fixed-point form of a requantization: `M ≈ multiplier × 2^(−31−shift)`.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct FixedPointMultiplier {
    /// `m`, in `[2^30, 2^31)`.
    pub multiplier: i32,
    /// `n`; the right shift is `31 + n`.
    pub shift: i32,
}

/// The multiplier and right shift the requantize kernel uses for `(m, n)`:
/// the same results as `R(v × m, 31 + n, mode)` for every input with
/// |v| < 2^31, followed by a clamp to bounds of magnitude below 2^29, with a
/// shift in `1..=62` so that the 64-bit arithmetic cannot overflow.
///
/// - `1 ≤ s ≤ 62`: `(m, s)` itself. |v × m| < 2^62 and the rounding bias is at
///   most 2^61, so the biased value fits i64.
/// - `s ≥ 63`: |v × m| < 2^62 ≤ 2^(s−1), strictly below half a step, so `R` is 0
///   in every mode; `(0, 1)` gives 0 in every mode too.
/// - `s ≤ 0`: `R = v × m × 2^(−s)` has the sign of `v` and, for `v ≠ 0`,
///   magnitude at least 2^30, so the clamp gives the same bound as for
///   `(2^30, 1)`, whose result `v × 2^29` has the same sign and magnitude at
///   least 2^29 (and is 0 for `v = 0`, as `R` is).
pub fn kernel_multiplier_and_shift(m: FixedPointMultiplier) -> (i32, u32) {
    let s = 31i64 + i64::from(m.shift);
    if s >= 63 {
        (0, 1)
    } else if s <= 0 {
        (1 << 30, 1)
    } else {
        (m.multiplier, s as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qopt_dialect_qnn::fixed_point::Rounding;
    use qopt_dialect_qnn::fixed_point::{quantize_multiplier, requantize, saturate};

    /// The shift plan against the reference `requantize` over every 9-bit `v`,
    /// each mode, and shifts from far below 0 to far above 62, in plain Rust
    /// (no generated code): the plan itself is exact.
    #[test]
    fn kernel_shift_plan_matches_the_reference_at_every_shift() {
        let (low, high) = (-255i64, 255i64);
        for exponent in -80..=80 {
            for mantissa in [0.5, 0.75, 0.999_999_9] {
                let real = mantissa * 2f64.powi(exponent);
                let (m, n) = quantize_multiplier(real).unwrap();
                let (km, ks) = kernel_multiplier_and_shift(FixedPointMultiplier { multiplier: m, shift: n });
                assert!((1..=62).contains(&ks));
                for mode in [Rounding::HalfAwayFromZero, Rounding::HalfToEven, Rounding::HalfUp] {
                    for v in -511i64..=511 {
                        let want = saturate(i128::from(requantize(v, m, n, mode)), low, high);
                        let x = i128::from(v) * i128::from(km);
                        let got = qopt_dialect_qnn::fixed_point::rounding_shift(x, i64::from(ks), mode);
                        assert_eq!(saturate(got, low, high), want, "M = {real}, v = {v}, {mode}");
                    }
                }
            }
        }
    }
}
