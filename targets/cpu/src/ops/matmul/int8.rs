//! Integer matrix product (QGemm) on 8- or 16-bit activations and int8 weights, requantized once
//! ([`crate::base::requantize`]). The portable definition; the host's SIMD kernels are tried first.

use crate::base::quantized::QuantInt;
use crate::base::requantize::{output, Requantizer};
use crate::micro::integer_dot::wide_dot;
use ferrite_hal::op::{QGemmWeights, Requantize};

/// Integer matrix product `A [M, K] · Bᵀ` with a per-column (or single) requantization, `B` in
/// either [`QGemmWeights`] layout: `[N, K]` rows, each output the dot product of two
/// contiguous rows; or blocked, four outputs at a time, each four values of `A` meeting a word
/// of each of the four columns. The sums are the same either way (exact, in order). Out of
/// line on a firmware: inlined, its tiles sat in the frame of the family dispatch every Gemm
/// and MatMul step runs under (the every-kernel M4 firmware's deepest path).
#[allow(clippy::too_many_arguments)]
#[cfg_attr(feature = "std", inline(always))]
#[cfg_attr(not(feature = "std"), inline(never))]
pub fn qgemm<X: QuantInt, Y: QuantInt>(
    q: &Requantize,
    [m, k, n]: [usize; 3],
    layout: QGemmWeights,
    a: &[X],
    b: &[i8],
    bias: &[i32],
    requant: &[i32],
    y: &mut [Y],
) {
    if X::WIDE {
        qgemm_wide(q, [m, k, n], layout, a, b, bias, requant, y);
        return;
    }
    #[cfg(all(feature = "std", any(target_arch = "x86_64", target_arch = "aarch64")))]
    if super::int8_simd::qgemm(q, [m, k, n], layout, a, b, bias, requant, y) {
        return;
    }
    let term = |av: &X, bv: &i8| (av.widen() - q.input_zero) * *bv as i32;
    for row in 0..m {
        let (Some(a_row), Some(y_row)) = (
            a.get(row * k..(row + 1) * k),
            y.get_mut(row * n..(row + 1) * n),
        ) else {
            return;
        };
        match layout {
            QGemmWeights::Rows => {
                for (col, slot) in y_row.iter_mut().enumerate() {
                    let b_row = b.get(col * k..(col + 1) * k).unwrap_or(&[]);
                    let mut acc = bias.get(col).copied().unwrap_or(0);
                    for (av, bv) in a_row.iter().zip(b_row) {
                        acc = acc.wrapping_add(term(av, bv));
                    }
                    *slot = output(acc, &Requantizer::of_channel(requant, col, q));
                }
            }
            QGemmWeights::Blocked => {
                for (block, slots) in y_row.chunks_exact_mut(4).enumerate() {
                    let w = b.get(4 * k * block..4 * k * (block + 1)).unwrap_or(&[]);
                    let mut acc = [0i32; 4];
                    for (c, sum) in acc.iter_mut().enumerate() {
                        *sum = bias.get(4 * block + c).copied().unwrap_or(0);
                    }
                    for (a4, w16) in a_row.chunks_exact(4).zip(w.chunks_exact(16)) {
                        // Four activations meet a word of each column: written out, so the
                        // compiler keeps them in registers (|a − zero| ≤ 255, |w| ≤ 128: four
                        // products cannot overflow before the wrapping sum).
                        let (Ok(a4), Ok(w16)) =
                            (<&[X; 4]>::try_from(a4), <&[i8; 16]>::try_from(w16))
                        else {
                            continue;
                        };
                        let x = a4.map(|v| v.widen() - q.input_zero);
                        let (words, _) = w16.as_chunks::<4>();
                        for (sum, w) in acc.iter_mut().zip(words) {
                            let w = w.map(i32::from);
                            let four = x[0] * w[0] + x[1] * w[1] + x[2] * w[2] + x[3] * w[3];
                            *sum = sum.wrapping_add(four);
                        }
                    }
                    for (c, (sum, slot)) in acc.iter().zip(slots).enumerate() {
                        let rq = Requantizer::of_channel(requant, 4 * block + c, q);
                        *slot = output(*sum, &rq);
                    }
                }
            }
        }
    }
}

/// [`qgemm`] of 16-bit activations: the same sums in 64 bits (see [`qconv_wide`]), one output
/// at a time, from either weight layout.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn qgemm_wide<X: QuantInt, Y: QuantInt>(
    q: &Requantize,
    [m, k, n]: [usize; 3],
    layout: QGemmWeights,
    a: &[X],
    b: &[i8],
    bias: &[i32],
    requant: &[i32],
    y: &mut [Y],
) {
    let term = |av: &X, bv: &i8| i64::from(av.widen() - q.input_zero) * i64::from(*bv);
    for row in 0..m {
        let (Some(a_row), Some(y_row)) = (
            a.get(row * k..(row + 1) * k),
            y.get_mut(row * n..(row + 1) * n),
        ) else {
            return;
        };
        for (col, slot) in y_row.iter_mut().enumerate() {
            let mut acc = i64::from(bias.get(col).copied().unwrap_or(0));
            match layout {
                // One contiguous row of weights (`pack` writes this layout for int16).
                QGemmWeights::Rows => {
                    let b_row = b.get(col * k..(col + 1) * k).unwrap_or(&[]);
                    let value = |v: X| v.widen() - q.input_zero;
                    acc = acc.wrapping_add(wide_dot(b_row, a_row, value));
                }
                // Block `col / 4`; in each 16-value group, column `col % 4`'s four weights.
                QGemmWeights::Blocked => {
                    let (block, c) = (col / 4, col % 4);
                    let w = b.get(4 * k * block..4 * k * (block + 1)).unwrap_or(&[]);
                    for (a4, w16) in a_row.chunks_exact(4).zip(w.chunks_exact(16)) {
                        let w4 = w16.get(4 * c..4 * c + 4).unwrap_or(&[]);
                        for (av, bv) in a4.iter().zip(w4) {
                            acc = acc.wrapping_add(term(av, bv));
                        }
                    }
                }
            }
            *slot = Y::narrow(Requantizer::of_channel(requant, col, q).apply_wide(acc));
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::base::requantize::testing::*;
    use std::vec;
    use std::vec::Vec;

    /// A 16 × 8 matrix product whose rows end in a short group of weights (K not a multiple
    /// of 4), against the definition.
    #[test]
    fn qgemm_on_int16_takes_any_row_length() {
        let mut next = random_i32s(17);
        for k in [1, 3, 7, 13] {
            let (m, n) = (2, 5);
            let a: Vec<i16> = (0..m * k).map(|_| (next() >> 16) as i16).collect();
            let rows: Vec<i8> = (0..n * k).map(|_| (next() >> 24) as i8).collect();
            let bias: Vec<i32> = (0..n).map(|_| next() >> 12).collect();
            let rq = [(1 << 30) | 777, -9];
            let q = Requantize {
                input_zero: 45,
                output_zero: -3,
                min: -32768,
                max: 32767,
            };
            let mut y = vec![0i16; m * n];
            qgemm(
                &q,
                [m, k, n],
                QGemmWeights::Rows,
                &a,
                &rows,
                &bias,
                &rq,
                &mut y,
            );
            for r in 0..m {
                for c in 0..n {
                    let dot: i64 = (0..k)
                        .map(|i| (a[r * k + i] as i64 - 45) * rows[c * k + i] as i64)
                        .sum();
                    let v = exact_requantize(dot + bias[c] as i64, rq[0], rq[1]) - 3;
                    assert_eq!(y[r * n + c] as i32, v.clamp(-32768, 32767), "k {k}");
                }
            }
        }
    }

    /// A 16 × 8 matrix product in both weight layouts against the definition, with sums past
    /// int32.
    #[test]
    fn qgemm_on_int16_matches_the_definition_in_both_layouts() {
        let mut next = random_i32s(61);
        let (m, k, n) = (3, 1024, 8);
        let a: Vec<i16> = (0..m * k)
            .map(|i| {
                if i % 2 == 0 {
                    32767
                } else {
                    (next() >> 16) as i16
                }
            })
            .collect();
        let rows: Vec<i8> = (0..n * k)
            .map(|i| {
                if i % 2 == 0 {
                    127
                } else {
                    (next() >> 24) as i8
                }
            })
            .collect();
        let bias: Vec<i32> = (0..n).map(|_| next() >> 8).collect();
        let rq = [(1 << 30) | 12345, -20];
        let q = Requantize {
            input_zero: -1000,
            output_zero: 3000,
            min: -32768,
            max: 32767,
        };
        let mut want = vec![0i16; m * n];
        let mut largest = 0i64;
        for r in 0..m {
            for c in 0..n {
                let mut acc = bias[c] as i64;
                for i in 0..k {
                    acc += (a[r * k + i] as i64 + 1000) * rows[c * k + i] as i64;
                }
                largest = largest.max(acc.abs());
                let v = exact_requantize(acc, rq[0], rq[1]).saturating_add(3000);
                want[r * n + c] = v.clamp(-32768, 32767) as i16;
            }
        }
        assert!(largest > i32::MAX as i64, "{largest}");
        let blocked: Vec<i8> = (0..n * k)
            .map(|i| {
                let (block, group, c, kk) = (i / (4 * k), i / 16 % (k / 4), i / 4 % 4, i % 4);
                rows[(4 * block + c) * k + 4 * group + kk]
            })
            .collect();
        for (layout, weights) in [
            (QGemmWeights::Rows, &rows),
            (QGemmWeights::Blocked, &blocked),
        ] {
            let mut y = vec![0i16; m * n];
            qgemm(&q, [m, k, n], layout, &a, weights, &bias, &rq, &mut y);
            assert_eq!(y, want, "{layout:?}");
        }
    }

    #[test]
    fn qgemm_subtracts_the_input_zero_point_and_clamps() {
        let q = Requantize {
            input_zero: 10,
            output_zero: -5,
            min: -128,
            max: 20,
        };
        // a = [12, 8] (values 2, -2 after the zero point); b has one row per output:
        // [1, 2] and [3, -4].
        let mut y = [0i8; 2];
        let one = [1 << 30, 1]; // multiplier 0.5 * 2^1 = 1.0
        qgemm(
            &q,
            [1, 2, 2],
            QGemmWeights::Rows,
            &[12i8, 8],
            &[1, 2, 3, -4],
            &[100, 0],
            &one,
            &mut y,
        );
        // col 0: 100 + 2 - 4 = 98 → 98 - 5 = 93 → clamped to 20; col 1: 6 + 8 = 14 → 9.
        assert_eq!(y, [20, 9]);
    }

    #[test]
    fn qgemm_blocked_weights_give_the_rows_results() {
        let q = Requantize {
            input_zero: -3,
            output_zero: 7,
            min: -128,
            max: 127,
        };
        let (m, k, n) = (3, 24, 8);
        let value = |i: usize| ((i * 37 + 11) % 256) as u8 as i8;
        let a: Vec<i8> = (0..m * k).map(value).collect();
        let rows: Vec<i8> = (0..n * k).map(|i| value(i * 7 + 3)).collect();
        // [N/4, K/4, 4, 4]: block, group of four k, column in the block, k in the group.
        let mut blocked = vec![0i8; n * k];
        for (i, w) in blocked.iter_mut().enumerate() {
            let (block, group, c, kk) = (i / (4 * k), i / 16 % (k / 4), i / 4 % 4, i % 4);
            *w = rows[(4 * block + c) * k + 4 * group + kk];
        }
        let bias: Vec<i32> = (0..n as i32).map(|c| c * 50 - 200).collect();
        let pairs: Vec<i32> = (0..n as i32)
            .flat_map(|c| [(1 << 30) + c * 1000, -6 - c % 3])
            .collect();
        let (mut y_rows, mut y_blocked) = (vec![0i8; m * n], vec![0i8; m * n]);
        qgemm(
            &q,
            [m, k, n],
            QGemmWeights::Rows,
            &a,
            &rows,
            &bias,
            &pairs,
            &mut y_rows,
        );
        let layout = QGemmWeights::Blocked;
        qgemm(
            &q,
            [m, k, n],
            layout,
            &a,
            &blocked,
            &bias,
            &pairs,
            &mut y_blocked,
        );
        assert_eq!(y_rows, y_blocked);
        assert!(y_rows.iter().any(|&v| v != y_rows[0]), "a degenerate case");
    }
}
