//! Kernels for cores with the DSP extension (Cortex-M4, M7, M33): dual 16-bit multiply-
//! accumulates (`SMLAD`) on int8 data unpacked four bytes at a time (`SXTB16`), as CMSIS-NN does.
//! Integer arithmetic is exact, so every kernel here is bit-exact with its portable counterpart
//! (checked under QEMU by `tests/tests/qemu.rs`).

mod conv;

use ferrite_cpu::kernels::integer::Requantizer;
use ferrite_cpu::kernels::step_operands;
use ferrite_cpu::CpuError;
use ferrite_hal::{DType, Op, Step};

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

/// `acc + lo(a)·hi(b)` on signed 16-bit halves.
#[inline(always)]
fn smlabt(a: u32, b: u32, acc: i32) -> i32 {
    let r: i32;
    // SAFETY: as for `smlad`.
    unsafe {
        core::arch::asm!("smlabt {r}, {a}, {b}, {acc}", r = lateout(reg) r, a = in(reg) a,
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

/// `(Σ a·b, Σ b)` over two int8 rows: four products per two `SMLAD`s.
#[inline(always)]
fn dot_and_sum(a: &[u8], b: &[u8]) -> (i32, i32) {
    const ONES: u32 = 0x0001_0001;
    let (mut dot, mut sum) = (0i32, 0i32);
    let mut a4 = a.chunks_exact(4);
    let mut b4 = b.chunks_exact(4);
    for (x, w) in (&mut a4).zip(&mut b4) {
        let x = u32::from_le_bytes([x[0], x[1], x[2], x[3]]);
        let w = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        let (w0, w1) = (sxtb16(w), sxtb16_ror8(w));
        dot = smlad(sxtb16(x), w0, dot);
        dot = smlad(sxtb16_ror8(x), w1, dot);
        sum = smlad(w0, ONES, sum);
        sum = smlad(w1, ONES, sum);
    }
    for (x, w) in a4.remainder().iter().zip(b4.remainder()) {
        let w = *w as i8 as i32;
        dot = dot.wrapping_add(*x as i8 as i32 * w);
        sum = sum.wrapping_add(w);
    }
    (dot, sum)
}

/// `QGemm` on int8 activations: `bias + Σ a·b − zero·Σ b` per output.
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
    for row in 0..m {
        let a_row = a.get(row * k..(row + 1) * k).ok_or(CpuError::CorruptPlan)?;
        for col in 0..n {
            let b_row = b.get(col * k..(col + 1) * k).ok_or(CpuError::CorruptPlan)?;
            let (dot, sum) = dot_and_sum(a_row, b_row);
            let acc = word(bias, col)?
                .wrapping_add(dot)
                .wrapping_sub(q.input_zero.wrapping_mul(sum));
            let c = if requant.len() == 8 { 0 } else { col };
            let rq = Requantizer::new([word(requant, 2 * c)?, word(requant, 2 * c + 1)?], &q);
            let v = rq.apply(acc);
            let slot = out.get_mut(row * n + col).ok_or(CpuError::CorruptPlan)?;
            *slot = if signed_output {
                v as i8 as u8
            } else {
                v as u8
            };
        }
    }
    Ok(())
}

/// The DSP kernel for `step`, if there is one for its op and dtypes.
#[inline]
pub fn run_step(step: &Step<'_>, arena: &mut [u8], weights: &[u8]) -> Option<Result<(), CpuError>> {
    // Only integer ops are looked at further (a tensor lookup costs a record decode).
    if !matches!(step.op, Op::QGemm(_) | Op::QConv(_)) {
        return None;
    }
    let x = step.inputs.get(0)?;
    if x.dtype != DType::I8 {
        return None;
    }
    match step.op {
        Op::QGemm(_) => Some(qgemm(step, arena, weights)),
        Op::QConv(c) => {
            let icg = step.inputs.get(1)?.shape.dim(1);
            if icg == 1 && c.group > 1 {
                Some(conv::depthwise(step, arena, weights))
            } else {
                Some(conv::columns(step, arena, weights))
            }
        }
        _ => None,
    }
}
