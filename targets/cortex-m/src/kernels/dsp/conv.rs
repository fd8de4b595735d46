//! Regular, grouped and pointwise integer convolutions for the DSP extension, with their input
//! unfolded in the step's arena scratch (planned by
//! `ferrite_hal::geometry::qconv_scratch_elements`): [`columns`] takes four output positions at
//! a time, writes the input values each reads (`in_channels_per_group × kernel area`) as int16
//! `x − zero_point` columns (0 where the window is in the padding), then multiplies every output
//! channel's int8 weight row against the four columns with `SMLAD` in one assembly loop
//! ([`groups4`]): four weights are unpacked by two `SXTB16`s into the pairs (w0, w2) and
//! (w1, w3), so each column stores its entries in the order x0, x2, x1, x3 within every group of
//! four. Full blocks run in [`super::block`]'s assembly channel loop. Depthwise convolutions are
//! in `super::depthwise`.
//!
//! Integer sums are exact (wrapping, like the portable kernels), so results are bit-exact with
//! `ferrite_cpu::ops::conv::int8::qconv`.

use super::block::{high_word_pairs, Channels};
use super::requantize::{output_byte, saturate4, Clamp};
use core::num::NonZeroUsize;
use ferrite_cpu::base::geometry::ConvDims;
use ferrite_cpu::base::requantize::HighWordRequantizer;
use ferrite_cpu::steps::step_operands_and_scratch;
use ferrite_cpu::CpuError;
use ferrite_hal::op::Requantize;
use ferrite_hal::{Op, Step};

/// A little-endian `i32` of `bytes` at word `i`.
#[inline(always)]
pub(super) fn word(bytes: &[u8], i: usize) -> Result<i32, CpuError> {
    let v = bytes.get(4 * i..4 * i + 4).ok_or(CpuError::CorruptPlan)?;
    Ok(i32::from_le_bytes([v[0], v[1], v[2], v[3]]))
}

/// Channel `c`'s `(multiplier, shift)` pair (one pair for all when there is one).
#[inline(always)]
pub(super) fn requant_pair(requant: &[u8], c: usize) -> Result<[i32; 2], CpuError> {
    let c = if requant.len() == 8 { 0 } else { c };
    Ok([word(requant, 2 * c)?, word(requant, 2 * c + 1)?])
}

/// The convolution's shape, read from the step.
pub(super) struct Geometry {
    pub(super) d: ConvDims,
    /// Never zero: the divisions by it link no division-by-zero panic.
    pub(super) group: NonZeroUsize,
    pub(super) kernel: [usize; 2],
    pub(super) stride: [usize; 2],
    pub(super) dilation: [usize; 2],
    pub(super) pad: [usize; 2],
    pub(super) q: Requantize,
}

impl Geometry {
    pub(super) fn of(step: &Step<'_>) -> Result<Geometry, CpuError> {
        let Op::QConv(c) = step.op else {
            return Err(CpuError::CorruptPlan);
        };
        let x = step.inputs.get(0).ok_or(CpuError::CorruptPlan)?;
        let y = step.outputs.get(0).ok_or(CpuError::CorruptPlan)?;
        let w = c.window;
        Ok(Geometry {
            d: ConvDims::of(&x.shape, &y.shape).ok_or(CpuError::CorruptPlan)?,
            group: NonZeroUsize::new(c.group).unwrap_or(NonZeroUsize::MIN),
            kernel: w.kernel,
            stride: w.stride,
            dilation: w.dilation,
            pad: [w.pads[0], w.pads[1]],
            q: c.requantize,
        })
    }
}

/// Where entry `j` of a column goes: entries 1 and 2 of every full group of four swap places.
#[inline(always)]
fn slot(j: usize, full: usize) -> usize {
    const SWAP: [usize; 4] = [0, 2, 1, 3];
    if j < full {
        (j & !3) | SWAP[j & 3]
    } else {
        j
    }
}

/// Output positions unfolded and multiplied together.
const BLOCK: usize = 4;

/// For every column slot, the offset of its input value from the window's top-left input
/// position (within the group's channels): what a window away from the padding reads.
fn window_offsets(g: &Geometry, offsets: &mut [u32]) -> Result<(), CpuError> {
    let d = &g.d;
    let [kh, kw] = g.kernel;
    let icg = d.c / g.group;
    let full = (icg * kh * kw) & !3;
    let mut j = 0;
    for ic in 0..icg {
        for ky in 0..kh {
            for kx in 0..kw {
                let off = ic * d.h * d.w + ky * g.dilation[0] * d.w + kx * g.dilation[1];
                *offsets
                    .get_mut(slot(j, full))
                    .ok_or(CpuError::CorruptPlan)? = off as u32;
                j += 1;
            }
        }
    }
    Ok(())
}

/// The largest offset [`window_offsets`] writes: the group's last channel, the window's last
/// row and column.
#[inline(always)]
fn last_offset(g: &Geometry) -> usize {
    let d = &g.d;
    let icg = d.c / g.group;
    let [kh, kw] = g.kernel;
    icg.saturating_sub(1) * d.h * d.w
        + kh.saturating_sub(1) * g.dilation[0] * d.w
        + kw.saturating_sub(1) * g.dilation[1]
}

/// The full groups of four of a column (block position `t`) from a window away from the
/// padding, in one assembly loop: per group an `LDM` of the four offsets, four `LDRSB`s, two
/// `PKHBT`s into pairs, two `SSUB16`s of the zero point and two stores (3.5 instructions a
/// value). The caller checks that `t` is a block position and that every offset
/// ([`last_offset`] the largest) lies inside `window`.
#[inline(always)]
fn unfold_groups(groups: &[u32], window: &[u8], words: &mut [u32], t: usize, zero: i32) {
    let n = (groups.len() / 4).min(words.len() / (2 * BLOCK));
    if n == 0 {
        return;
    }
    let zero2 = (zero as u32 & 0xffff) * 0x0001_0001;
    let po = groups.as_ptr();
    let end = po.wrapping_add(4 * n);
    let dst = words.as_mut_ptr().wrapping_add(t);
    // SAFETY: pass i reads offsets 4i..4i + 4 of `groups` and the bytes of `window` at them
    // (each inside it, as the caller checked), and writes words 8i + t and 8i + 4 + t of
    // `words` (t < 4, i < n ≤ words.len() / 8).
    unsafe {
        core::arch::asm!(
            "2:",
            "ldm {po}!, {{r0, r1, r2, r3}}",
            "ldrsb r0, [{base}, r0]",
            "ldrsb r1, [{base}, r1]",
            "ldrsb r2, [{base}, r2]",
            "ldrsb r3, [{base}, r3]",
            "pkhbt r0, r0, r1, lsl #16",
            "pkhbt r2, r2, r3, lsl #16",
            "ssub16 r0, r0, {zero2}",
            "ssub16 r2, r2, {zero2}",
            "str r0, [{dst}]",
            "str r2, [{dst}, #16]",
            "adds {dst}, #32",
            "cmp {po}, {end}",
            "bne 2b",
            po = inout(reg) po => _,
            dst = inout(reg) dst => _,
            end = in(reg) end,
            base = in(reg) window.as_ptr(),
            zero2 = in(reg) zero2,
            out("r0") _,
            out("r1") _,
            out("r2") _,
            out("r3") _,
            options(nostack),
        );
    }
}

/// Stores the `k` values `x − zx` output position `[oy, ox]` reads from the group input `xg` as the
/// column of block position `t` in `cols` (laid out as [`block_index`] says, `stride` slots
/// per column): through `offsets` a word (two slots) at a time when the window is away from the
/// padding, else value by value with zeros in the padding.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn unfold(
    g: &Geometry,
    xg: &[u8],
    offsets: &[u32],
    [oy, ox]: [usize; 2],
    t: usize,
    k: usize,
    stride: usize,
    cols: &mut [i16],
) -> Result<(), CpuError> {
    let d = &g.d;
    let [kh, kw] = g.kernel;
    let zx = g.q.input_zero as i16;
    let value = |v: u8| v as i8 as i16 - zx;
    let iy0 = (oy * g.stride[0]).wrapping_sub(g.pad[0]);
    let ix0 = (ox * g.stride[1]).wrapping_sub(g.pad[1]);
    let last_y = iy0.wrapping_add((kh - 1) * g.dilation[0]);
    let last_x = ix0.wrapping_add((kw - 1) * g.dilation[1]);
    if iy0 < d.h && last_y < d.h && ix0 < d.w && last_x < d.w {
        let window = xg.get(iy0 * d.w + ix0..).ok_or(CpuError::CorruptPlan)?;
        let at = |off: u32| -> Result<i16, CpuError> {
            Ok(value(
                *window.get(off as usize).ok_or(CpuError::CorruptPlan)?,
            ))
        };
        let full = k & !3;
        let head = cols.get_mut(..BLOCK * full).ok_or(CpuError::CorruptPlan)?;
        let words: &mut [u32] =
            bytemuck::try_cast_slice_mut(head).map_err(|_| CpuError::Misaligned)?;
        let groups = offsets.get(..full).ok_or(CpuError::CorruptPlan)?;
        // Every offset is at most `last_offset`, so one check covers the whole window.
        if t >= BLOCK || window.len() <= last_offset(g) {
            return Err(CpuError::CorruptPlan);
        }
        unfold_groups(groups, window, words, t, g.q.input_zero);
        let tail_offsets = offsets.get(full..k).ok_or(CpuError::CorruptPlan)?;
        for (s, &off) in (full..k).zip(tail_offsets) {
            let slot = cols.get_mut(block_index(t, s, k, stride));
            *slot.ok_or(CpuError::CorruptPlan)? = at(off)?;
        }
        return Ok(());
    }
    // Entry `j` of the column goes where [`block_index`] puts [`slot`]`(j)`: in a full group of
    // four, at `16·(j / 4) + 2t` plus 0, 8, 1, 9 (entries 1 and 2 swapped, then words
    // interleaved); past them, at `tail + (j − full)`.
    const GROUP_OFFSETS: [usize; 4] = [0, 8, 1, 9];
    let full = k & !3;
    let tail = full * BLOCK + t * stride.wrapping_sub(full);
    let mut j = 0;
    for plane in xg.chunks_exact((d.h * d.w).max(1)).take(d.c / g.group) {
        for ky in 0..kh {
            let iy = iy0.wrapping_add(ky * g.dilation[0]);
            let row = if iy < d.h {
                plane.get(iy * d.w..(iy + 1) * d.w)
            } else {
                None
            };
            for kx in 0..kw {
                let ix = ix0.wrapping_add(kx * g.dilation[1]);
                let v = row.and_then(|r| r.get(ix)).map_or(0, |&v| value(v));
                let at = match GROUP_OFFSETS.get(j & 3) {
                    Some(&offset) if j < full => 16 * (j >> 2) + 2 * t + offset,
                    _ => tail + j.wrapping_sub(full),
                };
                *cols.get_mut(at).ok_or(CpuError::CorruptPlan)? = v;
                j += 1;
            }
        }
    }
    Ok(())
}

/// Where slot `s` of the column of block position `t` lies in the block's columns, for `k`
/// slots per column (`stride`: `k` rounded up to even). The full groups of four slots are
/// interleaved, group by group: the first words (slots 0 and 1 of the group) of the
/// [`BLOCK`] columns, then their second words, so that one pointer walks all the columns a
/// group of four weights multiplies; the tail slots follow, column by column.
#[inline(always)]
fn block_index(t: usize, s: usize, k: usize, stride: usize) -> usize {
    let full = k & !3;
    if s < full {
        (s & !3) * BLOCK + (s & 2) * BLOCK + 2 * t + (s & 1)
    } else {
        full * BLOCK + t * (stride - full) + (s - full)
    }
}

/// `bias + Σ w·c` for one int8 weight row and the [`BLOCK`] columns of a block (laid out as
/// [`block_index`] says; `full` the block's interleaved words, `tail` its tail slots).
#[inline(always)]
fn dot4(w: &[u8], full: &[u32], tail: &[i16], bias: i32) -> [i32; BLOCK] {
    let (w_full, w_tail) = w.split_at(w.len() & !3);
    let mut acc = groups4(w_full, full, [bias; BLOCK]);
    let per_column = tail.len() / BLOCK;
    for (t, &wv) in w_tail.iter().enumerate() {
        let wv = wv as i8 as i32;
        for (c, a) in acc.iter_mut().enumerate() {
            let x = tail.get(c * per_column + t).copied().unwrap_or(0) as i32;
            *a = a.wrapping_add(wv * x);
        }
    }
    acc
}

/// `acc` plus the products of the weights `w` (four per group) with the interleaved words
/// `full` ([`BLOCK`] first words, then [`BLOCK`] second words per group), over as many groups
/// as both hold, in one assembly loop: per group one weight word unpacked by two `SXTB16`s,
/// two `LDM`s of four column words and eight `SMLAD`s into the four accumulators, fifteen
/// instructions for sixteen multiply-accumulates.
#[inline(always)]
fn groups4(w: &[u8], full: &[u32], acc: [i32; BLOCK]) -> [i32; BLOCK] {
    let groups = (w.len() / 4).min(full.len() / (2 * BLOCK));
    if groups == 0 {
        return acc;
    }
    let [mut a0, mut a1, mut a2, mut a3] = acc;
    let end = full.as_ptr().wrapping_add(2 * BLOCK * groups);
    // SAFETY: the loop runs `groups ≥ 1` times; pass `i` reads weight bytes 4i..4i + 4 of `w`
    // (an unaligned word, which the cores with the DSP extension load) and words 8i..8i + 8 of
    // `full` (aligned), both inside their slices. Every operand is in a named register, so r7,
    // which inline assembly may not name, is no operand's: it holds the odd weights and is saved
    // on the stack around the loop.
    unsafe {
        core::arch::asm!(
            "push {{r7}}",
            "2:",
            column_group!(),
            "cmp r11, r12",
            "bne 2b",
            "pop {{r7}}",
            inout("r9") w.as_ptr() => _,
            inout("r11") full.as_ptr() => _,
            in("r12") end,
            out("lr") _,
            inout("r4") a0,
            inout("r5") a1,
            inout("r8") a2,
            inout("r10") a3,
            out("r0") _,
            out("r1") _,
            out("r2") _,
            out("r3") _,
        );
    }
    [a0, a1, a2, a3]
}

/// Regular, grouped and pointwise `QConv` on int8 input: [`BLOCK`] output positions at a time
/// are unfolded into int16 columns, then each output channel's weights multiply them all.
#[inline(never)]
pub fn columns(step: &Step<'_>, arena: &mut [u8], weights: &[u8]) -> Result<(), CpuError> {
    carve_then(step, arena, weights, unfold_and_multiply)
}

/// The body of a QConv kernel: its geometry, operands `[x, w, bias, requant]`, output and
/// scratch.
pub(super) type QConvBody = fn(&Geometry, [&[u8]; 4], &mut [u8], &mut [u8]) -> Result<(), CpuError>;

/// Runs `body` on the QConv `step`'s geometry and operands, carved out of the arena and weights
/// here: the body is a function of its own, so that the carving's frames and its locals are
/// never on the stack together.
#[inline(always)]
pub(super) fn carve_then(
    step: &Step<'_>,
    arena: &mut [u8],
    weights: &[u8],
    body: QConvBody,
) -> Result<(), CpuError> {
    // Borrowed where it lies (not moved out of its `Result`: one copy on the stack).
    let geometry = Geometry::of(step);
    let Ok(g) = &geometry else {
        return Err(CpuError::CorruptPlan);
    };
    let (operands, out, scratch) = step_operands_and_scratch::<4>(step, arena, weights)?;
    body(g, operands, out, scratch)
}

/// [`columns`] once the step's operands are carved out ([`carve_then`]).
#[inline(never)]
fn unfold_and_multiply(
    g: &Geometry,
    [x, w, bias, requant]: [&[u8]; 4],
    out: &mut [u8],
    scratch: &mut [u8],
) -> Result<(), CpuError> {
    let d = g.d;
    let icg = d.c / g.group;
    let ocg = d.oc / g.group;
    let k = icg * g.kernel[0] * g.kernel[1];
    let stride = (k + 1) & !1;
    let (cols, offsets) = scratch
        .split_at_mut_checked(BLOCK * stride * 2)
        .ok_or(CpuError::CorruptPlan)?;
    let cols: &mut [i16] = bytemuck::try_cast_slice_mut(cols).map_err(|_| CpuError::Misaligned)?;
    let offsets: &mut [u32] = bytemuck::try_cast_slice_mut(offsets)
        .map_err(|_| CpuError::Misaligned)?
        .get_mut(..k)
        .ok_or(CpuError::CorruptPlan)?;
    window_offsets(g, offsets)?;
    let offsets = &*offsets;
    let positions = d.oh * d.ow;
    // No output positions without a width (and dividing by it then needs no check).
    let Some(ow) = NonZeroUsize::new(d.ow) else {
        return Ok(());
    };
    let clamp = Clamp::of(&g.q);
    for b in 0..d.n {
        for grp in 0..g.group.get() {
            // The group's pairs (one pair may serve every channel), and whether the assembly
            // channel loop can take its full blocks.
            let group_requant = if requant.len() == 8 {
                requant
            } else {
                requant
                    .get(8 * grp * ocg..8 * (grp + 1) * ocg)
                    .ok_or(CpuError::CorruptPlan)?
            };
            let fast = k.is_multiple_of(4) && high_word_pairs(group_requant);
            let first = (b * d.c + grp * icg) * d.h * d.w;
            let xg = x
                .get(first..first + icg * d.h * d.w)
                .ok_or(CpuError::CorruptPlan)?;
            for p in (0..positions).step_by(BLOCK) {
                let n = BLOCK.min(positions - p);
                // Positions past the last multiply the last one again; their results are dropped.
                for t in 0..BLOCK {
                    let position = p + t.min(n - 1);
                    let yx = [position / ow, position % ow];
                    unfold(g, xg, offsets, yx, t, k, stride, cols)?;
                }
                let (full, tail) = cols
                    .split_at_checked(BLOCK * (k & !3))
                    .ok_or(CpuError::CorruptPlan)?;
                let full: &[u32] =
                    bytemuck::try_cast_slice(full).map_err(|_| CpuError::Misaligned)?;
                let rows = w
                    .get(grp * ocg * k..(grp + 1) * ocg * k)
                    .ok_or(CpuError::CorruptPlan)?;
                let biases = bias
                    .get(4 * grp * ocg..4 * (grp + 1) * ocg)
                    .ok_or(CpuError::CorruptPlan)?;
                if fast && n == BLOCK {
                    let first_out = (b * d.oc + grp * ocg) * positions + p;
                    let out_group = out.get_mut(first_out..).ok_or(CpuError::CorruptPlan)?;
                    let channels = Channels::new(
                        rows,
                        k / 4,
                        full,
                        biases,
                        group_requant,
                        out_group,
                        positions,
                        &g.q,
                    );
                    if let Some(channels) = channels {
                        channels.run(rows);
                        continue;
                    }
                }
                // Rows taken one by one beside the biases (a `zip` of the two would divide by
                // the row length out of line, and link a division-by-zero panic).
                let mut row_of = rows.chunks_exact(k.max(1));
                for (i, b4) in biases.as_chunks::<4>().0.iter().enumerate() {
                    let Some(row) = row_of.next() else {
                        break;
                    };
                    let o = grp * ocg + i;
                    let bias = i32::from_le_bytes(*b4);
                    let acc = dot4(row, full, tail, bias);
                    let pair = requant_pair(requant, o)?;
                    let at = (b * d.oc + o) * positions + p;
                    let slots = out.get_mut(at..at + n).ok_or(CpuError::CorruptPlan)?;
                    let done = match HighWordRequantizer::new(pair, &g.q) {
                        Some(fast) => saturate4(acc, &fast, clamp, slots),
                        None => false,
                    };
                    if !done {
                        for (slot, &a) in slots.iter_mut().zip(&acc) {
                            *slot = output_byte(a, pair, &g.q);
                        }
                    }
                }
            }
        }
    }
    Ok(())
}
