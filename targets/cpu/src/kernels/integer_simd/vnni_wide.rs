//! Pointwise integer convolutions sixteen output positions at a time on 512-bit vectors, where
//! the CPU has AVX-512 VNNI: each `vpdpbusd` sums four input channels of sixteen positions
//! for one output channel, and each output channel's sixteen sums are requantized and narrowed
//! by one pass of 512-bit instructions — half the instructions of the 256-bit block product
//! ([`super::Isa::product`]) on planes of sixteen positions or more. The sums and the rounding
//! are the portable kernel's, bit for bit: wrapping int32 sums of unsigned-by-signed byte
//! products (int8 inputs packed as `x + 128`, each channel's base subtracting `128 · Σ w`),
//! then [`super::super::integer::HighWordRequantizer`]'s rounding lane by lane.

use super::super::conv::ConvDims;
use super::super::integer::Requantizer;
use super::super::quantize::QuantInt;
use super::vnni::Vnni;
use super::{Channels, Operands, StepKey};
use crate::memo;
use core::arch::x86_64::*;
use ferrite_hal::op::QConv;
use std::vec::Vec;

/// Positions per block.
const WIDTH: usize = 16;

/// A pointwise step's kept state: its channels' weight words and bases, their requantization
/// as scalars for the 512-bit lanes, and the block's packed rows.
struct WideState {
    channels: Channels<Vnni>,
    requant: Vec<WideRequant>,
    units: Vec<__m512i>,
}

/// A channel's requantization: the high-word form's
/// `[multiplier, half, mask, zero, min, max]`, shift and whether it has ties, or `None` (each
/// lane by the scalar requantizer).
type WideRequant = Option<([i32; 6], u32, bool)>;

/// Pointwise convolution (`Y[o, p] = base[o] + Σ_i W[o, i]·X[i, p]`) sixteen positions at a
/// time ([`product_rows`]). `None` (the 256-bit kernels run) for 16-bit activations or a plane
/// of fewer than sixteen positions; `Some(false)` when an operand is shorter than the sizes
/// say.
///
/// # Safety
/// The CPU has AVX2, AVX-512F, AVX-512VL and AVX-512 VNNI ([`super::vnni::available`]).
#[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
pub(super) unsafe fn pointwise<X: QuantInt, Y: QuantInt>(
    key: StepKey,
    ops: &Operands<'_>,
    d: &ConvDims,
    x: &[X],
    y: &mut [Y],
) -> Option<bool> {
    let (c, oc, plane) = (d.c, d.oc, d.h * d.w);
    if X::WIDE || Y::WIDE || plane < WIDTH || c == 0 {
        return None;
    }
    let bytes: &[u8] = bytemuck::cast_slice(x);
    if !super::operands_fit(ops, d, c, [bytes.len(), y.len()]) {
        return Some(false);
    }
    let signed = X::MIN < 0;
    let mut kept = memo::take(key, || WideState::new(ops, c, oc, signed));
    let mut done = true;
    for b in 0..d.n {
        let xb = &bytes[b * c * plane..(b + 1) * c * plane];
        let yb = &mut y[b * oc * plane..(b + 1) * oc * plane];
        // SAFETY: the CPU's features (the caller's); `xb` holds `c` rows of `plane ≥ 16`.
        done &= unsafe { product_rows(kept.state(), xb, [c, plane, oc], signed, yb) };
    }
    memo::keep(kept);
    Some(done)
}

/// Regular convolution (one group) on its windows unfolded: each input channel padded with its
/// zero point once ([`super::pad_interior`]), then row `(ci·kh + ky)·kw + kx` of a `[k,
/// positions]` matrix gathered from it by a table of each position's first tap, and the
/// product of [`pointwise`] over that matrix. For the convolutions whose taps the 256-bit
/// kernels cannot read in place (strides, rows narrower than a vector) and whose matrix is
/// small; `None` for the others.
///
/// # Safety
/// The CPU has AVX2, AVX-512F, AVX-512VL and AVX-512 VNNI ([`super::vnni::available`]).
#[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
pub(super) unsafe fn unfolded<X: QuantInt, Y: QuantInt>(
    key: StepKey,
    c: &QConv,
    ops: &Operands<'_>,
    d: &ConvDims,
    x: &[X],
    y: &mut [Y],
) -> Option<bool> {
    let [kh, kw] = c.window.kernel;
    let [sh, sw] = c.window.stride;
    let [dh, dw] = c.window.dilation;
    let (k, positions) = (d.c * kh * kw, d.oh * d.ow);
    if X::WIDE || Y::WIDE || c.group > 1 || positions < WIDTH || k == 0 || d.h * d.w == 0 {
        return None;
    }
    // Stride 1 on rows of eight or more: the 256-bit kernels read those taps in place.
    let [ph, pw] = super::padded_extent(c, d, d.c)?;
    let in_place = [sh, sw] == [1, 1] && (d.oh - 1) * pw + d.ow >= 8 && d.ow >= 8;
    // Where the 256-bit kernels would gather the matrix too; and not for few output channels,
    // which share too little of its gathering (VWW's first layer, eight channels: 20 µs by
    // the 256-bit kernels, 30 µs so).
    let reading = super::reading_of(in_place, [k, positions, d.ow], 0);
    if reading != super::Reading::Matrix || d.oc < 16 {
        return None;
    }
    let bytes: &[u8] = bytemuck::cast_slice(x);
    if !super::operands_fit(ops, d, k, [bytes.len(), y.len()]) {
        return Some(false);
    }
    let signed = X::MIN < 0;
    let zero = c.requantize.input_zero as u8;
    let build = || Unfolded {
        wide: WideState::new(ops, k, d.oc, signed),
        padded: std::vec![zero; d.c * ph * pw],
        expansion: super::Expansion::new(d, c.window.pads, [ph, pw], zero),
        firsts: super::first_taps([d.oh, d.ow], [sh, sw], pw),
        taps: super::window_taps(d.c, [kh, kw], [dh, dw], [ph, pw]),
        matrix: std::vec![0u8; k * positions],
    };
    let mut kept = memo::take(key, build);
    let state = kept.state();
    let mut done = true;
    for b in 0..d.n {
        let xb = &bytes[b * d.c * d.h * d.w..(b + 1) * d.c * d.h * d.w];
        let planes = xb
            .chunks_exact(d.h * d.w)
            .zip(state.padded.chunks_exact_mut(ph * pw));
        for (plane, padded) in planes {
            let expansion = state.expansion.as_ref();
            super::pad_interior::<Vnni>(expansion, plane, d, c.window.pads, padded, pw, 0);
        }
        super::gather_matrix(
            &mut state.matrix,
            &state.padded,
            &state.taps,
            &state.firsts,
            zero,
        );
        let yb = &mut y[b * d.oc * positions..(b + 1) * d.oc * positions];
        let rows = [k, positions, d.oc];
        // SAFETY: the CPU's features (the caller's); the matrix holds `k` rows of `positions`.
        done &= unsafe { product_rows(&mut state.wide, &state.matrix, rows, signed, yb) };
    }
    memo::keep(kept);
    Some(done)
}

/// A regular convolution's kept state for [`unfolded`]: the product's, the padded input planes
/// (their borders the zero point, written once) and padding shuffles, each position's first tap
/// and each tap's offset in them, and the unfolded matrix.
struct Unfolded {
    wide: WideState,
    padded: Vec<u8>,
    expansion: Option<super::Expansion>,
    firsts: Vec<usize>,
    taps: Vec<usize>,
    matrix: Vec<u8>,
}

impl WideState {
    /// The state of a product of `k` rows into `oc` channels, for inputs of the signedness.
    fn new(ops: &Operands<'_>, k: usize, oc: usize, signed: bool) -> WideState {
        let channels = Channels::<Vnni>::new(ops, k, oc, signed);
        let requant = channels.scalar.iter().map(wide_requant).collect();
        WideState {
            channels,
            requant,
            units: Vec::new(),
        }
    }
}

/// `Y[o, p] = base[o] + Σ_i W[o, i]·X[i, p]` for `x` of `k` rows of `plane ≥ 16` positions:
/// each block of sixteen positions packed once ([`pack`]), then eight channels at a time,
/// four, then one; the last block overlaps the one before when the plane is not a multiple of
/// sixteen (those outputs computed twice, identically). False (nothing written) when the
/// state does not hold `oc` channels of `k` rows or an operand is short.
///
/// # Safety
/// The CPU has AVX2, AVX-512F, AVX-512VL and AVX-512 VNNI.
#[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
unsafe fn product_rows<Y: QuantInt>(
    state: &mut WideState,
    x: &[u8],
    [k, plane, oc]: [usize; 3],
    signed: bool,
    y: &mut [Y],
) -> bool {
    let ch = &state.channels;
    let units = ch.units;
    let complete = units == k.div_ceil(4)
        && ch.words.len() >= oc * units
        && ch.bases.len() >= oc
        && state.requant.len() >= oc
        && plane >= WIDTH
        && x.len() >= k * plane
        && y.len() >= oc * plane;
    if !complete {
        return false;
    }
    state.units.resize(units, _mm512_setzero_si512());
    for start in 0..plane.div_ceil(WIDTH) {
        let p0 = (WIDTH * start).min(plane - WIDTH);
        // SAFETY: `k` rows of `plane` bytes, `p0 + 16 ≤ plane`; the CPU's features.
        unsafe { pack(x, [k, plane, p0], signed, &mut state.units) };
        let mut o = 0;
        while o < oc {
            let step = match oc - o {
                8.. => 8,
                4..=7 => 4,
                _ => 1,
            };
            // SAFETY: channels below `oc` have `units` words each (`complete`).
            unsafe {
                match step {
                    8 => store(state, o, products::<8>(ch, &state.units, o), [plane, p0], y),
                    4 => store(state, o, products::<4>(ch, &state.units, o), [plane, p0], y),
                    _ => store(state, o, products::<1>(ch, &state.units, o), [plane, p0], y),
                }
            }
            o += step;
        }
    }
    true
}

/// A channel's [`WideRequant`].
fn wide_requant(scalar: &Requantizer) -> WideRequant {
    scalar.high_word().map(|h| {
        let [multiplier, half, shift, mask, zero, min, max] = h.words();
        (
            [multiplier, half, mask, zero, min, max],
            shift as u32,
            h.has_ties(),
        )
    })
}

/// Positions `p0..p0 + 16` of every input channel (rows of `plane` bytes) packed four channels
/// to a 32-bit lane, position by position (int8 inputs flipped to `x + 128`); channels past
/// `c` read as zeros.
///
/// # Safety
/// The CPU has AVX-512F; `x` holds `c` rows of `plane` bytes and `p0 + 16 ≤ plane`.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
unsafe fn pack(x: &[u8], [c, plane, p0]: [usize; 3], signed: bool, units: &mut [__m512i]) {
    let row = |i: usize| {
        if i >= c {
            return _mm_setzero_si128();
        }
        // SAFETY: row i's bytes p0..p0 + 16 are within `x` (the caller's bound).
        unsafe { _mm_loadu_si128(x.as_ptr().add(i * plane + p0).cast()) }
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
    state: &WideState,
    o: usize,
    sums: [__m512i; B],
    [plane, p0]: [usize; 2],
    y: &mut [Y],
) {
    for (j, sum) in sums.into_iter().enumerate() {
        let (Some(&base), Some(requant), Some(scalar)) = (
            state.channels.bases.get(o + j),
            state.requant.get(o + j),
            state.channels.scalar.get(o + j),
        ) else {
            return;
        };
        let acc = _mm512_add_epi32(sum, _mm512_set1_epi32(base));
        let out = match requant {
            Some(form) => high_word(form, acc),
            None => {
                let mut lanes = [0i32; WIDTH];
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
        if let Some(slots) = y.get_mut(row..row + WIDTH) {
            // SAFETY: sixteen one-byte outputs from `row` (`Y` is 8-bit here).
            unsafe { _mm_storeu_si128(slots.as_mut_ptr().cast(), _mm512_cvtepi32_epi8(out)) };
        }
    }
}

/// [`super::super::integer::HighWordRequantizer::apply`] of sixteen accumulators.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
fn high_word(
    &([multiplier, half, mask, zero, min, max], shift, ties): &([i32; 6], u32, bool),
    acc: __m512i,
) -> __m512i {
    let multiplier = _mm512_set1_epi32(multiplier);
    // The 64-bit products of the even and the odd lanes, then their high words.
    let even = _mm512_mul_epi32(acc, multiplier);
    let odd = _mm512_mul_epi32(_mm512_srli_epi64::<32>(acc), multiplier);
    let high = _mm512_mask_blend_epi32(0xaaaa, _mm512_srli_epi64::<32>(even), odd);
    let high = _mm512_add_epi32(high, _mm512_set1_epi32(half));
    let count = _mm_cvtsi32_si128(shift as i32);
    let mut rounded = _mm512_sra_epi32(high, count);
    if ties {
        // A tie: the low word and the bits the shift drops all clear; it goes to the even side
        // (the rounded-up value's lowest bit cleared).
        let low = _mm512_mask_blend_epi32(0xaaaa, even, _mm512_slli_epi64::<32>(odd));
        let dropped = _mm512_or_si512(_mm512_and_si512(high, _mm512_set1_epi32(mask)), low);
        let tie = _mm512_cmpeq_epi32_mask(dropped, _mm512_setzero_si512());
        rounded = _mm512_mask_and_epi32(rounded, tie, rounded, _mm512_set1_epi32(!1));
    }
    // |rounded| < 2^30 and the zero point is 16-bit: the sum cannot overflow.
    let shifted = _mm512_add_epi32(rounded, _mm512_set1_epi32(zero));
    _mm512_min_epi32(
        _mm512_max_epi32(shifted, _mm512_set1_epi32(min)),
        _mm512_set1_epi32(max),
    )
}
