//! Activations on whole vectors (x86-64, AVX2 and AVX-512): Relu, LeakyRelu and Clip over slices
//! eight floats at a time, and the forms a kernel applies as it stores (a convolution's fused
//! activation), with exactly the scalar functions' results (`base::math::max`/`min`, NaN and
//! signed zeros included).

#![allow(unsafe_code)]

use ferrite_hal::Activation;

use core::arch::x86_64::*;

/// `lanes` over each block of eight floats of `xs`; returns the rest.
#[inline(always)]
fn each(xs: &mut [f32], lanes: impl Fn(__m256) -> __m256) -> &mut [f32] {
    let mut blocks = xs.chunks_exact_mut(8);
    for block in &mut blocks {
        let p = block.as_mut_ptr();
        // SAFETY: `block` holds eight floats; unaligned loads and stores.
        unsafe { _mm256_storeu_ps(p, lanes(_mm256_loadu_ps(p))) };
    }
    blocks.into_remainder()
}

/// `max(x, 0)` as [`crate::base::math::max`]: `x` where `x > 0`, else +0 (NaN too, as `fmaxf`).
#[target_feature(enable = "avx2,fma")]
pub(crate) fn relu(xs: &mut [f32]) -> &mut [f32] {
    each(xs, |v| relu_lanes(v))
}

/// [`relu`] of one vector (also a convolution's store, `channel_lanes`): `vmaxps(v, +0)` is
/// `v > 0 ? v : +0`, so −0 and NaN give +0.
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(crate) fn relu_lanes(v: __m256) -> __m256 {
    _mm256_max_ps(v, _mm256_setzero_ps())
}

/// `x` where `x >= 0`, else `x · alpha` (NaN times alpha).
#[target_feature(enable = "avx2,fma")]
pub(crate) fn leaky_relu(xs: &mut [f32], alpha: f32) -> &mut [f32] {
    let (zero, a) = (_mm256_setzero_ps(), _mm256_set1_ps(alpha));
    each(xs, |v| {
        _mm256_blendv_ps(_mm256_mul_ps(v, a), v, _mm256_cmp_ps::<_CMP_GE_OQ>(v, zero))
    })
}

/// `min(max(x, lo), hi)` as [`crate::base::math::max`] and [`crate::base::math::min`] (a NaN bound is
/// passed over).
#[target_feature(enable = "avx2,fma")]
pub(crate) fn clip(xs: &mut [f32], lo: f32, hi: f32) -> &mut [f32] {
    let bounds = ClipBounds::new(lo, hi);
    each(xs, |v| bounds.apply(v))
}

/// [`clip`]'s bounds as vectors, with whether each is NaN.
#[derive(Clone, Copy)]
pub(crate) struct ClipBounds {
    l: __m256,
    h: __m256,
    l_nan: bool,
    h_nan: bool,
}

impl ClipBounds {
    /// The bounds `lo` and `hi`.
    #[target_feature(enable = "avx2,fma")]
    pub(crate) fn new(lo: f32, hi: f32) -> Self {
        ClipBounds {
            l: _mm256_set1_ps(lo),
            h: _mm256_set1_ps(hi),
            l_nan: lo.is_nan(),
            h_nan: hi.is_nan(),
        }
    }

    /// [`clip`] of one vector (also a convolution's store, `channel_lanes`): `vmaxps(v, lo)`
    /// is `v > lo ? v : lo` and `vminps(t, hi)` is `t < hi ? t : hi` — [`crate::base::math::max`]
    /// and [`crate::base::math::min`] exactly, a NaN `v` and signed zeros included — with a NaN
    /// bound's step left out.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    pub(crate) fn apply(self, v: __m256) -> __m256 {
        let t = if self.l_nan {
            v
        } else {
            _mm256_max_ps(v, self.l)
        };
        if self.h_nan {
            t
        } else {
            _mm256_min_ps(t, self.h)
        }
    }
}

/// What the tiles apply to their sums, after the bias: the activation.
#[derive(Clone, Copy)]
pub(crate) enum Finish {
    /// Nothing more.
    Plain,
    /// `max(x, 0)`.
    Relu,
    /// `min(max(x, lo), hi)`.
    Clip(f32, f32),
}

impl Finish {
    /// What applies `activation` where the kernels fuse it (Relu and Clip) (nothing otherwise).
    pub(crate) fn of(activation: Activation) -> Self {
        match activation {
            Activation::Relu => Finish::Relu,
            Activation::Clip { min, max } => Finish::Clip(min, max),
            _ => Finish::Plain,
        }
    }
}

/// `v` with `finish` applied, lane by lane as the AVX2 forms ([`ClipBounds`], [`relu_lanes`]): Relu
/// keeps `v` where `v > 0`, else +0 (NaN too); Clip passes over a NaN bound.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn finish_512(finish: Finish, v: __m512) -> __m512 {
    match finish {
        Finish::Plain => v,
        // `v > 0 ? v : +0`.
        Finish::Relu => _mm512_max_ps(v, _mm512_setzero_ps()),
        // `vmaxps(v, lo)` is `v > lo ? v : lo`, `vminps(t, hi)` `t < hi ? t : hi`, as
        // `ClipBounds::apply`.
        Finish::Clip(lo, hi) => {
            let t = match lo.is_nan() {
                true => v,
                false => _mm512_max_ps(v, _mm512_set1_ps(lo)),
            };
            match hi.is_nan() {
                true => t,
                false => _mm512_min_ps(t, _mm512_set1_ps(hi)),
            }
        }
    }
}
