//! The one requantizer: `clamp(R(v × m, s, mode), low, high) + zp_out` of
//! `docs/quant-semantics.md` §4.3–§5 (the rounding shift with the §12
//! branch-free forms), emitted by every integer kernel, with the constants
//! wherever the kernel keeps them.
//!
//! - [`StageConstants`]: one rescaling's multiplier, shift, rounding bias,
//!   bounds and zero point, from [`kernel_multiplier_and_shift`]'s plan;
//! - on registers (the row kernels: `qnn.requantize`, `qnn.concat`,
//!   `qnn.add`, `qnn.mul`, the average pools): [`emit_round_shift_clamp`],
//!   [`emit_multiply_round_clamp`], [`emit_clamp_offset`], and the row
//!   kernel [`emit_requantize_rows`] with its parameter blocks;
//! - on memory constants (the conv and dense epilogues, whose registers all
//!   hold accumulators): [`Requantizer`], with a cheaper narrowing when every
//!   shift is at least 32.
//!
//! **On registers.** The fixed-point rescaling every integer kernel shares: the rounding shift
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

//!
//! **On memory: [`Requantizer`].** The vector requantization of i32
//! accumulators in the epilogues of conv2d and dense.
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
//! [`kernel_multiplier_and_shift`](crate::kernels::quant_params::kernel_multiplier_and_shift),
//! whose plan keeps `1 ≤ s ≤ 62` so the 64-bit arithmetic never wraps (the
//! argument is in `docs/codegen-x86.md` §9.5).

use crate::abi::KernelCode;
use crate::error::{CodegenError, CodegenErrorKind};
use crate::kernels::lanes::{emit_byte_lanes, Along, LaneInput};
use crate::kernels::quant_params::{kernel_multiplier_and_shift, ByteQuant, FixedPointMultiplier};
use crate::kernels::registers::broadcast_u64;
use crate::kernels::rows::{emit_rows, Nest, AUX, INPUT0, OUTPUT, STREAM_POINTERS};
use crate::target::CpuFeatures;
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

/// The features the byte kernels of this directory emit.
pub(crate) const AVX2: CpuFeatures = CpuFeatures { avx: true, avx2: true, ..CpuFeatures::NONE };

/// Elements per work item of the byte kernels: rows longer than this are
/// split into blocks.
pub(crate) const LANE_RUN: usize = 4096;

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

/// The registers of a requantizing row: per call ymm8 zero, ymm12 ones,
/// ymm11 / ymm10 the bounds, ymm9 zp_out; per row (from the block) ymm15
/// zp_in, ymm14 m, ymm13 bias, xmm7 the shift. Scratch ymm0–ymm2.
const REGS: StageRegisters = StageRegisters {
    zero: ymm8,
    one: ymm12,
    bias: ymm13,
    shift: xmm7,
    low: ymm11,
    high: ymm10,
    zp_out: ymm9,
};
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
    let nest = &nest.with_contiguous_rows(&[INPUT0, OUTPUT]);
    if nest.elements() > 0
        && !(nest.is_contiguous(INPUT0) && nest.is_contiguous(OUTPUT) && nest.inner_stride(AUX) == 0)
    {
        return Err(CodegenError::new(
            CodegenErrorKind::Assembler,
            "requantizing rows must be contiguous with one parameter block per row",
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
            broadcast_u64(a, REGS.zp_out, zp_out as u64)?;
            Ok(())
        },
        &|a, _| {
            a.vmovdqu(ZP_IN, ymmword_ptr(block + ZP_IN_AT))?;
            a.vmovdqu(MULTIPLIER, ymmword_ptr(block + MULTIPLIER_AT))?;
            a.vmovdqu(REGS.bias, ymmword_ptr(block + BIAS_AT))?;
            a.vmovdqu(REGS.shift, xmmword_ptr(block + SHIFT_AT))?;
            emit_byte_lanes(a, &[input], out_unsigned, ymm1, &|a| {
                a.vpsubd(ymm0, ymm0, ZP_IN)?;
                emit_multiply_round_clamp(a, rounding, &REGS, MULTIPLIER, ymm0, [ymm1, ymm2])
            })
        },
        strategy,
    )
}
