//! QGemm with AVX2 (`vpmaddwd` on int16-widened values), for 8-bit activations in either
//! weight layout: where VNNI is missing (an AVX2-only host) or does not take the layout.

use super::super::integer::Requantizer;
use super::super::quantize::QuantInt;
use core::arch::x86_64::*;
use ferrite_hal::op::{QGemmWeights, Requantize};

/// [`super::super::integer::qgemm`] with AVX2 for 8-bit activations and outputs, in either
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
        if blocked {
            for (block, slots) in y_row.chunks_exact_mut(4).enumerate() {
                // SAFETY: block `block` of `16·k/4` bytes lies within `b` (checked above);
                // `row` holds `k` values.
                let sums = unsafe { block_sums(&row, b, k, block) };
                for (j, (slot, sum)) in slots.iter_mut().zip(sums).enumerate() {
                    *slot = out(sum, 4 * block + j);
                }
            }
        } else {
            for (col, slot) in y_row.iter_mut().enumerate() {
                // SAFETY: column `col`'s `k` weights lie within `b` (checked above).
                let sum = unsafe { row_sum(&row, b, k, col) };
                *slot = out(sum, col);
            }
        }
    }
    true
}

/// `Σ row[i] · w[i]` over column `col`'s `k` weights (`[N, K]` layout), wrapping.
///
/// # Safety
/// The CPU has AVX2; `b` holds `(col + 1)·k` weights and `row` at least `k` values.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn row_sum(row: &[i16], b: &[i8], k: usize, col: usize) -> i32 {
    let (Some(weights), Some(row)) = (b.get(col * k..(col + 1) * k), row.get(..k)) else {
        return 0;
    };
    let whole = k / 16 * 16;
    let (mut even, mut odd) = (_mm256_setzero_si256(), _mm256_setzero_si256());
    let mut i = 0;
    while i < whole {
        // SAFETY: i + 16 <= k: sixteen weights and sixteen row values.
        let (w, x) = unsafe {
            (
                _mm256_cvtepi8_epi16(_mm_loadu_si128(weights.as_ptr().add(i).cast())),
                _mm256_loadu_si256(row.as_ptr().add(i).cast()),
            )
        };
        // Two chains, alternating.
        let product = _mm256_madd_epi16(x, w);
        if (i / 16) % 2 == 0 {
            even = _mm256_add_epi32(even, product);
        } else {
            odd = _mm256_add_epi32(odd, product);
        }
        i += 16;
    }
    let mut sum = horizontal(_mm256_add_epi32(even, odd));
    for (x, w) in row.iter().zip(weights).skip(whole) {
        sum = sum.wrapping_add(i32::from(*x) * i32::from(*w));
    }
    sum
}

/// The four columns of blocked weights' block `block` (`[N/4, K/4, 4, 4]`: for each group of
/// four values, four weights of each column), each summed over the row, wrapping.
///
/// # Safety
/// The CPU has AVX2; `b` holds `16·(k/4)·(block + 1)` weights and `row` at least `k` values.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn block_sums(row: &[i16], b: &[i8], k: usize, block: usize) -> [i32; 4] {
    let groups = k / 4;
    let (Some(weights), Some(row)) = (
        b.get(16 * groups * block..16 * groups * (block + 1)),
        row.get(..4 * groups),
    ) else {
        return [0; 4];
    };
    // Lanes 2j, 2j + 1: column j's two pair sums of a group.
    let (mut even, mut odd) = (_mm256_setzero_si256(), _mm256_setzero_si256());
    for g in 0..groups {
        // SAFETY: group g's four values and sixteen weights lie within `row` and `weights`.
        let (x, w) = unsafe {
            (
                _mm256_set1_epi64x(row.as_ptr().add(4 * g).cast::<i64>().read_unaligned()),
                _mm256_cvtepi8_epi16(_mm_loadu_si128(weights.as_ptr().add(16 * g).cast())),
            )
        };
        let product = _mm256_madd_epi16(x, w);
        if g % 2 == 0 {
            even = _mm256_add_epi32(even, product);
        } else {
            odd = _mm256_add_epi32(odd, product);
        }
    }
    let mut lanes = [0i32; 8];
    // SAFETY: `lanes` holds eight int32s.
    unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), _mm256_add_epi32(even, odd)) };
    let [l0, l1, l2, l3, l4, l5, l6, l7] = lanes;
    [
        l0.wrapping_add(l1),
        l2.wrapping_add(l3),
        l4.wrapping_add(l5),
        l6.wrapping_add(l7),
    ]
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
