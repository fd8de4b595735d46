//! The convolution family (`ferrite_hal::op::Family::Conv`): the portable kernels and the
//! host's channel-lane, channel-blocked and Winograd strategies.

#[cfg(all(feature = "std", target_arch = "x86_64"))]
pub(crate) mod blocked;
#[cfg(all(feature = "std", target_arch = "x86_64"))]
pub(crate) mod channel_lanes;
#[cfg(all(feature = "std", target_arch = "x86_64"))]
pub(crate) mod depthwise_lanes;
#[cfg(feature = "std")]
mod depthwise_phases;
#[cfg(feature = "std")]
mod in_place;
#[cfg(feature = "quantized")]
pub mod int8;
#[cfg(all(
    feature = "quantized",
    feature = "std",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod int8_simd;
pub mod reference;
mod rows;
#[cfg(all(feature = "std", target_arch = "x86_64"))]
mod tiles;
#[cfg(all(feature = "std", target_arch = "x86_64"))]
mod tiles_avx2;
#[cfg(all(feature = "std", target_arch = "x86_64"))]
mod tiles_avx512;
#[cfg(all(feature = "std", target_arch = "x86_64"))]
pub(crate) mod winograd;

/// The lanes of a channel block on this CPU (its vectors'), where the blocked convolution
/// kernels run: what a program plans blocked tensors with and their steps block and unblock by.
#[cfg(feature = "std")]
pub(crate) fn block_lanes() -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    return channel_lanes::lanes();
    #[cfg(not(target_arch = "x86_64"))]
    None
}
