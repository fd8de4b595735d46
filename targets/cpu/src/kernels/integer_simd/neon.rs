//! The NEON instruction set for the shared integer geometry ([`super::Isa`]), for the Jetson's
//! CPU fallback: each row's eight 8-bit values widened to int16 and multiplied by a channel's
//! int16 weight into two int32x4 accumulators (`SMLAL`/`SMLAL2` by element: exact, wrapping as
//! the portable sums do); stride-2 taps de-interleaved by `LD2`. Requantization is the scalar
//! [`Requantizer::apply`] per lane. Checked under qemu-user in CI (`scripts/cross-aarch64.sh`);
//! no Arm hardware has timed these kernels.

use super::super::conv::ConvDims;
use super::super::integer::Requantizer;
use super::super::quantize::QuantInt;
use super::{depthwise_pass, qconv_with, Block, ChannelPass, Channels, Isa, Operands, TapPlan};
use core::arch::aarch64::*;
use ferrite_hal::op::QConv;

/// The NEON instruction set.
pub(super) struct Neon;

/// The entry point compiled with NEON: the shared geometry and these operations inlined.
///
/// # Safety
/// The CPU has NEON (every aarch64 core does).
#[target_feature(enable = "neon")]
pub(super) unsafe fn qconv<X: QuantInt, Y: QuantInt>(
    c: &QConv,
    d: &ConvDims,
    ops: &Operands<'_>,
    x: &[X],
    y: &mut [Y],
    scratch: &mut [u8],
) -> Option<bool> {
    qconv_with::<Neon, X, Y>(c, d, ops, x, y, scratch)
}

/// Eight bytes widened to int16 lanes, sign- or zero-extended.
#[inline]
#[target_feature(enable = "neon")]
fn widen<const SIGNED: bool>(bytes: uint8x8_t) -> int16x8_t {
    if SIGNED {
        vmovl_s8(vreinterpret_s8_u8(bytes))
    } else {
        vreinterpretq_s16_u16(vmovl_u8(bytes))
    }
}

/// `acc += values · weight`, lanes 0–3 into `acc[0]` and 4–7 into `acc[1]`.
#[inline]
#[target_feature(enable = "neon")]
fn multiply_add(acc: &mut [int32x4_t; 2], values: int16x8_t, weight: i16) {
    acc[0] = vmlal_n_s16(acc[0], vget_low_s16(values), weight);
    acc[1] = vmlal_high_n_s16(acc[1], values, weight);
}

/// The eight int32 lanes of a pair of accumulators.
#[inline]
#[target_feature(enable = "neon")]
fn lanes_of(acc: [int32x4_t; 2]) -> [i32; 8] {
    let mut out = [0i32; 8];
    // SAFETY: `out` holds eight int32s.
    unsafe {
        vst1q_s32(out.as_mut_ptr(), acc[0]);
        vst1q_s32(out.as_mut_ptr().add(4), acc[1]);
    }
    out
}

impl Isa for Neon {
    type Lanes = ();

    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn lanes(_: &Requantizer) {}

    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn requantize(_: &(), scalar: &Requantizer, sums: [i32; 8]) -> [i32; 8] {
        sums.map(|a| scalar.apply(a))
    }

    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn product<const SIGNED: bool, const B: usize>(
        ch: &Channels<Neon>,
        block: &Block<'_>,
        o: usize,
    ) -> [[i32; 8]; B] {
        let (k, _) = block.rows.extent();
        let weights: [&[i16]; B] = core::array::from_fn(|j| ch.halves(o + j));
        if weights.iter().any(|w| w.len() < k) {
            return [[0; 8]; B];
        }
        let mut acc = [[vdupq_n_s32(0); 2]; B];
        let xp = block.x.as_ptr().wrapping_add(block.at);
        for i in 0..k {
            // SAFETY: every row's eight bytes from `at` are within `x` (the caller's bound).
            let values = widen::<SIGNED>(unsafe { vld1_u8(xp.add(block.rows.offset(i))) });
            for (acc, weights) in acc.iter_mut().zip(&weights) {
                // SAFETY: every channel's weights hold k values (checked above).
                multiply_add(acc, values, unsafe { *weights.get_unchecked(i) });
            }
        }
        #[allow(clippy::redundant_closure)] // a target-feature function is not an `FnMut`
        acc.map(|a| lanes_of(a))
    }

    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn taps<const SIGNED: bool, const STEP: usize>(
        plan: &TapPlan<'_>,
        padded: &[u8],
        start: usize,
    ) -> [i32; 8] {
        let [kh, kw] = plan.kernel;
        let base = padded.as_ptr().wrapping_add(start);
        let mut acc = [vdupq_n_s32(0); 2];
        for ky in 0..kh {
            for kx in 0..kw {
                let (weight, offset) = plan.tap(ky, kx);
                // SAFETY: every tap's bytes are within `padded` (the caller's bound).
                let bytes = unsafe {
                    if STEP == 1 {
                        vld1_u8(base.add(offset))
                    } else {
                        vld2_u8(base.add(offset)).0
                    }
                };
                multiply_add(&mut acc, widen::<SIGNED>(bytes), weight as i16);
            }
        }
        lanes_of(acc)
    }

    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn pass<const SIGNED: bool, const STEP: usize>(
        plan: &TapPlan<'_>,
        padded: &[u8],
        channel: &ChannelPass<'_, Neon>,
        out: &mut [i32],
    ) {
        // SAFETY: the caller's bounds; this function has the instruction set's features.
        unsafe { depthwise_pass::<Neon, SIGNED, STEP>(plan, padded, channel, out) }
    }
}
