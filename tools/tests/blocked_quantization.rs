//! Blocked QuantizeLinear and DequantizeLinear (opset 21's `block_size`, issue 20 item 4)
//! against their definition over random shapes, axes and block sizes (a last block shorter than
//! the rest included), with the scale and zero point as constants (expanded at pack time) and as
//! graph inputs (expanded at run time).

mod common;

use common::models::{run_packed, Rng};
use ferrite_hal::DType;
use ferrite_tools::compile::onnx::build::{attr_int, ModelBuilder, D};
use ferrite_tools::compile::onnx::proto::{data_type, TensorProto};
use ferrite_tools::compile::pack::PackOptions;
use ferrite_tools::host::npy::NpyArray;

fn array(dtype: DType, shape: &[usize], bytes: Vec<u8>) -> NpyArray {
    NpyArray {
        dtype,
        shape: shape.to_vec(),
        bytes,
    }
}

fn dims(shape: &[usize]) -> Vec<D> {
    shape.iter().map(|&d| D::N(d as i64)).collect()
}

/// The blocked parameter index of element `i` of a tensor of `shape`.
fn block_of(i: usize, shape: &[usize], axis: usize, block: usize) -> usize {
    let inner: usize = shape[axis + 1..].iter().product();
    let blocks = shape[axis].div_ceil(block);
    let (outer, rest) = (i / (shape[axis] * inner), i % (shape[axis] * inner));
    (outer * blocks + rest / inner / block) * inner + rest % inner
}

#[test]
fn blocked_quantization_matches_the_definition() {
    let mut rng = Rng(0x1234_5678);
    for case in 0..80 {
        let rank = 1 + rng.below(3);
        let shape: Vec<usize> = (0..rank).map(|_| 1 + rng.below(6)).collect();
        let axis = rng.below(rank);
        let block = 1 + rng.below(shape[axis] + 1);
        let mut pshape = shape.clone();
        pshape[axis] = shape[axis].div_ceil(block);
        let (n, np): (usize, usize) = (shape.iter().product(), pshape.iter().product());
        let scales: Vec<f32> = (0..np)
            .map(|_| 0.01 + rng.below(100) as f32 / 400.0)
            .collect();
        let zeros: Vec<u8> = (0..np).map(|_| rng.below(256) as u8).collect();
        let x: Vec<f32> = (0..n)
            .map(|_| rng.below(2000) as f32 / 20.0 - 50.0)
            .collect();
        let q: Vec<u8> = (0..n).map(|_| rng.below(256) as u8).collect();
        let params_as_inputs = case % 2 == 1;
        let what = format!(
            "case {case}: shape {shape:?} axis {axis} block {block} inputs {params_as_inputs}"
        );
        let zero_tensor = TensorProto {
            name: "zero".into(),
            dims: pshape.iter().map(|&d| d as i64).collect(),
            data_type: data_type::UINT8,
            raw_data: zeros.clone(),
            ..Default::default()
        };
        for quantize in [true, false] {
            let (op, input_type) = if quantize {
                ("QuantizeLinear", data_type::FLOAT)
            } else {
                ("DequantizeLinear", data_type::UINT8)
            };
            let mut b = ModelBuilder::new(21).input("x", input_type, &dims(&shape));
            b = if params_as_inputs {
                b.input("scale", data_type::FLOAT, &dims(&pshape)).input(
                    "zero",
                    data_type::UINT8,
                    &dims(&pshape),
                )
            } else {
                let pdims: Vec<i64> = pshape.iter().map(|&d| d as i64).collect();
                b.init_f32("scale", &pdims, &scales)
                    .init(zero_tensor.clone())
            };
            let attrs = vec![
                attr_int("axis", axis as i64),
                attr_int("block_size", block as i64),
            ];
            let onnx = b
                .node(op, "q", &["x", "scale", "zero"], &["y"], attrs)
                .output("y")
                .encode();
            let mut inputs = vec![if quantize {
                array(
                    DType::F32,
                    &shape,
                    x.iter().flat_map(|v| v.to_le_bytes()).collect(),
                )
            } else {
                array(DType::U8, &shape, q.clone())
            }];
            if params_as_inputs {
                inputs.push(array(
                    DType::F32,
                    &pshape,
                    scales.iter().flat_map(|v| v.to_le_bytes()).collect(),
                ));
                inputs.push(array(DType::U8, &pshape, zeros.clone()));
            }
            let out = run_packed(&onnx, &PackOptions::default(), &inputs, &what);
            assert_eq!(out[0].shape, shape, "{what}");
            for i in 0..n {
                let p = block_of(i, &shape, axis, block);
                let (s, z) = (scales[p], zeros[p] as f32);
                if quantize {
                    let want = ((x[i] / s).round_ties_even() + z).clamp(0.0, 255.0) as u8;
                    assert_eq!(out[0].bytes[i], want, "{what}: quantized element {i}");
                } else {
                    let want = (q[i] as f32 - z) * s;
                    let got =
                        f32::from_le_bytes(out[0].bytes[4 * i..4 * i + 4].try_into().unwrap());
                    assert_eq!(got, want, "{what}: dequantized element {i}");
                }
            }
        }
    }
}
