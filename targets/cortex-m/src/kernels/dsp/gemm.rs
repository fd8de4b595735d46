//! `QGemm` on int8 activations for the DSP extension: `bias + Σ (a − zero)·w` per output, four
//! output columns per pass over the activation row. Each word of four activations is unpacked
//! once (`SXTB16`, then `SSUB16` of the zero point in both halves) and meets a word of each of
//! the four columns' weights (two `SXTB16`s, two `SMLAD`s), in one assembly loop
//! ([`columns4`]): 25 instructions for sixteen multiply-accumulates, the weights read once, as
//! a one-row product must. The last `k mod 4` terms and the last `n mod 4` columns are added
//! value by value.
//!
//! Integer sums are exact (wrapping, like the portable kernels), so results are bit-exact with
//! `ferrite_cpu::kernels::integer::qgemm`.

use super::block::high_word_pairs;
use super::conv::{requant_pair, word};
use super::requantize::{output_byte, saturate4_pairs, Clamp};
use ferrite_cpu::kernels::step_operands;
use ferrite_cpu::CpuError;
use ferrite_hal::{Op, Step};

/// Columns multiplied together.
const COLUMNS: usize = 4;

/// The dot products of the first `4 × groups` activations `a` (less `zero`) with four weight
/// rows, row `j` at `w[j·k..]`, in assembly. The caller checks `groups ≥ 1`, `a` holding `4 ×
/// groups` bytes and `w` holding `3·k + 4 × groups` (every row's first `4 × groups` bytes).
#[inline(always)]
fn columns4(a: &[u8], w: &[u8], k: usize, groups: usize, zero: i32) -> [i32; COLUMNS] {
    let zero2 = (zero as u32 & 0xffff) * 0x0001_0001;
    let (mut s0, mut s1, mut s2, mut s3) = (0i32, 0i32, 0i32, 0i32);
    // SAFETY: pass i reads activation bytes 4i..4i + 4 and weight bytes j·k + 4i..j·k + 4i + 4
    // for j < 4 (unaligned words, which cores with the DSP extension load), all inside the
    // slices (checked by the caller; the loop runs `groups ≥ 1` times). r6 and r7, which inline
    // assembly may not name, hold the zero point and 3·k and are saved on the stack around the
    // loop.
    unsafe {
        core::arch::asm!(
            "push {{r6, r7}}",
            "mov r6, r0",
            "mov r7, r1",
            "2:",
            "ldr r0, [r11], #4",
            "sxtb16 r1, r0, ror #8",
            "sxtb16 r0, r0",
            "ssub16 r0, r0, r6",
            "ssub16 r1, r1, r6",
            "ldr r2, [lr, r9]",
            "sxtb16 r3, r2, ror #8",
            "sxtb16 r2, r2",
            "smlad r5, r2, r0, r5",
            "smlad r5, r3, r1, r5",
            "ldr r2, [lr, r9, lsl #1]",
            "sxtb16 r3, r2, ror #8",
            "sxtb16 r2, r2",
            "smlad r8, r2, r0, r8",
            "smlad r8, r3, r1, r8",
            "ldr r2, [lr, r7]",
            "sxtb16 r3, r2, ror #8",
            "sxtb16 r2, r2",
            "smlad r10, r2, r0, r10",
            "smlad r10, r3, r1, r10",
            "ldr r2, [lr], #4",
            "sxtb16 r3, r2, ror #8",
            "sxtb16 r2, r2",
            "smlad r4, r2, r0, r4",
            "smlad r4, r3, r1, r4",
            "cmp r11, r12",
            "bne 2b",
            "pop {{r6, r7}}",
            inout("r0") zero2 => _,
            inout("r1") 3 * k => _,
            out("r2") _,
            out("r3") _,
            inout("r4") s0,
            inout("r5") s1,
            inout("r8") s2,
            inout("r10") s3,
            in("r9") k,
            inout("r11") a.as_ptr() => _,
            in("r12") a.as_ptr().wrapping_add(4 * groups),
            inout("lr") w.as_ptr() => _,
        );
    }
    [s0, s1, s2, s3]
}

/// Adds to `sums[j]` the terms `done..k` of column `j` (its weights at `w[j·k..]`): what the
/// assembly leaves, value by value, out of line to keep the kernel small.
#[inline(never)]
fn rest(a: &[u8], w: &[u8], k: usize, done: usize, zero: i32, sums: &mut [i32]) {
    let value = |v: u8| v as i8 as i32;
    for (j, sum) in sums.iter_mut().enumerate() {
        for i in done..k {
            let (Some(&x), Some(&wv)) = (a.get(i), w.get(j * k + i)) else {
                break;
            };
            *sum = sum.wrapping_add((value(x) - zero) * value(wv));
        }
    }
}

/// `QGemm` on int8 activations: `bias + Σ (a − zero)·w` per output, [`COLUMNS`] output columns
/// per pass over the activation row.
#[inline(never)]
pub fn qgemm(step: &Step<'_>, arena: &mut [u8], weights: &[u8]) -> Result<(), CpuError> {
    let Op::QGemm(q) = step.op else {
        return Err(CpuError::CorruptPlan);
    };
    let a = step.inputs.get(0).ok_or(CpuError::CorruptPlan)?;
    let y = step.outputs.get(0).ok_or(CpuError::CorruptPlan)?;
    let (m, k) = (a.shape.dim(0), a.shape.dim(1));
    let n = y.shape.dim(1);
    let ([a, b, bias, requant], out) = step_operands::<4>(step, arena, weights)?;
    let groups = k / 4;
    // One pair for every column is repeated four times, for the assembly's four pairs.
    let mut repeated = [0u8; 32];
    if let Some(pair) = requant.get(..8).filter(|_| requant.len() == 8) {
        for four in repeated.chunks_exact_mut(8) {
            four.copy_from_slice(pair);
        }
    }
    let saturating = Clamp::of(&q) == Clamp::Int8;
    for row in 0..m {
        let a_row = a.get(row * k..(row + 1) * k).ok_or(CpuError::CorruptPlan)?;
        let out_row = out
            .get_mut(row * n..(row + 1) * n)
            .ok_or(CpuError::CorruptPlan)?;
        for (block, slots) in out_row.chunks_mut(COLUMNS).enumerate() {
            let col = block * COLUMNS;
            let w = b
                .get(col * k..(col + slots.len()) * k)
                .ok_or(CpuError::CorruptPlan)?;
            // The assembly takes whole blocks' whole groups; the rest goes value by value.
            let (mut sums, done) = if slots.len() == COLUMNS && groups > 0 {
                (columns4(a_row, w, k, groups, q.input_zero), 4 * groups)
            } else {
                ([0; COLUMNS], 0)
            };
            if done < k || slots.len() < COLUMNS {
                rest(a_row, w, k, done, q.input_zero, &mut sums[..slots.len()]);
            }
            let pairs: Option<&[u8; 32]> = if requant.len() == 8 {
                Some(&repeated)
            } else {
                requant
                    .get(8 * col..8 * col + 32)
                    .and_then(|p| p.try_into().ok())
            };
            let four: Option<&mut [u8; COLUMNS]> = slots.try_into().ok();
            let biases = bias.get(4 * col..4 * col + 16);
            if let (true, Some(pairs), Some(four), Some(biases)) = (saturating, pairs, four, biases)
            {
                if high_word_pairs(pairs) {
                    let mut acc = sums;
                    for (a, b4) in acc.iter_mut().zip(biases.chunks_exact(4)) {
                        *a = a.wrapping_add(i32::from_le_bytes([b4[0], b4[1], b4[2], b4[3]]));
                    }
                    saturate4_pairs(acc, pairs, q.output_zero, four);
                    continue;
                }
            }
            for (j, (slot, sum)) in slots.iter_mut().zip(sums).enumerate() {
                let acc = word(bias, col + j)?.wrapping_add(sum);
                *slot = output_byte(acc, requant_pair(requant, col + j)?, &q);
            }
        }
    }
    Ok(())
}
