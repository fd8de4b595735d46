//! QuantizeLinear / DequantizeLinear through pack and the CPU device: the ONNX arithmetic
//! (round half to even, saturation, per-axis parameters), constant dequantization folded at pack
//! time, and one clear error per bad parameter.

use ferrite_core::Model;
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::compile::onnx::build::{attr_int, border_quantized_model, ModelBuilder, D};
use ferrite_tools::compile::onnx::proto::{data_type, TensorProto};
use ferrite_tools::compile::pack::{pack, PackOptions};
use ferrite_tools::host::npy::NpyArray;
use ferrite_tools::host::runner::run_cpu;

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
    // A blocked scale whose shape does not fit its blocks (blocks of 3 along 4 values need 2
    // scales a row, not 3) is refused naming the shape it needs; a negative block size too.
    let blocked = |scale_dims: &[i64], block: i64| {
        let n = scale_dims.iter().product::<i64>() as usize;
        ModelBuilder::new(21)
            .input("x", data_type::FLOAT, &[D::N(2), D::N(4)])
            .init_f32("scale", scale_dims, &vec![1.0; n])
            .node(
                "QuantizeLinear",
                "q",
                &["x", "scale"],
                &["y"],
                vec![attr_int("axis", 1), attr_int("block_size", block)],
            )
            .output("y")
            .encode()
    };
    let err = pack_error(blocked(&[2, 3], 3));
    assert!(
        err.contains("scale 'scale' has shape [2, 3]") && err.contains("need [2, 2]"),
        "{err}"
    );
    assert!(pack_error(blocked(&[2, 2], -2)).contains("block_size -2 is negative"));
    let onnx = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(2)])
        .init_f32("scale", &[], &[1.0])
        .init(int_init("zero", 6, &[], &[0])) // INT32: not a quantized type
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
    assert!(text.contains("int32") && text.contains("zero"), "{text}");
}

/// x [1, 2, 3, 3] → QuantizeLinear → QLinearConv (1×1, per-channel int8 weights, int32 bias)
/// → DequantizeLinear → y; the input scale is a constant or (to be refused) a graph input.
fn qlinear_conv(w_scale: [f32; 2], x_scale_constant: bool) -> Vec<u8> {
    let mut b = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(1), D::N(2), D::N(3), D::N(3)])
        .init(int_init("xz", data_type::INT8, &[], &[0]))
        .init(int_init(
            "w",
            data_type::INT8,
            &[2, 2, 1, 1],
            &[10, -20, 30, 40],
        ))
        .init_f32("ws", &[2], &w_scale)
        .init(int_init("wz", data_type::INT8, &[2], &[0, 0]))
        .init_f32("ys", &[], &[0.1])
        .init(int_init("yz", data_type::INT8, &[], &[-5]))
        .init(int_init("bias", data_type::INT32, &[2], &[100, -100]));
    b = if x_scale_constant {
        b.init_f32("xs", &[], &[0.05])
    } else {
        b.input("xs", data_type::FLOAT, &[])
    };
    b.node("QuantizeLinear", "q", &["x", "xs", "xz"], &["xq"], vec![])
        .node(
            "QLinearConv",
            "conv",
            &["xq", "xs", "xz", "w", "ws", "wz", "ys", "yz", "bias"],
            &["yq"],
            vec![],
        )
        .node(
            "DequantizeLinear",
            "dq",
            &["yq", "ys", "yz"],
            &["y"],
            vec![],
        )
        .output("y")
        .encode()
}

#[test]
fn qoperator_convolutions_become_integer_ops() {
    let packed = pack(&qlinear_conv([0.01, 0.02], true), &PackOptions::default()).unwrap();
    assert_eq!(
        packed.report.ops.get("QConv"),
        Some(&1),
        "{:?}",
        packed.report.ops
    );
    // x = 1 everywhere: xq = 20; acc = bias + 20·Σw = 100 − 200 = −100 and −100 + 1400 = 1300;
    // y = acc · xs · ws = −0.05 and 1.3 (to within one step of 0.1).
    let model_bytes = AlignedBytes::from(&packed.bytes[..]);
    let model = Model::load(model_bytes.as_bytes()).unwrap();
    let out = run_cpu(&model, &[floats_in(&[1, 2, 3, 3], &[1.0; 18])]).unwrap();
    let y: Vec<f32> = out[0]
        .bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    for (i, v) in y.iter().enumerate() {
        let expected = if i < 9 { -0.05 } else { 1.3 };
        assert!((v - expected).abs() <= 0.1 + 1e-6, "{i}: {v}");
    }
}

#[test]
fn bad_qoperator_nodes_are_refused_by_name() {
    let text = pack_error(qlinear_conv([0.01, 0.0], true));
    assert!(
        text.contains("conv") && text.contains("scale 'ws' holds 0"),
        "{text}"
    );
    let text = pack_error(qlinear_conv([0.01, 0.02], false));
    assert!(text.contains("scale 'xs' must be a constant"), "{text}");
    let microsoft = |op: &str, attrs| {
        ModelBuilder::new(13)
            .import("com.microsoft", 1)
            .input("xq", data_type::INT8, &[D::N(1), D::N(4)])
            .init_f32("s", &[], &[0.1])
            .init(int_init("z", data_type::INT8, &[], &[0]))
            .node_in(
                "com.microsoft",
                op,
                "qop",
                &["xq", "s", "z", "s", "z"],
                &["y"],
                attrs,
            )
            .output("y")
            .encode()
    };
    let text = pack_error(microsoft("QLinearSoftmax", vec![attr_int("axis", 0)]));
    assert!(text.contains("only the last axis"), "{text}");
    let text = pack_error(microsoft(
        "QLinearGlobalAveragePool",
        vec![attr_int("channels_last", 1)],
    ));
    assert!(text.contains("channels_last"), "{text}");
    let text = pack_error(microsoft("QAttention", vec![]));
    assert!(
        text.contains("QAttention") && text.contains("com.microsoft") && text.contains("QGemm"),
        "{text}"
    );
    let onnx = ModelBuilder::new(13)
        .input("xq", data_type::INT8, &[D::N(1), D::N(4)])
        .init_f32("s", &[], &[0.1])
        .node("QLinearMatMul", "mm", &["xq", "s"], &["y"], vec![])
        .output("y")
        .encode();
    let text = pack_error(onnx);
    assert!(
        text.contains("mm") && text.contains("needs 8 inputs"),
        "{text}"
    );
}

/// x, z [1, 4, 3] → Quantize → Dequantize (one scale and zero point) → Transpose and Concat →
/// Quantize with the same parameters → Dequantize: the movement runs on the integers.
#[test]
fn data_movement_between_equal_quantizations_moves_integers() {
    let q = |name: &str, x: &str, y: &str| {
        (
            format!("q_{name}"),
            vec![x.to_string(), "s".into(), "z".into()],
            vec![y.to_string()],
        )
    };
    let mut b = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(1), D::N(4), D::N(3)])
        .input("w", data_type::FLOAT, &[D::N(1), D::N(3), D::N(4)])
        .init_f32("s", &[], &[0.1])
        .init(int_init("z", data_type::INT8, &[], &[3]));
    for (name, inputs, outputs) in [q("x", "x", "xq"), q("w", "w", "wq"), q("y", "cat", "yq")] {
        let ins: Vec<&str> = inputs.iter().map(String::as_str).collect();
        let outs: Vec<&str> = outputs.iter().map(String::as_str).collect();
        b = b.node("QuantizeLinear", &name, &ins, &outs, vec![]);
    }
    let onnx = b
        .node(
            "DequantizeLinear",
            "dq_x",
            &["xq", "s", "z"],
            &["xf"],
            vec![],
        )
        .node(
            "DequantizeLinear",
            "dq_w",
            &["wq", "s", "z"],
            &["wf"],
            vec![],
        )
        .node(
            "Transpose",
            "t",
            &["xf"],
            &["xt"],
            vec![ferrite_tools::compile::onnx::build::attr_ints(
                "perm",
                &[0, 2, 1],
            )],
        )
        .node(
            "Concat",
            "cat",
            &["xt", "wf"],
            &["cat"],
            vec![attr_int("axis", 1)],
        )
        .node(
            "DequantizeLinear",
            "dq_y",
            &["yq", "s", "z"],
            &["y"],
            vec![],
        )
        .output("y")
        .encode();
    let packed = pack(&onnx, &PackOptions::default()).unwrap();
    let ops = &packed.report.ops;
    assert_eq!(ops.get("QuantizeLinear"), Some(&2), "{ops:?}");
    assert_eq!(ops.get("DequantizeLinear"), Some(&1), "{ops:?}");
    let int8 = |name: &str| {
        let t = packed
            .graph
            .tensors
            .iter()
            .find(|t| t.name == name)
            .unwrap();
        t.dtype
    };
    let transpose = packed.graph.ops.iter().find(|o| o.name == "t").unwrap();
    let read = packed.graph.tensors[transpose.inputs[0].unwrap()].dtype;
    assert_eq!(read, ferrite_hal::DType::I8, "the Transpose reads integers");
    assert_eq!(int8("yq"), ferrite_hal::DType::I8);
    // y = concat(transpose(x), w) rounded to the grid of 0.1 around the zero point 3.
    let x: Vec<f32> = (0..12).map(|i| i as f32 * 0.37 - 2.0).collect();
    let w: Vec<f32> = (0..12).map(|i| 1.5 - i as f32 * 0.21).collect();
    let bytes = AlignedBytes::from(&packed.bytes[..]);
    let model = Model::load(bytes.as_bytes()).unwrap();
    let out = run_cpu(
        &model,
        &[floats_in(&[1, 4, 3], &x), floats_in(&[1, 3, 4], &w)],
    )
    .unwrap();
    let y: Vec<f32> = out[0]
        .bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let grid = |v: f32| ((v / 0.1).round_ties_even().clamp(-131.0, 124.0)) * 0.1;
    let mut want = Vec::new();
    for c in 0..3 {
        for h in 0..4 {
            want.push(grid(x[h * 3 + c]));
        }
    }
    want.extend(w.iter().map(|&v| grid(v)));
    for (i, (a, b)) in y.iter().zip(&want).enumerate() {
        assert!((a - b).abs() < 1e-5, "{i}: {a} vs {b}");
    }
}

/// x → Quantize → Dequantize → activation → Quantize → Dequantize: the activation becomes a
/// 256-entry `QLookup` table, within one output step of the float computation.
#[test]
fn activations_between_quantizations_become_tables() {
    for (op, attrs, f) in [
        (
            "Sigmoid",
            vec![],
            (|v: f32| 1.0 / (1.0 + (-v).exp())) as fn(f32) -> f32,
        ),
        ("Tanh", vec![], |v: f32| v.tanh()),
        (
            "LeakyRelu",
            vec![ferrite_tools::compile::onnx::build::attr_float(
                "alpha", 0.1,
            )],
            |v: f32| if v >= 0.0 { v } else { 0.1 * v },
        ),
    ] {
        let onnx = ModelBuilder::new(13)
            .input("x", data_type::FLOAT, &[D::N(1), D::N(300)])
            .init_f32("sx", &[], &[0.05])
            .init(int_init("zx", data_type::INT8, &[], &[-10]))
            .init_f32("sy", &[], &[1.0 / 128.0])
            .init(int_init("zy", data_type::INT8, &[], &[0]))
            .node("QuantizeLinear", "qx", &["x", "sx", "zx"], &["xq"], vec![])
            .node(
                "DequantizeLinear",
                "dqx",
                &["xq", "sx", "zx"],
                &["xf"],
                vec![],
            )
            .node(op, "act", &["xf"], &["yf"], attrs)
            .node("QuantizeLinear", "qy", &["yf", "sy", "zy"], &["yq"], vec![])
            .node(
                "DequantizeLinear",
                "dqy",
                &["yq", "sy", "zy"],
                &["y"],
                vec![],
            )
            .output("y")
            .encode();
        let packed = pack(&onnx, &PackOptions::default()).unwrap();
        assert_eq!(
            packed.report.ops.get("QLookup"),
            Some(&1),
            "{op}: {:?}",
            packed.report.ops
        );
        let x: Vec<f32> = (0..300).map(|i| (i as f32 - 150.0) * 0.045).collect();
        let bytes = AlignedBytes::from(&packed.bytes[..]);
        let model = Model::load(bytes.as_bytes()).unwrap();
        let out = run_cpu(&model, &[floats_in(&[1, 300], &x)]).unwrap();
        for (i, c) in out[0].bytes.chunks_exact(4).enumerate() {
            let y = f32::from_le_bytes(c.try_into().unwrap());
            let xq = ((x[i] / 0.05).round_ties_even() - 10.0).clamp(-128.0, 127.0);
            let want = f((xq + 10.0) * 0.05);
            let want = ((want * 128.0).round_ties_even().clamp(-128.0, 127.0)) / 128.0;
            assert!(
                (y - want).abs() <= 1.0 / 128.0 + 1e-6,
                "{op} {i}: {y} vs {want}"
            );
        }
    }
}

/// x → Quantize → Dequantize → MaxPool (3×3, stride 2, padded) → Quantize (same parameters) →
/// Dequantize: the pooling runs on the integers and gives the float computation's result.
#[test]
fn max_pooling_runs_on_integers() {
    use ferrite_tools::compile::onnx::build::attr_ints;
    let onnx = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(1), D::N(2), D::N(7), D::N(7)])
        .init_f32("s", &[], &[0.05])
        .init(int_init("z", data_type::INT8, &[], &[7]))
        .node("QuantizeLinear", "qx", &["x", "s", "z"], &["xq"], vec![])
        .node(
            "DequantizeLinear",
            "dqx",
            &["xq", "s", "z"],
            &["xf"],
            vec![],
        )
        .node(
            "MaxPool",
            "pool",
            &["xf"],
            &["yf"],
            vec![
                attr_ints("kernel_shape", &[3, 3]),
                attr_ints("strides", &[2, 2]),
                attr_ints("pads", &[1, 1, 1, 1]),
            ],
        )
        .node("QuantizeLinear", "qy", &["yf", "s", "z"], &["yq"], vec![])
        .node("DequantizeLinear", "dqy", &["yq", "s", "z"], &["y"], vec![])
        .output("y")
        .encode();
    let packed = pack(&onnx, &PackOptions::default()).unwrap();
    let pool = packed.graph.ops.iter().find(|o| o.name == "pool").unwrap();
    let read = packed.graph.tensors[pool.inputs[0].unwrap()].dtype;
    assert_eq!(read, ferrite_hal::DType::I8, "{:?}", packed.report.ops);
    assert_eq!(packed.report.ops.get("QuantizeLinear"), Some(&1));
    let x: Vec<f32> = (0..98)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.09)
        .collect();
    let bytes = AlignedBytes::from(&packed.bytes[..]);
    let model = Model::load(bytes.as_bytes()).unwrap();
    let out = run_cpu(&model, &[floats_in(&[1, 2, 7, 7], &x)]).unwrap();
    let grid = |v: f32| ((v / 0.05).round_ties_even() + 7.0).clamp(-128.0, 127.0);
    for (i, c) in out[0].bytes.chunks_exact(4).enumerate() {
        let y = f32::from_le_bytes(c.try_into().unwrap());
        let (ch, oy, ox) = (i / 16, i / 4 % 4, i % 4);
        let mut max = f32::NEG_INFINITY;
        for ky in 0..3 {
            for kx in 0..3 {
                let (iy, ix) = ((oy * 2 + ky) as isize - 1, (ox * 2 + kx) as isize - 1);
                if (0..7).contains(&iy) && (0..7).contains(&ix) {
                    max = max.max(grid(x[ch * 49 + iy as usize * 7 + ix as usize]));
                }
            }
        }
        assert!((y - (max - 7.0) * 0.05).abs() < 1e-6, "{i}: {y} vs {max}");
    }
}

/// a [1, 3, 4, 4] and b [1, 3, 1, 1] (per-channel scaling, as squeeze-and-excitation does), each
/// quantized → dequantized → Mul → Quantize → Dequantize: one `QMul`, within one output step of
/// the float product.
#[test]
fn products_between_quantizations_become_integer_muls() {
    let onnx = ModelBuilder::new(13)
        .input("a", data_type::FLOAT, &[D::N(1), D::N(3), D::N(4), D::N(4)])
        .input("b", data_type::FLOAT, &[D::N(1), D::N(3), D::N(1), D::N(1)])
        .init_f32("sa", &[], &[0.04])
        .init(int_init("za", data_type::INT8, &[], &[5]))
        .init_f32("sb", &[], &[1.0 / 255.0])
        .init(int_init("zb", data_type::INT8, &[], &[-128]))
        .init_f32("sy", &[], &[0.03])
        .init(int_init("zy", data_type::INT8, &[], &[-2]))
        .node("QuantizeLinear", "qa", &["a", "sa", "za"], &["aq"], vec![])
        .node("QuantizeLinear", "qb", &["b", "sb", "zb"], &["bq"], vec![])
        .node(
            "DequantizeLinear",
            "dqa",
            &["aq", "sa", "za"],
            &["af"],
            vec![],
        )
        .node(
            "DequantizeLinear",
            "dqb",
            &["bq", "sb", "zb"],
            &["bf"],
            vec![],
        )
        .node("Mul", "mul", &["af", "bf"], &["yf"], vec![])
        .node("QuantizeLinear", "qy", &["yf", "sy", "zy"], &["yq"], vec![])
        .node(
            "DequantizeLinear",
            "dqy",
            &["yq", "sy", "zy"],
            &["y"],
            vec![],
        )
        .output("y")
        .encode();
    let packed = pack(&onnx, &PackOptions::default()).unwrap();
    assert_eq!(
        packed.report.ops.get("QMul"),
        Some(&1),
        "{:?}",
        packed.report.ops
    );
    let a: Vec<f32> = (0..48).map(|i| (i as f32 - 24.0) * 0.13).collect();
    let b = [0.2f32, 0.7, 0.95];
    let bytes = AlignedBytes::from(&packed.bytes[..]);
    let model = Model::load(bytes.as_bytes()).unwrap();
    let inputs = [floats_in(&[1, 3, 4, 4], &a), floats_in(&[1, 3, 1, 1], &b)];
    let out = run_cpu(&model, &inputs).unwrap();
    let grid = |v: f32, s: f32, z: f32| ((v / s).round_ties_even() + z).clamp(-128.0, 127.0);
    for (i, c) in out[0].bytes.chunks_exact(4).enumerate() {
        let y = f32::from_le_bytes(c.try_into().unwrap());
        let av = (grid(a[i], 0.04, 5.0) - 5.0) * 0.04;
        let bv = (grid(b[i / 16], 1.0 / 255.0, -128.0) + 128.0) / 255.0;
        let want = (grid(av * bv, 0.03, -2.0) + 2.0) * 0.03;
        assert!((y - want).abs() <= 0.03 + 1e-6, "{i}: {y} vs {want}");
    }
}

/// x (int8 grid `(sx, zx)`) → Dequantize → `op` → Quantize `(sy, zy)` → Dequantize → y, with
/// the float input quantized first.
fn around_op(
    op: &str,
    attrs: Vec<ferrite_tools::compile::onnx::proto::AttributeProto>,
    shape: &[usize],
    (sx, zx): (f32, i32),
    (sy, zy): (f32, i32),
) -> Vec<u8> {
    let dims: Vec<D> = shape.iter().map(|&d| D::N(d as i64)).collect();
    ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &dims)
        .init_f32("sx", &[], &[sx])
        .init(int_init("zx", data_type::INT8, &[], &[zx]))
        .init_f32("sy", &[], &[sy])
        .init(int_init("zy", data_type::INT8, &[], &[zy]))
        .node("QuantizeLinear", "qx", &["x", "sx", "zx"], &["xq"], vec![])
        .node(
            "DequantizeLinear",
            "dqx",
            &["xq", "sx", "zx"],
            &["xf"],
            vec![],
        )
        .node(op, "op", &["xf"], &["yf"], attrs)
        .node("QuantizeLinear", "qy", &["yf", "sy", "zy"], &["yq"], vec![])
        .node(
            "DequantizeLinear",
            "dqy",
            &["yq", "sy", "zy"],
            &["y"],
            vec![],
        )
        .output("y")
        .encode()
}

/// Packs `onnx`, checks the plan has `kind`, runs it on the CPU; returns the float outputs.
fn run_packed(onnx: &[u8], kind: &str, inputs: &[NpyArray]) -> Vec<Vec<f32>> {
    let packed = pack(onnx, &PackOptions::default()).unwrap();
    assert!(
        packed.report.ops.contains_key(kind),
        "no {kind}: {:?}",
        packed.report.ops
    );
    let bytes = AlignedBytes::from(&packed.bytes[..]);
    let model = Model::load(bytes.as_bytes()).unwrap();
    let out = run_cpu(&model, inputs).unwrap();
    out.iter()
        .map(|o| {
            o.bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect()
        })
        .collect()
}

/// The value `v` takes on the int8 grid `(s, z)`, dequantized.
fn on_grid(v: f32, (s, z): (f32, i32)) -> f32 {
    let q = ((v / s).round_ties_even() + z as f32).clamp(-128.0, 127.0);
    (q - z as f32) * s
}

/// Quantized → dequantized → Softmax → Quantize → Dequantize: one `QSoftmax`, within one output
/// step of the float softmax of the dequantized input.
#[test]
fn softmax_between_quantizations_runs_on_integers() {
    let (x_grid, y_grid) = ((0.09, 4), (1.0 / 256.0, -128));
    let onnx = around_op(
        "Softmax",
        vec![attr_int("axis", -1)],
        &[3, 12],
        x_grid,
        y_grid,
    );
    let x: Vec<f32> = (0..36)
        .map(|i| ((i * 29 % 47) as f32 - 23.0) * 0.4)
        .collect();
    let y = &run_packed(&onnx, "QSoftmax", &[floats_in(&[3, 12], &x)])[0];
    for row in 0..3 {
        let xs: Vec<f32> = x[row * 12..][..12]
            .iter()
            .map(|&v| on_grid(v, x_grid))
            .collect();
        let max = xs.iter().cloned().fold(f32::MIN, f32::max);
        let sum: f32 = xs.iter().map(|v| (v - max).exp()).sum();
        for (j, v) in xs.iter().enumerate() {
            let want = on_grid((v - max).exp() / sum, y_grid);
            let got = y[row * 12 + j];
            assert!(
                (got - want).abs() <= y_grid.0 + 1e-6,
                "{row},{j}: {got} vs {want}"
            );
        }
    }
}

/// Quantized → dequantized → AveragePool (3×3, stride 2, padded, padding not counted) →
/// Quantize with another scale → Dequantize: one `QAvgPool`, within one output step.
#[test]
fn average_pooling_between_quantizations_runs_on_integers() {
    use ferrite_tools::compile::onnx::build::attr_ints;
    let (x_grid, y_grid) = ((0.05, 7), (0.03, -3));
    let attrs = vec![
        attr_ints("kernel_shape", &[3, 3]),
        attr_ints("strides", &[2, 2]),
        attr_ints("pads", &[1, 1, 1, 1]),
    ];
    let onnx = around_op("AveragePool", attrs, &[1, 2, 7, 7], x_grid, y_grid);
    let x: Vec<f32> = (0..98)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.06)
        .collect();
    let y = &run_packed(&onnx, "QAveragePool", &[floats_in(&[1, 2, 7, 7], &x)])[0];
    for (i, &got) in y.iter().enumerate() {
        let (ch, oy, ox) = (i / 16, i / 4 % 4, i % 4);
        let (mut sum, mut count) = (0.0f32, 0);
        for ky in 0..3 {
            for kx in 0..3 {
                let (iy, ix) = ((oy * 2 + ky) as isize - 1, (ox * 2 + kx) as isize - 1);
                if (0..7).contains(&iy) && (0..7).contains(&ix) {
                    sum += on_grid(x[ch * 49 + iy as usize * 7 + ix as usize], x_grid);
                    count += 1;
                }
            }
        }
        let want = on_grid(sum / count as f32, y_grid);
        assert!(
            (got - want).abs() <= y_grid.0 + 1e-6,
            "{i}: {got} vs {want}"
        );
    }
}

/// Two tensors quantized differently, dequantized, concatenated and quantized again (what
/// QLinearConcat stands for): the input on another grid is requantized by a table and the
/// integers concatenated, giving exactly the float computation's result.
#[test]
fn concatenation_with_different_scales_requantizes_by_table() {
    let (a_grid, b_grid) = ((0.05f32, 3), (0.11f32, -5));
    let onnx = ModelBuilder::new(13)
        .input("a", data_type::FLOAT, &[D::N(1), D::N(2), D::N(3)])
        .input("b", data_type::FLOAT, &[D::N(1), D::N(3), D::N(3)])
        .init_f32("sa", &[], &[a_grid.0])
        .init(int_init("za", data_type::INT8, &[], &[a_grid.1]))
        .init_f32("sb", &[], &[b_grid.0])
        .init(int_init("zb", data_type::INT8, &[], &[b_grid.1]))
        .node("QuantizeLinear", "qa", &["a", "sa", "za"], &["aq"], vec![])
        .node("QuantizeLinear", "qb", &["b", "sb", "zb"], &["bq"], vec![])
        .node(
            "DequantizeLinear",
            "dqa",
            &["aq", "sa", "za"],
            &["af"],
            vec![],
        )
        .node(
            "DequantizeLinear",
            "dqb",
            &["bq", "sb", "zb"],
            &["bf"],
            vec![],
        )
        .node(
            "Concat",
            "concat",
            &["af", "bf"],
            &["yf"],
            vec![attr_int("axis", 1)],
        )
        // The output shares A's parameters: only B needs a table.
        .node("QuantizeLinear", "qy", &["yf", "sa", "za"], &["yq"], vec![])
        .node(
            "DequantizeLinear",
            "dqy",
            &["yq", "sa", "za"],
            &["y"],
            vec![],
        )
        .output("y")
        .encode();
    let packed = pack(&onnx, &PackOptions::default()).unwrap();
    assert_eq!(
        packed.report.ops.get("QLookup"),
        Some(&1),
        "{:?}",
        packed.report.ops
    );
    let a: Vec<f32> = (0..6).map(|i| (i as f32 - 2.5) * 0.7).collect();
    let b: Vec<f32> = (0..9).map(|i| (i as f32 - 4.0) * 3.1).collect();
    let inputs = [floats_in(&[1, 2, 3], &a), floats_in(&[1, 3, 3], &b)];
    let y = &run_packed(&onnx, "Concat", &inputs)[0];
    let want: Vec<f32> = a
        .iter()
        .map(|&v| on_grid(v, a_grid))
        .chain(b.iter().map(|&v| on_grid(on_grid(v, b_grid), a_grid)))
        .collect();
    assert_eq!(y, &want);
}

/// Quantized → dequantized → Pad (constant 0 and reflect) → Quantize (same parameters) →
/// Dequantize: the padding moves the integers (the fill is the zero point) and the
/// quantizations cancel; a fill off the integer grid keeps the float Pad.
#[test]
fn padding_between_equal_quantizations_moves_integers() {
    use ferrite_tools::compile::onnx::build::attr_string;
    let grid = (0.1f32, -6);
    let x: Vec<f32> = (0..12).map(|i| (i as f32 - 5.0) * 0.37).collect();
    for (mode, value, integer) in [
        ("constant", 0.0f32, true),
        ("constant", 0.3, true),
        ("reflect", 0.0, true),
        ("constant", 0.25, false),
    ] {
        let onnx = ModelBuilder::new(13)
            .input("x", data_type::FLOAT, &[D::N(1), D::N(3), D::N(4)])
            .init_f32("s", &[], &[grid.0])
            .init(int_init("z", data_type::INT8, &[], &[grid.1]))
            .init(TensorProto {
                name: "pads".into(),
                dims: vec![6],
                data_type: data_type::INT64,
                int64_data: vec![0, 1, 2, 0, 1, 1],
                ..Default::default()
            })
            .init_f32("value", &[], &[value])
            .node("QuantizeLinear", "qx", &["x", "s", "z"], &["xq"], vec![])
            .node(
                "DequantizeLinear",
                "dqx",
                &["xq", "s", "z"],
                &["xf"],
                vec![],
            )
            .node(
                "Pad",
                "pad",
                &["xf", "pads", "value"],
                &["yf"],
                vec![attr_string("mode", mode)],
            )
            .node("QuantizeLinear", "qy", &["yf", "s", "z"], &["yq"], vec![])
            .node("DequantizeLinear", "dqy", &["yq", "s", "z"], &["y"], vec![])
            .output("y")
            .encode();
        let packed = pack(&onnx, &PackOptions::default()).unwrap();
        let pad = packed.graph.ops.iter().find(|o| o.name == "pad").unwrap();
        let read = packed.graph.tensors[pad.inputs[0].unwrap()].dtype;
        assert_eq!(read == ferrite_hal::DType::I8, integer, "{mode} {value}");
        let y = &run_packed(&onnx, "Pad", &[floats_in(&[1, 3, 4], &x)])[0];
        assert_eq!(y.len(), 5 * 7, "{mode}");
        let reflect = |s: isize, d: isize| {
            if s < 0 {
                -s
            } else if s >= d {
                2 * (d - 1) - s
            } else {
                s
            }
        };
        for r in 0..5 {
            for k in 0..7 {
                let (sr, sk) = (r as isize - 1, k as isize - 2);
                let inside = (0..3).contains(&sr) && (0..4).contains(&sk);
                let want = if inside || mode == "reflect" {
                    let (sr, sk) = (reflect(sr, 3), reflect(sk, 4));
                    on_grid(x[sr as usize * 4 + sk as usize], grid)
                } else {
                    on_grid(value, grid)
                };
                let got = y[r * 7 + k];
                assert!(
                    (got - want).abs() < 1e-6,
                    "{mode} {value} [{r},{k}]: {got} vs {want}"
                );
            }
        }
    }
}

/// MatMulInteger / ConvInteger / DynamicQuantizeLinear nodes with bad operands: one error naming
/// the node and the tensor.
#[test]
fn bad_integer_nodes_are_refused_by_name() {
    use ferrite_tools::compile::onnx::build::attr_ints;
    let matmul = |a_type: i32, zero: TensorProto| {
        ModelBuilder::new(13)
            .input("a", a_type, &[D::N(2), D::N(3)])
            .input("b", data_type::INT8, &[D::N(3), D::N(4)])
            .init(zero)
            .node("MatMulInteger", "mm", &["a", "b", "za"], &["y"], vec![])
            .output("y")
            .encode()
    };
    let text = pack_error(matmul(
        data_type::UINT8,
        int_init("za", data_type::INT8, &[], &[0]),
    ));
    assert!(
        text.contains("mm") && text.contains("zero point 'za' is int8, its operand uint8"),
        "{text}"
    );
    let text = pack_error(matmul(
        data_type::UINT8,
        int_init("za", data_type::UINT8, &[3], &[1, 2, 3]),
    ));
    assert!(
        text.contains("'za' has 3 values") && text.contains("per row (2)"),
        "{text}"
    );
    let text = pack_error(matmul(
        data_type::FLOAT,
        TensorProto {
            name: "za".into(),
            data_type: data_type::FLOAT,
            float_data: vec![0.0],
            ..Default::default()
        },
    ));
    assert!(
        text.contains("input 'a' is float32: integer ops read int8 or uint8"),
        "{text}"
    );
    let onnx = ModelBuilder::new(13)
        .input("x", data_type::UINT8, &[D::N(1), D::N(2), D::N(3), D::N(3)])
        .input("w", data_type::UINT8, &[D::N(4), D::N(2), D::N(2), D::N(2)])
        .input("zw", data_type::UINT8, &[D::N(3)])
        .node(
            "ConvInteger",
            "conv",
            &["x", "w", "", "zw"],
            &["y"],
            vec![attr_ints("kernel_shape", &[2, 2])],
        )
        .output("y")
        .encode();
    let text = pack_error(onnx);
    assert!(
        text.contains("conv") && text.contains("'zw' has 3 values") && text.contains("(4)"),
        "{text}"
    );
    let onnx = ModelBuilder::new(13)
        .input("x", data_type::INT8, &[D::N(6)])
        .node(
            "DynamicQuantizeLinear",
            "dql",
            &["x"],
            &["y", "s", "z"],
            vec![],
        )
        .output("y")
        .encode();
    let text = pack_error(onnx);
    assert!(
        text.contains("dql") && text.contains("float32 only"),
        "{text}"
    );
}

#[test]
fn a_model_quantized_at_its_border_records_each_inputs_and_outputs_scale_and_zero_point() {
    let packed = pack(&border_quantized_model(), &PackOptions::default()).expect("pack");
    let bytes = AlignedBytes::from(&packed.bytes[..]);
    let model = Model::load(bytes.as_bytes()).expect("load");
    let q = |v: Option<ferrite_core::Quantization>| v.map(|q| (q.scale, q.zero_point));
    assert_eq!(q(model.input_quantization(0)), Some((0.25, 3)));
    assert_eq!(q(model.output_quantization(0)), Some((0.125, -7)));
    assert_eq!(q(model.input_quantization(1)), None);
    // Minor version 1: the file has a QUANTIZATION section.
    assert_eq!(&packed.bytes[4..8], &[1, 0, 1, 0]);
}

#[test]
fn a_float_model_records_no_quantization_and_stays_version_1_0() {
    let packed = pack(
        &round_trip(&[0.5, 0.25, 2.0], &[0, 3, -4]),
        &PackOptions::default(),
    )
    .expect("pack");
    let bytes = AlignedBytes::from(&packed.bytes[..]);
    let model = Model::load(bytes.as_bytes()).expect("load");
    assert_eq!(model.input_quantization(0), None);
    assert_eq!(model.output_quantization(0), None);
    assert_eq!(&packed.bytes[4..8], &[1, 0, 0, 0]);
}

/// x [1, 8] → Q → DQ → Gemm (int8 per-channel weights `[n, 8]`, int32 bias) → Q → DQ: one QGemm.
fn qdq_gemm(n: usize) -> Vec<u8> {
    let (k, ni) = (8, n as i64);
    let weights: Vec<i32> = (0..n * k).map(|i| (i as i32 * 37 % 255) - 127).collect();
    let w_scale: Vec<f32> = (0..n).map(|c| 0.01 + 0.001 * c as f32).collect();
    let b_scale: Vec<f32> = w_scale.iter().map(|s| s * 0.05).collect();
    ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(1), D::N(k as i64)])
        .init_f32("sx", &[], &[0.05])
        .init(int_init("zx", data_type::INT8, &[], &[2]))
        .init(int_init("w_q", data_type::INT8, &[ni, k as i64], &weights))
        .init_f32("sw", &[ni], &w_scale)
        .init(int_init("zw", data_type::INT8, &[ni], &vec![0; n]))
        .init(int_init("b_q", data_type::INT32, &[ni], &vec![40; n]))
        .init_f32("sb", &[ni], &b_scale)
        .init(int_init("zb", data_type::INT32, &[ni], &vec![0; n]))
        .init_f32("sy", &[], &[0.1])
        .init(int_init("zy", data_type::INT8, &[], &[-4]))
        .node("QuantizeLinear", "qx", &["x", "sx", "zx"], &["xq"], vec![])
        .node(
            "DequantizeLinear",
            "dqx",
            &["xq", "sx", "zx"],
            &["xf"],
            vec![],
        )
        .node(
            "DequantizeLinear",
            "dqw",
            &["w_q", "sw", "zw"],
            &["w"],
            vec![attr_int("axis", 0)],
        )
        .node(
            "DequantizeLinear",
            "dqb",
            &["b_q", "sb", "zb"],
            &["b"],
            vec![attr_int("axis", 0)],
        )
        .node(
            "Gemm",
            "gemm",
            &["xf", "w", "b"],
            &["yf"],
            vec![attr_int("transB", 1)],
        )
        .node("QuantizeLinear", "qy", &["yf", "sy", "zy"], &["yq"], vec![])
        .node(
            "DequantizeLinear",
            "dqy",
            &["yq", "sy", "zy"],
            &["y"],
            vec![],
        )
        .output("y")
        .encode()
}

/// A QGemm's weights are packed blocked (`[N/4, K/4, 4, 4]`) when N is a multiple of four and K
/// of eight, else row-major, with the same results; a model's selection names its layout, and a build
/// that links only the other layout refuses the model at load.
#[test]
fn qgemm_weights_are_blocked_when_they_can_be_and_the_build_links_that_layout() {
    use ferrite_hal::op::QGemmWeights;
    use ferrite_hal::{op_mask, selects_qgemm_weights, with_qgemm_weights, OpKind, Plan};
    const KINDS: ferrite_hal::Selection =
        op_mask(&[OpKind::Quantize, OpKind::QGemm, OpKind::Dequantize]);
    const ROWS_ONLY: ferrite_hal::Selection = with_qgemm_weights(KINDS, &[QGemmWeights::Rows]);
    const BLOCKED_ONLY: ferrite_hal::Selection =
        with_qgemm_weights(KINDS, &[QGemmWeights::Blocked]);
    let x: Vec<f32> = (0..8).map(|i| i as f32 * 0.3 - 1.1).collect();
    let mut outputs = Vec::new();
    for (n, layout) in [(8, QGemmWeights::Blocked), (6, QGemmWeights::Rows)] {
        let onnx = qdq_gemm(n);
        let packed = pack(&onnx, &PackOptions::default()).unwrap();
        let bytes = AlignedBytes::from(&packed.bytes[..]);
        let model = Model::load(bytes.as_bytes()).unwrap();
        let qgemm = (0..model.len())
            .filter_map(|i| model.step(i))
            .find(|s| matches!(s.op, ferrite_hal::Op::QGemm(_)))
            .expect("a QGemm step");
        let b = qgemm.inputs.get(1).unwrap();
        assert_eq!(
            QGemmWeights::of(&b.shape).map(|l| l.0),
            Some(layout),
            "N = {n}"
        );
        let selection = ferrite_tools::compile::emit::model_selection(&model);
        assert!(selects_qgemm_weights(selection, layout));
        let other = match layout {
            QGemmWeights::Rows => QGemmWeights::Blocked,
            QGemmWeights::Blocked => QGemmWeights::Rows,
        };
        assert!(!selects_qgemm_weights(selection, other), "N = {n}");
        let (own, refused) = match layout {
            QGemmWeights::Blocked => (
                Model::<BLOCKED_ONLY>::load_selected(bytes.as_bytes()).map(|_| ()),
                Model::<ROWS_ONLY>::load_selected(bytes.as_bytes()).map(|_| ()),
            ),
            QGemmWeights::Rows => (
                Model::<ROWS_ONLY>::load_selected(bytes.as_bytes()).map(|_| ()),
                Model::<BLOCKED_ONLY>::load_selected(bytes.as_bytes()).map(|_| ()),
            ),
        };
        assert!(own.is_ok(), "N = {n}: {own:?}");
        let err = refused.unwrap_err().to_string();
        assert!(err.contains("QGemm weight layout is not linked"), "{err}");
        outputs.push(run_cpu(&model, &[floats_in(&[1, 8], &x)]).unwrap());
    }
    // The first six outputs of the 8-column model are the 6-column model's (same weights).
    let values = |o: &NpyArray| -> Vec<f32> {
        o.bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    assert_eq!(values(&outputs[0][0])[..6], values(&outputs[1][0])[..]);
}
