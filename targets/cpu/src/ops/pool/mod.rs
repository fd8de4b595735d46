//! The pooling family (`ferrite_hal::op::Family::Pool`).

#[cfg(feature = "quantized")]
pub mod int8;
pub mod reference;
