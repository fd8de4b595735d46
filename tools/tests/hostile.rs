//! Hostile-but-decodable ONNX graphs: every supported op with random shapes and extreme attribute
//! and constant-input values (negative, zero, huge). `pack` must return `Ok` or a typed error —
//! never panic, never overflow.

use ferrite_tools::compile::onnx::build::{
    attr_float, attr_int, attr_ints, attr_string, ModelBuilder, D,
};
use ferrite_tools::compile::onnx::proto::{data_type, AttributeProto};
use ferrite_tools::compile::pack::{pack, PackOptions};

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
    /// An integer that is usually plausible and sometimes extreme.
    fn int(&mut self) -> i64 {
        self.pick(&[
            -1,
            0,
            1,
            2,
            3,
            1,
            2,
            -2,
            5,
            i64::MAX,
            i64::MIN,
            -9_000_000_000,
            4_000_000_000,
            1 << 40,
        ])
    }
    fn ints(&mut self, max_len: u64) -> Vec<i64> {
        (0..self.below(max_len + 1)).map(|_| self.int()).collect()
    }
    fn dims(&mut self) -> Vec<i64> {
        (0..self.below(6))
            .map(|_| self.pick(&[0, 1, 1, 2, 3, 4, 7]))
            .collect()
    }
}

const OPS: &[&str] = &[
    "Conv",
    "ConvTranspose",
    "MaxPool",
    "AveragePool",
    "Gemm",
    "MatMul",
    "Add",
    "Mul",
    "Reshape",
    "Slice",
    "Pad",
    "Split",
    "Squeeze",
    "Unsqueeze",
    "Transpose",
    "Concat",
    "Gather",
    "ReduceMean",
    "ReduceSum",
    "ReduceMax",
    "Softmax",
    "Flatten",
    "ConstantOfShape",
    "Range",
    "Expand",
    "Clip",
    "BatchNormalization",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "Shape",
    "Cast",
    "Equal",
    "Where",
    "Dropout",
    "LeakyRelu",
    "HardSigmoid",
    "MatMulInteger",
    "ConvInteger",
    "DynamicQuantizeLinear",
    "Exp",
    "Log",
    "Erf",
    "Gelu",
    "Celu",
    "Selu",
    "Mish",
    "ReduceMin",
    "ReduceProd",
    "ReduceL2",
    "ReduceLogSumExp",
    "LogSoftmax",
    "Hardmax",
    "ArgMax",
    "ArgMin",
    "Pow",
    "PRelu",
    "Mod",
    "Max",
    "Min",
    "Sum",
    "Mean",
    "LayerNormalization",
    "InstanceNormalization",
    "GroupNormalization",
    "LpNormalization",
    "DepthToSpace",
    "SpaceToDepth",
    "Less",
    "Greater",
    "And",
    "Not",
    "IsNaN",
    "IsInf",
    "Trilu",
];

fn random_attrs(rng: &mut Rng) -> Vec<AttributeProto> {
    let mut attrs = Vec::new();
    for name in [
        "kernel_shape",
        "strides",
        "dilations",
        "pads",
        "output_padding",
        "output_shape",
        "perm",
        "axes",
        "split",
        "starts",
        "ends",
    ] {
        if rng.below(3) == 0 {
            attrs.push(attr_ints(name, &rng.ints(5)));
        }
    }
    for name in [
        "group",
        "axis",
        "transA",
        "transB",
        "keepdims",
        "ceil_mode",
        "count_include_pad",
        "allowzero",
        "to",
        "num_outputs",
        "noop_with_empty_axes",
        "start",
        "end",
    ] {
        if rng.below(3) == 0 {
            attrs.push(attr_int(name, rng.int()));
        }
    }
    if rng.below(4) == 0 {
        attrs.push(attr_string(
            "auto_pad",
            rng.pick(&["SAME_UPPER", "SAME_LOWER", "VALID", "NOTSET", "bogus"]),
        ));
    }
    if rng.below(4) == 0 {
        attrs.push(attr_string(
            "mode",
            rng.pick(&["constant", "reflect", "edge", "wrap"]),
        ));
    }
    if rng.below(4) == 0 {
        attrs.push(attr_float(
            "alpha",
            rng.pick(&[0.0, 1.0, f32::NAN, f32::INFINITY, -3.0]),
        ));
    }
    attrs
}

#[test]
fn hostile_graphs_never_panic() {
    let seed = std::env::var("FERRITE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x9e37_79b9_7f4a_7c15u64);
    let mut rng = Rng(seed | 1);
    let mut ok = 0;
    let mut panics = Vec::new();
    for case in 0..20000 {
        let op = rng.pick(OPS);
        let opset = rng.pick(&[7i64, 9, 11, 13, 17, 18, 21]);
        let mut b = ModelBuilder::new(opset);
        let mut inputs = Vec::new();
        let conv_like = matches!(op, "Conv" | "ConvTranspose" | "MaxPool" | "AveragePool");
        if conv_like && rng.below(2) == 0 {
            // Plausible image and weight shapes, so the extreme attributes reach the window code.
            let (c, h, w) = (
                rng.pick(&[1i64, 2, 4]),
                rng.pick(&[1i64, 3, 5, 8]),
                rng.pick(&[1i64, 3, 5, 8]),
            );
            // A third of them 3-D (a depth axis first), which lowers onto the 2-D kernels.
            let depth = (rng.below(3) == 0).then(|| rng.pick(&[1i64, 2, 4]));
            let x_dims: Vec<D> = [1, c]
                .into_iter()
                .chain(depth)
                .chain([h, w])
                .map(D::N)
                .collect();
            b = b.input("x", data_type::FLOAT, &x_dims);
            inputs.push("x".to_string());
            let (kh, kw) = (rng.pick(&[1i64, 2, 3]), rng.pick(&[1i64, 2, 3]));
            let kd = depth.map(|_| rng.pick(&[1i64, 2, 3]));
            let oc = rng.pick(&[1i64, 2, 4]);
            let w_dims: Vec<i64> = [oc, c].into_iter().chain(kd).chain([kh, kw]).collect();
            let n = w_dims.iter().product::<i64>() as usize;
            b = b.init_f32("w", &w_dims, &vec![0.5; n]);
            inputs.push("w".to_string());
        }
        let n_inputs = if inputs.is_empty() {
            1 + rng.below(4)
        } else {
            0
        };
        for i in 0..n_inputs {
            let name = format!("in{i}");
            let dims = rng.dims();
            match rng.below(3) {
                0 => {
                    let n: i64 = dims.iter().product::<i64>().max(0);
                    let values: Vec<i64> = (0..n.min(64)).map(|_| rng.int()).collect();
                    if values.len() as i64 == n {
                        b = b.init_i64(&name, &dims, &values);
                    } else {
                        b = b.init_i64(&name, &[values.len() as i64], &values);
                    }
                }
                1 => {
                    let n: i64 = dims.iter().product::<i64>().max(0);
                    let values: Vec<f32> = (0..n.min(64)).map(|k| k as f32 * 0.5 - 1.0).collect();
                    if values.len() as i64 == n {
                        b = b.init_f32(&name, &dims, &values);
                    } else {
                        b = b.init_f32(&name, &[values.len() as i64], &values);
                    }
                }
                _ => {
                    let dims: Vec<D> = dims.iter().map(|&d| D::N(d)).collect();
                    b = b.input(&name, data_type::FLOAT, &dims);
                }
            }
            inputs.push(name);
        }
        let n_outputs = if op == "Split" { 1 + rng.below(3) } else { 1 };
        let outputs: Vec<String> = (0..n_outputs).map(|i| format!("out{i}")).collect();
        let input_refs: Vec<&str> = inputs.iter().map(String::as_str).collect();
        let output_refs: Vec<&str> = outputs.iter().map(String::as_str).collect();
        b = b.node(op, "n", &input_refs, &output_refs, random_attrs(&mut rng));
        for o in &outputs {
            b = b.output(o);
        }
        let bytes = b.encode();
        let result = std::panic::catch_unwind(|| {
            let packed = pack(&bytes, &PackOptions::default())?;
            // What packs must also run (or fail with a typed error) without panicking.
            let aligned = ferrite_tools::aligned::AlignedBytes::from(&packed.bytes[..]);
            if let Ok(model) = ferrite_core::Model::load(aligned.as_bytes()) {
                let inputs = ferrite_tools::host::runner::synthetic_inputs(&model);
                let _ = ferrite_tools::host::runner::run_cpu(&model, &inputs);
            }
            Ok::<_, ferrite_tools::PackError>(())
        });
        match result {
            Ok(Ok(_)) => ok += 1,
            Ok(Err(e)) => assert!(
                !e.to_string().contains('\n'),
                "case {case} ({op}): multi-line error {e}"
            ),
            Err(_) => panics.push(format!("case {case}: {op} (opset {opset})")),
        }
    }
    assert!(
        panics.is_empty(),
        "pack panicked on {} hostile graphs: {}",
        panics.len(),
        panics.join("; ")
    );
    // Some random graphs are valid; the rest must have been refused with typed errors.
    assert!(
        ok > 100,
        "only {ok} random graphs packed; the generator is too hostile to test much"
    );
}

#[test]
fn corrupted_model_bytes_never_panic() {
    let original = ferrite_tools::compile::onnx::build::tiny_mlp();
    let mut rng = Rng(42);
    for _ in 0..3000 {
        let mut bytes = original.clone();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(bytes.len() as u64) as usize;
            bytes[at] = rng.next() as u8;
        }
        if rng.below(4) == 0 {
            let len = rng.below(bytes.len() as u64) as usize;
            bytes.truncate(len);
        }
        let result = std::panic::catch_unwind(|| pack(&bytes, &PackOptions::default()));
        assert!(result.is_ok(), "pack panicked on corrupted bytes {bytes:?}");
    }
}
