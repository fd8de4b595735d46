//! The DSP extension's instructions that the kernels written in Rust use, one inline wrapper
//! each (the blocks in [`super::block`] write theirs in assembly): the bottom of the DSP
//! kernels, importing nothing above it.

/// `acc + lo(a)·lo(b) + hi(a)·hi(b)` on signed 16-bit halves.
#[inline(always)]
pub(super) fn smlad(a: u32, b: u32, acc: i32) -> i32 {
    let r: i32;
    // SAFETY: a register-only DSP instruction, available on every core this module is
    // compiled for (cfg(ferrite_dsp)).
    unsafe {
        core::arch::asm!("smlad {r}, {a}, {b}, {acc}", r = lateout(reg) r, a = in(reg) a,
            b = in(reg) b, acc = in(reg) acc, options(pure, nomem, nostack));
    }
    r
}

/// `acc + lo(a)·lo(b)` on signed 16-bit halves.
#[inline(always)]
pub(super) fn smlabb(a: u32, b: u32, acc: i32) -> i32 {
    let r: i32;
    // SAFETY: as for `smlad`.
    unsafe {
        core::arch::asm!("smlabb {r}, {a}, {b}, {acc}", r = lateout(reg) r, a = in(reg) a,
            b = in(reg) b, acc = in(reg) acc, options(pure, nomem, nostack));
    }
    r
}

/// Bytes 0 and 2 of `x`, sign-extended to two 16-bit halves.
#[inline(always)]
pub(super) fn sxtb16(x: u32) -> u32 {
    let r: u32;
    // SAFETY: as for `smlad`.
    unsafe {
        core::arch::asm!("sxtb16 {r}, {x}", r = lateout(reg) r, x = in(reg) x,
            options(pure, nomem, nostack));
    }
    r
}

/// Bytes 1 and 3 of `x`, sign-extended to two 16-bit halves.
#[inline(always)]
pub(super) fn sxtb16_ror8(x: u32) -> u32 {
    let r: u32;
    // SAFETY: as for `smlad`.
    unsafe {
        core::arch::asm!("sxtb16 {r}, {x}, ror #8", r = lateout(reg) r, x = in(reg) x,
            options(pure, nomem, nostack));
    }
    r
}
