//! The instruction sets this CPU has: detection once per process (and `FERRITE_CPU_SIMD`, which
//! forces a narrower build), and the intrinsics the layers above are written with. Imports only
//! from `base` (`scripts/layers.py` checks it).

#[cfg(all(feature = "std", target_arch = "x86_64"))]
pub(crate) mod activation_lanes;
#[cfg(all(feature = "std", feature = "quantized", target_arch = "x86_64"))]
pub(crate) mod avx2;
#[cfg(all(feature = "std", feature = "quantized"))]
pub(crate) mod forced;
#[cfg(all(feature = "std", target_arch = "x86_64"))]
pub(crate) mod lanes;
#[cfg(all(feature = "std", target_arch = "x86_64"))]
mod level;
#[cfg(all(feature = "std", target_arch = "aarch64"))]
mod neon;

#[cfg(all(feature = "std", target_arch = "x86_64"))]
pub use level::{level, vnni, Level};
#[cfg(all(feature = "std", target_arch = "aarch64"))]
pub use neon::neon;
