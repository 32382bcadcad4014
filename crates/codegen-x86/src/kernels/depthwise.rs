//! The direct kernel of depthwise convolutions (one input channel per group,
//! one output channel per input channel), where a GEMM would use one row of
//! its tiles: SIMD over output columns, no im2col.
//!
//! It reads the padded, centered i16 image of the pad kernel
//! ([`im2col`](super::im2col)), so borders need no tests, and computes 8
//! output columns per ymm, 4 ymm per step along a row:
//!
//! ```text
//!   acc[u] = init[c]                                    (the bias)
//!   for each tap (ky, kx):                               (unrolled)
//!     x = 8 columns of row oy·sh + ky·dh, from column (ox + 8u)·sw + kx·dw
//!         stride 1: vpmovzxwd (8 i16 → dwords [x, 0])
//!         stride 2: 16 i16 as dwords [x_even, x_odd]
//!     acc[u] += vpmaddwd(x, [w'(tap), 0] in every dword)  = x · w'
//!   requantize acc[u] in registers, pack, store 8 bytes (fewer at the row end)
//! ```
//!
//! Products and sums are exact (|x − zp_x|, |w'| ≤ 255, a few taps), and the
//! i32 adds wrap like §6's `wrap32`. Work items are the output planes
//! `(n, c)`. Columns past the row's end in the last vector read image
//! elements of the next row (or the image's slack) and are never stored.

use super::epilogue::{
    channel_requantizer, load_low_bound, pack_8, store_bytes, CHANNEL_INIT, CHANNEL_RECORD,
};
use super::im2col::ImageShape;
use super::layer::Layer;
use super::{emit_item_kernel, multiply_by, split_index, ITEM};
use crate::abi::{Place, BUFFER_ALIGN};
use crate::buffer::ElementType;
use crate::emit::xmm_of;
use crate::error::CodegenError;
use crate::lower::Emit;
use iced_x86::code_asm::*;

/// Vectors of 8 output columns per step.
const VECTORS: usize = 4;
const ACCUMULATORS: [AsmRegisterYmm; VECTORS] = [ymm0, ymm1, ymm2, ymm3];

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
    ) -> DepthwiseShape {
        DepthwiseShape {
            channels,
            kernel,
            output,
            stride,
            dilation,
            padded_width: image.padded_width(),
            plane: image.plane(),
        }
    }

    fn taps(&self) -> usize {
        self.kernel[0] * self.kernel[1]
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

/// The depthwise kernel reading the image at `image` and writing `output`;
/// its weights (one 32-byte vector `[w', 0]` per tap and channel),
/// `records` and `globals` go to rodata through `out`.
pub(crate) fn emit_depthwise(
    layer: &Layer,
    shape: &DepthwiseShape,
    image: Place,
    output: Place,
    records: &[u8],
    globals: &[u8],
    out: &mut Emit<'_>,
) -> Result<Vec<u8>, CodegenError> {
    let taps = shape.taps();
    let mut blob = Vec::with_capacity(shape.channels * taps * 32 + records.len() + globals.len() + 128);
    for c in 0..shape.channels {
        for &w in layer.row(c) {
            let word = u32::from(w as i16 as u16);
            for _ in 0..8 {
                blob.extend_from_slice(&word.to_le_bytes());
            }
        }
    }
    let records_at = blob.len().next_multiple_of(BUFFER_ALIGN);
    blob.resize(records_at, 0);
    blob.extend_from_slice(records);
    let globals_at = blob.len().next_multiple_of(BUFFER_ALIGN);
    blob.resize(globals_at, 0);
    blob.extend_from_slice(globals);
    let rodata = out.rodata(&blob);

    let [oh, ow] = shape.output;
    let row_step = shape.stride[0] * shape.padded_width * 2;
    let group_columns = 8 * VECTORS;
    let full_steps = ow / group_columns;
    let rest = ow % group_columns;
    emit_item_kernel(&[(IMAGE, image), (OUTPUT, output), (BLOB, rodata)], &mut |a| {
        // Item i is plane (n, c) of both the image and the output.
        split_index(a, ITEM, &[(shape.channels, r8)])?;
        multiply_by(a, ROW_IN, ITEM, shape.plane * 2)?;
        a.add(ROW_IN, IMAGE)?;
        multiply_by(a, ROW_OUT, ITEM, oh * ow)?;
        a.add(ROW_OUT, OUTPUT)?;
        multiply_by(a, TAPS, r8, taps * 32)?;
        a.add(TAPS, BLOB)?;
        multiply_by(a, RECORD, r8, CHANNEL_RECORD)?;
        a.add(RECORD, BLOB)?;
        super::add_constant(a, RECORD, records_at, r10)?;
        load_low_bound(a, layer, ymm15, BLOB, globals_at)?;

        let mut row = a.create_label();
        a.mov(ROWS_LEFT, oh as u64)?;
        a.set_label(&mut row)?;
        a.mov(COLUMN_IN, ROW_IN)?;
        a.mov(COLUMN_OUT, ROW_OUT)?;
        if full_steps > 0 {
            let mut step = a.create_label();
            a.mov(STEPS_LEFT, full_steps as u64)?;
            a.set_label(&mut step)?;
            emit_step(a, layer, shape, globals_at, &[8; VECTORS])?;
            a.add(COLUMN_IN, (group_columns * shape.stride[1] * 2) as i32)?;
            a.add(COLUMN_OUT, group_columns as i32)?;
            a.dec(STEPS_LEFT)?;
            a.jnz(step)?;
        }
        if rest > 0 {
            let lens: Vec<usize> = (0..rest.div_ceil(8)).map(|u| (rest - 8 * u).min(8)).collect();
            emit_step(a, layer, shape, globals_at, &lens)?;
        }
        super::add_constant(a, ROW_IN, row_step, r10)?;
        super::add_constant(a, ROW_OUT, ow, r10)?;
        a.dec(ROWS_LEFT)?;
        a.jnz(row)?;
        Ok(())
    })
}

/// One step along a row: `store_lens.len()` vectors of 8 columns at
/// COLUMN_IN / COLUMN_OUT, vector `u` storing `store_lens[u]` bytes.
fn emit_step(
    a: &mut CodeAssembler,
    layer: &Layer,
    shape: &DepthwiseShape,
    globals_at: usize,
    store_lens: &[usize],
) -> Result<(), CodegenError> {
    let vectors = store_lens.len();
    let (x, odd, scratch, low) = (ymm8, ymm9, ymm10, ymm15);
    for &acc in ACCUMULATORS.iter().take(vectors) {
        a.vpbroadcastd(acc, dword_ptr(RECORD + CHANNEL_INIT))?;
    }
    let [kh, kw] = shape.kernel;
    for ky in 0..kh {
        for kx in 0..kw {
            let tap = ky * kw + kx;
            let start = ky * shape.dilation[0] * shape.padded_width + kx * shape.dilation[1];
            for (u, &acc) in ACCUMULATORS.iter().enumerate().take(vectors) {
                let element = start + 8 * u * shape.stride[1];
                if shape.stride[1] == 1 {
                    a.vpmovzxwd(x, xmmword_ptr(COLUMN_IN + 2 * element))?;
                } else {
                    a.vmovdqu(x, ymmword_ptr(COLUMN_IN + 2 * element))?;
                }
                a.vpmaddwd(x, x, ymmword_ptr(TAPS + 32 * tap))?;
                a.vpaddd(acc, acc, x)?;
            }
        }
    }
    let requantizer = channel_requantizer(layer, RECORD, 0, BLOB, globals_at, low);
    let unsigned = layer.output.element == ElementType::U8;
    for (u, &acc) in ACCUMULATORS.iter().enumerate().take(vectors) {
        requantizer.emit(a, acc, odd, scratch)?;
        pack_8(a, acc, xmm_of(odd), xmm_of(scratch), unsigned)?;
        store_bytes(a, xmm_of(odd), COLUMN_OUT, 8 * u, store_lens[u], STORE_SCRATCH)?;
    }
    Ok(())
}
