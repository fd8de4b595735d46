//! The conformance suites instantiated for the CUDA device, twice: on the host emulator (the
//! same lowering and kernels, compiled as C++; every machine, so CI runs them) and on a real
//! NVIDIA GPU where there is one (else `SKIPPED:`; `FERRITE_REQUIRE_CUDA=1` makes that a
//! failure). Both read the same expectations (`tests/expectations/cuda-*.txt`): a GPU must pass
//! exactly what the emulator passes. The GPU tests run a third time against a fake NVIDIA
//! driver built on the emulator, so the real GPU program is exercised in CI too. Then the
//! device's own faults: bad run-time data, a host arena too small, ops it lacks, a timeout and
//! a missing device index.

use ferrite_core::{Model, Session};
use ferrite_cuda::launch::Kernel;
use ferrite_cuda::{kernels, CudaDevice, CudaError, Options};
use ferrite_hal::{Device, Error as _, ErrorKind};
use ferrite_tests::fixtures::{byte_movement_model, floats, gather_model, i64_array, packed};
use ferrite_tests::{
    models, node_tests, unless_missing, workspace_root, Backend, Cpu, Cuda, CudaEmulated,
};
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::compile::pack::pack;
use ferrite_tools::host::npy::NpyArray;
use std::time::Duration;

#[test]
fn every_kernel_is_in_its_module_and_in_the_emulator() {
    let emulated = ferrite_cuda::emulated_kernels();
    for kernel in Kernel::ALL {
        let module = kernels::MODULES
            .iter()
            .find(|m| m.name == kernel.module())
            .unwrap_or_else(|| panic!("{kernel:?}: no module {}", kernel.module()));
        assert!(
            module.entries.contains(&kernel.entry()),
            "{kernel:?} is not listed in module {}",
            module.name
        );
        assert!(
            emulated.iter().any(|e| e == kernel.entry()),
            "{kernel:?} is not emulated"
        );
    }
    let entries: usize = kernels::MODULES.iter().map(|m| m.entries.len()).sum();
    assert_eq!(
        entries,
        Kernel::ALL.len(),
        "a module entry without a Kernel"
    );
    assert_eq!(emulated.len(), Kernel::ALL.len());
}

#[test]
fn models_match_onnxruntime_and_cpu_on_the_cuda_emulator() {
    let results = models::run_all::<CudaEmulated>().unwrap_or_else(|e| panic!("{e}"));
    assert!(!results.is_empty(), "no test models were found");
}

#[test]
fn onnx_node_tests_on_the_cuda_emulator() {
    let expectations = workspace_root().join("tests/expectations/cuda-node.txt");
    match node_tests::run_suite::<CudaEmulated>(&expectations) {
        Ok(summary) => println!("{summary}"),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn models_match_onnxruntime_and_cpu_on_a_gpu() {
    unless_missing::<Cuda>("cuda model suite", || {
        let results = models::run_all::<Cuda>().unwrap_or_else(|e| panic!("{e}"));
        assert!(!results.is_empty(), "no test models were found");
    });
}

#[test]
fn onnx_node_tests_on_a_gpu() {
    unless_missing::<Cuda>("cuda node tests", || {
        let expectations = workspace_root().join("tests/expectations/cuda-node.txt");
        match node_tests::run_suite::<Cuda>(&expectations) {
            Ok(summary) => println!("{summary}"),
            Err(e) => panic!("{e}"),
        }
    });
}

/// The checks of one device that need no particular hardware.
fn a_gather_index_out_of_range_is_invalid_input_and_the_session_recovers(device: CudaDevice) {
    let bytes = packed(&gather_model());
    let model = Model::load(bytes.as_bytes()).expect("load");
    let mut arena = ferrite_tools::host::runner::arena_for(&model);
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
}

#[test]
fn emulated_gather_index_out_of_range() {
    a_gather_index_out_of_range_is_invalid_input_and_the_session_recovers(CudaDevice::emulated());
}

#[test]
fn gpu_gather_index_out_of_range() {
    unless_missing::<Cuda>("cuda gather index", || {
        a_gather_index_out_of_range_is_invalid_input_and_the_session_recovers(
            CudaDevice::new().expect("device"),
        )
    });
}

#[test]
fn a_host_arena_shorter_than_the_plan_is_refused() {
    let bytes = packed(&ferrite_tools::compile::onnx::build::tiny_mlp());
    let model = Model::load(bytes.as_bytes()).expect("load");
    let mut device = CudaDevice::emulated();
    let mut program = device.prepare(&model).expect("prepare");
    let mut short = vec![0u8; model.arena_bytes() - 1];
    match device.execute(&mut program, &model, &mut short) {
        Err(e @ CudaError::HostArena { .. }) => assert_eq!(e.kind(), ErrorKind::InvalidInput),
        other => panic!("expected HostArena, got {:?}", other.err()),
    }
}

#[test]
fn a_model_with_ops_the_device_lacks_is_refused_naming_every_one() {
    let onnx = byte_movement_model();
    let bytes = packed(&onnx);
    let model = Model::load(bytes.as_bytes()).expect("load");
    let mut arena = ferrite_tools::host::runner::arena_for(&model);
    match Session::new(&model, CudaDevice::emulated(), arena.as_mut_bytes()) {
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Unsupported);
            let text = e.to_string();
            assert!(text.contains("Transpose(bool)"), "{text}");
            assert!(text.contains("Concat(uint8)"), "{text}");
        }
        Ok(_) => panic!("a session with unsupported ops was created"),
    }
}

#[test]
fn a_session_replays_with_new_inputs() {
    let bytes = packed(&ferrite_tools::compile::onnx::build::tiny_mlp());
    let model = Model::load(bytes.as_bytes()).expect("load");
    let info = model.input(0).unwrap();
    let shape = info.desc.shape.dims().to_vec();
    let mut arena = ferrite_tools::host::runner::arena_for(&model);
    let mut session =
        Session::new(&model, CudaDevice::emulated(), arena.as_mut_bytes()).expect("session");
    for seed in 0..5 {
        let values: Vec<f32> = (0..info.desc.elements())
            .map(|i| ((i * 7 + seed * 13) % 11) as f32 / 5.0 - 1.0)
            .collect();
        let input = NpyArray {
            dtype: ferrite_hal::DType::F32,
            shape: shape.clone(),
            bytes: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        };
        let cpu = Cpu::run(&model, std::slice::from_ref(&input)).expect("cpu");
        session.set_input(0, &input.bytes).unwrap();
        session.run().expect("run");
        let err = ferrite_tests::compare::relative_error(
            session.output_f32(0).unwrap(),
            &floats(&cpu[0]),
        );
        assert!(err <= models::TOLERANCE, "relative error {err:e}");
    }
}

#[test]
fn a_missing_device_index_is_a_typed_error() {
    let options = Options {
        index: 999,
        ..Options::default()
    };
    match CudaDevice::open(&options) {
        Err(e @ (CudaError::NoDriver | CudaError::NoDevice)) => {
            assert_eq!(e.kind(), ErrorKind::Unsupported)
        }
        Err(e @ CudaError::NoSuchDevice { requested: 999, .. }) => {
            assert_eq!(e.kind(), ErrorKind::Unsupported);
            assert!(!e.to_string().contains('\n'));
        }
        Err(e) => panic!("expected NoSuchDevice, got {e}"),
        Ok(_) => panic!("device #999 opened"),
    }
}

#[test]
fn a_gpu_timeout_is_reported_and_the_next_run_recovers() {
    unless_missing::<Cuda>("cuda timeout", || {
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
        let device = CudaDevice::new().expect("device");
        let mut session = Session::new(&model, device, arena.as_mut_bytes()).expect("session");
        session.device_mut().set_timeout(Duration::ZERO);
        session.set_input(0, &input.bytes).unwrap();
        match session.run() {
            Err(e) => assert_eq!(e.kind(), ErrorKind::Timeout, "{e}"),
            // A GPU fast enough to finish before the first poll proves nothing either way.
            Ok(()) => ferrite_tests::report_skip("cuda timeout: the run beat a zero timeout"),
        }
        session.device_mut().set_timeout(Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(100));
        session.set_input(0, &input.bytes).unwrap();
        session.run().expect("the run after a timeout");
        let err = ferrite_tests::compare::relative_error(
            session.output_f32(0).unwrap(),
            &floats(&expected[0]),
        );
        assert!(err <= models::TOLERANCE, "relative error {err:e}");
    });
}

/// The GPU tests of this file (`*_on_a_gpu`, `gpu_*`) once more, in a child process of this
/// test binary whose library path starts with the fake NVIDIA driver
/// (`targets/cuda/emulator/fake_libcuda.cpp`): the real GPU program — allocation, upload,
/// NVRTC, graph capture and replay — runs the model suite, the node tests against the same
/// expectations, bad indices, and a timeout (the fake reports every run "not ready" to its
/// first polls) followed by a run that recovers.
#[test]
fn the_gpu_tests_pass_on_a_fake_driver() {
    if std::env::var_os("FERRITE_FAKE_CUDA_CHILD").is_some() {
        return;
    }
    let required = std::env::var("FERRITE_REQUIRE_NVRTC").is_ok_and(|v| v == "1");
    let skip = |why: &str| {
        assert!(!required, "fake CUDA driver: {why}");
        ferrite_tests::report_skip(&format!("GPU tests on the fake CUDA driver: {why}"));
    };
    if !ferrite_cuda::compiler_present() {
        return skip("libnvrtc is not on the library path");
    }
    let dir = std::env::temp_dir().join(format!("ferrite-fake-gpu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    if let Err(why) = ferrite_cuda::build_fake_driver(&dir) {
        if why.starts_with("no g++") {
            return skip(&why);
        }
        panic!("{why}");
    }
    let path = match std::env::var("LD_LIBRARY_PATH") {
        Ok(rest) if !rest.is_empty() => format!("{}:{rest}", dir.display()),
        _ => dir.display().to_string(),
    };
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["on_a_gpu", "gpu_", "--test-threads", "2"])
        .env("LD_LIBRARY_PATH", path)
        .env("FERRITE_FAKE_CUDA_CHILD", "1")
        .env("FERRITE_FAKE_CUDA_POLLS", "3")
        .env("FERRITE_REQUIRE_CUDA", "1")
        .output()
        .expect("the test binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(!stderr.contains("SKIPPED"), "{stderr}");
    // The fake driver reports at exit anything the sessions did not free.
    assert!(!stderr.contains("fake libcuda: leaked"), "{stderr}");
    // Five GPU tests ran (and this one, returning at once).
    assert!(stdout.contains("test result: ok. 6 passed"), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn errors_are_one_line_with_both_sizes() {
    let e = CudaError::OutOfMemory {
        needed: 5_000_000_000,
        free: 1_000_000,
    };
    assert_eq!(e.kind(), ErrorKind::OutOfMemory);
    let text = e.to_string();
    assert!(
        text.contains("5000000000") && text.contains("1000000"),
        "{text}"
    );
    assert!(!text.contains('\n'));
}

/// The emulator runs each GPU thread on the CPU, a block's threads one after another:
/// [`ferrite_tests::determinism::EMULATOR_RUNS`] here, the full
/// [`ferrite_tests::determinism::RUNS`] on a real GPU (`scripts/gpu-check.sh`).
#[test]
fn every_model_is_deterministic_on_the_cuda_emulator() {
    let checked = ferrite_tests::determinism::run_all::<CudaEmulated>(
        ferrite_tests::determinism::EMULATOR_RUNS,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(checked >= 8, "{checked} models");
}

#[test]
fn every_model_is_deterministic_on_a_gpu() {
    unless_missing::<Cuda>("cuda determinism", || {
        // On the fake driver (an emulator underneath) as many runs as on the emulator.
        let fake = std::env::var_os("FERRITE_FAKE_CUDA_CHILD").is_some();
        let runs = if fake {
            ferrite_tests::determinism::EMULATOR_RUNS
        } else {
            ferrite_tests::determinism::RUNS
        };
        let checked =
            ferrite_tests::determinism::run_all::<Cuda>(runs).unwrap_or_else(|e| panic!("{e}"));
        assert!(checked >= 8, "{checked} models");
    });
}
