//! Integer products that keep their int32 accumulators (ONNX `MatMulInteger`, `ConvInteger`):
//! 8-bit operands of either signedness, zero points given at run time, no requantization.
//! Sums wrap on overflow as onnxruntime's do (only reductions of more than 33,025 products of
//! extreme values can overflow).

use super::conv::ConvDims;
use super::index::for_each_index;
use super::quantize::QuantInt;
use ferrite_hal::geometry::MatMulGeometry;
use ferrite_hal::op::ConvInteger;

/// Zero point `i` of a per-row/column list, or the one value for all.
#[inline(always)]
fn zero_at<T: QuantInt>(zeros: &[T], i: usize) -> i32 {
    let z = if zeros.len() == 1 {
        zeros.first()
    } else {
        zeros.get(i)
    };
    z.map_or(0, |v| v.widen())
}

/// `Y = (A − a_zero)(B − b_zero)` per matrix of the broadcast batch, in int32. `a_zero` has one
/// value or one per row of A, `b_zero` one or one per column of B (the verifier checks which).
pub fn matmul_integer<A: QuantInt, B: QuantInt>(
    g: &MatMulGeometry,
    a: &[A],
    b: &[B],
    a_zero: &[A],
    b_zero: &[B],
    y: &mut [i32],
) {
    let (m, k, n) = (g.m, g.k, g.n);
    let batch_out = g.batch.strides().map(|s| s * m * n);
    for_each_index(
        g.batch.dims(),
        [&batch_out, &g.a_batch_strides, &g.b_batch_strides],
        |[o, oa, ob]| {
            let (Some(a), Some(b), Some(y)) = (
                a.get(oa..oa + m * k),
                b.get(ob..ob + k * n),
                y.get_mut(o..o + m * n),
            ) else {
                return;
            };
            for (row, yr) in y.chunks_exact_mut(n.max(1)).enumerate().take(m) {
                let ar = &a[row * k..(row + 1) * k];
                let za = zero_at(a_zero, row);
                // Σ (a − za)·b, then minus zb[j]·Σ (a − za) per column.
                yr.fill(0);
                let mut row_sum = 0i32;
                for (kk, av) in ar.iter().enumerate() {
                    let av = av.widen() - za;
                    row_sum = row_sum.wrapping_add(av);
                    if av == 0 {
                        continue;
                    }
                    for (yv, bv) in yr.iter_mut().zip(&b[kk * n..(kk + 1) * n]) {
                        *yv = yv.wrapping_add(av * bv.widen());
                    }
                }
                for (j, yv) in yr.iter_mut().enumerate() {
                    *yv = yv.wrapping_sub(row_sum.wrapping_mul(zero_at(b_zero, j)));
                }
            }
        },
    );
}

/// Direct integer convolution to int32: `Σ (x − x_zero)(w − w_zero[oc])` over each window;
/// padding reads the input zero point, so it adds nothing.
pub fn conv_integer<X: QuantInt, W: QuantInt>(
    c: &ConvInteger,
    d: ConvDims,
    x: &[X],
    w: &[W],
    x_zero: i32,
    w_zero: &[W],
    y: &mut [i32],
) {
    let win = &c.window;
    let [kh, kw] = win.kernel;
    let group = c.group.max(1);
    let (icg, ocg) = (d.c / group, d.oc / group);
    let (plane, out_plane) = (d.h * d.w, d.oh * d.ow);
    let filter = icg * kh * kw;
    for (n, y_image) in y.chunks_exact_mut(d.oc * out_plane).enumerate().take(d.n) {
        let image = &x[n * d.c * plane..(n + 1) * d.c * plane];
        for (oc, y_plane) in y_image.chunks_exact_mut(out_plane.max(1)).enumerate() {
            let zw = zero_at(w_zero, oc);
            let first = (oc / ocg.max(1)) * icg;
            let filter = &w[oc * filter..(oc + 1) * filter];
            for (i, out) in y_plane.iter_mut().enumerate() {
                let (oy, ox) = (i / d.ow, i % d.ow);
                let mut acc = 0i32;
                for ic in 0..icg {
                    let src = &image[(first + ic) * plane..(first + ic + 1) * plane];
                    for ky in 0..kh {
                        let iy =
                            (oy * win.stride[0] + ky * win.dilation[0]).wrapping_sub(win.pads[0]);
                        if iy >= d.h {
                            continue;
                        }
                        for kx in 0..kw {
                            let ix = (ox * win.stride[1] + kx * win.dilation[1])
                                .wrapping_sub(win.pads[1]);
                            if ix >= d.w {
                                continue;
                            }
                            let xv = src[iy * d.w + ix].widen() - x_zero;
                            let wv = filter[(ic * kh + ky) * kw + kx].widen() - zw;
                            acc = acc.wrapping_add(xv * wv);
                        }
                    }
                }
                *out = acc;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use ferrite_hal::op::Window;
    use ferrite_hal::Shape;
    use std::vec;
    use std::vec::Vec;

    #[test]
    fn matmul_integer_matches_the_onnx_example() {
        // The ONNX operator documentation's example (uint8, zero points 12 and 0).
        let a: [u8; 12] = [11, 7, 3, 10, 6, 2, 9, 5, 1, 8, 4, 0];
        let b: [u8; 6] = [1, 4, 2, 5, 3, 6];
        let g = MatMulGeometry::new(&Shape::new(&[4, 3]).unwrap(), &Shape::new(&[3, 2]).unwrap())
            .unwrap();
        let mut y = [0i32; 8];
        matmul_integer(&g, &a, &b, &[12u8], &[0u8], &mut y);
        assert_eq!(y, [-38, -83, -44, -98, -50, -113, -56, -128]);
    }

    #[test]
    fn matmul_integer_mixes_signedness_and_per_row_and_column_zero_points() {
        let (m, k, n) = (3, 5, 4);
        let a: Vec<u8> = (0..m * k).map(|i| (i * 37 % 256) as u8).collect();
        let b: Vec<i8> = (0..k * n)
            .map(|i| (i as i32 * 53 % 256 - 128) as i8)
            .collect();
        let za: Vec<u8> = vec![3, 128, 250];
        let zb: Vec<i8> = vec![-128, 0, 5, 127];
        let g = MatMulGeometry::new(&Shape::new(&[m, k]).unwrap(), &Shape::new(&[k, n]).unwrap())
            .unwrap();
        let mut y = vec![0i32; m * n];
        matmul_integer(&g, &a, &b, &za, &zb, &mut y);
        for r in 0..m {
            for c in 0..n {
                let expected: i32 = (0..k)
                    .map(|i| {
                        (a[r * k + i] as i32 - za[r] as i32) * (b[i * n + c] as i32 - zb[c] as i32)
                    })
                    .sum();
                assert_eq!(y[r * n + c], expected, "({r}, {c})");
            }
        }
    }

    #[test]
    fn conv_integer_pads_with_the_zero_point_and_subtracts_per_channel_weight_zeros() {
        // The ONNX node test `convinteger_with_padding`: x 1..9 (zero point 1), w all 1, pads 1.
        let x: Vec<u8> = (2..=10).collect();
        let w = [1u8; 8];
        let c = ConvInteger {
            window: Window {
                kernel: [2, 2],
                stride: [1, 1],
                dilation: [1, 1],
                pads: [1, 1, 1, 1],
            },
            group: 1,
        };
        let d = ConvDims {
            n: 1,
            c: 1,
            h: 3,
            w: 3,
            oc: 2,
            oh: 4,
            ow: 4,
        };
        let mut y = [0i32; 32];
        conv_integer(&c, d, &x, &w, 1, &[0u8, 1], &mut y);
        let first = [1, 3, 5, 3, 5, 12, 16, 9, 11, 24, 28, 15, 7, 15, 17, 9];
        assert_eq!(y[..16], first);
        // Weight zero point 1 on the second channel: every product is zero.
        assert_eq!(y[16..], [0; 16]);
    }
}
