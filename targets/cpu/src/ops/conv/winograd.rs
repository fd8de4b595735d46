//! 3 × 3 convolutions at stride 1 between channel-blocked tensors by Winograd's minimal
//! filtering F(4 × 4, 3 × 3) (x86-64 with AVX2 or AVX-512, `std`).
//!
//! A direct 3 × 3 layer spends 144 multiply-adds per input channel on each 4 × 4 block of
//! outputs; Winograd's transform (Lavin and Gray, "Fast Algorithms for Convolutional Neural
//! Networks", 2016) spends 36. Each 6 × 6 input tile `d` (the padded input at four times the
//! tile's place) becomes `V = Bᵀ d B` and each 3 × 3 kernel `g` becomes `U = G g Gᵀ` (once per
//! prepared step, in double precision); then at each of the 36 positions the tiles' `V` times
//! the kernels' `U` summed over the input channels is a matrix product (`M = V · U`, output
//! channels across the lanes, as [`crate::ops::conv::channel_lanes`]'s tiles), and `Aᵀ M A` is the 4 × 4
//! outputs. The transforms are additions and small multiples, done with the input channels
//! across the lanes, which is where a blocked tensor keeps them: a pixel's vector is a
//! block's channels, so nothing is turned. The products run at the core's multiply-add peak
//! (measured: ResNet-8's 16-channel 32 × 32 layer), so the fewer products are the time saved.
//!
//! The sums are the same terms grouped differently, so the outputs differ from the direct
//! kernels' by roundings (a few millionths of the layer's largest terms; the conformance
//! suites hold every device to its stated tolerance against onnxruntime), not bit for bit:
//! [`crate::CpuDevice::with_winograd`] (or `FERRITE_CPU_WINOGRAD=off`) turns it off where a
//! run must equal the planar layout's exactly. onnxruntime's MLAS runs these layers directly.

use super::rows::split_phases;
use crate::base::aligned::Aligned;
use crate::base::context::StepContext;
use crate::base::geometry::ConvDims;
use crate::isa::lanes::Lanes;
use crate::ops::conv::channel_lanes::{block_vectors, Isa, Residual};
use core::arch::x86_64::*;
use ferrite_hal::op::Window;
use ferrite_hal::Activation;
use std::vec::Vec;

/// Outputs of a tile, down and across.
const TILE: usize = 4;

/// Inputs of a tile's window, down and across.
const WINDOW: usize = TILE + 2;

/// Positions of a transformed window.
const POSITIONS: usize = WINDOW * WINDOW;

/// Tiles a pass transforms, multiplies and stores together: the rows of the products'
/// register tile (eight with AVX-512, six with AVX2, as [`Isa::pixels`]).
const MOST_TILES: usize = 8;

/// The widest block of output channels, in vectors ([`block_vectors`]'s).
const MOST_VECTORS: usize = 3;

/// Whether [`run`] takes a convolution of `win` and dimensions `d` whose input and output
/// are both channel-blocked: one image, one group (the caller's), 3 × 3, stride 1,
/// undilated, whole blocks of channels on both sides, and a plane whose tiles need at most
/// half the direct kernels' products (36 a tile against 9 an output: not a 2 × 2 or 5 × 5
/// plane, whose tiles would mostly compute outputs past its edge).
pub(super) fn takes(win: &Window, d: ConvDims, lanes: usize) -> bool {
    let whole = |channels: usize| channels >= lanes && channels.is_multiple_of(lanes);
    let tiles = d.oh.div_ceil(TILE).saturating_mul(d.ow.div_ceil(TILE));
    let pays = tiles.saturating_mul(2 * POSITIONS) <= d.oh.saturating_mul(d.ow).saturating_mul(9);
    win.kernel == [3, 3]
        && win.stride == [1, 1]
        && win.dilation == [1, 1]
        && d.n == 1
        && pays
        && whole(d.c)
        && whole(d.oc)
}

/// The transformed kernels `U = G g Gᵀ` of every output and input channel, packed per block
/// of output channels as `[position][input channel][lanes · V]` from a 64-byte boundary.
struct Packed {
    /// The packed values, from a 64-byte boundary.
    values: Aligned,
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
    /// Each part's buffers (one without threads).
    scratch: Vec<Scratch>,
}

/// One part's buffers for its passes.
#[derive(Default)]
struct Scratch {
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

/// `G g Gᵀ` for one 3 × 3 kernel `g` (row-major), in double precision, rounded once: `G`'s
/// rows `[¼, 0, 0]`, `[−⅙, −⅙, −⅙]`, `[−⅙, ⅙, −⅙]`, `[1⁄24, 1⁄12, ⅙]`, `[1⁄24, −1⁄12, ⅙]`,
/// `[0, 0, 1]` (the points 0, ±1, ±2 and ∞).
fn transformed_kernel(g: &[f32]) -> [f32; POSITIONS] {
    let rows_of = |v: [f64; 3]| {
        [
            v[0] / 4.0,
            -(v[0] + v[1] + v[2]) / 6.0,
            -(v[0] - v[1] + v[2]) / 6.0,
            v[0] / 24.0 + v[1] / 12.0 + v[2] / 6.0,
            v[0] / 24.0 - v[1] / 12.0 + v[2] / 6.0,
            v[2],
        ]
    };
    let at = |i: usize| f64::from(g.get(i).copied().unwrap_or(0.0));
    // G g: each of g's columns transformed (6 × 3), then each row of that (6 × 6).
    let columns: [[f64; WINDOW]; 3] =
        core::array::from_fn(|c| rows_of([at(c), at(3 + c), at(6 + c)]));
    let mut u = [0.0f32; POSITIONS];
    for r in 0..WINDOW {
        let row = rows_of([columns[0][r], columns[1][r], columns[2][r]]);
        for (c, value) in row.into_iter().enumerate() {
            u[r * WINDOW + c] = value as f32;
        }
    }
    u
}

impl Packed {
    /// `weights` (`[oc][c][3][3]`) transformed and packed for `isa`; `bias` kept as lanes.
    fn new(weights: &[f32], bias: Option<&[f32]>, [c, oc]: [usize; 2], isa: Isa) -> Packed {
        let lanes = isa.lanes();
        let widths: Vec<usize> = block_vectors(oc, isa).collect();
        let mut aligned = Aligned::zeroed(POSITIONS * c * oc);
        let values = aligned.as_mut_slice();
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
                        values[at + (pos * c + i) * width + o] = value;
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
            values: aligned,
            blocks,
            bias: lanes_bias,
        }
    }
}

/// A 3 × 3 stride-1 convolution (see [`takes`]) from the blocked input `x` to the blocked
/// `out`, the bias added, then `residual` (a fused Add), then the activation where
/// `channel_lanes::fuses` says: true, or false with nothing written where this CPU has no AVX2,
/// [`takes`] declines or an operand is shorter than the geometry needs. `constant` weights
/// are transformed once per prepared step.
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    ctx: StepContext<'_>,
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
    let operands = (x, weight, bias);
    compute(
        ctx, isa, win, d, operands, activation, out, constant, residual,
    )
}

/// [`run`] with `isa`'s vectors.
#[allow(clippy::too_many_arguments)]
fn compute(
    ctx: StepContext<'_>,
    isa: Isa,
    win: &Window,
    d: ConvDims,
    (x, weight, bias): (&[f32], &[f32], Option<&[f32]>),
    activation: Activation,
    out: &mut [f32],
    constant: bool,
    residual: Residual<'_>,
) -> bool {
    let lanes = isa.lanes();
    if !takes(win, d, lanes) {
        return false;
    }
    let (tiles_high, tiles_wide) = (d.oh.div_ceil(TILE), d.ow.div_ceil(TILE));
    // Sizes checked without overflow: a verified plan can still hold absurd geometry.
    let sizes = (|| {
        let rows = tiles_high.checked_mul(TILE)?.checked_add(2)?;
        let cols = tiles_wide.checked_mul(TILE)?.checked_add(2)?;
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
        scratch: Vec::new(),
    };
    let mut kept = ctx.take(key, build);
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
    let parts = parts(ctx.threads(), tiles_high * tiles_wide, d, isa);
    state.scratch.resize_with(parts.len(), Scratch::default);
    for scratch in &mut state.scratch {
        scratch
            .transformed
            .resize(POSITIONS * MOST_TILES * d.c, 0.0);
        scratch
            .products
            .resize(POSITIONS * MOST_TILES * MOST_VECTORS * lanes, 0.0);
    }
    let shared = (&state.packed, &state.padded[..]);
    let run_part = |(tiles, scratch): (core::ops::Range<usize>, &mut Scratch)| {
        // SAFETY: the sizes above hold every read and write the passes make (see `Job`); the
        // instructions are this CPU's (`Isa::here`); parts write disjoint tiles' outputs.
        #[allow(unsafe_code)]
        unsafe {
            match isa {
                Isa::Avx512 => passes_avx512(&job, shared, tiles, scratch),
                Isa::Avx2 => passes_avx2(&job, shared, tiles, scratch),
            }
        }
    };
    let work: Vec<_> = parts.into_iter().zip(state.scratch.iter_mut()).collect();
    ctx.for_each(work, run_part);
    ctx.keep(kept);
    true
}

/// Multiply-adds of the direct layer below which it stays on one thread (as
/// `channel_lanes`'s convolutions).
#[cfg(feature = "threads")]
const PARALLEL_WORK: usize = 1 << 20;

/// The ranges of tiles the layer's parts take, each computed as one thread would (a tile's
/// outputs do not depend on the others of its pass, so the results are the same): one part
/// with one thread or little work, else one a thread, in whole passes.
fn parts(threads: usize, tiles: usize, d: ConvDims, isa: Isa) -> Vec<core::ops::Range<usize>> {
    #[cfg(feature = "threads")]
    {
        let work =
            d.oh.saturating_mul(d.ow)
                .saturating_mul(d.c)
                .saturating_mul(d.oc);
        if threads > 1 && work.saturating_mul(9) >= PARALLEL_WORK {
            return crate::base::parts::ranges(tiles, threads, isa.pixels());
        }
    }
    let _ = (threads, d, isa);
    std::vec![0..tiles]
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

// SAFETY: the parts of a threaded run write disjoint tiles' outputs through `out`, each
// reading the residual only where it writes, and the run waits for all of them.
#[allow(unsafe_code)]
unsafe impl Sync for Job {}

/// [`passes`] with AVX-512: eight tiles a pass.
///
/// # Safety
/// AVX-512F, AVX2 and FMA; the operands as [`run`] made them.
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(unsafe_code)]
unsafe fn passes_avx512(
    job: &Job,
    shared: (&Packed, &[f32]),
    tiles: core::ops::Range<usize>,
    scratch: &mut Scratch,
) {
    passes::<__m512, 8, 4>(job, shared, tiles, scratch)
}

/// [`passes`] with AVX2: six tiles a pass.
///
/// # Safety
/// AVX2 and FMA; the operands as [`run`] made them.
#[target_feature(enable = "avx2,fma")]
#[allow(unsafe_code)]
unsafe fn passes_avx2(
    job: &Job,
    shared: (&Packed, &[f32]),
    tiles: core::ops::Range<usize>,
    scratch: &mut Scratch,
) {
    passes::<__m256, 6, 3>(job, shared, tiles, scratch)
}

/// The tiles of `tiles`, `P` at a time (in `scratch`'s buffers): their windows transformed, then per block of output channels
/// the products at each position (of `H` = `P / 2` tiles where the pass has no more) and the
/// outputs transformed back and stored.
///
/// # Safety
/// The instruction set of `L`; the operands as [`run`] made them.
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn passes<L: Lanes, const P: usize, const H: usize>(
    job: &Job,
    (packed, padded): (&Packed, &[f32]),
    tiles: core::ops::Range<usize>,
    scratch: &mut Scratch,
) {
    let finish = L::prepare(job.activation);
    let transformed = scratch.transformed.as_mut_ptr();
    let products = scratch.products.as_mut_ptr();
    let values = packed.values.as_slice().as_ptr();
    let mut first_tile = tiles.start;
    while first_tile < tiles.end {
        let count = (tiles.end - first_tile).min(P);
        inputs::<L, P>(job, padded.as_ptr(), transformed, first_tile, count);
        for &(first, v, at) in &packed.blocks {
            let weights = values.add(at);
            let bias = packed.bias.as_ptr().add(first);
            let block = (first, bias, first_tile, count);
            let operands = (weights, transformed.cast_const(), products, job.d.c);
            // A short pass (a small plane's few tiles) multiplies only half the rows where
            // it has no more: ResNet-8's 8 × 8 layer is four tiles.
            let short = count <= H;
            match v {
                1 => {
                    match short {
                        true => products_of::<L, 1, P, H>(operands),
                        false => products_of::<L, 1, P, P>(operands),
                    }
                    outputs::<L, 1, P>(job, products, block, finish);
                }
                2 => {
                    match short {
                        true => products_of::<L, 2, P, H>(operands),
                        false => products_of::<L, 2, P, P>(operands),
                    }
                    outputs::<L, 2, P>(job, products, block, finish);
                }
                _ => {
                    match short {
                        true => products_of::<L, 3, P, H>(operands),
                        false => products_of::<L, 3, P, P>(operands),
                    }
                    outputs::<L, 3, P>(job, products, block, finish);
                }
            }
        }
        first_tile += count;
    }
}

/// `Bᵀ x` for one column (or row) `x` of a window: `Bᵀ`'s rows `[4, 0, −5, 0, 1, 0]`,
/// `[0, −4, −4, 1, 1, 0]`, `[0, 4, −4, −1, 1, 0]`, `[0, −2, −1, 2, 1, 0]`,
/// `[0, 2, −1, −2, 1, 0]`, `[0, 4, 0, −5, 0, 1]`, with shared partial sums.
///
/// # Safety
/// The instruction set of `L`.
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn input_line<L: Lanes>(x: [L; WINDOW]) -> [L; WINDOW] {
    let (four, five) = (L::splat(4.0), L::splat(-5.0));
    let minus_four = L::splat(-4.0);
    // x4 − 4·x2 and x3 − 4·x1; x4 − x2 and 2·(x3 − x1).
    let p = L::fused(x[4], minus_four, x[2]);
    let q = L::fused(x[3], minus_four, x[1]);
    let s = L::sub(x[4], x[2]);
    let u = L::sub(x[3], x[1]);
    let t = L::add(u, u);
    [
        L::fused(L::fused(x[4], five, x[2]), four, x[0]),
        L::add(p, q),
        L::sub(p, q),
        L::add(s, t),
        L::sub(s, t),
        L::fused(L::fused(x[5], five, x[3]), four, x[1]),
    ]
}

/// `Aᵀ m` for one column (or row) `m` of a tile's products: `Aᵀ`'s rows
/// `[1, 1, 1, 1, 1, 0]`, `[0, 1, −1, 2, −2, 0]`, `[0, 1, 1, 4, 4, 0]`, `[0, 1, −1, 8, −8, 1]`.
///
/// # Safety
/// The instruction set of `L`.
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn output_line<L: Lanes>(m: [L; WINDOW]) -> [L; TILE] {
    let (a, b) = (L::add(m[1], m[2]), L::sub(m[1], m[2]));
    let (c, d) = (L::add(m[3], m[4]), L::sub(m[3], m[4]));
    [
        L::add(L::add(m[0], a), c),
        L::fused(b, L::splat(2.0), d),
        L::fused(a, L::splat(4.0), c),
        L::add(L::fused(b, L::splat(8.0), d), m[5]),
    ]
}

/// Tiles `first..first + count`'s windows as `Bᵀ d B`, into `transformed[position][tile][c]`,
/// a block of input channels a vector: each row of the window transformed, then each column
/// of those.
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
        let window = padded.add((TILE * ty * job.cols + TILE * tx) * w);
        for b in 0..c / w {
            let at = window.add(b * block_plane);
            // Loops, not `array::from_fn`: a closure is compiled without the caller's
            // instructions, and these were not inlined (a call per vector operation).
            let mut rows = [[L::zero(); WINDOW]; WINDOW];
            for (r, row) in rows.iter_mut().enumerate() {
                let mut line = [L::zero(); WINDOW];
                for (k, value) in line.iter_mut().enumerate() {
                    *value = L::load(at.add((r * job.cols + k) * w));
                }
                *row = input_line(line);
            }
            for k in 0..WINDOW {
                let mut line = [L::zero(); WINDOW];
                for (value, row) in line.iter_mut().zip(&rows) {
                    *value = row[k];
                }
                let column = input_line(line);
                for (r, value) in column.into_iter().enumerate() {
                    let pos = r * WINDOW + k;
                    L::store(transformed.add((pos * P + t) * c + b * w), value);
                }
            }
        }
    }
}

/// At each position, the first `R` of the pass's `P` tiles' transformed windows times one
/// block's transformed kernels (`weights`: `[position][c][lanes · V]`), summed over the `c`
/// input channels, into `products[position][tile][vector]`. Tiles past a short pass's count
/// multiply stale values whose products are never read.
///
/// # Safety
/// As [`passes`]; `R ≤ P`.
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn products_of<L: Lanes, const V: usize, const P: usize, const R: usize>(
    (weights, transformed, products, c): (*const f32, *const f32, *mut f32, usize),
) {
    let w = L::WIDTH;
    for pos in 0..POSITIONS {
        let mut acc = [[L::zero(); V]; R];
        let kernels = weights.add(pos * c * w * V);
        // Each tile's values, a pointer each (indexed by the channel alone: no address
        // arithmetic per broadcast).
        let tiles: [*const f32; R] = core::array::from_fn(|t| transformed.add((pos * P + t) * c));
        for i in 0..c {
            let mut u = [L::zero(); V];
            for (j, u) in u.iter_mut().enumerate() {
                *u = L::load(kernels.add((i * V + j) * w));
            }
            for (acc, tile) in acc.iter_mut().zip(tiles) {
                let x = L::splat(*tile.add(i));
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
/// `Aᵀ M A` (each row of a tile's products transformed, then each column of those), plus the
/// bias, plus the residual, the activation applied; outputs past the plane's last row or
/// column dropped.
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
        let rows = (d.oh - TILE * ty).min(TILE);
        let cols = (d.ow - TILE * tx).min(TILE);
        for j in 0..V {
            // Loops, as in `inputs`.
            let mut lines = [[L::zero(); TILE]; WINDOW];
            for (r, row) in lines.iter_mut().enumerate() {
                let mut line = [L::zero(); WINDOW];
                for (k, value) in line.iter_mut().enumerate() {
                    *value = L::load(products.add((((r * WINDOW + k) * P + t) * V + j) * w));
                }
                *row = output_line(line);
            }
            let bias = L::load(bias.add(j * w));
            let block = (first / w + j) * plane * w;
            for x in 0..cols {
                let mut line = [L::zero(); WINDOW];
                for (value, row) in line.iter_mut().zip(&lines) {
                    *value = row[x];
                }
                let column = output_line(line);
                for (y, value) in column.into_iter().enumerate().take(rows) {
                    let at = block + ((TILE * ty + y) * d.ow + TILE * tx + x) * w;
                    let mut value = L::add(bias, value);
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
    use crate::ops::conv::channel_lanes::tests::{available, Lcg};

    /// `Bᵀ`, `Aᵀ` as the transforms above use them.
    const BT: [[f64; WINDOW]; WINDOW] = [
        [4.0, 0.0, -5.0, 0.0, 1.0, 0.0],
        [0.0, -4.0, -4.0, 1.0, 1.0, 0.0],
        [0.0, 4.0, -4.0, -1.0, 1.0, 0.0],
        [0.0, -2.0, -1.0, 2.0, 1.0, 0.0],
        [0.0, 2.0, -1.0, -2.0, 1.0, 0.0],
        [0.0, 4.0, 0.0, -5.0, 0.0, 1.0],
    ];
    const AT: [[f64; WINDOW]; TILE] = [
        [1.0, 1.0, 1.0, 1.0, 1.0, 0.0],
        [0.0, 1.0, -1.0, 2.0, -2.0, 0.0],
        [0.0, 1.0, 1.0, 4.0, 4.0, 0.0],
        [0.0, 1.0, -1.0, 8.0, -8.0, 1.0],
    ];

    /// The transformed kernel of a 3 × 3 kernel, then the transformed window of a 6 × 6
    /// input, multiplied at each position and transformed back, is the direct correlation's
    /// 4 × 4 outputs (within roundings).
    #[test]
    fn one_tile_is_the_direct_correlation() {
        let g: [f32; 9] = [0.5, -1.25, 2.0, 0.75, 3.5, -0.5, 1.0, 0.25, -2.0];
        let d: [f32; POSITIONS] = core::array::from_fn(|i| (i as f32 * 0.37).sin());
        let u = transformed_kernel(&g);
        let mut v = [[0.0f64; WINDOW]; WINDOW];
        for (r, v) in v.iter_mut().enumerate() {
            for (c, v) in v.iter_mut().enumerate() {
                for i in 0..WINDOW {
                    for k in 0..WINDOW {
                        *v += BT[r][i] * f64::from(d[i * WINDOW + k]) * BT[c][k];
                    }
                }
            }
        }
        for y in 0..TILE {
            for x in 0..TILE {
                let mut winograd = 0.0f64;
                for r in 0..WINDOW {
                    for c in 0..WINDOW {
                        winograd += AT[y][r] * v[r][c] * f64::from(u[r * WINDOW + c]) * AT[x][c];
                    }
                }
                let direct: f64 = (0..9)
                    .map(|t| f64::from(g[t]) * f64::from(d[(y + t / 3) * WINDOW + x + t % 3]))
                    .sum();
                assert!(
                    (winograd - direct).abs() < 1e-5,
                    "{y},{x}: {winograd} {direct}"
                );
            }
        }
    }

    /// Every instruction set this CPU has, over random geometry (planes from 1 × 1 to
    /// 19 × 19, any padding up to 2 a side, one to three blocks of channels each side), with
    /// and without a bias, a residual (another tensor's or the output's own values) and Relu
    /// or Clip: the blocked outputs within 1e-5 of the f64 correlation's scale, and nothing
    /// written where [`takes`] declines.
    #[test]
    fn random_layers_equal_the_direct_correlation() {
        let isas = available();
        let mut rng = Lcg(11);
        let mut ran = 0;
        for case in 0..160 {
            let isa = isas[case % isas.len().max(1)];
            if isas.is_empty() {
                return;
            }
            let lanes = isa.lanes();
            let (c, oc) = (lanes * (1 + rng.below(3)), lanes * (1 + rng.below(3)));
            let (h, w) = (1 + rng.below(19), 1 + rng.below(19));
            let pads: [usize; 4] = core::array::from_fn(|_| rng.below(3));
            let (Some(oh), Some(ow)) = (
                (h + pads[0] + pads[2]).checked_sub(2),
                (w + pads[1] + pads[3]).checked_sub(2),
            ) else {
                continue;
            };
            if oh == 0 || ow == 0 {
                continue;
            }
            let d = ConvDims {
                n: 1,
                c,
                h,
                w,
                oc,
                oh,
                ow,
            };
            let win = Window {
                kernel: [3, 3],
                stride: [1, 1],
                dilation: [1, 1],
                pads,
            };
            let x: Vec<f32> = (0..c * h * w).map(|_| rng.value()).collect();
            let weights: Vec<f32> = (0..oc * c * 9).map(|_| rng.value()).collect();
            let bias: Option<Vec<f32>> =
                (rng.below(2) == 0).then(|| (0..oc).map(|_| rng.value()).collect());
            let plane = oh * ow;
            let other: Vec<f32> = (0..oc * plane).map(|_| rng.value()).collect();
            let (activation, which) = match rng.below(3) {
                0 => (Activation::None, 0),
                1 => (Activation::Relu, 1),
                _ => (
                    Activation::Clip {
                        min: -0.5,
                        max: 1.5,
                    },
                    2,
                ),
            };
            let residual_kind = rng.below(3);
            // Blocked layouts: channel ch of pixel p at [ch / lanes][p][ch % lanes].
            let at =
                |ch: usize, p: usize, plane: usize| (ch / lanes * plane + p) * lanes + ch % lanes;
            let mut want = std::vec![0.0f64; oc * plane];
            let mut scale = 0.0f64;
            for o in 0..oc {
                for oy in 0..oh {
                    for ox in 0..ow {
                        let mut sum = bias.as_ref().map_or(0.0, |b| f64::from(b[o]));
                        let mut size = sum.abs();
                        for i in 0..c {
                            for t in 0..9 {
                                let (y, xx) = (
                                    (oy + t / 3) as isize - pads[0] as isize,
                                    (ox + t % 3) as isize - pads[1] as isize,
                                );
                                if y < 0 || xx < 0 || y >= h as isize || xx >= w as isize {
                                    continue;
                                }
                                let term = f64::from(weights[(o * c + i) * 9 + t])
                                    * f64::from(x[at(i, y as usize * w + xx as usize, h * w)]);
                                sum += term;
                                size += term.abs();
                            }
                        }
                        let p = oy * ow + ox;
                        let slot = at(o, p, plane);
                        if residual_kind > 0 {
                            sum += f64::from(other[slot]);
                        }
                        sum = match which {
                            1 => sum.max(0.0),
                            2 => sum.clamp(-0.5, 1.5),
                            _ => sum,
                        };
                        scale = scale.max(size);
                        want[slot] = sum;
                    }
                }
            }
            let mut out = match residual_kind {
                2 => other.clone(),
                _ => std::vec![f32::NAN; oc * plane],
            };
            let residual = match residual_kind {
                0 => Residual::None,
                1 => Residual::Tensor(&other),
                _ => Residual::Output,
            };
            let operands = (&x[..], &weights[..], bias.as_deref());
            let took = compute(
                StepContext::default(),
                isa,
                &win,
                d,
                operands,
                activation,
                &mut out,
                true,
                residual,
            );
            assert_eq!(took, takes(&win, d, lanes), "case {case}: {d:?} {pads:?}");
            if !took {
                let untouched = match residual_kind {
                    2 => out == other,
                    _ => out.iter().all(|v| v.is_nan()),
                };
                assert!(untouched, "case {case}: written though declined");
                continue;
            }
            ran += 1;
            for (slot, (&got, &want)) in out.iter().zip(&want).enumerate() {
                assert!(
                    (f64::from(got) - want).abs() <= 1e-5 * (1.0 + scale),
                    "case {case} ({isa:?}, {d:?}, pads {pads:?}), slot {slot}: {got} against {want}"
                );
            }
        }
        if !isas.is_empty() {
            assert!(ran >= 40, "{ran} layers ran");
        }
    }

    /// The vector transforms are `Bᵀ` and `Aᵀ` (on lanes of AVX2, where the CPU has it).
    #[test]
    fn line_transforms_are_the_matrices() {
        if !(std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")) {
            return;
        }
        /// Both transforms of one line of eight lanes.
        #[target_feature(enable = "avx2,fma")]
        #[allow(unsafe_code)]
        unsafe fn lines(x: [f32; WINDOW]) -> ([f32; WINDOW], [f32; TILE]) {
            let v: [__m256; WINDOW] = core::array::from_fn(|i| _mm256_set1_ps(x[i]));
            let first = |v: __m256| _mm256_cvtss_f32(v);
            (input_line(v).map(first), output_line(v).map(first))
        }
        let x: [f32; WINDOW] = [0.5, -1.5, 2.25, 3.0, -0.75, 1.25];
        // SAFETY: the CPU has AVX2 and FMA (checked above).
        #[allow(unsafe_code)]
        let (input, output) = unsafe { lines(x) };
        for (r, &got) in input.iter().enumerate() {
            let want: f64 = (0..WINDOW).map(|i| BT[r][i] * f64::from(x[i])).sum();
            assert!(
                (f64::from(got) - want).abs() < 1e-5,
                "Bᵀ row {r}: {got} {want}"
            );
        }
        for (r, &got) in output.iter().enumerate() {
            let want: f64 = (0..WINDOW).map(|i| AT[r][i] * f64::from(x[i])).sum();
            assert!(
                (f64::from(got) - want).abs() < 1e-5,
                "Aᵀ row {r}: {got} {want}"
            );
        }
    }
}
