//! The elementwise family (`ferrite_hal::op::Family::Elementwise`): activations, binary
//! arithmetic, normalizations, softmax, and integer arithmetic and casts (`numeric`).

pub mod numeric;
pub mod reference;
