//! # ferrite-cuda
//!
//! A CUDA device: the same verified `.frt` plan the CPU runs, on NVIDIA GPUs from Jetson Orin
//! (sm_87) to Hopper (sm_90), through cudarc.
//!
//! cudarc is used with dynamic loading and a fixed CUDA 12 feature, so this crate builds on any
//! machine, including one without the CUDA toolkit or driver; `libcuda` and `libnvrtc` are
//! opened at run time, after checking that they exist (cudarc's loaders panic when a library is
//! missing), and every failure is a [`CudaError`] with a `kind()`.
//!
//! [`Device::prepare`] does all the work once: the kernels the plan uses are compiled
//! by NVRTC for the GPU at hand and loaded (once per device), one allocation holds the arena at
//! the planned offsets, the weights are uploaded once, and the whole run is captured as a CUDA
//! graph, inputs and outputs moving through pinned host buffers. [`Device::execute`] copies the
//! inputs in, launches the graph, waits with a timeout and copies the outputs out.
//!
//! With feature `emulator`, `CudaDevice::emulated()` runs the same lowering and the same
//! kernels, compiled as C++, on the CPU: that is how CI, which has no GPU, tests them.
#![deny(missing_docs)]

#[cfg(feature = "emulator")]
mod emulator;
mod error;
mod gpu;
pub mod kernels;
pub mod launch;
pub mod lower;
mod plan;

#[cfg(feature = "emulator")]
pub use emulator::{build_fake_driver, emulated_kernels};
pub use error::CudaError;
pub use kernels::compiler_present;

use cudarc::driver::{result as driver, sys, CudaContext};
use ferrite_hal::{Capabilities, DType, Device, OpKind, OpSet, Plan};
use std::sync::Arc;
use std::time::Duration;

/// One GPU as the driver describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuInfo {
    /// Ordinal (`--device cuda:N`).
    pub index: usize,
    /// Marketing name.
    pub name: String,
    /// Compute capability (major, minor): (8, 7) for Jetson Orin, (9, 0) for Hopper.
    pub compute_capability: (i32, i32),
    /// Device memory.
    pub memory_bytes: usize,
}

/// Whether `libcuda` can be opened (checked before any driver call: cudarc panics otherwise).
pub fn driver_present() -> bool {
    // SAFETY: only tries to open the library by its usual names.
    unsafe { sys::is_culib_present() }
}

/// Every CUDA GPU, or why there is none.
pub fn devices() -> Result<Vec<GpuInfo>, CudaError> {
    if !driver_present() {
        return Err(CudaError::NoDriver);
    }
    driver::init().map_err(CudaError::during("cuInit"))?;
    let count = driver::device::get_count().map_err(CudaError::during("cuDeviceGetCount"))?;
    if count <= 0 {
        return Err(CudaError::NoDevice);
    }
    (0..count)
        .map(|i| {
            let dev = driver::device::get(i).map_err(CudaError::during("cuDeviceGet"))?;
            let name =
                driver::device::get_name(dev).map_err(CudaError::during("cuDeviceGetName"))?;
            let attribute = |a| {
                // SAFETY: `dev` is a valid device handle from cuDeviceGet.
                unsafe { driver::device::get_attribute(dev, a) }
                    .map_err(CudaError::during("cuDeviceGetAttribute"))
            };
            use sys::CUdevice_attribute as A;
            let major = attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
            let minor = attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
            // SAFETY: as above.
            let memory_bytes = unsafe { driver::device::total_mem(dev) }
                .map_err(CudaError::during("cuDeviceTotalMem"))?;
            Ok(GpuInfo {
                index: i as usize,
                name,
                compute_capability: (major, minor),
                memory_bytes,
            })
        })
        .collect()
}

/// How to open a CUDA device.
#[derive(Clone, Debug)]
pub struct Options {
    /// Which GPU, in the driver's order (`cuda:N`).
    pub index: usize,
    /// Longest wait for one inference before [`CudaError::Timeout`].
    pub timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            index: 0,
            timeout: Duration::from_secs(10),
        }
    }
}

enum Backend {
    Gpu {
        ctx: Arc<CudaContext>,
        info: GpuInfo,
        loaded: gpu::Loaded,
    },
    #[cfg(feature = "emulator")]
    Emulated,
}

/// An NVIDIA GPU (or, with feature `emulator`, the CPU emulating one) as a Ferrite device.
pub struct CudaDevice {
    backend: Backend,
    timeout: Duration,
}

/// A plan prepared on a [`CudaDevice`].
pub struct Program(ProgramKind);

enum ProgramKind {
    Gpu(Box<gpu::GpuProgram>),
    #[cfg(feature = "emulator")]
    Emulated(emulator::EmulatedProgram),
}

impl CudaDevice {
    /// Opens the first GPU.
    pub fn new() -> Result<CudaDevice, CudaError> {
        Self::open(&Options::default())
    }

    /// Opens a GPU as `options` say; without a driver, a device or NVRTC, a typed error.
    pub fn open(options: &Options) -> Result<CudaDevice, CudaError> {
        let list = devices()?;
        let info = list
            .get(options.index)
            .cloned()
            .ok_or(CudaError::NoSuchDevice {
                requested: options.index,
                available: list.len(),
            })?;
        if !compiler_present() {
            return Err(CudaError::NoCompiler);
        }
        let ctx = CudaContext::new(options.index)
            .map_err(CudaError::during("cuDevicePrimaryCtxRetain"))?;
        // Ferrite orders all work on one stream per program; cudarc's per-buffer events would
        // only add work (and must not be recorded during graph capture).
        // SAFETY: called before any buffer of this context exists.
        unsafe { ctx.disable_event_tracking() };
        Ok(CudaDevice {
            backend: Backend::Gpu {
                ctx,
                info,
                loaded: gpu::Loaded::default(),
            },
            timeout: options.timeout,
        })
    }

    /// The host emulator: the same lowering and kernels, run on the CPU (for tests).
    #[cfg(feature = "emulator")]
    pub fn emulated() -> CudaDevice {
        CudaDevice {
            backend: Backend::Emulated,
            timeout: Options::default().timeout,
        }
    }

    /// The opened GPU (`None` for the emulator).
    pub fn info(&self) -> Option<&GpuInfo> {
        match &self.backend {
            Backend::Gpu { info, .. } => Some(info),
            #[cfg(feature = "emulator")]
            Backend::Emulated => None,
        }
    }

    /// Changes the longest wait per inference (from the next run on).
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// The (op, dtype) pairs the kernels implement (keyed, as the core checks them, by a
    /// step's first input): the f32 compute ops, recurrent layers, data movement on 4- and
    /// 8-byte elements, comparisons, running sums, bool logic, Where, Trilu, Cast between the
    /// common types, IsNaN/IsInf, the gathers and scatters, TopK, Det and byte copies.
    pub fn supported_ops() -> OpSet {
        use OpKind::*;
        let float = [DType::F32];
        let mut set = OpSet::empty();
        for kind in OpKind::F32_COMPUTE {
            set = set.with(kind, &float);
        }
        let integers = [
            DType::I32,
            DType::I64,
            DType::U8,
            DType::I8,
            DType::I16,
            DType::U16,
            DType::U32,
            DType::U64,
        ];
        set = set.with(Binary, &integers);
        for kind in OpKind::MOVEMENT {
            set = set.with(kind, &lower::WORD_DTYPES);
        }
        let numbers = [DType::F32, DType::I32, DType::I64];
        let cast = [
            DType::F32,
            DType::I32,
            DType::I64,
            DType::Bool,
            DType::U8,
            DType::I8,
            DType::F64,
            DType::F16,
            DType::BF16,
            DType::I16,
            DType::U16,
            DType::U32,
        ];
        set.with(Copy, &DType::ALL)
            .with(ArgMax, &float)
            .with(ArgMin, &float)
            .with(Resample, &float)
            .with(Expand, &lower::WORD_DTYPES)
            .with(Recurrent, &float)
            .with(CumSum, &numbers)
            .with(Compare, &float)
            .with(Compare, &integers)
            .with(Compare, &[DType::Bool])
            .with(Logical, &[DType::Bool])
            .with(Not, &[DType::Bool])
            .with(Where, &[DType::Bool])
            .with(Trilu, &DType::ALL)
            .with(Convert, &cast)
            .with(Classify, &float)
            .with(GatherElements, &lower::WORD_DTYPES)
            .with(TopK, &numbers)
            .with(ScatterElements, &numbers)
            .with(GatherNd, &lower::WORD_DTYPES)
            .with(ScatterNd, &numbers)
            .with(Det, &float)
    }
}

impl Device for CudaDevice {
    type Error = CudaError;
    type Program = Program;

    fn capabilities(&self) -> Capabilities {
        let max_arena_bytes = match &self.backend {
            // 32-bit element indexing in the kernels.
            Backend::Gpu { info, .. } => info.memory_bytes.min(u32::MAX as usize),
            #[cfg(feature = "emulator")]
            Backend::Emulated => u32::MAX as usize,
        };
        Capabilities {
            ops: Self::supported_ops(),
            max_arena_bytes,
            host_arena: false,
        }
    }

    fn prepare(&mut self, plan: &dyn Plan) -> Result<Program, CudaError> {
        match &mut self.backend {
            Backend::Gpu { ctx, info, loaded } => {
                let (major, minor) = info.compute_capability;
                let arch = format!("compute_{major}{minor}");
                gpu::GpuProgram::new(ctx, &arch, loaded, plan)
                    .map(|p| Program(ProgramKind::Gpu(Box::new(p))))
            }
            #[cfg(feature = "emulator")]
            Backend::Emulated => {
                emulator::EmulatedProgram::new(plan).map(|p| Program(ProgramKind::Emulated(p)))
            }
        }
    }

    fn execute(
        &mut self,
        program: &mut Program,
        _plan: &dyn Plan,
        arena: &mut [u8],
    ) -> Result<(), CudaError> {
        match &mut program.0 {
            ProgramKind::Gpu(p) => p.run(arena, self.timeout),
            #[cfg(feature = "emulator")]
            ProgramKind::Emulated(p) => p.run(arena),
        }
    }
}
