//! The AVX-512 tiles: sixteen channels a vector, up to three vectors a block.

#![allow(unsafe_code)]

use super::tiles::{pixel_mask, quadruples, Block, PIXELS};
use crate::isa::activation_lanes::finish_512 as finish;
use core::arch::x86_64::*;

/// Lanes of a vector.
const LANES: usize = 16;

/// One tile: `count` (≤ 8) pixels whose reads start at `bases` (unused ones repeat the
/// last), by the block's channels; `stored` pixels (`count`, or eight where the next tile
/// writes the rest) written at `out[channel · plane + pixel]` from `out_at`.
///
/// # Safety
/// AVX-512F, AVX2 and FMA; the bases plus every tap are inside the input; `out_at` is
/// pixel `p0` of channel 0's plane and the block's channels' planes hold `count` pixels
/// from there.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(super) unsafe fn tile<const V: usize>(
    block: &Block<'_>,
    bases: &[*const f32; PIXELS],
    out_at: *mut f32,
    [count, stored]: [usize; 2],
) {
    // A short tile (a plane's last pixels) sums only as many pixels as it has, rounded up
    // to 1, 2 or 4: MobileNet's 3 × 3 planes are a tile of eight and one of one.
    if block.blocked {
        match count {
            0..=1 => blocked::<V, 1>(block, bases, out_at, count),
            2 => blocked::<V, 2>(block, bases, out_at, count),
            3..=4 => blocked::<V, 4>(block, bases, out_at, count),
            _ => blocked::<V, PIXELS>(block, bases, out_at, count),
        }
        return;
    }
    let acc = match count {
        0..=1 => sums::<V, 1>(block, bases),
        2 => sums::<V, 2>(block, bases),
        3..=4 => sums::<V, 4>(block, bases),
        _ => sums::<V, PIXELS>(block, bases),
    };
    let (count, mask) = (stored, pixel_mask(stored));
    #[allow(clippy::needless_range_loop)]
    for j in 0..V {
        // The bias and the activation while a vector is a pixel's channels: one operation
        // a pixel, not one a channel after the transpose (the same values, element by
        // element).
        let bias = _mm512_loadu_ps(block.bias.as_ptr().add(LANES * j));
        let rows = transpose(core::array::from_fn(|i| {
            finish(block.finish, _mm512_add_ps(bias, acc[i][j]))
        }));
        for (c, row) in rows.iter().enumerate() {
            let c = LANES * j + c;
            if c >= block.channels {
                break;
            }
            block.store(c, *row, out_at, count, mask);
        }
    }
}

/// A tile of a blocked output: [`accumulate`]'s sums for its first `P` pixels, then each
/// of its first `count` pixels' vectors plus the bias (plus the residual), the activation
/// applied, stored as they are. One function with the sums, its pixels a constant count,
/// so the sums stay in registers (returned from [`sums`], they went through memory: a
/// tenth of DS-CNN's pointwise layers).
///
/// # Safety
/// As [`tile`]; `out_at` is pixel `p0`'s vector of the first block of channels.
#[target_feature(enable = "avx512f")]
#[inline(never)]
unsafe fn blocked<const V: usize, const P: usize>(
    block: &Block<'_>,
    bases: &[*const f32; PIXELS],
    out_at: *mut f32,
    count: usize,
) {
    let acc = accumulate::<V, P>(block, bases);
    for j in 0..V {
        let bias = _mm512_loadu_ps(block.bias.as_ptr().add(LANES * j));
        let offset = (block.first / LANES + j) * block.plane * LANES;
        let at = out_at.add(offset);
        for (i, acc) in acc.iter().enumerate().take(P) {
            if i >= count {
                break;
            }
            let mut v = _mm512_add_ps(bias, acc[j]);
            if !block.residual.is_null() {
                let r = _mm512_loadu_ps(block.residual.add(offset + i * LANES));
                v = _mm512_add_ps(v, r);
            }
            _mm512_storeu_ps(at.add(i * LANES), finish(block.finish, v));
        }
    }
}

/// The tile's sums over every tap for its first `P` pixels: `[pixel][vector]` (zero
/// past `P`). Out of line: inlined with the planar stores, whose loop indexes the sums,
/// LLVM kept them in memory and stored them at every tap.
///
/// # Safety
/// As [`tile`].
#[target_feature(enable = "avx512f")]
#[inline(never)]
unsafe fn sums<const V: usize, const P: usize>(
    block: &Block<'_>,
    bases: &[*const f32; PIXELS],
) -> [[__m512; V]; PIXELS] {
    accumulate::<V, P>(block, bases)
}

/// [`sums`], inlined where it is called.
///
/// # Safety
/// As [`tile`].
#[inline(always)]
unsafe fn accumulate<const V: usize, const P: usize>(
    block: &Block<'_>,
    bases: &[*const f32; PIXELS],
) -> [[__m512; V]; PIXELS] {
    let mut acc = [[_mm512_setzero_ps(); V]; PIXELS];
    let mut w = block.weights;
    let [b0, b1, b2, b3, b4, b5, b6, b7] = *bases;
    for &t in block.taps {
        let wv: [__m512; V] = core::array::from_fn(|j| _mm512_load_ps(w.add(LANES * j)));
        // Spelled out: as loops over the pixels LLVM kept the accumulators in memory.
        // Pixels past `P` (a constant) are compiled out.
        macro_rules! pixel {
            ($i:literal, $base:ident) => {
                if $i < P {
                    let x = _mm512_set1_ps(*$base.add(t));
                    for j in 0..V {
                        acc[$i][j] = _mm512_fmadd_ps(x, wv[j], acc[$i][j]);
                    }
                }
            };
        }
        pixel!(0, b0);
        pixel!(1, b1);
        pixel!(2, b2);
        pixel!(3, b3);
        pixel!(4, b4);
        pixel!(5, b5);
        pixel!(6, b6);
        pixel!(7, b7);
        w = w.add(LANES * V);
    }
    acc
}

/// Eight vectors of sixteen channels (one a pixel) as sixteen rows of eight pixels (one a
/// channel): pairs interleaved, then quadruples, then the 128-bit blocks put in place.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn transpose(a: [__m512; PIXELS]) -> [__m256; LANES] {
    let u = quadruples!(
        a,
        __m512,
        _mm512_unpacklo_ps,
        _mm512_unpackhi_ps,
        _mm512_shuffle_ps
    );
    let mut rows = [_mm256_setzero_ps(); LANES];
    for r in 0..4 {
        let (lo, hi) = (u[r], u[4 + r]);
        // [lo.b0, hi.b0, lo.b2, hi.b2] and [lo.b1, hi.b1, lo.b3, hi.b3].
        let even = _mm512_shuffle_f32x4::<0x88>(lo, hi);
        let even = _mm512_shuffle_f32x4::<0xD8>(even, even);
        let odd = _mm512_shuffle_f32x4::<0xDD>(lo, hi);
        let odd = _mm512_shuffle_f32x4::<0xD8>(odd, odd);
        let high = |v: __m512| _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
        rows[r] = _mm512_castps512_ps256(even);
        rows[8 + r] = high(even);
        rows[4 + r] = _mm512_castps512_ps256(odd);
        rows[12 + r] = high(odd);
    }
    rows
}
