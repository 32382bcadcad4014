//! `qnn.quantize`, `qnn.dequantize` and `qnn.requantize` on per-tensor 8-bit
//! types, JIT-compiled and bit-exact with the interpreter
//! (`docs/quant-semantics.md` §3.1, §3.2, §5; the argument for each kernel is
//! in `docs/codegen-x86.md`).
//!
//! A [`ConvertSpec`] holds one op's parameters, read from its types with the
//! functions the interpreter uses (`quant_params::requantize_multipliers`
//! gives the multiplier and shift, `fixed_point::scale_f32` the f32 scale), so
//! both agree by construction. [`ConvertKernel::compile`] specializes code for
//! it: scales, zero points, clamp bounds, multiplier, shift and rounding mode
//! become immediates; an AVX2 loop handles 8 elements per iteration and a
//! scalar loop the remaining `len % 8`, with the same arithmetic.
//!
//! - **quantize** (f32 → stored byte): `t = x ⊘ s` (`vdivps`, never a
//!   reciprocal), NaN lanes zeroed, `rne(t)` (`vroundps` imm 8), clamp to
//!   `[qmin − zp, qmax − zp]` in f32 (exact: small integers), convert, add `zp`.
//! - **dequantize** (stored byte → f32): `f32(q − zp) ⊗ s` (`vcvtdq2ps`, exact
//!   for |q − zp| ≤ 2^24, then one `vmulps`).
//! - **requantize** (stored byte → stored byte): `v = q − zp_in`, then the
//!   requantizer every integer kernel shares (`kernels/requantize.rs`): the 64-bit
//!   product `v × m` (`vpmuldq` on even and odd lanes), the rounding shift of
//!   §12 with the arithmetic shift built from logical shifts and the sign
//!   mask, a 64-bit clamp to `[qmin − zp_out, qmax − zp_out]`, `+ zp_out`. Its
//!   tail runs the same vector instructions on one lane. (The `qnn.requantize`
//!   lowering uses `lower/requantize.rs`, which also takes per-axis input.)
//!
//! Supported: storage of 1 to 8 bits (i8 / u8 buffers), per-tensor parameters,
//! f32 expressed types. Per-axis parameters, wider storage and f16/bf16
//! expressed types are errors of kind `Unsupported`, never wrong answers.

//!
//! **The loop.** [`emit_elementwise`] writes a complete kernel with the convention of
//! `abi.rs`; its work items are elements, and it reads the input at one place
//! and writes the output at another:
//!
//! ```text
//!   rdi = input + begin × in_size;  rsi = output + begin × out_size
//!   rdx = end − begin                             (elements to convert)
//!   [float kernels] save MXCSR, load 0x1F80      IEEE defaults for the call
//!   load constants into ymm8..ymm15 / r8..r10     (the kernel's parameters)
//!   r11 = len / 8;  jz tail
//! vector:  8 elements per iteration (AVX2)        body_vector
//!   advance rdi, rsi;  dec r11;  jnz vector
//! tail:    rdx = len % 8;  jz done
//! scalar:  1 element per iteration                body_scalar
//!   advance rdi, rsi;  dec rdx;  jnz scalar
//! done:    vzeroupper;  [restore MXCSR];  ret
//! ```
//!
//! Bodies read only `[rdi]` and write only `[rsi]`, 8 elements (vector) or 1
//! (scalar) at a time, so the kernel touches exactly `len` input and `len`
//! output elements. They may clobber rax, rcx, ymm0..ymm7 and must leave the
//! constant registers alone. Branches are relative and nothing refers to an
//! absolute address, so the bytes run wherever they are mapped. Only
//! caller-saved registers are used (every ymm is caller-saved in System V), so
//! nothing needs saving.
//!
//! **Floating-point environment.** A kernel that does float arithmetic sets
//! MXCSR to its power-on value 0x1F80 (round to nearest even, no
//! flush-to-zero, no denormals-are-zero, exceptions masked) for its duration
//! and restores the caller's on return, so its results are the IEEE results of
//! `docs/quant-semantics.md` even when the caller runs with FTZ/DAZ or another
//! rounding mode.
use crate::abi::KernelCode;
use crate::abi::Place;
use crate::abi::{assemble, load_addresses, new_assembler};
use crate::buffer::{ElementType, Elements, ElementsMut};
use crate::error::{CodegenError, CodegenErrorKind};
use crate::kernels::quant_params::{ByteQuant, FixedPointMultiplier};
use crate::kernels::registers::{broadcast_u32, broadcast_u64};
use crate::kernels::requantize::{StageConstants, StageRegisters};
use crate::lower::{LowerOp, OpLowering, Plan};
use crate::runtime::executable::ExecutableCode;
use crate::target::{CpuFeatures, Target};
use iced_x86::code_asm::*;
use qopt_dialect_qnn::fixed_point::{scale_f32, Rounding};
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_dialect_qnn::quant_params::{self, requantize_multipliers};
use qopt_dialect_qnn::rounding_of;
use qopt_ir_core::{type_to_string, Context, FloatKind, Module, OpId, QuantType, Type, TypeData};

/// The features the kernels of this module emit.
const NEEDED: CpuFeatures = CpuFeatures { avx: true, avx2: true, ..CpuFeatures::NONE };

/// `vcmpps` predicate ORD_Q: true where neither operand is NaN.
const CMP_ORDERED: i32 = 7;
/// `vroundps` immediate: round to nearest even (bits 1:0 = 0), from the
/// immediate rather than MXCSR (bit 2 = 0), precision exception suppressed
/// (bit 3).
const ROUND_NEAREST_EVEN: i32 = 8;

/// The parameters of one conversion op, as the kernel is specialized for them.
#[derive(Clone, PartialEq, Debug)]
pub enum ConvertSpec {
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
    /// `qnn.requantize`: `input` → `output`.
    Requantize {
        /// The operand type's parameters.
        input: ByteQuant,
        /// The result type's parameters.
        output: ByteQuant,
        /// `quantize_multiplier(s_in ⊘₆₄ s_out)`.
        multiplier: FixedPointMultiplier,
        /// How ties round.
        rounding: Rounding,
    },
}

impl ConvertSpec {
    /// `qnn.quantize` to `output`.
    pub fn quantize(output: &QuantType) -> Result<ConvertSpec, CodegenError> {
        Ok(ConvertSpec::Quantize { output: ByteQuant::of(output, "the result")? })
    }

    /// `qnn.dequantize` of `input`.
    pub fn dequantize(input: &QuantType) -> Result<ConvertSpec, CodegenError> {
        Ok(ConvertSpec::Dequantize { input: ByteQuant::of(input, "the operand")? })
    }

    /// `qnn.requantize` from `input` to `output` with ties broken by `rounding`;
    /// the multiplier comes from `quant_params::requantize_multipliers`, as in
    /// the interpreter.
    pub fn requantize(
        input: &QuantType,
        output: &QuantType,
        rounding: Rounding,
    ) -> Result<ConvertSpec, CodegenError> {
        let (in_params, out_params) =
            (ByteQuant::of(input, "the operand")?, ByteQuant::of(output, "the result")?);
        let multipliers = requantize_multipliers(input, output)
            .map_err(|e| CodegenError::new(CodegenErrorKind::InvalidInput, e))?;
        let [(multiplier, shift)] = multipliers[..] else {
            return Err(CodegenError::new(
                CodegenErrorKind::InvalidInput,
                "a per-tensor operand has one multiplier",
            ));
        };
        Ok(ConvertSpec::Requantize {
            input: in_params,
            output: out_params,
            multiplier: FixedPointMultiplier { multiplier, shift },
            rounding,
        })
    }

    /// The spec of op `op` of `module`: `qnn.quantize`, `qnn.dequantize` or
    /// `qnn.requantize`, with its operand and result types and `rounding`
    /// attribute.
    pub fn from_op(ctx: &Context, module: &Module, op: OpId) -> Result<ConvertSpec, CodegenError> {
        let name = ctx.op_name_str(module.op_name(op));
        let invalid = |m: String| CodegenError::new(CodegenErrorKind::InvalidInput, format!("{name}: {m}"));
        if module.num_operands(op) != 1 || module.num_results(op) != 1 {
            return Err(invalid("expected one operand and one result".into()));
        }
        let operand = module.value_type(module.operand(op, 0));
        let result = module.value_type(module.result(op, 0));
        let with_op = |e: CodegenError| CodegenError::new(e.kind, format!("{name}: {}", e.message));
        match name {
            qnn_op::QUANTIZE => {
                expect_f32_tensor(ctx, operand, "the operand").map_err(with_op)?;
                ConvertSpec::quantize(quant_of(ctx, result, "the result").map_err(with_op)?).map_err(with_op)
            }
            qnn_op::DEQUANTIZE => {
                expect_f32_tensor(ctx, result, "the result").map_err(with_op)?;
                ConvertSpec::dequantize(quant_of(ctx, operand, "the operand").map_err(with_op)?)
                    .map_err(with_op)
            }
            qnn_op::REQUANTIZE => {
                let input = quant_of(ctx, operand, "the operand").map_err(with_op)?;
                let output = quant_of(ctx, result, "the result").map_err(with_op)?;
                ConvertSpec::requantize(input, output, rounding_of(ctx, module.op_attrs(op))).map_err(with_op)
            }
            _ => Err(CodegenError::new(
                CodegenErrorKind::Unsupported,
                format!("{name} has no x86 conversion kernel (quantize, dequantize and requantize do)"),
            )),
        }
    }

    /// The kernel (convention of `abi.rs`, one work item per element) that
    /// reads the input at `places.0` and writes the output at `places.1`.
    pub fn emit(&self, places: (Place, Place)) -> Result<Vec<u8>, CodegenError> {
        match self {
            ConvertSpec::Quantize { output } => emit_quantize(output, places),
            ConvertSpec::Dequantize { input } => emit_dequantize(input, places),
            ConvertSpec::Requantize { input, output, multiplier, rounding } => {
                emit_requantize(input, output, *multiplier, *rounding, places)
            }
        }
    }

    /// The features its code uses.
    pub fn needed_features() -> CpuFeatures {
        NEEDED
    }

    /// The element type the kernel reads.
    pub fn input_type(&self) -> ElementType {
        match self {
            ConvertSpec::Quantize { .. } => ElementType::F32,
            ConvertSpec::Dequantize { input } | ConvertSpec::Requantize { input, .. } => input.element,
        }
    }

    /// The element type the kernel writes.
    pub fn output_type(&self) -> ElementType {
        match self {
            ConvertSpec::Dequantize { .. } => ElementType::F32,
            ConvertSpec::Quantize { output } | ConvertSpec::Requantize { output, .. } => output.element,
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

/// `qnn.quantize`, `qnn.dequantize`: one elementwise kernel.
pub(crate) struct Convert;

impl OpLowering for Convert {
    fn plan(&self, op: &LowerOp<'_>) -> Result<Plan, CodegenError> {
        ConvertSpec::from_op(op.ctx, op.module, op.op)?;
        op.target.require(&ConvertSpec::needed_features(), op.name())?;
        Ok(Plan::kernels())
    }

    fn emit(&self, op: &LowerOp<'_>, out: &mut crate::lower::Emit<'_>) -> Result<(), CodegenError> {
        let spec = ConvertSpec::from_op(op.ctx, op.module, op.op)?;
        let len = op.result_shape(0)?.iter().product::<usize>();
        let code = spec.emit((out.operand(0)?, out.result(0)?))?;
        out.kernel(KernelCode { code, work: len, work_item: "element", strategy: "AVX2, 8 lanes".into() });
        Ok(())
    }
}

/// A compiled conversion kernel: its spec and its code, ready to run.
#[derive(Debug)]
pub struct ConvertKernel {
    spec: ConvertSpec,
    code: ExecutableCode,
}

impl ConvertKernel {
    /// Generates and maps the kernel for `spec`. `target` must allow AVX2, and
    /// since the kernel runs in this process, the host must have it too.
    pub fn compile(spec: ConvertSpec, target: &Target) -> Result<ConvertKernel, CodegenError> {
        let what = match spec {
            ConvertSpec::Quantize { .. } => "the quantize kernel",
            ConvertSpec::Dequantize { .. } => "the dequantize kernel",
            ConvertSpec::Requantize { .. } => "the requantize kernel",
        };
        target.require(&NEEDED, what)?;
        let missing_here = NEEDED.missing_from(&CpuFeatures::host());
        if missing_here != CpuFeatures::NONE {
            return Err(CodegenError::new(
                CodegenErrorKind::MissingCpuFeatures,
                format!("{what} runs in this process, which lacks {missing_here}"),
            ));
        }
        let bytes = spec.emit((Place::Io(0), Place::Io(1)))?;
        Ok(ConvertKernel { spec, code: ExecutableCode::new(&bytes)? })
    }

    /// What the kernel computes.
    pub fn spec(&self) -> &ConvertSpec {
        &self.spec
    }

    /// The machine code.
    pub fn machine_code(&self) -> &[u8] {
        self.code.bytes()
    }

    /// Converts every element of `input` into `output`. The buffers must have
    /// the kernel's element types and equal lengths.
    pub fn run(&self, input: Elements<'_>, mut output: ElementsMut<'_>) -> Result<(), CodegenError> {
        let (want_in, want_out) = (self.spec.input_type(), self.spec.output_type());
        if input.element_type() != want_in || output.element_type() != want_out {
            return Err(CodegenError::new(
                CodegenErrorKind::BadArguments,
                format!(
                    "the kernel converts {want_in} to {want_out}, got {} to {}",
                    input.element_type(),
                    output.element_type()
                ),
            ));
        }
        if input.len() != output.len() {
            return Err(CodegenError::new(
                CodegenErrorKind::BadArguments,
                format!("input has {} elements but output has {}", input.len(), output.len()),
            ));
        }
        #[cfg(target_arch = "x86_64")]
        {
            let io = [input.as_ptr().cast_mut(), output.as_mut_ptr()];
            // SAFETY: `compile` produced a complete kernel with the
            // convention of abi.rs that reads io[0] and writes io[1]
            // (the loop below), checked that the host has every feature it uses;
            // over the range 0..len it reads exactly `len` elements of the
            // input type and writes exactly `len` of the output type, which
            // the checks above guarantee the buffers hold. It touches
            // neither arena nor rodata.
            unsafe {
                crate::abi::call_kernel(
                    self.code.entry(),
                    std::ptr::null_mut(),
                    std::ptr::null(),
                    &io,
                    0,
                    input.len(),
                );
            }
            Ok(())
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = &mut output;
            Err(CodegenError::new(
                CodegenErrorKind::MissingCpuFeatures,
                "x86-64 code cannot run on this architecture",
            ))
        }
    }
}

/// quantize: ymm15 scale, ymm14 `qmin − zp`, ymm13 `qmax − zp` (f32), ymm12 zp.
fn emit_quantize(out: &ByteQuant, places: (Place, Place)) -> Result<Vec<u8>, CodegenError> {
    let scale = scale_f32(out.scale);
    let (low, high, zp) =
        ((out.qmin - out.zero_point) as f32, (out.qmax - out.zero_point) as f32, out.zero_point);
    let unsigned = out.is_unsigned();
    let shape = LoopShape { input_size: 4, output_size: 1, uses_float_environment: true };
    emit_elementwise(
        shape,
        places,
        &|a| {
            broadcast_u32(a, ymm15, scale.to_bits())?;
            broadcast_u32(a, ymm14, low.to_bits())?;
            broadcast_u32(a, ymm13, high.to_bits())?;
            broadcast_u32(a, ymm12, zp as u32)
        },
        &|a| {
            a.vmovups(ymm0, ymmword_ptr(rdi))?;
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
            a.vmovss(xmm0, dword_ptr(rdi))?;
            a.vcmpss(xmm1, xmm0, xmm0, CMP_ORDERED)?;
            a.vdivss(xmm0, xmm0, xmm15)?;
            a.vandps(xmm0, xmm0, xmm1)?;
            a.vroundss(xmm0, xmm0, xmm0, ROUND_NEAREST_EVEN)?;
            a.vmaxss(xmm0, xmm0, xmm14)?;
            a.vminss(xmm0, xmm0, xmm13)?;
            a.vcvttss2si(eax, xmm0)?;
            a.add(eax, zp)?;
            a.mov(byte_ptr(rsi), al)
        },
    )
}

/// dequantize: ymm15 scale, ymm12 zp.
fn emit_dequantize(input: &ByteQuant, places: (Place, Place)) -> Result<Vec<u8>, CodegenError> {
    let scale = scale_f32(input.scale);
    let zp = input.zero_point;
    let unsigned = input.is_unsigned();
    let shape = LoopShape { input_size: 1, output_size: 4, uses_float_environment: true };
    emit_elementwise(
        shape,
        places,
        &|a| {
            broadcast_u32(a, ymm15, scale.to_bits())?;
            broadcast_u32(a, ymm12, zp as u32)
        },
        &|a| {
            load_8_bytes(a, ymm0, unsigned)?;
            a.vpsubd(ymm0, ymm0, ymm12)?;
            a.vcvtdq2ps(ymm0, ymm0)?;
            a.vmulps(ymm0, ymm0, ymm15)?;
            a.vmovups(ymmword_ptr(rsi), ymm0)
        },
        &|a| {
            load_byte(a, unsigned)?;
            a.sub(eax, zp)?;
            a.vcvtsi2ss(xmm0, xmm0, eax)?;
            a.vmulss(xmm0, xmm0, xmm15)?;
            a.vmovss(dword_ptr(rsi), xmm0)
        },
    )
}

/// requantize, with the shared requantizer of `kernels/requantize.rs`. Constants:
/// ymm15 zp_in (i32), ymm14 m (i32; `vpmuldq` reads the low dword of each
/// qword), and the [`StageRegisters`] ymm13 bias, ymm12 ones, xmm7 the shift,
/// ymm11 / ymm10 the clamp bounds `qmin − zp_out` / `qmax − zp_out`, ymm9
/// zp_out, ymm8 zero. The scalar tail runs the same vector instructions on
/// one lane, so both loops compute with one instruction sequence.
fn emit_requantize(
    input: &ByteQuant,
    output: &ByteQuant,
    multiplier: FixedPointMultiplier,
    rounding: Rounding,
    places: (Place, Place),
) -> Result<Vec<u8>, CodegenError> {
    let stage = StageConstants::single_term(multiplier, rounding, output);
    let zp_in = input.zero_point;
    let (in_unsigned, out_unsigned) = (input.is_unsigned(), output.is_unsigned());
    let shape = LoopShape { input_size: 1, output_size: 1, uses_float_environment: false };
    let regs = StageRegisters {
        zero: ymm8,
        one: ymm12,
        bias: ymm13,
        shift: xmm7,
        low: ymm11,
        high: ymm10,
        zp_out: ymm9,
    };
    // v = q − zp_in in ymm0 (i32) → the requantized values, i32 in ymm0.
    let rescale = |a: &mut CodeAssembler| -> Result<(), IcedError> {
        a.vpsubd(ymm0, ymm0, ymm15)?;
        regs.requantizer(rounding, ymm14).emit(a, ymm0, ymm1, ymm2)
    };
    emit_elementwise(
        shape,
        places,
        &|a| {
            broadcast_u32(a, ymm15, zp_in as u32)?;
            broadcast_u32(a, ymm14, stage.multiplier as u32)?;
            broadcast_u64(a, ymm13, stage.bias as u64)?;
            broadcast_u64(a, ymm12, 1)?;
            broadcast_u64(a, ymm11, stage.low as u64)?;
            broadcast_u64(a, ymm10, stage.high as u64)?;
            broadcast_u32(a, ymm9, stage.zp_out as u32)?;
            a.vpxor(ymm8, ymm8, ymm8)?;
            a.mov(eax, stage.shift)?;
            a.vmovd(xmm7, eax)
        },
        &|a| {
            load_8_bytes(a, ymm0, in_unsigned)?;
            rescale(a)?;
            store_8_bytes(a, out_unsigned)
        },
        &|a| {
            load_byte(a, in_unsigned)?;
            a.vmovd(xmm0, eax)?;
            rescale(a)?;
            a.vmovd(eax, xmm0)?;
            a.mov(byte_ptr(rsi), al)
        },
    )
}

/// Elements per iteration of the vector loop (one ymm of i32 / f32 lanes).
pub(crate) const VECTOR_LANES: usize = 8;

/// MXCSR's power-on value: round to nearest even, all exceptions masked, no
/// FTZ, no DAZ.
const MXCSR_IEEE_DEFAULT: u32 = 0x1F80;

/// Bytes per element on each side, and whether the kernel does float
/// arithmetic (and so pins MXCSR).
#[derive(Copy, Clone, Debug)]
pub(crate) struct LoopShape {
    /// Input bytes per element.
    pub input_size: usize,
    /// Output bytes per element.
    pub output_size: usize,
    /// The kernel computes with floats: pin MXCSR to the IEEE defaults.
    pub uses_float_environment: bool,
}

/// One part of a kernel's body: appends instructions to the assembler.
pub(crate) type Emitter<'e> = &'e dyn Fn(&mut CodeAssembler) -> Result<(), IcedError>;

/// The complete function of an elementwise kernel (see the module doc) that
/// reads `input` and writes `output`, as position-independent machine code.
pub(crate) fn emit_elementwise(
    shape: LoopShape,
    (input, output): (Place, Place),
    load_constants: Emitter<'_>,
    body_vector: Emitter<'_>,
    body_scalar: Emitter<'_>,
) -> Result<Vec<u8>, CodegenError> {
    let mut a = new_assembler()?;
    load_addresses(&mut a, &[(rdi, input), (rsi, output)])?;
    a.mov(rdx, r8)?;
    a.sub(rdx, rcx)?;
    advance_by_elements(&mut a, rdi, rcx, shape.input_size)?;
    advance_by_elements(&mut a, rsi, rcx, shape.output_size)?;
    let mut vector_loop = a.create_label();
    let mut tail = a.create_label();
    let mut scalar_loop = a.create_label();
    let mut done = a.create_label();
    let lanes = VECTOR_LANES as i32;
    let (in_size, out_size) = (shape.input_size as i32, shape.output_size as i32);

    if shape.uses_float_environment {
        a.sub(rsp, 8)?;
        a.stmxcsr(dword_ptr(rsp))?;
        a.mov(dword_ptr(rsp + 4), MXCSR_IEEE_DEFAULT)?;
        a.ldmxcsr(dword_ptr(rsp + 4))?;
    }
    load_constants(&mut a)?;

    a.mov(r11, rdx)?;
    a.shr(r11, VECTOR_LANES.trailing_zeros())?;
    a.jz(tail)?;
    a.set_label(&mut vector_loop)?;
    body_vector(&mut a)?;
    a.add(rdi, lanes * in_size)?;
    a.add(rsi, lanes * out_size)?;
    a.dec(r11)?;
    a.jnz(vector_loop)?;

    a.set_label(&mut tail)?;
    a.and(rdx, lanes - 1)?;
    a.jz(done)?;
    a.set_label(&mut scalar_loop)?;
    body_scalar(&mut a)?;
    a.add(rdi, in_size)?;
    a.add(rsi, out_size)?;
    a.dec(rdx)?;
    a.jnz(scalar_loop)?;

    a.set_label(&mut done)?;
    a.vzeroupper()?;
    if shape.uses_float_environment {
        a.ldmxcsr(dword_ptr(rsp))?;
        a.add(rsp, 8)?;
    }
    a.ret()?;
    assemble(&mut a)
}

/// `pointer += count × element_size` for element sizes 1, 2, 4 and 8.
fn advance_by_elements(
    a: &mut CodeAssembler,
    pointer: AsmRegister64,
    count: AsmRegister64,
    element_size: usize,
) -> Result<(), CodegenError> {
    let scale = match element_size {
        1 | 2 | 4 | 8 => element_size as u32,
        _ => {
            return Err(CodegenError::new(
                crate::error::CodegenErrorKind::Assembler,
                format!("element size {element_size} is not 1, 2, 4 or 8"),
            ))
        }
    };
    a.lea(pointer, qword_ptr(pointer + count * scale))?;
    Ok(())
}

/// Narrows the 8 i32 lanes of ymm0, each already within the byte range of the
/// output (so the saturating packs never saturate), to 8 bytes in order and
/// stores them at `[rsi]`. Clobbers ymm1.
pub(crate) fn store_8_bytes(a: &mut CodeAssembler, unsigned: bool) -> Result<(), IcedError> {
    a.vextracti128(xmm1, ymm0, 1)?;
    a.vpackssdw(xmm0, xmm0, xmm1)?;
    if unsigned {
        a.vpackuswb(xmm0, xmm0, xmm0)?;
    } else {
        a.vpacksswb(xmm0, xmm0, xmm0)?;
    }
    a.vmovq(qword_ptr(rsi), xmm0)
}

/// Loads 8 stored bytes at `[rdi]` into the 8 i32 lanes of `ymm`, sign- or
/// zero-extended.
pub(crate) fn load_8_bytes(
    a: &mut CodeAssembler,
    ymm: AsmRegisterYmm,
    unsigned: bool,
) -> Result<(), IcedError> {
    if unsigned {
        a.vpmovzxbd(ymm, qword_ptr(rdi))
    } else {
        a.vpmovsxbd(ymm, qword_ptr(rdi))
    }
}

/// Loads the stored byte at `[rdi]` into eax, sign- or zero-extended.
pub(crate) fn load_byte(a: &mut CodeAssembler, unsigned: bool) -> Result<(), IcedError> {
    if unsigned {
        a.movzx(eax, byte_ptr(rdi))
    } else {
        a.movsx(eax, byte_ptr(rdi))
    }
}
