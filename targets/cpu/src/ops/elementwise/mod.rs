//! The elementwise family (`ferrite_hal::op::Family::Elementwise`): activations, binary
//! arithmetic, normalizations, softmax, and integer arithmetic and casts (`numeric`).

#[cfg(feature = "quantized")]
pub mod int8;
pub mod numeric;
pub mod reference;
