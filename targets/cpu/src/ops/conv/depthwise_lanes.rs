//! 3 × 3 depthwise convolutions with eight channels across a vector's lanes (x86-64 with
//! AVX2, `std`).
//!
//! The plane-by-plane depthwise kernels of [`crate::ops::conv::reference`] pay a fixed cost per channel and
//! per output row (copies, masks, row setup) that small planes never earn back: MobileNet's
//! 6 × 6 layers (128 channels of 36 outputs) took 4.1 µs, DS-CNN's 25 × 5 ones 5.2 µs. Here
//! eight channels at a time are turned (8 × 8 in registers) into a zero-padded channels-last
//! plane, each output pixel's nine taps are then eight-lane vectors read in place (no masks,
//! no row setup; every pixel's chain of adds independent of the others'), and the outputs are
//! turned back into the channels' planes. Each output is the bias plus the nine taps'
//! products in order, padding read as zeros, each product and each sum rounded as the other
//! kernels do (a multiply, then an add), so the results are bit for bit theirs.

use crate::base::context::StepContext;
use crate::isa::lanes::Lanes;
use core::arch::x86_64::*;
use core::cell::RefCell;
use ferrite_hal::op::Window;
use std::vec::Vec;

use super::tiles_avx2::transpose;
use crate::base::geometry::ConvDims;
use crate::isa::activation_lanes::{relu_lanes, ClipBounds};
use ferrite_hal::Activation;

std::thread_local! {
    /// The reused channels-last planes (the padded input, the outputs) and weights.
    static PLANES: RefCell<[Vec<f32>; 3]> = const { RefCell::new([Vec::new(), Vec::new(), Vec::new()]) };
}

/// Lanes of a vector: channels at a time.
const LANES: usize = 8;

/// Output pixels at most per layer for this kernel: past them the plane-by-plane kernels'
/// per-row costs are small beside their rows (measured on MobileNet's 24 × 24 and 48 × 48
/// layers, where those were as fast or faster).
const MOST_PIXELS: usize = 256;

/// Runs a 3 × 3, stride 1 or 2, undilated depthwise layer with one output per input channel
/// and a channel count that is a multiple of eight, on planes of at most [`MOST_PIXELS`]
/// outputs; false (nothing written) otherwise, where the CPU lacks AVX2, or where an operand
/// is shorter than the sizes say. Relu and Clip (`activation`) are applied as the outputs
/// are stored (the caller need not; see `channel_lanes::fuses`). `constant` weights are packed
/// once per prepared step. With `blocked`, input and output are channel-blocked
/// ([`crate::program::layout`], a block the lanes of this CPU's vectors) and any plane size runs: the
/// input's pixels are already vectors, so nothing is turned either way.
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    ctx: StepContext<'_>,
    win: &Window,
    d: ConvDims,
    x: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    activation: Activation,
    out: &mut [f32],
    constant: bool,
    blocked: bool,
) -> bool {
    let [sh, sw] = win.stride;
    let shape = win.kernel == [3, 3]
        && win.dilation == [1, 1]
        && sh == sw
        && (sh == 1 || sh == 2)
        && d.c == d.oc
        && d.c.is_multiple_of(LANES);
    if !shape || crate::isa::level() < crate::isa::Level::Avx2 {
        return false;
    }
    // Sixteen channels a vector where the AVX-512 build runs and they divide the channels.
    let wide = crate::isa::level() >= crate::isa::Level::Avx512;
    let lanes = if wide && d.c.is_multiple_of(16) {
        16
    } else {
        LANES
    };
    // A blocked layout's block is a whole vector of this CPU's.
    if blocked && lanes != if wide { 16 } else { LANES } {
        return false;
    }
    // The padded plane: every tap of every output inside (rows 0..(oh − 1)·s + 3, input row
    // r − pt; likewise the columns), input pixels past it never read.
    let sizes = (|| {
        let rows = (d.oh.checked_sub(1)?).checked_mul(sh)?.checked_add(3)?;
        let cols = (d.ow.checked_sub(1)?).checked_mul(sw)?.checked_add(3)?;
        let padded = rows.checked_mul(cols)?.checked_mul(lanes)?;
        let plane =
            d.oh.checked_mul(d.ow)
                .filter(|&p| blocked || p <= MOST_PIXELS)?;
        let fits = x.len() >= d.c.checked_mul(d.h.checked_mul(d.w)?)?
            && out.len() >= d.c.checked_mul(plane)?
            && weight.len() >= d.c.checked_mul(9)?
            && bias.is_none_or(|b| b.len() >= d.c)
            && padded <= 1 << 22;
        fits.then_some((rows, cols, padded, plane))
    })();
    let Some((rows, cols, padded_len, plane)) = sizes else {
        return false;
    };
    let [mut padded, mut sums, mut fresh] = PLANES.take();
    // A blocked plane is written whole (`pad_rows`), from a 64-byte boundary; a planar one
    // only inside its padding.
    if !blocked {
        padded.clear();
    }
    padded.resize(padded_len + 16, 0.0);
    sums.clear();
    if !blocked {
        sums.resize(plane.next_multiple_of(LANES) * lanes, 0.0);
    }
    // The weights as `[channel / lanes][tap][channel % lanes]`: each tap's channels a vector,
    // packed once per prepared step where they are the model's constants.
    let weights = &weight[..d.c * 9];
    let pack = |taps: &mut Vec<f32>| {
        taps.clear();
        for channels in weights.chunks_exact(9 * lanes) {
            for t in 0..9 {
                taps.extend(channels.chunks_exact(9).map(|w| w[t]));
            }
        }
    };
    let key = ((weights.as_ptr() as usize, weights.len()), lanes);
    let mut kept = constant.then(|| {
        ctx.take(key, || {
            let mut taps = Vec::new();
            pack(&mut taps);
            PackedTaps(taps)
        })
    });
    let taps = match kept.as_mut() {
        Some(kept) => &kept.state().0,
        None => {
            pack(&mut fresh);
            &fresh
        }
    };
    let geometry = Geometry {
        d,
        stride: sh,
        pads: [win.pads[0], win.pads[1]],
        rows,
        cols,
        activation,
    };
    for group in 0..d.c / lanes {
        // SAFETY: AVX-512F where `lanes` is 16, else AVX2 (checked above); the sizes as
        // checked above.
        #[allow(unsafe_code)]
        if blocked {
            unsafe {
                let start = padded.as_ptr().align_offset(64).min(16);
                let plane = &mut padded[start..start + padded_len];
                match lanes {
                    16 => direct_avx512(&geometry, group, x, taps, bias, plane, out),
                    _ => direct_avx2(&geometry, group, x, taps, bias, plane, out),
                }
            };
            continue;
        }
        #[allow(unsafe_code)]
        if lanes == 16 {
            unsafe {
                channels_avx512(&geometry, group, x, taps, bias, &mut padded, &mut sums, out)
            };
            continue;
        }
        #[allow(unsafe_code)]
        unsafe {
            channels_avx2(&geometry, group, x, taps, bias, &mut padded, &mut sums, out)
        };
    }
    if let Some(kept) = kept {
        ctx.keep(kept);
    }
    PLANES.set([padded, sums, fresh]);
    true
}

/// A layer's weights packed by [`run`], kept with a prepared step.
struct PackedTaps(Vec<f32>);

/// A layer's sizes as [`run`] checked them.
struct Geometry {
    d: ConvDims,
    stride: usize,
    /// Padding above and left of the input.
    pads: [usize; 2],
    /// The padded plane's rows and columns.
    rows: usize,
    cols: usize,
    /// The fused activation.
    activation: Activation,
}

impl Geometry {
    /// Where each input pixel, in order, goes in a padded plane of `lanes` floats a pixel:
    /// pixel p to (p / w + pt, p % w + pl) if inside, row and column counted along (no
    /// division per pixel).
    fn places(&self, lanes: usize) -> impl FnMut() -> Option<usize> + '_ {
        let (mut iy, mut ix) = (0, 0);
        move || {
            let (r, c) = (iy + self.pads[0], ix + self.pads[1]);
            ix += 1;
            if ix == self.d.w {
                (iy, ix) = (iy + 1, 0);
            }
            (r < self.rows && c < self.cols).then_some((r * self.cols + c) * lanes)
        }
    }
}

/// A group of channels of a blocked layer (see [`run`]): at stride 1, its blocked input copied
/// into the zero-padded plane, a vector a pixel, from a 64-byte boundary (so that no vector
/// straddles two cache lines: the arena aligns tensors to 16 bytes), then each output the bias
/// plus the nine taps' products in order (padding read as zeros, as the planar kernels do),
/// written to the blocked output as it is; at stride 2, [`in_place`].
///
/// # Safety
/// The instruction set of `V`; `padded` holds the plane of `V::WIDTH` floats a pixel; the
/// operands as [`run`] checked them, blocked.
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn direct<V: Lanes>(
    g: &Geometry,
    group: usize,
    (x, taps, bias): (&[f32], &[f32], Option<&[f32]>),
    padded: &mut [f32],
    out: &mut [f32],
    finish: V::Finish,
) {
    if g.stride == 2 {
        return in_place::<V>(g, group, (x, taps, bias), out, finish);
    }
    let width = V::WIDTH;
    let d = g.d;
    let (hw, plane) = (d.h * d.w, d.oh * d.ow);
    let c0 = group * width;
    pad_rows::<V>(g, x.as_ptr().add(c0 * hw), padded);
    let dest = out.as_mut_ptr().add(c0 * plane);
    let w: [V; 9] = core::array::from_fn(|t| V::load(taps.as_ptr().add((group * 9 + t) * width)));
    let b = match bias {
        Some(b) => V::load(b.as_ptr().add(c0)),
        None => V::zero(),
    };
    let (row_step, s) = (g.cols * width, g.stride);
    let base = padded.as_ptr();
    let mut p = 0;
    for oy in 0..d.oh {
        let top = base.add(oy * s * row_step);
        for ox in 0..d.ow {
            let first = top.add(ox * s * width);
            let mut sum = b;
            for ky in 0..3 {
                for kx in 0..3 {
                    let v = V::load(first.add(ky * row_step + kx * width));
                    sum = V::add_product(sum, w[ky * 3 + kx], v);
                }
            }
            V::store(dest.add(p * width), V::finish(finish, sum));
            p += 1;
        }
    }
}

/// [`direct`] at stride 2, read in place from the blocked input: each output the bias plus
/// the nine taps' products in order, a tap outside the input a zero vector (the products and
/// sums of a padded plane's zeros), written to the blocked output as it is; a row's outputs
/// whose taps all lie inside run without bounds. At stride 2 a padded copy moves four input
/// pixels an output, which cost more than the unaligned reads it saves (MobileNet's 48 × 48
/// → 24 × 24 layer: 7.9 against 5.9 µs; at stride 1 the copy pays, 6.1 against 7.6 µs on its
/// 24 × 24 layer).
///
/// # Safety
/// The instruction set of `V`; the operands as [`run`] checked them, blocked.
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn in_place<V: Lanes>(
    g: &Geometry,
    group: usize,
    (x, taps, bias): (&[f32], &[f32], Option<&[f32]>),
    out: &mut [f32],
    finish: V::Finish,
) {
    let width = V::WIDTH;
    let d = g.d;
    let (hw, plane) = (d.h * d.w, d.oh * d.ow);
    let c0 = group * width;
    let input = x.as_ptr().add(c0 * hw);
    let dest = out.as_mut_ptr().add(c0 * plane);
    let w: [V; 9] = core::array::from_fn(|t| V::load(taps.as_ptr().add((group * 9 + t) * width)));
    let b = match bias {
        Some(b) => V::load(b.as_ptr().add(c0)),
        None => V::zero(),
    };
    let (s, [pt, pl]) = (g.stride, g.pads);
    let row_step = d.w * width;
    // The output columns whose three taps lie inside the input's columns: lo..hi.
    let lo = pl.div_ceil(s).min(d.ow);
    let hi = (d.w + pl)
        .checked_sub(3)
        .map_or(0, |last| last / s + 1)
        .clamp(lo, d.ow);
    let at = Place {
        input,
        dest,
        weights: w,
        bias: b,
    };
    for oy in 0..d.oh {
        let y0 = (oy * s) as isize - pt as isize;
        let inside = y0 >= 0 && y0 + 2 < d.h as isize;
        if !inside {
            for ox in 0..d.ow {
                edge(g, &at, (oy, ox, y0), finish);
            }
            continue;
        }
        for ox in 0..lo {
            edge(g, &at, (oy, ox, y0), finish);
        }
        let top = input.add(y0 as usize * row_step);
        for ox in lo..hi {
            let first = top.add((ox * s - pl) * width);
            let mut sum = b;
            for ky in 0..3 {
                for kx in 0..3 {
                    let v = V::load(first.add(ky * row_step + kx * width));
                    sum = V::add_product(sum, w[ky * 3 + kx], v);
                }
            }
            V::store(dest.add((oy * d.ow + ox) * width), V::finish(finish, sum));
        }
        for ox in hi..d.ow {
            edge(g, &at, (oy, ox, y0), finish);
        }
    }
}

/// Where a group's [`in_place`] outputs read and go, and its weights and bias.
struct Place<V> {
    input: *const f32,
    dest: *mut f32,
    weights: [V; 9],
    bias: V,
}

/// [`in_place`]'s output at (oy, ox), whose first tap is input row `y0`, its taps' bounds
/// checked. (A function, not a closure: a closure is compiled without its caller's
/// instruction set, and every intrinsic in it had been a call.)
///
/// # Safety
/// As [`in_place`].
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn edge<V: Lanes>(
    g: &Geometry,
    at: &Place<V>,
    (oy, ox, y0): (usize, usize, isize),
    finish: V::Finish,
) {
    let (d, width) = (g.d, V::WIDTH);
    let x0 = (ox * g.stride) as isize - g.pads[1] as isize;
    let mut sum = at.bias;
    for ky in 0..3 {
        for kx in 0..3 {
            let (iy, ix) = (y0 + ky as isize, x0 + kx as isize);
            let v = if iy >= 0 && iy < d.h as isize && ix >= 0 && ix < d.w as isize {
                V::load(at.input.add((iy as usize * d.w + ix as usize) * width))
            } else {
                V::zero()
            };
            sum = V::add_product(sum, at.weights[ky * 3 + kx], v);
        }
    }
    V::store(
        at.dest.add((oy * d.ow + ox) * width),
        V::finish(finish, sum),
    );
}

/// A group's blocked input (`V::WIDTH` floats a pixel, from `block`) into the padded plane:
/// each pixel the plane holds copied, the rest of the plane (the padding) zeroed.
///
/// # Safety
/// `block` holds the group's `h·w` pixels; `padded` the plane (`rows × cols × width`), from
/// a boundary of the vector's size.
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn pad_rows<V: Lanes>(g: &Geometry, block: *const f32, padded: &mut [f32]) {
    let (d, [pt, pl], width) = (g.d, g.pads, V::WIDTH);
    let at = padded.as_mut_ptr();
    let zero = V::zero();
    // Input columns 0..copied land in plane columns pl..pl + copied.
    let copied = d.w.min(g.cols.saturating_sub(pl));
    for r in 0..g.rows {
        let line = at.add(r * g.cols * width);
        let Some(iy) = r.checked_sub(pt).filter(|&iy| iy < d.h) else {
            for c in 0..g.cols {
                V::put(line.add(c * width), zero);
            }
            continue;
        };
        for c in 0..pl.min(g.cols) {
            V::put(line.add(c * width), zero);
        }
        let from = block.add(iy * d.w * width);
        for c in 0..copied {
            V::put(line.add((pl + c) * width), V::load(from.add(c * width)));
        }
        for c in (pl + copied).min(g.cols)..g.cols {
            V::put(line.add(c * width), zero);
        }
    }
}

/// [`direct`] with AVX-512's sixteen lanes.
///
/// # Safety
/// AVX-512F, AVX2 and FMA; as [`direct`].
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(unsafe_code)]
unsafe fn direct_avx512(
    g: &Geometry,
    group: usize,
    x: &[f32],
    taps: &[f32],
    bias: Option<&[f32]>,
    padded: &mut [f32],
    out: &mut [f32],
) {
    direct::<__m512>(
        g,
        group,
        (x, taps, bias),
        padded,
        out,
        __m512::prepare(g.activation),
    )
}

/// [`direct`] with AVX2's eight lanes.
///
/// # Safety
/// AVX2 and FMA; as [`direct`].
#[target_feature(enable = "avx2,fma")]
#[allow(unsafe_code)]
unsafe fn direct_avx2(
    g: &Geometry,
    group: usize,
    x: &[f32],
    taps: &[f32],
    bias: Option<&[f32]>,
    padded: &mut [f32],
    out: &mut [f32],
) {
    direct::<__m256>(
        g,
        group,
        (x, taps, bias),
        padded,
        out,
        __m256::prepare(g.activation),
    )
}

/// Eight channels' planes (from `first`, `h·w` apart) into the padded channels-last plane,
/// eight pixels at a time turned in registers, the last few one by one.
///
/// # Safety
/// AVX2; the channels' planes are readable; `padded` holds the plane (`run`).
#[target_feature(enable = "avx2")]
#[allow(unsafe_code)]
unsafe fn fill_avx2(g: &Geometry, first: *const f32, padded: &mut [f32]) {
    let hw = g.d.h * g.d.w;
    let inputs: [*const f32; LANES] = core::array::from_fn(|c| first.add(c * hw));
    let mut place = g.places(LANES);
    let mut p = 0;
    while p + LANES <= hw {
        let rows = transpose(core::array::from_fn(|c| _mm256_loadu_ps(inputs[c].add(p))));
        for row in rows {
            if let Some(at) = place() {
                _mm256_storeu_ps(padded.as_mut_ptr().add(at), row);
            }
        }
        p += LANES;
    }
    for p in p..hw {
        if let Some(at) = place() {
            for (c, input) in inputs.iter().enumerate() {
                padded[at + c] = *input.add(p);
            }
        }
    }
}

/// [`fill_avx2`] for sixteen channels a pixel: each half of the channels turned into pixels,
/// the halves joined.
///
/// # Safety
/// AVX-512F and AVX2; as [`fill_avx2`], sixteen channels.
#[target_feature(enable = "avx512f,avx2")]
#[allow(unsafe_code)]
unsafe fn fill_avx512(g: &Geometry, first: *const f32, padded: &mut [f32]) {
    const WIDE: usize = 16;
    let hw = g.d.h * g.d.w;
    let inputs: [*const f32; WIDE] = core::array::from_fn(|c| first.add(c * hw));
    let mut place = g.places(WIDE);
    let mut p = 0;
    while p + LANES <= hw {
        let low = transpose(core::array::from_fn(|c| _mm256_loadu_ps(inputs[c].add(p))));
        let high = transpose(core::array::from_fn(|c| {
            _mm256_loadu_ps(inputs[8 + c].add(p))
        }));
        for (lo, hi) in low.into_iter().zip(high) {
            let pixel = _mm512_castpd_ps(_mm512_insertf64x4::<1>(
                _mm512_castpd256_pd512(_mm256_castps_pd(lo)),
                _mm256_castps_pd(hi),
            ));
            if let Some(at) = place() {
                _mm512_storeu_ps(padded.as_mut_ptr().add(at), pixel);
            }
        }
        p += LANES;
    }
    for p in p..hw {
        if let Some(at) = place() {
            for (c, input) in inputs.iter().enumerate() {
                padded[at + c] = *input.add(p);
            }
        }
    }
}

/// Channels `8·group..8·group + 8`: their input into the padded channels-last plane (its
/// padding stays zero from `run`), the outputs into `sums` pixel by pixel, then into `out`.
///
/// # Safety
/// AVX2; `padded` holds `rows × cols × 8` floats, `sums` the plane's pixels rounded up to
/// eight, times eight; `taps` the packed weights; the operands as [`run`] checked them.
#[target_feature(enable = "avx2,fma")]
#[allow(unsafe_code, clippy::too_many_arguments)]
unsafe fn channels_avx2(
    g: &Geometry,
    group: usize,
    x: &[f32],
    taps: &[f32],
    bias: Option<&[f32]>,
    padded: &mut [f32],
    sums: &mut [f32],
    out: &mut [f32],
) {
    let d = g.d;
    let (hw, plane) = (d.h * d.w, d.oh * d.ow);
    let c0 = group * LANES;
    fill_avx2(g, x.as_ptr().add(c0 * hw), padded);
    // The taps' weights, eight channels a vector, and the bias.
    let w: [__m256; 9] =
        core::array::from_fn(|t| _mm256_loadu_ps(taps.as_ptr().add((group * 9 + t) * LANES)));
    let clip = match g.activation {
        Activation::Clip { min, max } => Some(ClipBounds::new(min, max)),
        _ => None,
    };
    let b = match bias {
        Some(b) => _mm256_loadu_ps(b.as_ptr().add(c0)),
        None => _mm256_setzero_ps(),
    };
    let s = g.stride;
    let row_step = g.cols * LANES;
    let dest = sums.as_mut_ptr();
    let mut at = 0;
    for oy in 0..d.oh {
        let top = padded.as_ptr().add(oy * s * row_step);
        for ox in 0..d.ow {
            let first = top.add(ox * s * LANES);
            let mut sum = b;
            for ky in 0..3 {
                for kx in 0..3 {
                    let v = _mm256_loadu_ps(first.add(ky * row_step + kx * LANES));
                    sum = _mm256_add_ps(sum, _mm256_mul_ps(w[ky * 3 + kx], v));
                }
            }
            let value = match (g.activation, clip) {
                (Activation::Relu, _) => relu_lanes(sum),
                (_, Some(bounds)) => bounds.apply(sum),
                _ => sum,
            };
            _mm256_storeu_ps(dest.add(at), value);
            at += LANES;
        }
    }
    // Back to the channels' planes, eight pixels at a time, the last few one by one.
    let outputs: [*mut f32; LANES] =
        core::array::from_fn(|c| out.as_mut_ptr().add((c0 + c) * plane));
    let mut p = 0;
    while p + LANES <= plane {
        let pixels = core::array::from_fn(|i| _mm256_loadu_ps(sums.as_ptr().add((p + i) * LANES)));
        for (c, row) in transpose(pixels).into_iter().enumerate() {
            _mm256_storeu_ps(outputs[c].add(p), row);
        }
        p += LANES;
    }
    for p in p..plane {
        for (c, output) in outputs.iter().enumerate() {
            *output.add(p) = sums[p * LANES + c];
        }
    }
}

/// [`channels_avx2`] for sixteen channels a vector (the AVX-512 build): `8·group` there is
/// `16·group` here, the padded plane and the sums sixteen floats a pixel.
///
/// # Safety
/// AVX-512F, AVX2 and FMA; the buffers as [`channels_avx2`]'s, sixteen floats a pixel.
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(unsafe_code, clippy::too_many_arguments)]
unsafe fn channels_avx512(
    g: &Geometry,
    group: usize,
    x: &[f32],
    taps: &[f32],
    bias: Option<&[f32]>,
    padded: &mut [f32],
    sums: &mut [f32],
    out: &mut [f32],
) {
    use super::tiles_avx512 as avx512;
    use crate::isa::activation_lanes::{finish_512, Finish};
    const WIDE: usize = 16;
    let d = g.d;
    let (hw, plane) = (d.h * d.w, d.oh * d.ow);
    let c0 = group * WIDE;
    fill_avx512(g, x.as_ptr().add(c0 * hw), padded);
    let w: [__m512; 9] =
        core::array::from_fn(|t| _mm512_loadu_ps(taps.as_ptr().add((group * 9 + t) * WIDE)));
    let b = match bias {
        Some(b) => _mm512_loadu_ps(b.as_ptr().add(c0)),
        None => _mm512_setzero_ps(),
    };
    let finish = Finish::of(g.activation);
    let s = g.stride;
    let row_step = g.cols * WIDE;
    let dest = sums.as_mut_ptr();
    let mut at = 0;
    for oy in 0..d.oh {
        let top = padded.as_ptr().add(oy * s * row_step);
        for ox in 0..d.ow {
            let first = top.add(ox * s * WIDE);
            let mut sum = b;
            for ky in 0..3 {
                for kx in 0..3 {
                    let v = _mm512_loadu_ps(first.add(ky * row_step + kx * WIDE));
                    sum = _mm512_add_ps(sum, _mm512_mul_ps(w[ky * 3 + kx], v));
                }
            }
            _mm512_storeu_ps(dest.add(at), finish_512(finish, sum));
            at += WIDE;
        }
    }
    let outputs: [*mut f32; WIDE] =
        core::array::from_fn(|c| out.as_mut_ptr().add((c0 + c) * plane));
    let mut p = 0;
    while p + LANES <= plane {
        let pixels = core::array::from_fn(|i| _mm512_loadu_ps(sums.as_ptr().add((p + i) * WIDE)));
        for (c, row) in avx512::transpose(pixels).into_iter().enumerate() {
            _mm256_storeu_ps(outputs[c].add(p), row);
        }
        p += LANES;
    }
    for p in p..plane {
        for (c, output) in outputs.iter().enumerate() {
            *output.add(p) = sums[p * WIDE + c];
        }
    }
}
