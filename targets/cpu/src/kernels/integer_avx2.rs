//! AVX2 kernels for 8-bit integer convolutions on x86-64 hosts (`std`): the sums of the portable
//! kernels in [`super::integer`] — exact in wrapping int32, so equal to theirs bit for bit — and
//! the same single rounding, vectorised:
//!
//! - products of int16-widened values summed in pairs by `vpmaddwd` (exact: `vpmaddubsw`'s
//!   saturating int16 pair sums, which onnxruntime's kernels use, would not be);
//! - requantization of eight outputs at once in the high-word form
//!   ([`super::integer::HighWordRequantizer`]), scalar for the rare scales without one.
//!
//! Pointwise convolutions multiply pairs of input channels, interleaved on the fly, by the
//! weights of four output channels at a time; depthwise ones of stride 1 run every tap as one
//! contiguous pass over the zero-point-padded plane (outputs computed on its full width, the
//! columns past the output's discarded); the others unfold four windows into the step's scratch
//! columns and take two output channels at a time. Everything else stays with the portable
//! kernels.

#![allow(unsafe_code)]

use super::conv::ConvDims;
use super::integer::Requantizer;
use super::quantize::QuantInt;
use core::arch::x86_64::*;
use ferrite_hal::op::{QConv, Requantize};
use std::cell::RefCell;
use std::vec::Vec;

std::thread_local! {
    /// Reused buffer of a depthwise channel's outputs on the padded plane's width.
    static GRID: RefCell<Vec<i32>> = const { RefCell::new(Vec::new()) };
}

/// [`super::integer::qconv`] with an AVX2 kernel, when the build runs them and one fits the
/// step: 8-bit activations, and a pointwise, stride-1 depthwise or unfolded geometry. `None`
/// leaves the step to the portable kernels; `Some(false)` is a scratch or operand too small
/// (which the verifier rules out).
#[allow(clippy::too_many_arguments)]
pub(super) fn qconv<X: QuantInt, Y: QuantInt>(
    c: &QConv,
    d: ConvDims,
    x: &[X],
    w: &[i8],
    bias: &[i32],
    requant: &[i32],
    y: &mut [Y],
    scratch: &mut [u8],
) -> Option<bool> {
    if X::WIDE || Y::WIDE || super::simd::level() < super::simd::Level::Avx2 {
        return None;
    }
    let group = c.group.max(1);
    let icg = d.c / group;
    let depthwise = icg == 1 && group > 1;
    let ops = Operands {
        w,
        bias,
        requant,
        q: &c.requantize,
    };
    // SAFETY: the CPU has AVX2 (`simd::level`).
    unsafe {
        if c.is_pointwise() {
            return pointwise(&ops, &d, bytemuck::cast_slice(x), X::MIN < 0, y);
        }
        if depthwise && c.window.stride == [1, 1] {
            return Some(depthwise_stride_one(
                c,
                &ops,
                &d,
                bytemuck::cast_slice(x),
                X::MIN < 0,
                y,
                scratch,
            ));
        }
        if !depthwise {
            return columns(c, &ops, &d, x, y);
        }
    }
    None
}

/// A step's weights and requantization.
struct Operands<'a> {
    w: &'a [i8],
    bias: &'a [i32],
    requant: &'a [i32],
    q: &'a Requantize,
}

impl Operands<'_> {
    fn rescaler(&self, channel: usize) -> Requantizer {
        Requantizer::of_channel(self.requant, channel, self.q)
    }
}

/// One channel's requantization, eight lanes at a time: [`Requantizer::apply`] bit for bit.
#[derive(Clone, Copy)]
struct Lanes {
    scalar: Requantizer,
    /// The high-word form's `[multiplier, half, mask, zero, min, max]` in every lane and its
    /// shift; `None` for a scale without one (every lane computed by `scalar`).
    vector: Option<([__m256i; 6], __m128i)>,
}

impl Lanes {
    #[target_feature(enable = "avx2")]
    fn new(scalar: Requantizer) -> Lanes {
        let vector = scalar.high_word().map(|h| {
            let [multiplier, half, shift, mask, zero, min, max] = h.words();
            #[allow(clippy::redundant_closure)] // an intrinsic is not an `FnMut`
            let lanes = [multiplier, half, mask, zero, min, max].map(|v| _mm256_set1_epi32(v));
            (lanes, _mm_cvtsi32_si128(shift))
        });
        Lanes { scalar, vector }
    }

    /// The output integers of eight accumulators.
    #[target_feature(enable = "avx2")]
    fn apply(&self, acc: __m256i) -> [i32; 8] {
        let mut out = [0i32; 8];
        let Some(([multiplier, half, mask, zero, min, max], shift)) = self.vector else {
            // SAFETY: `out` holds eight int32s.
            unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast(), acc) };
            return out.map(|a| self.scalar.apply(a));
        };
        // The 64-bit products of the even and the odd lanes, then their high and low words.
        let even = _mm256_mul_epi32(acc, multiplier);
        let odd = _mm256_mul_epi32(_mm256_srli_epi64::<32>(acc), multiplier);
        let high = _mm256_blend_epi32::<0b1010_1010>(_mm256_srli_epi64::<32>(even), odd);
        let low = _mm256_blend_epi32::<0b1010_1010>(even, _mm256_slli_epi64::<32>(odd));
        let high = _mm256_add_epi32(high, half);
        // A tie: the low word and the bits the shift drops all clear; it goes to the even side.
        let dropped = _mm256_or_si256(_mm256_and_si256(high, mask), low);
        let tie = _mm256_cmpeq_epi32(dropped, _mm256_setzero_si256());
        let tie_bit = _mm256_and_si256(tie, _mm256_set1_epi32(1));
        let rounded = _mm256_andnot_si256(tie_bit, _mm256_sra_epi32(high, shift));
        // |rounded| < 2^30 and the zero point is 16-bit: the sum cannot overflow.
        let clamped = _mm256_min_epi32(_mm256_max_epi32(_mm256_add_epi32(rounded, zero), min), max);
        // SAFETY: `out` holds eight int32s.
        unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast(), clamped) };
        out
    }
}

/// Eight 8-bit values from `bytes[at..at + 8]` widened to int32 lanes.
///
/// # Safety
/// `at + 8 <= bytes.len()`.
#[target_feature(enable = "avx2")]
unsafe fn widen8<const SIGNED: bool>(bytes: &[u8], at: usize) -> __m256i {
    // SAFETY: the caller keeps the eight bytes in bounds.
    let v = unsafe { _mm_loadl_epi64(bytes.as_ptr().add(at).cast()) };
    if SIGNED {
        _mm256_cvtepi8_epi32(v)
    } else {
        _mm256_cvtepu8_epi32(v)
    }
}

/// `bias − zx · Σ w`: what a channel's sum of raw products is offset by.
fn base(bias: i32, zx: i32, weights: &[i8]) -> i32 {
    let sum = weights.iter().fold(0i32, |s, &v| s.wrapping_add(v as i32));
    bias.wrapping_sub(zx.wrapping_mul(sum))
}

/// Every output channel's weights as int16 pairs, offset and requantization, worked out once
/// per step.
struct Channels {
    /// Channel `o`'s weights `2i, 2i + 1` as one word (low half: `2i`), `pairs` per channel.
    words: Vec<i32>,
    pairs: usize,
    /// `bias − zx · Σ w`: what the channel's sum of raw products is offset by.
    bases: Vec<i32>,
    lanes: Vec<Lanes>,
}

impl Channels {
    /// From weight rows of `k` values, one per output channel.
    #[target_feature(enable = "avx2")]
    fn new(ops: &Operands<'_>, k: usize, channels: usize) -> Channels {
        let pairs = k.div_ceil(2);
        let rows = ops.w.chunks_exact(k.max(1)).take(channels);
        let mut words = Vec::with_capacity(channels * pairs);
        let mut bases = Vec::with_capacity(channels);
        for (o, row) in rows.enumerate() {
            let half = |i: usize| row.get(i).map_or(0, |&v| v as i16 as u16 as u32);
            words.extend((0..pairs).map(|p| (half(2 * p) | (half(2 * p + 1) << 16)) as i32));
            let bias = ops.bias.get(o).copied().unwrap_or(0);
            bases.push(base(bias, ops.q.input_zero, row));
        }
        let lanes = (0..channels).map(|o| Lanes::new(ops.rescaler(o))).collect();
        Channels {
            words,
            pairs,
            bases,
            lanes,
        }
    }
}

/// Eight positions of `k` rows of 8-bit values (`stride` apart in `x`, from `p0`) for output
/// channels `o..o + B`: each pair of rows interleaved into int16 pairs once, meeting each
/// channel's weight pair in one `vpmaddwd`; the sums offset, requantized and written to
/// `y[(o + j)·y_stride + y_at ..][..8]`.
///
/// # Safety
/// `x` holds `(k − 1)·stride + p0 + 8` bytes; `ch` covers channels below `o + B`; `y` holds
/// `(o + B − 1)·y_stride + y_at + 8` outputs.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2")]
unsafe fn product_block<const SIGNED: bool, const B: usize, Y: QuantInt>(
    ch: &Channels,
    x: &[u8],
    k: usize,
    stride: usize,
    p0: usize,
    o: usize,
    y: &mut [Y],
    [y_stride, y_at]: [usize; 2],
) {
    let pairs = ch.pairs;
    let mut acc = [_mm256_setzero_si256(); B];
    let xp = x.as_ptr();
    let words = ch.words.as_ptr();
    for pair in 0..pairs {
        let i = 2 * pair;
        // SAFETY: rows i (and i + 1 when below k) hold eight bytes from p0 (the caller's bound).
        let (first, second) = unsafe {
            let first = _mm_loadl_epi64(xp.add(i * stride + p0).cast());
            let second = if i + 1 < k {
                _mm_loadl_epi64(xp.add((i + 1) * stride + p0).cast())
            } else {
                _mm_setzero_si128()
            };
            (first, second)
        };
        let interleaved = _mm_unpacklo_epi8(first, second);
        let values = if SIGNED {
            _mm256_cvtepi8_epi16(interleaved)
        } else {
            _mm256_cvtepu8_epi16(interleaved)
        };
        for (j, acc) in acc.iter_mut().enumerate() {
            // SAFETY: channel o + j has `pairs` words (the caller's bound).
            let word = unsafe { *words.add((o + j) * pairs + pair) };
            *acc = _mm256_add_epi32(*acc, _mm256_madd_epi16(values, _mm256_set1_epi32(word)));
        }
    }
    for (j, acc) in acc.iter().enumerate() {
        let sums = _mm256_add_epi32(*acc, _mm256_set1_epi32(ch.bases[o + j]));
        let out = ch.lanes[o + j].apply(sums);
        let at = (o + j) * y_stride + y_at;
        for (slot, v) in y[at..at + 8].iter_mut().zip(out) {
            *slot = Y::narrow(v);
        }
    }
}

/// [`product_block`] for channels `from..to`, four at a time, then one at a time.
///
/// # Safety
/// As [`product_block`]'s, for every channel below `to`.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2")]
unsafe fn product_channels<Y: QuantInt>(
    signed: bool,
    ch: &Channels,
    x: &[u8],
    [k, stride, p0]: [usize; 3],
    [from, to]: [usize; 2],
    y: &mut [Y],
    out: [usize; 2],
) {
    let mut o = from;
    while o < to {
        let four = to - o >= 4;
        // SAFETY: the caller's bounds, for channels below `to`.
        unsafe {
            match (four, signed) {
                (true, true) => product_block::<true, 4, Y>(ch, x, k, stride, p0, o, y, out),
                (true, false) => product_block::<false, 4, Y>(ch, x, k, stride, p0, o, y, out),
                (false, true) => product_block::<true, 1, Y>(ch, x, k, stride, p0, o, y, out),
                (false, false) => product_block::<false, 1, Y>(ch, x, k, stride, p0, o, y, out),
            }
        }
        o += if four { 4 } else { 1 };
    }
}

/// Pointwise convolution, `Y[o, p] = bias[o] − zx·Σw[o] + Σ_i W[o, i]·X[i, p]`: the input
/// channels are the rows of [`product_block`], eight positions at a time (the last eight
/// overlapping the block before when the plane is not a multiple of eight: those outputs are
/// computed twice, identically). `None` for a plane of fewer than eight positions.
#[target_feature(enable = "avx2")]
fn pointwise<Y: QuantInt>(
    ops: &Operands<'_>,
    d: &ConvDims,
    x: &[u8],
    signed: bool,
    y: &mut [Y],
) -> Option<bool> {
    let (c, oc, plane) = (d.c, d.oc, d.h * d.w);
    let fits = x.len() >= d.n * c * plane
        && y.len() >= d.n * oc * plane
        && ops.w.len() >= oc * c
        && ops.bias.len() >= oc;
    if !fits {
        return Some(false);
    }
    if plane < 8 || c == 0 {
        return None;
    }
    let ch = Channels::new(ops, c, oc);
    for b in 0..d.n {
        let xb = &x[b * c * plane..(b + 1) * c * plane];
        let yb = &mut y[b * oc * plane..(b + 1) * oc * plane];
        for block in 0..plane.div_ceil(8) {
            let p0 = (8 * block).min(plane - 8);
            // SAFETY: `xb` holds c planes, p0 + 8 <= plane; `yb` oc planes.
            unsafe { product_channels(signed, &ch, xb, [c, plane, p0], [0, oc], yb, [plane, p0]) };
        }
    }
    Some(true)
}

/// Depthwise convolution of stride 1 on a zero-point-padded copy of each plane (in `scratch`,
/// as the portable kernel makes it): output `(oy, ox)` reads the padded plane at
/// `(oy + ky·dh)·pw + ox + kx·dw`, so on the padded plane's width every tap is one contiguous
/// pass; the `pw − ow` extra columns per row are computed and dropped. False when the scratch
/// or an operand is too small.
#[target_feature(enable = "avx2")]
fn depthwise_stride_one<Y: QuantInt>(
    c: &QConv,
    ops: &Operands<'_>,
    d: &ConvDims,
    x: &[u8],
    signed: bool,
    y: &mut [Y],
    scratch: &mut [u8],
) -> bool {
    let win = &c.window;
    let [kh, kw] = win.kernel;
    let [dh, dw] = win.dilation;
    let (oh, ow) = (d.oh, d.ow);
    if oh == 0 || ow == 0 || kh == 0 || kw == 0 {
        return true;
    }
    let ph = oh - 1 + (kh - 1) * dh + 1;
    let pw = ow - 1 + (kw - 1) * dw + 1;
    let multiplier = d.oc / d.c.max(1);
    let taps = kh * kw;
    let fits = x.len() >= d.n * d.c * d.h * d.w
        && y.len() >= d.n * d.oc * oh * ow
        && ops.w.len() >= d.oc * taps
        && ops.bias.len() >= d.oc
        && multiplier * d.c == d.oc;
    let Some(padded) = scratch.get_mut(..ph * pw) else {
        return false;
    };
    if !fits {
        return false;
    }
    let zx = ops.q.input_zero;
    GRID.with_borrow_mut(|grid_out| {
        for b in 0..d.n {
            for ch in 0..d.c {
                let plane = &x[(b * d.c + ch) * d.h * d.w..][..d.h * d.w];
                pad_plane(plane, d, win.pads, zx as u8, padded, pw);
                let padded = &*padded;
                for m in 0..multiplier {
                    let o = ch * multiplier + m;
                    let taps_w = &ops.w[o * taps..(o + 1) * taps];
                    let out = &mut y[(b * d.oc + o) * oh * ow..][..oh * ow];
                    let plan = TapPlan {
                        weights: taps_w,
                        kernel: [kh, kw],
                        dilation: [dh, dw],
                        pw,
                        ow,
                        base: base(ops.bias[o], zx, taps_w),
                        lanes: Lanes::new(ops.rescaler(o)),
                    };
                    // SAFETY: `padded` holds ph × pw bytes (checked above).
                    unsafe {
                        if signed {
                            depthwise_taps::<true, Y>(&plan, padded, out, grid_out);
                        } else {
                            depthwise_taps::<false, Y>(&plan, padded, out, grid_out);
                        }
                    }
                }
            }
        }
    });
    true
}

/// One input plane, zero-point padded, into `padded` (`pw` wide): the portable kernel's copy,
/// element by element (rows are short: a library call per row would cost more).
fn pad_plane(plane: &[u8], d: &ConvDims, pads: [usize; 4], zero: u8, padded: &mut [u8], pw: usize) {
    for (py, row) in padded.chunks_exact_mut(pw.max(1)).enumerate() {
        let iy = py.wrapping_sub(pads[0]);
        let source = if iy < d.h {
            &plane[iy * d.w..(iy + 1) * d.w]
        } else {
            &[][..]
        };
        for (px, slot) in row.iter_mut().enumerate() {
            *slot = *source.get(px.wrapping_sub(pads[1])).unwrap_or(&zero);
        }
    }
}

/// A depthwise output channel's taps and requantization.
struct TapPlan<'a> {
    weights: &'a [i8],
    kernel: [usize; 2],
    dilation: [usize; 2],
    pw: usize,
    ow: usize,
    base: i32,
    lanes: Lanes,
}

/// One depthwise output channel from its padded plane: eight positions of the padded width
/// per vector (the last vector overlapping the one before when the grid is not a multiple of
/// eight), eight vectors per pass over the taps, their outputs on the grid in `grid_out`; then
/// each output row taken from it.
///
/// # Safety
/// `padded` holds `(oh − 1 + (kh − 1)·dh + 1) × pw` bytes, `out` `oh × ow` outputs, `oh ≥ 1`.
#[target_feature(enable = "avx2")]
unsafe fn depthwise_taps<const SIGNED: bool, Y: QuantInt>(
    p: &TapPlan<'_>,
    padded: &[u8],
    out: &mut [Y],
    grid_out: &mut Vec<i32>,
) {
    let [kh, kw] = p.kernel;
    let [dh, dw] = p.dilation;
    let (pw, ow) = (p.pw, p.ow);
    let oh = out.len() / ow;
    // Padded-width positions up to the last output; with the farthest tap's offset, a read
    // ends within the plane: (oh − 1)·pw + ow − 1 + (kh − 1)·dh·pw + (kw − 1)·dw < ph·pw.
    let grid = (oh - 1) * pw + ow;
    grid_out.clear();
    grid_out.resize(grid, 0);
    if grid < 8 {
        let value = |v: u8| if SIGNED { v as i8 as i32 } else { v as i32 };
        for (j, slot) in grid_out.iter_mut().enumerate() {
            let mut sum = p.base;
            for ky in 0..kh {
                for kx in 0..kw {
                    let v = value(padded[j + ky * dh * pw + kx * dw]);
                    sum = sum.wrapping_add(p.weights[ky * kw + kx] as i32 * v);
                }
            }
            *slot = p.lanes.scalar.apply(sum);
        }
    } else {
        let vectors = grid.div_ceil(8);
        let at = |v: usize| (8 * v).min(grid - 8);
        let mut v0 = 0;
        while v0 < vectors {
            // SAFETY: every vector's eight positions are below `grid` (see `at`).
            unsafe {
                if vectors - v0 >= 8 {
                    depthwise_vectors::<SIGNED, 8>(p, padded, v0, at, grid_out);
                    v0 += 8;
                } else {
                    depthwise_vectors::<SIGNED, 1>(p, padded, v0, at, grid_out);
                    v0 += 1;
                }
            }
        }
    }
    for (row, outputs) in out.chunks_exact_mut(ow).enumerate() {
        for (slot, &r) in outputs.iter_mut().zip(&grid_out[row * pw..]) {
            *slot = Y::narrow(r);
        }
    }
}

/// Vectors `v0..v0 + V` of [`depthwise_taps`]: their sums over every tap in registers, then
/// requantized onto the grid.
///
/// # Safety
/// Each vector's position `at(v)` has `at(v) + 8 <= grid_out.len()`, and `padded` holds every
/// byte a tap reads from there.
#[target_feature(enable = "avx2")]
unsafe fn depthwise_vectors<const SIGNED: bool, const V: usize>(
    p: &TapPlan<'_>,
    padded: &[u8],
    v0: usize,
    at: impl Fn(usize) -> usize,
    grid_out: &mut [i32],
) {
    let [kh, kw] = p.kernel;
    let [dh, dw] = p.dilation;
    let starts: [usize; V] = core::array::from_fn(|v| at(v0 + v));
    let mut acc = [_mm256_set1_epi32(p.base); V];
    for ky in 0..kh {
        for kx in 0..kw {
            let offset = ky * dh * p.pw + kx * dw;
            let weight = _mm256_set1_epi32(p.weights[ky * kw + kx] as i32);
            for (acc, &start) in acc.iter_mut().zip(&starts) {
                // SAFETY: the caller keeps every tap's eight bytes within `padded`.
                let xv = unsafe { widen8::<SIGNED>(padded, start + offset) };
                *acc = _mm256_add_epi32(*acc, _mm256_mullo_epi32(xv, weight));
            }
        }
    }
    for (acc, &start) in acc.iter().zip(&starts) {
        grid_out[start..start + 8].copy_from_slice(&p.lanes.apply(*acc));
    }
}

/// Regular and grouped convolution: eight output positions' windows unfolded into a `[k, 8]`
/// byte block (the input values, the zero point in the padding, as the depthwise kernel pads),
/// then [`product_block`] over the group's output channels. `None` for fewer than eight
/// output positions.
#[target_feature(enable = "avx2")]
fn columns<X: QuantInt, Y: QuantInt>(
    c: &QConv,
    ops: &Operands<'_>,
    d: &ConvDims,
    x: &[X],
    y: &mut [Y],
) -> Option<bool> {
    let group = c.group.max(1);
    let (icg, ocg) = (d.c / group, d.oc / group);
    let [kh, kw] = c.window.kernel;
    let k = icg * kh * kw;
    let positions = d.oh * d.ow;
    let fits = x.len() >= d.n * d.c * d.h * d.w
        && y.len() >= d.n * d.oc * positions
        && ops.w.len() >= d.oc * k
        && ops.bias.len() >= d.oc;
    if !fits {
        return Some(false);
    }
    if positions < 8 || k == 0 {
        return None;
    }
    let ch = Channels::new(ops, k, d.oc);
    let bytes: &[u8] = bytemuck::cast_slice(x);
    let mut block = std::vec![0u8; k * 8];
    for b in 0..d.n {
        let yb = &mut y[b * d.oc * positions..(b + 1) * d.oc * positions];
        for g in 0..group {
            let xg = &bytes[(b * d.c + g * icg) * d.h * d.w..][..icg * d.h * d.w];
            for start in 0..positions.div_ceil(8) {
                let p0 = (8 * start).min(positions - 8);
                unfold_eight(c, d, xg, p0, &mut block);
                // SAFETY: `block` holds k rows of 8; `yb` d.oc planes of `positions`.
                unsafe {
                    product_channels(
                        X::MIN < 0,
                        &ch,
                        &block,
                        [k, 8, 0],
                        [g * ocg, (g + 1) * ocg],
                        yb,
                        [positions, p0],
                    )
                };
            }
        }
    }
    Some(true)
}

/// The windows of output positions `p0..p0 + 8` as `[k, 8]` bytes: row `(ci·kh + ky)·kw + kx`
/// holds that tap's input byte for each position, the zero point where it falls in the
/// padding. Eight positions in one output row, of stride 1 and away from the side padding,
/// copy eight contiguous input bytes per tap.
fn unfold_eight(c: &QConv, d: &ConvDims, xg: &[u8], p0: usize, block: &mut [u8]) {
    let [kh, kw] = c.window.kernel;
    let [sh, sw] = c.window.stride;
    let [dh, dw] = c.window.dilation;
    let zero = c.requantize.input_zero as u8;
    let ow = d.ow.max(1);
    let plane = d.h * d.w;
    let (oy, ox) = (p0 / ow, p0 % ow);
    let iy0 = (oy * sh).wrapping_sub(c.window.pads[0]);
    let ix0 = (ox * sw).wrapping_sub(c.window.pads[1]);
    // One output row and stride 1: a tap whose eight columns are inside the input row copies
    // them (each tap checks; at the side padding some do not).
    let one_row = ox + 8 <= d.ow && sw == 1;
    // Each position's window origin (wrapping below zero: outside, as any index past the end).
    let origins: [[usize; 2]; 8] = core::array::from_fn(|t| {
        let (oy, ox) = ((p0 + t) / ow, (p0 + t) % ow);
        [
            (oy * sh).wrapping_sub(c.window.pads[0]),
            (ox * sw).wrapping_sub(c.window.pads[1]),
        ]
    });
    let mut rows = block.chunks_exact_mut(8);
    for ci in 0..xg.len() / plane.max(1) {
        let xp = &xg[ci * plane..(ci + 1) * plane];
        for ky in 0..kh {
            let iy = iy0.wrapping_add(ky * dh);
            let row = (iy < d.h).then(|| &xp[iy * d.w..(iy + 1) * d.w]);
            for kx in 0..kw {
                let Some(out) = rows.next() else {
                    return;
                };
                let at = ix0.wrapping_add(kx * dw);
                let inside = one_row && at < d.w && at + 8 <= d.w;
                match row {
                    Some(row) if inside => out.copy_from_slice(&row[at..at + 8]),
                    None if one_row => out.fill(zero),
                    _ => {
                        for (slot, origin) in out.iter_mut().zip(&origins) {
                            let iy = origin[0].wrapping_add(ky * dh);
                            let ix = origin[1].wrapping_add(kx * dw);
                            let inside = iy < d.h && ix < d.w;
                            *slot = if inside { xp[iy * d.w + ix] } else { zero };
                        }
                    }
                }
            }
        }
    }
    // Rows past the group's channels (none in a verified plan) read as padding.
    for out in rows {
        out.fill(zero);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vector requantization equals the scalar one on every lane: random accumulators,
    /// multipliers and shifts (every high-word shift and the scalar fallback), exact ties
    /// included (accumulators that are multiples of a power of two meet multipliers that are).
    #[test]
    fn lanes_requantize_as_the_scalar_requantizer() {
        if !std::is_x86_feature_detected!("avx2") {
            return;
        }
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let q = Requantize {
            input_zero: 3,
            output_zero: -7,
            min: -128,
            max: 127,
        };
        for round in 0..20_000 {
            let shift = -31 + (next() % 62) as i32;
            let multiplier = match round % 3 {
                0 => (1 << 30) | (next() as i32 & 0x3fff_ffff),
                1 => 1 << 30,
                _ => (1 << 30) + ((next() % 8) << 27) as i32,
            };
            let scalar = Requantizer::new([multiplier, shift], &q);
            let acc: [i32; 8] = core::array::from_fn(|_| match next() % 3 {
                0 => next() as i32,
                1 => (next() as i32) >> (next() % 31),
                _ => ((next() as i32) >> 8) << (next() % 8),
            });
            // SAFETY: the CPU has AVX2 (checked above).
            let vector = unsafe {
                let lanes = Lanes::new(scalar);
                lanes.apply(_mm256_loadu_si256(acc.as_ptr().cast()))
            };
            assert_eq!(
                vector,
                acc.map(|a| scalar.apply(a)),
                "{multiplier} {shift} {acc:?}"
            );
        }
    }
}
