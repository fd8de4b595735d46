//! 3 × 3 convolutions at stride 1 between channel-blocked tensors by Winograd's minimal
//! filtering F(2 × 2, 3 × 3) (x86-64 with AVX2 or AVX-512, `std`).
//!
//! A direct 3 × 3 layer spends 36 multiply-adds per input channel on each 2 × 2 block of
//! outputs; Winograd's transform (Lavin and Gray, "Fast Algorithms for Convolutional Neural
//! Networks", 2016) spends 16. Each 4 × 4 input tile `d` (the padded input at twice the tile's
//! place) becomes `V = Bᵀ d B` and each 3 × 3 kernel `g` becomes `U = G g Gᵀ` (once per
//! prepared step); then at each of the 16 positions the tiles' `V` times the kernels' `U`
//! summed over the input channels is a matrix product (`M = V · U`, output channels across the
//! lanes, as [`super::conv_lanes`]'s tiles), and `Aᵀ M A` is the 2 × 2 outputs. The
//! transforms are additions only (and halves in `G`), done with the input channels across
//! the lanes, which is where a blocked tensor keeps them: a pixel's vector is a block's
//! channels, so nothing is turned.
//!
//! The sums are the same terms grouped differently, so the outputs differ from the direct
//! kernels' by a few roundings (about 1e-6 of the layer's largest terms; the conformance
//! suites hold every device to its stated tolerance against onnxruntime), not bit for bit:
//! [`crate::CpuDevice::with_winograd`] (or `FERRITE_CPU_WINOGRAD=off`) turns it off where a
//! run must equal the planar layout's exactly. onnxruntime's MLAS runs these layers directly.

use super::conv::{split_phases, ConvDims};
use super::conv_lanes::{block_vectors, Isa, Residual};
use super::depthwise_lanes::Lanes;
use crate::memo;
use core::arch::x86_64::*;
use ferrite_hal::op::Window;
use ferrite_hal::Activation;
use std::vec::Vec;

/// Positions of a transformed 4 × 4 tile.
const POSITIONS: usize = 16;

/// Tiles a pass transforms, multiplies and stores together: the rows of the products'
/// register tile (eight with AVX-512, six with AVX2, as [`Isa::pixels`]).
const MOST_TILES: usize = 8;

/// The widest block of output channels, in vectors ([`block_vectors`]'s).
const MOST_VECTORS: usize = 3;

/// Whether [`run`] takes a convolution of `win` and dimensions `d` whose input and output
/// are both channel-blocked: one image, one group (the caller's), 3 × 3, stride 1,
/// undilated, an output plane of at least 2 × 2 (a tile's four outputs), and whole blocks of
/// channels on both sides.
pub(super) fn takes(win: &Window, d: ConvDims, lanes: usize) -> bool {
    let whole = |channels: usize| channels >= lanes && channels.is_multiple_of(lanes);
    win.kernel == [3, 3]
        && win.stride == [1, 1]
        && win.dilation == [1, 1]
        && d.n == 1
        && d.oh >= 2
        && d.ow >= 2
        && whole(d.c)
        && whole(d.oc)
}

/// The transformed kernels `U = G g Gᵀ` of every output and input channel, packed per block
/// of output channels as `[position][input channel][lanes · V]` from a 64-byte boundary.
struct Packed {
    /// The packed values, from `offset` on.
    values: Vec<f32>,
    /// Where the first block starts in `values`.
    offset: usize,
    /// Each block: first output channel, vectors, start in the packed values.
    blocks: Vec<(usize, usize, usize)>,
    /// The bias of every output channel (zeros without one).
    bias: Vec<f32>,
}

/// What a step keeps: its packed kernels and its reused buffers.
struct State {
    packed: Packed,
    /// The zero-padded blocked input.
    padded: Vec<f32>,
    /// A pass's transformed tiles, `[position][tile][input channel]`.
    transformed: Vec<f32>,
    /// A pass's products for one block of output channels, `[position][tile][vector]`.
    products: Vec<f32>,
}

/// What the kept state was built from: the weights' and bias's addresses and lengths, the
/// channels, the lanes.
#[derive(PartialEq)]
struct Key {
    weights: (usize, usize),
    bias: Option<(usize, usize)>,
    channels: [usize; 2],
    lanes: usize,
}

/// `G g Gᵀ` for one 3 × 3 kernel `g` (row-major), in double precision, rounded once:
/// `G = [[1, 0, 0], [½, ½, ½], [½, −½, ½], [0, 0, 1]]`.
fn transformed_kernel(g: &[f32]) -> [f32; POSITIONS] {
    let rows_of = |v: [f64; 3]| {
        [
            v[0],
            (v[0] + v[1] + v[2]) / 2.0,
            (v[0] - v[1] + v[2]) / 2.0,
            v[2],
        ]
    };
    let at = |i: usize| f64::from(g.get(i).copied().unwrap_or(0.0));
    // G g: each of g's columns transformed (4 × 3), then each row of that (4 × 4).
    let columns: [[f64; 4]; 3] = core::array::from_fn(|c| rows_of([at(c), at(3 + c), at(6 + c)]));
    let mut u = [0.0f32; POSITIONS];
    for r in 0..4 {
        let row = rows_of([columns[0][r], columns[1][r], columns[2][r]]);
        for (c, value) in row.into_iter().enumerate() {
            u[r * 4 + c] = value as f32;
        }
    }
    u
}

impl Packed {
    /// `weights` (`[oc][c][3][3]`) transformed and packed for `isa`; `bias` kept as lanes.
    fn new(weights: &[f32], bias: Option<&[f32]>, [c, oc]: [usize; 2], isa: Isa) -> Packed {
        let lanes = isa.lanes();
        let widths: Vec<usize> = block_vectors(oc, isa).collect();
        let total = POSITIONS * c * oc;
        let mut values = std::vec![0.0f32; total + 16];
        let offset = values.as_ptr().align_offset(64).min(15);
        let mut blocks = Vec::with_capacity(widths.len());
        let (mut first, mut at) = (0, 0);
        for &v in &widths {
            let width = lanes * v;
            blocks.push((first, v, at));
            for o in 0..width.min(oc - first) {
                for i in 0..c {
                    let start = ((first + o) * c + i) * 9;
                    let u = transformed_kernel(weights.get(start..start + 9).unwrap_or(&[]));
                    for (pos, value) in u.into_iter().enumerate() {
                        values[offset + at + (pos * c + i) * width + o] = value;
                    }
                }
            }
            first += width;
            at += POSITIONS * c * width;
        }
        let mut lanes_bias = std::vec![0.0f32; oc];
        if let Some(b) = bias {
            lanes_bias
                .iter_mut()
                .zip(b)
                .for_each(|(slot, &b)| *slot = b);
        }
        Packed {
            values,
            offset,
            blocks,
            bias: lanes_bias,
        }
    }
}

/// A 3 × 3 stride-1 convolution (see [`takes`]) from the blocked input `x` to the blocked
/// `out`, the bias added, then `residual` (a fused Add), then the activation where
/// `conv_lanes::fuses` says: true, or false with nothing written where this CPU has no AVX2,
/// [`takes`] declines or an operand is shorter than the geometry needs. `constant` weights
/// are transformed once per prepared step.
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    win: &Window,
    d: ConvDims,
    x: &[f32],
    (weight, bias): (&[f32], Option<&[f32]>),
    activation: Activation,
    out: &mut [f32],
    constant: bool,
    residual: Residual<'_>,
) -> bool {
    let Some(isa) = Isa::here() else {
        return false;
    };
    let lanes = isa.lanes();
    if !takes(win, d, lanes) {
        return false;
    }
    let (tiles_high, tiles_wide) = (d.oh.div_ceil(2), d.ow.div_ceil(2));
    // Sizes checked without overflow: a verified plan can still hold absurd geometry.
    let sizes = (|| {
        let rows = tiles_high.checked_mul(2)?.checked_add(2)?;
        let cols = tiles_wide.checked_mul(2)?.checked_add(2)?;
        let padded = d.c.checked_mul(rows)?.checked_mul(cols)?;
        let plane = d.oh.checked_mul(d.ow)?;
        let fits = x.len() >= d.c.checked_mul(d.h)?.checked_mul(d.w)?
            && out.len() >= d.oc.checked_mul(plane)?
            && weight.len() >= d.oc.checked_mul(d.c)?.checked_mul(9)?
            && bias.is_none_or(|b| b.len() >= d.oc)
            && padded <= 1 << 26
            && d.c.checked_mul(POSITIONS * MOST_TILES)? <= 1 << 26
            && d.h > 0
            && d.w.checked_mul(lanes)? > 0
            && win.pads[1].checked_mul(lanes).is_some();
        fits.then_some((rows, cols, padded, plane))
    })();
    let Some((rows, cols, padded_len, plane)) = sizes else {
        return false;
    };
    let residual = match residual {
        Residual::None => None,
        Residual::Output => Some(None),
        Residual::Tensor(r) if r.len() >= d.oc * plane => Some(Some(r.as_ptr())),
        Residual::Tensor(_) => return false,
    };
    let key = Key {
        weights: (weight.as_ptr() as usize, weight.len()),
        bias: bias.map(|b| (b.as_ptr() as usize, b.len())),
        channels: [d.c, d.oc],
        lanes,
    };
    let build = || State {
        packed: Packed::new(weight, bias, [d.c, d.oc], isa),
        padded: Vec::new(),
        transformed: Vec::new(),
        products: Vec::new(),
    };
    let mut kept = memo::take(key, build);
    let state = kept.state();
    if !constant {
        state.packed = Packed::new(weight, bias, [d.c, d.oc], isa);
    }
    // The input zero-padded around each block's plane, every tile's 4 × 4 window inside: a
    // planar copy of `c / lanes` channels whose pixels are `lanes` floats wide.
    state.padded.resize(padded_len, 0.0);
    let unit = Window {
        pads: [win.pads[0], win.pads[1] * lanes, 0, 0],
        ..*win
    };
    let planar = ConvDims {
        c: d.c / lanes,
        w: d.w * lanes,
        ..d
    };
    split_phases(
        &mut state.padded,
        x,
        planar,
        d.c / lanes,
        &unit,
        [rows, cols * lanes],
    );
    state
        .transformed
        .resize(POSITIONS * MOST_TILES * d.c + 16, 0.0);
    state
        .products
        .resize(POSITIONS * MOST_TILES * MOST_VECTORS * lanes, 0.0);
    let out_at = out.as_mut_ptr();
    let job = Job {
        d,
        tiles: [tiles_high, tiles_wide],
        cols,
        rows,
        out: out_at,
        // The output's own values where the Add was written in place of its other operand.
        residual: residual.map(|r| r.unwrap_or(out_at.cast_const())),
        activation,
    };
    // SAFETY: the sizes above hold every read and write the passes make (see `Job`); the
    // instructions are this CPU's (`Isa::here`).
    #[allow(unsafe_code)]
    unsafe {
        match isa {
            Isa::Avx512 => passes_avx512(&job, state),
            Isa::Avx2 => passes_avx2(&job, state),
        }
    }
    memo::keep(kept);
    true
}

/// One convolution as [`run`] checked it: the padded plane's rows and columns (pixels) hold
/// every tile's window, the output (and a residual) every channel's plane.
struct Job {
    d: ConvDims,
    /// Tiles down and across.
    tiles: [usize; 2],
    rows: usize,
    cols: usize,
    out: *mut f32,
    residual: Option<*const f32>,
    activation: Activation,
}

/// [`passes`] with AVX-512: eight tiles a pass.
///
/// # Safety
/// AVX-512F, AVX2 and FMA; `job` and `state` as [`run`] made them.
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(unsafe_code)]
unsafe fn passes_avx512(job: &Job, state: &mut State) {
    passes::<__m512, 8>(job, state)
}

/// [`passes`] with AVX2: six tiles a pass.
///
/// # Safety
/// AVX2 and FMA; `job` and `state` as [`run`] made them.
#[target_feature(enable = "avx2,fma")]
#[allow(unsafe_code)]
unsafe fn passes_avx2(job: &Job, state: &mut State) {
    passes::<__m256, 6>(job, state)
}

/// Every tile, `P` at a time: their windows transformed, then per block of output channels
/// the products at each position and the outputs transformed back and stored.
///
/// # Safety
/// The instruction set of `L`; `job` and `state` as [`run`] made them.
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn passes<L: Lanes, const P: usize>(job: &Job, state: &mut State) {
    let [tiles_high, tiles_wide] = job.tiles;
    let tiles = tiles_high * tiles_wide;
    let finish = L::prepare(job.activation);
    let transformed = state.transformed.as_mut_ptr();
    let products = state.products.as_mut_ptr();
    let packed = &state.packed;
    let values = packed.values.as_ptr().add(packed.offset);
    let mut first_tile = 0;
    while first_tile < tiles {
        let count = (tiles - first_tile).min(P);
        inputs::<L, P>(job, state.padded.as_ptr(), transformed, first_tile, count);
        for &(first, v, at) in &packed.blocks {
            let weights = values.add(at);
            let bias = packed.bias.as_ptr().add(first);
            let block = (first, bias, first_tile, count);
            match v {
                1 => {
                    products_of::<L, 1, P>(weights, transformed, products, job.d.c);
                    outputs::<L, 1, P>(job, products, block, finish);
                }
                2 => {
                    products_of::<L, 2, P>(weights, transformed, products, job.d.c);
                    outputs::<L, 2, P>(job, products, block, finish);
                }
                _ => {
                    products_of::<L, 3, P>(weights, transformed, products, job.d.c);
                    outputs::<L, 3, P>(job, products, block, finish);
                }
            }
        }
        first_tile += count;
    }
}

/// Tiles `first..first + count`'s windows as `Bᵀ d B`, into `transformed[position][tile][c]`,
/// `Bᵀ = [[1, 0, −1, 0], [0, 1, 1, 0], [0, −1, 1, 0], [0, 1, 0, −1]]`, a block of input
/// channels a vector.
///
/// # Safety
/// As [`passes`].
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn inputs<L: Lanes, const P: usize>(
    job: &Job,
    padded: *const f32,
    transformed: *mut f32,
    first: usize,
    count: usize,
) {
    let w = L::WIDTH;
    let c = job.d.c;
    let tiles_wide = job.tiles[1];
    let block_plane = job.rows * job.cols * w;
    for t in 0..count {
        let (ty, tx) = ((first + t) / tiles_wide, (first + t) % tiles_wide);
        let window = padded.add((2 * ty * job.cols + 2 * tx) * w);
        for b in 0..c / w {
            let at = window.add(b * block_plane);
            let d: [[L; 4]; 4] = core::array::from_fn(|r| {
                core::array::from_fn(|k| L::load(at.add((r * job.cols + k) * w)))
            });
            // Bᵀ d: each column's four rows.
            let e: [[L; 4]; 4] = [
                core::array::from_fn(|k| L::sub(d[0][k], d[2][k])),
                core::array::from_fn(|k| L::add(d[1][k], d[2][k])),
                core::array::from_fn(|k| L::sub(d[2][k], d[1][k])),
                core::array::from_fn(|k| L::sub(d[1][k], d[3][k])),
            ];
            // (Bᵀ d) B: each row's four columns.
            for (r, e) in e.iter().enumerate() {
                let row = [
                    L::sub(e[0], e[2]),
                    L::add(e[1], e[2]),
                    L::sub(e[2], e[1]),
                    L::sub(e[1], e[3]),
                ];
                for (k, value) in row.into_iter().enumerate() {
                    let pos = r * 4 + k;
                    L::store(transformed.add((pos * P + t) * c + b * w), value);
                }
            }
        }
    }
}

/// At each position, the `P` tiles' transformed windows times one block's transformed
/// kernels (`weights`: `[position][c][lanes · V]`), summed over the `c` input channels, into
/// `products[position][tile][vector]`. Tiles past a short pass's count multiply stale values
/// whose products are never read.
///
/// # Safety
/// As [`passes`].
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn products_of<L: Lanes, const V: usize, const P: usize>(
    weights: *const f32,
    transformed: *const f32,
    products: *mut f32,
    c: usize,
) {
    let w = L::WIDTH;
    for pos in 0..POSITIONS {
        let mut acc = [[L::zero(); V]; P];
        let kernels = weights.add(pos * c * w * V);
        let tiles = transformed.add(pos * P * c);
        for i in 0..c {
            let u: [L; V] = core::array::from_fn(|j| L::load(kernels.add((i * V + j) * w)));
            for (t, acc) in acc.iter_mut().enumerate() {
                let x = L::splat(*tiles.add(t * c + i));
                for j in 0..V {
                    acc[j] = L::fused(acc[j], x, u[j]);
                }
            }
        }
        for (t, acc) in acc.iter().enumerate() {
            for (j, &sum) in acc.iter().enumerate() {
                L::store(products.add(((pos * P + t) * V + j) * w), sum);
            }
        }
    }
}

/// The pass's tiles' outputs for one block of output channels (`first`, its `bias` lanes):
/// `Aᵀ M A`, `Aᵀ = [[1, 1, 1, 0], [0, 1, −1, −1]]`, plus the bias, plus the residual, the
/// activation applied; outputs past the plane's last row or column dropped.
///
/// # Safety
/// As [`passes`].
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn outputs<L: Lanes, const V: usize, const P: usize>(
    job: &Job,
    products: *const f32,
    (first, bias, first_tile, count): (usize, *const f32, usize, usize),
    finish: L::Finish,
) {
    let w = L::WIDTH;
    let d = job.d;
    let plane = d.oh * d.ow;
    let tiles_wide = job.tiles[1];
    for t in 0..count {
        let (ty, tx) = ((first_tile + t) / tiles_wide, (first_tile + t) % tiles_wide);
        for j in 0..V {
            let m: [L; POSITIONS] =
                core::array::from_fn(|pos| L::load(products.add(((pos * P + t) * V + j) * w)));
            // Aᵀ M: two rows of four.
            let s: [[L; 4]; 2] = [
                core::array::from_fn(|k| L::add(L::add(m[k], m[4 + k]), m[8 + k])),
                core::array::from_fn(|k| L::sub(L::sub(m[4 + k], m[8 + k]), m[12 + k])),
            ];
            let bias = L::load(bias.add(j * w));
            let block = (first / w + j) * plane * w;
            for (dy, s) in s.iter().enumerate() {
                let y = [
                    L::add(L::add(s[0], s[1]), s[2]),
                    L::sub(L::sub(s[1], s[2]), s[3]),
                ];
                let oy = 2 * ty + dy;
                if oy >= d.oh {
                    break;
                }
                for (dx, y) in y.into_iter().enumerate() {
                    let ox = 2 * tx + dx;
                    if ox >= d.ow {
                        break;
                    }
                    let at = block + (oy * d.ow + ox) * w;
                    let mut value = L::add(bias, y);
                    if let Some(residual) = job.residual {
                        value = L::add(value, L::load(residual.add(at)));
                    }
                    L::store(job.out.add(at), L::finish(finish, value));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The transformed kernel of a 3 × 3 kernel, then the transformed window of a 4 × 4
    /// input, multiplied at each position and transformed back, is the direct correlation's
    /// 2 × 2 outputs (within roundings).
    #[test]
    fn one_tile_is_the_direct_correlation() {
        let g: [f32; 9] = [0.5, -1.25, 2.0, 0.75, 3.5, -0.5, 1.0, 0.25, -2.0];
        let d: [f32; 16] = core::array::from_fn(|i| (i as f32 * 0.37).sin());
        let u = transformed_kernel(&g);
        let bt = [
            [1.0, 0.0, -1.0, 0.0],
            [0.0, 1.0, 1.0, 0.0],
            [0.0, -1.0, 1.0, 0.0],
            [0.0, 1.0, 0.0, -1.0f64],
        ];
        let at = [[1.0, 1.0, 1.0, 0.0], [0.0, 1.0, -1.0, -1.0f64]];
        let mut v = [[0.0f64; 4]; 4];
        for r in 0..4 {
            for c in 0..4 {
                for i in 0..4 {
                    for k in 0..4 {
                        v[r][c] += bt[r][i] * f64::from(d[i * 4 + k]) * bt[c][k];
                    }
                }
            }
        }
        for y in 0..2 {
            for x in 0..2 {
                let mut winograd = 0.0f64;
                for r in 0..4 {
                    for c in 0..4 {
                        winograd += at[y][r] * v[r][c] * f64::from(u[r * 4 + c]) * at[x][c];
                    }
                }
                let direct: f64 = (0..9)
                    .map(|t| f64::from(g[t]) * f64::from(d[(y + t / 3) * 4 + x + t % 3]))
                    .sum();
                assert!(
                    (winograd - direct).abs() < 1e-5,
                    "{y},{x}: {winograd} {direct}"
                );
            }
        }
    }
}
