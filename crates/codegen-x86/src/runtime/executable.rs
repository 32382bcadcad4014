//! Executable memory with a strict W^X discipline: [`ExecutableCode`].
//!
//! Machine code is copied into a fresh anonymous mapping that is readable and
//! writable, then the whole mapping is switched to read + execute with
//! `mprotect` (memmap2's `make_exec`). No page is ever writable and executable
//! at once, and the code cannot be changed afterwards: a new kernel is a new
//! mapping. The mapping is unmapped when the [`ExecutableCode`] is dropped.
//!
//! memmap2 (already a workspace dependency, for mapped input files) wraps
//! `mmap`/`mprotect`/`munmap` on Unix and `VirtualAlloc`/`VirtualProtect` on
//! Windows, so this crate needs no direct `libc` dependency. x86 keeps
//! instruction fetch coherent with data writes, so no cache flush is needed
//! after the copy. Every failure (an empty code buffer, a failed system call)
//! is an error, never a panic.

use crate::error::{CodegenError, CodegenErrorKind};
use memmap2::Mmap;

/// Machine code in a read + execute mapping that nothing can write to.
pub struct ExecutableCode {
    mapping: Mmap,
    code_len: usize,
}

impl ExecutableCode {
    /// Copies `code` into a new mapping and makes it read + execute. The
    /// mapping is writable only before the `mprotect`, and never executable
    /// while writable.
    pub fn new(code: &[u8]) -> Result<ExecutableCode, CodegenError> {
        if code.is_empty() {
            return Err(CodegenError::new(CodegenErrorKind::Memory, "cannot map an empty code buffer"));
        }
        let memory_error = |what: &str, e: std::io::Error| {
            CodegenError::new(CodegenErrorKind::Memory, format!("{what}: {e}"))
        };
        let mut writable =
            memmap2::MmapMut::map_anon(code.len()).map_err(|e| memory_error("allocating code memory", e))?;
        writable[..code.len()].copy_from_slice(code);
        let mapping = writable.make_exec().map_err(|e| memory_error("making code memory executable", e))?;
        Ok(ExecutableCode { mapping, code_len: code.len() })
    }

    /// The address of the first instruction.
    pub fn entry(&self) -> *const u8 {
        self.mapping.as_ptr()
    }

    /// The machine code as mapped (read-only).
    pub fn bytes(&self) -> &[u8] {
        &self.mapping[..self.code_len]
    }
}

impl std::fmt::Debug for ExecutableCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecutableCode").field("entry", &self.entry()).field("len", &self.code_len).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `mov eax, 42; ret`.
    const RETURN_42: [u8; 6] = [0xB8, 42, 0, 0, 0, 0xC3];

    #[test]
    fn empty_code_is_an_error() {
        let e = ExecutableCode::new(&[]).unwrap_err();
        assert_eq!(e.kind, CodegenErrorKind::Memory);
    }

    #[test]
    fn mapped_code_keeps_its_bytes() {
        let code = ExecutableCode::new(&RETURN_42).unwrap();
        assert_eq!(code.bytes(), &RETURN_42);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn mapped_code_runs() {
        let code = ExecutableCode::new(&RETURN_42).unwrap();
        // SAFETY: the mapping holds a complete function that takes no
        // arguments, returns an i32 in eax and touches no memory.
        let f: extern "sysv64" fn() -> i32 = unsafe { std::mem::transmute(code.entry()) };
        assert_eq!(f(), 42);
    }

    /// The kernel's view of its own mapping: `/proc/self/maps` lists it as
    /// `r-xp`, readable and executable but not writable.
    #[cfg(target_os = "linux")]
    #[test]
    fn mapping_is_executable_and_never_writable() {
        let code = ExecutableCode::new(&RETURN_42).unwrap();
        let address = code.entry() as usize;
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let line = maps
            .lines()
            .find(|line| {
                let range = line.split_whitespace().next().unwrap_or("");
                let (start, end) = range.split_once('-').unwrap_or(("", ""));
                let parse = |s: &str| usize::from_str_radix(s, 16).unwrap_or(0);
                (parse(start)..parse(end)).contains(&address)
            })
            .expect("the code mapping is listed in /proc/self/maps");
        let permissions = line.split_whitespace().nth(1).unwrap();
        assert_eq!(&permissions[..3], "r-x", "{line}");
    }
}
