//! AVX2 lane helpers the kernels of several families share: narrowing int32 lanes to bytes.

#![allow(unsafe_code)]

use core::arch::x86_64::*;

/// The low byte of each of eight int32 lanes, lane `t` in byte `t`: each 128-bit half's four
/// picked into its first word by one byte shuffle, the two words joined by one permute.
///
/// # Safety
/// The CPU has AVX2.
#[inline(always)]
pub(crate) unsafe fn low_bytes(v: __m256i) -> u64 {
    // SAFETY: the caller's.
    unsafe {
        let pick = _mm256_setr_epi8(
            0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, //
            0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
        );
        let words = _mm256_shuffle_epi8(v, pick);
        let joined = _mm256_permutevar8x32_epi32(words, _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0));
        _mm_cvtsi128_si64(_mm256_castsi256_si128(joined)) as u64
    }
}

/// The low byte of each int32 lane of `first`, then of `second` (sixteen bytes in order): the
/// lanes, clamped outputs of 8-bit types, packed to int16 exactly, masked to their low bytes,
/// packed to bytes and the four words put in order by one permute.
///
/// # Safety
/// The CPU has AVX2; every lane is within int16.
#[inline(always)]
pub(crate) unsafe fn low_bytes_two(first: __m256i, second: __m256i) -> [u8; 16] {
    // SAFETY: the caller's.
    unsafe {
        // Per 128-bit half: first's four, second's four (int16).
        let words = _mm256_packs_epi32(first, second);
        let low = _mm256_and_si256(words, _mm256_set1_epi16(0xff));
        let bytes = _mm256_packus_epi16(low, low);
        let ordered = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 0, 0, 0, 0));
        let mut out = [0u8; 16];
        _mm_storeu_si128(out.as_mut_ptr().cast(), _mm256_castsi256_si128(ordered));
        out
    }
}
