//! Convolutions with the output channels across a vector's lanes (x86-64 with AVX-512, `std`).
//!
//! The in-place product of [`super::conv`] puts output pixels across the lanes: its vectors are
//! input rows read at each tap's offset, mostly unaligned, over a grid as wide as the padded
//! rows (the columns past each output row computed and dropped), and planes narrower than its
//! 32-wide panels fall to 8-wide and scalar tails (ResNet-8's 8 × 8 stage, DS-CNN's 25 × 5).
//! Here the lanes are sixteen output channels instead, as in onnxruntime's channel-blocked
//! kernels: the weights, packed once per prepared step as `[k][16·V]`, are aligned vector
//! loads, each of eight output pixels' input values is broadcast from wherever its tap lies,
//! and the `8 × 16·V` tile is summed in registers over every tap, then turned (eight pixels by
//! sixteen channels, in registers) into eight-pixel rows of each channel's output plane. No
//! column is wasted, any plane width fills the tiles (they run across output rows), and each
//! output is the same sum in the same order as the in-place product's (from zero over the taps,
//! one FMA each, then the bias added), so the results are bit for bit those.

use super::elementwise::avx2::{relu_lanes, ClipBounds};
use crate::memo;
use core::arch::x86_64::*;
use ferrite_hal::Activation;
use std::vec::Vec;

/// Output pixels of a tile.
const PIXELS: usize = 8;

/// Lanes of a vector.
const LANES: usize = 16;

/// The widest block of output channels, in vectors: `8 × 3` accumulators, three weight
/// vectors and the broadcast value take 28 of the 32 registers.
const MAX_VECTORS: usize = 3;

/// A convolution's input as read in place: `input[base(pixel) + taps[k]]` is the `k`-th
/// product term of an output pixel (weights `[channel][k]` in the same order), where
/// `base(oy, ox) = oy · pitch + ox · step`: zero-padded phase planes (step 1), or a pointwise
/// convolution's own input (pitch = the stride's rows, step = its columns, taps = each
/// channel's plane).
pub(super) struct Reading<'a> {
    /// The values the taps read.
    pub input: &'a [f32],
    /// Each product term's offset from its pixel's base.
    pub taps: &'a [usize],
    /// The distance between two output rows' bases.
    pub pitch: usize,
    /// The distance between two output columns' bases.
    pub step: usize,
    /// The output plane's height and width.
    pub plane: [usize; 2],
}

/// The weights of one convolution group packed for [`run`]: per block of output channels,
/// `[k][16·V]` (channels past the last zero), each block 64-byte aligned.
pub(super) struct Packed {
    /// The packed values, from `offset` on.
    values: Vec<f32>,
    /// Where the first block starts in `values` (its 64-byte boundary).
    offset: usize,
    /// Each block: first output channel, vectors, start in the packed values.
    blocks: Vec<(usize, usize, usize)>,
    /// Output channels.
    channels: usize,
    /// Product terms per output.
    k: usize,
}

/// What a group's packed weights were built from: their address and length, the channel
/// count and the terms per output.
#[derive(PartialEq)]
pub(super) struct Key {
    weights: (usize, usize),
    channels: usize,
    k: usize,
}

/// Whether [`run`] applies `activation` as it stores (then the caller need not): Relu and
/// Clip, which give the same result applied twice, so a caller that applies them once more
/// to outputs of several groups or batches, not all of them from here, stays exact.
pub(super) fn fuses(activation: Activation) -> bool {
    matches!(activation, Activation::Relu | Activation::Clip { .. })
}

/// What a store applies to each output vector: the bias's sum, then the activation.
#[derive(Clone, Copy)]
enum Finish {
    /// Nothing more.
    Plain,
    /// `max(x, 0)`.
    Relu,
    /// `min(max(x, lo), hi)`.
    Clip(ClipBounds),
}

/// Whether [`run`] runs on this CPU.
pub(super) fn available() -> bool {
    super::simd::level() >= super::simd::Level::Avx512
}

/// The block widths, in vectors, for `channels` output channels: three vectors at a time while
/// that leaves no narrow remainder, then two, then one (the last possibly partial).
fn block_vectors(channels: usize) -> impl Iterator<Item = usize> {
    let mut left = channels.div_ceil(LANES);
    core::iter::from_fn(move || {
        let v = match left {
            0 => return None,
            // 4 = 2 + 2 and 5 = 3 + 2 rather than a lone vector after three.
            4 => 2,
            n if n >= MAX_VECTORS => MAX_VECTORS,
            n => n,
        };
        left -= v;
        Some(v)
    })
}

/// Whether this kernel beats the in-place product for a group of `channels` outputs of
/// `plane` pixels, `k` terms each (measured on the test models' layers, Zen 4): turning each
/// tile into channel rows costs about what 7 terms of its sums do, so few terms over a wide
/// plane (MobileNet's first pointwise layers: 8 to 32 terms on 576 to 2,304 pixels, ResNet-8's
/// 27-term first layer) stay with the product, whose panels those planes fill; fewer than 16
/// channels would leave lanes empty, and a plane that leaves a tile mostly empty (3 × 3: 9
/// pixels) wastes more than the product's narrow tail does. A `strided` reading in place (a
/// 1 × 1 kernel at stride 2) always pays: the product would first copy the whole input into
/// phase planes (ResNet-8's shortcut layers 7.6 → 4.5 and 6.6 → 3.4 µs).
fn pays(k: usize, channels: usize, plane: usize, strided: bool) -> bool {
    let tile_waste = plane.div_ceil(PIXELS) * PIXELS - plane;
    let fills = tile_waste * PIXELS <= plane;
    k > 0 && channels >= LANES && (strided || ((k >= 48 || plane <= 160) && fills))
}

impl Packed {
    /// `weights` (`[channels][k]`) packed.
    fn new(weights: &[f32], channels: usize, k: usize) -> Self {
        let mut blocks = Vec::new();
        let mut start = 0;
        let mut first = 0;
        for v in block_vectors(channels) {
            blocks.push((first, v, start));
            start += k * LANES * v;
            first += LANES * v;
        }
        let mut values = std::vec![0.0f32; start + LANES];
        let offset = values.as_ptr().align_offset(64).min(LANES - 1);
        for &(first, v, at) in &blocks {
            let width = LANES * v;
            for j in 0..width.min(channels - first) {
                let row = &weights[(first + j) * k..(first + j + 1) * k];
                for (t, &w) in row.iter().enumerate() {
                    values[offset + at + t * width + j] = w;
                }
            }
        }
        Packed {
            values,
            offset,
            blocks,
            channels,
            k,
        }
    }
}

/// One convolution group's output, `out[channel][pixel]`, from its input as `reading` says and
/// its weights `[channels][k]`, plus `bias`, then `activation` where it [`fuses`] it. False, with nothing written, where this CPU has no
/// AVX-512 or an operand is shorter than the geometry needs (the caller runs its own kernels).
/// `constant` weights are packed once per prepared step; others at every call.
pub(super) fn run(
    reading: &Reading<'_>,
    weights: &[f32],
    channels: usize,
    bias: Option<&[f32]>,
    activation: Activation,
    out: &mut [f32],
    constant: bool,
) -> bool {
    let k = reading.taps.len();
    let [oh, ow] = reading.plane;
    let plane = oh * ow;
    if !available() || !pays(k, channels, plane, reading.step > 1) {
        return false;
    }
    let last_base = (oh - 1) * reading.pitch + (ow - 1) * reading.step;
    let furthest = reading.taps.iter().max().map(|t| last_base + t);
    let fits = furthest.is_some_and(|f| f < reading.input.len())
        && weights.len() >= channels * k
        && out.len() >= channels * plane
        && bias.is_none_or(|b| b.len() >= channels)
        && (ow - 1) * reading.step < reading.pitch.max(1);
    if !fits {
        return false;
    }
    let weights = &weights[..channels * k];
    let key = Key {
        weights: (weights.as_ptr() as usize, weights.len()),
        channels,
        k,
    };
    let build = || Packed::new(weights, channels, k);
    let mut kept = if constant {
        Some(memo::take(key, build))
    } else {
        None
    };
    let mut fresh = None;
    let packed = match kept.as_mut() {
        Some(kept) => &*kept.state(),
        None => &*fresh.insert(build()),
    };
    // SAFETY: AVX-512F is present (checked above), and every read and write stays inside the
    // slices: the furthest tap of the last pixel is inside `input`, `out` holds every channel's
    // plane, the packed blocks are as `Packed::new` built them.
    #[allow(unsafe_code)]
    unsafe {
        let finish = match activation {
            Activation::Relu => Finish::Relu,
            Activation::Clip { min, max } => Finish::Clip(ClipBounds::new(min, max)),
            _ => Finish::Plain,
        };
        run_avx512(reading, packed, bias, finish, out)
    };
    if let Some(kept) = kept {
        memo::keep(kept);
    }
    true
}

/// [`run`]'s loops: every block of channels over every tile of eight consecutive pixels.
///
/// # Safety
/// AVX-512F is present; the sizes are as [`run`] checked them.
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(unsafe_code)]
unsafe fn run_avx512(
    reading: &Reading<'_>,
    packed: &Packed,
    bias: Option<&[f32]>,
    finish: Finish,
    out: &mut [f32],
) {
    let [oh, ow] = reading.plane;
    let plane = oh * ow;
    let input = reading.input.as_ptr();
    let values = packed.values.as_ptr().add(packed.offset);
    for &(first, v, at) in &packed.blocks {
        let block = Block {
            weights: values.add(at),
            taps: reading.taps,
            first,
            channels: (packed.channels - first).min(LANES * v),
            plane,
            bias,
            finish,
        };
        let mut p0 = 0;
        // The pixel tiles' bases, walked along the output rows.
        let (mut oy, mut ox) = (0, 0);
        while p0 < plane {
            let count = (plane - p0).min(PIXELS);
            let mut bases = [input; PIXELS];
            let mut last = input;
            for base in bases.iter_mut() {
                if oy < oh {
                    last = input.add(oy * reading.pitch + ox * reading.step);
                    ox += 1;
                    if ox == ow {
                        (oy, ox) = (oy + 1, 0);
                    }
                }
                *base = last;
            }
            let out_at = out.as_mut_ptr().add(p0);
            match v {
                1 => tile::<1>(&block, &bases, out_at, count),
                2 => tile::<2>(&block, &bases, out_at, count),
                _ => tile::<3>(&block, &bases, out_at, count),
            }
            p0 += count;
        }
        debug_assert_eq!(packed.k, reading.taps.len());
    }
}

/// One block of output channels: its packed weights and where its outputs go.
struct Block<'a> {
    /// The block's `[k][16·V]` weights.
    weights: *const f32,
    /// Each product term's offset from a pixel's base.
    taps: &'a [usize],
    /// The block's first output channel.
    first: usize,
    /// Its real channels (the rest of its lanes are padding).
    channels: usize,
    /// An output plane's size.
    plane: usize,
    /// The bias of every channel.
    bias: Option<&'a [f32]>,
    /// What the stores apply.
    finish: Finish,
}

/// One tile: `count` (≤ 8) pixels whose reads start at `bases` (unused ones repeat the last),
/// by the block's channels; written at `out[channel · plane + pixel]` from `out_at`.
///
/// # Safety
/// AVX-512F; the bases plus every tap are inside the input; `out_at` is pixel `p0` of
/// channel 0's plane and the block's channels' planes hold `count` pixels from there.
#[target_feature(enable = "avx512f,avx2,fma")]
#[inline]
#[allow(unsafe_code)]
unsafe fn tile<const V: usize>(
    block: &Block<'_>,
    bases: &[*const f32; PIXELS],
    out_at: *mut f32,
    count: usize,
) {
    let acc = sums::<V>(block, bases);
    // A mask of the tile's pixels, for a partial tile's stores.
    let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(count as i32), lanes);
    #[allow(clippy::needless_range_loop)]
    for j in 0..V {
        let rows = transpose(core::array::from_fn(|i| acc[i][j]));
        for (c, row) in rows.iter().enumerate() {
            let channel = LANES * j + c;
            if channel >= block.channels {
                break;
            }
            let channel = block.first + channel;
            let b = match block.bias {
                Some(b) => *b.get_unchecked(channel),
                None => 0.0,
            };
            let sum = _mm256_add_ps(_mm256_set1_ps(b), *row);
            let value = match block.finish {
                Finish::Plain => sum,
                Finish::Relu => relu_lanes(sum),
                Finish::Clip(bounds) => bounds.apply(sum),
            };
            let at = out_at.add(channel * block.plane);
            if count == PIXELS {
                _mm256_storeu_ps(at, value);
            } else {
                _mm256_maskstore_ps(at, mask, value);
            }
        }
    }
}

/// The tile's sums over every tap: `[pixel][vector]`. Out of line: inlined with the stores,
/// whose loop indexes the sums, LLVM kept them in memory and stored them at every tap.
///
/// # Safety
/// As [`tile`].
#[target_feature(enable = "avx512f")]
#[inline(never)]
#[allow(unsafe_code)]
unsafe fn sums<const V: usize>(
    block: &Block<'_>,
    bases: &[*const f32; PIXELS],
) -> [[__m512; V]; PIXELS] {
    let mut acc = [[_mm512_setzero_ps(); V]; PIXELS];
    let mut w = block.weights;
    let [b0, b1, b2, b3, b4, b5, b6, b7] = *bases;
    for &t in block.taps {
        let wv: [__m512; V] = core::array::from_fn(|j| _mm512_load_ps(w.add(LANES * j)));
        // Spelled out: as loops over the pixels LLVM kept the accumulators in memory.
        macro_rules! pixel {
            ($i:literal, $base:ident) => {
                let x = _mm512_set1_ps(*$base.add(t));
                for j in 0..V {
                    acc[$i][j] = _mm512_fmadd_ps(x, wv[j], acc[$i][j]);
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
fn transpose(a: [__m512; PIXELS]) -> [__m256; LANES] {
    // t: per 128-bit block j, pixels (2m, 2m + 1) of channels 4j..4j+1 (lo) and 4j+2..4j+3 (hi).
    let t: [__m512; PIXELS] = core::array::from_fn(|i| {
        let (x, y) = (a[i & !1], a[i | 1]);
        if i % 2 == 0 {
            _mm512_unpacklo_ps(x, y)
        } else {
            _mm512_unpackhi_ps(x, y)
        }
    });
    // u[h·4 + r]: per block j, channel 4j + r of pixels 4h..4h+3.
    let u: [__m512; PIXELS] = core::array::from_fn(|i| {
        let (h, r) = (i / 4, i % 4);
        let (x, y) = (t[h * 4 + (r / 2)], t[h * 4 + 2 + (r / 2)]);
        if r % 2 == 0 {
            _mm512_shuffle_ps::<0x44>(x, y)
        } else {
            _mm512_shuffle_ps::<0xEE>(x, y)
        }
    });
    let mut rows = [_mm256_setzero_ps(); LANES];
    for r in 0..4 {
        let (lo, hi) = (u[r], u[4 + r]);
        // [lo.b0, hi.b0, lo.b2, hi.b2] and [lo.b1, hi.b1, lo.b3, hi.b3].
        let even = _mm512_shuffle_f32x4::<0xD8>(
            _mm512_shuffle_f32x4::<0x88>(lo, hi),
            _mm512_shuffle_f32x4::<0x88>(lo, hi),
        );
        let odd = _mm512_shuffle_f32x4::<0xD8>(
            _mm512_shuffle_f32x4::<0xDD>(lo, hi),
            _mm512_shuffle_f32x4::<0xDD>(lo, hi),
        );
        rows[r] = _mm512_castps512_ps256(even);
        rows[8 + r] = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(even)));
        rows[4 + r] = _mm512_castps512_ps256(odd);
        rows[12 + r] = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(odd)));
    }
    rows
}
