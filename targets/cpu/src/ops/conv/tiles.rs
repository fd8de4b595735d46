//! What the channel-lane tiles of both widths share (x86-64): a block of output channels and
//! where its outputs go, a partial tile's store mask, and the first stages of the pixel-to-
//! channel transposes.

#![allow(unsafe_code)]

use crate::isa::activation_lanes::Finish;
use core::arch::x86_64::*;

/// Output pixels of a tile, at most (the AVX2 tiles use six of them).
pub(super) const PIXELS: usize = 8;

/// One block of output channels: its packed weights and where its outputs go.
pub(super) struct Block<'a> {
    /// The block's `[k][lanes·V]` weights.
    pub(super) weights: *const f32,
    /// Each product term's offset from a pixel's base.
    pub(super) taps: &'a [usize],
    /// The block's first output channel.
    pub(super) first: usize,
    /// Its real channels (the rest of its lanes are padding).
    pub(super) channels: usize,
    /// An output plane's size.
    pub(super) plane: usize,
    /// The bias of each of the block's channels (zero past them).
    pub(super) bias: [f32; 48],
    /// What the tiles apply after the bias.
    pub(super) finish: Finish,
    /// Whether the output is channel-blocked: `out_at` is then pixel `p0`'s vector of the
    /// first block of channels, and the tiles store each pixel's vectors as they are.
    pub(super) blocked: bool,
    /// A blocked output's residual at the tile's `out_at` (null: none), added to each sum
    /// after the bias, before the activation.
    pub(super) residual: *const f32,
}

impl Block<'_> {
    /// Stores `row`, eight pixels of block channel `c`, at `out_at` (pixel `p0` of channel
    /// 0's plane); only the first `count` where `mask` says.
    ///
    /// # Safety
    /// AVX2; the channel's plane holds `count` pixels from there.
    #[target_feature(enable = "avx2")]
    #[inline]
    #[allow(unsafe_code)]
    pub(super) unsafe fn store(
        &self,
        c: usize,
        row: __m256,
        out_at: *mut f32,
        count: usize,
        mask: __m256i,
    ) {
        let at = out_at.add((self.first + c) * self.plane);
        if count == PIXELS {
            _mm256_storeu_ps(at, row);
        } else {
            _mm256_maskstore_ps(at, mask, row);
        }
    }
}

/// A mask of a tile's first `count` pixels, for a partial tile's stores.
#[target_feature(enable = "avx2")]
#[inline]
pub(super) fn pixel_mask(count: usize) -> __m256i {
    let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    _mm256_cmpgt_epi32(_mm256_set1_epi32(count as i32), lanes)
}

/// The first two stages of turning eight vectors (one a pixel) into channel rows, within each
/// 128-bit block: pairs of pixels interleaved, then quadruples, so that `u[h·4 + r]` holds,
/// per block `j`, channel `4j + r` of pixels `4h..4h + 3` (the AVX-512 and AVX2 transposes
/// then put the blocks in place each their own way).
macro_rules! quadruples {
    ($a:expr, $vector:ty, $unpacklo:ident, $unpackhi:ident, $shuffle:ident) => {{
        let a: [$vector; PIXELS] = $a;
        let t: [$vector; PIXELS] = core::array::from_fn(|i| {
            let (x, y) = (a[i & !1], a[i | 1]);
            if i % 2 == 0 {
                $unpacklo(x, y)
            } else {
                $unpackhi(x, y)
            }
        });
        let u: [$vector; PIXELS] = core::array::from_fn(|i| {
            let (h, r) = (i / 4, i % 4);
            let (x, y) = (t[h * 4 + (r / 2)], t[h * 4 + 2 + (r / 2)]);
            if r % 2 == 0 {
                $shuffle::<0x44>(x, y)
            } else {
                $shuffle::<0xEE>(x, y)
            }
        });
        u
    }};
}

pub(super) use quadruples;
