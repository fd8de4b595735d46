//! Running packed models from the host: load (`.frt`, or `.onnx` packed in memory), check inputs
//! against the model, run on a device (`cpu`, `vulkan[:N]`, `cuda[:N]`, `qemu-m4`, ...), and time
//! repeated runs.

use crate::aligned::AlignedBytes;
use crate::compile::pack::{pack, PackOptions};
use crate::host::error::RunError;
use crate::host::inputs::check_inputs;
use crate::host::npy::NpyArray;
use crate::PackError;
use ferrite_core::{Model, Session};
use ferrite_cpu::CpuDevice;
use ferrite_hal::{Device, Plan};
use std::time::Instant;

/// A device named on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceSpec {
    /// The host CPU (`cpu`), its big kernels on `threads` threads (1 unless `--threads` says
    /// otherwise; results are identical whatever the count).
    Cpu {
        /// Threads for the big kernels (see `ferrite_cpu::CpuDevice::with_threads`).
        threads: usize,
    },
    /// The N-th Vulkan device (`vulkan` = `vulkan:0`).
    Vulkan(usize),
    /// The N-th NVIDIA GPU (`cuda` = `cuda:0`).
    Cuda(usize),
    /// Ferrite's firmware on an emulated Cortex-M (`qemu-m0`, `qemu-m4`, `qemu-m7`, `qemu-m33`; see
    /// [`crate::host::qemu`]).
    Qemu(crate::host::qemu::Board),
}

impl DeviceSpec {
    /// Parses `cpu`, `vulkan[:N]`, `cuda[:N]` and the QEMU boards' names.
    pub fn parse(name: &str) -> Result<DeviceSpec, RunError> {
        match name {
            "cpu" => Ok(DeviceSpec::Cpu { threads: 1 }),
            "vulkan" => Ok(DeviceSpec::Vulkan(0)),
            "cuda" => Ok(DeviceSpec::Cuda(0)),
            _ => {
                if let Some(board) = crate::host::qemu::Board::from_device_name(name) {
                    return Ok(DeviceSpec::Qemu(board));
                }
                if let Some(n) = name.strip_prefix("vulkan:") {
                    return n.parse().map(DeviceSpec::Vulkan).map_err(|_| {
                        RunError::Device(format!(
                            "'{name}': expected vulkan:N with N a device number"
                        ))
                    });
                }
                if let Some(n) = name.strip_prefix("cuda:") {
                    return n.parse().map(DeviceSpec::Cuda).map_err(|_| {
                        RunError::Device(format!("'{name}': expected cuda:N with N a GPU number"))
                    });
                }
                Err(RunError::Device(format!(
                    "unknown device '{name}' (run `ferrite devices`)"
                )))
            }
        }
    }

    /// This device with its kernels on `threads` threads: the CPU only (1 to
    /// `ferrite_cpu::MAX_THREADS`); every other device refuses more than one.
    pub fn with_threads(self, threads: usize) -> Result<DeviceSpec, RunError> {
        match self {
            _ if threads == 0 || threads > ferrite_cpu::MAX_THREADS => {
                Err(RunError::Input(format!(
                    "--threads {threads}: expected 1 to {}",
                    ferrite_cpu::MAX_THREADS
                )))
            }
            DeviceSpec::Cpu { .. } => Ok(DeviceSpec::Cpu { threads }),
            _ if threads == 1 => Ok(self),
            _ => Err(RunError::Input(format!(
                "--threads {threads}: only the cpu device runs its kernels on threads"
            ))),
        }
    }
}

/// The CPU device with its big kernels on `threads` threads.
pub fn cpu_device(threads: usize) -> CpuDevice {
    CpuDevice::new().with_threads(threads)
}

/// Opens the NVIDIA GPU `index` (`cuda:N`); without a driver or GPU, one line saying so.
pub fn open_cuda(index: usize) -> Result<ferrite_cuda::CudaDevice, RunError> {
    let options = ferrite_cuda::Options {
        index,
        ..Default::default()
    };
    ferrite_cuda::CudaDevice::open(&options)
        .map_err(|e| RunError::Device(format!("device 'cuda:{index}': {e}")))
}

/// Opens the Vulkan device `index`.
#[cfg(feature = "vulkan")]
pub fn open_vulkan(index: usize) -> Result<ferrite_vulkan::VulkanDevice, RunError> {
    open_vulkan_timed(index, ferrite_vulkan::Timing::Off)
}

/// Opens the Vulkan device `index`, recording `timing` timestamps.
#[cfg(feature = "vulkan")]
pub fn open_vulkan_timed(
    index: usize,
    timing: ferrite_vulkan::Timing,
) -> Result<ferrite_vulkan::VulkanDevice, RunError> {
    let options = ferrite_vulkan::Options {
        index,
        timing,
        ..Default::default()
    };
    ferrite_vulkan::VulkanDevice::open(&options).map_err(|e| RunError::Device(e.to_string()))
}

#[cfg(not(feature = "vulkan"))]
fn no_vulkan() -> RunError {
    RunError::Device(
        "device 'vulkan' is not available in this build (built without the `vulkan` feature)"
            .into(),
    )
}

/// Whether `bytes` start as a packed model: the `.frt` magic, or (a file cut short) a prefix of
/// it, so that a truncated `.frt` is reported as one.
pub fn is_frt(bytes: &[u8]) -> bool {
    let magic = &ferrite_core::format::MAGIC;
    bytes.starts_with(magic) || (!bytes.is_empty() && magic.starts_with(bytes))
}

/// A model given as bytes: a `.frt` (by its magic) as is, else ONNX packed in memory with
/// `options`, with what packing assumed (its report's notes, e.g. a batch taken as 1). Bytes
/// that are neither say so.
pub fn load_model_from_bytes(
    bytes: &[u8],
    options: &PackOptions,
) -> Result<(AlignedBytes, Vec<String>), RunError> {
    if is_frt(bytes) {
        return Ok((AlignedBytes::from(bytes), Vec::new()));
    }
    match pack(bytes, options) {
        Ok(packed) => Ok((AlignedBytes::from(&packed.bytes[..]), packed.report.notes)),
        Err(PackError::Decode(why)) => Err(RunError::NotAModel(format!(
            "neither a packed model (no .frt magic) nor an ONNX model ({why})"
        ))),
        Err(e) => Err(e.into()),
    }
}

/// A session's arena on the heap, 16-byte aligned.
pub fn arena_for(model: &Model<'_>) -> AlignedBytes {
    AlignedBytes::zeroed(model.arena_bytes())
}

/// Runs the model once on the CPU device.
pub fn run_cpu(model: &Model<'_>, inputs: &[NpyArray]) -> Result<Vec<NpyArray>, RunError> {
    run_with(model, inputs, CpuDevice::new())
}

/// Runs a packed model (`bytes`, 16-byte aligned) once on the named device.
pub fn run(
    bytes: &[u8],
    inputs: &[NpyArray],
    device: DeviceSpec,
) -> Result<Vec<NpyArray>, RunError> {
    let model = Model::load(bytes)?;
    let model = &model;
    match device {
        DeviceSpec::Cpu { threads } => run_with(model, inputs, cpu_device(threads)),
        DeviceSpec::Qemu(board) => {
            Ok(crate::host::qemu::run(board, bytes, model, inputs, 1)?.outputs)
        }
        DeviceSpec::Cuda(i) => run_with(model, inputs, open_cuda(i)?),
        #[cfg(feature = "vulkan")]
        DeviceSpec::Vulkan(i) => run_with(model, inputs, open_vulkan(i)?),
        #[cfg(not(feature = "vulkan"))]
        DeviceSpec::Vulkan(_) => Err(no_vulkan()),
    }
}

/// Runs the model once on `device` through a session.
pub fn run_with<D: Device>(
    model: &Model<'_>,
    inputs: &[NpyArray],
    device: D,
) -> Result<Vec<NpyArray>, RunError> {
    let mut runs = run_repeatedly_with(model, inputs, device, 1)?;
    Ok(runs.pop().unwrap_or_default())
}

/// Runs the model `runs` times on one session of `device` (inputs written before every run, as
/// firmware does) and returns every run's outputs: for determinism checks.
pub fn run_repeatedly_with<D: Device>(
    model: &Model<'_>,
    inputs: &[NpyArray],
    device: D,
    runs: usize,
) -> Result<Vec<Vec<NpyArray>>, RunError> {
    check_inputs(model, inputs)?;
    let mut arena = arena_for(model);
    let mut session = Session::new(model, device, arena.as_mut_bytes())?;
    let mut all = Vec::with_capacity(runs);
    for _ in 0..runs {
        for (i, a) in inputs.iter().enumerate() {
            session.set_input(i, &a.bytes)?;
        }
        session.run()?;
        let outputs = (0..model.output_count())
            .map(|i| {
                let info = session.output_info(i)?;
                Ok(NpyArray {
                    dtype: info.desc.dtype,
                    shape: info.desc.shape.dims().to_vec(),
                    bytes: session.output(i)?.to_vec(),
                })
            })
            .collect::<Result<Vec<_>, RunError>>()?;
        all.push(outputs);
    }
    Ok(all)
}

/// Latency statistics of repeated runs, in microseconds.
#[derive(Clone, Debug)]
pub struct BenchStats {
    /// Timed runs.
    pub runs: usize,
    /// Median.
    pub median_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// Fastest.
    pub min_us: f64,
    /// Mean.
    pub mean_us: f64,
    /// Median time the device itself reports per run (a GPU's timestamps), if it reports any.
    pub device_median_us: Option<f64>,
    /// Median of (wall time − device time) per run: what submitting, waiting and copying inputs
    /// and outputs costs the host, if the device reports its own time.
    pub host_overhead_us: Option<f64>,
}

/// [`bench_with`] on the CPU device.
pub fn bench_cpu(
    model: &Model<'_>,
    inputs: &[NpyArray],
    runs: usize,
) -> Result<BenchStats, RunError> {
    bench_with(model, inputs, runs, CpuDevice::new())
}

/// [`bench_with`] on the named device.
pub fn bench(
    model: &Model<'_>,
    inputs: &[NpyArray],
    runs: usize,
    device: DeviceSpec,
) -> Result<BenchStats, RunError> {
    match device {
        DeviceSpec::Cpu { threads } => bench_with(model, inputs, runs, cpu_device(threads)),
        DeviceSpec::Qemu(_) => Err(RunError::Device(
            "QEMU counts instructions instead of timing: use qemu::run".into(),
        )),
        DeviceSpec::Cuda(i) => bench_with(model, inputs, runs, open_cuda(i)?),
        #[cfg(feature = "vulkan")]
        DeviceSpec::Vulkan(i) => {
            let device = open_vulkan_timed(i, ferrite_vulkan::Timing::Total)?;
            bench_probed(model, inputs, runs, device, |p| {
                p.last_timing().map(|t| t.total_us)
            })
        }
        #[cfg(not(feature = "vulkan"))]
        DeviceSpec::Vulkan(_) => Err(no_vulkan()),
    }
}

/// Times `runs` inferences on `device` (after at least 100 ms of warm-up runs), writing the
/// inputs before each run as a real application would. Session creation (for a GPU: pipelines,
/// uploads, recording) is not timed.
pub fn bench_with<D: Device>(
    model: &Model<'_>,
    inputs: &[NpyArray],
    runs: usize,
    device: D,
) -> Result<BenchStats, RunError> {
    bench_probed(model, inputs, runs, device, |_| None)
}

/// [`bench_with`], also reading the device's own time per run from its program with `probe`.
pub fn bench_probed<D: Device>(
    model: &Model<'_>,
    inputs: &[NpyArray],
    runs: usize,
    device: D,
    probe: impl Fn(&D::Program) -> Option<f64>,
) -> Result<BenchStats, RunError> {
    check_inputs(model, inputs)?;
    let mut arena = arena_for(model);
    let mut session = Session::new(model, device, arena.as_mut_bytes())?;
    let mut device_samples = Vec::with_capacity(runs);
    let mut overhead_samples = Vec::with_capacity(runs);
    let mut infer = |record: bool| -> Result<f64, RunError> {
        let start = Instant::now();
        for (i, a) in inputs.iter().enumerate() {
            session.set_input(i, &a.bytes)?;
        }
        session.run()?;
        let wall = start.elapsed().as_secs_f64() * 1e6;
        if let (true, Some(device_us)) = (record, probe(session.program())) {
            device_samples.push(device_us);
            overhead_samples.push(wall - device_us);
        }
        Ok(wall)
    };
    // Warm up for at least 100 ms (caches, branch predictors, the CPU's clock), then time.
    let warm_up = Instant::now();
    let mut warm_runs = 0;
    while warm_runs < 3 || (warm_up.elapsed().as_millis() < 100 && warm_runs < 10_000) {
        infer(false)?;
        warm_runs += 1;
    }
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        samples.push(infer(true)?);
    }
    samples.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    Ok(BenchStats {
        runs,
        median_us: at(0.5),
        p90_us: at(0.9),
        min_us: samples[0],
        mean_us: samples.iter().sum::<f64>() / samples.len() as f64,
        device_median_us: median(&mut device_samples),
        host_overhead_us: median(&mut overhead_samples),
    })
}

/// The median, or `None` for no samples.
fn median(samples: &mut [f64]) -> Option<f64> {
    samples.sort_by(|a, b| a.total_cmp(b));
    samples.get(samples.len() / 2).copied()
}

/// Deterministic pseudo-random inputs for `bench` when none are given (floats in [-1, 1),
/// integers 0).
pub fn synthetic_inputs(model: &Model<'_>) -> Vec<NpyArray> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    (0..model.input_count())
        .filter_map(|i| model.input(i))
        .map(|info| {
            let n = info.desc.elements();
            let bytes = if info.desc.dtype == ferrite_hal::DType::F32 {
                (0..n)
                    .flat_map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        let v = (state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0;
                        v.to_le_bytes()
                    })
                    .collect()
            } else {
                vec![0; info.desc.bytes]
            };
            NpyArray {
                dtype: info.desc.dtype,
                shape: info.desc.shape.dims().to_vec(),
                bytes,
            }
        })
        .collect()
}

/// Time per step (median over `runs`) on the named device, in execution order:
/// `(op label, node name, µs)`. The CPU times each kernel call; a GPU reports timestamps written
/// between the steps of its recorded command buffer.
pub fn profile(
    model: &Model<'_>,
    inputs: &[NpyArray],
    runs: usize,
    device: DeviceSpec,
) -> Result<Vec<(String, String, f64)>, RunError> {
    match device {
        DeviceSpec::Cpu { threads } => profile_cpu_with(model, inputs, runs, cpu_device(threads)),
        DeviceSpec::Qemu(_) => Err(RunError::Device(
            "QEMU counts instructions, not time: use crate::host::qemu::run_profiled".into(),
        )),
        DeviceSpec::Cuda(_) => Err(RunError::Device(
            "per-step profiling is not built for CUDA (its plan replays as one graph): use `ferrite bench`"
                .into(),
        )),
        #[cfg(feature = "vulkan")]
        DeviceSpec::Vulkan(i) => {
            check_inputs(model, inputs)?;
            let mut arena = arena_for(model);
            let device = open_vulkan_timed(i, ferrite_vulkan::Timing::PerStep)?;
            let mut session = Session::new(model, device, arena.as_mut_bytes())?;
            let mut samples: Vec<Vec<f64>> = vec![Vec::with_capacity(runs); model.len()];
            for _ in 0..runs.max(1) {
                for (i, a) in inputs.iter().enumerate() {
                    session.set_input(i, &a.bytes)?;
                }
                session.run()?;
                let timing = session.program().last_timing().ok_or_else(|| {
                    RunError::Device("this Vulkan device has no timestamps to profile with".into())
                })?;
                for (s, us) in samples.iter_mut().zip(&timing.steps_us) {
                    s.push(*us);
                }
            }
            Ok(step_table(model, samples))
        }
        #[cfg(not(feature = "vulkan"))]
        DeviceSpec::Vulkan(_) => Err(no_vulkan()),
    }
}

/// `(op label, node name, median µs)` per step.
fn step_table(model: &Model<'_>, samples: Vec<Vec<f64>>) -> Vec<(String, String, f64)> {
    samples
        .into_iter()
        .enumerate()
        .map(|(s, mut t)| {
            let label = model
                .step(s)
                .map(|st| crate::compile::pack::op_label(&st.op))
                .unwrap_or_default();
            let name = model.op_name(s).unwrap_or("").to_string();
            (label, name, median(&mut t).unwrap_or(0.0))
        })
        .collect()
}

/// Time per step (median over `runs`) on the CPU, in execution order: `(op label, node name, µs)`.
pub fn profile_cpu(
    model: &Model<'_>,
    inputs: &[NpyArray],
    runs: usize,
) -> Result<Vec<(String, String, f64)>, RunError> {
    profile_cpu_with(model, inputs, runs, CpuDevice::new())
}

/// [`profile_cpu`] on a configured CPU device (its threads).
pub fn profile_cpu_with(
    model: &Model<'_>,
    inputs: &[NpyArray],
    runs: usize,
    device: CpuDevice,
) -> Result<Vec<(String, String, f64)>, RunError> {
    check_inputs(model, inputs)?;
    let mut arena = arena_for(model);
    let mut samples: Vec<Vec<f64>> = vec![Vec::with_capacity(runs); model.len()];
    // Prepared as a session prepares it, so each step keeps its kernel state across runs.
    let mut program = device.program(model);
    for _ in 0..runs.max(1) {
        for (i, a) in inputs.iter().enumerate() {
            if let (Some(info), bytes) = (model.input(i), &a.bytes) {
                if let ferrite_hal::Location::Arena(o) = info.desc.location {
                    arena.as_mut_bytes()[o..o + bytes.len()].copy_from_slice(bytes);
                }
            }
        }
        for (s, times) in samples.iter_mut().enumerate() {
            let step = model
                .step(s)
                .ok_or_else(|| RunError::Input("corrupt plan".into()))?;
            let start = Instant::now();
            device
                .run_prepared_step(
                    &mut program,
                    s,
                    &step,
                    arena.as_mut_bytes(),
                    model.weights(),
                )
                .map_err(|e| RunError::from(ferrite_core::Error::Device(e)))?;
            times.push(start.elapsed().as_secs_f64() * 1e6);
        }
    }
    Ok(step_table(model, samples))
}

/// The op support of `device`, from its kernel list, without opening it (the Cortex-M
/// firmware runs the CPU device's kernels).
fn device_ops(device: DeviceSpec) -> Result<ferrite_hal::OpSet, RunError> {
    Ok(match device {
        DeviceSpec::Cpu { .. } | DeviceSpec::Qemu(_) => CpuDevice::supported_ops(),
        DeviceSpec::Cuda(_) => ferrite_cuda::CudaDevice::supported_ops(),
        #[cfg(feature = "vulkan")]
        DeviceSpec::Vulkan(_) => ferrite_vulkan::VulkanDevice::supported_ops(),
        #[cfg(not(feature = "vulkan"))]
        DeviceSpec::Vulkan(_) => return Err(no_vulkan()),
    })
}

/// The steps of `model` that `device` cannot run, as `(step, "Op(dtype)")`, found from the
/// device's kernel list (the rule `Session::new` applies: the op kind on
/// `Step::kernel_dtype`) before any device is opened. The Cortex-M0 firmware links no integer kernels.
pub fn unsupported_steps(
    model: &Model<'_>,
    device: DeviceSpec,
) -> Result<Vec<(usize, String)>, RunError> {
    let ops = device_ops(device)?;
    let float_only = device == DeviceSpec::Qemu(crate::host::qemu::Board::M0);
    let mut missing = Vec::new();
    for i in 0..model.len() {
        let Some(step) = model.step(i) else { continue };
        let dtype = step.kernel_dtype();
        let kind = step.op.kind();
        let integer = ferrite_hal::OpKind::INTEGER.contains(&kind);
        if !ops.contains(kind, dtype) || (float_only && integer) {
            missing.push((i, format!("{}({dtype})", kind.name())));
        }
    }
    Ok(missing)
}
