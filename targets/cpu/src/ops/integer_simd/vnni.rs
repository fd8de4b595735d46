//! AVX-512 VNNI for the shared integer geometry ([`super::Isa`]): a block's rows packed four
//! to a 32-bit lane (eight output positions × four rows in one vector) and each channel's four
//! weights summed into it by one `vpdpbusd` — twice the multiply-adds of AVX2's `vpmaddwd` per
//! instruction, and exact: the four products of unsigned by signed bytes and their sum fit
//! int32, and the accumulation wraps as the portable sums do (the non-saturating form).
//! `vpdpbusd` multiplies *unsigned* activations, so int8 inputs are packed as `x + 128` and
//! each channel's base subtracts `128 · Σ w` ([`Isa::input_offset`]). Depthwise taps, padding
//! and requantization are AVX2's.

use super::avx2::{self, Avx2};
use super::{
    depthwise_pass, depthwise_passes, group_blocks, qconv_with, scratch_needed, vnni_wide, Block,
    ChannelPass, Channels, DepthwiseInput, DepthwiseState, Expansion, Gather, GroupBlocks, Isa,
    Operands, PairedGather, StepKey, TapPlan,
};
use crate::base::geometry::ConvDims;
use crate::base::quantized::QuantInt;
use crate::base::requantize::Requantizer;
use core::arch::x86_64::*;
use ferrite_hal::op::{QConv, QGemmWeights, Requantize};

/// The AVX-512 VNNI instruction set (its 256-bit form, with AVX-512VL).
pub(super) struct Vnni;

/// Whether the CPU has AVX-512 VNNI and AVX-512VL.
pub(super) fn available() -> bool {
    std::is_x86_feature_detected!("avx512vnni") && std::is_x86_feature_detected!("avx512vl")
}

/// The entry point compiled with VNNI: the shared geometry and these operations inlined.
///
/// # Safety
/// The CPU has AVX2, AVX-512VL and AVX-512 VNNI ([`available`]).
#[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
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
    // SAFETY (both): this CPU has the features (the caller's).
    let wide = match (c.is_pointwise(), depthwise) {
        (true, _) => unsafe { vnni_wide::pointwise(key, ops, d, x, y) },
        (false, false) if scratch.len() >= scratch_needed(c, d) => unsafe {
            vnni_wide::unfolded(key, c, ops, d, x, y)
        },
        _ => None,
    };
    if let Some(done) = wide {
        return Some(done);
    }
    qconv_with::<Vnni, X, Y>(c, d, ops, x, y, scratch)
}

impl Isa for Vnni {
    type Lanes = <Avx2 as Isa>::Lanes;

    const ROWS: usize = 4;

    fn input_offset(signed: bool) -> i32 {
        if signed {
            128
        } else {
            0
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
    unsafe fn lanes(scalar: &Requantizer) -> Self::Lanes {
        // SAFETY: this CPU has AVX2 (it has VNNI).
        unsafe { Avx2::lanes(scalar) }
    }

    #[inline(always)]
    unsafe fn requantize(lanes: &Self::Lanes, scalar: &Requantizer, sums: [i32; 8]) -> [i32; 8] {
        // SAFETY: this CPU has AVX2.
        unsafe { Avx2::requantize(lanes, scalar, sums) }
    }

    #[inline(always)]
    unsafe fn narrowed(lanes: &Self::Lanes, scalar: &Requantizer, sums: [i32; 8]) -> u64 {
        // SAFETY: this CPU has AVX2.
        unsafe { Avx2::narrowed(lanes, scalar, sums) }
    }

    #[inline(always)]
    unsafe fn narrowed_two(
        lanes: &Self::Lanes,
        scalar: &Requantizer,
        sums: [[i32; 8]; 2],
    ) -> [u8; 16] {
        // SAFETY: this CPU has AVX2.
        unsafe { Avx2::narrowed_two(lanes, scalar, sums) }
    }

    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
    unsafe fn pack<const SIGNED: bool>(block: &Block<'_>, units: &mut [[u8; 32]]) {
        let (k, _) = block.rows.extent();
        let gather = avx2::gather_control(block);
        // SAFETY: the caller's bounds.
        let row = |i: usize| unsafe { avx2::block_row(block, gather, k, i) };
        let flip = _mm256_set1_epi8(-128);
        for (u, unit) in units.iter_mut().enumerate() {
            // Rows 4u..4u + 4 of position t in lane t: bytes r0 r1 r2 r3.
            let low = _mm_unpacklo_epi8(row(4 * u), row(4 * u + 1));
            let high = _mm_unpacklo_epi8(row(4 * u + 2), row(4 * u + 3));
            let quads =
                _mm256_set_m128i(_mm_unpackhi_epi16(low, high), _mm_unpacklo_epi16(low, high));
            let quads = if SIGNED {
                _mm256_xor_si256(quads, flip)
            } else {
                quads
            };
            // SAFETY: a unit holds 32 bytes.
            unsafe { _mm256_storeu_si256(unit.as_mut_ptr().cast(), quads) };
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
    unsafe fn product<const B: usize>(
        ch: &Channels<Vnni>,
        units: &[[u8; 32]],
        o: usize,
    ) -> [[i32; 8]; B] {
        // SAFETY: the caller's bounds.
        unsafe {
            avx2::products::<Vnni, B>(ch, units, o, |acc, values, word| {
                _mm256_dpbusd_epi32(acc, values, word)
            })
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
    unsafe fn taps<const SIGNED: bool>(
        plan: &TapPlan<'_>,
        padded: &[u8],
        gather: &Gather,
    ) -> [i32; 8] {
        // SAFETY: this CPU has AVX2; the caller's bounds.
        unsafe { Avx2::taps::<SIGNED>(plan, padded, gather) }
    }

    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
    unsafe fn expand(expansion: &Expansion, plane: &[u8], padded: &mut [u8], flip: u8) {
        // SAFETY: this CPU has AVX2; the caller's bounds.
        unsafe { Avx2::expand(expansion, plane, padded, flip) }
    }

    const GROUPED: bool = true;

    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
    unsafe fn grouped<const WHOLE: bool>(
        offsets: &[usize],
        words: &[i32],
        padded: &[u8],
        gather: &PairedGather,
    ) -> [i32; 8] {
        // SAFETY: this CPU has AVX2; the caller's bounds.
        unsafe {
            avx2::grouped_sums::<WHOLE>(offsets, words, padded, gather, |acc, values, word| {
                _mm256_dpbusd_epi32(acc, values, word)
            })
        }
    }

    #[inline(never)]
    #[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
    unsafe fn blocks<const READING: u8, Y: QuantInt>(
        group: &GroupBlocks<'_, Vnni>,
        units: &mut Vec<[u8; 32]>,
        unfolded: &mut [u8],
        y: &mut [Y],
    ) {
        group_blocks::<Vnni, READING, Y>(group, units, unfolded, y)
    }

    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
    unsafe fn passes<const SIGNED: bool>(
        state: &mut DepthwiseState<Vnni>,
        input: &DepthwiseInput<'_>,
        y: &mut [u8],
    ) {
        // SAFETY: the caller's bounds; this function has the instruction set's features.
        unsafe { depthwise_passes::<Vnni, SIGNED>(state, input, y) }
    }

    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
    unsafe fn pass<const SIGNED: bool>(
        padded: &[u8],
        channel: &ChannelPass<'_, Vnni>,
        out: &mut [u8],
    ) {
        // SAFETY: the caller's bounds; this function has the instruction set's features.
        unsafe { depthwise_pass::<Vnni, SIGNED>(padded, channel, out) }
    }
}

/// [`crate::ops::matmul::int8::qgemm`] of 8-bit activations on blocked weights (`[N/4, K/4, 4,
/// 4]`: each 16 bytes are four columns' weights for four activations — `vpdpbusd`'s layout):
/// two blocks (eight columns) per vector, four activations broadcast to every lane. Each
/// column's `Σ w` comes from the same instruction on a vector of ones, and the zero point (plus
/// 128 for int8 inputs, packed unsigned) is subtracted once per column: the same wrapping sums
/// as the portable kernel, bit for bit. False (nothing written) when an operand is shorter than
/// the sizes say.
///
/// # Safety
/// The CPU has AVX2, AVX-512VL and AVX-512 VNNI ([`available`]).
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
pub(super) unsafe fn qgemm_blocked<X: QuantInt, Y: QuantInt>(
    q: &Requantize,
    [m, k, n]: [usize; 3],
    a: &[X],
    b: &[i8],
    bias: &[i32],
    requant: &[i32],
    y: &mut [Y],
) -> bool {
    let (groups, blocks) = (k / 4, n / 4);
    let bytes: &[u8] = bytemuck::cast_slice(a);
    let fits = k % 4 == 0
        && n % 4 == 0
        && bytes.len() >= m * k
        && b.len() >= n * k
        && bias.len() >= n
        && y.len() >= m * n;
    if !fits {
        return false;
    }
    let signed = X::MIN < 0;
    let zero = q.input_zero.wrapping_add(if signed { 128 } else { 0 });
    // Each `thirty_two_columns` call: the same CPU features; `b` holds `blocks` blocks of
    // `16·groups` bytes (checked above). The first row's pass also sums every column's
    // weights (a vector of ones for activations), for `bias − zero · Σ w`.
    let mut offsets = std::vec![0i32; n];
    let flip = if signed { 0x80 } else { 0 };
    let mut row = std::vec![0u8; k];
    for r in 0..m {
        for (slot, &v) in row.iter_mut().zip(&bytes[r * k..(r + 1) * k]) {
            *slot = v ^ flip;
        }
        let four = |g: usize| {
            // SAFETY: activations 4g..4g + 4 lie within the row of k.
            let v = unsafe { row.as_ptr().add(4 * g).cast::<i32>().read_unaligned() };
            _mm256_set1_epi32(v)
        };
        for c in (0..blocks).step_by(8) {
            let columns = 4 * c..n;
            let sums = if r == 0 {
                // SAFETY: see `thirty_two_columns` above.
                let (sums, weights) =
                    unsafe { thirty_two_columns::<true>(b, [groups, blocks], c, four) };
                for ((col, offset), sum) in columns.clone().zip(&mut offsets[4 * c..]).zip(weights)
                {
                    *offset = bias[col].wrapping_sub(zero.wrapping_mul(sum));
                }
                sums
            } else {
                // SAFETY: see `thirty_two_columns` above.
                unsafe { thirty_two_columns::<false>(b, [groups, blocks], c, four).0 }
            };
            for (col, sum) in columns.zip(sums) {
                let rescaler = Requantizer::of_channel(requant, col, q);
                let value = rescaler.apply(sum.wrapping_add(offsets[col]));
                y[r * n + col] = Y::narrow(value);
            }
        }
    }
    true
}

/// Columns `4c..4c + 32` of blocked QGemm weights summed over every group of four
/// activations (`four(g)`: group g's, broadcast), and with `WEIGHT_SUMS` each column's `Σ w`: four independent chains of `vpdpbusd` (one
/// would wait on its latency) sharing each broadcast. Two blocks per vector, block `c` in
/// lanes 0–3 and `c + 1` in 4–7; blocks past the last read the last again (their lanes are
/// the caller's to drop).
///
/// # Safety
/// The CPU has AVX-512VL and VNNI; `b` holds `blocks ≥ 1` blocks of `16·groups` bytes.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
unsafe fn thirty_two_columns<const WEIGHT_SUMS: bool>(
    b: &[i8],
    [groups, blocks]: [usize; 2],
    c: usize,
    four: impl Fn(usize) -> __m256i,
) -> ([i32; 32], [i32; 32]) {
    let weights = |c: usize, g: usize| {
        let (first, second) = (c.min(blocks - 1), (c + 1).min(blocks - 1));
        // SAFETY: block `c` starts at `16·groups·c` and holds `16·groups` bytes, within `b`.
        unsafe {
            _mm256_set_m128i(
                _mm_loadu_si128(b.as_ptr().add(16 * (groups * second + g)).cast()),
                _mm_loadu_si128(b.as_ptr().add(16 * (groups * first + g)).cast()),
            )
        }
    };
    let ones = _mm256_set1_epi8(1);
    let mut acc = [_mm256_setzero_si256(); 4];
    let mut sums = [_mm256_setzero_si256(); 4];
    for g in 0..groups {
        let x = four(g);
        for (j, (acc, sum)) in acc.iter_mut().zip(&mut sums).enumerate() {
            let w = weights(c + 2 * j, g);
            *acc = _mm256_dpbusd_epi32(*acc, x, w);
            if WEIGHT_SUMS {
                *sum = _mm256_dpbusd_epi32(*sum, ones, w);
            }
        }
    }
    let mut out = ([0i32; 32], [0i32; 32]);
    for (j, (acc, sum)) in acc.iter().zip(&sums).enumerate() {
        // SAFETY: each array holds 32 int32s.
        unsafe {
            _mm256_storeu_si256(out.0.as_mut_ptr().add(8 * j).cast(), *acc);
            _mm256_storeu_si256(out.1.as_mut_ptr().add(8 * j).cast(), *sum);
        }
    }
    out
}

/// Whether a QGemm's weights are in the blocked layout [`qgemm_blocked`] reads.
pub(super) fn blocked(layout: QGemmWeights) -> bool {
    matches!(layout, QGemmWeights::Blocked)
}
