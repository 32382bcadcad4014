//! The vector requantization every kernel that rescales an i32 shares:
//! `qnn.requantize` (`convert.rs`) and the epilogues of conv2d and dense.
//!
//! [`Requantizer::emit`] turns 8 i32 lanes `v` of a ymm into the 8 stored
//! values `clamp(R(v × m, s, mode), low, high) + zp_out` (`docs/quant-semantics.md`
//! §4.4, §5, §6), as i32 lanes each within the output's byte range:
//!
//! ```text
//!   odd = v >> 32 (per qword)            lanes 1, 3, 5, 7 to the low dwords
//!   x   = vpmuldq(v, m_even)              exact i64 products, lanes 0, 2, 4, 6
//!   y   = vpmuldq(odd, m_odd)             lanes 1, 3, 5, 7
//!   each half: + rounding bias (§12's branch-free forms), arithmetic shift
//!   right by s built from logical shifts and the sign mask, 64-bit clamp
//!   back in order: y << 32, vpblendd 0xAA;  + zp_out (i32)
//! ```
//!
//! Every constant is an operand the caller chooses: a register holding it
//! broadcast, or memory (rodata) holding the 32-byte vector, so a kernel
//! whose registers are all accumulators can still requantize. The shift is
//! an immediate (one multiplier for the whole op), a 64-bit count in memory
//! (`vpsrlq ymm, ymm, m128`: one count per output channel, the same in every
//! lane) or a vector of per-lane counts (`vpsrlvq`: dense, whose lanes are
//! output channels). Multipliers and shifts come from
//! [`kernel_multiplier_and_shift`](crate::convert::kernel_multiplier_and_shift),
//! whose plan keeps `1 ≤ s ≤ 62` so the 64-bit arithmetic never wraps (the
//! argument is in `docs/codegen-x86.md` §4.5).

use iced_x86::code_asm::*;
use qopt_dialect_qnn::fixed_point::Rounding;

/// A 256-bit operand: a register, or 32 bytes of memory.
#[derive(Copy, Clone, Debug)]
pub(crate) enum Vector {
    /// The value is in this register.
    Reg(AsmRegisterYmm),
    /// The value is the 32 bytes at this address.
    Mem(AsmMemoryOperand),
}

/// `a.op(dst, src, v)` for a [`Vector`] third operand.
macro_rules! with_vector {
    ($a:expr, $op:ident, $dst:expr, $src:expr, $v:expr) => {
        match $v {
            Vector::Reg(r) => $a.$op($dst, $src, r),
            Vector::Mem(m) => $a.$op($dst, $src, m),
        }
    };
}

/// How the rounding shift count is given.
#[derive(Copy, Clone, Debug)]
pub(crate) enum ShiftCount {
    /// One count for every lane, as an immediate.
    Immediate(u32),
    /// One count for every lane: the low 64 bits of this 16-byte memory
    /// operand (`vpsrlq ymm, ymm, m128`).
    Uniform(AsmMemoryOperand),
    /// A count per 64-bit lane (`vpsrlvq`).
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
    /// The right shift `s`.
    pub shift: ShiftCount,
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
    /// The low clamp bound `low − zp_out` in each qword (a register: it is
    /// the first source of a compare).
    pub low: AsmRegisterYmm,
    /// The high clamp bound `high − zp_out` in each qword.
    pub high: Vector,
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
        a.vpsrlq(odd, x, 32)?;
        with_vector!(a, vpmuldq, x, x, self.even.multiplier)?;
        with_vector!(a, vpmuldq, odd, odd, self.odd.multiplier)?;
        self.round_shift_clamp(a, x, scratch, &self.even)?;
        self.round_shift_clamp(a, odd, scratch, &self.odd)?;
        a.vpsllq(odd, odd, 32)?;
        a.vpblendd(x, x, odd, 0b1010_1010)?;
        with_vector!(a, vpaddd, x, x, self.zero_point)
    }

    /// `scratch = (x < 0)` as an all-ones mask per qword.
    fn sign_mask(
        &self,
        a: &mut CodeAssembler,
        x: AsmRegisterYmm,
        scratch: AsmRegisterYmm,
    ) -> Result<(), IcedError> {
        match self.zero {
            Some(zero) => a.vpcmpgtq(scratch, zero, x),
            None => {
                a.vpxor(scratch, scratch, scratch)?;
                a.vpcmpgtq(scratch, scratch, x)
            }
        }
    }

    /// The i64 products `x` of one half → clamped `R(x, s, mode)`.
    fn round_shift_clamp(
        &self,
        a: &mut CodeAssembler,
        x: AsmRegisterYmm,
        scratch: AsmRegisterYmm,
        half: &HalfConstants,
    ) -> Result<(), IcedError> {
        match self.rounding {
            Rounding::HalfUp => with_vector!(a, vpaddq, x, x, half.rounding_bias)?,
            Rounding::HalfAwayFromZero => {
                self.sign_mask(a, x, scratch)?; // −1 where x < 0
                with_vector!(a, vpaddq, x, x, half.rounding_bias)?;
                a.vpaddq(x, x, scratch)?;
            }
            Rounding::HalfToEven => {
                shift_right_logical(a, scratch, x, half.shift)?;
                with_vector!(a, vpand, scratch, scratch, self.ones)?; // bit s of x
                with_vector!(a, vpaddq, x, x, half.rounding_bias)?;
                a.vpaddq(x, x, scratch)?;
            }
        }
        // Arithmetic shift right by s: srl(x ^ sign, s) ^ sign.
        self.sign_mask(a, x, scratch)?;
        a.vpxor(x, x, scratch)?;
        shift_right_logical(a, x, x, half.shift)?;
        a.vpxor(x, x, scratch)?;
        a.vpcmpgtq(scratch, self.low, x)?; // low > x
        a.vblendvpd(x, x, self.low, scratch)?;
        with_vector!(a, vpcmpgtq, scratch, x, self.high)?; // x > high
        match self.high {
            Vector::Reg(r) => a.vblendvpd(x, x, r, scratch),
            Vector::Mem(m) => a.vblendvpd(x, x, m, scratch),
        }
    }
}

/// `dst = src >> count` (logical, per qword).
fn shift_right_logical(
    a: &mut CodeAssembler,
    dst: AsmRegisterYmm,
    src: AsmRegisterYmm,
    count: ShiftCount,
) -> Result<(), IcedError> {
    match count {
        ShiftCount::Immediate(s) => a.vpsrlq(dst, src, s),
        ShiftCount::Uniform(m) => a.vpsrlq(dst, src, m),
        ShiftCount::PerLane(Vector::Reg(r)) => a.vpsrlvq(dst, src, r),
        ShiftCount::PerLane(Vector::Mem(m)) => a.vpsrlvq(dst, src, m),
    }
}
