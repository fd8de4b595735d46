//! Max, average and global average pooling over NCHW tensors.

use crate::base::geometry::PoolDims;
use ferrite_hal::op::Pool;

/// Max (`is_max`) or average pooling.
#[inline(always)]
pub fn pool(p: &Pool, d: PoolDims, is_max: bool, x: &[f32], out: &mut [f32]) {
    let [n, c, h, w] = d.input;
    let [oh, ow] = d.output;
    let [kh, kw] = p.window.kernel;
    let [sh, sw] = p.window.stride;
    let [dh, dw] = p.window.dilation;
    let [pt, pl, pb, pr] = p.window.pads;
    if p.window.dilation == [1, 1] {
        return pool_dense(p, d, is_max, x, out);
    }
    for (src, dst) in planes(x, out, [n * c, h * w, oh * ow]) {
        for (oy, dst) in dst.chunks_exact_mut(ow.max(1)).take(oh).enumerate() {
            let y0 = (oy * sh) as isize - pt as isize;
            for (ox, slot) in dst.iter_mut().enumerate() {
                let x0 = (ox * sw) as isize - pl as isize;
                let mut max = f32::MIN;
                let mut sum = 0.0f32;
                let mut count = 0usize;
                for ky in 0..kh {
                    let iy = y0 + (ky * dh) as isize;
                    if iy < 0 || iy >= h as isize {
                        continue;
                    }
                    let row = src
                        .get(iy as usize * w..(iy as usize + 1) * w)
                        .unwrap_or(&[]);
                    for kx in 0..kw {
                        let ix = x0 + (kx * dw) as isize;
                        if ix < 0 {
                            continue;
                        }
                        let Some(&v) = row.get(ix as usize) else {
                            continue;
                        };
                        max = if v > max || v.is_nan() { v } else { max };
                        sum += v;
                        count += 1;
                    }
                }
                *slot = if is_max {
                    max
                } else {
                    let divisor = if p.count_include_pad {
                        // The window clipped to the padded input (not beyond it, as in ceil mode).
                        let y_end = (y0 + ((kh - 1) * dh + 1) as isize).min((h + pb) as isize);
                        let x_end = (x0 + ((kw - 1) * dw + 1) as isize).min((w + pr) as isize);
                        let rows = (y_end - y0).max(0) as usize;
                        let cols = (x_end - x0).max(0) as usize;
                        rows.div_ceil(dh.max(1)) * cols.div_ceil(dw.max(1))
                    } else {
                        count
                    };
                    if divisor == 0 {
                        0.0
                    } else {
                        sum / divisor as f32
                    }
                };
            }
        }
    }
}

/// The `[planes]` input planes of `[plane_in]` elements paired with the output planes of
/// `[plane_out]` (slices, so a kernel indexes within a plane only through `get`).
#[inline(always)]
fn planes<'a, T>(
    x: &'a [T],
    out: &'a mut [T],
    [planes, plane_in, plane_out]: [usize; 3],
) -> impl Iterator<Item = (&'a [T], &'a mut [T])> {
    x.chunks_exact(plane_in.max(1))
        .zip(out.chunks_exact_mut(plane_out.max(1)))
        .take(planes)
}

/// Pooling without dilation: each window is a rectangle of contiguous row slices, clipped to
/// the input once per output instead of per element.
#[inline(always)]
fn pool_dense(p: &Pool, d: PoolDims, is_max: bool, x: &[f32], out: &mut [f32]) {
    let [n, c, h, w] = d.input;
    let [oh, ow] = d.output;
    let [kh, kw] = p.window.kernel;
    let [sh, sw] = p.window.stride;
    let [pt, pl, pb, pr] = p.window.pads;
    for (src, dst) in planes(x, out, [n * c, h * w, oh * ow]) {
        for (oy, dst) in dst.chunks_exact_mut(ow.max(1)).take(oh).enumerate() {
            let y0 = oy * sh;
            let (y_lo, y_hi) = (y0.max(pt) - pt, (y0 + kh).min(h + pt).max(pt) - pt);
            for (ox, slot) in dst.iter_mut().enumerate() {
                let x0 = ox * sw;
                let (x_lo, x_hi) = (x0.max(pl) - pl, (x0 + kw).min(w + pl).max(pl) - pl);
                let (x_lo, y_lo) = (x_lo.min(x_hi), y_lo.min(y_hi));
                let rows =
                    (y_lo..y_hi).map(|iy| src.get(iy * w + x_lo..iy * w + x_hi).unwrap_or(&[]));
                *slot = if is_max {
                    rows.flat_map(|r| r.iter()).fold(f32::MIN, |m, &v| {
                        if v > m || v.is_nan() {
                            v
                        } else {
                            m
                        }
                    })
                } else {
                    let sum: f32 = rows.map(|r| r.iter().sum::<f32>()).sum();
                    let divisor = if p.count_include_pad {
                        let rows = (y0 + kh).min(h + pt + pb) - y0;
                        let cols = (x0 + kw).min(w + pl + pr) - x0;
                        rows * cols
                    } else {
                        (y_hi - y_lo) * (x_hi - x_lo)
                    };
                    if divisor == 0 {
                        0.0
                    } else {
                        sum / divisor as f32
                    }
                };
            }
        }
    }
}

/// Max pooling of 8-bit integers (`lowest` for a window wholly in the padding, as −∞ would
/// quantize).
#[inline(always)]
pub fn max_pool_integer<T: Copy + Ord>(p: &Pool, d: PoolDims, x: &[T], out: &mut [T], lowest: T) {
    let [n, c, h, w] = d.input;
    let [oh, ow] = d.output;
    let win = &p.window;
    for (src, dst) in planes(x, out, [n * c, h * w, oh * ow]) {
        for (oy, dst) in dst.chunks_exact_mut(ow.max(1)).take(oh).enumerate() {
            for (ox, slot) in dst.iter_mut().enumerate() {
                let mut max = lowest;
                for ky in 0..win.kernel[0] {
                    let iy = (oy * win.stride[0] + ky * win.dilation[0]).wrapping_sub(win.pads[0]);
                    if iy >= h {
                        continue;
                    }
                    let row = src.get(iy * w..(iy + 1) * w).unwrap_or(&[]);
                    for kx in 0..win.kernel[1] {
                        let ix =
                            (ox * win.stride[1] + kx * win.dilation[1]).wrapping_sub(win.pads[1]);
                        if let Some(&v) = row.get(ix) {
                            max = max.max(v);
                        }
                    }
                }
                *slot = max;
            }
        }
    }
}

/// Mean over each `[n, c]` plane of `plane` elements.
#[inline(always)]
pub fn global_avg_pool(x: &[f32], plane: usize, out: &mut [f32]) {
    #[cfg(feature = "std")]
    if plane >= 32 {
        // On a host: eight partial sums (a vector's lanes), then pairwise — one chain of
        // `plane` dependent additions per channel had been 4 % of DS-CNN's time. Within
        // rounding of the in-order sum (closer to the exact one, if anything).
        for (o, chunk) in out.iter_mut().zip(x.chunks_exact(plane)) {
            let mut lanes = [-0.0f32; 8];
            let mut eights = chunk.chunks_exact(8);
            for eight in &mut eights {
                for (lane, &v) in lanes.iter_mut().zip(eight) {
                    *lane += v;
                }
            }
            for (lane, &v) in lanes.iter_mut().zip(eights.remainder()) {
                *lane += v;
            }
            let [a, b, c, d, e, f, g, h] = lanes;
            *o = (((a + e) + (c + g)) + ((b + f) + (d + h))) / plane as f32;
        }
        return;
    }
    for (o, chunk) in out.iter_mut().zip(x.chunks_exact(plane.max(1))) {
        // In order, four a step written out (a firmware built for size does not unroll); from
        // −0.0, as `Iterator::sum` (an all −0.0 plane stays −0.0).
        let mut quads = chunk.chunks_exact(4);
        let mut sum = -0.0f32;
        for q in &mut quads {
            sum = sum + q[0] + q[1] + q[2] + q[3];
        }
        for v in quads.remainder() {
            sum += v;
        }
        *o = sum / plane as f32;
    }
}

/// [`global_avg_pool`] of a channel-blocked input (`[channel / lanes][pixel][channel % lanes]`,
/// see `crate::program::layout`) into `out[channel]`: each channel's sum formed exactly as there (eight
/// partial sums by pixel modulo eight from 32 pixels, else in order, from −0.0), for a block of
/// channels at once.
#[cfg(feature = "std")]
#[inline]
pub fn global_avg_pool_blocked(x: &[f32], plane: usize, lanes: usize, out: &mut [f32]) {
    match lanes {
        16 => blocks_average::<16>(x, plane, out),
        8 => blocks_average::<8>(x, plane, out),
        _ => {}
    }
}

/// [`global_avg_pool_blocked`] for blocks of `L` channels (constant, so that a block's sums are
/// vectors).
#[cfg(feature = "std")]
#[inline]
fn blocks_average<const L: usize>(x: &[f32], plane: usize, out: &mut [f32]) {
    if plane == 0 {
        return;
    }
    let add = |sum: &mut [f32; L], pixel: &[f32]| {
        for (s, &v) in sum.iter_mut().zip(pixel) {
            *s += v;
        }
    };
    for (block, outs) in x.chunks_exact(plane * L).zip(out.chunks_mut(L)) {
        if plane >= 32 {
            let mut partial = [[-0.0f32; L]; 8];
            let mut eights = block.chunks_exact(8 * L);
            for eight in &mut eights {
                for (sum, pixel) in partial.iter_mut().zip(eight.chunks_exact(L)) {
                    add(sum, pixel);
                }
            }
            for (sum, pixel) in partial.iter_mut().zip(eights.remainder().chunks_exact(L)) {
                add(sum, pixel);
            }
            let [a, b, cc, d, e, f, g, h] = &partial;
            for (i, o) in outs.iter_mut().enumerate().take(L) {
                let sum = ((a[i] + e[i]) + (cc[i] + g[i])) + ((b[i] + f[i]) + (d[i] + h[i]));
                *o = sum / plane as f32;
            }
            continue;
        }
        let mut sum = [-0.0f32; L];
        for pixel in block.chunks_exact(L) {
            add(&mut sum, pixel);
        }
        for (o, sum) in outs.iter_mut().zip(sum) {
            *o = sum / plane as f32;
        }
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use std::vec::Vec;

    /// The blocked form's means are the planar form's, bit for bit, on planes shorter and
    /// longer than the partial sums take, for blocks of eight and sixteen channels.
    #[test]
    fn blocked_global_averages_equal_the_planar_ones() {
        for lanes in [8, 16] {
            for plane in [1, 5, 31, 32, 33, 64, 125] {
                let channels = 2 * lanes;
                let planar: Vec<f32> = (0..channels * plane)
                    .map(|i| ((i * 7919 % 1009) as f32 - 500.0) / 37.0)
                    .collect();
                let mut blocked = std::vec![0.0; planar.len()];
                crate::base::blocking::block(&planar, &mut blocked, (channels, plane), lanes);
                let (mut want, mut got) = (std::vec![0.0; channels], std::vec![1.0; channels]);
                global_avg_pool(&planar, plane, &mut want);
                global_avg_pool_blocked(&blocked, plane, lanes, &mut got);
                let same = want
                    .iter()
                    .zip(&got)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{lanes} lanes, {plane} pixels");
            }
        }
    }

    /// Global average pooling within a few units of rounding of the exact mean (f64), on planes
    /// shorter and longer than the host's partial sums take, with −0.0 planes kept −0.0.
    #[test]
    fn global_average_is_the_mean() {
        let mut seed = 0x2545_f491_u32;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            (seed % 20_000) as f32 / 1000.0 - 10.0
        };
        for plane in [1, 7, 31, 32, 33, 125, 1024] {
            let x: Vec<f32> = (0..3 * plane).map(|_| next()).collect();
            let mut out = [0.0f32; 3];
            global_avg_pool(&x, plane, &mut out);
            for (o, chunk) in out.iter().zip(x.chunks_exact(plane)) {
                let exact = chunk.iter().map(|&v| v as f64).sum::<f64>() / plane as f64;
                let scale = chunk.iter().map(|v| v.abs() as f64).sum::<f64>() / plane as f64;
                let err = (*o as f64 - exact).abs();
                assert!(
                    err <= 4.0 * plane as f64 * f32::EPSILON as f64 * scale + 1e-30,
                    "{plane}: {o} vs {exact}"
                );
            }
            let zeros = std::vec![-0.0f32; plane];
            let mut out = [1.0f32];
            global_avg_pool(&zeros, plane, &mut out);
            assert!(out[0] == 0.0 && out[0].is_sign_negative(), "{plane}");
        }
    }
}
