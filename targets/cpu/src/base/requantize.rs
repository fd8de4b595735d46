//! Requantization: an int32 accumulator scaled by a Q31 multiplier and a shift, rounded once to
//! nearest with ties to even (the ONNX definition), offset by the output zero point and clamped.
//! Every integer kernel, portable, SIMD or Cortex-M DSP, requantizes through [`Requantizer`] or
//! [`HighWordRequantizer`], so they are bit-exact with each other.

use ferrite_hal::op::Requantize;

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
