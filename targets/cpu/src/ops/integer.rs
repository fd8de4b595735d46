//! Integer kernels for quantized models: convolution and matrix product on 8-bit inputs with
//! int32 accumulators, requantized to 8-bit outputs with fixed-point arithmetic only; and on
//! 16-bit inputs with int8 weights (TFLite's 16 × 8 scheme, for audio models whose activations
//! need more than 256 levels) with int64 accumulators, requantized to 16-bit outputs.
//!
//! Requantization rounds once, to nearest with ties to even, as the ONNX definition does
//! (DequantizeLinear → the float op → QuantizeLinear): the accumulator times the Q31 multiplier
//! is formed exactly in 64 bits and shifted right once with that rounding. (TFLite and CMSIS-NN
//! round twice — a doubling high multiply, then a rounding shift — and so differ from the
//! definition by one step on about one output in a thousand, an error that residual networks
//! amplify layer by layer.) Core-specific kernels use [`Requantizer`] too, so they are bit-exact
//! with these.

use crate::base::geometry::{ConvDims, PoolDims};
use crate::base::quantized::{Bytes8, QuantByte, QuantInt};
use crate::base::requantize::{shift_sticky, Requantizer};
use core::num::NonZeroUsize;
use ferrite_hal::op::{
    QAdd, QAvgPool, QConv, QGemmWeights, QGlobalAvgPool, QMul, QSoftmax, Requantize, Rescale,
    QADD_LEFT_SHIFT, QSOFTMAX_TABLE_BITS,
};

/// The final step: requantize, add the output zero point, clamp.
#[inline(always)]
fn output<Y: QuantInt>(acc: i32, rq: &Requantizer) -> Y {
    Y::narrow(rq.apply(acc))
}

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
    if let Some(done) = crate::ops::integer_simd::qconv(c, d, x, w, bias, requant, y, scratch) {
        return done;
    }
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

/// `Σ w·value(x)` of int8 weights and values of at most 17 bits, in 64 bits: four products at a
/// time summed in int32 (each below 2^24, so four cannot overflow), then added to the total.
#[inline(always)]
fn wide_dot<V: Copy>(w: &[i8], x: &[V], value: impl Fn(V) -> i32) -> i64 {
    let (w4, w_rest) = w.as_chunks::<4>();
    let (x4, x_rest) = x.as_chunks::<4>();
    let mut total = 0i64;
    for (w, x) in w4.iter().zip(x4) {
        let four = value(x[0]) * i32::from(w[0])
            + value(x[1]) * i32::from(w[1])
            + value(x[2]) * i32::from(w[2])
            + value(x[3]) * i32::from(w[3]);
        total = total.wrapping_add(four.into());
    }
    for (&w, &x) in w_rest.iter().zip(x_rest) {
        total = total.wrapping_add(i64::from(value(x) * i32::from(w)));
    }
    total
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

/// Integer matrix product `A [M, K] · Bᵀ` with a per-column (or single) requantization, `B` in
/// either [`QGemmWeights`] layout: `[N, K]` rows, each output the dot product of two
/// contiguous rows; or blocked, four outputs at a time, each four values of `A` meeting a word
/// of each of the four columns. The sums are the same either way (exact, in order). Out of
/// line on a firmware: inlined, its tiles sat in the frame of the family dispatch every Gemm
/// and MatMul step runs under (the every-kernel M4 firmware's deepest path).
#[allow(clippy::too_many_arguments)]
#[cfg_attr(feature = "std", inline(always))]
#[cfg_attr(not(feature = "std"), inline(never))]
pub fn qgemm<X: QuantInt, Y: QuantInt>(
    q: &Requantize,
    [m, k, n]: [usize; 3],
    layout: QGemmWeights,
    a: &[X],
    b: &[i8],
    bias: &[i32],
    requant: &[i32],
    y: &mut [Y],
) {
    if X::WIDE {
        qgemm_wide(q, [m, k, n], layout, a, b, bias, requant, y);
        return;
    }
    #[cfg(all(feature = "std", any(target_arch = "x86_64", target_arch = "aarch64")))]
    if crate::ops::integer_simd::qgemm(q, [m, k, n], layout, a, b, bias, requant, y) {
        return;
    }
    let term = |av: &X, bv: &i8| (av.widen() - q.input_zero) * *bv as i32;
    for row in 0..m {
        let (Some(a_row), Some(y_row)) = (
            a.get(row * k..(row + 1) * k),
            y.get_mut(row * n..(row + 1) * n),
        ) else {
            return;
        };
        match layout {
            QGemmWeights::Rows => {
                for (col, slot) in y_row.iter_mut().enumerate() {
                    let b_row = b.get(col * k..(col + 1) * k).unwrap_or(&[]);
                    let mut acc = bias.get(col).copied().unwrap_or(0);
                    for (av, bv) in a_row.iter().zip(b_row) {
                        acc = acc.wrapping_add(term(av, bv));
                    }
                    *slot = output(acc, &Requantizer::of_channel(requant, col, q));
                }
            }
            QGemmWeights::Blocked => {
                for (block, slots) in y_row.chunks_exact_mut(4).enumerate() {
                    let w = b.get(4 * k * block..4 * k * (block + 1)).unwrap_or(&[]);
                    let mut acc = [0i32; 4];
                    for (c, sum) in acc.iter_mut().enumerate() {
                        *sum = bias.get(4 * block + c).copied().unwrap_or(0);
                    }
                    for (a4, w16) in a_row.chunks_exact(4).zip(w.chunks_exact(16)) {
                        // Four activations meet a word of each column: written out, so the
                        // compiler keeps them in registers (|a − zero| ≤ 255, |w| ≤ 128: four
                        // products cannot overflow before the wrapping sum).
                        let (Ok(a4), Ok(w16)) =
                            (<&[X; 4]>::try_from(a4), <&[i8; 16]>::try_from(w16))
                        else {
                            continue;
                        };
                        let x = a4.map(|v| v.widen() - q.input_zero);
                        let (words, _) = w16.as_chunks::<4>();
                        for (sum, w) in acc.iter_mut().zip(words) {
                            let w = w.map(i32::from);
                            let four = x[0] * w[0] + x[1] * w[1] + x[2] * w[2] + x[3] * w[3];
                            *sum = sum.wrapping_add(four);
                        }
                    }
                    for (c, (sum, slot)) in acc.iter().zip(slots).enumerate() {
                        let rq = Requantizer::of_channel(requant, 4 * block + c, q);
                        *slot = output(*sum, &rq);
                    }
                }
            }
        }
    }
}

/// [`qgemm`] of 16-bit activations: the same sums in 64 bits (see [`qconv_wide`]), one output
/// at a time, from either weight layout.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn qgemm_wide<X: QuantInt, Y: QuantInt>(
    q: &Requantize,
    [m, k, n]: [usize; 3],
    layout: QGemmWeights,
    a: &[X],
    b: &[i8],
    bias: &[i32],
    requant: &[i32],
    y: &mut [Y],
) {
    let term = |av: &X, bv: &i8| i64::from(av.widen() - q.input_zero) * i64::from(*bv);
    for row in 0..m {
        let (Some(a_row), Some(y_row)) = (
            a.get(row * k..(row + 1) * k),
            y.get_mut(row * n..(row + 1) * n),
        ) else {
            return;
        };
        for (col, slot) in y_row.iter_mut().enumerate() {
            let mut acc = i64::from(bias.get(col).copied().unwrap_or(0));
            match layout {
                // One contiguous row of weights (`pack` writes this layout for int16).
                QGemmWeights::Rows => {
                    let b_row = b.get(col * k..(col + 1) * k).unwrap_or(&[]);
                    let value = |v: X| v.widen() - q.input_zero;
                    acc = acc.wrapping_add(wide_dot(b_row, a_row, value));
                }
                // Block `col / 4`; in each 16-value group, column `col % 4`'s four weights.
                QGemmWeights::Blocked => {
                    let (block, c) = (col / 4, col % 4);
                    let w = b.get(4 * k * block..4 * k * (block + 1)).unwrap_or(&[]);
                    for (a4, w16) in a_row.chunks_exact(4).zip(w.chunks_exact(16)) {
                        let w4 = w16.get(4 * c..4 * c + 4).unwrap_or(&[]);
                        for (av, bv) in a4.iter().zip(w4) {
                            acc = acc.wrapping_add(term(av, bv));
                        }
                    }
                }
            }
            *slot = Y::narrow(Requantizer::of_channel(requant, col, q).apply_wide(acc));
        }
    }
}

/// A rescale worked out once (no zero point, no clamp), or with `q`'s output zero and clamp.
#[inline(always)]
fn rescaler(r: Rescale, q: &Requantize) -> Requantizer {
    Requantizer::new([r.multiplier, r.shift], q)
}

/// A rescale that ends an op: offset by the output zero point, clamped to `[min, max]`.
#[inline(always)]
fn output_rescaler(r: Rescale, output_zero: i32, min: i32, max: i32) -> Requantizer {
    let output = Requantize {
        input_zero: 0,
        output_zero,
        min,
        max,
    };
    rescaler(r, &output)
}

/// One input's term of an integer addition, `(v − zero) · s_v / s_y` in fixed point with the
/// sum's fractional bits, exact or rounded to odd (see [`AddTerms`]).
#[derive(Clone, Copy, Debug)]
struct AddTerm {
    /// Q31 mantissa of `s_v / s_y`.
    multiplier: i64,
    /// Right shift from `(v − zero) · multiplier` to the sum's fixed point (negative: left).
    right: i32,
    zero: i32,
}

impl AddTerm {
    /// The term of `v`, for 8-bit inputs (it fits int32 by the choice of fraction bits).
    #[inline(always)]
    fn of(&self, v: i32) -> i32 {
        self.of_wide(v).clamp(i32::MIN as i64, i32::MAX as i64) as i32
    }

    /// `[multiplier, right, zero]` where a vector kernel can compute this term for every value
    /// of `lo..=hi` with 32 × 32 → 64-bit products and a 64-bit logical shift: a non-negative
    /// multiplier below 2^31, a right shift of 0 to 32 (the low 32 bits of the logical and the
    /// arithmetic shift then agree), and every term within int32 (so [`AddTerm::of`]'s clamp
    /// changes none; the terms are monotone in `v`, so the two ends decide). `None` otherwise.
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    fn vector_form(&self, lo: i32, hi: i32) -> Option<[i32; 3]> {
        let multiplier = i32::try_from(self.multiplier).ok().filter(|&m| m >= 0)?;
        let fits = |v: i32| i32::try_from(self.of_wide(v)).is_ok();
        ((0..=32).contains(&self.right) && fits(lo) && fits(hi))
            .then_some([multiplier, self.right, self.zero])
    }

    /// The term of `v` in int64 (16-bit inputs). Out of line on a firmware (8-bit additions
    /// call it 512 times an op, for their tables; inlined at each caller, 1.7 KB).
    #[cfg_attr(feature = "std", inline(always))]
    #[cfg_attr(not(feature = "std"), inline(never))]
    fn of_wide(&self, v: i32) -> i64 {
        let x = (v - self.zero) as i64 * self.multiplier;
        if self.right >= 0 {
            shift_sticky(x, self.right as u32)
        } else {
            x.saturating_mul(1i64 << (-self.right).min(62))
        }
    }
}

/// What an integer addition works out once: each input's term and the sum's fractional bits.
///
/// The definition is `round_half_even((a − za)·s_a/s_y + (b − zb)·s_b/s_y) + zy`. [`QAdd`]
/// stores TFLite's three rescales (each input to a common scale, lifted by 2^20, then the sum to
/// the output); their products are `s_a/s_y` and `s_b/s_y`, taken here as Q31 mantissas. Each
/// term is formed in fixed point with `frac` fractional bits (as many as keep two 8-bit terms in
/// int32, 22 for scale ratios near one; two 16-bit terms in int64, 45), exactly or rounded to
/// odd when bits are dropped (so an inexact sum never looks like an exact tie), and the sum is
/// rounded once, ties to even.
#[derive(Clone, Copy, Debug)]
struct AddTerms {
    a: AddTerm,
    b: AddTerm,
    frac: u32,
}

impl AddTerms {
    /// The terms of `q` for 8-bit inputs (`wide` false: int32 sums) or 16-bit ones (int64).
    fn new(q: &QAdd, wide: bool) -> AddTerms {
        // `s_v / s_y = m · 2^e`, m a Q31 mantissa: the product of the two rescales' Q31 numbers,
        // rounded back to 31 bits.
        let combined = |r: Rescale| -> (i64, i32) {
            let m62 = r.multiplier as i64 * q.output.multiplier as i64;
            let m = (m62 + (1 << 30)) >> 31;
            (m, r.shift + q.output.shift + QADD_LEFT_SHIFT - 31)
        };
        let ((ma, ea), (mb, eb)) = (combined(q.a), combined(q.b));
        // |(v − z) · m| < 2^(8 + 31): with `frac` bits each term stays below 2^30. For 16-bit
        // inputs |(v − z) · m| < 2^(16 + 31), and each term stays below 2^61.
        let frac = if wide {
            (14 - ea.max(eb)).clamp(0, 61)
        } else {
            (-9 - ea.max(eb)).clamp(0, 30)
        };
        let term = |m: i64, e: i32, zero: i32| AddTerm {
            multiplier: m,
            right: -(e + frac),
            zero,
        };
        AddTerms {
            a: term(ma, ea, q.a_zero),
            b: term(mb, eb, q.b_zero),
            frac: frac as u32,
        }
    }

    /// The rounded sum of two terms (before the output zero point), in int32 arithmetic.
    #[inline(always)]
    fn round(&self, sum: i32) -> i32 {
        if self.frac == 0 {
            return sum;
        }
        // `frac` is in `1..=30`: the remainder plus one stays within int32.
        let q = sum >> self.frac;
        let rest = sum & ((1i32 << self.frac) - 1);
        q + ((rest + (q & 1)) > (1i32 << (self.frac - 1))) as i32
    }

    /// [`AddTerms::round`] of an int64 sum (16-bit inputs; `frac` in `0..=61`).
    #[inline(always)]
    fn round_wide(&self, sum: i64) -> i64 {
        if self.frac == 0 {
            return sum;
        }
        let q = sum >> self.frac;
        let rest = sum & ((1i64 << self.frac) - 1);
        q + ((rest + (q & 1)) > (1i64 << (self.frac - 1))) as i64
    }
}

/// Integer addition: `(a − za)·s_a/s_y + (b − zb)·s_b/s_y` in fixed point (each term exact or
/// rounded to odd, with as many fraction bits as keep two 8-bit terms in int32), rounded once,
/// ties to even, as the definition does. With `tables` (512 entries of scratch, see
/// `ferrite_hal::geometry::qadd_scratch_elements`) each input's term is looked up by its byte
/// instead of computed per element (the same integers either way).
#[inline(always)]
pub fn qadd<A: QuantByte, B: QuantByte, Y: QuantInt>(
    q: &QAdd,
    a: &[A],
    b: &[B],
    y: &mut [Y],
    tables: &mut [i32],
) {
    let terms = AddTerms::new(q, false);
    let finish = |sum: i32| {
        Y::narrow(
            terms
                .round(sum)
                .saturating_add(q.output_zero)
                .max(q.min)
                .min(q.max),
        )
    };
    // Each term computed eight at a time where it can be (no tables to fill, no gathers).
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    if let (Some(fa), Some(fb)) = (
        terms.a.vector_form(A::MIN, A::MAX),
        terms.b.vector_form(B::MIN, B::MAX),
    ) {
        let (ab, bb) = (bytemuck::cast_slice(a), bytemuck::cast_slice(b));
        let finish = [q.output_zero, q.min, q.max];
        let signed = [A::MIN < 0, B::MIN < 0];
        if crate::ops::integer_simd::qadd_computed(terms.frac, finish, [fa, fb], signed, ab, bb, y)
        {
            return;
        }
    }
    if let Some((ta, tb)) = tables.get_mut(..512).map(|t| t.split_at_mut(256)) {
        for (k, (sa, sb)) in ta.iter_mut().zip(tb.iter_mut()).enumerate() {
            *sa = terms.a.of(A::from_byte(k as u8).widen());
            *sb = terms.b.of(B::from_byte(k as u8).widen());
        }
        let (ta, tb) = (&*ta, &*tb);
        #[cfg(all(feature = "std", target_arch = "x86_64"))]
        {
            let (ab, bb) = (bytemuck::cast_slice(a), bytemuck::cast_slice(b));
            let finish = [q.output_zero, q.min, q.max];
            if crate::ops::integer_simd::qadd_tables(terms.frac, finish, [ta, tb], ab, bb, y) {
                return;
            }
        }
        for ((out, &av), &bv) in y.iter_mut().zip(a).zip(b) {
            *out = finish(ta[av.byte() as usize].saturating_add(tb[bv.byte() as usize]));
        }
        return;
    }
    for ((out, &av), &bv) in y.iter_mut().zip(a).zip(b) {
        *out = finish(
            terms
                .a
                .of(av.widen())
                .saturating_add(terms.b.of(bv.widen())),
        );
    }
}

/// [`qadd`] of 16-bit inputs: the same single rounding on int64 fixed-point terms (45 fraction
/// bits for scale ratios near one), per element (no tables).
#[inline(never)]
pub fn qadd_wide<T: QuantInt>(q: &QAdd, a: &[T], b: &[T], y: &mut [T]) {
    let terms = AddTerms::new(q, true);
    for ((out, &av), &bv) in y.iter_mut().zip(a).zip(b) {
        let sum = terms
            .a
            .of_wide(av.widen())
            .saturating_add(terms.b.of_wide(bv.widen()));
        let v = terms.round_wide(sum).saturating_add(q.output_zero.into());
        *out = T::narrow(v.max(q.min.into()).min(q.max.into()) as i32);
    }
}

/// Integer multiplication (TFLite's quantized `Mul`): `(a − za)(b − zb)` rescaled. `pairs` walks
/// the output with the element offsets of A and B (broadcasting).
#[inline(always)]
pub fn qmul<T: QuantInt>(
    q: &QMul,
    a: &[T],
    b: &[T],
    y: &mut [T],
    pairs: impl FnOnce(&mut dyn FnMut([usize; 3])),
) {
    let rq = output_rescaler(q.rescale, q.output_zero, q.min, q.max);
    pairs(&mut |[o, ia, ib]| {
        if let (Some(slot), Some(av), Some(bv)) = (y.get_mut(o), a.get(ia), b.get(ib)) {
            let product = (av.widen() - q.a_zero) * (bv.widen() - q.b_zero);
            *slot = T::narrow(rq.apply(product));
        }
    });
}

/// Integer global average pooling: per plane of `plane` elements, `Σ (x − zx)` rescaled. Out of
/// line: it runs once a model, and inlined into each dispatch it cost a microcontroller's
/// firmware its unrolled loop again.
#[inline(never)]
pub fn qglobal_avg_pool<X: QuantInt, Y: QuantInt>(
    q: &QGlobalAvgPool,
    plane: usize,
    x: &[X],
    y: &mut [Y],
) {
    let r = &q.requantize;
    let rq = rescaler(q.rescale, r);
    for (out, xs) in y.iter_mut().zip(x.chunks_exact(plane.max(1))) {
        // `Σ x − n·zx` in wrapping int32: `Σ (x − zx)` as the fold over the plane takes it.
        let offset = r.input_zero.wrapping_mul(xs.len() as i32);
        let sum = plane_sum(xs).wrapping_sub(offset);
        *out = Y::narrow(rq.apply(sum));
    }
}

/// `Σ x` over a plane in wrapping int32: on x86-64, 8-bit values sixteen at a time by
/// `psadbw` (SSE2, every x86-64 CPU; DS-CNN's 64 planes of 125 bytes: the step 1.6 → 0.8 µs),
/// else a fold.
#[inline(always)]
fn plane_sum<X: QuantInt>(xs: &[X]) -> i32 {
    #[cfg(target_arch = "x86_64")]
    if !X::WIDE {
        return byte_sum(bytemuck::cast_slice(xs), X::MIN < 0);
    }
    xs.iter().fold(0i32, |acc, v| acc.wrapping_add(v.widen()))
}

/// The sum of `bytes` read as `i8` (`signed`) or `u8`, in wrapping int32: each sixteen bytes'
/// `psadbw` against zero (two exact 64-bit sums of eight), signed bytes first flipped to
/// `x + 128` and the 128s taken off after, the tail added one by one. Exact: every partial sum
/// fits 64 bits, so its low 32 bits are the wrapping sum's.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
fn byte_sum(bytes: &[u8], signed: bool) -> i32 {
    use core::arch::x86_64::*;
    let chunks = bytes.chunks_exact(16);
    let tail = chunks.remainder();
    let whole = (bytes.len() - tail.len()) as i64;
    // SAFETY: SSE2 is part of x86-64; each chunk holds the sixteen bytes loaded.
    let flipped = unsafe {
        let flip = _mm_set1_epi8(if signed { i8::MIN } else { 0 });
        let mut acc = _mm_setzero_si128();
        for chunk in chunks {
            let v = _mm_xor_si128(_mm_loadu_si128(chunk.as_ptr().cast()), flip);
            acc = _mm_add_epi64(acc, _mm_sad_epu8(v, _mm_setzero_si128()));
        }
        _mm_cvtsi128_si64(_mm_add_epi64(acc, _mm_unpackhi_epi64(acc, acc)))
    };
    let body = if signed {
        flipped - 128 * whole
    } else {
        flipped
    };
    let rest: i64 = tail
        .iter()
        .map(|&b| if signed { b as i8 as i64 } else { b as i64 })
        .sum();
    (body + rest) as i32
}

/// `round(x / (count · 2^right))`, ties to even (as QuantizeLinear rounds), exact in 64-bit
/// arithmetic (a divisor past 64 bits makes the quotient round to 0).
#[inline(always)]
fn divide_nearest(x: i64, count: i64, right: u32) -> i64 {
    match count.checked_mul(1i64 << right.min(62)) {
        Some(d) if d > 0 => {
            let (q, r) = floor_div_rem(x, d);
            // `r < d < 2^63`, so `r − (d − r)` compares 2r with d without overflow.
            let over_half = r - (d - r);
            q + (over_half > 0 || (over_half == 0 && q & 1 == 1)) as i64
        }
        _ => 0,
    }
}

/// `(x.div_euclid(d), x.rem_euclid(d))` for `d > 0`, by binary long division: a 32-bit core
/// then links no 64-bit division routine (2.4 KB of flash), and the few divisions per output
/// of a pool or softmax take a few dozen steps each.
#[inline(never)]
fn floor_div_rem(x: i64, d: i64) -> (i64, i64) {
    let den = d as u64;
    let (q, r) = crate::base::math::div_rem_u64(x.unsigned_abs(), den);
    // Floor division of a negative dividend: one more step down unless it divides exactly.
    match (x < 0, r == 0) {
        (false, _) => (q as i64, r as i64),
        (true, true) => ((q as i64).wrapping_neg(), 0),
        (true, false) => ((q as i64).wrapping_neg().wrapping_sub(1), (den - r) as i64),
    }
}

/// The right shift that applies a [`Rescale`]'s exponent to a product with its Q31 multiplier.
#[inline(always)]
fn rescale_right_shift(r: Rescale) -> u32 {
    (31 - r.shift).clamp(1, 62) as u32
}

/// Integer softmax along the middle axis of `[outer, len, inner]`: each element's table entry at
/// its distance from the maximum, divided by their sum and rescaled by `1/s_y` in 64-bit
/// integers (see [`QSoftmax`]).
pub fn qsoftmax(
    q: &QSoftmax,
    [outer, len, inner]: [usize; 3],
    (x, ty): (&[u8], Bytes8),
    table: &[i32],
    y: &mut [u8],
) {
    let right = rescale_right_shift(q.rescale);
    let multiplier = q.rescale.multiplier as i64;
    let entry = |max: i32, v: &u8| {
        let e = table
            .get((max - ty.value(*v)) as usize)
            .copied()
            .unwrap_or(0);
        e.clamp(0, 1 << QSOFTMAX_TABLE_BITS) as i64
    };
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| (o * len + j) * inner + i;
            let lane = || (0..len).filter_map(|j| x.get(at(j)));
            let Some(max) = lane().map(|v| ty.value(*v)).max() else {
                continue;
            };
            let sum: i64 = lane().map(|v| entry(max, v)).sum();
            for j in 0..len {
                if let (Some(v), Some(out)) = (x.get(at(j)), y.get_mut(at(j))) {
                    let p = divide_nearest(entry(max, v) * multiplier, sum, right);
                    let p = p.clamp(-(1 << 20), 1 << 20) as i32;
                    // max then min, not `clamp`, which panics when min > max (load refuses it).
                    *out = (p + q.output_zero).max(q.min).min(q.max) as u8;
                }
            }
        }
    }
}

/// Integer average pooling: per window, `Σ (x − input_zero)` over the positions `AveragePool`
/// counts (with or without padding), times `s_x / s_y`, divided by the count rounding to nearest.
pub fn qavg_pool(q: &QAvgPool, d: PoolDims, (x, ty): (&[u8], Bytes8), out: &mut [u8]) {
    let [n, c, h, w] = d.input;
    let [oh, ow] = d.output;
    let (p, r) = (&q.pool, &q.requantize);
    let win = &p.window;
    let [kh, kw] = win.kernel;
    let [dh, dw] = win.dilation;
    let [pt, pl, pb, pr] = win.pads;
    let right = rescale_right_shift(q.rescale);
    let multiplier = q.rescale.multiplier as i64;
    for (src, dst) in x
        .chunks_exact((h * w).max(1))
        .zip(out.chunks_exact_mut((oh * ow).max(1)))
        .take(n * c)
    {
        for (i, slot) in dst.iter_mut().enumerate() {
            let (oy, ox) = (i / ow.max(1), i % ow.max(1));
            let (y0, x0) = (oy * win.stride[0], ox * win.stride[1]);
            let (mut sum, mut count) = (0i64, 0i64);
            for ky in 0..kh {
                let iy = (y0 + ky * dh).wrapping_sub(pt);
                if iy >= h {
                    continue;
                }
                for kx in 0..kw {
                    let ix = (x0 + kx * dw).wrapping_sub(pl);
                    if ix >= w {
                        continue;
                    }
                    if let Some(v) = src.get(iy * w + ix) {
                        sum += (ty.value(*v) - r.input_zero) as i64;
                        count += 1;
                    }
                }
            }
            if p.count_include_pad {
                // The window clipped to the padded input (as the float kernel counts).
                let rows = ((kh - 1) * dh + 1).min((h + pt + pb).saturating_sub(y0));
                let cols = ((kw - 1) * dw + 1).min((w + pl + pr).saturating_sub(x0));
                count = (rows.div_ceil(dh.max(1)) * cols.div_ceil(dw.max(1))) as i64;
            }
            let v = divide_nearest(sum * multiplier, count, right).clamp(-(1 << 20), 1 << 20);
            *slot = (v as i32 + r.output_zero).max(r.min).min(r.max) as u8;
        }
    }
}

#[cfg(test)]
mod division_tests {
    use super::floor_div_rem;

    #[test]
    fn long_division_is_euclidean_division() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..100_000 {
            let x = (next() as i64) >> (next() % 64);
            let d = ((next() >> 1) as i64 >> (next() % 63)).max(1);
            assert_eq!(
                floor_div_rem(x, d),
                (x.div_euclid(d), x.rem_euclid(d)),
                "{x} / {d}"
            );
        }
        for (x, d) in [
            (i64::MIN, 1),
            (i64::MIN, i64::MAX),
            (i64::MAX, 1),
            (-1, i64::MAX),
            (0, 7),
        ] {
            assert_eq!(
                floor_div_rem(x, d),
                (x.div_euclid(d), x.rem_euclid(d)),
                "{x} / {d}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::base::requantize::{requantize, HighWordRequantizer};
    use std::vec;
    use std::vec::Vec;

    /// The real-valued multiplier a (multiplier, shift) pair stands for.
    fn real(multiplier: i32, shift: i32) -> f64 {
        multiplier as f64 / (1u64 << 31) as f64 * 2f64.powi(shift)
    }

    /// `acc · multiplier · 2^(shift − 31)` rounded half to even, in exact 128-bit arithmetic.
    fn exact_requantize(acc: impl Into<i64>, multiplier: i32, shift: i32) -> i32 {
        let p = acc.into() as i128 * multiplier as i128;
        let d = 1i128 << (31 - shift);
        let (q, r) = (p.div_euclid(d), p.rem_euclid(d));
        let q = match (2 * r).cmp(&d) {
            core::cmp::Ordering::Greater => q + 1,
            core::cmp::Ordering::Equal => q + (q & 1),
            core::cmp::Ordering::Less => q,
        };
        q.clamp(i32::MIN as i128, i32::MAX as i128) as i32
    }

    #[test]
    fn requantize_rounds_once_half_to_even() {
        // 0.75 = 0.75 * 2^0: multiplier 0.75 * 2^31, shift 0; and 0.003 = 0.768 * 2^-8.
        let cases = [
            ((1u32 << 31) as f64 * 0.75, 0),
            (0.768 * (1u64 << 31) as f64, -8),
        ];
        for (m, shift) in cases {
            let m = m.round() as i32;
            for acc in [-100_000, -1001, -3, -1, 0, 1, 2, 3, 999, 123_456] {
                let expected = (acc as f64 * real(m, shift)).round_ties_even() as i32;
                assert_eq!(requantize(acc, m, shift), expected, "{acc}");
            }
        }
        // Exact halves round to even, wherever the half falls.
        assert_eq!(requantize(3, 1 << 30, 0), 2); // 1.5 → 2
        assert_eq!(requantize(-3, 1 << 30, 0), -2); // −1.5 → −2
        assert_eq!(requantize(5, 1 << 30, 0), 2); // 2.5 → 2
        assert_eq!(requantize(12, 1 << 30, -2), 2); // 6 / 4 = 1.5 → 2
        assert_eq!(requantize(-12, 1 << 30, -2), -2); // −1.5 → −2
        assert_eq!(requantize(-20, 1 << 30, -2), -2); // −2.5 → −2
                                                      // (2^31 − 1)² / 2^31 = 2^31 − 2 + 2^-31, and a product past int32 saturates.
        assert_eq!(requantize(i32::MAX, i32::MAX, 0), i32::MAX - 1);
        assert_eq!(requantize(i32::MIN, i32::MIN, 30), i32::MAX);
    }

    /// A repeatable stream of pseudo-random `i32`s (a 64-bit LCG's high words) from `seed`.
    fn random_i32s(mut seed: u64) -> impl FnMut() -> i32 {
        move || {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 32) as i32
        }
    }

    #[test]
    fn requantize_equals_exact_rounding_everywhere() {
        let mut next = random_i32s(12345);
        let edges = [
            i32::MIN,
            i32::MIN + 1,
            -(1 << 30),
            -3,
            -1,
            0,
            1,
            3,
            1 << 30,
            i32::MAX,
        ];
        for &acc in &edges {
            for &m in &[0, 1 << 30, (1 << 30) + 1, i32::MAX] {
                for shift in -31..=30 {
                    let want = exact_requantize(acc, m, shift);
                    assert_eq!(requantize(acc, m, shift), want, "{acc} {m} {shift}");
                }
            }
        }
        for _ in 0..1_000_000 {
            let acc = next() >> (next() as u32 % 24);
            // Multipliers as the host makes them, in [2^30, 2^31), and some with trailing zeros
            // (power-of-two ratios: exact ties).
            let m = (1 << 30) | (next() & 0x3fff_ffff);
            let m2 = (1 << 30) | ((next() & 0x3f) << 24);
            let shift = -((next() as u32 % 32) as i32);
            for m in [m, m2] {
                assert_eq!(
                    requantize(acc, m, shift),
                    exact_requantize(acc, m, shift),
                    "{acc} {m} {shift}"
                );
            }
        }
    }

    /// The high-word form gives `apply`'s output for every shift it takes, with every output
    /// zero point and clamp, on edge and random accumulators and multipliers.
    #[test]
    fn high_word_requantizer_equals_apply() {
        let mut next = random_i32s(99);
        let clamps = [
            (0, -128, 127),
            (-5, -5, 127),
            (128, 0, 255),
            (3, 3, 100),
            (i32::MAX, i32::MIN, i32::MAX),
            (i32::MIN, i32::MIN, i32::MAX),
        ];
        let mut taken = 0;
        for shift in -31..=30 {
            for &(output_zero, min, max) in &clamps {
                let q = Requantize {
                    input_zero: 0,
                    output_zero,
                    min,
                    max,
                };
                for i in 0..20_000 {
                    let acc = match i {
                        0 => i32::MIN,
                        1 => i32::MAX,
                        2 => 0,
                        _ => next() >> (next() as u32 % 28),
                    };
                    let m = match i % 4 {
                        0 => (1 << 30) | (next() & 0x3fff_ffff),
                        1 => (1 << 30) | ((next() & 0x3f) << 24),
                        2 => i32::MAX,
                        _ => next(),
                    };
                    let rq = Requantizer::new([m, shift], &q);
                    let direct = HighWordRequantizer::new([m, shift], &q);
                    match rq.high_word() {
                        Some(fast) => {
                            taken += 1;
                            assert_eq!(fast.apply(acc), rq.apply(acc), "{acc} {m} {shift}");
                            let direct = direct.expect("the direct form exists too");
                            assert_eq!(direct.words(), fast.words());
                        }
                        None => {
                            assert!(shift >= -1, "shift {shift} has a high-word form");
                            assert!(direct.is_none());
                        }
                    }
                }
            }
        }
        assert_eq!(taken, 30 * 6 * 20_000);
    }

    /// Where [`HighWordRequantizer::has_ties`] says a scale has no ties, rounding without the
    /// tie test equals [`HighWordRequantizer::apply`] on every kind of accumulator (powers of
    /// two and their multiples above all, the ones nearest a tie); where it says it has, some
    /// accumulator is a tie.
    #[test]
    fn scales_without_ties_round_without_the_tie_test() {
        let mut next = random_i32s(7);
        let q = Requantize {
            input_zero: 0,
            output_zero: 0,
            min: i32::MIN,
            max: i32::MAX,
        };
        let mut tie_free = 0;
        for shift in -31..=-2 {
            for i in 0..400 {
                // Multipliers with every number of trailing zero bits.
                let m = ((1 << 30) | (next() & 0x3fff_ffff)) & (-1i32 << (i % 31));
                let h = HighWordRequantizer::new([m, shift], &q).expect("a high-word shift");
                let [_, half, high_shift, ..] = h.words();
                if h.has_ties() {
                    // 2^(31 + shift − t), as an int32 (−2^31 for 2^31), is a tie.
                    let t = m.trailing_zeros() as i32;
                    let acc = (1i64 << (31 + high_shift - t)) as i32;
                    let p = acc as i64 * m as i64;
                    assert_eq!(p.rem_euclid(1 << (32 + high_shift)), 1 << (31 + high_shift));
                    continue;
                }
                tie_free += 1;
                for j in 0..200 {
                    let acc = match j {
                        0..=31 => (1i64 << j) as i32,
                        32..=63 => (-(1i64 << (j - 32))) as i32,
                        64 => i32::MIN,
                        65 => i32::MAX,
                        _ => next() << (next() as u32 % 31),
                    };
                    let hi = ((acc as i64 * m as i64) >> 32) as i32 + half;
                    assert_eq!(hi >> high_shift, h.apply(acc), "{acc} {m} {shift}");
                }
            }
        }
        assert!(tie_free > 5000, "{tie_free} tie-free scales");
    }

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
                &conv,
                dims,
                &x,
                &wt,
                &bias,
                &rq,
                &mut y,
                &mut scratch
            ));
            let done = qconv(&conv, dims, &x, &wt, &bias, &rq, &mut y.clone(), &mut []);
            assert!(conv.is_pointwise() || !done, "no scratch: nothing done");
            let x32: Vec<i32> = x.iter().map(|&v| v.into()).collect();
            let exact = exact_accumulators(&conv, dims, &x32, &wt, &bias);
            for (i, (&got, &acc)) in y.iter().zip(&exact).enumerate() {
                let want = (requantize(acc as i32, rq[0], rq[1]) - 2).clamp(-128, 127) as i8;
                assert_eq!(got, want, "{geometry:?}: output {i}");
            }
        }
    }

    /// 64-bit accumulators (16-bit inputs) round as the definition does, and agree with the
    /// 32-bit path wherever both apply.
    #[test]
    fn apply_wide_equals_exact_rounding_on_64_bit_accumulators() {
        let mut next = random_i32s(2024);
        let q = |zero, min, max| Requantize {
            input_zero: 0,
            output_zero: zero,
            min,
            max,
        };
        for _ in 0..300_000 {
            let wide =
                ((next() as i64) << 20 | (next() as u32 >> 12) as i64) >> (next() as u32 % 40);
            let narrow = next() >> (next() as u32 % 24);
            let m = (1 << 30) | (next() & 0x3fff_ffff);
            let m2 = (1 << 30) | ((next() & 0x3f) << 24);
            let shift = -((next() as u32 % 32) as i32);
            for m in [m, m2] {
                let r = Requantizer::new([m, shift], &q(0, i32::MIN, i32::MAX));
                assert_eq!(
                    r.apply_wide(wide),
                    exact_requantize(wide, m, shift),
                    "{wide} {m} {shift}"
                );
                assert_eq!(
                    r.apply_wide(narrow.into()),
                    r.apply(narrow),
                    "{narrow} {m} {shift}"
                );
                let r = Requantizer::new([m, shift], &q(-7, -32768, 32767));
                let want = exact_requantize(wide, m, shift)
                    .saturating_add(-7)
                    .clamp(-32768, 32767);
                assert_eq!(r.apply_wide(wide), want);
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
            let done = qconv(&conv, dims, &x, &wt, &bias, &rq, &mut y.clone(), &mut []);
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

    /// A 16 × 8 matrix product whose rows end in a short group of weights (K not a multiple
    /// of 4), against the definition.
    #[test]
    fn qgemm_on_int16_takes_any_row_length() {
        let mut next = random_i32s(17);
        for k in [1, 3, 7, 13] {
            let (m, n) = (2, 5);
            let a: Vec<i16> = (0..m * k).map(|_| (next() >> 16) as i16).collect();
            let rows: Vec<i8> = (0..n * k).map(|_| (next() >> 24) as i8).collect();
            let bias: Vec<i32> = (0..n).map(|_| next() >> 12).collect();
            let rq = [(1 << 30) | 777, -9];
            let q = Requantize {
                input_zero: 45,
                output_zero: -3,
                min: -32768,
                max: 32767,
            };
            let mut y = vec![0i16; m * n];
            qgemm(
                &q,
                [m, k, n],
                QGemmWeights::Rows,
                &a,
                &rows,
                &bias,
                &rq,
                &mut y,
            );
            for r in 0..m {
                for c in 0..n {
                    let dot: i64 = (0..k)
                        .map(|i| (a[r * k + i] as i64 - 45) * rows[c * k + i] as i64)
                        .sum();
                    let v = exact_requantize(dot + bias[c] as i64, rq[0], rq[1]) - 3;
                    assert_eq!(y[r * n + c] as i32, v.clamp(-32768, 32767), "k {k}");
                }
            }
        }
    }

    /// A 16 × 8 matrix product in both weight layouts against the definition, with sums past
    /// int32.
    #[test]
    fn qgemm_on_int16_matches_the_definition_in_both_layouts() {
        let mut next = random_i32s(61);
        let (m, k, n) = (3, 1024, 8);
        let a: Vec<i16> = (0..m * k)
            .map(|i| {
                if i % 2 == 0 {
                    32767
                } else {
                    (next() >> 16) as i16
                }
            })
            .collect();
        let rows: Vec<i8> = (0..n * k)
            .map(|i| {
                if i % 2 == 0 {
                    127
                } else {
                    (next() >> 24) as i8
                }
            })
            .collect();
        let bias: Vec<i32> = (0..n).map(|_| next() >> 8).collect();
        let rq = [(1 << 30) | 12345, -20];
        let q = Requantize {
            input_zero: -1000,
            output_zero: 3000,
            min: -32768,
            max: 32767,
        };
        let mut want = vec![0i16; m * n];
        let mut largest = 0i64;
        for r in 0..m {
            for c in 0..n {
                let mut acc = bias[c] as i64;
                for i in 0..k {
                    acc += (a[r * k + i] as i64 + 1000) * rows[c * k + i] as i64;
                }
                largest = largest.max(acc.abs());
                let v = exact_requantize(acc, rq[0], rq[1]).saturating_add(3000);
                want[r * n + c] = v.clamp(-32768, 32767) as i16;
            }
        }
        assert!(largest > i32::MAX as i64, "{largest}");
        let blocked: Vec<i8> = (0..n * k)
            .map(|i| {
                let (block, group, c, kk) = (i / (4 * k), i / 16 % (k / 4), i / 4 % 4, i % 4);
                rows[(4 * block + c) * k + 4 * group + kk]
            })
            .collect();
        for (layout, weights) in [
            (QGemmWeights::Rows, &rows),
            (QGemmWeights::Blocked, &blocked),
        ] {
            let mut y = vec![0i16; m * n];
            qgemm(&q, [m, k, n], layout, &a, weights, &bias, &rq, &mut y);
            assert_eq!(y, want, "{layout:?}");
        }
    }

    /// `real` as a rescale (the host's `quantize_multiplier`, restated for the test).
    fn rescale_of(real: f64) -> Rescale {
        let shift = real.log2().floor() as i32 + 1;
        let multiplier = (real / 2f64.powi(shift) * (1u64 << 31) as f64).round() as i64;
        Rescale {
            multiplier: multiplier.min(i32::MAX as i64) as i32,
            shift,
        }
    }

    #[test]
    fn qadd_matches_real_arithmetic_within_one_step() {
        let (sa, sb, sy) = (0.02f64, 0.05f64, 0.06f64);
        let (za, zb, zy) = (-7, 12, 3);
        let twice_max = 2.0 * sa.max(sb);
        let q = QAdd {
            a: rescale_of(sa / twice_max),
            b: rescale_of(sb / twice_max),
            output: rescale_of(twice_max / ((1 << QADD_LEFT_SHIFT) as f64 * sy)),
            a_zero: za,
            b_zero: zb,
            output_zero: zy,
            min: -128,
            max: 127,
        };
        let a: Vec<i8> = (0..256).map(|i| (i - 128) as i8).collect();
        let b: Vec<i8> = (0..256).map(|i| ((i * 37 % 256) - 128) as i8).collect();
        let mut y = vec![0i8; 256];
        qadd(&q, &a, &b, &mut y, &mut []);
        let mut tabled = vec![0i8; 256];
        qadd(&q, &a, &b, &mut tabled, &mut [0; 512]);
        assert_eq!(y, tabled, "tables change nothing");
        for i in 0..256 {
            let real = (sa * (a[i] as i32 - za) as f64 + sb * (b[i] as i32 - zb) as f64) / sy;
            // Decimal scales make some sums exact halves that neither f64 nor the Q31
            // multipliers represent exactly: either neighbour is right there.
            if ((real - real.floor()) - 0.5).abs() < 1e-6 {
                continue;
            }
            let want = (real.round_ties_even() as i32 + zy).clamp(-128, 127);
            assert_eq!(y[i] as i32, want, "{i}");
        }
    }

    /// [`qadd`] with its vector forms (each term computed eight at a time where it has a
    /// vector form, else tables read by gathers, on x86-64 with AVX2) equals the scalar
    /// definition element for element: random scale ratios from 2^-12 to 2^12 between the
    /// inputs and the output, zero points, clamps, int8 and uint8 inputs and outputs, lengths
    /// with and without a tail of fewer than eight.
    #[test]
    fn qadd_vector_forms_equal_the_scalar_form() {
        fn check<A: QuantByte, B: QuantByte, Y: QuantInt>(next: &mut impl FnMut() -> u64) -> bool {
            let ratio = |r: u64| 2f64.powf((r % 2400) as f64 / 100.0 - 12.0);
            let (sa, sb, sy) = (ratio(next()), ratio(next()), ratio(next()));
            let twice_max = 2.0 * sa.max(sb);
            let in_range = |r: u64, lo: i32, hi: i32| lo + (r % (hi - lo + 1) as u64) as i32;
            let (lo, hi) = (
                in_range(next(), Y::MIN, Y::MAX),
                in_range(next(), Y::MIN, Y::MAX),
            );
            let q = QAdd {
                a: rescale_of(sa / twice_max),
                b: rescale_of(sb / twice_max),
                output: rescale_of(twice_max / ((1 << QADD_LEFT_SHIFT) as f64 * sy)),
                a_zero: in_range(next(), A::MIN, A::MAX),
                b_zero: in_range(next(), B::MIN, B::MAX),
                output_zero: in_range(next(), Y::MIN, Y::MAX),
                min: lo.min(hi),
                max: lo.max(hi),
            };
            let len = (next() % 70) as usize;
            let a: Vec<A> = (0..len).map(|_| A::from_byte(next() as u8)).collect();
            let b: Vec<B> = (0..len).map(|_| B::from_byte(next() as u8)).collect();
            let terms = AddTerms::new(&q, false);
            let want: Vec<i32> = a
                .iter()
                .zip(&b)
                .map(|(&av, &bv)| {
                    let sum = terms
                        .a
                        .of(av.widen())
                        .saturating_add(terms.b.of(bv.widen()));
                    let v = terms.round(sum).saturating_add(q.output_zero);
                    v.max(q.min).min(q.max)
                })
                .collect();
            for tables in [0, 512] {
                let mut y = vec![Y::narrow(0); len];
                qadd(&q, &a, &b, &mut y, &mut vec![0; tables]);
                let got: Vec<i32> = y.iter().map(|v| v.widen()).collect();
                assert_eq!(got, want, "{q:?}");
            }
            #[cfg(all(feature = "std", target_arch = "x86_64"))]
            return terms.a.vector_form(A::MIN, A::MAX).is_some()
                && terms.b.vector_form(B::MIN, B::MAX).is_some();
            #[cfg(not(all(feature = "std", target_arch = "x86_64")))]
            false
        }
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut computed = 0;
        for _ in 0..300 {
            computed += check::<i8, i8, i8>(&mut next) as usize;
            computed += check::<u8, u8, u8>(&mut next) as usize;
            computed += check::<i8, u8, i8>(&mut next) as usize;
            computed += check::<u8, i8, u8>(&mut next) as usize;
        }
        // Most scale ratios have the vector form (those past 2^23 apart do not).
        #[cfg(all(feature = "std", target_arch = "x86_64"))]
        assert!(computed > 600, "vector forms: {computed} of 1200");
        let _ = computed;
    }

    #[test]
    fn qadd_rounds_exact_halves_to_even() {
        // s_a / s_y = 1/2 and s_b / s_y = 1/4: many sums are exact halves.
        let (sa, sb, sy) = (0.5f64, 0.25f64, 1.0f64);
        let twice_max = 2.0 * sa.max(sb);
        let q = QAdd {
            a: rescale_of(sa / twice_max),
            b: rescale_of(sb / twice_max),
            output: rescale_of(twice_max / ((1 << QADD_LEFT_SHIFT) as f64 * sy)),
            a_zero: 3,
            b_zero: -5,
            output_zero: 1,
            min: -128,
            max: 127,
        };
        let a: Vec<i8> = (0..256).map(|i| (i - 128) as i8).collect();
        let b: Vec<i8> = (0..256).map(|i| ((i * 91 % 256) - 128) as i8).collect();
        let mut y = vec![0i8; 256];
        qadd(&q, &a, &b, &mut y, &mut [0; 512]);
        for i in 0..256 {
            let real = sa * (a[i] as i32 - 3) as f64 + sb * (b[i] as i32 + 5) as f64;
            let want = ((real / sy).round_ties_even() as i32 + 1).clamp(-128, 127);
            assert_eq!(y[i] as i32, want, "{i}: {real}");
        }
    }

    /// 16-bit addition: the real sum rounded once, over the whole input range (near-halves
    /// aside, which the Q31 ratios cannot place), and exact halves to even.
    #[test]
    fn qadd_of_int16_rounds_the_real_sum_once() {
        let mut next = random_i32s(5);
        for (sa, sb, sy, za, zb, zy) in [
            (2e-4f64, 5e-4f64, 7e-4f64, -1700, 300, 12),
            (3.1e-5, 3.1e-5, 2.9e-5, 0, 0, 0),
            (0.5, 0.25, 1.0, 3, -5, 1),
        ] {
            let twice_max = 2.0 * sa.max(sb);
            let q = QAdd {
                a: rescale_of(sa / twice_max),
                b: rescale_of(sb / twice_max),
                output: rescale_of(twice_max / ((1 << QADD_LEFT_SHIFT) as f64 * sy)),
                a_zero: za,
                b_zero: zb,
                output_zero: zy,
                min: -32768,
                max: 32767,
            };
            let a: Vec<i16> = (0..4096)
                .map(|i| {
                    if i < 2 {
                        [-32768, 32767][i]
                    } else {
                        (next() >> 16) as i16
                    }
                })
                .collect();
            let b: Vec<i16> = (0..4096).map(|_| (next() >> 16) as i16).collect();
            let mut y = vec![0i16; a.len()];
            qadd_wide(&q, &a, &b, &mut y);
            let mut checked = 0;
            for i in 0..a.len() {
                let real = (sa * (a[i] as i32 - za) as f64 + sb * (b[i] as i32 - zb) as f64) / sy;
                let half = ((real - real.floor()) - 0.5).abs();
                let exact_half = half == 0.0 && sa == 0.5;
                if half < 1e-3 && !exact_half {
                    continue;
                }
                let want = (real.round_ties_even() as i64 + zy as i64).clamp(-32768, 32767);
                assert_eq!(
                    y[i] as i64, want,
                    "{sa} {sb} {sy}: {} {} → {real}",
                    a[i], b[i]
                );
                checked += 1;
            }
            assert!(checked > 4000, "{checked}");
        }
    }

    #[test]
    fn plane_sums_equal_the_wrapping_fold() {
        let mut seed = 11u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as u32
        };
        for case in 0..2000 {
            let len = (next() % 300) as usize;
            // Uniform bytes, or runs of the extremes (where a wrong offset or sign shows).
            let bytes: Vec<u8> = (0..len)
                .map(|_| match case % 3 {
                    0 => next() as u8,
                    1 => [0u8, 127, 128, 255][(next() % 4) as usize],
                    _ => 255,
                })
                .collect();
            let signed: Vec<i8> = bytes.iter().map(|&b| b as i8).collect();
            let fold_u = bytes.iter().fold(0i32, |a, &v| a.wrapping_add(v as i32));
            let fold_i = signed.iter().fold(0i32, |a, &v| a.wrapping_add(v as i32));
            assert_eq!(plane_sum(&bytes), fold_u, "u8 case {case}, {len} bytes");
            assert_eq!(plane_sum(&signed), fold_i, "i8 case {case}, {len} bytes");
        }
        let wide: Vec<i16> = (0..100).map(|i| (i * 977 % 65536 - 32768) as i16).collect();
        let fold = wide.iter().fold(0i32, |a, &v| a.wrapping_add(v as i32));
        assert_eq!(plane_sum(&wide), fold);
    }

    #[test]
    fn qglobal_avg_pool_matches_real_arithmetic_within_one_step() {
        let (sx, sy, plane) = (0.1f64, 0.03f64, 25usize);
        let q = QGlobalAvgPool {
            rescale: rescale_of(sx / (sy * plane as f64)),
            requantize: Requantize {
                input_zero: -128,
                output_zero: -128,
                min: -128,
                max: 127,
            },
        };
        let x: Vec<i8> = (0..4 * plane)
            .map(|i| ((i * 53 % 256) as i32 - 128) as i8)
            .collect();
        let mut y = vec![0i8; 4];
        qglobal_avg_pool(&q, plane, &x, &mut y);
        for (c, out) in y.iter().enumerate() {
            let mean: f64 = x[c * plane..(c + 1) * plane]
                .iter()
                .map(|&v| sx * (v as i32 + 128) as f64)
                .sum::<f64>()
                / plane as f64;
            let want = ((mean / sy).round() as i32 - 128).clamp(-128, 127);
            assert!((*out as i32 - want).abs() <= 1, "{c}: {out} vs {want}");
        }
    }

    #[test]
    fn qgemm_subtracts_the_input_zero_point_and_clamps() {
        let q = Requantize {
            input_zero: 10,
            output_zero: -5,
            min: -128,
            max: 20,
        };
        // a = [12, 8] (values 2, -2 after the zero point); b has one row per output:
        // [1, 2] and [3, -4].
        let mut y = [0i8; 2];
        let one = [1 << 30, 1]; // multiplier 0.5 * 2^1 = 1.0
        qgemm(
            &q,
            [1, 2, 2],
            QGemmWeights::Rows,
            &[12i8, 8],
            &[1, 2, 3, -4],
            &[100, 0],
            &one,
            &mut y,
        );
        // col 0: 100 + 2 - 4 = 98 → 98 - 5 = 93 → clamped to 20; col 1: 6 + 8 = 14 → 9.
        assert_eq!(y, [20, 9]);
    }

    #[test]
    fn qgemm_blocked_weights_give_the_rows_results() {
        let q = Requantize {
            input_zero: -3,
            output_zero: 7,
            min: -128,
            max: 127,
        };
        let (m, k, n) = (3, 24, 8);
        let value = |i: usize| ((i * 37 + 11) % 256) as u8 as i8;
        let a: Vec<i8> = (0..m * k).map(value).collect();
        let rows: Vec<i8> = (0..n * k).map(|i| value(i * 7 + 3)).collect();
        // [N/4, K/4, 4, 4]: block, group of four k, column in the block, k in the group.
        let mut blocked = vec![0i8; n * k];
        for (i, w) in blocked.iter_mut().enumerate() {
            let (block, group, c, kk) = (i / (4 * k), i / 16 % (k / 4), i / 4 % 4, i % 4);
            *w = rows[(4 * block + c) * k + 4 * group + kk];
        }
        let bias: Vec<i32> = (0..n as i32).map(|c| c * 50 - 200).collect();
        let pairs: Vec<i32> = (0..n as i32)
            .flat_map(|c| [(1 << 30) + c * 1000, -6 - c % 3])
            .collect();
        let (mut y_rows, mut y_blocked) = (vec![0i8; m * n], vec![0i8; m * n]);
        qgemm(
            &q,
            [m, k, n],
            QGemmWeights::Rows,
            &a,
            &rows,
            &bias,
            &pairs,
            &mut y_rows,
        );
        let layout = QGemmWeights::Blocked;
        qgemm(
            &q,
            [m, k, n],
            layout,
            &a,
            &blocked,
            &bias,
            &pairs,
            &mut y_blocked,
        );
        assert_eq!(y_rows, y_blocked);
        assert!(y_rows.iter().any(|&v| v != y_rows[0]), "a degenerate case");
    }

    #[test]
    fn qsoftmax_is_within_one_step_of_float_softmax() {
        let (sx, sy, zy) = (0.07f64, 1.0f64 / 256.0, -128);
        let table: Vec<i32> = (0..256)
            .map(|d| ((1u64 << 30) as f64 * (-sx * d as f64).exp()).round() as i32)
            .collect();
        let q = QSoftmax {
            axis: 1,
            rescale: rescale_of(1.0 / sy),
            output_zero: zy,
            min: -128,
            max: 127,
        };
        // [2, 10, 3]: softmax over the middle axis; inputs span the whole int8 range.
        let x: Vec<i8> = (0..60).map(|i| ((i * 97 + 13) % 256) as u8 as i8).collect();
        let mut y = vec![0i8; 60];
        let xb: Vec<u8> = x.iter().map(|&v| v as u8).collect();
        let bytes = |y: &mut Vec<i8>| -> Vec<u8> { y.iter().map(|&v| v as u8).collect() };
        let mut yb = bytes(&mut y);
        qsoftmax(&q, [2, 10, 3], (&xb, Bytes8::INT8), &table, &mut yb);
        y = yb.iter().map(|&v| v as i8).collect();
        // uint8: the same values 128 up give the same probabilities 128 up.
        let flipped: Vec<u8> = xb.iter().map(|&v| v ^ 0x80).collect();
        let q8 = QSoftmax {
            output_zero: zy + 128,
            min: 0,
            max: 255,
            ..q
        };
        let mut y8 = vec![0u8; 60];
        qsoftmax(&q8, [2, 10, 3], (&flipped, Bytes8::UINT8), &table, &mut y8);
        assert!(
            y8.iter().zip(&yb).all(|(&u, &s)| u == s ^ 0x80),
            "uint8 vs int8"
        );
        let mut exact = 0;
        for o in 0..2 {
            for i in 0..3 {
                let at = |j: usize| (o * 10 + j) * 3 + i;
                let reals: Vec<f64> = (0..10).map(|j| sx * x[at(j)] as f64).collect();
                let max = reals.iter().cloned().fold(f64::MIN, f64::max);
                let sum: f64 = reals.iter().map(|v| (v - max).exp()).sum();
                for j in 0..10 {
                    let p = (reals[j] - max).exp() / sum;
                    let want = ((p / sy).round() as i32 + zy).clamp(-128, 127);
                    let got = y[at(j)] as i32;
                    assert!((got - want).abs() <= 1, "{o},{j},{i}: {got} vs {want}");
                    exact += (got == want) as usize;
                }
            }
        }
        assert!(exact >= 57, "only {exact} of 60 exact");
        // A hostile table (negative, huge, all zero) still gives values of the type.
        qsoftmax(&q, [2, 10, 3], (&xb, Bytes8::INT8), &[-5; 256], &mut yb);
        qsoftmax(
            &q,
            [2, 10, 3],
            (&xb, Bytes8::INT8),
            &[i32::MAX; 256],
            &mut yb,
        );
    }

    #[test]
    fn qavg_pool_matches_float_average_pooling_with_and_without_padding() {
        use ferrite_hal::op::{Pool, Window};
        let (sx, zx, sy, zy) = (0.05f64, 3, 0.04f64, -7);
        let (h, w) = (5, 6);
        let x: Vec<i8> = (0..2 * h * w)
            .map(|i| ((i * 71 + 5) % 256) as u8 as i8)
            .collect();
        for count_include_pad in [false, true] {
            for (dilation, ceil_mode) in [([1, 1], false), ([2, 1], false), ([1, 1], true)] {
                let window = Window {
                    kernel: [3, 2],
                    stride: [2, 2],
                    dilation,
                    pads: [1, 1, 1, 0],
                };
                let pool = Pool {
                    window,
                    ceil_mode,
                    count_include_pad,
                };
                let q = QAvgPool {
                    pool,
                    rescale: rescale_of(sx / sy),
                    requantize: Requantize {
                        input_zero: zx,
                        output_zero: zy,
                        min: -128,
                        max: 127,
                    },
                };
                let out = |len: usize, k: usize, d: usize, p: usize| {
                    let span = (k - 1) * d + 1;
                    let v = (len + p - span) as f64 / 2.0;
                    (if ceil_mode { v.ceil() } else { v.floor() }) as usize + 1
                };
                let (oh, ow) = (out(h, 3, dilation[0], 2), out(w, 2, dilation[1], 1));
                let d = PoolDims {
                    input: [1, 2, h, w],
                    output: [oh, ow],
                };
                let reals: Vec<f32> = x
                    .iter()
                    .map(|&v| ((v as i32 - zx) as f64 * sx) as f32)
                    .collect();
                let mut float = vec![0f32; 2 * oh * ow];
                crate::ops::pool::reference::pool(&pool, d, false, &reals, &mut float);
                let xb: Vec<u8> = x.iter().map(|&v| v as u8).collect();
                let mut yb = vec![0u8; 2 * oh * ow];
                qavg_pool(&q, d, (&xb, Bytes8::INT8), &mut yb);
                let y: Vec<i8> = yb.iter().map(|&v| v as i8).collect();
                // uint8: the same values 128 up give the same averages 128 up.
                let flipped: Vec<u8> = xb.iter().map(|&v| v ^ 0x80).collect();
                let q8 = QAvgPool {
                    requantize: Requantize {
                        input_zero: zx + 128,
                        output_zero: zy + 128,
                        min: 0,
                        max: 255,
                    },
                    ..q
                };
                let mut y8 = vec![0u8; 2 * oh * ow];
                qavg_pool(&q8, d, (&flipped, Bytes8::UINT8), &mut y8);
                assert!(
                    y8.iter().zip(&yb).all(|(&u, &s)| u == s ^ 0x80),
                    "uint8 vs int8"
                );
                for (k, (&got, &f)) in y.iter().zip(&float).enumerate() {
                    let want = ((f as f64 / sy).round() as i32 + zy).clamp(-128, 127);
                    assert!(
                        (got as i32 - want).abs() <= 1,
                        "{count_include_pad} {dilation:?} {ceil_mode} #{k}: {got} vs {want}"
                    );
                }
            }
        }
    }
}
