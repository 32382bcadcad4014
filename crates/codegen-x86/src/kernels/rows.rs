//! The loop nest every kernel of this directory runs in: a [`Nest`] of
//! dimensions walked in row-major order, up to four buffers ([`Stream`]s)
//! each with its own byte stride per dimension, and a body that processes one
//! **row** (the innermost dimension) at a time. A work item is one row, so a
//! thread's `[begin, end)` is a range of rows, each computed from its index
//! alone: rows are independent by construction.
//!
//! ```text
//!   push rbx, rbp, r12–r15;  r12..r15 = stream bases (+ offsets)
//!   rbx = end − begin;  if 0, return
//!   counters[rsp + 8d] = the digits of `begin` in the outer dimensions (div)
//!   constants
//! row:
//!   rsi, r8, rdi, rbp = base + Σ counter_d × stride_d   (streams 0, 1, 2, 3)
//!   rdx = row length (the last block of a split row may be shorter)
//!   body
//!   if --rbx == 0, leave;  counters += 1 with carries;  jmp row
//!   rsp restored; vzeroupper; pop; ret
//! ```
//!
//! Stream slots: [`INPUT0`] (pointer in rsi), [`INPUT1`] (r8), [`OUTPUT`]
//! (rdi) and [`AUX`] (rbp), a parameter table or lookup table whose strides
//! pick a block of parameters per row. A body may clobber rax, rcx, rdx,
//! rsi, rdi, rbp, r8–r11 and the ymm registers it does not use for its
//! constants; it must leave rbx, r12–r15, rsp and the counters alone, and
//! reads the counters through the memory operands it is given.
//!
//! [`Nest::simplified`] drops dimensions of size 1 and merges dimensions that
//! every stream walks contiguously, so a transpose or broadcast becomes the
//! fewest, longest rows; [`emit_rows`] splits a row longer than `max_run` into
//! blocks (an extra outer dimension whose last block is shorter), so a big
//! contiguous op still gives the runner many work items.

use crate::abi::{
    assemble, load_addresses, new_assembler, pop_callee_saved, push_callee_saved, KernelCode, Place,
};
use crate::error::{CodegenError, CodegenErrorKind};
use crate::target::CpuFeatures;
use iced_x86::code_asm::*;

/// The features the row kernels emit.
pub(crate) const AVX2: CpuFeatures = CpuFeatures { avx: true, avx2: true, ..CpuFeatures::NONE };

/// Elements per work item of the byte kernels: rows longer than this are
/// split into blocks.
pub(crate) const LANE_RUN: usize = 4096;

/// The slot of the first input stream (pointer in rsi).
pub(crate) const INPUT0: usize = 0;
/// The slot of the second input stream (pointer in r8).
pub(crate) const INPUT1: usize = 1;
/// The slot of the output stream (pointer in rdi).
pub(crate) const OUTPUT: usize = 2;
/// The slot of the auxiliary stream: per-row parameters or a table (rbp).
pub(crate) const AUX: usize = 3;
/// How many stream slots a nest has.
pub(crate) const SLOTS: usize = 4;

/// Each slot's pointer while a row runs.
pub(crate) const STREAM_POINTERS: [AsmRegister64; SLOTS] = [rsi, r8, rdi, rbp];
/// Each slot's base address during the whole call.
const STREAM_BASES: [AsmRegister64; SLOTS] = [r12, r13, r14, r15];
/// The row's length in elements when the body starts.
pub(crate) const ROW_LENGTH: AsmRegister64 = rdx;
/// Rows left in this call.
const ROWS_LEFT: AsmRegister64 = rbx;

/// One buffer walked by a nest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stream {
    /// Where the buffer is.
    pub place: Place,
    /// Bytes added to the place's address (may be negative).
    pub offset: i64,
    /// Bytes per element (0 for the auxiliary stream, whose "elements" are
    /// parameter blocks that do not move along a row).
    pub element_size: usize,
    /// Bytes per step of each dimension of the nest.
    pub strides: Vec<i64>,
}

impl Stream {
    /// A row-major tensor of `shape` at `place`, walked in its own order.
    pub(crate) fn contiguous(place: Place, shape: &[usize], element_size: usize) -> Stream {
        Stream { place, offset: 0, element_size, strides: row_major_strides(shape, element_size) }
    }
}

/// Byte strides of a row-major tensor of `shape`.
pub(crate) fn row_major_strides(shape: &[usize], element_size: usize) -> Vec<i64> {
    let mut strides = vec![0i64; shape.len()];
    let mut step = element_size as i64;
    for d in (0..shape.len()).rev() {
        strides[d] = step;
        step = step.saturating_mul(shape[d] as i64);
    }
    strides
}

/// Byte strides, along each dimension of `out_shape`, of a row-major operand
/// of `shape` broadcast to it (numpy rules: shapes aligned at the back, a
/// dimension of 1 repeats with stride 0); `None` when it does not broadcast.
pub(crate) fn broadcast_strides(
    shape: &[usize],
    out_shape: &[usize],
    element_size: usize,
) -> Option<Vec<i64>> {
    let skip = out_shape.len().checked_sub(shape.len())?;
    let own = row_major_strides(shape, element_size);
    let mut strides = vec![0i64; out_shape.len()];
    for (d, &size) in shape.iter().enumerate() {
        if size == out_shape[skip + d] {
            strides[skip + d] = if size == 1 { 0 } else { own[d] };
        } else if size != 1 {
            return None;
        }
    }
    Some(strides)
}

/// Dimensions and the streams that walk them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Nest {
    /// Sizes, outermost first; the last is the row.
    pub dims: Vec<usize>,
    /// The stream of each slot, if used.
    pub streams: [Option<Stream>; SLOTS],
}

impl Nest {
    /// A nest over `dims` with no streams yet.
    pub(crate) fn new(dims: &[usize]) -> Nest {
        Nest { dims: dims.to_vec(), streams: Default::default() }
    }

    /// The nest with `stream` in `slot`.
    pub(crate) fn with(mut self, slot: usize, stream: Stream) -> Nest {
        self.streams[slot] = Some(stream);
        self
    }

    /// Number of elements (rows × row length).
    pub(crate) fn elements(&self) -> usize {
        self.dims.iter().product()
    }

    /// The byte stride of `slot` along the row (0 when absent).
    pub(crate) fn inner_stride(&self, slot: usize) -> i64 {
        self.streams[slot].as_ref().and_then(|s| s.strides.last().copied()).unwrap_or(0)
    }

    /// Whether `slot` moves by one element per step of the row.
    pub(crate) fn is_contiguous(&self, slot: usize) -> bool {
        self.streams[slot].as_ref().is_some_and(|s| s.strides.last() == Some(&(s.element_size as i64)))
    }

    /// The same walk with dimensions of size 1 dropped and neighbours that
    /// every stream walks contiguously merged (`stride[d−1] = size[d] ×
    /// stride[d]`). At least one dimension remains; when the auxiliary stream
    /// would move along the row, a row of length 1 is appended, so parameter
    /// blocks only ever change between rows.
    pub(crate) fn simplified(&self) -> Nest {
        let mut out = Nest::new(&[]);
        for (slot, s) in self.streams.iter().enumerate() {
            out.streams[slot] = s.as_ref().map(|s| Stream { strides: Vec::new(), ..s.clone() });
        }
        if self.elements() == 0 {
            return self.clone();
        }
        for (d, &size) in self.dims.iter().enumerate() {
            if size == 1 {
                continue;
            }
            let mergeable = !out.dims.is_empty()
                && self.streams.iter().zip(&out.streams).all(|(s, o)| match (s, o) {
                    (Some(s), Some(o)) => o.strides.last() == Some(&(s.strides[d] * size as i64)),
                    _ => true,
                });
            if mergeable {
                // Invariants: `mergeable` requires a previous dimension in
                // `out`, and each present stream of `out` has one stride per
                // dimension of `out` (pushed together below).
                *out.dims.last_mut().expect("not empty") *= size;
                for (s, o) in self.streams.iter().zip(out.streams.iter_mut()) {
                    if let (Some(s), Some(o)) = (s, o) {
                        *o.strides.last_mut().expect("one stride per dimension") = s.strides[d];
                    }
                }
            } else {
                out.dims.push(size);
                for (s, o) in self.streams.iter().zip(out.streams.iter_mut()) {
                    if let (Some(s), Some(o)) = (s, o) {
                        o.strides.push(s.strides[d]);
                    }
                }
            }
        }
        if out.dims.is_empty() || out.inner_stride(AUX) != 0 {
            out.dims.push(1);
            for o in out.streams.iter_mut().flatten() {
                o.strides.push(o.element_size as i64);
            }
        }
        out
    }
}

impl Nest {
    /// The same walk with rows of one element appended when one of `slots`
    /// does not move contiguously along the row (bodies that need
    /// contiguous rows then see rows of length 1).
    pub(crate) fn with_contiguous_rows(&self, slots: &[usize]) -> Nest {
        let mut out = self.clone();
        if slots.iter().all(|&slot| self.streams[slot].is_none() || self.is_contiguous(slot)) {
            return out;
        }
        out.dims.push(1);
        for s in out.streams.iter_mut().flatten() {
            s.strides.push(s.element_size as i64);
        }
        out
    }
}

/// What a row body sees of the loop: the counters of the nest's outer
/// dimensions (all but the row), as memory operands holding u64 indices,
/// and the qwords of stack it asked for.
pub(crate) struct RowContext {
    /// `counters[d]` is the index along dimension `d` of the current row.
    pub counters: Vec<AsmMemoryOperand>,
    /// Qwords the body may use freely while a row runs.
    pub locals: Vec<AsmMemoryOperand>,
    /// Where the locals start: `rsp + locals_at` (they are contiguous, so a
    /// body may also use them as one buffer of `8 × locals` bytes).
    pub locals_at: i32,
}

/// Emits once per call, after the prologue: load constants.
pub(crate) type ConstantsEmitter<'e> = &'e dyn Fn(&mut CodeAssembler) -> Result<(), CodegenError>;
/// Emits the body of one row.
pub(crate) type RowEmitter<'e> = &'e dyn Fn(&mut CodeAssembler, &RowContext) -> Result<(), CodegenError>;

/// Binds `label` here, on an instruction of its own (so two labels may sit
/// at one address).
pub(crate) fn bind(a: &mut CodeAssembler, label: &mut CodeLabel) -> Result<(), IcedError> {
    a.set_label(label)?;
    a.zero_bytes()
}

fn imm32(value: i64, what: &str) -> Result<i32, CodegenError> {
    i32::try_from(value).map_err(|_| {
        CodegenError::new(
            CodegenErrorKind::Unsupported,
            format!("{what} {value} exceeds the 32-bit range of the kernels"),
        )
    })
}

/// A kernel that does nothing, for ops with no elements: one work item.
pub(crate) fn empty_kernel(strategy: &str) -> Result<KernelCode, CodegenError> {
    let mut a = new_assembler()?;
    a.vzeroupper()?;
    a.ret()?;
    Ok(KernelCode {
        code: assemble(&mut a)?,
        work: 1,
        work_item: "nothing (no elements)",
        strategy: strategy.into(),
    })
}

/// The kernel that walks `nest` (used as given: simplify it first if wanted),
/// running `row` on every row after `constants` once per call. Rows longer
/// than `max_run` elements are split into blocks of `max_run`.
pub(crate) fn emit_rows(
    nest: &Nest,
    max_run: usize,
    constants: ConstantsEmitter<'_>,
    row: RowEmitter<'_>,
    strategy: String,
) -> Result<KernelCode, CodegenError> {
    emit_framed_rows(nest, max_run, Frame::default(), constants, row, strategy)
}

/// What a row kernel keeps on the stack besides its counters.
#[derive(Copy, Clone, Default)]
pub(crate) struct Frame {
    /// Qwords for the body ([`RowContext::locals`]).
    pub locals: usize,
    /// Whether the body computes with floats: MXCSR is then set to its
    /// power-on value 0x1F80 (round to nearest even, no flush-to-zero, no
    /// denormals-are-zero, exceptions masked) for the call and the caller's
    /// value restored on return, so the results are the IEEE results of
    /// `docs/quant-semantics.md` whatever mode the caller runs in.
    pub float_environment: bool,
}

/// MXCSR's power-on value: round to nearest even, all exceptions masked, no
/// FTZ, no DAZ.
const MXCSR_IEEE_DEFAULT: u32 = 0x1F80;

/// [`emit_rows`] with the stack and floating-point environment of `frame`.
pub(crate) fn emit_framed_rows(
    nest: &Nest,
    max_run: usize,
    Frame { locals, float_environment }: Frame,
    constants: ConstantsEmitter<'_>,
    row: RowEmitter<'_>,
    strategy: String,
) -> Result<KernelCode, CodegenError> {
    if nest.elements() == 0 || nest.dims.is_empty() {
        return empty_kernel(&strategy);
    }
    let (outer_dims, row_length) = nest.dims.split_at(nest.dims.len() - 1);
    let row_length = row_length[0];
    let mut dims = outer_dims.to_vec();
    let mut strides: Vec<Option<Vec<i64>>> =
        nest.streams.iter().map(|s| s.as_ref().map(|s| s.strides[..dims.len()].to_vec())).collect();
    let max_run = max_run.max(1);
    let blocks = row_length.div_ceil(max_run);
    let (run, last_run) =
        if blocks > 1 { (max_run, row_length - (blocks - 1) * max_run) } else { (row_length, row_length) };
    if blocks > 1 {
        dims.push(blocks);
        for (s, st) in nest.streams.iter().zip(strides.iter_mut()) {
            if let (Some(s), Some(st)) = (s, st) {
                // Invariant: `blocks > 1` needs a row of at least two
                // elements, so the nest has a dimension, and every stream
                // has one stride per dimension.
                let inner = *s.strides.last().expect("one stride per dimension");
                st.push(inner.checked_mul(max_run as i64).unwrap_or(i64::MAX));
            }
        }
    }
    let work: usize = dims.iter().product();
    let counters: Vec<AsmMemoryOperand> = (0..dims.len()).map(|d| qword_ptr(rsp + 8 * d as i32)).collect();
    let local_slots: Vec<AsmMemoryOperand> =
        (0..locals).map(|i| qword_ptr(rsp + 8 * (dims.len() + i) as i32)).collect();
    // The saved MXCSR and the one loaded take the qword after the locals.
    let mxcsr_at = 8 * (dims.len() + locals) as i32;
    let frame = (8 * (dims.len() + locals + usize::from(float_environment))).next_multiple_of(16) as i32;

    let mut a = new_assembler()?;
    push_callee_saved(&mut a)?;
    let places: Vec<(AsmRegister64, Place)> = nest
        .streams
        .iter()
        .enumerate()
        .filter_map(|(slot, s)| s.as_ref().map(|s| (STREAM_BASES[slot], s.place)))
        .collect();
    load_addresses(&mut a, &places)?;
    for (slot, s) in nest.streams.iter().enumerate() {
        if let Some(s) = s {
            if s.offset != 0 {
                let base = STREAM_BASES[slot];
                a.lea(base, qword_ptr(base + imm32(s.offset, "a buffer offset")?))?;
            }
        }
    }
    let mut done = a.create_label();
    let mut finish = a.create_label();
    let mut next_row = a.create_label();
    a.mov(ROWS_LEFT, r8)?;
    a.sub(ROWS_LEFT, rcx)?;
    a.jbe(done)?;
    if frame > 0 {
        a.sub(rsp, frame)?;
    }
    // The digits of `begin` in the outer dimensions.
    a.mov(rax, rcx)?;
    for d in (0..dims.len()).rev() {
        a.xor(edx, edx)?;
        a.mov(r9, dims[d] as u64)?;
        a.div(r9)?;
        a.mov(counters[d], rdx)?;
    }
    if float_environment {
        a.stmxcsr(dword_ptr(rsp + mxcsr_at))?;
        a.mov(dword_ptr(rsp + mxcsr_at + 4), MXCSR_IEEE_DEFAULT)?;
        a.ldmxcsr(dword_ptr(rsp + mxcsr_at + 4))?;
    }
    constants(&mut a)?;

    bind(&mut a, &mut next_row)?;
    for (slot, st) in strides.iter().enumerate() {
        let Some(st) = st else { continue };
        let pointer = STREAM_POINTERS[slot];
        a.mov(pointer, STREAM_BASES[slot])?;
        for (d, &stride) in st.iter().enumerate() {
            if stride != 0 && dims[d] > 1 {
                a.imul_3(rax, counters[d], imm32(stride, "a stride")?)?;
                a.add(pointer, rax)?;
            }
        }
    }
    a.mov(ROW_LENGTH, imm32(run as i64, "a row length")? as u64)?;
    if blocks > 1 && last_run != run {
        let mut full = a.create_label();
        a.cmp(counters[dims.len() - 1], imm32(blocks as i64 - 1, "a block count")?)?;
        a.jne(full)?;
        a.mov(ROW_LENGTH, last_run as u64)?;
        bind(&mut a, &mut full)?;
    }
    let locals_at = 8 * dims.len() as i32;
    row(
        &mut a,
        &RowContext { counters: counters[..outer_dims.len()].to_vec(), locals: local_slots, locals_at },
    )?;
    a.dec(ROWS_LEFT)?;
    a.jz(finish)?;
    for d in (0..dims.len()).rev() {
        a.inc(counters[d])?;
        a.cmp(counters[d], imm32(dims[d] as i64, "a dimension")?)?;
        a.jb(next_row)?;
        a.mov(counters[d], 0)?;
    }
    a.jmp(next_row)?;

    bind(&mut a, &mut finish)?;
    if float_environment {
        a.ldmxcsr(dword_ptr(rsp + mxcsr_at))?;
    }
    if frame > 0 {
        a.add(rsp, frame)?;
    }
    bind(&mut a, &mut done)?;
    a.vzeroupper()?;
    pop_callee_saved(&mut a)?;
    a.ret()?;
    Ok(KernelCode { code: assemble(&mut a)?, work, work_item: "row", strategy })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(strides: &[i64], element_size: usize) -> Stream {
        Stream { place: Place::Io(0), offset: 0, element_size, strides: strides.to_vec() }
    }

    #[test]
    fn contiguous_dimensions_merge_and_unit_dimensions_drop() {
        // A 2x1x3x4 copy: one row of 24.
        let nest = Nest::new(&[2, 1, 3, 4])
            .with(INPUT0, Stream::contiguous(Place::Io(0), &[2, 1, 3, 4], 1))
            .with(OUTPUT, Stream::contiguous(Place::Io(1), &[2, 1, 3, 4], 1));
        let s = nest.simplified();
        assert_eq!(s.dims, [24]);
        assert_eq!(s.streams[INPUT0].as_ref().unwrap().strides, [1]);
        // [2,3] + [3] broadcast: the second operand repeats every row.
        let nest = Nest::new(&[2, 3]).with(INPUT0, stream(&[3, 1], 1)).with(INPUT1, stream(&[0, 1], 1));
        assert_eq!(nest.simplified().dims, [2, 3]);
        // A transpose of 2x3 (f32): nothing merges, the row is strided.
        let nest = Nest::new(&[3, 2]).with(INPUT0, stream(&[4, 12], 4)).with(OUTPUT, stream(&[8, 4], 4));
        let s = nest.simplified();
        assert_eq!(s.dims, [3, 2]);
        assert!(!s.is_contiguous(INPUT0) && s.is_contiguous(OUTPUT));
        // Scalars keep one row of one element.
        let nest = Nest::new(&[]).with(INPUT0, stream(&[], 1));
        assert_eq!(nest.simplified().dims, [1]);
        // A parameter block per last index: rows of one element.
        let nest = Nest::new(&[2, 3]).with(INPUT0, stream(&[3, 1], 1)).with(AUX, stream(&[0, 128], 0));
        let s = nest.simplified();
        assert_eq!(s.dims, [2, 3, 1]);
        assert_eq!(s.inner_stride(AUX), 0);
    }
}
