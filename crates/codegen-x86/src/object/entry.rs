//! The C entry points of a compiled program: small System V functions
//! ("stubs") that call the program's kernels in order, and the `.text` image
//! holding the kernels followed by the stubs, as an object file or a listing
//! lays it out.
//!
//! Every stub has the same shape:
//!
//! ```text
//!   push rbp; mov rbp, rsp; push rbx; push r12; push r13
//!   sub rsp, FRAME                 the io table; rsp is 16-byte aligned now
//!   mov r13, rsp                   r13 = io
//!   lea r10, [rip+.bss]            the CPU check's byte after the static arena:
//!   cmp byte [r10+FLAG], 1         1 when an earlier call found every feature
//!   jne check                      (object/cpu_check.rs; 2: return 2 without running)
//!   rbx = arena                    .bss (lea rbx, [rip+.bss]) or the workspace argument
//!   r12 = rodata                   lea r12, [rip+.rodata]
//!   io[s] = argument s             from rdi.. r9, then [rbp+16], [rbp+24], ...
//!   for each kernel with work > 0:
//!     call kernel(rbx, r12, r13, 0, work)
//!   or, for an op run by a host call:
//!     call qopt_host_call(r12 + descriptor, rbx, r12, r13); non-zero: return 3
//!   mov eax, 0
//!   lea rsp, [rbp-24]; pop r13; pop r12; pop rbx; pop rbp; ret
//! ```
//!
//! The arena and rodata addresses are 32-bit PC-relative fields that the
//! object writer fills with `R_X86_64_PC32` relocations against the `.bss`
//! and `.rodata` section symbols (addend −4, the field's distance to the end
//! of the instruction); [`TextImage::references`] lists them. Calls to
//! kernels are relative within `.text` and need no relocation, so the code
//! links into position-independent executables and shared libraries alike.
//! A program with host calls also calls `qopt_host_call`, the C entry of
//! the `qopt-host-calls` static library (`R_X86_64_PLT32` against that
//! undefined symbol, [`TextImage::host_calls`]).
//!
//! The kernels keep rbx, rbp, r12–r15, MXCSR's control bits and the
//! direction flag (`abi.rs`), so the stub keeps its bases in rbx, r12, r13
//! across calls and needs no other saving; every call is made with rsp
//! 16-byte aligned.
//!
//! The three entries ([`EntryKind`]):
//! - `<prefix>_run(inputs..., outputs...)`: the function as written, with
//!   the static arena in `.bss` (not reentrant);
//! - `<prefix>_run_with_workspace(workspace, inputs..., outputs...)`: the
//!   same with the caller's arena; it returns 1 without running when the
//!   program needs an arena and `workspace` is null or not 64-byte aligned;
//! - `<prefix>_run_quantized(inputs..., outputs...)`, when the program has a
//!   [`QuantizedInterface`](crate::QuantizedInterface): the quantized
//!   tensors in and out, with the static arena; the kernel of each boundary
//!   quantize or dequantize is replaced by a `rep movsb` copy between the
//!   caller's buffer and the tensor's place.

use crate::abi::Place;
use crate::buffer::ElementType;
use crate::error::{CodegenError, CodegenErrorKind};
use crate::module::{Program, TensorSignature};
use iced_x86::code_asm::*;
use iced_x86::BlockEncoderOptions;

/// Alignment of each stub in `.text`.
const STUB_ALIGN: usize = 16;

/// Which entry point a stub is.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum EntryKind {
    /// `<prefix>_run`: float (as written) in and out, static arena.
    Run,
    /// `<prefix>_run_with_workspace`: the caller's arena first.
    RunWithWorkspace,
    /// `<prefix>_run_quantized`: the quantized tensors in and out.
    RunQuantized,
}

impl EntryKind {
    /// What follows the prefix in the symbol's name.
    pub fn suffix(self) -> &'static str {
        match self {
            EntryKind::Run => "_run",
            EntryKind::RunWithWorkspace => "_run_with_workspace",
            EntryKind::RunQuantized => "_run_quantized",
        }
    }

    /// The entries `program` has, in the order they are laid out.
    pub fn of(program: &Program) -> Vec<EntryKind> {
        let mut kinds = vec![EntryKind::Run, EntryKind::RunWithWorkspace];
        if program.quantized.is_some() {
            kinds.push(EntryKind::RunQuantized);
        }
        kinds
    }
}

/// One entry point in a [`TextImage`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryFunction {
    /// Which entry it is.
    pub kind: EntryKind,
    /// Its symbol (`model_run`).
    pub name: String,
    /// Its C prototype, without the final `;`.
    pub prototype: String,
    /// Offset of its first instruction in [`TextImage::text`].
    pub offset: usize,
    /// Length of its code.
    pub len: usize,
}

/// A section whose address the code takes.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum DataSection {
    /// `.rodata`: the program's read-only data.
    Rodata,
    /// `.bss`: the static arena.
    Arena,
    /// `.bss` too, whose CPU check byte follows the arena.
    CpuCheck,
}

impl DataSection {
    /// The section's name in the object file.
    pub fn section_name(self) -> &'static str {
        match self {
            DataSection::Rodata => ".rodata",
            DataSection::Arena | DataSection::CpuCheck => ".bss",
        }
    }
}

/// A 32-bit PC-relative field in `.text` that must hold the distance from
/// the end of the field to the start of `section`: `R_X86_64_PC32` against
/// the section's symbol with addend −4.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct DataReference {
    /// Offset of the 4-byte field in [`TextImage::text`].
    pub offset: usize,
    /// The section it refers to.
    pub section: DataSection,
}

/// The `.text` section of a program: its kernels at their offsets, then the
/// entry stubs.
#[derive(Clone, Debug)]
pub struct TextImage {
    /// The bytes (padding is `int3`).
    pub text: Vec<u8>,
    /// The entry points, in layout order.
    pub entries: Vec<EntryFunction>,
    /// The fields the linker fills with section addresses.
    pub references: Vec<DataReference>,
    /// Comments for listings, by offset of the instruction they precede
    /// (what the copies of the quantized entry stand for).
    pub notes: Vec<(usize, String)>,
    /// Offsets of the 4-byte fields of `call qopt_host_call` (the host-call
    /// library's C entry, `qopt_host_calls::c_abi`): `R_X86_64_PLT32`
    /// against that undefined symbol with addend −4.
    pub host_calls: Vec<usize>,
}

/// Builds the `.text` image of `program` with entry symbols named after
/// `prefix` (a C identifier; see `object/mod.rs`).
pub fn text_image(program: &Program, prefix: &str) -> Result<TextImage, CodegenError> {
    let mut text = program.code.clone();
    let mut entries = Vec::new();
    let mut references = Vec::new();
    let mut notes = Vec::new();
    let mut host_calls = Vec::new();
    for kind in EntryKind::of(program) {
        let offset = text.len().next_multiple_of(STUB_ALIGN);
        text.resize(offset, 0xCC);
        let stub = emit_stub(program, kind, offset)?;
        references.extend(
            stub.references.iter().map(|r| DataReference { offset: offset + r.offset, section: r.section }),
        );
        notes.extend(stub.notes.into_iter().map(|(at, note)| (offset + at, note)));
        host_calls.extend(stub.host_calls.iter().map(|at| offset + at));
        entries.push(EntryFunction {
            kind,
            name: format!("{prefix}{}", kind.suffix()),
            prototype: prototype(program, prefix, kind),
            offset,
            len: stub.code.len(),
        });
        text.extend_from_slice(&stub.code);
    }
    Ok(TextImage { text, entries, references, notes, host_calls })
}

/// The C type of one element of a buffer (booleans are bytes, 0 or 1).
pub fn c_element_type(element: ElementType) -> &'static str {
    match element {
        ElementType::F32 => "float",
        ElementType::F64 => "double",
        ElementType::I8 => "int8_t",
        ElementType::U8 | ElementType::Bool => "uint8_t",
        ElementType::I16 => "int16_t",
        ElementType::I32 => "int32_t",
        ElementType::I64 => "int64_t",
    }
}

/// The buffers an entry takes after its optional workspace: inputs, then
/// outputs.
pub fn entry_buffers(program: &Program, kind: EntryKind) -> (Vec<&TensorSignature>, Vec<&TensorSignature>) {
    match (kind, &program.quantized) {
        (EntryKind::RunQuantized, Some(q)) => (
            q.inputs.iter().map(|t| &t.signature).collect(),
            q.outputs.iter().map(|t| &t.signature).collect(),
        ),
        _ => (program.inputs.iter().collect(), program.outputs.iter().collect()),
    }
}

/// `int model_run(const float *input0, float *output0)`.
fn prototype(program: &Program, prefix: &str, kind: EntryKind) -> String {
    let (inputs, outputs) = entry_buffers(program, kind);
    let mut params = Vec::new();
    if kind == EntryKind::RunWithWorkspace {
        params.push("void *workspace".to_string());
    }
    for (i, sig) in inputs.iter().enumerate() {
        params.push(format!("const {} *input{i}", c_element_type(sig.element)));
    }
    for (j, sig) in outputs.iter().enumerate() {
        params.push(format!("{} *output{j}", c_element_type(sig.element)));
    }
    if params.is_empty() {
        params.push("void".into());
    }
    format!("int {prefix}{}({})", kind.suffix(), params.join(", "))
}

/// One assembled stub and its data references (offsets within the stub).
struct Stub {
    code: Vec<u8>,
    references: Vec<DataReference>,
    notes: Vec<(usize, String)>,
    host_calls: Vec<usize>,
}

/// The System V integer argument registers, in order.
const ARGUMENT_REGISTERS: [AsmRegister64; 6] = [rdi, rsi, rdx, rcx, r8, r9];

/// Registers the stub keeps its bases in (callee-saved, so kernels keep them).
const ARENA: AsmRegister64 = rbx;
const RODATA: AsmRegister64 = r12;
const IO: AsmRegister64 = r13;

/// `lea rbx, [rip+0]`, `lea r12, [rip+0]` and `lea r10, [rip+0]`: REX.W
/// (+R), 8D, ModRM with mod 00 and r/m 101; the 4-byte displacement follows
/// at offset 3.
const LEA_RBX_RIP: [u8; 3] = [0x48, 0x8D, 0x1D];
const LEA_R12_RIP: [u8; 3] = [0x4C, 0x8D, 0x25];
const LEA_R10_RIP: [u8; 3] = [0x4C, 0x8D, 0x15];

/// What an entry returns: it ran.
pub const RETURN_OK: u32 = 0;
/// What `run_with_workspace` returns without running when the program
/// needs an arena and the workspace is null or misaligned.
pub const RETURN_BAD_WORKSPACE: u32 = 1;
/// What every entry returns without running when this CPU lacks a feature
/// the program was compiled for (`object/cpu_check.rs`).
pub const RETURN_CPU_LACKS_FEATURES: u32 = 2;
/// What an entry returns when an op run by a host call failed (the
/// host-call library printed why); the outputs are not complete.
pub const RETURN_HOST_CALL_FAILED: u32 = 3;

/// The CPU check's byte in `.bss`: 0 not checked yet, then one of these.
const CPU_HAS_FEATURES: u32 = 1;
const CPU_LACKS_FEATURES: u32 = 2;

/// Offset in `.bss` of the CPU check's byte, after the static arena.
pub fn cpu_check_flag_offset(program: &Program) -> usize {
    program.arena_bytes.next_multiple_of(crate::abi::BUFFER_ALIGN)
}

/// Bytes of `.bss`: the static arena, then the CPU check's byte (padded).
pub fn bss_bytes(program: &Program) -> usize {
    cpu_check_flag_offset(program) + crate::abi::BUFFER_ALIGN
}

/// Assembles the stub of `kind` to run at offset `at` of `.text`.
fn emit_stub(program: &Program, kind: EntryKind, at: usize) -> Result<Stub, CodegenError> {
    let quantized = match kind {
        EntryKind::RunQuantized => Some(program.quantized.as_ref().ok_or_else(|| {
            CodegenError::new(CodegenErrorKind::InvalidInput, "the program has no quantized interface")
        })?),
        _ => None,
    };
    let (inputs, outputs) = entry_buffers(program, kind);
    let (n_in, slots) = (inputs.len(), inputs.len() + outputs.len());
    let first_buffer_argument = usize::from(kind == EntryKind::RunWithWorkspace);
    let too_big =
        || CodegenError::new(CodegenErrorKind::Unsupported, "the program has too many inputs and outputs");

    let mut a = CodeAssembler::new(64)?;
    let mut done = a.create_label();
    let mut bad_workspace = a.create_label();
    let mut host_call_failed = a.create_label();
    let mut host_call_labels: Vec<CodeLabel> = Vec::new();
    let mut data_labels: Vec<(CodeLabel, DataSection)> = Vec::new();
    let mut note_labels: Vec<(CodeLabel, String)> = Vec::new();

    // Prologue: three pushes after rbp leave rsp ≡ 8 (mod 16); a frame of
    // 8 (mod 16) bytes aligns it.
    a.push(rbp)?;
    a.mov(rbp, rsp)?;
    a.push(ARENA)?;
    a.push(RODATA)?;
    a.push(IO)?;
    let frame = (slots * 8).next_multiple_of(16) + 8;
    a.sub(rsp, i32::try_from(frame).map_err(|_| too_big())?)?;
    a.mov(IO, rsp)?;

    // This CPU has the target's features: the answer cached in .bss.
    let flag = cpu_check_flag_offset(program);
    let flag_byte = || byte_ptr(r10 + i32::try_from(flag).unwrap_or(i32::MAX));
    let mut cpu_check = a.create_label();
    let mut cpu_checked = a.create_label();
    let mut label = a.create_label();
    a.set_label(&mut label)?;
    a.db(&with_zero_displacement(LEA_R10_RIP))?;
    data_labels.push((label, DataSection::CpuCheck));
    a.cmp(flag_byte(), CPU_HAS_FEATURES as i32)?;
    a.jne(cpu_check)?;
    a.set_label(&mut cpu_checked)?;
    a.zero_bytes()?; // the label's own (empty) instruction: a labelled lea follows

    // The arena, before the argument registers are reused.
    let arena_needed = program.arena_bytes > 0;
    match kind {
        EntryKind::RunWithWorkspace => a.mov(ARENA, rdi)?,
        _ if arena_needed => {
            let mut label = a.create_label();
            a.set_label(&mut label)?;
            a.db(&with_zero_displacement(LEA_RBX_RIP))?;
            data_labels.push((label, DataSection::Arena));
        }
        _ => a.xor(ebx, ebx)?,
    }
    if program.rodata.is_empty() {
        a.xor(r12d, r12d)?;
    } else {
        let mut label = a.create_label();
        a.set_label(&mut label)?;
        a.db(&with_zero_displacement(LEA_R12_RIP))?;
        data_labels.push((label, DataSection::Rodata));
    }

    // The io table.
    for slot in 0..slots {
        let argument = first_buffer_argument + slot;
        let disp = i32::try_from(slot * 8).map_err(|_| too_big())?;
        match ARGUMENT_REGISTERS.get(argument) {
            Some(&reg) => a.mov(qword_ptr(IO + disp), reg)?,
            None => {
                let stack =
                    i32::try_from(16 + 8 * (argument - ARGUMENT_REGISTERS.len())).map_err(|_| too_big())?;
                a.mov(rax, qword_ptr(rbp + stack))?;
                a.mov(qword_ptr(IO + disp), rax)?;
            }
        }
    }

    if kind == EntryKind::RunWithWorkspace && arena_needed {
        a.test(ARENA, ARENA)?;
        a.jz(bad_workspace)?;
        a.test(bl, (crate::abi::BUFFER_ALIGN - 1) as i32)?;
        a.jnz(bad_workspace)?;
    }

    // The kernels, in order.
    for (k, kernel) in program.kernels.iter().enumerate() {
        if let Some(q) = quantized {
            let copy = if let Some(i) = q.inputs.iter().position(|t| t.kernel == k) {
                let t = &q.inputs[i];
                Some((Place::Io(i), t.place, t))
            } else if let Some(j) = q.outputs.iter().position(|t| t.kernel == k) {
                let t = &q.outputs[j];
                Some((t.place, Place::Io(n_in + j), t))
            } else {
                None
            };
            if let Some((src, dst, t)) = copy {
                if t.signature.bytes() > 0 {
                    let mut label = a.create_label();
                    a.set_label(&mut label)?;
                    note_labels.push((
                        label,
                        format!(
                            "kernel {k} ({}) replaced: copy {} bytes from {} to {}",
                            kernel.op_name,
                            t.signature.bytes(),
                            describe(src, n_in),
                            describe(dst, n_in)
                        ),
                    ));
                    emit_copy(&mut a, src, dst, t.signature.bytes())?;
                }
                continue;
            }
        }
        if let Some(i) = kernel.host {
            let op = &program.host_ops[i];
            a.lea(rdi, qword_ptr(RODATA + i32::try_from(op.descriptor).map_err(|_| too_big())?))?;
            a.mov(rsi, ARENA)?;
            a.mov(rdx, RODATA)?;
            a.mov(rcx, IO)?;
            let mut label = a.create_label();
            a.set_label(&mut label)?;
            a.db(&[0xE8, 0, 0, 0, 0])?; // call rel32 to qopt_host_call, filled by the linker
            host_call_labels.push(label);
            a.test(eax, eax)?;
            a.jnz(host_call_failed)?;
            continue;
        }
        if kernel.work == 0 {
            continue;
        }
        a.mov(rdi, ARENA)?;
        a.mov(rsi, RODATA)?;
        a.mov(rdx, IO)?;
        a.xor(ecx, ecx)?;
        mov_count(&mut a, (r8, r8d), kernel.work)?;
        a.call(kernel.offset as u64)?;
    }
    a.mov(eax, RETURN_OK)?;

    a.set_label(&mut done)?;
    a.lea(rsp, qword_ptr(rbp - 24))?;
    a.pop(IO)?;
    a.pop(RODATA)?;
    a.pop(ARENA)?;
    a.pop(rbp)?;
    a.ret()?;
    if kind == EntryKind::RunWithWorkspace && arena_needed {
        a.set_label(&mut bad_workspace)?;
        a.mov(eax, RETURN_BAD_WORKSPACE)?;
        a.jmp(done)?;
    }
    if !host_call_labels.is_empty() {
        a.set_label(&mut host_call_failed)?;
        a.mov(eax, RETURN_HOST_CALL_FAILED)?;
        a.jmp(done)?;
    }
    // The first call: cpuid (which clobbers rbx, not yet a base, and
    // rax..rdx, of which rcx and rdx are arguments) and the flag.
    a.set_label(&mut cpu_check)?;
    for r in ARGUMENT_REGISTERS {
        a.push(r)?;
    }
    crate::object::cpu_check::emit_feature_test(&mut a, &program.target.features)?;
    a.mov(r11d, CPU_LACKS_FEATURES)?;
    a.sub(r11d, eax)?; // 1 when every feature is there, else 2
    a.mov(flag_byte(), r11b)?;
    for r in ARGUMENT_REGISTERS.iter().rev() {
        a.pop(*r)?;
    }
    a.cmp(r11d, CPU_HAS_FEATURES as i32)?;
    a.je(cpu_checked)?;
    a.mov(eax, RETURN_CPU_LACKS_FEATURES)?;
    a.jmp(done)?;

    let result = a.assemble_options(at as u64, BlockEncoderOptions::RETURN_NEW_INSTRUCTION_OFFSETS)?;
    let mut references = Vec::new();
    for (label, section) in &data_labels {
        let ip = result.label_ip(label)? as usize;
        references.push(DataReference { offset: ip - at + LEA_RBX_RIP.len(), section: *section });
    }
    let mut notes = Vec::new();
    for (label, note) in note_labels {
        notes.push((result.label_ip(&label)? as usize - at, note));
    }
    let mut host_calls = Vec::new();
    for label in &host_call_labels {
        host_calls.push(result.label_ip(label)? as usize - at + 1);
    }
    Ok(Stub { code: result.inner.code_buffer, references, notes, host_calls })
}

/// `arena+128`, `rodata+0`, `input0` (the caller's buffer).
fn describe(place: Place, n_in: usize) -> String {
    match place {
        Place::Io(s) if s < n_in => format!("input{s}"),
        Place::Io(s) => format!("output{}", s - n_in),
        other => other.to_string(),
    }
}

/// A RIP-relative `lea` with a zero displacement for the linker to fill.
fn with_zero_displacement(opcode: [u8; 3]) -> [u8; 7] {
    let mut bytes = [0; 7];
    bytes[..3].copy_from_slice(&opcode);
    bytes
}

/// `rep movsb` of `bytes` bytes from `src` to `dst` (nothing for 0).
fn emit_copy(a: &mut CodeAssembler, src: Place, dst: Place, bytes: usize) -> Result<(), CodegenError> {
    if bytes == 0 {
        return Ok(());
    }
    load_place(a, rsi, src)?;
    load_place(a, rdi, dst)?;
    mov_count(a, (rcx, ecx), bytes)?;
    a.rep().movsb()?;
    Ok(())
}

/// `reg = n`, as a 32-bit move (which zero-extends) when `n` fits.
fn mov_count(
    a: &mut CodeAssembler,
    (reg, low): (AsmRegister64, AsmRegister32),
    n: usize,
) -> Result<(), CodegenError> {
    match u32::try_from(n) {
        Ok(n32) => a.mov(low, n32)?,
        Err(_) => a.mov(reg, n as u64)?,
    }
    Ok(())
}

/// `reg = ` the address of `place`, from the stub's bases.
fn load_place(a: &mut CodeAssembler, reg: AsmRegister64, place: Place) -> Result<(), CodegenError> {
    crate::abi::address_from_bases(a, reg, place, (ARENA, RODATA, IO))
}
