//! The activation kernels that run before a conv GEMM or a depthwise
//! kernel, both writing only the op's scratch space:
//!
//! 1. **Pad** ([`emit_pad`], one work item per input plane `(n, c)`): the
//!    input, centered and padded, as an image of `Hp × Wp` elements per
//!    plane (`Hp = H + pad_top + pad_bottom`, `Wp = W + pad_left +
//!    pad_right`). For the exact scheme an element is the i16 `x − zp_x`
//!    and padding is 0; for the byte schemes it is the u8 `a = x` (or
//!    `x + 128` for i8 inputs) and padding is `zp_a`. Either way a padded
//!    tap contributes nothing (§6: "a padded position reads `zp_x`"), so no
//!    later kernel tests bounds. [`IMAGE_SLACK`] bytes after the last plane
//!    let vector loads and dword gathers run past it harmlessly.
//! 2. **Pack** ([`emit_pack`], one work item per GEMM panel, numbered like
//!    the GEMM's items): for a block of output positions, the im2col columns
//!    in the GEMM's layout (`[unit][position][4 bytes]`: i16 pairs or byte
//!    quads of consecutive taps). A tap `k = (ci, ky, kx)` of output position
//!    `(oy, ox)` reads image element
//!    `base(oy, ox) + koff(k)`, `base = oy·sh·Wp + ox·sw`,
//!    `koff = ci·Hp·Wp + ky·dh·Wp + kx·dw`; both tables are computed at compile
//!    time into rodata, with each block's way of reading ([`BlockRead`]):
//!    a block whose positions lie on one output row (`base` steps by
//!    `sw`) takes one vector load per tap (for `sw = 2`, two loads keeping
//!    the even elements); a block that crosses one row end takes two loads
//!    per tap blended at the crossing; anything else (blocks over three or
//!    more rows, strides above 2) is gathered with `vpgatherdd`. Taps past
//!    the end of the reduction read a real tap (their weights are 0), and
//!    positions past the last output read image elements whose outputs are
//!    never stored, so every read is inside the image and its slack.

use super::gemm::GemmShape;
use super::{add_multiple, emit_item_kernel, multiply_by, split_index, ITEM};
use crate::abi::Place;
use crate::buffer::ElementType;
use crate::error::CodegenError;
use crate::kernels::registers::{broadcast_u32, broadcast_u64};
use iced_x86::code_asm::*;

/// Bytes after the last plane of an image that kernels may read (never
/// use): a block's loads reach at most 2 × 16 elements (64 bytes) past its
/// last real element, dword gathers 3 bytes past their element.
pub(crate) const IMAGE_SLACK: usize = 128;

/// How the input is laid out in the padded image.
#[derive(Copy, Clone, Debug)]
pub(crate) struct ImageShape {
    /// Images `N`.
    pub batches: usize,
    /// Input channels `C`.
    pub channels: usize,
    /// Input height `H`.
    pub height: usize,
    /// Input width `W`.
    pub width: usize,
    /// `[top, left, bottom, right]`.
    pub pad: [usize; 4],
    /// Bytes (u8 `a`) rather than centered i16.
    pub bytes: bool,
    /// The input's buffer type.
    pub input: ElementType,
    /// `zp_x`.
    pub zero_point: i32,
    /// `zp_a` (the byte schemes' padding value).
    pub byte_zero_point: i32,
}

impl ImageShape {
    /// `Hp`.
    pub fn padded_height(&self) -> usize {
        self.height + self.pad[0] + self.pad[2]
    }

    /// `Wp`.
    pub fn padded_width(&self) -> usize {
        self.width + self.pad[1] + self.pad[3]
    }

    /// Elements per plane.
    pub fn plane(&self) -> usize {
        self.padded_height() * self.padded_width()
    }

    /// Bytes per element.
    pub fn element_size(&self) -> usize {
        if self.bytes {
            1
        } else {
            2
        }
    }

    /// Scratch bytes of the image, slack included, 64-byte aligned.
    pub fn scratch_bytes(&self) -> usize {
        (self.batches * self.channels * self.plane() * self.element_size() + IMAGE_SLACK)
            .next_multiple_of(crate::abi::BUFFER_ALIGN)
    }
}

const PAD_INPUT: AsmRegister64 = r13;
const PAD_IMAGE: AsmRegister64 = r14;

/// The pad kernel reading the input at `input` and writing the image at
/// `image`; one work item per plane.
pub(crate) fn emit_pad(shape: &ImageShape, input: Place, image: Place) -> Result<Vec<u8>, CodegenError> {
    let (h, w) = (shape.height, shape.width);
    let wp = shape.padded_width();
    let e = shape.element_size();
    let (top, left, bottom, right) = (shape.pad[0], shape.pad[1], shape.pad[2], shape.pad[3]);
    // Without left and right padding the rows are contiguous on both sides:
    // the plane converts as one row of H·W elements.
    let (rows, row_len) = if left == 0 && right == 0 && h * w > 0 { (1, h * w) } else { (h, w) };
    emit_item_kernel(&[(PAD_INPUT, input), (PAD_IMAGE, image)], &mut |a| {
        // ymm15: the centering; r11: the sign bit of every byte; ymm14 and
        // rax (set last): the padding value in every element.
        load_centering(a, shape)?;
        if shape.bytes {
            a.mov(r11, u64::from_le_bytes([0x80; 8]))?;
        }
        let fill_pattern: u64 =
            if shape.bytes { u64::from_le_bytes([shape.byte_zero_point as u8; 8]) } else { 0 };
        broadcast_u64(a, ymm14, fill_pattern)?;
        multiply_by(a, rsi, ITEM, h * w)?;
        a.add(rsi, PAD_INPUT)?;
        multiply_by(a, rdi, ITEM, shape.plane() * e)?;
        a.add(rdi, PAD_IMAGE)?;
        emit_fill(a, rdi, 0, top * wp * e)?;
        super::add_constant(a, rdi, top * wp * e, r8)?;
        if rows > 0 {
            let mut row = a.create_label();
            a.mov(rcx, rows as u64)?;
            a.set_label(&mut row)?;
            emit_fill(a, rdi, 0, left * e)?;
            emit_convert_row(a, shape, row_len, left * e)?;
            emit_fill(a, rdi, (left + row_len) * e, right * e)?;
            super::add_constant(a, rsi, row_len, r8)?;
            super::add_constant(a, rdi, (left + row_len + right) * e, r8)?;
            a.dec(rcx)?;
            a.jnz(row)?;
        }
        emit_fill(a, rdi, 0, bottom * wp * e)?;
        Ok(())
    })
}

/// `ymm15` = what centering applies to the input: `zp_x` in every i16
/// (subtracted, words), or the sign bit of every byte (flipped for i8
/// inputs, bytes). Clobbers eax.
fn load_centering(a: &mut CodeAssembler, image: &ImageShape) -> Result<(), IcedError> {
    let pattern =
        if image.bytes { 0x8080_8080 } else { u32::from(image.zero_point as i16 as u16) * 0x1_0001 };
    broadcast_u32(a, ymm15, pattern)
}

/// Widens the input bytes in the low half of `reg`'s xmm to i16 (all 16
/// of them into the ymm when `wide`, else the low 8 into the xmm) and
/// subtracts `zp_x` (ymm15, [`load_centering`]): the words scheme's image
/// elements.
fn center_words(
    a: &mut CodeAssembler,
    reg: AsmRegisterYmm,
    wide: bool,
    signed: bool,
) -> Result<(), IcedError> {
    let x = crate::kernels::registers::xmm_of(reg);
    match (wide, signed) {
        (true, true) => a.vpmovsxbw(reg, x)?,
        (true, false) => a.vpmovzxbw(reg, x)?,
        (false, true) => a.vpmovsxbw(x, x)?,
        (false, false) => a.vpmovzxbw(x, x)?,
    }
    if wide {
        a.vpsubw(reg, reg, ymm15)
    } else {
        a.vpsubw(x, x, xmm15)
    }
}

/// Writes `len` bytes of the padding pattern (ymm14 / rax) at `base + disp`.
/// Clobbers r8, r9.
fn emit_fill(
    a: &mut CodeAssembler,
    base: AsmRegister64,
    disp: usize,
    len: usize,
) -> Result<(), CodegenError> {
    let chunks = len / 32;
    if chunks > 8 {
        let mut again = a.create_label();
        a.lea(r8, qword_ptr(base + disp))?;
        a.mov(r9, chunks as u64)?;
        a.set_label(&mut again)?;
        a.vmovdqu(ymmword_ptr(r8), ymm14)?;
        a.add(r8, 32)?;
        a.dec(r9)?;
        a.jnz(again)?;
    } else {
        for j in 0..chunks {
            a.vmovdqu(ymmword_ptr(base + (disp + 32 * j)), ymm14)?;
        }
    }
    let done = chunks * 32;
    if len >= 32 && done < len {
        // One overlapping store covers the rest.
        a.vmovdqu(ymmword_ptr(base + (disp + len - 32)), ymm14)?;
        return Ok(());
    }
    let mut at = done;
    for piece in [16usize, 8, 4, 2, 1] {
        if len - at >= piece {
            match piece {
                16 => a.vmovdqu(xmmword_ptr(base + (disp + at)), xmm14)?,
                8 => a.mov(qword_ptr(base + (disp + at)), rax)?,
                4 => a.mov(dword_ptr(base + (disp + at)), eax)?,
                2 => a.mov(word_ptr(base + (disp + at)), ax)?,
                _ => a.mov(byte_ptr(base + (disp + at)), al)?,
            }
            at += piece;
        }
    }
    Ok(())
}

/// Converts the `len` input bytes at rsi into image elements at
/// `rdi + disp`: whole vector chunks, then one more ending at the row's end
/// (it overlaps the previous one and writes the same values again), so no
/// load reads outside the row. Clobbers r8, r9, r10, rdx, ymm0 (r11 holds
/// the sign bit of every byte).
fn emit_convert_row(
    a: &mut CodeAssembler,
    shape: &ImageShape,
    len: usize,
    disp: usize,
) -> Result<(), CodegenError> {
    let e = shape.element_size();
    let unsigned = shape.input == ElementType::U8;
    // The largest chunk of inputs that fits the row.
    let chunk = [32, 16, 8, 4].into_iter().find(|&c| c <= len && (shape.bytes || c <= 16));
    let Some(chunk) = chunk else {
        for j in 0..len {
            if unsigned {
                a.movzx(r8d, byte_ptr(rsi + j))?;
            } else {
                a.movsx(r8d, byte_ptr(rsi + j))?;
            }
            if shape.bytes {
                if !unsigned {
                    a.xor(r8d, 0x80)?;
                }
                a.mov(byte_ptr(rdi + (disp + j)), r8b)?;
            } else {
                a.sub(r8d, shape.zero_point)?;
                a.mov(word_ptr(rdi + (disp + 2 * j)), r8w)?;
            }
        }
        return Ok(());
    };
    // One chunk of inputs at `src + s`, written at `dst + d`.
    let convert = |a: &mut CodeAssembler, src: AsmRegister64, s: usize, dst: AsmRegister64, d: usize| {
        if !shape.bytes {
            let signed = !unsigned;
            match chunk {
                16 => {
                    a.vmovdqu(xmm0, xmmword_ptr(src + s))?;
                    center_words(a, ymm0, true, signed)?;
                    a.vmovdqu(ymmword_ptr(dst + d), ymm0)
                }
                8 => {
                    a.vmovq(xmm0, qword_ptr(src + s))?;
                    center_words(a, ymm0, false, signed)?;
                    a.vmovdqu(xmmword_ptr(dst + d), xmm0)
                }
                _ => {
                    a.vmovd(xmm0, dword_ptr(src + s))?;
                    center_words(a, ymm0, false, signed)?;
                    a.vmovq(qword_ptr(dst + d), xmm0)
                }
            }
        } else {
            match chunk {
                32 => {
                    a.vmovdqu(ymm0, ymmword_ptr(src + s))?;
                    if !unsigned {
                        a.vpxor(ymm0, ymm0, ymm15)?;
                    }
                    a.vmovdqu(ymmword_ptr(dst + d), ymm0)
                }
                16 => {
                    a.vmovdqu(xmm0, xmmword_ptr(src + s))?;
                    if !unsigned {
                        a.vpxor(xmm0, xmm0, xmm15)?;
                    }
                    a.vmovdqu(xmmword_ptr(dst + d), xmm0)
                }
                8 => {
                    a.mov(r8, qword_ptr(src + s))?;
                    if !unsigned {
                        a.xor(r8, r11)?;
                    }
                    a.mov(qword_ptr(dst + d), r8)
                }
                _ => {
                    a.mov(r8d, dword_ptr(src + s))?;
                    if !unsigned {
                        a.xor(r8d, r11d)?;
                    }
                    a.mov(dword_ptr(dst + d), r8d)
                }
            }
        }
    };
    let chunks = len / chunk;
    if chunks > 8 {
        let mut again = a.create_label();
        a.mov(r9, rsi)?;
        a.lea(r10, qword_ptr(rdi + disp))?;
        a.mov(rdx, chunks as u64)?;
        a.set_label(&mut again)?;
        convert(a, r9, 0, r10, 0)?;
        a.add(r9, chunk as i32)?;
        a.add(r10, (chunk * e) as i32)?;
        a.dec(rdx)?;
        a.jnz(again)?;
    } else {
        for j in 0..chunks {
            convert(a, rsi, chunk * j, rdi, disp + chunk * j * e)?;
        }
    }
    if !len.is_multiple_of(chunk) {
        let start = len - chunk;
        convert(a, rsi, start, rdi, disp + start * e)?;
    }
    Ok(())
}

/// The window of a convolution, for the packing tables.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Window {
    /// Kernel height and width.
    pub kernel: [usize; 2],
    /// `[stride_h, stride_w]`.
    pub stride: [usize; 2],
    /// `[dilation_h, dilation_w]`.
    pub dilation: [usize; 2],
    /// Output height and width.
    pub output: [usize; 2],
    /// Input channels per group.
    pub group_inputs: usize,
}

/// How the pack kernel reads one block of positions, decided at compile
/// time from the block's `base(p)` (stored as the record's flag).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
enum BlockRead {
    /// Arbitrary positions: `vpgatherdd` at `base(p) + koff`.
    Gather = 0,
    /// `base(p) = base0 + sw·j` for every valid position `j`: one vector
    /// load per tap (two, keeping the even elements, for `sw = 2`).
    OneRun = 1,
    /// Two such runs (the block crosses one output row): the loads from
    /// `base0` and from `base1 − sw·len1` are blended at lane `len1`.
    TwoRuns = 2,
}

/// Offsets inside a block record: `base(p)` of each position (i32), then
/// the flag, `base0` and the second run's load base, then the blend mask
/// (0xFF in the bytes of lanes taken from the second load).
fn block_record_size(vectors: usize) -> usize {
    32 * vectors + 64
}
fn record_flag(vectors: usize) -> usize {
    32 * vectors
}
fn record_mask(vectors: usize) -> usize {
    32 * vectors + 32
}

/// How block `bases` (`None` past the last position) is read with
/// horizontal stride `sw`, and the two load bases and the run split.
fn classify(bases: &[Option<usize>], sw: usize) -> (BlockRead, usize, usize, usize) {
    let valid: Vec<usize> = bases.iter().map_while(|b| *b).collect();
    let first = valid.first().copied().unwrap_or(0);
    if sw > 2 || valid.is_empty() {
        return (
            if valid.is_empty() { BlockRead::OneRun } else { BlockRead::Gather },
            first,
            first,
            valid.len(),
        );
    }
    let run_from = |start: usize| {
        (start..valid.len()).take_while(|&j| valid[j] == valid[start] + sw * (j - start)).count()
    };
    let len1 = run_from(0);
    if len1 == valid.len() {
        return (BlockRead::OneRun, first, first, len1);
    }
    let second = valid[len1];
    if run_from(len1) == valid.len() - len1 && second >= sw * len1 {
        return (BlockRead::TwoRuns, first, second - sw * len1, len1);
    }
    (BlockRead::Gather, first, first, len1)
}

/// The pack kernel's rodata: the `koff` table (one i32 per tap of each
/// unit) at 0, then one block record per block at the returned offset.
pub(crate) fn pack_tables(image: &ImageShape, window: &Window, gemm: &GemmShape) -> (Vec<u8>, usize) {
    let wp = image.padded_width();
    let plane = image.plane();
    let [kh, kw] = window.kernel;
    let taps = window.group_inputs * kh * kw;
    let koff = |k: usize| -> i64 {
        let (ci, ky, kx) = (k / (kh * kw), (k / kw) % kh, k % kw);
        (ci * plane + ky * window.dilation[0] * wp + kx * window.dilation[1]) as i64
    };
    let per_unit = gemm.accumulation.taps_per_unit();
    let mut out = Vec::new();
    for unit in 0..gemm.units {
        for t in 0..per_unit {
            let k = (unit * per_unit + t).min(taps.saturating_sub(1));
            let value = if taps == 0 { 0 } else { koff(k) };
            out.extend_from_slice(&(value as i32).to_le_bytes());
        }
    }
    let blocks_at = out.len().next_multiple_of(64);
    out.resize(blocks_at, 0);
    let width = gemm.block_width();
    let ow = window.output[1];
    let element = image.element_size();
    for block in 0..gemm.blocks() {
        let mut record = vec![0u8; block_record_size(gemm.vectors)];
        let bases: Vec<Option<usize>> = (0..width)
            .map(|j| {
                let p = block * width + j;
                (p < gemm.positions).then(|| (p / ow) * window.stride[0] * wp + (p % ow) * window.stride[1])
            })
            .collect();
        for (j, b) in bases.iter().enumerate() {
            record[4 * j..4 * j + 4].copy_from_slice(&(b.unwrap_or(0) as i32).to_le_bytes());
        }
        let (read, base0, second, len1) = classify(&bases, window.stride[1]);
        let flag = record_flag(gemm.vectors);
        record[flag..flag + 4].copy_from_slice(&(read as u32).to_le_bytes());
        record[flag + 4..flag + 8].copy_from_slice(&(base0 as i32).to_le_bytes());
        record[flag + 8..flag + 12].copy_from_slice(&(second as i32).to_le_bytes());
        if read == BlockRead::TwoRuns {
            let mask = record_mask(gemm.vectors);
            for byte in len1 * element..width * element {
                record[mask + byte] = 0xFF;
            }
        }
        out.extend_from_slice(&record);
    }
    (out, blocks_at)
}

/// Where the pack kernel finds its buffers.
#[derive(Copy, Clone, Debug)]
pub(crate) struct PackPlaces {
    /// The padded image (scratch), or the input itself when the pack reads
    /// it directly ([`reads_input_directly`]).
    pub image: Place,
    /// The first panel (scratch).
    pub panels: Place,
    /// The tables of [`pack_tables`].
    pub tables: Place,
    /// Offset of the block records in the tables.
    pub blocks_at: usize,
}

const PACK_IMAGE: AsmRegister64 = r13;
const PACK_PANELS: AsmRegister64 = r14;
const PACK_TABLES: AsmRegister64 = r15;
/// The image of the item's group: gathers index from here.
const GROUP_IMAGE: AsmRegister64 = rbx;
/// The block record.
const RECORD: AsmRegister64 = r11;
/// Load bases of the runs.
const RUN_A: AsmRegister64 = rsi;
const RUN_B: AsmRegister64 = rdx;
const PANEL_CURSOR: AsmRegister64 = rdi;
const KOFF_CURSOR: AsmRegister64 = r10;
const UNITS_LEFT: AsmRegister64 = rcx;

/// What one tap's load looks like for a kernel.
#[derive(Copy, Clone)]
struct TapLoad {
    bytes: bool,
    vectors: usize,
    stride: usize,
    two_runs: bool,
}

/// The pack kernel: one work item per GEMM panel.
pub(crate) fn emit_pack(
    image: &ImageShape,
    window: &Window,
    gemm: &GemmShape,
    places: PackPlaces,
) -> Result<Vec<u8>, CodegenError> {
    let direct = reads_input_directly(image, window, gemm);
    // Bytes per element where the kernel reads: the input's bytes directly.
    let e = if direct { 1 } else { image.element_size() };
    let plane_bytes = image.plane() * e;
    let record = block_record_size(gemm.vectors);
    let flag = record_flag(gemm.vectors);
    let per_unit = gemm.accumulation.taps_per_unit();
    let unit_bytes = gemm.block_width() * 4;
    let stride = window.stride[1];
    emit_item_kernel(
        &[(PACK_IMAGE, places.image), (PACK_PANELS, places.panels), (PACK_TABLES, places.tables)],
        &mut |a| {
            split_index(a, ITEM, &[(gemm.blocks(), r8), (gemm.groups, r9)])?;
            a.mov(GROUP_IMAGE, PACK_IMAGE)?;
            add_multiple(a, GROUP_IMAGE, rax, image.channels * plane_bytes, r10)?;
            add_multiple(a, GROUP_IMAGE, r9, window.group_inputs * plane_bytes, r10)?;
            multiply_by(a, PANEL_CURSOR, ITEM, gemm.panel_bytes())?;
            a.add(PANEL_CURSOR, PACK_PANELS)?;
            multiply_by(a, RECORD, r8, record)?;
            a.add(RECORD, PACK_TABLES)?;
            super::add_constant(a, RECORD, places.blocks_at, r10)?;
            if gemm.units == 0 {
                return Ok(());
            }
            if direct {
                return emit_direct_blocks(a, image, gemm, unit_bytes);
            }
            // Constants: ymm15 keeps the low element of each pair (stride 2).
            if stride == 2 {
                let keep_low: u32 = if image.bytes { 0x00FF_00FF } else { 0x0000_FFFF };
                a.mov(eax, keep_low)?;
                a.vmovd(xmm15, eax)?;
                a.vpbroadcastd(ymm15, xmm15)?;
            }
            let mut done = a.create_label();
            let mut gather = a.create_label();
            let mut one_run = a.create_label();
            let runs_possible = stride <= 2;
            if runs_possible {
                a.movsxd(rax, dword_ptr(RECORD + (flag + 4)))?;
                a.movsxd(r8, dword_ptr(RECORD + (flag + 8)))?;
                a.lea(RUN_A, qword_ptr(GROUP_IMAGE + rax * e as u32))?;
                a.lea(RUN_B, qword_ptr(GROUP_IMAGE + r8 * e as u32))?;
                a.mov(eax, dword_ptr(RECORD + flag))?;
                a.cmp(eax, BlockRead::OneRun as i32)?;
                a.je(one_run)?;
                a.cmp(eax, BlockRead::Gather as i32)?;
                a.je(gather)?;
                // Two runs: the blend mask in ymm14.
                a.vmovdqu(ymm14, ymmword_ptr(RECORD + record_mask(gemm.vectors)))?;
                let load = TapLoad { bytes: image.bytes, vectors: gemm.vectors, stride, two_runs: true };
                emit_unit_loop(a, gemm.units, per_unit, unit_bytes, &|a| emit_run_unit(a, load))?;
                a.jmp(done)?;
                a.set_label(&mut one_run)?;
                let load = TapLoad { two_runs: false, ..load };
                emit_unit_loop(a, gemm.units, per_unit, unit_bytes, &|a| emit_run_unit(a, load))?;
                a.jmp(done)?;
            }
            a.set_label(&mut gather)?;
            for v in 0..gemm.vectors {
                a.vmovdqu([ymm8, ymm9][v], ymmword_ptr(RECORD + 32 * v))?;
            }
            if image.bytes {
                a.mov(eax, 0xFFu32)?;
                a.vmovd(xmm15, eax)?;
                a.vpbroadcastd(ymm15, xmm15)?;
            }
            emit_unit_loop(a, gemm.units, per_unit, unit_bytes, &|a| {
                emit_gather_unit(a, image.bytes, gemm.vectors)
            })?;
            // The item loop's increment follows and carries the label.
            a.set_label(&mut done)?;
            Ok(())
        },
    )
}

/// Whether the pack kernel reads the input itself instead of a padded
/// image, centering as it loads: a 1×1 window with unit strides and no
/// padding reads every block of positions as one contiguous run of the
/// input plane (`base(p) = p`), and planes of at least one block's width let
/// the last, partial block load the run that ends at the plane's end
/// instead of reading past it (the input has no slack).
pub(crate) fn reads_input_directly(image: &ImageShape, window: &Window, gemm: &GemmShape) -> bool {
    window.kernel == [1, 1]
        && window.stride == [1, 1]
        && image.pad == [0; 4]
        && gemm.positions == image.height * image.width
        && gemm.positions >= gemm.block_width()
}

/// The unit loops of a directly read input (r8 holds the item's block,
/// RECORD its record): one for whole blocks, one for a last partial block.
fn emit_direct_blocks(
    a: &mut CodeAssembler,
    image: &ImageShape,
    gemm: &GemmShape,
    unit_bytes: usize,
) -> Result<(), CodegenError> {
    let per_unit = gemm.accumulation.taps_per_unit();
    let signed = image.input == ElementType::I8;
    load_centering(a, image)?;
    let load = DirectLoad { bytes: image.bytes, signed, vectors: gemm.vectors, tail: None };
    let last = gemm.positions % gemm.block_width();
    let mut done = a.create_label();
    if last > 0 {
        let mut whole = a.create_label();
        a.cmp(r8, (gemm.blocks() - 1) as i32)?;
        a.jne(whole)?;
        a.movsxd(rax, dword_ptr(RECORD + (record_flag(gemm.vectors) + 4)))?;
        a.lea(RUN_A, qword_ptr(GROUP_IMAGE + rax))?;
        let tail = DirectLoad { tail: Some(gemm.block_width() - last), ..load };
        emit_unit_loop(a, gemm.units, per_unit, unit_bytes, &|a| emit_direct_unit(a, tail))?;
        a.jmp(done)?;
        a.set_label(&mut whole)?;
    }
    a.movsxd(rax, dword_ptr(RECORD + (record_flag(gemm.vectors) + 4)))?;
    a.lea(RUN_A, qword_ptr(GROUP_IMAGE + rax))?;
    emit_unit_loop(a, gemm.units, per_unit, unit_bytes, &|a| emit_direct_unit(a, load))?;
    a.set_label(&mut done)?;
    Ok(())
}

/// How a directly read block loads one tap's input bytes.
#[derive(Copy, Clone)]
struct DirectLoad {
    bytes: bool,
    signed: bool,
    vectors: usize,
    /// For a last block `missing` positions short of a whole one: the load
    /// ends at the run's end and shifts its bytes down by `missing`.
    tail: Option<usize>,
}

/// One unit of a directly read block: each tap's bytes at RUN_A + koff,
/// centered like the pad kernel's image (i16 `x − zp_x`, or bytes `x` with
/// the sign bit flipped for i8), then interleaved into the panel.
fn emit_direct_unit(a: &mut CodeAssembler, load: DirectLoad) -> Result<(), CodegenError> {
    let taps = if load.bytes { 4 } else { 2 };
    let width = 8 * load.vectors;
    for t in 0..taps {
        a.movsxd(rax, dword_ptr(KOFF_CURSOR + 4 * t))?;
        let (dst, dst_x) = (TAP_YMM[t], TAP_XMM[t]);
        let shift = load.tail.unwrap_or(0);
        let at = ptr(RUN_A + rax - shift as i32);
        if width == 16 {
            a.vmovdqu(dst_x, at)?;
        } else {
            a.vmovq(dst_x, at)?;
        }
        if shift > 0 {
            a.vpsrldq(dst_x, dst_x, shift as i32)?;
        }
        if load.bytes {
            if load.signed {
                a.vpxor(dst_x, dst_x, xmm15)?;
            }
        } else {
            center_words(a, dst, width == 16, load.signed)?;
        }
    }
    emit_interleave(a, load.bytes, load.vectors)
}

/// A loop over the units: `body` packs one unit (koffs at KOFF_CURSOR,
/// output at PANEL_CURSOR), then both cursors advance.
fn emit_unit_loop(
    a: &mut CodeAssembler,
    units: usize,
    taps: usize,
    unit_bytes: usize,
    body: &dyn Fn(&mut CodeAssembler) -> Result<(), CodegenError>,
) -> Result<(), CodegenError> {
    let mut again = a.create_label();
    a.mov(KOFF_CURSOR, PACK_TABLES)?;
    a.mov(UNITS_LEFT, units as u64)?;
    a.set_label(&mut again)?;
    body(a)?;
    a.add(KOFF_CURSOR, (taps * 4) as i32)?;
    a.add(PANEL_CURSOR, unit_bytes as i32)?;
    a.dec(UNITS_LEFT)?;
    a.jnz(again)?;
    Ok(())
}

/// The tap registers (8 or 16 positions each, before interleaving).
const TAP_YMM: [AsmRegisterYmm; 4] = [ymm0, ymm1, ymm2, ymm3];
const TAP_XMM: [AsmRegisterXmm; 4] = [xmm0, xmm1, xmm2, xmm3];

/// One unit of positions in runs: each tap's elements loaded (and blended,
/// for two runs) into the tap registers, then interleaved into the panel.
fn emit_run_unit(a: &mut CodeAssembler, load: TapLoad) -> Result<(), CodegenError> {
    let taps = if load.bytes { 4 } else { 2 };
    for t in 0..taps {
        a.movsxd(rax, dword_ptr(KOFF_CURSOR + 4 * t))?;
        emit_tap_load(a, load, RUN_A, TAP_YMM[t])?;
        if load.two_runs {
            emit_tap_load(a, load, RUN_B, ymm6)?;
            if wide_taps(load) {
                a.vpblendvb(TAP_YMM[t], TAP_YMM[t], ymm6, ymm14)?;
            } else {
                a.vpblendvb(TAP_XMM[t], TAP_XMM[t], xmm6, xmm14)?;
            }
        }
    }
    emit_interleave(a, load.bytes, load.vectors)
}

/// Whether a tap's elements fill a ymm (16 i16) rather than an xmm.
fn wide_taps(load: TapLoad) -> bool {
    !load.bytes && load.vectors == 2
}

/// Loads the block's elements of the tap whose koff is in rax from the run
/// starting at `base` into `dst` (its xmm when the elements fit one).
/// Clobbers ymm4, ymm5.
fn emit_tap_load(
    a: &mut CodeAssembler,
    load: TapLoad,
    base: AsmRegister64,
    dst: AsmRegisterYmm,
) -> Result<(), CodegenError> {
    let at = |disp: usize| -> AsmMemoryOperand {
        if load.bytes {
            ptr(base + rax + disp)
        } else {
            ptr(base + rax * 2 + disp)
        }
    };
    let dst_x = crate::kernels::registers::xmm_of(dst);
    let (wide, unit_stride) = (load.vectors == 2, load.stride == 1);
    match (load.bytes, wide, unit_stride) {
        (false, true, true) => a.vmovdqu(dst, at(0))?,
        (false, false, true) | (true, true, true) => a.vmovdqu(dst_x, at(0))?,
        (true, false, true) => a.vmovq(dst_x, at(0))?,
        (false, true, false) => {
            // 32 elements; keep the even ones: mask, pack, reorder lanes.
            a.vpand(ymm4, ymm15, at(0))?;
            a.vpand(ymm5, ymm15, at(32))?;
            a.vpackusdw(dst, ymm4, ymm5)?;
            a.vpermq(dst, dst, 0xD8)?;
        }
        (false, false, false) | (true, true, false) => {
            // 16 i16 or 32 bytes into 8 i16 or 16 bytes.
            a.vpand(ymm4, ymm15, at(0))?;
            a.vextracti128(xmm5, ymm4, 1)?;
            if load.bytes {
                a.vpackuswb(dst_x, xmm4, xmm5)?;
            } else {
                a.vpackusdw(dst_x, xmm4, xmm5)?;
            }
        }
        (true, false, false) => {
            // 16 bytes into 8.
            a.vpand(xmm4, xmm15, at(0))?;
            a.vpackuswb(dst_x, xmm4, xmm4)?;
        }
    }
    Ok(())
}

/// Interleaves the tap registers into depth units and stores them at
/// PANEL_CURSOR: i16 pairs (taps 0, 1) or byte quads (taps 0–3).
fn emit_interleave(a: &mut CodeAssembler, bytes: bool, vectors: usize) -> Result<(), CodegenError> {
    let out = PANEL_CURSOR;
    if !bytes {
        if vectors == 2 {
            a.vpunpcklwd(ymm4, ymm0, ymm1)?; // positions 0-3 | 8-11
            a.vpunpckhwd(ymm5, ymm0, ymm1)?; // positions 4-7 | 12-15
            a.vperm2i128(ymm0, ymm4, ymm5, 0x20)?;
            a.vperm2i128(ymm1, ymm4, ymm5, 0x31)?;
            a.vmovdqu(ymmword_ptr(out), ymm0)?;
            a.vmovdqu(ymmword_ptr(out + 32), ymm1)?;
        } else {
            a.vpunpcklwd(xmm4, xmm0, xmm1)?;
            a.vpunpckhwd(xmm5, xmm0, xmm1)?;
            a.vmovdqu(xmmword_ptr(out), xmm4)?;
            a.vmovdqu(xmmword_ptr(out + 16), xmm5)?;
        }
        return Ok(());
    }
    a.vpunpcklbw(xmm4, xmm0, xmm1)?; // taps 0,1 of positions 0-7
    a.vpunpcklbw(xmm6, xmm2, xmm3)?; // taps 2,3 of positions 0-7
    a.vpunpcklwd(xmm8, xmm4, xmm6)?; // quads of positions 0-3
    a.vpunpckhwd(xmm9, xmm4, xmm6)?; // quads of positions 4-7
    a.vmovdqu(xmmword_ptr(out), xmm8)?;
    a.vmovdqu(xmmword_ptr(out + 16), xmm9)?;
    if vectors == 2 {
        a.vpunpckhbw(xmm5, xmm0, xmm1)?; // positions 8-15
        a.vpunpckhbw(xmm7, xmm2, xmm3)?;
        a.vpunpcklwd(xmm8, xmm5, xmm7)?;
        a.vpunpckhwd(xmm9, xmm5, xmm7)?;
        a.vmovdqu(xmmword_ptr(out + 32), xmm8)?;
        a.vmovdqu(xmmword_ptr(out + 48), xmm9)?;
    }
    Ok(())
}

/// One unit of any positions: indices `base(p)` in ymm8 (and ymm9), koffs
/// at KOFF_CURSOR, elements at GROUP_IMAGE, written at PANEL_CURSOR; ymm15
/// holds 0xFF per dword for bytes.
fn emit_gather_unit(a: &mut CodeAssembler, bytes: bool, vectors: usize) -> Result<(), CodegenError> {
    let taps = if bytes { 4 } else { 2 };
    let offsets = [ymm10, ymm11, ymm12, ymm13];
    let gathered = [ymm3, ymm4, ymm5, ymm6];
    let (index, mask) = (ymm0, ymm2);
    let scale = if bytes { 1 } else { 2 };
    for (t, &o) in offsets.iter().enumerate().take(taps) {
        a.vpbroadcastd(o, dword_ptr(KOFF_CURSOR + 4 * t))?;
    }
    for (v, &base) in [ymm8, ymm9].iter().enumerate().take(vectors) {
        for t in 0..taps {
            a.vpaddd(index, base, offsets[t])?;
            a.vpcmpeqd(mask, mask, mask)?;
            a.vpgatherdd_3(gathered[t], dword_ptr(GROUP_IMAGE + index * scale), mask)?;
        }
        let out = gathered[0];
        if bytes {
            // Each gather loaded 4 bytes; keep the low one of each tap.
            a.vpand(out, out, ymm15)?;
            for (t, &g) in gathered.iter().enumerate().skip(1) {
                if t < 3 {
                    a.vpand(g, g, ymm15)?;
                }
                a.vpslld(g, g, (8 * t) as i32)?;
                a.vpor(out, out, g)?;
            }
        } else {
            a.vpslld(gathered[1], gathered[1], 16)?;
            a.vpblendw(out, out, gathered[1], 0b1010_1010)?;
        }
        a.vmovdqu(ymmword_ptr(PANEL_CURSOR + 32 * v), out)?;
    }
    Ok(())
}

/// The window of one conv2d (the lowering reads it from the op's shapes and
/// attributes).
#[derive(Copy, Clone, Debug)]
pub(crate) struct ConvGeometry {
    /// Images `N`.
    pub batches: usize,
    /// Input channels `C`.
    pub channels: usize,
    /// Input height `H`.
    pub height: usize,
    /// Input width `W`.
    pub width: usize,
    /// Output channels `O`.
    pub out_channels: usize,
    /// `[kh, kw]`.
    pub kernel: [usize; 2],
    /// `[OH, OW]`.
    pub output: [usize; 2],
    /// `[stride_h, stride_w]`.
    pub stride: [usize; 2],
    /// `[top, left, bottom, right]`.
    pub pad: [usize; 4],
    /// `[dilation_h, dilation_w]`.
    pub dilation: [usize; 2],
    /// Channel groups.
    pub groups: usize,
}
