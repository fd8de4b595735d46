//! Secondary inputs computed at run time (issue 20, item 2): Clip bounds as data, integer Clip,
//! and an If on a run-time condition whose branches differ in shape — refused with the graph
//! input to freeze named, and packed once `--constant sr=16000` freezes it.

mod common;

use common::models::{f32_array, f32_values, run_packed, values};
use ferrite_hal::DType;
use ferrite_tools::compile::onnx::build::{attr_graph, attr_int, ModelBuilder, D};
use ferrite_tools::compile::onnx::proto::{data_type, TensorProto};
use ferrite_tools::compile::pack::{pack, Constant, PackOptions};
use ferrite_tools::host::npy::NpyArray;

fn run(onnx: &[u8], options: &PackOptions, inputs: &[NpyArray]) -> Vec<NpyArray> {
    run_packed(onnx, options, inputs, "model")
}

/// The log-mel floor: `Clip(x, min = ReduceMax(x) − 80)`, the bound computed at run time.
#[test]
fn clip_with_a_run_time_floor_matches_its_definition() {
    let onnx = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(4), D::N(5)])
        .init_f32("range", &[], &[80.0])
        .node(
            "ReduceMax",
            "peak",
            &["x"],
            &["peak"],
            vec![attr_int("keepdims", 0)],
        )
        .node("Sub", "floor", &["peak", "range"], &["floor"], vec![])
        .node("Clip", "clip", &["x", "floor"], &["y"], vec![])
        .output("y")
        .encode();
    for seed in 1..20 {
        let x = values(seed, 20, 400.0);
        let out = run(&onnx, &PackOptions::default(), &[f32_array(&[4, 5], &x)]);
        let peak = x.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let want: Vec<f32> = x.iter().map(|&v| v.max(peak - 80.0)).collect();
        assert_eq!(f32_values(&out[0]), want, "seed {seed}");
    }
}

/// Both bounds as graph inputs, a min above the max included (ONNX: the max everywhere).
#[test]
fn clip_bounds_as_graph_inputs() {
    let onnx = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(6)])
        .input("lo", data_type::FLOAT, &[])
        .input("hi", data_type::FLOAT, &[D::N(1)])
        .node("Clip", "clip", &["x", "lo", "hi"], &["y"], vec![])
        .output("y")
        .encode();
    let x = [-3.0f32, -1.0, 0.0, 0.5, 2.0, 9.0];
    for (lo, hi) in [(-1.0f32, 1.0f32), (0.0, 0.0), (2.0, -2.0), (-10.0, 10.0)] {
        let feeds = [
            f32_array(&[6], &x),
            f32_array(&[], &[lo]),
            f32_array(&[1], &[hi]),
        ];
        let out = run(&onnx, &PackOptions::default(), &feeds);
        let want: Vec<f32> = x.iter().map(|&v| v.max(lo).min(hi)).collect();
        assert_eq!(f32_values(&out[0]), want, "[{lo}, {hi}]");
    }
}

/// Clip on int8 (constant bounds, as the ONNX node tests have it) and on int32 with a bound
/// given at run time.
#[test]
fn integer_clip() {
    let int8 = |name: &str, v: i8| TensorProto {
        name: name.into(),
        data_type: data_type::INT8,
        dims: vec![],
        int32_data: vec![v.into()],
        ..Default::default()
    };
    let onnx = ModelBuilder::new(13)
        .input("x", data_type::INT8, &[D::N(5)])
        .init(int8("lo", -5))
        .init(int8("hi", 7))
        .node("Clip", "clip", &["x", "lo", "hi"], &["y"], vec![])
        .output("y")
        .encode();
    let x: [i8; 5] = [-128, -6, 0, 7, 127];
    let feeds = [NpyArray {
        dtype: DType::I8,
        shape: vec![5],
        bytes: x.iter().map(|&v| v as u8).collect(),
    }];
    let out = run(&onnx, &PackOptions::default(), &feeds);
    let got: Vec<i8> = out[0].bytes.iter().map(|&b| b as i8).collect();
    assert_eq!(got, [-5, -5, 0, 7, 7]);

    let onnx = ModelBuilder::new(13)
        .input("x", data_type::INT32, &[D::N(4)])
        .input("hi", data_type::INT32, &[])
        .node("Clip", "clip", &["x", "", "hi"], &["y"], vec![])
        .output("y")
        .encode();
    let i32s = |v: &[i32], shape: &[usize]| NpyArray {
        dtype: DType::I32,
        shape: shape.to_vec(),
        bytes: v.iter().flat_map(|v| v.to_le_bytes()).collect(),
    };
    let out = run(
        &onnx,
        &PackOptions::default(),
        &[i32s(&[-9, 3, 40, 100], &[4]), i32s(&[39], &[])],
    );
    let got: Vec<i32> = out[0]
        .bytes
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, [-9, 3, 39, 39]);
}

/// A voice-activity detector's pattern: `If(sr == 16000)` picks a branch whose output has
/// another shape. Refused naming `sr`; packed with `--constant sr=16000` (a plain number),
/// taking the right branch.
#[test]
fn if_on_a_graph_input_names_it_and_packs_once_frozen() {
    let branch = |len: i64, fill: f32| {
        ModelBuilder::new(13)
            .init_f32("value", &[len], &vec![fill; len as usize])
            .node("Identity", "id", &["value"], &["out"], vec![])
            .output("out")
            .graph()
    };
    let onnx = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(3)])
        .input("sr", data_type::INT64, &[])
        .init_i64("rate", &[], &[16000])
        .node("Equal", "is_16k", &["sr", "rate"], &["is_16k"], vec![])
        .node(
            "If",
            "pick",
            &["is_16k"],
            &["window"],
            vec![
                attr_graph("then_branch", branch(2, 1.0)),
                attr_graph("else_branch", branch(4, 2.0)),
            ],
        )
        .node(
            "ReduceSum",
            "total",
            &["window"],
            &["total"],
            vec![attr_int("keepdims", 0)],
        )
        .node("Add", "add", &["x", "total"], &["y"], vec![])
        .output("y")
        .encode();
    let err = pack(&onnx, &PackOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("pick")
            && err.contains(
                "the condition depends on graph input 'sr': freeze it with --constant sr=NUMBER"
            ),
        "{err}"
    );
    for (rate, added) in [(16000.0, 2.0f32), (8000.0, 8.0)] {
        let options = PackOptions {
            constants: vec![("sr".into(), Constant::Number(rate))],
            ..Default::default()
        };
        let out = run(&onnx, &options, &[f32_array(&[3], &[0.0, 1.0, 2.0])]);
        assert_eq!(
            f32_values(&out[0]),
            [added, 1.0 + added, 2.0 + added],
            "sr={rate}"
        );
    }
    let options = |v: f64| PackOptions {
        constants: vec![("sr".into(), Constant::Number(v))],
        ..Default::default()
    };
    let err = pack(&onnx, &options(16000.5)).unwrap_err().to_string();
    assert!(
        err.contains("input 'sr' is int64, which cannot hold 16000.5"),
        "{err}"
    );
    let err = pack(&onnx, &options(1e19)).unwrap_err().to_string();
    assert!(err.contains("cannot hold"), "{err}");
}

/// A plain number for an input of several values is refused with the way out.
#[test]
fn a_number_for_a_tensor_input_is_refused() {
    let onnx = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(3)])
        .input("k", data_type::FLOAT, &[D::N(3)])
        .node("Add", "add", &["x", "k"], &["y"], vec![])
        .output("y")
        .encode();
    let options = PackOptions {
        constants: vec![("k".into(), Constant::Number(2.0))],
        ..Default::default()
    };
    let err = pack(&onnx, &options).unwrap_err().to_string();
    assert!(
        err.contains("input 'k' holds more than one value; give an array as FILE.npy"),
        "{err}"
    );
}

/// Pad's constant_value as a graph input: the border takes the value given at run time, the
/// inside the input, for float and integer tensors.
#[test]
fn pad_value_given_at_run_time() {
    let onnx = |elem: i32| {
        ModelBuilder::new(18)
            .input("x", elem, &[D::N(2), D::N(3)])
            .input("v", elem, &[])
            .init_i64("pads", &[4], &[1, 0, 0, 2])
            .node("Pad", "pad", &["x", "pads", "v"], &["y"], vec![])
            .output("y")
            .encode()
    };
    // Output [3, 5]: one row above, two columns on the right.
    let expect = |x: &[f32], v: f32| -> Vec<f32> {
        let mut y = vec![v; 15];
        for r in 0..2 {
            for c in 0..3 {
                y[(r + 1) * 5 + c] = x[r * 3 + c];
            }
        }
        y
    };
    let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    for v in [0.0f32, -7.5, 1e9] {
        let out = run(
            &onnx(data_type::FLOAT),
            &PackOptions::default(),
            &[f32_array(&[2, 3], &x), f32_array(&[], &[v])],
        );
        assert_eq!(out[0].shape, [3, 5]);
        assert_eq!(f32_values(&out[0]), expect(&x, v), "value {v}");
    }
    let i32s = |v: &[i32], shape: &[usize]| NpyArray {
        dtype: DType::I32,
        shape: shape.to_vec(),
        bytes: v.iter().flat_map(|v| v.to_le_bytes()).collect(),
    };
    let out = run(
        &onnx(data_type::INT32),
        &PackOptions::default(),
        &[i32s(&[1, 2, 3, 4, 5, 6], &[2, 3]), i32s(&[-1], &[])],
    );
    let got: Vec<f32> = out[0]
        .bytes
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()) as f32)
        .collect();
    assert_eq!(got, expect(&x, -1.0));
}
