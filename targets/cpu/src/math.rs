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

/// Natural logarithm.
#[inline]
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

/// `x − y·trunc(x / y)`, the sign of `x`.
#[inline]
pub fn fmod(x: f32, y: f32) -> f32 {
    libm::fmodf(x, y)
}

/// Sine.
#[inline]
pub fn sin(x: f32) -> f32 {
    libm::sinf(x)
}

/// Cosine.
#[inline]
pub fn cos(x: f32) -> f32 {
    libm::cosf(x)
}

/// The error function.
#[inline]
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
