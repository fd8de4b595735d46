//! The ONNX breadth ops (issue 6) at the pack level: bad attributes give one error naming the
//! node, and the composed lowerings (ReduceLogSumExp) stay finite where the naive formula
//! overflows.

use ferrite_core::Model;
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::compile::onnx::build::{attr_float, attr_int, attr_string, ModelBuilder, D};
use ferrite_tools::compile::onnx::proto::{data_type, AttributeProto};
use ferrite_tools::compile::pack::{pack, PackOptions};
use ferrite_tools::host::npy::NpyArray;
use ferrite_tools::host::runner::run_cpu;

/// x [2, 3] → `op` → y, at opset 13 or the op's first opset if that is later.
fn one_op(op: &str, attrs: Vec<AttributeProto>, shape: &[i64]) -> Vec<u8> {
    let dims: Vec<D> = shape.iter().map(|&d| D::N(d)).collect();
    let opset = ferrite_tools::compile::onnx::since::first_opset(op)
        .unwrap_or(13)
        .max(13);
    ModelBuilder::new(opset)
        .input("x", data_type::FLOAT, &dims)
        .node(op, "the_node", &["x"], &["y"], attrs)
        .output("y")
        .encode()
}

fn pack_error(onnx: &[u8]) -> String {
    match pack(onnx, &PackOptions::default()) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("packed a bad model"),
    }
}

#[test]
fn bad_attributes_are_refused_by_name() {
    let text = pack_error(&one_op("Celu", vec![attr_float("alpha", 0.0)], &[2, 3]));
    assert!(
        text.contains("the_node") && text.contains("alpha 0"),
        "{text}"
    );
    let text = pack_error(&one_op(
        "Gelu",
        vec![attr_string("approximate", "erf")],
        &[2, 3],
    ));
    assert!(text.contains("approximate 'erf'"), "{text}");
    let text = pack_error(&one_op("ArgMax", vec![attr_int("axis", 2)], &[2, 3]));
    assert!(text.contains("axis 2 is out of range"), "{text}");
    let text = pack_error(&one_op("ArgMin", vec![attr_int("axis", 1)], &[2, 0]));
    assert!(text.contains("no index to report"), "{text}");
    let text = pack_error(&one_op("LogSoftmax", vec![attr_int("axis", -3)], &[2, 3]));
    assert!(text.contains("axis -3"), "{text}");
}

/// ReduceLogSumExp of values near 100 (e^100 overflows f32) is `m + ln Σ e^(x − m)`: finite
/// and right.
#[test]
fn reduce_log_sum_exp_does_not_overflow() {
    let onnx = one_op("ReduceLogSumExp", vec![attr_int("keepdims", 0)], &[2, 3]);
    let packed = pack(&onnx, &PackOptions::default()).unwrap();
    let bytes = AlignedBytes::from(&packed.bytes[..]);
    let model = Model::load(bytes.as_bytes()).unwrap();
    let x = [100.0f32, 101.0, 102.0, -1.0, 0.0, 1.0];
    let input = NpyArray {
        dtype: ferrite_hal::DType::F32,
        shape: vec![2, 3],
        bytes: x.iter().flat_map(|v| v.to_le_bytes()).collect(),
    };
    let out = run_cpu(&model, &[input]).unwrap();
    let y: Vec<f32> = out[0]
        .bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let want = 100.0 + (1.0f64 + 1f64.exp() + 2f64.exp()).ln();
    assert_eq!(y.len(), 1);
    assert!((y[0] as f64 - want).abs() < 1e-4, "{} vs {want}", y[0]);
}

/// Mod of floats needs `fmod=1`; PRelu's slope must broadcast to the input (not widen it).
#[test]
fn binary_ops_check_their_operands() {
    let two = |op: &str, b_shape: &[i64], attrs| {
        let dims: Vec<D> = b_shape.iter().map(|&d| D::N(d)).collect();
        ModelBuilder::new(13)
            .input("a", data_type::FLOAT, &[D::N(2), D::N(3)])
            .input("b", data_type::FLOAT, &dims)
            .node(op, "the_node", &["a", "b"], &["y"], attrs)
            .output("y")
            .encode()
    };
    let text = pack_error(&two("Mod", &[2, 3], vec![]));
    assert!(
        text.contains("the_node") && text.contains("fmod=1"),
        "{text}"
    );
    pack(
        &two("Mod", &[2, 3], vec![attr_int("fmod", 1)]),
        &PackOptions::default(),
    )
    .unwrap();
    let text = pack_error(&two("PRelu", &[4, 2, 3], vec![]));
    assert!(text.contains("slope must broadcast"), "{text}");
    pack(&two("PRelu", &[3], vec![]), &PackOptions::default()).unwrap();
}

/// Sum, Mean, Max and Min of three inputs with broadcasting, against direct arithmetic.
#[test]
fn variadic_ops_chain_with_broadcasting() {
    let a = [1.0f32, -2.0, 3.0, 4.0, 5.0, -6.0];
    let b = [0.5f32, 10.0, -1.0];
    let c = [2.0f32];
    let inputs = [floats(&[2, 3], &a), floats(&[3], &b), floats(&[1], &c)];
    for op in ["Sum", "Mean", "Max", "Min"] {
        let onnx = ModelBuilder::new(13)
            .input("a", data_type::FLOAT, &[D::N(2), D::N(3)])
            .input("b", data_type::FLOAT, &[D::N(3)])
            .input("c", data_type::FLOAT, &[D::N(1)])
            .node(op, "v", &["a", "b", "c"], &["y"], vec![])
            .output("y")
            .encode();
        let y = run(&onnx, &inputs);
        for (i, got) in y.iter().enumerate() {
            let (x, z, w) = (a[i], b[i % 3], c[0]);
            let want = match op {
                "Sum" => x + z + w,
                "Mean" => (x + z + w) / 3.0,
                "Max" => x.max(z).max(w),
                _ => x.min(z).min(w),
            };
            assert!((got - want).abs() < 1e-6, "{op} {i}: {got} vs {want}");
        }
    }
}

fn floats(shape: &[usize], values: &[f32]) -> NpyArray {
    NpyArray {
        dtype: ferrite_hal::DType::F32,
        shape: shape.to_vec(),
        bytes: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    }
}

fn run(onnx: &[u8], inputs: &[NpyArray]) -> Vec<f32> {
    let packed = pack(onnx, &PackOptions::default()).unwrap();
    let bytes = AlignedBytes::from(&packed.bytes[..]);
    let model = Model::load(bytes.as_bytes()).unwrap();
    let out = run_cpu(&model, inputs).unwrap();
    out[0]
        .bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// The composed normalisations and rearrangements refuse bad attributes by name.
#[test]
fn composed_ops_check_their_attributes() {
    let four = [1, 4, 2, 2];
    let text = pack_error(&one_op("LpNormalization", vec![attr_int("p", 3)], &four));
    assert!(text.contains("the_node") && text.contains("p 3"), "{text}");
    let text = pack_error(&one_op(
        "DepthToSpace",
        vec![attr_int("blocksize", 0)],
        &four,
    ));
    assert!(text.contains("blocksize 0"), "{text}");
    let attrs = vec![attr_int("blocksize", 2), attr_string("mode", "XYZ")];
    let text = pack_error(&one_op("DepthToSpace", attrs, &four));
    assert!(text.contains("mode 'XYZ'"), "{text}");
    let text = pack_error(&one_op(
        "SpaceToDepth",
        vec![attr_int("blocksize", 3)],
        &four,
    ));
    assert!(text.contains("not a multiple of blocksize 3"), "{text}");
    let onnx = ModelBuilder::new(21)
        .input("x", data_type::FLOAT, &[D::N(1), D::N(4), D::N(2)])
        .init_f32("s", &[4], &[1.0; 4])
        .init_f32("b", &[4], &[0.0; 4])
        .node(
            "GroupNormalization",
            "the_node",
            &["x", "s", "b"],
            &["y"],
            vec![attr_int("num_groups", 3)],
        )
        .output("y")
        .encode();
    let text = pack_error(&onnx);
    assert!(text.contains("num_groups 3 does not divide"), "{text}");
}

/// Logic reads bool, Where's condition is bool: anything else is one error naming the node.
#[test]
fn bool_ops_check_their_types() {
    let text = pack_error(&one_op("Not", vec![], &[2, 3]));
    assert!(
        text.contains("the_node") && text.contains("bool only"),
        "{text}"
    );
    let onnx = ModelBuilder::new(13)
        .input("a", data_type::FLOAT, &[D::N(2)])
        .input("b", data_type::FLOAT, &[D::N(2)])
        .node("And", "the_node", &["a", "b"], &["y"], vec![])
        .output("y")
        .encode();
    assert!(pack_error(&onnx).contains("bool only"));
    let onnx = ModelBuilder::new(13)
        .input("c", data_type::FLOAT, &[D::N(2)])
        .input("x", data_type::FLOAT, &[D::N(2)])
        .node("Where", "the_node", &["c", "x", "x"], &["y"], vec![])
        .output("y")
        .encode();
    let text = pack_error(&onnx);
    assert!(text.contains("condition is float32, not bool"), "{text}");
}

/// Greater → Where on floats, broadcast: a run-time mask, against direct arithmetic.
#[test]
fn a_comparison_masks_a_tensor_at_run_time() {
    let onnx = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(2), D::N(3)])
        .input("t", data_type::FLOAT, &[D::N(3)])
        .init_f32("zero", &[], &[0.0])
        .node("Greater", "gt", &["x", "t"], &["mask"], vec![])
        .node("Where", "where", &["mask", "x", "zero"], &["y"], vec![])
        .output("y")
        .encode();
    let x = [1.0f32, -2.0, 3.0, 4.0, f32::NAN, -6.0];
    let t = [0.5f32, -3.0, 5.0];
    let y = run(&onnx, &[floats(&[2, 3], &x), floats(&[3], &t)]);
    let want: Vec<f32> = (0..6)
        .map(|i| if x[i] > t[i % 3] { x[i] } else { 0.0 })
        .collect();
    assert_eq!(y, want, "NaN compares false");
}

/// Trilu keeps a triangle of each matrix (here of a [2, 3, 4] batch, lower with k = 1).
#[test]
fn trilu_keeps_a_triangle_of_each_matrix() {
    let onnx = ModelBuilder::new(14)
        .input("x", data_type::FLOAT, &[D::N(2), D::N(3), D::N(4)])
        .init(ferrite_tools::compile::onnx::proto::TensorProto {
            name: "k".into(),
            dims: vec![],
            data_type: data_type::INT64,
            int64_data: vec![1],
            ..Default::default()
        })
        .node(
            "Trilu",
            "t",
            &["x", "k"],
            &["y"],
            vec![attr_int("upper", 0)],
        )
        .output("y")
        .encode();
    let x: Vec<f32> = (1..=24).map(|v| v as f32).collect();
    let y = run(&onnx, &[floats(&[2, 3, 4], &x)]);
    for (n, (&got, &v)) in y.iter().zip(&x).enumerate() {
        let (i, j) = ((n / 4) % 3, n % 4);
        let want = if j as i64 - i as i64 <= 1 { v } else { 0.0 };
        assert_eq!(got, want, "element {n}");
    }
    let text = pack_error(&one_op("Trilu", vec![], &[4]));
    assert!(text.contains("rank 2 or more"), "{text}");
}

/// Packs and runs `onnx` on the CPU, returning the first output or the run's error text.
fn run_raw(onnx: &[u8], inputs: &[NpyArray]) -> Result<NpyArray, String> {
    let packed = pack(onnx, &PackOptions::default()).map_err(|e| e.to_string())?;
    let bytes = AlignedBytes::from(&packed.bytes[..]);
    let model = Model::load(bytes.as_bytes()).map_err(|e| e.to_string())?;
    let mut out = run_cpu(&model, inputs).map_err(|e| e.to_string())?;
    Ok(out.remove(0))
}

fn array<T: Copy>(
    dtype: ferrite_hal::DType,
    shape: &[usize],
    values: &[T],
    le: impl Fn(T) -> Vec<u8>,
) -> NpyArray {
    NpyArray {
        dtype,
        shape: shape.to_vec(),
        bytes: values.iter().flat_map(|&v| le(v)).collect(),
    }
}

fn two_inputs(op: &str, elem: i32, attrs: Vec<AttributeProto>) -> Vec<u8> {
    ModelBuilder::new(13)
        .input("a", elem, &[D::N(4)])
        .input("b", elem, &[D::N(4)])
        .node(op, "the_node", &["a", "b"], &["y"], attrs)
        .output("y")
        .encode()
}

/// Integer arithmetic runs on integers (wrapping, truncating, Python-style Mod); a division by
/// zero in the data is a run-time error, not a crash.
#[test]
fn integer_arithmetic_runs_on_integers() {
    use ferrite_hal::DType;
    let i16s = |v: &[i16]| array(DType::I16, &[4], v, |x| x.to_le_bytes().to_vec());
    let a = i16s(&[7, -7, 32767, -9]);
    let b = i16s(&[2, 2, 1, 4]);
    let y = run_raw(
        &two_inputs("Mod", data_type::INT16, vec![]),
        &[a.clone(), b.clone()],
    )
    .unwrap();
    assert_eq!(y.dtype, DType::I16);
    assert_eq!(y.bytes, i16s(&[1, 1, 0, 3]).bytes);
    let y = run_raw(
        &two_inputs("Add", data_type::INT16, vec![]),
        &[a.clone(), b.clone()],
    )
    .unwrap();
    assert_eq!(y.bytes, i16s(&[9, -5, -32768, -5]).bytes);
    let y = run_raw(
        &two_inputs("Div", data_type::INT16, vec![]),
        &[a.clone(), b],
    )
    .unwrap();
    assert_eq!(y.bytes, i16s(&[3, -3, 32767, -2]).bytes);
    let zero = i16s(&[1, 0, 1, 1]);
    let err = run_raw(&two_inputs("Div", data_type::INT16, vec![]), &[a, zero]).unwrap_err();
    assert!(err.contains("division by zero"), "{err}");
    let u64s = |v: &[u64]| array(DType::U64, &[4], v, |x| x.to_le_bytes().to_vec());
    let shift = vec![attr_string("direction", "LEFT")];
    let y = run_raw(
        &two_inputs("BitShift", data_type::UINT64, shift),
        &[u64s(&[1, 3, u64::MAX, 5]), u64s(&[63, 2, 1, 64])],
    )
    .unwrap();
    assert_eq!(y.bytes, u64s(&[1 << 63, 12, u64::MAX - 1, 0]).bytes);
    let text = pack_error(&two_inputs(
        "BitShift",
        data_type::FLOAT,
        vec![attr_string("direction", "LEFT")],
    ));
    assert!(text.contains("integers"), "{text}");
}

/// A float64 model computes in f32 behind conversions at its boundary: inputs and outputs
/// keep their declared type; a cast to float16 rounds to its precision.
#[test]
fn interface_floats_convert_at_the_boundary() {
    use ferrite_hal::DType;
    let onnx = ModelBuilder::new(13)
        .input("a", data_type::DOUBLE, &[D::N(4)])
        .input("b", data_type::DOUBLE, &[D::N(4)])
        .node("Mul", "mul", &["a", "b"], &["p"], vec![])
        .node(
            "Cast",
            "half",
            &["p"],
            &["y"],
            vec![attr_int("to", data_type::FLOAT16 as i64)],
        )
        .output("y")
        .encode();
    let f64s = |v: &[f64]| array(DType::F64, &[4], v, |x| x.to_le_bytes().to_vec());
    let y = run_raw(
        &onnx,
        &[f64s(&[1.5, -2.0, 0.1, 1e5]), f64s(&[2.0, 3.0, 3.0, 1e5])],
    )
    .unwrap();
    assert_eq!(y.dtype, DType::F16);
    let got: Vec<f32> = y
        .bytes
        .chunks_exact(2)
        .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
        .collect();
    // 0.3 rounds to float16's 0.2999…; 1e10 overflows float16 to infinity.
    assert_eq!(
        got,
        [3.0, -6.0, half::f16::from_f64(0.3).to_f32(), f32::INFINITY]
    );
}

/// Resize: a 2× linear upsample (align_corners) and a nearest downsample against hand
/// values; bad attributes and non-constant scales are refused by name.
#[test]
fn resize_tables_match_hand_values() {
    let resize = |attrs: Vec<AttributeProto>, scales: &[f32]| {
        ModelBuilder::new(13)
            .input("x", data_type::FLOAT, &[D::N(1), D::N(1), D::N(2), D::N(2)])
            .init_f32("roi", &[0], &[])
            .init_f32("scales", &[4], scales)
            .node("Resize", "the_node", &["x", "roi", "scales"], &["y"], attrs)
            .output("y")
            .encode()
    };
    let x = floats(&[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let linear = vec![
        attr_string("mode", "linear"),
        attr_string("coordinate_transformation_mode", "align_corners"),
    ];
    let y = run(
        &resize(linear, &[1.0, 1.0, 1.5, 1.5]),
        std::slice::from_ref(&x),
    );
    assert_eq!(y, [1.0, 1.5, 2.0, 2.0, 2.5, 3.0, 3.0, 3.5, 4.0]);
    let y = run(
        &resize(vec![], &[1.0, 1.0, 0.5, 0.5]),
        std::slice::from_ref(&x),
    );
    // half_pixel, round_prefer_floor: source (0 + 0.5) / 0.5 - 0.5 = 0.5 → index 0.
    assert_eq!(y, [1.0]);
    let text = pack_error(&resize(
        vec![attr_string("mode", "quadratic")],
        &[1.0, 1.0, 2.0, 2.0],
    ));
    assert!(
        text.contains("the_node") && text.contains("quadratic"),
        "{text}"
    );
    let text = pack_error(&resize(vec![], &[1.0, 1.0, -2.0, 2.0]));
    assert!(text.contains("not positive"), "{text}");
    let dynamic = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(1), D::N(1), D::N(2), D::N(2)])
        .input("scales", data_type::FLOAT, &[D::N(4)])
        .node("Resize", "the_node", &["x", "", "scales"], &["y"], vec![])
        .output("y")
        .encode();
    let text = pack_error(&dynamic);
    assert!(text.contains("scales must be a constant"), "{text}");
}

/// Run-time indices are checked by the kernels (an error naming the index, no panic); Tile,
/// TopK and CumSum give hand-computed results; bad constants are refused at pack time.
#[test]
fn indexing_ops_check_their_indices() {
    use ferrite_hal::DType;
    let gather = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(2), D::N(2)])
        .input("i", data_type::INT64, &[D::N(2), D::N(2)])
        .node(
            "GatherElements",
            "the_node",
            &["x", "i"],
            &["y"],
            vec![attr_int("axis", 1)],
        )
        .output("y")
        .encode();
    let x = floats(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let i64s = |v: &[i64]| array(DType::I64, &[2, 2], v, |x| x.to_le_bytes().to_vec());
    let y = run_raw(&gather, &[x.clone(), i64s(&[1, 0, -1, 0])]).unwrap();
    assert_eq!(y.bytes, floats(&[2, 2], &[2.0, 1.0, 4.0, 3.0]).bytes);
    let err = run_raw(&gather, &[x.clone(), i64s(&[0, 2, 0, 0])]).unwrap_err();
    assert!(err.contains("index 2 is out of range"), "{err}");

    let tile = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(2), D::N(2)])
        .init_i64("r", &[2], &[1, 2])
        .node("Tile", "tile", &["x", "r"], &["y"], vec![])
        .output("y")
        .encode();
    let y = run(&tile, std::slice::from_ref(&x));
    assert_eq!(y, [1.0, 2.0, 1.0, 2.0, 3.0, 4.0, 3.0, 4.0]);

    let top = |k: i64| {
        ModelBuilder::new(13)
            .input("x", data_type::FLOAT, &[D::N(2), D::N(2)])
            .init_i64("k", &[1], &[k])
            .node(
                "TopK",
                "the_node",
                &["x", "k"],
                &["v", "i"],
                vec![attr_int("axis", 0)],
            )
            .output("v")
            .output("i")
            .encode()
    };
    let y = run(&top(1), std::slice::from_ref(&x));
    assert_eq!(y, [3.0, 4.0]);
    let text = pack_error(&top(3));
    assert!(text.contains("the_node") && text.contains("k 3"), "{text}");

    let cumsum = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(2), D::N(2)])
        .init_i64("a", &[], &[1])
        .node(
            "CumSum",
            "c",
            &["x", "a"],
            &["y"],
            vec![attr_int("reverse", 1)],
        )
        .output("y")
        .encode();
    assert_eq!(run(&cumsum, &[x]), [3.0, 2.0, 7.0, 4.0]);
}

/// A 1×1 depthwise convolution (a per-channel scale) plans the scratch its kernel uses: it
/// used to reach the masked depthwise kernel with none and panic.
#[test]
fn one_by_one_depthwise_convolution_runs() {
    let onnx = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(2), D::N(4), D::N(8)])
        .init_f32("w", &[4, 1, 1], &[2.0, -1.0, 0.5, 3.0])
        .node("Conv", "c", &["x", "w"], &["y"], vec![attr_int("group", 4)])
        .output("y")
        .encode();
    let values: Vec<f32> = (0..64).map(|i| i as f32).collect();
    let y = run(&onnx, &[floats(&[2, 4, 8], &values)]);
    let scale = [2.0, -1.0, 0.5, 3.0];
    let want: Vec<f32> = (0..64).map(|i| i as f32 * scale[(i / 8) % 4]).collect();
    assert_eq!(y, want);
}

/// Einsum: a matrix product in explicit and implicit form, an outer product with `...`, and
/// diagonals (a repeated subscript), with a trace.
#[test]
fn einsum_contracts_like_numpy() {
    let two = |eq: &str, sa: &[i64], sb: &[i64]| {
        let da: Vec<D> = sa.iter().map(|&d| D::N(d)).collect();
        let db: Vec<D> = sb.iter().map(|&d| D::N(d)).collect();
        ModelBuilder::new(13)
            .input("a", data_type::FLOAT, &da)
            .input("b", data_type::FLOAT, &db)
            .node(
                "Einsum",
                "the_node",
                &["a", "b"],
                &["y"],
                vec![attr_string("equation", eq)],
            )
            .output("y")
            .encode()
    };
    let a = floats(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let b = floats(&[3, 2], &[1.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
    let product = [4.0, 5.0, 10.0, 11.0];
    assert_eq!(
        run(&two("ij,jk->ik", &[2, 3], &[3, 2]), &[a.clone(), b.clone()]),
        product
    );
    assert_eq!(
        run(&two("ij, jk", &[2, 3], &[3, 2]), &[a.clone(), b.clone()]),
        product
    );
    // (A·B)ᵀ through the output order.
    assert_eq!(
        run(&two("ij,jk->ki", &[2, 3], &[3, 2]), &[a.clone(), b]),
        [4.0, 10.0, 5.0, 11.0]
    );
    let u = floats(&[2], &[1.0, 2.0]);
    let v = floats(&[1, 3], &[1.0, 10.0, 100.0]);
    assert_eq!(
        run(&two("i,...j->i...j", &[2], &[1, 3]), &[u, v]),
        [1.0, 10.0, 100.0, 2.0, 20.0, 200.0]
    );
    let square: Vec<f32> = (1..=9).map(|v| v as f32).collect();
    let a = floats(&[3, 3], &square);
    let ones = floats(&[3, 2], &[1.0; 6]);
    // y_i = a_ii · Σ_jk b_jk: the diagonal [1, 5, 9] times 6.
    assert_eq!(
        run(
            &two("ii,jk->i", &[3, 3], &[3, 2]),
            &[a.clone(), ones.clone()]
        ),
        [6.0, 30.0, 54.0]
    );
    // The trace times Σ b: (1 + 5 + 9) · 6.
    assert_eq!(run(&two("ii,jk->", &[3, 3], &[3, 2]), &[a, ones]), [90.0]);
    // Repeated axes that are not adjacent: y_ki = x_iki = 7i + 3k (x counts 0..18 row-major).
    let batch: Vec<f32> = (0..18).map(|v| v as f32).collect();
    let x = floats(&[3, 2, 3], &batch);
    let w = floats(&[1], &[1.0]);
    assert_eq!(
        run(&two("iki,j->ki", &[3, 2, 3], &[1]), &[x, w]),
        [0.0, 7.0, 14.0, 3.0, 10.0, 17.0]
    );
}

/// A branch of an If: `y = x op c` for a constant `c`.
fn branch(op: &str, c: f32, out: &str) -> AttributeProto {
    use ferrite_tools::compile::onnx::proto::{GraphProto, NodeProto, TensorProto, ValueInfoProto};
    let constant = TensorProto {
        name: format!("{out}_c"),
        dims: vec![1],
        data_type: data_type::FLOAT,
        float_data: vec![c],
        ..Default::default()
    };
    let g = GraphProto {
        name: out.into(),
        node: vec![NodeProto {
            input: vec!["x".into(), format!("{out}_c")],
            output: vec![out.into()],
            name: format!("{out}_node"),
            op_type: op.into(),
            ..Default::default()
        }],
        initializer: vec![constant],
        output: vec![ValueInfoProto {
            name: out.into(),
            r#type: None,
        }],
        ..Default::default()
    };
    AttributeProto {
        name: if out == "then_y" {
            "then_branch"
        } else {
            "else_branch"
        }
        .into(),
        r#type: 5,
        g: Some(Box::new(g)),
        ..Default::default()
    }
}

/// If: a constant condition inlines one branch; a run-time one runs both and picks with Where.
/// NonZero folds on constants and is refused, with its reason, on run-time data.
#[test]
fn if_and_data_dependent_ops() {
    use ferrite_hal::DType;
    let model = |cond_const: Option<bool>| {
        let b = ModelBuilder::new(13).input("x", data_type::FLOAT, &[D::N(2)]);
        let b = match cond_const {
            Some(c) => b.init(ferrite_tools::compile::onnx::proto::TensorProto {
                name: "cond".into(),
                dims: vec![],
                data_type: data_type::BOOL,
                int32_data: vec![c as i32],
                ..Default::default()
            }),
            None => b.input("cond", data_type::BOOL, &[]),
        };
        b.node(
            "If",
            "if",
            &["cond"],
            &["y"],
            vec![branch("Add", 10.0, "then_y"), branch("Mul", 3.0, "else_y")],
        )
        .output("y")
        .encode()
    };
    let x = floats(&[2], &[1.0, 2.0]);
    assert_eq!(
        run(&model(Some(true)), std::slice::from_ref(&x)),
        [11.0, 12.0]
    );
    let packed = pack(&model(Some(false)), &PackOptions::default()).unwrap();
    assert!(
        !packed.report.ops.contains_key("Add"),
        "{:?}",
        packed.report.ops
    );
    assert_eq!(
        run(&model(Some(false)), std::slice::from_ref(&x)),
        [3.0, 6.0]
    );
    let flag = |c: bool| array(DType::Bool, &[], &[c as u8], |v| vec![v]);
    for (c, want) in [(true, [11.0, 12.0]), (false, [3.0, 6.0])] {
        let y = run(&model(None), &[x.clone(), flag(c)]);
        assert_eq!(y, want);
    }
    let non_zero = |constant: bool| {
        let b = ModelBuilder::new(13);
        let b = if constant {
            b.init_f32("x", &[2, 2], &[0.0, 1.0, 2.0, 0.0])
        } else {
            b.input("x", data_type::FLOAT, &[D::N(2), D::N(2)])
        };
        b.node("NonZero", "nz", &["x"], &["y"], vec![])
            .output("y")
            .encode()
    };
    let packed = pack(&non_zero(true), &PackOptions::default()).unwrap();
    assert!(packed.report.ops.is_empty() || !packed.report.ops.contains_key("NonZero"));
    let text = pack_error(&non_zero(false));
    assert!(
        text.contains("nz") && text.contains("data-dependent"),
        "{text}"
    );
}

/// Pad with negative pads crops (a Slice, then the positive pads), in every mode; wrap pads
/// repeat the input however wide the border (numpy's `wrap`).
#[test]
fn pad_crops_with_negative_pads_and_wraps_any_width() {
    let pad = |mode: &str, pads: &[i64]| {
        ModelBuilder::new(18)
            .input("x", data_type::FLOAT, &[D::N(2), D::N(4)])
            .init_i64("pads", &[4], pads)
            .node(
                "Pad",
                "pad",
                &["x", "pads"],
                &["y"],
                vec![attr_string("mode", mode)],
            )
            .output("y")
            .encode()
    };
    let run = |onnx: Vec<u8>| -> (Vec<usize>, Vec<f32>) {
        let packed = pack(&onnx, &PackOptions::default()).unwrap();
        let bytes = AlignedBytes::from(&packed.bytes[..]);
        let model = Model::load(bytes.as_bytes()).unwrap();
        let x: Vec<f32> = (0..8).map(|v| v as f32).collect();
        let input = NpyArray {
            dtype: ferrite_hal::DType::F32,
            shape: vec![2, 4],
            bytes: x.iter().flat_map(|v| v.to_le_bytes()).collect(),
        };
        let out = run_cpu(&model, &[input]).unwrap();
        let y = out[0]
            .bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        (out[0].shape.clone(), y)
    };
    // x = [[0 1 2 3] [4 5 6 7]]; pads [row begin, col begin, row end, col end].
    // Crop one column at the start, pad one at the end with zeros.
    let (shape, y) = run(pad("constant", &[0, -1, 0, 1]));
    assert_eq!(shape, [2, 4]);
    assert_eq!(y, [1.0, 2.0, 3.0, 0.0, 5.0, 6.0, 7.0, 0.0]);
    // Crop the first row, edge-pad two columns at the start.
    let (shape, y) = run(pad("edge", &[-1, 2, 0, 0]));
    assert_eq!(shape, [1, 6]);
    assert_eq!(y, [4.0, 4.0, 4.0, 5.0, 6.0, 7.0]);
    // Wrap five columns at the start (wider than the axis) and one at the end.
    let (shape, y) = run(pad("wrap", &[0, 5, 0, 1]));
    assert_eq!(shape, [2, 10]);
    assert_eq!(
        y,
        [
            3.0, 0.0, 1.0, 2.0, 3.0, 0.0, 1.0, 2.0, 3.0, 0.0, 7.0, 4.0, 5.0, 6.0, 7.0, 4.0, 5.0,
            6.0, 7.0, 4.0
        ]
    );
    let text = pack_error(&pad("constant", &[0, -3, 0, -2]));
    assert!(
        text.contains("pads crop 5 elements from an axis of 4"),
        "{text}"
    );
}
