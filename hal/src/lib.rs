//! # ferrite-hal
//!
//! The one [`Device`] trait and the vocabulary that the core and every device share:
//! element types ([`DType`]), checked shape arithmetic ([`Shape`]), operator descriptors ([`op::Op`]),
//! capabilities ([`Capabilities`]) and a small error vocabulary ([`ErrorKind`]).
//!
//! The split follows wgpu-hal: validation is the caller's job. `ferrite-core` verifies a packed model
//! once, at load, so that a device receives only well-formed steps whose shapes, offsets and
//! parameters are already consistent. A device reports only what the core cannot foresee: out of
//! memory, a lost device, a timeout, an unsupported feature, or bad *data* (e.g. a gather index out
//! of range) that only shows at run time.
//!
//! This crate is `no_std`, has no allocator and no dependencies.
#![no_std]
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod activation;
pub mod capabilities;
pub mod device;
pub mod dtype;
pub mod error;
pub mod geometry;
pub mod message;
pub mod null;
pub mod op;
pub mod selection;
pub mod shape;
pub mod words;

pub use activation::Activation;
pub use capabilities::{Capabilities, OpSet};
pub use device::{Device, Location, Plan, Step, TensorDesc, TensorList, Tensors};
pub use dtype::DType;
pub use error::{Error, ErrorKind};
pub use message::{Line, Message, Piece};
pub use op::{Op, OpKind};
pub use selection::{
    op_mask, selection, selects, selects_activation, selects_binary, selects_dtype,
    selects_qgemm_weights, selects_size, with_activations, with_binary_ops, with_qgemm_weights,
    Selection, ALL_OPS,
};
pub use shape::{Shape, MAX_RANK};
