//! ONNX → `.frt`: everything `ferrite pack` does, in the order it does it. [`onnx`] reads the
//! protobuf into a graph, [`lower`] turns its nodes into plan ops (shape inference, [`fold`]ing
//! constants by running them), [`passes`] and [`quantize`] rewrite the plan IR ([`ir`]),
//! [`ptq`] quantizes a float model on calibration samples, [`planner`] gives every tensor its
//! arena offset, and [`writer`] encodes the result ([`emit`]: as a Rust or C module; [`strip`]:
//! without names). [`pack`] is the pipeline that calls them.

pub mod emit;
pub mod error;
pub mod fold;
pub mod ir;
pub mod lower;
pub mod onnx;
pub mod pack;
pub mod passes;
pub mod planner;
pub mod ptq;
pub mod quantize;
pub mod strip;
pub mod tensor;
pub mod writer;
