//! The AVX2 instruction set for the shared integer geometry ([`super::shared::Isa`]): products of
//! int16-widened values summed in pairs by `vpmaddwd` (exact: `vpmaddubsw`'s saturating int16
//! pair sums, which onnxruntime's kernels use, would not be), requantization of eight outputs at
//! once in the high-word form ([`crate::base::requantize::HighWordRequantizer`]), scalar for the
//! rare scales without one; and QAdd's table form by `vpgatherdd`.

use super::shared::{
    depthwise_pass, depthwise_passes, group_blocks, low_bytes_of, Block, ChannelPass, Channels,
    DepthwiseInput, DepthwiseState, Expansion, Gather, GroupBlocks, Isa, PairedGather, TapPlan,
};
use crate::base::quantized::QuantInt;
use crate::base::requantize::Requantizer;
use crate::isa::avx2::{low_bytes, low_bytes_two};
use core::arch::x86_64::*;

/// The AVX2 instruction set.
pub(super) struct Avx2;

/// A channel's requantization in every lane: the high-word form's
/// `[multiplier, half, mask, zero, min, max]`, its shift, and whether it has ties
/// ([`crate::base::requantize::HighWordRequantizer::has_ties`]; without, the tie test is left
/// out); `None` for a scale without one (every lane computed by the scalar requantizer).
type Lanes = Option<([__m256i; 6], __m128i, bool)>;

impl Isa for Avx2 {
    type Lanes = Lanes;

    const ROWS: usize = 2;

    fn input_offset(_: bool) -> i32 {
        0
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn lanes(scalar: &Requantizer) -> Lanes {
        scalar.high_word().map(|h| {
            let [multiplier, half, shift, mask, zero, min, max] = h.words();
            // Written out, not `array::map`: its closure could be left out of line.
            let lanes = [
                _mm256_set1_epi32(multiplier),
                _mm256_set1_epi32(half),
                _mm256_set1_epi32(mask),
                _mm256_set1_epi32(zero),
                _mm256_set1_epi32(min),
                _mm256_set1_epi32(max),
            ];
            (lanes, _mm_cvtsi32_si128(shift), h.has_ties())
        })
    }

    // Always inlined into the AVX2 (or VNNI) loops that call it, which a target-feature
    // function cannot be: out of line, it took a sixth of DS-CNN's time.
    #[inline(always)]
    unsafe fn requantize(lanes: &Lanes, scalar: &Requantizer, sums: [i32; 8]) -> [i32; 8] {
        let Some(lanes) = lanes else {
            return sums.map(|a| scalar.apply(a));
        };
        let mut out = [0i32; 8];
        // SAFETY: `sums` and `out` hold eight int32s.
        unsafe {
            let acc = _mm256_loadu_si256(sums.as_ptr().cast());
            _mm256_storeu_si256(out.as_mut_ptr().cast(), high_word(lanes, acc));
        }
        out
    }

    #[inline(always)]
    unsafe fn narrowed(lanes: &Lanes, scalar: &Requantizer, sums: [i32; 8]) -> u64 {
        let Some(lanes) = lanes else {
            return low_bytes_of(sums.map(|a| scalar.apply(a)));
        };
        // SAFETY: `sums` holds eight int32s; AVX2 (the caller's).
        unsafe { low_bytes(high_word(lanes, _mm256_loadu_si256(sums.as_ptr().cast()))) }
    }

    #[inline(always)]
    unsafe fn narrowed_two(
        lanes: &Lanes,
        scalar: &Requantizer,
        [first, second]: [[i32; 8]; 2],
    ) -> [u8; 16] {
        let Some(lanes) = lanes else {
            let [low, high] = [first, second].map(|s| low_bytes_of(s.map(|a| scalar.apply(a))));
            return (u128::from(low) | u128::from(high) << 64).to_le_bytes();
        };
        // SAFETY: `first` and `second` hold eight int32s; AVX2 (the caller's).
        unsafe {
            let [first, second] = [first, second].map(|s| _mm256_loadu_si256(s.as_ptr().cast()));
            low_bytes_two(high_word(lanes, first), high_word(lanes, second))
        }
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn pack<const SIGNED: bool>(block: &Block<'_>, units: &mut [[u8; 32]]) {
        let (k, _) = block.rows.extent();
        let gather = gather_control(block);
        // SAFETY: the caller's bounds.
        let row = |i: usize| unsafe { block_row(block, gather, k, i) };
        for (u, unit) in units.iter_mut().enumerate() {
            let interleaved = _mm_unpacklo_epi8(row(2 * u), row(2 * u + 1));
            let values = if SIGNED {
                _mm256_cvtepi8_epi16(interleaved)
            } else {
                _mm256_cvtepu8_epi16(interleaved)
            };
            // SAFETY: a unit holds 32 bytes.
            unsafe { _mm256_storeu_si256(unit.as_mut_ptr().cast(), values) };
        }
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn product<const B: usize>(
        ch: &Channels<Avx2>,
        units: &[[u8; 32]],
        o: usize,
    ) -> [[i32; 8]; B] {
        // SAFETY: the caller's bounds.
        unsafe {
            products::<Avx2, B>(ch, units, o, |acc, values, word| {
                _mm256_add_epi32(acc, _mm256_madd_epi16(values, word))
            })
        }
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn taps<const SIGNED: bool>(
        plan: &TapPlan<'_>,
        padded: &[u8],
        gather: &Gather,
    ) -> [i32; 8] {
        let base = padded.as_ptr().wrapping_add(gather.start);
        // SAFETY: AVX2 code (`Isa`); every tap's bytes are within `padded` (the caller's bound).
        unsafe {
            let control = _mm_loadu_si128(gather.control.as_ptr().cast());
            let mut acc = _mm256_setzero_si256();
            for (weight, offset) in plan.taps() {
                let bytes = _mm_shuffle_epi8(_mm_loadu_si128(base.add(offset).cast()), control);
                let values = if SIGNED {
                    _mm256_cvtepi8_epi32(bytes)
                } else {
                    _mm256_cvtepu8_epi32(bytes)
                };
                let product = _mm256_mullo_epi32(values, _mm256_set1_epi32(weight));
                acc = _mm256_add_epi32(acc, product);
            }
            let mut sums = [0i32; 8];
            _mm256_storeu_si256(sums.as_mut_ptr().cast(), acc);
            sums
        }
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn expand(expansion: &Expansion, plane: &[u8], padded: &mut [u8], flip: u8) {
        let (from, to) = (plane.as_ptr(), padded.as_mut_ptr());
        let flip = _mm_set1_epi8(flip as i8);
        for chunk in &expansion.chunks {
            // SAFETY: AVX2 code (`Isa`); 16 bytes from `chunk.from` are within `plane` and 16
            // from `chunk.to` within `padded` (the caller's bounds, `Expansion::new`'s chunks).
            unsafe {
                let source = _mm_loadu_si128(from.add(chunk.from).cast());
                let control = _mm_loadu_si128(chunk.control.as_ptr().cast());
                let fill = _mm_loadu_si128(chunk.fill.as_ptr().cast());
                let bytes = _mm_or_si128(_mm_shuffle_epi8(source, control), fill);
                _mm_storeu_si128(to.add(chunk.to).cast(), _mm_xor_si128(bytes, flip));
            }
        }
    }

    const GROUPED: bool = true;

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn grouped<const WHOLE: bool>(
        offsets: &[usize],
        words: &[i32],
        padded: &[u8],
        gather: &PairedGather,
    ) -> [i32; 8] {
        // SAFETY: the caller's bounds.
        unsafe {
            grouped_sums::<WHOLE>(offsets, words, padded, gather, |acc, values, word| {
                _mm256_add_epi32(acc, _mm256_madd_epi16(values, word))
            })
        }
    }

    const QUADS: bool = true;

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn quads<const WHOLE: bool>(
        offsets: &[usize],
        words: &[i32],
        padded: &[u8],
        gather: &PairedGather,
    ) -> [i32; 8] {
        // SAFETY: the caller's bounds. The pairs' int16 sums do not saturate for the words
        // `quad_word` makes; their sums in fours fit int32.
        unsafe {
            let ones = _mm256_set1_epi16(1);
            grouped_sums::<WHOLE>(offsets, words, padded, gather, |acc, values, word| {
                let pairs = _mm256_maddubs_epi16(values, word);
                _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, ones))
            })
        }
    }

    #[inline(never)]
    #[target_feature(enable = "avx2")]
    unsafe fn blocks<const READING: u8, Y: QuantInt>(
        group: &GroupBlocks<'_, Avx2>,
        units: &mut Vec<[u8; 32]>,
        unfolded: &mut [u8],
        y: &mut [Y],
    ) {
        group_blocks::<Avx2, READING, Y>(group, units, unfolded, y)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn passes<const SIGNED: bool>(
        state: &mut DepthwiseState<Avx2>,
        input: &DepthwiseInput<'_>,
        y: &mut [u8],
    ) {
        // SAFETY: the caller's bounds; this function has the instruction set's features.
        unsafe { depthwise_passes::<Avx2, SIGNED>(state, input, y) }
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn pass<const SIGNED: bool>(
        padded: &[u8],
        channel: &ChannelPass<'_, Avx2>,
        out: &mut [u8],
    ) {
        // SAFETY: the caller's bounds; this function has the instruction set's features.
        unsafe { depthwise_pass::<Avx2, SIGNED>(padded, channel, out) }
    }
}

/// The raw sums of a grouped depthwise vector ([`Isa::grouped`]): per tap group, sixteen bytes
/// from each half's start (one load for both with `WHOLE`), shuffled into the lanes' groups by
/// the gather's control, and `acc = multiply_add(acc, values, word)` with the group's weight
/// word broadcast (`vpmaddwd` on zero-extended int16 pairs and an add for AVX2, `vpdpbusd` on
/// byte fours for VNNI).
///
/// # Safety
/// The CPU has AVX2; every group's sixteen bytes from each half's start are within `padded`.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn grouped_sums<const WHOLE: bool>(
    offsets: &[usize],
    words: &[i32],
    padded: &[u8],
    gather: &PairedGather,
    multiply_add: impl Fn(__m256i, __m256i, __m256i) -> __m256i,
) -> [i32; 8] {
    let [low, high] = gather.starts.map(|s| padded.as_ptr().wrapping_add(s));
    // SAFETY: the control holds 32 bytes; the loads are the caller's bound.
    unsafe {
        let control = _mm256_loadu_si256(gather.control.as_ptr().cast());
        let mut acc = _mm256_setzero_si256();
        for (&offset, &word) in offsets.iter().zip(words) {
            let bytes = if WHOLE {
                _mm256_broadcastsi128_si256(_mm_loadu_si128(low.add(offset).cast()))
            } else {
                _mm256_loadu2_m128i(high.add(offset).cast(), low.add(offset).cast())
            };
            let values = _mm256_shuffle_epi8(bytes, control);
            acc = multiply_add(acc, values, _mm256_set1_epi32(word));
        }
        let mut sums = [0i32; 8];
        _mm256_storeu_si256(sums.as_mut_ptr().cast(), acc);
        sums
    }
}

/// A block's gather control, loaded once (see [`Block::gather`]).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn gather_control(block: &Block<'_>) -> Option<__m128i> {
    block.gather.map(|g| {
        // SAFETY: a gather holds sixteen bytes.
        unsafe { _mm_loadu_si128(g.as_ptr().cast()) }
    })
}

/// Row `i` of a block's eight positions as bytes: eight loaded, or picked by the gather
/// `control` from sixteen; zeros past the block's `k` rows.
///
/// # Safety
/// The row's eight bytes from `block.at` (sixteen with a gather) are within `block.x`.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn block_row(
    block: &Block<'_>,
    control: Option<__m128i>,
    k: usize,
    i: usize,
) -> __m128i {
    if i >= k {
        return _mm_setzero_si128();
    }
    let at = block
        .x
        .as_ptr()
        .wrapping_add(block.at + block.rows.offset(i));
    // SAFETY: the caller's bound.
    unsafe {
        match control {
            Some(control) => _mm_shuffle_epi8(_mm_loadu_si128(at.cast()), control),
            None => _mm_loadl_epi64(at.cast()),
        }
    }
}

/// The raw sums of channels `o..o + B` over a packed block: for each 32-byte unit, every
/// channel's weight word broadcast and `acc = multiply_add(acc, unit, word)` (`vpmaddwd` and
/// an add for AVX2, `vpdpbusd` for VNNI), eight lanes per channel; zeros where the channels
/// have no words ([`Channels::lines`]).
///
/// # Safety
/// The CPU has AVX2; `ch` has `units.len()` words per channel.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn products<I: super::shared::Isa, const B: usize>(
    ch: &super::shared::Channels<I>,
    units: &[[u8; 32]],
    o: usize,
    multiply_add: impl Fn(__m256i, __m256i, __m256i) -> __m256i,
) -> [[i32; 8]; B] {
    let mut sums = [[0i32; 8]; B];
    let Some((words, strides)) = ch.lines::<B>(o) else {
        return sums;
    };
    // SAFETY: the caller's bounds and `Channels::lines`'.
    let acc = unsafe {
        match strides {
            // Constant strides: the broadcasts' addresses fold into their instructions.
            [1, 8] => sums_of::<B>(words, [1, 8], units, &multiply_add),
            _ => sums_of::<B>(words, strides, units, &multiply_add),
        }
    };
    for (sums, acc) in sums.iter_mut().zip(acc) {
        // SAFETY: `sums` holds eight int32s.
        unsafe { _mm256_storeu_si256(sums.as_mut_ptr().cast(), acc) };
    }
    sums
}

/// [`products`]' loop over the units, channel `j`'s word of unit `u` at
/// `words[j·per_channel + u·per_unit]`.
///
/// # Safety
/// The CPU has AVX2; every such word for `j < B`, `u < units.len()` is readable.
#[inline(always)]
unsafe fn sums_of<const B: usize>(
    words: *const i32,
    [per_channel, per_unit]: [usize; 2],
    units: &[[u8; 32]],
    multiply_add: &impl Fn(__m256i, __m256i, __m256i) -> __m256i,
) -> [__m256i; B] {
    let mut acc = [_mm256_setzero_si256(); B];
    for (u, unit) in units.iter().enumerate() {
        // SAFETY: a unit holds 32 bytes; the words are the caller's bound.
        unsafe {
            let values = _mm256_loadu_si256(unit.as_ptr().cast());
            let line = words.add(u * per_unit);
            for (j, acc) in acc.iter_mut().enumerate() {
                let word = _mm256_set1_epi32(*line.add(j * per_channel));
                *acc = multiply_add(*acc, values, word);
            }
        }
    }
    acc
}

/// [`Requantizer::apply`] of eight accumulators in the high-word form. Always inlined (into
/// AVX2 code): left out of line, a depthwise pass's requantization took a sixth of DS-CNN's
/// time.
///
/// # Safety
/// The CPU has AVX2.
#[inline(always)]
pub(super) unsafe fn high_word(lanes: &([__m256i; 6], __m128i, bool), acc: __m256i) -> __m256i {
    // SAFETY: the caller's.
    unsafe {
        let ([multiplier, half, mask, zero, min, max], shift, ties) = *lanes;
        // The 64-bit products of the even and the odd lanes, then their high words.
        let even = _mm256_mul_epi32(acc, multiplier);
        let odd = _mm256_mul_epi32(_mm256_srli_epi64::<32>(acc), multiplier);
        let high = _mm256_blend_epi32::<0b1010_1010>(_mm256_srli_epi64::<32>(even), odd);
        let high = _mm256_add_epi32(high, half);
        let rounded = if ties {
            // A tie: the low word and the bits the shift drops all clear; it goes to the even
            // side.
            let low = _mm256_blend_epi32::<0b1010_1010>(even, _mm256_slli_epi64::<32>(odd));
            let dropped = _mm256_or_si256(_mm256_and_si256(high, mask), low);
            let tie = _mm256_cmpeq_epi32(dropped, _mm256_setzero_si256());
            let tie_bit = _mm256_and_si256(tie, _mm256_set1_epi32(1));
            _mm256_andnot_si256(tie_bit, _mm256_sra_epi32(high, shift))
        } else {
            _mm256_sra_epi32(high, shift)
        };
        // |rounded| < 2^30 and the zero point is 16-bit: the sum cannot overflow.
        _mm256_min_epi32(_mm256_max_epi32(_mm256_add_epi32(rounded, zero), min), max)
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use ferrite_hal::op::Requantize;

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
            // SAFETY: the CPU has AVX2 (checked above).
            let vector = unsafe { Avx2::requantize(&Avx2::lanes(&scalar), &scalar, acc) };
            assert_eq!(
                vector,
                acc.map(|a| scalar.apply(a)),
                "{multiplier} {shift} {acc:?}"
            );
        }
    }
}
