//! The graph passes, observed on the packed plan: folding, fusion, aliasing and dead-op removal
//! each leave a mark on the op list, and the result still computes the same thing.

use ferrite_tools::compile::onnx::build::{attr_float, attr_int, attr_ints, ModelBuilder, D};
use ferrite_tools::compile::onnx::proto::data_type::FLOAT;
use ferrite_tools::compile::pack::{op_label, pack, PackOptions};
use prost::Message;

fn labels(onnx: &[u8]) -> (Vec<String>, ferrite_tools::compile::passes::PassStats) {
    let packed = pack(onnx, &PackOptions::default()).expect("packs");
    (
        packed.graph.ops.iter().map(|o| op_label(&o.op)).collect(),
        packed.report.passes,
    )
}

#[test]
fn batch_norm_folds_and_relu_fuses_into_conv() {
    let w: Vec<f32> = (0..4 * 2 * 9).map(|i| i as f32 * 0.01).collect();
    let model = ModelBuilder::new(13)
        .input("x", FLOAT, &[D::N(1), D::N(2), D::N(5), D::N(5)])
        .init_f32("w", &[4, 2, 3, 3], &w)
        .init_f32("scale", &[4], &[1.0, 2.0, 0.5, 1.5])
        .init_f32("bias", &[4], &[0.1, 0.2, 0.3, 0.4])
        .init_f32("mean", &[4], &[0.0, 0.1, 0.2, 0.3])
        .init_f32("var", &[4], &[1.0, 0.5, 2.0, 1.0])
        .node(
            "Conv",
            "conv",
            &["x", "w"],
            &["c"],
            vec![attr_ints("pads", &[1, 1, 1, 1])],
        )
        .node(
            "BatchNormalization",
            "bn",
            &["c", "scale", "bias", "mean", "var"],
            &["b"],
            vec![attr_float("epsilon", 1e-3)],
        )
        .node("Relu", "relu", &["b"], &["y"], vec![])
        .output("y")
        .encode();
    let (ops, stats) = labels(&model);
    assert_eq!(ops, ["Conv+Relu"]);
    assert_eq!((stats.batch_norms_folded, stats.activations_fused), (1, 1));
}

#[test]
fn matmul_add_becomes_gemm_and_views_vanish() {
    let model = ModelBuilder::new(13)
        .input("x", FLOAT, &[D::N(1), D::N(2), D::N(3)])
        .init_i64("flat", &[2], &[1, 6])
        .init_f32("w", &[6, 4], &[0.5; 24])
        .init_f32("b", &[4], &[1.0, 2.0, 3.0, 4.0])
        .node("Reshape", "reshape", &["x", "flat"], &["f"], vec![])
        .node("Identity", "id", &["f"], &["g"], vec![])
        .node("Dropout", "drop", &["g"], &["h"], vec![])
        .node("MatMul", "mm", &["h", "w"], &["m"], vec![])
        .node("Add", "add", &["m", "b"], &["a"], vec![])
        .node("Clip", "clip", &["a"], &["y"], vec![])
        .node("Sigmoid", "unused", &["x"], &["dead"], vec![])
        .output("y")
        .encode();
    let (ops, stats) = labels(&model);
    // Reshape, Identity and Dropout are views; the Sigmoid feeds nothing; MatMul + Add + Clip is
    // one Gemm with a fused clip.
    assert_eq!(ops, ["Gemm+Clip"]);
    assert_eq!(stats.matmul_add_fused, 1);
    assert_eq!(stats.dead_ops_removed, 1);
}

#[test]
fn pytorch_shape_chains_fold_to_constants() {
    // flatten via Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as torch.onnx exports it.
    let model = ModelBuilder::new(13)
        .input("x", FLOAT, &[D::N(2), D::N(3), D::N(4)])
        .init_i64("zero", &[], &[0])
        .init_i64("axes", &[1], &[0])
        .init_i64("minus_one", &[1], &[-1])
        .node("Shape", "shape", &["x"], &["s"], vec![])
        .node(
            "Gather",
            "gather",
            &["s", "zero"],
            &["n"],
            vec![attr_int("axis", 0)],
        )
        .node("Unsqueeze", "unsqueeze", &["n", "axes"], &["n1"], vec![])
        .node(
            "Concat",
            "concat",
            &["n1", "minus_one"],
            &["target"],
            vec![attr_int("axis", 0)],
        )
        .node("Reshape", "reshape", &["x", "target"], &["r"], vec![])
        .node("Relu", "relu", &["r"], &["y"], vec![])
        .output("y")
        .encode();
    let packed = pack(&model, &PackOptions::default()).expect("packs");
    let ops: Vec<String> = packed.graph.ops.iter().map(|o| op_label(&o.op)).collect();
    assert_eq!(ops, ["Relu"]);
    let y = packed.graph.outputs[0];
    assert_eq!(packed.graph.tensors[y].shape, [2, 12]);
}

#[test]
fn elementwise_ops_overwrite_a_dying_input() {
    let model = ModelBuilder::new(13)
        .input("x", FLOAT, &[D::N(1), D::N(64)])
        .input("y", FLOAT, &[D::N(1), D::N(64)])
        .node("Sigmoid", "sigmoid", &["x"], &["s"], vec![])
        .node("Add", "add", &["s", "y"], &["a"], vec![])
        .node("Mul", "mul", &["a", "y"], &["t"], vec![])
        .output("t")
        .encode();
    let packed = pack(&model, &PackOptions::default()).expect("packs");
    let g = &packed.graph;
    let id = |name: &str| g.tensors.iter().position(|t| t.name == name).unwrap();
    let offset = |name: &str| packed.memory.offset(id(name)).unwrap();
    // `x` dies at the Sigmoid, `s` at the Add, `a` at the Mul: each result takes its input's
    // bytes (inputs are rewritten before every run, so even a graph input may be reused).
    assert_eq!(offset("s"), offset("x"));
    assert_eq!(offset("a"), offset("s"));
    assert_eq!(offset("t"), offset("a"));
    // So the whole graph needs two 256-byte buffers: x/s/a/t and y.
    assert_eq!(packed.memory.arena_bytes, 2 * 256);
    // And it still computes (sigmoid(x) + y) * y.
    let bytes = ferrite_tools::aligned::AlignedBytes::from(&packed.bytes[..]);
    let model = ferrite_core::Model::load(bytes.as_bytes()).unwrap();
    let values = |f: fn(usize) -> f32| (0..64).map(f).collect::<Vec<f32>>();
    let (x, y) = (
        values(|i| i as f32 * 0.1 - 3.0),
        values(|i| 1.0 - i as f32 * 0.02),
    );
    let array = |v: &[f32]| ferrite_tools::host::npy::NpyArray {
        dtype: ferrite_hal::DType::F32,
        shape: vec![1, 64],
        bytes: v.iter().flat_map(|f| f.to_le_bytes()).collect(),
    };
    let out = ferrite_tools::host::runner::run_cpu(&model, &[array(&x), array(&y)]).unwrap();
    for (i, c) in out[0].bytes.chunks_exact(4).enumerate() {
        let got = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        let want = (1.0 / (1.0 + (-x[i]).exp()) + y[i]) * y[i];
        assert!((got - want).abs() < 1e-6, "{i}: {got} vs {want}");
    }
}

/// Runs a packed model on one f32 input on the CPU device; its first output's values.
fn run_f32(packed: &ferrite_tools::compile::pack::Packed, shape: &[usize], x: &[f32]) -> Vec<f32> {
    let bytes = ferrite_tools::aligned::AlignedBytes::from(&packed.bytes[..]);
    let model = ferrite_core::Model::load(bytes.as_bytes()).unwrap();
    let input = ferrite_tools::host::npy::NpyArray {
        dtype: ferrite_hal::DType::F32,
        shape: shape.to_vec(),
        bytes: x.iter().flat_map(|f| f.to_le_bytes()).collect(),
    };
    let out = ferrite_tools::host::runner::run_cpu(&model, &[input]).unwrap();
    out[0]
        .bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[test]
fn matmul_of_token_rows_and_add_become_gemm() {
    // A transformer's projection: [batch, tokens, K] × [K, N] + bias, and a view of it read
    // on; the Gemm multiplies the tokens as rows and writes the Add's bytes.
    let (k, n) = (6, 4);
    let w: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.37).sin()).collect();
    let b = [0.5, -1.0, 2.0, 0.25];
    let model = ModelBuilder::new(13)
        .input("x", FLOAT, &[D::N(2), D::N(3), D::N(k as i64)])
        .init_f32("w", &[k as i64, n as i64], &w)
        .init_f32("b", &[n as i64], &b)
        .init_i64("flat", &[2], &[6, 4])
        .node("MatMul", "mm", &["x", "w"], &["m"], vec![])
        .node("Add", "add", &["m", "b"], &["a"], vec![])
        .node("Reshape", "view", &["a", "flat"], &["v"], vec![])
        .node("Relu", "relu", &["v"], &["y"], vec![])
        .output("y")
        .encode();
    let packed = pack(&model, &PackOptions::default()).expect("packs");
    let ops: Vec<String> = packed.graph.ops.iter().map(|o| op_label(&o.op)).collect();
    assert_eq!(ops, ["Gemm", "Relu"]);
    assert_eq!(packed.report.passes.matmul_add_fused, 1);
    let x: Vec<f32> = (0..2 * 3 * k).map(|i| i as f32 * 0.1 - 1.5).collect();
    let y = run_f32(&packed, &[2, 3, k], &x);
    for (i, got) in y.iter().enumerate() {
        let (row, col) = (i / n, i % n);
        let sum: f32 = (0..k).map(|j| x[row * k + j] * w[j * n + col]).sum::<f32>() + b[col];
        assert!((got - sum.max(0.0)).abs() < 1e-5, "{i}: {got} vs {sum}");
    }
    // A bias that broadcasts the product larger stays an Add.
    let model = ModelBuilder::new(13)
        .input("x", FLOAT, &[D::N(3), D::N(k as i64)])
        .init_f32("w", &[k as i64, n as i64], &w)
        .init_f32("b", &[2, 1, n as i64], &[0.0; 8])
        .node("MatMul", "mm", &["x", "w"], &["m"], vec![])
        .node("Add", "add", &["m", "b"], &["y"], vec![])
        .output("y")
        .encode();
    assert_eq!(labels(&model).0, ["MatMul", "Add"]);
}

/// GELU written out as exporters do, its last two Muls grouped as `order` says: 0 `(x · ½) ·
/// s`, 1 `(s · ½) · x`, 2 `(x · s) · ½`; `by_inverse` divides by √2 as a Mul by 1/√2.
fn written_out_gelu(order: u8, by_inverse: bool) -> Vec<u8> {
    let mut m = ModelBuilder::new(13)
        .input("x", FLOAT, &[D::N(2), D::N(5)])
        .init_f32("sqrt2", &[], &[std::f32::consts::SQRT_2])
        .init_f32("inv_sqrt2", &[], &[std::f32::consts::FRAC_1_SQRT_2])
        .init_f32("one", &[], &[1.0])
        .init_f32("half", &[], &[0.5]);
    m = match by_inverse {
        false => m.node("Div", "div", &["x", "sqrt2"], &["d"], vec![]),
        true => m.node("Mul", "div", &["inv_sqrt2", "x"], &["d"], vec![]),
    };
    m = m.node("Erf", "erf", &["d"], &["e"], vec![]).node(
        "Add",
        "add",
        &["one", "e"],
        &["s"],
        vec![],
    );
    m = match order {
        0 => m.node("Mul", "m1", &["x", "half"], &["h"], vec![]).node(
            "Mul",
            "m2",
            &["h", "s"],
            &["y"],
            vec![],
        ),
        1 => m.node("Mul", "m1", &["s", "half"], &["h"], vec![]).node(
            "Mul",
            "m2",
            &["x", "h"],
            &["y"],
            vec![],
        ),
        _ => m.node("Mul", "m1", &["s", "x"], &["h"], vec![]).node(
            "Mul",
            "m2",
            &["h", "half"],
            &["y"],
            vec![],
        ),
    };
    m.output("y").encode()
}

#[test]
fn written_out_gelu_becomes_one_step() {
    let x: Vec<f32> = (0..10).map(|i| i as f32 * 0.7 - 3.2).collect();
    for order in 0..3 {
        for by_inverse in [false, true] {
            let packed = pack(
                &written_out_gelu(order, by_inverse),
                &PackOptions::default(),
            )
            .expect("packs");
            let ops: Vec<String> = packed.graph.ops.iter().map(|o| op_label(&o.op)).collect();
            assert_eq!(ops, ["Gelu"], "order {order}");
            assert_eq!(packed.report.passes.gelus_fused, 1);
            for (&v, got) in x.iter().zip(run_f32(&packed, &[2, 5], &x)) {
                let want = 0.5 * v as f64 * (1.0 + libm::erf(v as f64 / 2f64.sqrt()));
                assert!((got as f64 - want).abs() < 1e-6, "{v}: {got} vs {want}");
            }
        }
    }
}

#[test]
fn a_gelu_whose_parts_are_read_elsewhere_stays_written_out() {
    // The Erf's output is a second model output: nothing is fused.
    let mut onnx =
        ferrite_tools::compile::onnx::proto::ModelProto::decode(&written_out_gelu(0, false)[..])
            .expect("decodes");
    let graph = onnx.graph.as_mut().expect("graph");
    let mut erf_output = graph.output[0].clone();
    erf_output.name = "e".into();
    graph.output.push(erf_output);
    let (ops, stats) = labels(&onnx.encode_to_vec());
    assert_eq!(stats.gelus_fused, 0);
    assert_eq!(ops, ["Div", "Erf", "Add", "Mul", "Mul"]);
    // A Div by another constant is not GELU.
    let other = written_out_gelu(0, false);
    let text = std::f32::consts::SQRT_2.to_le_bytes();
    let changed = replace_bytes(&other, &text, &1.5f32.to_le_bytes());
    assert_eq!(labels(&changed).1.gelus_fused, 0);
}

/// `bytes` with the first occurrence of `from` replaced by `to`.
fn replace_bytes(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let at = bytes
        .windows(from.len())
        .position(|w| w == from)
        .expect("present");
    let mut out = bytes.to_vec();
    out[at..at + from.len()].copy_from_slice(to);
    out
}
