//! Writing a [`Program`] as a relocatable x86-64 ELF object that C code
//! links against (`qcompile -o model.o`).
//!
//! The object is written with the `object` crate, the maintained writer of
//! ELF, Mach-O and COFF objects used by rustc and Cranelift. Its layout:
//!
//! | section | contents | alignment |
//! |---|---|---|
//! | `.text` | the kernels at their offsets, then the entry stubs (`object/entry.rs`) | 64 |
//! | `.rodata` | the program's rodata (packed weights, constants, tables) | 64 |
//! | `.bss` | the static arena, [`Program::arena_bytes`], then the CPU check's byte (`object/entry.rs`) | 64 |
//! | `.note.GNU-stack` | empty: the code needs no executable stack | 1 |
//!
//! `.rodata` is left out when empty. Symbols: a file symbol
//! with the model's name; each entry stub as a global function
//! (`<prefix>_run`, `<prefix>_run_with_workspace`, `<prefix>_run_quantized`);
//! each kernel as a local function `<prefix>.kernel<N>` so that debuggers,
//! profilers and `objdump` name them. Relocations: one `R_X86_64_PC32`
//! against the `.bss` or `.rodata` section symbol, addend −4, for each
//! address a stub takes; nothing else needs relocating (kernels address
//! everything from the bases they are passed, and calls stay in `.text`).
//!
//! [`ObjectOptions`] names the symbols; `object/header.rs` writes the matching C
//! header.

pub(crate) mod cpu_check;
pub(crate) mod entry;
pub(crate) mod header;
pub(crate) mod listing;

use crate::error::{CodegenError, CodegenErrorKind};
use crate::module::Program;
use crate::object::entry::{text_image, DataSection};
use ::object::write::{Object, Relocation, StandardSection, Symbol, SymbolSection};
use ::object::{
    elf, Architecture, BinaryFormat, Endianness, RelocationFlags, SectionKind, SymbolFlags, SymbolKind,
    SymbolScope,
};

/// What names an object file's symbols and its header's macros.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectOptions {
    /// The prefix of every exported symbol (`model` gives `model_run`) and,
    /// upper-cased, of the header's macros (`MODEL_WORKSPACE_BYTES`): a C
    /// identifier.
    pub prefix: String,
    /// The model's name (its file name), for comments and the file symbol.
    pub model_name: String,
}

impl ObjectOptions {
    /// Options with `prefix`, which must be a C identifier (letters, digits
    /// and `_`, not starting with a digit), for the model named `model_name`.
    pub fn new(prefix: &str, model_name: &str) -> Result<ObjectOptions, CodegenError> {
        check_prefix(prefix)?;
        Ok(ObjectOptions { prefix: prefix.to_string(), model_name: model_name.to_string() })
    }

    /// Options whose prefix is [`default_prefix`] of `model_name`.
    pub fn for_model(model_name: &str) -> ObjectOptions {
        ObjectOptions { prefix: default_prefix(model_name), model_name: model_name.to_string() }
    }

    /// The prefix upper-cased, for macros.
    pub fn macro_prefix(&self) -> String {
        self.prefix.to_ascii_uppercase()
    }
}

/// An error unless `prefix` is a C identifier.
pub fn check_prefix(prefix: &str) -> Result<(), CodegenError> {
    let mut chars = prefix.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        Ok(())
    } else {
        Err(CodegenError::new(
            CodegenErrorKind::InvalidInput,
            format!(
                "symbol prefix '{prefix}' is not a C identifier (letters, digits and '_', not starting with a digit)"
            ),
        ))
    }
}

/// The symbol prefix for a model file: its name without directories and
/// extension, every character other than a letter, digit or `_` replaced by
/// `_`, and `model_` in front when that leaves nothing or a leading digit
/// (`models/resnet-18.qir` gives `resnet_18`, `1x1.qir` gives `model_1x1`).
pub fn default_prefix(model_name: &str) -> String {
    let file = model_name.rsplit(['/', '\\']).next().unwrap_or(model_name);
    let stem = match file.rsplit_once('.') {
        Some((stem, _)) if !stem.is_empty() => stem,
        _ => file,
    };
    let cleaned: String =
        stem.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    match cleaned.chars().next() {
        None => "model".into(),
        Some(c) if c.is_ascii_digit() => format!("model_{cleaned}"),
        Some(_) => cleaned,
    }
}

/// The relocatable ELF object of `program` (see the module docs).
pub fn write_object(program: &Program, options: &ObjectOptions) -> Result<Vec<u8>, CodegenError> {
    check_prefix(&options.prefix)?;
    let image = text_image(program, &options.prefix)?;
    let failed = |e: ::object::write::Error| {
        CodegenError::new(CodegenErrorKind::InvalidInput, format!("writing the object file: {e}"))
    };

    let mut obj = Object::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
    obj.add_file_symbol(options.model_name.as_bytes().to_vec());
    let text = obj.section_id(StandardSection::Text);
    obj.append_section_data(text, &image.text, crate::abi::BUFFER_ALIGN as u64);
    let rodata = (!program.rodata.is_empty()).then(|| {
        let id = obj.section_id(StandardSection::ReadOnlyData);
        obj.append_section_data(id, &program.rodata, crate::abi::BUFFER_ALIGN as u64);
        id
    });
    let bss = {
        let id = obj.section_id(StandardSection::UninitializedData);
        obj.append_section_bss(
            id,
            crate::object::entry::bss_bytes(program) as u64,
            crate::abi::BUFFER_ALIGN as u64,
        );
        Some(id)
    };
    // An empty .note.GNU-stack (PROGBITS, no flags) says the stack need not
    // be executable; without it, linkers warn and may make it executable.
    obj.add_section(Vec::new(), b".note.GNU-stack".to_vec(), SectionKind::Other);

    let function = |name: String, offset: usize, len: usize, scope: SymbolScope| Symbol {
        name: name.into_bytes(),
        value: offset as u64,
        size: len as u64,
        kind: SymbolKind::Text,
        scope,
        weak: false,
        section: SymbolSection::Section(text),
        flags: SymbolFlags::None,
    };
    for (k, kernel) in program.kernels.iter().enumerate() {
        obj.add_symbol(function(
            format!("{}.kernel{k}", options.prefix),
            kernel.offset,
            kernel.len,
            SymbolScope::Compilation,
        ));
    }
    for entry in &image.entries {
        obj.add_symbol(function(entry.name.clone(), entry.offset, entry.len, SymbolScope::Dynamic));
    }
    for reference in &image.references {
        let section = match reference.section {
            DataSection::Rodata => rodata,
            DataSection::Arena | DataSection::CpuCheck => bss,
        }
        .ok_or_else(|| {
            CodegenError::new(
                CodegenErrorKind::Assembler,
                format!("a stub refers to {}, which is empty", reference.section.section_name()),
            )
        })?;
        let symbol = obj.section_symbol(section);
        obj.add_relocation(
            text,
            Relocation {
                offset: reference.offset as u64,
                symbol,
                addend: -4,
                flags: RelocationFlags::Elf { r_type: elf::R_X86_64_PC32 },
            },
        )
        .map_err(failed)?;
    }
    if !image.host_calls.is_empty() {
        let symbol = obj.add_symbol(Symbol {
            name: qopt_host_calls::c_abi::HOST_CALL_SYMBOL.as_bytes().to_vec(),
            value: 0,
            size: 0,
            kind: SymbolKind::Text,
            scope: SymbolScope::Unknown,
            weak: false,
            section: SymbolSection::Undefined,
            flags: SymbolFlags::None,
        });
        for &offset in &image.host_calls {
            let flags = RelocationFlags::Elf { r_type: elf::R_X86_64_PLT32 };
            obj.add_relocation(text, Relocation { offset: offset as u64, symbol, addend: -4, flags })
                .map_err(failed)?;
        }
    }
    obj.write().map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_c_identifiers() {
        assert!(check_prefix("model").is_ok());
        assert!(check_prefix("_m0del_2").is_ok());
        for bad in ["", "1model", "my-model", "m.o", "é"] {
            let e = check_prefix(bad).unwrap_err();
            assert!(e.message.contains("is not a C identifier"), "{bad}: {e}");
        }
    }

    #[test]
    fn default_prefixes_come_from_the_file_name() {
        assert_eq!(default_prefix("model.qir"), "model");
        assert_eq!(default_prefix("models/resnet-18.qir"), "resnet_18");
        assert_eq!(default_prefix("a/b.c/mnist_mbv2.q.qir"), "mnist_mbv2_q");
        assert_eq!(default_prefix("1x1.qir"), "model_1x1");
        assert_eq!(default_prefix(".qir"), "_qir");
        assert_eq!(default_prefix(""), "model");
        for name in ["model.qir", "models/resnet-18.qir", "1x1.qir", ".qir", "", "ü.qir"] {
            assert!(check_prefix(&default_prefix(name)).is_ok(), "{name}");
        }
    }
}
