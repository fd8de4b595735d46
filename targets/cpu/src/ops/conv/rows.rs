//! The row and plane primitives the convolution strategies share: the valid range of a tap
//! along an axis, phase planes of a strided input, a plane's bias, strided and masked
//! multiply-adds and copies, and the operands of a depthwise layer.

use crate::base::geometry::ConvDims;
use ferrite_hal::op::Window;

/// Range of output positions `o` along one axis whose input position `o*stride - pad + tap`
/// lies inside `[0, len)`: returns `(first, end)`.
#[inline]
pub(super) fn valid_range(
    out_len: usize,
    len: usize,
    stride: usize,
    pad: usize,
    tap: usize,
) -> (usize, usize) {
    // o*stride + tap >= pad  and  o*stride + tap < pad + len
    let first = pad.saturating_sub(tap).div_ceil(stride);
    let end = if pad + len > tap {
        (pad + len - tap).div_ceil(stride)
    } else {
        0
    };
    (first.min(out_len), end.min(out_len).max(first.min(out_len)))
}

/// `x`'s `icg` channels copied into `planes`: per channel, `stride_h × stride_w` planes of
/// `hph × wph`, where plane `(a, b)` holds the zero-padded input's pixels `(py·sh + a,
/// px·sw + b)` (zero outside the input).
#[cfg(feature = "std")]
#[inline(always)]
pub(super) fn split_phases(
    planes: &mut [f32],
    x: &[f32],
    d: ConvDims,
    icg: usize,
    win: &Window,
    [hph, wph]: [usize; 2],
) {
    let [sh, sw] = win.stride;
    let (pt, pl) = (win.pads[0], win.pads[1]);
    if [sh, sw] == [1, 1] {
        // One plane a channel: each value written once, the padding zeroed around the rows
        // (a fill of every plane first, then a copy call per row, had been a tenth of
        // ResNet-8's convolutions).
        for (dst, src) in planes
            .chunks_exact_mut(hph * wph)
            .zip(x.chunks_exact(d.h * d.w))
            .take(icg)
        {
            for (py, dst) in dst.chunks_exact_mut(wph).enumerate() {
                let row = py
                    .checked_sub(pt)
                    .filter(|&iy| iy < d.h)
                    .and_then(|iy| src.get(iy * d.w..(iy + 1) * d.w));
                let Some(row) = row else {
                    zero(dst);
                    continue;
                };
                let (left, rest) = dst.split_at_mut(pl.min(wph));
                let n = d.w.min(rest.len());
                let (middle, right) = rest.split_at_mut(n);
                zero(left);
                copy(middle, row);
                zero(right);
            }
        }
        return;
    }
    planes.fill(0.0);
    let channel = sh * sw * hph * wph;
    for (dst, src) in planes
        .chunks_exact_mut(channel)
        .zip(x.chunks_exact(d.h * d.w))
        .take(icg)
    {
        if sw == 2 {
            // Each input row split into its two column phases in one pass over pairs.
            for a in 0..sh {
                for py in 0..hph {
                    let iy = (py * sh + a).checked_sub(pt).filter(|&iy| iy < d.h);
                    let Some(row) = iy.and_then(|iy| src.get(iy * d.w..(iy + 1) * d.w)) else {
                        continue;
                    };
                    let phase = hph * wph;
                    split_pairs(dst, a * sw * phase + py * wph, phase, wph, pl, row);
                }
            }
            continue;
        }
        for (which, plane) in dst.chunks_exact_mut(hph * wph).enumerate() {
            let (a, b) = (which / sw, which % sw);
            // Plane columns px whose input column px·sw + b − pl lies in 0..w.
            let px0 = pl.saturating_sub(b).div_ceil(sw);
            let px1 =
                d.w.saturating_add(pl)
                    .saturating_sub(b)
                    .div_ceil(sw)
                    .min(wph);
            for py in 0..hph {
                let iy = py
                    .checked_mul(sh)
                    .and_then(|y| y.checked_add(a)?.checked_sub(pt));
                let Some(iy) = iy.filter(|&iy| iy < d.h) else {
                    continue;
                };
                let row = &src[iy * d.w..(iy + 1) * d.w];
                let dst = &mut plane[py * wph..(py + 1) * wph];
                if sw == 1 {
                    if px0 < px1 {
                        let ix0 = px0 + b - pl;
                        dst[px0..px1].copy_from_slice(&row[ix0..ix0 + (px1 - px0)]);
                    }
                } else {
                    for (px, dst) in dst.iter_mut().enumerate().take(px1).skip(px0) {
                        // In the input by the choice of px0..px1.
                        *dst = row[px * sw + b - pl];
                    }
                }
            }
        }
    }
}

/// One input row into its two column phases at once (column stride 2; a loop over
/// pairs vectorises, one phase at a time stays scalar): input column `2j + e` goes to
/// phase `(e + pl) mod 2`, column `j + (e + pl) / 2`; columns past a phase's row are
/// read by no output and dropped.
#[cfg(feature = "std")]
#[inline(always)]
pub(super) fn split_pairs(
    planes: &mut [f32],
    row: usize,
    phase_len: usize,
    qw: usize,
    pl: usize,
    values: &[f32],
) {
    let Some((zero, one)) = planes
        .get_mut(row..)
        .and_then(|rest| rest.split_at_mut_checked(phase_len))
    else {
        return;
    };
    let (zero_len, one_len) = (qw.min(zero.len()), qw.min(one.len()));
    let (zero, one) = (&mut zero[..zero_len], &mut one[..one_len]);
    let (first, second) = if pl.is_multiple_of(2) {
        (zero, one)
    } else {
        (one, zero)
    };
    let first = first.get_mut(pl / 2..).unwrap_or_default();
    let second = second.get_mut(pl.div_ceil(2)..).unwrap_or_default();
    let pairs = (values.len() / 2).min(first.len()).min(second.len());
    #[cfg(target_arch = "x86_64")]
    let done = deinterleave(&mut first[..pairs], &mut second[..pairs], values);
    #[cfg(not(target_arch = "x86_64"))]
    let done = 0;
    for ((a, b), pair) in first[done..pairs]
        .iter_mut()
        .zip(&mut second[done..pairs])
        .zip(values.get(2 * done..).unwrap_or_default().chunks_exact(2))
    {
        *a = pair[0];
        *b = pair[1];
    }
    for (ix, &v) in values.iter().enumerate().skip(2 * pairs) {
        let phase = if ix % 2 == 0 {
            &mut *first
        } else {
            &mut *second
        };
        if let Some(slot) = phase.get_mut(ix / 2) {
            *slot = v;
        }
    }
}

/// `first[i] = values[2i]` and `second[i] = values[2i + 1]`, eight pairs at a time with AVX2
/// where it runs (as scalars the split had been most of a stride-2 depthwise layer's time:
/// MobileNet's on 48 × 48); returns how many pairs it wrote, from the first.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[inline(always)]
pub(super) fn deinterleave(first: &mut [f32], second: &mut [f32], values: &[f32]) -> usize {
    /// Whole blocks of eight pairs.
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[target_feature(enable = "avx2")]
    #[inline]
    #[allow(unsafe_code)]
    unsafe fn blocks(first: &mut [f32], second: &mut [f32], values: &[f32]) -> usize {
        use core::arch::x86_64::*;
        let mut done = 0;
        for ((a, b), v) in first
            .chunks_exact_mut(8)
            .zip(second.chunks_exact_mut(8))
            .zip(values.chunks_exact(16))
        {
            // SAFETY: each chunk holds the eight or sixteen floats read or written.
            let (lo, hi) = (
                _mm256_loadu_ps(v.as_ptr()),
                _mm256_loadu_ps(v.as_ptr().add(8)),
            );
            // [v0 v2 v8 v10 | v4 v6 v12 v14] and the odd ones, then the 64-bit pairs in order.
            let evens = _mm256_shuffle_ps::<0x88>(lo, hi);
            let odds = _mm256_shuffle_ps::<0xDD>(lo, hi);
            let order =
                |x: __m256| _mm256_castpd_ps(_mm256_permute4x64_pd::<0xD8>(_mm256_castps_pd(x)));
            _mm256_storeu_ps(a.as_mut_ptr(), order(evens));
            _mm256_storeu_ps(b.as_mut_ptr(), order(odds));
            done += 8;
        }
        done
    }
    if crate::isa::level() < crate::isa::Level::Avx2 {
        return 0;
    }
    // SAFETY: the AVX2 level runs only where the CPU has AVX2.
    #[allow(unsafe_code)]
    unsafe {
        blocks(first, second, values)
    }
}

#[inline(always)]
pub(super) fn init_bias(out: &mut [f32], bias: Option<&[f32]>, plane: usize) {
    match bias {
        Some(bias) => {
            for (row, &v) in out.chunks_exact_mut(plane.max(1)).zip(bias) {
                row.fill(v);
            }
        }
        None => out.fill(0.0),
    }
}

/// `dst[i] = f(dst[i], src[i * step])`. The source is first cut to exactly the elements read,
/// then walked a chunk of `step` at a time: a tight loop (`step_by` was twice as slow here),
/// with no index to check (an index left a panic path where the compiler could not prove it).
#[inline(always)]
pub(super) fn strided(dst: &mut [f32], src: &[f32], step: usize, f: impl Fn(f32, f32) -> f32) {
    let Some(last) = dst.len().checked_sub(1) else {
        return;
    };
    // A source short of the elements read (a plan the verifier would refuse) reads nothing.
    let Some(src) = src.get(..last * step + 1) else {
        return;
    };
    // Element `i` read is the first of the `i`-th chunk.
    for (d, chunk) in dst.iter_mut().zip(src.chunks(step.max(1))) {
        if let Some(&v) = chunk.first() {
            *d = f(*d, v);
        }
    }
}

/// `dst[i] = src[i * step]` on the host: an indexed loop, which LLVM turns into a gather or
/// unrolled loads (the chunked walk of [`strided`] left an iterator's constructor out of line:
/// a 1 × 1 stride-2 convolution's unfolding took 3 µs for 1,024 elements). A source short of
/// the elements read copies nothing.
#[inline(always)]
pub(super) fn every(dst: &mut [f32], src: &[f32], step: usize) {
    let Some(last) = dst.len().checked_sub(1) else {
        return;
    };
    let Some(src) = last.checked_mul(step).and_then(|end| src.get(..=end)) else {
        return;
    };
    if step == 2 {
        // Pairs, the first of each kept (a vectorised deinterleave); the last element read
        // has no pair.
        let (body, tail) = dst.split_at_mut(last);
        for (d, pair) in body.iter_mut().zip(src.chunks_exact(2)) {
            *d = pair[0];
        }
        if let (Some(d), Some(&v)) = (tail.first_mut(), src.last()) {
            *d = v;
        }
        return;
    }
    for (i, d) in dst.iter_mut().enumerate() {
        if let Some(&v) = src.get(i * step) {
            *d = v;
        }
    }
}

/// `acc[i] += w · src[i]`, four elements a step: written out, not left to the compiler's loop
/// unrolling, which a firmware built for size (opt-level "s") does not do.
#[inline(always)]
pub(super) fn multiply_add(acc: &mut [f32], src: &[f32], w: f32) {
    let mut accs = acc.chunks_exact_mut(4);
    let mut srcs = src.chunks_exact(4);
    for (a, v) in (&mut accs).zip(&mut srcs) {
        a[0] += w * v[0];
        a[1] += w * v[1];
        a[2] += w * v[2];
        a[3] += w * v[3];
    }
    for (a, v) in accs.into_remainder().iter_mut().zip(srcs.remainder()) {
        *a += w * v;
    }
}

/// `acc[i] += w · src[i] · mask[i]`, four elements a step (as [`multiply_add`]).
#[inline(always)]
pub(super) fn masked_multiply_add(acc: &mut [f32], src: &[f32], mask: &[f32], w: f32) {
    let mut accs = acc.chunks_exact_mut(4);
    let mut srcs = src.chunks_exact(4);
    let mut masks = mask.chunks_exact(4);
    for ((a, v), m) in (&mut accs).zip(&mut srcs).zip(&mut masks) {
        a[0] += w * v[0] * m[0];
        a[1] += w * v[1] * m[1];
        a[2] += w * v[2] * m[2];
        a[3] += w * v[3] * m[3];
    }
    let tail = accs.into_remainder().iter_mut().zip(srcs.remainder());
    for ((a, v), m) in tail.zip(masks.remainder()) {
        *a += w * v * m;
    }
}

/// Copies a short slice inline (no `memcpy` call: for rows of a few floats the call costs
/// more than the copy).
#[inline(always)]
pub(super) fn copy(dst: &mut [f32], src: &[f32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = *s;
    }
}

/// Zeroes a short slice inline (no `memset` call).
#[inline(always)]
pub(super) fn zero(xs: &mut [f32]) {
    for x in xs {
        *x = 0.0;
    }
}

/// What every depthwise strategy reads: the window, sizes, channel multiplier (output
/// channels per input channel), one batch item's input, the weights and the bias.
#[derive(Clone, Copy)]
pub(super) struct DepthwiseArgs<'a> {
    pub(super) win: &'a Window,
    pub(super) d: ConvDims,
    pub(super) multiplier: usize,
    pub(super) x: &'a [f32],
    pub(super) weight: &'a [f32],
    pub(super) bias: Option<&'a [f32]>,
}
