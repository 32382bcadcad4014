//! The core clock, measured rather than read: a JIT-compiled chain of
//! dependent register-to-register `add`s retires one add per cycle on every
//! x86-64 core, so the time it takes gives the cycles per second the code
//! actually ran at (turbo included). The added value is a register, not an
//! immediate: Intel cores since Golden Cove fold chains of `add reg, imm` at
//! rename and retire several a cycle (a Sapphire Rapids core measured
//! 16 GHz that way). Profiles use it to express throughput as a share of the
//! machine's peak.

use crate::abi::{assemble, new_assembler};
use crate::error::CodegenError;
use crate::runtime::executable::ExecutableCode;
use iced_x86::code_asm::*;
use std::time::Instant;

/// Dependent adds per loop iteration (the loop's own `dec`/`jnz` run in
/// parallel with the chain).
const CHAIN: usize = 16;

/// The measured clock of the calling thread's core in Hz: the best of a
/// few repetitions of ~20 ms each.
pub fn measure_clock_hz() -> Result<f64, CodegenError> {
    let mut a = new_assembler()?;
    let mut top = a.create_label();
    a.mov(rax, 0u64)?;
    a.mov(rdx, 1u64)?;
    a.set_label(&mut top)?;
    for _ in 0..CHAIN {
        a.add(rax, rdx)?;
    }
    a.dec(rdi)?;
    a.jnz(top)?;
    a.ret()?;
    let code = ExecutableCode::new(&assemble(&mut a)?)?;
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: the code is a complete function taking an iteration count
        // in rdi, touching only rax, rdx and rdi (caller-saved), using no memory.
        let chain: extern "sysv64" fn(u64) -> u64 = unsafe { std::mem::transmute(code.entry()) };
        let iterations = 2_000_000u64;
        chain(iterations / 10);
        let mut best = 0f64;
        for _ in 0..5 {
            let start = Instant::now();
            std::hint::black_box(chain(iterations));
            let seconds = start.elapsed().as_secs_f64();
            best = best.max((iterations as f64 * CHAIN as f64) / seconds);
        }
        Ok(best)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        drop(code);
        Err(CodegenError::new(crate::error::CodegenErrorKind::MissingCpuFeatures, "not an x86-64 CPU"))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_clock_is_plausible() {
        let hz = super::measure_clock_hz().unwrap();
        println!("measured {hz} Hz");
        assert!((2e8..1e10).contains(&hz), "{hz} Hz");
    }
}
