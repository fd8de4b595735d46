//! # ferrite-tests
//!
//! Conformance suites defined once and instantiated per device (as tract's `test-rt` does):
//! a device implements [`Backend`]; [`models`] runs the generated test models against
//! onnxruntime's outputs and [`node_tests`] runs the ONNX backend node tests against a checked-in
//! expectations file. Adding a device = one `Backend` impl + one test file + its expectations.

pub mod compare;
pub mod determinism;
pub mod fixtures;
pub mod geometry;
pub mod layout_chains;
pub mod models;
pub mod node_tests;
pub mod normalization_chains;
pub mod ptq;
pub mod quantized;
pub mod sklearn;

use ferrite_core::{Model, Session};
use ferrite_tools::host::error::RunError;
use ferrite_tools::host::npy::NpyArray;
use std::cell::RefCell;
use std::path::PathBuf;

/// A device under test.
pub trait Backend {
    /// Short name, used for the expectations file (`tests/expectations/<name>-node.txt`).
    const NAME: &'static str;
    /// Whether the device exists on this machine; `Err` says why not (the suites then report
    /// themselves skipped).
    fn available() -> Result<(), String> {
        Ok(())
    }
    /// Runs a verified model once.
    fn run(model: &Model<'_>, inputs: &[NpyArray]) -> Result<Vec<NpyArray>, RunError>;

    /// Runs a verified model `runs` times (on one session where the device keeps one) and
    /// returns the outputs of each run; devices that cannot return every run's outputs return
    /// some of them (see [`QemuM4`]).
    fn run_repeatedly(
        model: &Model<'_>,
        inputs: &[NpyArray],
        runs: usize,
    ) -> Result<Vec<Vec<NpyArray>>, RunError> {
        (0..runs).map(|_| Self::run(model, inputs)).collect()
    }
}

/// The portable CPU device.
pub struct Cpu;

impl Backend for Cpu {
    const NAME: &'static str = "cpu";

    fn run(model: &Model<'_>, inputs: &[NpyArray]) -> Result<Vec<NpyArray>, RunError> {
        ferrite_tools::host::runner::run_cpu(model, inputs)
    }

    fn run_repeatedly(
        model: &Model<'_>,
        inputs: &[NpyArray],
        runs: usize,
    ) -> Result<Vec<Vec<NpyArray>>, RunError> {
        let device = ferrite_cpu::CpuDevice::new();
        ferrite_tools::host::runner::run_repeatedly_with(model, inputs, device, runs)
    }
}

/// The CPU device with channel-blocked tensors but no Winograd transform (every convolution
/// by the direct kernels); its outputs must equal [`CpuPlanar`]'s bit for bit.
pub struct CpuDirect;

impl Backend for CpuDirect {
    const NAME: &'static str = "cpu (blocked, direct)";

    fn run(model: &Model<'_>, inputs: &[NpyArray]) -> Result<Vec<NpyArray>, RunError> {
        let device = ferrite_cpu::CpuDevice::new().with_winograd(false);
        ferrite_tools::host::runner::run_with(model, inputs, device)
    }

    fn run_repeatedly(
        model: &Model<'_>,
        inputs: &[NpyArray],
        runs: usize,
    ) -> Result<Vec<Vec<NpyArray>>, RunError> {
        let device = ferrite_cpu::CpuDevice::new().with_winograd(false);
        ferrite_tools::host::runner::run_repeatedly_with(model, inputs, device, runs)
    }
}

/// The CPU device with every tensor in the model's planar layout (no channel-blocked tensors
/// between convolutions, so no Winograd transform); its outputs must equal [`CpuDirect`]'s
/// bit for bit.
pub struct CpuPlanar;

impl Backend for CpuPlanar {
    const NAME: &'static str = "cpu (planar)";

    fn run(model: &Model<'_>, inputs: &[NpyArray]) -> Result<Vec<NpyArray>, RunError> {
        let device = ferrite_cpu::CpuDevice::new().with_channel_blocking(false);
        ferrite_tools::host::runner::run_with(model, inputs, device)
    }

    fn run_repeatedly(
        model: &Model<'_>,
        inputs: &[NpyArray],
        runs: usize,
    ) -> Result<Vec<Vec<NpyArray>>, RunError> {
        let device = ferrite_cpu::CpuDevice::new().with_channel_blocking(false);
        ferrite_tools::host::runner::run_repeatedly_with(model, inputs, device, runs)
    }
}

/// The CPU device running every step as the plan has it (no chain fused into one step); its
/// outputs must equal [`Cpu`]'s bit for bit.
pub struct CpuUnfused;

impl Backend for CpuUnfused {
    const NAME: &'static str = "cpu (unfused)";

    fn run(model: &Model<'_>, inputs: &[NpyArray]) -> Result<Vec<NpyArray>, RunError> {
        let device = ferrite_cpu::CpuDevice::new().with_fusion(false);
        ferrite_tools::host::runner::run_with(model, inputs, device)
    }
}

/// The CPU device with its big kernels on [`CpuThreads::THREADS`] threads (an odd count, so
/// that splits are uneven); its outputs must equal [`Cpu`]'s bit for bit.
pub struct CpuThreads;

impl CpuThreads {
    /// Threads per session.
    pub const THREADS: usize = 3;
}

impl Backend for CpuThreads {
    const NAME: &'static str = "cpu";

    fn run(model: &Model<'_>, inputs: &[NpyArray]) -> Result<Vec<NpyArray>, RunError> {
        let device = ferrite_tools::host::runner::cpu_device(Self::THREADS);
        ferrite_tools::host::runner::run_with(model, inputs, device)
    }

    fn run_repeatedly(
        model: &Model<'_>,
        inputs: &[NpyArray],
        runs: usize,
    ) -> Result<Vec<Vec<NpyArray>>, RunError> {
        let device = ferrite_tools::host::runner::cpu_device(Self::THREADS);
        ferrite_tools::host::runner::run_repeatedly_with(model, inputs, device, runs)
    }
}

/// The first Vulkan device (lavapipe in CI), opened once per test thread.
pub struct Vulkan;

thread_local! {
    static VULKAN: RefCell<Option<Result<ferrite_vulkan::VulkanDevice, String>>> = const { RefCell::new(None) };
}

impl Vulkan {
    fn with<T>(f: impl FnOnce(&mut ferrite_vulkan::VulkanDevice) -> T) -> Result<T, String> {
        VULKAN.with(|cell| {
            let mut slot = cell.borrow_mut();
            let device = slot.get_or_insert_with(|| {
                ferrite_vulkan::VulkanDevice::new().map_err(|e| e.to_string())
            });
            match device {
                Ok(d) => Ok(f(d)),
                Err(e) => Err(e.clone()),
            }
        })
    }
}

impl Backend for Vulkan {
    const NAME: &'static str = "vulkan";

    fn available() -> Result<(), String> {
        Vulkan::with(|_| ())
    }

    fn run(model: &Model<'_>, inputs: &[NpyArray]) -> Result<Vec<NpyArray>, RunError> {
        Vulkan::with(|d| ferrite_tools::host::runner::run_with(model, inputs, d))
            .map_err(RunError::Device)?
    }

    fn run_repeatedly(
        model: &Model<'_>,
        inputs: &[NpyArray],
        runs: usize,
    ) -> Result<Vec<Vec<NpyArray>>, RunError> {
        Vulkan::with(|d| ferrite_tools::host::runner::run_repeatedly_with(model, inputs, d, runs))
            .map_err(RunError::Device)?
    }
}

/// The first NVIDIA GPU, opened once per test thread (skipped where there is none).
pub struct Cuda;

thread_local! {
    static CUDA: RefCell<Option<Result<ferrite_cuda::CudaDevice, String>>> = const { RefCell::new(None) };
}

impl Cuda {
    fn with<T>(f: impl FnOnce(&mut ferrite_cuda::CudaDevice) -> T) -> Result<T, String> {
        CUDA.with(|cell| {
            let mut slot = cell.borrow_mut();
            let device = slot
                .get_or_insert_with(|| ferrite_cuda::CudaDevice::new().map_err(|e| e.to_string()));
            match device {
                Ok(d) => Ok(f(d)),
                Err(e) => Err(e.clone()),
            }
        })
    }
}

impl Backend for Cuda {
    const NAME: &'static str = "cuda";

    fn available() -> Result<(), String> {
        Cuda::with(|_| ())
    }

    fn run(model: &Model<'_>, inputs: &[NpyArray]) -> Result<Vec<NpyArray>, RunError> {
        Cuda::with(|d| ferrite_tools::host::runner::run_with(model, inputs, d))
            .map_err(RunError::Device)?
    }
}

/// The CUDA device's lowering and kernels on the host emulator (every machine): the same
/// expectations as [`Cuda`], so a GPU must pass exactly what the emulator passes.
pub struct CudaEmulated;

impl Backend for CudaEmulated {
    const NAME: &'static str = "cuda";

    fn run(model: &Model<'_>, inputs: &[NpyArray]) -> Result<Vec<NpyArray>, RunError> {
        let mut device = ferrite_cuda::CudaDevice::emulated();
        ferrite_tools::host::runner::run_with(model, inputs, &mut device)
    }

    fn run_repeatedly(
        model: &Model<'_>,
        inputs: &[NpyArray],
        runs: usize,
    ) -> Result<Vec<Vec<NpyArray>>, RunError> {
        let mut device = ferrite_cuda::CudaDevice::emulated();
        ferrite_tools::host::runner::run_repeatedly_with(model, inputs, &mut device, runs)
    }
}

/// The real firmware on QEMU's emulated Cortex-M4F (`qemu-m4`): one QEMU run per call.
pub struct QemuM4;

impl Backend for QemuM4 {
    const NAME: &'static str = "qemu-m4";

    fn available() -> Result<(), String> {
        match ferrite_tools::host::qemu::Board::M4.unavailable() {
            None => Ok(()),
            Some(why) => Err(why),
        }
    }

    fn run(model: &Model<'_>, inputs: &[NpyArray]) -> Result<Vec<NpyArray>, RunError> {
        let board = ferrite_tools::host::qemu::Board::M4;
        Ok(ferrite_tools::host::qemu::run(board, model.as_bytes(), model, inputs, 1)?.outputs)
    }

    /// The firmware runs the model `runs` times in one QEMU process and reports the last
    /// run's outputs and every run's instruction count: returns the outputs of a one-run
    /// process and of the `runs`-run one, and fails if the instruction counts differ.
    fn run_repeatedly(
        model: &Model<'_>,
        inputs: &[NpyArray],
        runs: usize,
    ) -> Result<Vec<Vec<NpyArray>>, RunError> {
        let board = ferrite_tools::host::qemu::Board::M4;
        let once = ferrite_tools::host::qemu::run(board, model.as_bytes(), model, inputs, 1)?;
        let many = ferrite_tools::host::qemu::run(board, model.as_bytes(), model, inputs, runs)?;
        if many.instructions.windows(2).any(|w| w[0] != w[1]) {
            return Err(RunError::Input(format!(
                "instruction counts differ between runs: {:?}",
                many.instructions
            )));
        }
        Ok(vec![once.outputs, many.outputs])
    }
}

/// Prints `SKIPPED: <what>` on its own line, past the test harness's output capture (which only
/// takes `print!`), so a skipped test is visible in every run and counted by `scripts/test.sh`.
pub fn report_skip(what: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "\nSKIPPED: {what}");
}

/// Runs a suite for backend `B` unless the device is missing, in which case it prints a
/// `SKIPPED` line (counted by `scripts/test.sh`) — or fails when `FERRITE_REQUIRE_<NAME>=1`, as
/// CI sets, so a broken driver install cannot pass as a skip.
pub fn unless_missing<B: Backend>(suite: &str, run: impl FnOnce()) {
    match B::available() {
        Ok(()) => run(),
        Err(why) => {
            let require = format!(
                "FERRITE_REQUIRE_{}",
                B::NAME.to_uppercase().replace('-', "_")
            );
            if std::env::var(&require).is_ok_and(|v| v == "1") {
                panic!(
                    "{suite}: {} device required ({require}=1) but missing: {why}",
                    B::NAME
                );
            }
            report_skip(&format!("{suite}: no {} device: {why}", B::NAME));
        }
    }
}

/// Runs through the core's session API directly (used by tests of the API itself).
pub fn run_with_session(model: &Model<'_>, inputs: &[NpyArray]) -> Result<Vec<NpyArray>, String> {
    let mut arena = ferrite_tools::host::runner::arena_for(model);
    let mut session = Session::new(model, ferrite_cpu::CpuDevice::new(), arena.as_mut_bytes())
        .map_err(|e| e.to_string())?;
    for (i, a) in inputs.iter().enumerate() {
        session.set_input(i, &a.bytes).map_err(|e| e.to_string())?;
    }
    session.run().map_err(|e| e.to_string())?;
    (0..model.output_count())
        .map(|i| {
            let info = session.output_info(i).map_err(|e| e.to_string())?;
            Ok(NpyArray {
                dtype: info.desc.dtype,
                shape: info.desc.shape.dims().to_vec(),
                bytes: session.output(i).map_err(|e| e.to_string())?.to_vec(),
            })
        })
        .collect()
}

/// The workspace root: `$FERRITE_ROOT` (`scripts/setup.sh` exports it; a test program carried
/// to another machine, as `scripts/gpu-check.sh --from` does, reads the expectations there), else
/// where this crate was built.
pub fn workspace_root() -> PathBuf {
    std::env::var_os("FERRITE_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".."))
}

/// Where the generated test models are: `$FERRITE_TEST_MODELS` or `target/test-models`.
pub fn test_models_dir() -> PathBuf {
    std::env::var_os("FERRITE_TEST_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/test-models"))
}
