//! A vector of floats as one type over the instruction sets (`__m256` with AVX2 and FMA,
//! `__m512` with AVX-512F): what the channel-lane kernels of several families (depthwise
//! convolutions, Winograd's transforms, the recurrent layers' panel products) are generic over.

use super::activation_lanes::{finish_512, relu_lanes, ClipBounds, Finish};
use core::arch::x86_64::*;
use ferrite_hal::Activation;

/// A vector of channels: what the depthwise kernels (and `winograd`'s transforms and products, and the
/// recurrent layers' panel products) do with one.
#[allow(unsafe_code)]
pub(crate) trait Lanes: Copy {
    /// Floats in it.
    const WIDTH: usize;
    /// # Safety
    /// The instruction set's features; `WIDTH` floats readable at `p`.
    unsafe fn load(p: *const f32) -> Self;
    /// # Safety
    /// The instruction set's features; `WIDTH` floats writable at `p`.
    unsafe fn store(p: *mut f32, v: Self);
    /// A store kept as one instruction: in a loop of them LLVM would otherwise call `memcpy`
    /// or `memset`, whose call costs more than the few vectors of a short padded row.
    ///
    /// # Safety
    /// The instruction set's features; `p` aligned to the vector's size and writable.
    unsafe fn put(p: *mut f32, v: Self);
    /// `a + w · v`, the product rounded, then the sum (as the planar kernels do).
    ///
    /// # Safety
    /// The instruction set's features.
    unsafe fn add_product(a: Self, w: Self, v: Self) -> Self;
    /// `a + b`.
    ///
    /// # Safety
    /// The instruction set's features.
    unsafe fn add(a: Self, b: Self) -> Self;
    /// `a − b`.
    ///
    /// # Safety
    /// The instruction set's features.
    unsafe fn sub(a: Self, b: Self) -> Self;
    /// `a + w · v` rounded once (a fused multiply-add).
    ///
    /// # Safety
    /// The instruction set's features.
    unsafe fn fused(a: Self, w: Self, v: Self) -> Self;
    /// `x` in every lane.
    ///
    /// # Safety
    /// The instruction set's features.
    unsafe fn splat(x: f32) -> Self;
    /// # Safety
    /// The instruction set's features.
    unsafe fn zero() -> Self;
    /// A fused activation prepared for [`Lanes::finish`].
    type Finish: Copy;
    /// # Safety
    /// The instruction set's features.
    unsafe fn prepare(activation: Activation) -> Self::Finish;
    /// `v` with the activation applied (Relu and Clip; nothing for others).
    ///
    /// # Safety
    /// The instruction set's features.
    unsafe fn finish(finish: Self::Finish, v: Self) -> Self;
}

#[allow(unsafe_code)]
impl Lanes for __m512 {
    const WIDTH: usize = 16;
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        _mm512_loadu_ps(p)
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: Self) {
        _mm512_storeu_ps(p, v)
    }
    #[inline(always)]
    unsafe fn put(p: *mut f32, v: Self) {
        core::ptr::write_volatile(p.cast::<__m512>(), v)
    }
    #[inline(always)]
    unsafe fn add_product(a: Self, w: Self, v: Self) -> Self {
        _mm512_add_ps(a, _mm512_mul_ps(w, v))
    }
    #[inline(always)]
    unsafe fn add(a: Self, b: Self) -> Self {
        _mm512_add_ps(a, b)
    }
    #[inline(always)]
    unsafe fn sub(a: Self, b: Self) -> Self {
        _mm512_sub_ps(a, b)
    }
    #[inline(always)]
    unsafe fn fused(a: Self, w: Self, v: Self) -> Self {
        _mm512_fmadd_ps(w, v, a)
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> Self {
        _mm512_set1_ps(x)
    }
    #[inline(always)]
    unsafe fn zero() -> Self {
        _mm512_setzero_ps()
    }
    type Finish = Finish;
    #[inline(always)]
    unsafe fn prepare(activation: Activation) -> Self::Finish {
        Finish::of(activation)
    }
    #[inline(always)]
    unsafe fn finish(finish: Self::Finish, v: Self) -> Self {
        finish_512(finish, v)
    }
}

#[allow(unsafe_code)]
impl Lanes for __m256 {
    const WIDTH: usize = 8;
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        _mm256_loadu_ps(p)
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: Self) {
        _mm256_storeu_ps(p, v)
    }
    #[inline(always)]
    unsafe fn put(p: *mut f32, v: Self) {
        core::ptr::write_volatile(p.cast::<__m256>(), v)
    }
    #[inline(always)]
    unsafe fn add_product(a: Self, w: Self, v: Self) -> Self {
        _mm256_add_ps(a, _mm256_mul_ps(w, v))
    }
    #[inline(always)]
    unsafe fn add(a: Self, b: Self) -> Self {
        _mm256_add_ps(a, b)
    }
    #[inline(always)]
    unsafe fn sub(a: Self, b: Self) -> Self {
        _mm256_sub_ps(a, b)
    }
    #[inline(always)]
    unsafe fn fused(a: Self, w: Self, v: Self) -> Self {
        _mm256_fmadd_ps(w, v, a)
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> Self {
        _mm256_set1_ps(x)
    }
    #[inline(always)]
    unsafe fn zero() -> Self {
        _mm256_setzero_ps()
    }
    type Finish = (bool, Option<ClipBounds>);
    #[inline(always)]
    unsafe fn prepare(activation: Activation) -> Self::Finish {
        let clip = match activation {
            Activation::Clip { min, max } => Some(ClipBounds::new(min, max)),
            _ => None,
        };
        (activation == Activation::Relu, clip)
    }
    #[inline(always)]
    unsafe fn finish((relu, clip): Self::Finish, v: Self) -> Self {
        match (relu, clip) {
            (true, _) => relu_lanes(v),
            (_, Some(bounds)) => bounds.apply(v),
            _ => v,
        }
    }
}
