//! [`CodegenError`]: every way compiling or running generated code can fail.
//!
//! Nothing in this crate panics on bad input: an op the backend does not
//! handle, a type it cannot specialize for, a CPU that lacks an instruction
//! set, a buffer of the wrong length and a failed system call all come back
//! as one of these kinds, with a message that names the cause.

use std::fmt;

/// What went wrong, by kind; the message says which value or feature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CodegenErrorKind {
    /// The op, type or parameter is outside what the backend compiles yet.
    Unsupported,
    /// The op or its types are malformed (the verifier would reject them).
    InvalidInput,
    /// The requested target needs CPU features this machine lacks.
    MissingCpuFeatures,
    /// Buffers handed to a compiled kernel do not match its signature.
    BadArguments,
    /// The assembler rejected an instruction (a bug in an emitter).
    Assembler,
    /// Allocating or protecting executable memory failed.
    Memory,
    /// An op run by a host call failed in the interpreter.
    HostCall,
}

/// An error of the x86 backend: a kind and a human-readable message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodegenError {
    /// What went wrong, by kind.
    pub kind: CodegenErrorKind,
    /// Which value, type, feature or call it was.
    pub message: String,
}

impl CodegenError {
    /// An error of `kind` with `message`.
    pub fn new(kind: CodegenErrorKind, message: impl Into<String>) -> CodegenError {
        CodegenError { kind, message: message.into() }
    }
}

impl fmt::Display for CodegenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CodegenError {}

impl From<iced_x86::IcedError> for CodegenError {
    fn from(e: iced_x86::IcedError) -> CodegenError {
        CodegenError::new(CodegenErrorKind::Assembler, format!("assembler: {e}"))
    }
}
