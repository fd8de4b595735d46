//! A convolution of one group as a matrix product whose rows are read in place from phase
//! planes (hosts with SIMD kernels): the channel-lane kernel where it pays, else the row
//! product of `micro::sgemm`.

use super::rows::split_phases;
use crate::base::context::StepContext;
use crate::base::geometry::ConvDims;
use crate::micro::sgemm::Mat;
use ferrite_hal::op::Window;
use ferrite_hal::Activation;

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
pub(super) fn conv_in_place(
    job: InPlace<'_>,
    out: &mut [f32],
    scratch: &mut [f32],
) -> Option<bool> {
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
pub(super) struct InPlace<'a> {
    /// The step's context (the kept packed weights, the threads).
    pub(super) ctx: StepContext<'a>,
    pub(super) win: &'a Window,
    pub(super) d: ConvDims,
    pub(super) icg: usize,
    pub(super) ocg: usize,
    pub(super) x: &'a [f32],
    pub(super) weight: &'a [f32],
    pub(super) bias: Option<&'a [f32]>,
    /// The activation fused into the convolution (applied here where the kernel can).
    pub(super) activation: Activation,
    /// Whether the weights are the model's constants (packed once per prepared step).
    pub(super) constant: bool,
}

/// [`conv_in_place`]'s body.
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
