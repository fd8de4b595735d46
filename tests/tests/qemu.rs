//! The conformance suites on the real firmware under QEMU's emulated Cortex-M4F (`qemu-m4`); one
//! model each on the Cortex-M0 (`qemu-m0`, microbit), Cortex-M7 (`qemu-m7`, mps2-an500) and
//! Cortex-M33 (`qemu-m33`, mps2-an505) builds, and the DSP kernels' bit-exactness on all three
//! cores that have them; and the firmware's answers to bad input: the same typed errors as on the host, a
//! model whose arena exceeds the board refused with both sizes, a hung firmware stopped by the
//! timeout, a model other than the one an M0 firmware embeds refused.
//!
//! Needs `qemu-system-arm` and the firmware (`scripts/build-firmware.sh`); without them the
//! tests print `SKIPPED: ...`, and CI (`FERRITE_REQUIRE_QEMU_M4=1`) fails instead.

use ferrite_core::Model;
use ferrite_tests::compare::relative_error;
use ferrite_tests::{models, node_tests, unless_missing, workspace_root, Backend, Cpu, QemuM4};
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::compile::onnx::build::{tiny_mlp, ModelBuilder, D};
use ferrite_tools::compile::onnx::proto::data_type;
use ferrite_tools::compile::pack::{pack, PackOptions};
use ferrite_tools::host::npy::NpyArray;
use ferrite_tools::host::qemu::{self, Board};

fn floats(a: &NpyArray) -> Vec<f32> {
    ferrite_tests::compare::floats(a)
}

fn packed(onnx: &[u8]) -> AlignedBytes {
    AlignedBytes::from(&pack(onnx, &PackOptions::default()).expect("pack").bytes[..])
}

fn f32_input(model: &Model<'_>) -> NpyArray {
    let info = model.input(0).expect("an input");
    NpyArray {
        dtype: ferrite_hal::DType::F32,
        shape: info.desc.shape.dims().to_vec(),
        bytes: (0..info.desc.elements())
            .flat_map(|i| (((i * 13) % 101) as f32 * 0.07 - 3.5).to_le_bytes())
            .collect(),
    }
}

#[test]
fn models_match_onnxruntime_and_cpu_on_qemu_m4() {
    unless_missing::<QemuM4>("qemu-m4 model suite", || {
        match models::run_all::<QemuM4>() {
            Ok(results) => assert!(!results.is_empty(), "no test models were found"),
            Err(e) => panic!("{e}"),
        }
    });
}

#[test]
fn onnx_node_tests_on_qemu_m4() {
    unless_missing::<QemuM4>("qemu-m4 node tests", || {
        let expectations = workspace_root().join("tests/expectations/qemu-m4-node.txt");
        match node_tests::run_suite::<QemuM4>(&expectations) {
            Ok(summary) => println!("{summary}"),
            Err(e) => panic!("{e}"),
        }
    });
}

#[test]
fn instruction_counts_are_exact_and_repeatable() {
    unless_missing::<QemuM4>("qemu-m4 instruction counts", || {
        let bytes = packed(&tiny_mlp());
        let model = Model::load(bytes.as_bytes()).expect("load");
        let input = f32_input(&model);
        let run = qemu::run(
            Board::M4,
            bytes.as_bytes(),
            &model,
            std::slice::from_ref(&input),
            3,
        )
        .expect("qemu");
        assert_eq!(run.instructions.len(), 3);
        assert!(run.instructions[0] > 100, "{:?}", run.instructions);
        assert!(
            run.instructions.windows(2).all(|w| w[0] == w[1]),
            "{:?}",
            run.instructions
        );
        assert!(run.inference_stack_bytes > 0 && run.stack_bytes >= run.inference_stack_bytes);
        assert!(run.firmware.flash_bytes > 0);
        let cpu = Cpu::run(&model, &[input]).expect("cpu");
        let err = relative_error(&floats(&run.outputs[0]), &floats(&cpu[0]));
        assert!(err <= models::TOLERANCE, "{err:e}");
    });
}

#[test]
fn a_profiled_run_counts_every_step() {
    unless_missing::<QemuM4>("qemu-m4 per-step profile", || {
        use ferrite_hal::Plan;
        let bytes = packed(&tiny_mlp());
        let model = Model::load(bytes.as_bytes()).expect("load");
        let input = std::slice::from_ref(&f32_input(&model)).to_vec();
        let plain = qemu::run(Board::M4, bytes.as_bytes(), &model, &input, 1).expect("qemu");
        let profiled =
            qemu::run_profiled(Board::M4, bytes.as_bytes(), &model, &input).expect("profiled");
        assert!(plain.step_instructions.is_empty());
        assert_eq!(profiled.step_instructions.len(), model.len());
        assert!(profiled.step_instructions.iter().all(|&n| n > 0));
        // The steps are the inference, less the session's own work, plus a few marker
        // instructions each.
        let steps: u64 = profiled.step_instructions.iter().sum();
        let total = plain.instructions[0];
        assert!(
            steps < total && steps * 10 > total * 5,
            "{steps} of {total}"
        );
        assert!(
            profiled.instructions[0] > total,
            "the markers add instructions"
        );
        assert_eq!(profiled.outputs[0].bytes, plain.outputs[0].bytes);
    });
}

#[test]
fn a_corrupt_model_gets_the_hosts_typed_error_from_the_firmware() {
    unless_missing::<QemuM4>("qemu-m4 corrupt model", || {
        let bytes = packed(&tiny_mlp());
        let model = Model::load(bytes.as_bytes()).expect("load");
        let input = f32_input(&model);
        // Flip a weight byte: the CRC no longer matches.
        let mut corrupt = bytes.as_bytes().to_vec();
        let at = corrupt.len() - 8;
        corrupt[at] ^= 0x55;
        let copy = AlignedBytes::from(&corrupt[..]);
        let host = Model::load(copy.as_bytes())
            .expect_err("the host refuses it")
            .to_string();
        match qemu::run(Board::M4, copy.as_bytes(), &model, &[input], 1) {
            Err(e) => {
                let text = e.to_string();
                assert!(
                    text.contains(&host),
                    "firmware said '{text}', host said '{host}'"
                );
                assert!(!text.contains('\n'));
            }
            Ok(_) => panic!("the firmware accepted a corrupt model"),
        }
    });
}

#[test]
fn a_model_larger_than_the_board_is_refused_with_both_sizes() {
    unless_missing::<QemuM4>("qemu-m4 arena limit", || {
        // 2.5 M floats in and out: a 10 MB arena against the board's 8 MB.
        let onnx = ModelBuilder::new(13)
            .input("x", data_type::FLOAT, &[D::N(1), D::N(2_500_000)])
            .node("Relu", "r", &["x"], &["y"], vec![])
            .output("y")
            .encode();
        let bytes = packed(&onnx);
        let model = Model::load(bytes.as_bytes()).expect("load");
        let input = NpyArray {
            dtype: ferrite_hal::DType::F32,
            shape: vec![1, 2_500_000],
            bytes: vec![0; 10_000_000],
        };
        match qemu::run(Board::M4, bytes.as_bytes(), &model, &[input], 1) {
            Err(e) => {
                let text = e.to_string();
                assert!(text.contains(&model.arena_bytes().to_string()), "{text}");
                assert!(text.contains("this board has"), "{text}");
            }
            Ok(_) => panic!("a 10 MB arena fit an 8 MB board"),
        }
    });
}

#[test]
fn a_hung_firmware_is_stopped_by_the_timeout() {
    unless_missing::<QemuM4>("qemu-m4 timeout", || {
        let bytes = packed(&tiny_mlp());
        let model = Model::load(bytes.as_bytes()).expect("load");
        let input = f32_input(&model);
        let limit = std::time::Duration::ZERO;
        match qemu::run_with_timeout(Board::M4, bytes.as_bytes(), &model, &[input], 1, limit) {
            Err(e) => assert!(e.to_string().contains("did not finish within 0 s"), "{e}"),
            Ok(_) => panic!("QEMU finished within zero seconds"),
        }
    });
}

/// The digits demo model, packed as the M0 firmware's build script packs it.
fn digits() -> AlignedBytes {
    let onnx = std::fs::read(workspace_root().join("demo/digits.onnx")).expect("demo model");
    packed(&onnx)
}

/// Runs `bytes` on `board` and on the CPU device and requires outputs within 1e-4 (relative to
/// the largest): the same portable kernels as the host's portable build, but the host may run
/// its AVX2/AVX-512 build, which sums in another order.
fn matches_the_host(board: Board, bytes: &AlignedBytes) -> Vec<u64> {
    let model = Model::load(bytes.as_bytes()).expect("load");
    let input = f32_input(&model);
    let run = qemu::run(
        board,
        bytes.as_bytes(),
        &model,
        std::slice::from_ref(&input),
        2,
    )
    .unwrap_or_else(|e| panic!("{}: {e}", board.device_name()));
    let cpu = Cpu::run(&model, &[input]).expect("cpu");
    let err = relative_error(&floats(&run.outputs[0]), &floats(&cpu[0]));
    assert!(err <= models::TOLERANCE, "{}: {err:e}", board.device_name());
    assert_eq!(run.instructions[0], run.instructions[1]);
    run.instructions
}

#[test]
fn the_cortex_m0_m7_and_m33_firmwares_match_the_host() {
    unless_missing::<QemuM4>("qemu-m0/m7/m33", || {
        for board in [Board::M0, Board::M7, Board::M33] {
            if let Some(why) = board.unavailable() {
                panic!("{}: {why}", board.device_name());
            }
        }
        let digits = digits();
        let m0 = matches_the_host(Board::M0, &digits);
        let m7 = matches_the_host(Board::M7, &digits);
        let m4 = matches_the_host(Board::M4, &digits);
        let m33 = matches_the_host(Board::M33, &digits);
        // The M7 runs the same Thumb-2 + FPU code as the M4 (two builds of the same source, so
        // within a few instructions), the M33 an ARMv8-M build of it, scheduled for that core
        // (13 % more instructions on the digits MLP); the M0 emulates floats in software.
        assert!(
            m7[0].abs_diff(m4[0]) * 100 < m4[0],
            "M7 {m7:?} vs M4 {m4:?}"
        );
        assert!(
            m33[0].abs_diff(m4[0]) * 4 < m4[0],
            "M33 {m33:?} vs M4 {m4:?}"
        );
        assert!(m0[0] > 5 * m4[0], "M0 {m0:?} vs M4 {m4:?}");
        matches_the_host(Board::M7, &packed(&tiny_mlp()));
    });
}

#[test]
fn the_m0_firmware_refuses_a_model_other_than_its_own() {
    unless_missing::<QemuM4>("qemu-m0 other model", || {
        let bytes = packed(&tiny_mlp());
        let model = Model::load(bytes.as_bytes()).expect("load");
        let input = f32_input(&model);
        match qemu::run(Board::M0, bytes.as_bytes(), &model, &[input], 1) {
            Err(e) => assert!(e.to_string().contains("embeds a different model"), "{e}"),
            Ok(_) => panic!("the M0 firmware ran a model it does not embed"),
        }
    });
}

/// Builds the per-model firmware (`boards/template` around `bytes`) and runs it next to the
/// every-kernel firmware: the same outputs, bit for bit, from a smaller firmware.
fn per_model_matches_every_kernel(bytes: &AlignedBytes, input: NpyArray) -> qemu::QemuRun {
    let model = Model::load(bytes.as_bytes()).expect("load");
    let inputs = [input];
    let elf = ferrite_tools::host::firmware::model_firmware(bytes.as_bytes(), &model)
        .unwrap_or_else(|e| panic!("{e}"));
    let own = qemu::run_firmware(Board::M4, &elf, bytes.as_bytes(), &model, &inputs, 2)
        .unwrap_or_else(|e| panic!("per-model firmware: {e}"));
    let every = qemu::run(Board::M4, bytes.as_bytes(), &model, &inputs, 1).expect("qemu-m4");
    assert_eq!(own.outputs, every.outputs);
    assert_eq!(own.instructions[0], own.instructions[1]);
    assert!(
        own.firmware.flash_bytes < every.firmware.flash_bytes,
        "{} vs {}",
        own.firmware.flash_bytes,
        every.firmware.flash_bytes
    );
    own
}

#[test]
fn a_per_model_firmware_runs_its_model_as_the_every_kernel_one_does() {
    unless_missing::<QemuM4>("qemu-m4 per-model firmware", || {
        let digits = digits();
        let model = Model::load(digits.as_bytes()).expect("load");
        let input = f32_input(&model);
        per_model_matches_every_kernel(&digits, input.clone());
        // An int8 model: the DSP kernels, selected per model as well.
        let onnx = std::fs::read(ferrite_tests::test_models_dir().join("ds_cnn_qdq.onnx"))
            .expect("ds_cnn_qdq.onnx (tests/models/generate.py)");
        let int8 = packed(&onnx);
        let int8_model = Model::load(int8.as_bytes()).expect("load");
        per_model_matches_every_kernel(&int8, f32_input(&int8_model));
        // It runs its own model only.
        let elf = ferrite_tools::host::firmware::model_firmware(digits.as_bytes(), &model)
            .expect("built");
        let other = packed(&tiny_mlp());
        let other_model = Model::load(other.as_bytes()).expect("load");
        let err = qemu::run_firmware(
            Board::M4,
            &elf,
            other.as_bytes(),
            &other_model,
            &[f32_input(&other_model)],
            1,
        )
        .expect_err("the per-model firmware ran another model");
        assert!(
            err.to_string().contains("embeds a different model"),
            "{err}"
        );
    });
}

#[test]
fn no_firmware_links_a_heap() {
    unless_missing::<QemuM4>("firmware allocator check", || {
        for board in Board::ALL {
            let linked = qemu::links_allocator(board).expect("firmware ELF");
            assert!(!linked, "{} links a global allocator", board.device_name());
        }
    });
}

#[test]
fn sklearn_models_match_onnxruntime_on_qemu_m4() {
    unless_missing::<QemuM4>(
        "qemu-m4 scikit-learn models",
        || match ferrite_tests::sklearn::run_all::<QemuM4>() {
            Ok(n) => assert_eq!(
                n, 7,
                "two linear pipelines, a regressor, a forest, boosting, an RBF SVC, k-NN"
            ),
            Err(e) => panic!("{e}"),
        },
    );
}

#[test]
fn int8_models_match_onnxruntime_on_qemu_m4() {
    unless_missing::<QemuM4>(
        "qemu-m4 int8 models",
        || {
            match ferrite_tests::quantized::run_all::<QemuM4>() {
            Ok(results) => assert_eq!(
                results.len(),
                16,
                "three models as QDQ, QOperator, 16-bit QDQ and dynamic; the four MLPerf Tiny models"
            ),
            Err(e) => panic!("{e}"),
        }
        },
    );
}

#[test]
fn each_int8_layer_matches_the_definition_on_qemu_m4() {
    unless_missing::<QemuM4>("qemu-m4 int8 layer cuts", || {
        match ferrite_tests::quantized::run_layers::<QemuM4>() {
            Ok(results) => assert!(results.len() >= 90, "{} layer cuts", results.len()),
            Err(e) => panic!("{e}"),
        }
    });
}

#[test]
fn quantized_by_ferrite_tracks_float_on_qemu_m4() {
    use ferrite_tests::ptq::{run_all, FLOAT_MODELS};
    unless_missing::<QemuM4>("qemu-m4 --quantize int8 models", || {
        match run_all::<QemuM4>(&FLOAT_MODELS, ferrite_tools::compile::ptq::Method::MinMax) {
            Ok(results) => assert_eq!(results.len(), FLOAT_MODELS.len()),
            Err(e) => panic!("{e}"),
        }
    });
}

/// The integer op of a bit-exactness case: a Gemm, or a convolution.
#[derive(Clone, Copy, Debug)]
enum IntegerOp {
    /// `[1, K] × [K, N]`.
    Gemm { k: usize },
    /// NCHW convolution.
    Conv {
        channels: usize,
        size: [usize; 2],
        kernel: [usize; 2],
        stride: usize,
        pads: [usize; 4],
        dilation: usize,
        group: usize,
    },
}

/// What an [`int8_model`] varies beyond its op: the output scale, and two cases the kernels
/// take other paths for.
#[derive(Clone, Copy)]
enum Output {
    /// Per-channel weight scales, this output scale.
    Scale(f32),
    /// Power-of-two scales whose requantization multiplier is exactly 2^-3: one accumulator in
    /// eight is a tie, rounded to even.
    Ties,
    /// A Relu before the output's Quantize: a clamp narrower than the output type.
    Relu(f32),
    /// One weight scale for every output (per tensor, as TFLite's fully connected layers have
    /// it), this output scale: one requantization pair.
    PerTensor(f32),
}

/// x → Quantize → Dequantize → Gemm or Conv (int8 per-channel weights, int32 bias) [→ Relu] →
/// Quantize → Dequantize with `n` outputs: everything but the integer op is elementwise and
/// exact, so any difference between devices would come from its kernel.
fn int8_model(op: IntegerOp, n: usize, output: Output) -> Vec<u8> {
    use ferrite_tools::compile::onnx::build::{attr_int, attr_ints};
    use ferrite_tools::compile::onnx::proto::TensorProto;
    let ints = |name: &str, dtype: i32, dims: &[i64], values: Vec<i32>| TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: dtype,
        int32_data: values,
        ..Default::default()
    };
    let i = |v: usize| v as i64;
    let (x_dims, w_dims, name, attrs) = match op {
        IntegerOp::Gemm { k } => (
            vec![D::N(1), D::N(i(k))],
            vec![i(n), i(k)],
            "Gemm",
            vec![attr_int("transB", 1)],
        ),
        IntegerOp::Conv {
            channels,
            size,
            kernel,
            stride,
            pads,
            dilation,
            group,
        } => (
            vec![
                D::N(1),
                D::N(i(channels)),
                D::N(i(size[0])),
                D::N(i(size[1])),
            ],
            vec![i(n), i(channels / group), i(kernel[0]), i(kernel[1])],
            "Conv",
            vec![
                attr_ints("kernel_shape", &[i(kernel[0]), i(kernel[1])]),
                attr_ints("strides", &[i(stride), i(stride)]),
                attr_ints("pads", &pads.map(i)),
                attr_ints("dilations", &[i(dilation), i(dilation)]),
                attr_int("group", i(group)),
            ],
        ),
    };
    let count: i64 = w_dims.iter().product();
    let weights: Vec<i32> = (0..count as usize)
        .map(|i| ((i * 37 + 11) % 255) as i32 - 127)
        .collect();
    let bias: Vec<i32> = (0..n).map(|i| i as i32 * 97 - 400).collect();
    // Ties: 2^-3 · 2^-6 / 2^-6 = 2^-3.
    let (x_scale, y_scale) = match output {
        Output::Scale(s) | Output::Relu(s) | Output::PerTensor(s) => (0.05, s),
        Output::Ties => (0.125, 0.015625),
    };
    let w_scale: Vec<f32> = match output {
        Output::Ties => vec![0.015625; n],
        Output::PerTensor(_) => vec![0.004],
        _ => (0..n).map(|i| 0.002 + 0.0003 * i as f32).collect(),
    };
    let b_scale: Vec<f32> = (0..n)
        .map(|c| w_scale[c % w_scale.len()] * x_scale)
        .collect();
    // Per tensor: scalar weight scale and zero point (no axis).
    let w_params: &[i64] = if w_scale.len() == 1 { &[] } else { &[i(n)] };
    let relu = matches!(output, Output::Relu(_));
    let builder = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &x_dims)
        .init_f32("x_scale", &[], &[x_scale])
        .init(ints("x_zero", data_type::INT8, &[], vec![-3]))
        .init(ints("w_q", data_type::INT8, &w_dims, weights))
        .init_f32("w_scale", w_params, &w_scale)
        .init(ints(
            "w_zero",
            data_type::INT8,
            w_params,
            vec![0; w_scale.len()],
        ))
        .init(ints("b_q", data_type::INT32, &[i(n)], bias))
        .init_f32("b_scale", &[i(n)], &b_scale)
        .init(ints("b_zero", data_type::INT32, &[i(n)], vec![0; n]))
        .init_f32("y_scale", &[], &[y_scale])
        .init(ints("y_zero", data_type::INT8, &[], vec![5]))
        .node(
            "QuantizeLinear",
            "qx",
            &["x", "x_scale", "x_zero"],
            &["xq"],
            vec![],
        )
        .node(
            "DequantizeLinear",
            "dqx",
            &["xq", "x_scale", "x_zero"],
            &["xf"],
            vec![],
        )
        .node(
            "DequantizeLinear",
            "dqw",
            &["w_q", "w_scale", "w_zero"],
            &["w"],
            vec![attr_int("axis", 0)],
        )
        .node(
            "DequantizeLinear",
            "dqb",
            &["b_q", "b_scale", "b_zero"],
            &["b"],
            vec![attr_int("axis", 0)],
        )
        .node(name, "op", &["xf", "w", "b"], &["yf"], attrs);
    let (builder, y_float) = if relu {
        (builder.node("Relu", "relu", &["yf"], &["yr"], vec![]), "yr")
    } else {
        (builder, "yf")
    };
    builder
        .node(
            "QuantizeLinear",
            "qy",
            &[y_float, "y_scale", "y_zero"],
            &["yq"],
            vec![],
        )
        .node(
            "DequantizeLinear",
            "dqy",
            &["yq", "y_scale", "y_zero"],
            &["y"],
            vec![],
        )
        .output("y")
        .encode()
}

#[test]
fn the_dsp_integer_kernels_are_bit_exact_with_the_portable_ones() {
    let conv = |channels, size, kernel, stride, pads, dilation, group| IntegerOp::Conv {
        channels,
        size,
        kernel,
        stride,
        pads,
        dilation,
        group,
    };
    // (case, op, outputs, output): K = 67 and 45 leave tails after groups of four; 35 and 99
    // positions leave partial blocks; odd widths leave a lone last output in the depthwise pair
    // loop; planes up to 32 bytes wide run as one flattened run, wider rows are split. An
    // output scale of 0.04 makes requantization multipliers of about 2^-9 (the kernels'
    // high-word form); 0.0003 makes them about 1/3 and more (right shifts of 32 and less: the
    // general form). Ties and a Relu's narrower clamp take their own paths.
    let cases = [
        ("gemm", IntegerOp::Gemm { k: 67 }, 10, Output::Scale(0.04)),
        (
            "pointwise",
            conv(67, [5, 7], [1, 1], 1, [0; 4], 1, 1),
            10,
            Output::Scale(0.04),
        ),
        (
            "3x3 padded",
            conv(5, [9, 11], [3, 3], 1, [1; 4], 1, 1),
            6,
            Output::Scale(0.04),
        ),
        (
            "strided dilated",
            conv(3, [12, 13], [3, 3], 2, [1, 0, 2, 1], 2, 1),
            5,
            Output::Scale(0.04),
        ),
        (
            "10x4 stride 2",
            conv(1, [49, 10], [10, 4], 2, [4, 1, 5, 1], 1, 1),
            8,
            Output::Scale(0.04),
        ),
        (
            "grouped",
            conv(6, [7, 8], [3, 3], 1, [1; 4], 1, 2),
            4,
            Output::Scale(0.04),
        ),
        (
            "depthwise",
            conv(10, [7, 9], [3, 3], 1, [1; 4], 1, 10),
            10,
            Output::Scale(0.04),
        ),
        (
            "depthwise s2",
            conv(6, [9, 9], [3, 3], 2, [1; 4], 1, 6),
            6,
            Output::Scale(0.04),
        ),
        (
            "depthwise 5x5 x2",
            conv(4, [8, 6], [5, 5], 1, [2; 4], 1, 4),
            8,
            Output::Scale(0.04),
        ),
        (
            "depthwise dilated",
            conv(3, [9, 9], [3, 3], 1, [2; 4], 2, 3),
            3,
            Output::Scale(0.04),
        ),
        (
            "pointwise, large scale",
            conv(67, [5, 7], [1, 1], 1, [0; 4], 1, 1),
            10,
            Output::Scale(0.0003),
        ),
        (
            "depthwise, large scale",
            conv(10, [7, 9], [3, 3], 1, [1; 4], 1, 10),
            10,
            Output::Scale(0.0003),
        ),
        (
            "gemm, large scale",
            IntegerOp::Gemm { k: 67 },
            10,
            Output::Scale(0.0003),
        ),
        (
            "pointwise, ties",
            conv(67, [5, 7], [1, 1], 1, [0; 4], 1, 1),
            10,
            Output::Ties,
        ),
        (
            "depthwise, ties",
            conv(10, [7, 9], [3, 3], 1, [1; 4], 1, 10),
            10,
            Output::Ties,
        ),
        ("gemm, ties", IntegerOp::Gemm { k: 67 }, 10, Output::Ties),
        // Chunks of 64 activations and groups of 32 columns: three chunks, a second group.
        (
            "gemm 150 x 37",
            IntegerOp::Gemm { k: 150 },
            37,
            Output::Scale(0.01),
        ),
        (
            "pointwise, relu",
            conv(67, [5, 7], [1, 1], 1, [0; 4], 1, 1),
            10,
            Output::Relu(0.04),
        ),
        (
            "depthwise, relu",
            conv(10, [7, 9], [3, 3], 1, [1; 4], 1, 10),
            10,
            Output::Relu(0.04),
        ),
        (
            "pointwise 64, ties",
            conv(64, [5, 5], [1, 1], 1, [0; 4], 1, 1),
            12,
            Output::Ties,
        ),
        // N a multiple of four and K of eight: the blocked weight layout. Two groups and two
        // chunks; K = 8·8 + 4 and K = 4 (row-major: K not a multiple of 8), with ties and under a
        // Relu's clamp; the MLPerf AD model's first layer, large scale.
        (
            "gemm blocked 128 x 40",
            IntegerOp::Gemm { k: 128 },
            40,
            Output::Scale(0.01),
        ),
        (
            "gemm 68 x 12, ties",
            IntegerOp::Gemm { k: 68 },
            12,
            Output::Ties,
        ),
        (
            "gemm 4 x 8, relu",
            IntegerOp::Gemm { k: 4 },
            8,
            Output::Relu(0.04),
        ),
        (
            "gemm blocked 640 x 128, large scale",
            IntegerOp::Gemm { k: 640 },
            128,
            Output::Scale(0.0003),
        ),
        // One requantization pair (per-tensor weights): its constants kept in registers; two
        // groups of 64 columns and a part of a third.
        (
            "gemm blocked 128 x 136, per tensor",
            IntegerOp::Gemm { k: 128 },
            136,
            Output::PerTensor(0.02),
        ),
        (
            "gemm blocked 64 x 12, per tensor, small scale",
            IntegerOp::Gemm { k: 64 },
            12,
            Output::PerTensor(0.003),
        ),
    ];
    unless_missing::<QemuM4>("DSP bit-exactness", || {
        for (case, op, n, output) in cases {
            let model = int8_model(op, n, output);
            let packed = pack(&model, &PackOptions::default()).expect("pack");
            let integer = if matches!(op, IntegerOp::Gemm { .. }) {
                "QGemm"
            } else {
                "QConv"
            };
            assert!(
                packed.report.ops.contains_key(integer),
                "{case}: the op became an integer op: {:?}",
                packed.report.ops
            );
            if case.contains("blocked") {
                let bytes = AlignedBytes::from(&packed.bytes[..]);
                let model = Model::load(bytes.as_bytes()).expect("load");
                let qgemm = (0..ferrite_hal::Plan::len(&model))
                    .filter_map(|i| ferrite_hal::Plan::step(&model, i))
                    .find(|s| matches!(s.op, ferrite_hal::Op::QGemm(_)))
                    .expect("a QGemm step");
                let weights = qgemm.inputs.get(1).expect("QGemm B");
                assert_eq!(weights.shape.rank(), 4, "{case}: the weights are blocked");
                let pairs = qgemm.inputs.get(3).expect("QGemm requantization");
                let per_tensor = pairs.shape.dims() == [1, 2];
                assert_eq!(per_tensor, case.contains("per tensor"), "{case}: pairs");
            }
            assert!(
                !packed.report.ops.contains_key("Relu"),
                "{case}: the Relu fused into the integer op: {:?}",
                packed.report.ops
            );
            let bytes = AlignedBytes::from(&packed.bytes[..]);
            let model = Model::load(bytes.as_bytes()).expect("load");
            let input = f32_input(&model);
            let host = Cpu::run(&model, std::slice::from_ref(&input)).expect("cpu");
            for board in [Board::M4, Board::M7, Board::M33] {
                let inputs = std::slice::from_ref(&input);
                let run = qemu::run(board, bytes.as_bytes(), &model, inputs, 1).expect("qemu");
                let name = board.device_name();
                let (got, want) = (&run.outputs[0].bytes, &host[0].bytes);
                let differ = got.iter().zip(want).filter(|(a, b)| a != b).count();
                assert!(
                    got == want,
                    "{case} on {name}: {differ} of {} bytes differ",
                    want.len()
                );
            }
        }
    });
}

/// The int8 geometry families (`ferrite_tests::geometry`) on the firmware's DSP kernels; each
/// case is one QEMU run, so the budget is a quarter of the host's.
#[test]
fn every_random_int8_geometry_runs_on_qemu_m4() {
    unless_missing::<QemuM4>("qemu-m4 int8 geometries", || {
        let host = ferrite_tests::geometry::Budget::from_env();
        let budget = ferrite_tests::geometry::Budget {
            cases: (host.cases / 4).max(1),
        };
        match ferrite_tests::geometry::run_integer::<QemuM4>(budget) {
            Ok(coverage) => println!("qemu-m4: {coverage}"),
            Err(e) => panic!("{e}"),
        }
    });
}

#[test]
fn every_model_is_deterministic_on_qemu_m4() {
    unless_missing::<QemuM4>("qemu-m4 determinism", || {
        // QEMU runs one core in order (and counts each run's instructions, compared too):
        // only what a run leaves in the arena can differ.
        let checked = ferrite_tests::determinism::run_all::<QemuM4>(
            ferrite_tests::determinism::EMULATOR_RUNS,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(checked >= 21, "{checked} models");
    });
}
