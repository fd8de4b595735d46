//! The AVX2 instruction set for the shared integer geometry ([`super::Isa`]): products of
//! int16-widened values summed in pairs by `vpmaddwd` (exact: `vpmaddubsw`'s saturating int16
//! pair sums, which onnxruntime's kernels use, would not be), requantization of eight outputs at
//! once in the high-word form ([`crate::base::requantize::HighWordRequantizer`]), scalar for the
//! rare scales without one; and QAdd's table form by `vpgatherdd`.

use super::{
    avx2_depthwise, avx2_lanes, avx2_wide, depthwise_pass, depthwise_passes, group_blocks,
    low_bytes_of, qconv_with, scratch_needed, Block, ChannelPass, Channels, DepthwiseInput,
    DepthwiseState, Expansion, Gather, GroupBlocks, Isa, Operands, PairedGather, StepKey, TapPlan,
};
use crate::base::geometry::ConvDims;
use crate::base::quantized::QuantInt;
use crate::base::requantize::Requantizer;
use core::arch::x86_64::*;
use ferrite_hal::op::QConv;

/// The AVX2 instruction set.
pub(super) struct Avx2;

/// The entry point compiled with AVX2: the shared geometry and these operations inlined.
///
/// # Safety
/// The CPU has AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn qconv<X: QuantInt, Y: QuantInt>(
    c: &QConv,
    d: &ConvDims,
    ops: &Operands<'_>,
    x: &[X],
    y: &mut [Y],
    scratch: &mut [u8],
) -> Option<bool> {
    let key = StepKey::new(c, d, ops, X::MIN < 0);
    let depthwise = d.c / c.group.max(1) == 1 && c.group > 1;
    // SAFETY (both): this CPU has AVX2 (the caller's).
    let wide = match (c.is_pointwise(), depthwise) {
        (true, _) => unsafe {
            match avx2_lanes::pointwise(key, ops, d, x, y) {
                None => avx2_wide::pointwise(key, ops, d, x, y),
                done => done,
            }
        },
        (false, false) if scratch.len() >= scratch_needed(c, d) => unsafe {
            avx2_wide::unfolded(key, c, ops, d, x, y)
        },
        (false, true) if scratch.len() >= scratch_needed(c, d) => unsafe {
            avx2_depthwise::depthwise(key, c, ops, d, x, y)
        },
        _ => None,
    };
    if let Some(done) = wide {
        return Some(done);
    }
    qconv_with::<Avx2, X, Y>(c, d, ops, x, y, scratch)
}

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
pub(super) unsafe fn products<I: super::Isa, const B: usize>(
    ch: &super::Channels<I>,
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

/// The low byte of each of eight int32 lanes, lane `t` in byte `t`: each 128-bit half's four
/// picked into its first word by one byte shuffle, the two words joined by one permute.
///
/// # Safety
/// The CPU has AVX2.
#[inline(always)]
pub(super) unsafe fn low_bytes(v: __m256i) -> u64 {
    // SAFETY: the caller's.
    unsafe {
        let pick = _mm256_setr_epi8(
            0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, //
            0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
        );
        let words = _mm256_shuffle_epi8(v, pick);
        let joined = _mm256_permutevar8x32_epi32(words, _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0));
        _mm_cvtsi128_si64(_mm256_castsi256_si128(joined)) as u64
    }
}

/// The low byte of each int32 lane of `first`, then of `second` (sixteen bytes in order): the
/// lanes, clamped outputs of 8-bit types, packed to int16 exactly, masked to their low bytes,
/// packed to bytes and the four words put in order by one permute.
///
/// # Safety
/// The CPU has AVX2; every lane is within int16.
#[inline(always)]
pub(super) unsafe fn low_bytes_two(first: __m256i, second: __m256i) -> [u8; 16] {
    // SAFETY: the caller's.
    unsafe {
        // Per 128-bit half: first's four, second's four (int16).
        let words = _mm256_packs_epi32(first, second);
        let low = _mm256_and_si256(words, _mm256_set1_epi16(0xff));
        let bytes = _mm256_packus_epi16(low, low);
        let ordered = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 0, 0, 0, 0));
        let mut out = [0u8; 16];
        _mm_storeu_si128(out.as_mut_ptr().cast(), _mm256_castsi256_si128(ordered));
        out
    }
}

/// [`crate::ops::elementwise::int8::qadd`]'s table form, eight outputs at a time, when the build runs the AVX2
/// kernels: each input's term gathered from its 256-entry table by byte (`vpgatherdd`), the two
/// added (saturating, as the scalar form), rounded once with `frac`
/// fraction bits, ties to even, offset by the output zero point and clamped to
/// `[zero, min, max]`'s bounds. The last `len mod 8` outputs one at a time. False (nothing
/// done) when the kernels do not run or an operand is short.
pub(crate) fn qadd_tables<Y: QuantInt>(
    frac: u32,
    finish: [i32; 3],
    tables: [&[i32]; 2],
    a: &[u8],
    b: &[u8],
    y: &mut [Y],
) -> bool {
    let fits = tables.iter().all(|t| t.len() >= 256) && a.len() >= y.len() && b.len() >= y.len();
    if Y::WIDE || !fits || frac > 30 || crate::isa::level() < crate::isa::Level::Avx2 {
        return false;
    }
    // SAFETY: the CPU has AVX2 (`simd::level`).
    unsafe { qadd_tables_avx2(frac, finish, tables, a, b, y) };
    true
}

/// `a + b` per lane, saturated to int32 as `i32::saturating_add` (terms reach 2^30 and past
/// only for output scales far below the inputs', where the scalar form saturates too).
#[inline]
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

/// [`crate::ops::elementwise::int8::qadd`] with each input's term computed eight at a time, when the
/// build runs the AVX2 kernels and both terms have a vector form (`[multiplier, right, zero]`,
/// see `AddTerm::vector_form`): `shift_sticky((v − zero)·multiplier, right)` by 32 × 32 → 64-bit
/// products, a logical shift and the dropped bits' sticky bit, in place of [`qadd_tables`]'
/// 256-entry tables and their gathers (slow on AMD cores: ResNet-8 int8's QAdds took 35 µs of
/// its 300 on Zen 3). The rest as [`qadd_tables`]. False (nothing done) when the kernels do not
/// run, a form is out of range or an operand is short.
pub(crate) fn qadd_computed<Y: QuantInt>(
    frac: u32,
    finish: [i32; 3],
    forms: [[i32; 3]; 2],
    signed: [bool; 2],
    a: &[u8],
    b: &[u8],
    y: &mut [Y],
) -> bool {
    let fits = a.len() >= y.len() && b.len() >= y.len();
    let shifts = forms
        .iter()
        .all(|[m, right, _]| *m >= 0 && (0..=32).contains(right));
    if Y::WIDE || !fits || !shifts || frac > 30 || crate::isa::level() < crate::isa::Level::Avx2 {
        return false;
    }
    // SAFETY: the CPU has AVX2 (`simd::level`); the forms' shifts are 0–32.
    unsafe {
        let terms = Computed([
            ComputedTerm::new(forms[0], signed[0]),
            ComputedTerm::new(forms[1], signed[1]),
        ]);
        qadd_avx2(frac, finish, &terms, a, b, y)
    };
    true
}

/// How [`qadd_avx2`] gets the two inputs' terms of eight elements.
trait AddTerms {
    /// The terms of bytes `at..at + 8` of `a` and of `b`.
    ///
    /// # Safety
    /// The CPU has AVX2; `at + 8` is within `a` and `b`.
    unsafe fn terms(&self, a: &[u8], b: &[u8], at: usize) -> (__m256i, __m256i);
}

/// Each input's 256-entry table, read by `vpgatherdd`.
struct Tables<'a>([&'a [i32]; 2]);

impl AddTerms for Tables<'_> {
    #[inline(always)]
    unsafe fn terms(&self, a: &[u8], b: &[u8], at: usize) -> (__m256i, __m256i) {
        let [ta, tb] = self.0;
        // SAFETY: the caller's; every index is a byte, below the tables' 256 entries.
        unsafe {
            let ia = _mm256_cvtepu8_epi32(_mm_loadl_epi64(a.as_ptr().add(at).cast()));
            let ib = _mm256_cvtepu8_epi32(_mm_loadl_epi64(b.as_ptr().add(at).cast()));
            (
                _mm256_i32gather_epi32::<4>(ta.as_ptr(), ia),
                _mm256_i32gather_epi32::<4>(tb.as_ptr(), ib),
            )
        }
    }
}

/// Each input's term computed ([`ComputedTerm`]).
struct Computed([ComputedTerm; 2]);

impl AddTerms for Computed {
    #[inline(always)]
    unsafe fn terms(&self, a: &[u8], b: &[u8], at: usize) -> (__m256i, __m256i) {
        let [ta, tb] = &self.0;
        // SAFETY: the caller's.
        unsafe { (ta.of(a, at), tb.of(b, at)) }
    }
}

/// One input's term in vector form ([`qadd_computed`]).
#[derive(Clone, Copy)]
struct ComputedTerm {
    zero: __m256i,
    multiplier: __m256i,
    /// The right shift, as the shift instructions' count.
    right: __m128i,
    /// `2^right − 1` in each 64-bit lane: the bits the shift drops.
    dropped: __m256i,
    signed: bool,
}

impl ComputedTerm {
    /// The vector form of `[multiplier, right, zero]` (`right` in `0..=32`) for bytes of the
    /// signedness.
    #[target_feature(enable = "avx2")]
    fn new([multiplier, right, zero]: [i32; 3], signed: bool) -> ComputedTerm {
        ComputedTerm {
            zero: _mm256_set1_epi32(zero),
            multiplier: _mm256_set1_epi32(multiplier),
            right: _mm_cvtsi32_si128(right),
            dropped: _mm256_set1_epi64x((1i64 << right.clamp(0, 32)) - 1),
            signed,
        }
    }

    /// The terms of bytes `at..at + 8` of `x`.
    ///
    /// # Safety
    /// The CPU has AVX2; `at + 8 ≤ x.len()`.
    #[inline(always)]
    unsafe fn of(&self, x: &[u8], at: usize) -> __m256i {
        // SAFETY: the caller's.
        unsafe {
            let bytes = _mm_loadl_epi64(x.as_ptr().add(at).cast());
            let values = if self.signed {
                _mm256_cvtepi8_epi32(bytes)
            } else {
                _mm256_cvtepu8_epi32(bytes)
            };
            let difference = _mm256_sub_epi32(values, self.zero);
            // The 64-bit products of the even lanes, then of the odd ones; each shifted, the
            // low bit set where the shift dropped any (round to odd), and the low words kept.
            let even = self.sticky(_mm256_mul_epi32(difference, self.multiplier));
            let odd = _mm256_srli_epi64::<32>(difference);
            let odd = self.sticky(_mm256_mul_epi32(odd, self.multiplier));
            _mm256_blend_epi32::<0b1010_1010>(even, _mm256_slli_epi64::<32>(odd))
        }
    }

    /// `shift_sticky` of four 64-bit products, right 0–32 (the low words of the logical shift
    /// are the arithmetic shift's).
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[inline(always)]
    unsafe fn sticky(&self, product: __m256i) -> __m256i {
        // SAFETY: the caller's.
        unsafe {
            let shifted = _mm256_srl_epi64(product, self.right);
            let dropped = _mm256_and_si256(product, self.dropped);
            let exact = _mm256_cmpeq_epi64(dropped, _mm256_setzero_si256());
            _mm256_or_si256(shifted, _mm256_andnot_si256(exact, _mm256_set1_epi64x(1)))
        }
    }
}

/// The body of [`qadd_tables`].
///
/// # Safety
/// Each table holds 256 entries; `a` and `b` at least `y.len()` bytes.
#[target_feature(enable = "avx2")]
unsafe fn qadd_tables_avx2<Y: QuantInt>(
    frac: u32,
    finish: [i32; 3],
    tables: [&[i32]; 2],
    a: &[u8],
    b: &[u8],
    y: &mut [Y],
) {
    // SAFETY: the caller's.
    unsafe { qadd_avx2(frac, finish, &Tables(tables), a, b, y) }
}

/// The QAdd loop on eight elements at a time: their terms (`T`), then [`AddFinish`]; the last
/// `len mod 8` through a zero-padded copy of their bytes.
///
/// # Safety
/// The CPU has AVX2; `a` and `b` hold at least `y.len()` bytes; `T`'s own conditions.
#[target_feature(enable = "avx2")]
unsafe fn qadd_avx2<Y: QuantInt, T: AddTerms>(
    frac: u32,
    finish: [i32; 3],
    terms: &T,
    a: &[u8],
    b: &[u8],
    y: &mut [Y],
) {
    let finish = AddFinish::new(frac, finish);
    // Eight-bit outputs (the callers'): each one's byte.
    let y: &mut [u8] = bytemuck::cast_slice_mut(y);
    let full = y.len() / 8 * 8;
    for at in (0..full).step_by(8) {
        // SAFETY: at + 8 <= y.len() <= a.len(), b.len(); AVX2.
        let bytes = unsafe { finish.bytes(terms.terms(a, b, at)) };
        if let Some(slots) = y.get_mut(at..at + 8) {
            slots.copy_from_slice(&bytes);
        }
    }
    if full < y.len() {
        let (mut ra, mut rb) = ([0u8; 8], [0u8; 8]);
        for (slot, &v) in ra.iter_mut().zip(&a[full..y.len()]) {
            *slot = v;
        }
        for (slot, &v) in rb.iter_mut().zip(&b[full..y.len()]) {
            *slot = v;
        }
        // SAFETY: the copies hold eight bytes each (their padding's outputs are dropped); AVX2.
        let bytes = unsafe { finish.bytes(terms.terms(&ra, &rb, 0)) };
        for (slot, &v) in y[full..].iter_mut().zip(&bytes) {
            *slot = v;
        }
    }
}

/// What turns eight sums of terms into outputs: added (saturating, as the scalar form), rounded
/// once with `frac` fraction bits, ties to even, offset by the output zero point and clamped
/// to `[min, max]`.
struct AddFinish {
    frac: u32,
    shift: __m128i,
    mask: __m256i,
    half: __m256i,
    bounds: [__m256i; 3],
}

impl AddFinish {
    #[target_feature(enable = "avx2")]
    fn new(frac: u32, finish: [i32; 3]) -> AddFinish {
        AddFinish {
            frac,
            shift: _mm_cvtsi32_si128(frac as i32),
            mask: _mm256_set1_epi32(((1i64 << frac) - 1) as i32),
            half: _mm256_set1_epi32(((1i64 << frac) >> 1) as i32),
            bounds: finish.map(|v| _mm256_set1_epi32(v)),
        }
    }

    /// The eight outputs' bytes of the two inputs' terms.
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[inline(always)]
    unsafe fn bytes(&self, (terms_a, terms_b): (__m256i, __m256i)) -> [u8; 8] {
        // SAFETY: the caller's.
        unsafe {
            let sum = saturating_add(terms_a, terms_b);
            let rounded = if self.frac == 0 {
                sum
            } else {
                let q = _mm256_sra_epi32(sum, self.shift);
                let rest = _mm256_and_si256(sum, self.mask);
                let odd = _mm256_and_si256(q, _mm256_set1_epi32(1));
                // rest + (q & 1) > half: the compare is all ones (−1), so subtracting it adds
                // one.
                let up = _mm256_cmpgt_epi32(_mm256_add_epi32(rest, odd), self.half);
                _mm256_sub_epi32(q, up)
            };
            // |rounded| < 2^31 >> frac, or the saturated sum itself when frac is 0: the
            // scalar form's saturating add of the zero point, then the clamp.
            let [zero, min, max] = self.bounds;
            let v = saturating_add(rounded, zero);
            let v = _mm256_min_epi32(_mm256_max_epi32(v, min), max);
            low_bytes(v).to_le_bytes()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::Rng;
    use super::*;
    use ferrite_hal::op::Requantize;

    /// The vectorised table addition equals `qadd`'s scalar form: random tables (terms up to
    /// int32's bounds, so sums saturate), every fraction width 0–30, random clamps, lengths
    /// with and without a tail.
    #[test]
    fn qadd_tables_equal_the_scalar_form() {
        if crate::isa::level() < crate::isa::Level::Avx2 {
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
