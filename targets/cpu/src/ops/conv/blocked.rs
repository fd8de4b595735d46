//! Convolutions whose input or output is channel-blocked (x86-64 with AVX2 or AVX-512,
//! `std`; the layout is [`crate::program::layout`]'s: `[channel / lanes][pixel][channel % lanes]`,
//! a block the lanes of this CPU's vectors).
//!
//! These are the channel-lane kernels ([`crate::ops::conv::channel_lanes`], [`crate::ops::conv::depthwise_lanes`]) with
//! their layout changes left out: a blocked output takes each tile's pixel vectors as they are
//! (no transpose into channel planes), a blocked input is read where its values lie (a 1 × 1
//! layer's terms are a block's lanes, then the next block's plane), and a depthwise layer's
//! channels-last plane is its blocked input copied row by row. The sums are the same, in the
//! same order, so every output is bit for bit the planar kernels'.

use super::rows::split_phases;
pub(crate) use crate::base::blocking::Blocking;
use crate::base::context::StepContext;
use crate::base::geometry::ConvDims;
pub(crate) use crate::ops::conv::channel_lanes::Residual;
use ferrite_hal::op::{Conv, Window};
use ferrite_hal::Activation;
use std::vec::Vec;

/// Whether [`conv`] runs a convolution of dimensions `d` with `blocking` (the layout planner
/// asks before it blocks a tensor): one image; a depthwise layer (3 × 3, stride 1 or 2, one
/// output a channel) blocked on both sides; or one group whose blocked sides have whole blocks
/// of channels and, with a planar output, that the channel-lane kernel takes anyway.
pub(crate) fn runs(p: &Conv, d: ConvDims, blocking: Blocking) -> bool {
    let Some(lanes) = crate::ops::conv::channel_lanes::lanes() else {
        return false;
    };
    let whole = |channels: usize| channels >= lanes && channels.is_multiple_of(lanes);
    if d.n != 1 || (blocking.input && !whole(d.c)) || (blocking.output && !whole(d.oc)) {
        return false;
    }
    let win = &p.window;
    if p.group > 1 && p.group == d.c && p.group == d.oc {
        return blocking.input && blocking.output && depthwise_shape(win);
    }
    if p.group != 1 {
        return false;
    }
    let [kh, kw] = win.kernel;
    // Saturating: a verified plan can still hold absurd geometry.
    let k = d.c.saturating_mul(kh).saturating_mul(kw);
    let plane = d.oh.saturating_mul(d.ow);
    let strided = win.kernel == [1, 1] && win.stride != [1, 1];
    blocking.output || crate::ops::conv::channel_lanes::will_run(k, d.oc, plane, strided)
}

/// The depthwise layers [`crate::ops::conv::depthwise_lanes`] runs: 3 × 3, undilated, stride 1 or 2.
fn depthwise_shape(win: &Window) -> bool {
    let [sh, sw] = win.stride;
    win.kernel == [3, 3] && win.dilation == [1, 1] && sh == sw && (sh == 1 || sh == 2)
}

/// A convolution with `blocking` (see [`runs`]), adding `residual` to each sum before the
/// activation (a fused Add; one group, blocked output only): a 3 × 3 stride-1 layer blocked on
/// both sides by Winograd's transform where the program allows it ([`crate::ops::conv::winograd`]),
/// others by the channel-lane tiles. `Some(whether the activation was applied)`, or `None`
/// with nothing written where it does not run (the caller then changes the layouts around the
/// planar kernels).
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv(
    ctx: StepContext<'_>,
    p: &Conv,
    d: ConvDims,
    x: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    constant: bool,
    (blocking, residual): (Blocking, Residual<'_>),
) -> Option<bool> {
    if !runs(p, d, blocking) {
        return None;
    }
    let fused_residual = !matches!(residual, Residual::None);
    if fused_residual && (p.group != 1 || !blocking.output) {
        return None;
    }
    let win = &p.window;
    let fused = crate::ops::conv::channel_lanes::fuses(p.activation);
    if p.group > 1 {
        let ran = crate::ops::conv::depthwise_lanes::run(
            ctx,
            win,
            d,
            x,
            weight,
            bias,
            p.activation,
            out,
            constant,
            true,
        );
        return ran.then_some(fused);
    }
    let lanes = crate::ops::conv::channel_lanes::lanes()?;
    let winograd = blocking.input && blocking.output && ctx.winograd();
    if winograd
        && crate::ops::conv::winograd::run(
            ctx,
            win,
            d,
            x,
            (weight, bias),
            p.activation,
            out,
            constant,
            residual,
        )
    {
        return Some(fused);
    }
    let ran = if win.kernel == [1, 1] && win.pads == [0; 4] {
        pointwise(
            ctx,
            win,
            d,
            x,
            (weight, bias),
            p.activation,
            out,
            (constant, (blocking, residual)),
            lanes,
        )
    } else {
        padded(
            ctx,
            win,
            d,
            x,
            (weight, bias),
            p.activation,
            out,
            (constant, (blocking, residual)),
            lanes,
        )
    };
    ran.then_some(fused)
}

std::thread_local! {
    /// Reused buffers: the terms' offsets, each output row's kernel rows inside the input,
    /// the padded input.
    static BUFFERS: core::cell::Cell<(Vec<usize>, Vec<u32>, Vec<f32>)> =
        const { core::cell::Cell::new((Vec::new(), Vec::new(), Vec::new())) };
}

/// A 1 × 1 layer without padding, at any stride: each input channel a term, read in place
/// (a blocked input's channel `c` is lane `c % lanes` of block `c / lanes`'s pixels). Also the
/// planar kernels' (`conv::conv`) channel-lane path. False, nothing written, where
/// `channel_lanes::run` declines.
#[allow(clippy::too_many_arguments)]
pub(super) fn pointwise(
    ctx: StepContext<'_>,
    win: &Window,
    d: ConvDims,
    x: &[f32],
    (weight, bias): (&[f32], Option<&[f32]>),
    activation: Activation,
    out: &mut [f32],
    (constant, (blocking, residual)): (bool, (Blocking, Residual<'_>)),
    lanes: usize,
) -> bool {
    let [sh, sw] = win.stride;
    let (scale, Some(plane)) = (if blocking.input { lanes } else { 1 }, d.h.checked_mul(d.w))
    else {
        return false;
    };
    let (Some(pitch), Some(step)) = (
        sh.checked_mul(d.w).and_then(|r| r.checked_mul(scale)),
        sw.checked_mul(scale),
    ) else {
        return false;
    };
    let (mut terms, rows, padded) = BUFFERS.take();
    terms.clear();
    terms.extend((0..d.c).map(|c| match blocking.input {
        true => c / lanes * plane * lanes + c % lanes,
        false => c * plane,
    }));
    let reading = crate::ops::conv::channel_lanes::Reading {
        input: x,
        taps: &terms,
        pitch,
        step,
        plane: [d.oh, d.ow],
        kernel: [1, 1],
        rows: &[],
    };
    let ran = crate::ops::conv::channel_lanes::run(
        ctx,
        &reading,
        weight,
        d.oc,
        bias,
        activation,
        out,
        constant,
        (blocking.output, residual),
    );
    BUFFERS.set((terms, rows, padded));
    ran
}

/// Any other kernel, one group: the input copied once, zero-padded (planar: a plane a channel;
/// blocked: a plane a block, each pixel a vector, so its rows copy as they are), every term
/// read there at the stride; tiles of output rows whose kernel rows read only padding leave
/// those terms out (as [`crate::ops::conv::channel_lanes::Reading::rows`] says). Also one group's path of
/// the planar kernels' in-place product (`d` that group's). False, nothing written, where
/// `channel_lanes::run` declines.
#[allow(clippy::too_many_arguments)]
pub(super) fn padded(
    ctx: StepContext<'_>,
    win: &Window,
    d: ConvDims,
    x: &[f32],
    (weight, bias): (&[f32], Option<&[f32]>),
    activation: Activation,
    out: &mut [f32],
    (constant, (blocking, residual)): (bool, (Blocking, Residual<'_>)),
    lanes: usize,
) -> bool {
    let [kh, kw] = win.kernel;
    let [sh, sw] = win.stride;
    let [dh, dw] = win.dilation;
    let scale = if blocking.input { lanes } else { 1 };
    // Every tap of every output: rows 0..(oh − 1)·sh + (kh − 1)·dh + 1 of the padded input.
    let sizes = (|| {
        let rows = (d.oh.checked_sub(1)?)
            .checked_mul(sh)?
            .checked_add((kh.checked_sub(1)?).checked_mul(dh)?)?
            .checked_add(1)?;
        let cols = (d.ow.checked_sub(1)?)
            .checked_mul(sw)?
            .checked_add((kw.checked_sub(1)?).checked_mul(dw)?)?
            .checked_add(1)?;
        let channel = rows.checked_mul(cols)?;
        let total = d.c.checked_mul(channel)?;
        let fits = x.len() >= d.c.checked_mul(d.h)?.checked_mul(d.w)?
            && total <= 1 << 26
            && sh.checked_mul(cols)?.checked_mul(scale).is_some();
        fits.then_some((rows, cols, channel, total))
    })();
    let Some((rows, cols, channel, total)) = sizes else {
        return false;
    };
    let (mut taps, mut inside, mut planes) = BUFFERS.take();
    // Every value is written below (rows and their padding): no fill first (it had been 2 %
    // of ResNet-8's time).
    planes.resize(total, 0.0);
    // A blocked input is a planar one of `c / lanes` channels whose pixels are `lanes` floats
    // wide: the same row copies, every width times `lanes`.
    let unit = Window {
        stride: [1, 1],
        pads: [
            win.pads[0],
            win.pads[1] * scale,
            win.pads[2],
            win.pads[3] * scale,
        ],
        ..*win
    };
    let (planar, channels) = match blocking.input {
        true => (
            ConvDims {
                c: d.c / lanes,
                w: d.w * lanes,
                ..d
            },
            d.c / lanes,
        ),
        false => (d, d.c),
    };
    split_phases(
        &mut planes,
        x,
        planar,
        channels,
        &unit,
        [rows, cols * scale],
    );
    taps.clear();
    for c in 0..d.c {
        let start = match blocking.input {
            true => c / lanes * channel * lanes + c % lanes,
            false => c * channel,
        };
        for ky in 0..kh {
            for kx in 0..kw {
                taps.push(start + (ky * dh * cols + kx * dw) * scale);
            }
        }
    }
    // Per output row, the kernel rows inside the input (bit ky): input row oy·sh + ky·dh − pt
    // within 0..h. Kernels of more than 32 rows read them all (no table).
    inside.clear();
    if kh <= 32 {
        inside.extend((0..d.oh).map(|oy| {
            (0..kh)
                .filter(|&ky| {
                    let y = oy * sh + ky * dh;
                    y >= win.pads[0] && y - win.pads[0] < d.h
                })
                .fold(0u32, |set, ky| set | 1 << ky)
        }));
    }
    let reading = crate::ops::conv::channel_lanes::Reading {
        input: &planes,
        taps: &taps,
        pitch: sh * cols * scale,
        step: sw * scale,
        plane: [d.oh, d.ow],
        kernel: [kh, kw],
        rows: &inside,
    };
    let ran = crate::ops::conv::channel_lanes::run(
        ctx,
        &reading,
        weight,
        d.oc,
        bias,
        activation,
        out,
        constant,
        (blocking.output, residual),
    );
    BUFFERS.set((taps, inside, planes));
    ran
}
