//! 3 × 3 depthwise convolutions with eight channels across a vector's lanes (x86-64 with
//! AVX2, `std`).
//!
//! The plane-by-plane depthwise kernels of [`super::conv`] pay a fixed cost per channel and
//! per output row (copies, masks, row setup) that small planes never earn back: MobileNet's
//! 6 × 6 layers (128 channels of 36 outputs) took 4.1 µs, DS-CNN's 25 × 5 ones 5.2 µs. Here
//! eight channels at a time are turned (8 × 8 in registers) into a zero-padded channels-last
//! plane, each output pixel's nine taps are then eight-lane vectors read in place (no masks,
//! no row setup; every pixel's chain of adds independent of the others'), and the outputs are
//! turned back into the channels' planes. Each output is the bias plus the nine taps'
//! products in order, padding read as zeros, each product and each sum rounded as the other
//! kernels do (a multiply, then an add), so the results are bit for bit theirs.

use core::arch::x86_64::*;
use core::cell::RefCell;
use ferrite_hal::op::Window;
use std::vec::Vec;

use super::conv::ConvDims;
use super::conv_lanes::avx2::transpose;
use super::elementwise::avx2::{relu_lanes, ClipBounds};
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
/// are stored (the caller need not; see `conv_lanes::fuses`). `constant` weights are packed
/// once per prepared step.
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    win: &Window,
    d: ConvDims,
    x: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    activation: Activation,
    out: &mut [f32],
    constant: bool,
) -> bool {
    let [sh, sw] = win.stride;
    let shape = win.kernel == [3, 3]
        && win.dilation == [1, 1]
        && sh == sw
        && (sh == 1 || sh == 2)
        && d.c == d.oc
        && d.c.is_multiple_of(LANES);
    if !shape || super::simd::level() < super::simd::Level::Avx2 {
        return false;
    }
    // Sixteen channels a vector where the AVX-512 build runs and they divide the channels.
    let lanes = if super::simd::level() >= super::simd::Level::Avx512 && d.c.is_multiple_of(16) {
        16
    } else {
        LANES
    };
    // The padded plane: every tap of every output inside (rows 0..(oh − 1)·s + 3, input row
    // r − pt; likewise the columns), input pixels past it never read.
    let sizes = (|| {
        let rows = (d.oh.checked_sub(1)?).checked_mul(sh)?.checked_add(3)?;
        let cols = (d.ow.checked_sub(1)?).checked_mul(sw)?.checked_add(3)?;
        let padded = rows.checked_mul(cols)?.checked_mul(lanes)?;
        let plane = d.oh.checked_mul(d.ow).filter(|&p| p <= MOST_PIXELS)?;
        let fits = x.len() >= d.c.checked_mul(d.h.checked_mul(d.w)?)?
            && out.len() >= d.c.checked_mul(plane)?
            && weight.len() >= d.c.checked_mul(9)?
            && bias.is_none_or(|b| b.len() >= d.c)
            && padded <= 1 << 20;
        fits.then_some((rows, cols, padded, plane))
    })();
    let Some((rows, cols, padded_len, plane)) = sizes else {
        return false;
    };
    let [mut padded, mut sums, mut fresh] = PLANES.take();
    padded.clear();
    padded.resize(padded_len, 0.0);
    sums.clear();
    sums.resize(plane.next_multiple_of(LANES) * lanes, 0.0);
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
        crate::memo::take(key, || {
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
        crate::memo::keep(kept);
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
    let inputs: [*const f32; LANES] = core::array::from_fn(|c| x.as_ptr().add((c0 + c) * hw));
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
            _mm256_storeu_ps(sums.as_mut_ptr().add(at), value);
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
    use super::conv_lanes::{avx512, Finish};
    const WIDE: usize = 16;
    let d = g.d;
    let (hw, plane) = (d.h * d.w, d.oh * d.ow);
    let c0 = group * WIDE;
    let inputs: [*const f32; WIDE] = core::array::from_fn(|c| x.as_ptr().add((c0 + c) * hw));
    let mut place = g.places(WIDE);
    let mut p = 0;
    while p + LANES <= hw {
        // Each half of the channels turned into pixels, the halves joined.
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
    let w: [__m512; 9] =
        core::array::from_fn(|t| _mm512_loadu_ps(taps.as_ptr().add((group * 9 + t) * WIDE)));
    let b = match bias {
        Some(b) => _mm512_loadu_ps(b.as_ptr().add(c0)),
        None => _mm512_setzero_ps(),
    };
    let finish = Finish::of(g.activation);
    let s = g.stride;
    let row_step = g.cols * WIDE;
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
            _mm512_storeu_ps(sums.as_mut_ptr().add(at), avx512::finish(finish, sum));
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
