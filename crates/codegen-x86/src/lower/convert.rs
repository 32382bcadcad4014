//! `qnn.quantize` and `qnn.dequantize` on per-tensor 8-bit types, as row
//! kernels bit-exact with the interpreter (`docs/quant-semantics.md` §3.1,
//! §3.2; the argument for each is in `docs/codegen-x86.md` §9).
//! (`qnn.requantize` is `lower/requantize.rs`.)
//!
//! [`Conversion::from_op`] reads one op's parameters from its types with the
//! functions the interpreter uses (`fixed_point::scale_f32` gives the f32
//! scale), so both agree by construction; scales, zero points and clamp
//! bounds become immediates. The kernel walks the op's elements as rows
//! (`kernels/rows.rs`, contiguous rows split into blocks for the threads);
//! each row runs an AVX2 loop of 8 elements and a scalar loop for the rest,
//! with the same arithmetic:
//!
//! - **quantize** (f32 → stored byte): `t = x ⊘ s` (`vdivps`, never a
//!   reciprocal), NaN lanes zeroed, `rne(t)` (`vroundps` imm 8), clamp to
//!   `[qmin − zp, qmax − zp]` in f32 (exact: small integers), convert, add `zp`.
//! - **dequantize** (stored byte → f32): `f32(q − zp) ⊗ s` (`vcvtdq2ps`, exact
//!   for |q − zp| ≤ 2^24, then one `vmulps`).
//!
//! Both compute with floats, so the kernel pins MXCSR to the IEEE defaults
//! for the call ([`Frame::float_environment`]) and the caller's rounding mode or
//! FTZ/DAZ cannot change a result. Supported: storage of 1 to 8 bits (i8 /
//! u8 buffers), per-tensor parameters, f32 expressed types. Per-axis
//! parameters, wider storage and f16/bf16 expressed types are errors of kind
//! `Unsupported`, never wrong answers.

use crate::error::{CodegenError, CodegenErrorKind};
use crate::kernels::quant_params::ByteQuant;
use crate::kernels::registers::broadcast_u32;
use crate::kernels::rows::{
    bind, emit_framed_rows, Frame, Nest, Stream, INPUT0, LANE_RUN, OUTPUT, ROW_LENGTH, STREAM_POINTERS,
};
use crate::lower::rows::RowKernel;
use crate::lower::{Emit, EmitResult, LowerOp};
use iced_x86::code_asm::*;
use qopt_dialect_qnn::fixed_point::scale_f32;
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_dialect_qnn::quant_params;
use qopt_ir_core::{type_to_string, Context, FloatKind, QuantType, Type, TypeData};

/// `vcmpps` predicate ORD_Q: true where neither operand is NaN.
const CMP_ORDERED: i32 = 7;
/// `vroundps` immediate: round to nearest even (bits 1:0 = 0), from the
/// immediate rather than MXCSR (bit 2 = 0), precision exception suppressed
/// (bit 3).
const ROUND_NEAREST_EVEN: i32 = 8;
/// Elements per iteration of a row's vector loop (one ymm of f32 / i32 lanes).
const VECTOR_LANES: i32 = 8;

/// One conversion op, as its kernel is specialized.
#[derive(Clone, PartialEq, Debug)]
pub(crate) enum Conversion {
    /// `qnn.quantize`: f32 → `output`.
    Quantize {
        /// The result type's parameters.
        output: ByteQuant,
    },
    /// `qnn.dequantize`: `input` → f32.
    Dequantize {
        /// The operand type's parameters.
        input: ByteQuant,
    },
}

impl Conversion {
    /// The conversion `op` performs, with its operand and result types.
    pub(crate) fn from_op(op: &LowerOp<'_>) -> Result<Conversion, CodegenError> {
        op.expect_arity(1..=1, 1)?;
        let with_op = |e: CodegenError| CodegenError::new(e.kind, format!("{}: {}", op.name(), e.message));
        let (operand, result) = (op.operand_type(0), op.result_type(0));
        match op.name() {
            qnn_op::QUANTIZE => {
                expect_f32_tensor(op.ctx, operand, "the operand").map_err(with_op)?;
                let output = quant_of(op.ctx, result, "the result").map_err(with_op)?;
                Ok(Conversion::Quantize { output: ByteQuant::of(output, "the result").map_err(with_op)? })
            }
            qnn_op::DEQUANTIZE => {
                expect_f32_tensor(op.ctx, result, "the result").map_err(with_op)?;
                let input = quant_of(op.ctx, operand, "the operand").map_err(with_op)?;
                Ok(Conversion::Dequantize { input: ByteQuant::of(input, "the operand").map_err(with_op)? })
            }
            name => Err(CodegenError::new(
                CodegenErrorKind::Unsupported,
                format!("{name} has no x86 conversion kernel (quantize and dequantize do)"),
            )),
        }
    }

    /// Bytes per element read and written.
    fn element_sizes(&self) -> (usize, usize) {
        match self {
            Conversion::Quantize { .. } => (4, 1),
            Conversion::Dequantize { .. } => (1, 4),
        }
    }
}

fn quant_of<'c>(ctx: &'c Context, ty: Type, what: &str) -> Result<&'c QuantType, CodegenError> {
    quant_params::quant_element(ctx, ty).ok_or_else(|| {
        CodegenError::new(
            CodegenErrorKind::InvalidInput,
            format!("{what} must be a tensor of !qnn.uniform elements, got {}", type_to_string(ctx, ty)),
        )
    })
}

fn expect_f32_tensor(ctx: &Context, ty: Type, what: &str) -> Result<(), CodegenError> {
    match ctx.type_data(ctx.element_type(ty)) {
        TypeData::Float(FloatKind::F32) => Ok(()),
        _ => Err(CodegenError::new(
            CodegenErrorKind::Unsupported,
            format!(
                "{what} must be an f32 tensor (f16 and bf16 are not compiled yet), got {}",
                type_to_string(ctx, ty)
            ),
        )),
    }
}

/// `qnn.quantize`, `qnn.dequantize`: one row kernel each.
pub(crate) struct Convert;

impl RowKernel for Convert {
    type Op<'a> = (Conversion, usize);

    fn read<'a>(&self, op: &LowerOp<'a>) -> Result<(Conversion, usize), CodegenError> {
        Ok((Conversion::from_op(op)?, op.result_shape(0)?.iter().product()))
    }

    fn emit_rows(
        &self,
        _op: &LowerOp<'_>,
        (conversion, len): Self::Op<'_>,
        out: &mut Emit<'_>,
    ) -> EmitResult {
        let (in_size, out_size) = conversion.element_sizes();
        let nest = Nest::new(&[len])
            .with(INPUT0, Stream::contiguous(out.operand(0)?, &[len], in_size))
            .with(OUTPUT, Stream::contiguous(out.result(0)?, &[len], out_size));
        let kernel = match conversion {
            Conversion::Quantize { output } => emit_quantize(&nest, &output)?,
            Conversion::Dequantize { input } => emit_dequantize(&nest, &input)?,
        };
        out.kernel(kernel);
        Ok(())
    }
}

const INPUT: AsmRegister64 = STREAM_POINTERS[INPUT0];
const OUTPUT_AT: AsmRegister64 = STREAM_POINTERS[OUTPUT];

/// A row of `ROW_LENGTH` elements: `vector` on 8 elements at a time, then
/// `scalar` on each one left, advancing the input and output pointers by
/// the element sizes. The bodies read only at the input pointer and write
/// only at the output pointer; they may clobber rax, rcx and ymm0–ymm7.
fn emit_row(
    a: &mut CodeAssembler,
    (in_size, out_size): (i32, i32),
    vector: &dyn Fn(&mut CodeAssembler) -> Result<(), IcedError>,
    scalar: &dyn Fn(&mut CodeAssembler) -> Result<(), IcedError>,
) -> Result<(), CodegenError> {
    let mut vector_loop = a.create_label();
    let mut tail = a.create_label();
    let mut scalar_loop = a.create_label();
    let mut done = a.create_label();
    a.mov(r11, ROW_LENGTH)?;
    a.shr(r11, VECTOR_LANES.trailing_zeros())?;
    a.jz(tail)?;
    bind(a, &mut vector_loop)?;
    vector(a)?;
    a.add(INPUT, VECTOR_LANES * in_size)?;
    a.add(OUTPUT_AT, VECTOR_LANES * out_size)?;
    a.dec(r11)?;
    a.jnz(vector_loop)?;
    bind(a, &mut tail)?;
    a.and(ROW_LENGTH, VECTOR_LANES - 1)?;
    a.jz(done)?;
    bind(a, &mut scalar_loop)?;
    scalar(a)?;
    a.add(INPUT, in_size)?;
    a.add(OUTPUT_AT, out_size)?;
    a.dec(ROW_LENGTH)?;
    a.jnz(scalar_loop)?;
    bind(a, &mut done)?;
    Ok(())
}

/// quantize: ymm15 scale, ymm14 `qmin − zp`, ymm13 `qmax − zp` (f32), ymm12 zp.
fn emit_quantize(nest: &Nest, out: &ByteQuant) -> Result<crate::abi::KernelCode, CodegenError> {
    let scale = scale_f32(out.scale);
    let (low, high, zp) =
        ((out.qmin - out.zero_point) as f32, (out.qmax - out.zero_point) as f32, out.zero_point);
    let unsigned = out.is_unsigned();
    emit_framed_rows(
        nest,
        LANE_RUN,
        Frame { locals: 0, float_environment: true },
        &|a| {
            broadcast_u32(a, ymm15, scale.to_bits())?;
            broadcast_u32(a, ymm14, low.to_bits())?;
            broadcast_u32(a, ymm13, high.to_bits())?;
            broadcast_u32(a, ymm12, zp as u32)?;
            Ok(())
        },
        &|a, _| {
            emit_row(
                a,
                (4, 1),
                &|a| {
                    a.vmovups(ymm0, ymmword_ptr(INPUT))?;
                    a.vcmpps(ymm1, ymm0, ymm0, CMP_ORDERED)?;
                    a.vdivps(ymm0, ymm0, ymm15)?;
                    a.vandps(ymm0, ymm0, ymm1)?; // NaN → 0, so it becomes zp
                    a.vroundps(ymm0, ymm0, ROUND_NEAREST_EVEN)?;
                    a.vmaxps(ymm0, ymm0, ymm14)?;
                    a.vminps(ymm0, ymm0, ymm13)?;
                    a.vcvtps2dq(ymm0, ymm0)?;
                    a.vpaddd(ymm0, ymm0, ymm12)?;
                    store_8_bytes(a, unsigned)
                },
                &|a| {
                    a.vmovss(xmm0, dword_ptr(INPUT))?;
                    a.vcmpss(xmm1, xmm0, xmm0, CMP_ORDERED)?;
                    a.vdivss(xmm0, xmm0, xmm15)?;
                    a.vandps(xmm0, xmm0, xmm1)?;
                    a.vroundss(xmm0, xmm0, xmm0, ROUND_NEAREST_EVEN)?;
                    a.vmaxss(xmm0, xmm0, xmm14)?;
                    a.vminss(xmm0, xmm0, xmm13)?;
                    a.vcvttss2si(eax, xmm0)?;
                    a.add(eax, zp)?;
                    a.mov(byte_ptr(OUTPUT_AT), al)
                },
            )
        },
        "AVX2, 8 lanes".into(),
    )
}

/// dequantize: ymm15 scale, ymm12 zp.
fn emit_dequantize(nest: &Nest, input: &ByteQuant) -> Result<crate::abi::KernelCode, CodegenError> {
    let scale = scale_f32(input.scale);
    let zp = input.zero_point;
    let unsigned = input.is_unsigned();
    emit_framed_rows(
        nest,
        LANE_RUN,
        Frame { locals: 0, float_environment: true },
        &|a| {
            broadcast_u32(a, ymm15, scale.to_bits())?;
            broadcast_u32(a, ymm12, zp as u32)?;
            Ok(())
        },
        &|a, _| {
            emit_row(
                a,
                (1, 4),
                &|a| {
                    if unsigned {
                        a.vpmovzxbd(ymm0, qword_ptr(INPUT))?;
                    } else {
                        a.vpmovsxbd(ymm0, qword_ptr(INPUT))?;
                    }
                    a.vpsubd(ymm0, ymm0, ymm12)?;
                    a.vcvtdq2ps(ymm0, ymm0)?;
                    a.vmulps(ymm0, ymm0, ymm15)?;
                    a.vmovups(ymmword_ptr(OUTPUT_AT), ymm0)
                },
                &|a| {
                    if unsigned {
                        a.movzx(eax, byte_ptr(INPUT))?;
                    } else {
                        a.movsx(eax, byte_ptr(INPUT))?;
                    }
                    a.sub(eax, zp)?;
                    a.vcvtsi2ss(xmm0, xmm0, eax)?;
                    a.vmulss(xmm0, xmm0, xmm15)?;
                    a.vmovss(dword_ptr(OUTPUT_AT), xmm0)
                },
            )
        },
        "AVX2, 8 lanes".into(),
    )
}

/// Narrows the 8 i32 lanes of ymm0, each already within the byte range of the
/// output (so the saturating packs never saturate), to 8 bytes in order and
/// stores them at the output pointer. Clobbers ymm1.
fn store_8_bytes(a: &mut CodeAssembler, unsigned: bool) -> Result<(), IcedError> {
    a.vextracti128(xmm1, ymm0, 1)?;
    a.vpackssdw(xmm0, xmm0, xmm1)?;
    if unsigned {
        a.vpackuswb(xmm0, xmm0, xmm0)?;
    } else {
        a.vpacksswb(xmm0, xmm0, xmm0)?;
    }
    a.vmovq(qword_ptr(OUTPUT_AT), xmm0)
}
