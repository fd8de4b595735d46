//! Pointwise integer convolutions sixteen output positions at a time with AVX2 ([`super::wide`]'s
//! geometry): a unit holds two input channels of sixteen positions as int16 pairs in two
//! vectors, each `vpmaddwd` sums the pairs of eight positions for one output channel, and four
//! channels' thirty-two positions-by-channel sums stay in eight registers until they are
//! requantized and narrowed there — no sums through memory, one sixteen-byte store per channel.
//! Exact (`vpmaddubsw`'s saturating pair sums would not be): the products of int16-widened
//! bytes and their pair sums fit int32, and the accumulation wraps as the portable sums do.
//!
//! A unit's vectors hold positions `0–3, 8–11` and `4–7, 12–15`: packing their two vectors'
//! int32 sums to int16 (`vpackssdw`, per 128-bit lane) then lines the sixteen up in order.

use super::avx2::{self, Avx2};
use super::shared::{Operands, StepKey};
use super::wide::{self, RowsAt, Wide, WideState};
use crate::base::geometry::ConvDims;
use crate::base::quantized::QuantInt;
use core::arch::x86_64::*;
use ferrite_hal::op::QConv;

/// Pointwise convolution sixteen positions at a time ([`wide::pointwise`]).
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
    wide::pointwise::<Avx2, X, Y>(key, ops, d, x, y)
}

/// Regular convolution on its unfolded windows ([`wide::unfolded`]), for sixteen output
/// channels or more.
///
/// # Safety
/// The CPU has AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn unfolded<X: QuantInt, Y: QuantInt>(
    key: StepKey,
    c: &QConv,
    ops: &Operands<'_>,
    d: &ConvDims,
    x: &[X],
    y: &mut [Y],
) -> Option<bool> {
    wide::unfolded::<Avx2, X, Y>(key, c, ops, d, x, y, 8)
}

impl Wide for Avx2 {
    type Unit = [__m256i; 2];

    const WIDTH: usize = 16;

    const TILE: usize = 4;

    fn empty() -> [__m256i; 2] {
        // SAFETY: AVX (this type only runs where AVX2 is) zeroes a vector register.
        unsafe { [_mm256_setzero_si256(); 2] }
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn pack_block(
        x: &[u8],
        rows: RowsAt<'_>,
        [k, p0]: [usize; 2],
        signed: bool,
        units: &mut [[__m256i; 2]],
    ) {
        // SAFETY (both): the caller's bounds.
        match rows {
            RowsAt::Planes(plane) => unsafe { pack(x, |i| i * plane, [k, p0], signed, units) },
            RowsAt::Taps(taps) => unsafe {
                pack(
                    x,
                    |i| taps.get(i).copied().unwrap_or(0),
                    [k, p0],
                    signed,
                    units,
                )
            },
        }
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn channels<const B: usize, Y: QuantInt>(
        state: &WideState<Avx2>,
        o: usize,
        [plane, p0]: [usize; 2],
        y: &mut [Y],
    ) {
        let ch = &state.channels;
        let Some((words, strides)) = ch.lines::<B>(o) else {
            return;
        };
        // SAFETY: the channels' lines hold `ch.units ≥ units.len()` words (`Channels::lines`).
        let sums = unsafe {
            match strides {
                // Constant strides: the broadcasts' addresses fold into their instructions.
                [1, 8] => sums_of::<B>(words, [1, 8], &state.units),
                _ => sums_of::<B>(words, strides, &state.units),
            }
        };
        let signed_out = Y::MIN < 0;
        // The tile's channels' constants and output rows, bounds checked once for the tile.
        let (Some(bases), Some(lanes), Some(scalars)) = (
            ch.bases.get(o..o + B),
            ch.lanes.get(o..o + B),
            ch.scalar.get(o..o + B),
        ) else {
            return;
        };
        // The last channel's sixteen outputs end by `last`, in checked arithmetic (the stores
        // below are unchecked).
        let last = (o + B)
            .checked_sub(1)
            .and_then(|row| row.checked_mul(plane))
            .and_then(|at| at.checked_add(p0 + 16));
        if B == 0 || last.is_none_or(|last| last > y.len()) {
            return;
        }
        let rows = y.as_mut_ptr().wrapping_add(o * plane + p0);
        for (j, (([first, second], &base), (lanes, scalar))) in sums
            .into_iter()
            .zip(bases)
            .zip(lanes.iter().zip(scalars))
            .enumerate()
        {
            let base = _mm256_set1_epi32(base);
            let [first, second] = [
                _mm256_add_epi32(first, base),
                _mm256_add_epi32(second, base),
            ];
            let [first, second] = match lanes {
                // SAFETY: AVX2 code.
                Some(lanes) => unsafe {
                    [
                        avx2::high_word(lanes, first),
                        avx2::high_word(lanes, second),
                    ]
                },
                None => [scalar_lanes(scalar, first), scalar_lanes(scalar, second)],
            };
            // In the output type's range (clamped): the saturating packs keep every value.
            let words = _mm256_packs_epi32(first, second);
            let bytes = if signed_out {
                _mm256_packs_epi16(words, words)
            } else {
                _mm256_packus_epi16(words, words)
            };
            let ordered = _mm256_permute4x64_epi64::<0b1000>(bytes);
            // SAFETY: sixteen one-byte outputs (`Y` is 8-bit here) from row `o + j`'s
            // position `p0`, which end by `last ≤ y.len()`.
            unsafe {
                _mm_storeu_si128(rows.add(j * plane).cast(), _mm256_castsi256_si128(ordered))
            };
        }
    }
}

/// [`Wide::pack_block`] with row `i` at `offset(i)`: two rows' sixteen positions to a unit.
///
/// # Safety
/// The CPU has AVX2; every row `i < k` has bytes `offset(i) + p0..+ 16` within `x`.
#[inline(always)]
unsafe fn pack(
    x: &[u8],
    offset: impl Fn(usize) -> usize,
    [k, p0]: [usize; 2],
    signed: bool,
    units: &mut [[__m256i; 2]],
) {
    let at = x.as_ptr().wrapping_add(p0);
    // Row `i`'s sixteen bytes; zeros past `k`.
    let row = |i: usize| {
        if i >= k {
            // SAFETY: SSE2.
            return unsafe { _mm_setzero_si128() };
        }
        // SAFETY: the caller's bound.
        unsafe { _mm_loadu_si128(at.add(offset(i)).cast()) }
    };
    for (u, unit) in units.iter_mut().enumerate() {
        let [r0, r1] = [row(2 * u), row(2 * u + 1)];
        // SAFETY (the conversions): AVX2, the caller's.
        unsafe {
            // Positions 0–7 and 8–15 of the two rows, byte pairs; then 0–3 with 8–11, 4–7
            // with 12–15.
            let (low, high) = (_mm_unpacklo_epi8(r0, r1), _mm_unpackhi_epi8(r0, r1));
            let halves = [_mm_unpacklo_epi64(low, high), _mm_unpackhi_epi64(low, high)];
            *unit = if signed {
                [
                    _mm256_cvtepi8_epi16(halves[0]),
                    _mm256_cvtepi8_epi16(halves[1]),
                ]
            } else {
                [
                    _mm256_cvtepu8_epi16(halves[0]),
                    _mm256_cvtepu8_epi16(halves[1]),
                ]
            };
        }
    }
}

/// Eight sums requantized one lane at a time by the scalar requantizer (scales without the
/// high-word form).
#[inline]
#[target_feature(enable = "avx2")]
fn scalar_lanes(scalar: &crate::base::requantize::Requantizer, acc: __m256i) -> __m256i {
    let mut lanes = [0i32; 8];
    // SAFETY: `lanes` holds eight int32s.
    unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), acc) };
    for lane in &mut lanes {
        *lane = scalar.apply(*lane);
    }
    // SAFETY: as above.
    unsafe { _mm256_loadu_si256(lanes.as_ptr().cast()) }
}

/// Channel `j`'s sums over the units (its word of unit `u` at `words[j·per_channel +
/// u·per_unit]`), both vectors of each unit against the one broadcast word.
///
/// # Safety
/// The CPU has AVX2; every such word for `j < B`, `u < units.len()` is readable.
#[inline(always)]
unsafe fn sums_of<const B: usize>(
    words: *const i32,
    [per_channel, per_unit]: [usize; 2],
    units: &[[__m256i; 2]],
) -> [[__m256i; 2]; B] {
    // SAFETY: AVX2 (the caller's); the words are the caller's bound.
    unsafe {
        let mut acc = [[_mm256_setzero_si256(); 2]; B];
        for (u, &[first, second]) in units.iter().enumerate() {
            let line = words.add(u * per_unit);
            for (j, [a, b]) in acc.iter_mut().enumerate() {
                let word = _mm256_set1_epi32(*line.add(j * per_channel));
                *a = _mm256_add_epi32(*a, _mm256_madd_epi16(first, word));
                *b = _mm256_add_epi32(*b, _mm256_madd_epi16(second, word));
            }
        }
        acc
    }
}
