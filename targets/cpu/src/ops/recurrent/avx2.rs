//! `reference::times_transposed` in AVX2 registers: the eight partial sums of `reference::dot` are a vector's
//! lanes, multiplied and added (never fused) in the same order, so every result equals the
//! portable one bit for bit; eight weight rows at a time keep eight chains of additions in
//! flight. (LLVM leaves the portable form scalar on x86-64: 4 × 8 partial sums spill.)

#![allow(unsafe_code)]

use super::operands::pairwise;
use core::arch::x86_64::*;

/// `reference::times_transposed` when the CPU runs the AVX2 build and the operands hold what
/// the sizes say (true: done).
pub(super) fn times_transposed(
    a: &[f32],
    m: &[f32],
    bias: Option<&[f32]>,
    [batch, rows, k]: [usize; 3],
    out: &mut [f32],
) -> bool {
    let fits = a.len() >= batch * k
        && m.len() >= rows * k
        && out.len() >= batch * rows
        && bias.is_none_or(|v| v.len() >= rows);
    if !fits || crate::isa::level() < crate::isa::Level::Avx2 {
        return false;
    }
    // SAFETY: the CPU has AVX2 (`simd::level`); the lengths are checked above.
    unsafe { product(a, m, bias, batch, rows, k, out) };
    true
}

/// The products of [`times_transposed`].
///
/// # Safety
/// The CPU has AVX2; `a` holds `batch·k` values, `m` `rows·k`, `out` `batch·rows` and
/// `bias`, if any, `rows`.
#[target_feature(enable = "avx2")]
unsafe fn product(
    a: &[f32],
    m: &[f32],
    bias: Option<&[f32]>,
    batch: usize,
    rows: usize,
    k: usize,
    out: &mut [f32],
) {
    let rest = k % 8;
    // The last partial chunk's lanes: the values past `rest` read as +0, and adding
    // +0 · +0 leaves a partial sum as it is (no sum starting at +0 becomes −0).
    let mask = _mm256_cmpgt_epi32(
        _mm256_set1_epi32(rest as i32),
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
    );
    for b in 0..batch {
        let mut g = 0;
        // SAFETY: row b of `a`, rows g.. of `m` and their outputs lie within them (the
        // caller's bounds).
        unsafe {
            while g + 8 <= rows {
                block::<8>(a, m, bias, [b, g, rows, k], mask, out);
                g += 8;
            }
            while g < rows {
                block::<1>(a, m, bias, [b, g, rows, k], mask, out);
                g += 1;
            }
        }
    }
}

/// [`pairwise`] of eight vectors' lanes at once, in one vector: `s_i + s_{i+4}`, then
/// `(s0 + s4) + (s2 + s6)` and `(s1 + s5) + (s3 + s7)`, then their sum — each addition the
/// scalar form's, with the same operands (IEEE addition commutes exactly).
#[inline]
#[target_feature(enable = "avx2")]
fn pairwise_eight(v: [__m256; 8]) -> __m256 {
    // Lanes i + (i + 4) of rows r and r + 1: [a(r), a(r + 1)], a_i = s_i + s_{i+4}.
    let halves = |r: usize| {
        let low = _mm256_permute2f128_ps::<0x20>(v[r], v[r + 1]);
        let high = _mm256_permute2f128_ps::<0x31>(v[r], v[r + 1]);
        _mm256_add_ps(low, high)
    };
    let [a01, a23, a45, a67] = [halves(0), halves(2), halves(4), halves(6)];
    // [a0 + a2, a1 + a3] of rows r, r + 2 (lane 0) and r + 1, r + 3 (lane 1).
    let pairs = |x: __m256, y: __m256| {
        let even = _mm256_shuffle_ps::<0b01_00_01_00>(x, y);
        let odd = _mm256_shuffle_ps::<0b11_10_11_10>(x, y);
        _mm256_add_ps(even, odd)
    };
    let (b0123, b4567) = (pairs(a01, a23), pairs(a45, a67));
    // b0 + b1 of rows [0, 2, 4, 6 | 1, 3, 5, 7], then in order.
    let first = _mm256_shuffle_ps::<0b10_00_10_00>(b0123, b4567);
    let second = _mm256_shuffle_ps::<0b11_01_11_01>(b0123, b4567);
    let sums = _mm256_add_ps(first, second);
    _mm256_permutevar8x32_ps(sums, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))
}

/// Rows `g..g + B` of `m` times row `b` of `a`, each summed as `reference::dot` sums it.
///
/// # Safety
/// The CPU has AVX2; the rows and their outputs lie within `a`, `m`, `bias` and `out`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn block<const B: usize>(
    a: &[f32],
    m: &[f32],
    bias: Option<&[f32]>,
    [b, g, rows, k]: [usize; 4],
    mask: __m256i,
    out: &mut [f32],
) {
    let (chunks, rest) = (k / 8, k % 8);
    // SAFETY: the caller's bounds.
    unsafe {
        let x = a.as_ptr().add(b * k);
        let weights: [*const f32; B] = core::array::from_fn(|r| m.as_ptr().add((g + r) * k));
        let mut acc = [_mm256_setzero_ps(); B];
        for c in 0..chunks {
            let xs = _mm256_loadu_ps(x.add(8 * c));
            for (acc, w) in acc.iter_mut().zip(weights) {
                *acc = _mm256_add_ps(*acc, _mm256_mul_ps(xs, _mm256_loadu_ps(w.add(8 * c))));
            }
        }
        if rest > 0 {
            let xs = _mm256_maskload_ps(x.add(8 * chunks), mask);
            for (acc, w) in acc.iter_mut().zip(weights) {
                let ys = _mm256_maskload_ps(w.add(8 * chunks), mask);
                *acc = _mm256_add_ps(*acc, _mm256_mul_ps(xs, ys));
            }
        }
        if let (8, Ok(eight)) = (B, <[__m256; 8]>::try_from(&acc[..])) {
            let mut sums = pairwise_eight(eight);
            if let Some(bias) = bias {
                sums = _mm256_add_ps(sums, _mm256_loadu_ps(bias.as_ptr().add(g)));
            }
            _mm256_storeu_ps(out.as_mut_ptr().add(b * rows + g), sums);
            return;
        }
        for (r, acc) in acc.iter().enumerate() {
            let mut sums = [0.0f32; 8];
            _mm256_storeu_ps(sums.as_mut_ptr(), *acc);
            let bias = bias.map_or(0.0, |v| *v.get_unchecked(g + r));
            *out.get_unchecked_mut(b * rows + g + r) = pairwise(sums) + bias;
        }
    }
}
