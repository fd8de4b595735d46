//! QGemm with AVX2 (`vpmaddwd` on int16-widened values), for 8-bit activations in either
//! weight layout: where VNNI is missing (an AVX2-only host) or does not take the layout.

#![allow(unsafe_code)]

use crate::base::quantized::QuantInt;
use crate::base::requantize::Requantizer;
use core::arch::x86_64::*;
use ferrite_hal::op::{QGemmWeights, Requantize};

/// [`crate::ops::matmul::int8::qgemm`] with AVX2 for 8-bit activations and outputs, in either
/// weight layout: each row's `a − zero` widened to int16 once, the weights widened as they are
/// read, products summed in pairs by `vpmaddwd` and the pairs in wrapping int32 — the
/// portable kernel's sums exactly (`|a − zero| ≤ 255`, `|w| ≤ 128`: a pair is at most 65,280),
/// then its requantization, one output at a time. False (nothing written) where the operands
/// are shorter than the sizes say or blocked weights are not whole blocks.
///
/// # Safety
/// The CPU has AVX2.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn qgemm<X: QuantInt, Y: QuantInt>(
    q: &Requantize,
    [m, k, n]: [usize; 3],
    layout: QGemmWeights,
    a: &[X],
    b: &[i8],
    bias: &[i32],
    requant: &[i32],
    y: &mut [Y],
) -> bool {
    let blocked = layout == QGemmWeights::Blocked;
    let fits = a.len() >= m * k
        && b.len() >= n * k
        && bias.len() >= n
        && y.len() >= m * n
        && (!blocked || (k % 4 == 0 && n % 4 == 0));
    if !fits {
        return false;
    }
    // The row's `a − zero` as int16 (the sums read whole 16-value chunks of it, then the rest
    // value by value).
    let mut row = std::vec![0i16; k];
    let out = |sum: i32, col: usize| -> Y {
        let rescaler = Requantizer::of_channel(requant, col, q);
        let bias = bias.get(col).copied().unwrap_or(0);
        Y::narrow(rescaler.apply(sum.wrapping_add(bias)))
    };
    for r in 0..m {
        // Within `a` and `y` (checked above): the indexing here has no panic path.
        let (Some(a_row), Some(y_row)) = (a.get(r * k..(r + 1) * k), y.get_mut(r * n..(r + 1) * n))
        else {
            return false;
        };
        for (slot, v) in row.iter_mut().zip(a_row) {
            *slot = (v.widen() - q.input_zero) as i16;
        }
        // Column `first + j`'s output from its sum `sums[j]`.
        let mut put = |first: usize, sums: &[i32]| {
            for (j, &sum) in sums.iter().enumerate() {
                if let Some(slot) = y_row.get_mut(first + j) {
                    *slot = out(sum, first + j);
                }
            }
        };
        if blocked {
            // Four blocks (sixteen columns) at a time share each broadcast of the row's values;
            // the last few blocks go one by one.
            let quads = n / 16;
            for quad in 0..quads {
                // SAFETY: blocks `4·quad .. 4·quad + 4`, of `16·k/4` bytes each, lie within `b`
                // (checked above); `row` holds `k` values.
                let sums = unsafe { block_sums::<4>(&row, b, k, 4 * quad) };
                put(16 * quad, sums.as_flattened());
            }
            for block in 4 * quads..n / 4 {
                // SAFETY: as above, for block `block`.
                let [sums] = unsafe { block_sums::<1>(&row, b, k, block) };
                put(4 * block, &sums);
            }
        } else {
            let quads = n / 4;
            for quad in 0..quads {
                // SAFETY: columns `4·quad .. 4·quad + 4`, of `k` weights each, lie within `b`
                // (checked above).
                put(4 * quad, &unsafe { row_sums::<4>(&row, b, k, 4 * quad) });
            }
            for col in 4 * quads..n {
                // SAFETY: as above, for column `col`.
                put(col, &unsafe { row_sums::<1>(&row, b, k, col) });
            }
        }
    }
    true
}

/// `Σ row[i] · w[i]` over each of the `C` columns `first..first + C` (`[N, K]` layout),
/// wrapping: each 16-value chunk of the row is loaded once for the `C` columns.
///
/// # Safety
/// The CPU has AVX2; `b` holds `(first + C)·k` weights and `row` at least `k` values.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn row_sums<const C: usize>(row: &[i16], b: &[i8], k: usize, first: usize) -> [i32; C] {
    let (Some(weights), Some(row)) = (b.get(first * k..(first + C) * k), row.get(..k)) else {
        return [0; C];
    };
    let whole = k / 16 * 16;
    let mut sums = [_mm256_setzero_si256(); C];
    let mut i = 0;
    while i < whole {
        // SAFETY: i + 16 <= k: sixteen row values, and sixteen weights of each column.
        let x = unsafe { _mm256_loadu_si256(row.as_ptr().add(i).cast()) };
        for (c, sum) in sums.iter_mut().enumerate() {
            // SAFETY: as above.
            let w = unsafe {
                _mm256_cvtepi8_epi16(_mm_loadu_si128(weights.as_ptr().add(c * k + i).cast()))
            };
            *sum = _mm256_add_epi32(*sum, _mm256_madd_epi16(x, w));
        }
        i += 16;
    }
    let mut out = [0i32; C];
    for (c, (slot, sum)) in out.iter_mut().zip(sums).enumerate() {
        *slot = horizontal(sum);
        let column = weights.get(c * k + whole..(c + 1) * k).unwrap_or(&[]);
        for (x, w) in row.iter().skip(whole).zip(column) {
            *slot = slot.wrapping_add(i32::from(*x) * i32::from(*w));
        }
    }
    out
}

/// The four columns of each of the `B` blocks `first..first + B` of blocked weights
/// (`[N/4, K/4, 4, 4]`: for each group of four values, four weights of each column), each
/// summed over the row, wrapping: each group's four values are broadcast once for the `B`
/// blocks.
///
/// # Safety
/// The CPU has AVX2; `b` holds `16·(k/4)·(first + B)` weights and `row` at least `k` values.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn block_sums<const B: usize>(
    row: &[i16],
    b: &[i8],
    k: usize,
    first: usize,
) -> [[i32; 4]; B] {
    let groups = k / 4;
    let block_bytes = 16 * groups;
    let (Some(weights), Some(row)) = (
        b.get(block_bytes * first..block_bytes * (first + B)),
        row.get(..4 * groups),
    ) else {
        return [[0; 4]; B];
    };
    // Lanes 2j, 2j + 1 of `sums[i]`: block i's column j's two pair sums.
    let mut sums = [_mm256_setzero_si256(); B];
    for g in 0..groups {
        // SAFETY: group g's four values lie within `row`.
        let x =
            unsafe { _mm256_set1_epi64x(row.as_ptr().add(4 * g).cast::<i64>().read_unaligned()) };
        for (i, sum) in sums.iter_mut().enumerate() {
            // SAFETY: group g's sixteen weights of block i lie within `weights`.
            let w = unsafe {
                _mm256_cvtepi8_epi16(_mm_loadu_si128(
                    weights.as_ptr().add(block_bytes * i + 16 * g).cast(),
                ))
            };
            *sum = _mm256_add_epi32(*sum, _mm256_madd_epi16(x, w));
        }
    }
    let mut out = [[0i32; 4]; B];
    for (slot, sum) in out.iter_mut().zip(sums) {
        let mut lanes = [0i32; 8];
        // SAFETY: `lanes` holds eight int32s.
        unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), sum) };
        let [l0, l1, l2, l3, l4, l5, l6, l7] = lanes;
        *slot = [
            l0.wrapping_add(l1),
            l2.wrapping_add(l3),
            l4.wrapping_add(l5),
            l6.wrapping_add(l7),
        ];
    }
    out
}

/// The wrapping sum of eight int32 lanes.
#[inline]
#[target_feature(enable = "avx2")]
fn horizontal(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
    _mm_cvtsi128_si32(s)
}
