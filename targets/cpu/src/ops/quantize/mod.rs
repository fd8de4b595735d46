//! The quantization family (`ferrite_hal::op::Family::Quantize`): QuantizeLinear and
//! DequantizeLinear.

pub mod reference;
