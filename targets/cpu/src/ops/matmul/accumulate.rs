//! Integer products that keep their int32 accumulators (ONNX `MatMulInteger`, `ConvInteger`):
//! 8-bit operands of either signedness, zero points given at run time, no requantization.
//! Sums wrap on overflow as onnxruntime's do (only reductions of more than 33,025 products of
//! extreme values can overflow).

use crate::base::geometry::ConvDims;
use crate::base::index::for_each_row;
use ferrite_hal::geometry::MatMulGeometry;
use ferrite_hal::op::ConvInteger;

/// An 8-bit operand as raw bytes, int8 or uint8: `value = (byte ^ flip) − offset` (int8: flip
/// 0x80, offset 128). One kernel then serves every mix of signedness (one copy in flash instead
/// of four).
#[derive(Clone, Copy, Debug)]
pub struct Bytes<'a> {
    /// The raw bytes.
    pub bytes: &'a [u8],
    flip: u8,
    offset: i32,
}

impl<'a> Bytes<'a> {
    /// `bytes` holding int8 (`signed`) or uint8 values.
    pub fn new(bytes: &'a [u8], signed: bool) -> Bytes<'a> {
        let (flip, offset) = if signed { (0x80, 128) } else { (0, 0) };
        Bytes {
            bytes,
            flip,
            offset,
        }
    }

    /// `byte ^ flip`, in `0..=255`: the value plus `offset`.
    #[inline(always)]
    fn biased(&self, byte: u8) -> i32 {
        (byte ^ self.flip) as i32
    }

    /// The value of element `i` (0 past the end).
    #[inline(always)]
    fn value(&self, i: usize) -> i32 {
        self.bytes
            .get(i)
            .map_or(0, |&b| self.biased(b) - self.offset)
    }
}

/// Zero point `i` of a per-row/column list, or the one value for all.
#[inline(always)]
fn zero_at(zeros: &Bytes<'_>, i: usize) -> i32 {
    zeros.value(if zeros.bytes.len() == 1 { 0 } else { i })
}

/// `Y = (A − a_zero)(B − b_zero)` per matrix of the broadcast batch, in int32. `a_zero` has one
/// value or one per row of A, `b_zero` one or one per column of B (the verifier checks which).
pub fn matmul_integer(
    g: &MatMulGeometry,
    a: Bytes<'_>,
    b: Bytes<'_>,
    a_zero: Bytes<'_>,
    b_zero: Bytes<'_>,
    y: &mut [i32],
) {
    let (m, k, n) = (g.m, g.k, g.n);
    let batch_out = g.batch.strides().map(|s| s * m * n);
    for_each_row(
        g.batch.dims(),
        [&batch_out, &g.a_batch_strides, &g.b_batch_strides],
        |[o, oa, ob]| {
            let (Some(am), Some(bm), Some(y)) = (
                a.bytes.get(oa..oa + m * k),
                b.bytes.get(ob..ob + k * n),
                y.get_mut(o..o + m * n),
            ) else {
                return;
            };
            for (row, yr) in y.chunks_exact_mut(n.max(1)).enumerate().take(m) {
                let a_shift = a.offset + zero_at(&a_zero, row);
                // Σ (a − za)·(b ^ flip), then minus (offset + zb[j])·Σ (a − za) per column.
                yr.fill(0);
                let mut row_sum = 0i32;
                let a_row = am.get(row * k..(row + 1) * k).unwrap_or(&[]);
                for (kk, &byte) in a_row.iter().enumerate() {
                    let av = a.biased(byte) - a_shift;
                    row_sum = row_sum.wrapping_add(av);
                    if av == 0 {
                        continue;
                    }
                    let b_row = bm.get(kk * n..(kk + 1) * n).unwrap_or(&[]);
                    for (yv, &bv) in yr.iter_mut().zip(b_row) {
                        *yv = yv.wrapping_add(av * b.biased(bv));
                    }
                }
                for (j, yv) in yr.iter_mut().enumerate() {
                    let b_shift = b.offset + zero_at(&b_zero, j);
                    *yv = yv.wrapping_sub(row_sum.wrapping_mul(b_shift));
                }
            }
        },
    );
}

/// Direct integer convolution to int32: `Σ (x − x_zero)(w − w_zero[oc])` over each window;
/// padding reads the input zero point, so it adds nothing.
pub fn conv_integer(
    c: &ConvInteger,
    d: ConvDims,
    x: Bytes<'_>,
    w: Bytes<'_>,
    x_zero: Bytes<'_>,
    w_zero: Bytes<'_>,
    y: &mut [i32],
) {
    let win = &c.window;
    let [kh, kw] = win.kernel;
    let group = c.group.max(1);
    let (icg, ocg) = (d.c / group, d.oc / group);
    let (plane, out_plane) = (d.h * d.w, d.oh * d.ow);
    let filter = icg * kh * kw;
    let x_shift = x.offset + zero_at(&x_zero, 0);
    for (n, y_image) in y
        .chunks_exact_mut((d.oc * out_plane).max(1))
        .enumerate()
        .take(d.n)
    {
        let image = x
            .bytes
            .get(n * d.c * plane..(n + 1) * d.c * plane)
            .unwrap_or(&[]);
        for (oc, y_plane) in y_image.chunks_exact_mut(out_plane.max(1)).enumerate() {
            let w_shift = w.offset + zero_at(&w_zero, oc);
            let first = (oc / ocg.max(1)) * icg;
            let weights = w.bytes.get(oc * filter..(oc + 1) * filter).unwrap_or(&[]);
            for (oy, row) in y_plane.chunks_exact_mut(d.ow.max(1)).take(d.oh).enumerate() {
                for (ox, out) in row.iter_mut().enumerate() {
                    let mut acc = 0i32;
                    for ic in 0..icg {
                        let src = image
                            .get((first + ic) * plane..(first + ic + 1) * plane)
                            .unwrap_or(&[]);
                        for ky in 0..kh {
                            let iy = (oy * win.stride[0] + ky * win.dilation[0])
                                .wrapping_sub(win.pads[0]);
                            if iy >= d.h {
                                continue;
                            }
                            for kx in 0..kw {
                                let ix = (ox * win.stride[1] + kx * win.dilation[1])
                                    .wrapping_sub(win.pads[1]);
                                if ix >= d.w {
                                    continue;
                                }
                                let (Some(&xb), Some(&wb)) = (
                                    src.get(iy * d.w + ix),
                                    weights.get((ic * kh + ky) * kw + kx),
                                ) else {
                                    continue;
                                };
                                let xv = x.biased(xb) - x_shift;
                                let wv = w.biased(wb) - w_shift;
                                acc = acc.wrapping_add(xv * wv);
                            }
                        }
                    }
                    *out = acc;
                }
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

    fn u(bytes: &[u8]) -> Bytes<'_> {
        Bytes::new(bytes, false)
    }

    fn i(bytes: &[u8]) -> Bytes<'_> {
        Bytes::new(bytes, true)
    }

    #[test]
    fn matmul_integer_matches_the_onnx_example() {
        // The ONNX operator documentation's example (uint8, zero points 12 and 0).
        let a: [u8; 12] = [11, 7, 3, 10, 6, 2, 9, 5, 1, 8, 4, 0];
        let b: [u8; 6] = [1, 4, 2, 5, 3, 6];
        let g = MatMulGeometry::new(&Shape::new(&[4, 3]).unwrap(), &Shape::new(&[3, 2]).unwrap())
            .unwrap();
        let mut y = [0i32; 8];
        matmul_integer(&g, u(&a), u(&b), u(&[12]), u(&[0]), &mut y);
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
        let signed = |v: &[i8]| v.iter().map(|&x| x as u8).collect::<Vec<u8>>();
        let (bb, zbb) = (signed(&b), signed(&zb));
        matmul_integer(&g, u(&a), i(&bb), u(&za), i(&zbb), &mut y);
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
        conv_integer(&c, d, u(&x), u(&w), u(&[1]), u(&[0, 1]), &mut y);
        let first = [1, 3, 5, 3, 5, 12, 16, 9, 11, 24, 28, 15, 7, 15, 17, 9];
        assert_eq!(y[..16], first);
        // Weight zero point 1 on the second channel: every product is zero.
        assert_eq!(y[16..], [0; 16]);
    }
}
