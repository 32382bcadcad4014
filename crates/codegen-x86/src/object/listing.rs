//! A readable assembly listing of a [`Program`] (`qcompile --emit=asm`):
//! the `.text` an object file would hold, disassembled with iced-x86's
//! formatter in Intel or AT&T (GNU as) syntax.
//!
//! ```text
//! ; kernel 0: qnn.quantize at line 3:5 loc("input.q")
//! ;   AVX2, 8 lanes; 111 elements
//! model.kernel0:
//!   0000  4c 8b cf                       mov r9, rdi
//!   ...
//! ; entry point: int model_run(const float *input0, float *output0)
//! model_run:
//!   0100  55                             push rbp
//!   ...
//!   010c  48 8d 1d 00 00 00 00           lea rbx, [rip]    ; R_X86_64_PC32 .bss-4: the arena
//!   ...
//!   0140  e8 bb fe ff ff                 call model.kernel0
//! ```
//!
//! Each kernel's header names its op, the op's location (line, column and
//! `loc`), its strategy and its work items; offsets are those of `.text`,
//! calls name the kernel they reach, and fields the linker fills name their
//! relocation. Padding between functions (`int3`) is not listed.

use crate::error::{CodegenError, CodegenErrorKind};
use crate::module::{Program, TensorSignature};
use crate::object::entry::{text_image, DataSection, TextImage};
use crate::object::{check_prefix, ObjectOptions};
use iced_x86::{
    Decoder, DecoderOptions, Formatter, GasFormatter, Instruction, IntelFormatter, OpKind, SymbolResolver,
    SymbolResult,
};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::str::FromStr;

/// The assembly syntax of a listing.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Default)]
pub enum AsmSyntax {
    /// Intel syntax (`mov r9, rdi`), comments with `;`.
    #[default]
    Intel,
    /// AT&T syntax as GNU as reads it (`mov %rdi, %r9`), comments with `#`.
    Att,
}

impl AsmSyntax {
    /// Every spelling [`AsmSyntax::from_str`] accepts.
    pub const NAMES: [&'static str; 2] = ["intel", "att"];

    fn comment(self) -> &'static str {
        match self {
            AsmSyntax::Intel => ";",
            AsmSyntax::Att => "#",
        }
    }
}

impl FromStr for AsmSyntax {
    type Err = CodegenError;

    fn from_str(s: &str) -> Result<AsmSyntax, CodegenError> {
        match s {
            "intel" => Ok(AsmSyntax::Intel),
            "att" | "gas" => Ok(AsmSyntax::Att),
            _ => Err(CodegenError::new(
                CodegenErrorKind::InvalidInput,
                format!("unknown assembly syntax '{s}'; expected one of {}", AsmSyntax::NAMES.join(", ")),
            )),
        }
    }
}

/// Bytes of machine code shown per line before the instruction text.
const BYTES_COLUMN: usize = 10;

/// The listing of `program`, with symbols named as the object file written
/// with `options` names them.
pub fn listing(
    program: &Program,
    options: &ObjectOptions,
    syntax: AsmSyntax,
) -> Result<String, CodegenError> {
    check_prefix(&options.prefix)?;
    let image = text_image(program, &options.prefix)?;
    let c = syntax.comment();
    let mut out = String::new();

    let _ = writeln!(out, "{c} {}, function @{}", options.model_name, program.function);
    let _ = writeln!(out, "{c} target {} ({})", program.target.cpu, program.target.features);
    let _ = writeln!(
        out,
        "{c} .text {} bytes: {}, {} entry points; .rodata {} bytes; .bss {} bytes (the arena {}, the CPU check's byte at {})",
        image.text.len(),
        counted(program.kernels.len(), "kernel"),
        image.entries.len(),
        program.rodata.len(),
        crate::object::entry::bss_bytes(program),
        program.arena_bytes,
        crate::object::entry::cpu_check_flag_offset(program)
    );
    for (what, sigs) in [("input", &program.inputs), ("output", &program.outputs)] {
        for (i, sig) in sigs.iter().enumerate() {
            let _ = writeln!(out, "{c} {what}{i}: {}", describe(sig));
        }
    }

    let mut names: HashMap<u64, String> = HashMap::new();
    for (k, kernel) in program.kernels.iter().enumerate() {
        names.insert(kernel.offset as u64, format!("{}.kernel{k}", options.prefix));
    }
    for entry in &image.entries {
        names.insert(entry.offset as u64, entry.name.clone());
    }
    let mut formatter: Box<dyn Formatter> = match syntax {
        AsmSyntax::Intel => {
            Box::new(IntelFormatter::with_options(Some(Box::new(BranchTargets(names.clone()))), None))
        }
        AsmSyntax::Att => {
            Box::new(GasFormatter::with_options(Some(Box::new(BranchTargets(names.clone()))), None))
        }
    };
    let o = formatter.options_mut();
    o.set_space_after_operand_separator(true);
    o.set_rip_relative_addresses(true);
    o.set_hex_prefix("0x");
    o.set_hex_suffix("");
    o.set_uppercase_hex(false);
    o.set_first_operand_char_index(8);

    for (k, kernel) in program.kernels.iter().enumerate() {
        let _ = writeln!(out, "\n{c} kernel {k}: {} at {}", kernel.op_name, kernel.location);
        let _ = writeln!(out, "{c}   {}; {}", kernel.strategy, counted(kernel.work, kernel.work_item));
        let _ = writeln!(out, "{}:", names[&(kernel.offset as u64)]);
        disassemble(&mut out, &image, kernel.offset, kernel.len, formatter.as_mut(), c);
    }
    for entry in &image.entries {
        let _ = writeln!(out, "\n{c} entry point: {}", entry.prototype);
        let _ = writeln!(out, "{}:", entry.name);
        disassemble(&mut out, &image, entry.offset, entry.len, formatter.as_mut(), c);
    }
    Ok(out)
}

/// `1 kernel`, `3 kernels`.
fn counted(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// `float[3][37] tensor<3x37xf32>`.
fn describe(sig: &TensorSignature) -> String {
    let dims: String = sig.shape.iter().map(|d| format!("[{d}]")).collect();
    format!("{}{dims} {}", crate::object::entry::c_element_type(sig.element), sig.type_text)
}

/// Appends the instructions of `image.text[offset..offset + len]`.
fn disassemble(
    out: &mut String,
    image: &TextImage,
    offset: usize,
    len: usize,
    f: &mut dyn Formatter,
    c: &str,
) {
    let bytes = &image.text[offset..offset + len];
    let mut decoder = Decoder::with_ip(64, bytes, offset as u64, DecoderOptions::NONE);
    let mut instruction = Instruction::default();
    let mut text = String::new();
    while decoder.can_decode() {
        decoder.decode_out(&mut instruction);
        text.clear();
        f.format(&instruction, &mut text);
        let start = instruction.ip() as usize;
        for (_, note) in image.notes.iter().filter(|(at, _)| *at == start) {
            let _ = writeln!(out, "  {c} {note}");
        }
        let end = start + instruction.len();
        let hex: Vec<String> = image.text[start..end].iter().map(|b| format!("{b:02x}")).collect();
        let (shown, more) = hex.split_at(hex.len().min(BYTES_COLUMN));
        let mut line = format!("  {start:04x}  {:<width$} {text}", shown.join(" "), width = BYTES_COLUMN * 3);
        if let Some(r) = image.references.iter().find(|r| (start..end).contains(&r.offset)) {
            let what = match r.section {
                DataSection::Rodata => "the read-only data",
                DataSection::Arena => "the arena",
                DataSection::CpuCheck => "the CPU check's byte follows the arena",
            };
            let _ = write!(line, "    {c} R_X86_64_PC32 {}-4: {what}", r.section.section_name());
        }
        if image.host_calls.iter().any(|at| (start..end).contains(at)) {
            let symbol = qopt_host_calls::c_abi::HOST_CALL_SYMBOL;
            let _ = write!(line, "    {c} R_X86_64_PLT32 {symbol}-4: an op run by the interpreter");
        }
        if !more.is_empty() {
            let _ = write!(line, "\n        {}", more.join(" "));
        }
        let _ = writeln!(out, "{line}");
    }
}

/// Names branch targets that start a kernel or an entry point.
struct BranchTargets(HashMap<u64, String>);

impl SymbolResolver for BranchTargets {
    fn symbol(
        &mut self,
        instruction: &Instruction,
        _operand: u32,
        instruction_operand: Option<u32>,
        address: u64,
        _address_size: u32,
    ) -> Option<SymbolResult<'_>> {
        let operand = instruction_operand?;
        if !matches!(instruction.op_kind(operand), OpKind::NearBranch64) {
            return None;
        }
        self.0.get(&address).map(|name| SymbolResult::with_str(address, name))
    }
}
