//! QGemm with AVX-512 VNNI on blocked weights: `vpdpbusd` sums four unsigned-by-signed byte
//! products per 32-bit lane, exactly (the wrapping sums of the portable kernel).

#![allow(unsafe_code)]

use crate::base::quantized::QuantInt;
use crate::base::requantize::Requantizer;
use core::arch::x86_64::*;
use ferrite_hal::op::{QGemmWeights, Requantize};

/// [`crate::ops::matmul::int8::qgemm`] of 8-bit activations on blocked weights (`[N/4, K/4, 4,
/// 4]`: each 16 bytes are four columns' weights for four activations — `vpdpbusd`'s layout):
/// two blocks (eight columns) per vector, four activations broadcast to every lane. Each
/// column's `Σ w` comes from the same instruction on a vector of ones, and the zero point (plus
/// 128 for int8 inputs, packed unsigned) is subtracted once per column: the same wrapping sums
/// as the portable kernel, bit for bit. False (nothing written) when an operand is shorter than
/// the sizes say.
///
/// # Safety
/// The CPU has AVX2, AVX-512VL and AVX-512 VNNI ([`crate::isa::vnni`]).
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
pub(crate) unsafe fn qgemm_blocked<X: QuantInt, Y: QuantInt>(
    q: &Requantize,
    [m, k, n]: [usize; 3],
    a: &[X],
    b: &[i8],
    bias: &[i32],
    requant: &[i32],
    y: &mut [Y],
) -> bool {
    let (groups, blocks) = (k / 4, n / 4);
    let bytes: &[u8] = bytemuck::cast_slice(a);
    let fits = k % 4 == 0
        && n % 4 == 0
        && bytes.len() >= m * k
        && b.len() >= n * k
        && bias.len() >= n
        && y.len() >= m * n;
    if !fits {
        return false;
    }
    let signed = X::MIN < 0;
    let zero = q.input_zero.wrapping_add(if signed { 128 } else { 0 });
    // Each `thirty_two_columns` call: the same CPU features; `b` holds `blocks` blocks of
    // `16·groups` bytes (checked above). The first row's pass also sums every column's
    // weights (a vector of ones for activations), for `bias − zero · Σ w`.
    let mut offsets = std::vec![0i32; n];
    let flip = if signed { 0x80 } else { 0 };
    let mut row = std::vec![0u8; k];
    for r in 0..m {
        for (slot, &v) in row.iter_mut().zip(&bytes[r * k..(r + 1) * k]) {
            *slot = v ^ flip;
        }
        let four = |g: usize| {
            // SAFETY: activations 4g..4g + 4 lie within the row of k.
            let v = unsafe { row.as_ptr().add(4 * g).cast::<i32>().read_unaligned() };
            _mm256_set1_epi32(v)
        };
        for c in (0..blocks).step_by(8) {
            let columns = 4 * c..n;
            let sums = if r == 0 {
                // SAFETY: see `thirty_two_columns` above.
                let (sums, weights) =
                    unsafe { thirty_two_columns::<true>(b, [groups, blocks], c, four) };
                for ((col, offset), sum) in columns.clone().zip(&mut offsets[4 * c..]).zip(weights)
                {
                    *offset = bias[col].wrapping_sub(zero.wrapping_mul(sum));
                }
                sums
            } else {
                // SAFETY: see `thirty_two_columns` above.
                unsafe { thirty_two_columns::<false>(b, [groups, blocks], c, four).0 }
            };
            for (col, sum) in columns.zip(sums) {
                let rescaler = Requantizer::of_channel(requant, col, q);
                let value = rescaler.apply(sum.wrapping_add(offsets[col]));
                y[r * n + col] = Y::narrow(value);
            }
        }
    }
    true
}

/// Columns `4c..4c + 32` of blocked QGemm weights summed over every group of four
/// activations (`four(g)`: group g's, broadcast), and with `WEIGHT_SUMS` each column's `Σ w`: four independent chains of `vpdpbusd` (one
/// would wait on its latency) sharing each broadcast. Two blocks per vector, block `c` in
/// lanes 0–3 and `c + 1` in 4–7; blocks past the last read the last again (their lanes are
/// the caller's to drop).
///
/// # Safety
/// The CPU has AVX-512VL and VNNI; `b` holds `blocks ≥ 1` blocks of `16·groups` bytes.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
unsafe fn thirty_two_columns<const WEIGHT_SUMS: bool>(
    b: &[i8],
    [groups, blocks]: [usize; 2],
    c: usize,
    four: impl Fn(usize) -> __m256i,
) -> ([i32; 32], [i32; 32]) {
    let weights = |c: usize, g: usize| {
        let (first, second) = (c.min(blocks - 1), (c + 1).min(blocks - 1));
        // SAFETY: block `c` starts at `16·groups·c` and holds `16·groups` bytes, within `b`.
        unsafe {
            _mm256_set_m128i(
                _mm_loadu_si128(b.as_ptr().add(16 * (groups * second + g)).cast()),
                _mm_loadu_si128(b.as_ptr().add(16 * (groups * first + g)).cast()),
            )
        }
    };
    let ones = _mm256_set1_epi8(1);
    let mut acc = [_mm256_setzero_si256(); 4];
    let mut sums = [_mm256_setzero_si256(); 4];
    for g in 0..groups {
        let x = four(g);
        for (j, (acc, sum)) in acc.iter_mut().zip(&mut sums).enumerate() {
            let w = weights(c + 2 * j, g);
            *acc = _mm256_dpbusd_epi32(*acc, x, w);
            if WEIGHT_SUMS {
                *sum = _mm256_dpbusd_epi32(*sum, ones, w);
            }
        }
    }
    let mut out = ([0i32; 32], [0i32; 32]);
    for (j, (acc, sum)) in acc.iter().zip(&sums).enumerate() {
        // SAFETY: each array holds 32 int32s.
        unsafe {
            _mm256_storeu_si256(out.0.as_mut_ptr().add(8 * j).cast(), *acc);
            _mm256_storeu_si256(out.1.as_mut_ptr().add(8 * j).cast(), *sum);
        }
    }
    out
}

/// Whether a QGemm's weights are in the blocked layout [`qgemm_blocked`] reads.
pub(crate) fn blocked(layout: QGemmWeights) -> bool {
    matches!(layout, QGemmWeights::Blocked)
}
