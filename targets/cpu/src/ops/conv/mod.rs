//! The convolution family (`ferrite_hal::op::Family::Conv`): the portable kernels and the
//! host's channel-lane, channel-blocked and Winograd strategies.

#[cfg(all(feature = "std", target_arch = "x86_64"))]
pub(crate) mod blocked;
#[cfg(all(feature = "std", target_arch = "x86_64"))]
pub(crate) mod channel_lanes;
#[cfg(all(feature = "std", target_arch = "x86_64"))]
pub(crate) mod depthwise_lanes;
#[cfg(feature = "quantized")]
pub mod int8;
#[cfg(all(
    feature = "quantized",
    feature = "std",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod int8_simd;
pub mod reference;
#[cfg(all(feature = "std", target_arch = "x86_64"))]
pub(crate) mod winograd;
