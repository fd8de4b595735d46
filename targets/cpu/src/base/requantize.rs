//! Requantization: an int32 accumulator scaled by a Q31 multiplier and a shift, offset by the
//! output zero point and clamped. Every integer kernel, portable, SIMD or Cortex-M DSP,
//! requantizes through [`Requantizer`] or [`HighWordRequantizer`], so they are bit-exact with
//! each other.
//!
//! Requantization rounds once, to nearest with ties to even, as the ONNX definition does
//! (DequantizeLinear → the float op → QuantizeLinear): the accumulator times the Q31 multiplier
//! is formed exactly in 64 bits and shifted right once with that rounding. (TFLite and CMSIS-NN
//! round twice — a doubling high multiply, then a rounding shift — and so differ from the
//! definition by one step on about one output in a thousand, an error that residual networks
//! amplify layer by layer.)

use crate::base::quantized::QuantInt;
use ferrite_hal::op::{Requantize, Rescale};

/// `x / 2^right` with the dropped bits folded into the lowest kept one (round to odd): the
/// result keeps whether `x` was exact, so a later rounding to fewer bits is still correct.
#[inline(always)]
pub(crate) fn shift_sticky(x: i64, right: u32) -> i64 {
    if right == 0 {
        return x;
    }
    let right = right.min(63);
    let mask = (1i64 << right).wrapping_sub(1);
    (x >> right) | ((x & mask) != 0) as i64
}

/// `acc × multiplier × 2^(shift − 31)`, rounded once, ties to even.
#[inline(always)]
pub fn requantize(acc: i32, multiplier: i32, shift: i32) -> i32 {
    Requantizer::new([multiplier, shift], &UNCLAMPED).scale(acc)
}

/// One output channel's requantization with everything that does not depend on the accumulator
/// worked out once: kernels make one per channel, then [`Requantizer::apply`] per output.
#[derive(Clone, Copy, Debug)]
pub struct Requantizer {
    /// Kept as `i32` so the product is one 32×32→64 multiply (`SMULL`) wherever the struct sits.
    multiplier: i32,
    /// The right shift, in `1..=62`.
    right: u32,
    /// `2^(right − 1)`: added before the shift, it makes the floor a round-half-up.
    half: i64,
    zero: i32,
    min: i32,
    max: i32,
}

impl Requantizer {
    /// From a `(multiplier, shift)` pair and the op's zero point and clamp. Out of line on a
    /// firmware (once per channel; inlined into every integer kernel, 1.3 KB of flash).
    #[cfg_attr(not(feature = "std"), inline(never))]
    #[cfg_attr(feature = "std", inline(always))]
    pub fn new([multiplier, shift]: [i32; 2], q: &Requantize) -> Requantizer {
        // The verifier keeps `shift` in `-31..=30`; the clamp keeps the shift defined anyway.
        let right = (31 - shift.clamp(-31, 30)) as u32;
        Requantizer {
            multiplier,
            right,
            half: 1i64 << (right - 1),
            zero: q.output_zero,
            min: q.min,
            max: q.max,
        }
    }

    /// Channel `c`'s requantizer from a requantization table (`[C, 2]`, or one pair for all).
    #[inline(always)]
    pub fn of_channel(requant: &[i32], c: usize, q: &Requantize) -> Requantizer {
        Requantizer::new(pair(requant, c), q)
    }

    /// `acc × multiplier × 2^(shift − 31)` rounded once to nearest, ties to even: the product is
    /// exact in 64 bits (`|acc|, |multiplier| ≤ 2^31`), saturated to int32.
    ///
    /// Computed as a round-half-up (`(p + half) >> right`, one multiply-accumulate and a shift)
    /// corrected at exact ties: `p` is a tie exactly when `p + half` has its low `right` bits
    /// clear, and the tie then goes to the even neighbour by clearing bit 0. For the usual
    /// multipliers below one half (`right ≥ 32`) everything is on the high word: on a Cortex-M4
    /// an `SMLAL`, an `ASR`, a mask test and a conditional `BIC`.
    #[inline(always)]
    pub fn scale(&self, acc: i32) -> i32 {
        let p = acc as i64 * self.multiplier as i64 + self.half;
        if self.right >= 32 {
            let (hi, lo) = ((p >> 32) as i32, p as u32);
            let up = hi >> (self.right - 32);
            let low_clear = lo == 0 && hi & ((1i32 << (self.right - 32)) - 1) == 0;
            return up & !(low_clear as i32);
        }
        let up = p >> self.right;
        let low_clear = p & ((1i64 << self.right) - 1) == 0;
        (up & !(low_clear as i64)).clamp(i32::MIN as i64, i32::MAX as i64) as i32
    }

    /// The output integer of `acc`: requantized, offset by the output zero point, clamped. Out
    /// of line on a firmware: its portable integer kernels (uint8, int16 and the rarer int8
    /// kinds; the DSP kernels requantize their own way) carried a copy at each (2 KB).
    #[cfg_attr(feature = "std", inline(always))]
    #[cfg_attr(not(feature = "std"), inline(never))]
    pub fn apply(&self, acc: i32) -> i32 {
        // `max` then `min` rather than `clamp`, which would panic if `min > max` (the verifier
        // refuses that; this keeps the kernels free of the panic path anyway).
        self.scale(acc)
            .saturating_add(self.zero)
            .max(self.min)
            .min(self.max)
    }

    /// The output integer of a 64-bit accumulator (16-bit inputs): the same single rounding,
    /// on the exact product (at most 95 bits, formed in 128), saturated, offset and clamped.
    /// Out of line: once per output, and inlined into unrolled loops it spills.
    #[inline(never)]
    pub fn apply_wide(&self, acc: i64) -> i32 {
        // Most sums fit int32: the 64-bit product then (128-bit arithmetic is a library call
        // on a 32-bit core).
        match i32::try_from(acc) {
            Ok(acc) => self.apply(acc),
            Err(_) => self.apply_past_int32(acc),
        }
    }

    /// [`Requantizer::apply_wide`] of a sum past int32, in 128-bit arithmetic (out of line: rare,
    /// and a library call on a 32-bit core).
    #[inline(never)]
    fn apply_past_int32(&self, acc: i64) -> i32 {
        let p = acc as i128 * self.multiplier as i128 + self.half as i128;
        let up = p >> self.right;
        let low_clear = p & ((1i128 << self.right) - 1) == 0;
        let rounded = (up & !(low_clear as i128))
            .max(i32::MIN.into())
            .min(i32::MAX.into());
        (rounded as i32)
            .saturating_add(self.zero)
            .max(self.min)
            .min(self.max)
    }

    /// The same requantization in the form a 32-bit core computes fastest, when the right
    /// shift is 33 or more (scales below 2^-2 of the multiplier's range, which is nearly every
    /// convolution): `None` otherwise.
    #[inline(always)]
    pub fn high_word(&self) -> Option<HighWordRequantizer> {
        let shift = self
            .right
            .checked_sub(32)
            .filter(|&s| (1..=31).contains(&s))?;
        let (zero, min, max) = (self.zero, self.min, self.max);
        Some(HighWordRequantizer::with_shift(
            self.multiplier,
            shift,
            [zero, min, max],
        ))
    }
}

/// A [`Requantizer`] whose right shift is 33 or more, computed on the product's high word:
/// `2^(right − 1)` only adds to the high word, the shift is a 32-bit one, and a tie is a product
/// whose low word and dropped high bits are all zero. On a Cortex-M4 that is an `SMULL`, an
/// `ADD`, an `ASR` and four instructions for the tie, with every constant in a register; the
/// result is [`Requantizer::apply`]'s, bit for bit.
#[derive(Clone, Copy, Debug)]
pub struct HighWordRequantizer {
    multiplier: i32,
    /// `2^(shift − 1)`: the rounding half, on the high word.
    half: i32,
    /// The right shift of the high word, `right − 32`, in `1..=31`.
    shift: u32,
    /// `2^shift − 1`: the high word's bits the shift drops.
    mask: u32,
    zero: i32,
    min: i32,
    max: i32,
}

impl HighWordRequantizer {
    /// The high-word form of `Requantizer::new([multiplier, shift], q)`, made directly from the
    /// pair (a few instructions, for kernels that make one per channel and block): `Some` for
    /// shifts of −31 to −2, which are exactly the right shifts of 33 to 62.
    #[inline(always)]
    pub fn new([multiplier, shift]: [i32; 2], q: &Requantize) -> Option<HighWordRequantizer> {
        if !(-31..=-2).contains(&shift) {
            return None;
        }
        // right = 31 − shift, so the high word's shift is right − 32 = −1 − shift = !shift.
        let high = !shift as u32;
        let clamp = [q.output_zero, q.min, q.max];
        Some(HighWordRequantizer::with_shift(multiplier, high, clamp))
    }

    /// The form for a high-word shift in `1..=31` and the output's `[zero, min, max]`.
    #[inline(always)]
    fn with_shift(multiplier: i32, shift: u32, [zero, min, max]: [i32; 3]) -> HighWordRequantizer {
        HighWordRequantizer {
            multiplier,
            half: 1 << (shift - 1),
            shift,
            mask: (1 << shift) - 1,
            zero,
            min,
            max,
        }
    }

    /// Whether some accumulator meets a tie. A tie is a product `acc · multiplier` of exactly
    /// `31 + shift` trailing zero bits; `acc`, an int32, has at most 31, so there is none when
    /// the multiplier has fewer than `shift` (nearly every scale: only multipliers with many
    /// low zero bits, such as a power of two's, have ties). Without ties the rounding is
    /// `(hi + half) >> shift` alone.
    #[inline(always)]
    pub fn has_ties(&self) -> bool {
        self.multiplier.trailing_zeros() >= self.shift
    }

    /// `[multiplier, half, shift, mask, zero, min, max]`, for kernels written in assembly.
    #[inline(always)]
    pub fn words(&self) -> [i32; 7] {
        [
            self.multiplier,
            self.half,
            self.shift as i32,
            self.mask as i32,
            self.zero,
            self.min,
            self.max,
        ]
    }

    /// The output integer of `acc`, as [`Requantizer::apply`] gives it.
    #[inline(always)]
    pub fn apply(&self, acc: i32) -> i32 {
        let p = acc as i64 * self.multiplier as i64;
        // |p| ≤ 2^62, so the high word is at most 2^30 and adding the half cannot overflow.
        let hi = ((p >> 32) as i32).wrapping_add(self.half);
        let tie = (hi as u32 & self.mask) | p as u32 == 0;
        let rounded = (hi >> self.shift) & !(tie as i32);
        rounded
            .saturating_add(self.zero)
            .max(self.min)
            .min(self.max)
    }
}

/// No zero point and no clamp: a bare rescale.
const UNCLAMPED: Requantize = Requantize {
    input_zero: 0,
    output_zero: 0,
    min: i32::MIN,
    max: i32::MAX,
};

/// The `(multiplier, shift)` pair of channel `c` (one pair for all when there is one); a zero
/// multiplier past the table's end, which the verifier rules out.
#[inline(always)]
fn pair(requant: &[i32], c: usize) -> [i32; 2] {
    let i = if requant.len() == 2 { 0 } else { 2 * c };
    match requant.get(i..i + 2) {
        Some(&[multiplier, shift]) => [multiplier, shift],
        _ => [0, 0],
    }
}

/// The final step: requantize, add the output zero point, clamp.
#[inline(always)]
pub(crate) fn output<Y: QuantInt>(acc: i32, rq: &Requantizer) -> Y {
    Y::narrow(rq.apply(acc))
}

/// A rescale worked out once (no zero point, no clamp), or with `q`'s output zero and clamp.
#[inline(always)]
pub(crate) fn rescaler(r: Rescale, q: &Requantize) -> Requantizer {
    Requantizer::new([r.multiplier, r.shift], q)
}

/// A rescale that ends an op: offset by the output zero point, clamped to `[min, max]`.
#[inline(always)]
pub(crate) fn output_rescaler(r: Rescale, output_zero: i32, min: i32, max: i32) -> Requantizer {
    let output = Requantize {
        input_zero: 0,
        output_zero,
        min,
        max,
    };
    rescaler(r, &output)
}

/// `round(x / (count · 2^right))`, ties to even (as QuantizeLinear rounds), exact in 64-bit
/// arithmetic (a divisor past 64 bits makes the quotient round to 0).
#[inline(always)]
pub(crate) fn divide_nearest(x: i64, count: i64, right: u32) -> i64 {
    match count.checked_mul(1i64 << right.min(62)) {
        Some(d) if d > 0 => {
            let (q, r) = floor_div_rem(x, d);
            // `r < d < 2^63`, so `r − (d − r)` compares 2r with d without overflow.
            let over_half = r - (d - r);
            q + (over_half > 0 || (over_half == 0 && q & 1 == 1)) as i64
        }
        _ => 0,
    }
}

/// `(x.div_euclid(d), x.rem_euclid(d))` for `d > 0`, by binary long division: a 32-bit core
/// then links no 64-bit division routine (2.4 KB of flash), and the few divisions per output
/// of a pool or softmax take a few dozen steps each.
#[inline(never)]
pub(crate) fn floor_div_rem(x: i64, d: i64) -> (i64, i64) {
    let den = d as u64;
    let (q, r) = crate::base::math::div_rem_u64(x.unsigned_abs(), den);
    // Floor division of a negative dividend: one more step down unless it divides exactly.
    match (x < 0, r == 0) {
        (false, _) => (q as i64, r as i64),
        (true, true) => ((q as i64).wrapping_neg(), 0),
        (true, false) => ((q as i64).wrapping_neg().wrapping_sub(1), (den - r) as i64),
    }
}

/// The right shift that applies a [`Rescale`]'s exponent to a product with its Q31 multiplier.
#[inline(always)]
pub(crate) fn rescale_right_shift(r: Rescale) -> u32 {
    (31 - r.shift).clamp(1, 62) as u32
}

#[cfg(test)]
mod division_tests {
    use super::floor_div_rem;

    #[test]
    fn long_division_is_euclidean_division() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..100_000 {
            let x = (next() as i64) >> (next() % 64);
            let d = ((next() >> 1) as i64 >> (next() % 63)).max(1);
            assert_eq!(
                floor_div_rem(x, d),
                (x.div_euclid(d), x.rem_euclid(d)),
                "{x} / {d}"
            );
        }
        for (x, d) in [
            (i64::MIN, 1),
            (i64::MIN, i64::MAX),
            (i64::MAX, 1),
            (-1, i64::MAX),
            (0, 7),
        ] {
            assert_eq!(
                floor_div_rem(x, d),
                (x.div_euclid(d), x.rem_euclid(d)),
                "{x} / {d}"
            );
        }
    }
}

/// Helpers the integer kernels' tests share: exact references for requantization.
#[cfg(test)]
pub(crate) mod testing {
    use ferrite_hal::op::Rescale;

    /// The real-valued multiplier a (multiplier, shift) pair stands for.
    pub(crate) fn real(multiplier: i32, shift: i32) -> f64 {
        multiplier as f64 / (1u64 << 31) as f64 * 2f64.powi(shift)
    }

    /// `acc · multiplier · 2^(shift − 31)` rounded half to even, in exact 128-bit arithmetic.
    pub(crate) fn exact_requantize(acc: impl Into<i64>, multiplier: i32, shift: i32) -> i32 {
        let p = acc.into() as i128 * multiplier as i128;
        let d = 1i128 << (31 - shift);
        let (q, r) = (p.div_euclid(d), p.rem_euclid(d));
        let q = match (2 * r).cmp(&d) {
            core::cmp::Ordering::Greater => q + 1,
            core::cmp::Ordering::Equal => q + (q & 1),
            core::cmp::Ordering::Less => q,
        };
        q.clamp(i32::MIN as i128, i32::MAX as i128) as i32
    }

    /// A repeatable stream of pseudo-random `i32`s (a 64-bit LCG's high words) from `seed`.
    pub(crate) fn random_i32s(mut seed: u64) -> impl FnMut() -> i32 {
        move || {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 32) as i32
        }
    }

    /// `real` as a rescale (the host's `quantize_multiplier`, restated for the test).
    pub(crate) fn rescale_of(real: f64) -> Rescale {
        let shift = real.log2().floor() as i32 + 1;
        let multiplier = (real / 2f64.powi(shift) * (1u64 << 31) as f64).round() as i64;
        Rescale {
            multiplier: multiplier.min(i32::MAX as i64) as i32,
            shift,
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::testing::*;
    use super::*;
    use ferrite_hal::op::Requantize;

    #[test]
    fn requantize_rounds_once_half_to_even() {
        // 0.75 = 0.75 * 2^0: multiplier 0.75 * 2^31, shift 0; and 0.003 = 0.768 * 2^-8.
        let cases = [
            ((1u32 << 31) as f64 * 0.75, 0),
            (0.768 * (1u64 << 31) as f64, -8),
        ];
        for (m, shift) in cases {
            let m = m.round() as i32;
            for acc in [-100_000, -1001, -3, -1, 0, 1, 2, 3, 999, 123_456] {
                let expected = (acc as f64 * real(m, shift)).round_ties_even() as i32;
                assert_eq!(requantize(acc, m, shift), expected, "{acc}");
            }
        }
        // Exact halves round to even, wherever the half falls.
        assert_eq!(requantize(3, 1 << 30, 0), 2); // 1.5 → 2
        assert_eq!(requantize(-3, 1 << 30, 0), -2); // −1.5 → −2
        assert_eq!(requantize(5, 1 << 30, 0), 2); // 2.5 → 2
        assert_eq!(requantize(12, 1 << 30, -2), 2); // 6 / 4 = 1.5 → 2
        assert_eq!(requantize(-12, 1 << 30, -2), -2); // −1.5 → −2
        assert_eq!(requantize(-20, 1 << 30, -2), -2); // −2.5 → −2
                                                      // (2^31 − 1)² / 2^31 = 2^31 − 2 + 2^-31, and a product past int32 saturates.
        assert_eq!(requantize(i32::MAX, i32::MAX, 0), i32::MAX - 1);
        assert_eq!(requantize(i32::MIN, i32::MIN, 30), i32::MAX);
    }

    #[test]
    fn requantize_equals_exact_rounding_everywhere() {
        let mut next = random_i32s(12345);
        let edges = [
            i32::MIN,
            i32::MIN + 1,
            -(1 << 30),
            -3,
            -1,
            0,
            1,
            3,
            1 << 30,
            i32::MAX,
        ];
        for &acc in &edges {
            for &m in &[0, 1 << 30, (1 << 30) + 1, i32::MAX] {
                for shift in -31..=30 {
                    let want = exact_requantize(acc, m, shift);
                    assert_eq!(requantize(acc, m, shift), want, "{acc} {m} {shift}");
                }
            }
        }
        for _ in 0..1_000_000 {
            let acc = next() >> (next() as u32 % 24);
            // Multipliers as the host makes them, in [2^30, 2^31), and some with trailing zeros
            // (power-of-two ratios: exact ties).
            let m = (1 << 30) | (next() & 0x3fff_ffff);
            let m2 = (1 << 30) | ((next() & 0x3f) << 24);
            let shift = -((next() as u32 % 32) as i32);
            for m in [m, m2] {
                assert_eq!(
                    requantize(acc, m, shift),
                    exact_requantize(acc, m, shift),
                    "{acc} {m} {shift}"
                );
            }
        }
    }

    /// The high-word form gives `apply`'s output for every shift it takes, with every output
    /// zero point and clamp, on edge and random accumulators and multipliers.
    #[test]
    fn high_word_requantizer_equals_apply() {
        let mut next = random_i32s(99);
        let clamps = [
            (0, -128, 127),
            (-5, -5, 127),
            (128, 0, 255),
            (3, 3, 100),
            (i32::MAX, i32::MIN, i32::MAX),
            (i32::MIN, i32::MIN, i32::MAX),
        ];
        let mut taken = 0;
        for shift in -31..=30 {
            for &(output_zero, min, max) in &clamps {
                let q = Requantize {
                    input_zero: 0,
                    output_zero,
                    min,
                    max,
                };
                for i in 0..20_000 {
                    let acc = match i {
                        0 => i32::MIN,
                        1 => i32::MAX,
                        2 => 0,
                        _ => next() >> (next() as u32 % 28),
                    };
                    let m = match i % 4 {
                        0 => (1 << 30) | (next() & 0x3fff_ffff),
                        1 => (1 << 30) | ((next() & 0x3f) << 24),
                        2 => i32::MAX,
                        _ => next(),
                    };
                    let rq = Requantizer::new([m, shift], &q);
                    let direct = HighWordRequantizer::new([m, shift], &q);
                    match rq.high_word() {
                        Some(fast) => {
                            taken += 1;
                            assert_eq!(fast.apply(acc), rq.apply(acc), "{acc} {m} {shift}");
                            let direct = direct.expect("the direct form exists too");
                            assert_eq!(direct.words(), fast.words());
                        }
                        None => {
                            assert!(shift >= -1, "shift {shift} has a high-word form");
                            assert!(direct.is_none());
                        }
                    }
                }
            }
        }
        assert_eq!(taken, 30 * 6 * 20_000);
    }

    /// Where [`HighWordRequantizer::has_ties`] says a scale has no ties, rounding without the
    /// tie test equals [`HighWordRequantizer::apply`] on every kind of accumulator (powers of
    /// two and their multiples above all, the ones nearest a tie); where it says it has, some
    /// accumulator is a tie.
    #[test]
    fn scales_without_ties_round_without_the_tie_test() {
        let mut next = random_i32s(7);
        let q = Requantize {
            input_zero: 0,
            output_zero: 0,
            min: i32::MIN,
            max: i32::MAX,
        };
        let mut tie_free = 0;
        for shift in -31..=-2 {
            for i in 0..400 {
                // Multipliers with every number of trailing zero bits.
                let m = ((1 << 30) | (next() & 0x3fff_ffff)) & (-1i32 << (i % 31));
                let h = HighWordRequantizer::new([m, shift], &q).expect("a high-word shift");
                let [_, half, high_shift, ..] = h.words();
                if h.has_ties() {
                    // 2^(31 + shift − t), as an int32 (−2^31 for 2^31), is a tie.
                    let t = m.trailing_zeros() as i32;
                    let acc = (1i64 << (31 + high_shift - t)) as i32;
                    let p = acc as i64 * m as i64;
                    assert_eq!(p.rem_euclid(1 << (32 + high_shift)), 1 << (31 + high_shift));
                    continue;
                }
                tie_free += 1;
                for j in 0..200 {
                    let acc = match j {
                        0..=31 => (1i64 << j) as i32,
                        32..=63 => (-(1i64 << (j - 32))) as i32,
                        64 => i32::MIN,
                        65 => i32::MAX,
                        _ => next() << (next() as u32 % 31),
                    };
                    let hi = ((acc as i64 * m as i64) >> 32) as i32 + half;
                    assert_eq!(hi >> high_shift, h.apply(acc), "{acc} {m} {shift}");
                }
            }
        }
        assert!(tie_free > 5000, "{tie_free} tie-free scales");
    }

    /// 64-bit accumulators (16-bit inputs) round as the definition does, and agree with the
    /// 32-bit path wherever both apply.
    #[test]
    fn apply_wide_equals_exact_rounding_on_64_bit_accumulators() {
        let mut next = random_i32s(2024);
        let q = |zero, min, max| Requantize {
            input_zero: 0,
            output_zero: zero,
            min,
            max,
        };
        for _ in 0..300_000 {
            let wide =
                ((next() as i64) << 20 | (next() as u32 >> 12) as i64) >> (next() as u32 % 40);
            let narrow = next() >> (next() as u32 % 24);
            let m = (1 << 30) | (next() & 0x3fff_ffff);
            let m2 = (1 << 30) | ((next() & 0x3f) << 24);
            let shift = -((next() as u32 % 32) as i32);
            for m in [m, m2] {
                let r = Requantizer::new([m, shift], &q(0, i32::MIN, i32::MAX));
                assert_eq!(
                    r.apply_wide(wide),
                    exact_requantize(wide, m, shift),
                    "{wide} {m} {shift}"
                );
                assert_eq!(
                    r.apply_wide(narrow.into()),
                    r.apply(narrow),
                    "{narrow} {m} {shift}"
                );
                let r = Requantizer::new([m, shift], &q(-7, -32768, 32767));
                let want = exact_requantize(wide, m, shift)
                    .saturating_add(-7)
                    .clamp(-32768, 32767);
                assert_eq!(r.apply_wide(wide), want);
            }
        }
    }
}
