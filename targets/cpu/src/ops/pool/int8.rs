//! Integer pooling on quantized tensors: average pooling (QAveragePool) and global average
//! pooling (QGlobalAveragePool), each sum divided and rounded once.

use crate::base::geometry::PoolDims;
use crate::base::quantized::{Bytes8, QuantInt};
use crate::base::requantize::{divide_nearest, rescale_right_shift, rescaler};
use ferrite_hal::op::{QAvgPool, QGlobalAvgPool};

/// Integer global average pooling: per plane of `plane` elements, `Σ (x − zx)` rescaled. Out of
/// line: it runs once a model, and inlined into each dispatch it cost a microcontroller's
/// firmware its unrolled loop again.
#[inline(never)]
pub fn qglobal_avg_pool<X: QuantInt, Y: QuantInt>(
    q: &QGlobalAvgPool,
    plane: usize,
    x: &[X],
    y: &mut [Y],
) {
    let r = &q.requantize;
    let rq = rescaler(q.rescale, r);
    for (out, xs) in y.iter_mut().zip(x.chunks_exact(plane.max(1))) {
        // `Σ x − n·zx` in wrapping int32: `Σ (x − zx)` as the fold over the plane takes it.
        let offset = r.input_zero.wrapping_mul(xs.len() as i32);
        let sum = plane_sum(xs).wrapping_sub(offset);
        *out = Y::narrow(rq.apply(sum));
    }
}

/// `Σ x` over a plane in wrapping int32: on x86-64, 8-bit values sixteen at a time by
/// `psadbw` (SSE2, every x86-64 CPU; DS-CNN's 64 planes of 125 bytes: the step 1.6 → 0.8 µs),
/// else a fold.
#[inline(always)]
fn plane_sum<X: QuantInt>(xs: &[X]) -> i32 {
    #[cfg(target_arch = "x86_64")]
    if !X::WIDE {
        return byte_sum(bytemuck::cast_slice(xs), X::MIN < 0);
    }
    xs.iter().fold(0i32, |acc, v| acc.wrapping_add(v.widen()))
}

/// The sum of `bytes` read as `i8` (`signed`) or `u8`, in wrapping int32: each sixteen bytes'
/// `psadbw` against zero (two exact 64-bit sums of eight), signed bytes first flipped to
/// `x + 128` and the 128s taken off after, the tail added one by one. Exact: every partial sum
/// fits 64 bits, so its low 32 bits are the wrapping sum's.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
fn byte_sum(bytes: &[u8], signed: bool) -> i32 {
    use core::arch::x86_64::*;
    let chunks = bytes.chunks_exact(16);
    let tail = chunks.remainder();
    let whole = (bytes.len() - tail.len()) as i64;
    // SAFETY: SSE2 is part of x86-64; each chunk holds the sixteen bytes loaded.
    let flipped = unsafe {
        let flip = _mm_set1_epi8(if signed { i8::MIN } else { 0 });
        let mut acc = _mm_setzero_si128();
        for chunk in chunks {
            let v = _mm_xor_si128(_mm_loadu_si128(chunk.as_ptr().cast()), flip);
            acc = _mm_add_epi64(acc, _mm_sad_epu8(v, _mm_setzero_si128()));
        }
        _mm_cvtsi128_si64(_mm_add_epi64(acc, _mm_unpackhi_epi64(acc, acc)))
    };
    let body = if signed {
        flipped - 128 * whole
    } else {
        flipped
    };
    let rest: i64 = tail
        .iter()
        .map(|&b| if signed { b as i8 as i64 } else { b as i64 })
        .sum();
    (body + rest) as i32
}

/// Integer average pooling: per window, `Σ (x − input_zero)` over the positions `AveragePool`
/// counts (with or without padding), times `s_x / s_y`, divided by the count rounding to nearest.
pub fn qavg_pool(q: &QAvgPool, d: PoolDims, (x, ty): (&[u8], Bytes8), out: &mut [u8]) {
    let [n, c, h, w] = d.input;
    let [oh, ow] = d.output;
    let (p, r) = (&q.pool, &q.requantize);
    let win = &p.window;
    let [kh, kw] = win.kernel;
    let [dh, dw] = win.dilation;
    let [pt, pl, pb, pr] = win.pads;
    let right = rescale_right_shift(q.rescale);
    let multiplier = q.rescale.multiplier as i64;
    for (src, dst) in x
        .chunks_exact((h * w).max(1))
        .zip(out.chunks_exact_mut((oh * ow).max(1)))
        .take(n * c)
    {
        for (i, slot) in dst.iter_mut().enumerate() {
            let (oy, ox) = (i / ow.max(1), i % ow.max(1));
            let (y0, x0) = (oy * win.stride[0], ox * win.stride[1]);
            let (mut sum, mut count) = (0i64, 0i64);
            for ky in 0..kh {
                let iy = (y0 + ky * dh).wrapping_sub(pt);
                if iy >= h {
                    continue;
                }
                for kx in 0..kw {
                    let ix = (x0 + kx * dw).wrapping_sub(pl);
                    if ix >= w {
                        continue;
                    }
                    if let Some(v) = src.get(iy * w + ix) {
                        sum += (ty.value(*v) - r.input_zero) as i64;
                        count += 1;
                    }
                }
            }
            if p.count_include_pad {
                // The window clipped to the padded input (as the float kernel counts).
                let rows = ((kh - 1) * dh + 1).min((h + pt + pb).saturating_sub(y0));
                let cols = ((kw - 1) * dw + 1).min((w + pl + pr).saturating_sub(x0));
                count = (rows.div_ceil(dh.max(1)) * cols.div_ceil(dw.max(1))) as i64;
            }
            let v = divide_nearest(sum * multiplier, count, right).clamp(-(1 << 20), 1 << 20);
            *slot = (v as i32 + r.output_zero).max(r.min).min(r.max) as u8;
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::base::requantize::testing::*;
    use ferrite_hal::op::Requantize;
    use std::vec;
    use std::vec::Vec;

    #[test]
    fn plane_sums_equal_the_wrapping_fold() {
        let mut seed = 11u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as u32
        };
        for case in 0..2000 {
            let len = (next() % 300) as usize;
            // Uniform bytes, or runs of the extremes (where a wrong offset or sign shows).
            let bytes: Vec<u8> = (0..len)
                .map(|_| match case % 3 {
                    0 => next() as u8,
                    1 => [0u8, 127, 128, 255][(next() % 4) as usize],
                    _ => 255,
                })
                .collect();
            let signed: Vec<i8> = bytes.iter().map(|&b| b as i8).collect();
            let fold_u = bytes.iter().fold(0i32, |a, &v| a.wrapping_add(v as i32));
            let fold_i = signed.iter().fold(0i32, |a, &v| a.wrapping_add(v as i32));
            assert_eq!(plane_sum(&bytes), fold_u, "u8 case {case}, {len} bytes");
            assert_eq!(plane_sum(&signed), fold_i, "i8 case {case}, {len} bytes");
        }
        let wide: Vec<i16> = (0..100).map(|i| (i * 977 % 65536 - 32768) as i16).collect();
        let fold = wide.iter().fold(0i32, |a, &v| a.wrapping_add(v as i32));
        assert_eq!(plane_sum(&wide), fold);
    }

    #[test]
    fn qglobal_avg_pool_matches_real_arithmetic_within_one_step() {
        let (sx, sy, plane) = (0.1f64, 0.03f64, 25usize);
        let q = QGlobalAvgPool {
            rescale: rescale_of(sx / (sy * plane as f64)),
            requantize: Requantize {
                input_zero: -128,
                output_zero: -128,
                min: -128,
                max: 127,
            },
        };
        let x: Vec<i8> = (0..4 * plane)
            .map(|i| ((i * 53 % 256) as i32 - 128) as i8)
            .collect();
        let mut y = vec![0i8; 4];
        qglobal_avg_pool(&q, plane, &x, &mut y);
        for (c, out) in y.iter().enumerate() {
            let mean: f64 = x[c * plane..(c + 1) * plane]
                .iter()
                .map(|&v| sx * (v as i32 + 128) as f64)
                .sum::<f64>()
                / plane as f64;
            let want = ((mean / sy).round() as i32 - 128).clamp(-128, 127);
            assert!((*out as i32 - want).abs() <= 1, "{c}: {out} vs {want}");
        }
    }

    #[test]
    fn qavg_pool_matches_float_average_pooling_with_and_without_padding() {
        use ferrite_hal::op::{Pool, Window};
        let (sx, zx, sy, zy) = (0.05f64, 3, 0.04f64, -7);
        let (h, w) = (5, 6);
        let x: Vec<i8> = (0..2 * h * w)
            .map(|i| ((i * 71 + 5) % 256) as u8 as i8)
            .collect();
        for count_include_pad in [false, true] {
            for (dilation, ceil_mode) in [([1, 1], false), ([2, 1], false), ([1, 1], true)] {
                let window = Window {
                    kernel: [3, 2],
                    stride: [2, 2],
                    dilation,
                    pads: [1, 1, 1, 0],
                };
                let pool = Pool {
                    window,
                    ceil_mode,
                    count_include_pad,
                };
                let q = QAvgPool {
                    pool,
                    rescale: rescale_of(sx / sy),
                    requantize: Requantize {
                        input_zero: zx,
                        output_zero: zy,
                        min: -128,
                        max: 127,
                    },
                };
                let out = |len: usize, k: usize, d: usize, p: usize| {
                    let span = (k - 1) * d + 1;
                    let v = (len + p - span) as f64 / 2.0;
                    (if ceil_mode { v.ceil() } else { v.floor() }) as usize + 1
                };
                let (oh, ow) = (out(h, 3, dilation[0], 2), out(w, 2, dilation[1], 1));
                let d = PoolDims {
                    input: [1, 2, h, w],
                    output: [oh, ow],
                };
                let reals: Vec<f32> = x
                    .iter()
                    .map(|&v| ((v as i32 - zx) as f64 * sx) as f32)
                    .collect();
                let mut float = vec![0f32; 2 * oh * ow];
                crate::ops::pool::reference::pool(&pool, d, false, &reals, &mut float);
                let xb: Vec<u8> = x.iter().map(|&v| v as u8).collect();
                let mut yb = vec![0u8; 2 * oh * ow];
                qavg_pool(&q, d, (&xb, Bytes8::INT8), &mut yb);
                let y: Vec<i8> = yb.iter().map(|&v| v as i8).collect();
                // uint8: the same values 128 up give the same averages 128 up.
                let flipped: Vec<u8> = xb.iter().map(|&v| v ^ 0x80).collect();
                let q8 = QAvgPool {
                    requantize: Requantize {
                        input_zero: zx + 128,
                        output_zero: zy + 128,
                        min: 0,
                        max: 255,
                    },
                    ..q
                };
                let mut y8 = vec![0u8; 2 * oh * ow];
                qavg_pool(&q8, d, (&flipped, Bytes8::UINT8), &mut y8);
                assert!(
                    y8.iter().zip(&yb).all(|(&u, &s)| u == s ^ 0x80),
                    "uint8 vs int8"
                );
                for (k, (&got, &f)) in y.iter().zip(&float).enumerate() {
                    let want = ((f as f64 / sy).round() as i32 + zy).clamp(-128, 127);
                    assert!(
                        (got as i32 - want).abs() <= 1,
                        "{count_include_pad} {dilation:?} {ceil_mode} #{k}: {got} vs {want}"
                    );
                }
            }
        }
    }
}
