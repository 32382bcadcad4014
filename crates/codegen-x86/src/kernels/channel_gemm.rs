//! The conv2d GEMM with output channels in the lanes, for layers with few
//! output positions (a 7×7 feature map has 49: 8-position vectors waste an
//! eighth of their lanes on it, 16-position ones almost a quarter).
//!
//! It reads the same panels as [`gemm`](super::gemm) (the pack kernel's
//! `[unit][8 positions][4 bytes]`, 8-position blocks) but broadcasts one
//! position's unit and multiplies it by a vector of 8 channels' weights:
//!
//! - **Weights** are packed at compile time per group in blocks of 16
//!   channels: `[block][unit][16 channels][4 bytes]` (the last block of a
//!   group padded with zero channels), two ymm per unit.
//! - **Work items** are the blocks `(n·G + g)·blocks + block`; an item runs
//!   every tile of 4 positions of its image over its block, two tiles per
//!   panel, the last tile holding the positions left (1 to 4).
//! - **Microkernel** (acc[r][v] in ymm0–ymm7 for 4 positions × 2 vectors of
//!   8 channels, the weights in ymm8–9, the broadcast unit in ymm10, the
//!   product in ymm11, `vpmaddubsw`'s ones in ymm12):
//!
//! ```text
//!   acc[r][v] = init[channels of v]                (bias, compensation)
//!   for each unit u (unrolled by 4):
//!     w[v] = W[block][u][8v .. 8v+8]
//!     for r: xb = broadcast panel[u][r]; for v: acc[r][v] += xb · w[v]
//!   requantize acc[r][v] per lane (lane records), pack to bytes;
//!   transpose each 4 positions × 8 channels to 8 dwords, store per channel
//! ```
//!
//! The per-lane requantization is [`dense`](crate::lower::dense)'s
//! ([`lane_requantizer`]); the multiply-accumulate schemes and their
//! exactness are those of [`layer`](super::layer), unchanged by the
//! orientation: each lane still sums `a · w'` over the same units.

use super::epilogue::{lane_requantizer, load_low_bound, pack_8, GLOBAL_ONES_WORDS, LANE_INIT, LANE_RECORD};
use super::gemm::{push_unit, GemmShape};
use super::layer::{Accumulation, Layer};
use super::{add_multiple, emit_item_kernel, emit_reduction, multiply_by, split_index, ITEM};
use crate::abi::Place;
use crate::error::CodegenError;
use crate::kernels::registers::xmm_of;
use iced_x86::code_asm::*;

/// Channels per block: two vectors of 8.
const BLOCK_CHANNELS: usize = 16;
/// Positions per tile.
const TILE_POSITIONS: usize = 4;
/// Positions per panel (the pack kernel's 8-position blocks).
const PANEL_POSITIONS: usize = 8;
/// Depth units per iteration of the unrolled reduction loop.
const UNROLL: usize = 4;

/// The shape of a channel-lanes conv GEMM, all compile-time numbers: the
/// 8-position panels it reads, as the pack kernel writes them.
#[derive(Copy, Clone, Debug)]
pub(crate) struct ChannelGemmShape {
    /// The layer's GEMM in 8-position panels (one vector, no splits).
    pub panels: GemmShape,
}

impl ChannelGemmShape {
    /// The channel-lanes GEMM of the layer `positions` describes.
    pub fn of(positions: &GemmShape) -> ChannelGemmShape {
        ChannelGemmShape { panels: GemmShape { vectors: 1, rows: 1, splits: 1, ..*positions } }
    }

    /// Blocks of 16 channels per group.
    pub fn blocks(&self) -> usize {
        self.panels.group_channels.div_ceil(BLOCK_CHANNELS)
    }

    /// The GEMM's work items: one per image, group and block.
    pub fn items(&self) -> usize {
        self.panels.batches * self.panels.groups * self.blocks()
    }

    /// The relative cost per useful multiply-accumulate: lanes computed over
    /// lanes used, positions rounded up to tiles and channels to blocks.
    pub fn waste(&self) -> f64 {
        let positions = self.panels.positions.next_multiple_of(TILE_POSITIONS) as f64
            / self.panels.positions.max(1) as f64;
        let channels = self.panels.group_channels.next_multiple_of(BLOCK_CHANNELS) as f64
            / self.panels.group_channels.max(1) as f64;
        positions * channels
    }
}

/// The weights of `layer` as `[group][block][unit][16 channels][4 bytes]`.
pub(crate) fn pack_channel_weights(layer: &Layer, shape: &ChannelGemmShape) -> Vec<u8> {
    let taps = shape.panels.accumulation.taps_per_unit();
    let zero_row = vec![0i32; layer.depth];
    let mut out =
        Vec::with_capacity(shape.panels.groups * shape.blocks() * shape.panels.units * BLOCK_CHANNELS * 4);
    for g in 0..shape.panels.groups {
        for block in 0..shape.blocks() {
            for unit in 0..shape.panels.units {
                for lane in 0..BLOCK_CHANNELS {
                    let c = block * BLOCK_CHANNELS + lane;
                    let row = if c < shape.panels.group_channels {
                        layer.row(g * shape.panels.group_channels + c)
                    } else {
                        &zero_row
                    };
                    push_unit(&mut out, row, unit, taps);
                }
            }
        }
    }
    out
}

/// The channels' requantization constants as lane records, each group's
/// padded to whole blocks, so block `b` of group `g` has its two records at
/// `(g·blocks + b) · 2 · LANE_RECORD`.
pub(crate) fn channel_block_records(layer: &Layer, shape: &ChannelGemmShape, init: &[i32]) -> Vec<u8> {
    let padded = shape.blocks() * BLOCK_CHANNELS;
    let mut out = Vec::with_capacity(shape.panels.groups * padded / 8 * LANE_RECORD);
    for g in 0..shape.panels.groups {
        let channels = g * shape.panels.group_channels..(g + 1) * shape.panels.group_channels;
        out.extend_from_slice(&super::epilogue::lane_records(
            &layer.requant[channels.clone()],
            &init[channels],
            padded,
        ));
    }
    out
}

/// Where the kernel finds its buffers.
#[derive(Copy, Clone, Debug)]
pub(crate) struct ChannelGemmPlaces {
    /// The first panel (scratch).
    pub panels: Place,
    /// The output tensor.
    pub output: Place,
    /// The rodata blob: packed weights at 0, lane records at `records`,
    /// the globals at `globals`.
    pub rodata: Place,
    /// Offset of the lane records in the blob.
    pub records: usize,
    /// Offset of the globals in the blob.
    pub globals: usize,
}

const PANELS: AsmRegister64 = r15;
const OUTPUT: AsmRegister64 = r14;
const BLOB: AsmRegister64 = r13;
const ACT: AsmRegister64 = rsi;
const WEIGHTS: AsmRegister64 = rdi;
const RECORD: AsmRegister64 = rbx;
const OUT_TILE: AsmRegister64 = rdx;
const BLOCK: AsmRegister64 = r8;
const PANELS_LEFT: AsmRegister64 = r11;
const ACT_CURSOR: AsmRegister64 = rax;
const WEIGHT_CURSOR: AsmRegister64 = r9;
const UNITS_LEFT: AsmRegister64 = rcx;
const SCRATCH: AsmRegister64 = r10;

const ALL_YMM: [AsmRegisterYmm; 8] = [ymm0, ymm1, ymm2, ymm3, ymm4, ymm5, ymm6, ymm7];
const WEIGHT_VECTORS: [AsmRegisterYmm; 2] = [ymm8, ymm9];
const BROADCAST: AsmRegisterYmm = ymm10;
const PRODUCT: AsmRegisterYmm = ymm11;
const ONES: AsmRegisterYmm = ymm12;

/// The GEMM kernel of `layer` (see the module doc).
pub(crate) fn emit_channel_gemm(
    layer: &Layer,
    shape: &ChannelGemmShape,
    places: ChannelGemmPlaces,
) -> Result<Vec<u8>, CodegenError> {
    let blocks = shape.blocks();
    let panel_bytes = shape.panels.panel_bytes();
    let panels_per_image = shape.panels.positions.div_ceil(PANEL_POSITIONS);
    let out_channels = shape.panels.groups * shape.panels.group_channels;
    let last_block_channels = shape.panels.group_channels - (blocks - 1) * BLOCK_CHANNELS;
    emit_item_kernel(&[(PANELS, places.panels), (OUTPUT, places.output), (BLOB, places.rodata)], &mut |a| {
        // i → (n in rax, g in r9, block in r8).
        split_index(a, ITEM, &[(blocks, BLOCK), (shape.panels.groups, r9)])?;
        // out = output + n·O·P + (g·Og + block·16)·P
        a.mov(OUT_TILE, OUTPUT)?;
        add_multiple(a, OUT_TILE, rax, out_channels * shape.panels.positions, SCRATCH)?;
        add_multiple(a, OUT_TILE, r9, shape.panels.group_channels * shape.panels.positions, SCRATCH)?;
        add_multiple(a, OUT_TILE, BLOCK, BLOCK_CHANNELS * shape.panels.positions, SCRATCH)?;
        // The image's first panel: panels + (n·G + g)·panels_per_image·panel_bytes.
        multiply_by(a, ACT, rax, shape.panels.groups)?;
        a.add(ACT, r9)?;
        multiply_by(a, ACT, ACT, panels_per_image * panel_bytes)?;
        a.add(ACT, PANELS)?;
        // The block's weights and records: block index g·blocks + block.
        multiply_by(a, SCRATCH, r9, blocks)?;
        a.add(SCRATCH, BLOCK)?;
        multiply_by(a, WEIGHTS, SCRATCH, shape.panels.units * BLOCK_CHANNELS * 4)?;
        a.add(WEIGHTS, BLOB)?;
        multiply_by(a, RECORD, SCRATCH, 2 * LANE_RECORD)?;
        a.add(RECORD, BLOB)?;
        super::add_constant(a, RECORD, places.records, SCRATCH)?;

        let mut next = a.create_label();
        if blocks > 1 && last_block_channels != BLOCK_CHANNELS {
            let mut full = a.create_label();
            a.cmp(BLOCK, (blocks - 1) as i32)?;
            a.jne(full)?;
            emit_block(a, layer, shape, places, last_block_channels)?;
            a.jmp(next)?;
            a.set_label(&mut full)?;
            emit_block(a, layer, shape, places, BLOCK_CHANNELS)?;
        } else {
            emit_block(a, layer, shape, places, last_block_channels)?;
        }
        // The item loop's increment follows and carries the label.
        a.set_label(&mut next)?;
        Ok(())
    })
}

/// Every tile of the image over one block of which `channels` are real.
fn emit_block(
    a: &mut CodeAssembler,
    layer: &Layer,
    shape: &ChannelGemmShape,
    places: ChannelGemmPlaces,
    channels: usize,
) -> Result<(), CodegenError> {
    let panel_bytes = shape.panels.panel_bytes();
    let full_panels = shape.panels.positions / PANEL_POSITIONS;
    let last = shape.panels.positions % PANEL_POSITIONS;
    let tile = |a: &mut CodeAssembler, half: usize, positions: usize| {
        emit_tile(a, layer, shape, places, half, positions, channels)
    };
    if full_panels > 0 {
        let mut panel = a.create_label();
        a.mov(PANELS_LEFT, full_panels as u64)?;
        a.set_label(&mut panel)?;
        tile(a, 0, TILE_POSITIONS)?;
        tile(a, 1, TILE_POSITIONS)?;
        a.add(ACT, panel_bytes as i32)?;
        a.add(OUT_TILE, PANEL_POSITIONS as i32)?;
        a.dec(PANELS_LEFT)?;
        a.jnz(panel)?;
    }
    if last > 0 {
        tile(a, 0, last.min(TILE_POSITIONS))?;
        if last > TILE_POSITIONS {
            tile(a, 1, last - TILE_POSITIONS)?;
        }
    }
    Ok(())
}

/// One tile: `positions` positions from the panel at ACT starting at
/// position `4·half`, stored at OUT_TILE + `4·half`, over the block's
/// `channels` real channels.
fn emit_tile(
    a: &mut CodeAssembler,
    layer: &Layer,
    shape: &ChannelGemmShape,
    places: ChannelGemmPlaces,
    half: usize,
    positions: usize,
    channels: usize,
) -> Result<(), CodegenError> {
    let vectors = channels.div_ceil(8);
    let acc = |r: usize, v: usize| ALL_YMM[r * 2 + v];
    let unit_bytes = PANEL_POSITIONS * 4;
    let bytes_scheme = shape.panels.accumulation == Accumulation::UnsignedBytes;
    if bytes_scheme {
        a.vmovdqu(ONES, ymmword_ptr(BLOB + (places.globals + GLOBAL_ONES_WORDS)))?;
    }
    for v in 0..vectors {
        a.vmovdqu(acc(0, v), ymmword_ptr(RECORD + (v * LANE_RECORD + LANE_INIT)))?;
        for r in 1..positions {
            a.vmovdqa(acc(r, v), acc(0, v))?;
        }
    }
    let step = |a: &mut CodeAssembler, u: usize| -> Result<(), CodegenError> {
        for (v, &w) in WEIGHT_VECTORS.iter().enumerate().take(vectors) {
            a.vmovdqu(w, ymmword_ptr(WEIGHT_CURSOR + (u * BLOCK_CHANNELS * 4 + v * 32)))?;
        }
        for r in 0..positions {
            a.vpbroadcastd(BROADCAST, dword_ptr(ACT_CURSOR + (u * unit_bytes + r * 4)))?;
            for (v, &w) in WEIGHT_VECTORS.iter().enumerate().take(vectors) {
                shape.panels.accumulation.emit_multiply_accumulate(
                    a,
                    acc(r, v),
                    BROADCAST,
                    w,
                    (PRODUCT, ONES),
                )?;
            }
        }
        Ok(())
    };
    a.lea(ACT_CURSOR, qword_ptr(ACT + half * TILE_POSITIONS * 4))?;
    a.mov(WEIGHT_CURSOR, WEIGHTS)?;
    let cursors = [(ACT_CURSOR, unit_bytes), (WEIGHT_CURSOR, BLOCK_CHANNELS * 4)];
    emit_reduction(a, (shape.panels.units, UNROLL), UNITS_LEFT, &cursors, &step)?;

    // Epilogue: ymm13 odd lanes, ymm14 scratch, ymm15 the low bound.
    let (odd, scratch, low) = (ymm13, ymm14, ymm15);
    load_low_bound(a, layer, low, BLOB, places.globals)?;
    let unsigned = layer.output.element == crate::buffer::ElementType::U8;
    let first = half * TILE_POSITIONS;
    for v in 0..vectors {
        let requantizer = lane_requantizer(layer, RECORD, v * LANE_RECORD, BLOB, places.globals, low);
        for r in 0..positions {
            requantizer.emit(a, acc(r, v), odd, scratch)?;
            pack_8(a, acc(r, v), xmm_of(acc(r, v)), xmm_of(scratch), unsigned)?;
        }
        let lanes = (channels - 8 * v).min(8);
        let at = |lane: usize, r: usize| {
            dword_ptr(OUT_TILE + ((8 * v + lane) * shape.panels.positions + first + r))
        };
        if positions == TILE_POSITIONS {
            // Bytes [lane][position] of the 4 rows: 8 dwords, one per channel.
            let (t01, t23) = (xmm_of(odd), xmm_of(scratch));
            a.vpunpcklbw(t01, xmm_of(acc(0, v)), xmm_of(acc(1, v)))?;
            a.vpunpcklbw(t23, xmm_of(acc(2, v)), xmm_of(acc(3, v)))?;
            let (low4, high4) = (xmm_of(acc(0, v)), xmm_of(acc(1, v)));
            a.vpunpcklwd(low4, t01, t23)?;
            a.vpunpckhwd(high4, t01, t23)?;
            for lane in 0..lanes {
                let x = if lane < 4 { low4 } else { high4 };
                match lane % 4 {
                    0 => a.vmovd(at(lane, 0), x)?,
                    k => a.vpextrd(at(lane, 0), x, k as i32)?,
                }
            }
        } else {
            for r in 0..positions {
                for lane in 0..lanes {
                    let byte = byte_ptr(OUT_TILE + ((8 * v + lane) * shape.panels.positions + first + r));
                    a.vpextrb(byte, xmm_of(acc(r, v)), lane as i32)?;
                }
            }
        }
    }
    Ok(())
}
