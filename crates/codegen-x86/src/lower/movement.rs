//! The quant-agnostic data movement of `docs/quant-semantics.md` §9 on
//! quantized (one byte per element) and f32 tensors: `fp.transpose`,
//! `fp.strided_slice`, `fp.split`, `fp.concat`, `fp.pad` (constant mode; a
//! quantized tensor is padded with its zero point) and `fp.relu` (`max(q, zp)`
//! on stored values, `x < 0 ? 0 : x` on floats).
//!
//! Every op is one or more **strided copies**: a [`Nest`] over the elements
//! moved, with the source and destination byte strides of each dimension
//! (a transpose permutes the source's; a slice starts at its first index and
//! steps by its stride, negative ones included; a split reads a window of
//! its input; a concat writes each input into a window of its output). After
//! merging, a row whose source and destination are both contiguous is copied
//! 32 bytes at a time ([`emit_copy_row`]), any other element by element with
//! its strides. Values are moved unchanged, so the result is the
//! interpreter's bit for bit by construction.
//!
//! Constant padding is two kernels, run in order: fill the whole result with
//! the pad value ([`emit_fill_row`]), then copy the input into its interior.

use crate::abi::KernelCode;
use crate::buffer::ElementType;
use crate::error::{CodegenError, CodegenErrorKind};
use crate::kernels::rows::{
    bind, emit_rows, row_major_strides, Nest, Stream, AUX, INPUT0, OUTPUT, ROW_LENGTH, STREAM_POINTERS,
};
use crate::lower::rows::RowKernel;
use crate::lower::{Emit, EmitResult, LowerOp};
use iced_x86::code_asm::*;
use qopt_dialect_fp::attrs;
use qopt_dialect_fp::shape::normalize_axis;
use qopt_ir_core::QuantParams;

/// Bytes per work item of the copy and fill kernels: rows longer than this
/// are split into blocks.
const COPY_RUN: usize = 16384;

/// The element size (1 or 4 bytes) of operand `i`, checked equal to the
/// element type of every result (quant-agnostic ops keep one element type).
fn moved_element(op: &LowerOp<'_>) -> Result<ElementType, CodegenError> {
    let element = op.element_of(op.operand_type(0), "operand 0")?;
    let elem0 = op.ctx.element_type(op.operand_type(0));
    for i in 0..op.num_operands() {
        if op.ctx.element_type(op.operand_type(i)) != elem0 {
            return Err(op.unsupported(format!("operand {i} has another element type than operand 0")));
        }
    }
    for j in 0..op.num_results() {
        if op.ctx.element_type(op.result_type(j)) != elem0 {
            return Err(op.unsupported(format!("result {j} has another element type than operand 0")));
        }
    }
    Ok(element)
}

/// Copies one row: `rdx` elements of `element_size` bytes from rsi to rdi,
/// each pointer moving by its stride (32-byte moves when both are contiguous).
pub(crate) fn emit_copy_row(
    a: &mut CodeAssembler,
    element_size: usize,
    source_stride: i64,
    dest_stride: i64,
) -> Result<(), CodegenError> {
    let (src, dst) = (STREAM_POINTERS[INPUT0], STREAM_POINTERS[OUTPUT]);
    let mut done = a.create_label();
    let contiguous = source_stride == element_size as i64 && dest_stride == element_size as i64;
    if !contiguous {
        let (source_stride, dest_stride) = (i32::try_from(source_stride), i32::try_from(dest_stride));
        let (Ok(source_stride), Ok(dest_stride)) = (source_stride, dest_stride) else {
            return Err(CodegenError::new(CodegenErrorKind::Unsupported, "a stride exceeds 32 bits"));
        };
        let mut each = a.create_label();
        a.test(ROW_LENGTH, ROW_LENGTH)?;
        a.jz(done)?;
        bind(a, &mut each)?;
        if element_size == 4 {
            a.mov(eax, dword_ptr(src))?;
            a.mov(dword_ptr(dst), eax)?;
        } else {
            a.movzx(eax, byte_ptr(src))?;
            a.mov(byte_ptr(dst), al)?;
        }
        a.add(src, source_stride)?;
        a.add(dst, dest_stride)?;
        a.dec(ROW_LENGTH)?;
        a.jnz(each)?;
        bind(a, &mut done)?;
        return Ok(());
    }
    let (mut wide, mut words, mut word, mut bytes, mut byte) =
        (a.create_label(), a.create_label(), a.create_label(), a.create_label(), a.create_label());
    if element_size == 4 {
        a.shl(ROW_LENGTH, 2)?;
    }
    a.cmp(ROW_LENGTH, 32)?;
    a.jb(words)?;
    bind(a, &mut wide)?;
    a.vmovdqu(ymm0, ymmword_ptr(src))?;
    a.vmovdqu(ymmword_ptr(dst), ymm0)?;
    a.add(src, 32)?;
    a.add(dst, 32)?;
    a.sub(ROW_LENGTH, 32)?;
    a.cmp(ROW_LENGTH, 32)?;
    a.jae(wide)?;
    bind(a, &mut words)?;
    a.cmp(ROW_LENGTH, 8)?;
    a.jb(bytes)?;
    bind(a, &mut word)?;
    a.mov(rax, qword_ptr(src))?;
    a.mov(qword_ptr(dst), rax)?;
    a.add(src, 8)?;
    a.add(dst, 8)?;
    a.sub(ROW_LENGTH, 8)?;
    a.cmp(ROW_LENGTH, 8)?;
    a.jae(word)?;
    bind(a, &mut bytes)?;
    a.test(ROW_LENGTH, ROW_LENGTH)?;
    a.jz(done)?;
    bind(a, &mut byte)?;
    a.movzx(eax, byte_ptr(src))?;
    a.mov(byte_ptr(dst), al)?;
    a.inc(src)?;
    a.inc(dst)?;
    a.dec(ROW_LENGTH)?;
    a.jnz(byte)?;
    bind(a, &mut done)?;
    Ok(())
}

/// The kernel copying what `nest` (simplified here) walks from `INPUT0` to
/// `OUTPUT`.
pub(crate) fn emit_strided_copy(nest: &Nest, element: ElementType) -> Result<KernelCode, CodegenError> {
    let nest = nest.simplified();
    let size = element.size();
    let (source_stride, dest_stride) = (nest.inner_stride(INPUT0), nest.inner_stride(OUTPUT));
    let contiguous = nest.is_contiguous(INPUT0) && nest.is_contiguous(OUTPUT);
    let strategy = if contiguous { "32-byte moves" } else { "element by element" };
    let run = if contiguous { COPY_RUN / size } else { COPY_RUN / 8 };
    emit_rows(
        &nest,
        run,
        &|_| Ok(()),
        &|a, _| emit_copy_row(a, size, source_stride, dest_stride),
        strategy.into(),
    )
}

/// Fills one row: `rdx` elements at rdi with the pattern in ymm15 (every
/// dword) and eax.
fn emit_fill_row(a: &mut CodeAssembler, element_size: usize) -> Result<(), CodegenError> {
    let dst = STREAM_POINTERS[OUTPUT];
    let (mut wide, mut tail, mut each, mut done) =
        (a.create_label(), a.create_label(), a.create_label(), a.create_label());
    a.vmovd(eax, xmm15)?;
    if element_size == 4 {
        a.shl(ROW_LENGTH, 2)?;
    }
    a.cmp(ROW_LENGTH, 32)?;
    a.jb(tail)?;
    bind(a, &mut wide)?;
    a.vmovdqu(ymmword_ptr(dst), ymm15)?;
    a.add(dst, 32)?;
    a.sub(ROW_LENGTH, 32)?;
    a.cmp(ROW_LENGTH, 32)?;
    a.jae(wide)?;
    bind(a, &mut tail)?;
    a.test(ROW_LENGTH, ROW_LENGTH)?;
    a.jz(done)?;
    bind(a, &mut each)?;
    if element_size == 4 {
        a.mov(dword_ptr(dst), eax)?;
    } else {
        a.mov(byte_ptr(dst), al)?;
    }
    a.add(dst, element_size as i32)?;
    a.sub(ROW_LENGTH, element_size as i32)?;
    a.jnz(each)?;
    bind(a, &mut done)?;
    Ok(())
}

/// The kernel writing `pattern` (the element's bytes, repeated to a dword)
/// into every element of a contiguous tensor of `elements` at `place`.
fn emit_fill(
    place: crate::abi::Place,
    elements: usize,
    element: ElementType,
    pattern: u32,
) -> Result<KernelCode, CodegenError> {
    let nest = Nest::new(&[elements]).with(OUTPUT, Stream::contiguous(place, &[elements], element.size()));
    let size = element.size();
    emit_rows(
        &nest,
        COPY_RUN / size,
        &|a| {
            a.mov(eax, pattern)?;
            a.vmovd(xmm15, eax)?;
            a.vpbroadcastd(ymm15, xmm15)?;
            Ok(())
        },
        &|a, _| emit_fill_row(a, size),
        "32-byte stores".into(),
    )
}

/// `fp.transpose`.
pub(crate) struct Transpose;

fn transpose_nest(op: &LowerOp<'_>, out: Option<&Emit<'_>>) -> Result<(Nest, ElementType), CodegenError> {
    op.expect_arity(1..=1, 1)?;
    let element = moved_element(op)?;
    let shape = op.operand_shape(0)?;
    let perm = qopt_dialect_fp::transpose_perm(op.ctx, op.module.op_attrs(op.op), shape.len())
        .map_err(|e| op.invalid(e))?;
    let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    if op.result_shape(0)? != out_shape {
        return Err(op.invalid(format!("the result shape must be {out_shape:?}")));
    }
    let in_strides = row_major_strides(&shape, element.size());
    let (src, dst) = match out {
        Some(e) => (e.operand(0)?, e.result(0)?),
        None => (crate::abi::Place::Io(0), crate::abi::Place::Io(1)),
    };
    let nest = Nest::new(&out_shape)
        .with(
            INPUT0,
            Stream {
                place: src,
                offset: 0,
                element_size: element.size(),
                strides: perm.iter().map(|&p| in_strides[p]).collect(),
            },
        )
        .with(OUTPUT, Stream::contiguous(dst, &out_shape, element.size()));
    Ok((nest, element))
}

impl RowKernel for Transpose {
    type Op<'a> = ();

    fn read<'a>(&self, op: &LowerOp<'a>) -> Result<(), CodegenError> {
        transpose_nest(op, None).map(|_| ())
    }

    fn emit_rows(&self, op: &LowerOp<'_>, (): Self::Op<'_>, out: &mut Emit<'_>) -> EmitResult {
        let (nest, element) = transpose_nest(op, Some(out))?;
        out.kernel(emit_strided_copy(&nest, element)?);
        Ok(())
    }
}

/// `fp.strided_slice` (ONNX Slice: negative indices count from the back,
/// then clamp; negative strides walk backwards).
pub(crate) struct StridedSlice;

fn slice_nest(
    op: &LowerOp<'_>,
    src: crate::abi::Place,
    dst: crate::abi::Place,
) -> Result<(Nest, ElementType), CodegenError> {
    op.expect_arity(1..=1, 1)?;
    let element = moved_element(op)?;
    let shape = op.operand_shape(0)?;
    let axes = qopt_dialect_fp::slice_axes(op.ctx, op.module.op_attrs(op.op), shape.len())
        .map_err(|e| op.invalid(e))?;
    let in_strides = row_major_strides(&shape, element.size());
    let mut out_shape = shape.clone();
    let mut strides = in_strides.clone();
    let mut offset = 0i64;
    for a in &axes {
        let size = shape[a.axis];
        let len = qopt_dialect_fp::slice_len(size as i64, a.begin, a.end, a.stride).max(0) as usize;
        out_shape[a.axis] = len;
        if len > 0 {
            let dim = size as i128;
            let wrap = |v: i128| if v < 0 { v + dim } else { v };
            let first = if a.stride > 0 {
                wrap(a.begin as i128).clamp(0, dim)
            } else {
                wrap(a.begin as i128).clamp(0, dim - 1)
            };
            offset += first as i64 * in_strides[a.axis];
        }
        strides[a.axis] = in_strides[a.axis].saturating_mul(a.stride);
    }
    if op.result_shape(0)? != out_shape {
        return Err(op.invalid(format!("the result shape must be {out_shape:?}")));
    }
    let nest = Nest::new(&out_shape)
        .with(INPUT0, Stream { place: src, offset, element_size: element.size(), strides })
        .with(OUTPUT, Stream::contiguous(dst, &out_shape, element.size()));
    Ok((nest, element))
}

impl RowKernel for StridedSlice {
    type Op<'a> = ();

    fn read<'a>(&self, op: &LowerOp<'a>) -> Result<(), CodegenError> {
        slice_nest(op, crate::abi::Place::Io(0), crate::abi::Place::Io(1)).map(|_| ())
    }

    fn emit_rows(&self, op: &LowerOp<'_>, (): Self::Op<'_>, out: &mut Emit<'_>) -> EmitResult {
        let (nest, element) = slice_nest(op, out.operand(0)?, out.result(0)?)?;
        out.kernel(emit_strided_copy(&nest, element)?);
        Ok(())
    }
}

/// Tensors laid side by side along one axis of a whole: a split's results
/// in its operand, or a concatenation's operands in its result.
pub(crate) struct Windows {
    /// The whole tensor's shape.
    pub whole: Vec<usize>,
    /// The axis along which the windows follow each other.
    pub axis: usize,
    /// Each window, in order.
    pub parts: Vec<Window>,
}

/// One tensor within a [`Windows`].
pub(crate) struct Window {
    /// Its first index along the axis.
    pub start: usize,
    /// Its shape.
    pub shape: Vec<usize>,
}

impl Windows {
    /// The windows of `shapes` (named `what` and their index in errors)
    /// following each other along `axis` of `whole`, which they must fill.
    fn new(
        op: &LowerOp<'_>,
        whole: Vec<usize>,
        axis: i64,
        shapes: Vec<Vec<usize>>,
        what: &str,
    ) -> Result<Windows, CodegenError> {
        let axis = normalize_axis(axis, whole.len()).map_err(|e| op.invalid(e))?;
        let mut start = 0usize;
        let mut parts = Vec::with_capacity(shapes.len());
        for (i, shape) in shapes.into_iter().enumerate() {
            let fits =
                shape.len() == whole.len() && (0..shape.len()).all(|d| d == axis || shape[d] == whole[d]);
            if !fits {
                return Err(
                    op.invalid(format!("{what} {i} is not a window along axis {axis} of shape {whole:?}"))
                );
            }
            let size = shape[axis];
            parts.push(Window { start, shape });
            start += size;
        }
        if start != whole[axis] {
            return Err(op.invalid(format!("the windows do not fill dimension {axis} of shape {whole:?}")));
        }
        Ok(Windows { whole, axis, parts })
    }

    /// The whole as a stream at `place`, offset to the start of `window`.
    fn whole_stream(&self, window: &Window, place: crate::abi::Place, element_size: usize) -> Stream {
        let strides = row_major_strides(&self.whole, element_size);
        Stream { place, offset: window.start as i64 * strides[self.axis], element_size, strides }
    }

    /// The nest copying between `window` (a contiguous tensor at
    /// `window_place`) and its place in the whole (at `whole_place`): from
    /// the window into the whole (concat) or the other way (split).
    pub(crate) fn nest(
        &self,
        window: &Window,
        window_place: crate::abi::Place,
        whole_place: crate::abi::Place,
        element_size: usize,
        into_whole: bool,
    ) -> Nest {
        let own = Stream::contiguous(window_place, &window.shape, element_size);
        let whole = self.whole_stream(window, whole_place, element_size);
        let (src, dst) = if into_whole { (own, whole) } else { (whole, own) };
        Nest::new(&window.shape).with(INPUT0, src).with(OUTPUT, dst)
    }
}

/// `fp.split {axis, sizes}`: one copy per result.
pub(crate) struct Split;

/// The element type and each result's window of the operand.
fn split_windows(op: &LowerOp<'_>) -> Result<(ElementType, Windows), CodegenError> {
    if op.num_operands() != 1 || op.num_results() == 0 {
        return Err(op.invalid("expected one operand and at least one result"));
    }
    let element = moved_element(op)?;
    let shapes = (0..op.num_results()).map(|j| op.result_shape(j)).collect::<Result<_, _>>()?;
    let windows = Windows::new(op, op.operand_shape(0)?, op.int_or("axis", 0)?, shapes, "result")?;
    Ok((element, windows))
}

impl RowKernel for Split {
    type Op<'a> = (ElementType, Windows);

    fn read<'a>(&self, op: &LowerOp<'a>) -> Result<(ElementType, Windows), CodegenError> {
        split_windows(op)
    }

    fn emit_rows(
        &self,
        _op: &LowerOp<'_>,
        (element, windows): Self::Op<'_>,
        out: &mut Emit<'_>,
    ) -> EmitResult {
        for (j, window) in windows.parts.iter().enumerate() {
            let nest = windows.nest(window, out.result(j)?, out.operand(0)?, element.size(), false);
            out.kernel(emit_strided_copy(&nest, element)?);
        }
        Ok(())
    }
}

/// Each operand's window of a concatenation's result (`axis` required).
pub(crate) fn concat_windows(op: &LowerOp<'_>) -> Result<Windows, CodegenError> {
    if op.num_operands() == 0 || op.num_results() != 1 {
        return Err(op.invalid("expected operands and one result"));
    }
    if op.attr("axis").is_none() {
        return Err(op.invalid("needs an integer 'axis' attribute"));
    }
    let shapes = (0..op.num_operands()).map(|i| op.operand_shape(i)).collect::<Result<_, _>>()?;
    Windows::new(op, op.result_shape(0)?, op.int_or("axis", 0)?, shapes, "operand")
}

/// `fp.concat {axis}`: one copy per operand.
pub(crate) struct Concat;

impl RowKernel for Concat {
    type Op<'a> = (ElementType, Windows);

    fn read<'a>(&self, op: &LowerOp<'a>) -> Result<(ElementType, Windows), CodegenError> {
        Ok((moved_element(op)?, concat_windows(op)?))
    }

    fn emit_rows(
        &self,
        _op: &LowerOp<'_>,
        (element, windows): Self::Op<'_>,
        out: &mut Emit<'_>,
    ) -> EmitResult {
        for (i, window) in windows.parts.iter().enumerate() {
            let nest = windows.nest(window, out.operand(i)?, out.result(0)?, element.size(), true);
            out.kernel(emit_strided_copy(&nest, element)?);
        }
        Ok(())
    }
}

/// `fp.pad` in constant mode.
pub(crate) struct Pad;

/// The element, input shape, begin paddings and the fill pattern.
fn pad_params(op: &LowerOp<'_>) -> Result<(ElementType, Vec<usize>, Vec<usize>, u32), CodegenError> {
    op.expect_arity(1..=1, 1)?;
    let element = moved_element(op)?;
    let shape = op.operand_shape(0)?;
    let rank = shape.len();
    let attrs_dict = op.module.op_attrs(op.op);
    let mode = attrs::one_of_in(op.ctx, attrs_dict, "mode", "constant", &["constant", "reflect", "edge"])
        .map_err(|e| op.invalid(e))?;
    if mode != "constant" {
        return Err(op.unsupported(format!("\"{mode}\" padding is not compiled (constant padding is)")));
    }
    let pads = attrs::opt_int_array_in(op.ctx, attrs_dict, "pads", Some(2 * rank))
        .map_err(|e| op.invalid(e))?
        .ok_or_else(|| op.invalid("needs a 'pads' attribute"))?;
    let pads: Vec<usize> = pads
        .iter()
        .map(|&p| usize::try_from(p).map_err(|_| op.unsupported("negative paddings are not compiled")))
        .collect::<Result<_, _>>()?;
    let out_shape: Vec<usize> = (0..rank).map(|d| shape[d] + pads[d] + pads[rank + d]).collect();
    if op.result_shape(0)? != out_shape {
        return Err(op.invalid(format!("the result shape must be {out_shape:?}")));
    }
    let value = attrs::float_in(op.ctx, attrs_dict, "value", 0.0).map_err(|e| op.invalid(e))?;
    let pattern = match (element, op.quant_of(op.operand_type(0))) {
        (ElementType::F32, _) => (value as f32).to_bits(),
        (_, Some(q)) => match q.params {
            // The interpreter pads quantized storage with the zero point.
            QuantParams::PerTensor { zero_point, .. } => u32::from(zero_point as u8) * 0x0101_0101,
            QuantParams::PerAxis { .. } => {
                return Err(op.unsupported("padding a per-axis quantized tensor is not compiled"))
            }
        },
        (_, None) => {
            let fits = value.fract() == 0.0
                && match element {
                    ElementType::I8 => (-128.0..=127.0).contains(&value),
                    _ => (0.0..=255.0).contains(&value),
                };
            if !fits {
                return Err(op.invalid(format!("cannot pad an integer tensor with {value}")));
            }
            u32::from(value as i64 as u8) * 0x0101_0101
        }
    };
    Ok((element, shape, pads[..rank].to_vec(), pattern))
}

impl RowKernel for Pad {
    type Op<'a> = (ElementType, Vec<usize>, Vec<usize>, u32);

    fn read<'a>(&self, op: &LowerOp<'a>) -> Result<(ElementType, Vec<usize>, Vec<usize>, u32), CodegenError> {
        pad_params(op)
    }

    fn emit_rows(
        &self,
        op: &LowerOp<'_>,
        (element, shape, begins, pattern): Self::Op<'_>,
        out: &mut Emit<'_>,
    ) -> EmitResult {
        let out_shape = op.result_shape(0)?;
        let size = element.size();
        out.kernel(emit_fill(out.result(0)?, out_shape.iter().product(), element, pattern)?);
        let out_strides = row_major_strides(&out_shape, size);
        let offset = begins.iter().zip(&out_strides).map(|(&b, &s)| b as i64 * s).sum();
        let nest = Nest::new(&shape)
            .with(INPUT0, Stream::contiguous(out.operand(0)?, &shape, size))
            .with(OUTPUT, Stream { place: out.result(0)?, offset, element_size: size, strides: out_strides });
        out.kernel(emit_strided_copy(&nest, element)?);
        Ok(())
    }
}

/// `fp.relu`: on f32 `x < 0 ? 0 : x` (NaN and −0 unchanged), on stored
/// values `max(q, zp)` (zero point per tensor or per index of the axis; 0
/// for plain integers).
pub(crate) struct Relu;

/// What a relu kernel is specialized for.
pub(crate) struct ReluParams {
    element: ElementType,
    shape: Vec<usize>,
    /// The floor of each index of `axis` (one when per tensor).
    zero_points: Vec<i64>,
    axis: Option<usize>,
}

fn relu_params(op: &LowerOp<'_>) -> Result<ReluParams, CodegenError> {
    op.expect_arity(1..=1, 1)?;
    let element = moved_element(op)?;
    let shape = op.operand_shape(0)?;
    if op.result_shape(0)? != shape {
        return Err(op.invalid("the result must have the operand's shape"));
    }
    let (zero_points, axis) = match op.quant_of(op.result_type(0)).map(|q| &q.params) {
        Some(QuantParams::PerTensor { zero_point, .. }) => (vec![*zero_point], None),
        Some(QuantParams::PerAxis { axis, zero_points, .. }) => {
            let axis = *axis as usize;
            if shape.get(axis) != Some(&zero_points.len()) {
                return Err(op.invalid("per-axis zero points do not fit the shape"));
            }
            (zero_points.to_vec(), Some(axis))
        }
        None => (vec![0], None),
    };
    Ok(ReluParams { element, shape, zero_points, axis })
}

impl RowKernel for Relu {
    type Op<'a> = ReluParams;

    fn read<'a>(&self, op: &LowerOp<'a>) -> Result<ReluParams, CodegenError> {
        relu_params(op)
    }

    fn emit_rows(
        &self,
        _op: &LowerOp<'_>,
        ReluParams { element, shape, zero_points, axis }: Self::Op<'_>,
        out: &mut Emit<'_>,
    ) -> Result<(), CodegenError> {
        let size = element.size();
        // One 32-byte block per zero point: the byte repeated.
        let blocks: Vec<u8> = zero_points.iter().flat_map(|&z| [z as u8; 32]).collect();
        let table = out.rodata(if element == ElementType::F32 { &[0u8; 32] } else { &blocks });
        let mut block_strides = vec![0i64; shape.len()];
        if let Some(axis) = axis {
            block_strides[axis] = 32;
        }
        let nest = Nest::new(&shape)
            .with(INPUT0, Stream::contiguous(out.operand(0)?, &shape, size))
            .with(OUTPUT, Stream::contiguous(out.result(0)?, &shape, size))
            .with(AUX, Stream { place: table, offset: 0, element_size: 0, strides: block_strides })
            .simplified();
        let (src, dst, floor) = (STREAM_POINTERS[INPUT0], STREAM_POINTERS[OUTPUT], STREAM_POINTERS[AUX]);
        let strategy =
            if element == ElementType::F32 { "AVX2 vmaxps, 8 lanes" } else { "AVX2 vpmax, 32 lanes" };
        let kernel = emit_rows(
            &nest,
            COPY_RUN / size,
            &|_| Ok(()),
            &|a, _| {
                a.vmovdqu(ymm15, ymmword_ptr(floor))?;
                let (mut wide, mut tail, mut each, mut done) =
                    (a.create_label(), a.create_label(), a.create_label(), a.create_label());
                let lanes = (32 / size) as i32;
                a.cmp(ROW_LENGTH, lanes)?;
                a.jb(tail)?;
                bind(a, &mut wide)?;
                a.vmovdqu(ymm0, ymmword_ptr(src))?;
                relu_lanes(a, element, ymm0)?;
                a.vmovdqu(ymmword_ptr(dst), ymm0)?;
                a.add(src, 32)?;
                a.add(dst, 32)?;
                a.sub(ROW_LENGTH, lanes)?;
                a.cmp(ROW_LENGTH, lanes)?;
                a.jae(wide)?;
                bind(a, &mut tail)?;
                a.test(ROW_LENGTH, ROW_LENGTH)?;
                a.jz(done)?;
                bind(a, &mut each)?;
                if size == 4 {
                    a.vmovd(xmm0, dword_ptr(src))?;
                } else {
                    a.movzx(eax, byte_ptr(src))?;
                    a.vmovd(xmm0, eax)?;
                }
                relu_lanes(a, element, ymm0)?;
                if size == 4 {
                    a.vmovd(dword_ptr(dst), xmm0)?;
                } else {
                    a.vmovd(eax, xmm0)?;
                    a.mov(byte_ptr(dst), al)?;
                }
                a.add(src, size as i32)?;
                a.add(dst, size as i32)?;
                a.dec(ROW_LENGTH)?;
                a.jnz(each)?;
                bind(a, &mut done)?;
                Ok(())
            },
            strategy.into(),
        )?;
        out.kernel(kernel);
        Ok(())
    }
}

/// `x ← relu(x)` with the floor (zero or the zero points) in ymm15.
fn relu_lanes(a: &mut CodeAssembler, element: ElementType, x: AsmRegisterYmm) -> Result<(), IcedError> {
    match element {
        // vmaxps returns its second operand unless the first is greater:
        // 0 > x ? 0 : x, so NaN and −0 pass through as in the interpreter.
        ElementType::F32 => a.vmaxps(x, ymm15, x),
        ElementType::U8 => a.vpmaxub(x, x, ymm15),
        // I8: the plan admits f32 and bytes only.
        _ => a.vpmaxsb(x, x, ymm15),
    }
}

#[cfg(test)]
mod tests {
    use crate::kernels::testing::*;
    use qopt_interp::Tensor;

    /// Element types to move: f32, per-tensor i8 and u8.
    const ELEMENTS: [&str; 3] = ["f32", "!qnn.uniform<i8:f32, 0.5:-3>", "!qnn.uniform<u8:f32, 0.25:200>"];

    /// Random data of `shape` for `element` (f32: any bit pattern, NaNs too).
    fn data(shape: &[usize], element: &str, seed: u64) -> Tensor {
        let n: usize = shape.iter().product();
        if element == "f32" {
            let bytes = random_bytes(seed, 4 * n);
            f32_tensor(
                shape,
                bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
            )
        } else {
            byte_tensor(shape, element.contains("u8"), random_bytes(seed, n))
        }
    }

    fn check_one(op: &str, attrs: &str, shapes: &[&[usize]], results: &[&[usize]], element: &str, seed: u64) {
        let operand_types: Vec<String> = shapes.iter().map(|s| tensor_type(s, element)).collect();
        let result_types: Vec<String> = results.iter().map(|s| tensor_type(s, element)).collect();
        let operand_refs: Vec<&str> = operand_types.iter().map(String::as_str).collect();
        let result_refs: Vec<&str> = result_types.iter().map(String::as_str).collect();
        let inputs: Vec<Tensor> =
            shapes.iter().enumerate().map(|(i, s)| data(s, element, seed + i as u64)).collect();
        check(&one_op(op, attrs, &operand_refs, &result_refs), &inputs);
    }

    #[test]
    fn transposes_match_the_interpreter() {
        if !avx2_here() {
            return;
        }
        let cases: [(&[usize], &str, &[usize]); 7] = [
            (&[2, 3], "{perm = [1, 0]}", &[3, 2]),
            (&[2, 3, 4], "{perm = [2, 0, 1]}", &[4, 2, 3]),
            (&[2, 3, 4], "{}", &[4, 3, 2]),
            (&[1, 3, 1, 45], "{perm = [0, 2, 3, 1]}", &[1, 1, 45, 3]),
            (&[2, 16, 7, 7], "{perm = [0, 2, 3, 1]}", &[2, 7, 7, 16]),
            (&[0, 3], "{perm = [1, 0]}", &[3, 0]),
            (&[5, 64, 3], "{perm = [1, 0, 2]}", &[64, 5, 3]),
        ];
        for (k, (shape, attrs, result)) in cases.into_iter().enumerate() {
            for element in ELEMENTS {
                check_one("fp.transpose", attrs, &[shape], &[result], element, k as u64);
            }
        }
    }

    #[test]
    fn slices_match_the_interpreter() {
        if !avx2_here() {
            return;
        }
        let cases: [(&[usize], &str, &[usize]); 7] = [
            (&[10], "{begin = [2], end = [7]}", &[5]),
            (&[10], "{begin = [-1], end = [-11], strides = [-1]}", &[10]),
            (&[10], "{begin = [8], end = [1], strides = [-3]}", &[3]),
            (&[4, 50], "{begin = [1, 3], end = [3, 45], strides = [1, 2]}", &[2, 21]),
            (&[4, 50], "{axes = [1], begin = [5], end = [1000]}", &[4, 45]),
            (&[3, 4, 5], "{axes = [0, 2], begin = [2, -2], end = [0, 0], strides = [-1, -1]}", &[2, 4, 3]),
            (&[6, 6], "{begin = [3, 0], end = [3, 6]}", &[0, 6]),
        ];
        for (k, (shape, attrs, result)) in cases.into_iter().enumerate() {
            for element in ELEMENTS {
                check_one("fp.strided_slice", attrs, &[shape], &[result], element, k as u64);
            }
        }
    }

    #[test]
    fn splits_and_concats_match_the_interpreter() {
        if !avx2_here() {
            return;
        }
        for element in ELEMENTS {
            check_one(
                "fp.split",
                "{axis = 1, sizes = [1, 3, 2]}",
                &[&[2, 6, 5]],
                &[&[2, 1, 5], &[2, 3, 5], &[2, 2, 5]],
                element,
                1,
            );
            check_one(
                "fp.split",
                "{axis = 0, sizes = [40, 0, 60]}",
                &[&[100]],
                &[&[40], &[0], &[60]],
                element,
                2,
            );
            check_one(
                "fp.split",
                "{axis = -1, sizes = [3, 4]}",
                &[&[3, 2, 7]],
                &[&[3, 2, 3], &[3, 2, 4]],
                element,
                3,
            );
            check_one(
                "fp.concat",
                "{axis = 1}",
                &[&[2, 1, 5], &[2, 3, 5], &[2, 2, 5]],
                &[&[2, 6, 5]],
                element,
                4,
            );
            check_one("fp.concat", "{axis = 0}", &[&[40], &[0], &[60]], &[&[100]], element, 5);
            check_one("fp.concat", "{axis = -1}", &[&[3, 2, 33], &[3, 2, 1]], &[&[3, 2, 34]], element, 6);
            check_one("fp.concat", "{axis = 0}", &[&[1, 4]], &[&[1, 4]], element, 7);
        }
    }

    #[test]
    fn pads_match_the_interpreter() {
        if !avx2_here() {
            return;
        }
        for element in ELEMENTS.into_iter().chain(["!qnn.uniform<i8<-127:127>:f32, 0.5:127>"]) {
            let value = if element == "f32" { "value = -1.5" } else { "value = 0.0" };
            check_one(
                "fp.pad",
                &format!("{{pads = [1, 2, 3, 0], {value}}}"),
                &[&[2, 5]],
                &[&[6, 7]],
                element,
                1,
            );
            check_one("fp.pad", "{pads = [0, 1, 0, 0, 40, 2]}", &[&[3, 4, 5]], &[&[3, 45, 7]], element, 2);
            check_one("fp.pad", "{pads = [0, 0]}", &[&[9]], &[&[9]], element, 3);
            check_one("fp.pad", "{pads = [2, 3], mode = \"constant\"}", &[&[0]], &[&[5]], element, 4);
        }
        let e = compile_error(&one_op(
            "fp.pad",
            "{pads = [1, 1], mode = \"reflect\"}",
            &["tensor<3xf32>"],
            &["tensor<5xf32>"],
        ));
        assert!(e.message.contains("reflect"), "{e}");
    }

    #[test]
    fn relus_match_the_interpreter() {
        if !avx2_here() {
            return;
        }
        let per_axis = [
            ("!qnn.uniform<i8:f32:0, {0.1:-5, 0.2:3, 0.3:0}>", [3usize, 37]),
            ("!qnn.uniform<u8:f32:1, {0.1:5, 0.2:200, 0.3:0}>", [40, 3]),
        ];
        for element in ELEMENTS {
            for (k, shape) in
                [&[0usize][..], &[1], &[31], &[32], &[33], &[1000], &[3, 5, 7]].into_iter().enumerate()
            {
                check_one("fp.relu", "", &[shape], &[shape], element, k as u64);
            }
        }
        for (element, shape) in per_axis {
            check_one("fp.relu", "", &[&shape], &[&shape], element, 9);
        }
        // NaN, −0 and the smallest values keep their bits.
        let x = f32_tensor(&[6], vec![f32::NAN, -0.0, 0.0, -1e-45, f32::NEG_INFINITY, 3.5]);
        check(&one_op("fp.relu", "", &["tensor<6xf32>"], &["tensor<6xf32>"]), &[x]);
    }
}
