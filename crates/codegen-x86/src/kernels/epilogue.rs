//! The fused output stage of the conv2d and dense kernels (§6 after the
//! accumulation): the per-channel constants they keep in rodata, the
//! [`Requantizer`] that reads them as memory operands, and the stores that
//! narrow requantized i32 lanes to the output bytes.
//!
//! Accumulators never go back to memory as i32: a kernel requantizes them in
//! registers right after its reduction loop, packs them to bytes and stores
//! exactly the bytes of its outputs.
//!
//! Two record layouts, both built at compile time:
//!
//! - [`channel_records`], one [`CHANNEL_RECORD`]-byte record per output
//!   channel, for kernels whose 8 lanes are 8 positions of one channel
//!   (conv GEMM, depthwise): the multiplier broadcast to 8 dwords, the
//!   rounding bias to 4 qwords, the shift as a 64-bit count (read by
//!   `vpsrlq ymm, ymm, m128`), and the accumulator's starting value.
//! - [`lane_records`], one [`LANE_RECORD`]-byte record per 8 consecutive
//!   channels, for kernels whose lanes are channels (dense): the starting
//!   values, and the multipliers, biases and shifts split into the even and
//!   odd lanes the way [`Requantizer`] processes them (shifts per lane, by
//!   `vpsrlvq`).
//!
//! [`globals`] holds what every channel shares: the clamp bounds relative to
//! `zp_out` (relu bounds included), `zp_out`, and the one-constants.

use super::layer::{ChannelRequant, Layer};
use super::requantize::{Count, HalfConstants, Narrowing, Requantizer, ShiftCount, Vector};
use crate::buffer::ElementType;
use iced_x86::code_asm::*;

/// Bytes per output channel in [`channel_records`].
pub(crate) const CHANNEL_RECORD: usize = 128;
const CHANNEL_MULTIPLIER: usize = 0;
const CHANNEL_BIAS: usize = 32;
const CHANNEL_SHIFT: usize = 64;
/// Offset of the accumulator's starting value (one i32) in a channel record.
pub(crate) const CHANNEL_INIT: usize = 80;
const CHANNEL_SHIFT_HIGH: usize = 96;

/// Bytes per 8 channels in [`lane_records`].
pub(crate) const LANE_RECORD: usize = 256;
/// Offset of the 8 accumulator starting values in a lane record.
pub(crate) const LANE_INIT: usize = 0;
const LANE_MULTIPLIER_EVEN: usize = 32;
const LANE_MULTIPLIER_ODD: usize = 64;
const LANE_BIAS_EVEN: usize = 96;
const LANE_BIAS_ODD: usize = 128;
const LANE_SHIFT_EVEN: usize = 160;
const LANE_SHIFT_ODD: usize = 192;
const LANE_SHIFT_HIGH: usize = 224;

/// Size of [`globals`].
pub(crate) const GLOBALS: usize = 224;
const GLOBAL_LOW: usize = 0;
const GLOBAL_HIGH: usize = 32;
const GLOBAL_ZERO_POINT: usize = 64;
const GLOBAL_ONES_QWORDS: usize = 96;
/// Offset of 16 i16 ones (the `vpmaddwd` that widens `vpmaddubsw` pairs).
pub(crate) const GLOBAL_ONES_WORDS: usize = 128;
const GLOBAL_LOW_DWORDS: usize = 160;
const GLOBAL_HIGH_DWORDS: usize = 192;

fn put_i32(out: &mut [u8], at: usize, v: i32) {
    out[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_i64(out: &mut [u8], at: usize, v: i64) {
    out[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// One record per channel `c` of `requant`, with `init[c]`.
pub(crate) fn channel_records(requant: &[ChannelRequant], init: &[i32]) -> Vec<u8> {
    let mut out = vec![0u8; requant.len() * CHANNEL_RECORD];
    for (c, (r, &start)) in requant.iter().zip(init).enumerate() {
        let base = c * CHANNEL_RECORD;
        for lane in 0..8 {
            put_i32(&mut out, base + CHANNEL_MULTIPLIER + 4 * lane, r.multiplier);
        }
        for lane in 0..4 {
            put_i64(&mut out, base + CHANNEL_BIAS + 8 * lane, r.rounding_bias);
        }
        put_i64(&mut out, base + CHANNEL_SHIFT, i64::from(r.shift));
        put_i32(&mut out, base + CHANNEL_INIT, start);
        put_i64(&mut out, base + CHANNEL_SHIFT_HIGH, i64::from(r.shift.saturating_sub(32)));
    }
    out
}

/// One record per 8 of `channels` channels (at least `requant.len()`; those
/// past `requant` are padding whose constants are harmless: multiplier 0,
/// shift 1), with `init[c]`.
pub(crate) fn lane_records(requant: &[ChannelRequant], init: &[i32], channels: usize) -> Vec<u8> {
    let blocks = channels.max(requant.len()).div_ceil(8);
    let mut out = vec![0u8; blocks * LANE_RECORD];
    let padding = ChannelRequant { multiplier: 0, shift: 1, rounding_bias: 1 };
    for block in 0..blocks {
        let base = block * LANE_RECORD;
        for lane in 0..8 {
            let c = block * 8 + lane;
            let r = requant.get(c).copied().unwrap_or(padding);
            put_i32(&mut out, base + LANE_INIT + 4 * lane, init.get(c).copied().unwrap_or(0));
            let (multiplier, bias, shift) = if lane % 2 == 0 {
                (LANE_MULTIPLIER_EVEN, LANE_BIAS_EVEN, LANE_SHIFT_EVEN)
            } else {
                (LANE_MULTIPLIER_ODD, LANE_BIAS_ODD, LANE_SHIFT_ODD)
            };
            // Lane 2j or 2j+1 is processed in qword j of its half.
            let qword = lane / 2;
            put_i32(&mut out, base + multiplier + 8 * qword, r.multiplier);
            put_i64(&mut out, base + bias + 8 * qword, r.rounding_bias);
            put_i64(&mut out, base + shift + 8 * qword, i64::from(r.shift));
            put_i32(&mut out, base + LANE_SHIFT_HIGH + 4 * lane, r.shift.saturating_sub(32) as i32);
        }
    }
    out
}

/// The constants shared by every channel of `layer`.
pub(crate) fn globals(layer: &Layer) -> Vec<u8> {
    let mut out = vec![0u8; GLOBALS];
    for lane in 0..4 {
        put_i64(&mut out, GLOBAL_LOW + 8 * lane, i64::from(layer.low));
        put_i64(&mut out, GLOBAL_HIGH + 8 * lane, i64::from(layer.high));
        put_i64(&mut out, GLOBAL_ONES_QWORDS + 8 * lane, 1);
    }
    for lane in 0..8 {
        put_i32(&mut out, GLOBAL_ZERO_POINT + 4 * lane, layer.output.zero_point);
        put_i32(&mut out, GLOBAL_LOW_DWORDS + 4 * lane, layer.low);
        put_i32(&mut out, GLOBAL_HIGH_DWORDS + 4 * lane, layer.high);
    }
    for word in 0..16 {
        out[GLOBAL_ONES_WORDS + 2 * word..GLOBAL_ONES_WORDS + 2 * word + 2]
            .copy_from_slice(&1i16.to_le_bytes());
    }
    out
}

/// Whether every channel of `layer` has a shift of at least 32, so its
/// requantizers narrow through the high dwords ([`Narrowing::HighDwords`]).
pub(crate) fn uses_high_dwords(layer: &Layer) -> bool {
    layer.requant.iter().all(|r| r.shift >= 32)
}

/// Loads the 64-bit low clamp bound into `low` when `layer` needs it in a
/// register ([`Narrowing::Wide`]); [`globals`] are at `base + globals`.
pub(crate) fn load_low_bound(
    a: &mut CodeAssembler,
    layer: &Layer,
    low: AsmRegisterYmm,
    base: AsmRegister64,
    globals: usize,
) -> Result<(), IcedError> {
    if uses_high_dwords(layer) {
        return Ok(());
    }
    a.vmovdqu(low, ymmword_ptr(base + (globals + GLOBAL_LOW)))
}

/// The requantizer of a kernel whose lanes are positions of the channel
/// whose record is at `record + disp`, with [`globals`] at `base + globals`;
/// `low` must hold the low bound ([`load_low_bound`]).
pub(crate) fn channel_requantizer(
    layer: &Layer,
    record: AsmRegister64,
    disp: usize,
    base: AsmRegister64,
    globals: usize,
    low: AsmRegisterYmm,
) -> Requantizer {
    let half = HalfConstants {
        multiplier: Vector::Mem(ymmword_ptr(record + (disp + CHANNEL_MULTIPLIER))),
        rounding_bias: Vector::Mem(ymmword_ptr(record + (disp + CHANNEL_BIAS))),
        shift: ShiftCount::Uniform(Count::Mem(xmmword_ptr(record + (disp + CHANNEL_SHIFT)))),
    };
    let high_shift = ShiftCount::Uniform(Count::Mem(xmmword_ptr(record + (disp + CHANNEL_SHIFT_HIGH))));
    shared_requantizer(layer, half, half, high_shift, base, globals, low)
}

/// The requantizer of a kernel whose 8 lanes are the 8 channels whose lane
/// record is at `record + disp`, with [`globals`] at `base + globals`.
pub(crate) fn lane_requantizer(
    layer: &Layer,
    record: AsmRegister64,
    disp: usize,
    base: AsmRegister64,
    globals: usize,
    low: AsmRegisterYmm,
) -> Requantizer {
    let at = |offset: usize| Vector::Mem(ymmword_ptr(record + (disp + offset)));
    let even = HalfConstants {
        multiplier: at(LANE_MULTIPLIER_EVEN),
        rounding_bias: at(LANE_BIAS_EVEN),
        shift: ShiftCount::PerLane(at(LANE_SHIFT_EVEN)),
    };
    let odd = HalfConstants {
        multiplier: at(LANE_MULTIPLIER_ODD),
        rounding_bias: at(LANE_BIAS_ODD),
        shift: ShiftCount::PerLane(at(LANE_SHIFT_ODD)),
    };
    let high_shift = ShiftCount::PerLane(at(LANE_SHIFT_HIGH));
    shared_requantizer(layer, even, odd, high_shift, base, globals, low)
}

fn shared_requantizer(
    layer: &Layer,
    even: HalfConstants,
    odd: HalfConstants,
    high_shift: ShiftCount,
    base: AsmRegister64,
    globals: usize,
    low: AsmRegisterYmm,
) -> Requantizer {
    let global = |offset: usize| Vector::Mem(ymmword_ptr(base + (globals + offset)));
    let narrowing = if uses_high_dwords(layer) {
        // The packs saturate to the byte range (pack_8, pack_16).
        let (storage_min, storage_max) =
            if layer.output.element == ElementType::U8 { (0, 255) } else { (-128, 127) };
        let zp = layer.output.zero_point;
        Narrowing::HighDwords {
            shift: high_shift,
            low: (layer.low + zp > storage_min).then(|| global(GLOBAL_LOW_DWORDS)),
            high: (layer.high + zp < storage_max).then(|| global(GLOBAL_HIGH_DWORDS)),
        }
    } else {
        Narrowing::Wide { low, high: global(GLOBAL_HIGH) }
    };
    Requantizer {
        even,
        odd,
        rounding: layer.rounding,
        ones: global(GLOBAL_ONES_QWORDS),
        narrowing,
        zero_point: global(GLOBAL_ZERO_POINT),
        zero: None,
    }
}

/// Narrows the 8 requantized i32 lanes of `x` (each within the output's
/// byte range, so the saturating packs are exact) to 8 bytes in the low
/// qword of `out` (the xmm of a ymm). Clobbers `scratch`.
pub(crate) fn pack_8(
    a: &mut CodeAssembler,
    x: AsmRegisterYmm,
    out: AsmRegisterXmm,
    scratch: AsmRegisterXmm,
    unsigned: bool,
) -> Result<(), IcedError> {
    a.vextracti128(scratch, x, 1)?;
    a.vpackssdw(out, crate::kernels::registers::xmm_of(x), scratch)?;
    if unsigned {
        a.vpackuswb(out, out, out)
    } else {
        a.vpacksswb(out, out, out)
    }
}

/// Narrows two vectors of 8 requantized lanes (`first` then `second`) to 16
/// bytes in order in `out`. Clobbers `out`'s ymm and `scratch`.
pub(crate) fn pack_16(
    a: &mut CodeAssembler,
    first: AsmRegisterYmm,
    second: AsmRegisterYmm,
    out: AsmRegisterYmm,
    scratch: AsmRegisterXmm,
    unsigned: bool,
) -> Result<(), IcedError> {
    // Per 128-bit lane: [first 0-3, second 0-3 | first 4-7, second 4-7];
    // vpermq 0xD8 puts the qwords in order 0, 2, 1, 3.
    a.vpackssdw(out, first, second)?;
    a.vpermq(out, out, 0xD8)?;
    a.vextracti128(scratch, out, 1)?;
    let out_x = crate::kernels::registers::xmm_of(out);
    if unsigned {
        a.vpackuswb(out_x, out_x, scratch)
    } else {
        a.vpacksswb(out_x, out_x, scratch)
    }
}

/// Stores the first `len` (1 to 16) bytes of `x` at `base + disp`, touching
/// no other byte. Clobbers `x` (when `len` is neither 8 nor 16) and `gpr`.
pub(crate) fn store_bytes(
    a: &mut CodeAssembler,
    x: AsmRegisterXmm,
    base: AsmRegister64,
    disp: usize,
    len: usize,
    gpr: AsmRegister64,
) -> Result<(), IcedError> {
    match len {
        16 => return a.vmovdqu(xmmword_ptr(base + disp), x),
        8 => return a.vmovq(qword_ptr(base + disp), x),
        _ => {}
    }
    let mut at = disp;
    let mut left = len;
    if left >= 8 {
        a.vmovq(qword_ptr(base + at), x)?;
        a.vpsrldq(x, x, 8)?;
        at += 8;
        left -= 8;
    }
    if left == 0 {
        return Ok(());
    }
    a.vmovq(gpr, x)?;
    let gpr32 = gpr32_of(gpr);
    if left >= 4 {
        a.mov(dword_ptr(base + at), gpr32)?;
        at += 4;
        left -= 4;
        if left > 0 {
            a.shr(gpr, 32)?;
        }
    }
    if left >= 2 {
        a.mov(word_ptr(base + at), gpr16_of(gpr))?;
        at += 2;
        left -= 2;
        if left > 0 {
            a.shr(gpr32, 16)?;
        }
    }
    if left == 1 {
        a.mov(byte_ptr(base + at), gpr8_of(gpr))?;
    }
    Ok(())
}

/// The 32-bit register of a 64-bit one.
pub(crate) fn gpr32_of(r: AsmRegister64) -> AsmRegister32 {
    const PAIRS: [(AsmRegister64, AsmRegister32); 16] = [
        (rax, eax),
        (rbx, ebx),
        (rcx, ecx),
        (rdx, edx),
        (rsi, esi),
        (rdi, edi),
        (rbp, ebp),
        (rsp, esp),
        (r8, r8d),
        (r9, r9d),
        (r10, r10d),
        (r11, r11d),
        (r12, r12d),
        (r13, r13d),
        (r14, r14d),
        (r15, r15d),
    ];
    PAIRS.iter().find(|(q, _)| *q == r).map_or(eax, |(_, d)| *d)
}

fn gpr16_of(r: AsmRegister64) -> AsmRegister16 {
    const PAIRS: [(AsmRegister64, AsmRegister16); 16] = [
        (rax, ax),
        (rbx, bx),
        (rcx, cx),
        (rdx, dx),
        (rsi, si),
        (rdi, di),
        (rbp, bp),
        (rsp, sp),
        (r8, r8w),
        (r9, r9w),
        (r10, r10w),
        (r11, r11w),
        (r12, r12w),
        (r13, r13w),
        (r14, r14w),
        (r15, r15w),
    ];
    PAIRS.iter().find(|(q, _)| *q == r).map_or(ax, |(_, w)| *w)
}

fn gpr8_of(r: AsmRegister64) -> AsmRegister8 {
    const PAIRS: [(AsmRegister64, AsmRegister8); 16] = [
        (rax, al),
        (rbx, bl),
        (rcx, cl),
        (rdx, dl),
        (rsi, sil),
        (rdi, dil),
        (rbp, bpl),
        (rsp, spl),
        (r8, r8b),
        (r9, r9b),
        (r10, r10b),
        (r11, r11b),
        (r12, r12b),
        (r13, r13b),
        (r14, r14b),
        (r15, r15b),
    ];
    PAIRS.iter().find(|(q, _)| *q == r).map_or(al, |(_, b)| *b)
}
