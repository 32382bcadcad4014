//! The conv2d GEMM: `out[c, p] = requantize(init[c] + Σ_u W[c, u] · A[u, p])`
//! over the panels [`im2col`](super::im2col) packed, with a register-blocked
//! microkernel of `rows` channels × `vectors` × 8 positions.
//!
//! **Layouts.** A depth unit is 4 bytes per position and per channel: two
//! i16 taps (`vpmaddwd`) or four 8-bit taps (`vpmaddubsw`, `vpdpbusd`).
//! - A panel holds the activations of one block of `8·vectors` consecutive
//!   output positions (flattened `oy·OW + ox`) for one image and group:
//!   `[unit][position][4 bytes]`, so one unit of a block is one or two ymm.
//! - Weights are packed at compile time per group, in tiles of `rows`
//!   channels (the last tile of a group may have fewer): `[unit][row][4
//!   bytes]`, so a unit's weight for one row is one `vpbroadcastd`.
//!
//! **Work items** are the panels `p = (n·G + g)·blocks + block` (the pack
//! kernel's items), each split into `splits` ranges of channel tiles when
//! there are few panels (item `i = p·splits + s`), so that small layers
//! still spread over threads. An item runs its tiles over its panel, which
//! stays in L1 while the tiles' weights stream from L2.
//!
//! **Microkernel** (rows × vectors accumulators in ymm0–ymm11, activations in
//! ymm12–13, the broadcast weight in ymm14, products in ymm15; for
//! `vpmaddubsw` the vector of ones its sums are widened with sits in ymm10
//! beside two activation vectors (5 rows) or in ymm13 beside one):
//!
//! ```text
//!   acc[r][v] = init[r]                     (bias, compensation)
//!   for each unit u (unrolled by 4):
//!     act[v] = panel[u][8v .. 8v+8]
//!     for r: wb = broadcast W[u][r]; for v: acc[r][v] += wb · act[v]
//!   for r: requantize acc[r][·] in registers, pack, store 8·vectors bytes
//! ```
//!
//! With [`GemmOutput::Sums`] (Winograd's transform-domain products) the
//! accumulators start at zero and are stored as they are, every lane.
//!
//! The multiply-accumulate is `vpmaddwd t, wb, act; vpaddd acc, t`, or
//! `vpmaddubsw t, act, wb; vpmaddwd t, ones; vpaddd acc, t`, or
//! `vpdpbusd acc, act, wb`. The last block of positions may be partial: its
//! lanes past the end hold harmless values (the packing reads real image
//! bytes for them) and only the valid outputs are stored.

use super::epilogue::{
    channel_requantizer, load_low_bound, pack_16, pack_8, store_bytes, CHANNEL_INIT, CHANNEL_RECORD,
};
use super::layer::{Accumulation, Layer};
use super::{add_multiple, emit_item_kernel, emit_reduction, multiply_by, split_index, ITEM};
use crate::abi::Place;
use crate::error::CodegenError;
use crate::kernels::registers::xmm_of;
use iced_x86::code_asm::*;

/// Accumulators: `acc[r][v]` is `ACCUMULATORS[r · vectors + v]`.
const ACCUMULATORS: [AsmRegisterYmm; 12] =
    [ymm0, ymm1, ymm2, ymm3, ymm4, ymm5, ymm6, ymm7, ymm8, ymm9, ymm10, ymm11];
/// At most this many accumulators fit next to the operands.
pub(crate) const MAX_ACCUMULATORS: usize = 12;
/// Fewer panels than this are split by channel tiles into more work items.
const MIN_ITEMS: usize = 32;
/// The time per useful multiply-accumulate of 12 × 8 tiles relative to
/// 5 × 16 or 6 × 16 ones at the same lane use: twelve broadcasts per unit
/// instead of five or six (resnet18ish's 14×14 layers measured 70 % of peak
/// against 85 %).
const EIGHT_WIDE_COST: f64 = 1.2;
/// How many depth units ahead the microkernel prefetches its weights: a
/// tile's weights are one sequential stream (the next tile's follow), cold
/// for large layers, whose weights do not stay in cache between runs.
const PREFETCH_UNITS: usize = 48;
/// Depth units per iteration of the unrolled reduction loop (1, 2, 4 and 8
/// measured alike on Zen 3, timed in turns; 4 keeps the loop short).
const UNROLL: usize = 4;

/// The shape of a conv GEMM, all compile-time numbers.
#[derive(Copy, Clone, Debug)]
pub(crate) struct GemmShape {
    /// The multiply-accumulate scheme.
    pub accumulation: Accumulation,
    /// Images `N`.
    pub batches: usize,
    /// Channel groups `G`.
    pub groups: usize,
    /// Output channels per group.
    pub group_channels: usize,
    /// Output positions per image and channel (`OH·OW`).
    pub positions: usize,
    /// Depth units per position (`ceil(taps / taps_per_unit)`).
    pub units: usize,
    /// Vectors of 8 positions per block: 1 or 2.
    pub vectors: usize,
    /// Channels per tile (`rows · vectors ≤ 12`).
    pub rows: usize,
    /// Work items per panel: its full tiles split into this many ranges
    /// (the short tile goes with the last), so that layers with few
    /// positions still give threads enough items.
    pub splits: usize,
    /// What the epilogue writes.
    pub output: GemmOutput,
}

/// What a conv GEMM's epilogue writes.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(crate) enum GemmOutput {
    /// Requantized bytes, `positions` per channel, from accumulators that
    /// start at each channel's `init`.
    Requantized,
    /// The raw i32 sums from zero, every lane of every block stored (a
    /// channel's row is `blocks · block_width` dwords); Winograd's
    /// transform-domain products ([`winograd`](super::winograd)).
    Sums,
}

impl GemmShape {
    /// The shape for `positions` positions and `group_channels` channels:
    /// blocks of 16 positions (6 × 16 tiles) unless 8-position blocks waste
    /// clearly fewer lanes, then 12 × 8 tiles.
    pub fn new(
        accumulation: Accumulation,
        batches: usize,
        groups: usize,
        group_channels: usize,
        positions: usize,
        taps: usize,
    ) -> GemmShape {
        let padded = |width: usize| positions.div_ceil(width) * width;
        let vectors = if padded(16) * 10 <= padded(8) * 11 { 2 } else { 1 };
        // vpmaddubsw's sums are widened by vpmaddwd with a vector of ones,
        // kept in a register (as a memory operand it costs a load per
        // multiply); beside two activation vectors that register takes one
        // accumulator pair, so those tiles have 5 rows.
        let accumulators = match (accumulation, vectors) {
            (Accumulation::UnsignedBytes, 2) => MAX_ACCUMULATORS - 2,
            _ => MAX_ACCUMULATORS,
        };
        let rows = (accumulators / vectors).min(group_channels).max(1);
        let panels = batches * groups * positions.div_ceil(8 * vectors);
        let splits = if panels >= MIN_ITEMS {
            1
        } else {
            MIN_ITEMS.div_ceil(panels.max(1)).min(group_channels / rows).max(1)
        };
        GemmShape {
            accumulation,
            batches,
            groups,
            group_channels,
            positions,
            units: taps.div_ceil(accumulation.taps_per_unit()),
            vectors,
            rows,
            splits,
            output: GemmOutput::Requantized,
        }
    }

    /// Elements of one output channel's row: the positions, or every lane
    /// of every block for [`GemmOutput::Sums`].
    pub fn output_row(&self) -> usize {
        match self.output {
            GemmOutput::Requantized => self.positions,
            GemmOutput::Sums => self.blocks() * self.block_width(),
        }
    }

    /// Bytes per output element: 1, or 4 for [`GemmOutput::Sums`].
    pub fn output_element_bytes(&self) -> usize {
        match self.output {
            GemmOutput::Requantized => 1,
            GemmOutput::Sums => 4,
        }
    }

    /// Bytes of one output channel's row.
    fn output_row_bytes(&self) -> usize {
        self.output_row() * self.output_element_bytes()
    }

    /// The relative cost per useful multiply-accumulate: lanes computed over
    /// lanes used, times [`EIGHT_WIDE_COST`] for 8-position blocks.
    pub fn waste(&self) -> f64 {
        let width = self.block_width();
        let lanes = self.positions.next_multiple_of(width) as f64 / self.positions.max(1) as f64;
        if self.vectors == 1 {
            lanes * EIGHT_WIDE_COST
        } else {
            lanes
        }
    }

    /// Positions per block.
    pub fn block_width(&self) -> usize {
        8 * self.vectors
    }

    /// Blocks per image and group.
    pub fn blocks(&self) -> usize {
        self.positions.div_ceil(self.block_width())
    }

    /// Bytes of one panel.
    pub fn panel_bytes(&self) -> usize {
        self.units * self.block_width() * 4
    }

    /// Panels: one per image, group and block of positions (the pack
    /// kernel's work items).
    pub fn panels(&self) -> usize {
        self.batches * self.groups * self.blocks()
    }

    /// The GEMM's work items: `splits` per panel.
    pub fn items(&self) -> usize {
        self.panels() * self.splits
    }

    /// Bytes of the packed weights of one group.
    fn group_weight_bytes(&self) -> usize {
        self.group_channels * self.units * 4
    }
}

/// The weights whose channel `c`'s centered taps are `row(c)`, packed in
/// the tile layout of the module doc for `shape` (channels
/// `g · group_channels + c`).
pub(crate) fn pack_weights<'w>(row: impl Fn(usize) -> &'w [i32], shape: &GemmShape) -> Vec<u8> {
    let taps = shape.accumulation.taps_per_unit();
    let mut out = Vec::with_capacity(shape.groups * shape.group_weight_bytes());
    for g in 0..shape.groups {
        let mut first = 0;
        while first < shape.group_channels {
            let rows = shape.rows.min(shape.group_channels - first);
            for unit in 0..shape.units {
                for r in 0..rows {
                    push_unit(&mut out, row(g * shape.group_channels + first + r), unit, taps);
                }
            }
            first += rows;
        }
    }
    out
}

/// Appends the 4 bytes of depth unit `unit` of `row`: i16 pairs when
/// `taps` is 2, s8 quads when 4; taps past the row are 0.
pub(crate) fn push_unit(out: &mut Vec<u8>, row: &[i32], unit: usize, taps: usize) {
    let tap = |k: usize| row.get(unit * taps + k).copied().unwrap_or(0);
    if taps == 2 {
        for k in 0..2 {
            out.extend_from_slice(&(tap(k) as i16).to_le_bytes());
        }
    } else {
        for k in 0..4 {
            out.push(tap(k) as i8 as u8);
        }
    }
}

/// Where the GEMM kernel finds its buffers.
#[derive(Copy, Clone, Debug)]
pub(crate) struct GemmPlaces {
    /// The first panel (scratch).
    pub panels: Place,
    /// The output tensor.
    pub output: Place,
    /// The rodata blob: packed weights at 0, then channel records at
    /// `records`, the globals at `globals` and the split table at `splits`.
    pub rodata: Place,
    /// Offset of the channel records in the blob.
    pub records: usize,
    /// Offset of the globals in the blob.
    pub globals: usize,
    /// Offset of the [`split_table`] in the blob.
    pub splits: usize,
}

/// Per split `s` of a panel's full tiles, 16 bytes: its first tile, its
/// number of tiles (`[s·T/splits, (s+1)·T/splits)`), and 1 if it also runs
/// the short tile (the last split does).
pub(crate) fn split_table(shape: &GemmShape) -> Vec<u8> {
    let full_tiles = shape.group_channels / shape.rows;
    let mut out = Vec::with_capacity(16 * shape.splits);
    for s in 0..shape.splits {
        let (start, end) = (s * full_tiles / shape.splits, (s + 1) * full_tiles / shape.splits);
        for value in [start, end - start, usize::from(s + 1 == shape.splits), 0] {
            out.extend_from_slice(&(value as u32).to_le_bytes());
        }
    }
    out
}

// Registers of the GEMM kernel.
const PANELS: AsmRegister64 = r15;
const OUTPUT: AsmRegister64 = r14;
const BLOB: AsmRegister64 = r13;
const PANEL: AsmRegister64 = rdi;
const OUT_TILE: AsmRegister64 = rsi;
const WEIGHT_TILE: AsmRegister64 = rdx;
const RECORD_TILE: AsmRegister64 = rbx;
const TILES_LEFT: AsmRegister64 = r11;
/// The item's split, until TILES_LEFT takes the register.
const SPLIT: AsmRegister64 = r11;
const ACT_CURSOR: AsmRegister64 = rax;
const WEIGHT_CURSOR: AsmRegister64 = r10;
const UNITS_LEFT: AsmRegister64 = rcx;
const STORE_SCRATCH: AsmRegister64 = r9;

/// The GEMM kernel of `layer` (see the module doc).
pub(crate) fn emit_gemm(
    layer: &Layer,
    shape: &GemmShape,
    places: GemmPlaces,
) -> Result<Vec<u8>, CodegenError> {
    let blocks = shape.blocks();
    let block_width = shape.block_width();
    let last_block_len = match shape.output {
        GemmOutput::Requantized => shape.positions - (blocks - 1) * block_width,
        GemmOutput::Sums => block_width,
    };
    let row_bytes = shape.output_row_bytes();
    let out_channels = shape.groups * shape.group_channels;
    emit_item_kernel(&[(PANELS, places.panels), (OUTPUT, places.output), (BLOB, places.rodata)], &mut |a| {
        // i → (panel, split): the split in r11 until the tiles start.
        a.mov(rax, ITEM)?;
        if shape.splits > 1 {
            a.xor(edx, edx)?;
            a.mov(rcx, shape.splits as u64)?;
            a.div(rcx)?;
            a.mov(SPLIT, rdx)?;
        }
        // panel = panels + p·panel_bytes
        multiply_by(a, PANEL, rax, shape.panel_bytes())?;
        a.add(PANEL, PANELS)?;
        // p → (n, g, block); r8 = block, r9 = g, rax = n.
        split_index(a, rax, &[(blocks, r8), (shape.groups, r9)])?;
        // out = output + (n·O·P + g·Og·P + block·width) elements, P the row
        a.mov(OUT_TILE, OUTPUT)?;
        add_multiple(a, OUT_TILE, rax, out_channels * row_bytes, r10)?;
        add_multiple(a, OUT_TILE, r9, shape.group_channels * row_bytes, r10)?;
        add_multiple(a, OUT_TILE, r8, block_width * shape.output_element_bytes(), r10)?;
        // weights and records of group g
        multiply_by(a, WEIGHT_TILE, r9, shape.group_weight_bytes())?;
        a.add(WEIGHT_TILE, BLOB)?;
        multiply_by(a, RECORD_TILE, r9, shape.group_channels * CHANNEL_RECORD)?;
        a.add(RECORD_TILE, BLOB)?;
        super::add_constant(a, RECORD_TILE, places.records, r10)?;
        let mut next = a.create_label();
        if last_block_len != block_width {
            let mut full = a.create_label();
            a.cmp(r8, (blocks - 1) as i32)?;
            a.jne(full)?;
            emit_tiles(a, layer, shape, places, last_block_len)?;
            a.jmp(next)?;
            a.set_label(&mut full)?;
        }
        emit_tiles(a, layer, shape, places, block_width)?;
        // The item loop's increment follows and carries the label.
        a.set_label(&mut next)?;
        Ok(())
    })
}

/// The item's tiles of the group: its range of full tiles in a loop, then
/// the short one if the item is the panel's last split.
fn emit_tiles(
    a: &mut CodeAssembler,
    layer: &Layer,
    shape: &GemmShape,
    places: GemmPlaces,
    store_len: usize,
) -> Result<(), CodegenError> {
    let full_tiles = shape.group_channels / shape.rows;
    let short_rows = shape.group_channels % shape.rows;
    let mut short = a.create_label();
    if shape.splits > 1 {
        // The split's row of the table: first tile, tile count, short tile?
        a.shl(SPLIT, 4)?;
        let row = |field: usize| dword_ptr(BLOB + SPLIT + (places.splits + 4 * field));
        a.mov(eax, row(0))?;
        a.mov(r8d, row(2))?;
        a.mov(r11d, row(1))?; // TILES_LEFT, last: it was SPLIT
        add_multiple(a, OUT_TILE, rax, shape.rows * shape.output_row_bytes(), r9)?;
        add_multiple(a, WEIGHT_TILE, rax, shape.rows * shape.units * 4, r9)?;
        add_multiple(a, RECORD_TILE, rax, shape.rows * CHANNEL_RECORD, r9)?;
        a.test(TILES_LEFT, TILES_LEFT)?;
        a.jz(short)?;
    } else if full_tiles > 0 {
        a.mov(TILES_LEFT, full_tiles as u64)?;
    }
    if full_tiles > 0 {
        let mut tile = a.create_label();
        a.set_label(&mut tile)?;
        emit_microkernel(a, layer, shape, places, shape.rows, store_len)?;
        super::add_constant(a, OUT_TILE, shape.rows * shape.output_row_bytes(), r10)?;
        super::add_constant(a, WEIGHT_TILE, shape.rows * shape.units * 4, r10)?;
        super::add_constant(a, RECORD_TILE, shape.rows * CHANNEL_RECORD, r10)?;
        a.dec(TILES_LEFT)?;
        a.jnz(tile)?;
    }
    a.set_label(&mut short)?;
    if short_rows > 0 {
        let mut done = a.create_label();
        if shape.splits > 1 {
            a.test(r8d, r8d)?;
            a.jz(done)?;
        }
        emit_microkernel(a, layer, shape, places, short_rows, store_len)?;
        a.set_label(&mut done)?;
    }
    a.nop()?;
    Ok(())
}

/// One tile of `rows` channels over the panel, stored `store_len` bytes per
/// channel.
fn emit_microkernel(
    a: &mut CodeAssembler,
    layer: &Layer,
    shape: &GemmShape,
    places: GemmPlaces,
    rows: usize,
    store_len: usize,
) -> Result<(), CodegenError> {
    let vectors = shape.vectors;
    let acc = |r: usize, v: usize| ACCUMULATORS[r * vectors + v];
    let activations = [ymm12, ymm13];
    let (weight, product) = (ymm14, ymm15);
    let unit_bytes = shape.block_width() * 4;
    let ones = ymmword_ptr(BLOB + (places.globals + super::epilogue::GLOBAL_ONES_WORDS));
    // The ones of vpmaddubsw's widening, in a register the tile leaves free
    // (GemmShape::new): ymm10 beside two activation vectors, ymm13 beside one.
    let ones_register = if vectors == 2 { ymm10 } else { ymm13 };
    if shape.accumulation == Accumulation::UnsignedBytes {
        a.vmovdqu(ones_register, ones)?;
    }

    for r in 0..rows {
        match shape.output {
            GemmOutput::Requantized => {
                a.vpbroadcastd(acc(r, 0), dword_ptr(RECORD_TILE + (r * CHANNEL_RECORD + CHANNEL_INIT)))?
            }
            GemmOutput::Sums => a.vpxor(acc(r, 0), acc(r, 0), acc(r, 0))?,
        }
        for v in 1..vectors {
            a.vmovdqa(acc(r, v), acc(r, 0))?;
        }
    }

    let step = |a: &mut CodeAssembler, u: usize| -> Result<(), CodegenError> {
        if u.is_multiple_of(2) {
            a.prefetcht0(byte_ptr(WEIGHT_CURSOR + (u * rows * 4 + PREFETCH_UNITS * rows * 4)))?;
        }
        for (v, &act) in activations.iter().enumerate().take(vectors) {
            a.vmovdqu(act, ymmword_ptr(ACT_CURSOR + (u * unit_bytes + v * 32)))?;
        }
        for r in 0..rows {
            a.vpbroadcastd(weight, dword_ptr(WEIGHT_CURSOR + (u * rows * 4 + r * 4)))?;
            for (v, &act) in activations.iter().enumerate().take(vectors) {
                shape.accumulation.emit_multiply_accumulate(
                    a,
                    acc(r, v),
                    act,
                    weight,
                    (product, ones_register),
                )?;
            }
        }
        Ok(())
    };

    a.mov(ACT_CURSOR, PANEL)?;
    a.mov(WEIGHT_CURSOR, WEIGHT_TILE)?;
    let cursors = [(ACT_CURSOR, unit_bytes), (WEIGHT_CURSOR, rows * 4)];
    emit_reduction(a, (shape.units, UNROLL), UNITS_LEFT, &cursors, &step)?;

    if shape.output == GemmOutput::Sums {
        let row_bytes = shape.output_row_bytes();
        for r in 0..rows {
            for v in 0..vectors {
                a.vmovdqu(ymmword_ptr(OUT_TILE + (r * row_bytes + 32 * v)), acc(r, v))?;
            }
        }
        return Ok(());
    }
    // Epilogue: ymm12 odd lanes, ymm13 scratch, ymm14 the low bound.
    let (odd, scratch, low) = (ymm12, ymm13, ymm14);
    load_low_bound(a, layer, low, BLOB, places.globals)?;
    let unsigned = layer.output.element == crate::buffer::ElementType::U8;
    for r in 0..rows {
        let requantizer =
            channel_requantizer(layer, RECORD_TILE, r * CHANNEL_RECORD, BLOB, places.globals, low);
        for v in 0..vectors {
            requantizer.emit(a, acc(r, v), odd, scratch)?;
        }
        let packed = xmm_of(odd);
        if vectors == 2 {
            pack_16(a, acc(r, 0), acc(r, 1), odd, xmm_of(scratch), unsigned)?;
        } else {
            pack_8(a, acc(r, 0), packed, xmm_of(scratch), unsigned)?;
        }
        store_bytes(a, packed, OUT_TILE, r * shape.positions, store_len, STORE_SCRATCH)?;
    }
    Ok(())
}
