//! The top layer: a prepared program decides once (layouts, fused normalizations, threads) and
//! owns the state kept between runs (per-step memos).

#[cfg(feature = "std")]
pub mod layout;
#[cfg(feature = "std")]
pub mod memo;
#[cfg(feature = "std")]
pub(crate) mod normalization;
#[cfg(feature = "threads")]
pub(crate) mod parallel;
#[cfg(feature = "std")]
pub(crate) mod prepared;
