//! Pointwise integer convolutions sixteen output positions at a time on 512-bit vectors, where
//! the CPU has AVX-512 VNNI ([`super::wide`]'s geometry): each `vpdpbusd` sums four input
//! channels of sixteen positions for one output channel, and each output channel's sixteen sums
//! are requantized and narrowed by one pass of 512-bit instructions — half the instructions of
//! the 256-bit block product ([`super::shared::Isa::product`]) on planes of sixteen positions or more.
//! int8 inputs are packed as `x + 128` (`vpdpbusd` multiplies unsigned bytes), each channel's
//! base subtracting `128 · Σ w`.

use super::shared::{Channels, Operands, StepKey};
use super::vnni::Vnni;
use super::wide::{self, RowsAt, Wide, WideState};
use crate::base::geometry::ConvDims;
use crate::base::quantized::QuantInt;
use core::arch::x86_64::*;
use ferrite_hal::op::QConv;

/// Pointwise convolution sixteen positions at a time ([`wide::pointwise`]).
///
/// # Safety
/// The CPU has AVX2, AVX-512F, AVX-512VL and AVX-512 VNNI ([`crate::isa::vnni`]).
#[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
pub(super) unsafe fn pointwise<X: QuantInt, Y: QuantInt>(
    key: StepKey,
    ops: &Operands<'_>,
    d: &ConvDims,
    x: &[X],
    y: &mut [Y],
) -> Option<bool> {
    wide::pointwise::<Vnni, X, Y>(key, ops, d, x, y)
}

/// Regular convolution on its unfolded windows ([`wide::unfolded`]), for sixteen output
/// channels or more.
///
/// # Safety
/// The CPU has AVX2, AVX-512F, AVX-512VL and AVX-512 VNNI ([`crate::isa::vnni`]).
#[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
pub(super) unsafe fn unfolded<X: QuantInt, Y: QuantInt>(
    key: StepKey,
    c: &QConv,
    ops: &Operands<'_>,
    d: &ConvDims,
    x: &[X],
    y: &mut [Y],
) -> Option<bool> {
    wide::unfolded::<Vnni, X, Y>(key, c, ops, d, x, y, 8)
}

impl Wide for Vnni {
    type Unit = __m512i;

    const WIDTH: usize = 16;

    const TILE: usize = 8;

    fn empty() -> __m512i {
        // SAFETY: SSE2 and up (every x86-64 CPU) zero a vector register.
        unsafe { _mm512_setzero_si512() }
    }

    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
    unsafe fn pack_block(
        x: &[u8],
        rows: RowsAt<'_>,
        at: [usize; 2],
        signed: bool,
        units: &mut [__m512i],
    ) {
        // SAFETY (both): the caller's bounds.
        match rows {
            RowsAt::Planes(plane) => unsafe { pack(x, |i| i * plane, at, signed, units) },
            RowsAt::Taps(taps) => unsafe {
                pack(x, |i| taps.get(i).copied().unwrap_or(0), at, signed, units)
            },
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
    unsafe fn channels<const B: usize, Y: QuantInt>(
        state: &WideState<Vnni>,
        o: usize,
        at: [usize; 2],
        y: &mut [Y],
    ) {
        // SAFETY: the caller's bounds.
        unsafe {
            store(
                state,
                o,
                products::<B>(&state.channels, &state.units, o),
                at,
                y,
            )
        }
    }
}

/// Positions `p0..p0 + 16` of `c` rows (row `i` at `offset(i)`) packed four rows to a 32-bit
/// lane, position by position (int8 inputs flipped to `x + 128`); rows past `c` read as zeros.
///
/// # Safety
/// The CPU has AVX-512F; every row `i < c` has bytes `offset(i) + p0..+ 16` within `x`.
#[inline(always)]
unsafe fn pack(
    x: &[u8],
    offset: impl Fn(usize) -> usize,
    [c, p0]: [usize; 2],
    signed: bool,
    units: &mut [__m512i],
) {
    let row = |i: usize| {
        if i >= c {
            // SAFETY: SSE2.
            return unsafe { _mm_setzero_si128() };
        }
        // SAFETY: row i's bytes are within `x` (the caller's bound).
        unsafe { _mm_loadu_si128(x.as_ptr().add(offset(i) + p0).cast()) }
    };
    let flip = _mm512_set1_epi8(if signed { -128 } else { 0 });
    for (u, unit) in units.iter_mut().enumerate() {
        let [r0, r1, r2, r3] = [row(4 * u), row(4 * u + 1), row(4 * u + 2), row(4 * u + 3)];
        let (low, high) = (_mm_unpacklo_epi8(r0, r1), _mm_unpackhi_epi8(r0, r1));
        let (low2, high2) = (_mm_unpacklo_epi8(r2, r3), _mm_unpackhi_epi8(r2, r3));
        let quads = [
            _mm_unpacklo_epi16(low, low2),
            _mm_unpackhi_epi16(low, low2),
            _mm_unpacklo_epi16(high, high2),
            _mm_unpackhi_epi16(high, high2),
        ];
        let mut v = _mm512_castsi128_si512(quads[0]);
        v = _mm512_inserti32x4::<1>(v, quads[1]);
        v = _mm512_inserti32x4::<2>(v, quads[2]);
        v = _mm512_inserti32x4::<3>(v, quads[3]);
        // An XOR with zero for unsigned inputs: one instruction, no branch in the loop.
        *unit = _mm512_xor_si512(v, flip);
    }
}

/// The raw sums of channels `o..o + B` over a packed block: per unit, each channel's weight
/// word broadcast into a `vpdpbusd`, one accumulator per channel (zeros where the channels have
/// no words, [`Channels::lines`]).
///
/// # Safety
/// The CPU has AVX-512 VNNI; channels below `o + B` have `ch.units ≥ units.len()` words.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
unsafe fn products<const B: usize>(
    ch: &Channels<Vnni>,
    units: &[__m512i],
    o: usize,
) -> [__m512i; B] {
    let Some((words, strides)) = ch.lines::<B>(o) else {
        return [_mm512_setzero_si512(); B];
    };
    // SAFETY: the channels' lines hold `ch.units` words each (`Channels::lines`).
    unsafe {
        match strides {
            // Constant strides: the broadcasts' addresses fold into their instructions.
            [1, 8] => sums_of::<B>(words, [1, 8], units),
            _ => sums_of::<B>(words, strides, units),
        }
    }
}

/// [`products`]' loop over the units, channel `j`'s word of unit `u` at
/// `words[j·per_channel + u·per_unit]`.
///
/// # Safety
/// The CPU has AVX-512 VNNI; every such word for `j < B`, `u < units.len()` is readable.
#[inline(always)]
unsafe fn sums_of<const B: usize>(
    words: *const i32,
    [per_channel, per_unit]: [usize; 2],
    units: &[__m512i],
) -> [__m512i; B] {
    let mut acc = [_mm512_setzero_si512(); B];
    for (u, &values) in units.iter().enumerate() {
        let line = words.wrapping_add(u * per_unit);
        for (j, acc) in acc.iter_mut().enumerate() {
            // SAFETY: the caller's bound.
            let word = _mm512_set1_epi32(unsafe { *line.add(j * per_channel) });
            *acc = _mm512_dpbusd_epi32(*acc, values, word);
        }
    }
    acc
}

/// Channels `o..o + B`'s sums offset by their bases, requantized and narrowed into outputs
/// `p0..p0 + 16` of their rows (`plane` apart).
///
/// # Safety
/// The CPU has AVX-512F; channels below `o + B` have bases and requantizations.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
unsafe fn store<const B: usize, Y: QuantInt>(
    state: &WideState<Vnni>,
    o: usize,
    sums: [__m512i; B],
    [plane, p0]: [usize; 2],
    y: &mut [Y],
) {
    for (j, sum) in sums.into_iter().enumerate() {
        let (Some(&base), Some(lanes), Some(scalar)) = (
            state.channels.bases.get(o + j),
            state.channels.lanes.get(o + j),
            state.channels.scalar.get(o + j),
        ) else {
            return;
        };
        let acc = _mm512_add_epi32(sum, _mm512_set1_epi32(base));
        let out = match lanes {
            Some(lanes) => high_word(lanes, acc),
            None => {
                let mut lanes = [0i32; 16];
                // SAFETY: `lanes` holds sixteen int32s.
                unsafe { _mm512_storeu_si512(lanes.as_mut_ptr().cast(), acc) };
                for lane in &mut lanes {
                    *lane = scalar.apply(*lane);
                }
                // SAFETY: as above.
                unsafe { _mm512_loadu_si512(lanes.as_ptr().cast()) }
            }
        };
        // Clamped within the output type's range: truncating to bytes is the narrowing.
        let row = (o + j) * plane + p0;
        if let Some(slots) = y.get_mut(row..row + 16) {
            // SAFETY: sixteen one-byte outputs from `row` (`Y` is 8-bit here).
            unsafe { _mm_storeu_si128(slots.as_mut_ptr().cast(), _mm512_cvtepi32_epi8(out)) };
        }
    }
}

/// [`crate::base::requantize::HighWordRequantizer::apply`] of sixteen accumulators, from the
/// channel's eight-lane constants (the AVX2 requantization's, [`super::shared::Channels::lanes`]) each
/// broadcast to both halves.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
fn high_word(&(words, shift, ties): &([__m256i; 6], __m128i, bool), acc: __m512i) -> __m512i {
    // Written out, not `array::map`: its closure could be compiled without AVX-512.
    let [multiplier, half, mask, zero, min, max] = [
        _mm512_broadcast_i64x4(words[0]),
        _mm512_broadcast_i64x4(words[1]),
        _mm512_broadcast_i64x4(words[2]),
        _mm512_broadcast_i64x4(words[3]),
        _mm512_broadcast_i64x4(words[4]),
        _mm512_broadcast_i64x4(words[5]),
    ];
    // The 64-bit products of the even and the odd lanes, then their high words.
    let even = _mm512_mul_epi32(acc, multiplier);
    let odd = _mm512_mul_epi32(_mm512_srli_epi64::<32>(acc), multiplier);
    let high = _mm512_mask_blend_epi32(0xaaaa, _mm512_srli_epi64::<32>(even), odd);
    let high = _mm512_add_epi32(high, half);
    let mut rounded = _mm512_sra_epi32(high, shift);
    if ties {
        // A tie: the low word and the bits the shift drops all clear; it goes to the even side
        // (the rounded-up value's lowest bit cleared).
        let low = _mm512_mask_blend_epi32(0xaaaa, even, _mm512_slli_epi64::<32>(odd));
        let dropped = _mm512_or_si512(_mm512_and_si512(high, mask), low);
        let tie = _mm512_cmpeq_epi32_mask(dropped, _mm512_setzero_si512());
        rounded = _mm512_mask_and_epi32(rounded, tie, rounded, _mm512_set1_epi32(!1));
    }
    // |rounded| < 2^30 and the zero point is 16-bit: the sum cannot overflow.
    let shifted = _mm512_add_epi32(rounded, zero);
    _mm512_min_epi32(_mm512_max_epi32(shifted, min), max)
}
