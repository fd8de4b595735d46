//! 3 × 3 int8 depthwise convolutions on AVX2 with eight channels across the vector lanes, for
//! small planes. The planar kernel ([`super::shared::depthwise_passes`]) pads and runs each channel's
//! plane on its own, eight outputs of one channel a vector: a 6 × 6 plane is five vectors (the
//! last half empty) behind a channel's set-up, a 3 × 3 one two. Here eight channels' input is
//! turned at a time into channel-interleaved words, one per padded position and channel, each the
//! int16 pair of that position's value and its right neighbour's (the border the input zero
//! point); an output of eight channels is then six `vpmaddwd`s — per kernel row, the pair at its
//! first tap against the weight pairs `(w0, w1)`, and the pair at its third tap against
//! `(w2, 0)` — and each lane takes its channel's high-word requantization (as
//! [`super::avx2_lanes`] does). Four outputs of a group are narrowed and turned into their
//! channels' rows together. Exact as the others: the same products, summed in wrapping int32
//! from the channel's base (`bias − zx·Σw`; padding reads the zero point), the same rounding.

use super::avx2::Avx2;
use super::avx2_lanes::{group_requant, high_word, scalar_lanes, GroupRequant};
use super::shared::{Channels, Operands, StepKey};
use crate::base::geometry::ConvDims;
use crate::base::quantized::QuantInt;
use core::arch::x86_64::*;
use ferrite_hal::op::QConv;
use std::vec::Vec;

/// Consecutive outputs of a channel group narrowed and stored together.
const RUN: usize = 4;

/// Output positions a plane may have for this kernel: past them the planar kernel's vectors
/// are full and its per-channel set-up small beside them, and this one's packing costs as much
/// (measured: VWW's 6 × 6 and 3 × 3 layers 5.7 → 4.8 and 9.8 → 4.6 µs, its 12 × 12 one even,
/// DS-CNN's 25 × 5 7.3 → 8.3 µs).
const MOST_OUTPUTS: usize = 64;

/// A 3 × 3 depthwise convolution (one output channel per input channel) of stride 1 or 2 by
/// channel lanes, for 8-bit activations, channels in whole groups of eight, planes of
/// [`RUN`]..=[`MOST_OUTPUTS`] outputs and padded rows of at most fifteen positions; `None` for
/// the others; `Some(false)` when an operand is shorter than the sizes say.
///
/// # Safety
/// The CPU has AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn depthwise<X: QuantInt, Y: QuantInt>(
    key: StepKey,
    conv: &QConv,
    ops: &Operands<'_>,
    d: &ConvDims,
    x: &[X],
    y: &mut [Y],
) -> Option<bool> {
    let geometry = Geometry::of(conv, d)?;
    if X::WIDE || Y::WIDE {
        return None;
    }
    let bytes: &[u8] = bytemuck::cast_slice(x);
    if !super::shared::operands_fit(ops, d, 9, [bytes.len(), y.len()]) {
        return Some(false);
    }
    let signed = X::MIN < 0;
    let mut kept = ops.ctx.take(key, || LaneState::new(ops, &geometry, signed));
    let state = kept.state();
    let (c, image, plane) = (d.c, d.c * d.h * d.w, geometry.plane);
    let mut done = true;
    for b in 0..d.n {
        let (Some(xb), Some(yb)) = (
            bytes.get(b * image..(b + 1) * image),
            y.get_mut(b * c * plane..(b + 1) * c * plane),
        ) else {
            return Some(false);
        };
        // One group of eight channels at a time: its padded words (a few KB) stay in the L1
        // cache between their packing and their outputs.
        for group in 0..c / 8 {
            // SAFETY: AVX2 (this function's); the state was built for this geometry.
            unsafe {
                pack_neighbours(xb, &geometry, state, signed, group);
                done &= outputs(state, &geometry, yb, group);
            }
        }
    }
    ops.ctx.keep(kept);
    Some(done)
}

/// A step's sizes as the kernel uses them.
struct Geometry {
    /// Channels, input height and width.
    c: usize,
    h: usize,
    w: usize,
    /// The output plane's width and positions, and the stride.
    ow: usize,
    plane: usize,
    stride: usize,
    /// Padding above and left of the input.
    top: usize,
    left: usize,
    /// The padded plane's rows and columns: what the outputs read.
    rows: usize,
    cols: usize,
}

impl Geometry {
    /// The geometry of a step this kernel takes (see [`depthwise`]), else `None`.
    fn of(conv: &QConv, d: &ConvDims) -> Option<Geometry> {
        let win = &conv.window;
        let [s, sw] = win.stride;
        let shape = win.kernel == [3, 3]
            && win.dilation == [1, 1]
            && s == sw
            && (s == 1 || s == 2)
            && conv.group == d.c
            && d.oc == d.c
            && d.c > 0
            && d.c.is_multiple_of(8);
        let plane = d.oh.checked_mul(d.ow)?;
        if !shape || !(RUN..=MOST_OUTPUTS).contains(&plane) {
            return None;
        }
        let rows = (d.oh - 1) * s + 3;
        let cols = (d.ow - 1) * s + 3;
        // A padded row and the right neighbour of its last position fit sixteen bytes.
        if cols + 1 > 16 || d.w > 16 {
            return None;
        }
        Some(Geometry {
            c: d.c,
            h: d.h,
            w: d.w,
            ow: d.ow,
            plane,
            stride: s,
            top: win.pads[0],
            left: win.pads[1],
            rows,
            cols,
        })
    }
}

/// A step's kept state: its channels' bases and scalar requantizers, each group's
/// requantization and weight pairs, each output's first word, the padded rows' byte shuffle,
/// and the image's neighbour pairs.
struct LaneState {
    channels: Channels<Avx2>,
    groups: Vec<GroupRequant>,
    /// Per group of eight channels, per kernel row, the lines `(w0, w1)` and `(w2, 0)` of
    /// int16 pairs: `[group][6][8]` words.
    lines: Vec<i32>,
    /// Each output's first tap's word in [`LaneState::pairs`].
    firsts: Vec<usize>,
    /// Where a padded row's sixteen bytes come from in its input row (`0x80`: the border) and
    /// what the border holds (the zero point).
    control: [u8; 16],
    fill: [u8; 16],
    /// The input zero point's byte.
    zero: u8,
    /// A group of eight channels' padded positions, `[rows·cols][8]` words: the int16 pair of
    /// the position's value and its right neighbour's.
    pairs: Vec<i32>,
}

// SAFETY: plain integers and integer vectors.
unsafe impl Send for LaneState {}
// SAFETY: as above.
unsafe impl Sync for LaneState {}

impl LaneState {
    /// The state of a step of `g`'s geometry, for inputs of the signedness.
    #[inline(always)]
    fn new(ops: &Operands<'_>, g: &Geometry, signed: bool) -> LaneState {
        let channels = Channels::<Avx2>::new(ops, 9, g.c, signed);
        let groups = (0..g.c / 8).map(|i| group_requant(&channels, i)).collect();
        let pair = |a: i8, b: i8| (a as i16 as u16 as u32 | (b as i16 as u16 as u32) << 16) as i32;
        let mut lines = std::vec![0i32; g.c / 8 * 48];
        for (o, taps) in ops.w.chunks_exact(9).take(g.c).enumerate() {
            for (ky, &[w0, w1, w2]) in taps.as_chunks::<3>().0.iter().enumerate() {
                let at = (o / 8 * 6 + 2 * ky) * 8 + o % 8;
                if let Some(slot) = lines.get_mut(at) {
                    *slot = pair(w0, w1);
                }
                if let Some(slot) = lines.get_mut(at + 8) {
                    *slot = pair(w2, 0);
                }
            }
        }
        let (s, cols) = (g.stride, g.cols);
        let firsts = (0..g.plane)
            .map(|p| ((p / g.ow) * s * cols + (p % g.ow) * s) * 8)
            .collect();
        let zero = ops.q.input_zero as u8;
        let mut control = [0x80u8; 16];
        let mut fill = [zero; 16];
        for (px, (control, fill)) in control.iter_mut().zip(&mut fill).enumerate() {
            if let Some(ix) = px.checked_sub(g.left).filter(|&ix| ix < g.w) {
                *control = ix as u8;
                *fill = 0;
            }
        }
        LaneState {
            channels,
            groups,
            lines,
            firsts,
            control,
            fill,
            zero,
            pairs: std::vec![0; g.rows * cols * 8],
        }
    }
}

/// Channels `8·group..8·group + 8` of one image's input (`[c][h][w]` bytes) into the state's
/// neighbour pairs: per padded row, the eight channels' rows padded in registers (one shuffle each),
/// turned into sixteen positions of eight channels, then each position's eight bytes
/// interleaved with its right neighbour's and widened.
///
/// # Safety
/// AVX2; the state was built for `g`.
#[inline(always)]
unsafe fn pack_neighbours(
    x: &[u8],
    g: &Geometry,
    state: &mut LaneState,
    signed: bool,
    group: usize,
) {
    if x.len() < g.c * g.h * g.w || state.pairs.len() < g.rows * g.cols * 8 || 8 * group >= g.c {
        return;
    }
    // SAFETY: AVX2 (the caller's); every load and store is bounds-checked above or below.
    unsafe {
        let control = _mm_loadu_si128(state.control.as_ptr().cast());
        let fill = _mm_loadu_si128(state.fill.as_ptr().cast());
        // A row outside the input: the zero point throughout.
        let border = _mm_set1_epi8(state.zero as i8);
        // Position p's byte j and position p + 1's, side by side.
        let interleave = _mm_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
        let mut columns = [0u8; 128];
        {
            for py in 0..g.rows {
                let iy = py.checked_sub(g.top).filter(|&iy| iy < g.h);
                // Loops, not `array::from_fn`: a closure is compiled without this function's
                // instruction set, every intrinsic in it a call.
                let mut rows = [border; 8];
                if let Some(iy) = iy {
                    for (j, row) in rows.iter_mut().enumerate() {
                        let start = ((8 * group + j) * g.h + iy) * g.w;
                        let source = match x.get(start..start + 16) {
                            Some(s) => _mm_loadu_si128(s.as_ptr().cast()),
                            None => {
                                let mut tail = [0u8; 16];
                                let bytes = x.get(start..start + g.w).unwrap_or(&[]);
                                tail.iter_mut().zip(bytes).for_each(|(t, &b)| *t = b);
                                _mm_loadu_si128(tail.as_ptr().cast())
                            }
                        };
                        *row = _mm_or_si128(_mm_shuffle_epi8(source, control), fill);
                    }
                }
                // Sixteen positions by eight channels: pairs, fours, eights of rows. a[k]:
                // rows 2k, 2k + 1 at positions 0–7 (k < 4); rows 2(k − 4), 2(k − 4) + 1 at
                // positions 8–15 (k ≥ 4).
                let mut a = [border; 8];
                for k in 0..4 {
                    a[k] = _mm_unpacklo_epi8(rows[2 * k], rows[2 * k + 1]);
                    a[4 + k] = _mm_unpackhi_epi8(rows[2 * k], rows[2 * k + 1]);
                }
                let mut e = [border; 8];
                for h in 0..2 {
                    e[4 * h] = _mm_unpacklo_epi16(a[4 * h], a[4 * h + 1]);
                    e[4 * h + 1] = _mm_unpackhi_epi16(a[4 * h], a[4 * h + 1]);
                    e[4 * h + 2] = _mm_unpacklo_epi16(a[4 * h + 2], a[4 * h + 3]);
                    e[4 * h + 3] = _mm_unpackhi_epi16(a[4 * h + 2], a[4 * h + 3]);
                }
                // e[4h + 0]: rows 0–3 at positions 8h + 0..4; e[4h + 1]: 8h + 4..8;
                // e[4h + 2]: rows 4–7 at 8h + 0..4; e[4h + 3]: 8h + 4..8.
                for h in 0..2 {
                    for q in 0..2 {
                        let (lo, hi) = (e[4 * h + q], e[4 * h + 2 + q]);
                        let at = columns.as_mut_ptr().add(64 * h + 32 * q);
                        _mm_storeu_si128(at.cast(), _mm_unpacklo_epi32(lo, hi));
                        _mm_storeu_si128(at.add(16).cast(), _mm_unpackhi_epi32(lo, hi));
                    }
                }
                let out = state.pairs.as_mut_ptr().add(py * g.cols * 8);
                for px in 0..g.cols {
                    // Positions px and px + 1 (px + 1 ≤ 15: `Geometry::of`).
                    let both = _mm_loadu_si128(columns.as_ptr().add(8 * px).cast());
                    let mixed = _mm_shuffle_epi8(both, interleave);
                    let wide = if signed {
                        _mm256_cvtepi8_epi16(mixed)
                    } else {
                        _mm256_cvtepu8_epi16(mixed)
                    };
                    _mm256_storeu_si256(out.add(px * 8).cast(), wide);
                }
            }
        }
    }
}

/// Channels `8·group..8·group + 8`'s outputs of one image (`y`, `[c][plane]` bytes), four
/// consecutive outputs at a time (the last four overlapping the ones before when the plane is
/// not a multiple: those outputs computed twice, identically). False (nothing written) when the
/// state or `y` is short.
///
/// # Safety
/// AVX2; the state's pairs hold this group of this image.
#[inline(always)]
unsafe fn outputs<Y: QuantInt>(state: &LaneState, g: &Geometry, y: &mut [Y], group: usize) -> bool {
    let (c, plane, cols) = (g.c, g.plane, g.cols);
    let complete = state.lines.len() >= (group + 1) * 48
        && state.firsts.len() >= plane
        && state.pairs.len() >= g.rows * cols * 8
        && y.len() >= c * plane
        && 8 * group + 8 <= c
        && plane >= RUN;
    let Some(rq) = state.groups.get(group).filter(|_| complete) else {
        return false;
    };
    // An output's kernel rows are `row` words apart, its third tap `third` from its first.
    let (row, third) = (cols * 8, 16);
    {
        // SAFETY: AVX2 (the caller's); an output's taps lie in the padded plane (its first
        // position at most (rows − 3, cols − 3)); `y` holds `c` rows of `plane` (`complete`).
        unsafe {
            let mut lines = [_mm256_setzero_si256(); 6];
            for (i, line) in lines.iter_mut().enumerate() {
                *line = _mm256_loadu_si256(state.lines.as_ptr().add((6 * group + i) * 8).cast());
            }
            let pairs = state.pairs.as_ptr();
            let mut p = 0;
            while p < plane {
                let p0 = p.min(plane - RUN);
                let mut sums = [_mm256_setzero_si256(); RUN];
                for (i, sum) in sums.iter_mut().enumerate() {
                    let first = pairs.add(*state.firsts.get_unchecked(p0 + i));
                    let mut acc = rq.base;
                    for ky in 0..3 {
                        let at = first.add(ky * row);
                        let near = _mm256_loadu_si256(at.cast());
                        let far = _mm256_loadu_si256(at.add(third).cast());
                        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(near, lines[2 * ky]));
                        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(far, lines[2 * ky + 1]));
                    }
                    *sum = if rq.exact {
                        high_word(rq, acc)
                    } else {
                        scalar_lanes(&state.channels, group, acc)
                    };
                }
                store::<Y>(&sums, y.as_mut_ptr().add(8 * group * plane + p0), plane);
                p = p0 + RUN;
            }
        }
    }
    true
}

/// Four outputs of eight channels (`sums[i]`: output `i`, channel `j` in lane `j`, each in the
/// output type's range) into the channels' rows from `at` (`plane` apart), four bytes each.
///
/// # Safety
/// AVX2; eight rows of `plane` from `at` hold four outputs from there.
#[inline(always)]
unsafe fn store<Y: QuantInt>(sums: &[__m256i; RUN], at: *mut Y, plane: usize) {
    // SAFETY: the caller's.
    unsafe {
        // Per 128-bit lane (channels 0–3, then 4–7): outputs 0, 1, 2, 3, four channels each.
        let low = _mm256_packs_epi32(sums[0], sums[1]);
        let high = _mm256_packs_epi32(sums[2], sums[3]);
        let bytes = if Y::MIN < 0 {
            _mm256_packs_epi16(low, high)
        } else {
            _mm256_packus_epi16(low, high)
        };
        // Channel by channel, its four outputs.
        let transpose = _mm256_setr_epi8(
            0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4, 8, 12, 1, 5, 9, 13, 2, 6,
            10, 14, 3, 7, 11, 15,
        );
        let mut rows = [0u32; 8];
        _mm256_storeu_si256(
            rows.as_mut_ptr().cast(),
            _mm256_shuffle_epi8(bytes, transpose),
        );
        for (j, &word) in rows.iter().enumerate() {
            core::ptr::write_unaligned(at.add(j * plane).cast::<u32>(), word);
        }
    }
}
