//! QAdd with AVX2: eight outputs at a time, each input's term from its 256-entry table or
//! computed, the two added and rounded once as the scalar form ([`super::int8::qadd`]).

#![allow(unsafe_code)]

use crate::base::quantized::QuantInt;
use crate::isa::avx2::low_bytes;
use core::arch::x86_64::*;

/// [`crate::ops::elementwise::int8::qadd`]'s table form, eight outputs at a time, when the build runs the AVX2
/// kernels: each input's term gathered from its 256-entry table by byte (`vpgatherdd`), the two
/// added (saturating, as the scalar form), rounded once with `frac`
/// fraction bits, ties to even, offset by the output zero point and clamped to
/// `[zero, min, max]`'s bounds. The last `len mod 8` outputs one at a time. False (nothing
/// done) when the kernels do not run or an operand is short.
pub(crate) fn qadd_tables<Y: QuantInt>(
    frac: u32,
    finish: [i32; 3],
    tables: [&[i32]; 2],
    a: &[u8],
    b: &[u8],
    y: &mut [Y],
) -> bool {
    let fits = tables.iter().all(|t| t.len() >= 256) && a.len() >= y.len() && b.len() >= y.len();
    if Y::WIDE || !fits || frac > 30 || crate::isa::level() < crate::isa::Level::Avx2 {
        return false;
    }
    // SAFETY: the CPU has AVX2 (`simd::level`).
    unsafe { qadd_tables_avx2(frac, finish, tables, a, b, y) };
    true
}

/// `a + b` per lane, saturated to int32 as `i32::saturating_add` (terms reach 2^30 and past
/// only for output scales far below the inputs', where the scalar form saturates too).
#[inline]
#[target_feature(enable = "avx2")]
fn saturating_add(a: __m256i, b: __m256i) -> __m256i {
    let sum = _mm256_add_epi32(a, b);
    // Overflow: both operands' signs differ from the sum's.
    let overflow = _mm256_and_si256(_mm256_xor_si256(a, sum), _mm256_xor_si256(b, sum));
    let overflow = _mm256_srai_epi32::<31>(overflow);
    // i32::MAX for a non-negative `a`, i32::MIN for a negative one.
    let bound = _mm256_xor_si256(_mm256_srai_epi32::<31>(a), _mm256_set1_epi32(i32::MAX));
    _mm256_blendv_epi8(sum, bound, overflow)
}

/// [`crate::ops::elementwise::int8::qadd`] with each input's term computed eight at a time, when the
/// build runs the AVX2 kernels and both terms have a vector form (`[multiplier, right, zero]`,
/// see `AddTerm::vector_form`): `shift_sticky((v − zero)·multiplier, right)` by 32 × 32 → 64-bit
/// products, a logical shift and the dropped bits' sticky bit, in place of [`qadd_tables`]'
/// 256-entry tables and their gathers (slow on AMD cores: ResNet-8 int8's QAdds took 35 µs of
/// its 300 on Zen 3). The rest as [`qadd_tables`]. False (nothing done) when the kernels do not
/// run, a form is out of range or an operand is short.
pub(crate) fn qadd_computed<Y: QuantInt>(
    frac: u32,
    finish: [i32; 3],
    forms: [[i32; 3]; 2],
    signed: [bool; 2],
    a: &[u8],
    b: &[u8],
    y: &mut [Y],
) -> bool {
    let fits = a.len() >= y.len() && b.len() >= y.len();
    let shifts = forms
        .iter()
        .all(|[m, right, _]| *m >= 0 && (0..=32).contains(right));
    if Y::WIDE || !fits || !shifts || frac > 30 || crate::isa::level() < crate::isa::Level::Avx2 {
        return false;
    }
    // SAFETY: the CPU has AVX2 (`simd::level`); the forms' shifts are 0–32.
    unsafe {
        let terms = Computed([
            ComputedTerm::new(forms[0], signed[0]),
            ComputedTerm::new(forms[1], signed[1]),
        ]);
        qadd_avx2(frac, finish, &terms, a, b, y)
    };
    true
}

/// How [`qadd_avx2`] gets the two inputs' terms of eight elements.
trait AddTerms {
    /// The terms of bytes `at..at + 8` of `a` and of `b`.
    ///
    /// # Safety
    /// The CPU has AVX2; `at + 8` is within `a` and `b`.
    unsafe fn terms(&self, a: &[u8], b: &[u8], at: usize) -> (__m256i, __m256i);
}

/// Each input's 256-entry table, read by `vpgatherdd`.
struct Tables<'a>([&'a [i32]; 2]);

impl AddTerms for Tables<'_> {
    #[inline(always)]
    unsafe fn terms(&self, a: &[u8], b: &[u8], at: usize) -> (__m256i, __m256i) {
        let [ta, tb] = self.0;
        // SAFETY: the caller's; every index is a byte, below the tables' 256 entries.
        unsafe {
            let ia = _mm256_cvtepu8_epi32(_mm_loadl_epi64(a.as_ptr().add(at).cast()));
            let ib = _mm256_cvtepu8_epi32(_mm_loadl_epi64(b.as_ptr().add(at).cast()));
            (
                _mm256_i32gather_epi32::<4>(ta.as_ptr(), ia),
                _mm256_i32gather_epi32::<4>(tb.as_ptr(), ib),
            )
        }
    }
}

/// Each input's term computed ([`ComputedTerm`]).
struct Computed([ComputedTerm; 2]);

impl AddTerms for Computed {
    #[inline(always)]
    unsafe fn terms(&self, a: &[u8], b: &[u8], at: usize) -> (__m256i, __m256i) {
        let [ta, tb] = &self.0;
        // SAFETY: the caller's.
        unsafe { (ta.of(a, at), tb.of(b, at)) }
    }
}

/// One input's term in vector form ([`qadd_computed`]).
#[derive(Clone, Copy)]
struct ComputedTerm {
    zero: __m256i,
    multiplier: __m256i,
    /// The right shift, as the shift instructions' count.
    right: __m128i,
    /// `2^right − 1` in each 64-bit lane: the bits the shift drops.
    dropped: __m256i,
    signed: bool,
}

impl ComputedTerm {
    /// The vector form of `[multiplier, right, zero]` (`right` in `0..=32`) for bytes of the
    /// signedness.
    #[target_feature(enable = "avx2")]
    fn new([multiplier, right, zero]: [i32; 3], signed: bool) -> ComputedTerm {
        ComputedTerm {
            zero: _mm256_set1_epi32(zero),
            multiplier: _mm256_set1_epi32(multiplier),
            right: _mm_cvtsi32_si128(right),
            dropped: _mm256_set1_epi64x((1i64 << right.clamp(0, 32)) - 1),
            signed,
        }
    }

    /// The terms of bytes `at..at + 8` of `x`.
    ///
    /// # Safety
    /// The CPU has AVX2; `at + 8 ≤ x.len()`.
    #[inline(always)]
    unsafe fn of(&self, x: &[u8], at: usize) -> __m256i {
        // SAFETY: the caller's.
        unsafe {
            let bytes = _mm_loadl_epi64(x.as_ptr().add(at).cast());
            let values = if self.signed {
                _mm256_cvtepi8_epi32(bytes)
            } else {
                _mm256_cvtepu8_epi32(bytes)
            };
            let difference = _mm256_sub_epi32(values, self.zero);
            // The 64-bit products of the even lanes, then of the odd ones; each shifted, the
            // low bit set where the shift dropped any (round to odd), and the low words kept.
            let even = self.sticky(_mm256_mul_epi32(difference, self.multiplier));
            let odd = _mm256_srli_epi64::<32>(difference);
            let odd = self.sticky(_mm256_mul_epi32(odd, self.multiplier));
            _mm256_blend_epi32::<0b1010_1010>(even, _mm256_slli_epi64::<32>(odd))
        }
    }

    /// `shift_sticky` of four 64-bit products, right 0–32 (the low words of the logical shift
    /// are the arithmetic shift's).
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[inline(always)]
    unsafe fn sticky(&self, product: __m256i) -> __m256i {
        // SAFETY: the caller's.
        unsafe {
            let shifted = _mm256_srl_epi64(product, self.right);
            let dropped = _mm256_and_si256(product, self.dropped);
            let exact = _mm256_cmpeq_epi64(dropped, _mm256_setzero_si256());
            _mm256_or_si256(shifted, _mm256_andnot_si256(exact, _mm256_set1_epi64x(1)))
        }
    }
}

/// The body of [`qadd_tables`].
///
/// # Safety
/// Each table holds 256 entries; `a` and `b` at least `y.len()` bytes.
#[target_feature(enable = "avx2")]
unsafe fn qadd_tables_avx2<Y: QuantInt>(
    frac: u32,
    finish: [i32; 3],
    tables: [&[i32]; 2],
    a: &[u8],
    b: &[u8],
    y: &mut [Y],
) {
    // SAFETY: the caller's.
    unsafe { qadd_avx2(frac, finish, &Tables(tables), a, b, y) }
}

/// The QAdd loop on eight elements at a time: their terms (`T`), then [`AddFinish`]; the last
/// `len mod 8` through a zero-padded copy of their bytes.
///
/// # Safety
/// The CPU has AVX2; `a` and `b` hold at least `y.len()` bytes; `T`'s own conditions.
#[target_feature(enable = "avx2")]
unsafe fn qadd_avx2<Y: QuantInt, T: AddTerms>(
    frac: u32,
    finish: [i32; 3],
    terms: &T,
    a: &[u8],
    b: &[u8],
    y: &mut [Y],
) {
    let finish = AddFinish::new(frac, finish);
    // Eight-bit outputs (the callers'): each one's byte.
    let y: &mut [u8] = bytemuck::cast_slice_mut(y);
    let full = y.len() / 8 * 8;
    for at in (0..full).step_by(8) {
        // SAFETY: at + 8 <= y.len() <= a.len(), b.len(); AVX2.
        let bytes = unsafe { finish.bytes(terms.terms(a, b, at)) };
        if let Some(slots) = y.get_mut(at..at + 8) {
            slots.copy_from_slice(&bytes);
        }
    }
    if full < y.len() {
        let (mut ra, mut rb) = ([0u8; 8], [0u8; 8]);
        for (slot, &v) in ra.iter_mut().zip(&a[full..y.len()]) {
            *slot = v;
        }
        for (slot, &v) in rb.iter_mut().zip(&b[full..y.len()]) {
            *slot = v;
        }
        // SAFETY: the copies hold eight bytes each (their padding's outputs are dropped); AVX2.
        let bytes = unsafe { finish.bytes(terms.terms(&ra, &rb, 0)) };
        for (slot, &v) in y[full..].iter_mut().zip(&bytes) {
            *slot = v;
        }
    }
}

/// What turns eight sums of terms into outputs: added (saturating, as the scalar form), rounded
/// once with `frac` fraction bits, ties to even, offset by the output zero point and clamped
/// to `[min, max]`.
struct AddFinish {
    frac: u32,
    shift: __m128i,
    mask: __m256i,
    half: __m256i,
    bounds: [__m256i; 3],
}

impl AddFinish {
    #[target_feature(enable = "avx2")]
    fn new(frac: u32, finish: [i32; 3]) -> AddFinish {
        AddFinish {
            frac,
            shift: _mm_cvtsi32_si128(frac as i32),
            mask: _mm256_set1_epi32(((1i64 << frac) - 1) as i32),
            half: _mm256_set1_epi32(((1i64 << frac) >> 1) as i32),
            bounds: finish.map(|v| _mm256_set1_epi32(v)),
        }
    }

    /// The eight outputs' bytes of the two inputs' terms.
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[inline(always)]
    unsafe fn bytes(&self, (terms_a, terms_b): (__m256i, __m256i)) -> [u8; 8] {
        // SAFETY: the caller's.
        unsafe {
            let sum = saturating_add(terms_a, terms_b);
            let rounded = if self.frac == 0 {
                sum
            } else {
                let q = _mm256_sra_epi32(sum, self.shift);
                let rest = _mm256_and_si256(sum, self.mask);
                let odd = _mm256_and_si256(q, _mm256_set1_epi32(1));
                // rest + (q & 1) > half: the compare is all ones (−1), so subtracting it adds
                // one.
                let up = _mm256_cmpgt_epi32(_mm256_add_epi32(rest, odd), self.half);
                _mm256_sub_epi32(q, up)
            };
            // |rounded| < 2^31 >> frac, or the saturated sum itself when frac is 0: the
            // scalar form's saturating add of the zero point, then the clamp.
            let [zero, min, max] = self.bounds;
            let v = saturating_add(rounded, zero);
            let v = _mm256_min_epi32(_mm256_max_epi32(v, min), max);
            low_bytes(v).to_le_bytes()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::element_ids::Rng;

    /// The vectorised table addition equals `qadd`'s scalar form: random tables (terms up to
    /// int32's bounds, so sums saturate), every fraction width 0–30, random clamps, lengths
    /// with and without a tail.
    #[test]
    fn qadd_tables_equal_the_scalar_form() {
        if crate::isa::level() < crate::isa::Level::Avx2 {
            return;
        }
        let mut rng = Rng(0x1234_5678_9abc_def1);
        for case in 0..400 {
            let frac = (case % 31) as u32;
            let big = case % 3 == 0;
            let table = |rng: &mut Rng| -> Vec<i32> {
                (0..256)
                    .map(|_| {
                        if big {
                            rng.next() as i32
                        } else {
                            (rng.next() as i32) >> 2
                        }
                    })
                    .collect()
            };
            let (ta, tb) = (table(&mut rng), table(&mut rng));
            let len = rng.below(200);
            let a: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            let b: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            let zero = rng.below(256) as i32 - 128;
            let (min, max) = (-128 + rng.below(64) as i32, 127 - rng.below(64) as i32);
            let mut y = std::vec![0i8; len];
            assert!(qadd_tables(
                frac,
                [zero, min, max],
                [&ta, &tb],
                &a,
                &b,
                &mut y
            ));
            let want: Vec<i8> = a
                .iter()
                .zip(&b)
                .map(|(&av, &bv)| {
                    let sum = ta[av as usize].saturating_add(tb[bv as usize]);
                    let rounded = if frac == 0 {
                        sum
                    } else {
                        let q = sum >> frac;
                        let rest = sum & ((1i32 << frac) - 1);
                        q + ((rest + (q & 1)) > (1i32 << (frac - 1))) as i32
                    };
                    rounded.saturating_add(zero).max(min).min(max) as i8
                })
                .collect();
            assert_eq!(y, want, "case {case}: frac {frac}");
        }
    }
}
