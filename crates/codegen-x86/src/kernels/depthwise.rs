//! The direct kernel of depthwise convolutions (one input channel per group,
//! one output channel per input channel), where a GEMM would use one row of
//! its tiles: SIMD over output columns, no im2col.
//!
//! It reads the padded, centered i16 image of the pad kernel
//! ([`im2col`](super::im2col)), so borders need no tests. Every `vpmaddwd`
//! dword multiplies two image elements by two taps, in one of two layouts
//! ([`Pairing`]):
//!
//! - **Adjacent taps** (horizontal dilation 1, chosen by [`Pairing::choose`]):
//!   taps `(ky, 2p)` and `(ky, 2p + 1)` share a dword (the partner of a last
//!   odd column is 0), so one plain 16-element load serves two taps of 8
//!   outputs. With horizontal stride 2 the 8 outputs of a vector are
//!   consecutive (`x[2·ox + 2p], x[2·ox + 2p + 1]` are adjacent). With stride
//!   1 a unit of 16 columns is two vectors, even columns (loads at
//!   `ox0 + 2p`) and odd columns (at `ox0 + 2p + 1`), interleaved again when
//!   stored. The weight dwords stay in registers when there are at most
//!   [`WEIGHT_REGISTERS`] of them.
//! - **Single taps**: each tap with a 0 partner (stride 1: `vpmovzxwd` of
//!   8 elements; stride 2: 16 elements, the odd ones weighted 0), 8 columns
//!   per vector.
//!
//! ```text
//!   acc = init[c]                                        (the bias)
//!   for each pair of taps (unrolled): acc += vpmaddwd(x, [w_a, w_b])
//!   requantize acc in registers, pack (and interleave), store the columns
//! ```
//!
//! Products and sums are exact (|x − zp_x|, |w'| ≤ 255, a few taps), and the
//! i32 adds wrap like §6's `wrap32`. Work items are the output planes
//! `(n, c)`; a step along a row computes 4 accumulators (32 columns).
//! Columns past the row's end read image elements of the next row (or the
//! image's slack) and are never stored.

use super::epilogue::{
    channel_requantizer, load_low_bound, pack_8, store_bytes, CHANNEL_INIT, CHANNEL_RECORD,
};
use super::im2col::ImageShape;
use super::layer::{DepthwiseTaps, Layer};
use super::{append_aligned, emit_item_kernel, multiply_by, split_index, ITEM};
use crate::abi::Place;
use crate::buffer::ElementType;
use crate::error::CodegenError;
use crate::kernels::registers::xmm_of;
use crate::lower::Emit;
use iced_x86::code_asm::*;

/// Accumulators per step along a row.
const ACCUMULATORS: [AsmRegisterYmm; 4] = [ymm0, ymm1, ymm2, ymm3];
/// Registers that hold a channel's weight dwords for the whole plane.
const WEIGHT_REGISTERS: [AsmRegisterYmm; 6] = [ymm4, ymm5, ymm6, ymm7, ymm11, ymm12];
/// Output columns per step along a row.
const STEP_COLUMNS: usize = 32;

/// How taps share `vpmaddwd`'s i16 pairs (module doc).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Pairing {
    /// Horizontally adjacent taps share a dword.
    Adjacent,
    /// Each tap with a 0 partner.
    Single,
}

impl Pairing {
    /// Adjacent pairs where the horizontal dilation is 1 and `choice`
    /// allows them: by default where they take fewer instructions per row,
    /// which is always with stride 2, and with stride 1 when the row is long
    /// enough for 16-column units to pay for their second requantization (a
    /// 3×3 layer: from 9 output columns).
    pub fn choose(
        kernel: [usize; 2],
        output_width: usize,
        [stride_w, dilation_w]: [usize; 2],
        choice: DepthwiseTaps,
    ) -> Pairing {
        match choice {
            _ if dilation_w != 1 => return Pairing::Single,
            DepthwiseTaps::Single => return Pairing::Single,
            DepthwiseTaps::Adjacent => return Pairing::Adjacent,
            DepthwiseTaps::Cheapest if kernel[1] < 2 => return Pairing::Single,
            DepthwiseTaps::Cheapest if stride_w == 2 => return Pairing::Adjacent,
            DepthwiseTaps::Cheapest => {}
        }
        // Instructions per row: multiply-accumulates (a separate load for
        // memory weights), then requantizing each vector and packing and
        // storing each store's columns.
        const REQUANTIZE: usize = 11;
        const PACK_AND_STORE: usize = 5;
        let taps = kernel[0] * kernel[1];
        let pairs = kernel[0] * kernel[1].div_ceil(2);
        let per_pair = if pairs <= WEIGHT_REGISTERS.len() { 2 } else { 3 };
        let single = output_width.div_ceil(8) * (3 * taps + REQUANTIZE + PACK_AND_STORE);
        let adjacent = output_width.div_ceil(16) * (2 * pairs * per_pair + 2 * REQUANTIZE + PACK_AND_STORE);
        if adjacent < single {
            Pairing::Adjacent
        } else {
            Pairing::Single
        }
    }
}

/// The shape of one depthwise convolution.
#[derive(Copy, Clone, Debug)]
pub(crate) struct DepthwiseShape {
    /// Channels (in = out).
    pub channels: usize,
    /// Kernel height and width.
    pub kernel: [usize; 2],
    /// Output height and width.
    pub output: [usize; 2],
    /// `[stride_h, stride_w]`; `stride_w` is 1 or 2.
    pub stride: [usize; 2],
    /// `[dilation_h, dilation_w]`.
    pub dilation: [usize; 2],
    /// Elements per padded image row.
    pub padded_width: usize,
    /// Elements per padded plane.
    pub plane: usize,
    /// How taps share i16 pairs.
    pub pairing: Pairing,
}

impl DepthwiseShape {
    /// The shape of a depthwise convolution over `image`.
    pub fn new(
        channels: usize,
        kernel: [usize; 2],
        output: [usize; 2],
        stride: [usize; 2],
        dilation: [usize; 2],
        image: &ImageShape,
        choice: DepthwiseTaps,
    ) -> DepthwiseShape {
        DepthwiseShape {
            channels,
            kernel,
            output,
            stride,
            dilation,
            padded_width: image.padded_width(),
            plane: image.plane(),
            pairing: Pairing::choose(kernel, output[1], [stride[1], dilation[1]], choice),
        }
    }

    /// The weight dwords of one channel, in the order the kernel reads them:
    /// `(ky, kx)` for single taps, `(ky, pair)` for adjacent ones.
    fn weight_dwords(&self) -> usize {
        match self.pairing {
            Pairing::Single => self.kernel[0] * self.kernel[1],
            Pairing::Adjacent => self.kernel[0] * self.kernel[1].div_ceil(2),
        }
    }

    /// Output columns per accumulator-sized piece of a step: a 16-column unit
    /// (two accumulators) for adjacent pairs with stride 1, else 8 (one).
    fn columns_per_store(&self) -> usize {
        if self.interleaved() {
            16
        } else {
            8
        }
    }

    /// Even and odd columns in two vectors.
    fn interleaved(&self) -> bool {
        self.pairing == Pairing::Adjacent && self.stride[1] == 1
    }

    /// What the listing and the profile say about the kernel.
    pub fn describe(&self) -> String {
        let [kh, kw] = self.kernel;
        let how = match (self.pairing, self.stride[1]) {
            (Pairing::Single, _) => "one tap per i16 pair, 8 output columns per vector",
            (Pairing::Adjacent, 1) => {
                "adjacent taps per i16 pair, even and odd columns in two vectors (16 columns)"
            }
            (Pairing::Adjacent, _) => "adjacent taps per i16 pair, 8 output columns per vector",
        };
        format!("depthwise direct {kh}×{kw} stride {}: vpmaddwd exact, {how}", self.stride[1])
    }
}

const IMAGE: AsmRegister64 = r13;
const OUTPUT: AsmRegister64 = r14;
const BLOB: AsmRegister64 = r15;
const TAPS: AsmRegister64 = rbx;
const RECORD: AsmRegister64 = rdx;
const ROW_IN: AsmRegister64 = rsi;
const ROW_OUT: AsmRegister64 = rdi;
const ROWS_LEFT: AsmRegister64 = r11;
const COLUMN_IN: AsmRegister64 = r8;
const COLUMN_OUT: AsmRegister64 = r9;
const STEPS_LEFT: AsmRegister64 = rcx;
const STORE_SCRATCH: AsmRegister64 = rax;

/// The byte order that interleaves the packed even and odd columns
/// `[e0..e3, o0..o3, e4..e7, o4..o7]` back into column order.
const INTERLEAVE: [u8; 16] = [0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15];

/// The depthwise kernel reading the image at `image` and writing `output`;
/// its weights (one 32-byte vector of a dword per tap or pair of taps and
/// channel), `records` and `globals` go to rodata through `out`.
pub(crate) fn emit_depthwise(
    layer: &Layer,
    shape: &DepthwiseShape,
    image: Place,
    output: Place,
    records: &[u8],
    globals: &[u8],
    out: &mut Emit<'_>,
) -> Result<Vec<u8>, CodegenError> {
    let dwords = shape.weight_dwords();
    let mut blob = Vec::with_capacity(shape.channels * dwords * 32 + records.len() + globals.len() + 160);
    let [kh, kw] = shape.kernel;
    for c in 0..shape.channels {
        let row = layer.row(c);
        let word = |ky: usize, kx: usize| if kx < kw { row[ky * kw + kx] as i16 as u16 } else { 0 };
        for ky in 0..kh {
            let pairs: Vec<(u16, u16)> = match shape.pairing {
                Pairing::Single => (0..kw).map(|kx| (word(ky, kx), 0)).collect(),
                Pairing::Adjacent => {
                    (0..kw.div_ceil(2)).map(|p| (word(ky, 2 * p), word(ky, 2 * p + 1))).collect()
                }
            };
            for (low, high) in pairs {
                let dword = u32::from(low) | u32::from(high) << 16;
                for _ in 0..8 {
                    blob.extend_from_slice(&dword.to_le_bytes());
                }
            }
        }
    }
    let records_at = append_aligned(&mut blob, records);
    let globals_at = append_aligned(&mut blob, globals);
    let interleave_at = append_aligned(&mut blob, &INTERLEAVE);
    let rodata = out.rodata(&blob);
    let places = RodataPlaces { globals: globals_at, interleave: interleave_at };

    let [oh, ow] = shape.output;
    let row_step = shape.stride[0] * shape.padded_width * 2;
    let full_steps = ow / STEP_COLUMNS;
    let rest = ow % STEP_COLUMNS;
    let weights_in_registers = shape.pairing == Pairing::Adjacent && dwords <= WEIGHT_REGISTERS.len();
    emit_item_kernel(&[(IMAGE, image), (OUTPUT, output), (BLOB, rodata)], &mut |a| {
        // Item i is plane (n, c) of both the image and the output.
        split_index(a, ITEM, &[(shape.channels, r8)])?;
        multiply_by(a, ROW_IN, ITEM, shape.plane * 2)?;
        a.add(ROW_IN, IMAGE)?;
        multiply_by(a, ROW_OUT, ITEM, oh * ow)?;
        a.add(ROW_OUT, OUTPUT)?;
        multiply_by(a, TAPS, r8, dwords * 32)?;
        a.add(TAPS, BLOB)?;
        multiply_by(a, RECORD, r8, CHANNEL_RECORD)?;
        a.add(RECORD, BLOB)?;
        super::add_constant(a, RECORD, records_at, r10)?;
        load_low_bound(a, layer, ymm15, BLOB, globals_at)?;
        if weights_in_registers {
            for (d, &w) in WEIGHT_REGISTERS.iter().enumerate().take(dwords) {
                a.vmovdqu(w, ymmword_ptr(TAPS + 32 * d))?;
            }
        }
        let weights = Weights { in_registers: weights_in_registers };

        let mut row = a.create_label();
        a.mov(ROWS_LEFT, oh as u64)?;
        a.set_label(&mut row)?;
        a.mov(COLUMN_IN, ROW_IN)?;
        a.mov(COLUMN_OUT, ROW_OUT)?;
        let per_store = shape.columns_per_store();
        if full_steps > 0 {
            let mut step = a.create_label();
            a.mov(STEPS_LEFT, full_steps as u64)?;
            a.set_label(&mut step)?;
            emit_step(a, layer, shape, weights, places, &[per_store; 4][..STEP_COLUMNS / per_store])?;
            a.add(COLUMN_IN, (STEP_COLUMNS * shape.stride[1] * 2) as i32)?;
            a.add(COLUMN_OUT, STEP_COLUMNS as i32)?;
            a.dec(STEPS_LEFT)?;
            a.jnz(step)?;
        }
        if rest > 0 {
            let lens: Vec<usize> =
                (0..rest.div_ceil(per_store)).map(|u| (rest - per_store * u).min(per_store)).collect();
            emit_step(a, layer, shape, weights, places, &lens)?;
        }
        super::add_constant(a, ROW_IN, row_step, r10)?;
        super::add_constant(a, ROW_OUT, ow, r10)?;
        a.dec(ROWS_LEFT)?;
        a.jnz(row)?;
        Ok(())
    })
}

/// Where the channel's weight dwords are during a plane.
#[derive(Copy, Clone, Debug)]
struct Weights {
    /// In [`WEIGHT_REGISTERS`], else at TAPS.
    in_registers: bool,
}

/// Offsets in the kernel's rodata blob.
#[derive(Copy, Clone, Debug)]
struct RodataPlaces {
    globals: usize,
    interleave: usize,
}

/// One step along a row at COLUMN_IN / COLUMN_OUT: `store_lens.len()`
/// stores of up to 8 columns (one accumulator) or 16 (an even and an odd
/// one), store `u` writing `store_lens[u]` bytes.
fn emit_step(
    a: &mut CodeAssembler,
    layer: &Layer,
    shape: &DepthwiseShape,
    weights: Weights,
    places: RodataPlaces,
    store_lens: &[usize],
) -> Result<(), CodegenError> {
    let interleaved = shape.interleaved();
    let vectors = if interleaved { 2 * store_lens.len() } else { store_lens.len() };
    let (x, odd, scratch, low) = (ymm8, ymm9, ymm10, ymm15);
    for &acc in ACCUMULATORS.iter().take(vectors) {
        a.vpbroadcastd(acc, dword_ptr(RECORD + CHANNEL_INIT))?;
    }
    let [kh, kw] = shape.kernel;
    let [sw, dw] = [shape.stride[1], shape.dilation[1]];
    let row_of = |ky: usize| ky * shape.dilation[0] * shape.padded_width;
    // (dword index, element offset of vector 0's first load) per dword.
    let dwords: Vec<(usize, usize)> = match shape.pairing {
        Pairing::Single => (0..kh * kw).map(|t| (t, row_of(t / kw) + (t % kw) * dw)).collect(),
        Pairing::Adjacent => {
            let pairs = kw.div_ceil(2);
            (0..kh * pairs).map(|d| (d, row_of(d / pairs) + 2 * (d % pairs))).collect()
        }
    };
    for &(d, start) in &dwords {
        for (v, &acc) in ACCUMULATORS.iter().enumerate().take(vectors) {
            // The first column of vector v, in image elements from COLUMN_IN.
            let element = if interleaved { start + 16 * (v / 2) + v % 2 } else { start + 8 * v * sw };
            if shape.pairing == Pairing::Single && sw == 1 {
                a.vpmovzxwd(x, xmmword_ptr(COLUMN_IN + 2 * element))?;
                a.vpmaddwd(x, x, ymmword_ptr(TAPS + 32 * d))?;
            } else if weights.in_registers {
                a.vpmaddwd(x, WEIGHT_REGISTERS[d], ymmword_ptr(COLUMN_IN + 2 * element))?;
            } else {
                a.vmovdqu(x, ymmword_ptr(COLUMN_IN + 2 * element))?;
                a.vpmaddwd(x, x, ymmword_ptr(TAPS + 32 * d))?;
            }
            a.vpaddd(acc, acc, x)?;
        }
    }
    let requantizer = channel_requantizer(layer, RECORD, 0, BLOB, places.globals, low);
    let unsigned = layer.output.element == ElementType::U8;
    for (&acc, _) in ACCUMULATORS.iter().zip(0..vectors) {
        requantizer.emit(a, acc, odd, scratch)?;
    }
    for (u, &len) in store_lens.iter().enumerate() {
        if interleaved {
            let (even, odd_columns) = (ACCUMULATORS[2 * u], ACCUMULATORS[2 * u + 1]);
            // Per 128-bit lane [e0-3, o0-3 | e4-7, o4-7] as words, then bytes
            // [e0-3, o0-3, e4-7, o4-7], then in column order.
            a.vpackssdw(odd, even, odd_columns)?;
            a.vextracti128(xmm_of(scratch), odd, 1)?;
            if unsigned {
                a.vpackuswb(xmm_of(odd), xmm_of(odd), xmm_of(scratch))?;
            } else {
                a.vpacksswb(xmm_of(odd), xmm_of(odd), xmm_of(scratch))?;
            }
            a.vpshufb(xmm_of(odd), xmm_of(odd), xmmword_ptr(BLOB + places.interleave))?;
        } else {
            pack_8(a, ACCUMULATORS[u], xmm_of(odd), xmm_of(scratch), unsigned)?;
        }
        store_bytes(a, xmm_of(odd), COLUMN_OUT, shape.columns_per_store() * u, len, STORE_SCRATCH)?;
    }
    Ok(())
}
