//! The row body of the integer elementwise kernels (requantize, concat's
//! requantized inputs, add, mul): stored bytes widened to i32 lanes, one
//! computation, the results narrowed back to bytes.
//!
//! ```text
//! wide:  while rdx ≥ 8:  load 8 elements of each input (widened to i32)
//!                        compute;  pack ymm0 to 8 bytes at [rdi]
//! tail:  while rdx > 0:  load 1 element of each input into lane 0
//!                        compute;  store lane 0's byte at [rdi]
//! ```
//!
//! Both loops run the **same** compute instructions (the tail on one lane,
//! the others holding zeros that nothing stores), so the kernel has one
//! arithmetic, not a vector one and a scalar one that could disagree. An
//! input is either contiguous along the row or broadcast (stride 0: the same
//! element for the whole row, loaded into every lane). The compute reads the
//! inputs from ymm0 (and ymm1), leaves the results as i32 lanes in ymm0,
//! each within the output's byte range (so the saturating packs never
//! saturate), and may clobber the registers the caller reserves for it.

use super::rows::{bind, OUTPUT, ROW_LENGTH, STREAM_POINTERS};
use crate::error::CodegenError;
use crate::kernels::registers::xmm_of;
use iced_x86::code_asm::*;

/// How an input moves along the row.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Along {
    /// One element per lane.
    Contiguous,
    /// The same element for the whole row.
    Broadcast,
}

/// One byte input of a lane run.
#[derive(Copy, Clone, Debug)]
pub(crate) struct LaneInput {
    /// The register pointing at the input (a stream pointer).
    pub pointer: AsmRegister64,
    /// `u8` storage (zero-extended) rather than `i8` (sign-extended).
    pub unsigned: bool,
    /// How it moves.
    pub along: Along,
    /// Where the compute finds it, as i32 lanes.
    pub lanes: AsmRegisterYmm,
}

/// The compute of a lane run: inputs in their registers, results in ymm0.
pub(crate) type LaneCompute<'e> = &'e dyn Fn(&mut CodeAssembler) -> Result<(), IcedError>;

/// Lanes per iteration of the wide loop.
const WIDE: i32 = 8;

/// The row body described in the module doc: `rdx` elements from the inputs
/// to the output stream (rdi), which must be contiguous. `pack_scratch` is a
/// ymm register the packing may clobber after the compute. Clobbers rax.
pub(crate) fn emit_byte_lanes(
    a: &mut CodeAssembler,
    inputs: &[LaneInput],
    out_unsigned: bool,
    pack_scratch: AsmRegisterYmm,
    compute: LaneCompute<'_>,
) -> Result<(), CodegenError> {
    let out = STREAM_POINTERS[OUTPUT];
    let mut wide = a.create_label();
    let mut tail = a.create_label();
    let mut narrow = a.create_label();
    let mut done = a.create_label();

    a.cmp(ROW_LENGTH, WIDE)?;
    a.jb(tail)?;
    bind(a, &mut wide)?;
    for input in inputs {
        load_lanes(a, input, true)?;
    }
    compute(a)?;
    let scratch = xmm_of(pack_scratch);
    a.vextracti128(scratch, ymm0, 1)?;
    a.vpackssdw(xmm0, xmm0, scratch)?;
    if out_unsigned {
        a.vpackuswb(xmm0, xmm0, xmm0)?;
    } else {
        a.vpacksswb(xmm0, xmm0, xmm0)?;
    }
    a.vmovq(qword_ptr(out), xmm0)?;
    for input in inputs.iter().filter(|i| i.along == Along::Contiguous) {
        a.add(input.pointer, WIDE)?;
    }
    a.add(out, WIDE)?;
    a.sub(ROW_LENGTH, WIDE)?;
    a.cmp(ROW_LENGTH, WIDE)?;
    a.jae(wide)?;

    bind(a, &mut tail)?;
    a.test(ROW_LENGTH, ROW_LENGTH)?;
    a.jz(done)?;
    bind(a, &mut narrow)?;
    for input in inputs {
        load_lanes(a, input, false)?;
    }
    compute(a)?;
    a.vmovd(eax, xmm0)?;
    a.mov(byte_ptr(out), al)?;
    for input in inputs.iter().filter(|i| i.along == Along::Contiguous) {
        a.add(input.pointer, 1)?;
    }
    a.add(out, 1)?;
    a.dec(ROW_LENGTH)?;
    a.jnz(narrow)?;
    bind(a, &mut done)?;
    Ok(())
}

/// Loads an input's next 8 elements (`wide`) or its next element into lane 0
/// (the other lanes zero), as i32.
fn load_lanes(a: &mut CodeAssembler, input: &LaneInput, wide: bool) -> Result<(), IcedError> {
    let xmm = xmm_of(input.lanes);
    if wide && input.along == Along::Contiguous {
        return if input.unsigned {
            a.vpmovzxbd(input.lanes, qword_ptr(input.pointer))
        } else {
            a.vpmovsxbd(input.lanes, qword_ptr(input.pointer))
        };
    }
    if input.unsigned {
        a.movzx(eax, byte_ptr(input.pointer))?;
    } else {
        a.movsx(eax, byte_ptr(input.pointer))?;
    }
    a.vmovd(xmm, eax)?;
    if wide {
        a.vpbroadcastd(input.lanes, xmm)?;
    }
    Ok(())
}
