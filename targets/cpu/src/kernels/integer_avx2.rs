//! AVX2 kernels for 8-bit integer convolutions on x86-64 hosts (`std`): the sums of the portable
//! kernels in [`super::integer`] — exact in wrapping int32, so equal to theirs bit for bit — and
//! the same single rounding, vectorised:
//!
//! - products of int16-widened values summed in pairs by `vpmaddwd` (exact: `vpmaddubsw`'s
//!   saturating int16 pair sums, which onnxruntime's kernels use, would not be);
//! - requantization of eight outputs at once in the high-word form
//!   ([`super::integer::HighWordRequantizer`]), scalar for the rare scales without one.
//!
//! Pointwise and regular convolutions are one block product ([`product_block`]): eight output
//! positions of `k` rows (input channels; taps read in place from a zero-point-padded copy of the
//! input for stride 1; eight unfolded windows otherwise), pairs of rows interleaved into int16
//! pairs once and meeting four output channels' weight pairs. Depthwise convolutions of stride 1
//! run every tap as one contiguous pass over the padded plane (outputs computed on its full width,
//! the columns past the output's dropped); of stride 2, eight outputs of a row per vector, every
//! other byte of sixteen. Everything else (16-bit activations, other strides, planes of fewer
//! than eight outputs) stays with the portable kernels.

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
/// step: 8-bit activations, and a pointwise, regular or grouped, or stride-1 or stride-2
/// depthwise geometry. `None`
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
        if depthwise && c.window.stride == [2, 2] && d.ow >= 8 {
            let bytes = bytemuck::cast_slice(x);
            return Some(depthwise_stride_two(c, &ops, &d, bytes, X::MIN < 0, y));
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
        let mut words = std::vec![0i32; channels * pairs];
        let mut bases = Vec::with_capacity(channels);
        // Little-endian int16 pairs are the words: each row widened in place (a zero past an
        // odd row's end).
        let halves: &mut [i16] = bytemuck::cast_slice_mut(&mut words);
        for (o, (row, out)) in rows.zip(halves.chunks_exact_mut(2 * pairs)).enumerate() {
            for (half, &v) in out.iter_mut().zip(row) {
                *half = v as i16;
            }
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

/// Where [`product_block`] reads and writes: row `i` of the eight positions from `at` is
/// `x[row(i) + at ..][..8]`, `row(i)` being `i · stride` or `offsets[i]`; their outputs go to
/// `y[o·y_stride + to[t]]` for output channel `o` (`to[t] == SKIP`: a position that is not an
/// output).
struct Block<'a> {
    x: &'a [u8],
    rows: Rows<'a>,
    at: usize,
    y_stride: usize,
    to: [usize; 8],
}

/// Where a [`Block`]'s rows start in its `x`.
#[derive(Clone, Copy)]
enum Rows<'a> {
    /// `k` rows, `stride` apart (input channels, unfolded windows).
    Strided { k: usize, stride: usize },
    /// One offset per row (taps read in place from a padded input).
    Table(&'a [usize]),
}

impl Rows<'_> {
    /// The number of rows and the farthest one's offset.
    fn extent(&self) -> (usize, usize) {
        match *self {
            Rows::Strided { k, stride } => (k, k.saturating_sub(1) * stride),
            Rows::Table(offsets) => (offsets.len(), offsets.iter().copied().max().unwrap_or(0)),
        }
    }
}

/// A [`Block`] position that is not an output (past the row on a padded grid).
const SKIP: usize = usize::MAX;

/// Eight positions of `k` rows of 8-bit values for output channels `o..o + B`: each pair of
/// rows interleaved into int16 pairs once, meeting each channel's weight pair in one
/// `vpmaddwd`; the sums offset, requantized and written.
///
/// # Safety
/// Every row's eight bytes from `at` are within `x`; `ch` covers channels below `o + B`.
#[target_feature(enable = "avx2")]
unsafe fn product_block<const SIGNED: bool, const B: usize, Y: QuantInt>(
    ch: &Channels,
    block: &Block<'_>,
    o: usize,
    y: &mut [Y],
) {
    let pairs = ch.pairs;
    let mut acc = [_mm256_setzero_si256(); B];
    let xp = block.x.as_ptr().wrapping_add(block.at);
    let words = ch.words.as_ptr();
    let load = |offset: usize| {
        // SAFETY: every row's eight bytes from `at` are within `x` (the caller's bound).
        unsafe { _mm_loadl_epi64(xp.add(offset).cast()) }
    };
    let mut step = |first: __m128i, second: __m128i, pair: usize| {
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
    };
    match block.rows {
        Rows::Strided { k, stride } => {
            for pair in 0..k / 2 {
                let first = 2 * pair * stride;
                step(load(first), load(first + stride), pair);
            }
            if k % 2 == 1 {
                step(load((k - 1) * stride), _mm_setzero_si128(), k / 2);
            }
        }
        Rows::Table(offsets) => {
            let (rows, last) = offsets.as_chunks::<2>();
            for (pair, &[first, second]) in rows.iter().enumerate() {
                step(load(first), load(second), pair);
            }
            if let [first] = *last {
                step(load(first), _mm_setzero_si128(), rows.len());
            }
        }
    }
    for (j, acc) in acc.iter().enumerate() {
        let sums = _mm256_add_epi32(*acc, _mm256_set1_epi32(ch.bases[o + j]));
        let out = ch.lanes[o + j].apply(sums);
        let base = (o + j) * block.y_stride;
        let [first, last] = [block.to[0], block.to[7]];
        if first != SKIP && last == first + 7 {
            // Eight outputs in a row (every block but those across a padded grid's row end).
            if let Some(row) = y.get_mut(base + first..base + first + 8) {
                for (slot, v) in row.iter_mut().zip(out) {
                    *slot = Y::narrow(v);
                }
            }
            continue;
        }
        for (&to, v) in block.to.iter().zip(out) {
            if to != SKIP {
                if let Some(slot) = y.get_mut(base + to) {
                    *slot = Y::narrow(v);
                }
            }
        }
    }
}

/// [`product_block`] for channels `from..to`, four at a time, then one at a time; nothing when
/// a row would read past `x` (which the callers' shapes rule out).
#[target_feature(enable = "avx2")]
fn product_channels<Y: QuantInt>(
    signed: bool,
    ch: &Channels,
    block: &Block<'_>,
    [from, to]: [usize; 2],
    y: &mut [Y],
) {
    let (k, farthest) = block.rows.extent();
    let reach = farthest + block.at + 8;
    let rows_ok = k.div_ceil(2) == ch.pairs && reach <= block.x.len();
    if !rows_ok || to * ch.pairs > ch.words.len() || to > ch.bases.len() {
        return;
    }
    let mut o = from;
    while o < to {
        let four = to - o >= 4;
        // SAFETY: every row's eight bytes are within `x` (`reach`), channels below `to` covered.
        unsafe {
            match (four, signed) {
                (true, true) => product_block::<true, 4, Y>(ch, block, o, y),
                (true, false) => product_block::<false, 4, Y>(ch, block, o, y),
                (false, true) => product_block::<true, 1, Y>(ch, block, o, y),
                (false, false) => product_block::<false, 1, Y>(ch, block, o, y),
            }
        }
        o += if four { 4 } else { 1 };
    }
}

/// Output positions `p0..p0 + 8` written contiguously from `y_at`.
fn contiguous(y_at: usize) -> [usize; 8] {
    core::array::from_fn(|t| y_at + t)
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
        for start in 0..plane.div_ceil(8) {
            let p0 = (8 * start).min(plane - 8);
            let block = Block {
                x: xb,
                rows: Rows::Strided {
                    k: c,
                    stride: plane,
                },
                at: p0,
                y_stride: plane,
                to: contiguous(p0),
            };
            product_channels(signed, &ch, &block, [0, oc], yb);
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

/// Depthwise convolution of stride 2, one output row at a time, eight outputs per vector (the
/// last overlapping the one before; rows of at least eight outputs): each tap reads sixteen
/// bytes of the zero-point-padded plane and keeps every other one. The plane sits in a buffer
/// of its own with sixteen bytes of slack, so the last vector's load stays inside. False when
/// an operand is too small.
#[target_feature(enable = "avx2")]
fn depthwise_stride_two<Y: QuantInt>(
    c: &QConv,
    ops: &Operands<'_>,
    d: &ConvDims,
    x: &[u8],
    signed: bool,
    y: &mut [Y],
) -> bool {
    let win = &c.window;
    let [kh, kw] = win.kernel;
    let [dh, dw] = win.dilation;
    let (oh, ow) = (d.oh, d.ow);
    if oh == 0 || kh == 0 || kw == 0 || ow < 8 {
        return true;
    }
    let ph = (oh - 1) * 2 + (kh - 1) * dh + 1;
    let pw = (ow - 1) * 2 + (kw - 1) * dw + 1;
    let multiplier = d.oc / d.c.max(1);
    let taps = kh * kw;
    let fits = x.len() >= d.n * d.c * d.h * d.w
        && y.len() >= d.n * d.oc * oh * ow
        && ops.w.len() >= d.oc * taps
        && ops.bias.len() >= d.oc
        && multiplier * d.c == d.oc;
    if !fits {
        return false;
    }
    let zx = ops.q.input_zero;
    let mut padded = std::vec![0u8; ph * pw + 16];
    let evens = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1);
    for b in 0..d.n {
        for ch in 0..d.c {
            let plane = &x[(b * d.c + ch) * d.h * d.w..][..d.h * d.w];
            pad_plane(plane, d, win.pads, zx as u8, &mut padded[..ph * pw], pw);
            for m in 0..multiplier {
                let o = ch * multiplier + m;
                let weights = &ops.w[o * taps..(o + 1) * taps];
                let out = &mut y[(b * d.oc + o) * oh * ow..][..oh * ow];
                let lanes = Lanes::new(ops.rescaler(o));
                let first = base(ops.bias[o], zx, weights);
                for (oy, row) in out.chunks_exact_mut(ow).enumerate() {
                    for v in 0..ow.div_ceil(8) {
                        let ox = (8 * v).min(ow - 8);
                        let mut acc = _mm256_set1_epi32(first);
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let at = (2 * oy + ky * dh) * pw + 2 * ox + kx * dw;
                                // at + 16 <= ph·pw + 16: the last output's tap ends in the plane.
                                let source = &padded[at..at + 16];
                                // SAFETY: sixteen bytes, checked by the slice above.
                                let bytes = unsafe { _mm_loadu_si128(source.as_ptr().cast()) };
                                let picked = _mm_shuffle_epi8(bytes, evens);
                                let xv = if signed {
                                    _mm256_cvtepi8_epi32(picked)
                                } else {
                                    _mm256_cvtepu8_epi32(picked)
                                };
                                let wv = _mm256_set1_epi32(weights[ky * kw + kx] as i32);
                                acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(xv, wv));
                            }
                        }
                        for (slot, r) in row[ox..ox + 8].iter_mut().zip(lanes.apply(acc)) {
                            *slot = Y::narrow(r);
                        }
                    }
                }
            }
        }
    }
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

/// Regular and grouped convolution. Stride 1: on a zero-point-padded copy of the group's
/// input planes, each tap of eight neighbouring positions of the padded width is eight
/// contiguous bytes at a fixed offset, so [`product_block`] reads the taps in place (positions
/// past an output row are computed and dropped). Other strides: eight output positions'
/// windows unfolded into a `[k, 8]` byte block (the zero point in the padding). `None` for
/// fewer than eight output positions.
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
    if positions < 8 || k == 0 || d.h * d.w == 0 {
        return None;
    }
    let ch = Channels::new(ops, k, d.oc);
    let bytes: &[u8] = bytemuck::cast_slice(x);
    let signed = X::MIN < 0;
    let [dh, dw] = c.window.dilation;
    if c.window.stride == [1, 1] {
        let ph = d.oh - 1 + (kh - 1) * dh + 1;
        let pw = d.ow - 1 + (kw - 1) * dw + 1;
        let grid = (d.oh - 1) * pw + d.ow;
        if grid < 8 {
            return None;
        }
        let offsets: Vec<usize> = (0..icg)
            .flat_map(|ci| {
                (0..kh).flat_map(move |ky| {
                    (0..kw).map(move |kx| ci * ph * pw + ky * dh * pw + kx * dw)
                })
            })
            .collect();
        let mut padded = std::vec![0u8; icg * ph * pw];
        let zero = c.requantize.input_zero as u8;
        for b in 0..d.n {
            let yb = &mut y[b * d.oc * positions..(b + 1) * d.oc * positions];
            for g in 0..group {
                let xg = &bytes[(b * d.c + g * icg) * d.h * d.w..][..icg * d.h * d.w];
                let planes = xg
                    .chunks_exact(d.h * d.w)
                    .zip(padded.chunks_exact_mut(ph * pw));
                for (plane, out) in planes {
                    pad_plane(plane, d, c.window.pads, zero, out, pw);
                }
                for start in 0..grid.div_ceil(8) {
                    let j0 = (8 * start).min(grid - 8);
                    let to = core::array::from_fn(|t| {
                        let (oy, ox) = ((j0 + t) / pw, (j0 + t) % pw);
                        if ox < d.ow {
                            oy * d.ow + ox
                        } else {
                            SKIP
                        }
                    });
                    let block = Block {
                        x: &padded,
                        rows: Rows::Table(&offsets),
                        at: j0,
                        y_stride: positions,
                        to,
                    };
                    product_channels(signed, &ch, &block, [g * ocg, (g + 1) * ocg], yb);
                }
            }
        }
        return Some(true);
    }
    let mut unfolded = std::vec![0u8; k * 8];
    for b in 0..d.n {
        let yb = &mut y[b * d.oc * positions..(b + 1) * d.oc * positions];
        for g in 0..group {
            let xg = &bytes[(b * d.c + g * icg) * d.h * d.w..][..icg * d.h * d.w];
            for start in 0..positions.div_ceil(8) {
                let p0 = (8 * start).min(positions - 8);
                unfold_eight(c, d, xg, p0, &mut unfolded);
                let block = Block {
                    x: &unfolded,
                    rows: Rows::Strided { k, stride: 8 },
                    at: 0,
                    y_stride: positions,
                    to: contiguous(p0),
                };
                product_channels(signed, &ch, &block, [g * ocg, (g + 1) * ocg], yb);
            }
        }
    }
    Some(true)
}

/// The windows of output positions `p0..p0 + 8` as `[k, 8]` bytes: row `(ci·kh + ky)·kw + kx`
/// holds that tap's input byte for each position, the zero point where it falls in the
/// padding. Eight positions in one output row, of stride 1 and away from the side padding,
/// copy eight contiguous input bytes per tap.
#[target_feature(enable = "avx2")]
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
    // One output row and stride 1 or 2: a tap whose eight columns are inside the input row
    // copies them (each tap checks; at the side padding some do not), every other byte of
    // sixteen for stride 2.
    let one_row = ox + 8 <= d.ow && (sw == 1 || sw == 2);
    let span = 8 * sw;
    let evens = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1);
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
                let inside = one_row && at < d.w && at + span <= d.w;
                match row {
                    Some(row) if inside && sw == 1 => out.copy_from_slice(&row[at..at + 8]),
                    Some(row) if inside => {
                        let (source, out) = (&row[at..at + 16], &mut out[..8]);
                        // SAFETY: sixteen bytes read, eight written, both checked above.
                        unsafe {
                            let v = _mm_loadu_si128(source.as_ptr().cast());
                            _mm_storel_epi64(out.as_mut_ptr().cast(), _mm_shuffle_epi8(v, evens));
                        }
                    }
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

/// [`super::integer::qadd`]'s table form, eight outputs at a time, when the build runs the AVX2
/// kernels: each input's term gathered from its 256-entry table by byte (`vpgatherdd`), the two
/// added (saturating, as the scalar form), rounded once with `frac`
/// fraction bits, ties to even, offset by the output zero point and clamped to
/// `[zero, min, max]`'s bounds. The last `len mod 8` outputs one at a time. False (nothing
/// done) when the kernels do not run or an operand is short.
pub(super) fn qadd_tables<Y: QuantInt>(
    frac: u32,
    finish: [i32; 3],
    tables: [&[i32]; 2],
    a: &[u8],
    b: &[u8],
    y: &mut [Y],
) -> bool {
    let fits = tables.iter().all(|t| t.len() >= 256) && a.len() >= y.len() && b.len() >= y.len();
    if Y::WIDE || !fits || frac > 30 || super::simd::level() < super::simd::Level::Avx2 {
        return false;
    }
    // SAFETY: the CPU has AVX2 (`simd::level`).
    unsafe { qadd_tables_avx2(frac, finish, tables, a, b, y) };
    true
}

/// `a + b` per lane, saturated to int32 as `i32::saturating_add` (terms reach 2^30 and past
/// only for output scales far below the inputs', where the scalar form saturates too).
#[target_feature(enable = "avx2")]
fn saturating_add(a: __m256i, b: __m256i) -> __m256i {
    let sum = _mm256_add_epi32(a, b);
    // Overflow: both operands' signs differ from the sum's.
    let overflow = _mm256_and_si256(_mm256_xor_si256(a, sum), _mm256_xor_si256(b, sum));
    let overflow = _mm256_srai_epi32::<31>(overflow);
    // i32::MAX for a non-negative `a`, i32::MIN for a negative one.
    let bound = _mm256_xor_si256(_mm256_srai_epi32::<31>(a), _mm256_set1_epi32(i32::MAX));
    _mm256_blendv_epi8(sum, bound, overflow)
}

/// The body of [`qadd_tables`].
///
/// # Safety
/// Each table holds 256 entries; `a` and `b` at least `y.len()` bytes.
#[target_feature(enable = "avx2")]
unsafe fn qadd_tables_avx2<Y: QuantInt>(
    frac: u32,
    [zero, min, max]: [i32; 3],
    [ta, tb]: [&[i32]; 2],
    a: &[u8],
    b: &[u8],
    y: &mut [Y],
) {
    let round = |sum: i32| {
        if frac == 0 {
            return sum;
        }
        let q = sum >> frac;
        let rest = sum & ((1i32 << frac) - 1);
        q + ((rest + (q & 1)) > (1i32 << (frac - 1))) as i32
    };
    let finish = |sum: i32| Y::narrow(round(sum).saturating_add(zero).max(min).min(max));
    let full = y.len() / 8 * 8;
    let shift = _mm_cvtsi32_si128(frac as i32);
    let mask = _mm256_set1_epi32(((1i64 << frac) - 1) as i32);
    let half = _mm256_set1_epi32(((1i64 << frac) >> 1) as i32);
    let one = _mm256_set1_epi32(1);
    let [zero_v, min_v, max_v] = [zero, min, max].map(|v| _mm256_set1_epi32(v));
    for at in (0..full).step_by(8) {
        // SAFETY: at + 8 <= y.len() <= a.len(), b.len(); every index is a byte, below 256.
        let sum = unsafe {
            let ia = _mm256_cvtepu8_epi32(_mm_loadl_epi64(a.as_ptr().add(at).cast()));
            let ib = _mm256_cvtepu8_epi32(_mm_loadl_epi64(b.as_ptr().add(at).cast()));
            let terms_a = _mm256_i32gather_epi32::<4>(ta.as_ptr(), ia);
            let terms_b = _mm256_i32gather_epi32::<4>(tb.as_ptr(), ib);
            saturating_add(terms_a, terms_b)
        };
        let rounded = if frac == 0 {
            sum
        } else {
            let q = _mm256_sra_epi32(sum, shift);
            let rest = _mm256_and_si256(sum, mask);
            let odd = _mm256_and_si256(q, one);
            // rest + (q & 1) > half: the compare is all ones (−1), so subtracting it adds one.
            let up = _mm256_cmpgt_epi32(_mm256_add_epi32(rest, odd), half);
            _mm256_sub_epi32(q, up)
        };
        // |rounded| < 2^31 >> frac, or the saturated sum itself when frac is 0: the scalar
        // form's saturating add of the zero point, then the clamp.
        let v = saturating_add(rounded, zero_v);
        let v = _mm256_min_epi32(_mm256_max_epi32(v, min_v), max_v);
        let mut lanes = [0i32; 8];
        // SAFETY: `lanes` holds eight int32s.
        unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), v) };
        for (slot, v) in y[at..at + 8].iter_mut().zip(lanes) {
            *slot = Y::narrow(v);
        }
    }
    for ((slot, &av), &bv) in y[full..].iter_mut().zip(&a[full..]).zip(&b[full..]) {
        *slot = finish(ta[av as usize].saturating_add(tb[bv as usize]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small xorshift generator for the random cases.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// The ONNX definition of an integer convolution, output by output: the bias plus
    /// `Σ (x − zx)·w` over the window (nothing from the padding) in wrapping int32, requantized
    /// per channel (what the portable kernels compute).
    fn definition<X: QuantInt>(c: &QConv, d: &ConvDims, x: &[X], ops: &Operands<'_>) -> Vec<i32> {
        let group = c.group.max(1);
        let (icg, ocg) = (d.c / group, d.oc / group);
        let [kh, kw] = c.window.kernel;
        let mut y = Vec::new();
        for b in 0..d.n {
            for o in 0..d.oc {
                let g = o / ocg;
                for oy in 0..d.oh {
                    for ox in 0..d.ow {
                        let mut acc = ops.bias[o];
                        for ci in 0..icg {
                            for ky in 0..kh {
                                for kx in 0..kw {
                                    let iy = (oy * c.window.stride[0] + ky * c.window.dilation[0])
                                        .wrapping_sub(c.window.pads[0]);
                                    let ix = (ox * c.window.stride[1] + kx * c.window.dilation[1])
                                        .wrapping_sub(c.window.pads[1]);
                                    if iy < d.h && ix < d.w {
                                        let xi = ((b * d.c + g * icg + ci) * d.h + iy) * d.w + ix;
                                        let wi = ((o * icg + ci) * kh + ky) * kw + kx;
                                        let v = x[xi].widen() - c.requantize.input_zero;
                                        acc = acc.wrapping_add(v * ops.w[wi] as i32);
                                    }
                                }
                            }
                        }
                        y.push(ops.rescaler(o).apply(acc));
                    }
                }
            }
        }
        y
    }

    /// One random case of the geometry `shape` picks, on both activation types.
    fn check_case(rng: &mut Rng, case: usize) -> Option<usize> {
        let group_kind = rng.below(3); // 0: regular, 1: grouped, 2: depthwise
        let (kh, kw) = (1 + rng.below(4), 1 + rng.below(4));
        let stride = [1 + rng.below(2), 1 + rng.below(2)];
        let dilation = 1 + rng.below(2) * case.is_multiple_of(3) as usize;
        let pads = [rng.below(3), rng.below(3), rng.below(3), rng.below(3)];
        // One case in six pointwise: a 1×1 window, stride 1, no padding, one group.
        let (group_kind, kh, kw, stride, pads) = if case.is_multiple_of(6) {
            (0, 1, 1, [1, 1], [0; 4])
        } else {
            (group_kind, kh, kw, stride, pads)
        };
        let (group, icg, ocg) = match group_kind {
            0 => (1, 1 + rng.below(9), 1 + rng.below(9)),
            1 => (2 + rng.below(2), 1 + rng.below(4), 1 + rng.below(4)),
            _ => (1 + rng.below(12), 1, 1 + rng.below(2)),
        };
        let (h, w) = (1 + rng.below(14), 1 + rng.below(30));
        let span = |size: usize, k: usize, pad: usize, stride: usize| {
            (size + pad)
                .checked_sub((k - 1) * dilation + 1)
                .map(|s| s / stride + 1)
        };
        let (Some(oh), Some(ow)) = (
            span(h, kh, pads[0] + pads[2], stride[0]),
            span(w, kw, pads[1] + pads[3], stride[1]),
        ) else {
            return None;
        };
        let d = ConvDims {
            n: 1 + rng.below(2),
            c: group * icg,
            h,
            w,
            oc: group * ocg,
            oh,
            ow,
        };
        let zx = rng.below(256) as i32;
        let q = Requantize {
            input_zero: zx - 128,
            output_zero: rng.below(40) as i32 - 20,
            min: -128 + rng.below(100) as i32,
            max: 127,
        };
        let c = QConv {
            window: ferrite_hal::op::Window {
                kernel: [kh, kw],
                stride,
                dilation: [dilation; 2],
                pads,
            },
            group,
            requantize: q,
        };
        let k = icg * kh * kw;
        let w: Vec<i8> = (0..d.oc * k).map(|_| rng.next() as i8).collect();
        let bias: Vec<i32> = (0..d.oc)
            .map(|_| (rng.next() % 20_000) as i32 - 10_000)
            .collect();
        let requant: Vec<i32> = (0..d.oc)
            .flat_map(|_| {
                let shift = if rng.below(8) == 0 {
                    0
                } else {
                    -12 + rng.below(8) as i32
                };
                [(1 << 30) + (rng.next() % (1 << 30)) as i32, shift]
            })
            .collect();
        let ops = Operands {
            w: &w,
            bias: &bias,
            requant: &requant,
            q: &q,
        };
        let elements = d.n * d.c * d.h * d.w;
        let mut scratch = std::vec![0u8; 4 * (ferrite_hal::geometry::qconv_scratch_elements(&c, icg, oh, ow).unwrap() + 4)];
        let signed: Vec<i8> = (0..elements).map(|_| rng.next() as i8).collect();
        let mut y = std::vec![0i8; d.n * d.oc * oh * ow];
        let ran = qconv(&c, d, &signed, &w, &bias, &requant, &mut y, &mut scratch);
        assert_ne!(
            ran,
            Some(false),
            "case {case}: the scratch the planner reserves suffices"
        );
        if ran == Some(true) {
            let want: Vec<i8> = definition(&c, &d, &signed, &ops)
                .iter()
                .map(|&v| v as i8)
                .collect();
            assert_eq!(y, want, "int8 case {case}: {c:?} {d:?}");
        }
        // The same geometry on uint8 (zero point in 0..=255).
        let q = Requantize {
            input_zero: zx,
            output_zero: 100,
            min: 0,
            max: 255,
        };
        let c = QConv { requantize: q, ..c };
        let ops = Operands { q: &q, ..ops };
        let unsigned: Vec<u8> = (0..elements).map(|_| rng.next() as u8).collect();
        let mut y = std::vec![0u8; d.n * d.oc * oh * ow];
        let ran = qconv(&c, d, &unsigned, &w, &bias, &requant, &mut y, &mut scratch);
        if ran == Some(true) {
            let want: Vec<u8> = definition(&c, &d, &unsigned, &ops)
                .iter()
                .map(|&v| v as u8)
                .collect();
            assert_eq!(y, want, "uint8 case {case}: {c:?} {d:?}");
        }
        // Which kernel ran: pointwise, regular/grouped stride 1, other strides, depthwise.
        let kind = match (c.is_pointwise(), group_kind == 2, stride) {
            (true, _, _) => 0,
            (false, false, [1, 1]) => 1,
            (false, false, _) => 2,
            (false, true, [1, 1]) => 3,
            (false, true, _) => 4,
        };
        ran.map(|_| kind)
    }

    /// Every AVX2 convolution equals the definition (so the portable kernels) bit for bit, on
    /// random regular, grouped and depthwise geometries: kernels 1–4, strides 1–2, dilation,
    /// asymmetric padding, planes narrower and wider than a vector, per-channel scales with and
    /// without the high-word form, int8 and uint8.
    #[test]
    fn avx2_convolutions_equal_the_definition() {
        if super::super::simd::level() < super::super::simd::Level::Avx2 {
            return;
        }
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let mut ran = [0; 5];
        for case in 0..1500 {
            if let Some(kind) = check_case(&mut rng, case) {
                ran[kind] += 1;
            }
        }
        // Every kernel met enough cases (pointwise ones are rarest: a 1×1 window, stride 1,
        // no padding, one group).
        assert!(ran.iter().all(|&n| n >= 5), "cases per kernel: {ran:?}");
        std::println!("cases per kernel (pointwise, stride 1, strided, depthwise 1, 2): {ran:?}");
    }

    /// The vectorised table addition equals `qadd`'s scalar form: random tables (terms up to
    /// int32's bounds, so sums saturate), every fraction width 0–30, random clamps, lengths
    /// with and without a tail.
    #[test]
    fn qadd_tables_equal_the_scalar_form() {
        if super::super::simd::level() < super::super::simd::Level::Avx2 {
            return;
        }
        let mut rng = Rng(0x1234_5678_9abc_def1);
        for case in 0..400 {
            let frac = (case % 31) as u32;
            let big = case % 3 == 0;
            let table = |rng: &mut Rng| -> Vec<i32> {
                (0..256)
                    .map(|_| {
                        if big {
                            rng.next() as i32
                        } else {
                            (rng.next() as i32) >> 2
                        }
                    })
                    .collect()
            };
            let (ta, tb) = (table(&mut rng), table(&mut rng));
            let len = rng.below(200);
            let a: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            let b: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            let zero = rng.below(256) as i32 - 128;
            let (min, max) = (-128 + rng.below(64) as i32, 127 - rng.below(64) as i32);
            let mut y = std::vec![0i8; len];
            assert!(qadd_tables(
                frac,
                [zero, min, max],
                [&ta, &tb],
                &a,
                &b,
                &mut y
            ));
            let want: Vec<i8> = a
                .iter()
                .zip(&b)
                .map(|(&av, &bv)| {
                    let sum = ta[av as usize].saturating_add(tb[bv as usize]);
                    let rounded = if frac == 0 {
                        sum
                    } else {
                        let q = sum >> frac;
                        let rest = sum & ((1i32 << frac) - 1);
                        q + ((rest + (q & 1)) > (1i32 << (frac - 1))) as i32
                    };
                    rounded.saturating_add(zero).max(min).min(max) as i8
                })
                .collect();
            assert_eq!(y, want, "case {case}: frac {frac}");
        }
    }

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
