//! Convolutions over NCHW tensors (1-D convolutions arrive as height-1 2-D ones).
//!
//! Three strategies, chosen from the parameters exactly as `conv_scratch_elements` says:
//! pointwise (1×1, stride 1, no padding) is one matrix product per group on the input in place;
//! depthwise runs directly, one vectorised row at a time; everything else unfolds one group's
//! input into the planned scratch (im2col) and multiplies. On a host with SIMD kernels, the
//! last instead copies its input once into zero-padded phase planes and reads every tap there in
//! place (`conv_in_place`), nine times less copying for a 3×3 kernel, when the scratch holds
//! them.

use crate::base::context::StepContext;
use crate::base::geometry::ConvDims;
use crate::micro::sgemm::{sgemm, Mat};
use core::num::NonZeroUsize;
use ferrite_hal::geometry::{
    conv_scratch_elements, conv_tile_columns, depthwise_strategy, Depthwise,
};
use ferrite_hal::op::{Conv, ConvTranspose, Window};
#[cfg(feature = "std")]
use ferrite_hal::Activation;

/// Range of output positions `o` along one axis whose input position `o*stride - pad + tap`
/// lies inside `[0, len)`: returns `(first, end)`.
#[inline]
fn valid_range(
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

/// Convolution. `scratch` holds at least `conv_scratch_elements` floats. True where `p`'s
/// activation has been applied to every output too (a host's kernels fuse Relu and Clip into
/// their stores); the caller applies it otherwise. `constant_weights`: the weights are the
/// model's constants, which a host may keep packed between runs.
// Its own function on a microcontroller: inlined into a firmware's step dispatch, which is
// built for size, its loops were left as iterator calls (MobileNet's depthwise 2.7x slower).
#[cfg_attr(feature = "std", inline(always))]
#[allow(clippy::too_many_arguments)]
pub fn conv(
    ctx: StepContext<'_>,
    p: &Conv,
    d: ConvDims,
    x: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    scratch: &mut [f32],
    constant_weights: bool,
) -> bool {
    // Only a host keeps packed weights.
    #[cfg(not(feature = "std"))]
    let _ = constant_weights;
    // Checked by the verifier, as every size below; a plan without it computes nothing.
    let Some(groups) = NonZeroUsize::new(p.group) else {
        return false;
    };
    let g = groups.get();
    let icg = d.c / groups;
    let ocg = d.oc / groups;
    let [kh, kw] = p.window.kernel;
    let k = icg * kh * kw;
    let plane = d.oh * d.ow;
    let win = &p.window;
    let pointwise = win.kernel == [1, 1] && win.stride == [1, 1] && win.pads == [0; 4];
    let depthwise = icg == 1 && g > 1;
    // Whether every output so far has had the activation applied.
    let mut activated = true;
    for b in 0..d.n {
        let (Some(out_b), Some(x_b)) = (
            out.get_mut(b * d.oc * plane..(b + 1) * d.oc * plane),
            x.get(b * d.c * d.h * d.w..(b + 1) * d.c * d.h * d.w),
        ) else {
            return false;
        };
        // Outputs start from the bias, except where a host's blocked depthwise kernels or
        // in-place convolutions run: they write every output, bias included (the bias is then
        // written after they decline).
        let host_writes_bias = cfg!(feature = "std");
        if !host_writes_bias {
            init_bias(out_b, bias, plane);
        }
        if depthwise {
            let args = DepthwiseArgs {
                win,
                d,
                multiplier: ocg,
                x: x_b,
                weight,
                bias,
            };
            let strategy = depthwise_strategy(p, d.oh, d.ow);
            // On the host, vectors summed in registers (measured on MobileNet's and DS-CNN's
            // layers, one step at a time): small planes eight channels at a time where x86-64
            // has AVX2 (which applies Relu and Clip too), else the masked kernel for stride-1
            // planes of 8 to 1,024 outputs (past that its masks crowd the cache), the
            // phase-plane kernel otherwise.
            #[cfg(all(feature = "std", target_arch = "x86_64"))]
            if ocg == 1
                && crate::ops::conv::depthwise_lanes::run(
                    ctx,
                    win,
                    d,
                    x_b,
                    weight,
                    bias,
                    p.activation,
                    out_b,
                    constant_weights,
                    false,
                )
            {
                activated &= crate::ops::conv::channel_lanes::fuses(p.activation);
                continue;
            }
            activated = false;
            #[cfg(feature = "std")]
            {
                let blocked_ran = match (strategy, plane) {
                    (Depthwise::Masked, 8..=1024) => blocked::masked(&args, out_b),
                    _ => blocked::depthwise(&args, out_b),
                };
                if blocked_ran {
                    continue;
                }
                init_bias(out_b, bias, plane);
            }
            // A plan whose scratch is short of what the strategy needs (the verifier checks
            // the shared rule; this keeps a hand-made plan from reaching an index panic) runs
            // the direct loop instead.
            let need = conv_scratch_elements(p, icg, d.oh, d.ow).unwrap_or(usize::MAX);
            match strategy {
                _ if scratch.len() < need => depthwise_conv(win, d, ocg, x_b, weight, out_b),
                Depthwise::Masked => depthwise_masked(&args, out_b, scratch),
                Depthwise::Padded => depthwise_flat(&args, out_b, scratch),
                Depthwise::Direct => depthwise_conv(win, d, ocg, x_b, weight, out_b),
            }
            continue;
        }
        let tile = if pointwise {
            plane
        } else {
            conv_tile_columns(k, plane)
        };
        for grp in 0..g {
            // Sized by the verifier; a short operand computes nothing.
            let (Some(x_g), Some(w_g), Some(out_g)) = (
                x_b.get(grp * icg * d.h * d.w..(grp + 1) * icg * d.h * d.w),
                weight.get(grp * ocg * k..(grp + 1) * ocg * k),
                out_b.get_mut(grp * ocg * plane..(grp + 1) * ocg * plane),
            ) else {
                return false;
            };
            #[cfg(feature = "std")]
            let bias_g = bias.and_then(|b| b.get(grp * ocg..(grp + 1) * ocg));
            // A 1 × 1 kernel without padding, one group, on x86-64 with AVX2: the output
            // channels across the lanes, the input read in place at any stride
            // (`conv_lanes`); otherwise the bias, then the product on top.
            #[cfg(all(feature = "std", target_arch = "x86_64"))]
            if win.kernel == [1, 1]
                && win.pads == [0; 4]
                && g == 1
                && crate::ops::conv::blocked::pointwise(
                    ctx,
                    win,
                    d,
                    x_g,
                    (w_g, bias_g),
                    p.activation,
                    out_g,
                    (
                        constant_weights,
                        (
                            crate::ops::conv::blocked::Blocking::default(),
                            crate::ops::conv::channel_lanes::Residual::None,
                        ),
                    ),
                    crate::ops::conv::channel_lanes::lanes().unwrap_or(1),
                )
            {
                activated &= crate::ops::conv::channel_lanes::fuses(p.activation);
                continue;
            }
            #[cfg(feature = "std")]
            if pointwise {
                init_bias(out_g, bias_g, plane);
            }
            if pointwise {
                activated = false;
                sgemm(
                    ctx,
                    ocg,
                    plane,
                    k,
                    1.0,
                    Mat {
                        data: w_g,
                        stride: k,
                    },
                    Mat {
                        data: x_g,
                        stride: plane,
                    },
                    out_g,
                    plane,
                    true,
                );
                continue;
            }
            #[cfg(feature = "std")]
            {
                let operands = InPlace {
                    ctx,
                    win,
                    d,
                    icg,
                    ocg,
                    x: x_g,
                    weight: w_g,
                    bias: bias_g,
                    activation: p.activation,
                    constant: constant_weights && g == 1,
                };
                if let Some(applied) = conv_in_place(operands, out_g, scratch) {
                    activated &= applied;
                    continue;
                }
                init_bias(out_g, bias_g, plane);
            }
            activated = false;
            let mut p0 = 0;
            while p0 < plane {
                let p1 = (p0 + tile).min(plane);
                let Some(cols) = scratch.get_mut(..k * (p1 - p0)) else {
                    return false;
                };
                im2col(win, d, icg, x_g, cols, p0, p1);
                sgemm(
                    ctx,
                    ocg,
                    p1 - p0,
                    k,
                    1.0,
                    Mat {
                        data: w_g,
                        stride: k,
                    },
                    Mat {
                        data: cols,
                        stride: p1 - p0,
                    },
                    // Empty when the group has no output channels (a zero-size tensor).
                    out_g.get_mut(p0..).unwrap_or(&mut []),
                    plane,
                    true,
                );
                p0 = p1;
            }
        }
    }
    activated
}

/// A convolution of one group as a matrix product whose B rows are read in place: the group's
/// input is copied once, zero-padded, into `scratch` as `stride_h × stride_w` phase planes (the
/// padded pixels whose row and column are each a given phase modulo the stride; one plane for
/// stride 1). On them, tap `(c, ky, kx)` of every output position is one plane at a constant
/// offset, so row `(c, ky, kx)` of the im2col matrix is that plane from that offset on, and the
/// product runs over a grid as wide as a plane's rows (the few columns past each output row are
/// computed and dropped). Bands of output rows go through the rest of `scratch`, then go to
/// `out` plus the bias. Where the channel-lane kernel pays ([`crate::ops::conv::channel_lanes`], x86-64
/// with AVX2 and up: the same sums), it runs instead on one padded plane a channel, and also
/// applies the activation it fuses.
/// `Some(whether the activation was applied)`; `None`, with nothing written, where the SIMD
/// kernels are not available or `scratch` cannot hold the planes and one band row; the caller
/// unfolds instead.
#[cfg(feature = "std")]
fn conv_in_place(job: InPlace<'_>, out: &mut [f32], scratch: &mut [f32]) -> Option<bool> {
    // Built for AVX2 where it runs: out of line, its copies and additions had been baseline
    // SSE (a fifth of ResNet-8's time).
    #[cfg(target_arch = "x86_64")]
    if crate::isa::level() >= crate::isa::Level::Avx2 {
        /// [`in_place`] built for AVX2 and FMA.
        ///
        /// # Safety
        /// The CPU has AVX2 and FMA.
        #[target_feature(enable = "avx2,fma")]
        #[allow(unsafe_code)]
        unsafe fn in_place_avx2(
            job: InPlace<'_>,
            out: &mut [f32],
            scratch: &mut [f32],
        ) -> Option<bool> {
            in_place(job, out, scratch)
        }
        // SAFETY: the AVX2 level runs only where the CPU has AVX2 and FMA.
        #[allow(unsafe_code)]
        return unsafe { in_place_avx2(job, out, scratch) };
    }
    in_place(job, out, scratch)
}

/// What [`in_place`] reads: the group's geometry, input, weights and bias (none: zero).
#[cfg(feature = "std")]
struct InPlace<'a> {
    /// The step's context (the kept packed weights, the threads).
    ctx: StepContext<'a>,
    win: &'a Window,
    d: ConvDims,
    icg: usize,
    ocg: usize,
    x: &'a [f32],
    weight: &'a [f32],
    bias: Option<&'a [f32]>,
    /// The activation fused into the convolution (applied here where the kernel can).
    activation: Activation,
    /// Whether the weights are the model's constants (packed once per prepared step).
    constant: bool,
}

/// [`conv_in_place`]'s body.
#[cfg(feature = "std")]
#[inline(always)]
fn in_place(job: InPlace<'_>, out: &mut [f32], scratch: &mut [f32]) -> Option<bool> {
    let InPlace {
        ctx,
        win,
        d,
        icg,
        ocg,
        x,
        weight,
        bias,
        activation,
        constant,
    } = job;
    // Only the channel-lane path (x86-64) applies the activation or keeps packed weights.
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (activation, constant);
    use crate::micro::sgemm::sgemm_rows;
    use core::cell::Cell;
    use std::vec::Vec;
    std::thread_local! {
        /// Reused table of the taps' offsets into the phase planes.
        static TAPS: Cell<Vec<usize>> = const { Cell::new(Vec::new()) };
    }
    let [kh, kw] = win.kernel;
    let [sh, sw] = win.stride;
    let [dh, dw] = win.dilation;
    let empty = [sh, sw, kh, kw, d.h, d.w, d.oh, d.ow, ocg].contains(&0);
    if empty {
        return None;
    }
    // A phase plane: every output row plus the furthest tap's shift, in phase coordinates. Sizes
    // are checked: a verified plan can still hold absurd strides or dilations (one output).
    let sizes = (|| {
        let hph = d.oh.checked_add((kh - 1).checked_mul(dh)? / sh)?;
        let wph = d.ow.checked_add((kw - 1).checked_mul(dw)? / sw)?;
        let phase = hph.checked_mul(wph)?;
        let channel = sh.checked_mul(sw)?.checked_mul(phase)?;
        let padded = icg.checked_mul(channel)?;
        let band_row = ocg.checked_mul(wph)?;
        let k = icg.checked_mul(kh)?.checked_mul(kw)?;
        let plane = d.oh.checked_mul(d.ow)?;
        let fits = scratch.len() >= padded.checked_add(band_row)?
            && x.len() >= icg.checked_mul(d.h.checked_mul(d.w)?)?
            && weight.len() >= ocg.checked_mul(k)?
            && out.len() >= ocg.checked_mul(plane)?;
        fits.then_some((hph, wph, phase, channel, padded, band_row, k, plane))
    })();
    let (hph, wph, phase, channel, padded, band_row, k, plane) = sizes?;
    if !crate::micro::sgemm::simd_available() {
        return None;
    }
    let (planes, rest) = scratch.split_at_mut(padded);
    #[cfg(target_arch = "x86_64")]
    if crate::ops::conv::channel_lanes::will_run(k, ocg, plane, false) {
        use crate::ops::conv::blocked::{padded, Blocking, Residual};
        let group = ConvDims {
            c: icg,
            oc: ocg,
            ..d
        };
        let store = (constant, (Blocking::default(), Residual::None));
        let lanes = crate::ops::conv::channel_lanes::lanes().unwrap_or(1);
        if padded(
            ctx,
            win,
            group,
            x,
            (weight, bias),
            activation,
            out,
            store,
            lanes,
        ) {
            return Some(crate::ops::conv::channel_lanes::fuses(activation));
        }
    }
    let band_rows = (rest.len() / band_row).min(d.oh);
    // Taken and put back rather than borrowed in a closure: the closure would be built apart
    // from the caller's SIMD build.
    let mut taps = TAPS.take();
    {
        taps.clear();
        // The kernel's offsets within a channel first (their divisions once, not once per
        // channel: at 576 terms they had been a tenth of the convolution's own time), then
        // every channel's.
        for ky in 0..kh {
            for kx in 0..kw {
                let (y, x) = (ky * dh, kx * dw);
                let which = (y % sh) * sw + x % sw;
                taps.push(which * phase + y / sh * wph + x / sw);
            }
        }
        let window = kh * kw;
        for c in 1..icg {
            for t in 0..window {
                let offset = taps[t] + c * channel;
                taps.push(offset);
            }
        }
        let a = Mat {
            data: weight,
            stride: k,
        };
        split_phases(planes, x, d, icg, win, [hph, wph]);
        let mut oy0 = 0;
        while oy0 < d.oh {
            let rows = band_rows.min(d.oh - oy0);
            let n = (rows - 1) * wph + d.ow;
            let grid = &mut rest[..ocg * n];
            // The furthest tap of the band's last output lies inside its channel's last plane,
            // and the SIMD kernels are there (checked above), so the product runs. It writes
            // the grid as if zeroed first.
            let ran = sgemm_rows(ctx, ocg, n, a, &planes[oy0 * wph..], &taps, grid, n, true);
            debug_assert!(ran, "the phase planes hold every tap of the band");
            for (o, out_c) in out.chunks_exact_mut(plane).take(ocg).enumerate() {
                let grid_c = &grid[o * n..(o + 1) * n];
                // The bias plus the sum, as the bias-filled output plus the sum was.
                let b = bias.and_then(|b| b.get(o)).copied().unwrap_or(0.0);
                for r in 0..rows {
                    let dst = &mut out_c[(oy0 + r) * d.ow..(oy0 + r + 1) * d.ow];
                    for (d, g) in dst.iter_mut().zip(&grid_c[r * wph..]) {
                        *d = b + g;
                    }
                }
            }
            oy0 += rows;
        }
    }
    TAPS.set(taps);
    Some(false)
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
fn split_pairs(
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
fn deinterleave(first: &mut [f32], second: &mut [f32], values: &[f32]) -> usize {
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
fn init_bias(out: &mut [f32], bias: Option<&[f32]>, plane: usize) {
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
fn strided(dst: &mut [f32], src: &[f32], step: usize, f: impl Fn(f32, f32) -> f32) {
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
fn every(dst: &mut [f32], src: &[f32], step: usize) {
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
fn multiply_add(acc: &mut [f32], src: &[f32], w: f32) {
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
fn masked_multiply_add(acc: &mut [f32], src: &[f32], mask: &[f32], w: f32) {
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
fn copy(dst: &mut [f32], src: &[f32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = *s;
    }
}

/// Zeroes a short slice inline (no `memset` call).
#[inline(always)]
fn zero(xs: &mut [f32]) {
    for x in xs {
        *x = 0.0;
    }
}

/// Unfolds `icg` input channels into `cols[(c, ky, kx), p - p0]` for output positions
/// `p0..p1` (row-major over `(oy, ox)`).
// Out of line on a microcontroller, as the depthwise kernels are (see `depthwise_masked`).
#[cfg_attr(not(feature = "std"), inline(never))]
#[cfg_attr(feature = "std", inline(always))]
fn im2col(
    win: &Window,
    d: ConvDims,
    icg: usize,
    x: &[f32],
    cols: &mut [f32],
    p0: usize,
    p1: usize,
) {
    let [kh, kw] = win.kernel;
    let [sh, sw] = win.stride;
    let [dh, dw] = win.dilation;
    let (pt, pl) = (win.pads[0], win.pads[1]);
    let width = p1 - p0;
    // Sized by the verifier (strides included); a short operand unfolds nothing more.
    if sh == 0 || sw == 0 {
        return;
    }
    for c in 0..icg {
        let Some(x_c) = x.get(c * d.h * d.w..(c + 1) * d.h * d.w) else {
            return;
        };
        for ky in 0..kh {
            let (oy0, oy1) = valid_range(d.oh, d.h, sh, pt, ky * dh);
            for kx in 0..kw {
                let at = ((c * kh + ky) * kw + kx) * width;
                let Some(row) = cols.get_mut(at..at + width) else {
                    return;
                };
                let (ox0, ox1) = valid_range(d.ow, d.w, sw, pl, kx * dw);
                // Walk the tile one output row (segment) at a time, without dividing per segment.
                let mut p = p0;
                let mut oy = p0 / d.ow.max(1);
                let mut seg_start = p0 - oy * d.ow;
                while p < p1 {
                    let seg_end = (p1 - oy * d.ow).min(d.ow);
                    let Some(dst) = row.get_mut(p - p0..p - p0 + (seg_end - seg_start)) else {
                        return;
                    };
                    p += seg_end - seg_start;
                    let this_oy = oy;
                    let this_start = seg_start;
                    oy += 1;
                    seg_start = 0;
                    let (oy, seg_start) = (this_oy, this_start);
                    let (lo, hi) = (ox0.max(seg_start), ox1.min(seg_end));
                    if oy < oy0 || oy >= oy1 || lo >= hi {
                        zero(dst);
                        continue;
                    }
                    if let Some(head) = dst.get_mut(..lo - seg_start) {
                        zero(head);
                    }
                    if let Some(tail) = dst.get_mut(hi - seg_start..) {
                        zero(tail);
                    }
                    let iy = oy * sh + ky * dh - pt;
                    let ix0 = lo * sw + kx * dw - pl;
                    let (Some(src), Some(out)) = (
                        x_c.get(iy * d.w + ix0..(iy + 1) * d.w),
                        dst.get_mut(lo - seg_start..hi - seg_start),
                    ) else {
                        return;
                    };
                    if sw == 1 {
                        if let Some(src) = src.get(..hi - lo) {
                            copy(out, src);
                        }
                    } else if cfg!(feature = "std") {
                        every(out, src, sw);
                    } else {
                        strided(out, src, sw, |_, v| v);
                    }
                }
            }
        }
    }
}

/// What every depthwise strategy reads: the window, sizes, channel multiplier (output
/// channels per input channel), one batch item's input, the weights and the bias.
#[derive(Clone, Copy)]
struct DepthwiseArgs<'a> {
    win: &'a Window,
    d: ConvDims,
    multiplier: usize,
    x: &'a [f32],
    weight: &'a [f32],
    bias: Option<&'a [f32]>,
}

/// Stride-1 depthwise convolution with "same" padding across ([`Depthwise::Masked`]): in the
/// flat (row-major) plane every tap is a constant shift of the input, valid except where the
/// column wraps into a neighbouring row; a 0/1 mask per kernel column removes those, so each
/// tap is one long multiply-add with no copies however narrow the image is.
// Out of line on a microcontroller: `conv`'s own frame then holds only what its GEMM path
// needs, and the inference stack is that path's, not the sum of every strategy's locals.
#[cfg_attr(not(feature = "std"), inline(never))]
#[cfg_attr(feature = "std", inline(always))]
fn depthwise_masked(a: &DepthwiseArgs<'_>, out: &mut [f32], scratch: &mut [f32]) {
    let DepthwiseArgs {
        win,
        d,
        multiplier,
        x,
        weight,
        bias,
    } = *a;
    let [kh, kw] = win.kernel;
    let [dh, dw] = win.dilation;
    let (pt, pl) = (win.pads[0], win.pads[1]);
    let plane = d.oh * d.ow;
    let in_plane = d.h * d.w;
    // Checked by the verifier; a plan without it computes nothing.
    let Some(multiplier) = NonZeroUsize::new(multiplier) else {
        return;
    };
    // masks[kx][p] = 1 where output column p % ow reads an input column inside the row.
    let Some(masks) = scratch.get_mut(..kw * plane) else {
        return;
    };
    for (kx, mask) in masks.chunks_exact_mut(plane.max(1)).enumerate() {
        for row in mask.chunks_exact_mut(d.ow.max(1)) {
            for (ox, m) in row.iter_mut().enumerate() {
                let ix = (ox + kx * dw) as isize - pl as isize;
                *m = if (0..d.w as isize).contains(&ix) {
                    1.0
                } else {
                    0.0
                };
            }
        }
    }
    let masks = &*masks;
    for o in 0..d.oc {
        let start = (o / multiplier) * in_plane;
        let (Some(x_c), Some(out_c), Some(w_o)) = (
            x.get(start..start + in_plane),
            out.get_mut(o * plane..(o + 1) * plane),
            weight.get(o * kh * kw..(o + 1) * kh * kw),
        ) else {
            return;
        };
        out_c.fill(bias.and_then(|b| b.get(o)).copied().unwrap_or(0.0));
        for ky in 0..kh {
            // Output rows whose input row oy + ky·dh − pt exists.
            let (oy0, oy1) = valid_range(d.oh, d.h, 1, pt, ky * dh);
            for kx in 0..kw {
                let Some(&wv) = w_o.get(ky * kw + kx) else {
                    return;
                };
                let shift = (ky * dh) as isize * d.w as isize + (kx * dw) as isize
                    - (pt * d.w + pl) as isize;
                // Clip the flat range so the shifted index stays inside the input plane; the
                // positions dropped are exactly wrapped columns (masked anyway).
                let lo = ((oy0 * d.ow) as isize).max(-shift).max(0);
                let hi = ((oy1 * d.ow) as isize).min(in_plane as isize - shift);
                if lo >= hi {
                    // No output row reads this tap (a plane smaller than the kernel).
                    continue;
                }
                let (lo, hi) = (lo as usize, hi as usize);
                let src = x_c.get((lo as isize + shift) as usize..(hi as isize + shift) as usize);
                let mask = masks.get(kx * plane + lo..kx * plane + hi);
                if let (Some(src), Some(mask), Some(acc)) = (src, mask, out_c.get_mut(lo..hi)) {
                    masked_multiply_add(acc, src, mask, wv);
                }
            }
        }
    }
}

/// Depthwise convolution on zero-padded phase planes ([`Depthwise::Padded`]): each input plane
/// is copied zero-padded and split by row and column position modulo the stride
/// (`hal::geometry::depthwise_phases`; a single plane for stride 1). Output position
/// `(oy, ox)` of tap `(ky, kx)` then reads phase `(ky·dh mod sh, kx·dw mod sw)` at
/// `(oy + ky·dh / sh, ox + kx·dw / sw)`: with the output computed at the phase width, every tap
/// is one contiguous multiply-add over the whole plane, vectorised however narrow the image and
/// whatever the stride; the valid columns are copied out at the end.
// Out of line on a microcontroller: `conv`'s own frame then holds only what its GEMM path
// needs, and the inference stack is that path's, not the sum of every strategy's locals.
#[cfg_attr(not(feature = "std"), inline(never))]
#[cfg_attr(feature = "std", inline(always))]
fn depthwise_flat(a: &DepthwiseArgs<'_>, out: &mut [f32], scratch: &mut [f32]) {
    let DepthwiseArgs {
        win,
        d,
        multiplier,
        x,
        weight,
        bias,
    } = *a;
    let [kh, kw] = win.kernel;
    let [sh, sw] = win.stride;
    let [dh, dw] = win.dilation;
    let (pt, pl) = (win.pads[0], win.pads[1]);
    let Some([phases, qh, qw]) = ferrite_hal::geometry::depthwise_phases(win, d.oh, d.ow) else {
        return;
    };
    // Checked by the verifier (the scratch is sized by the same rule); a plan without them
    // computes nothing.
    let Some(multiplier) = NonZeroUsize::new(multiplier) else {
        return;
    };
    let (Some(sh_nz), Some(sw_nz)) = (NonZeroUsize::new(sh), NonZeroUsize::new(sw)) else {
        return;
    };
    let Some((planes, acc)) = scratch.split_at_mut_checked(phases * qh * qw) else {
        return;
    };
    let Some(acc) = acc.get_mut(..d.oh * qw) else {
        return;
    };
    // Length of the flat pass: the last valid output sits at (oh - 1) * qw + ow - 1.
    let span = (d.oh - 1) * qw + d.ow;
    let plane = d.oh * d.ow;
    let padded_h = qh * sh;
    for o in 0..d.oc {
        let c = o / multiplier;
        if o % multiplier == 0 {
            planes.fill(0.0);
            let Some(src) = x.get(c * d.h * d.w..(c + 1) * d.h * d.w) else {
                return;
            };
            for (iy, row) in src.chunks_exact(d.w.max(1)).enumerate() {
                let py = iy + pt;
                if py >= padded_h {
                    break;
                }
                let (ry, qy) = (py % sh_nz, py / sh_nz);
                for rx in 0..sw {
                    // Phase columns k whose padded column k·sw + rx is input column ix.
                    let (k0, k1) = valid_range(qw, d.w, sw, pl, rx);
                    if k0 >= k1 {
                        continue;
                    }
                    let ix0 = k0 * sw + rx - pl;
                    let at = ((ry * sw + rx) * qh + qy) * qw;
                    let (Some(dst), Some(src)) = (planes.get_mut(at + k0..at + k1), row.get(ix0..))
                    else {
                        return;
                    };
                    strided(dst, src, sw, |_, v| v);
                }
            }
        }
        if let Some(acc) = acc.get_mut(..span) {
            acc.fill(bias.and_then(|b| b.get(o)).copied().unwrap_or(0.0));
        }
        let Some(w_o) = weight.get(o * kh * kw..(o + 1) * kh * kw) else {
            return;
        };
        for ky in 0..kh {
            let (ry, sy) = ((ky * dh) % sh_nz, (ky * dh) / sh_nz);
            for kx in 0..kw {
                let (rx, sx) = ((kx * dw) % sw_nz, (kx * dw) / sw_nz);
                let phase_at = (ry * sw + rx) * qh * qw;
                let shift = sy * qw + sx;
                let (Some(&wv), Some(sums), Some(taps)) = (
                    w_o.get(ky * kw + kx),
                    acc.get_mut(..span),
                    planes
                        .get(phase_at..phase_at + qh * qw)
                        .and_then(|phase| phase.get(shift..shift + span)),
                ) else {
                    return;
                };
                multiply_add(sums, taps, wv);
            }
        }
        let Some(out_c) = out.get_mut(o * plane..(o + 1) * plane) else {
            return;
        };
        for (oy, row) in out_c.chunks_exact_mut(d.ow.max(1)).enumerate() {
            if let Some(sums) = acc.get(oy * qw..oy * qw + d.ow) {
                copy(row, sums);
            }
        }
    }
}

/// The host's depthwise convolution (`std`), for every stride and planned strategy: the
/// phase planes of [`depthwise_flat`] in buffers of the thread's own (their zero border
/// written once per step, each channel's values scattered in), and each vector of eight
/// outputs summed over every tap in registers — one store per vector, not one pass over the
/// plane per tap. The same additions in the same order as [`depthwise_flat`].
#[cfg(feature = "std")]
mod blocked {
    use super::{DepthwiseArgs, Window};
    use core::cell::RefCell;
    use std::vec::Vec;

    std::thread_local! {
        /// Reused phase planes, and one output plane at the phase width.
        static BUFFERS: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
    }

    /// Runs the step; false where it does not fit (fewer than eight outputs on the phase
    /// width, planes absurdly large, or not [`usable`]): the planned strategy runs.
    #[inline(always)]
    pub(super) fn depthwise(a: &DepthwiseArgs<'_>, out: &mut [f32]) -> bool {
        if !usable(a, out) {
            return false;
        }
        #[cfg(target_arch = "x86_64")]
        if stride_two::run(a, out) {
            return true;
        }
        let DepthwiseArgs {
            win,
            d,
            multiplier,
            x,
            weight,
            bias,
        } = *a;
        let [kh, kw] = win.kernel;
        let [sh, sw] = win.stride;
        let Some([phases, qh, qw]) = ferrite_hal::geometry::depthwise_phases(win, d.oh, d.ow)
        else {
            return false;
        };
        let planes_len = phases.checked_mul(qh).and_then(|n| n.checked_mul(qw));
        let span =
            d.oh.checked_sub(1)
                .and_then(|r| r.checked_mul(qw)?.checked_add(d.ow));
        let (Some(planes_len), Some(span)) = (planes_len, span) else {
            return false;
        };
        if planes_len > 1 << 24 || span < 8 {
            return false;
        }
        // Input row iy lands in the phase planes of row phase (iy + pt) mod sh, at phase row
        // (iy + pt) / sh; its columns go to each column phase rx as one run, phase columns
        // k0..k1 reading input columns k·sw + rx − pl. Worked out once per step.
        let (pt, pl) = (win.pads[0], win.pads[1]);
        // Each input row's first slot (row phase, then phase row), for the rows any output reads.
        let rows: Vec<usize> = (0..d.h)
            .map(|iy| iy + pt)
            .take_while(|&py| py < qh * sh)
            .map(|py| (py % sh) * sw * qh * qw + (py / sh) * qw)
            .collect();
        let runs: Vec<[usize; 3]> = (0..sw)
            .filter_map(|rx| {
                let (k0, k1) = super::valid_range(qw, d.w, sw, pl, rx);
                (k0 < k1).then(|| [rx * qh * qw + k0, k0 * sw + rx - pl, k1 - k0])
            })
            .collect();
        let offsets = tap_offsets(win, [qh, qw]);
        let farthest = offsets.iter().copied().max().unwrap_or(0);
        if farthest + span > planes_len {
            return false;
        }
        // Taken and put back rather than borrowed in a closure: the closure would be compiled
        // apart from the caller's SIMD build.
        let (mut planes, mut acc) = BUFFERS.take();
        planes.clear();
        planes.resize(planes_len, 0.0);
        acc.resize(span, 0.0);
        let job = Job {
            d,
            multiplier,
            x,
            weight,
            bias,
            kernel: [kh, kw],
            stride: [sh, sw],
            phase: [qh, qw],
            pl,
            rows: &rows,
            runs: &runs,
            offsets: &offsets,
        };
        // In a function of its own, built for AVX2 on x86-64: inlined into the step
        // dispatcher, the loop's values lived on the stack.
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `usable` returned true: the AVX2 level runs (the CPU has AVX2 and FMA).
        #[allow(unsafe_code)]
        unsafe {
            channels_avx2(&job, &mut planes, &mut acc, out)
        };
        #[cfg(not(target_arch = "x86_64"))]
        channels(&job, &mut planes, &mut acc, out);
        BUFFERS.set((planes, acc));
        true
    }

    /// The 3 × 3 stride-2 depthwise layer of MobileNet-like networks on x86-64: each input
    /// channel copied once into a zero-padded plane, and each output row's eight-wide vectors
    /// read straight from it, the even and odd columns of two loads deinterleaved in
    /// registers. Through phase planes, splitting every input row's columns had cost a
    /// call and its checks per row: MobileNet's four such layers took 8 to 11 µs each
    /// whatever their size. Each output is the bias plus the nine taps' products in the same
    /// order as the phase-plane kernels add them (a multiply, then an add), so the results
    /// are bit for bit theirs.
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    mod stride_two {
        use super::DepthwiseArgs;
        use core::arch::x86_64::*;
        use core::cell::RefCell;
        use std::vec::Vec;

        std::thread_local! {
            /// The reused padded plane.
            static PADDED: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
        }

        /// Runs the layer; false (nothing written) where it is not a 3 × 3 stride-2 one or an
        /// operand is shorter than the sizes say. The caller checked AVX2 (`usable`).
        pub(in super::super) fn run(a: &DepthwiseArgs<'_>, out: &mut [f32]) -> bool {
            let d = a.d;
            let shape =
                a.win.kernel == [3, 3] && a.win.stride == [2, 2] && a.win.dilation == [1, 1];
            if !shape || a.multiplier == 0 {
                return false;
            }
            // Padded rows 0..=2·oh (input row r − pt) and columns 0..pw (input column q − pl):
            // every read of every output vector lies inside (the last vector of a row starts at
            // column 2·(max(ow, 8) − 8) and reads 18 columns).
            let sizes = (|| {
                let rows = d.oh.checked_mul(2)?.checked_add(1)?;
                let pw = d.ow.max(8).checked_mul(2)?.checked_add(2)?;
                let len = rows.checked_mul(pw).filter(|&n| n <= 1 << 24)?;
                let plane = d.oh.checked_mul(d.ow)?;
                let channels = d.c.min(d.oc / a.multiplier);
                let outputs = channels.checked_mul(a.multiplier)?;
                let fits = a.x.len() >= channels.checked_mul(d.h.checked_mul(d.w)?)?
                    && out.len() >= outputs.checked_mul(plane)?
                    && a.weight.len() >= outputs.checked_mul(9)?
                    && a.bias.is_none_or(|b| b.len() >= outputs);
                fits.then_some((rows, pw, len, channels))
            })();
            let Some((rows, pw, len, channels)) = sizes else {
                return false;
            };
            let mut padded = PADDED.take();
            padded.clear();
            padded.resize(len, 0.0);
            // SAFETY: the AVX2 level runs (checked by the caller); sizes as checked above.
            unsafe { channels_avx2(a, [rows, pw, channels], &mut padded, out) };
            PADDED.set(padded);
            true
        }

        /// Every channel: its input into the padded plane's interior (the padding stays
        /// zero), then its outputs.
        ///
        /// # Safety
        /// AVX2; `padded` holds `rows × pw` floats and the operands the sizes [`run`] checked.
        #[target_feature(enable = "avx2,fma")]
        unsafe fn channels_avx2(
            a: &DepthwiseArgs<'_>,
            [rows, pw, channels]: [usize; 3],
            padded: &mut [f32],
            out: &mut [f32],
        ) {
            let d = a.d;
            let (pt, pl) = (a.win.pads[0], a.win.pads[1]);
            let (hw, plane) = (d.h * d.w, d.oh * d.ow);
            let n = d.w.min(pw.saturating_sub(pl));
            for c in 0..channels {
                let source = &a.x[c * hw..(c + 1) * hw];
                for (iy, row) in source.chunks_exact(d.w).enumerate() {
                    let r = iy + pt;
                    if r >= rows {
                        break;
                    }
                    super::super::copy(&mut padded[r * pw + pl..r * pw + pl + n], &row[..n]);
                }
                for o in c * a.multiplier..(c + 1) * a.multiplier {
                    let w: &[f32; 9] = match a.weight[o * 9..o * 9 + 9].try_into() {
                        Ok(w) => w,
                        Err(_) => return,
                    };
                    let bias = a.bias.map_or(0.0, |b| b[o]);
                    let out_c = &mut out[o * plane..(o + 1) * plane];
                    for (oy, row) in out_c.chunks_exact_mut(d.ow).enumerate() {
                        output_row(padded.as_ptr().add(2 * oy * pw), w, bias, row);
                    }
                }
            }
        }

        /// One output row from the padded rows starting at `top` (its three input rows, `pw`
        /// apart): eight outputs at a time, the last eight overlapping the ones before (a row
        /// narrower than eight through a buffer).
        ///
        /// # Safety
        /// AVX2; the three rows hold `2·max(len, 8) + 2` floats each from `top`, `pw` apart.
        #[target_feature(enable = "avx2,fma")]
        #[inline]
        unsafe fn output_row(top: *const f32, w: &[f32; 9], bias: f32, row: &mut [f32]) {
            let ow = row.len();
            let pw = 2 * ow.max(8) + 2;
            let order =
                |v: __m256| _mm256_castpd_ps(_mm256_permute4x64_pd::<0xD8>(_mm256_castps_pd(v)));
            let weights: [__m256; 9] = core::array::from_fn(|t| _mm256_set1_ps(w[t]));
            let mut start = 0;
            loop {
                let s = start.min(ow.saturating_sub(8));
                let mut sum = _mm256_set1_ps(bias);
                for ky in 0..3 {
                    let at = top.add(ky * pw + 2 * s);
                    let (lo, hi) = (_mm256_loadu_ps(at), _mm256_loadu_ps(at.add(8)));
                    let (lo2, hi2) = (_mm256_loadu_ps(at.add(2)), _mm256_loadu_ps(at.add(10)));
                    // Within 128-bit lanes: outputs in the order 0 1 4 5 2 3 6 7, the same
                    // for every tap (the weights and the bias are alike in all lanes), put in
                    // order once, after the sum.
                    let columns = [
                        _mm256_shuffle_ps::<0x88>(lo, hi),
                        _mm256_shuffle_ps::<0xDD>(lo, hi),
                        _mm256_shuffle_ps::<0x88>(lo2, hi2),
                    ];
                    for (kx, v) in columns.into_iter().enumerate() {
                        sum = _mm256_add_ps(sum, _mm256_mul_ps(weights[ky * 3 + kx], v));
                    }
                }
                let sum = order(sum);
                if ow >= 8 {
                    _mm256_storeu_ps(row.as_mut_ptr().add(s), sum);
                } else {
                    let mut values = [0.0f32; 8];
                    _mm256_storeu_ps(values.as_mut_ptr(), sum);
                    row.copy_from_slice(&values[..ow]);
                }
                if s + 8 >= ow {
                    return;
                }
                start += 8;
            }
        }
    }

    /// What [`channels`] needs of a step: its operands and the phase planes' geometry.
    struct Job<'a> {
        d: crate::base::geometry::ConvDims,
        multiplier: usize,
        x: &'a [f32],
        weight: &'a [f32],
        bias: Option<&'a [f32]>,
        kernel: [usize; 2],
        stride: [usize; 2],
        /// Rows and columns of each phase plane.
        phase: [usize; 2],
        /// Padding left of the input.
        pl: usize,
        /// The first slot of each input row any output reads (the first ones).
        rows: &'a [usize],
        /// Per column phase: `[first slot, first input column, count]`.
        runs: &'a [[usize; 3]],
        /// Each tap's first value in the planes.
        offsets: &'a [usize],
    }

    /// [`channels`] built for AVX2 and FMA.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    #[allow(unsafe_code)]
    unsafe fn channels_avx2(job: &Job<'_>, planes: &mut [f32], acc: &mut [f32], out: &mut [f32]) {
        channels(job, planes, acc, out)
    }

    /// Every output channel of [`depthwise`]: its input's phase planes (written when the
    /// input channel changes; the padding stays zero), the taps summed over `acc` at the phase
    /// width, each output row copied out.
    #[inline(always)]
    fn channels(job: &Job<'_>, planes: &mut [f32], acc: &mut [f32], out: &mut [f32]) {
        let Job {
            d,
            multiplier,
            x,
            weight,
            bias,
            kernel: [kh, kw],
            stride: [_, sw],
            phase: [qh, qw],
            pl,
            rows,
            runs,
            offsets,
        } = *job;
        let span = acc.len();
        let plane = d.oh * d.ow;
        // Input channel by input channel, without a division per channel or row.
        let channels = d.c.min(d.oc / multiplier);
        for (c, source) in x.chunks_exact(d.h * d.w).take(channels).enumerate() {
            for (&row, values) in rows.iter().zip(source.chunks_exact(d.w)) {
                if sw == 2 {
                    super::split_pairs(planes, row, qh * qw, qw, pl, values);
                    continue;
                }
                for &[dst, src, count] in runs {
                    let to = &mut planes[row + dst..][..count];
                    match sw {
                        1 => super::copy(to, &values[src..]),
                        _ => super::strided(to, &values[src..], sw, |_, v| v),
                    }
                }
            }
            for o in c * multiplier..(c + 1) * multiplier {
                let w_o = &weight[o * kh * kw..(o + 1) * kh * kw];
                let b = bias.map_or(0.0, |b| b[o]);
                let out_c = &mut out[o * plane..(o + 1) * plane];
                match (<&[f32; 9]>::try_from(w_o), <&[usize; 9]>::try_from(offsets)) {
                    // The 3×3 kernel of nearly every network, its taps unrolled; rows of
                    // eight outputs or more stored straight into the output.
                    (Ok(w), Ok(offsets)) if d.ow >= 8 => {
                        row_taps(w, offsets, planes, b, qw, out_c.chunks_exact_mut(d.ow));
                        continue;
                    }
                    (Ok(w), Ok(offsets)) => taps(w, offsets, planes, b, acc),
                    _ => {
                        for (t, (&wv, &offset)) in w_o.iter().zip(offsets).enumerate() {
                            let values = &planes[offset..offset + span];
                            for (sum, &v) in acc.iter_mut().zip(values) {
                                if t == 0 {
                                    *sum = b;
                                }
                                *sum += wv * v;
                            }
                        }
                    }
                }
                for (row, sums) in out_c.chunks_exact_mut(d.ow).zip(acc.chunks(qw)) {
                    super::copy(row, sums);
                }
            }
        }
    }

    /// [`taps`] row by row into the output: output row `oy`'s values at phase position
    /// `oy·qw + ox`, eight at a time (the last eight overlapping the ones before; rows have
    /// eight or more). Rows whose reads would pass the planes are left as they are (the
    /// caller sized the planes for every read).
    #[inline(always)]
    fn row_taps<'o, const N: usize>(
        weights: &[f32; N],
        offsets: &[usize; N],
        planes: &[f32],
        bias: f32,
        qw: usize,
        rows: impl Iterator<Item = &'o mut [f32]>,
    ) {
        let farthest = offsets.iter().copied().max().unwrap_or(0);
        for (oy, row) in rows.enumerate() {
            let ow = row.len();
            let start = oy * qw;
            if ow < 8 || start + farthest + ow > planes.len() {
                continue;
            }
            let reads: [&[f32]; N] = core::array::from_fn(|t| &planes[start + offsets[t]..][..ow]);
            for v in 0..ow.div_ceil(8) {
                let s = (8 * v).min(ow - 8);
                let mut sums = [bias; 8];
                for (&wv, read) in weights.iter().zip(&reads) {
                    let values: &[f32; 8] = read[s..s + 8].try_into().unwrap_or(&[0.0; 8]);
                    for (sum, &v) in sums.iter_mut().zip(values) {
                        *sum += wv * v;
                    }
                }
                if let Ok(slots) = <&mut [f32; 8]>::try_from(&mut row[s..s + 8]) {
                    *slots = sums;
                }
            }
        }
    }

    /// Whether the blocked kernels run a step: the AVX2 build and up on x86-64 (the portable
    /// one keeps the microcontrollers' strategies, so that `FERRITE_CPU_SIMD=portable` tests
    /// them), a non-empty window and output, operands as long as the sizes say.
    #[inline(always)]
    fn usable(a: &DepthwiseArgs<'_>, out: &[f32]) -> bool {
        #[cfg(target_arch = "x86_64")]
        if crate::isa::level() < crate::isa::Level::Avx2 {
            return false;
        }
        let (d, [kh, kw]) = (a.d, a.win.kernel);
        [
            d.oh,
            d.ow,
            kh,
            kw,
            a.multiplier,
            a.win.stride[0],
            a.win.stride[1],
        ]
        .iter()
        .all(|&v| v > 0)
            && a.x.len() >= d.c * d.h * d.w
            && out.len() >= d.oc * d.oh * d.ow
            && a.weight.len() >= d.oc * kh * kw
            && a.bias.is_none_or(|b| b.len() >= d.oc)
    }

    /// [`super::depthwise_masked`]'s geometry (stride 1, output as wide as the input) with
    /// each vector of eight outputs summed over every tap in registers: the plane copied once
    /// per channel between zero rows (one contiguous copy), each tap's eight values read at a
    /// constant shift of the output position and the ones that wrap into a neighbouring row
    /// cleared by a bit mask per kernel column; the outputs stored in place. False where it
    /// does not fit (the masked passes run).
    #[inline(always)]
    pub(super) fn masked(a: &DepthwiseArgs<'_>, out: &mut [f32]) -> bool {
        if !usable(a, out) {
            return false;
        }
        let DepthwiseArgs {
            win,
            d,
            multiplier,
            x,
            weight,
            bias,
        } = *a;
        let [kh, kw] = win.kernel;
        let [dh, dw] = win.dilation;
        let (pt, pl) = (win.pads[0], win.pads[1]);
        let (w, plane) = (d.w, d.oh * d.ow);
        // Rows of the padded copy: every output row's reach; a guard of `pl` values before it
        // (the first output's leftmost tap) and `(kw − 1)·dw` after it (the last's rightmost).
        let rows = (d.oh - 1) + (kh - 1) * dh + 1;
        let guard = pl.max((kw - 1) * dw);
        // The 3×3 kernel only (its taps unrolled); others run the masked passes.
        let fits = [kh, kw] == [3, 3]
            && d.ow == w
            && plane >= 8
            && win.stride == [1, 1]
            && pt < rows
            && rows * w <= 1 << 24;
        if !fits {
            return false;
        }
        // Tap (ky, kx) of output p reads padded[p + shift]: row oy + ky·dh of the padded copy
        // (input row − pt), column ox + kx·dw − pl, counted from the guard.
        let shifts: [usize; 9] =
            core::array::from_fn(|t| (t / 3) * dh * w + (t % 3) * dw + guard - pl);
        // masks[kx][p]: all ones where output column p mod w reads an input column.
        // Row by row, in plain loops (a division per output, then nested iterator adapters,
        // had been a twentieth of DS-CNN's time).
        let mut masks: Vec<u32> = Vec::with_capacity(kw * plane);
        for kx in 0..kw {
            for _ in 0..d.oh {
                for ox in 0..w {
                    let ix = (ox + kx * dw).wrapping_sub(pl);
                    masks.push(if ix < w { u32::MAX } else { 0 });
                }
            }
        }
        let (mut padded, acc) = BUFFERS.take();
        padded.clear();
        padded.resize(guard + rows * w + guard, 0.0);
        let job = MaskedJob {
            multiplier,
            x: x.chunks_exact(d.h * w).take(d.c.min(d.oc / multiplier)),
            copied: d.h.min(rows - pt) * w,
            start: guard + pt * w,
            weight,
            bias,
            shifts: &shifts,
            masks: &masks,
            plane,
        };
        // In a function of its own, built for AVX2 on x86-64 (as `depthwise`).
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `usable` returned true: the AVX2 level runs (the CPU has AVX2 and FMA).
        #[allow(unsafe_code)]
        unsafe {
            masked_channels_avx2(job, &mut padded, out)
        };
        #[cfg(not(target_arch = "x86_64"))]
        masked_channels(job, &mut padded, out);
        BUFFERS.set((padded, acc));
        true
    }

    /// What [`masked_channels`] needs of a step.
    struct MaskedJob<'a> {
        multiplier: usize,
        /// The input channels.
        x: core::iter::Take<core::slice::ChunksExact<'a, f32>>,
        /// Values of each input channel any output reads (its first ones).
        copied: usize,
        /// Where the input's first value goes in the padded copy.
        start: usize,
        weight: &'a [f32],
        bias: Option<&'a [f32]>,
        shifts: &'a [usize; 9],
        masks: &'a [u32],
        plane: usize,
    }

    /// [`masked_channels`] built for AVX2 and FMA.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    #[allow(unsafe_code)]
    unsafe fn masked_channels_avx2(job: MaskedJob<'_>, padded: &mut [f32], out: &mut [f32]) {
        masked_channels(job, padded, out)
    }

    /// Every output channel of [`masked`]: the input channel copied into `padded` once, the
    /// taps of each output channel it feeds summed in registers.
    #[inline(always)]
    fn masked_channels(job: MaskedJob<'_>, padded: &mut [f32], out: &mut [f32]) {
        let MaskedJob {
            multiplier,
            x,
            copied,
            start,
            weight,
            bias,
            shifts,
            masks,
            plane,
        } = job;
        for (c, source) in x.enumerate() {
            super::copy(&mut padded[start..][..copied], &source[..copied]);
            for o in c * multiplier..(c + 1) * multiplier {
                let weights: [f32; 9] = core::array::from_fn(|t| weight[o * 9 + t]);
                let b = bias.map_or(0.0, |b| b[o]);
                let out_c = &mut out[o * plane..(o + 1) * plane];
                masked_taps::<9, 3>(&weights, shifts, masks, padded, b, out_c);
            }
        }
    }

    /// `out[p] = bias + Σ_t w[t] · (padded[shifts[t] + p] where masks[t mod KW][p])`, eight
    /// outputs at a time in registers (the last eight overlapping the ones before). The caller
    /// sized `padded` and `masks` for every read (checked again here: nothing is written
    /// otherwise).
    #[inline(always)]
    fn masked_taps<const N: usize, const KW: usize>(
        weights: &[f32; N],
        shifts: &[usize; N],
        masks: &[u32],
        padded: &[f32],
        bias: f32,
        out: &mut [f32],
    ) {
        let plane = out.len();
        let (Some(&farthest), true) = (shifts.iter().max(), plane >= 8) else {
            return;
        };
        if farthest + plane > padded.len() || masks.len() < KW * plane {
            return;
        }
        let rows: [&[f32]; N] = core::array::from_fn(|t| &padded[shifts[t]..][..plane]);
        let columns: [&[u32]; KW] = core::array::from_fn(|kx| &masks[kx * plane..][..plane]);
        for v in 0..plane.div_ceil(8) {
            let s = (8 * v).min(plane - 8);
            let mut sums = [bias; 8];
            for (t, (&wv, row)) in weights.iter().zip(&rows).enumerate() {
                let values: &[f32; 8] = row[s..s + 8].try_into().unwrap_or(&[0.0; 8]);
                let mask: &[u32; 8] = columns[t % KW][s..s + 8].try_into().unwrap_or(&[0; 8]);
                for ((sum, &x), &m) in sums.iter_mut().zip(values).zip(mask) {
                    *sum += wv * f32::from_bits(x.to_bits() & m);
                }
            }
            if let Ok(slots) = <&mut [f32; 8]>::try_from(&mut out[s..s + 8]) {
                *slots = sums;
            }
        }
    }

    /// `acc[s] = bias + Σ_t w[t] · planes[offsets[t] + s]`, eight outputs at a time summed in
    /// registers (the last eight overlapping the ones before: computed twice, identically).
    /// The caller checked that every tap's `acc.len()` values lie within `planes`.
    #[inline(always)]
    fn taps<const N: usize>(
        weights: &[f32; N],
        offsets: &[usize; N],
        planes: &[f32],
        bias: f32,
        acc: &mut [f32],
    ) {
        let span = acc.len();
        if span < 8 {
            return;
        }
        let rows: [&[f32]; N] = core::array::from_fn(|t| &planes[offsets[t]..][..span]);
        for v in 0..span.div_ceil(8) {
            let s = (8 * v).min(span - 8);
            let mut sums = [bias; 8];
            for (&wv, row) in weights.iter().zip(&rows) {
                let values: &[f32; 8] = row[s..s + 8].try_into().unwrap_or(&[0.0; 8]);
                for (sum, &v) in sums.iter_mut().zip(values) {
                    *sum += wv * v;
                }
            }
            let slots: &mut [f32; 8] = match (&mut acc[s..s + 8]).try_into() {
                Ok(slots) => slots,
                Err(_) => return,
            };
            *slots = sums;
        }
    }

    /// Tap `(ky, kx)`'s first value in the phase planes: phase `(ky·dh mod sh, kx·dw mod sw)`,
    /// shifted by `(ky·dh / sh, kx·dw / sw)`.
    fn tap_offsets(win: &Window, [qh, qw]: [usize; 2]) -> Vec<usize> {
        let [kh, kw] = win.kernel;
        let [sh, sw] = win.stride;
        let [dh, dw] = win.dilation;
        (0..kh)
            .flat_map(|ky| {
                (0..kw).map(move |kx| {
                    let (ry, sy) = ((ky * dh) % sh, (ky * dh) / sh);
                    let (rx, sx) = ((kx * dw) % sw, (kx * dw) / sw);
                    (ry * sw + rx) * qh * qw + sy * qw + sx
                })
            })
            .collect()
    }
}

/// Depthwise convolution: output channel `o` reads input channel `o / multiplier` only.
// Out of line on a microcontroller: `conv`'s own frame then holds only what its GEMM path
// needs, and the inference stack is that path's, not the sum of every strategy's locals.
#[cfg_attr(not(feature = "std"), inline(never))]
#[cfg_attr(feature = "std", inline(always))]
fn depthwise_conv(
    win: &Window,
    d: ConvDims,
    multiplier: usize,
    x: &[f32],
    weight: &[f32],
    out: &mut [f32],
) {
    let [kh, kw] = win.kernel;
    let [sh, sw] = win.stride;
    let [dh, dw] = win.dilation;
    let (pt, pl) = (win.pads[0], win.pads[1]);
    let plane = d.oh * d.ow;
    // Checked by the verifier; a plan without them computes nothing.
    let Some(multiplier) = NonZeroUsize::new(multiplier) else {
        return;
    };
    if sh == 0 || sw == 0 {
        return;
    }
    for o in 0..d.oc {
        let start = (o / multiplier) * d.h * d.w;
        let (Some(x_c), Some(out_c), Some(w_o)) = (
            x.get(start..start + d.h * d.w),
            out.get_mut(o * plane..(o + 1) * plane),
            weight.get(o * kh * kw..(o + 1) * kh * kw),
        ) else {
            return;
        };
        for ky in 0..kh {
            let (oy0, oy1) = valid_range(d.oh, d.h, sh, pt, ky * dh);
            for kx in 0..kw {
                let Some(&wv) = w_o.get(ky * kw + kx) else {
                    return;
                };
                let (ox0, ox1) = valid_range(d.ow, d.w, sw, pl, kx * dw);
                if ox0 >= ox1 {
                    continue;
                }
                let ix0 = ox0 * sw + kx * dw - pl;
                for oy in oy0..oy1 {
                    let iy = oy * sh + ky * dh - pt;
                    let (Some(src), Some(dst)) = (
                        x_c.get(iy * d.w + ix0..(iy + 1) * d.w),
                        out_c.get_mut(oy * d.ow + ox0..oy * d.ow + ox1),
                    ) else {
                        continue;
                    };
                    if sw == 1 {
                        for (dv, sv) in dst.iter_mut().zip(src) {
                            *dv += wv * sv;
                        }
                    } else {
                        strided(dst, src, sw, |d, v| d + wv * v);
                    }
                }
            }
        }
    }
}

/// Transposed convolution by scattering each input pixel's contribution.
// Its own function on a microcontroller: inlined into a firmware's step dispatch, which is
// built for size, its loops were left as iterator calls (MobileNet's depthwise 2.7x slower).
#[cfg_attr(feature = "std", inline(always))]
pub fn conv_transpose(
    p: &ConvTranspose,
    d: ConvDims,
    x: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
) {
    // Checked by the verifier, as every size below; a plan without them computes nothing.
    let Some(groups) = NonZeroUsize::new(p.group) else {
        return;
    };
    let g = groups.get();
    let icg = d.c / groups;
    let ocg = d.oc / groups;
    let [kh, kw] = p.window.kernel;
    let [sh, sw] = p.window.stride;
    if sh == 0 || sw == 0 {
        return;
    }
    let [dh, dw] = p.window.dilation;
    let (pt, pl) = (p.window.pads[0], p.window.pads[1]);
    let plane = d.oh * d.ow;
    let in_plane = d.h * d.w;
    for b in 0..d.n {
        let Some(out_b) = out.get_mut(b * d.oc * plane..(b + 1) * d.oc * plane) else {
            return;
        };
        init_bias(out_b, bias, plane);
        for grp in 0..g {
            for ic in 0..icg {
                let cin = grp * icg + ic;
                let at = (b * d.c + cin) * in_plane;
                let Some(x_c) = x.get(at..at + in_plane) else {
                    return;
                };
                for oc in 0..ocg {
                    let cout = grp * ocg + oc;
                    let w_at = (cin * ocg + oc) * kh * kw;
                    let (Some(w_k), Some(out_c)) = (
                        weight.get(w_at..w_at + kh * kw),
                        out_b.get_mut(cout * plane..(cout + 1) * plane),
                    ) else {
                        return;
                    };
                    // Input rows/columns whose contribution lands inside the output, per tap:
                    // the same range computation as a forward window, with roles swapped.
                    for ky in 0..kh {
                        let (iy0, iy1) = valid_range(d.h, d.oh, sh, pt, ky * dh);
                        for kx in 0..kw {
                            let Some(&wv) = w_k.get(ky * kw + kx) else {
                                return;
                            };
                            let (ix0, ix1) = valid_range(d.w, d.ow, sw, pl, kx * dw);
                            if ix0 >= ix1 {
                                continue;
                            }
                            let ox0 = ix0 * sw + kx * dw - pl;
                            for iy in iy0..iy1 {
                                let oy = iy * sh + ky * dh - pt;
                                let (Some(row), Some(src)) = (
                                    out_c.get_mut(oy * d.ow + ox0..(oy + 1) * d.ow),
                                    x_c.get(iy * d.w + ix0..iy * d.w + ix1),
                                ) else {
                                    continue;
                                };
                                for (o, v) in row.iter_mut().step_by(sw).zip(src) {
                                    *o += wv * v;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_ranges() {
        // out 5, input 5, stride 1, pad 1, tap 0: o-1 in [0,5) -> o in [1, 5)
        assert_eq!(valid_range(5, 5, 1, 1, 0), (1, 5));
        // tap 2: o+1 in [0,5) -> o in [0,4)
        assert_eq!(valid_range(5, 5, 1, 1, 2), (0, 4));
        // stride 2, pad 0, tap 0, len 5, out 3 -> o in [0,3)
        assert_eq!(valid_range(3, 5, 2, 0, 0), (0, 3));
        // tap beyond everything
        assert_eq!(valid_range(2, 1, 1, 0, 3), (0, 0));
    }
}

#[cfg(test)]
mod strategy_tests {
    extern crate std;
    use super::*;
    use ferrite_hal::geometry::{conv_out, conv_scratch_elements};
    use ferrite_hal::Activation;
    use std::vec;
    use std::vec::Vec;

    /// Direct definition of a grouped convolution, for comparison.
    fn naive(p: &Conv, d: ConvDims, x: &[f32], w: &[f32], bias: &[f32]) -> Vec<f32> {
        let win = &p.window;
        let (icg, ocg) = (d.c / p.group, d.oc / p.group);
        let mut out = vec![0.0; d.n * d.oc * d.oh * d.ow];
        for o in 0..d.oc {
            let g = o / ocg;
            for oy in 0..d.oh {
                for ox in 0..d.ow {
                    let mut s = bias[o];
                    for ic in 0..icg {
                        for ky in 0..win.kernel[0] {
                            for kx in 0..win.kernel[1] {
                                let iy = (oy * win.stride[0] + ky * win.dilation[0]) as isize
                                    - win.pads[0] as isize;
                                let ix = (ox * win.stride[1] + kx * win.dilation[1]) as isize
                                    - win.pads[1] as isize;
                                if iy < 0 || ix < 0 || iy >= d.h as isize || ix >= d.w as isize {
                                    continue;
                                }
                                let xv =
                                    x[((g * icg + ic) * d.h + iy as usize) * d.w + ix as usize];
                                let wv =
                                    w[((o * icg + ic) * win.kernel[0] + ky) * win.kernel[1] + kx];
                                s += xv * wv;
                            }
                        }
                    }
                    out[(o * d.oh + oy) * d.ow + ox] = s;
                }
            }
        }
        out
    }

    /// 3 × 3 stride-2 depthwise layers (x86-64's `stride_two` kernel where AVX2 runs) over
    /// random sizes, paddings and multipliers, rows narrower and wider than eight: bit for bit
    /// the bias plus the nine taps' products in order, padding read as zeros, as the
    /// phase-plane kernels sum them.
    #[test]
    fn stride_two_depthwise_is_bit_exact() {
        let mut seed = 11u64;
        let mut next = |n: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % n
        };
        for case in 0..200 {
            // Two groups or more: one would be an ordinary convolution.
            let (c, mult) = (2 + next(4), 1 + next(2));
            let (h, w) = (1 + next(30), 1 + next(30));
            let pads = [next(2), next(2), next(2), next(2)];
            let window = Window {
                kernel: [3, 3],
                stride: [2, 2],
                dilation: [1, 1],
                pads,
            };
            let (Some(oh), Some(ow)) = (
                conv_out(h, 3, 2, 1, pads[0], pads[2]),
                conv_out(w, 3, 2, 1, pads[1], pads[3]),
            ) else {
                continue;
            };
            let p = Conv {
                window,
                group: c,
                activation: Activation::None,
            };
            let d = ConvDims {
                n: 1,
                c,
                h,
                w,
                oc: c * mult,
                oh,
                ow,
            };
            let value = |i: usize| ((i * 7919 + case) % 23) as f32 / 7.0 - 1.5;
            let x: Vec<f32> = (0..c * h * w).map(value).collect();
            let wt: Vec<f32> = (0..c * mult * 9).map(|i| value(i + 5)).collect();
            let bias: Vec<f32> = (0..c * mult).map(|i| value(i + 11)).collect();
            let need = conv_scratch_elements(&p, 1, oh, ow).unwrap_or(0);
            let mut scratch = vec![0.0; need];
            let mut out = vec![f32::NAN; c * mult * oh * ow];
            conv(
                StepContext::default(),
                &p,
                d,
                &x,
                &wt,
                Some(&bias),
                &mut out,
                &mut scratch,
                false,
            );
            for o in 0..c * mult {
                for oy in 0..oh {
                    for ox in 0..ow {
                        let mut sum = bias[o];
                        for ky in 0..3 {
                            for kx in 0..3 {
                                let iy = (2 * oy + ky).checked_sub(pads[0]).filter(|&i| i < h);
                                let ix = (2 * ox + kx).checked_sub(pads[1]).filter(|&i| i < w);
                                let v = match (iy, ix) {
                                    (Some(iy), Some(ix)) => x[(o / mult * h + iy) * w + ix],
                                    _ => 0.0,
                                };
                                sum += wt[o * 9 + ky * 3 + kx] * v;
                            }
                        }
                        let got = out[(o * oh + oy) * ow + ox];
                        assert_eq!(
                            got.to_bits(),
                            sum.to_bits(),
                            "case {case}: {c}x{mult} {h}x{w} {pads:?} at {o},{oy},{ox}"
                        );
                    }
                }
            }
        }
    }

    /// 3 × 3 depthwise layers of 8 to 24 channels on small planes (x86-64's eight-channel
    /// kernel, `depthwise_lanes`, where AVX2 runs), stride 1 and 2, random sizes and paddings,
    /// each fused activation: bit for bit the bias plus the nine taps' products in order,
    /// padding read as zeros, then the activation.
    #[test]
    fn small_depthwise_planes_are_bit_exact() {
        let mut seed = 5u64;
        let mut next = |n: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % n
        };
        for case in 0..150 {
            let c = 8 * (1 + next(3));
            let stride = 1 + next(2);
            let (h, w) = (1 + next(20), 1 + next(20));
            let pads = [next(2), next(2), next(2), next(2)];
            let (Some(oh), Some(ow)) = (
                conv_out(h, 3, stride, 1, pads[0], pads[2]),
                conv_out(w, 3, stride, 1, pads[1], pads[3]),
            ) else {
                continue;
            };
            let activation = match next(3) {
                0 => Activation::None,
                1 => Activation::Relu,
                _ => Activation::Clip {
                    min: -0.5,
                    max: 1.0,
                },
            };
            let p = Conv {
                window: Window {
                    kernel: [3, 3],
                    stride: [stride; 2],
                    dilation: [1, 1],
                    pads,
                },
                group: c,
                activation,
            };
            let d = ConvDims {
                n: 1,
                c,
                h,
                w,
                oc: c,
                oh,
                ow,
            };
            let value = |i: usize| ((i * 7919 + case) % 23) as f32 / 7.0 - 1.5;
            let x: Vec<f32> = (0..c * h * w).map(value).collect();
            let wt: Vec<f32> = (0..c * 9).map(|i| value(i + 5)).collect();
            let bias: Vec<f32> = (0..c).map(|i| value(i + 11)).collect();
            let need = conv_scratch_elements(&p, 1, oh, ow).unwrap_or(0);
            let mut scratch = vec![0.0; need];
            let mut out = vec![f32::NAN; c * oh * ow];
            if !conv(
                StepContext::default(),
                &p,
                d,
                &x,
                &wt,
                Some(&bias),
                &mut out,
                &mut scratch,
                false,
            ) {
                crate::micro::activation::activate_fused::<{ ferrite_hal::ALL_OPS }>(
                    activation, &mut out,
                );
            }
            for o in 0..c {
                for oy in 0..oh {
                    for ox in 0..ow {
                        let mut sum = bias[o];
                        for ky in 0..3 {
                            for kx in 0..3 {
                                let iy = (stride * oy + ky).checked_sub(pads[0]).filter(|&i| i < h);
                                let ix = (stride * ox + kx).checked_sub(pads[1]).filter(|&i| i < w);
                                let v = match (iy, ix) {
                                    (Some(iy), Some(ix)) => x[(o * h + iy) * w + ix],
                                    _ => 0.0,
                                };
                                sum += wt[o * 9 + ky * 3 + kx] * v;
                            }
                        }
                        let want = match activation {
                            Activation::Relu => crate::base::math::max(sum, 0.0),
                            Activation::Clip { min, max } => {
                                crate::base::math::min(crate::base::math::max(sum, min), max)
                            }
                            _ => sum,
                        };
                        let got = out[(o * oh + oy) * ow + ox];
                        assert_eq!(
                            got.to_bits(),
                            want.to_bits(),
                            "case {case}: {c} channels {h}x{w} stride {stride} {pads:?} at {o},{oy},{ox}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn every_strategy_matches_the_definition() {
        // (channels, multiplier, h, w, kernel, stride, dilation, pads t l b r)
        let cases = [
            (4, 1, 25, 5, [3, 3], [1, 1], [1, 1], [1, 1, 1, 1]), // masked (DS-CNN)
            (3, 2, 6, 7, [3, 3], [1, 1], [1, 1], [0, 1, 2, 1]), // masked, uneven rows, multiplier 2
            (2, 1, 9, 8, [3, 3], [1, 1], [2, 2], [2, 2, 2, 2]), // masked, dilated
            (2, 1, 7, 6, [3, 3], [1, 1], [1, 1], [0, 0, 0, 0]), // padded (valid padding)
            (2, 1, 70, 70, [5, 5], [1, 1], [1, 1], [2, 2, 2, 2]), // padded (plane over the mask budget)
            (3, 1, 9, 9, [3, 3], [2, 2], [1, 1], [0, 0, 1, 1]),   // padded phases (stride 2)
            (2, 2, 11, 10, [3, 3], [2, 3], [2, 1], [2, 1, 1, 2]), // phases, mixed strides, dilated
            (2, 1, 200, 200, [3, 3], [2, 2], [1, 1], [1, 1, 1, 1]), // direct (phases over budget)
            (8, 1, 2, 12, [5, 5], [1, 1], [1, 1], [2, 2, 2, 2]), // masked, plane under the kernel (OCR)
            (2, 1, 1, 1, [3, 2], [1, 1], [1, 1], [0, 1, 2, 0]),  // masked, 1×1 plane
        ];
        let mut seen = vec![];
        for (c, mult, h, w, kernel, stride, dilation, pads) in cases {
            let p = Conv {
                window: Window {
                    kernel,
                    stride,
                    dilation,
                    pads,
                },
                group: c,
                activation: Activation::None,
            };
            let oh = conv_out(h, kernel[0], stride[0], dilation[0], pads[0], pads[2]).unwrap();
            let ow = conv_out(w, kernel[1], stride[1], dilation[1], pads[1], pads[3]).unwrap();
            let d = ConvDims {
                n: 1,
                c,
                h,
                w,
                oc: c * mult,
                oh,
                ow,
            };
            let x: Vec<f32> = (0..c * h * w)
                .map(|i| ((i * 7 % 11) as f32 - 5.0) * 0.3)
                .collect();
            let wt: Vec<f32> = (0..c * mult * kernel[0] * kernel[1])
                .map(|i| ((i * 5 % 9) as f32 - 4.0) * 0.2)
                .collect();
            let bias: Vec<f32> = (0..c * mult).map(|i| i as f32 * 0.1).collect();
            let mut scratch = vec![0.0; conv_scratch_elements(&p, 1, oh, ow).unwrap()];
            let mut out = vec![0.0; c * mult * oh * ow];
            conv(
                StepContext::default(),
                &p,
                d,
                &x,
                &wt,
                Some(&bias),
                &mut out,
                &mut scratch,
                false,
            );
            let want = naive(&p, d, &x, &wt, &bias);
            for (i, (a, b)) in out.iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() < 1e-4,
                    "{:?} at {i}: {a} vs {b}",
                    depthwise_strategy(&p, oh, ow)
                );
            }
            seen.push(ferrite_hal::geometry::depthwise_strategy(&p, oh, ow));
        }
        for strategy in [Depthwise::Masked, Depthwise::Padded, Depthwise::Direct] {
            assert!(seen.contains(&strategy), "no case runs {strategy:?}");
        }
    }

    /// The taps read in place (phase planes, bands of output rows) give the unfolded product's
    /// result bit for bit: each output sums the same products in the same order. Random
    /// geometries, with scratch from one band row to the whole output.
    #[cfg(feature = "std")]
    #[test]
    fn taps_in_place_equal_the_unfolded_product_bit_for_bit() {
        if !crate::micro::sgemm::simd_available() {
            return;
        }
        let mut seed = 0x9e37_79b9_u32;
        let mut next = move |below: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed as usize % below
        };
        let (mut ran, mut strided, mut banded) = (0, 0, 0);
        for _ in 0..400 {
            let (c, oc) = (1 + next(9), 1 + next(20));
            let (h, w) = (1 + next(18), 1 + next(18));
            let kernel = [1 + next(4), 1 + next(4)];
            let stride = [1 + next(3), 1 + next(3)];
            let dilation = [1 + next(2), 1 + next(2)];
            let pads = [next(3), next(3), next(3), next(3)];
            let (Some(oh), Some(ow)) = (
                conv_out(h, kernel[0], stride[0], dilation[0], pads[0], pads[2]),
                conv_out(w, kernel[1], stride[1], dilation[1], pads[1], pads[3]),
            ) else {
                continue;
            };
            if oh == 0 || ow == 0 {
                continue;
            }
            let win = Window {
                kernel,
                stride,
                dilation,
                pads,
            };
            let d = ConvDims {
                n: 1,
                c,
                h,
                w,
                oc,
                oh,
                ow,
            };
            let k = c * kernel[0] * kernel[1];
            let x: Vec<f32> = (0..c * h * w)
                .map(|_| next(2001) as f32 / 1000.0 - 1.0)
                .collect();
            let wt: Vec<f32> = (0..oc * k)
                .map(|_| next(2001) as f32 / 999.0 - 1.0)
                .collect();
            // A channel without bias now and then (zero), as a convolution without one.
            let bias: Vec<f32> = (0..oc).map(|_| next(11) as f32 / 3.0).collect();
            let with_bias = next(4) != 0;
            let (hph, wph) = (
                oh + (kernel[0] - 1) * dilation[0] / stride[0],
                ow + (kernel[1] - 1) * dilation[1] / stride[1],
            );
            let planes = c * stride[0] * stride[1] * hph * wph;
            let band_rows = 1 + next(oh);
            let mut scratch = vec![f32::NAN; planes + oc * wph * band_rows];
            let mut in_place = vec![f32::NAN; oc * oh * ow];
            let job = InPlace {
                ctx: StepContext::default(),
                win: &win,
                d,
                icg: c,
                ocg: oc,
                x: &x,
                weight: &wt,
                bias: with_bias.then_some(&bias[..]),
                activation: Activation::None,
                constant: false,
            };
            assert!(conv_in_place(job, &mut in_place, &mut scratch).is_some());
            let mut cols = vec![0.0; k * oh * ow];
            im2col(&win, d, c, &x, &mut cols, 0, oh * ow);
            // The unfolded matrix through the same kernel, its rows one after another (plain
            // products sum narrow tails as dot products instead).
            let mut unfolded = vec![f32::NAN; oc * oh * ow];
            init_bias(&mut unfolded, with_bias.then_some(&bias[..]), oh * ow);
            let a = Mat {
                data: &wt,
                stride: k,
            };
            let rows: Vec<usize> = (0..k).map(|q| q * oh * ow).collect();
            let plane = oh * ow;
            assert!(crate::micro::sgemm::sgemm_rows(
                StepContext::default(),
                oc,
                plane,
                a,
                &cols,
                &rows,
                &mut unfolded,
                plane,
                false
            ));
            assert!(
                in_place
                    .iter()
                    .zip(&unfolded)
                    .all(|(p, u)| p.to_bits() == u.to_bits()),
                "{c}->{oc} {h}x{w} {win:?}"
            );
            ran += 1;
            strided += usize::from(stride != [1, 1]);
            banded += usize::from(band_rows < oh);
        }
        assert!(
            ran >= 200 && strided >= 100 && banded >= 50,
            "{ran} {strided} {banded}"
        );
    }

    #[test]
    fn im2col_tiles_and_pointwise_match_the_definition() {
        // (in, out, group, h, w, kernel, stride, dilation, pads): tiled im2col (plane past the
        // budget), grouped, strided + dilated, pointwise.
        let cases = [
            (3, 4, 1, 120, 120, [3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
            (4, 6, 2, 9, 11, [3, 2], [1, 1], [1, 1], [1, 0, 1, 1]),
            (2, 3, 1, 13, 12, [3, 3], [2, 3], [2, 1], [2, 1, 0, 2]),
            (5, 7, 1, 6, 6, [1, 1], [1, 1], [1, 1], [0, 0, 0, 0]),
        ];
        for (c, oc, group, h, w, kernel, stride, dilation, pads) in cases {
            let p = Conv {
                window: Window {
                    kernel,
                    stride,
                    dilation,
                    pads,
                },
                group,
                activation: Activation::None,
            };
            let oh = conv_out(h, kernel[0], stride[0], dilation[0], pads[0], pads[2]).unwrap();
            let ow = conv_out(w, kernel[1], stride[1], dilation[1], pads[1], pads[3]).unwrap();
            let d = ConvDims {
                n: 1,
                c,
                h,
                w,
                oc,
                oh,
                ow,
            };
            let x: Vec<f32> = (0..c * h * w)
                .map(|i| ((i * 7 % 11) as f32 - 5.0) * 0.3)
                .collect();
            let wt: Vec<f32> = (0..oc * c / group * kernel[0] * kernel[1])
                .map(|i| ((i * 5 % 9) as f32 - 4.0) * 0.2)
                .collect();
            let bias: Vec<f32> = (0..oc).map(|i| i as f32 * 0.1).collect();
            let mut scratch = vec![0.0; conv_scratch_elements(&p, c / group, oh, ow).unwrap()];
            let mut out = vec![0.0; oc * oh * ow];
            conv(
                StepContext::default(),
                &p,
                d,
                &x,
                &wt,
                Some(&bias),
                &mut out,
                &mut scratch,
                false,
            );
            let want = naive(&p, d, &x, &wt, &bias);
            for (i, (a, b)) in out.iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() < 1e-3,
                    "case {c}->{oc} g{group} at {i}: {a} vs {b}"
                );
            }
        }
    }
}
