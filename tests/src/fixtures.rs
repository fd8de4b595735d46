//! Small models and arrays the device test files share.

use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::npy::NpyArray;
pub use ferrite_tools::onnx::build::gather_model;
use ferrite_tools::onnx::build::{attr_int, ModelBuilder, D};
use ferrite_tools::onnx::proto::data_type;
use ferrite_tools::pack::{pack, PackOptions};

/// `onnx` packed with default options, in aligned memory.
pub fn packed(onnx: &[u8]) -> AlignedBytes {
    let p = pack(onnx, &PackOptions::default()).expect("pack");
    AlignedBytes::from(&p.bytes[..])
}

/// An f32 array.
pub fn f32_array(shape: &[usize], values: &[f32]) -> NpyArray {
    NpyArray {
        dtype: ferrite_hal::DType::F32,
        shape: shape.to_vec(),
        bytes: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    }
}

/// A 1-D int64 array.
pub fn i64_array(values: &[i64]) -> NpyArray {
    NpyArray {
        dtype: ferrite_hal::DType::I64,
        shape: vec![values.len()],
        bytes: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    }
}

/// The f32 values of an array.
pub fn floats(a: &NpyArray) -> Vec<f32> {
    a.bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Bool Transpose and uint8 Concat: byte-sized data movement, which the GPU devices refuse.
pub fn byte_movement_model() -> Vec<u8> {
    ModelBuilder::new(13)
        .input("flags", data_type::BOOL, &[D::N(2), D::N(3)])
        .input("bytes", data_type::UINT8, &[D::N(4)])
        .node("Transpose", "t", &["flags"], &["flags_t"], vec![])
        .node(
            "Concat",
            "c",
            &["bytes", "bytes"],
            &["twice"],
            vec![attr_int("axis", 0)],
        )
        .output("flags_t")
        .output("twice")
        .encode()
}
