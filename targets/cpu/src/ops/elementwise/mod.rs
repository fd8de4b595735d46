//! The elementwise family (`ferrite_hal::op::Family::Elementwise`): activations, binary
//! arithmetic, normalizations, softmax, and integer arithmetic and casts (`numeric`).

#[cfg(feature = "quantized")]
pub mod int8;
#[cfg(all(feature = "quantized", feature = "std", target_arch = "x86_64"))]
mod int8_avx2;
pub mod numeric;
pub mod reference;
