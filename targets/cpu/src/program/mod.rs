//! The top layer: a prepared program decides once (layouts, fused normalizations, threads) and
//! owns the state kept between runs (each step's `StepMemo`); it hands every step its share as
//! an explicit argument, the step's `base::context::StepContext`.

#[cfg(feature = "std")]
pub mod layout;
#[cfg(feature = "std")]
pub(crate) mod normalization;
#[cfg(feature = "threads")]
pub(crate) mod parallel;
#[cfg(feature = "std")]
pub(crate) mod prepared;
