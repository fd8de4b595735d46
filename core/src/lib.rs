//! # ferrite-core
//!
//! The runtime half of Ferrite: [`Model::load`] verifies a packed `.frt` model *once* — checksum,
//! every offset, count, index and size, every op's parameters and shapes — and a [`Session`] then
//! runs its static plan in a caller-provided arena on any [`Device`](ferrite_hal::Device), with no
//! heap, no planning and no further checks of the file's structure.
//!
//! ```text
//! let model = Model::load(include_model!("model.frt"))?;   // in flash, 16-byte aligned
//! let mut arena = Arena::<ARENA_BYTES>::new();            // the size `ferrite pack` printed
//! let mut session = Session::new(&model, CpuDevice::new(), arena.as_mut_bytes())?;
//! session.set_input_f32(0, &features)?;
//! session.run()?;
//! let scores = session.output_f32(0)?;
//! ```
//!
//! (`tests/tests/readme_example.rs` compiles and runs this very flow on the demo model.)
//!
//! `no_std`, no `alloc`. The `std` feature only adds `std::error::Error` impls.
#![cfg_attr(not(feature = "std"), no_std)]
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod arena;
mod bytes;
mod cast;
pub mod crc;
pub mod error;
pub mod format;
pub mod model;
mod rules;
pub mod session;

pub use arena::Arena;
pub use error::{Error, FormatError, FormatErrorKind, MissingOps};
pub use model::{Model, Quantization, TensorInfo};
pub use session::Session;

/// Checks one step against its op's rules (operand counts, dtypes, shapes, overlap): what
/// [`Model::load`] runs for every step, exposed so tools can check steps they build themselves.
pub fn verify_step(step: &ferrite_hal::Step<'_>) -> Result<(), &'static str> {
    rules::check_step::<{ ferrite_hal::ALL_OPS }>(step)
}
