//! The conformance suites on the real firmware under QEMU's emulated Cortex-M4F (`qemu-m4`),
//! and the firmware's answers to bad input: the same typed errors as on the host, a model whose
//! arena exceeds the board refused with both sizes, a hung firmware stopped by the timeout.
//!
//! Needs `qemu-system-arm` and the firmware (`scripts/build-firmware.sh`); without them the
//! tests print `SKIPPED: ...`, and CI (`FERRITE_REQUIRE_QEMU_M4=1`) fails instead.

use ferrite_core::Model;
use ferrite_tests::{models, node_tests, unless_missing, workspace_root, Backend, Cpu, QemuM4};
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::npy::NpyArray;
use ferrite_tools::onnx::build::{tiny_mlp, ModelBuilder, D};
use ferrite_tools::onnx::proto::data_type;
use ferrite_tools::pack::{pack, PackOptions};
use ferrite_tools::qemu;

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
        let run =
            qemu::run(bytes.as_bytes(), &model, std::slice::from_ref(&input), 3).expect("qemu");
        assert_eq!(run.instructions.len(), 3);
        assert!(run.instructions[0] > 100, "{:?}", run.instructions);
        assert!(
            run.instructions.windows(2).all(|w| w[0] == w[1]),
            "{:?}",
            run.instructions
        );
        assert!(run.stack_bytes > 0 && run.firmware.flash_bytes > 0);
        let cpu = Cpu::run(&model, &[input]).expect("cpu");
        assert_eq!(
            run.outputs[0].bytes, cpu[0].bytes,
            "same kernels, same f32 results"
        );
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
        match qemu::run(copy.as_bytes(), &model, &[input], 1) {
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
        match qemu::run(bytes.as_bytes(), &model, &[input], 1) {
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
        match qemu::run_with_timeout(bytes.as_bytes(), &model, &[input], 1, limit) {
            Err(e) => assert!(e.to_string().contains("did not finish within 0 s"), "{e}"),
            Ok(_) => panic!("QEMU finished within zero seconds"),
        }
    });
}
