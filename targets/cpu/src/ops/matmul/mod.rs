//! The matrix-product family (`ferrite_hal::op::Family::MatMul`): Gemm, MatMul, the integer
//! products that keep their accumulators, and the Fourier transforms.

#[cfg(feature = "quantized")]
pub mod accumulate;
pub mod fourier;
#[cfg(feature = "quantized")]
pub mod int8;
#[cfg(all(feature = "quantized", feature = "std", target_arch = "x86_64"))]
mod int8_avx2;
#[cfg(all(
    feature = "quantized",
    feature = "std",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod int8_simd;
#[cfg(all(feature = "quantized", feature = "std", target_arch = "x86_64"))]
mod int8_vnni;
pub mod reference;
