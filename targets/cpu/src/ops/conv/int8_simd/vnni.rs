//! AVX-512 VNNI for the shared integer geometry ([`super::shared::Isa`]): a block's rows packed four
//! to a 32-bit lane (eight output positions × four rows in one vector) and each channel's four
//! weights summed into it by one `vpdpbusd` — twice the multiply-adds of AVX2's `vpmaddwd` per
//! instruction, and exact: the four products of unsigned by signed bytes and their sum fit
//! int32, and the accumulation wraps as the portable sums do (the non-saturating form).
//! `vpdpbusd` multiplies *unsigned* activations, so int8 inputs are packed as `x + 128` and
//! each channel's base subtracts `128 · Σ w` ([`Isa::input_offset`]). Depthwise taps, padding
//! and requantization are AVX2's.

use super::avx2::{self, Avx2};
use super::shared::{
    depthwise_pass, depthwise_passes, group_blocks, Block, ChannelPass, Channels, DepthwiseInput,
    DepthwiseState, Expansion, Gather, GroupBlocks, Isa, PairedGather, TapPlan,
};
use crate::base::quantized::QuantInt;
use crate::base::requantize::Requantizer;
use core::arch::x86_64::*;

/// The AVX-512 VNNI instruction set (its 256-bit form, with AVX-512VL).
pub(super) struct Vnni;

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
