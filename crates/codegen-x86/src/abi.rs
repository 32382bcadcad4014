//! The calling convention every compiled kernel follows, and where the
//! buffers it reads and writes live.
//!
//! A compiled module is a list of kernels run in order. Each kernel is one
//! position-independent System V function
//!
//! ```text
//! extern "sysv64" fn(arena: *mut u8, rodata: *const u8, io: *const *mut u8,
//!                    begin: usize, end: usize)
//!                    rdi            rsi                 rdx
//!                    rcx            r8
//! ```
//!
//! - `arena` is the module's activation arena (64-byte aligned), `rodata` its
//!   read-only data (packed weights, tables, per-channel parameters; 64-byte
//!   aligned), and `io` the table of the caller's input and output buffers.
//!   A kernel finds each of its buffers as a [`Place`]: an offset into the
//!   arena or rodata, or a slot of `io`. The offsets are immediates in the
//!   code, so the code needs no relocation and runs wherever it is mapped.
//! - `[begin, end)` is the range of the kernel's work items (its
//!   [`KernelCode::work`] says how many there are and what one is). The
//!   runner may split the range across threads, so a kernel must compute
//!   exactly the outputs of the items in its range and write nothing else,
//!   and items must be independent of each other.
//! - The kernel preserves rbx, rbp, r12–r15 and rsp, MXCSR's control bits
//!   and the direction flag (clear), executes `vzeroupper` before returning,
//!   and uses no stack below rsp (no red zone), so a signal handler or a
//!   debugger never sees its data clobbered.
//!
//! [`load_addresses`] emits the prologue that turns places into pointers.

use crate::error::{CodegenError, CodegenErrorKind};
use iced_x86::code_asm::*;

/// Alignment of the arena, of rodata, and of every buffer planned in them.
pub const BUFFER_ALIGN: usize = 64;

/// Where a buffer lives while the module runs.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Place {
    /// `arena + offset`.
    Arena(usize),
    /// `rodata + offset`.
    Rodata(usize),
    /// `io[slot]`: one of the caller's input or output buffers.
    Io(usize),
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Place::Arena(o) => write!(f, "arena+{o}"),
            Place::Rodata(o) => write!(f, "rodata+{o}"),
            Place::Io(s) => write!(f, "io[{s}]"),
        }
    }
}

/// Machine code for one kernel of a module, with what the runner needs to
/// call it and what a listing shows about it.
#[derive(Clone, Debug)]
pub struct KernelCode {
    /// Position-independent code of one function with the convention above.
    pub code: Vec<u8>,
    /// How many work items the kernel has; the runner calls it with ranges
    /// that cover `0..work` exactly once (not at all when it is 0).
    pub work: usize,
    /// What one work item is, for listings ("output row", "element"...).
    pub work_item: &'static str,
    /// How the kernel computes, for listings and the lint note (e.g.
    /// "vpmaddwd (exact for any weights)").
    pub strategy: String,
}

/// Registers holding the entry arguments, and the ones [`load_addresses`]
/// uses for the bases while it works.
const SAVED_ARENA: AsmRegister64 = r9;
const SAVED_RODATA: AsmRegister64 = r10;
const SAVED_IO: AsmRegister64 = r11;

/// Loads the address of each place into its register. Call it first in a
/// kernel (before anything clobbers rdi, rsi or rdx). It keeps `begin` (rcx)
/// and `end` (r8) and clobbers r9, r10, r11, so no destination may be rcx,
/// r8, r9, r10 or r11; destinations may be rdi, rsi and rdx.
pub fn load_addresses(a: &mut CodeAssembler, places: &[(AsmRegister64, Place)]) -> Result<(), CodegenError> {
    for (reg, _) in places {
        if [rcx, r8, r9, r10, r11].contains(reg) {
            return Err(CodegenError::new(
                CodegenErrorKind::Assembler,
                "load_addresses: a destination overlaps begin, end or the saved bases",
            ));
        }
    }
    a.mov(SAVED_ARENA, rdi)?;
    a.mov(SAVED_RODATA, rsi)?;
    a.mov(SAVED_IO, rdx)?;
    for &(reg, place) in places {
        load_address(a, reg, place)?;
    }
    Ok(())
}

fn load_address(a: &mut CodeAssembler, reg: AsmRegister64, place: Place) -> Result<(), CodegenError> {
    address_from_bases(a, reg, place, (SAVED_ARENA, SAVED_RODATA, SAVED_IO))
}

/// `reg = ` the address of `place`, with the arena, rodata and io table
/// addresses in the registers `bases` (kernels and the object file's entry
/// stubs keep them in different registers).
pub(crate) fn address_from_bases(
    a: &mut CodeAssembler,
    reg: AsmRegister64,
    place: Place,
    (arena, rodata, io): (AsmRegister64, AsmRegister64, AsmRegister64),
) -> Result<(), CodegenError> {
    let (base, offset) = match place {
        Place::Arena(o) => (arena, o),
        Place::Rodata(o) => (rodata, o),
        Place::Io(slot) => {
            let disp = slot.checked_mul(8).and_then(|d| i32::try_from(d).ok()).ok_or_else(|| {
                CodegenError::new(CodegenErrorKind::Unsupported, "too many inputs and outputs")
            })?;
            a.mov(reg, qword_ptr(io + disp))?;
            return Ok(());
        }
    };
    match i32::try_from(offset) {
        Ok(disp) => a.lea(reg, qword_ptr(base + disp))?,
        Err(_) => {
            a.mov(reg, offset as u64)?;
            a.add(reg, base)?;
        }
    }
    Ok(())
}

/// `a` with a fresh 64-bit assembler, or the assembler's error.
pub fn new_assembler() -> Result<CodeAssembler, CodegenError> {
    Ok(CodeAssembler::new(64)?)
}

/// Assembles a finished kernel at address 0 (the code is position
/// independent, so any address gives the same bytes).
pub fn assemble(a: &mut CodeAssembler) -> Result<Vec<u8>, CodegenError> {
    Ok(a.assemble(0)?)
}

/// The callee-saved registers a kernel pushes when it uses them, in push
/// order; pop in reverse.
pub const CALLEE_SAVED: [AsmRegister64; 6] = [rbx, rbp, r12, r13, r14, r15];

/// Pushes the callee-saved registers (all six, in [`CALLEE_SAVED`] order).
pub fn push_callee_saved(a: &mut CodeAssembler) -> Result<(), CodegenError> {
    for r in CALLEE_SAVED {
        a.push(r)?;
    }
    Ok(())
}

/// Pops what [`push_callee_saved`] pushed.
pub fn pop_callee_saved(a: &mut CodeAssembler) -> Result<(), CodegenError> {
    for r in CALLEE_SAVED.iter().rev() {
        a.pop(*r)?;
    }
    Ok(())
}

/// The signature of every kernel.
#[cfg(target_arch = "x86_64")]
pub(crate) type KernelFn = unsafe extern "sysv64" fn(*mut u8, *const u8, *const *mut u8, usize, usize);

/// Calls the kernel whose first instruction is at `entry`.
///
/// # Safety
///
/// `entry` must be the start of mapped, executable code of a kernel with the
/// convention above whose features this CPU has, and the arena, rodata and
/// io buffers must hold every byte the kernel reads or writes for the items
/// `begin..end`.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn call_kernel(
    entry: *const u8,
    arena: *mut u8,
    rodata: *const u8,
    io: &[*mut u8],
    begin: usize,
    end: usize,
) {
    let f: KernelFn = std::mem::transmute(entry);
    f(arena, rodata, io.as_ptr(), begin, end);
}
