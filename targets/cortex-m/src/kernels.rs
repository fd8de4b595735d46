//! Kernel selection per op and per core.
//!
//! [`run_step`] first offers the step to the kernels specific to the core this crate is compiled
//! for (chosen at compile time from the target triple by `build.rs`: `cfg(ferrite_dsp)` on
//! ARMv7E-M and ARMv8-M Mainline, so a build carries only its own); a core kernel that does not cover the step's op or dtype returns `None` and the portable
//! kernel of `ferrite-cpu` runs. Today every op runs the portable kernels (f32 uses the FPU on
//! cores that have one); the int8 DSP kernels for M4/M7/M33 plug in as `dsp::run_step`.

use ferrite_cpu::CpuError;
use ferrite_hal::Step;

/// The kernel family this build selects first.
#[cfg(ferrite_dsp)]
pub const KERNEL_SET: &str = "dsp+portable";
/// The kernel family this build selects first.
#[cfg(not(ferrite_dsp))]
pub const KERNEL_SET: &str = "portable";

/// Runs one step with the best kernel this build has for it.
#[inline]
pub fn run_step(step: &Step<'_>, arena: &mut [u8], weights: &[u8]) -> Result<(), CpuError> {
    #[cfg(ferrite_dsp)]
    if let Some(result) = dsp::run_step(step, arena, weights) {
        return result;
    }
    ferrite_cpu::kernels::run_step(step, arena, weights)
}

/// Kernels for cores with the DSP extension (Cortex-M4, M7, M33): dual 16-bit multiply-
/// accumulates (`SMLAD`) on int8 data unpacked four bytes at a time (`SXTB16`), as CMSIS-NN does.
/// Integer arithmetic is exact, so every kernel here is bit-exact with its portable counterpart
/// (checked under QEMU by `tests/tests/qemu.rs`).
#[cfg(ferrite_dsp)]
#[allow(unsafe_code)]
pub mod dsp {
    use super::*;
    use ferrite_cpu::kernels::integer::finish;
    use ferrite_cpu::kernels::step_operands;
    use ferrite_hal::{DType, Op};

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

    /// `Σ a·b` over two int8 rows (no weight sum).
    #[inline(always)]
    fn dot(a: &[u8], b: &[u8]) -> i32 {
        let mut dot = 0i32;
        let mut a4 = a.chunks_exact(4);
        let mut b4 = b.chunks_exact(4);
        for (x, w) in (&mut a4).zip(&mut b4) {
            let x = u32::from_le_bytes([x[0], x[1], x[2], x[3]]);
            let w = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
            dot = smlad(sxtb16(x), sxtb16(w), dot);
            dot = smlad(sxtb16_ror8(x), sxtb16_ror8(w), dot);
        }
        for (x, w) in a4.remainder().iter().zip(b4.remainder()) {
            dot = dot.wrapping_add(*x as i8 as i32 * *w as i8 as i32);
        }
        dot
    }

    /// Positions gathered per pass of the pointwise kernel.
    const POSITIONS: usize = 4;
    /// Most input channels the pointwise kernel gathers on the stack.
    const MAX_CHANNELS: usize = 256;

    /// A 1×1, stride-1, unpadded, ungrouped `QConv` on int8: [`POSITIONS`] positions at a time
    /// are gathered channel-contiguous on the stack (NCHW keeps a position's channels a plane
    /// apart), then every output channel is a row dot product, as in `qgemm`.
    // Not inlined: its gathering buffer then only takes stack while it runs.
    #[inline(never)]
    fn qconv_pointwise(step: &Step<'_>, arena: &mut [u8], weights: &[u8]) -> Result<(), CpuError> {
        let Op::QConv(conv) = step.op else {
            return Err(CpuError::CorruptPlan);
        };
        let q = conv.requantize;
        let x_desc = step.inputs.get(0).ok_or(CpuError::CorruptPlan)?;
        let y_desc = step.outputs.get(0).ok_or(CpuError::CorruptPlan)?;
        let dims = x_desc.shape.dims();
        let (batches, channels) = (dims[0], dims[1]);
        let plane = x_desc.shape.product(2..x_desc.shape.rank());
        let outputs = y_desc.shape.dim(1);
        let signed_output = y_desc.dtype == DType::I8;
        let ([x, w, bias, requant], out) = step_operands::<4>(step, arena, weights)?;
        let word = |bytes: &[u8], i: usize| -> Result<i32, CpuError> {
            let v = bytes.get(4 * i..4 * i + 4).ok_or(CpuError::CorruptPlan)?;
            Ok(i32::from_le_bytes([v[0], v[1], v[2], v[3]]))
        };
        let mut gathered = [0u8; POSITIONS * MAX_CHANNELS];
        let mut pairs = [0i32; 2];
        for b in 0..batches {
            let xb = x
                .get(b * channels * plane..(b + 1) * channels * plane)
                .ok_or(CpuError::CorruptPlan)?;
            for p0 in (0..plane).step_by(POSITIONS) {
                let len = POSITIONS.min(plane - p0);
                for j in 0..len {
                    let row = &mut gathered[j * channels..(j + 1) * channels];
                    for (i, slot) in row.iter_mut().enumerate() {
                        *slot = *xb.get(i * plane + p0 + j).ok_or(CpuError::CorruptPlan)?;
                    }
                }
                for o in 0..outputs {
                    let w_row = w
                        .get(o * channels..(o + 1) * channels)
                        .ok_or(CpuError::CorruptPlan)?;
                    let c = if requant.len() == 8 { 0 } else { o };
                    pairs[0] = word(requant, 2 * c)?;
                    pairs[1] = word(requant, 2 * c + 1)?;
                    let bias = word(bias, o)?;
                    let mut correction = 0;
                    for j in 0..len {
                        let row = &gathered[j * channels..(j + 1) * channels];
                        let d = if j == 0 {
                            let (d, sum) = dot_and_sum(row, w_row);
                            correction = q.input_zero.wrapping_mul(sum);
                            d
                        } else {
                            dot(row, w_row)
                        };
                        let acc = bias.wrapping_add(d).wrapping_sub(correction);
                        let v = finish(acc, &pairs, 0, &q);
                        let at = (b * outputs + o) * plane + p0 + j;
                        let slot = out.get_mut(at).ok_or(CpuError::CorruptPlan)?;
                        *slot = if signed_output {
                            v as i8 as u8
                        } else {
                            v as u8
                        };
                    }
                }
            }
        }
        Ok(())
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
        let mut pairs = [0i32; 2];
        for row in 0..m {
            let a_row = a.get(row * k..(row + 1) * k).ok_or(CpuError::CorruptPlan)?;
            for col in 0..n {
                let b_row = b.get(col * k..(col + 1) * k).ok_or(CpuError::CorruptPlan)?;
                let (dot, sum) = dot_and_sum(a_row, b_row);
                let acc = word(bias, col)?
                    .wrapping_add(dot)
                    .wrapping_sub(q.input_zero.wrapping_mul(sum));
                let c = if requant.len() == 8 { 0 } else { col };
                pairs[0] = word(requant, 2 * c)?;
                pairs[1] = word(requant, 2 * c + 1)?;
                let v = finish(acc, &pairs, 0, &q);
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
    pub fn run_step(
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
            Op::QGemm(_) => Some(qgemm(step, arena, weights)),
            Op::QConv(c) if c.is_pointwise() && x.shape.dim(1) <= MAX_CHANNELS => {
                Some(qconv_pointwise(step, arena, weights))
            }
            _ => None,
        }
    }
}
