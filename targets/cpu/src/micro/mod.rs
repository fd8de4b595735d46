//! Micro-kernels generic over the instruction set: the inner loops the ops are built from, each
//! compiled once per ISA build. Imports only from `base` and `isa` (`scripts/layers.py` checks
//! it).

pub mod activation;
#[cfg(feature = "quantized")]
pub(crate) mod integer_dot;
pub mod sgemm;
#[cfg(any(test, feature = "std"))]
pub mod vector_math;
