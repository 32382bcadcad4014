//! The lowering of `qnn.dense` and `qnn.dense_relu` ([`DenseLowering`]):
//! `x [rows, K] → [rows, O]`, vectorized over output channels, so a batch of
//! one (a GEMV) still fills every lane.
//!
//! Two kernels:
//!
//! 1. **Pack** (one work item per row): the row as depth units, the layout
//!    the GEMM broadcasts from: i16 pairs `x − zp_x` (exact scheme) or byte
//!    quads `a` (byte schemes), the last unit padded (with 0, or `zp_a`;
//!    the padded taps' weights are 0). This is the conv pad kernel
//!    ([`emit_pad`]) on a `rows × 1 × 1 × K` image padded on the
//!    right, so both share their code.
//! 2. **GEMM** (one work item per tile of up to 4 rows × up to 12 blocks of
//!    8 channels): weights are packed at compile time as
//!    `[block of 8 channels][unit][channel][4 bytes]`, one ymm per unit and
//!    block, read straight from rodata as the multiply's memory operand;
//!    each row's unit is one `vpbroadcastd`:
//!
//! ```text
//!   acc[r][b] = init[8 channels of block b]          (bias, compensation)
//!   for each unit u (unrolled by 4):
//!     for r: xb[r] = broadcast x_r[u]
//!     for b, r: acc[r][b] += W[b][u] · xb[r]           (vpmaddwd / vpmaddubsw / vpdpbusd)
//!   requantize acc[r][b] with per-lane constants (vpsrlvq), pack, store
//! ```
//!
//! The last block may have fewer than 8 channels: its weights are padded
//! with zero channels and only its valid bytes are stored.

use crate::abi::{KernelCode, Place};
use crate::buffer::ElementType;
use crate::error::CodegenError;
use crate::kernels::epilogue::{
    globals, lane_records, lane_requantizer, load_low_bound, pack_8, store_bytes, LANE_INIT, LANE_RECORD,
};
use crate::kernels::gemm::push_unit;
use crate::kernels::im2col::{emit_pad, ImageShape};
use crate::kernels::layer::{Accumulation, KernelOptions, Layer};
use crate::kernels::registers::xmm_of;
use crate::kernels::{append_aligned, emit_item_kernel, emit_reduction, multiply_by, split_index, ITEM};
use crate::lower::{Emit, EmitResult, LowerOp, OpLowering, Plan};
use iced_x86::code_asm::*;
use qopt_dialect_qnn::op_names as qnn_op;

/// Lowers `qnn.dense` and `qnn.dense_relu`; `options` may forbid the
/// byte-product schemes.
#[derive(Copy, Clone, Debug, Default)]
pub struct DenseLowering {
    /// Which multiply-accumulate schemes the kernels may use.
    pub options: KernelOptions,
}

const MAX_TILE_ROWS: usize = 4;
const UNROLL: usize = 4;
const ACCUMULATORS: [AsmRegisterYmm; 12] =
    [ymm0, ymm1, ymm2, ymm3, ymm4, ymm5, ymm6, ymm7, ymm8, ymm9, ymm10, ymm11];
const ALL_YMM: [AsmRegisterYmm; 16] =
    [ymm0, ymm1, ymm2, ymm3, ymm4, ymm5, ymm6, ymm7, ymm8, ymm9, ymm10, ymm11, ymm12, ymm13, ymm14, ymm15];

/// Everything the kernels of one dense op are specialized for.
struct DensePlan {
    layer: Layer,
    accumulation: Accumulation,
    rows: usize,
    /// The row panels, as an image of `rows` planes of one padded row.
    panels: ImageShape,
    /// Depth units per row.
    units: usize,
    /// Rows per tile.
    tile_rows: usize,
    /// Blocks of 8 channels per tile.
    tile_blocks: usize,
}

impl DensePlan {
    fn new(op: &LowerOp<'_>, options: &KernelOptions) -> Result<DensePlan, CodegenError> {
        let x = op.operand_shape(0)?;
        let w = op.operand_shape(1)?;
        let y = op.result_shape(0)?;
        let (Some((&k, lead)), &[channels, wk]) = (x.split_last(), &w[..]) else {
            return Err(
                op.invalid(format!("expected an input of rank ≥ 1 and an O×K weight, got {x:?} and {w:?}"))
            );
        };
        let mut want = lead.to_vec();
        want.push(channels);
        if wk != k || y != want {
            return Err(op.invalid(format!("shapes {x:?} · {w:?}ᵀ do not give the result {y:?}")));
        }
        let rows: usize = lead.iter().product();
        let relu = op.name() == qnn_op::DENSE_RELU;
        let layer = Layer::read(op, relu, channels, k)?;
        let accumulation = Accumulation::choose(op.target, options, layer.rows());
        op.target.require(&accumulation.needed_features(), op.name())?;
        let taps = accumulation.taps_per_unit();
        let units = k.div_ceil(taps);
        let panels = ImageShape {
            batches: rows,
            channels: 1,
            height: 1,
            width: k,
            pad: [0, 0, 0, units * taps - k],
            bytes: accumulation.uses_bytes(),
            input: layer.input.element,
            zero_point: layer.input.zero_point,
            byte_zero_point: layer.byte_zero_point(),
        };
        let tile_rows = rows.clamp(1, MAX_TILE_ROWS);
        let blocks = channels.div_ceil(8).max(1);
        // Accumulators, a broadcast per row and a product register fit in 16.
        let tile_blocks = blocks.min(12 / tile_rows).min((15 - tile_rows) / tile_rows);
        Ok(DensePlan { layer, accumulation, rows, panels, units, tile_rows, tile_blocks })
    }

    fn blocks(&self) -> usize {
        self.layer.channels.div_ceil(8)
    }

    fn row_tiles(&self) -> usize {
        self.rows.div_ceil(self.tile_rows)
    }

    fn channel_tiles(&self) -> usize {
        self.blocks().div_ceil(self.tile_blocks)
    }

    /// Weights as `[block][unit][8 channels][4 bytes]`.
    fn pack_weights(&self) -> Vec<u8> {
        let taps = self.accumulation.taps_per_unit();
        let zero_row = vec![0i32; self.layer.depth];
        let mut out = Vec::with_capacity(self.blocks() * self.units * 32);
        for block in 0..self.blocks() {
            for unit in 0..self.units {
                for lane in 0..8 {
                    let c = block * 8 + lane;
                    let row = if c < self.layer.channels { self.layer.row(c) } else { &zero_row };
                    push_unit(&mut out, row, unit, taps);
                }
            }
        }
        out
    }
}

impl OpLowering for DenseLowering {
    fn plan(&self, op: &LowerOp<'_>) -> Result<Plan, CodegenError> {
        let plan = DensePlan::new(op, &self.options)?;
        Ok(Plan::weighted_layer(op, plan.panels.scratch_bytes()))
    }

    /// `rows·O` outputs of `K` taps each.
    fn multiply_accumulates(&self, op: &LowerOp<'_>) -> u64 {
        let (Ok(x), Ok(w)) = (op.operand_shape(0), op.operand_shape(1)) else { return 0 };
        (x.iter().product::<usize>() * w.first().copied().unwrap_or(0)) as u64
    }

    fn emit(&self, op: &LowerOp<'_>, out: &mut Emit<'_>) -> EmitResult {
        let plan = DensePlan::new(op, &self.options)?;
        if plan.rows * plan.layer.channels == 0 {
            return Ok(());
        }
        let (input, output) = (out.operand(0)?, out.result(0)?);
        let scratch = out.planned_scratch(op)?;
        out.kernel(KernelCode {
            code: emit_pad(&plan.panels, input, scratch)?,
            work: plan.rows,
            work_item: "input row",
            strategy: format!(
                "{} units of {}",
                plan.units,
                if plan.accumulation.uses_bytes() { "byte quads" } else { "i16 pairs" }
            ),
        });
        let mut blob = plan.pack_weights();
        let init = plan.layer.accumulator_init(plan.accumulation);
        let records_at =
            append_aligned(&mut blob, &lane_records(&plan.layer.requant, &init, plan.layer.channels));
        let globals_at = append_aligned(&mut blob, &globals(&plan.layer));
        let rodata = out.rodata(&blob);
        let code = emit_dense_gemm(&plan, scratch, output, rodata, records_at, globals_at)?;
        out.kernel(KernelCode {
            code,
            work: plan.row_tiles() * plan.channel_tiles(),
            work_item: "tile of rows × output channels",
            strategy: format!(
                "{}; {} rows × {} channels per tile",
                plan.accumulation.describe(),
                plan.tile_rows,
                8 * plan.tile_blocks
            ),
        });
        Ok(())
    }
}

const PANELS: AsmRegister64 = r13;
const OUTPUT: AsmRegister64 = r14;
const BLOB: AsmRegister64 = r15;
const ROW_CURSOR: AsmRegister64 = rsi;
const WEIGHT_CURSOR: AsmRegister64 = rdi;
const RECORD: AsmRegister64 = rbx;
const OUT_TILE: AsmRegister64 = rdx;
const UNITS_LEFT: AsmRegister64 = rcx;
const STORE_SCRATCH: AsmRegister64 = r10;

fn emit_dense_gemm(
    plan: &DensePlan,
    panels: Place,
    output: Place,
    rodata: Place,
    records_at: usize,
    globals_at: usize,
) -> Result<Vec<u8>, CodegenError> {
    let channel_tiles = plan.channel_tiles();
    let row_bytes = plan.units * 4;
    let last_rows = plan.rows - (plan.row_tiles() - 1) * plan.tile_rows;
    let last_blocks = plan.blocks() - (channel_tiles - 1) * plan.tile_blocks;
    let last_lanes = plan.layer.channels - (plan.blocks() - 1) * 8;
    emit_item_kernel(&[(PANELS, panels), (OUTPUT, output), (BLOB, rodata)], &mut |a| {
        // i → (row tile in rax, channel tile in r8).
        split_index(a, ITEM, &[(channel_tiles, r8)])?;
        // Rows of the tile: panels + rt·tile_rows·row_bytes.
        multiply_by(a, ROW_CURSOR, rax, plan.tile_rows * row_bytes)?;
        a.add(ROW_CURSOR, PANELS)?;
        // out = output + rt·tile_rows·O + ct·tile_blocks·8
        multiply_by(a, OUT_TILE, rax, plan.tile_rows * plan.layer.channels)?;
        a.add(OUT_TILE, OUTPUT)?;
        multiply_by(a, r9, r8, plan.tile_blocks * 8)?;
        a.add(OUT_TILE, r9)?;
        multiply_by(a, WEIGHT_CURSOR, r8, plan.tile_blocks * plan.units * 32)?;
        a.add(WEIGHT_CURSOR, BLOB)?;
        multiply_by(a, RECORD, r8, plan.tile_blocks * LANE_RECORD)?;
        a.add(RECORD, BLOB)?;
        crate::kernels::add_constant(a, RECORD, records_at, r9)?;

        // The last row tile may have fewer rows and the last channel tile
        // fewer blocks (and a short last block): up to four tile variants.
        let row_tiles = plan.row_tiles();
        let split_rows = row_tiles > 1 && last_rows != plan.tile_rows;
        let split_channels = channel_tiles > 1 && (last_blocks, last_lanes) != (plan.tile_blocks, 8);
        let mut next = a.create_label();
        let by_channels = |a: &mut CodeAssembler, rows: usize| -> Result<(), CodegenError> {
            if split_channels {
                let mut last = a.create_label();
                a.cmp(r8, (channel_tiles - 1) as i32)?;
                a.je(last)?;
                emit_tile(a, plan, rows, plan.tile_blocks, 8, row_bytes, globals_at)?;
                a.jmp(next)?;
                a.set_label(&mut last)?;
            }
            emit_tile(a, plan, rows, last_blocks, last_lanes, row_bytes, globals_at)?;
            a.jmp(next)?;
            Ok(())
        };
        if split_rows {
            let mut last = a.create_label();
            a.cmp(rax, (row_tiles - 1) as i32)?;
            a.je(last)?;
            by_channels(a, plan.tile_rows)?;
            a.set_label(&mut last)?;
        }
        by_channels(a, last_rows)?;
        // The item loop's increment follows and carries the label.
        a.set_label(&mut next)?;
        Ok(())
    })
}

/// One tile of `rows` rows × `blocks` blocks, the last block storing
/// `last_lanes` channels.
fn emit_tile(
    a: &mut CodeAssembler,
    plan: &DensePlan,
    rows: usize,
    blocks: usize,
    last_lanes: usize,
    row_bytes: usize,
    globals_at: usize,
) -> Result<(), CodegenError> {
    let acc = |r: usize, b: usize| ACCUMULATORS[r * blocks + b];
    let broadcasts = &ALL_YMM[rows * blocks..rows * blocks + rows];
    let product = ALL_YMM[rows * blocks + rows];
    let block_bytes = plan.units * 32;
    let ones = ymmword_ptr(BLOB + (globals_at + crate::kernels::epilogue::GLOBAL_ONES_WORDS));
    for b in 0..blocks {
        for r in 0..rows {
            a.vmovdqu(acc(r, b), ymmword_ptr(RECORD + (b * LANE_RECORD + LANE_INIT)))?;
        }
    }
    // Cursors: rax = rows, r9 = weights (ROW_CURSOR and WEIGHT_CURSOR keep the tile's start).
    a.mov(rax, ROW_CURSOR)?;
    a.mov(r9, WEIGHT_CURSOR)?;
    let step = |a: &mut CodeAssembler, u: usize| -> Result<(), CodegenError> {
        for (r, &xb) in broadcasts.iter().enumerate() {
            a.vpbroadcastd(xb, dword_ptr(rax + (r * row_bytes + 4 * u)))?;
        }
        for b in 0..blocks {
            let w = ymmword_ptr(r9 + (b * block_bytes + 32 * u));
            for (r, &xb) in broadcasts.iter().enumerate() {
                plan.accumulation.emit_multiply_accumulate(a, acc(r, b), xb, w, (product, ones))?;
            }
        }
        Ok(())
    };
    emit_reduction(a, (plan.units, UNROLL), UNITS_LEFT, &[(rax, 4), (r9, 32)], &step)?;

    let (odd, scratch, low) = (ymm13, ymm14, ymm15);
    load_low_bound(a, &plan.layer, low, BLOB, globals_at)?;
    let unsigned = plan.layer.output.element == ElementType::U8;
    for b in 0..blocks {
        let requantizer = lane_requantizer(&plan.layer, RECORD, b * LANE_RECORD, BLOB, globals_at, low);
        let lanes = if b == blocks - 1 { last_lanes } else { 8 };
        for r in 0..rows {
            requantizer.emit(a, acc(r, b), odd, scratch)?;
            pack_8(a, acc(r, b), xmm_of(odd), xmm_of(scratch), unsigned)?;
            store_bytes(a, xmm_of(odd), OUT_TILE, r * plan.layer.channels + 8 * b, lanes, STORE_SCRATCH)?;
        }
    }
    Ok(())
}
