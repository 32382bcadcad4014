//! The vector requantization of i32 accumulators that
//! the epilogues of conv2d and dense.
//!
//! [`Requantizer::emit`] turns 8 i32 lanes `v` of a ymm into the 8 stored
//! values `clamp(R(v × m, s, mode), low, high) + zp_out` (`docs/quant-semantics.md`
//! §4.4, §5, §6), as i32 lanes that the caller's saturating packs to bytes
//! ([`pack_8`](super::epilogue::pack_8)) take exactly: a bound the packs
//! enforce themselves (at or past the byte range) may be left to them.
//!
//! ```text
//!   odd = v >> 32 (per qword)            lanes 1, 3, 5, 7 to the low dwords
//!   x   = vpmuldq(v, m_even)              exact i64 products y, lanes 0, 2, 4, 6
//!   odd = vpmuldq(odd, m_odd)             lanes 1, 3, 5, 7
//!   each half: y + rounding bias           (§12's branch-free forms)
//!   then the arithmetic shift right by s and the clamp, in one of two ways
//!   (Narrowing), and + zp_out (i32)
//! ```
//!
//! **Narrowing.** [`Narrowing::Wide`] works for every `s` the shift plan
//! gives (1 to 62): AVX2 has no 64-bit arithmetic shift, so it is built from
//! logical shifts and the sign mask σ (`srl(y ⊕ σ, s) ⊕ σ = sra(y, s)`), the
//! clamp is a 64-bit compare-and-blend per bound and half, and the halves
//! are put back in order at the end. [`Narrowing::HighDwords`] is for
//! layers whose every shift is at least 32: then
//! `R = ⌊y / 2^s⌋ = ⌊⌊y / 2^32⌋ / 2^(s−32)⌋`, and `⌊y / 2^32⌋` is just the
//! high dword of `y` (|y| < 2^63, two's complement), so the high dwords of
//! both halves are blended into one vector and shifted with the native
//! 32-bit arithmetic shift (`vpsrad` / `vpsravd`) by `s − 32`; the result
//! fits i32, so it is clamped with `vpmaxsd` / `vpminsd` on all 8 lanes at
//! once. Same values, about half the instructions. With half_away_from_zero
//! rounding it works on magnitudes instead (`vpabsd`, unsigned products,
//! `vpsignd`), which needs no sign masks ([`Requantizer::emit`]).
//!
//! Every constant is memory (rodata) holding the 32-byte vector, so a kernel
//! whose registers are all accumulators can still requantize. Shift counts
//! are 64-bit counts in memory
//! (`vpsrlq ymm, ymm, m128`: one per output channel, the same in every
//! lane) or per-lane vectors (`vpsrlvq`, `vpsravd`: dense, whose lanes are
//! output channels). Multipliers and shifts come from
//! [`kernel_multiplier_and_shift`](crate::convert::kernel_multiplier_and_shift),
//! whose plan keeps `1 ≤ s ≤ 62` so the 64-bit arithmetic never wraps (the
//! argument is in `docs/codegen-x86.md` §9.5).

use iced_x86::code_asm::*;
use qopt_dialect_qnn::fixed_point::Rounding;

/// A 256-bit operand: 32 bytes of memory (the epilogues' registers all
/// hold accumulators).
#[derive(Copy, Clone, Debug)]
pub(crate) enum Vector {
    /// The value is the 32 bytes at this address.
    Mem(AsmMemoryOperand),
}

/// `a.op(dst, src, v)` for a [`Vector`] third operand.
macro_rules! with_vector {
    ($a:expr, $op:ident, $dst:expr, $src:expr, $v:expr) => {
        match $v {
            Vector::Mem(m) => $a.$op($dst, $src, m),
        }
    };
}

/// How a shift count is given.
#[derive(Copy, Clone, Debug)]
pub(crate) enum ShiftCount {
    /// One count for every lane: the low 64 bits of this 16-byte memory
    /// operand (`vpsrlq` / `vpsrad ymm, ymm, m128`).
    Uniform(AsmMemoryOperand),
    /// A count per lane (`vpsrlvq` per qword, `vpsravd` per dword).
    PerLane(Vector),
}

/// The constants of one half (the even or the odd i32 lanes, each held in
/// the low dword of a qword).
#[derive(Copy, Clone, Debug)]
pub(crate) struct HalfConstants {
    /// `m` in the low dword of each qword.
    pub multiplier: Vector,
    /// The rounding bias per qword: `2^(s−1)`, or `2^(s−1) − 1` for half_to_even.
    pub rounding_bias: Vector,
    /// The right shift `s`, per qword (half_to_even reads bit `s`, and
    /// [`Narrowing::Wide`] shifts by it).
    pub shift: ShiftCount,
}

/// How the biased 64-bit products become clamped i32 lanes (module doc).
#[derive(Copy, Clone, Debug)]
pub(crate) enum Narrowing {
    /// Any shift: 64-bit shifts and clamps per half.
    Wide {
        /// `low − zp_out` in each qword (a register: it is the first source
        /// of a compare).
        low: AsmRegisterYmm,
        /// `high − zp_out` in each qword.
        high: Vector,
    },
    /// Every shift ≥ 32: high dwords, 32-bit shift by `s − 32` and clamp.
    /// A bound is `None` where the caller's saturating packs clamp to it
    /// anyway (it is at or past the output's storage range): the result is
    /// at most 2^30 in magnitude (|v·m| < 2^62), so adding `zp_out` cannot wrap.
    HighDwords {
        /// `s − 32` (uniform: `vpsrad`; per lane: `vpsravd` on dwords).
        shift: ShiftCount,
        /// `low − zp_out` in each dword.
        low: Option<Vector>,
        /// `high − zp_out` in each dword.
        high: Option<Vector>,
    },
}

/// Everything [`Requantizer::emit`] reads.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Requantizer {
    /// Constants of lanes 0, 2, 4, 6.
    pub even: HalfConstants,
    /// Constants of lanes 1, 3, 5, 7.
    pub odd: HalfConstants,
    /// How ties round.
    pub rounding: Rounding,
    /// 1 in each qword (half_to_even reads bit `s` with it).
    pub ones: Vector,
    /// The shift and clamp.
    pub narrowing: Narrowing,
    /// `zp_out` in each dword.
    pub zero_point: Vector,
    /// A register holding zero, if the kernel keeps one; otherwise the sign
    /// masks are computed against a scratch register zeroed first.
    pub zero: Option<AsmRegisterYmm>,
}

impl Requantizer {
    /// Requantizes the 8 i32 lanes of `x` in place (see the module doc).
    /// Clobbers `odd` and `scratch`; leaves every constant alone.
    pub fn emit(
        &self,
        a: &mut CodeAssembler,
        x: AsmRegisterYmm,
        odd: AsmRegisterYmm,
        scratch: AsmRegisterYmm,
    ) -> Result<(), IcedError> {
        if let (Rounding::HalfAwayFromZero, Narrowing::HighDwords { shift, low, high }) =
            (self.rounding, self.narrowing)
        {
            return self.emit_magnitude(a, x, odd, scratch, shift, (low, high));
        }
        a.vpsrlq(odd, x, 32)?;
        with_vector!(a, vpmuldq, x, x, self.even.multiplier)?;
        with_vector!(a, vpmuldq, odd, odd, self.odd.multiplier)?;
        self.add_rounding_bias(a, x, scratch, &self.even)?;
        self.add_rounding_bias(a, odd, scratch, &self.odd)?;
        match self.narrowing {
            Narrowing::Wide { low, high } => {
                for (half, constants) in [(x, &self.even), (odd, &self.odd)] {
                    // Arithmetic shift right by s: srl(y ^ sign, s) ^ sign.
                    self.sign_mask(a, half, scratch)?;
                    a.vpxor(half, half, scratch)?;
                    shift_right_logical(a, half, half, constants.shift)?;
                    a.vpxor(half, half, scratch)?;
                    a.vpcmpgtq(scratch, low, half)?; // low > y
                    a.vblendvpd(half, half, low, scratch)?;
                    with_vector!(a, vpcmpgtq, scratch, half, high)?; // y > high
                    let Vector::Mem(m) = high;
                    a.vblendvpd(half, half, m, scratch)?;
                }
                a.vpsllq(odd, odd, 32)?;
                a.vpblendd(x, x, odd, 0b1010_1010)?; // back in lane order
            }
            Narrowing::HighDwords { shift, low, high } => {
                // High dword of each y into its lane: even lanes shifted
                // down, odd lanes already in place.
                a.vpsrlq(x, x, 32)?;
                a.vpblendd(x, x, odd, 0b1010_1010)?;
                match shift {
                    ShiftCount::Uniform(m) => a.vpsrad(x, x, m)?,
                    ShiftCount::PerLane(v) => with_vector!(a, vpsravd, x, x, v)?,
                }
                clamp(a, x, (low, high))?;
            }
        }
        with_vector!(a, vpaddd, x, x, self.zero_point)
    }

    /// Half-away-from-zero rounding through the high dwords, by magnitude:
    /// `R(v·m) = sign(v) · ⌊(|v|·m + 2^(s−1)) / 2^s⌋`, since `m ≥ 0`. `|v|`
    /// (2^31 for `i32::MIN`) and `m` are multiplied as unsigned dwords, the
    /// biased product is below 2^63, so its high dword, shifted by `s − 32`,
    /// is the rounded magnitude (below 2^31); `vpsignd` restores the sign
    /// (0 stays 0). Four instructions fewer than the signed form.
    fn emit_magnitude(
        &self,
        a: &mut CodeAssembler,
        x: AsmRegisterYmm,
        odd: AsmRegisterYmm,
        scratch: AsmRegisterYmm,
        high_shift: ShiftCount,
        (low, high): (Option<Vector>, Option<Vector>),
    ) -> Result<(), IcedError> {
        a.vpabsd(scratch, x)?;
        a.vpsrlq(odd, scratch, 32)?;
        with_vector!(a, vpmuludq, scratch, scratch, self.even.multiplier)?;
        with_vector!(a, vpmuludq, odd, odd, self.odd.multiplier)?;
        with_vector!(a, vpaddq, scratch, scratch, self.even.rounding_bias)?;
        with_vector!(a, vpaddq, odd, odd, self.odd.rounding_bias)?;
        a.vpsrlq(scratch, scratch, 32)?;
        a.vpblendd(scratch, scratch, odd, 0b1010_1010)?;
        match high_shift {
            ShiftCount::Uniform(m) => a.vpsrld(scratch, scratch, m)?,
            ShiftCount::PerLane(v) => with_vector!(a, vpsrlvd, scratch, scratch, v)?,
        }
        a.vpsignd(x, scratch, x)?;
        clamp(a, x, (low, high))?;
        with_vector!(a, vpaddd, x, x, self.zero_point)
    }

    /// `scratch = (y < 0)` as an all-ones mask per qword.
    fn sign_mask(
        &self,
        a: &mut CodeAssembler,
        y: AsmRegisterYmm,
        scratch: AsmRegisterYmm,
    ) -> Result<(), IcedError> {
        match self.zero {
            Some(zero) => a.vpcmpgtq(scratch, zero, y),
            None => {
                a.vpxor(scratch, scratch, scratch)?;
                a.vpcmpgtq(scratch, scratch, y)
            }
        }
    }

    /// `y += bias(mode)` for the i64 products `y` of one half (§12).
    fn add_rounding_bias(
        &self,
        a: &mut CodeAssembler,
        y: AsmRegisterYmm,
        scratch: AsmRegisterYmm,
        half: &HalfConstants,
    ) -> Result<(), IcedError> {
        match self.rounding {
            Rounding::HalfUp => with_vector!(a, vpaddq, y, y, half.rounding_bias),
            Rounding::HalfAwayFromZero => {
                self.sign_mask(a, y, scratch)?; // −1 where y < 0
                with_vector!(a, vpaddq, y, y, half.rounding_bias)?;
                a.vpaddq(y, y, scratch)
            }
            Rounding::HalfToEven => {
                shift_right_logical(a, scratch, y, half.shift)?;
                with_vector!(a, vpand, scratch, scratch, self.ones)?; // bit s of y
                with_vector!(a, vpaddq, y, y, half.rounding_bias)?;
                a.vpaddq(y, y, scratch)
            }
        }
    }
}

/// Clamps the i32 lanes of `x` to the bounds that are given.
fn clamp(
    a: &mut CodeAssembler,
    x: AsmRegisterYmm,
    (low, high): (Option<Vector>, Option<Vector>),
) -> Result<(), IcedError> {
    if let Some(low) = low {
        with_vector!(a, vpmaxsd, x, x, low)?;
    }
    if let Some(high) = high {
        with_vector!(a, vpminsd, x, x, high)?;
    }
    Ok(())
}

/// `dst = src >> count` (logical, per qword).
fn shift_right_logical(
    a: &mut CodeAssembler,
    dst: AsmRegisterYmm,
    src: AsmRegisterYmm,
    count: ShiftCount,
) -> Result<(), IcedError> {
    match count {
        ShiftCount::Uniform(m) => a.vpsrlq(dst, src, m),
        ShiftCount::PerLane(v) => with_vector!(a, vpsrlvq, dst, src, v),
    }
}
