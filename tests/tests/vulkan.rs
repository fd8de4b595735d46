//! The conformance suites instantiated for the Vulkan device (Mesa's lavapipe in CI), and the
//! device's own faults: no loader, no device, an arena beyond its limits, a fence timeout, bad
//! run-time data, and zero validation-layer messages.
//!
//! Without a Vulkan device the tests print `SKIPPED: ...` (counted by `scripts/test.sh`); CI sets
//! `FERRITE_REQUIRE_VULKAN=1` so a missing driver fails instead.

use ferrite_core::{Model, Session};
use ferrite_hal::{Error as _, ErrorKind};
use ferrite_tests::fixtures::{
    byte_movement_model, f32_array, floats, gather_model, i64_array, model_with_arena_over, packed,
};
use ferrite_tests::{models, node_tests, unless_missing, workspace_root, Backend, Cpu, Vulkan};
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::compile::pack::pack;
use ferrite_tools::host::npy::NpyArray;
use ferrite_vulkan::{Options, VulkanDevice, VulkanError};
use std::time::Duration;

/// Within 1e-4 of the CPU, relative to the largest CPU magnitude (the model suite's measure).
fn assert_close(gpu: &[f32], cpu: &[f32]) {
    assert_eq!(gpu.len(), cpu.len());
    let err = ferrite_tests::compare::relative_error(gpu, cpu);
    assert!(
        err <= models::TOLERANCE,
        "relative error {err:e} against the cpu device"
    );
}

#[test]
fn models_match_onnxruntime_and_cpu_on_vulkan() {
    unless_missing::<Vulkan>("vulkan model suite", || match models::run_all::<Vulkan>() {
        Ok(results) => assert!(!results.is_empty(), "no test models were found"),
        Err(e) => panic!("{e}"),
    });
}

#[test]
fn onnx_node_tests_on_vulkan() {
    unless_missing::<Vulkan>("vulkan node tests", || {
        let expectations = workspace_root().join("tests/expectations/vulkan-node.txt");
        match node_tests::run_suite::<Vulkan>(&expectations) {
            Ok(summary) => println!("{summary}"),
            Err(e) => panic!("{e}"),
        }
    });
}

#[test]
fn a_missing_loader_is_a_typed_error() {
    let options = Options {
        loader: Some("/nonexistent/libvulkan.so.1".into()),
        ..Options::default()
    };
    match VulkanDevice::open(&options) {
        Err(e @ VulkanError::NoLoader(_)) => {
            assert_eq!(e.kind(), ErrorKind::Unsupported);
            assert!(!e.to_string().contains('\n'));
        }
        Err(e) => panic!("expected NoLoader, got {e}"),
        Ok(_) => panic!("a loader that does not exist opened"),
    }
}

#[test]
fn a_missing_device_index_is_a_typed_error() {
    unless_missing::<Vulkan>("missing device index", || {
        let options = Options {
            index: 999,
            ..Options::default()
        };
        match VulkanDevice::open(&options) {
            Err(e @ VulkanError::NoDevice { requested: 999, .. }) => {
                assert_eq!(e.kind(), ErrorKind::Unsupported)
            }
            Err(e) => panic!("expected NoDevice, got {e}"),
            Ok(_) => panic!("device #999 opened"),
        }
    });
}

#[test]
fn an_arena_beyond_the_device_limit_is_refused_at_session_creation() {
    unless_missing::<Vulkan>("arena limit", || {
        let device = VulkanDevice::new().expect("device");
        let limit = ferrite_hal::Device::capabilities(&device).max_arena_bytes;
        let Some(onnx) = model_with_arena_over(limit) else {
            ferrite_tests::report_skip(&format!(
                "arena limit: this device's ({limit} B) is past the largest arena a .frt describes"
            ));
            return;
        };
        let bytes = packed(&onnx);
        let model = Model::load(bytes.as_bytes()).expect("load");
        assert!(model.arena_bytes() > limit);
        // The limit is checked before the (small) host arena.
        let mut arena = AlignedBytes::zeroed(64);
        match Session::new(&model, device, arena.as_mut_bytes()) {
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::OutOfMemory, "{e}");
                let text = e.to_string();
                assert!(text.contains(&limit.to_string()), "{text}");
            }
            Ok(_) => panic!("a session over the device limit was created"),
        }
    });
}

/// The over-limit model for limits real devices have: lavapipe's 128 MiB, 1 and 2 GiB, and
/// NVIDIA's 4 GiB - 1, past what a `.frt` describes (checked on every machine: no device needed).
#[test]
fn models_over_a_device_arena_limit_pack_where_the_format_allows() {
    for limit in [128 << 20, (1 << 30) - 1, 1 << 30, 2 << 30] {
        let onnx = model_with_arena_over(limit).expect("a model over the limit");
        let bytes = packed(&onnx);
        let model = Model::load(bytes.as_bytes()).expect("load");
        assert!(
            model.arena_bytes() > limit,
            "{limit}: {}",
            model.arena_bytes()
        );
    }
    assert!(model_with_arena_over(u32::MAX as usize).is_none());
}

#[test]
fn a_fence_timeout_is_reported_and_the_next_run_recovers() {
    unless_missing::<Vulkan>("fence timeout", || {
        let dir = ferrite_tests::test_models_dir();
        let (name, options) = models::manifest()
            .expect("manifest")
            .into_iter()
            .find(|(n, _)| n == "resnet8")
            .expect("resnet8 in the manifest");
        let onnx = std::fs::read(dir.join(format!("{name}.onnx"))).expect("model");
        let bytes = AlignedBytes::from(&pack(&onnx, &options).expect("pack").bytes[..]);
        let model = Model::load(bytes.as_bytes()).expect("load");
        let input =
            ferrite_tools::host::npy::read(&dir.join(format!("{name}.input_0.npy"))).unwrap();
        let expected = Cpu::run(&model, std::slice::from_ref(&input)).expect("cpu");

        let mut arena = ferrite_tools::host::runner::arena_for(&model);
        let device = VulkanDevice::new().expect("device");
        let mut session = Session::new(&model, device, arena.as_mut_bytes()).expect("session");
        // ResNet-8 takes milliseconds on lavapipe; a zero timeout expires before it finishes.
        session.device_mut().set_timeout(Duration::ZERO);
        session.set_input(0, &input.bytes).unwrap();
        match session.run() {
            Err(e) => assert_eq!(e.kind(), ErrorKind::Timeout, "{e}"),
            Ok(()) => panic!("a zero timeout did not expire"),
        }
        session.device_mut().set_timeout(Duration::from_secs(30));
        session.set_input(0, &input.bytes).unwrap();
        session.run().expect("the run after a timeout");
        assert_close(session.output_f32(0).unwrap(), &floats(&expected[0]));
    });
}

#[test]
fn a_gather_index_out_of_range_is_invalid_input_and_the_session_recovers() {
    unless_missing::<Vulkan>("gather index", || {
        let bytes = packed(&gather_model());
        let model = Model::load(bytes.as_bytes()).expect("load");
        let mut arena = ferrite_tools::host::runner::arena_for(&model);
        let device = VulkanDevice::new().expect("device");
        let mut session = Session::new(&model, device, arena.as_mut_bytes()).expect("session");
        for bad in [4i64, -5, i64::MAX, 1 << 32] {
            session.set_input(0, &i64_array(&[0, bad]).bytes).unwrap();
            match session.run() {
                Err(e) => assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}"),
                Ok(()) => panic!("index {bad} was accepted"),
            }
        }
        session.set_input(0, &i64_array(&[3, -4]).bytes).unwrap();
        session.run().expect("valid indices");
        assert_eq!(
            session.output_f32(0).unwrap(),
            &[9.0, 10.0, 11.0, 0.0, 1.0, 2.0]
        );
    });
}

#[test]
fn a_model_with_ops_the_device_lacks_is_refused_naming_every_one() {
    unless_missing::<Vulkan>("capabilities", || {
        // Byte-sized movement runs on the CPU but not in the Vulkan kernels (32-bit words).
        let onnx = byte_movement_model();
        let bytes = packed(&onnx);
        let model = Model::load(bytes.as_bytes()).expect("load");
        let mut arena = ferrite_tools::host::runner::arena_for(&model);
        let device = VulkanDevice::new().expect("device");
        match Session::new(&model, device, arena.as_mut_bytes()) {
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Unsupported);
                let text = e.to_string();
                assert!(text.contains("Transpose(bool)"), "{text}");
                assert!(text.contains("Concat(uint8)"), "{text}");
            }
            Ok(_) => panic!("a session with unsupported ops was created"),
        }
        // The CPU runs the same file.
        let inputs = [
            NpyArray {
                dtype: ferrite_hal::DType::Bool,
                shape: vec![2, 3],
                bytes: vec![1, 0, 1, 0, 0, 1],
            },
            NpyArray {
                dtype: ferrite_hal::DType::U8,
                shape: vec![4],
                bytes: vec![1, 2, 3, 4],
            },
        ];
        let out = Cpu::run(&model, &inputs).expect("cpu");
        assert_eq!(out[0].bytes, vec![1, 0, 0, 0, 1, 1]);
        assert_eq!(out[1].bytes, vec![1, 2, 3, 4, 1, 2, 3, 4]);
    });
}

#[test]
fn a_session_replays_with_new_inputs() {
    unless_missing::<Vulkan>("replay", || {
        let bytes = packed(&ferrite_tools::compile::onnx::build::tiny_mlp());
        let model = Model::load(bytes.as_bytes()).expect("load");
        let info = model.input(0).unwrap();
        let shape = info.desc.shape.dims().to_vec();
        let mut arena = ferrite_tools::host::runner::arena_for(&model);
        let device = VulkanDevice::new().expect("device");
        let mut session = Session::new(&model, device, arena.as_mut_bytes()).expect("session");
        let stats = session.program().stats();
        assert!(stats.dispatches >= 1 && stats.pipelines >= 1, "{stats:?}");
        for seed in 0..5 {
            let values: Vec<f32> = (0..info.desc.elements())
                .map(|i| ((i * 7 + seed * 13) % 11) as f32 / 5.0 - 1.0)
                .collect();
            let input = f32_array(&shape, &values);
            let cpu = Cpu::run(&model, std::slice::from_ref(&input)).expect("cpu");
            session.set_input(0, &input.bytes).unwrap();
            session.run().expect("run");
            assert_close(session.output_f32(0).unwrap(), &floats(&cpu[0]));
        }
    });
}

#[test]
fn the_validation_layer_reports_nothing() {
    unless_missing::<Vulkan>("validation layer", || {
        let options = Options {
            validation: true,
            ..Options::default()
        };
        let mut device = VulkanDevice::open(&options).expect("device");
        if !device.validating() {
            if std::env::var("FERRITE_REQUIRE_VULKAN").is_ok_and(|v| v == "1") {
                panic!("VK_LAYER_KHRONOS_validation is not installed (vulkan-validationlayers)");
            }
            ferrite_tests::report_skip(
                "validation layer: VK_LAYER_KHRONOS_validation is not installed",
            );
            return;
        }
        let dir = ferrite_tests::test_models_dir();
        let refused = models::expected_unsupported::<Vulkan>();
        for (name, options) in models::manifest().expect("manifest") {
            if refused.contains(&name) {
                continue;
            }
            let onnx = std::fs::read(dir.join(format!("{name}.onnx"))).expect("model");
            let bytes = AlignedBytes::from(&pack(&onnx, &options).expect("pack").bytes[..]);
            let model = Model::load(bytes.as_bytes()).expect("load");
            let input =
                ferrite_tools::host::npy::read(&dir.join(format!("{name}.input_0.npy"))).unwrap();
            for _ in 0..2 {
                ferrite_tools::host::runner::run_with(
                    &model,
                    std::slice::from_ref(&input),
                    &mut device,
                )
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            }
        }
        let bytes = packed(&gather_model());
        let model = Model::load(bytes.as_bytes()).expect("load");
        let _ = ferrite_tools::host::runner::run_with(&model, &[i64_array(&[7, 1])], &mut device);
        let log = device.validation_log();
        let messages = device.validation_messages();
        assert!(
            messages.is_empty(),
            "validation messages:\n{}",
            messages.join("\n")
        );
        // Destroying the device reports any Vulkan object a program or the device leaked.
        drop(device);
        let messages = log.messages();
        assert!(
            messages.is_empty(),
            "at destruction:\n{}",
            messages.join("\n")
        );
    });
}

#[test]
fn every_model_is_deterministic_on_vulkan() {
    unless_missing::<Vulkan>("vulkan determinism", || {
        let checked =
            ferrite_tests::determinism::run_all::<Vulkan>(ferrite_tests::determinism::RUNS)
                .unwrap_or_else(|e| panic!("{e}"));
        assert!(checked >= 6, "{checked} models");
    });
}
