//! Pools on stored values: `qnn.avg_pool2d` and `qnn.global_avg_pool2d`
//! (`docs/quant-semantics.md` §7.4) and `fp.max_pool2d` / `fp.max_pool1d` on
//! quantized tensors (§9: the maximum of the stored values, padding never
//! selected).
//!
//! The windows are those of the interpreter's `fp` pools, computed here at
//! compile time into a table in rodata: per output row `oy` the first input
//! row of the window and how many rows are inside the input, per output
//! column `ox` the same for columns (taps at `first + t × dilation`), so the
//! kernel never tests a padding position. One work item is one output row of
//! one N×C plane; each window is summed (or maxed) in a general register by
//! two loops over its taps.
//!
//! **Average.** `v = Σ q − taps × zp_in`, exact in i64, equals
//! `Σ (q − zp_in)`: padding contributes 0. The divisor `n` of a window is
//! `dy(oy) × dx(ox)`: the rows and columns inside the input, or with
//! `count_include_pad` inside the padded input (the window clipped at the
//! end padding only, as the interpreter does). Each distinct `(dy, dx)` gets
//! a parameter block with `quantize_multiplier(s_in ⊘₆₄ (n ⊗₆₄ s_out))` in
//! the kernel form of `kernels/requantize.rs`, and `v` is rescaled by the shared
//! sequence on one lane (`vpmuldq` reads `v` as i32: the plan refuses
//! windows whose `taps × 255` could reach 2^31). An empty window (`n = 0`)
//! has multiplier 0, so it gives `zp_out`, as the interpreter does.
//!
//! Average taps along a window row are summed 32 at a time with `vpsadbw`
//! (exact u64 sums of bytes; i8 taps flipped to `q + 128` and the 128s taken
//! back), the rest one by one; a global pool reads its plane as one row.
//!
//! **Max.** The largest stored value of the window's taps (signed or
//! unsigned compare by the storage), starting from the storage type's
//! lowest value, which is also what an empty window gives in the
//! interpreter. Max is separable: for input rows of at most 4096 bytes a
//! row first takes the maximum down each column over the window's rows (32
//! columns per `vpmaxsb` / `vpmaxub`, into a buffer on the stack), then each
//! window the maximum of its columns there: 32 windows per tap load for
//! column strides 1 and 2 ([`RowMax`]), one window at a time otherwise;
//! wider rows take every tap.

use super::operands::QuantOperand;
use crate::abi::KernelCode;
use crate::error::CodegenError;
use crate::kernels::quant_params::{ByteQuant, FixedPointMultiplier};
use crate::kernels::registers::{broadcast_u32, broadcast_u64};
use crate::kernels::requantize::param_block;
use crate::kernels::requantize::{StageConstants, StageRegisters, STAGE_REGISTERS};
use crate::kernels::rows::{
    bind, emit_framed_rows, Frame, Nest, Stream, AUX, INPUT0, OUTPUT, ROW_LENGTH, STREAM_POINTERS,
};
use crate::lower::rows::RowKernel;
use crate::lower::{Emit, EmitResult, LowerOp};
use iced_x86::code_asm::*;
use qopt_dialect_fp::attrs::PoolAttrs;
use qopt_dialect_fp::op_names as fp_op;
use qopt_dialect_fp::shape::pool_out;
use qopt_dialect_qnn::fixed_point::{quantize_multiplier, Rounding};
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_dialect_qnn::rounding_of;

/// Which pool.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum PoolKind {
    /// `qnn.avg_pool2d`.
    Average,
    /// `qnn.global_avg_pool2d`.
    GlobalAverage,
    /// `fp.max_pool2d`.
    Max2d,
    /// `fp.max_pool1d`.
    Max1d,
}

/// The windows along one spatial axis.
#[derive(Clone, Debug, PartialEq, Eq)]
struct AxisWindows {
    /// Per output index: first input index inside the input, taps inside.
    taps: Vec<(usize, usize)>,
    /// Per output index: the divisor factor (taps inside, or inside the
    /// padded input with `count_include_pad`).
    divisor: Vec<usize>,
}

/// A pool's window along one spatial axis.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct AxisPool {
    kernel: usize,
    stride: usize,
    dilation: usize,
    pad_begin: usize,
    pad_end: usize,
}

impl AxisPool {
    /// A window of the whole axis (global pooling, or the one row of a 1-D pool).
    fn whole(size: usize) -> AxisPool {
        AxisPool { kernel: size, stride: 1, dilation: 1, pad_begin: 0, pad_end: 0 }
    }

    /// The windows of output indices `0..out` along an axis of `size` inputs.
    fn windows(&self, out: usize, size: usize, include_pad: bool) -> AxisWindows {
        let mut taps = Vec::with_capacity(out);
        let mut divisor = Vec::with_capacity(out);
        for o in 0..out {
            let start = (o * self.stride) as i64 - self.pad_begin as i64;
            let inside: Vec<usize> = (0..self.kernel)
                .map(|k| start + (k * self.dilation) as i64)
                .filter(|&i| i >= 0 && (i as usize) < size)
                .map(|i| i as usize)
                .collect();
            taps.push((inside.first().copied().unwrap_or(0), inside.len()));
            let padded =
                ((start + self.kernel as i64).min((size + self.pad_end) as i64) - start).max(0) as usize;
            divisor.push(if include_pad { padded } else { inside.len() });
        }
        AxisWindows { taps, divisor }
    }
}

/// One pool as the kernel is specialized for it.
pub(crate) struct PoolOp {
    kind: PoolKind,
    unsigned: bool,
    /// N × C.
    planes: usize,
    /// Input rows and columns (1 row for a 1-D pool).
    height: usize,
    width: usize,
    rows: AxisWindows,
    cols: AxisWindows,
    /// The window along a row, which the windows of `cols` come from.
    col_axis: AxisPool,
    /// Input steps between taps (dilation), rows and columns.
    dilation: (usize, usize),
    /// Average pools: the parameters of both sides.
    average: Option<(ByteQuant, ByteQuant)>,
}

impl PoolOp {
    fn out_shape(&self) -> (usize, usize) {
        (self.rows.taps.len(), self.cols.taps.len())
    }
}

fn read(op: &LowerOp<'_>) -> Result<PoolOp, CodegenError> {
    let kind = match op.name() {
        qnn_op::AVG_POOL2D => PoolKind::Average,
        qnn_op::GLOBAL_AVG_POOL2D => PoolKind::GlobalAverage,
        fp_op::MAX_POOL2D => PoolKind::Max2d,
        fp_op::MAX_POOL1D => PoolKind::Max1d,
        other => return Err(op.unsupported(format!("{other} is not a pool this file compiles"))),
    };
    op.expect_arity(1..=1, 1)?;
    let input = QuantOperand::of(op, op.operand_type(0), "the operand")?;
    let shape = op.operand_shape(0)?;
    let spatial = if kind == PoolKind::Max1d { 1 } else { 2 };
    if shape.len() != spatial + 2 {
        return Err(op.invalid(format!("the operand must have rank {}, got shape {shape:?}", spatial + 2)));
    }
    let (height, width) = if spatial == 2 { (shape[2], shape[3]) } else { (1, shape[2]) };
    let average = match kind {
        PoolKind::Average | PoolKind::GlobalAverage => {
            let output = QuantOperand::of(op, op.result_type(0), "the result")?;
            Some((input.per_tensor(op, "the operand")?, output.per_tensor(op, "the result")?))
        }
        PoolKind::Max2d | PoolKind::Max1d => {
            if op.ctx.element_type(op.operand_type(0)) != op.ctx.element_type(op.result_type(0)) {
                return Err(op.unsupported("max pooling changes the element type"));
            }
            None
        }
    };
    let (rows, cols, col_axis, dilation) = if kind == PoolKind::GlobalAverage {
        // The plane's one window, read as one row of H × W taps (the same
        // sum), so that its taps are one contiguous run.
        let taps = height * width;
        let whole = AxisPool::whole(taps);
        (AxisPool::whole(1).windows(1, 1, false), whole.windows(1, taps, false), whole, (1, 1))
    } else {
        let attrs = PoolAttrs::read_in(op.ctx, op.module.op_attrs(op.op), spatial, average.is_none())
            .map_err(|e| op.invalid(e))?;
        let u = |v: i64| usize::try_from(v).map_err(|_| op.invalid("pool parameters must not be negative"));
        let axis = |i: usize| -> Result<AxisPool, CodegenError> {
            Ok(AxisPool {
                kernel: u(attrs.kernel[i])?,
                stride: u(attrs.stride[i])?,
                dilation: u(attrs.dilation[i])?,
                pad_begin: u(attrs.pad[i])?,
                pad_end: u(attrs.pad[spatial + i])?,
            })
        };
        // A 1-D pool is a 2-D one of one row.
        let (row_axis, col_axis) =
            if spatial == 2 { (axis(0)?, axis(1)?) } else { (AxisPool::whole(1), axis(0)?) };
        let out_size = |size: usize, p: AxisPool| {
            let i = |v: usize| v as i64;
            pool_out(
                i(size),
                i(p.kernel),
                i(p.stride),
                i(p.pad_begin),
                i(p.pad_end),
                i(p.dilation),
                attrs.ceil_mode,
            )
            .map_err(|e| op.invalid(e))
            .and_then(|o| usize::try_from(o).map_err(|_| op.unsupported("a dynamic pool output size")))
        };
        let (oh, ow) = (out_size(height, row_axis)?, out_size(width, col_axis)?);
        (
            row_axis.windows(oh, height, attrs.count_include_pad),
            col_axis.windows(ow, width, attrs.count_include_pad),
            col_axis,
            (row_axis.dilation, col_axis.dilation),
        )
    };
    let (height, width) = if kind == PoolKind::GlobalAverage { (1, height * width) } else { (height, width) };
    let pool = PoolOp {
        kind,
        unsigned: input.unsigned,
        planes: shape[0] * shape[1],
        height,
        width,
        rows,
        cols,
        col_axis,
        dilation,
        average,
    };
    let (oh, ow) = pool.out_shape();
    let want: Vec<usize> =
        if spatial == 2 { vec![shape[0], shape[1], oh, ow] } else { vec![shape[0], shape[1], ow] };
    if op.result_shape(0)? != want {
        return Err(op.invalid(format!("the result shape must be {want:?}")));
    }
    if pool.average.is_some() {
        let most_taps = pool.rows.taps.iter().map(|t| t.1).max().unwrap_or(0)
            * pool.cols.taps.iter().map(|t| t.1).max().unwrap_or(0);
        if (most_taps as u128) * 255 >= 1 << 31 {
            return Err(
                op.unsupported(format!("windows of {most_taps} taps are too large for the 32-bit sums"))
            );
        }
    }
    let plane_bytes = height.checked_mul(width).filter(|&b| i32::try_from(b).is_ok());
    if plane_bytes.is_none() || i32::try_from(oh * ow).is_err() {
        return Err(op.unsupported("planes of more than 2^31 elements"));
    }
    Ok(pool)
}

/// `qnn.avg_pool2d`, `qnn.global_avg_pool2d`, `fp.max_pool2d`,
/// `fp.max_pool1d`.
pub(crate) struct Pool;

impl RowKernel for Pool {
    type Op<'a> = PoolOp;

    fn read<'a>(&self, op: &LowerOp<'a>) -> Result<PoolOp, CodegenError> {
        read(op)
    }

    fn emit_rows(&self, op: &LowerOp<'_>, pool: Self::Op<'_>, out: &mut Emit<'_>) -> EmitResult {
        let rounding = rounding_of(op.ctx, op.module.op_attrs(op.op));
        let table = PoolTable::new(&pool, rounding)?;
        let place = out.rodata(&table.bytes);
        out.kernel(emit_pool(&pool, place, out.operand(0)?, out.result(0)?, rounding)?);
        Ok(())
    }
}

/// Bytes per row or column entry of the table.
const ENTRY: usize = 16;

/// The rodata of one pool: row entries, column entries, then (average
/// pools) the parameter blocks, one per (row class, column class).
struct PoolTable {
    bytes: Vec<u8>,
}

/// The distinct values of `factors` in order of appearance, and the class
/// of each.
fn classes(factors: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let mut distinct: Vec<usize> = Vec::new();
    let of = factors
        .iter()
        .map(|f| match distinct.iter().position(|d| d == f) {
            Some(i) => i,
            None => {
                distinct.push(*f);
                distinct.len() - 1
            }
        })
        .collect();
    (distinct, of)
}

impl PoolTable {
    fn new(pool: &PoolOp, rounding: Rounding) -> Result<PoolTable, CodegenError> {
        let (oh, ow) = pool.out_shape();
        let (row_values, row_class) = classes(&pool.rows.divisor);
        let (col_values, col_class) = classes(&pool.cols.divisor);
        let blocks_at = ENTRY * (oh + ow);
        let block = crate::kernels::requantize::PARAM_BLOCK;
        let mut bytes = Vec::with_capacity(blocks_at + block * row_values.len() * col_values.len());
        let mut entry = |first: usize, count: usize, offset: usize| {
            for v in [first as u32, count as u32, offset as u32, 0] {
                bytes.extend_from_slice(&v.to_le_bytes());
            }
        };
        for (oy, &(first, count)) in pool.rows.taps.iter().enumerate() {
            entry(first * pool.width, count, blocks_at + row_class[oy] * col_values.len() * block);
        }
        for (ox, &(first, count)) in pool.cols.taps.iter().enumerate() {
            entry(first, count, col_class[ox] * block);
        }
        if let Some((input, output)) = &pool.average {
            for &row_factor in &row_values {
                for &col_factor in &col_values {
                    let n = row_factor * col_factor;
                    let stage = if n == 0 {
                        StageConstants::with_shift(0, 1, rounding, output)
                    } else {
                        let real = input.scale / (n as f64 * output.scale);
                        let (multiplier, shift) = quantize_multiplier(real)
                            .map_err(|e| CodegenError::new(crate::CodegenErrorKind::InvalidInput, e))?;
                        StageConstants::single_term(
                            FixedPointMultiplier { multiplier, shift },
                            rounding,
                            output,
                        )
                    };
                    bytes.extend(param_block(0, &stage));
                }
            }
        }
        if u32::try_from(bytes.len()).is_err() {
            return Err(CodegenError::new(crate::CodegenErrorKind::Unsupported, "a pool table beyond 4 GiB"));
        }
        Ok(PoolTable { bytes })
    }
}

/// Registers of the averaging stage (per window from its block: bias and shift).
const REGS: StageRegisters = STAGE_REGISTERS;

/// The widest input row the separable max pool buffers on the stack.
const SEPARABLE_MAX_WIDTH: usize = 4096;

/// The storage's lowest value in every byte (the separable max pool).
const LOWEST_BYTES: AsmRegisterYmm = ymm5;
/// The byte shuffle that gathers each 128-bit lane's even bytes into its
/// low half and its odd bytes into its high half.
const EVEN_ODD_BYTES: AsmRegisterYmm = ymm7;

/// A separable max pool's second stage as vector loads, for column strides
/// 1 and 2: output `ox`'s taps are the column maxima at `2·ox − pad + t·d`
/// (stride 2) or `ox − pad + t·d`, so 32 outputs take one load and one
/// `vpmax` per tap. The column maxima sit at [`ROW_MAX_MARGIN`] in a stack
/// buffer whose bytes outside the input row hold the storage's lowest value,
/// the identity of max (an empty window gives it too, as in the
/// interpreter), so no window is clipped. With stride 2 the buffer is first
/// split into its even and odd bytes (`vpshufb`, `vpermq`), where each tap
/// is a contiguous run again.
#[derive(Copy, Clone, Debug)]
struct RowMax {
    kernel: usize,
    stride: usize,
    dilation: usize,
    pad_begin: usize,
    width: usize,
    outputs: usize,
}

/// Where the column maxima start in the buffer: room for the leading pad.
const ROW_MAX_MARGIN: usize = 64;

impl RowMax {
    fn plan(pool: &PoolOp) -> Option<RowMax> {
        let axis = pool.col_axis;
        let outputs = pool.cols.taps.len();
        let fits = (1..=2).contains(&axis.stride)
            && axis.pad_begin <= ROW_MAX_MARGIN
            && axis.kernel.saturating_mul(axis.dilation) <= 256
            && outputs > 0;
        fits.then_some(RowMax {
            kernel: axis.kernel,
            stride: axis.stride,
            dilation: axis.dilation,
            pad_begin: axis.pad_begin,
            width: pool.width,
            outputs,
        })
    }

    fn vectors(&self) -> usize {
        self.outputs.div_ceil(32)
    }

    /// Buffer offset of output 0's window start.
    fn start(&self) -> usize {
        ROW_MAX_MARGIN - self.pad_begin
    }

    /// Bytes of each of the even and odd runs (stride 2).
    fn phase_len(&self) -> usize {
        (self.vectors() * 32 + (self.kernel - 1) * self.dilation / 2 + 1).next_multiple_of(16)
    }

    /// The end of the buffer bytes the windows (or the even/odd split) read.
    fn read_end(&self) -> usize {
        match self.stride {
            1 => self.start() + self.vectors() * 32 + (self.kernel - 1) * self.dilation,
            _ => self.start() + 2 * self.phase_len(),
        }
    }

    /// Buffer offset of the even run (stride 2), the odd run following it.
    fn phases_at(&self) -> usize {
        self.read_end().next_multiple_of(32) + 32
    }

    fn buffer_bytes(&self) -> usize {
        match self.stride {
            1 => self.read_end() + 32,
            _ => self.phases_at() + 2 * self.phase_len() + 32,
        }
    }

    /// Buffer offset of output 0's tap `t`.
    fn tap(&self, t: usize) -> usize {
        let step = t * self.dilation;
        match self.stride {
            1 => self.start() + step,
            _ => self.phases_at() + (step % 2) * self.phase_len() + step / 2,
        }
    }
}

/// The second stage of [`RowMax`] for the row whose column maxima are at
/// `rsp + base + ROW_MAX_MARGIN`: fills the bytes around them with the
/// lowest value, splits them by parity (stride 2), then computes and stores
/// the row's outputs at rdi, exactly `outputs` bytes.
fn emit_row_max(a: &mut CodeAssembler, plan: &RowMax, unsigned: bool, base: i32) -> Result<(), CodegenError> {
    let dst = STREAM_POINTERS[OUTPUT];
    let at = |offset: usize| base + offset as i32;
    a.vmovdqu(ymmword_ptr(rsp + at(0)), LOWEST_BYTES)?;
    a.vmovdqu(ymmword_ptr(rsp + at(32)), LOWEST_BYTES)?;
    let filled_from = ROW_MAX_MARGIN + plan.width;
    for k in 0..plan.read_end().saturating_sub(filled_from).div_ceil(32) {
        a.vmovdqu(ymmword_ptr(rsp + at(filled_from + 32 * k)), LOWEST_BYTES)?;
    }
    if plan.stride == 2 {
        let mut split = a.create_label();
        a.xor(ecx, ecx)?;
        bind(a, &mut split)?;
        a.vmovdqu(ymm0, ymmword_ptr(rsp + rcx * 2 + at(plan.start())))?;
        a.vpshufb(ymm0, ymm0, EVEN_ODD_BYTES)?;
        a.vpermq(ymm0, ymm0, 0xD8)?;
        a.vmovdqu(xmmword_ptr(rsp + rcx + at(plan.phases_at())), xmm0)?;
        a.vextracti128(xmmword_ptr(rsp + rcx + at(plan.phases_at() + plan.phase_len())), ymm0, 1)?;
        a.add(rcx, 16)?;
        a.cmp(rcx, plan.phase_len() as i32)?;
        a.jb(split)?;
    }
    let window = |a: &mut CodeAssembler, index: AsmRegister64, first: usize| -> Result<(), IcedError> {
        a.vmovdqu(ymm0, ymmword_ptr(rsp + index + at(plan.tap(0) + first)))?;
        for t in 1..plan.kernel {
            let tap = ymmword_ptr(rsp + index + at(plan.tap(t) + first));
            if unsigned {
                a.vpmaxub(ymm0, ymm0, tap)?;
            } else {
                a.vpmaxsb(ymm0, ymm0, tap)?;
            }
        }
        Ok(())
    };
    let (full, tail) = (plan.outputs / 32, plan.outputs % 32);
    if full > 0 {
        let mut vector = a.create_label();
        a.xor(ecx, ecx)?;
        bind(a, &mut vector)?;
        window(a, rcx, 0)?;
        a.vmovdqu(ymmword_ptr(dst + rcx), ymm0)?;
        a.add(rcx, 32)?;
        a.cmp(rcx, (32 * full) as i32)?;
        a.jb(vector)?;
    }
    if tail > 0 {
        a.xor(ecx, ecx)?;
        window(a, rcx, 32 * full)?;
        let mut stored = 32 * full;
        if tail >= 16 {
            a.vmovdqu(xmmword_ptr(dst + stored), xmm0)?;
            a.vextracti128(xmm0, ymm0, 1)?;
            stored += 16;
        }
        if tail % 16 > 0 {
            crate::kernels::epilogue::store_bytes(a, xmm0, dst, stored, tail % 16, rax)?;
        }
    }
    Ok(())
}

/// The row body of a separable max pool (see `emit_pool`): rsi is the
/// window rows' base, `tap_rows` their count, rdi the output row, rdx its
/// length, r9 the first column entry; the column maxima go to the stack
/// buffer at `rsp + buffer`, at [`ROW_MAX_MARGIN`] when `row_max` takes the
/// windows along the row.
fn emit_separable_max(
    a: &mut CodeAssembler,
    unsigned: bool,
    width: i32,
    (row_step, col_step): (i32, i32),
    tap_rows: AsmMemoryOperand,
    (buffer, row_max): (i32, Option<&RowMax>),
) -> Result<(), CodegenError> {
    let buffer_at = if row_max.is_some() { buffer + ROW_MAX_MARGIN as i32 } else { buffer };
    let (src, dst) = (STREAM_POINTERS[INPUT0], STREAM_POINTERS[OUTPUT]);
    let lowest: i64 = if unsigned { 0 } else { -128 };
    let load_tap = |a: &mut CodeAssembler, at: AsmMemoryOperand| -> Result<(), IcedError> {
        if unsigned {
            a.movzx(ebp, at)
        } else {
            a.movsx(rbp, at)
        }
    };
    // Down the columns, 32 at a time: ymm0 = max(lowest, taps of each row);
    // rows narrower than 32 one column at a time.
    let (
        mut wide,
        mut wide_rows,
        mut wide_store,
        mut narrow,
        mut narrow_rows,
        mut narrow_store,
        mut columns_done,
    ) = (
        a.create_label(),
        a.create_label(),
        a.create_label(),
        a.create_label(),
        a.create_label(),
        a.create_label(),
        a.create_label(),
    );
    a.xor(ecx, ecx)?;
    a.cmp(rcx, width - 31)?;
    a.jge(narrow)?;
    bind(a, &mut wide)?;
    a.vmovdqa(ymm0, LOWEST_BYTES)?;
    a.mov(r8, tap_rows)?;
    a.lea(r11, qword_ptr(src + rcx))?;
    a.test(r8, r8)?;
    a.jz(wide_store)?;
    bind(a, &mut wide_rows)?;
    if unsigned {
        a.vpmaxub(ymm0, ymm0, ymmword_ptr(r11))?;
    } else {
        a.vpmaxsb(ymm0, ymm0, ymmword_ptr(r11))?;
    }
    a.add(r11, row_step)?;
    a.dec(r8)?;
    a.jnz(wide_rows)?;
    bind(a, &mut wide_store)?;
    a.vmovdqu(ymmword_ptr(rsp + rcx + buffer_at), ymm0)?;
    a.add(rcx, 32)?;
    a.cmp(rcx, width - 31)?;
    a.jl(wide)?;
    bind(a, &mut narrow)?;
    a.cmp(rcx, width)?;
    a.jge(columns_done)?;
    if width >= 32 {
        // The last columns as one more vector ending at the row's end,
        // overlapping columns already done (with the same values).
        a.mov(ecx, width - 32)?;
        a.jmp(wide)?;
    }
    let mut narrow_each = a.create_label();
    bind(a, &mut narrow_each)?;
    a.mov(rax, lowest)?;
    a.mov(r8, tap_rows)?;
    a.lea(r11, qword_ptr(src + rcx))?;
    a.test(r8, r8)?;
    a.jz(narrow_store)?;
    bind(a, &mut narrow_rows)?;
    load_tap(a, byte_ptr(r11))?;
    a.cmp(rax, rbp)?;
    a.cmovl(rax, rbp)?;
    a.add(r11, row_step)?;
    a.dec(r8)?;
    a.jnz(narrow_rows)?;
    bind(a, &mut narrow_store)?;
    a.mov(byte_ptr(rsp + rcx + buffer_at), al)?;
    a.inc(rcx)?;
    a.cmp(rcx, width)?;
    a.jl(narrow_each)?;
    bind(a, &mut columns_done)?;
    if let Some(plan) = row_max {
        return emit_row_max(a, plan, unsigned, buffer);
    }
    // Along each window's columns of the column maxima.
    let (mut window, mut tap, mut store) = (a.create_label(), a.create_label(), a.create_label());
    bind(a, &mut window)?;
    a.mov(r10d, dword_ptr(r9 + 4))?;
    a.imul_3(r10, r10, col_step)?; // end offset of the window's columns
    a.mov(ecx, dword_ptr(r9))?;
    a.lea(rcx, qword_ptr(rsp + rcx + buffer_at))?;
    a.mov(rax, lowest)?;
    a.test(r10, r10)?;
    a.jz(store)?;
    a.xor(r11d, r11d)?;
    bind(a, &mut tap)?;
    load_tap(a, byte_ptr(rcx + r11))?;
    a.cmp(rax, rbp)?;
    a.cmovl(rax, rbp)?;
    a.add(r11, col_step)?;
    a.cmp(r11, r10)?;
    a.jb(tap)?;
    bind(a, &mut store)?;
    a.mov(byte_ptr(dst), al)?;
    a.inc(dst)?;
    a.add(r9, ENTRY as i32)?;
    a.dec(ROW_LENGTH)?;
    a.jnz(window)?;
    Ok(())
}

/// 0x80 in every byte: flips i8 taps to u8 for `vpsadbw`.
const SIGN_BYTES: AsmRegisterYmm = ymm6;

/// The kernel: rows are (plane, oy); each row computes `ow` windows.
///
/// Registers in a row: rsi the window rows' base (plane + first row), rdi
/// the output, rdx the columns left, r9 the column entry; in a window: rax
/// the sum or max, rcx the tap row, r8 rows left, r10 the end offset of a
/// tap row, r11 the tap offset, rbp the tap. Locals: the row entry's tap
/// rows and block offset.
fn emit_pool(
    pool: &PoolOp,
    table: crate::abi::Place,
    input: crate::abi::Place,
    output: crate::abi::Place,
    rounding: Rounding,
) -> Result<KernelCode, CodegenError> {
    let (oh, ow) = pool.out_shape();
    let plane = (pool.height * pool.width) as i64;
    let nest = Nest::new(&[pool.planes, oh, ow])
        .with(INPUT0, Stream { place: input, offset: 0, element_size: 1, strides: vec![plane, 0, 0] })
        .with(OUTPUT, Stream::contiguous(output, &[pool.planes, oh, ow], 1))
        .with(AUX, Stream { place: table, offset: 0, element_size: 0, strides: vec![0, 0, 0] });
    let (rows_at, cols_at) = (0i32, (ENTRY * oh) as i32);
    let (row_step, col_step) = ((pool.dilation.0 * pool.width) as i32, pool.dilation.1 as i32);
    let (src, dst, tbl) = (STREAM_POINTERS[INPUT0], STREAM_POINTERS[OUTPUT], STREAM_POINTERS[AUX]);
    let unsigned = pool.unsigned;
    let average = pool.average;
    // Average windows whose taps are contiguous along a row sum 32 at a time.
    let vector_sums = average.is_some() && col_step == 1;
    let strategy = match pool.kind {
        PoolKind::Max2d | PoolKind::Max1d => "scalar window max, taps from a table",
        _ => "exact window sums (vpsadbw over contiguous taps), one rescale per window",
    };
    // Max pools over rows of at most SEPARABLE_MAX_WIDTH bytes first take the
    // maximum down each column of the window's rows (32 columns at a time, into
    // a buffer on the stack), then along each window's columns of that.
    let separable = average.is_none() && pool.width <= SEPARABLE_MAX_WIDTH;
    let width = pool.width as i32;
    let row_max = if separable { RowMax::plan(pool) } else { None };
    let strategy = match (separable, row_max) {
        (true, Some(_)) => "window max down columns, then along rows, 32 at a time",
        (true, None) => "window max down columns 32 at a time, then along rows",
        (false, _) => strategy,
    };
    let buffer_qwords = match (separable, row_max) {
        (true, Some(plan)) => plan.buffer_bytes().div_ceil(8),
        (true, None) => pool.width.div_ceil(8),
        (false, _) => 0,
    };
    emit_framed_rows(
        &nest,
        usize::MAX,
        Frame { locals: 2 + buffer_qwords, float_environment: false },
        &|a| {
            if separable {
                broadcast_u64(a, LOWEST_BYTES, if unsigned { 0 } else { 0x8080_8080_8080_8080 })?;
            }
            if row_max.is_some_and(|plan| plan.stride == 2) {
                a.mov(rax, 0x0E0C_0A08_0604_0200u64)?;
                a.vmovq(xmm0, rax)?;
                a.mov(rax, 0x0F0D_0B09_0705_0301u64)?;
                a.vpinsrq(xmm0, xmm0, rax, 1)?;
                a.vinserti128(EVEN_ODD_BYTES, ymm0, xmm0, 1)?;
            }
            if let Some((_, out)) = &average {
                a.vpxor(REGS.zero, REGS.zero, REGS.zero)?;
                broadcast_u64(a, REGS.one, 1)?;
                broadcast_u64(a, REGS.low, i64::from(out.qmin - out.zero_point) as u64)?;
                broadcast_u64(a, REGS.high, i64::from(out.qmax - out.zero_point) as u64)?;
                broadcast_u32(a, REGS.zp_out, out.zero_point as u32)?;
                if !unsigned {
                    broadcast_u64(a, SIGN_BYTES, 0x8080_8080_8080_8080)?;
                }
            }
            Ok(())
        },
        &|a, row| {
            let (tap_rows, row_blocks) = (row.locals[0], row.locals[1]);
            // The row entry of oy: rsi += first row offset; locals = count, block offset.
            a.mov(rax, row.counters[1])?;
            a.shl(rax, 4)?;
            a.add(rax, tbl)?;
            a.movsxd(rcx, dword_ptr(rax + rows_at))?;
            a.add(src, rcx)?;
            a.mov(ecx, dword_ptr(rax + rows_at + 4))?;
            a.mov(tap_rows, rcx)?;
            a.mov(ecx, dword_ptr(rax + rows_at + 8))?;
            a.add(rcx, tbl)?;
            a.mov(row_blocks, rcx)?;
            a.lea(r9, qword_ptr(tbl + cols_at))?;
            if separable {
                return emit_separable_max(
                    a,
                    unsigned,
                    width,
                    (row_step, col_step),
                    tap_rows,
                    (row.locals_at + 16, row_max.as_ref()),
                );
            }
            let (mut window, mut tap_row, mut tap, mut summed) =
                (a.create_label(), a.create_label(), a.create_label(), a.create_label());
            bind(a, &mut window)?;
            a.mov(r10d, dword_ptr(r9 + 4))?; // tap columns
            a.imul_3(r10, r10, col_step)?; // end offset of a tap row
            a.mov(ecx, dword_ptr(r9))?;
            a.add(rcx, src)?; // first tap
            a.mov(r8, tap_rows)?;
            if vector_sums {
                a.vpxor(ymm3, ymm3, ymm3)?;
            }
            if average.is_some() {
                a.xor(eax, eax)?;
            } else if unsigned {
                a.xor(eax, eax)?; // 0, the lowest u8
            } else {
                a.mov(rax, -128i64)?;
            }
            a.test(r8, r8)?;
            a.jz(summed)?;
            a.test(r10, r10)?;
            a.jz(summed)?;
            bind(a, &mut tap_row)?;
            a.xor(r11d, r11d)?;
            let mut row_end = a.create_label();
            if vector_sums {
                // 32 taps at a time: vpsadbw against zero sums bytes (as
                // unsigned; i8 taps are offset by 128 first, taken back at
                // the end) into four exact u64 lanes of ymm3.
                let (mut wide, mut narrow) = (a.create_label(), a.create_label());
                a.lea(rbp, qword_ptr(r11 + 32))?;
                a.cmp(rbp, r10)?;
                a.ja(narrow)?;
                bind(a, &mut wide)?;
                a.vmovdqu(ymm2, ymmword_ptr(rcx + r11))?;
                if !unsigned {
                    a.vpxor(ymm2, ymm2, SIGN_BYTES)?;
                }
                a.vpsadbw(ymm2, ymm2, REGS.zero)?;
                a.vpaddq(ymm3, ymm3, ymm2)?;
                a.add(r11, 32)?;
                a.lea(rbp, qword_ptr(r11 + 32))?;
                a.cmp(rbp, r10)?;
                a.jbe(wide)?;
                bind(a, &mut narrow)?;
                a.cmp(r11, r10)?;
                a.jae(row_end)?;
            }
            bind(a, &mut tap)?;
            if unsigned {
                a.movzx(ebp, byte_ptr(rcx + r11))?;
            } else {
                a.movsx(rbp, byte_ptr(rcx + r11))?;
            }
            if average.is_some() {
                a.add(rax, rbp)?;
            } else {
                a.cmp(rax, rbp)?;
                a.cmovl(rax, rbp)?;
            }
            a.add(r11, col_step)?;
            a.cmp(r11, r10)?;
            a.jb(tap)?;
            bind(a, &mut row_end)?;
            a.add(rcx, row_step)?;
            a.dec(r8)?;
            a.jnz(tap_row)?;
            bind(a, &mut summed)?;
            if vector_sums {
                a.vextracti128(xmm2, ymm3, 1)?;
                a.vpaddq(xmm2, xmm2, xmm3)?;
                a.vpshufd(xmm4, xmm2, 0x4E)?;
                a.vpaddq(xmm2, xmm2, xmm4)?;
                a.vmovq(rbp, xmm2)?;
                a.add(rax, rbp)?;
                if !unsigned {
                    // Take back 128 per tap summed 32 at a time.
                    a.mov(ebp, dword_ptr(r9 + 4))?;
                    a.and(rbp, -32)?;
                    a.imul_2(rbp, tap_rows)?;
                    a.shl(rbp, 7)?;
                    a.sub(rax, rbp)?;
                }
            }
            if let Some((input, _)) = &average {
                // v = sum − taps × zp_in; taps = tap rows × tap columns.
                a.mov(r8d, dword_ptr(r9 + 4))?;
                a.imul_2(r8, tap_rows)?;
                a.imul_3(r8, r8, input.zero_point)?;
                a.sub(rax, r8)?;
                a.mov(r8d, dword_ptr(r9 + 8))?;
                a.add(r8, row_blocks)?; // the window's parameter block
                a.vmovq(xmm0, rax)?;
                a.vpmuldq(ymm0, ymm0, ymmword_ptr(r8 + 32))?;
                a.vmovdqu(REGS.bias, ymmword_ptr(r8 + 64))?;
                a.vmovdqu(REGS.shift, xmmword_ptr(r8 + 96))?;
                REGS.requantizer(rounding, REGS.zero).emit_one(a, ymm0, ymm1)?;
                a.vmovd(eax, xmm0)?;
            }
            a.mov(byte_ptr(dst), al)?;
            a.inc(dst)?;
            a.add(r9, ENTRY as i32)?;
            a.dec(ROW_LENGTH)?;
            a.jnz(window)?;
            Ok(())
        },
        strategy.into(),
    )
}

#[cfg(test)]
mod tests {
    use crate::kernels::testing::*;

    /// A small deterministic generator.
    struct Dice(u64);
    impl Dice {
        fn next(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    /// The output size of a pool axis (the dialect's rule), or None.
    fn out(size: usize, k: usize, s: usize, d: usize, b: usize, e: usize, ceil: bool) -> Option<usize> {
        let i = |v: usize| v as i64;
        qopt_dialect_fp::shape::pool_out(i(size), i(k), i(s), i(b), i(e), i(d), ceil).ok().map(|o| o as usize)
    }

    const ROUNDINGS: [&str; 3] = ["half_away_from_zero", "half_to_even", "half_up"];

    #[test]
    fn average_pools_match_the_interpreter() {
        if !avx2_here() {
            return;
        }
        let mut dice = Dice(0x5eed);
        let mut cases = 0;
        while cases < 150 {
            let (n, c, h, w) = (1 + dice.next(2), 1 + dice.next(3), 1 + dice.next(9), 1 + dice.next(9));
            let (kh, kw, sh, sw) = (1 + dice.next(4), 1 + dice.next(4), 1 + dice.next(3), 1 + dice.next(3));
            let pads = [dice.next(kh), dice.next(kw), dice.next(kh), dice.next(kw)];
            let (ceil, include) = (dice.next(2) == 1, dice.next(2) == 1);
            let (Some(oh), Some(ow)) =
                (out(h, kh, sh, 1, pads[0], pads[2], ceil), out(w, kw, sw, 1, pads[1], pads[3], ceil))
            else {
                continue;
            };
            cases += 1;
            let (sin, sout) = (["i8", "u8"][dice.next(2)], ["i8", "u8", "i8<-127:127>"][dice.next(3)]);
            let zp = |s: &str, dice: &mut Dice| {
                if s.starts_with('u') {
                    dice.next(256) as i64
                } else {
                    dice.next(255) as i64 - 127
                }
            };
            let (zin, zout) = (zp(sin, &mut dice), zp(sout, &mut dice));
            let s_in = [0.5, 0.013, 1.0, 3.0][dice.next(4)];
            let s_out = [s_in, s_in / 2.0, 0.07, 1e-3, 40.0][dice.next(5)];
            let rounding = ROUNDINGS[dice.next(3)];
            let attrs = format!(
                "{{kernel = [{kh}, {kw}], stride = [{sh}, {sw}], pad = [{}, {}, {}, {}], ceil_mode = {ceil}, \
                 count_include_pad = {include}, rounding = \"{rounding}\"}}",
                pads[0], pads[1], pads[2], pads[3]
            );
            let tin = tensor_type(&[n, c, h, w], &quant(sin, s_in, zin));
            let tout = tensor_type(&[n, c, oh, ow], &quant(sout, s_out, zout));
            let x = byte_tensor(&[n, c, h, w], sin == "u8", random_bytes(cases, n * c * h * w));
            check(&one_op("qnn.avg_pool2d", &attrs, &[&tin], &[&tout]), std::slice::from_ref(&x));
            let tglobal = tensor_type(&[n, c, 1, 1], &quant(sout, s_out, zout));
            check(
                &one_op(
                    "qnn.global_avg_pool2d",
                    &format!("{{rounding = \"{rounding}\"}}"),
                    &[&tin],
                    &[&tglobal],
                ),
                &[x],
            );
        }
    }

    #[test]
    fn wide_windows_sum_32_taps_at_a_time() {
        if !avx2_here() {
            return;
        }
        for (sin, zp) in [("i8", -128), ("u8", 255), ("i8", 127), ("u8", 0)] {
            for (kw, pad, include) in
                [(40, [1, 3, 0, 5], false), (33, [0, 32, 1, 0], true), (64, [0, 0, 0, 0], false)]
            {
                let (h, w) = (5, 70);
                let i = |v: usize| v as i64;
                let oh = qopt_dialect_fp::shape::pool_out(i(h), 2, 1, i(pad[0]), i(pad[2]), 1, false).unwrap()
                    as usize;
                let ow = qopt_dialect_fp::shape::pool_out(i(w), i(kw), 7, i(pad[1]), i(pad[3]), 1, false)
                    .unwrap() as usize;
                let tin = tensor_type(&[1, 2, h, w], &quant(sin, 0.3, zp));
                // Output steps of 2 input steps: means of ±255 steps stay in range.
                let tout = tensor_type(&[1, 2, oh, ow], &quant("i8", 0.6, 3));
                let attrs = format!(
                    "{{kernel = [2, {kw}], stride = [1, 7], pad = [{}, {}, {}, {}], count_include_pad = {include}}}",
                    pad[0], pad[1], pad[2], pad[3]
                );
                let x = byte_tensor(&[1, 2, h, w], sin == "u8", random_bytes(kw as u64, 2 * h * w));
                check(&one_op("qnn.avg_pool2d", &attrs, &[&tin], &[&tout]), &[x]);
            }
        }
    }

    #[test]
    fn global_average_of_a_large_plane() {
        if !avx2_here() {
            return;
        }
        for (sin, zp) in [("i8", -128), ("u8", 255), ("u8", 0)] {
            let tin = tensor_type(&[1, 3, 57, 61], &quant(sin, 1.0, zp));
            let tout = tensor_type(&[1, 3, 1, 1], &quant("i8", 2.0, 0));
            let x = byte_tensor(&[1, 3, 57, 61], sin == "u8", random_bytes(9, 3 * 57 * 61));
            check(&one_op("qnn.global_avg_pool2d", "", &[&tin], &[&tout]), &[x]);
        }
    }

    /// §7.4's example: [[10, 12, 15], [11, 13, 20]], 2×2 windows → −2, 5;
    /// global → 2.
    #[test]
    fn worked_example() {
        if !avx2_here() {
            return;
        }
        let tin = "tensor<1x1x2x3x!qnn.uniform<u8:f32, 0.5:10>>";
        let x = byte_tensor(&[1, 1, 2, 3], true, vec![10, 12, 15, 11, 13, 20]);
        let mut ctx = context();
        for (op, attrs, shape, want) in [
            ("qnn.avg_pool2d", "{kernel = [2, 2]}", [1usize, 1, 1, 2], vec![-2i8, 5]),
            ("qnn.global_avg_pool2d", "", [1, 1, 1, 1], vec![2]),
        ] {
            let tout = tensor_type(&shape, &quant("i8", 0.25, -5));
            let module = parse(&mut ctx, &one_op(op, attrs, &[tin], &[&tout]));
            let compiled = compile_op(&ctx, &module, the_op(&module)).unwrap();
            let like = byte_tensor(&shape, false, vec![0; want.len()]);
            let got = compiled.run(std::slice::from_ref(&x), &[like], 1);
            assert_eq!(bytes_of(&got[0]), want.iter().map(|&v| v as u8).collect::<Vec<_>>(), "{op}");
        }
    }

    #[test]
    fn max_pools_match_the_interpreter() {
        if !avx2_here() {
            return;
        }
        let mut dice = Dice(0xfeed);
        let mut cases = 0;
        while cases < 150 {
            let one_d = dice.next(4) == 0;
            let (n, c, h, w) = (
                1 + dice.next(2),
                1 + dice.next(3),
                if one_d { 1 } else { 1 + dice.next(9) },
                // Rows past 32 outputs too: whole vectors and a tail.
                if dice.next(3) == 0 { 30 + dice.next(60) } else { 1 + dice.next(12) },
            );
            let (kh, kw, sh, sw) = (1 + dice.next(3), 1 + dice.next(4), 1 + dice.next(3), 1 + dice.next(3));
            let (dh, dw) = (1 + dice.next(2), 1 + dice.next(3));
            let pads = [
                dice.next(dh * (kh - 1) + 1),
                dice.next(dw * (kw - 1) + 1),
                dice.next(dh * (kh - 1) + 1),
                dice.next(dw * (kw - 1) + 1),
            ];
            let ceil = dice.next(2) == 1;
            let element = [
                "!qnn.uniform<i8:f32, 0.5:3>",
                "!qnn.uniform<u8:f32, 0.5:100>",
                "!qnn.uniform<i8:f32:1, {0.1:0, 0.2:1, 0.3:2}>",
            ][dice.next(3)];
            let c = if element.contains("{") { 3 } else { c };
            let Some(ow) = out(w, kw, sw, dw, pads[1], pads[3], ceil) else { continue };
            let x_unsigned = element.contains("u8");
            let (op, attrs, in_shape, out_shape) = if one_d {
                (
                    "fp.max_pool1d",
                    format!("{{kernel = [{kw}], stride = [{sw}], dilation = [{dw}], pad = [{}, {}], ceil_mode = {ceil}}}", pads[1], pads[3]),
                    vec![n, c, w],
                    vec![n, c, ow],
                )
            } else {
                let Some(oh) = out(h, kh, sh, dh, pads[0], pads[2], ceil) else { continue };
                (
                    "fp.max_pool2d",
                    format!(
                        "{{kernel = [{kh}, {kw}], stride = [{sh}, {sw}], dilation = [{dh}, {dw}], pad = [{}, {}, {}, {}], ceil_mode = {ceil}}}",
                        pads[0], pads[1], pads[2], pads[3]
                    ),
                    vec![n, c, h, w],
                    vec![n, c, oh, ow],
                )
            };
            cases += 1;
            let x = byte_tensor(&in_shape, x_unsigned, random_bytes(cases, in_shape.iter().product()));
            check(
                &one_op(
                    op,
                    &attrs,
                    &[&tensor_type(&in_shape, element)],
                    &[&tensor_type(&out_shape, element)],
                ),
                &[x],
            );
        }
    }

    /// Rows of 70 to 200 bytes (column maxima 32 at a time and a tail; row
    /// windows by vector for strides 1 and 2, one by one for stride 3) and
    /// of 5000 bytes (too wide for the stack buffer: every tap).
    #[test]
    fn max_pools_of_wide_rows() {
        if !avx2_here() {
            return;
        }
        let cases: [(usize, usize, &str); 7] = [
            (70, 3, "{kernel = [3, 3], stride = [2, 2], pad = [1, 1, 1, 1]}"),
            (
                100,
                4,
                "{kernel = [2, 5], stride = [1, 3], dilation = [2, 2], pad = [1, 4, 0, 2], ceil_mode = true}",
            ),
            (96, 2, "{kernel = [2, 1], stride = [1, 1]}"),
            (113, 3, "{kernel = [3, 3], stride = [2, 2], ceil_mode = true}"),
            (150, 2, "{kernel = [1, 4], stride = [1, 2], dilation = [1, 3], pad = [0, 9, 0, 9]}"),
            (200, 3, "{kernel = [2, 7], stride = [1, 1], pad = [1, 3, 1, 3]}"),
            (5000, 3, "{kernel = [3, 3], stride = [2, 2], pad = [1, 1, 1, 1]}"),
        ];
        for (w, h, attrs) in cases {
            let mut ctx = context();
            for element in ["!qnn.uniform<i8:f32, 0.5:3>", "!qnn.uniform<u8:f32, 0.5:100>"] {
                let text = one_op(
                    "fp.max_pool2d",
                    attrs,
                    &[&tensor_type(&[1, 2, h, w], element)],
                    &[&tensor_type(&[1, 2, 1, 1], element)],
                );
                // The result shape from the interpreter's own verifier: build
                // the module with the inferred type by asking for it.
                let module = qopt_ir_core::parse_module(&mut ctx, text.as_bytes(), "case.qir").unwrap();
                let e = qopt_ir_core::verify(&mut ctx, &module).unwrap_err();
                let message = format!("{e:?}");
                let inferred = message
                    .split("inferred result type ")
                    .nth(1)
                    .and_then(|rest| rest.split(" but").next())
                    .unwrap_or_else(|| panic!("{message}"))
                    .to_string();
                let text =
                    one_op("fp.max_pool2d", attrs, &[&tensor_type(&[1, 2, h, w], element)], &[&inferred]);
                let x = byte_tensor(&[1, 2, h, w], element.contains("u8"), random_bytes(w as u64, 2 * h * w));
                check(&text, &[x]);
            }
        }
    }

    #[test]
    fn float_max_pools_are_unsupported() {
        let e = compile_error(&one_op(
            "fp.max_pool2d",
            "{kernel = [2, 2]}",
            &["tensor<1x1x4x4xf32>"],
            &["tensor<1x1x3x3xf32>"],
        ));
        assert_eq!(e.kind, crate::CodegenErrorKind::Unsupported, "{e}");
    }
}
