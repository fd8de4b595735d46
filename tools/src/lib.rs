//! # ferrite-tools
//!
//! Everything Ferrite does on the desktop, in two layers: [`compile`] turns an ONNX model into a
//! `.frt` (import, lowering with shape inference and constant folding, graph passes,
//! quantization, memory planning, the writer and the emitted Rust/C modules), and [`host`] runs
//! packed models on this machine's devices and QEMU firmware (runner, benchmarks, per-model
//! firmware, `.npy` and file I/O, the plan's view). The `ferrite` CLI (`src/main.rs` and
//! `src/cli/`) parses arguments and calls them; Python and C call the same functions.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod aligned;
pub mod compile;
pub mod fuzzing;
pub mod host;

pub use compile::error::PackError;
pub use compile::pack::{pack, PackOptions, Packed};
