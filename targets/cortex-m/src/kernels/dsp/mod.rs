//! Kernels for cores with the DSP extension (Cortex-M4, M7, M33): dual 16-bit multiply-
//! accumulates (`SMLAD`) on int8 data unpacked four bytes at a time (`SXTB16`), as CMSIS-NN does.
//! Integer arithmetic is exact, so every kernel here is bit-exact with its portable counterpart
//! (checked under QEMU by `tests/tests/qemu.rs`).

#[macro_use]
mod requantize;
mod block;
mod conv;
mod depthwise;

use ferrite_cpu::kernels::integer::Requantizer;
use ferrite_cpu::kernels::step_operands;
use ferrite_cpu::CpuError;
use ferrite_hal::{selects, DType, Op, OpKind, Selection, Step};

/// `acc + lo(a)·lo(b) + hi(a)·hi(b)` on signed 16-bit halves.
#[inline(always)]
fn smlad(a: u32, b: u32, acc: i32) -> i32 {
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
fn smlabb(a: u32, b: u32, acc: i32) -> i32 {
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
fn sxtb16(x: u32) -> u32 {
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
fn sxtb16_ror8(x: u32) -> u32 {
    let r: u32;
    // SAFETY: as for `smlad`.
    unsafe {
        core::arch::asm!("sxtb16 {r}, {x}, ror #8", r = lateout(reg) r, x = in(reg) x,
            options(pure, nomem, nostack));
    }
    r
}

/// Per 16-bit half, `a − b` (no saturation: the values here fit).
#[inline(always)]
fn ssub16(a: u32, b: u32) -> u32 {
    let r: u32;
    // SAFETY: as for `smlad`.
    unsafe {
        core::arch::asm!("ssub16 {r}, {a}, {b}", r = lateout(reg) r, a = in(reg) a,
            b = in(reg) b, options(pure, nomem, nostack));
    }
    r
}

/// `Σ (a − zero)·w0` and `Σ (a − zero)·w1` over an int8 activation row and two int8 weight
/// rows: four activations unpacked once per group (`SXTB16`, then `SSUB16` of the zero point in
/// both halves) serve both rows' `SMLAD`s.
#[inline(always)]
fn dot_two_rows(a: &[u8], w0: &[u8], w1: &[u8], zero: i32) -> (i32, i32) {
    let zero2 = (zero as u32 & 0xffff) * 0x0001_0001;
    let (mut acc0, mut acc1) = (0i32, 0i32);
    let word = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let (mut a4, mut p4, mut q4) = (a.chunks_exact(4), w0.chunks_exact(4), w1.chunks_exact(4));
    for ((x, p), q) in (&mut a4).zip(&mut p4).zip(&mut q4) {
        let x = word(x);
        let (x02, x13) = (ssub16(sxtb16(x), zero2), ssub16(sxtb16_ror8(x), zero2));
        let (p, q) = (word(p), word(q));
        acc0 = smlad(sxtb16_ror8(p), x13, smlad(sxtb16(p), x02, acc0));
        acc1 = smlad(sxtb16_ror8(q), x13, smlad(sxtb16(q), x02, acc1));
    }
    let tails = a4
        .remainder()
        .iter()
        .zip(p4.remainder())
        .zip(q4.remainder());
    for ((&x, &p), &q) in tails {
        let x = x as i8 as i32 - zero;
        acc0 = acc0.wrapping_add(x * p as i8 as i32);
        acc1 = acc1.wrapping_add(x * q as i8 as i32);
    }
    (acc0, acc1)
}

/// `QGemm` on int8 activations: `bias + Σ (a − zero)·w` per output, two output columns per pass
/// over the activation row.
#[inline(never)]
fn qgemm(step: &Step<'_>, arena: &mut [u8], weights: &[u8]) -> Result<(), CpuError> {
    let Op::QGemm(q) = step.op else {
        return Err(CpuError::CorruptPlan);
    };
    let a = step.inputs.get(0).ok_or(CpuError::CorruptPlan)?;
    let y = step.outputs.get(0).ok_or(CpuError::CorruptPlan)?;
    let (m, k) = (a.shape.dim(0), a.shape.dim(1));
    let n = y.shape.dim(1);
    let signed_output = y.dtype == DType::I8;
    let ([a, b, bias, requant], out) = step_operands::<4>(step, arena, weights)?;
    let word = |bytes: &[u8], i: usize| -> Result<i32, CpuError> {
        let w = bytes.get(4 * i..4 * i + 4).ok_or(CpuError::CorruptPlan)?;
        Ok(i32::from_le_bytes([w[0], w[1], w[2], w[3]]))
    };
    let requantizer = |col: usize| -> Result<Requantizer, CpuError> {
        let c = if requant.len() == 8 { 0 } else { col };
        Ok(Requantizer::new(
            [word(requant, 2 * c)?, word(requant, 2 * c + 1)?],
            &q,
        ))
    };
    let byte = |v: i32| {
        if signed_output {
            v as i8 as u8
        } else {
            v as u8
        }
    };
    for row in 0..m {
        let a_row = a.get(row * k..(row + 1) * k).ok_or(CpuError::CorruptPlan)?;
        for col in (0..n).step_by(2) {
            let two = col + 1 < n;
            let w0 = b.get(col * k..(col + 1) * k).ok_or(CpuError::CorruptPlan)?;
            // A lone last column runs twice; one result is kept.
            let w1 = if two {
                b.get((col + 1) * k..(col + 2) * k)
                    .ok_or(CpuError::CorruptPlan)?
            } else {
                w0
            };
            let (d0, d1) = dot_two_rows(a_row, w0, w1, q.input_zero);
            let slots = out
                .get_mut(row * n + col..row * n + col + if two { 2 } else { 1 })
                .ok_or(CpuError::CorruptPlan)?;
            for (i, (slot, d)) in slots.iter_mut().zip([d0, d1]).enumerate() {
                *slot = byte(requantizer(col + i)?.apply(word(bias, col + i)?.wrapping_add(d)));
            }
        }
    }
    Ok(())
}

/// The kinds whose int8 steps (int8 input) [`run_step`] always runs: the portable kernels need
/// not cover them.
pub const COVERED_INT8: Selection = ferrite_hal::op_mask(&[OpKind::QGemm, OpKind::QConv]);

/// The DSP kernel for `step`, if there is one for its op and dtypes among the kinds in `OPS`.
#[inline]
pub fn run_step<const OPS: Selection>(
    step: &Step<'_>,
    arena: &mut [u8],
    weights: &[u8],
) -> Option<Result<(), CpuError>> {
    // Only integer ops are looked at further (a tensor lookup costs a record decode).
    if !matches!(step.op, Op::QGemm(_) | Op::QConv(_)) {
        return None;
    }
    let x = step.inputs.get(0)?;
    if x.dtype != DType::I8 {
        return None;
    }
    match step.op {
        Op::QGemm(_) if selects(OPS, OpKind::QGemm) => Some(qgemm(step, arena, weights)),
        Op::QConv(c) if selects(OPS, OpKind::QConv) => {
            let icg = step.inputs.get(1)?.shape.dim(1);
            if icg == 1 && c.group > 1 {
                Some(depthwise::depthwise(step, arena, weights))
            } else {
                Some(conv::columns(step, arena, weights))
            }
        }
        _ => None,
    }
}
