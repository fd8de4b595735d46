//! Integer elementwise ops on quantized tensors: addition (QAdd, in fixed point with the sum's
//! fractional bits), multiplication (QMul) and softmax (QSoftmax, by a table of exponentials).

use crate::base::quantized::{Bytes8, QuantByte, QuantInt};
use crate::base::requantize::{divide_nearest, output_rescaler, rescale_right_shift, shift_sticky};
use ferrite_hal::op::{QAdd, QMul, QSoftmax, Rescale, QADD_LEFT_SHIFT, QSOFTMAX_TABLE_BITS};

/// One input's term of an integer addition, `(v − zero) · s_v / s_y` in fixed point with the
/// sum's fractional bits, exact or rounded to odd (see [`AddTerms`]).
#[derive(Clone, Copy, Debug)]
struct AddTerm {
    /// Q31 mantissa of `s_v / s_y`.
    multiplier: i64,
    /// Right shift from `(v − zero) · multiplier` to the sum's fixed point (negative: left).
    right: i32,
    zero: i32,
}

impl AddTerm {
    /// The term of `v`, for 8-bit inputs (it fits int32 by the choice of fraction bits).
    #[inline(always)]
    fn of(&self, v: i32) -> i32 {
        self.of_wide(v).clamp(i32::MIN as i64, i32::MAX as i64) as i32
    }

    /// `[multiplier, right, zero]` where a vector kernel can compute this term for every value
    /// of `lo..=hi` with 32 × 32 → 64-bit products and a 64-bit logical shift: a non-negative
    /// multiplier below 2^31, a right shift of 0 to 32 (the low 32 bits of the logical and the
    /// arithmetic shift then agree), and every term within int32 (so [`AddTerm::of`]'s clamp
    /// changes none; the terms are monotone in `v`, so the two ends decide). `None` otherwise.
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    fn vector_form(&self, lo: i32, hi: i32) -> Option<[i32; 3]> {
        let multiplier = i32::try_from(self.multiplier).ok().filter(|&m| m >= 0)?;
        let fits = |v: i32| i32::try_from(self.of_wide(v)).is_ok();
        ((0..=32).contains(&self.right) && fits(lo) && fits(hi))
            .then_some([multiplier, self.right, self.zero])
    }

    /// The term of `v` in int64 (16-bit inputs). Out of line on a firmware (8-bit additions
    /// call it 512 times an op, for their tables; inlined at each caller, 1.7 KB).
    #[cfg_attr(feature = "std", inline(always))]
    #[cfg_attr(not(feature = "std"), inline(never))]
    fn of_wide(&self, v: i32) -> i64 {
        let x = (v - self.zero) as i64 * self.multiplier;
        if self.right >= 0 {
            shift_sticky(x, self.right as u32)
        } else {
            x.saturating_mul(1i64 << (-self.right).min(62))
        }
    }
}

/// What an integer addition works out once: each input's term and the sum's fractional bits.
///
/// The definition is `round_half_even((a − za)·s_a/s_y + (b − zb)·s_b/s_y) + zy`. [`QAdd`]
/// stores TFLite's three rescales (each input to a common scale, lifted by 2^20, then the sum to
/// the output); their products are `s_a/s_y` and `s_b/s_y`, taken here as Q31 mantissas. Each
/// term is formed in fixed point with `frac` fractional bits (as many as keep two 8-bit terms in
/// int32, 22 for scale ratios near one; two 16-bit terms in int64, 45), exactly or rounded to
/// odd when bits are dropped (so an inexact sum never looks like an exact tie), and the sum is
/// rounded once, ties to even.
#[derive(Clone, Copy, Debug)]
struct AddTerms {
    a: AddTerm,
    b: AddTerm,
    frac: u32,
}

impl AddTerms {
    /// The terms of `q` for 8-bit inputs (`wide` false: int32 sums) or 16-bit ones (int64).
    fn new(q: &QAdd, wide: bool) -> AddTerms {
        // `s_v / s_y = m · 2^e`, m a Q31 mantissa: the product of the two rescales' Q31 numbers,
        // rounded back to 31 bits.
        let combined = |r: Rescale| -> (i64, i32) {
            let m62 = r.multiplier as i64 * q.output.multiplier as i64;
            let m = (m62 + (1 << 30)) >> 31;
            (m, r.shift + q.output.shift + QADD_LEFT_SHIFT - 31)
        };
        let ((ma, ea), (mb, eb)) = (combined(q.a), combined(q.b));
        // |(v − z) · m| < 2^(8 + 31): with `frac` bits each term stays below 2^30. For 16-bit
        // inputs |(v − z) · m| < 2^(16 + 31), and each term stays below 2^61.
        let frac = if wide {
            (14 - ea.max(eb)).clamp(0, 61)
        } else {
            (-9 - ea.max(eb)).clamp(0, 30)
        };
        let term = |m: i64, e: i32, zero: i32| AddTerm {
            multiplier: m,
            right: -(e + frac),
            zero,
        };
        AddTerms {
            a: term(ma, ea, q.a_zero),
            b: term(mb, eb, q.b_zero),
            frac: frac as u32,
        }
    }

    /// The rounded sum of two terms (before the output zero point), in int32 arithmetic.
    #[inline(always)]
    fn round(&self, sum: i32) -> i32 {
        if self.frac == 0 {
            return sum;
        }
        // `frac` is in `1..=30`: the remainder plus one stays within int32.
        let q = sum >> self.frac;
        let rest = sum & ((1i32 << self.frac) - 1);
        q + ((rest + (q & 1)) > (1i32 << (self.frac - 1))) as i32
    }

    /// [`AddTerms::round`] of an int64 sum (16-bit inputs; `frac` in `0..=61`).
    #[inline(always)]
    fn round_wide(&self, sum: i64) -> i64 {
        if self.frac == 0 {
            return sum;
        }
        let q = sum >> self.frac;
        let rest = sum & ((1i64 << self.frac) - 1);
        q + ((rest + (q & 1)) > (1i64 << (self.frac - 1))) as i64
    }
}

/// Integer addition: `(a − za)·s_a/s_y + (b − zb)·s_b/s_y` in fixed point (each term exact or
/// rounded to odd, with as many fraction bits as keep two 8-bit terms in int32), rounded once,
/// ties to even, as the definition does. With `tables` (512 entries of scratch, see
/// `ferrite_hal::geometry::qadd_scratch_elements`) each input's term is looked up by its byte
/// instead of computed per element (the same integers either way).
#[inline(always)]
pub fn qadd<A: QuantByte, B: QuantByte, Y: QuantInt>(
    q: &QAdd,
    a: &[A],
    b: &[B],
    y: &mut [Y],
    tables: &mut [i32],
) {
    let terms = AddTerms::new(q, false);
    let finish = |sum: i32| {
        Y::narrow(
            terms
                .round(sum)
                .saturating_add(q.output_zero)
                .max(q.min)
                .min(q.max),
        )
    };
    // Each term computed eight at a time where it can be (no tables to fill, no gathers).
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    if let (Some(fa), Some(fb)) = (
        terms.a.vector_form(A::MIN, A::MAX),
        terms.b.vector_form(B::MIN, B::MAX),
    ) {
        let (ab, bb) = (bytemuck::cast_slice(a), bytemuck::cast_slice(b));
        let finish = [q.output_zero, q.min, q.max];
        let signed = [A::MIN < 0, B::MIN < 0];
        if super::int8_avx2::qadd_computed(terms.frac, finish, [fa, fb], signed, ab, bb, y) {
            return;
        }
    }
    if let Some((ta, tb)) = tables.get_mut(..512).map(|t| t.split_at_mut(256)) {
        for (k, (sa, sb)) in ta.iter_mut().zip(tb.iter_mut()).enumerate() {
            *sa = terms.a.of(A::from_byte(k as u8).widen());
            *sb = terms.b.of(B::from_byte(k as u8).widen());
        }
        let (ta, tb) = (&*ta, &*tb);
        #[cfg(all(feature = "std", target_arch = "x86_64"))]
        {
            let (ab, bb) = (bytemuck::cast_slice(a), bytemuck::cast_slice(b));
            let finish = [q.output_zero, q.min, q.max];
            if super::int8_avx2::qadd_tables(terms.frac, finish, [ta, tb], ab, bb, y) {
                return;
            }
        }
        for ((out, &av), &bv) in y.iter_mut().zip(a).zip(b) {
            *out = finish(ta[av.byte() as usize].saturating_add(tb[bv.byte() as usize]));
        }
        return;
    }
    for ((out, &av), &bv) in y.iter_mut().zip(a).zip(b) {
        *out = finish(
            terms
                .a
                .of(av.widen())
                .saturating_add(terms.b.of(bv.widen())),
        );
    }
}

/// [`qadd`] of 16-bit inputs: the same single rounding on int64 fixed-point terms (45 fraction
/// bits for scale ratios near one), per element (no tables).
#[inline(never)]
pub fn qadd_wide<T: QuantInt>(q: &QAdd, a: &[T], b: &[T], y: &mut [T]) {
    let terms = AddTerms::new(q, true);
    for ((out, &av), &bv) in y.iter_mut().zip(a).zip(b) {
        let sum = terms
            .a
            .of_wide(av.widen())
            .saturating_add(terms.b.of_wide(bv.widen()));
        let v = terms.round_wide(sum).saturating_add(q.output_zero.into());
        *out = T::narrow(v.max(q.min.into()).min(q.max.into()) as i32);
    }
}

/// Integer multiplication (TFLite's quantized `Mul`): `(a − za)(b − zb)` rescaled. `pairs` walks
/// the output with the element offsets of A and B (broadcasting).
#[inline(always)]
pub fn qmul<T: QuantInt>(
    q: &QMul,
    a: &[T],
    b: &[T],
    y: &mut [T],
    pairs: impl FnOnce(&mut dyn FnMut([usize; 3])),
) {
    let rq = output_rescaler(q.rescale, q.output_zero, q.min, q.max);
    pairs(&mut |[o, ia, ib]| {
        if let (Some(slot), Some(av), Some(bv)) = (y.get_mut(o), a.get(ia), b.get(ib)) {
            let product = (av.widen() - q.a_zero) * (bv.widen() - q.b_zero);
            *slot = T::narrow(rq.apply(product));
        }
    });
}

/// Integer softmax along the middle axis of `[outer, len, inner]`: each element's table entry at
/// its distance from the maximum, divided by their sum and rescaled by `1/s_y` in 64-bit
/// integers (see [`QSoftmax`]).
pub fn qsoftmax(
    q: &QSoftmax,
    [outer, len, inner]: [usize; 3],
    (x, ty): (&[u8], Bytes8),
    table: &[i32],
    y: &mut [u8],
) {
    let right = rescale_right_shift(q.rescale);
    let multiplier = q.rescale.multiplier as i64;
    let entry = |max: i32, v: &u8| {
        let e = table
            .get((max - ty.value(*v)) as usize)
            .copied()
            .unwrap_or(0);
        e.clamp(0, 1 << QSOFTMAX_TABLE_BITS) as i64
    };
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| (o * len + j) * inner + i;
            let lane = || (0..len).filter_map(|j| x.get(at(j)));
            let Some(max) = lane().map(|v| ty.value(*v)).max() else {
                continue;
            };
            let sum: i64 = lane().map(|v| entry(max, v)).sum();
            for j in 0..len {
                if let (Some(v), Some(out)) = (x.get(at(j)), y.get_mut(at(j))) {
                    let p = divide_nearest(entry(max, v) * multiplier, sum, right);
                    let p = p.clamp(-(1 << 20), 1 << 20) as i32;
                    // max then min, not `clamp`, which panics when min > max (load refuses it).
                    *out = (p + q.output_zero).max(q.min).min(q.max) as u8;
                }
            }
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

    #[test]
    fn qadd_matches_real_arithmetic_within_one_step() {
        let (sa, sb, sy) = (0.02f64, 0.05f64, 0.06f64);
        let (za, zb, zy) = (-7, 12, 3);
        let twice_max = 2.0 * sa.max(sb);
        let q = QAdd {
            a: rescale_of(sa / twice_max),
            b: rescale_of(sb / twice_max),
            output: rescale_of(twice_max / ((1 << QADD_LEFT_SHIFT) as f64 * sy)),
            a_zero: za,
            b_zero: zb,
            output_zero: zy,
            min: -128,
            max: 127,
        };
        let a: Vec<i8> = (0..256).map(|i| (i - 128) as i8).collect();
        let b: Vec<i8> = (0..256).map(|i| ((i * 37 % 256) - 128) as i8).collect();
        let mut y = vec![0i8; 256];
        qadd(&q, &a, &b, &mut y, &mut []);
        let mut tabled = vec![0i8; 256];
        qadd(&q, &a, &b, &mut tabled, &mut [0; 512]);
        assert_eq!(y, tabled, "tables change nothing");
        for i in 0..256 {
            let real = (sa * (a[i] as i32 - za) as f64 + sb * (b[i] as i32 - zb) as f64) / sy;
            // Decimal scales make some sums exact halves that neither f64 nor the Q31
            // multipliers represent exactly: either neighbour is right there.
            if ((real - real.floor()) - 0.5).abs() < 1e-6 {
                continue;
            }
            let want = (real.round_ties_even() as i32 + zy).clamp(-128, 127);
            assert_eq!(y[i] as i32, want, "{i}");
        }
    }

    /// [`qadd`] with its vector forms (each term computed eight at a time where it has a
    /// vector form, else tables read by gathers, on x86-64 with AVX2) equals the scalar
    /// definition element for element: random scale ratios from 2^-12 to 2^12 between the
    /// inputs and the output, zero points, clamps, int8 and uint8 inputs and outputs, lengths
    /// with and without a tail of fewer than eight.
    #[test]
    fn qadd_vector_forms_equal_the_scalar_form() {
        fn check<A: QuantByte, B: QuantByte, Y: QuantInt>(next: &mut impl FnMut() -> u64) -> bool {
            let ratio = |r: u64| 2f64.powf((r % 2400) as f64 / 100.0 - 12.0);
            let (sa, sb, sy) = (ratio(next()), ratio(next()), ratio(next()));
            let twice_max = 2.0 * sa.max(sb);
            let in_range = |r: u64, lo: i32, hi: i32| lo + (r % (hi - lo + 1) as u64) as i32;
            let (lo, hi) = (
                in_range(next(), Y::MIN, Y::MAX),
                in_range(next(), Y::MIN, Y::MAX),
            );
            let q = QAdd {
                a: rescale_of(sa / twice_max),
                b: rescale_of(sb / twice_max),
                output: rescale_of(twice_max / ((1 << QADD_LEFT_SHIFT) as f64 * sy)),
                a_zero: in_range(next(), A::MIN, A::MAX),
                b_zero: in_range(next(), B::MIN, B::MAX),
                output_zero: in_range(next(), Y::MIN, Y::MAX),
                min: lo.min(hi),
                max: lo.max(hi),
            };
            let len = (next() % 70) as usize;
            let a: Vec<A> = (0..len).map(|_| A::from_byte(next() as u8)).collect();
            let b: Vec<B> = (0..len).map(|_| B::from_byte(next() as u8)).collect();
            let terms = AddTerms::new(&q, false);
            let want: Vec<i32> = a
                .iter()
                .zip(&b)
                .map(|(&av, &bv)| {
                    let sum = terms
                        .a
                        .of(av.widen())
                        .saturating_add(terms.b.of(bv.widen()));
                    let v = terms.round(sum).saturating_add(q.output_zero);
                    v.max(q.min).min(q.max)
                })
                .collect();
            for tables in [0, 512] {
                let mut y = vec![Y::narrow(0); len];
                qadd(&q, &a, &b, &mut y, &mut vec![0; tables]);
                let got: Vec<i32> = y.iter().map(|v| v.widen()).collect();
                assert_eq!(got, want, "{q:?}");
            }
            #[cfg(all(feature = "std", target_arch = "x86_64"))]
            return terms.a.vector_form(A::MIN, A::MAX).is_some()
                && terms.b.vector_form(B::MIN, B::MAX).is_some();
            #[cfg(not(all(feature = "std", target_arch = "x86_64")))]
            false
        }
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut computed = 0;
        for _ in 0..300 {
            computed += check::<i8, i8, i8>(&mut next) as usize;
            computed += check::<u8, u8, u8>(&mut next) as usize;
            computed += check::<i8, u8, i8>(&mut next) as usize;
            computed += check::<u8, i8, u8>(&mut next) as usize;
        }
        // Most scale ratios have the vector form (those past 2^23 apart do not).
        #[cfg(all(feature = "std", target_arch = "x86_64"))]
        assert!(computed > 600, "vector forms: {computed} of 1200");
        let _ = computed;
    }

    #[test]
    fn qadd_rounds_exact_halves_to_even() {
        // s_a / s_y = 1/2 and s_b / s_y = 1/4: many sums are exact halves.
        let (sa, sb, sy) = (0.5f64, 0.25f64, 1.0f64);
        let twice_max = 2.0 * sa.max(sb);
        let q = QAdd {
            a: rescale_of(sa / twice_max),
            b: rescale_of(sb / twice_max),
            output: rescale_of(twice_max / ((1 << QADD_LEFT_SHIFT) as f64 * sy)),
            a_zero: 3,
            b_zero: -5,
            output_zero: 1,
            min: -128,
            max: 127,
        };
        let a: Vec<i8> = (0..256).map(|i| (i - 128) as i8).collect();
        let b: Vec<i8> = (0..256).map(|i| ((i * 91 % 256) - 128) as i8).collect();
        let mut y = vec![0i8; 256];
        qadd(&q, &a, &b, &mut y, &mut [0; 512]);
        for i in 0..256 {
            let real = sa * (a[i] as i32 - 3) as f64 + sb * (b[i] as i32 + 5) as f64;
            let want = ((real / sy).round_ties_even() as i32 + 1).clamp(-128, 127);
            assert_eq!(y[i] as i32, want, "{i}: {real}");
        }
    }

    /// 16-bit addition: the real sum rounded once, over the whole input range (near-halves
    /// aside, which the Q31 ratios cannot place), and exact halves to even.
    #[test]
    fn qadd_of_int16_rounds_the_real_sum_once() {
        let mut next = random_i32s(5);
        for (sa, sb, sy, za, zb, zy) in [
            (2e-4f64, 5e-4f64, 7e-4f64, -1700, 300, 12),
            (3.1e-5, 3.1e-5, 2.9e-5, 0, 0, 0),
            (0.5, 0.25, 1.0, 3, -5, 1),
        ] {
            let twice_max = 2.0 * sa.max(sb);
            let q = QAdd {
                a: rescale_of(sa / twice_max),
                b: rescale_of(sb / twice_max),
                output: rescale_of(twice_max / ((1 << QADD_LEFT_SHIFT) as f64 * sy)),
                a_zero: za,
                b_zero: zb,
                output_zero: zy,
                min: -32768,
                max: 32767,
            };
            let a: Vec<i16> = (0..4096)
                .map(|i| {
                    if i < 2 {
                        [-32768, 32767][i]
                    } else {
                        (next() >> 16) as i16
                    }
                })
                .collect();
            let b: Vec<i16> = (0..4096).map(|_| (next() >> 16) as i16).collect();
            let mut y = vec![0i16; a.len()];
            qadd_wide(&q, &a, &b, &mut y);
            let mut checked = 0;
            for i in 0..a.len() {
                let real = (sa * (a[i] as i32 - za) as f64 + sb * (b[i] as i32 - zb) as f64) / sy;
                let half = ((real - real.floor()) - 0.5).abs();
                let exact_half = half == 0.0 && sa == 0.5;
                if half < 1e-3 && !exact_half {
                    continue;
                }
                let want = (real.round_ties_even() as i64 + zy as i64).clamp(-32768, 32767);
                assert_eq!(
                    y[i] as i64, want,
                    "{sa} {sb} {sy}: {} {} → {real}",
                    a[i], b[i]
                );
                checked += 1;
            }
            assert!(checked > 4000, "{checked}");
        }
    }

    #[test]
    fn qsoftmax_is_within_one_step_of_float_softmax() {
        let (sx, sy, zy) = (0.07f64, 1.0f64 / 256.0, -128);
        let table: Vec<i32> = (0..256)
            .map(|d| ((1u64 << 30) as f64 * (-sx * d as f64).exp()).round() as i32)
            .collect();
        let q = QSoftmax {
            axis: 1,
            rescale: rescale_of(1.0 / sy),
            output_zero: zy,
            min: -128,
            max: 127,
        };
        // [2, 10, 3]: softmax over the middle axis; inputs span the whole int8 range.
        let x: Vec<i8> = (0..60).map(|i| ((i * 97 + 13) % 256) as u8 as i8).collect();
        let mut y = vec![0i8; 60];
        let xb: Vec<u8> = x.iter().map(|&v| v as u8).collect();
        let bytes = |y: &mut Vec<i8>| -> Vec<u8> { y.iter().map(|&v| v as u8).collect() };
        let mut yb = bytes(&mut y);
        qsoftmax(&q, [2, 10, 3], (&xb, Bytes8::INT8), &table, &mut yb);
        y = yb.iter().map(|&v| v as i8).collect();
        // uint8: the same values 128 up give the same probabilities 128 up.
        let flipped: Vec<u8> = xb.iter().map(|&v| v ^ 0x80).collect();
        let q8 = QSoftmax {
            output_zero: zy + 128,
            min: 0,
            max: 255,
            ..q
        };
        let mut y8 = vec![0u8; 60];
        qsoftmax(&q8, [2, 10, 3], (&flipped, Bytes8::UINT8), &table, &mut y8);
        assert!(
            y8.iter().zip(&yb).all(|(&u, &s)| u == s ^ 0x80),
            "uint8 vs int8"
        );
        let mut exact = 0;
        for o in 0..2 {
            for i in 0..3 {
                let at = |j: usize| (o * 10 + j) * 3 + i;
                let reals: Vec<f64> = (0..10).map(|j| sx * x[at(j)] as f64).collect();
                let max = reals.iter().cloned().fold(f64::MIN, f64::max);
                let sum: f64 = reals.iter().map(|v| (v - max).exp()).sum();
                for j in 0..10 {
                    let p = (reals[j] - max).exp() / sum;
                    let want = ((p / sy).round() as i32 + zy).clamp(-128, 127);
                    let got = y[at(j)] as i32;
                    assert!((got - want).abs() <= 1, "{o},{j},{i}: {got} vs {want}");
                    exact += (got == want) as usize;
                }
            }
        }
        assert!(exact >= 57, "only {exact} of 60 exact");
        // A hostile table (negative, huge, all zero) still gives values of the type.
        qsoftmax(&q, [2, 10, 3], (&xb, Bytes8::INT8), &[-5; 256], &mut yb);
        qsoftmax(
            &q,
            [2, 10, 3],
            (&xb, Bytes8::INT8),
            &[i32::MAX; 256],
            &mut yb,
        );
    }
}
