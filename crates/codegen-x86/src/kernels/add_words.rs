//! `qnn.add` of two contiguous byte operands on i16 pairs: 16 elements per
//! step instead of [`binary`](crate::lower::binary)'s 8 lanes of i64 products.
//!
//! §7.1's sum `X = v_a·m_a + v_b·m_b` (`v = q − zp`, |v| ≤ 255, `m < 2^31`)
//! is rounded once by the shift `s = 31 + n`. Splitting each multiplier as
//! `m = h·2^16 + l` with `l ∈ [−2^15, 2^15)` and `h ≤ 2^15 − 1` gives
//! `X = 2^16·H + L` with `H = v_a·h_a + v_b·h_b` and `L = v_a·l_a + v_b·l_b`,
//! each one `vpmaddwd` of the pairs `(v_a, v_b)` and below 2^24 in
//! magnitude. For `16 ≤ s ≤ 31`, with the rounding bias `b = 2^(s−1)`:
//!
//! ```text
//!   floor((X + b) / 2^s) = (H + ((L + b) >> 16)) >> (s − 16)
//! ```
//!
//! exactly in i32 (`L + b < 2^31`). That is half_up; half_away_from_zero
//! takes one from the bias when `X < 0`, whose sign is that of
//! `H + (L >> 16)`; half_to_even subtracts the result's low bit on a tie,
//! when the low `s` bits of `X + b` (the low 16 of `L + b`, the low `s − 16`
//! of the sum above before its shift) are all zero. The result saturates to
//! i16, adds `zp_out` with saturation and is clamped to the storage range:
//! a saturated value is beyond every byte bound on its side, so the clamp
//! is the same.
//!
//! **Proven per op.** [`WordAdd::plan`] evaluates the kernel's arithmetic
//! ([`WordAdd::emulate`]) on every pair of input bytes and compares it with
//! the interpreter's function (`fixed_point::requantize_sum`); any
//! difference, a shift outside `16..=31` or an `h` past i16 leaves the op
//! to the general kernel.

use super::rows::{INPUT0, INPUT1, OUTPUT, ROW_LENGTH, STREAM_POINTERS};
use crate::buffer::ElementType;
use crate::error::CodegenError;
use crate::kernels::quant_params::ByteQuant;
use crate::kernels::registers::broadcast_u32;
use iced_x86::code_asm::*;
use qopt_dialect_qnn::fixed_point::{requantize_sum, saturate, Rounding};

/// The constants of one add in the i16-pair form.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct WordAdd {
    zero_points: (i32, i32),
    /// `(h_a, h_b)` and `(l_a, l_b)`.
    high: (i16, i16),
    low: (i16, i16),
    /// `s − 16`.
    shift: u32,
    rounding: Rounding,
    unsigned: (bool, bool, bool),
    zp_out: i32,
    bounds: (i32, i32),
}

impl WordAdd {
    /// The i16-pair form of the add `a + b → out` with §7.1's `(m_a, m_b, n)`,
    /// if its arithmetic is exact for every pair of input bytes.
    pub fn plan(
        (a, b, out): (&ByteQuant, &ByteQuant, &ByteQuant),
        (m_a, m_b, n): (i32, i32, i32),
        rounding: Rounding,
    ) -> Option<WordAdd> {
        let s = 31 + n;
        if !(16..=31).contains(&s) {
            return None;
        }
        let split = |m: i32| -> Option<(i16, i16)> {
            let low = ((i64::from(m) + (1 << 15)).rem_euclid(1 << 16) - (1 << 15)) as i16;
            let high = i16::try_from((i64::from(m) - i64::from(low)) >> 16).ok()?;
            Some((high, low))
        };
        let ((h_a, l_a), (h_b, l_b)) = (split(m_a)?, split(m_b)?);
        let plan = WordAdd {
            zero_points: (a.zero_point, b.zero_point),
            high: (h_a, h_b),
            low: (l_a, l_b),
            shift: (s - 16) as u32,
            rounding,
            unsigned: (
                a.element == ElementType::U8,
                b.element == ElementType::U8,
                out.element == ElementType::U8,
            ),
            zp_out: out.zero_point,
            bounds: (out.qmin, out.qmax),
        };
        let bytes = |unsigned: bool| if unsigned { 0..=255 } else { -128..=127 };
        for x in bytes(plan.unsigned.0) {
            for y in bytes(plan.unsigned.1) {
                let (va, vb) = (i64::from(x - a.zero_point), i64::from(y - b.zero_point));
                let sum = requantize_sum(va, m_a, vb, m_b, n, rounding);
                let want =
                    saturate(i128::from(sum) + i128::from(out.zero_point), out.qmin.into(), out.qmax.into());
                if plan.emulate(x, y) != want {
                    return None;
                }
            }
        }
        Some(plan)
    }

    fn bias(&self) -> i32 {
        1 << (self.shift + 15)
    }

    /// The kernel's result for the stored bytes `x` and `y`, instruction by
    /// instruction (wrapping i32 and i16 lanes).
    fn emulate(&self, x: i32, y: i32) -> i64 {
        let va = (x - self.zero_points.0) as i16;
        let vb = (y - self.zero_points.1) as i16;
        let madd =
            |(p, q): (i16, i16)| (i32::from(va) * i32::from(p)).wrapping_add(i32::from(vb) * i32::from(q));
        let (high, low) = (madd(self.high), madd(self.low));
        let mut z = low.wrapping_add(self.bias());
        if self.rounding == Rounding::HalfAwayFromZero {
            z = z.wrapping_add(high.wrapping_add(low >> 16) >> 31);
        }
        let summed = high.wrapping_add(z >> 16);
        let mut q = summed >> self.shift;
        if self.rounding == Rounding::HalfToEven {
            let tie = z & 0xFFFF == 0 && summed & ((1 << self.shift) - 1) == 0;
            q -= i32::from(tie) & (q & 1);
        }
        let q = q.clamp(i32::from(i16::MIN), i32::from(i16::MAX));
        let q = (q + self.zp_out).clamp(i32::from(i16::MIN), i32::from(i16::MAX));
        i64::from(q.clamp(self.bounds.0, self.bounds.1))
    }
}

// Constants (per call) and scratch registers of the row body.
const ZP_A: AsmRegisterYmm = ymm15;
const ZP_B: AsmRegisterYmm = ymm14;
const HIGH: AsmRegisterYmm = ymm13;
const LOW: AsmRegisterYmm = ymm12;
const BIAS: AsmRegisterYmm = ymm11;
const ZP_OUT: AsmRegisterYmm = ymm10;
const OUT_LOW: AsmRegisterYmm = ymm9;
const OUT_HIGH: AsmRegisterYmm = ymm8;
const LOW_16_BITS: AsmRegisterYmm = ymm7;
const LOW_SHIFT_BITS: AsmRegisterYmm = ymm6;
const ONES: AsmRegisterYmm = ymm5;
const ZERO: AsmRegisterYmm = ymm4;

/// Loads the per-call constants.
pub(crate) fn emit_constants(a: &mut CodeAssembler, plan: &WordAdd) -> Result<(), CodegenError> {
    let words = |lo: i32, hi: i32| (lo as u16 as u32) | ((hi as u16 as u32) << 16);
    broadcast_u32(a, ZP_A, words(plan.zero_points.0, plan.zero_points.0))?;
    broadcast_u32(a, ZP_B, words(plan.zero_points.1, plan.zero_points.1))?;
    broadcast_u32(a, HIGH, words(plan.high.0.into(), plan.high.1.into()))?;
    broadcast_u32(a, LOW, words(plan.low.0.into(), plan.low.1.into()))?;
    broadcast_u32(a, BIAS, plan.bias() as u32)?;
    broadcast_u32(a, ZP_OUT, words(plan.zp_out, plan.zp_out))?;
    broadcast_u32(a, OUT_LOW, words(plan.bounds.0, plan.bounds.0))?;
    broadcast_u32(a, OUT_HIGH, words(plan.bounds.1, plan.bounds.1))?;
    if plan.rounding == Rounding::HalfToEven {
        broadcast_u32(a, LOW_16_BITS, 0xFFFF)?;
        broadcast_u32(a, LOW_SHIFT_BITS, (1u32 << plan.shift) - 1)?;
        broadcast_u32(a, ONES, 1)?;
        a.vpxor(ZERO, ZERO, ZERO)?;
    }
    Ok(())
}

/// The row body: 16 elements per step, then one at a time (lane 0 of the
/// same instructions).
pub(crate) fn emit_row(a: &mut CodeAssembler, plan: &WordAdd) -> Result<(), CodegenError> {
    let [pa, pb, out] = [STREAM_POINTERS[INPUT0], STREAM_POINTERS[INPUT1], STREAM_POINTERS[OUTPUT]];
    let (mut wide, mut narrow, mut tail, mut done) =
        (a.create_label(), a.create_label(), a.create_label(), a.create_label());
    a.cmp(ROW_LENGTH, 16)?;
    a.jb(tail)?;
    a.set_label(&mut wide)?;
    for (pointer, unsigned, words) in [(pa, plan.unsigned.0, ymm0), (pb, plan.unsigned.1, ymm1)] {
        if unsigned {
            a.vpmovzxbw(words, xmmword_ptr(pointer))?;
        } else {
            a.vpmovsxbw(words, xmmword_ptr(pointer))?;
        }
    }
    emit_sum(a, plan)?;
    a.vmovdqu(xmmword_ptr(out), xmm0)?;
    for pointer in [pa, pb, out] {
        a.add(pointer, 16)?;
    }
    a.sub(ROW_LENGTH, 16)?;
    a.cmp(ROW_LENGTH, 16)?;
    a.jae(wide)?;
    a.set_label(&mut tail)?;
    a.test(ROW_LENGTH, ROW_LENGTH)?;
    a.jz(done)?;
    a.set_label(&mut narrow)?;
    for (pointer, unsigned, words) in [(pa, plan.unsigned.0, xmm0), (pb, plan.unsigned.1, xmm1)] {
        if unsigned {
            a.movzx(eax, byte_ptr(pointer))?;
        } else {
            a.movsx(eax, byte_ptr(pointer))?;
        }
        a.vmovd(words, eax)?;
    }
    emit_sum(a, plan)?;
    a.vmovd(eax, xmm0)?;
    a.mov(byte_ptr(out), al)?;
    for pointer in [pa, pb, out] {
        a.inc(pointer)?;
    }
    a.dec(ROW_LENGTH)?;
    a.jnz(narrow)?;
    a.set_label(&mut done)?;
    a.nop()?;
    Ok(())
}

/// 16 stored elements of each operand as words in ymm0 and ymm1 → their 16
/// output bytes in xmm0. Clobbers ymm0–ymm3.
fn emit_sum(a: &mut CodeAssembler, plan: &WordAdd) -> Result<(), IcedError> {
    a.vpsubw(ymm0, ymm0, ZP_A)?;
    a.vpsubw(ymm1, ymm1, ZP_B)?;
    // Pairs (v_a, v_b): elements 0–3 and 8–11 in ymm2, 4–7 and 12–15 in ymm3.
    a.vpunpcklwd(ymm2, ymm0, ymm1)?;
    a.vpunpckhwd(ymm3, ymm0, ymm1)?;
    for pairs in [ymm2, ymm3] {
        a.vpmaddwd(ymm0, pairs, HIGH)?;
        a.vpmaddwd(ymm1, pairs, LOW)?;
        if plan.rounding == Rounding::HalfAwayFromZero {
            a.vpsrad(pairs, ymm1, 16)?;
            a.vpaddd(pairs, pairs, ymm0)?;
            a.vpsrad(pairs, pairs, 31)?; // −1 where X < 0
            a.vpaddd(ymm1, ymm1, pairs)?;
        }
        a.vpaddd(ymm1, ymm1, BIAS)?; // L + b
        a.vpsrad(pairs, ymm1, 16)?;
        a.vpaddd(ymm0, ymm0, pairs)?; // H + ((L + b) >> 16)
        if plan.rounding == Rounding::HalfToEven {
            a.vpand(pairs, ymm1, LOW_16_BITS)?;
            a.vpcmpeqd(pairs, pairs, ZERO)?;
            a.vpand(ymm1, ymm0, LOW_SHIFT_BITS)?;
            a.vpcmpeqd(ymm1, ymm1, ZERO)?;
            a.vpand(pairs, pairs, ymm1)?; // the tie mask
        }
        a.vpsrad(ymm0, ymm0, plan.shift as i32)?;
        if plan.rounding == Rounding::HalfToEven {
            a.vpand(ymm1, ymm0, ONES)?;
            a.vpand(ymm1, ymm1, pairs)?;
            a.vpsubd(ymm0, ymm0, ymm1)?;
        }
        a.vmovdqa(pairs, ymm0)?;
    }
    a.vpackssdw(ymm0, ymm2, ymm3)?; // elements 0–15 in order
    a.vpaddsw(ymm0, ymm0, ZP_OUT)?;
    a.vpmaxsw(ymm0, ymm0, OUT_LOW)?;
    a.vpminsw(ymm0, ymm0, OUT_HIGH)?;
    a.vextracti128(xmm1, ymm0, 1)?;
    if plan.unsigned.2 {
        a.vpackuswb(xmm0, xmm0, xmm1)
    } else {
        a.vpacksswb(xmm0, xmm0, xmm1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quant(element: ElementType, scale: f64, zero_point: i32) -> ByteQuant {
        let (qmin, qmax) = if element == ElementType::U8 { (0, 255) } else { (-128, 127) };
        ByteQuant { element, scale, zero_point, qmin, qmax }
    }

    #[test]
    fn residual_adds_take_the_word_form_and_extreme_shifts_do_not() {
        let (a, b) = (quant(ElementType::U8, 0.031, 3), quant(ElementType::U8, 0.027, 0));
        let out = quant(ElementType::U8, 0.05, 0);
        for rounding in [Rounding::HalfAwayFromZero, Rounding::HalfToEven, Rounding::HalfUp] {
            let (m_a, m_b, n) =
                qopt_dialect_qnn::fixed_point::shared_multipliers(0.031 / 0.05, 0.027 / 0.05).unwrap();
            assert!(WordAdd::plan((&a, &b, &out), (m_a, m_b, n), rounding).is_some(), "{rounding:?}");
        }
        // s = 31 + n outside 16..=31.
        assert_eq!(WordAdd::plan((&a, &b, &out), (1 << 30, 1 << 30, 1), Rounding::HalfUp), None);
        assert_eq!(WordAdd::plan((&a, &b, &out), (1 << 30, 1 << 30, -16), Rounding::HalfUp), None);
        // h_a = 2^15 does not fit i16.
        assert_eq!(WordAdd::plan((&a, &b, &out), (i32::MAX, 1 << 30, -1), Rounding::HalfUp), None);
    }
}
