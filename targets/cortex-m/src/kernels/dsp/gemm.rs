//! `QGemm` on int8 activations for the DSP extension: `bias + Σ (a − zero)·w` per output.
//! The output columns go [`GROUP`] at a time, their sums kept on the stack; the activation row
//! goes [`CHUNK`] values at a time, each chunk unpacked once into int16 pairs `(a − zero)` on
//! the stack ([`unpack`]: `SXTB16`, `SSUB16` of the zero point in both halves). One assembly
//! loop ([`blocks`]) then runs the group's columns four at a time over the chunk: per four
//! activations one `LDRD` of their pairs meets a weight word of each of the four columns (two
//! `SXTB16`s, two `SMLAD`s), 23 instructions for sixteen multiply-accumulates, the weights read
//! once, as a one-row product must. The last `k mod 4` terms and the last `n mod 4` columns
//! are added value by value; outputs are requantized four at a time, each with its pair.
//!
//! Weights packed in the blocked layout ([`QGemmWeights::Blocked`], whenever `N` is a multiple
//! of four and `K` of eight) go through [`blocked_blocks`] instead: per four activations one `LDM`
//! fetches a word of each of the block's four columns, so eight activations take 38
//! instructions for 32 multiply-accumulates (2 `LDRD`, 2 `LDM`, 16 `SXTB16`, 16 `SMLAD`, the
//! loop's compare and branch).
//!
//! Integer sums are exact (wrapping, like the portable kernels), so results are bit-exact with
//! `ferrite_cpu::ops::matmul::int8::qgemm`.

use super::block::high_word_pairs;
use super::conv::{requant_pair, word};
use super::requantize::{output_byte, saturate4, saturate4_pairs, Clamp};
use ferrite_cpu::base::requantize::HighWordRequantizer;
use ferrite_cpu::steps::step_operands_and_scratch;
use ferrite_cpu::CpuError;
use ferrite_hal::op::{QGemmWeights, Requantize};
use ferrite_hal::{selects_qgemm_weights, Op, Selection, Step};

/// Columns multiplied together by the assembly loop.
const COLUMNS: usize = 4;

/// Output columns whose sums are kept at once, on the stack (a multiple of [`COLUMNS`]).
const GROUP: usize = 64;

/// Activations unpacked at once, on the stack (a multiple of four).
const CHUNK: usize = 64;

/// `words` = the activations `a` less `zero`, four at a time as the pairs (a0, a2), (a1, a3)
/// of int16 halves, in assembly (eight instructions per four). The caller checks that `a`
/// holds `2 × words.len()` bytes and `words.len()` is even and not zero.
#[inline(always)]
fn unpack(a: &[u8], zero: i32, words: &mut [u32]) {
    let zero2 = (zero as u32 & 0xffff) * 0x0001_0001;
    let dst = words.as_mut_ptr();
    // SAFETY: pass i reads activation bytes 4i..4i + 4 (an unaligned word, which cores with
    // the DSP extension load) and writes words 2i and 2i + 1 (aligned), for 2i < words.len(),
    // all inside the slices (checked by the caller: at least one pass).
    unsafe {
        core::arch::asm!(
            "2:",
            "ldr {x}, [{src}], #4",
            "sxtb16 {odd}, {x}, ror #8",
            "sxtb16 {x}, {x}",
            "ssub16 {x}, {x}, {zero2}",
            "ssub16 {odd}, {odd}, {zero2}",
            "strd {x}, {odd}, [{dst}], #8",
            "cmp {dst}, {end}",
            "bne 2b",
            src = inout(reg) a.as_ptr() => _,
            dst = inout(reg) dst => _,
            end = in(reg) dst.wrapping_add(words.len()),
            zero2 = in(reg) zero2,
            x = out(reg) _,
            odd = out(reg) _,
            options(nostack),
        );
    }
}

/// What the assembly block loops ([`blocks`], [`blocked_blocks`]) read and advance, by offset.
#[repr(C)]
struct Blocks {
    /// The next block's four sums (offset 0; advanced by 16) and the end of the sums (4).
    sums: *mut i32,
    sums_end: *mut i32,
    /// The unpacked chunk (8) and its end (12).
    chunk: *const u32,
    chunk_end: *const u32,
    /// The next block's weights at the chunk (16): its first weight row, advanced by `4·k`
    /// ([`blocks`]); or its blocked words, advanced by `step` ([`blocked_blocks`]).
    weights: *const u8,
    /// `3·k`, the fourth row's offset ([`blocks`]); or one block's weights, `4·k` bytes
    /// ([`blocked_blocks`]) (20).
    step: usize,
}

impl Blocks {
    /// The record at the start of `sums`, `chunk` and `w`, with `step`.
    #[inline(always)]
    fn new(chunk: &[u32], w: &[u8], step: usize, sums: &mut [i32]) -> Blocks {
        let range = sums.as_mut_ptr_range();
        let chunk_range = chunk.as_ptr_range();
        Blocks {
            sums: range.start,
            sums_end: range.end,
            chunk: chunk_range.start,
            chunk_end: chunk_range.end,
            weights: w.as_ptr(),
            step,
        }
    }
}

/// `sums[4j + c] += Σ chunk · w` for the blocks `j` of four columns, column `4j + c`'s weights
/// at `w[(4j + c)·k..]`, over the unpacked `chunk` (two words per four activations), in one
/// assembly loop. The caller checks that `sums` holds whole blocks (at least one), `chunk` a
/// whole, non-empty number of pairs of words, and `w` every column's first `2 × chunk.len()`
/// bytes.
#[inline(always)]
fn blocks(chunk: &[u32], w: &[u8], k: usize, sums: &mut [i32]) {
    let mut state = Blocks::new(chunk, w, 3 * k, sums);
    let state: *mut Blocks = &mut state;
    // SAFETY: block j reads and writes sums 4j..4j + 4, reads the chunk's words and, for each
    // of its four columns, `2 × chunk.len()` weight bytes (unaligned words, which cores with
    // the DSP extension load), all inside the slices (checked by the caller), and reads and
    // writes the record. Every operand is in a named register, so r6 and r7, which inline
    // assembly may not name, are no operand's: they hold the record's pointer and 3·k, saved on
    // the stack around the loop.
    unsafe {
        core::arch::asm!(
            "push {{r6, r7}}",
            "mov r6, r0",
            "ldr r7, [r6, #20]",
            "2:",
            "ldr r0, [r6]",
            "ldm r0, {{r4, r5, r8, r10}}",
            "ldrd r11, r12, [r6, #8]",
            "ldr lr, [r6, #16]",
            "3:",
            "ldrd r0, r1, [r11], #8",
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
            "bne 3b",
            "ldr r0, [r6]",
            "stm r0!, {{r4, r5, r8, r10}}",
            "str r0, [r6]",
            "ldr r2, [r6, #16]",
            "add r2, r2, r9, lsl #2",
            "str r2, [r6, #16]",
            "ldr r1, [r6, #4]",
            "cmp r0, r1",
            "bne 2b",
            "pop {{r6, r7}}",
            inout("r0") state => _,
            out("r1") _,
            out("r2") _,
            out("r3") _,
            out("r4") _,
            out("r5") _,
            out("r8") _,
            in("r9") k,
            out("r10") _,
            out("r11") _,
            out("r12") _,
            out("lr") _,
        );
    }
}

/// `sums[4j + c] += Σ chunk · w` for the blocks `j` of four columns whose weights are in the
/// blocked layout (block `j` at `w[j·stride..]`, per four activations sixteen bytes: a word of
/// each column), over the unpacked `chunk`, in one assembly loop: eight activations a pass. The
/// caller checks that `sums` holds whole blocks (at least one), that `chunk` holds a whole,
/// non-zero number of four-word groups, that `w` holds every block's `2 × chunk.len()` bytes
/// at its stride, and that `w` is word-aligned (`LDM`).
#[inline(always)]
fn blocked_blocks(chunk: &[u32], w: &[u8], stride: usize, sums: &mut [i32]) {
    let mut state = Blocks::new(chunk, w, stride, sums);
    let state: *mut Blocks = &mut state;
    // Four columns' weight words (r2–r5) against two words of activation pairs (r0, r1): each
    // word sign-extended to its even bytes (into r12), then to its odd ones in place.
    macro_rules! four_columns {
        () => {
            concat!(
                "ldrd r0, r1, [r6], #8\n",
                "ldm lr!, {{r2, r3, r4, r5}}\n",
                "sxtb16 r12, r2\n",
                "smlad r8, r12, r0, r8\n",
                "sxtb16 r2, r2, ror #8\n",
                "smlad r8, r2, r1, r8\n",
                "sxtb16 r12, r3\n",
                "smlad r9, r12, r0, r9\n",
                "sxtb16 r3, r3, ror #8\n",
                "smlad r9, r3, r1, r9\n",
                "sxtb16 r12, r4\n",
                "smlad r10, r12, r0, r10\n",
                "sxtb16 r4, r4, ror #8\n",
                "smlad r10, r4, r1, r10\n",
                "sxtb16 r12, r5\n",
                "smlad r11, r12, r0, r11\n",
                "sxtb16 r5, r5, ror #8\n",
                "smlad r11, r5, r1, r11\n",
            )
        };
    }
    // SAFETY: block j reads and writes sums 4j..4j + 4, reads the chunk's words and the block's
    // `2 × chunk.len()` weight bytes from `w[j·stride..]` (aligned words: `LDM`), all inside
    // the slices (checked by the caller), and reads and writes the record. Every operand is in
    // a named register; r6 and r7, which inline assembly may not name, hold the chunk pointer
    // and its end, saved on the stack around the loop with the record's pointer (at [sp]).
    unsafe {
        core::arch::asm!(
            "push {{r6, r7}}",
            "push {{r0}}",
            "2:",
            "ldr r1, [r0]",
            "ldm r1, {{r8, r9, r10, r11}}",
            "ldrd r6, r7, [r0, #8]",
            "ldr lr, [r0, #16]",
            "3:",
            four_columns!(),
            four_columns!(),
            "cmp r6, r7",
            "bne 3b",
            "ldr r0, [sp]",
            "ldr r1, [r0]",
            "stm r1!, {{r8, r9, r10, r11}}",
            "str r1, [r0]",
            "ldr r2, [r0, #16]",
            "ldr r3, [r0, #20]",
            "add r2, r2, r3",
            "str r2, [r0, #16]",
            "ldr r3, [r0, #4]",
            "cmp r1, r3",
            "bne 2b",
            "add sp, sp, #4",
            "pop {{r6, r7}}",
            inout("r0") state => _,
            out("r1") _,
            out("r2") _,
            out("r3") _,
            out("r4") _,
            out("r5") _,
            out("r8") _,
            out("r9") _,
            out("r10") _,
            out("r11") _,
            out("r12") _,
            out("lr") _,
        );
    }
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

/// `sums[j]` += the dot product of the activation row `a_row` (less `zero`) with column `j` of
/// row-major weights `w` (`[sums.len(), k]`): whole blocks of four columns over whole groups of
/// four activations in assembly, [`CHUNK`] activations unpacked at a time into `unpacked`; the
/// rest value by value.
#[inline(always)]
fn row_sums(
    a_row: &[u8],
    w: &[u8],
    k: usize,
    zero: i32,
    unpacked: &mut [u32; CHUNK / 2],
    sums: &mut [i32],
) -> Result<(), CpuError> {
    let whole_k = k & !3;
    let (in_blocks, lone) = sums.split_at_mut(sums.len() & !(COLUMNS - 1));
    if !in_blocks.is_empty() {
        for k0 in (0..whole_k).step_by(CHUNK) {
            let kc = CHUNK.min(whole_k - k0);
            let (Some(words), Some(chunk), Some(w_chunk)) = (
                unpacked.get_mut(..kc / 2),
                a_row.get(k0..k0 + kc),
                w.get(k0..),
            ) else {
                return Err(CpuError::CorruptPlan);
            };
            unpack(chunk, zero, words);
            blocks(words, w_chunk, k, in_blocks);
        }
        if whole_k < k {
            rest(a_row, w, k, whole_k, zero, in_blocks);
        }
    }
    let w_lone = w.get(in_blocks.len() * k..).unwrap_or(&[]);
    rest(a_row, w_lone, k, 0, zero, lone);
    Ok(())
}

/// [`row_sums`] for weights in the blocked layout (`sums.len()` a multiple of four, `k` of
/// eight, as the layout requires): every block in assembly, eight activations at a time
/// ([`blocked_blocks`]), nothing left over.
#[inline(always)]
fn blocked_sums(
    a_row: &[u8],
    w: &[u8],
    k: usize,
    zero: i32,
    unpacked: &mut [u32; CHUNK / 2],
    sums: &mut [i32],
) -> Result<(), CpuError> {
    let aligned = (w.as_ptr() as usize).is_multiple_of(4);
    let whole = sums.len().is_multiple_of(COLUMNS) && k.is_multiple_of(8);
    if sums.is_empty() || !aligned || !whole {
        return Err(CpuError::CorruptPlan);
    }
    for k0 in (0..k).step_by(CHUNK) {
        let kc = CHUNK.min(k - k0);
        // Every block's bytes of this chunk lie inside `w`: the last block's end is checked.
        let last_end = (sums.len() / COLUMNS - 1) * 4 * k + 4 * (k0 + kc);
        let (Some(words), Some(chunk), Some(w_chunk), true) = (
            unpacked.get_mut(..kc / 2),
            a_row.get(k0..k0 + kc),
            w.get(4 * k0..),
            last_end <= w.len(),
        ) else {
            return Err(CpuError::CorruptPlan);
        };
        unpack(chunk, zero, words);
        blocked_blocks(words, w_chunk, 4 * k, sums);
    }
    Ok(())
}

/// `QGemm` on int8 activations: `bias + Σ (a − zero)·w` per output, [`COLUMNS`] output columns
/// per pass over the activation row.
#[inline(never)]
pub fn qgemm<const OPS: Selection>(
    step: &Step<'_>,
    arena: &mut [u8],
    weights: &[u8],
) -> Result<(), CpuError> {
    let Op::QGemm(q) = step.op else {
        return Err(CpuError::CorruptPlan);
    };
    let a = step.inputs.get(0).ok_or(CpuError::CorruptPlan)?;
    let y = step.outputs.get(0).ok_or(CpuError::CorruptPlan)?;
    let (m, k) = (a.shape.dim(0), a.shape.dim(1));
    let n = y.shape.dim(1);
    let b_desc = step.inputs.get(1).ok_or(CpuError::CorruptPlan)?;
    let (layout, _, _) = QGemmWeights::of(&b_desc.shape).ok_or(CpuError::CorruptPlan)?;
    // The carving the convolutions use (one copy in flash; a QGemm has no scratch), its frame
    // gone before [`multiply`]'s buffers are on the stack.
    let (operands, out, _) = step_operands_and_scratch::<4>(step, arena, weights)?;
    multiply::<OPS>(&q, [m, k, n], layout, operands, out)
}

/// The product of [`qgemm`] once its operands are carved out of the arena and weights: a
/// function of its own, so that carving's frame and this one's buffers are never on the stack
/// together.
#[inline(never)]
fn multiply<const OPS: Selection>(
    q: &Requantize,
    [m, k, n]: [usize; 3],
    layout: QGemmWeights,
    [a, b, bias, requant]: [&[u8]; 4],
    out: &mut [u8],
) -> Result<(), CpuError> {
    let q = *q;
    // Only the selected layouts' loops are linked (`OPS` is a constant): a model's own
    // firmware has the one its QGemms use.
    let blocked = match layout {
        QGemmWeights::Blocked if selects_qgemm_weights(OPS, layout) => true,
        QGemmWeights::Rows if selects_qgemm_weights(OPS, layout) => false,
        _ => return Err(CpuError::CorruptPlan),
    };
    // Whether every output takes the assembly requantization: SSAT's clamp, every pair in the
    // high-word form (checked once per step).
    let fast_step = Clamp::of(&q) == Clamp::Int8 && high_word_pairs(requant);
    // One pair for every column (a per-tensor weight scale): its constants stay in registers
    // (eight instructions an output instead of sixteen).
    let single = if requant.len() == 8 && fast_step {
        Some(HighWordRequantizer::new(requant_pair(requant, 0)?, &q).ok_or(CpuError::CorruptPlan)?)
    } else {
        None
    };
    let mut group_sums = [0i32; GROUP];
    let mut unpacked = [0u32; CHUNK / 2];
    for row in 0..m {
        let a_row = a.get(row * k..(row + 1) * k).ok_or(CpuError::CorruptPlan)?;
        let out_row = out
            .get_mut(row * n..(row + 1) * n)
            .ok_or(CpuError::CorruptPlan)?;
        for (group, slots) in out_row.chunks_mut(GROUP).enumerate() {
            let col0 = group * GROUP;
            let w = b
                .get(col0 * k..(col0 + slots.len()) * k)
                .ok_or(CpuError::CorruptPlan)?;
            let sums = group_sums
                .get_mut(..slots.len())
                .ok_or(CpuError::CorruptPlan)?;
            sums.fill(0);
            if blocked {
                blocked_sums(a_row, w, k, q.input_zero, &mut unpacked, sums)?;
            } else {
                row_sums(a_row, w, k, q.input_zero, &mut unpacked, sums)?;
            }
            // Whole blocks with the high-word form and SSAT's clamp: four outputs at a time.
            let fast = if fast_step { slots.len() / COLUMNS } else { 0 };
            let (fast_slots, other_slots) = slots
                .split_at_mut_checked(fast * COLUMNS)
                .ok_or(CpuError::CorruptPlan)?;
            let group_bias = bias.get(4 * col0..4 * (col0 + fast * COLUMNS));
            let group_pairs = if requant.len() == 8 {
                None
            } else {
                requant.get(8 * col0..8 * (col0 + fast * COLUMNS))
            };
            if let Some(group_bias) = group_bias.filter(|_| fast > 0) {
                let blocks_of = fast_slots
                    .chunks_exact_mut(COLUMNS)
                    .zip(sums.chunks_exact(COLUMNS))
                    .zip(group_bias.chunks_exact(16))
                    .enumerate();
                for (j, ((four, s4), b16)) in blocks_of {
                    let (Ok(four), &[s0, s1, s2, s3]) = (<&mut [u8; 4]>::try_from(four), s4) else {
                        return Err(CpuError::CorruptPlan);
                    };
                    let b =
                        |i: usize| i32::from_le_bytes([b16[i], b16[i + 1], b16[i + 2], b16[i + 3]]);
                    let acc = [
                        s0.wrapping_add(b(0)),
                        s1.wrapping_add(b(4)),
                        s2.wrapping_add(b(8)),
                        s3.wrapping_add(b(12)),
                    ];
                    if let Some(rq) = &single {
                        saturate4(acc, rq, Clamp::Int8, four);
                        continue;
                    }
                    let pairs = group_pairs.and_then(|p| p.get(32 * j..32 * j + 32));
                    let Some(Ok(pairs)) = pairs.map(<&[u8; 32]>::try_from) else {
                        return Err(CpuError::CorruptPlan);
                    };
                    saturate4_pairs(acc, pairs, q.output_zero, four);
                }
            } else if fast > 0 {
                return Err(CpuError::CorruptPlan);
            }
            let first = fast * COLUMNS;
            for (c, slot) in other_slots.iter_mut().enumerate() {
                let col = col0 + first + c;
                let sum = sums.get(first + c).copied().unwrap_or(0);
                let acc = word(bias, col)?.wrapping_add(sum);
                *slot = output_byte(acc, requant_pair(requant, col)?, &q);
            }
        }
    }
    Ok(())
}
