//! The building blocks lowerings assemble kernels from; no file here reads
//! an op (the lowerings in `lower/` do).
//!
//! **Conv and dense.** Specialized per layer (`docs/quant-semantics.md` §6):
//! shapes, strides, pads, zero points and offsets are immediates, weights
//! are packed into rodata at compile time in the layout of the kernel that
//! reads them, per-channel requantization constants sit next to them, and
//! the requantization is fused into the epilogue of the reduction.
//!
//! - [`layer`]: a layer as numbers ([`layer::Layer`]) and the choice of
//!   multiply-accumulate scheme (`vpmaddwd` exact, `vpmaddubsw` where the
//!   weights prove it cannot saturate, `vpdpbusd` where the target has VNNI).
//! - [`im2col`]: the convolution's geometry and the activation kernels that
//!   run before a GEMM (padding and centering into a scratch image, then
//!   packing panels).
//! - [`gemm`]: the register-blocked conv GEMM (channels × positions), and
//!   [`channel_gemm`] with channels in the lanes for layers with few
//!   positions; [`winograd`]: exact Winograd F(2×2, 3×3) around [`gemm`];
//!   [`depthwise`]: depthwise convolution.
//! - [`epilogue`]: per-channel records in rodata, the requantizers that read
//!   them, packing to bytes, exact-length stores.
//!
//! **Requantization.** [`requantize`]: the one requantizer every integer
//! kernel emits, on register or memory constants, and the row kernel of
//! `qnn.requantize`; [`quant_params`]: the parameters it is specialized for.
//!
//! **Elementwise.** [`rows`]: the row walker (independent rows, long rows
//! split into blocks); [`lanes`]: the 8-lane byte loops; [`add_words`]: the
//! i16-pair add; [`registers`]: broadcasts and register halves; [`copy`]: a
//! plain byte copy, which the module compiler uses to return an input or a
//! constant in an output buffer.
//!
//! Every kernel follows `abi.rs`: its work items are independent (each
//! writes only its own outputs or scratch bytes), it reads only its
//! operands, its scratch and its rodata, and it preserves the callee-saved
//! registers ([`emit_item_kernel`] writes that frame once for all of them).

pub(crate) mod add_words;
pub(crate) mod channel_gemm;
pub(crate) mod copy;
pub(crate) mod depthwise;
pub(crate) mod epilogue;
pub(crate) mod gemm;
pub(crate) mod im2col;
pub(crate) mod lanes;
pub(crate) mod layer;
pub(crate) mod quant_params;
pub(crate) mod registers;
pub(crate) mod requantize;
pub(crate) mod rows;
#[cfg(test)]
pub(crate) mod testing;
pub(crate) mod winograd;

#[cfg(test)]
mod tests;

use crate::abi::{assemble, load_addresses, new_assembler, pop_callee_saved, push_callee_saved, Place};
use crate::error::{CodegenError, CodegenErrorKind};
use iced_x86::code_asm::*;

pub use layer::{ConvGemmChoice, DepthwiseTaps, KernelOptions};

/// Registers that hold the current work item and the end of the range in
/// every kernel [`emit_item_kernel`] writes.
pub(crate) const ITEM: AsmRegister64 = r12;
/// The end of the work range.
pub(crate) const ITEM_END: AsmRegister64 = rbp;

/// A complete kernel that runs `body` once per work item of its range:
///
/// ```text
///   push rbx, rbp, r12..r15
///   load the places' addresses into their registers
///   r12 = begin; rbp = end
/// item: body (r12 = the item)      may clobber all but r12, rbp, the bases
///   r12 += 1; if r12 < rbp goto item
///   vzeroupper; pop; ret
/// ```
///
/// `bases` may use r13, r14, r15 and rbx.
pub(crate) fn emit_item_kernel(
    bases: &[(AsmRegister64, Place)],
    body: &mut dyn FnMut(&mut CodeAssembler) -> Result<(), CodegenError>,
) -> Result<Vec<u8>, CodegenError> {
    if bases.iter().any(|(r, _)| ![r13, r14, r15, rbx].contains(r)) {
        return Err(CodegenError::new(
            CodegenErrorKind::Assembler,
            "item kernel bases must be r13, r14, r15 or rbx",
        ));
    }
    let mut a = new_assembler()?;
    push_callee_saved(&mut a)?;
    load_addresses(&mut a, bases)?;
    a.mov(ITEM, rcx)?;
    a.mov(ITEM_END, r8)?;
    let mut item = a.create_label();
    let mut done = a.create_label();
    a.cmp(ITEM, ITEM_END)?;
    a.jae(done)?;
    a.set_label(&mut item)?;
    body(&mut a)?;
    a.inc(ITEM)?;
    a.cmp(ITEM, ITEM_END)?;
    a.jb(item)?;
    a.set_label(&mut done)?;
    a.vzeroupper()?;
    pop_callee_saved(&mut a)?;
    a.ret()?;
    assemble(&mut a)
}

/// Appends `part` to the rodata `blob` at the next [`BUFFER_ALIGN`]-aligned
/// offset, which it returns.
pub(crate) fn append_aligned(blob: &mut Vec<u8>, part: &[u8]) -> usize {
    let at = blob.len().next_multiple_of(crate::abi::BUFFER_ALIGN);
    blob.resize(at, 0);
    blob.extend_from_slice(part);
    at
}

/// `dst = src × factor` for a compile-time factor (any size).
pub(crate) fn multiply_by(
    a: &mut CodeAssembler,
    dst: AsmRegister64,
    src: AsmRegister64,
    factor: usize,
) -> Result<(), CodegenError> {
    match i32::try_from(factor) {
        Ok(f) => a.imul_3(dst, src, f)?,
        Err(_) => {
            a.mov(dst, factor as u64)?;
            a.imul_2(dst, src)?;
        }
    }
    Ok(())
}

/// `dst += src × factor` for a compile-time factor, with `scratch` free.
pub(crate) fn add_multiple(
    a: &mut CodeAssembler,
    dst: AsmRegister64,
    src: AsmRegister64,
    factor: usize,
    scratch: AsmRegister64,
) -> Result<(), CodegenError> {
    if factor == 0 {
        return Ok(());
    }
    multiply_by(a, scratch, src, factor)?;
    a.add(dst, scratch)?;
    Ok(())
}

/// `dst += value` for a compile-time value (any size), with `scratch` free.
pub(crate) fn add_constant(
    a: &mut CodeAssembler,
    dst: AsmRegister64,
    value: usize,
    scratch: AsmRegister64,
) -> Result<(), CodegenError> {
    match i32::try_from(value) {
        Ok(0) => {}
        Ok(v) => a.add(dst, v)?,
        Err(_) => {
            a.mov(scratch, value as u64)?;
            a.add(dst, scratch)?;
        }
    }
    Ok(())
}

/// Splits `value` (in `value`, clobbered) by compile-time `divisors`
/// innermost first: `value = ((q · d1 + r1) · d0 + r0)`, leaving each
/// remainder in the register named with it and the final quotient in rax.
/// Uses rax and rdx; no remainder register may be rax or rdx.
pub(crate) fn split_index(
    a: &mut CodeAssembler,
    value: AsmRegister64,
    divisors: &[(usize, AsmRegister64)],
) -> Result<(), CodegenError> {
    a.mov(rax, value)?;
    for &(divisor, remainder) in divisors {
        if divisor == 1 {
            a.xor(gpr32(remainder), gpr32(remainder))?;
            continue;
        }
        a.xor(edx, edx)?;
        a.mov(remainder, divisor as u64)?;
        a.div(remainder)?;
        a.mov(remainder, rdx)?;
    }
    Ok(())
}

fn gpr32(r: AsmRegister64) -> AsmRegister32 {
    epilogue::gpr32_of(r)
}

/// A GEMM's reduction over `units` depth units: `step(a, u)` emits unit `u`
/// relative to the cursors, unrolled by `unroll` in a loop counted down in
/// `counter`, each cursor advancing by its bytes per unit after each
/// iteration; the units left after the loop follow it.
pub(crate) fn emit_reduction(
    a: &mut CodeAssembler,
    (units, unroll): (usize, usize),
    counter: AsmRegister64,
    cursors: &[(AsmRegister64, usize)],
    step: &dyn Fn(&mut CodeAssembler, usize) -> Result<(), CodegenError>,
) -> Result<(), CodegenError> {
    let (iterations, per_iteration, left) = unrolled(units, unroll);
    if iterations > 0 {
        let mut reduce = a.create_label();
        a.mov(counter, iterations as u64)?;
        a.set_label(&mut reduce)?;
        for u in 0..per_iteration {
            step(a, u)?;
        }
        for &(cursor, unit_bytes) in cursors {
            a.add(cursor, (per_iteration * unit_bytes) as i32)?;
        }
        a.dec(counter)?;
        a.jnz(reduce)?;
    }
    for u in 0..left {
        step(a, u)?;
    }
    Ok(())
}

/// The unit count `n` split into `(loop iterations, unrolled steps per
/// iteration, steps left after the loop)`.
pub(crate) fn unrolled(n: usize, unroll: usize) -> (usize, usize, usize) {
    (n / unroll, unroll, n % unroll)
}
