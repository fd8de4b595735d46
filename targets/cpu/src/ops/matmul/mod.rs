//! The matrix-product family (`ferrite_hal::op::Family::MatMul`): Gemm, MatMul, the integer
//! products that keep their accumulators, and the Fourier transforms.

#[cfg(feature = "quantized")]
pub mod accumulate;
pub mod fourier;
#[cfg(feature = "quantized")]
pub mod int8;
pub mod reference;
