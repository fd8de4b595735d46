//! The conformance suites on the real firmware under QEMU's emulated Cortex-M4F (`qemu-m4`); one
//! model each on the Cortex-M0 (`qemu-m0`, microbit) and Cortex-M7 (`qemu-m7`, mps2-an500)
//! builds; and the firmware's answers to bad input: the same typed errors as on the host, a
//! model whose arena exceeds the board refused with both sizes, a hung firmware stopped by the
//! timeout, a model other than the one an M0 firmware embeds refused.
//!
//! Needs `qemu-system-arm` and the firmware (`scripts/build-firmware.sh`); without them the
//! tests print `SKIPPED: ...`, and CI (`FERRITE_REQUIRE_QEMU_M4=1`) fails instead.

use ferrite_core::Model;
use ferrite_tests::compare::relative_error;
use ferrite_tests::{models, node_tests, unless_missing, workspace_root, Backend, Cpu, QemuM4};
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::npy::NpyArray;
use ferrite_tools::onnx::build::{tiny_mlp, ModelBuilder, D};
use ferrite_tools::onnx::proto::data_type;
use ferrite_tools::pack::{pack, PackOptions};
use ferrite_tools::qemu::{self, Board};

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
            .flat_map(|i| ((i % 7) as f32 * 0.25 - 0.5).to_le_bytes())
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
fn the_cortex_m0_and_m7_firmwares_match_the_host() {
    unless_missing::<QemuM4>("qemu-m0/m7", || {
        for board in [Board::M0, Board::M7] {
            if let Some(why) = board.unavailable() {
                panic!("{}: {why}", board.device_name());
            }
        }
        let digits = digits();
        let m0 = matches_the_host(Board::M0, &digits);
        let m7 = matches_the_host(Board::M7, &digits);
        let m4 = matches_the_host(Board::M4, &digits);
        // The M7 runs the same Thumb-2 + FPU code as the M4 (two builds of the same source, so
        // within a few instructions); the M0 emulates floats in software.
        assert!(
            m7[0].abs_diff(m4[0]) * 100 < m4[0],
            "M7 {m7:?} vs M4 {m4:?}"
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
fn int8_models_match_onnxruntime_on_qemu_m4() {
    unless_missing::<QemuM4>(
        "qemu-m4 int8 models",
        || match ferrite_tests::quantized::run_all::<QemuM4>() {
            Ok(results) => assert_eq!(results.len(), 6, "three models, QDQ and QOperator"),
            Err(e) => panic!("{e}"),
        },
    );
}

#[test]
fn quantized_by_ferrite_tracks_float_on_qemu_m4() {
    use ferrite_tests::ptq::{run_all, FLOAT_MODELS};
    unless_missing::<QemuM4>("qemu-m4 --quantize int8 models", || {
        match run_all::<QemuM4>(&FLOAT_MODELS, ferrite_tools::ptq::Method::MinMax) {
            Ok(results) => assert_eq!(results.len(), FLOAT_MODELS.len()),
            Err(e) => panic!("{e}"),
        }
    });
}

/// x → Quantize → Dequantize → Gemm or 1×1 Conv (int8 per-channel weights, int32 bias) →
/// Quantize → Dequantize: everything but the integer op is elementwise and exact, so any
/// difference between devices would come from its kernel. K = 67 input channels exercise the DSP
/// kernels' tails (and the convolution's 35 positions its last partial chunk).
fn int8_model(conv: bool) -> Vec<u8> {
    use ferrite_tools::onnx::build::attr_int;
    use ferrite_tools::onnx::proto::TensorProto;
    let (k, n) = (67usize, 10usize);
    let ints = |name: &str, dtype: i32, dims: &[i64], values: Vec<i32>| TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: dtype,
        int32_data: values,
        ..Default::default()
    };
    let weights: Vec<i32> = (0..n * k)
        .map(|i| ((i * 37 + 11) % 255) as i32 - 127)
        .collect();
    let bias: Vec<i32> = (0..n).map(|i| i as i32 * 97 - 400).collect();
    let w_scale: Vec<f32> = (0..n).map(|i| 0.002 + 0.0003 * i as f32).collect();
    let b_scale: Vec<f32> = w_scale.iter().map(|s| s * 0.05).collect();
    let (x_dims, w_dims, op, attrs) = if conv {
        (
            vec![D::N(1), D::N(k as i64), D::N(5), D::N(7)],
            vec![n as i64, k as i64, 1, 1],
            "Conv",
            vec![],
        )
    } else {
        (
            vec![D::N(1), D::N(k as i64)],
            vec![n as i64, k as i64],
            "Gemm",
            vec![attr_int("transB", 1)],
        )
    };
    ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &x_dims)
        .init_f32("x_scale", &[], &[0.05])
        .init(ints("x_zero", data_type::INT8, &[], vec![-3]))
        .init(ints("w_q", data_type::INT8, &w_dims, weights))
        .init_f32("w_scale", &[n as i64], &w_scale)
        .init(ints("w_zero", data_type::INT8, &[n as i64], vec![0; n]))
        .init(ints("b_q", data_type::INT32, &[n as i64], bias))
        .init_f32("b_scale", &[n as i64], &b_scale)
        .init(ints("b_zero", data_type::INT32, &[n as i64], vec![0; n]))
        .init_f32("y_scale", &[], &[0.04])
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
        .node(op, "op", &["xf", "w", "b"], &["yf"], attrs)
        .node(
            "QuantizeLinear",
            "qy",
            &["yf", "y_scale", "y_zero"],
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
    unless_missing::<QemuM4>("DSP bit-exactness", || {
        for (conv, op) in [(false, "QGemm"), (true, "QConv")] {
            let packed = pack(&int8_model(conv), &PackOptions::default()).expect("pack");
            assert!(
                packed.report.ops.iter().any(|(k, _)| k == op),
                "the op became an integer op: {:?}",
                packed.report.ops
            );
            let bytes = AlignedBytes::from(&packed.bytes[..]);
            let model = Model::load(bytes.as_bytes()).expect("load");
            let input = f32_input(&model);
            let host = Cpu::run(&model, std::slice::from_ref(&input)).expect("cpu");
            for board in [Board::M4, Board::M7] {
                let inputs = std::slice::from_ref(&input);
                let run = qemu::run(board, bytes.as_bytes(), &model, inputs, 1).expect("qemu");
                let name = board.device_name();
                assert_eq!(run.outputs[0].bytes, host[0].bytes, "{op} on {name}");
            }
        }
    });
}
