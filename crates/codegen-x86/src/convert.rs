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
//! - **requantize** (stored byte → stored byte): `v = q − zp_in`, the 64-bit
//!   product `v × m` (`vpmuldq` on even and odd lanes), the rounding shift of
//!   §12 with the arithmetic shift built from logical shifts and the sign
//!   mask, a 64-bit clamp to `[qmin − zp_out, qmax − zp_out]`, `+ zp_out`.
//!
//! Supported: storage of 1 to 8 bits (i8 / u8 buffers), per-tensor parameters,
//! f32 expressed types. Per-axis parameters, wider storage and f16/bf16
//! expressed types are errors of kind `Unsupported`, never wrong answers.

use crate::abi::Place;
use crate::buffer::{ElementType, Elements, ElementsMut};
use crate::emit::{
    broadcast_u32, broadcast_u64, emit_elementwise, load_8_bytes, load_byte, store_8_bytes, LoopShape,
};
use crate::error::{CodegenError, CodegenErrorKind};
use crate::jit::ExecutableCode;
use crate::kernels::requantize::{HalfConstants, Narrowing, Requantizer, ShiftCount, Vector};
use crate::target::{CpuFeatures, Target};
use iced_x86::code_asm::*;
use qopt_dialect_qnn::fixed_point::{scale_f32, Rounding};
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_dialect_qnn::quant_params::{self, check_quant_type, requantize_multipliers, storage_range};
use qopt_dialect_qnn::rounding_of;
use qopt_ir_core::{type_to_string, Context, FloatKind, Module, OpId, QuantType, Signedness, Type, TypeData};

/// The features the kernels of this module emit.
const NEEDED: CpuFeatures = CpuFeatures { avx: true, avx2: true, ..CpuFeatures::NONE };

/// `vcmpps` predicate ORD_Q: true where neither operand is NaN.
const CMP_ORDERED: i32 = 7;
/// `vroundps` immediate: round to nearest even (bits 1:0 = 0), from the
/// immediate rather than MXCSR (bit 2 = 0), precision exception suppressed
/// (bit 3).
const ROUND_NEAREST_EVEN: i32 = 8;

/// One quantized side of a conversion: a per-tensor 8-bit type.
#[derive(Copy, Clone, PartialEq, Debug)]
pub struct ByteQuant {
    /// The buffer type of the stored values (`I8` or `U8`).
    pub element: ElementType,
    /// The scale as written in the type (f64).
    pub scale: f64,
    /// The stored value of real 0.
    pub zero_point: i32,
    /// Smallest stored value (the storage range, narrowed if the type narrows it).
    pub qmin: i32,
    /// Largest stored value.
    pub qmax: i32,
}

impl ByteQuant {
    /// The parameters of `q`, or an error when the type is invalid or outside
    /// what these kernels compile (`what` names the operand).
    pub fn of(q: &QuantType, what: &str) -> Result<ByteQuant, CodegenError> {
        check_quant_type(q)
            .map_err(|e| CodegenError::new(CodegenErrorKind::InvalidInput, format!("{what}: {e}")))?;
        let unsupported =
            |m: String| CodegenError::new(CodegenErrorKind::Unsupported, format!("{what}: {m}"));
        let Some(p) = quant_params::per_tensor(q) else {
            return Err(unsupported("per-axis parameters are not compiled yet (per tensor only)".into()));
        };
        if q.storage.width > 8 {
            return Err(unsupported(format!(
                "{}-bit storage is not compiled yet (8 bits at most)",
                q.storage.width
            )));
        }
        if q.expressed != FloatKind::F32 {
            return Err(unsupported("only f32 expressed types are compiled yet".into()));
        }
        let element = match q.storage.signedness {
            Signedness::Signless => ElementType::I8,
            Signedness::Unsigned => ElementType::U8,
        };
        let (qmin, qmax) = storage_range(q);
        // check_quant_type keeps zp and the range within the 8-bit storage.
        Ok(ByteQuant {
            element,
            scale: p.scale,
            zero_point: p.zero_point as i32,
            qmin: qmin as i32,
            qmax: qmax as i32,
        })
    }

    fn is_unsigned(&self) -> bool {
        self.element == ElementType::U8
    }
}

/// The fixed-point form of a requantization: `M ≈ multiplier × 2^(−31−shift)`.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct FixedPointMultiplier {
    /// `m`, in `[2^30, 2^31)`.
    pub multiplier: i32,
    /// `n`; the right shift is `31 + n`.
    pub shift: i32,
}

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

/// The multiplier and right shift the requantize kernel uses for `(m, n)`:
/// the same results as `R(v × m, 31 + n, mode)` for every input with
/// |v| < 2^31, followed by a clamp to bounds of magnitude below 2^29, with a
/// shift in `1..=62` so that the 64-bit arithmetic cannot overflow.
///
/// - `1 ≤ s ≤ 62`: `(m, s)` itself. |v × m| < 2^62 and the rounding bias is at
///   most 2^61, so the biased value fits i64.
/// - `s ≥ 63`: |v × m| < 2^62 ≤ 2^(s−1), strictly below half a step, so `R` is 0
///   in every mode; `(0, 1)` gives 0 in every mode too.
/// - `s ≤ 0`: `R = v × m × 2^(−s)` has the sign of `v` and, for `v ≠ 0`,
///   magnitude at least 2^30, so the clamp gives the same bound as for
///   `(2^30, 1)`, whose result `v × 2^29` has the same sign and magnitude at
///   least 2^29 (and is 0 for `v = 0`, as `R` is).
pub fn kernel_multiplier_and_shift(m: FixedPointMultiplier) -> (i32, u32) {
    let s = 31i64 + i64::from(m.shift);
    if s >= 63 {
        (0, 1)
    } else if s <= 0 {
        (1 << 30, 1)
    } else {
        (m.multiplier, s as u32)
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
            // (emit.rs), checked that the host has every feature it uses;
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

/// requantize. Vector constants: ymm15 zp_in (i32), ymm14 m (i32; `vpmuldq`
/// reads the low dword of each qword), ymm13 the rounding bias (i64: `h`, or
/// `h − 1` for half_to_even), ymm12 ones (i64), ymm11 / ymm10 the clamp bounds
/// `qmin − zp_out` / `qmax − zp_out` (i64, or i32 when the shift is at least
/// 32 and the high dwords are narrowed), ymm9 zp_out (i32), ymm8 zero; the
/// vector arithmetic is the shared [`Requantizer`] with immediate shifts.
/// Scalar constants: r8 the bias, r9 / r10 the bounds.
fn emit_requantize(
    input: &ByteQuant,
    output: &ByteQuant,
    multiplier: FixedPointMultiplier,
    rounding: Rounding,
    places: (Place, Place),
) -> Result<Vec<u8>, CodegenError> {
    let (m, s) = kernel_multiplier_and_shift(multiplier);
    let half = 1i64 << (s - 1);
    let bias = if rounding == Rounding::HalfToEven { half - 1 } else { half };
    let low = i64::from(output.qmin - output.zero_point);
    let high = i64::from(output.qmax - output.zero_point);
    let (zp_in, zp_out) = (input.zero_point, output.zero_point);
    let (in_unsigned, out_unsigned) = (input.is_unsigned(), output.is_unsigned());
    let shape = LoopShape { input_size: 1, output_size: 1, uses_float_environment: false };
    let constants = HalfConstants {
        multiplier: Vector::Reg(ymm14),
        rounding_bias: Vector::Reg(ymm13),
        shift: ShiftCount::Immediate(s),
    };
    // Shifts of 32 or more narrow through the high dwords (i32 bounds);
    // smaller ones through the 64-bit shift and clamp (i64 bounds).
    let high_dwords = s >= 32;
    let narrowing = if high_dwords {
        Narrowing::HighDwords {
            shift: ShiftCount::Immediate(s - 32),
            low: Vector::Reg(ymm11),
            high: Vector::Reg(ymm10),
        }
    } else {
        Narrowing::Wide { low: ymm11, high: Vector::Reg(ymm10) }
    };
    let requantizer = Requantizer {
        even: constants,
        odd: constants,
        rounding,
        ones: Vector::Reg(ymm12),
        narrowing,
        zero_point: Vector::Reg(ymm9),
        zero: Some(ymm8),
    };

    emit_elementwise(
        shape,
        places,
        &|a| {
            broadcast_u32(a, ymm15, zp_in as u32)?;
            broadcast_u32(a, ymm14, m as u32)?;
            broadcast_u64(a, ymm13, bias as u64)?;
            broadcast_u64(a, ymm12, 1)?;
            if high_dwords {
                broadcast_u32(a, ymm11, low as u32)?;
                broadcast_u32(a, ymm10, high as u32)?;
            } else {
                broadcast_u64(a, ymm11, low as u64)?;
                broadcast_u64(a, ymm10, high as u64)?;
            }
            broadcast_u32(a, ymm9, zp_out as u32)?;
            a.vpxor(ymm8, ymm8, ymm8)?;
            a.mov(r8, bias)?;
            a.mov(r9, low)?;
            a.mov(r10, high)
        },
        &|a| {
            load_8_bytes(a, ymm0, in_unsigned)?;
            a.vpsubd(ymm0, ymm0, ymm15)?; // v = q − zp_in (i32)
            requantizer.emit(a, ymm0, ymm1, ymm2)?;
            store_8_bytes(a, out_unsigned)
        },
        &|a| {
            load_byte(a, in_unsigned)?;
            a.sub(eax, zp_in)?;
            a.movsxd(rax, eax)?;
            a.imul_3(rax, rax, m)?;
            match rounding {
                Rounding::HalfUp => {}
                Rounding::HalfAwayFromZero => {
                    a.mov(rcx, rax)?;
                    a.sar(rcx, 63)?;
                    a.add(rax, rcx)?;
                }
                Rounding::HalfToEven => {
                    a.mov(rcx, rax)?;
                    a.shr(rcx, s)?;
                    a.and(ecx, 1)?;
                    a.add(rax, rcx)?;
                }
            }
            a.add(rax, r8)?;
            a.sar(rax, s)?;
            a.cmp(rax, r9)?;
            a.cmovl(rax, r9)?;
            a.cmp(rax, r10)?;
            a.cmovg(rax, r10)?;
            a.add(eax, zp_out)?;
            a.mov(byte_ptr(rsi), al)
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use qopt_dialect_qnn::fixed_point::{quantize_multiplier, requantize, saturate};

    /// The shift plan against the reference `requantize` over every 9-bit `v`,
    /// each mode, and shifts from far below 0 to far above 62, in plain Rust
    /// (no generated code): the plan itself is exact.
    #[test]
    fn kernel_shift_plan_matches_the_reference_at_every_shift() {
        let (low, high) = (-255i64, 255i64);
        for exponent in -80..=80 {
            for mantissa in [0.5, 0.75, 0.999_999_9] {
                let real = mantissa * 2f64.powi(exponent);
                let (m, n) = quantize_multiplier(real).unwrap();
                let (km, ks) = kernel_multiplier_and_shift(FixedPointMultiplier { multiplier: m, shift: n });
                assert!((1..=62).contains(&ks));
                for mode in [Rounding::HalfAwayFromZero, Rounding::HalfToEven, Rounding::HalfUp] {
                    for v in -511i64..=511 {
                        let want = saturate(i128::from(requantize(v, m, n, mode)), low, high);
                        let x = i128::from(v) * i128::from(km);
                        let got = qopt_dialect_qnn::fixed_point::rounding_shift(x, i64::from(ks), mode);
                        assert_eq!(saturate(got, low, high), want, "M = {real}, v = {v}, {mode}");
                    }
                }
            }
        }
    }
}
