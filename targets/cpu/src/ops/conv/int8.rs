//! Integer convolution (QConv) on 8-bit inputs with int32 accumulators, and on 16-bit inputs
//! with int8 weights (TFLite's 16 × 8 scheme) with int64 accumulators, requantized once
//! ([`crate::base::requantize`]). The portable definition; the host's SIMD kernels are tried first.

use crate::base::context::StepContext;
use crate::base::geometry::ConvDims;
use crate::base::quantized::QuantInt;
use crate::base::requantize::{output, Requantizer};
use crate::micro::integer_dot::wide_dot;
use core::num::NonZeroUsize;
use ferrite_hal::op::{QConv, Requantize};

/// Output positions accumulated at once, in int32 on the stack (no scratch in the arena).
const CHUNK: usize = 64;

/// Integer convolution, in the step's arena scratch
/// (`ferrite_hal::geometry::qconv_scratch_elements`, which the verifier guarantees): pointwise
/// convolutions (1×1, stride 1, no padding, one group) as a matrix product over the flattened
/// plane; depthwise ones on a zero-point-padded copy of each plane; the others by unfolded windows
/// (`qconv_columns`). Returns false, computing nothing, when `scratch` is too small.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn qconv<X: QuantInt, Y: QuantInt>(
    ctx: StepContext<'_>,
    c: &QConv,
    d: ConvDims,
    x: &[X],
    w: &[i8],
    bias: &[i32],
    requant: &[i32],
    y: &mut [Y],
    scratch: &mut [u8],
) -> bool {
    let icg = d.c / c.group.max(1);
    if X::WIDE {
        // Depthwise straight from here: its frame beside `qconv_wide`'s, not under it (the
        // int16 DS-CNN's firmware: 304 B less stack, 0.16 % fewer instructions).
        if icg == 1 && c.group > 1 {
            qconv_wide_depthwise(c, d, x, w, bias, requant, y);
            return true;
        }
        return qconv_wide(c, d, x, w, bias, requant, y, scratch);
    }
    #[cfg(all(feature = "std", any(target_arch = "x86_64", target_arch = "aarch64")))]
    if let Some(done) = super::int8_simd::qconv(ctx, c, d, x, w, bias, requant, y, scratch) {
        return done;
    }
    #[cfg(not(all(feature = "std", any(target_arch = "x86_64", target_arch = "aarch64"))))]
    let _ = ctx;
    let k = icg * c.window.kernel[0] * c.window.kernel[1];
    if c.is_pointwise() {
        qconv_pointwise(&c.requantize, d, x, w, bias, requant, y);
        return true;
    }
    if icg == 1 && c.group > 1 {
        return qconv_depthwise(c, d, x, w, bias, requant, y, scratch);
    }
    let column = bytemuck::try_cast_slice_mut::<u8, i16>(scratch)
        .ok()
        .and_then(|s| s.get_mut(..k));
    match column {
        Some(column) => {
            qconv_columns(c, d, x, w, bias, requant, y, column);
            true
        }
        None => false,
    }
}

/// Convolution of 16-bit inputs with int8 weights: each output the bias plus `Σ (x − zx)·w` over
/// its window in 64 bits (`|x − zx| ≤ 65535` and `|w| ≤ 128`, so an int32 sum could overflow
/// past 256 terms; each product fits int32, so a core with a 32 × 32 + 64 multiply-accumulate
/// (`SMLAL`) takes one instruction a term), requantized once. Per output position its window is
/// unfolded once into an int32 column in `scratch` (the planner's QConv scratch holds one for
/// every convolution but a depthwise one), then one dot product per output channel of the
/// group. A depthwise convolution (one channel a group: nothing to share an unfolded window,
/// and no scratch planned for one) runs [`qconv_wide_depthwise`] instead, which [`qconv`]
/// routes it to. Returns false, computing nothing, when `scratch` is too small.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn qconv_wide<X: QuantInt, Y: QuantInt>(
    c: &QConv,
    d: ConvDims,
    x: &[X],
    w: &[i8],
    bias: &[i32],
    requant: &[i32],
    y: &mut [Y],
    scratch: &mut [u8],
) -> bool {
    let group = c.group.max(1);
    let (icg, ocg) = (d.c / group, d.oc / group);
    let k = icg * c.window.kernel[0] * c.window.kernel[1];
    let column = bytemuck::try_cast_slice_mut::<u8, i32>(scratch)
        .ok()
        .and_then(|s| s.get_mut(..k));
    let Some(column) = column else {
        return false;
    };
    let positions = d.oh * d.ow;
    let plane = d.h * d.w;
    for b in 0..d.n {
        for g in 0..group {
            let first = (b * d.c + g * icg) * plane;
            let Some(xg) = x.get(first..first + icg * plane) else {
                return true;
            };
            for p in 0..positions {
                unfold_window(c, &d, xg, p, column);
                let column = &*column;
                for o in g * ocg..(g + 1) * ocg {
                    let row = w.get(o * k..(o + 1) * k).unwrap_or(&[]);
                    let start = i64::from(bias.get(o).copied().unwrap_or(0));
                    let dot = start.wrapping_add(wide_dot(row, column, |v| v));
                    let rq = Requantizer::of_channel(requant, o, &c.requantize);
                    if let Some(slot) = y.get_mut((b * d.oc + o) * positions + p) {
                        *slot = Y::narrow(rq.apply_wide(dot));
                    }
                }
            }
        }
    }
    true
}

/// Output positions a 16-bit depthwise convolution accumulates at once, in int64 on the stack.
const WIDE_CHUNK: usize = 16;

/// Kernel columns whose reach [`qconv_wide_depthwise`] tabulates once per chunk (on the stack);
/// a wider kernel's further columns are worked out per kernel row.
const WIDE_DEPTHWISE_MAX_KW: usize = 4;

/// For one kernel column (`offset = kx · dilation` input columns right of the window's
/// first) and a chunk of `len` outputs from `ox0`: the chunk's outputs `lo..hi` whose tap lands
/// inside the `width` input columns (the others read padding), and the input column the first
/// of them reads.
#[inline(never)]
fn tap_reach(
    offset: usize,
    pad: usize,
    stride: NonZeroUsize,
    width: usize,
    ox0: usize,
    len: usize,
) -> (usize, usize, usize) {
    let first_in = pad.saturating_sub(offset).div_ceil(stride.get());
    let end_in = (width + pad).saturating_sub(offset).div_ceil(stride.get());
    let lo = first_in.saturating_sub(ox0).min(len);
    let hi = end_in.saturating_sub(ox0).min(len).max(lo);
    (
        lo,
        hi,
        ((ox0 + lo) * stride.get() + offset).wrapping_sub(pad),
    )
}

/// Depthwise [`qconv_wide`]: per chunk of up to [`WIDE_CHUNK`] output columns, which of them
/// each kernel column's tap lands inside the input for (worked out once for every channel and
/// row, for the first [`WIDE_DEPTHWISE_MAX_KW`] kernel columns; per row for any further); then
/// per channel and output row the chunk's sums on the stack, each tap one strided pass over its
/// outputs with no bounds checks (the padding adds nothing).
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn qconv_wide_depthwise<X: QuantInt, Y: QuantInt>(
    c: &QConv,
    d: ConvDims,
    x: &[X],
    w: &[i8],
    bias: &[i32],
    requant: &[i32],
    y: &mut [Y],
) {
    let win = &c.window;
    let [kh, kw] = win.kernel;
    let ([sh, sw], [dh, dw]) = (win.stride, win.dilation);
    let (sw, pad) = (
        NonZeroUsize::new(sw).unwrap_or(NonZeroUsize::MIN),
        win.pads[1],
    );
    let zx = c.requantize.input_zero;
    let (plane, taps, positions) = (d.h * d.w, (kh * kw).max(1), d.oh * d.ow);
    let multiplier = (d.oc / d.c.max(1)).max(1);
    let mut acc = [0i64; WIDE_CHUNK];
    let mut reach = ChunkTaps::new([dw, pad, d.w], sw);
    for ox0 in (0..d.ow).step_by(WIDE_CHUNK) {
        let len = WIDE_CHUNK.min(d.ow - ox0);
        reach.tabulate(kw, [ox0, len]);
        for (bo, out) in y.chunks_exact_mut(positions.max(1)).enumerate() {
            let (b, o) = (bo / d.oc.max(1), bo % d.oc.max(1));
            let first = (b * d.c + o / multiplier) * plane;
            let (Some(xp), Some(wo)) =
                (x.get(first..first + plane), w.get(o * taps..(o + 1) * taps))
            else {
                return;
            };
            let rq = Requantizer::of_channel(requant, o, &c.requantize);
            let start = i64::from(bias.get(o).copied().unwrap_or(0));
            for (oy, out_row) in out.chunks_exact_mut(d.ow.max(1)).enumerate() {
                let acc = &mut acc[..len];
                acc.fill(start);
                for (ky, wr) in wo.chunks_exact(kw.max(1)).enumerate() {
                    let iy = (oy * sh + ky * dh).wrapping_sub(win.pads[0]);
                    if let Some(row) = xp.get(iy.wrapping_mul(d.w)..).and_then(|r| r.get(..d.w)) {
                        add_kernel_row(acc, row, wr, &reach, zx);
                    }
                }
                let outs = out_row.get_mut(ox0..ox0 + len).unwrap_or(&mut []);
                for (slot, &a) in outs.iter_mut().zip(acc.iter()) {
                    *slot = Y::narrow(rq.apply_wide(a));
                }
            }
        }
    }
}

/// Where each kernel column's taps land in one chunk of depthwise outputs ([`tap_reach`]),
/// worked out once for the first [`WIDE_DEPTHWISE_MAX_KW`] columns.
struct ChunkTaps {
    table: [(usize, usize, usize); WIDE_DEPTHWISE_MAX_KW],
    /// Dilation, left padding and input width.
    geometry: [usize; 3],
    stride: NonZeroUsize,
    /// The chunk's first output column and length.
    chunk: [usize; 2],
}

impl ChunkTaps {
    /// An empty table for a convolution's geometry (`[dilation, left padding, input width]`).
    fn new(geometry: [usize; 3], stride: NonZeroUsize) -> ChunkTaps {
        ChunkTaps {
            table: [(0, 0, 0); WIDE_DEPTHWISE_MAX_KW],
            geometry,
            stride,
            chunk: [0, 0],
        }
    }

    /// Tabulates the first `kw` kernel columns' reach for the chunk `[first column, length]`,
    /// in place. Out of line: a table returned per chunk was built and then copied (a second
    /// slot in the caller's frame, or a `memcpy` under it), and inlined, the table's writes
    /// cost the depthwise loop's registers.
    #[inline(never)]
    fn tabulate(&mut self, kw: usize, chunk: [usize; 2]) {
        self.chunk = chunk;
        for kx in 0..kw.min(WIDE_DEPTHWISE_MAX_KW) {
            let reach = self.compute(kx);
            if let Some(slot) = self.table.get_mut(kx) {
                *slot = reach;
            }
        }
    }

    fn compute(&self, kx: usize) -> (usize, usize, usize) {
        let [dw, pad, width] = self.geometry;
        let [ox0, len] = self.chunk;
        tap_reach(kx * dw, pad, self.stride, width, ox0, len)
    }

    /// Kernel column `kx`'s outputs `lo..hi` and the input column the first reads.
    #[inline(always)]
    fn of(&self, kx: usize) -> (usize, usize, usize) {
        match self.table.get(kx) {
            Some(&reach) => reach,
            None => self.compute(kx),
        }
    }
}

/// Adds one kernel row's taps (weights `wr`, input `row`) into a chunk of depthwise sums: each
/// tap one strided pass over the outputs it reaches inside the row, no bounds checks inside.
#[inline(never)]
fn add_kernel_row<X: QuantInt>(acc: &mut [i64], row: &[X], wr: &[i8], taps: &ChunkTaps, zx: i32) {
    for (kx, &wv) in wr.iter().enumerate() {
        let (lo, hi, ix) = taps.of(kx);
        let (Some(acc), Some(xs)) = (acc.get_mut(lo..hi), row.get(ix..)) else {
            continue;
        };
        let wv = i64::from(wv);
        for (a, v) in acc.iter_mut().zip(xs.iter().step_by(taps.stride.get())) {
            *a = a.wrapping_add(i64::from(v.widen() - zx) * wv);
        }
    }
}

/// An element of an unfolded window: `x − zx`, int16 for 8-bit inputs (9 bits), int32 for
/// 16-bit ones (17 bits), as the verifier's zero-point ranges guarantee.
trait ColumnValue: Copy + Default {
    fn of(difference: i32) -> Self;
}

impl ColumnValue for i16 {
    #[inline(always)]
    fn of(difference: i32) -> i16 {
        difference as i16
    }
}

impl ColumnValue for i32 {
    #[inline(always)]
    fn of(difference: i32) -> i32 {
        difference
    }
}

/// One output position's window as `x − zx` values in weight order (0 in the padding).
#[inline(always)]
fn unfold_window<X: QuantInt, C: ColumnValue>(
    c: &QConv,
    d: &ConvDims,
    xg: &[X],
    p: usize,
    column: &mut [C],
) {
    let [kh, kw] = c.window.kernel;
    let zx = c.requantize.input_zero;
    let ow = d.ow.max(1);
    let (oy, ox) = (p / ow, p % ow);
    let iy0 = (oy * c.window.stride[0]).wrapping_sub(c.window.pads[0]);
    let ix0 = (ox * c.window.stride[1]).wrapping_sub(c.window.pads[1]);
    let plane = d.h * d.w;
    if plane == 0 {
        // An empty input: every window is padding.
        column.fill(C::default());
        return;
    }
    for (rows, xp) in column
        .chunks_exact_mut((kh * kw).max(1))
        .zip(xg.chunks_exact(plane))
    {
        for (ky, row_out) in rows.chunks_exact_mut(kw.max(1)).enumerate() {
            let iy = iy0.wrapping_add(ky * c.window.dilation[0]);
            let row = (iy < d.h)
                .then(|| xp.get(iy * d.w..(iy + 1) * d.w))
                .flatten();
            let Some(row) = row else {
                row_out.fill(C::default());
                continue;
            };
            for (kx, slot) in row_out.iter_mut().enumerate() {
                let ix = ix0.wrapping_add(kx * c.window.dilation[1]);
                *slot = row.get(ix).map_or(C::default(), |v| C::of(v.widen() - zx));
            }
        }
    }
}

/// Regular and grouped convolution by unfolded windows: per output position, its window as an
/// int16 column (in `scratch`), then one dot product per output channel of the group (contiguous
/// int8 × int16, which compilers vectorize).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn qconv_columns<X: QuantInt, Y: QuantInt>(
    c: &QConv,
    d: ConvDims,
    x: &[X],
    w: &[i8],
    bias: &[i32],
    requant: &[i32],
    y: &mut [Y],
    column: &mut [i16],
) {
    let group = c.group.max(1);
    let (icg, ocg) = (d.c / group, d.oc / group);
    let k = column.len();
    let positions = d.oh * d.ow;
    let group_input = icg * d.h * d.w;
    for b in 0..d.n {
        for g in 0..group {
            let first = (b * d.c + g * icg) * d.h * d.w;
            // The verifier sized every operand for these ranges; a short one computes nothing.
            let Some(xg) = x.get(first..first + group_input) else {
                return;
            };
            for p in 0..positions {
                unfold_window(c, &d, xg, p, column);
                let column = &*column;
                for o in g * ocg..(g + 1) * ocg {
                    let row = w.get(o * k..(o + 1) * k).unwrap_or(&[]);
                    let dot = row.iter().zip(column).fold(0i32, |acc, (&wv, &xv)| {
                        acc.wrapping_add(wv as i32 * xv as i32)
                    });
                    let rq = Requantizer::of_channel(requant, o, &c.requantize);
                    let start = bias.get(o).copied().unwrap_or(0);
                    if let Some(slot) = y.get_mut((b * d.oc + o) * positions + p) {
                        *slot = output(start.wrapping_add(dot), &rq);
                    }
                }
            }
        }
    }
}

/// Depthwise convolution on a zero-point-padded copy of each plane (in `scratch`): every tap is a
/// contiguous pass over a row chunk for stride 1. Returns false (nothing done) when the scratch is
/// too small.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn qconv_depthwise<X: QuantInt, Y: QuantInt>(
    c: &QConv,
    d: ConvDims,
    x: &[X],
    w: &[i8],
    bias: &[i32],
    requant: &[i32],
    y: &mut [Y],
    scratch: &mut [u8],
) -> bool {
    let win = &c.window;
    let [kh, kw] = win.kernel;
    let [sh, sw] = win.stride;
    let [dh, dw] = win.dilation;
    let ph = (d.oh - 1) * sh + (kh - 1) * dh + 1;
    let pw = (d.ow - 1) * sw + (kw - 1) * dw + 1;
    let Some(padded) = scratch.get_mut(..ph * pw) else {
        return false;
    };
    let q = &c.requantize;
    let zx = q.input_zero;
    let multiplier = d.oc / c.group.max(1);
    let taps = kh * kw;
    let sw = NonZeroUsize::new(sw).unwrap_or(NonZeroUsize::MIN);
    let (plane_len, out_len) = (d.h * d.w, d.oh * d.ow);
    let mut acc = [0i32; CHUNK];
    for b in 0..d.n {
        for ch in 0..d.c {
            // The verifier sized every operand for these ranges; a short one computes nothing.
            let first = (b * d.c + ch) * plane_len;
            let Some(plane) = x.get(first..first + plane_len) else {
                return true;
            };
            // Values minus the zero point (0 in the padding), as bytes: |x − zx| may not fit i8,
            // so the padded plane holds x and the correction is folded into the bias.
            for (py, row) in padded.chunks_exact_mut(pw.max(1)).enumerate() {
                let iy = py.wrapping_sub(win.pads[0]);
                for (px, slot) in row.iter_mut().enumerate() {
                    let ix = px.wrapping_sub(win.pads[1]);
                    let inside = if iy < d.h && ix < d.w {
                        plane.get(iy * d.w + ix)
                    } else {
                        None
                    };
                    *slot = inside.map_or(zx, |v| v.widen()) as u8;
                }
            }
            let signed = X::MIN < 0;
            let value = |v: u8| if signed { v as i8 as i32 } else { v as i32 };
            for m in 0..multiplier {
                let o = ch * multiplier + m;
                let wo = w.get(o * taps..(o + 1) * taps).unwrap_or(&[]);
                let w_sum: i32 = wo.iter().map(|&v| v as i32).sum();
                let start = bias.get(o).copied().unwrap_or(0);
                let base = start.wrapping_sub(zx.wrapping_mul(w_sum));
                let rq = Requantizer::of_channel(requant, o, q);
                let first = (b * d.oc + o) * out_len;
                let Some(out) = y.get_mut(first..first + out_len) else {
                    return true;
                };
                for (oy, out_row) in out.chunks_exact_mut(d.ow.max(1)).enumerate() {
                    for (chunk, outs) in out_row.chunks_mut(CHUNK).enumerate() {
                        let ox0 = chunk * CHUNK;
                        let Some(acc) = acc.get_mut(..outs.len()) else {
                            return true;
                        };
                        acc.fill(base);
                        for (ky, w_row) in wo.chunks_exact(kw.max(1)).enumerate() {
                            let top = (oy * sh + ky * dh) * pw;
                            let Some(row) = padded.get(top..top + pw) else {
                                continue;
                            };
                            for (kx, &wv) in w_row.iter().enumerate() {
                                let wv = wv as i32;
                                let from = row.get(ox0 * sw.get() + kx * dw..).unwrap_or(&[]);
                                for (a, &v) in acc.iter_mut().zip(from.iter().step_by(sw.get())) {
                                    *a = a.wrapping_add(wv * value(v));
                                }
                            }
                        }
                        for (slot, &a) in outs.iter_mut().zip(acc.iter()) {
                            *slot = output(a, &rq);
                        }
                    }
                }
            }
        }
    }
    true
}

/// `Y[o, p] = Σ_i W[o, i] (X[i, p] − zx) + bias[o]`, as `Σ W·X + (bias − zx·ΣW)`.
#[inline(always)]
fn qconv_pointwise<X: QuantInt, Y: QuantInt>(
    q: &Requantize,
    d: ConvDims,
    x: &[X],
    w: &[i8],
    bias: &[i32],
    requant: &[i32],
    y: &mut [Y],
) {
    let plane = d.h * d.w;
    let mut acc = [0i32; CHUNK];
    for b in 0..d.n {
        // The verifier sized every operand for these ranges; a short one computes nothing.
        let (Some(xb), Some(yb)) = (
            x.get(b * d.c * plane..(b + 1) * d.c * plane),
            y.get_mut(b * d.oc * plane..(b + 1) * d.oc * plane),
        ) else {
            return;
        };
        for p0 in (0..plane).step_by(CHUNK) {
            let Some(acc) = acc.get_mut(..CHUNK.min(plane - p0)) else {
                return;
            };
            let len = acc.len();
            for o in 0..d.oc {
                let w_row = w.get(o * d.c..(o + 1) * d.c).unwrap_or(&[]);
                let w_sum: i32 = w_row.iter().map(|&v| v as i32).sum();
                let start = bias.get(o).copied().unwrap_or(0);
                acc.fill(start.wrapping_sub(q.input_zero.wrapping_mul(w_sum)));
                for (i, &wv) in w_row.iter().enumerate() {
                    if wv == 0 {
                        continue;
                    }
                    let wv = wv as i32;
                    let from = i * plane + p0;
                    let xr = xb.get(from..from + len).unwrap_or(&[]);
                    for (a, xv) in acc.iter_mut().zip(xr) {
                        *a = a.wrapping_add(wv * xv.widen());
                    }
                }
                let rq = Requantizer::of_channel(requant, o, q);
                let from = o * plane + p0;
                let outs = yb.get_mut(from..from + len).unwrap_or(&mut []);
                for (slot, a) in outs.iter_mut().zip(acc.iter()) {
                    *slot = output(*a, &rq);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::base::requantize::requantize;
    use crate::base::requantize::testing::*;
    use std::vec;
    use std::vec::Vec;

    /// A test convolution with a square `k × k` window (stride `s`, dilation `dil`, `pad` on
    /// every side), its dims for an `[n, c, h, w]` input and `oc` outputs.
    fn square_conv(
        [k, s, dil, pad, group]: [usize; 5],
        [n, c, h, w, oc]: [usize; 5],
        requantize: Requantize,
    ) -> (QConv, ConvDims) {
        let window = ferrite_hal::op::Window {
            kernel: [k, k],
            stride: [s, s],
            dilation: [dil, dil],
            pads: [pad, pad, pad, pad],
        };
        let oh = (h + 2 * pad - dil * (k - 1) - 1) / s + 1;
        let ow = (w + 2 * pad - dil * (k - 1) - 1) / s + 1;
        let conv = QConv {
            window,
            group,
            requantize,
        };
        (
            conv,
            ConvDims {
                n,
                c,
                h,
                w,
                oc,
                oh,
                ow,
            },
        )
    }

    /// The definition's accumulators of `conv` (bias plus `Σ (x − zx)·w` over each window, the
    /// padding adding nothing), in output order, exactly in 64 bits.
    fn exact_accumulators(
        conv: &QConv,
        d: ConvDims,
        x: &[i32],
        w: &[i8],
        bias: &[i32],
    ) -> Vec<i64> {
        let win = &conv.window;
        let ([k, _], [s, _], [dil, _], pad) = (win.kernel, win.stride, win.dilation, win.pads[0]);
        let (icg, ocg) = (d.c / conv.group, d.oc / conv.group);
        let zx = conv.requantize.input_zero as i64;
        let mut out = Vec::with_capacity(d.n * d.oc * d.oh * d.ow);
        for b in 0..d.n {
            for o in 0..d.oc {
                let g = o / ocg;
                for oy in 0..d.oh {
                    for ox in 0..d.ow {
                        let mut acc = bias[o] as i64;
                        for ic in 0..icg {
                            for ky in 0..k {
                                for kx in 0..k {
                                    let iy = (oy * s + ky * dil) as isize - pad as isize;
                                    let ix = (ox * s + kx * dil) as isize - pad as isize;
                                    if iy < 0 || ix < 0 || iy >= d.h as isize || ix >= d.w as isize
                                    {
                                        continue;
                                    }
                                    let at = ((b * d.c + g * icg + ic) * d.h + iy as usize) * d.w
                                        + ix as usize;
                                    let wv = w[((o * icg + ic) * k + ky) * k + kx] as i64;
                                    acc += (x[at] as i64 - zx) * wv;
                                }
                            }
                        }
                        out.push(acc);
                    }
                }
            }
        }
        out
    }

    /// The kernels against the definition, over strides, dilations, pads and groups.
    #[test]
    fn qconv_matches_the_definition() {
        let mut seed = 7u32;
        let mut next = || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 24) as i32
        };
        for geometry in [
            [3, 1, 1, 1, 1],
            [3, 2, 1, 1, 2],
            [1, 1, 1, 0, 1],
            [3, 1, 2, 2, 4],
            [5, 3, 1, 2, 1],
        ] {
            let (n, c, h, w, oc) = (1, 4, 9, 70, 8);
            let q = Requantize {
                input_zero: 3,
                output_zero: -2,
                min: -128,
                max: 127,
            };
            let (conv, dims) = square_conv(geometry, [n, c, h, w, oc], q);
            let [k, _, _, _, group] = geometry;
            let x: Vec<i8> = (0..n * c * h * w).map(|_| (next() - 128) as i8).collect();
            let wt: Vec<i8> = (0..oc * (c / group) * k * k)
                .map(|_| (next() - 128) as i8)
                .collect();
            let bias: Vec<i32> = (0..oc).map(|_| next() * 10 - 1000).collect();
            let rq = [1 << 30, -6]; // 1/128
            let mut y = vec![0i8; n * oc * dims.oh * dims.ow];
            let mut scratch = vec![0u8; 4 * 4096];
            assert!(qconv(
                StepContext::default(),
                &conv,
                dims,
                &x,
                &wt,
                &bias,
                &rq,
                &mut y,
                &mut scratch
            ));
            let done = qconv(
                StepContext::default(),
                &conv,
                dims,
                &x,
                &wt,
                &bias,
                &rq,
                &mut y.clone(),
                &mut [],
            );
            assert!(conv.is_pointwise() || !done, "no scratch: nothing done");
            let x32: Vec<i32> = x.iter().map(|&v| v.into()).collect();
            let exact = exact_accumulators(&conv, dims, &x32, &wt, &bias);
            for (i, (&got, &acc)) in y.iter().zip(&exact).enumerate() {
                let want = (requantize(acc as i32, rq[0], rq[1]) - 2).clamp(-128, 127) as i8;
                assert_eq!(got, want, "{geometry:?}: output {i}");
            }
        }
    }

    /// A 16 × 8 convolution's input and output and its definition in 128-bit arithmetic, over
    /// strides, dilations, pads and groups, with extreme values (sums far past int32).
    #[test]
    fn qconv_on_int16_matches_the_definition() {
        let mut next = random_i32s(16);
        for (geometry, c, oc) in [
            ([3, 1, 1, 1, 1], 96, 3),
            ([3, 2, 1, 1, 2], 8, 4),
            ([1, 1, 1, 0, 1], 1000, 2),
            ([3, 1, 2, 2, 4], 4, 8),
            ([5, 3, 1, 2, 1], 6, 2),
            ([3, 1, 1, 1, 6], 6, 6),
            ([3, 2, 1, 1, 4], 4, 4),
            ([5, 3, 1, 2, 3], 3, 6),
            ([1, 1, 1, 0, 5], 5, 5),
            ([9, 1, 1, 4, 2], 2, 2),
        ] {
            // Wide enough for several chunks of depthwise outputs.
            let (n, h, w) = (2, 7, 53);
            let q = Requantize {
                input_zero: -300,
                output_zero: 5,
                min: -32768,
                max: 32767,
            };
            let (conv, dims) = square_conv(geometry, [n, c, h, w, oc], q);
            let [k, _, _, _, group] = geometry;
            let icg = c / group;
            // Most inputs and weights at their largest (the rest random): terms near 2^22, so
            // a sum of 864 (or 1000) passes int32.
            let extreme = |v: i32, lo: i32, hi: i32| match v & 7 {
                0 => v.clamp(lo, hi),
                _ => hi,
            };
            let x: Vec<i16> = (0..n * c * h * w)
                .map(|_| extreme(next() >> 16, -32768, 32767) as i16)
                .collect();
            let wt: Vec<i8> = (0..oc * icg * k * k)
                .map(|_| extreme(next() >> 24, -128, 127) as i8)
                .collect();
            let bias: Vec<i32> = (0..oc).map(|_| next() >> 4).collect();
            let rq: Vec<i32> = (0..oc)
                .flat_map(|_| [(1 << 30) | (next() & 0x3fff_ffff), -16 - (next() & 7)])
                .collect();
            let mut y = vec![0i16; n * oc * dims.oh * dims.ow];
            let mut scratch = vec![0u8; 4 * c * k * k];
            assert!(qconv(
                StepContext::default(),
                &conv,
                dims,
                &x,
                &wt,
                &bias,
                &rq,
                &mut y,
                &mut scratch
            ));
            let depthwise = icg == 1 && group > 1;
            let done = qconv(
                StepContext::default(),
                &conv,
                dims,
                &x,
                &wt,
                &bias,
                &rq,
                &mut y.clone(),
                &mut [],
            );
            assert_eq!(done, depthwise, "only a depthwise one needs no scratch");
            let x32: Vec<i32> = x.iter().map(|&v| v.into()).collect();
            let exact = exact_accumulators(&conv, dims, &x32, &wt, &bias);
            let plane = dims.oh * dims.ow;
            for (i, (&got, &acc)) in y.iter().zip(&exact).enumerate() {
                let o = i / plane % oc;
                let r = exact_requantize(acc, rq[2 * o], rq[2 * o + 1]);
                let want = r.saturating_add(5).clamp(-32768, 32767) as i16;
                assert_eq!(got, want, "{geometry:?} c{c}: output {i}");
            }
            let largest = exact.iter().map(|a| a.abs()).max().unwrap_or(0);
            if c >= 80 {
                assert!(
                    largest > i32::MAX as i64,
                    "the case reaches past int32: {largest}"
                );
            }
        }
    }
}
