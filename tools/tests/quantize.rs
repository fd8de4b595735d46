//! QuantizeLinear / DequantizeLinear through pack and the CPU device: the ONNX arithmetic
//! (round half to even, saturation, per-axis parameters), constant dequantization folded at pack
//! time, and one clear error per bad parameter.

use ferrite_core::Model;
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::npy::NpyArray;
use ferrite_tools::onnx::build::{attr_int, ModelBuilder, D};
use ferrite_tools::onnx::proto::{data_type, TensorProto};
use ferrite_tools::pack::{pack, PackOptions};
use ferrite_tools::runner::run_cpu;

fn int_init(name: &str, dtype: i32, dims: &[i64], values: &[i32]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: dtype,
        int32_data: values.to_vec(),
        ..Default::default()
    }
}

fn floats_in(shape: &[usize], values: &[f32]) -> NpyArray {
    NpyArray {
        dtype: ferrite_hal::DType::F32,
        shape: shape.to_vec(),
        bytes: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    }
}

fn pack_error(onnx: Vec<u8>) -> String {
    match pack(&onnx, &PackOptions::default()) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("packed a model with bad quantization parameters"),
    }
}

/// x [2, 3] → QuantizeLinear (per-channel along axis 1, int8) → DequantizeLinear → y.
fn round_trip(scale: &[f32], zero: &[i32]) -> Vec<u8> {
    ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(2), D::N(3)])
        .init_f32("scale", &[scale.len() as i64], scale)
        .init(int_init(
            "zero",
            data_type::INT8,
            &[zero.len() as i64],
            zero,
        ))
        .node(
            "QuantizeLinear",
            "q",
            &["x", "scale", "zero"],
            &["q"],
            vec![attr_int("axis", 1)],
        )
        .node(
            "DequantizeLinear",
            "dq",
            &["q", "scale", "zero"],
            &["y"],
            vec![attr_int("axis", 1)],
        )
        .output("y")
        .encode()
}

#[test]
fn a_qdq_round_trip_rounds_half_to_even_and_saturates() {
    let packed = pack(
        &round_trip(&[0.5, 1.0, 2.0], &[0, 10, -3]),
        &PackOptions::default(),
    )
    .expect("pack");
    let bytes = AlignedBytes::from(&packed.bytes[..]);
    let model = Model::load(bytes.as_bytes()).unwrap();
    let x = floats_in(&[2, 3], &[0.25, 2.5, 5.0, 100.0, -300.0, -1.0]);
    let y = run_cpu(&model, &[x]).expect("run");
    let y: Vec<f32> = y[0]
        .bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    // 0.25/0.5 = 0.5 → 0; 2.5 → 2 (+10, back to 2); 5/2 = 2.5 → 2, −3 → −1 → 4.0;
    // 100/0.5 = 200 saturates at 127 → 63.5; −300 + 10 saturates at −128 → −138; −0.5 → −0 (even).
    assert_eq!(y, [0.0, 2.0, 4.0, 63.5, -138.0, 0.0]);
}

#[test]
fn dequantizing_constant_weights_folds_at_pack_time() {
    let onnx = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(1), D::N(2)])
        .init(int_init("w_q", data_type::INT8, &[2, 2], &[2, -4, 6, 127]))
        .init_f32("w_scale", &[], &[0.5])
        .node(
            "DequantizeLinear",
            "dq",
            &["w_q", "w_scale"],
            &["w"],
            vec![],
        )
        .node("MatMul", "mm", &["x", "w"], &["y"], vec![])
        .output("y")
        .encode();
    let packed = pack(&onnx, &PackOptions::default()).expect("pack");
    assert!(
        packed
            .report
            .ops
            .iter()
            .all(|(k, _)| !k.contains("Dequantize")),
        "{:?}",
        packed.report.ops
    );
    let bytes = AlignedBytes::from(&packed.bytes[..]);
    let model = Model::load(bytes.as_bytes()).unwrap();
    let y = run_cpu(&model, &[floats_in(&[1, 2], &[1.0, 1.0])]).expect("run");
    let y: Vec<f32> = y[0]
        .bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(y, [4.0, 61.5]);
}

#[test]
fn bad_quantization_parameters_are_refused_by_name() {
    for (scale, needle) in [
        (0.0, "scale 'scale' holds 0"),
        (-1.0, "scale 'scale' holds -1"),
        (f32::INFINITY, "positive and finite"),
    ] {
        let text = pack_error(round_trip(&[scale, 1.0, 1.0], &[0, 0, 0]));
        assert!(text.contains(needle), "{text}");
    }
    // Per-channel scale of the wrong length.
    let text = pack_error(round_trip(&[1.0, 1.0], &[0, 0]));
    assert!(
        text.contains("scale 'scale' has 2 values, axis 1 has 3"),
        "{text}"
    );
    // Zero point shape differs from the scale's.
    let onnx = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(2), D::N(3)])
        .init_f32("scale", &[3], &[1.0, 1.0, 1.0])
        .init(int_init("zero", data_type::INT8, &[2], &[0, 0]))
        .node(
            "QuantizeLinear",
            "q",
            &["x", "scale", "zero"],
            &["y"],
            vec![attr_int("axis", 1)],
        )
        .output("y")
        .encode();
    assert!(pack_error(onnx).contains("zero point 'zero' has shape [2]"));
    // An int32 input with a non-zero zero point.
    let onnx = ModelBuilder::new(13)
        .input("x", data_type::INT32, &[D::N(2)])
        .init_f32("scale", &[], &[1.0])
        .init(int_init("zero", data_type::INT32, &[], &[5]))
        .node(
            "DequantizeLinear",
            "dq",
            &["x", "scale", "zero"],
            &["y"],
            vec![],
        )
        .output("y")
        .encode();
    assert!(pack_error(onnx).contains("zero point 'zero' of an int32 input must be 0"));
    // Blocked quantization and 16-bit types are named as unsupported.
    let onnx = ModelBuilder::new(21)
        .input("x", data_type::FLOAT, &[D::N(2), D::N(4)])
        .init_f32("scale", &[2, 2], &[1.0; 4])
        .node(
            "QuantizeLinear",
            "q",
            &["x", "scale"],
            &["y"],
            vec![attr_int("axis", 1), attr_int("block_size", 2)],
        )
        .output("y")
        .encode();
    assert!(pack_error(onnx).contains("block_size"));
    let onnx = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(2)])
        .init_f32("scale", &[], &[1.0])
        .init(int_init("zero", 5, &[], &[0])) // INT16
        .node(
            "QuantizeLinear",
            "q",
            &["x", "scale", "zero"],
            &["y"],
            vec![],
        )
        .output("y")
        .encode();
    let text = pack_error(onnx);
    assert!(text.contains("int16") && text.contains("zero"), "{text}");
}
