//! The AVX2 tiles: eight channels a block.

#![allow(unsafe_code)]

use super::tiles::{pixel_mask, quadruples, Block, PIXELS};
use crate::isa::activation_lanes::{relu_lanes, ClipBounds, Finish};
use core::arch::x86_64::*;

/// Pixels of a tile.
const TILE: usize = 6;

/// One tile, as [`super::tiles_avx512::tile`] with up to two eight-lane vectors of channels
/// and six pixels (`bases[..6]`); `count` pixels stored.
///
/// # Safety
/// AVX2 and FMA; the rest as [`super::tiles_avx512::tile`].
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn tile<const V: usize>(
    block: &Block<'_>,
    bases: &[*const f32; PIXELS],
    out_at: *mut f32,
    [count, stored]: [usize; 2],
) {
    // A short tile sums only 1 or 3 pixels where it has no more.
    if block.blocked {
        match count {
            0..=1 => blocked::<V, 1>(block, bases, out_at, count),
            2..=3 => blocked::<V, 3>(block, bases, out_at, count),
            _ => blocked::<V, TILE>(block, bases, out_at, count),
        }
        return;
    }
    let acc = match count {
        0..=1 => sums::<V, 1>(block, bases),
        2..=3 => sums::<V, 3>(block, bases),
        _ => sums::<V, TILE>(block, bases),
    };
    let finish = Finisher::of(block.finish);
    let (count, mask) = (stored, pixel_mask(stored));
    let zero = _mm256_setzero_ps();
    #[allow(clippy::needless_range_loop)]
    for j in 0..V {
        // The bias and the activation before the transpose, as the AVX-512 tiles.
        let bias = _mm256_loadu_ps(block.bias.as_ptr().add(8 * j));
        let rows = transpose(core::array::from_fn(|i| {
            if i >= TILE {
                return zero;
            }
            finish.apply(_mm256_add_ps(bias, acc[i][j]))
        }));
        for (c, row) in rows.iter().enumerate() {
            let c = 8 * j + c;
            if c >= block.channels {
                break;
            }
            block.store(c, *row, out_at, count, mask);
        }
    }
}

/// Pixels of a row run.
pub(super) const RUN: usize = 12;

/// A row run: [`blocked`] for one vector of channels over `RUN` consecutive pixels of
/// one output row at step `STEP`, whose reads all lie at `base + i·STEP + tap` — so every
/// broadcast addresses its value from the one base, where a tile keeps a base per pixel,
/// and twelve chains of multiply-adds are in flight, where six had left the FMA units
/// waiting on their latency (MobileNet's first layer: three input channels, eight output
/// channels). The same sums in the same order as the tiles'.
///
/// # Safety
/// As [`tile`], for the run's pixels; `out_at` is pixel `p0`'s vector of the block.
#[target_feature(enable = "avx2,fma")]
#[inline(never)]
pub(super) unsafe fn row_run<const STEP: usize>(
    block: &Block<'_>,
    base: *const f32,
    out_at: *mut f32,
) {
    let mut acc = [_mm256_setzero_ps(); RUN];
    let mut w = block.weights;
    for &t in block.taps {
        let wv = _mm256_load_ps(w);
        let x = base.add(t);
        // Spelled out, so that the sums stay in registers.
        macro_rules! pixel {
            ($($i:literal)*) => {$(
                acc[$i] = _mm256_fmadd_ps(_mm256_set1_ps(*x.add($i * STEP)), wv, acc[$i]);
            )*};
        }
        pixel!(0 1 2 3 4 5 6 7 8 9 10 11);
        w = w.add(8);
    }
    let finish = Finisher::of(block.finish);
    let bias = _mm256_loadu_ps(block.bias.as_ptr());
    let offset = block.first / 8 * block.plane * 8;
    let at = out_at.add(offset);
    for (i, acc) in acc.iter().enumerate() {
        let mut v = _mm256_add_ps(bias, *acc);
        if !block.residual.is_null() {
            v = _mm256_add_ps(v, _mm256_loadu_ps(block.residual.add(offset + i * 8)));
        }
        _mm256_storeu_ps(at.add(i * 8), finish.apply(v));
    }
}

/// What applies a tile's [`Finish`] to a vector: Relu or Clip, or nothing.
#[derive(Clone, Copy)]
struct Finisher {
    finish: Finish,
    clip: Option<ClipBounds>,
}

impl Finisher {
    /// The finisher of `finish`.
    ///
    /// # Safety
    /// AVX2 and FMA.
    #[inline(always)]
    unsafe fn of(finish: Finish) -> Self {
        let clip = match finish {
            Finish::Clip(lo, hi) => Some(ClipBounds::new(lo, hi)),
            _ => None,
        };
        Finisher { finish, clip }
    }

    /// `v` finished.
    ///
    /// # Safety
    /// AVX2 and FMA.
    #[inline(always)]
    unsafe fn apply(self, v: __m256) -> __m256 {
        match (self.finish, self.clip) {
            (Finish::Relu, _) => relu_lanes(v),
            (_, Some(bounds)) => bounds.apply(v),
            _ => v,
        }
    }
}

/// A tile of a blocked output, as [`super::avx512`]'s `blocked`: the sums and the stores
/// in one function, the sums in registers.
///
/// # Safety
/// As [`tile`]; `out_at` is pixel `p0`'s vector of the first block of channels.
#[target_feature(enable = "avx2,fma")]
#[inline(never)]
unsafe fn blocked<const V: usize, const P: usize>(
    block: &Block<'_>,
    bases: &[*const f32; PIXELS],
    out_at: *mut f32,
    count: usize,
) {
    let acc = accumulate::<V, P>(block, bases);
    let finish = Finisher::of(block.finish);
    for j in 0..V {
        let bias = _mm256_loadu_ps(block.bias.as_ptr().add(8 * j));
        let offset = (block.first / 8 + j) * block.plane * 8;
        let at = out_at.add(offset);
        for (i, acc) in acc.iter().enumerate().take(P) {
            if i >= count {
                break;
            }
            let mut v = _mm256_add_ps(bias, acc[j]);
            if !block.residual.is_null() {
                let r = _mm256_loadu_ps(block.residual.add(offset + i * 8));
                v = _mm256_add_ps(v, r);
            }
            _mm256_storeu_ps(at.add(i * 8), finish.apply(v));
        }
    }
}

/// The tile's sums over every tap for its first `P` pixels, `[pixel][vector]` (out of
/// line, as the AVX-512 one).
///
/// # Safety
/// As [`tile`].
#[target_feature(enable = "avx2,fma")]
#[inline(never)]
unsafe fn sums<const V: usize, const P: usize>(
    block: &Block<'_>,
    bases: &[*const f32; PIXELS],
) -> [[__m256; V]; TILE] {
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
) -> [[__m256; V]; TILE] {
    let mut acc = [[_mm256_setzero_ps(); V]; TILE];
    let mut w = block.weights;
    let [b0, b1, b2, b3, b4, b5, _, _] = *bases;
    for &t in block.taps {
        let wv: [__m256; V] = core::array::from_fn(|j| _mm256_load_ps(w.add(8 * j)));
        macro_rules! pixel {
            ($i:literal, $base:ident) => {
                if $i < P {
                    let x = _mm256_set1_ps(*$base.add(t));
                    for j in 0..V {
                        acc[$i][j] = _mm256_fmadd_ps(x, wv[j], acc[$i][j]);
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
        w = w.add(8 * V);
    }
    acc
}

/// Eight vectors of eight channels (one a pixel) as eight rows of eight pixels (any 8 × 8
/// transpose: also `depthwise_lanes`'s, both ways).
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) fn transpose(a: [__m256; PIXELS]) -> [__m256; PIXELS] {
    let u = quadruples!(
        a,
        __m256,
        _mm256_unpacklo_ps,
        _mm256_unpackhi_ps,
        _mm256_shuffle_ps
    );
    let mut rows = [_mm256_setzero_ps(); PIXELS];
    for r in 0..4 {
        // Channel r: both pixel quadruples' low halves; channel 4 + r: their high halves.
        rows[r] = _mm256_permute2f128_ps::<0x20>(u[r], u[4 + r]);
        rows[4 + r] = _mm256_permute2f128_ps::<0x31>(u[r], u[4 + r]);
    }
    rows
}
