//! The host's depthwise convolution (`std`), for every stride and planned strategy: the
//! phase planes of the portable `depthwise_flat` in buffers of the thread's own (their zero border
//! written once per step, each channel's values scattered in), and each vector of eight
//! outputs summed over every tap in registers — one store per vector, not one pass over the
//! plane per tap. The same additions in the same order as `depthwise_flat`.

use super::rows::DepthwiseArgs;
use core::cell::RefCell;
use ferrite_hal::op::Window;
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
    let Some([phases, qh, qw]) = ferrite_hal::geometry::depthwise_phases(win, d.oh, d.ow) else {
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
            let (k0, k1) = super::rows::valid_range(qw, d.w, sw, pl, rx);
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
    use super::super::rows::DepthwiseArgs;
    use core::arch::x86_64::*;
    use core::cell::RefCell;
    use std::vec::Vec;

    std::thread_local! {
        /// The reused padded plane.
        static PADDED: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    }

    /// Runs the layer; false (nothing written) where it is not a 3 × 3 stride-2 one or an
    /// operand is shorter than the sizes say. The caller checked AVX2 (`usable`).
    pub(super) fn run(a: &DepthwiseArgs<'_>, out: &mut [f32]) -> bool {
        let d = a.d;
        let shape = a.win.kernel == [3, 3] && a.win.stride == [2, 2] && a.win.dilation == [1, 1];
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
                super::super::rows::copy(&mut padded[r * pw + pl..r * pw + pl + n], &row[..n]);
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
                super::rows::split_pairs(planes, row, qh * qw, qw, pl, values);
                continue;
            }
            for &[dst, src, count] in runs {
                let to = &mut planes[row + dst..][..count];
                match sw {
                    1 => super::rows::copy(to, &values[src..]),
                    _ => super::rows::strided(to, &values[src..], sw, |_, v| v),
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
                super::rows::copy(row, sums);
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
    let shifts: [usize; 9] = core::array::from_fn(|t| (t / 3) * dh * w + (t % 3) * dw + guard - pl);
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
        super::rows::copy(&mut padded[start..][..copied], &source[..copied]);
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
