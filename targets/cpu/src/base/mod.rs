//! The lowest layer: what every kernel shares and nothing in it depends on a kernel. Errors,
//! scalar math, arena carving, index iteration, aligned buffers, the quantized integer types and
//! requantization, and the geometry of a convolution or pooling call.
//!
//! Layers above (`isa`, `micro`, `ops`, `steps`, `program`) import from here; this layer
//! imports only from itself and `ferrite-hal` (`scripts/layers.py` checks it).

#[cfg(all(feature = "std", target_arch = "x86_64"))]
pub(crate) mod aligned;
#[cfg(feature = "std")]
pub mod blocking;
pub mod context;
#[cfg(test)]
pub(crate) mod element_ids;
pub(crate) mod elements;
pub mod error;
pub mod geometry;
pub mod index;
pub(crate) mod math;
pub(crate) mod memory;
#[cfg(feature = "threads")]
pub(crate) mod parts;
pub mod quantized;
#[cfg(feature = "quantized")]
pub mod requantize;
