//! Convolutions over NCHW tensors (1-D convolutions arrive as height-1 2-D ones).
//!
//! Three strategies, chosen from the parameters exactly as `conv_scratch_elements` says:
//! pointwise (1×1, stride 1, no padding) is one matrix product per group on the input in place;
//! depthwise runs directly, one vectorised row at a time; everything else unfolds one group's
//! input into the planned scratch (im2col) and multiplies. On a host with SIMD kernels, the
//! last instead copies its input once into zero-padded phase planes and reads every tap there in
//! place (`conv_in_place`), nine times less copying for a 3×3 kernel, when the scratch holds
//! them.

#[cfg(feature = "std")]
use super::depthwise_phases;
#[cfg(feature = "std")]
use super::in_place::{conv_in_place, InPlace};
use super::rows::{
    copy, every, init_bias, masked_multiply_add, multiply_add, strided, valid_range, zero,
    DepthwiseArgs,
};
use crate::base::context::StepContext;
use crate::base::geometry::ConvDims;
use crate::micro::sgemm::{sgemm, Mat};
use core::num::NonZeroUsize;
use ferrite_hal::geometry::{
    conv_scratch_elements, conv_tile_columns, depthwise_strategy, Depthwise,
};
use ferrite_hal::op::{Conv, ConvTranspose, Window};

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
                    (Depthwise::Masked, 8..=1024) => depthwise_phases::masked(&args, out_b),
                    _ => depthwise_phases::depthwise(&args, out_b),
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
            // (`channel_lanes`); otherwise the bias, then the product on top.
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
            let group = (icg, ocg, k, tile);
            if !unfolded_product(ctx, win, d, group, (x_g, w_g), out_g, scratch) {
                return false;
            }
        }
    }
    activated
}

/// One group's product by unfolded windows: `tile` output positions at a time, their windows
/// unfolded into `scratch` (im2col), then multiplied by the group's weights onto `out_g`
/// (which holds the bias). False where `scratch` is shorter than a tile's columns.
#[inline(always)]
fn unfolded_product(
    ctx: StepContext<'_>,
    win: &Window,
    d: ConvDims,
    (icg, ocg, k, tile): (usize, usize, usize, usize),
    (x_g, w_g): (&[f32], &[f32]),
    out_g: &mut [f32],
    scratch: &mut [f32],
) -> bool {
    let plane = d.oh * d.ow;
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
    true
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
