//! # ferrite-tools
//!
//! Everything Ferrite does on the desktop, before a model reaches a device: ONNX import
//! ([`onnx`]), lowering with shape inference and constant folding ([`lower`]), graph passes
//! ([`passes`]), memory planning ([`planner`]), the `.frt` writer ([`writer`]), and the helpers
//! behind the `ferrite` CLI (running, `.npy` I/O).
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod aligned;
pub mod bench;
pub mod emit;
pub mod error;
pub mod files;
pub mod firmware;
pub mod fold;
pub mod fuzzing;
pub mod ir;
pub mod lower;
pub mod npy;
pub mod onnx;
pub mod pack;
pub mod passes;
pub mod plan_view;
pub mod planner;
pub mod ptq;
pub mod qemu;
pub mod quantize;
pub mod runner;
pub mod strip;
pub mod tensor;
pub mod writer;

pub use error::PackError;
pub use pack::{pack, PackOptions, Packed};
