//! SIMD kernels for 8-bit integer convolutions on hosts (`std`): AVX2 on x86-64, NEON on
//! aarch64 (the Jetson's CPU fallback). They compute the sums of the portable kernels in
//! [`super::integer`] — exact in wrapping int32, so equal to theirs bit for bit — and the same
//! single rounding, vectorised. This module holds the geometry, shared by both instruction
//! sets; each implements [`Isa`]: the products of a block, the taps of a depthwise vector and
//! eight requantizations.
//!
//! Pointwise and regular convolutions are one block product ([`Isa::product`]): eight output
//! positions of `k` rows (input channels; taps read in place from a zero-point-padded copy of the
//! input for stride 1; eight unfolded windows otherwise) meeting the weights of four output
//! channels, the input zero point folded into the bias. Depthwise convolutions of stride 1 run
//! every tap as one contiguous pass over the padded plane (outputs computed on its full width,
//! the columns past the output's dropped); of stride 2, eight outputs of a row per vector.
//! Everything else (16-bit activations, other strides, planes of fewer than eight outputs)
//! stays with the portable kernels.

#![allow(unsafe_code)]

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "aarch64")]
mod neon;

#[cfg(target_arch = "x86_64")]
pub(in crate::kernels) use avx2::qadd_tables;

use super::conv::ConvDims;
use super::integer::Requantizer;
use super::quantize::QuantInt;
use ferrite_hal::op::{QConv, Requantize};
use std::cell::RefCell;
use std::vec::Vec;

std::thread_local! {
    /// Reused buffer of a depthwise channel's outputs on the padded plane's width.
    static GRID: RefCell<Vec<i32>> = const { RefCell::new(Vec::new()) };
}

/// What an instruction set supplies to the shared geometry: whole inner loops (a block's
/// products, a vector's taps, eight requantizations), each compiled with the instruction set's
/// target features, so the shared code around them needs none.
///
/// # Safety
/// Every method may only be called when the CPU has the instruction set's features.
trait Isa {
    /// A channel's requantization prepared for [`Isa::requantize`].
    type Lanes: Copy;

    /// The prepared form of `scalar`.
    unsafe fn lanes(scalar: &Requantizer) -> Self::Lanes;

    /// The output integers of eight sums: [`Requantizer::apply`] of each, bit for bit.
    unsafe fn requantize(lanes: &Self::Lanes, scalar: &Requantizer, sums: [i32; 8]) -> [i32; 8];

    /// The raw sums `Σ_i w[o + j, i] · x[row(i) + at + t]` (wrapping) for `t < 8`, `j < B`.
    ///
    /// # Safety
    /// As the trait's; and every row's eight bytes from `block.at` are within `block.x`; `ch`
    /// covers channels below `o + B`.
    unsafe fn product<const SIGNED: bool, const B: usize>(
        ch: &Channels<Self>,
        block: &Block<'_>,
        o: usize,
    ) -> [[i32; 8]; B]
    where
        Self: Sized;

    /// `Σ_taps w · x` for eight outputs whose first tap reads `padded[start]`, neighbouring
    /// outputs `STEP` bytes apart (1 or 2).
    ///
    /// # Safety
    /// As the trait's; and every tap's reads — eight bytes from `start + offset` for step 1,
    /// sixteen for step 2 — are within `padded`.
    unsafe fn taps<const SIGNED: bool, const STEP: usize>(
        plan: &TapPlan<'_>,
        padded: &[u8],
        start: usize,
    ) -> [i32; 8];

    /// A depthwise channel's outputs: [`depthwise_pass`] compiled with the instruction set.
    ///
    /// # Safety
    /// As the trait's, and [`depthwise_pass`]'s.
    unsafe fn pass<const SIGNED: bool, const STEP: usize>(
        plan: &TapPlan<'_>,
        padded: &[u8],
        channel: &ChannelPass<'_, Self>,
        out: &mut [i32],
    ) where
        Self: Sized;
}

/// A depthwise output channel's offset and requantization, and where its vectors start.
struct ChannelPass<'a, I: Isa> {
    first: i32,
    scalar: &'a Requantizer,
    lanes: &'a I::Lanes,
    /// The padded-plane byte of output `t`'s first tap: `start + STEP·t`.
    start: usize,
}

/// `out.len()` (at least eight) outputs of a depthwise channel, eight per vector (the last
/// vector overlapping the one before), output `t`'s first tap at `padded[channel.start +
/// STEP·t]`: sums over the taps, offset, requantized. Each instruction set's [`Isa::pass`]
/// inlines this, so its taps and requantization inline too.
///
/// # Safety
/// The CPU has `I`'s features; every tap of every output reads within `padded` (sixteen bytes
/// from a vector's start for step 2).
#[inline(always)]
unsafe fn depthwise_pass<I: Isa, const SIGNED: bool, const STEP: usize>(
    plan: &TapPlan<'_>,
    padded: &[u8],
    channel: &ChannelPass<'_, I>,
    out: &mut [i32],
) {
    let count = out.len();
    if count < 8 {
        return;
    }
    for v in 0..count.div_ceil(8) {
        let t = (8 * v).min(count - 8);
        // SAFETY: the caller's bounds.
        let sums = unsafe { I::taps::<SIGNED, STEP>(plan, padded, channel.start + STEP * t) };
        let sums = sums.map(|s| s.wrapping_add(channel.first));
        // SAFETY: the caller's.
        let results = unsafe { I::requantize(channel.lanes, channel.scalar, sums) };
        out[t..t + 8].copy_from_slice(&results);
    }
}

/// [`super::integer::qconv`] with a SIMD kernel, when the build runs them and one fits the step:
/// 8-bit activations, and a pointwise, regular or grouped, or stride-1 or stride-2 depthwise
/// geometry. `None` leaves the step to the portable kernels; `Some(false)` is a scratch or
/// operand too small (which the verifier rules out).
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
    if X::WIDE || Y::WIDE {
        return None;
    }
    let ops = Operands {
        w,
        bias,
        requant,
        q: &c.requantize,
    };
    #[cfg(target_arch = "x86_64")]
    if super::simd::level() >= super::simd::Level::Avx2 {
        // SAFETY: the CPU has AVX2 (`simd::level`).
        return unsafe { avx2::qconv(c, &d, &ops, x, y, scratch) };
    }
    #[cfg(target_arch = "aarch64")]
    if super::gemm::neon_enabled() {
        // SAFETY: the CPU has NEON (`neon_enabled`).
        return unsafe { neon::qconv(c, &d, &ops, x, y, scratch) };
    }
    let _ = (ops, scratch);
    None
}

/// The dispatch by geometry, inlined into each instruction set's entry point.
#[inline(always)]
fn qconv_with<I: Isa, X: QuantInt, Y: QuantInt>(
    c: &QConv,
    d: &ConvDims,
    ops: &Operands<'_>,
    x: &[X],
    y: &mut [Y],
    scratch: &mut [u8],
) -> Option<bool> {
    let group = c.group.max(1);
    let depthwise = d.c / group == 1 && group > 1;
    let bytes: &[u8] = bytemuck::cast_slice(x);
    let signed = X::MIN < 0;
    if c.is_pointwise() {
        return pointwise::<I, Y>(ops, d, bytes, signed, y);
    }
    // The portable kernels' scratch (a padded plane, or one int16 column), required here too
    // so that every build refuses the same steps, whether or not its kernel reads the scratch.
    let [kh, kw] = c.window.kernel;
    let needed = if depthwise {
        let [sh, sw] = c.window.stride;
        let [dh, dw] = c.window.dilation;
        let span = |out: usize, s: usize, k: usize, dil: usize| {
            out.saturating_sub(1) * s + k.saturating_sub(1) * dil + 1
        };
        span(d.oh, sh, kh, dh) * span(d.ow, sw, kw, dw)
    } else {
        2 * (d.c / group) * kh * kw
    };
    if scratch.len() < needed {
        return Some(false);
    }
    match (depthwise, c.window.stride) {
        (true, [1, 1]) => Some(depthwise_stride_one::<I, Y>(
            c, ops, d, bytes, signed, y, scratch,
        )),
        (true, [2, 2]) if d.ow >= 8 => {
            Some(depthwise_stride_two::<I, Y>(c, ops, d, bytes, signed, y))
        }
        (true, _) => None,
        (false, _) => columns::<I, Y>(c, ops, d, bytes, signed, y),
    }
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

/// `bias − zx · Σ w`: what a channel's sum of raw products is offset by.
fn base(bias: i32, zx: i32, weights: &[i8]) -> i32 {
    let sum = weights.iter().fold(0i32, |s, &v| s.wrapping_add(v as i32));
    bias.wrapping_sub(zx.wrapping_mul(sum))
}

/// Every output channel's weights widened to int16, offset and requantization, worked out once
/// per step.
struct Channels<I: Isa> {
    /// Channel `o`'s weights as int16 pairs in one word each (little-endian: the low half is
    /// row `2i`), `pairs` per channel; a zero past an odd row count.
    words: Vec<i32>,
    pairs: usize,
    /// `bias − zx · Σ w`: what the channel's sum of raw products is offset by.
    bases: Vec<i32>,
    scalar: Vec<Requantizer>,
    lanes: Vec<I::Lanes>,
}

impl<I: Isa> Channels<I> {
    /// From weight rows of `k` values, one per output channel.
    #[inline(always)]
    fn new(ops: &Operands<'_>, k: usize, channels: usize) -> Channels<I> {
        let pairs = k.div_ceil(2);
        let rows = ops.w.chunks_exact(k.max(1)).take(channels);
        let mut words = std::vec![0i32; channels * pairs];
        let mut bases = Vec::with_capacity(channels);
        let halves: &mut [i16] = bytemuck::cast_slice_mut(&mut words);
        for (o, (row, out)) in rows.zip(halves.chunks_exact_mut(2 * pairs)).enumerate() {
            for (half, &v) in out.iter_mut().zip(row) {
                *half = v as i16;
            }
            let bias = ops.bias.get(o).copied().unwrap_or(0);
            bases.push(base(bias, ops.q.input_zero, row));
        }
        let scalar: Vec<Requantizer> = (0..channels).map(|o| ops.rescaler(o)).collect();
        // SAFETY: only reached from an instruction set's entry point, on a CPU that has it.
        let lanes = scalar.iter().map(|s| unsafe { I::lanes(s) }).collect();
        Channels {
            words,
            pairs,
            bases,
            scalar,
            lanes,
        }
    }

    /// Channel `o`'s weights as int16, one per row (`2·pairs` of them).
    #[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))] // the NEON products read these
    fn halves(&self, o: usize) -> &[i16] {
        let words = self.words.get(o * self.pairs..(o + 1) * self.pairs);
        bytemuck::cast_slice(words.unwrap_or(&[]))
    }
}

/// Where a block product reads and writes: row `i` of the eight positions from `at` is
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

    /// Row `i`'s offset.
    #[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))] // the NEON products read these
    #[inline(always)]
    fn offset(&self, i: usize) -> usize {
        match *self {
            Rows::Strided { stride, .. } => i * stride,
            Rows::Table(offsets) => offsets.get(i).copied().unwrap_or(0),
        }
    }
}

/// A [`Block`] position that is not an output (past the row on a padded grid).
const SKIP: usize = usize::MAX;

/// The block product for channels `from..to`, four at a time, then one at a time: raw sums,
/// offset, requantized and written; nothing when a row would read past `x` (which the callers'
/// shapes rule out).
#[inline(always)]
fn product_channels<I: Isa, Y: QuantInt>(
    signed: bool,
    ch: &Channels<I>,
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
                (true, true) => {
                    store::<I, 4, Y>(ch, block, o, I::product::<true, 4>(ch, block, o), y)
                }
                (true, false) => {
                    store::<I, 4, Y>(ch, block, o, I::product::<false, 4>(ch, block, o), y)
                }
                (false, true) => {
                    store::<I, 1, Y>(ch, block, o, I::product::<true, 1>(ch, block, o), y)
                }
                (false, false) => {
                    store::<I, 1, Y>(ch, block, o, I::product::<false, 1>(ch, block, o), y)
                }
            }
        }
        o += if four { 4 } else { 1 };
    }
}

/// A block's raw sums for channels `o..o + B`: offset by each channel's base, requantized and
/// written where the block says.
#[inline(always)]
fn store<I: Isa, const B: usize, Y: QuantInt>(
    ch: &Channels<I>,
    block: &Block<'_>,
    o: usize,
    sums: [[i32; 8]; B],
    y: &mut [Y],
) {
    for (j, sums) in sums.iter().enumerate() {
        let (Some(&base), Some(lanes), Some(scalar)) = (
            ch.bases.get(o + j),
            ch.lanes.get(o + j),
            ch.scalar.get(o + j),
        ) else {
            return;
        };
        // SAFETY: only reached from an instruction set's entry point, on a CPU that has it.
        let out = unsafe { I::requantize(lanes, scalar, sums.map(|s| s.wrapping_add(base))) };
        let row = (o + j) * block.y_stride;
        let [first, last] = [block.to[0], block.to[7]];
        if first != SKIP && last == first + 7 {
            // Eight outputs in a row (every block but those across a padded grid's row end).
            if let Some(slots) = y.get_mut(row + first..row + first + 8) {
                for (slot, v) in slots.iter_mut().zip(out) {
                    *slot = Y::narrow(v);
                }
            }
            continue;
        }
        for (&to, v) in block.to.iter().zip(out) {
            if to != SKIP {
                if let Some(slot) = y.get_mut(row + to) {
                    *slot = Y::narrow(v);
                }
            }
        }
    }
}

/// Output positions `p0..p0 + 8` written contiguously from `y_at`.
fn contiguous(y_at: usize) -> [usize; 8] {
    core::array::from_fn(|t| y_at + t)
}

/// Pointwise convolution, `Y[o, p] = bias[o] − zx·Σw[o] + Σ_i W[o, i]·X[i, p]`: the input
/// channels are the rows of the block product, eight positions at a time (the last eight
/// overlapping the block before when the plane is not a multiple of eight: those outputs are
/// computed twice, identically). `None` for a plane of fewer than eight positions.
#[inline(always)]
fn pointwise<I: Isa, Y: QuantInt>(
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
    let ch = Channels::<I>::new(ops, c, oc);
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

/// Regular and grouped convolution. Stride 1: on a zero-point-padded copy of the group's
/// input planes, each tap of eight neighbouring positions of the padded width is eight
/// contiguous bytes at a fixed offset, so the block product reads the taps in place (positions
/// past an output row are computed and dropped). Other strides: eight output positions'
/// windows unfolded into a `[k, 8]` byte block (the zero point in the padding). `None` for
/// fewer than eight output positions.
#[inline(always)]
fn columns<I: Isa, Y: QuantInt>(
    c: &QConv,
    ops: &Operands<'_>,
    d: &ConvDims,
    bytes: &[u8],
    signed: bool,
    y: &mut [Y],
) -> Option<bool> {
    let group = c.group.max(1);
    let (icg, ocg) = (d.c / group, d.oc / group);
    let [kh, kw] = c.window.kernel;
    let k = icg * kh * kw;
    let positions = d.oh * d.ow;
    let fits = bytes.len() >= d.n * d.c * d.h * d.w
        && y.len() >= d.n * d.oc * positions
        && ops.w.len() >= d.oc * k
        && ops.bias.len() >= d.oc;
    if !fits {
        return Some(false);
    }
    if positions < 8 || k == 0 || d.h * d.w == 0 {
        return None;
    }
    let ch = Channels::<I>::new(ops, k, d.oc);
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
/// padding. Eight positions in one output row, of stride 1 or 2, whose tap lies inside the
/// input row copy eight bytes (every other of sixteen for stride 2).
#[inline(always)]
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
    let one_row = ox + 8 <= d.ow && (sw == 1 || sw == 2);
    let span = 8 * sw;
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
                    Some(row) if inside => {
                        for (slot, &v) in out.iter_mut().zip(row[at..at + span].iter().step_by(sw))
                        {
                            *slot = v;
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

/// A depthwise output channel's taps.
struct TapPlan<'a> {
    weights: &'a [i8],
    kernel: [usize; 2],
    dilation: [usize; 2],
    /// The padded plane's width.
    pw: usize,
}

impl TapPlan<'_> {
    /// Tap `(ky, kx)`'s weight and its offset in the padded plane.
    #[inline(always)]
    fn tap(&self, ky: usize, kx: usize) -> (i32, usize) {
        let [_, kw] = self.kernel;
        let [dh, dw] = self.dilation;
        let weight = self.weights.get(ky * kw + kx).copied().unwrap_or(0);
        (weight as i32, ky * dh * self.pw + kx * dw)
    }
}

/// A depthwise step of stride `stride` (both axes; at least one output, a non-empty kernel):
/// its zero-point-padded plane's `[height, width]` (every input position its outputs read) and
/// its channel multiplier, or `None` when an operand holds less than the shapes say.
fn depthwise_extent(
    c: &QConv,
    ops: &Operands<'_>,
    d: &ConvDims,
    [x_len, y_len]: [usize; 2],
    stride: usize,
) -> Option<([usize; 2], usize)> {
    let [kh, kw] = c.window.kernel;
    let [dh, dw] = c.window.dilation;
    let ph = (d.oh - 1) * stride + (kh - 1) * dh + 1;
    let pw = (d.ow - 1) * stride + (kw - 1) * dw + 1;
    let multiplier = d.oc / d.c.max(1);
    let fits = x_len >= d.n * d.c * d.h * d.w
        && y_len >= d.n * d.oc * d.oh * d.ow
        && ops.w.len() >= d.oc * kh * kw
        && ops.bias.len() >= d.oc
        && multiplier * d.c == d.oc;
    fits.then_some(([ph, pw], multiplier))
}

/// Depthwise convolution of stride 1 on a zero-point-padded copy of each plane (in `scratch`,
/// as the portable kernel makes it): output `(oy, ox)` reads the padded plane at
/// `(oy + ky·dh)·pw + ox + kx·dw`, so on the padded plane's width every tap is one contiguous
/// pass; the `pw − ow` extra columns per row are computed and dropped. False when the scratch
/// or an operand is too small.
#[inline(always)]
fn depthwise_stride_one<I: Isa, Y: QuantInt>(
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
    let Some(([ph, pw], multiplier)) = depthwise_extent(c, ops, d, [x.len(), y.len()], 1) else {
        return false;
    };
    let taps = kh * kw;
    let Some(padded) = scratch.get_mut(..ph * pw) else {
        return false;
    };
    let zx = ops.q.input_zero;
    // Padded-width positions up to the last output; with the farthest tap's offset, a read
    // ends within the plane: (oh − 1)·pw + ow − 1 + (kh − 1)·dh·pw + (kw − 1)·dw < ph·pw.
    let grid = (oh - 1) * pw + ow;
    GRID.with_borrow_mut(|grid_out| {
        grid_out.clear();
        grid_out.resize(grid, 0);
        for b in 0..d.n {
            for ch in 0..d.c {
                let plane = &x[(b * d.c + ch) * d.h * d.w..][..d.h * d.w];
                pad_plane(plane, d, win.pads, zx as u8, padded, pw);
                let padded = &*padded;
                for m in 0..multiplier {
                    let o = ch * multiplier + m;
                    let weights = &ops.w[o * taps..(o + 1) * taps];
                    let plan = TapPlan {
                        weights,
                        kernel: [kh, kw],
                        dilation: [dh, dw],
                        pw,
                    };
                    let first = base(ops.bias[o], zx, weights);
                    let scalar = ops.rescaler(o);
                    // SAFETY: only reached from an instruction set's entry point.
                    let lanes = unsafe { I::lanes(&scalar) };
                    if grid < 8 {
                        for (j, slot) in grid_out.iter_mut().enumerate() {
                            let mut sum = first;
                            for ky in 0..kh {
                                for kx in 0..kw {
                                    let (wv, offset) = plan.tap(ky, kx);
                                    let v = padded[j + offset];
                                    let v = if signed { v as i8 as i32 } else { v as i32 };
                                    sum = sum.wrapping_add(wv * v);
                                }
                            }
                            *slot = scalar.apply(sum);
                        }
                    } else {
                        let channel = ChannelPass {
                            first,
                            scalar: &scalar,
                            lanes: &lanes,
                            start: 0,
                        };
                        // SAFETY: an instruction set's entry point; every grid position's taps
                        // read inside the plane (see `grid`).
                        unsafe {
                            if signed {
                                I::pass::<true, 1>(&plan, padded, &channel, grid_out);
                            } else {
                                I::pass::<false, 1>(&plan, padded, &channel, grid_out);
                            }
                        }
                    }
                    let out = &mut y[(b * d.oc + o) * oh * ow..][..oh * ow];
                    for (row, outputs) in out.chunks_exact_mut(ow).enumerate() {
                        for (slot, &r) in outputs.iter_mut().zip(&grid_out[row * pw..]) {
                            *slot = Y::narrow(r);
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
#[inline(always)]
fn depthwise_stride_two<I: Isa, Y: QuantInt>(
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
    let Some(([ph, pw], multiplier)) = depthwise_extent(c, ops, d, [x.len(), y.len()], 2) else {
        return false;
    };
    let taps = kh * kw;
    let zx = ops.q.input_zero;
    let mut padded = std::vec![0u8; ph * pw + 16];
    let mut results = std::vec![0i32; ow];
    for b in 0..d.n {
        for ch in 0..d.c {
            let plane = &x[(b * d.c + ch) * d.h * d.w..][..d.h * d.w];
            pad_plane(plane, d, win.pads, zx as u8, &mut padded[..ph * pw], pw);
            for m in 0..multiplier {
                let o = ch * multiplier + m;
                let weights = &ops.w[o * taps..(o + 1) * taps];
                let plan = TapPlan {
                    weights,
                    kernel: [kh, kw],
                    dilation: [dh, dw],
                    pw,
                };
                let first = base(ops.bias[o], zx, weights);
                let scalar = ops.rescaler(o);
                // SAFETY: only reached from an instruction set's entry point.
                let lanes = unsafe { I::lanes(&scalar) };
                let out = &mut y[(b * d.oc + o) * oh * ow..][..oh * ow];
                for (oy, row) in out.chunks_exact_mut(ow).enumerate() {
                    let channel = ChannelPass {
                        first,
                        scalar: &scalar,
                        lanes: &lanes,
                        start: 2 * oy * pw,
                    };
                    // SAFETY: an instruction set's entry point; the last tap's sixteen bytes end
                    // by ph·pw + 1 <= padded.len().
                    unsafe {
                        if signed {
                            I::pass::<true, 2>(&plan, &padded, &channel, &mut results);
                        } else {
                            I::pass::<false, 2>(&plan, &padded, &channel, &mut results);
                        }
                    }
                    for (slot, &r) in row.iter_mut().zip(&results) {
                        *slot = Y::narrow(r);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A small xorshift generator for the random cases.
    pub(super) struct Rng(pub(super) u64);

    impl Rng {
        pub(super) fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        pub(super) fn below(&mut self, n: usize) -> usize {
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

    /// Whether this build runs SIMD integer kernels (AVX2 on x86-64, NEON on aarch64).
    fn simd_runs() -> bool {
        #[cfg(target_arch = "x86_64")]
        return super::super::simd::level() >= super::super::simd::Level::Avx2;
        #[cfg(target_arch = "aarch64")]
        return super::super::gemm::neon_enabled();
        #[allow(unreachable_code)]
        false
    }

    /// Every SIMD convolution equals the definition (so the portable kernels) bit for bit, on
    /// random regular, grouped and depthwise geometries: kernels 1–4, strides 1–2, dilation,
    /// asymmetric padding, planes narrower and wider than a vector, per-channel scales with and
    /// without the high-word form, int8 and uint8.
    #[test]
    fn simd_convolutions_equal_the_definition() {
        if !simd_runs() {
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
}
