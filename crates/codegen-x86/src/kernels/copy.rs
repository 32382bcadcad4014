//! A plain byte copy between two places: what the module compiler uses to
//! return an input or a constant (or one value twice) in an output buffer.
//! Work items are bytes; `rep movsb` copies a range of them (fast on every
//! x86-64 with ERMSB, correct on all).

use crate::abi::{assemble, load_addresses, new_assembler, KernelCode, Place};
use crate::error::CodegenError;
use iced_x86::code_asm::*;

/// The kernel copying `bytes` bytes from `src` to `dst`.
pub(crate) fn emit_copy(src: Place, dst: Place, bytes: usize) -> Result<KernelCode, CodegenError> {
    let mut a = new_assembler()?;
    // rep movsb needs rsi = source, rdi = destination, rcx = count; begin
    // arrives in rcx and end in r8, so the bases go to rax/rdx first.
    load_addresses(&mut a, &[(rax, src), (rdx, dst)])?;
    a.lea(rsi, qword_ptr(rax + rcx))?;
    a.lea(rdi, qword_ptr(rdx + rcx))?;
    a.sub(r8, rcx)?;
    a.mov(rcx, r8)?;
    a.rep().movsb()?;
    a.ret()?;
    Ok(KernelCode { code: assemble(&mut a)?, work: bytes, work_item: "byte", strategy: "rep movsb".into() })
}
