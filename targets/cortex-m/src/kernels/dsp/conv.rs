//! Integer convolutions for the DSP extension, both with their input unfolded in the step's arena
//! scratch (planned by `ferrite_hal::geometry::qconv_scratch_elements`).
//!
//! - [`columns`] (regular, grouped and pointwise convolutions): two output positions at a time,
//!   the input values each reads (`in_channels_per_group × kernel area`) are written as int16
//!   `x − zero_point` columns (0 where the window is in the padding), then every output channel's
//!   int8 weight row is multiplied against both columns with `SMLAD`: four weights are unpacked
//!   by two `SXTB16`s into the pairs (w0, w2) and (w1, w3), so each column stores its entries in
//!   the order x0, x2, x1, x3 within every group of four.
//! - [`depthwise`] (one input channel per group): each channel's plane is copied into scratch
//!   with a border of the input zero point as wide as the padding, so every tap reads in bounds
//!   and `Σ w·(x − zx) = Σ w·x − zx·Σ w` with the correction folded into the bias; 3×3 windows
//!   without dilation keep their nine weights in registers.
//!
//! Integer sums are exact (wrapping, like the portable kernels), so results are bit-exact with
//! `ferrite_cpu::kernels::integer::qconv`.

use super::{smlabb, smlabt, smlad, sxtb16, sxtb16_ror8};
use ferrite_cpu::kernels::conv::ConvDims;
use ferrite_cpu::kernels::integer::Requantizer;
use ferrite_cpu::kernels::step_operands_and_scratch;
use ferrite_cpu::CpuError;
use ferrite_hal::op::Requantize;
use ferrite_hal::{DType, Op, Step};

/// A little-endian `i32` of `bytes` at word `i`.
#[inline(always)]
fn word(bytes: &[u8], i: usize) -> Result<i32, CpuError> {
    let v = bytes.get(4 * i..4 * i + 4).ok_or(CpuError::CorruptPlan)?;
    Ok(i32::from_le_bytes([v[0], v[1], v[2], v[3]]))
}

/// Channel `c`'s requantizer.
#[inline(always)]
fn requantizer(requant: &[u8], c: usize, q: &Requantize) -> Result<Requantizer, CpuError> {
    let c = if requant.len() == 8 { 0 } else { c };
    Ok(Requantizer::new(
        [word(requant, 2 * c)?, word(requant, 2 * c + 1)?],
        q,
    ))
}

/// The output byte of `v` (already clamped to the output type's range).
#[inline(always)]
fn byte(v: i32, signed: bool) -> u8 {
    if signed {
        v as i8 as u8
    } else {
        v as u8
    }
}

/// The convolution's shape, read from the step.
struct Geometry {
    d: ConvDims,
    group: usize,
    kernel: [usize; 2],
    stride: [usize; 2],
    dilation: [usize; 2],
    pad: [usize; 2],
    q: Requantize,
    signed_output: bool,
}

impl Geometry {
    fn of(step: &Step<'_>) -> Result<Geometry, CpuError> {
        let Op::QConv(c) = step.op else {
            return Err(CpuError::CorruptPlan);
        };
        let x = step.inputs.get(0).ok_or(CpuError::CorruptPlan)?;
        let y = step.outputs.get(0).ok_or(CpuError::CorruptPlan)?;
        let w = c.window;
        Ok(Geometry {
            d: ConvDims::of(&x.shape, &y.shape).ok_or(CpuError::CorruptPlan)?,
            group: c.group.max(1),
            kernel: w.kernel,
            stride: w.stride,
            dilation: w.dilation,
            pad: [w.pads[0], w.pads[1]],
            q: c.requantize,
            signed_output: y.dtype == DType::I8,
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

/// Stores the `k` values `x − zx` output position `p` reads from the group input `xg` as the
/// column of block position `t` in `cols` (laid out as [`block_index`] says, `stride` slots
/// per column): through `offsets` a word (two slots) at a time when the window is away from the
/// padding, else value by value with zeros in the padding.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn unfold(
    g: &Geometry,
    xg: &[u8],
    offsets: &[u32],
    p: usize,
    t: usize,
    k: usize,
    stride: usize,
    cols: &mut [i16],
) -> Result<(), CpuError> {
    let d = &g.d;
    let [kh, kw] = g.kernel;
    let zx = g.q.input_zero as i16;
    let value = |v: u8| v as i8 as i16 - zx;
    let (oy, ox) = (p / d.ow, p % d.ow);
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
        let pair = |a: i16, b: i16| a as u16 as u32 | (b as u16 as u32) << 16;
        let groups = offsets.get(..full).ok_or(CpuError::CorruptPlan)?;
        for (o, w) in groups
            .chunks_exact(4)
            .zip(words.chunks_exact_mut(2 * BLOCK))
        {
            let (first, second) = w.split_at_mut(BLOCK);
            let (&[o0, o1, o2, o3], Some(a), Some(b)) = (o, first.get_mut(t), second.get_mut(t))
            else {
                return Err(CpuError::CorruptPlan);
            };
            *a = pair(at(o0)?, at(o1)?);
            *b = pair(at(o2)?, at(o3)?);
        }
        let tail_offsets = offsets.get(full..k).ok_or(CpuError::CorruptPlan)?;
        for (s, &off) in (full..k).zip(tail_offsets) {
            let slot = cols.get_mut(block_index(t, s, k, stride));
            *slot.ok_or(CpuError::CorruptPlan)? = at(off)?;
        }
        return Ok(());
    }
    let full = k & !3;
    let mut put = |s: usize, v: i16| -> Result<(), CpuError> {
        *cols
            .get_mut(block_index(t, s, k, stride))
            .ok_or(CpuError::CorruptPlan)? = v;
        Ok(())
    };
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
                put(slot(j, full), v)?;
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
    let mut acc = [bias; BLOCK];
    for (w4, x) in w_full.chunks_exact(4).zip(full.chunks_exact(2 * BLOCK)) {
        let w4 = u32::from_le_bytes([w4[0], w4[1], w4[2], w4[3]]);
        let (w02, w13) = (sxtb16(w4), sxtb16_ror8(w4));
        let Ok(x): Result<&[u32; 2 * BLOCK], _> = x.try_into() else {
            break;
        };
        acc[0] = smlad(w13, x[4], smlad(w02, x[0], acc[0]));
        acc[1] = smlad(w13, x[5], smlad(w02, x[1], acc[1]));
        acc[2] = smlad(w13, x[6], smlad(w02, x[2], acc[2]));
        acc[3] = smlad(w13, x[7], smlad(w02, x[3], acc[3]));
    }
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

/// Regular, grouped and pointwise `QConv` on int8 input: [`BLOCK`] output positions at a time
/// are unfolded into int16 columns, then each output channel's weights multiply them all.
#[inline(never)]
pub fn columns(step: &Step<'_>, arena: &mut [u8], weights: &[u8]) -> Result<(), CpuError> {
    let g = Geometry::of(step)?;
    let d = g.d;
    let icg = d.c / g.group;
    let ocg = d.oc / g.group;
    let k = icg * g.kernel[0] * g.kernel[1];
    let stride = (k + 1) & !1;
    let ([x, w, bias, requant], out, scratch) =
        step_operands_and_scratch::<4>(step, arena, weights)?;
    let (cols, offsets) = scratch
        .split_at_mut_checked(BLOCK * stride * 2)
        .ok_or(CpuError::CorruptPlan)?;
    let cols: &mut [i16] = bytemuck::try_cast_slice_mut(cols).map_err(|_| CpuError::Misaligned)?;
    let offsets: &mut [u32] = bytemuck::try_cast_slice_mut(offsets)
        .map_err(|_| CpuError::Misaligned)?
        .get_mut(..k)
        .ok_or(CpuError::CorruptPlan)?;
    window_offsets(&g, offsets)?;
    let offsets = &*offsets;
    let positions = d.oh * d.ow;
    for b in 0..d.n {
        for grp in 0..g.group {
            let first = (b * d.c + grp * icg) * d.h * d.w;
            let xg = x
                .get(first..first + icg * d.h * d.w)
                .ok_or(CpuError::CorruptPlan)?;
            for p in (0..positions).step_by(BLOCK) {
                let n = BLOCK.min(positions - p);
                // Positions past the last multiply the last one again; their results are dropped.
                for t in 0..BLOCK {
                    let position = p + t.min(n - 1);
                    unfold(&g, xg, offsets, position, t, k, stride, cols)?;
                }
                let (full, tail) = cols.split_at(BLOCK * (k & !3));
                let full: &[u32] =
                    bytemuck::try_cast_slice(full).map_err(|_| CpuError::Misaligned)?;
                let rows = w
                    .get(grp * ocg * k..(grp + 1) * ocg * k)
                    .ok_or(CpuError::CorruptPlan)?;
                let biases = bias
                    .get(4 * grp * ocg..4 * (grp + 1) * ocg)
                    .ok_or(CpuError::CorruptPlan)?;
                for (i, (row, b4)) in rows
                    .chunks_exact(k.max(1))
                    .zip(biases.chunks_exact(4))
                    .enumerate()
                {
                    let o = grp * ocg + i;
                    let bias = i32::from_le_bytes([b4[0], b4[1], b4[2], b4[3]]);
                    let acc = dot4(row, full, tail, bias);
                    let rq = requantizer(requant, o, &g.q)?;
                    let at = (b * d.oc + o) * positions + p;
                    let slots = out.get_mut(at..at + n).ok_or(CpuError::CorruptPlan)?;
                    for (slot, &a) in slots.iter_mut().zip(&acc) {
                        *slot = byte(rq.apply(a), g.signed_output);
                    }
                }
            }
        }
    }
    Ok(())
}

/// A 3×3 depthwise window's weights, packed for `SMLAD`: per row the outer pair (w0, w2) as
/// int16 halves and the middle weight.
struct Taps3 {
    outer: [u32; 3],
    middle: [u32; 3],
    plain: [i32; 9],
}

impl Taps3 {
    fn new(w: &[u8]) -> Taps3 {
        let v = |i: usize| w.get(i).map_or(0, |&b| b as i8 as i32);
        let half = |x: i32| x as u32 & 0xffff;
        Taps3 {
            outer: [0, 1, 2].map(|r| half(v(3 * r)) | (half(v(3 * r + 2)) << 16)),
            middle: [0, 1, 2].map(|r| half(v(3 * r + 1))),
            plain: core::array::from_fn(v),
        }
    }

    /// The accumulators of outputs `x` and `x + 1` of a stride-1 row: each input row gives
    /// bytes (x0, x1, x2, x3) in one word; (x0, x2) and (x1, x3) meet the outer weights with
    /// `SMLAD`, the middle weight takes x1 and x2.
    #[inline(always)]
    fn pair(&self, rows: [&[u8]; 3], x: usize, base: i32) -> Result<[i32; 2], CpuError> {
        let (mut a, mut b) = (base, base);
        for ((row, &outer), &middle) in rows.iter().zip(&self.outer).zip(&self.middle) {
            let q = row.get(x..x + 4).ok_or(CpuError::CorruptPlan)?;
            let word = u32::from_le_bytes([q[0], q[1], q[2], q[3]]);
            let (even, odd) = (sxtb16(word), sxtb16_ror8(word));
            a = smlabb(middle, odd, smlad(outer, even, a));
            b = smlabt(middle, even, smlad(outer, odd, b));
        }
        Ok([a, b])
    }

    /// The accumulator of output `x` alone.
    #[inline(always)]
    fn single(&self, rows: [&[u8]; 3], x: usize, base: i32) -> Result<i32, CpuError> {
        let mut acc = base;
        for (r, row) in rows.iter().enumerate() {
            let q = row.get(x..x + 3).ok_or(CpuError::CorruptPlan)?;
            for (t, &v) in q.iter().enumerate() {
                acc = acc.wrapping_add(self.plain[3 * r + t] * v as i8 as i32);
            }
        }
        Ok(acc)
    }
}

/// Depthwise `QConv` (one input channel per group, any channel multiplier) on int8 input.
#[inline(never)]
pub fn depthwise(step: &Step<'_>, arena: &mut [u8], weights: &[u8]) -> Result<(), CpuError> {
    let g = Geometry::of(step)?;
    let d = g.d;
    let multiplier = d.oc / g.group;
    let [kh, kw] = g.kernel;
    let [sh, sw] = g.stride;
    let [dh, dw] = g.dilation;
    // The padded plane: every position the outputs read.
    let ph = (d.oh - 1) * sh + (kh - 1) * dh + 1;
    let pw = (d.ow - 1) * sw + (kw - 1) * dw + 1;
    let ([x, w, bias, requant], out, scratch) =
        step_operands_and_scratch::<4>(step, arena, weights)?;
    let padded = scratch.get_mut(..ph * pw).ok_or(CpuError::CorruptPlan)?;
    let zx = g.q.input_zero;
    let taps = kh * kw;
    let fast3x3 = kh == 3 && kw == 3 && dh == 1 && dw == 1;
    for b in 0..d.n {
        for c in 0..d.c {
            let plane = x
                .get((b * d.c + c) * d.h * d.w..(b * d.c + c + 1) * d.h * d.w)
                .ok_or(CpuError::CorruptPlan)?;
            // The padded plane: zero-point borders around a copy of the rows and columns read.
            let fill = zx as i8 as u8;
            let left = g.pad[1].min(pw);
            let copied = d.w.min(pw - left);
            for (py, row) in padded.chunks_exact_mut(pw.max(1)).enumerate() {
                let iy = py.wrapping_sub(g.pad[0]);
                match plane.get(iy.wrapping_mul(d.w)..).filter(|_| iy < d.h) {
                    Some(src) => {
                        let (head, rest) = row.split_at_mut(left);
                        let (body, tail) = rest.split_at_mut(copied);
                        head.fill(fill);
                        body.copy_from_slice(src.get(..copied).ok_or(CpuError::CorruptPlan)?);
                        tail.fill(fill);
                    }
                    None => row.fill(fill),
                }
            }
            let padded = &*padded;
            for m in 0..multiplier {
                let o = c * multiplier + m;
                let wo = w
                    .get(o * taps..(o + 1) * taps)
                    .ok_or(CpuError::CorruptPlan)?;
                let w_sum: i32 = wo.iter().map(|&v| v as i8 as i32).sum();
                let base = word(bias, o)?.wrapping_sub(zx.wrapping_mul(w_sum));
                let rq = requantizer(requant, o, &g.q)?;
                let taps = Taps3::new(wo);
                let out_base = (b * d.oc + o) * d.oh * d.ow;
                let out_rows = out
                    .get_mut(out_base..out_base + d.oh * d.ow)
                    .ok_or(CpuError::CorruptPlan)?;
                let finish_into =
                    |slot: &mut u8, acc: i32| *slot = byte(rq.apply(acc), g.signed_output);
                for (oy, out_row) in out_rows.chunks_exact_mut(d.ow.max(1)).enumerate() {
                    let y0 = oy * sh;
                    if fast3x3 && sw == 1 {
                        let row = |r: usize| {
                            padded
                                .get((y0 + r) * pw..(y0 + r + 1) * pw)
                                .ok_or(CpuError::CorruptPlan)
                        };
                        let rows = [row(0)?, row(1)?, row(2)?];
                        let mut pairs = out_row.chunks_exact_mut(2);
                        for (i, pair) in (&mut pairs).enumerate() {
                            let [a, b] = taps.pair(rows, 2 * i, base)?;
                            pair[0] = byte(rq.apply(a), g.signed_output);
                            pair[1] = byte(rq.apply(b), g.signed_output);
                        }
                        if let [last] = pairs.into_remainder() {
                            let at = d.ow - 1;
                            finish_into(last, taps.single(rows, at, base)?);
                        }
                    } else if fast3x3 {
                        let row = |r: usize| {
                            padded
                                .get((y0 + r) * pw..(y0 + r + 1) * pw)
                                .ok_or(CpuError::CorruptPlan)
                        };
                        let wv = |i: usize| wo[i] as i8 as i32;
                        let k = [
                            wv(0),
                            wv(1),
                            wv(2),
                            wv(3),
                            wv(4),
                            wv(5),
                            wv(6),
                            wv(7),
                            wv(8),
                        ];
                        let (r0, r1, r2) = (row(0)?, row(1)?, row(2)?);
                        for (((a, b), c), slot) in r0
                            .windows(3)
                            .step_by(sw)
                            .zip(r1.windows(3).step_by(sw))
                            .zip(r2.windows(3).step_by(sw))
                            .zip(out_row.iter_mut())
                        {
                            let (&[a0, a1, a2], &[b0, b1, b2], &[c0, c1, c2]) = (a, b, c) else {
                                return Err(CpuError::CorruptPlan);
                            };
                            let v = |x: u8| x as i8 as i32;
                            let acc = base
                                .wrapping_add(k[0] * v(a0) + k[1] * v(a1) + k[2] * v(a2))
                                .wrapping_add(k[3] * v(b0) + k[4] * v(b1) + k[5] * v(b2))
                                .wrapping_add(k[6] * v(c0) + k[7] * v(c1) + k[8] * v(c2));
                            finish_into(slot, acc);
                        }
                    } else {
                        for (ox, slot) in out_row.iter_mut().enumerate() {
                            let x0 = ox * sw;
                            let mut acc = base;
                            for ky in 0..kh {
                                for kx in 0..kw {
                                    let at = (y0 + ky * dh) * pw + x0 + kx * dw;
                                    let v = *padded.get(at).ok_or(CpuError::CorruptPlan)? as i8;
                                    acc =
                                        acc.wrapping_add(wo[ky * kw + kx] as i8 as i32 * v as i32);
                                }
                            }
                            finish_into(slot, acc);
                        }
                    }
                }
            }
        }
    }
    Ok(())
}
