//! Winograd F(2×2, 3×3) for 3×3 stride-1 convolutions (one group, no
//! dilation), exact in integers: 16 multiplies per 2×2 outputs and input
//! channel instead of 36, all on `vpmaddwd`, so it needs no proof about the
//! weights (full-range 8-bit weights included).
//!
//! With `d` a 4×4 input tile (centered, `x − zp`), `g` a 3×3 kernel and
//!
//! ```text
//!   Bᵀ = [1 0 −1 0; 0 1 1 0; 0 −1 1 0; 0 1 0 −1]
//!   G₂ = [2 0 0; 1 1 1; 1 −1 1; 0 0 2]         (twice Lavin's G: integers)
//!   Aᵀ = [1 1 1 0; 0 1 −1 −1]
//! ```
//!
//! the 2×2 outputs are `Y = Aᵀ [Σ_c (Bᵀ d_c B) ⊙ (G₂ g_c G₂ᵀ)] A / 4`.
//!
//! **Exactness.** A centered activation is within ±255 and a centered weight
//! within ±255, so `V = Bᵀ d B` is within ±1020 and `U = G₂ g G₂ᵀ` within
//! ±2295: both fit i16, and `vpmaddwd`'s pair sums (≤ 4.7·10⁶) cannot
//! overflow. The channel sums and the output transform run in wrapping i32
//! arithmetic, a ring homomorphism: the result is `4·Y mod 2^32`. A layer is
//! taken only when every channel proves `|Y| ≤ 255 · Σ|w'| < 2^29`
//! ([`exact_for`]), so `4·Y` fits i32 and the arithmetic shift right by 2
//! gives `Y` itself, the §6 accumulator before the bias.
//!
//! **Kernels**, after the pad kernel writes the u8 image `a` (padding `zp_a`,
//! extended right and below to whole tiles):
//!
//! 1. the input transform (one work item per image and pair of input
//!    channels): for 8 tiles along a tile row at a time, `V` for both
//!    channels as i16 pairs, written straight into the GEMM's panels, one
//!    group of panels per tap `t = 4i + j`; the centering is one subtraction,
//!    because a constant tile transforms to `4·zp_a` at tap (1, 1) alone;
//! 2. the conv GEMM ([`gemm`](super::gemm)) with the 16 taps as its groups,
//!    tiles as its positions and input channels as its depth, writing the
//!    i32 sums ([`GemmOutput::Sums`]);
//! 3. the output transform (one work item per image and output channel):
//!    `Aᵀ M A`, `>> 2`, plus the bias, then the layer's requantization
//!    ([`channel_requantizer`]), and the two output rows of 8 tiles
//!    interleaved into 16 bytes each.
//!
//! Tiles are numbered `q = ty·TX + tx` with `TX` the tile columns rounded up
//! to 8, so that every vector of 8 tiles lies on one tile row, or to 4 for
//! outputs at most 8 wide (a 7×7 map), whose vectors then stack two tile
//! rows ("stacked": each tile row of a vector is read and written as one
//! 8-byte half). The tiles past the output compute on padding and are never
//! stored.

use super::epilogue::{
    channel_requantizer, load_low_bound, pack_8, store_bytes, CHANNEL_INIT, CHANNEL_RECORD,
};
use super::gemm::{GemmOutput, GemmShape};
use super::im2col::ImageShape;
use super::layer::{Accumulation, Layer};
use super::{add_multiple, emit_item_kernel, multiply_by, split_index, ITEM};
use crate::abi::Place;
use crate::error::CodegenError;
use crate::kernels::im2col::ConvGeometry;
use crate::kernels::registers::xmm_of;
use iced_x86::code_asm::*;

/// Taps of the transformed 4×4 tile.
pub(crate) const TAPS: usize = 16;
/// Tiles per vector of the transforms.
const TILE_VECTOR: usize = 8;
/// Tile columns of a stacked shape: two tile rows per vector.
const STACKED_COLUMNS: usize = TILE_VECTOR / 2;

/// `G₂` of the module doc.
const G2: [[i32; 3]; 4] = [[2, 0, 0], [1, 1, 1], [1, -1, 1], [0, 0, 2]];

/// The shape of one Winograd convolution, all compile-time numbers.
#[derive(Copy, Clone, Debug)]
pub(crate) struct WinogradShape {
    /// Images `N`.
    pub batches: usize,
    /// Input channels `C`.
    pub channels: usize,
    /// Output channels `O`.
    pub out_channels: usize,
    /// `[OH, OW]`.
    pub output: [usize; 2],
    /// `[TY, TX]`: tile rows (rounded up to even when stacked), and tile
    /// columns rounded up to 8 (or 4 when stacked).
    pub tiles: [usize; 2],
    /// The padded u8 image the input transform reads.
    pub image: ImageShape,
    /// The GEMM over the transformed tiles.
    pub gemm: GemmShape,
}

/// Whether every output channel of `layer` proves `255 · Σ|w'| < 2^29`
/// (`quant_params::winograd_f2x3_exact`, which quant-lint reports).
pub(crate) fn exact_for(layer: &Layer) -> bool {
    layer.rows().all(|row| {
        let row: Vec<i64> = row.iter().map(|&w| i64::from(w)).collect();
        qopt_dialect_qnn::quant_params::winograd_f2x3_exact(&row)
    })
}

impl WinogradShape {
    /// The Winograd plan of a conv, or `None` when it does not apply: not a
    /// 3×3 window with stride 1, dilation 1 and one group, no outputs, a
    /// layer [`exact_for`] cannot prove, or offsets past 32 bits.
    pub fn plan(geometry: &ConvGeometry, layer: &Layer, image: &ImageShape) -> Option<WinogradShape> {
        let g = geometry;
        if g.kernel != [3, 3] || g.stride != [1, 1] || g.dilation != [1, 1] || g.groups != 1 {
            return None;
        }
        let [oh, ow] = g.output;
        if g.batches * g.channels * g.out_channels * oh * ow == 0 || !exact_for(layer) {
            return None;
        }
        let tiles = if ow <= 2 * STACKED_COLUMNS {
            [oh.div_ceil(2).next_multiple_of(2), STACKED_COLUMNS]
        } else {
            [oh.div_ceil(2), ow.div_ceil(2).next_multiple_of(TILE_VECTOR)]
        };
        let (hp, wp) = (2 * tiles[0] + 2, 2 * tiles[1] + 2);
        let bottom = hp.checked_sub(g.height + g.pad[0])?;
        let right = wp.checked_sub(g.width + g.pad[1])?;
        let image = ImageShape { pad: [g.pad[0], g.pad[1], bottom, right], bytes: true, ..*image };
        let mut gemm = GemmShape::new(
            Accumulation::Words,
            g.batches,
            TAPS,
            g.out_channels,
            tiles[0] * tiles[1],
            g.channels,
        );
        gemm.output = GemmOutput::Sums;
        let shape = WinogradShape {
            batches: g.batches,
            channels: g.channels,
            out_channels: g.out_channels,
            output: g.output,
            tiles,
            image,
            gemm,
        };
        // Tap strides are displacements; image offsets are i32 elsewhere too.
        let fits = |bytes: usize| bytes.checked_mul(TAPS).is_some_and(|b| b < i32::MAX as usize);
        let image_ok = g.batches.saturating_mul(g.channels).saturating_mul(image.plane()) < i32::MAX as usize;
        (fits(shape.tap_panel_stride()) && fits(shape.tap_sum_stride()) && image_ok).then_some(shape)
    }

    /// Multiplies per output relative to the direct convolution's: 16 per
    /// tile (tiles past the output included) against 9 per output.
    pub fn relative_cost(&self) -> f64 {
        let [oh, ow] = self.output;
        (TAPS * self.tiles[0] * self.tiles[1]) as f64 / (9 * oh * ow) as f64
    }

    /// Whether a vector of 8 tiles holds two tile rows of 4.
    pub fn stacked(&self) -> bool {
        self.tiles[1] == STACKED_COLUMNS
    }

    /// Tile rows per vector of 8 tiles.
    fn rows_per_vector(&self) -> usize {
        if self.stacked() {
            2
        } else {
            1
        }
    }

    /// Bytes between the panels of consecutive taps.
    fn tap_panel_stride(&self) -> usize {
        self.gemm.blocks() * self.gemm.panel_bytes()
    }

    /// Bytes of one output channel's sums.
    fn sum_row_bytes(&self) -> usize {
        self.gemm.output_row() * 4
    }

    /// Bytes between the sums of consecutive taps.
    fn tap_sum_stride(&self) -> usize {
        self.out_channels * self.sum_row_bytes()
    }

    /// Scratch bytes of the panels.
    pub fn panel_bytes(&self) -> usize {
        self.gemm.panels() * self.gemm.panel_bytes()
    }

    /// Scratch bytes of the sums.
    pub fn sum_bytes(&self) -> usize {
        self.batches * TAPS * self.tap_sum_stride()
    }
}

/// `U = G₂ g G₂ᵀ` for every output and input channel of `layer` (a 3×3
/// conv), as rows of the GEMM: channel `t·O + o` holds `U_t[o][c]` over `c`.
pub(crate) fn transformed_weights(layer: &Layer, channels: usize) -> Vec<i32> {
    let o_count = layer.channels;
    let mut out = vec![0i32; TAPS * o_count * channels];
    for o in 0..o_count {
        let row = layer.row(o);
        for c in 0..channels {
            let g = &row[9 * c..9 * c + 9];
            // h = G₂ g (4×3), then U = h G₂ᵀ (4×4).
            let mut h = [[0i32; 3]; 4];
            for (i, gi) in G2.iter().enumerate() {
                for k in 0..3 {
                    h[i][k] = (0..3).map(|r| gi[r] * g[3 * r + k]).sum();
                }
            }
            for (i, hi) in h.iter().enumerate() {
                for (j, gj) in G2.iter().enumerate() {
                    let u: i32 = (0..3).map(|k| hi[k] * gj[k]).sum();
                    out[((4 * i + j) * o_count + o) * channels + c] = u;
                }
            }
        }
    }
    out
}

// Registers of the input transform.
const IN_IMAGE: AsmRegister64 = r13;
const IN_PANELS: AsmRegister64 = r14;
const ROW_FIRST: AsmRegister64 = rbx;
const ROW_SECOND: AsmRegister64 = r15;
const PANEL_BASE: AsmRegister64 = rdx;
const TILE: AsmRegister64 = r9;
const ROWS_LEFT: AsmRegister64 = rcx;
const GROUPS_LEFT: AsmRegister64 = r10;
const COLUMN_FIRST: AsmRegister64 = rsi;
const COLUMN_SECOND: AsmRegister64 = rdi;
const DESTINATION: AsmRegister64 = r11;

/// The input transform kernel: the image at `image`, the panels at
/// `panels`; one work item per image and pair of input channels.
pub(crate) fn emit_input_transform(
    shape: &WinogradShape,
    image: Place,
    panels: Place,
) -> Result<Vec<u8>, CodegenError> {
    let pairs = shape.channels.div_ceil(2);
    let plane = shape.image.plane();
    let wp = shape.image.padded_width();
    let [rows, columns] = shape.tiles;
    let block_width = shape.gemm.block_width();
    let panel_bytes = shape.gemm.panel_bytes();
    let tap_stride = shape.tap_panel_stride();
    let centering = 4 * shape.image.byte_zero_point;
    emit_item_kernel(&[(IN_IMAGE, image), (IN_PANELS, panels)], &mut |a| {
        // ymm15: 0x00FF in every word; ymm14: 4·zp_a in every word.
        a.mov(eax, 0x00FF_00FFu32)?;
        a.vmovd(xmm15, eax)?;
        a.vpbroadcastd(ymm15, xmm15)?;
        a.mov(eax, (centering as u16 as u32) * 0x1_0001)?;
        a.vmovd(xmm14, eax)?;
        a.vpbroadcastd(ymm14, xmm14)?;
        // item → (n in rax, pair in r8)
        split_index(a, ITEM, &[(pairs, r8)])?;
        // panels of image n, unit `pair`: tap 0, block 0
        multiply_by(a, PANEL_BASE, rax, TAPS * tap_stride)?;
        a.add(PANEL_BASE, IN_PANELS)?;
        add_multiple(a, PANEL_BASE, r8, block_width * 4, r10)?;
        // the two channels' planes: 2·pair and 2·pair + 1 (the same one for
        // the last pair of an odd count, whose weights are 0)
        multiply_by(a, ROW_FIRST, rax, shape.channels * plane)?;
        add_multiple(a, ROW_FIRST, r8, 2 * plane, r10)?;
        a.add(ROW_FIRST, IN_IMAGE)?;
        a.lea(ROW_SECOND, qword_ptr(ROW_FIRST + plane))?;
        if shape.channels % 2 == 1 {
            let mut even = a.create_label();
            a.cmp(r8, (pairs - 1) as i32)?;
            a.jne(even)?;
            a.mov(ROW_SECOND, ROW_FIRST)?;
            a.set_label(&mut even)?;
        }
        a.xor(TILE, TILE)?;
        let per_vector = shape.rows_per_vector();
        a.mov(ROWS_LEFT, (rows / per_vector) as u64)?;
        let mut row = a.create_label();
        a.set_label(&mut row)?;
        a.mov(COLUMN_FIRST, ROW_FIRST)?;
        a.mov(COLUMN_SECOND, ROW_SECOND)?;
        a.mov(GROUPS_LEFT, (columns * per_vector / TILE_VECTOR) as u64)?;
        let mut group = a.create_label();
        a.set_label(&mut group)?;
        // destination = base + (q / width)·panel + ((q % width) / 8)·32
        a.mov(DESTINATION, TILE)?;
        a.shr(DESTINATION, block_width.trailing_zeros())?;
        multiply_by(a, DESTINATION, DESTINATION, panel_bytes)?;
        if block_width > TILE_VECTOR {
            a.mov(rax, TILE)?;
            a.and(rax, (block_width - 1) as i32)?;
            a.shl(rax, 2)?; // (q % width) / 8 · 32 = (q % width) · 4
            a.add(DESTINATION, rax)?;
        }
        a.add(DESTINATION, PANEL_BASE)?;
        emit_tile_vector(a, wp, shape.stacked(), tap_stride)?;
        a.add(TILE, TILE_VECTOR as i32)?;
        a.add(COLUMN_FIRST, (2 * TILE_VECTOR) as i32)?;
        a.add(COLUMN_SECOND, (2 * TILE_VECTOR) as i32)?;
        a.dec(GROUPS_LEFT)?;
        a.jnz(group)?;
        super::add_constant(a, ROW_FIRST, 2 * per_vector * wp, rax)?;
        super::add_constant(a, ROW_SECOND, 2 * per_vector * wp, rax)?;
        a.dec(ROWS_LEFT)?;
        a.jnz(row)?;
        Ok(())
    })
}

/// Loads row `r` of the 8 tiles at the column cursors as `d[r][s]`, s = 0..3,
/// each an i16 pair (first channel, second channel) per tile. Clobbers `tmp`
/// (and xmm12–13 when `stacked`: the second tile row's 8 bytes come from
/// two image rows further down).
fn load_tile_row(
    a: &mut CodeAssembler,
    r: usize,
    wp: usize,
    stacked: bool,
    d: [AsmRegisterYmm; 4],
    tmp: AsmRegisterYmm,
) -> Result<(), CodegenError> {
    for half in 0..2 {
        // Columns 2·tile + 2·half and + 1: the word of bytes (even, odd).
        let at = r * wp + 2 * half;
        let (even, odd) = (d[2 * half], d[2 * half + 1]);
        if stacked {
            for (cursor, bytes) in [(COLUMN_FIRST, xmm12), (COLUMN_SECOND, xmm13)] {
                a.vmovq(bytes, qword_ptr(cursor + at))?;
                a.vpinsrq(bytes, bytes, qword_ptr(cursor + (at + 2 * wp)), 1)?;
            }
            a.vpmovzxwd(even, xmm12)?;
            a.vpmovzxwd(tmp, xmm13)?;
        } else {
            a.vpmovzxwd(even, xmmword_ptr(COLUMN_FIRST + at))?;
            a.vpmovzxwd(tmp, xmmword_ptr(COLUMN_SECOND + at))?;
        }
        a.vpslld(tmp, tmp, 16)?;
        a.vpblendw(even, even, tmp, 0xAA)?;
        a.vpsrlw(odd, even, 8)?;
        a.vpand(even, even, ymm15)?;
    }
    Ok(())
}

/// `V = Bᵀ d B` of the 8 tiles at the column cursors, each of the 16 taps
/// stored at `DESTINATION + t · tap_stride`.
fn emit_tile_vector(
    a: &mut CodeAssembler,
    wp: usize,
    stacked: bool,
    tap_stride: usize,
) -> Result<(), CodegenError> {
    let d1 = [ymm0, ymm1, ymm2, ymm3];
    let d2 = [ymm4, ymm5, ymm6, ymm7];
    let f = [ymm8, ymm9, ymm10, ymm11];
    let (v, tmp) = (ymm12, ymm13);
    load_tile_row(a, 1, wp, stacked, d1, tmp)?;
    load_tile_row(a, 2, wp, stacked, d2, tmp)?;
    // Row i of Bᵀ d: f = d1 + d2 (i = 1), d2 − d1 (i = 2), d0 − d2 (i = 0),
    // d1 − d3 (i = 3); then V[i][·] = f Bᵀ.
    for s in 0..4 {
        a.vpaddw(f[s], d1[s], d2[s])?;
    }
    store_transformed_row(a, 1, f, v, tap_stride)?;
    for s in 0..4 {
        a.vpsubw(f[s], d2[s], d1[s])?;
    }
    store_transformed_row(a, 2, f, v, tap_stride)?;
    load_tile_row(a, 0, wp, stacked, f, tmp)?;
    for s in 0..4 {
        a.vpsubw(f[s], f[s], d2[s])?;
    }
    store_transformed_row(a, 0, f, v, tap_stride)?;
    load_tile_row(a, 3, wp, stacked, f, tmp)?;
    for s in 0..4 {
        a.vpsubw(f[s], d1[s], f[s])?;
    }
    store_transformed_row(a, 3, f, v, tap_stride)
}

/// `V[i][j] = (f Bᵀ)[j]` for j = 0..3, centered at tap (1, 1) by `ymm14`.
fn store_transformed_row(
    a: &mut CodeAssembler,
    i: usize,
    f: [AsmRegisterYmm; 4],
    v: AsmRegisterYmm,
    tap_stride: usize,
) -> Result<(), CodegenError> {
    for j in 0..4 {
        match j {
            0 => a.vpsubw(v, f[0], f[2])?,
            1 => a.vpaddw(v, f[1], f[2])?,
            2 => a.vpsubw(v, f[2], f[1])?,
            _ => a.vpsubw(v, f[1], f[3])?,
        }
        if (i, j) == (1, 1) {
            a.vpsubw(v, v, ymm14)?;
        }
        a.vmovdqu(ymmword_ptr(DESTINATION + (4 * i + j) * tap_stride), v)?;
    }
    Ok(())
}

/// Where the output transform finds its buffers.
#[derive(Copy, Clone, Debug)]
pub(crate) struct OutputTransformPlaces {
    /// The GEMM's sums (scratch).
    pub sums: Place,
    /// The output tensor.
    pub output: Place,
    /// The rodata blob with the channel records at `records` and the
    /// globals at `globals`.
    pub rodata: Place,
    /// Offset of the channel records in the blob.
    pub records: usize,
    /// Offset of the globals in the blob.
    pub globals: usize,
}

// Registers of the output transform.
const SUMS: AsmRegister64 = r13;
const OUTPUT: AsmRegister64 = r14;
const BLOB: AsmRegister64 = r15;
const RECORD: AsmRegister64 = rbx;
const SUM_CURSOR: AsmRegister64 = r11;
const OUT_ROW: AsmRegister64 = rdi;
const OUT_CURSOR: AsmRegister64 = r9;
const STORE_SCRATCH: AsmRegister64 = rdx;

/// The output transform kernel; one work item per image and output channel.
pub(crate) fn emit_output_transform(
    layer: &Layer,
    shape: &WinogradShape,
    places: OutputTransformPlaces,
) -> Result<Vec<u8>, CodegenError> {
    let o_count = shape.out_channels;
    let [oh, ow] = shape.output;
    emit_item_kernel(&[(SUMS, places.sums), (OUTPUT, places.output), (BLOB, places.rodata)], &mut |a| {
        split_index(a, ITEM, &[(o_count, r8)])?;
        // sums of (n, tap 0, o); output plane (n, o); record of o
        multiply_by(a, SUM_CURSOR, rax, TAPS * shape.tap_sum_stride())?;
        add_multiple(a, SUM_CURSOR, r8, shape.sum_row_bytes(), r10)?;
        a.add(SUM_CURSOR, SUMS)?;
        multiply_by(a, OUT_ROW, ITEM, oh * ow)?;
        a.add(OUT_ROW, OUTPUT)?;
        multiply_by(a, RECORD, r8, CHANNEL_RECORD)?;
        a.add(RECORD, BLOB)?;
        super::add_constant(a, RECORD, places.records, r10)?;
        a.vpbroadcastd(ymm13, dword_ptr(RECORD + CHANNEL_INIT))?;
        load_low_bound(a, layer, ymm14, BLOB, places.globals)?;
        // A band is the output rows of one vector's tile rows: 2, or 4
        // when stacked; the last band may hold fewer.
        let band = 2 * shape.rows_per_vector();
        let (full_bands, last_rows) = (oh / band, oh % band);
        let (full_groups, last_len) = (ow / 16, ow % 16);
        let band_of = |a: &mut CodeAssembler, rows: usize| -> Result<(), CodegenError> {
            a.mov(OUT_CURSOR, OUT_ROW)?;
            if shape.stacked() {
                emit_output_group(a, layer, shape, places, ow, rows)?;
                a.add(SUM_CURSOR, (4 * TILE_VECTOR) as i32)?;
            } else {
                if full_groups > 0 {
                    let mut group = a.create_label();
                    a.mov(r10, full_groups as u64)?;
                    a.set_label(&mut group)?;
                    emit_output_group(a, layer, shape, places, 16, rows)?;
                    a.add(SUM_CURSOR, (4 * TILE_VECTOR) as i32)?;
                    a.add(OUT_CURSOR, 16)?;
                    a.dec(r10)?;
                    a.jnz(group)?;
                }
                if last_len > 0 {
                    emit_output_group(a, layer, shape, places, last_len, rows)?;
                    a.add(SUM_CURSOR, (4 * TILE_VECTOR) as i32)?;
                }
            }
            super::add_constant(a, OUT_ROW, band * ow, r10)
        };
        if full_bands > 0 {
            let mut row = a.create_label();
            a.mov(rcx, full_bands as u64)?;
            a.set_label(&mut row)?;
            band_of(a, band)?;
            a.dec(rcx)?;
            a.jnz(row)?;
        }
        if last_rows > 0 {
            band_of(a, last_rows)?;
        }
        Ok(())
    })
}

/// The outputs of the 8 tiles at `SUM_CURSOR`, the first `rows` rows of
/// their band at `OUT_CURSOR`, `len` bytes each: output rows `2·ty` and
/// `2·ty + 1` of 16 columns, or when stacked rows `2·ty` to `2·ty + 3` of
/// (at most) 8 columns.
fn emit_output_group(
    a: &mut CodeAssembler,
    layer: &Layer,
    shape: &WinogradShape,
    places: OutputTransformPlaces,
    len: usize,
    rows: usize,
) -> Result<(), CodegenError> {
    let stride = shape.tap_sum_stride();
    let m = |t: usize| ymmword_ptr(SUM_CURSOR + t * stride);
    let s0 = [ymm0, ymm1, ymm2, ymm3];
    let s1 = [ymm4, ymm5, ymm6, ymm7];
    // M Aᵀ per row i: s0 = M[i][0] + M[i][1] + M[i][2], s1 = M[i][1] − M[i][2] − M[i][3].
    for i in 0..4 {
        a.vmovdqu(s0[i], m(4 * i))?;
        a.vpaddd(s0[i], s0[i], m(4 * i + 1))?;
        a.vpaddd(s0[i], s0[i], m(4 * i + 2))?;
        a.vmovdqu(s1[i], m(4 * i + 1))?;
        a.vpsubd(s1[i], s1[i], m(4 * i + 2))?;
        a.vpsubd(s1[i], s1[i], m(4 * i + 3))?;
    }
    // Aᵀ (M Aᵀ): rows 0 and 1 of the output, columns 0 and 1 of each tile.
    let (y00, y01, y10, y11) = (ymm8, ymm9, ymm10, ymm0);
    a.vpaddd(y00, s0[0], s0[1])?;
    a.vpaddd(y00, y00, s0[2])?;
    a.vpaddd(y01, s1[0], s1[1])?;
    a.vpaddd(y01, y01, s1[2])?;
    a.vpsubd(y10, s0[1], s0[2])?;
    a.vpsubd(y10, y10, s0[3])?;
    a.vpsubd(y11, s1[1], s1[2])?;
    a.vpsubd(y11, y11, s1[3])?;
    let requantizer = channel_requantizer(layer, RECORD, 0, BLOB, places.globals, ymm14);
    let unsigned = layer.output.element == crate::buffer::ElementType::U8;
    let (odd, scratch) = (ymm11, ymm12);
    let ow = shape.output[1];
    // (even columns, odd columns, output row within the tile)
    let tile_rows: &[(AsmRegisterYmm, AsmRegisterYmm, usize)] =
        if rows == 1 { &[(y00, y01, 0)] } else { &[(y00, y01, 0), (y10, y11, 1)] };
    for &(even_columns, odd_columns, row) in tile_rows {
        let (even_bytes, odd_bytes) = (xmm1, xmm2);
        for (y, bytes) in [(even_columns, even_bytes), (odd_columns, odd_bytes)] {
            a.vpsrad(y, y, 2)?;
            a.vpaddd(y, y, ymm13)?;
            requantizer.emit(a, y, odd, scratch)?;
            pack_8(a, y, bytes, xmm_of(scratch), unsigned)?;
        }
        a.vpunpcklbw(even_bytes, even_bytes, odd_bytes)?;
        if shape.stacked() {
            // Bytes 0–7: the first tile row's output row; 8–15: the second's,
            // two output rows down.
            if row + 2 < rows {
                a.vpsrldq(odd_bytes, even_bytes, 8)?;
                store_bytes(a, odd_bytes, OUT_CURSOR, (row + 2) * ow, len, STORE_SCRATCH)?;
            }
            store_bytes(a, even_bytes, OUT_CURSOR, row * ow, len, STORE_SCRATCH)?;
        } else {
            store_bytes(a, even_bytes, OUT_CURSOR, row * ow, len, STORE_SCRATCH)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::G2;

    /// The transforms of the module doc compute the 2×2 correlation outputs
    /// ×4, checked in integers against the direct sums.
    #[test]
    fn the_transforms_compute_four_times_the_correlation() {
        let bt = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]];
        let at = [[1, 1, 1, 0], [0, 1, -1, -1]];
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % 511) as i64 - 255
        };
        for _ in 0..200 {
            let d: Vec<i64> = (0..16).map(|_| next()).collect();
            let g: Vec<i64> = (0..9).map(|_| next()).collect();
            let mut v = [[0i64; 4]; 4];
            let mut u = [[0i64; 4]; 4];
            for i in 0..4 {
                for j in 0..4 {
                    v[i][j] = (0..4)
                        .flat_map(|r| (0..4).map(move |s| (r, s)))
                        .map(|(r, s)| bt[i][r] * d[4 * r + s] * bt[j][s])
                        .sum();
                    u[i][j] = (0..3)
                        .flat_map(|r| (0..3).map(move |k| (r, k)))
                        .map(|(r, k)| i64::from(G2[i][r]) * g[3 * r + k] * i64::from(G2[j][k]))
                        .sum();
                    assert!(v[i][j].abs() <= 1020 && u[i][j].abs() <= 2295);
                }
            }
            for (y, ay) in at.iter().enumerate() {
                for (x, ax) in at.iter().enumerate() {
                    let got: i64 = (0..4)
                        .flat_map(|i| (0..4).map(move |j| (i, j)))
                        .map(|(i, j)| ay[i] * v[i][j] * u[i][j] * ax[j])
                        .sum();
                    let want: i64 = (0..3)
                        .flat_map(|r| (0..3).map(move |k| (r, k)))
                        .map(|(r, k)| d[4 * (y + r) + x + k] * g[3 * r + k])
                        .sum();
                    assert_eq!(got, 4 * want);
                }
            }
        }
    }
}
