//! Scalar transcendental functions: accurate (libm) by default, micromath under `fast-math`.
//!
//! micromath's approximations are off by up to a few percent (measured in `docs/kernels.md`);
//! they are opt-in only.

/// The larger of `a` and `b`, the other one when either is NaN: [`f32::max`]'s result (signed
/// zeros aside) as two compares, where `f32::max` is a call to `fmaxf` on targets without a
/// max instruction (Cortex-M4F: 20 instructions per element in Relu, pools and softmax).
#[inline(always)]
pub fn max(a: f32, b: f32) -> f32 {
    if a > b || b.is_nan() {
        a
    } else {
        b
    }
}

/// The smaller of `a` and `b`, the other one when either is NaN, as [`max`].
#[inline(always)]
pub fn min(a: f32, b: f32) -> f32 {
    if a < b || b.is_nan() {
        a
    } else {
        b
    }
}

/// `e^x`.
#[inline]
pub fn exp(x: f32) -> f32 {
    #[cfg(feature = "fast-math")]
    {
        micromath::F32Ext::exp(x)
    }
    #[cfg(not(feature = "fast-math"))]
    {
        libm::expf(x)
    }
}

/// Hyperbolic tangent.
#[inline]
pub fn tanh(x: f32) -> f32 {
    #[cfg(feature = "fast-math")]
    {
        let e = exp(2.0 * x.clamp(-15.0, 15.0));
        (e - 1.0) / (e + 1.0)
    }
    #[cfg(not(feature = "fast-math"))]
    {
        libm::tanhf(x)
    }
}

/// Square root.
#[inline]
pub fn sqrt(x: f32) -> f32 {
    libm::sqrtf(x)
}

/// Natural logarithm (one out-of-line copy of libm's on a firmware, which had inlined it into
/// each caller).
#[cfg_attr(feature = "std", inline)]
#[cfg_attr(not(feature = "std"), inline(never))]
pub fn ln(x: f32) -> f32 {
    libm::logf(x)
}

/// `e^x − 1`, accurate near 0.
#[inline]
pub fn exp_m1(x: f32) -> f32 {
    libm::expm1f(x)
}

/// `ln(1 + x)`, accurate near 0.
#[inline]
pub fn ln_1p(x: f32) -> f32 {
    libm::log1pf(x)
}

/// `x^y`.
#[inline]
pub fn pow(x: f32, y: f32) -> f32 {
    libm::powf(x, y)
}

/// `(n / d, n % d)` by binary long division (`(0, n)` for `d == 0`): a 32-bit core then links no
/// 64-bit division routine (0.9 KB of flash and its `ldivmod` wrappers); at most 64 steps. One
/// copy for every caller.
#[inline(never)]
pub fn div_rem_u64(n: u64, d: u64) -> (u64, u64) {
    let (mut q, mut r) = (0u64, n);
    if d != 0 && n >= d {
        let shift = d.leading_zeros() - n.leading_zeros();
        let mut step = d << shift;
        for _ in 0..=shift {
            q <<= 1;
            if r >= step {
                r -= step;
                q |= 1;
            }
            step >>= 1;
        }
    }
    (q, r)
}

/// `x − y·trunc(x / y)`, the sign of `x`: exact (C's `fmodf`, bit for bit). Our own, on the
/// integer significands by shift and subtract: libm's carries assertions (panic paths on a
/// firmware) and a 64-bit division.
pub fn fmod(x: f32, y: f32) -> f32 {
    const SIGN: u32 = 0x8000_0000;
    const HIDDEN: u32 = 1 << 23;
    let (ux, uy) = (x.to_bits(), y.to_bits());
    let (ax, ay) = (ux & !SIGN, uy & !SIGN);
    if ay == 0 || ay > 0x7F80_0000 || ax >= 0x7F80_0000 {
        return f32::NAN; // y zero or NaN, x infinite or NaN
    }
    if ax < ay {
        return x;
    }
    if ax == ay {
        return f32::from_bits(ux & SIGN); // ±0 with x's sign
    }
    // Each operand as an integer significand (hidden bit set) and an exponent; subnormals
    // normalised so the hidden bit's place is filled.
    let split = |a: u32| -> (u32, i32) {
        let e = (a >> 23) as i32;
        if e == 0 {
            let shift = a.leading_zeros() as i32 - 8;
            (a.wrapping_shl(shift as u32), 1 - shift)
        } else {
            ((a & (HIDDEN - 1)) | HIDDEN, e)
        }
    };
    let (mut mx, mut ex) = split(ax);
    let (my, ey) = split(ay);
    // The remainder of mx · 2^(ex − ey) by my, one bit of the exponent difference at a time.
    while ex > ey {
        if mx >= my {
            mx -= my;
        }
        mx <<= 1;
        ex -= 1;
    }
    if mx >= my {
        mx -= my;
    }
    if mx == 0 {
        return f32::from_bits(ux & SIGN);
    }
    // Renormalise (exact: the remainder is below y, so it is representable).
    let shift = mx.leading_zeros() as i32 - 8;
    mx = mx.wrapping_shl(shift as u32);
    ex -= shift;
    let bits = if ex > 0 {
        (mx & (HIDDEN - 1)) | ((ex as u32) << 23)
    } else {
        mx.wrapping_shr((1 - ex) as u32)
    };
    f32::from_bits(bits | (ux & SIGN))
}

/// Sine (within one unit in the last place, correctly rounded but for arguments whose sine lies
/// within 2^-36 of a rounding boundary; see [`sin_cos`]).
#[inline]
pub fn sin(x: f32) -> f32 {
    sin_cos(x).0
}

/// Cosine (as [`sin`]).
#[inline]
pub fn cos(x: f32) -> f32 {
    sin_cos(x).1
}

/// The bits of 2/π after the binary point, 32 a word: an argument `m·2^e` reads the 96 from
/// bit `e − 1` on (bit 198 at most, for `f32::MAX`).
const TWO_OVER_PI: [u32; 7] = [
    0xA2F9_836E,
    0x4E44_1529,
    0xFC27_57D1,
    0xF534_DDC0,
    0xDB62_9599,
    0x3C43_9041,
    0xFE51_63AB,
];

/// π/2 in units of 2^-64 of a quadrant.
const HALF_PI_2_POW_MINUS_64: f64 = core::f64::consts::FRAC_PI_2 / 18_446_744_073_709_551_616.0;

/// `|x|` (finite, as its bits `magnitude`) as `(quadrant, r)`: `|x| = (4k + quadrant)·π/2 + r`
/// with `|r| ≤ π/4`. Payne–Hanek in integers, for every argument from π/4 up: `|x| = m·2^e`
/// times the 96 bits of 2/π that reach below the quadrant's two bits is an exact 120-bit
/// product whose fraction (64 bits kept) is `r` in quadrants; the bits of 2/π before the
/// window add multiples of 4 quadrants and those after it less than 2^-70 of one.
fn reduce(magnitude: u32) -> (u32, f64) {
    const QUARTER_PI: u32 = 0x3F49_0FDB; // π/4 rounded down to f32
    if magnitude < QUARTER_PI {
        return (0, f64::from(f32::from_bits(magnitude)));
    }
    let mantissa = u128::from((magnitude & 0x7F_FFFF) | 0x80_0000);
    let e = (magnitude >> 23) as i32 - 150; // |x| = mantissa · 2^e, e ≥ −24
                                            // The first bit of 2/π (1-based) whose product with the mantissa is not a multiple of 4.
    let first = (e - 1).max(1) as u32;
    let (word, offset) = (((first - 1) / 32) as usize, (first - 1) % 32);
    let mut window = 0u128;
    for i in 0..4 {
        let w = TWO_OVER_PI.get(word + i).copied().unwrap_or(0);
        window = (window << 32) | u128::from(w);
    }
    let bits_96 = (window << offset) >> 32;
    let product = mantissa * bits_96; // below 2^120
                                      // `product / 2^point` is |x|·2/π modulo 4: point = first + 95 − e, in 94..=120.
    let point = (first as i32 + 95 - e) as u32;
    let quadrant = (product >> point) as u32 & 3;
    let fraction = ((product << (128 - point)) >> 64) as u64;
    // A fraction of 1/2 or more is the next quadrant's negative remainder: read as i64, its
    // top bit makes it exactly `fraction − 2^64`.
    let r = fraction as i64 as f64 * HALF_PI_2_POW_MINUS_64;
    ((quadrant + (fraction >> 63) as u32) & 3, r)
}

/// Sine and cosine of `x`: the reduction [`reduce`], then Taylor polynomials in f64 on
/// `|r| ≤ π/4` (truncation below 2^-36 relative), rounded once to f32. Within one unit in the
/// last place everywhere (`sin_cos_is_faithful`). Our own, for its size: libm's `sinf`/`cosf`
/// reduce large arguments with a general Payne–Hanek of 5.5 KB and a 736-byte frame, the
/// deepest of a microcontroller's Sin and Cos steps; this is a few hundred bytes. One
/// out-of-line copy on a microcontroller.
#[cfg_attr(not(feature = "std"), inline(never))]
pub fn sin_cos(x: f32) -> (f32, f32) {
    let magnitude = x.to_bits() & 0x7FFF_FFFF;
    if magnitude >= 0x7F80_0000 {
        return (f32::NAN, f32::NAN); // of infinities and NaN
    }
    let (quadrant, r) = reduce(magnitude);
    let z = r * r;
    let sin_r = r + r
        * z
        * (-1.0 / 6.0
            + z * (1.0 / 120.0
                + z * (-1.0 / 5_040.0 + z * (1.0 / 362_880.0 + z * (-1.0 / 39_916_800.0)))));
    let cos_r = 1.0
        + z * (-0.5
            + z * (1.0 / 24.0
                + z * (-1.0 / 720.0
                    + z * (1.0 / 40_320.0
                        + z * (-1.0 / 3_628_800.0 + z * (1.0 / 479_001_600.0))))));
    let (s, c) = match quadrant {
        0 => (sin_r, cos_r),
        1 => (cos_r, -sin_r),
        2 => (-sin_r, -cos_r),
        _ => (-cos_r, sin_r),
    };
    let s = if x.is_sign_negative() { -s } else { s };
    (s as f32, c as f32)
}

/// The error function (microcontroller builds; hosts use `micro::vector_math::erf`).
#[inline]
#[cfg_attr(feature = "std", allow(dead_code))]
pub fn erf(x: f32) -> f32 {
    libm::erff(x)
}

/// Largest integer not above `x`.
#[inline]
pub fn floor(x: f32) -> f32 {
    libm::floorf(x)
}

/// Smallest integer not below `x`.
#[inline]
pub fn ceil(x: f32) -> f32 {
    libm::ceilf(x)
}

/// Nearest integer, ties to even (ONNX `Round`): adding and subtracting 2^23 leaves no fraction
/// bits and the FPU rounds to nearest even; values of 2^23 and more are integers already.
#[inline]
pub fn round_half_even(v: f32) -> f32 {
    const TWO_23: f32 = 8_388_608.0;
    if v.abs() < TWO_23 {
        let t = if v < 0.0 { -TWO_23 } else { TWO_23 };
        (v + t) - t
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    /// Largest relative error of `f` against `reference` over `[lo, hi]` (10 001 points).
    fn max_relative_error(f: fn(f32) -> f32, reference: fn(f32) -> f32, lo: f32, hi: f32) -> f32 {
        (0..=10_000)
            .map(|i| lo + (hi - lo) * i as f32 / 10_000.0)
            .map(|x| {
                let want = reference(x);
                (f(x) - want).abs() / want.abs().max(1e-6)
            })
            .fold(0.0, f32::max)
    }

    /// `div_rem_u64` is `/` and `%`: random operands of every pair of bit lengths, and the edges.
    #[test]
    fn div_rem_u64_is_division() {
        let mut next = crate::base::element_ids::words64(0x2545_F491_4F6C_DD1D);
        for _ in 0..200_000 {
            let (n, d) = (next() >> (next() % 64), next() >> (next() % 64));
            if d != 0 {
                assert_eq!(super::div_rem_u64(n, d), (n / d, n % d), "{n} / {d}");
            }
        }
        for (n, d) in [
            (0, 1),
            (u64::MAX, 1),
            (u64::MAX, u64::MAX),
            (1, u64::MAX),
            (1 << 63, 3),
        ] {
            assert_eq!(super::div_rem_u64(n, d), (n / d, n % d), "{n} / {d}");
        }
        assert_eq!(super::div_rem_u64(7, 0), (0, 7));
    }

    /// `fmod` is C's `fmodf` (Rust's `%` on f32) bit for bit: random bit patterns (every
    /// exponent, subnormals, infinities, NaN), operands of close and distant magnitudes, signed
    /// zeros.
    #[test]
    fn fmod_is_exact() {
        // Raw 32-bit words: the stream's value modulo a bound past any u32.
        let mut stream = crate::base::element_ids::generator(0x9E37_79B9);
        let mut next = || stream(usize::MAX) as u32;
        let same = |a: f32, b: f32| (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits();
        let edges = [
            0.0,
            -0.0,
            1e-45,
            -1e-45,
            1e-40,
            1.0,
            -1.5,
            3.0,
            f32::MAX,
            f32::MIN_POSITIVE,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
        ];
        for &x in &edges {
            for &y in &edges {
                assert!(same(super::fmod(x, y), x % y), "fmod({x:e}, {y:e})");
            }
        }
        for _ in 0..1_000_000 {
            let (x, y) = (f32::from_bits(next()), f32::from_bits(next()));
            assert!(same(super::fmod(x, y), x % y), "fmod({x:e}, {y:e})");
            // Close magnitudes: y's exponent within a few of x's.
            let y = f32::from_bits(
                (x.to_bits() & 0xFF80_0000).wrapping_sub((next() % 8) << 23)
                    | (next() & 0x007F_FFFF),
            );
            assert!(same(super::fmod(x, y), x % y), "fmod({x:e}, {y:e})");
        }
    }

    /// `max` and `min` give `f32::max`'s and `f32::min`'s results, NaNs and infinities included
    /// (signed zeros compare equal).
    #[test]
    fn max_and_min_are_the_standard_ones() {
        let values = [
            f32::NAN,
            f32::NEG_INFINITY,
            -3.5,
            -0.0,
            0.0,
            1e-30,
            2.0,
            f32::INFINITY,
        ];
        let same = |x: f32, y: f32| (x.is_nan() && y.is_nan()) || x == y;
        for a in values {
            for b in values {
                assert!(same(super::max(a, b), a.max(b)), "max({a}, {b})");
                assert!(same(super::min(a, b), a.min(b)), "min({a}, {b})");
            }
        }
    }

    /// Units in the last place between two finite f32 of one sign (or both zero).
    fn ulps(a: f32, b: f32) -> u32 {
        let key = |v: f32| {
            let bits = v.to_bits() as i64;
            if bits < 0 {
                -(bits & 0x7FFF_FFFF)
            } else {
                bits
            }
        };
        (key(a) - key(b)).unsigned_abs() as u32
    }

    /// `sin_cos` against the double-precision `sin` and `cos` rounded to f32 on `x`: within one
    /// unit in the last place; returns whether both agree exactly.
    fn check_sin_cos(x: f32) -> bool {
        let (s, c) = super::sin_cos(x);
        let (want_s, want_c) = ((x as f64).sin() as f32, (x as f64).cos() as f32);
        if !x.is_finite() {
            assert!(s.is_nan() && c.is_nan(), "x = {x:e}");
            return true;
        }
        assert!(
            ulps(s, want_s) <= 1 && ulps(c, want_c) <= 1,
            "x = {x:e} ({:#x}): sin {s:e} vs {want_s:e}, cos {c:e} vs {want_c:e}",
            x.to_bits()
        );
        s.to_bits() == want_s.to_bits() && c.to_bits() == want_c.to_bits()
    }

    /// `sin_cos` is faithful (within one unit in the last place of the double-precision
    /// results) and correctly rounded on all but a handful of arguments: 1.1 million spread
    /// over every exponent and sign (so every path of the Payne–Hanek window), a dense sweep
    /// of [−40, 40], the boundaries of π/4 and near-multiples of π/2, subnormals, zeros,
    /// infinities and NaN. The exhaustive check (every f32) is `sin_cos_is_faithful_everywhere`.
    #[test]
    fn sin_cos_is_faithful() {
        let spread = (0..=u32::MAX / 3_989).map(|i| f32::from_bits(i.wrapping_mul(3_989)));
        let sweep = (-400_000..=400_000).map(|i| i as f32 * 1e-4);
        let near_quadrants = (1..2_000).flat_map(|k| {
            let x = k as f32 * core::f32::consts::FRAC_PI_2;
            [
                x,
                f32::from_bits(x.to_bits() + 1),
                f32::from_bits(x.to_bits() - 1),
            ]
        });
        let edges = [
            0.0,
            -0.0,
            1e-45,
            1e-40,
            -1e-38,
            f32::from_bits(0x3F49_0FDA),
            f32::from_bits(0x3F49_0FDB),
            f32::from_bits(0x3F49_0FDC),
            f32::MAX,
            f32::MIN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
        ];
        let (mut count, mut exact) = (0u32, 0u32);
        for x in spread.chain(sweep).chain(near_quadrants).chain(edges) {
            count += 1;
            exact += u32::from(check_sin_cos(x));
        }
        assert!(
            count - exact <= count / 100_000,
            "{} of {count} not correctly rounded",
            count - exact
        );
        assert_eq!(super::sin(-0.0).to_bits(), (-0.0f32).to_bits());
    }

    /// Every f32 (`cargo test -p ferrite-cpu --release --lib -- --ignored
    /// sin_cos_is_faithful_everywhere`, a few minutes): within one unit in the last place.
    #[cfg(feature = "std")]
    #[test]
    #[ignore]
    fn sin_cos_is_faithful_everywhere() {
        let mut inexact = 0u64;
        for bits in 0..=u32::MAX {
            inexact += u64::from(!check_sin_cos(f32::from_bits(bits)));
        }
        std::println!("{inexact} of 2^32 arguments not correctly rounded");
    }

    /// The accuracy `docs/kernels.md` states: exact (libm) by default, within the measured
    /// bounds with `fast-math`.
    #[test]
    fn accuracy_is_as_documented() {
        let exp_err = max_relative_error(super::exp, libm::expf, -20.0, 20.0);
        let tanh_err = max_relative_error(super::tanh, libm::tanhf, -8.0, 8.0);
        #[cfg(feature = "std")]
        std::println!("exp max relative error {exp_err:e}, tanh {tanh_err:e}");
        if cfg!(feature = "fast-math") {
            assert!(
                exp_err < 5e-3 && tanh_err < 5e-3,
                "exp {exp_err}, tanh {tanh_err}"
            );
        } else {
            assert_eq!((exp_err, tanh_err), (0.0, 0.0));
        }
    }
}
