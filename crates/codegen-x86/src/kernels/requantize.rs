//! The one requantizer every integer kernel emits: `clamp(R(v × m, s,
//! mode), low, high) + zp_out` of `docs/quant-semantics.md` §4.3–§5, the
//! rounding shift in the branch-free forms of §12.
//!
//! - [`StageConstants`]: one rescaling's multiplier, shift, rounding bias,
//!   bounds and zero point, from [`kernel_multiplier_and_shift`]'s plan
//!   (`1 ≤ s ≤ 62` and `|v × m| < 2^62`, so the 64-bit arithmetic never
//!   wraps; the argument is in `docs/codegen-x86.md` §9.5).
//! - [`Requantizer`]: the instruction sequence, with each constant a
//!   [`Vector`] wherever the kernel keeps it: registers for the row kernels
//!   (`qnn.requantize`, `qnn.concat`, `qnn.add`, `qnn.mul`, the average
//!   pools: [`StageRegisters::requantizer`]), memory for the conv and dense
//!   epilogues, whose registers all hold accumulators. It takes 8 i32 lanes
//!   to multiply ([`Requantizer::emit`]), two halves of i64 sums
//!   ([`Requantizer::emit_sums`], a two-term `qnn.add`), halves already
//!   scaled ([`Requantizer::emit_clamped_halves`]), or one i64 value
//!   ([`Requantizer::emit_one`], a pool window).
//! - [`emit_requantize_rows`]: the row kernel of `qnn.requantize` and of
//!   `qnn.concat`'s rescaled inputs, with per-row [`param_block`]s.
//!
//! ```text
//!   odd = v >> 32 (per qword)            lanes 1, 3, 5, 7 to the low dwords
//!   x   = vpmuldq(v, m_even)              exact i64 products y, lanes 0, 2, 4, 6
//!   odd = vpmuldq(odd, m_odd)             lanes 1, 3, 5, 7
//!   each half: y + rounding bias          (§12: half_up adds h, half_away_from_zero
//!                                          h − (y < 0), half_to_even h − 1 + bit s of y)
//!   then the arithmetic shift right by s and the clamp (Narrowing),
//!   the halves back in lane order, + zp_out (i32)
//! ```
//!
//! **Narrowing.** [`Narrowing::Wide`] works for every `s` (1 to 62): AVX2 has
//! no 64-bit arithmetic shift, so it is built from logical shifts and the
//! sign mask σ (`srl(y ⊕ σ, s) ⊕ σ = sra(y, s)`), and the clamp is a 64-bit
//! compare-and-blend per bound and half (`vpcmpgtq`, `vblendvpd`), so the
//! result is in `[low, high] + zp_out` and the packs that narrow it never
//! saturate. [`Narrowing::HighDwords`] is for epilogues whose every shift is
//! at least 32: then `R = ⌊y / 2^s⌋ = ⌊⌊y / 2^32⌋ / 2^(s−32)⌋`, and
//! `⌊y / 2^32⌋` is the high dword of `y` (|y| < 2^63, two's complement), so
//! the high dwords of both halves are blended into one vector and shifted
//! with the native 32-bit arithmetic shift (`vpsrad` / `vpsravd`) by
//! `s − 32`; the result fits i32, so it is clamped with `vpmaxsd` /
//! `vpminsd` on all 8 lanes at once. Same values, about half the
//! instructions. With half_away_from_zero rounding it works on magnitudes
//! instead (`vpabsd`, unsigned products, `vpsignd`), which needs no sign
//! masks.
//!
//! Shift counts are uniform (`vpsrlq ymm, ymm, xmm/m128`: the row kernels,
//! or one per output channel) or per lane (`vpsrlvq`, `vpsravd`: dense,
//! whose lanes are output channels).

use crate::abi::{KernelCode, Place};
use crate::error::{CodegenError, CodegenErrorKind};
use crate::kernels::lanes::{emit_byte_lanes, Along, LaneCompute, LaneInput};
use crate::kernels::quant_params::{kernel_multiplier_and_shift, ByteQuant, FixedPointMultiplier};
use crate::kernels::registers::{broadcast_u32, broadcast_u64};
use crate::kernels::rows::{emit_rows, Nest, Stream, AUX, INPUT0, LANE_RUN, OUTPUT, STREAM_POINTERS};

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
    /// Eight i32 output zero points (added after the halves are merged).
    pub zp_out: AsmRegisterYmm,
}

/// The stage registers of the kernels that keep one rescaling's constants in
/// registers: per call ymm8 zero, ymm12 ones, ymm11 / ymm10 the bounds, ymm9
/// zp_out; per row or window ymm13 bias and xmm7 the shift.
pub(crate) const STAGE_REGISTERS: StageRegisters = StageRegisters {
    zero: ymm8,
    one: ymm12,
    bias: ymm13,
    shift: xmm7,
    low: ymm11,
    high: ymm10,
    zp_out: ymm9,
};

impl StageRegisters {
    /// The [`Requantizer`] that reads its constants from these registers and
    /// multiplies by `multiplier` (`m` in the low dword of each qword;
    /// only [`Requantizer::emit`] forms products).
    pub(crate) fn requantizer(&self, rounding: Rounding, multiplier: AsmRegisterYmm) -> Requantizer {
        let half = HalfConstants {
            multiplier: Vector::Reg(multiplier),
            rounding_bias: Vector::Reg(self.bias),
            shift: ShiftCount::Uniform(Count::Reg(self.shift)),
        };
        Requantizer {
            even: half,
            odd: half,
            rounding,
            ones: Vector::Reg(self.one),
            narrowing: Narrowing::Wide { low: self.low, high: Vector::Reg(self.high) },
            zero_point: Vector::Reg(self.zp_out),
            zero: Some(self.zero),
        }
    }
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

/// A 256-bit operand: a register (the row kernels keep their constants in
/// registers) or 32 bytes of memory (the epilogues' registers all hold
/// accumulators).
#[derive(Copy, Clone, Debug)]
pub(crate) enum Vector {
    /// The value is this register.
    Reg(AsmRegisterYmm),
    /// The value is the 32 bytes at this address.
    Mem(AsmMemoryOperand),
}

/// `a.op(dst, src, v)` for a third operand `v` of an operand enum (`Reg` or
/// `Mem`): [`Vector`] by default, or the enum named last.
macro_rules! with_vector {
    ($a:expr, $op:ident, $dst:expr, $src:expr, $v:expr) => {
        with_vector!($a, $op, $dst, $src, $v, Vector)
    };
    ($a:expr, $op:ident, $dst:expr, $src:expr, $v:expr, $operand:ident) => {
        match $v {
            $operand::Reg(r) => $a.$op($dst, $src, r),
            $operand::Mem(m) => $a.$op($dst, $src, m),
        }
    };
}

/// A uniform shift count: the low 64 bits of an xmm register or of 16 bytes
/// of memory.
#[derive(Copy, Clone, Debug)]
pub(crate) enum Count {
    /// The count is in this register.
    Reg(AsmRegisterXmm),
    /// The count is at this address.
    Mem(AsmMemoryOperand),
}

/// How a shift count is given.
#[derive(Copy, Clone, Debug)]
pub(crate) enum ShiftCount {
    /// One count for every lane (`vpsrlq` / `vpsrad ymm, ymm, xmm/m128`).
    Uniform(Count),
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
            Narrowing::Wide { .. } => {
                for (half, constants) in [(x, &self.even), (odd, &self.odd)] {
                    self.shift_right(a, half, scratch, constants.shift)?;
                    self.clamp_wide(a, half, scratch)?;
                }
                merge_even_odd(a, x, x, odd)?;
            }
            Narrowing::HighDwords { shift, low, high } => {
                // High dword of each y into its lane: even lanes shifted
                // down, odd lanes already in place.
                a.vpsrlq(x, x, 32)?;
                a.vpblendd(x, x, odd, 0b1010_1010)?;
                match shift {
                    ShiftCount::Uniform(c) => with_vector!(a, vpsrad, x, x, c, Count)?,
                    ShiftCount::PerLane(v) => with_vector!(a, vpsravd, x, x, v)?,
                }
                clamp(a, x, (low, high))?;
            }
        }
        with_vector!(a, vpaddd, x, x, self.zero_point)
    }

    /// The 8 stored values of two halves of i64 sums `X` (elements 0, 2, 4, 6
    /// in `even`, 1, 3, 5, 7 in `odd`, each `|X| < 2^62`): `clamp(R(X, s),
    /// low, high) + zp_out` in `dst` as i32 lanes in element order (a
    /// two-term `qnn.add`). Needs [`Narrowing::Wide`]; clobbers both halves
    /// and `scratch`.
    pub fn emit_sums(
        &self,
        a: &mut CodeAssembler,
        dst: AsmRegisterYmm,
        [even, odd]: [AsmRegisterYmm; 2],
        scratch: AsmRegisterYmm,
    ) -> Result<(), IcedError> {
        for (half, constants) in [(even, &self.even), (odd, &self.odd)] {
            self.add_rounding_bias(a, half, scratch, constants)?;
            self.shift_right(a, half, scratch, constants.shift)?;
        }
        self.emit_clamped_halves(a, dst, [even, odd], scratch)
    }

    /// `clamp(X, low, high) + zp_out` of two halves of i64 values already
    /// scaled, merged into `dst` as i32 lanes in element order. Needs
    /// [`Narrowing::Wide`]; clobbers both halves and `scratch`.
    pub fn emit_clamped_halves(
        &self,
        a: &mut CodeAssembler,
        dst: AsmRegisterYmm,
        [even, odd]: [AsmRegisterYmm; 2],
        scratch: AsmRegisterYmm,
    ) -> Result<(), IcedError> {
        self.clamp_wide(a, even, scratch)?;
        self.clamp_wide(a, odd, scratch)?;
        merge_even_odd(a, dst, even, odd)?;
        with_vector!(a, vpaddd, dst, dst, self.zero_point)
    }

    /// `clamp(R(x, s), low, high) + zp_out` of the i64 value in the low
    /// qword of `x`, left in its low dword (an average pool's window sum
    /// times its multiplier). Needs [`Narrowing::Wide`]; clobbers `scratch`.
    pub fn emit_one(
        &self,
        a: &mut CodeAssembler,
        x: AsmRegisterYmm,
        scratch: AsmRegisterYmm,
    ) -> Result<(), IcedError> {
        self.add_rounding_bias(a, x, scratch, &self.even)?;
        self.shift_right(a, x, scratch, self.even.shift)?;
        self.clamp_wide(a, x, scratch)?;
        with_vector!(a, vpaddd, x, x, self.zero_point)
    }

    /// The arithmetic shift right of the i64 lanes of `y` by `s`, which AVX2
    /// lacks: `srl(y ⊕ σ, s) ⊕ σ` for the sign mask `σ`.
    fn shift_right(
        &self,
        a: &mut CodeAssembler,
        y: AsmRegisterYmm,
        scratch: AsmRegisterYmm,
        shift: ShiftCount,
    ) -> Result<(), IcedError> {
        self.sign_mask(a, y, scratch)?;
        a.vpxor(y, y, scratch)?;
        shift_right_logical(a, y, y, shift)?;
        a.vpxor(y, y, scratch)
    }

    /// Clamps the i64 lanes of `y` to the bounds of [`Narrowing::Wide`]
    /// (64-bit compares and blends); nothing for another narrowing.
    fn clamp_wide(
        &self,
        a: &mut CodeAssembler,
        y: AsmRegisterYmm,
        scratch: AsmRegisterYmm,
    ) -> Result<(), IcedError> {
        let Narrowing::Wide { low, high } = self.narrowing else { return Ok(()) };
        a.vpcmpgtq(scratch, low, y)?; // low > y
        a.vblendvpd(y, y, low, scratch)?;
        with_vector!(a, vpcmpgtq, scratch, y, high)?; // y > high
        match high {
            Vector::Reg(r) => a.vblendvpd(y, y, r, scratch),
            Vector::Mem(m) => a.vblendvpd(y, y, m, scratch),
        }
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
            ShiftCount::Uniform(c) => with_vector!(a, vpsrld, scratch, scratch, c, Count)?,
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

/// `dst ← [even[0], odd[0], even[1], odd[1], ...]` as i32 lanes, from two
/// vectors of four i64 lanes whose values fit i32; clobbers `odd`.
fn merge_even_odd(
    a: &mut CodeAssembler,
    dst: AsmRegisterYmm,
    even: AsmRegisterYmm,
    odd: AsmRegisterYmm,
) -> Result<(), IcedError> {
    a.vpsllq(odd, odd, 32)?;
    a.vpblendd(dst, even, odd, 0b1010_1010) // back in lane order
}

/// `dst = src >> count` (logical, per qword).
fn shift_right_logical(
    a: &mut CodeAssembler,
    dst: AsmRegisterYmm,
    src: AsmRegisterYmm,
    count: ShiftCount,
) -> Result<(), IcedError> {
    match count {
        ShiftCount::Uniform(c) => with_vector!(a, vpsrlq, dst, src, c, Count),
        ShiftCount::PerLane(v) => with_vector!(a, vpsrlvq, dst, src, v),
    }
}

/// Bytes of one parameter block.
pub(crate) const PARAM_BLOCK: usize = 128;
const ZP_IN_AT: i32 = 0;
const MULTIPLIER_AT: i32 = 32;
const BIAS_AT: i32 = 64;
const SHIFT_AT: i32 = 96;

/// The block of one parameter entry: `zp_in` and `m` as 8 dwords, the bias
/// and the shift as 4 qwords each.
pub(crate) fn param_block(zp_in: i32, stage: &StageConstants) -> Vec<u8> {
    let mut block = Vec::with_capacity(PARAM_BLOCK);
    for _ in 0..8 {
        block.extend_from_slice(&zp_in.to_le_bytes());
    }
    for _ in 0..8 {
        block.extend_from_slice(&stage.multiplier.to_le_bytes());
    }
    for _ in 0..4 {
        block.extend_from_slice(&stage.bias.to_le_bytes());
    }
    for _ in 0..4 {
        block.extend_from_slice(&u64::from(stage.shift).to_le_bytes());
    }
    block
}

/// Bytes of one `qnn.prelu` parameter block: the [`param_block`] of the
/// non-negative side, then the negative side's multiplier, bias and shift
/// (as there), then the sign every negative value is multiplied by (8 dwords
/// of 1, −1, or 0 for a zero slope).
pub(crate) const PRELU_BLOCK: usize = 256;
const NEGATIVE_AT: i32 = PARAM_BLOCK as i32;
const SIGN_AT: i32 = NEGATIVE_AT + 96;

/// The block of one slope value (see [`PRELU_BLOCK`]).
pub(crate) fn prelu_block(
    zp_in: i32,
    positive: &StageConstants,
    negative: &StageConstants,
    sign: i32,
) -> Vec<u8> {
    let mut block = param_block(zp_in, positive);
    block.extend_from_slice(&param_block(0, negative)[MULTIPLIER_AT as usize..]);
    for _ in 0..8 {
        block.extend_from_slice(&sign.to_le_bytes());
    }
    block
}

/// The parameter block of requantizing one per-tensor input to `output`.
pub(crate) fn per_tensor_block(
    input: &ByteQuant,
    output: &ByteQuant,
    multiplier: (i32, i32),
    rounding: Rounding,
) -> Vec<u8> {
    let (multiplier, shift) = multiplier;
    let stage = StageConstants::single_term(FixedPointMultiplier { multiplier, shift }, rounding, output);
    param_block(input.zero_point, &stage)
}

/// The stage registers of a requantizing row (per row from the block: ymm15
/// zp_in, ymm14 m, ymm13 bias, xmm7 the shift). Scratch ymm0–ymm2.
const REGS: StageRegisters = STAGE_REGISTERS;
const ZP_IN: AsmRegisterYmm = ymm15;
const MULTIPLIER: AsmRegisterYmm = ymm14;

/// The kernel that requantizes the elements `nest` walks from `INPUT0` to
/// `OUTPUT` with the parameter blocks of `AUX`, into `output`'s range (rows
/// along which either is not contiguous become rows of one element).
pub(crate) fn emit_requantize_rows(
    nest: &Nest,
    in_unsigned: bool,
    output: &ByteQuant,
    rounding: Rounding,
    strategy: String,
) -> Result<KernelCode, CodegenError> {
    emit_block_rows(nest, in_unsigned, output, "requantizing", strategy, &|a| {
        REGS.requantizer(rounding, MULTIPLIER).emit(a, ymm0, ymm1, ymm2)
    })
}

/// What [`emit_requantize_rows`] and [`emit_prelu_rows`] share: the check
/// that rows are contiguous with one parameter block each (`what` names the
/// kernel), the stage registers every row reads (zero, ones, the output's
/// bounds and zero point), per row the block's `zp_in` and first stage (`m`,
/// bias, shift), and per 8 lanes `v = q − zp_in` in ymm0 handed to `lanes`,
/// which leaves the lanes' results there.
fn emit_block_rows(
    nest: &Nest,
    in_unsigned: bool,
    output: &ByteQuant,
    what: &str,
    strategy: String,
    lanes: LaneCompute<'_>,
) -> Result<KernelCode, CodegenError> {
    let nest = &nest.with_contiguous_rows(&[INPUT0, OUTPUT]);
    if nest.elements() > 0
        && !(nest.is_contiguous(INPUT0) && nest.is_contiguous(OUTPUT) && nest.inner_stride(AUX) == 0)
    {
        return Err(CodegenError::new(
            CodegenErrorKind::Assembler,
            format!("{what} rows must be contiguous with one parameter block per row"),
        ));
    }
    let (low, high) =
        (i64::from(output.qmin - output.zero_point), i64::from(output.qmax - output.zero_point));
    let zp_out = i64::from(output.zero_point);
    let out_unsigned = output.element == crate::buffer::ElementType::U8;
    let block = STREAM_POINTERS[AUX];
    let input = LaneInput {
        pointer: STREAM_POINTERS[INPUT0],
        unsigned: in_unsigned,
        along: Along::Contiguous,
        lanes: ymm0,
    };
    emit_rows(
        nest,
        LANE_RUN,
        &|a| {
            a.vpxor(REGS.zero, REGS.zero, REGS.zero)?;
            broadcast_u64(a, REGS.one, 1)?;
            broadcast_u64(a, REGS.low, low as u64)?;
            broadcast_u64(a, REGS.high, high as u64)?;
            broadcast_u32(a, REGS.zp_out, zp_out as u32)?;
            Ok(())
        },
        &|a, _| {
            a.vmovdqu(ZP_IN, ymmword_ptr(block + ZP_IN_AT))?;
            a.vmovdqu(MULTIPLIER, ymmword_ptr(block + MULTIPLIER_AT))?;
            a.vmovdqu(REGS.bias, ymmword_ptr(block + BIAS_AT))?;
            a.vmovdqu(REGS.shift, xmmword_ptr(block + SHIFT_AT))?;
            emit_byte_lanes(a, &[input], out_unsigned, ymm1, &|a| {
                a.vpsubd(ymm0, ymm0, ZP_IN)?;
                lanes(a)
            })
        },
        strategy,
    )
}

/// The nest of a block row kernel over a tensor of `shape`: `input` to
/// `output`, contiguous, and the parameter blocks (`block_bytes` each) at
/// `table`, one per index of `axis` (one for every row without).
pub(crate) fn block_nest(
    shape: &[usize],
    [input, output, table]: [Place; 3],
    block_bytes: usize,
    axis: Option<usize>,
) -> Nest {
    let mut block_strides = vec![0i64; shape.len()];
    if let Some(axis) = axis {
        block_strides[axis] = block_bytes as i64;
    }
    Nest::new(shape)
        .with(INPUT0, Stream::contiguous(input, shape, 1))
        .with(OUTPUT, Stream::contiguous(output, shape, 1))
        .with(AUX, Stream { place: table, offset: 0, element_size: 0, strides: block_strides })
        .simplified()
}

/// The `qnn.prelu` kernel (quant-semantics §7.6) over the elements `nest`
/// walks from `INPUT0` to `OUTPUT`, with the [`PRELU_BLOCK`]s of `AUX` (one
/// per row): `v = q − zp_in` is requantized with the block's non-negative
/// stage, and `sign · v` with its negative stage read from memory; a blend
/// by the sign of `v` picks the result of each lane. Both stages clamp and
/// add `zp_out` as [`emit_requantize_rows`] does, so each lane is the
/// interpreter's.
pub(crate) fn emit_prelu_rows(
    nest: &Nest,
    in_unsigned: bool,
    output: &ByteQuant,
    rounding: Rounding,
    strategy: String,
) -> Result<KernelCode, CodegenError> {
    let block = STREAM_POINTERS[AUX];
    let positive = REGS.requantizer(rounding, MULTIPLIER);
    let negative_half = HalfConstants {
        multiplier: Vector::Mem(ymmword_ptr(block + NEGATIVE_AT)),
        rounding_bias: Vector::Mem(ymmword_ptr(block + (NEGATIVE_AT + 32))),
        shift: ShiftCount::Uniform(Count::Mem(xmmword_ptr(block + (NEGATIVE_AT + 64)))),
    };
    let negative = Requantizer { even: negative_half, odd: negative_half, ..positive };
    // ymm3 the negative side's value, ymm4 v (its sign picks the side).
    let (signed, picker) = (ymm3, ymm4);
    emit_block_rows(nest, in_unsigned, output, "prelu", strategy, &|a| {
        a.vmovdqa(picker, ymm0)?;
        a.vpsignd(signed, ymm0, ymmword_ptr(block + SIGN_AT))?;
        positive.emit(a, ymm0, ymm1, ymm2)?;
        negative.emit(a, signed, ymm1, ymm2)?;
        a.vblendvps(ymm0, ymm0, signed, picker)
    })
}
