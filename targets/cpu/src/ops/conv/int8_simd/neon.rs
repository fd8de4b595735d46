//! The NEON instruction set for the shared integer geometry ([`super::shared::Isa`]), for the Jetson's
//! CPU fallback: each row's eight 8-bit values widened to int16 and multiplied by a channel's
//! int16 weight into two int32x4 accumulators (`SMLAL`/`SMLAL2` by element: exact, wrapping as
//! the portable sums do); stride-2 taps de-interleaved by `LD2`. Requantization is the scalar
//! [`Requantizer::apply`] per lane. Checked under qemu-user in CI (`scripts/cross-aarch64.sh`);
//! no Arm hardware has timed these kernels.

use super::shared::{
    depthwise_pass, depthwise_passes, group_blocks, Block, ChannelPass, Channels, DepthwiseInput,
    DepthwiseState, Expansion, Gather, GroupBlocks, Isa, TapPlan,
};
use crate::base::quantized::QuantInt;
use crate::base::requantize::Requantizer;
use core::arch::aarch64::*;

/// The NEON instruction set.
pub(super) struct Neon;

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

    const ROWS: usize = 2;

    fn input_offset(_: bool) -> i32 {
        0
    }

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
    unsafe fn pack<const SIGNED: bool>(block: &Block<'_>, units: &mut [[u8; 32]]) {
        let (k, _) = block.rows.extent();
        let xp = block.x.as_ptr().wrapping_add(block.at);
        let gather = block.gather.map(|g| {
            // SAFETY: a gather holds sixteen bytes.
            unsafe { vld1_u8(g.as_ptr()) }
        });
        let row = |i: usize| {
            if i >= k {
                return vdupq_n_s16(0);
            }
            let at = xp.wrapping_add(block.rows.offset(i));
            // SAFETY: every row's eight bytes from `at` (sixteen with a gather) are within `x`
            // (the caller's bound). `TBL` gives zero for the index 0x80.
            let bytes = unsafe {
                match gather {
                    Some(control) => vqtbl1_u8(vld1q_u8(at), control),
                    None => vld1_u8(at),
                }
            };
            widen::<SIGNED>(bytes)
        };
        for (u, unit) in units.iter_mut().enumerate() {
            let out = unit.as_mut_ptr().cast::<i16>();
            // SAFETY: a unit holds 32 bytes: two rows of eight int16s.
            unsafe {
                vst1q_s16(out, row(2 * u));
                vst1q_s16(out.add(8), row(2 * u + 1));
            }
        }
    }

    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn product<const B: usize>(
        ch: &Channels<Neon>,
        units: &[[u8; 32]],
        o: usize,
    ) -> [[i32; 8]; B] {
        let weights: [&[i16]; B] = core::array::from_fn(|j| ch.halves(o + j));
        if weights.iter().any(|w| w.len() < 2 * units.len()) {
            return [[0; 8]; B];
        }
        let mut acc = [[vdupq_n_s32(0); 2]; B];
        for (u, unit) in units.iter().enumerate() {
            let rows = unit.as_ptr().cast::<i16>();
            // SAFETY: a unit holds two rows of eight int16s.
            let (first, second) = unsafe { (vld1q_s16(rows), vld1q_s16(rows.add(8))) };
            for (acc, weights) in acc.iter_mut().zip(&weights) {
                // SAFETY: every channel's weights hold 2·units values (checked above).
                let pair = unsafe {
                    [
                        *weights.get_unchecked(2 * u),
                        *weights.get_unchecked(2 * u + 1),
                    ]
                };
                multiply_add(acc, first, pair[0]);
                multiply_add(acc, second, pair[1]);
            }
        }
        #[allow(clippy::redundant_closure)] // a target-feature function is not an `FnMut`
        acc.map(|a| lanes_of(a))
    }

    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn taps<const SIGNED: bool>(
        plan: &TapPlan<'_>,
        padded: &[u8],
        gather: &Gather,
    ) -> [i32; 8] {
        let base = padded.as_ptr().wrapping_add(gather.start);
        // SAFETY: the control holds sixteen bytes.
        let control = unsafe { vld1_u8(gather.control.as_ptr()) };
        let mut acc = [vdupq_n_s32(0); 2];
        for (weight, offset) in plan.taps() {
            // SAFETY: every tap's sixteen bytes are within `padded` (the caller's bound).
            let bytes = vqtbl1_u8(unsafe { vld1q_u8(base.add(offset)) }, control);
            multiply_add(&mut acc, widen::<SIGNED>(bytes), weight as i16);
        }
        lanes_of(acc)
    }

    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn expand(expansion: &Expansion, plane: &[u8], padded: &mut [u8], flip: u8) {
        let (from, to) = (plane.as_ptr(), padded.as_mut_ptr());
        for chunk in &expansion.chunks {
            // SAFETY: 16 bytes from `chunk.from` are within `plane` and 16 from `chunk.to`
            // within `padded` (the caller's bounds, `Expansion::new`'s chunks). `TBL` gives
            // zero for the out-of-range index 0x80.
            unsafe {
                let source = vld1q_u8(from.add(chunk.from));
                let bytes = vqtbl1q_u8(source, vld1q_u8(chunk.control.as_ptr()));
                let bytes = vorrq_u8(bytes, vld1q_u8(chunk.fill.as_ptr()));
                vst1q_u8(to.add(chunk.to), veorq_u8(bytes, vdupq_n_u8(flip)));
            }
        }
    }

    #[inline(never)]
    #[target_feature(enable = "neon")]
    unsafe fn blocks<const READING: u8, Y: QuantInt>(
        group: &GroupBlocks<'_, Neon>,
        units: &mut Vec<[u8; 32]>,
        unfolded: &mut [u8],
        y: &mut [Y],
    ) {
        group_blocks::<Neon, READING, Y>(group, units, unfolded, y)
    }

    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn passes<const SIGNED: bool>(
        state: &mut DepthwiseState<Neon>,
        input: &DepthwiseInput<'_>,
        y: &mut [u8],
    ) {
        // SAFETY: the caller's bounds; this function has the instruction set's features.
        unsafe { depthwise_passes::<Neon, SIGNED>(state, input, y) }
    }

    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn pass<const SIGNED: bool>(
        padded: &[u8],
        channel: &ChannelPass<'_, Neon>,
        out: &mut [u8],
    ) {
        // SAFETY: the caller's bounds; this function has the instruction set's features.
        unsafe { depthwise_pass::<Neon, SIGNED>(padded, channel, out) }
    }
}
