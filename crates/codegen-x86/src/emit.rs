//! The shape every elementwise kernel shares, and small emission helpers.
//!
//! [`emit_elementwise`] writes a complete kernel with the convention of
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

use crate::abi::{assemble, load_addresses, new_assembler, Place};
use crate::error::CodegenError;
use iced_x86::code_asm::*;

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

/// `ymm = [value; 8]` (32-bit lanes) through eax.
pub(crate) fn broadcast_u32(a: &mut CodeAssembler, ymm: AsmRegisterYmm, value: u32) -> Result<(), IcedError> {
    let xmm = xmm_of(ymm);
    a.mov(eax, value)?;
    a.vmovd(xmm, eax)?;
    a.vpbroadcastd(ymm, xmm)
}

/// `ymm = [value; 4]` (64-bit lanes) through rax.
pub(crate) fn broadcast_u64(a: &mut CodeAssembler, ymm: AsmRegisterYmm, value: u64) -> Result<(), IcedError> {
    let xmm = xmm_of(ymm);
    a.mov(rax, value)?;
    a.vmovq(xmm, rax)?;
    a.vpbroadcastq(ymm, xmm)
}

/// The xmm register that is the low half of `ymm`.
pub(crate) fn xmm_of(ymm: AsmRegisterYmm) -> AsmRegisterXmm {
    const PAIRS: [(AsmRegisterYmm, AsmRegisterXmm); 16] = [
        (ymm0, xmm0),
        (ymm1, xmm1),
        (ymm2, xmm2),
        (ymm3, xmm3),
        (ymm4, xmm4),
        (ymm5, xmm5),
        (ymm6, xmm6),
        (ymm7, xmm7),
        (ymm8, xmm8),
        (ymm9, xmm9),
        (ymm10, xmm10),
        (ymm11, xmm11),
        (ymm12, xmm12),
        (ymm13, xmm13),
        (ymm14, xmm14),
        (ymm15, xmm15),
    ];
    PAIRS.iter().find(|(y, _)| *y == ymm).map_or(xmm0, |(_, x)| *x)
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
