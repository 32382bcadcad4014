//! The run-time check that an object file's entries make before running any
//! kernel: does this CPU (and its operating system) provide every feature
//! the program's target allowed the kernels to use? Code compiled with
//! `--target-cpu=native` on one machine and linked into a program that runs
//! on another would otherwise die of an illegal instruction.
//!
//! [`emit_feature_test`] emits `eax = 1` if every feature of a
//! [`CpuFeatures`] is present, else `eax = 0`, from `cpuid` and `xgetbv`:
//!
//! | feature | where |
//! |---|---|
//! | avx, fma, f16c, movbe | `cpuid(1).ecx` bits 28, 12, 29, 22 |
//! | avx (the OS saves ymm) | `cpuid(1).ecx` bit 27 (osxsave), then `xcr0` bits 1–2 |
//! | avx2, bmi1, bmi2 | `cpuid(7, 0).ebx` bits 5, 3, 8 |
//! | avx512f, dq, cd, bw, vl | `cpuid(7, 0).ebx` bits 16, 17, 28, 30, 31; `xcr0` bits 5–7 |
//! | avx512vnni | `cpuid(7, 0).ecx` bit 11 |
//! | avxvnni | `cpuid(7, 1).eax` bit 4 |
//! | lzcnt | `cpuid(0x80000001).ecx` bit 5 |
//!
//! Each leaf is read only when the CPU reports it (`cpuid(0).eax`,
//! `cpuid(7, 0).eax`, `cpuid(0x80000000).eax`). `cpuid` is slow (and traps
//! to the hypervisor in a virtual machine), so the entries keep the answer
//! in a byte of `.bss` and test only that byte on later calls (`object/entry.rs`).
//! The test clobbers rax, rbx, rcx, rdx and r11.

use crate::target::CpuFeatures;
use iced_x86::code_asm::*;

/// The bits one `cpuid` leaf must report, per output register.
#[derive(Copy, Clone, Default, Debug, PartialEq, Eq)]
struct LeafBits {
    eax: u32,
    ebx: u32,
    ecx: u32,
    edx: u32,
}

impl LeafBits {
    fn is_empty(&self) -> bool {
        *self == LeafBits::default()
    }
}

/// What `features` needs from each source.
#[derive(Copy, Clone, Default, Debug)]
struct Needs {
    leaf1: LeafBits,
    xcr0: u32,
    leaf7: LeafBits,
    leaf7_1: LeafBits,
    extended1: LeafBits,
}

fn needs(f: &CpuFeatures) -> Needs {
    let bit = |on: bool, b: u32| if on { 1u32 << b } else { 0 };
    let avx512 = f.avx512f || f.avx512bw || f.avx512cd || f.avx512dq || f.avx512vl || f.avx512vnni;
    let ymm = f.avx || f.avx2 || f.fma || f.f16c || f.avxvnni || avx512;
    Needs {
        leaf1: LeafBits {
            ecx: bit(f.avx, 28) | bit(ymm, 27) | bit(f.fma, 12) | bit(f.f16c, 29) | bit(f.movbe, 22),
            ..LeafBits::default()
        },
        xcr0: bit(ymm, 1) | bit(ymm, 2) | bit(avx512, 5) | bit(avx512, 6) | bit(avx512, 7),
        leaf7: LeafBits {
            ebx: bit(f.avx2, 5)
                | bit(f.bmi1, 3)
                | bit(f.bmi2, 8)
                | bit(f.avx512f, 16)
                | bit(f.avx512dq, 17)
                | bit(f.avx512cd, 28)
                | bit(f.avx512bw, 30)
                | bit(f.avx512vl, 31),
            ecx: bit(f.avx512vnni, 11),
            ..LeafBits::default()
        },
        leaf7_1: LeafBits { eax: bit(f.avxvnni, 4), ..LeafBits::default() },
        extended1: LeafBits { ecx: bit(f.lzcnt, 5), ..LeafBits::default() },
    }
}

/// Emits the test of the module doc: `eax = 1` when this CPU has every
/// feature of `features`, else `eax = 0`.
pub(crate) fn emit_feature_test(a: &mut CodeAssembler, features: &CpuFeatures) -> Result<(), IcedError> {
    let needs = needs(features);
    let mut missing = a.create_label();
    let mut done = a.create_label();
    let require = |a: &mut CodeAssembler, reg: AsmRegister32, mask: u32, missing: CodeLabel| {
        if mask == 0 {
            return Ok(());
        }
        a.mov(r11d, reg)?;
        a.and(r11d, mask as i32)?;
        a.cmp(r11d, mask as i32)?;
        a.jne(missing)
    };
    let read = |a: &mut CodeAssembler, leaf: u32, subleaf: u32| -> Result<(), IcedError> {
        a.mov(eax, leaf)?;
        a.mov(ecx, subleaf)?;
        a.cpuid()
    };
    // The highest leaf in a range must reach `leaf`.
    let reaches =
        |a: &mut CodeAssembler, range: u32, leaf: u32, missing: CodeLabel| -> Result<(), IcedError> {
            read(a, range, 0)?;
            a.cmp(eax, leaf as i32)?;
            a.jb(missing)
        };
    let check_leaf = |a: &mut CodeAssembler, bits: LeafBits, missing: CodeLabel| -> Result<(), IcedError> {
        for (reg, mask) in [(eax, bits.eax), (ebx, bits.ebx), (ecx, bits.ecx), (edx, bits.edx)] {
            require(a, reg, mask, missing)?;
        }
        Ok(())
    };
    let uses_leaf7 = !needs.leaf7.is_empty() || !needs.leaf7_1.is_empty();
    if uses_leaf7 {
        reaches(a, 0, 7, missing)?;
    } else if !needs.leaf1.is_empty() {
        reaches(a, 0, 1, missing)?;
    }
    if !needs.leaf1.is_empty() {
        read(a, 1, 0)?;
        check_leaf(a, needs.leaf1, missing)?;
    }
    if needs.xcr0 != 0 {
        // xgetbv is only defined when osxsave (checked with leaf 1) is set.
        a.xor(ecx, ecx)?;
        a.xgetbv()?;
        require(a, eax, needs.xcr0, missing)?;
    }
    if uses_leaf7 {
        read(a, 7, 0)?;
        if !needs.leaf7_1.is_empty() {
            // cpuid(7, 0).eax is the highest subleaf of leaf 7.
            a.cmp(eax, 1)?;
            a.jb(missing)?;
        }
        check_leaf(a, needs.leaf7, missing)?;
    }
    if !needs.leaf7_1.is_empty() {
        read(a, 7, 1)?;
        check_leaf(a, needs.leaf7_1, missing)?;
    }
    if !needs.extended1.is_empty() {
        reaches(a, 0x8000_0000, 0x8000_0001, missing)?;
        read(a, 0x8000_0001, 0)?;
        check_leaf(a, needs.extended1, missing)?;
    }
    a.mov(eax, 1)?;
    a.jmp(done)?;
    a.set_label(&mut missing)?;
    a.xor(eax, eax)?;
    a.set_label(&mut done)?;
    a.nop()
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use crate::runtime::executable::ExecutableCode;

    /// Runs the test for `features` here: 1 or 0.
    fn run(features: &CpuFeatures) -> u64 {
        let mut a = CodeAssembler::new(64).unwrap();
        a.push(rbx).unwrap();
        emit_feature_test(&mut a, features).unwrap();
        a.pop(rbx).unwrap();
        a.ret().unwrap();
        let code = ExecutableCode::new(&a.assemble(0).unwrap()).unwrap();
        // SAFETY: the code is a function of no arguments that keeps rbx (the
        // only callee-saved register it touches) and returns in rax.
        let function: extern "sysv64" fn() -> u64 = unsafe { std::mem::transmute(code.entry()) };
        function() & 0xFFFF_FFFF
    }

    /// Every feature alone, none, all, and the host's set: the emitted test
    /// agrees with `is_x86_feature_detected!` ([`CpuFeatures::host`]).
    #[test]
    fn the_test_agrees_with_the_standard_library_on_every_feature() {
        let host = CpuFeatures::host();
        assert_eq!(run(&CpuFeatures::NONE), 1);
        assert_eq!(run(&host), 1, "{host}");
        let each = CpuFeatures::each();
        for one in &each {
            assert_eq!(run(one), u64::from(one.is_subset_of(&host)), "{one}; the host has {host}");
        }
        let all = each.iter().fold(CpuFeatures::NONE, |all, one| all.union(one));
        assert_eq!(run(&all), u64::from(all.is_subset_of(&host)));
    }
}
