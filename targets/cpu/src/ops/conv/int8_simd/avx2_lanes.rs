//! Pointwise int8 convolutions on AVX2 with output channels across the vector lanes, for small
//! planes: a tile of two output positions by up to 48 output channels (six groups of eight),
//! each step of two input channels twelve `vpmaddwd`s of a group's eight weight pairs against a
//! position's broadcast input pair — two broadcasts per twelve multiply-adds, where the
//! position-lane kernels ([`super::avx2_wide`], blocks of sixteen positions) need one per two.
//! No lane idles on planes that are not a multiple of a block (MobileNet's 6 × 6 and 3 × 3
//! planes: a third and more of those kernels' products), and each group's requantization is
//! eight vectors of per-channel constants; the price is a byte transpose per tile to store the
//! outputs in their channels' rows. Exact as the others: the products of int16-widened bytes and
//! their pair sums fit int32, the sums wrap as the portable kernel's do, and each lane then takes
//! its channel's high-word rounding.

use super::avx2::Avx2;
use super::shared::{Channels, Operands, StepKey};
use crate::base::geometry::ConvDims;
use crate::base::quantized::QuantInt;
use core::arch::x86_64::*;
use std::vec::Vec;

/// Output positions per tile.
const POSITIONS: usize = 2;

/// Pointwise convolution (`Y[o, p] = base[o] + Σ_i W[o, i]·X[i, p]`) by channel lanes, for
/// 8-bit activations, output channels a multiple of eight and planes of four positions or more;
/// `None` for the others (or where [`chosen`] prefers the position-lane kernels); `Some(false)`
/// when an operand is shorter than the sizes say.
///
/// # Safety
/// The CPU has AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn pointwise<X: QuantInt, Y: QuantInt>(
    key: StepKey,
    ops: &Operands<'_>,
    d: &ConvDims,
    x: &[X],
    y: &mut [Y],
) -> Option<bool> {
    let (c, oc, plane) = (d.c, d.oc, d.h * d.w);
    if X::WIDE || Y::WIDE || !chosen(oc, plane) || c == 0 {
        return None;
    }
    let bytes: &[u8] = bytemuck::cast_slice(x);
    if !super::shared::operands_fit(ops, d, c, [bytes.len(), y.len()]) {
        return Some(false);
    }
    let signed = X::MIN < 0;
    let mut kept = ops.ctx.take(key, || LaneState::new(ops, c, oc, signed));
    let state = kept.state();
    let mut done = true;
    for b in 0..d.n {
        let xb = &bytes[b * c * plane..(b + 1) * c * plane];
        let yb = &mut y[b * oc * plane..(b + 1) * oc * plane];
        pack_pairs(xb, [c, plane], signed, &mut state.pairs);
        done &= product(state, [plane, oc], yb);
    }
    ops.ctx.keep(kept);
    Some(done)
}

/// Whether the channel-lane kernel takes a pointwise step of `oc` channels on `plane`
/// positions: channels in whole groups of eight, on planes of fewer than 64 positions (where
/// the position-lane kernels' blocks of sixteen leave lanes idle, or have too few blocks to
/// amortize each channel's requantization). Measured on MobileNetV1's layers (VWW): 6 × 6 and
/// 3 × 3 planes of 64–256 channels 8–20 % faster so; 12 × 12 to 48 × 48 planes, and DS-CNN's
/// 25 × 5, 10–60 % slower.
fn chosen(oc: usize, plane: usize) -> bool {
    oc.is_multiple_of(8) && oc > 0 && (POSITIONS..64).contains(&plane)
}

/// A step's kept state: its channels' weight words (interleaved by eight), bases and scalar
/// requantizers, each group of eight's requantization as vectors, and the input's pairs.
struct LaneState {
    channels: Channels<Avx2>,
    groups: Vec<GroupRequant>,
    /// The input's rows two at a time as int16 pairs, `[units][plane]` words.
    pairs: Vec<i32>,
}

/// Eight channels' offsets and high-word requantizations, one per lane; `exact` false when
/// some channel's scale has no high-word form (the group is then requantized lane by lane by
/// the scalar requantizers).
#[derive(Clone, Copy)]
pub(super) struct GroupRequant {
    pub(super) base: __m256i,
    pub(super) multiplier: __m256i,
    pub(super) half: __m256i,
    pub(super) shift: __m256i,
    pub(super) mask: __m256i,
    pub(super) zero: __m256i,
    pub(super) min: __m256i,
    pub(super) max: __m256i,
    /// Whether some lane's channel has ties ([`crate::base::requantize::HighWordRequantizer::has_ties`]).
    pub(super) ties: bool,
    pub(super) exact: bool,
}

// SAFETY: plain integer vectors.
unsafe impl Send for GroupRequant {}
// SAFETY: as above.
unsafe impl Sync for GroupRequant {}

impl LaneState {
    /// The state of a product of `k` rows into `oc` channels (a multiple of eight), for inputs
    /// of the signedness.
    #[inline(always)]
    fn new(ops: &Operands<'_>, k: usize, oc: usize, signed: bool) -> LaneState {
        let channels = Channels::<Avx2>::new(ops, k, oc, signed);
        let groups = (0..oc / 8).map(|g| group_requant(&channels, g)).collect();
        LaneState {
            channels,
            groups,
            pairs: Vec::new(),
        }
    }
}

/// Group `g`'s [`GroupRequant`].
pub(super) fn group_requant(channels: &Channels<Avx2>, g: usize) -> GroupRequant {
    let mut words = [[0i32; 8]; 8];
    let (mut ties, mut exact) = (false, true);
    for j in 0..8 {
        let o = 8 * g + j;
        words[0][j] = channels.bases.get(o).copied().unwrap_or(0);
        match channels.scalar.get(o).and_then(|s| s.high_word()) {
            Some(h) => {
                let [multiplier, half, shift, mask, zero, min, max] = h.words();
                for (row, v) in words[1..]
                    .iter_mut()
                    .zip([multiplier, half, shift, mask, zero, min, max])
                {
                    row[j] = v;
                }
                ties |= h.has_ties();
            }
            None => exact = false,
        }
    }
    // SAFETY: unaligned loads of eight int32s each (AVX, which this state's users have).
    let v = |row: &[i32; 8]| unsafe { _mm256_loadu_si256(row.as_ptr().cast()) };
    GroupRequant {
        base: v(&words[0]),
        multiplier: v(&words[1]),
        half: v(&words[2]),
        shift: v(&words[3]),
        mask: v(&words[4]),
        zero: v(&words[5]),
        min: v(&words[6]),
        max: v(&words[7]),
        ties,
        exact,
    }
}

/// The `k` rows of `plane` bytes of `x` as `[k/2 rounded up][plane]` words, each an int16 pair
/// of two rows' values at a position (the second zero past `k`), sign- or zero-extended.
#[inline(always)]
fn pack_pairs(x: &[u8], [k, plane]: [usize; 2], signed: bool, pairs: &mut Vec<i32>) {
    let units = k.div_ceil(2);
    pairs.resize(units * plane, 0);
    let widen = |v: u8| {
        if signed {
            v as i8 as i16 as u16
        } else {
            v as u16
        }
    };
    for (u, out) in pairs.chunks_exact_mut(plane.max(1)).enumerate() {
        let first = x.get(2 * u * plane..(2 * u + 1) * plane).unwrap_or(&[]);
        let second = x
            .get((2 * u + 1) * plane..(2 * u + 2) * plane)
            .unwrap_or(&[]);
        // Sixteen positions at a time where both rows are whole (the last sixteen overlapping
        // the ones before when the plane is not a multiple): their bytes interleaved, widened;
        // a plane of fewer than sixteen, or an odd last row (its pairs' second halves zero),
        // one by one.
        let whole = if first.len() == plane && second.len() == plane && plane >= 16 {
            plane
        } else {
            0
        };
        for start in 0..whole.div_ceil(16) {
            let p = (16 * start).min(plane - 16);
            // SAFETY: AVX2 code (inlined into `pointwise`); bytes `p..p + 16` of both rows and
            // words `p..p + 16` of `out` are in bounds (`p + 16 ≤ plane`).
            unsafe {
                let r0 = _mm_loadu_si128(first.as_ptr().add(p).cast());
                let r1 = _mm_loadu_si128(second.as_ptr().add(p).cast());
                let (low, high) = (_mm_unpacklo_epi8(r0, r1), _mm_unpackhi_epi8(r0, r1));
                let (low, high) = if signed {
                    (_mm256_cvtepi8_epi16(low), _mm256_cvtepi8_epi16(high))
                } else {
                    (_mm256_cvtepu8_epi16(low), _mm256_cvtepu8_epi16(high))
                };
                let to = out.as_mut_ptr().add(p);
                _mm256_storeu_si256(to.cast(), low);
                _mm256_storeu_si256(to.add(8).cast(), high);
            }
        }
        for (p, slot) in out.iter_mut().enumerate().skip(whole) {
            let a = first.get(p).map_or(0, |&v| widen(v));
            let b = second.get(p).map_or(0, |&v| widen(v));
            *slot = (a as u32 | (b as u32) << 16) as i32;
        }
    }
}

/// Every output of a step: for each run of up to six channel groups (48 channels; then four,
/// two or one group), each tile of two positions (the last overlapping the one before when the
/// plane is odd: that output computed twice, identically). False (nothing written) when the
/// state does not hold `oc` channels or an operand is short.
#[inline(always)]
fn product<Y: QuantInt>(state: &LaneState, [plane, oc]: [usize; 2], y: &mut [Y]) -> bool {
    let ch = &state.channels;
    let units = ch.units;
    let complete = ch.eights.len() >= oc * units
        && state.groups.len() >= oc / 8
        && state.pairs.len() >= units * plane
        && plane >= POSITIONS
        && y.len() >= oc * plane
        && oc.is_multiple_of(8);
    if !complete {
        return false;
    }
    let groups = oc / 8;
    let mut g = 0;
    while g < groups {
        let run = match groups - g {
            6.. => 6,
            4 | 5 => 4,
            2 | 3 => 2,
            _ => 1,
        };
        // SAFETY: AVX2 code (inlined into `pointwise`); groups `g..g + run` have `units` lines
        // of eight words, and every unit's row of `pairs` holds `plane` words (`complete`).
        unsafe {
            match run {
                6 => tiles::<6, Y>(state, g, [units, plane], y),
                4 => tiles::<4, Y>(state, g, [units, plane], y),
                2 => tiles::<2, Y>(state, g, [units, plane], y),
                _ => tiles::<1, Y>(state, g, [units, plane], y),
            }
        }
        g += run;
    }
    true
}

/// Channel groups `g..g + G`'s outputs, two positions at a time.
///
/// # Safety
/// As [`tile`]'s for every pair of positions of the plane.
#[inline(always)]
unsafe fn tiles<const G: usize, Y: QuantInt>(
    state: &LaneState,
    g: usize,
    [units, plane]: [usize; 2],
    y: &mut [Y],
) {
    for start in 0..plane.div_ceil(POSITIONS) {
        let p0 = (POSITIONS * start).min(plane - POSITIONS);
        // SAFETY: the caller's bounds; `p0 + 2 ≤ plane`.
        unsafe {
            let sums = tile::<G>(&state.channels, g, &state.pairs, [units, plane, p0]);
            for (h, sums) in sums.iter().enumerate() {
                store(state, g + h, sums, [plane, p0], y);
            }
        }
    }
}

/// The raw sums of channel groups `g..g + G` at positions `p0, p0 + 1`: per unit, the two
/// positions' input pairs broadcast, and each group's eight weight words multiplied by both
/// (twelve accumulators for six groups: two broadcasts per twelve multiply-adds).
///
/// # Safety
/// The CPU has AVX2; groups below `g + G` have `units` lines in `ch.eights`, and `pairs` holds
/// `units` rows of `plane` words with `p0 + 2 ≤ plane`.
#[inline(always)]
unsafe fn tile<const G: usize>(
    ch: &Channels<Avx2>,
    g: usize,
    pairs: &[i32],
    [units, plane, p0]: [usize; 3],
) -> [[__m256i; POSITIONS]; G] {
    // SAFETY: the caller's bounds.
    unsafe {
        let mut acc = [[_mm256_setzero_si256(); POSITIONS]; G];
        let weights = ch.eights.as_ptr().add(8 * g * units);
        let inputs = pairs.as_ptr().add(p0);
        for u in 0..units {
            let row = inputs.add(u * plane);
            let first = _mm256_set1_epi32(*row);
            let second = _mm256_set1_epi32(*row.add(1));
            for (h, [a, b]) in acc.iter_mut().enumerate() {
                let line = _mm256_loadu_si256(weights.add(8 * (h * units + u)).cast());
                *a = _mm256_add_epi32(*a, _mm256_madd_epi16(line, first));
                *b = _mm256_add_epi32(*b, _mm256_madd_epi16(line, second));
            }
        }
        acc
    }
}

/// Group `g`'s sums at positions `p0, p0 + 1`, offset, requantized lane by lane, narrowed and
/// transposed into its eight channels' rows (`plane` apart in `y`), two bytes each.
///
/// # Safety
/// The CPU has AVX2; `g` has a [`GroupRequant`]; `y` holds `8·(g + 1)` rows of `plane`.
#[inline(always)]
unsafe fn store<Y: QuantInt>(
    state: &LaneState,
    g: usize,
    sums: &[__m256i; POSITIONS],
    [plane, p0]: [usize; 2],
    y: &mut [Y],
) {
    let Some(rq) = state.groups.get(g) else {
        return;
    };
    // SAFETY: AVX2 (the caller's).
    unsafe {
        let mut out = [_mm256_setzero_si256(); POSITIONS];
        for (out, &sum) in out.iter_mut().zip(sums) {
            let acc = _mm256_add_epi32(sum, rq.base);
            *out = if rq.exact {
                high_word(rq, acc)
            } else {
                scalar_lanes(&state.channels, g, acc)
            };
        }
        // Within the output type's range: the saturating packs keep every value. Bytes of
        // channels 0–3 (low lane) and 4–7 (high lane), position by position; then channel by
        // channel, a 16-bit word each.
        let words = _mm256_packs_epi32(out[0], out[1]);
        let bytes = if Y::MIN < 0 {
            _mm256_packs_epi16(words, words)
        } else {
            _mm256_packus_epi16(words, words)
        };
        let transpose = _mm256_setr_epi8(
            0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15, 0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9,
            13, 10, 14, 11, 15,
        );
        let mut rows = [0u16; 16];
        _mm256_storeu_si256(
            rows.as_mut_ptr().cast(),
            _mm256_shuffle_epi8(bytes, transpose),
        );
        // Channel `8g + j`'s two outputs at `(8g + j)·plane + p0`: the last of them within `y`.
        if (8 * g + 7) * plane + p0 + POSITIONS > y.len() {
            return;
        }
        let first = y.as_mut_ptr().add(8 * g * plane + p0);
        // Channels 0–3 in the low lane's first four words, 4–7 in the high lane's.
        for j in 0..8 {
            let word = rows[if j < 4 { j } else { j + 4 }];
            // Two one-byte outputs (`Y` is 8-bit here).
            core::ptr::write_unaligned(first.add(j * plane).cast::<u16>(), word);
        }
    }
}

/// [`crate::base::requantize::HighWordRequantizer::apply`] of eight accumulators, each lane with
/// its channel's constants.
///
/// # Safety
/// The CPU has AVX2.
#[inline(always)]
pub(super) unsafe fn high_word(rq: &GroupRequant, acc: __m256i) -> __m256i {
    // SAFETY: the caller's.
    unsafe {
        // The 64-bit products of the even and the odd lanes, then their high words.
        let even = _mm256_mul_epi32(acc, rq.multiplier);
        let odd = _mm256_mul_epi32(
            _mm256_srli_epi64::<32>(acc),
            _mm256_srli_epi64::<32>(rq.multiplier),
        );
        let high = _mm256_blend_epi32::<0b1010_1010>(_mm256_srli_epi64::<32>(even), odd);
        let high = _mm256_add_epi32(high, rq.half);
        let mut rounded = _mm256_srav_epi32(high, rq.shift);
        if rq.ties {
            // A tie (only where a lane's channel has them): the low word and the bits the
            // shift drops all clear; it goes to the even side.
            let low = _mm256_blend_epi32::<0b1010_1010>(even, _mm256_slli_epi64::<32>(odd));
            let dropped = _mm256_or_si256(_mm256_and_si256(high, rq.mask), low);
            let tie = _mm256_cmpeq_epi32(dropped, _mm256_setzero_si256());
            let tie_bit = _mm256_and_si256(tie, _mm256_set1_epi32(1));
            rounded = _mm256_andnot_si256(tie_bit, rounded);
        }
        // |rounded| < 2^30 and the zero point is 16-bit: the sum cannot overflow.
        let shifted = _mm256_add_epi32(rounded, rq.zero);
        _mm256_min_epi32(_mm256_max_epi32(shifted, rq.min), rq.max)
    }
}

/// Group `g`'s eight sums requantized one lane at a time by their channels' scalar
/// requantizers (a group with a scale that has no high-word form).
///
/// # Safety
/// The CPU has AVX2.
#[inline(always)]
pub(super) unsafe fn scalar_lanes(channels: &Channels<Avx2>, g: usize, acc: __m256i) -> __m256i {
    let mut lanes = [0i32; 8];
    // SAFETY: `lanes` holds eight int32s; AVX2 (the caller's).
    unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), acc) };
    for (j, lane) in lanes.iter_mut().enumerate() {
        if let Some(scalar) = channels.scalar.get(8 * g + j) {
            *lane = scalar.apply(*lane);
        }
    }
    // SAFETY: as above.
    unsafe { _mm256_loadu_si256(lanes.as_ptr().cast()) }
}
