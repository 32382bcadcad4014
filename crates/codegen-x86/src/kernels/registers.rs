//! Register helpers every kernel uses: broadcasting an immediate to every
//! lane, and the xmm half of a ymm register.

use iced_x86::code_asm::*;

/// `ymm = [value; 8]` (32-bit lanes) through eax.
pub(crate) fn broadcast_u32(a: &mut CodeAssembler, ymm: AsmRegisterYmm, value: u32) -> Result<(), IcedError> {
    let xmm = xmm_of(ymm);
    a.mov(eax, value)?;
    a.vmovd(xmm, eax)?;
    a.vpbroadcastd(ymm, xmm)
}

/// `ymm = [value; 4]` (64-bit lanes) through rax.
pub(crate) fn broadcast_u64(a: &mut CodeAssembler, ymm: AsmRegisterYmm, value: u64) -> Result<(), IcedError> {
    let xmm = xmm_of(ymm);
    a.mov(rax, value)?;
    a.vmovq(xmm, rax)?;
    a.vpbroadcastq(ymm, xmm)
}

/// The xmm register that is the low half of `ymm`.
pub(crate) fn xmm_of(ymm: AsmRegisterYmm) -> AsmRegisterXmm {
    const PAIRS: [(AsmRegisterYmm, AsmRegisterXmm); 16] = [
        (ymm0, xmm0),
        (ymm1, xmm1),
        (ymm2, xmm2),
        (ymm3, xmm3),
        (ymm4, xmm4),
        (ymm5, xmm5),
        (ymm6, xmm6),
        (ymm7, xmm7),
        (ymm8, xmm8),
        (ymm9, xmm9),
        (ymm10, xmm10),
        (ymm11, xmm11),
        (ymm12, xmm12),
        (ymm13, xmm13),
        (ymm14, xmm14),
        (ymm15, xmm15),
    ];
    PAIRS.iter().find(|(y, _)| *y == ymm).map_or(xmm0, |(_, x)| *x)
}
