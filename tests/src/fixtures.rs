//! Small models and arrays the device test files share.

use ferrite_tools::aligned::AlignedBytes;
pub use ferrite_tools::compile::onnx::build::gather_model;
use ferrite_tools::compile::onnx::build::{attr_int, ModelBuilder, D};
use ferrite_tools::compile::onnx::proto::data_type;
use ferrite_tools::compile::pack::{pack, PackOptions};
use ferrite_tools::compile::tensor::MAX_CONSTANT_ELEMENTS;
use ferrite_tools::host::npy::NpyArray;

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

/// A float model whose arena exceeds `limit` bytes, or `None` where no `.frt` can: its arena
/// is described in 32 bits, and NVIDIA's Vulkan storage buffers reach 4 GiB - 1. A tensor holds
/// at most [`MAX_CONSTANT_ELEMENTS`] elements (1 GiB of f32), so a limit past that takes several
/// equal inputs, together one float more than the limit and all live when a run starts, summed
/// by a chain of `Add`s.
pub fn model_with_arena_over(limit: usize) -> Option<Vec<u8>> {
    let bytes = limit.checked_add(1)?;
    let inputs = bytes.div_ceil(MAX_CONSTANT_ELEMENTS * 4);
    let elements = bytes.div_ceil(4 * inputs);
    // The inputs, the last sum and one partial sum at most.
    let arena = (inputs + 2).checked_mul(elements * 4)?;
    if arena > u32::MAX as usize {
        return None;
    }
    let shape = [D::N(1), D::N(elements as i64)];
    let names: Vec<String> = (0..inputs).map(|i| format!("x{i}")).collect();
    let mut builder = ModelBuilder::new(13);
    for name in &names {
        builder = builder.input(name, data_type::FLOAT, &shape);
    }
    let mut sum = names[0].clone();
    if inputs == 1 {
        builder = builder.node("Relu", "r", &["x0"], &["y"], vec![]);
        sum = "y".into();
    }
    for (i, name) in names.iter().enumerate().skip(1) {
        let out = format!("s{i}");
        builder = builder.node("Add", &format!("a{i}"), &[&sum, name], &[&out], vec![]);
        sum = out;
    }
    Some(builder.output(&sum).encode())
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
