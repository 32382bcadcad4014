//! The fixed-point rescaling every integer kernel shares: the rounding shift
//! `R(x, s, mode)` of `docs/quant-semantics.md` §4.3 on 64-bit lanes, the
//! clamp to the output's storage range and the output zero point (§5, §7), as
//! one instruction sequence that `qnn.requantize`, `qnn.concat`, `qnn.add`,
//! `qnn.mul` and the average pools all emit.
//!
//! The values are held in ymm registers named by [`StageRegisters`]; the
//! kernels decide where the constants come from (immediates broadcast once, or
//! a parameter block in rodata loaded per row) and call:
//!
//! - [`emit_round_shift_clamp`]: 4 i64 lanes `x` → `clamp(R(x, s), lo, hi) + zp`,
//! - [`emit_multiply_round_clamp`]: 8 i32 lanes `v` → the same of `v × m`,
//!   the products formed exactly by `vpmuldq` on even and odd lanes,
//! - [`emit_clamp_offset`]: the clamp and `+ zp` alone (for a shift left).
//!
//! **Exactness.** The rounding uses §12's branch-free forms with bias
//! [`rounding_bias`]: `half_up` adds `h`, `half_away_from_zero` adds
//! `h − (x < 0)`, `half_to_even` adds `h − 1 + bit s of x`. AVX2 has no 64-bit
//! arithmetic shift; for the sign mask `σ` of `y`, `srl(y ⊕ σ, s) ⊕ σ =
//! sra(y, s)`. The shift `s` must be in `1..=62` and `|x| < 2^62`, so that
//! `x + bias` cannot wrap (`bias ≤ 2^61`); [`StageConstants::single_term`]
//! turns any multiplier into such a plan with the same clamped results
//! (`convert::kernel_multiplier_and_shift`), and `qnn.add` handles its two-term
//! sum in `binary.rs`. The clamp compares 64-bit lanes with `vpcmpgtq` and
//! selects with `vblendvpd`, so the result is in `[lo, hi] + zp`, the range of
//! the output's stored values, and the packs that narrow it never saturate.

use crate::convert::{kernel_multiplier_and_shift, ByteQuant, FixedPointMultiplier};
use iced_x86::code_asm::*;
use qopt_dialect_qnn::fixed_point::Rounding;

/// The registers one rescaling reads; the kernel loads them first.
#[derive(Copy, Clone, Debug)]
pub(crate) struct StageRegisters {
    /// All zero.
    pub zero: AsmRegisterYmm,
    /// Four i64 ones (read by `half_to_even` only).
    pub one: AsmRegisterYmm,
    /// Four i64 rounding biases, [`rounding_bias`].
    pub bias: AsmRegisterYmm,
    /// The right shift `s` in the low qword.
    pub shift: AsmRegisterXmm,
    /// Four i64 lower bounds `qmin − zp_out`.
    pub low: AsmRegisterYmm,
    /// Four i64 upper bounds `qmax − zp_out`.
    pub high: AsmRegisterYmm,
    /// Four i64 output zero points.
    pub zp_out: AsmRegisterYmm,
}

/// `h = 2^(s−1)`, or `h − 1` for `half_to_even` (which adds bit `s` of `x`
/// on top), for a shift `s ≥ 1`.
pub(crate) fn rounding_bias(shift: u32, rounding: Rounding) -> i64 {
    let half = 1i64 << (shift - 1);
    if rounding == Rounding::HalfToEven {
        half - 1
    } else {
        half
    }
}

/// The constants of one single-term rescaling `clamp(R(v × m, s), lo, hi) + zp`
/// as a kernel holds them: a shift in `1..=62` and the multiplier that goes
/// with it ([`kernel_multiplier_and_shift`]: the same clamped results as the
/// reference for every `|v| < 2^31`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct StageConstants {
    /// The multiplier `m` (in `[0, 2^31)`).
    pub multiplier: i32,
    /// The right shift, in `1..=62`.
    pub shift: u32,
    /// [`rounding_bias`] of the shift.
    pub bias: i64,
    /// `qmin − zp_out`.
    pub low: i64,
    /// `qmax − zp_out`.
    pub high: i64,
    /// The output zero point.
    pub zp_out: i64,
}

impl StageConstants {
    /// The plan of `requantize(v; m, n, rounding) + zp_out`, clamped to
    /// `output`'s range.
    pub(crate) fn single_term(
        m: FixedPointMultiplier,
        rounding: Rounding,
        output: &ByteQuant,
    ) -> StageConstants {
        let (multiplier, shift) = kernel_multiplier_and_shift(m);
        StageConstants::with_shift(multiplier, shift, rounding, output)
    }

    /// The constants for a multiplier and shift already in the kernel's range.
    pub(crate) fn with_shift(
        multiplier: i32,
        shift: u32,
        rounding: Rounding,
        output: &ByteQuant,
    ) -> StageConstants {
        StageConstants {
            multiplier,
            shift,
            bias: rounding_bias(shift, rounding),
            low: i64::from(output.qmin - output.zero_point),
            high: i64::from(output.qmax - output.zero_point),
            zp_out: i64::from(output.zero_point),
        }
    }
}

/// `x ← clamp(R(x, s, rounding), low, high) + zp_out` on the four i64 lanes of
/// `x`; clobbers `scratch`. Needs `|x| < 2^62` and `s` in `1..=62`.
pub(crate) fn emit_round_shift_clamp(
    a: &mut CodeAssembler,
    rounding: Rounding,
    regs: &StageRegisters,
    x: AsmRegisterYmm,
    scratch: AsmRegisterYmm,
) -> Result<(), IcedError> {
    match rounding {
        Rounding::HalfUp => a.vpaddq(x, x, regs.bias)?,
        Rounding::HalfAwayFromZero => {
            a.vpcmpgtq(scratch, regs.zero, x)?; // −1 where x < 0
            a.vpaddq(x, x, regs.bias)?;
            a.vpaddq(x, x, scratch)?;
        }
        Rounding::HalfToEven => {
            a.vpsrlq(scratch, x, regs.shift)?;
            a.vpand(scratch, scratch, regs.one)?; // bit s of x
            a.vpaddq(x, x, regs.bias)?;
            a.vpaddq(x, x, scratch)?;
        }
    }
    // Arithmetic shift right by s: srl(x ^ sign, s) ^ sign.
    a.vpcmpgtq(scratch, regs.zero, x)?;
    a.vpxor(x, x, scratch)?;
    a.vpsrlq(x, x, regs.shift)?;
    a.vpxor(x, x, scratch)?;
    emit_clamp_offset(a, regs, x, scratch)
}

/// `x ← clamp(x, low, high) + zp_out` on four i64 lanes; clobbers `scratch`.
pub(crate) fn emit_clamp_offset(
    a: &mut CodeAssembler,
    regs: &StageRegisters,
    x: AsmRegisterYmm,
    scratch: AsmRegisterYmm,
) -> Result<(), IcedError> {
    a.vpcmpgtq(scratch, regs.low, x)?; // low > x
    a.vblendvpd(x, x, regs.low, scratch)?;
    a.vpcmpgtq(scratch, x, regs.high)?; // x > high
    a.vblendvpd(x, x, regs.high, scratch)?;
    a.vpaddq(x, x, regs.zp_out)
}

/// `v ← clamp(R(v × m, s, rounding), low, high) + zp_out` on the eight i32
/// lanes of `v` (|v| < 2^31; the results, of at most 9 bits, come back as i32
/// lanes in element order). `m` holds the multiplier in every dword (only the
/// low dword of each qword is read). Clobbers `odd` and `scratch`.
pub(crate) fn emit_multiply_round_clamp(
    a: &mut CodeAssembler,
    rounding: Rounding,
    regs: &StageRegisters,
    m: AsmRegisterYmm,
    v: AsmRegisterYmm,
    [odd, scratch]: [AsmRegisterYmm; 2],
) -> Result<(), IcedError> {
    a.vpsrlq(odd, v, 32)?; // odd lanes to the low dwords
    a.vpmuldq(v, v, m)?; // v × m, elements 0, 2, 4, 6 (exact i64)
    a.vpmuldq(odd, odd, m)?; // v × m, elements 1, 3, 5, 7
    emit_round_shift_clamp(a, rounding, regs, v, scratch)?;
    emit_round_shift_clamp(a, rounding, regs, odd, scratch)?;
    emit_merge_even_odd(a, v, v, odd)
}

/// `dst ← [even[0], odd[0], even[1], odd[1], ...]` as i32 lanes, from two
/// vectors of four i64 lanes whose values fit i32; clobbers `odd`.
pub(crate) fn emit_merge_even_odd(
    a: &mut CodeAssembler,
    dst: AsmRegisterYmm,
    even: AsmRegisterYmm,
    odd: AsmRegisterYmm,
) -> Result<(), IcedError> {
    a.vpsllq(odd, odd, 32)?;
    a.vpblendd(dst, even, odd, 0b1010_1010)
}
