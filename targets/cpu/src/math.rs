//! Scalar transcendental functions: accurate (libm) by default, micromath under `fast-math`.
//!
//! micromath's approximations are off by up to a few percent (measured in `docs/kernels.md`);
//! they are opt-in only.

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
