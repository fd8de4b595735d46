//! Ferrite's CUDA device (issue 7), first part: finding NVIDIA GPUs without ever panicking on a
//! machine that has no driver, and the CUDA C kernels with their NVRTC compilation.
//!
//! cudarc is used with dynamic loading and a fixed CUDA 12 feature, so this crate builds on any
//! machine; `libcuda` and `libnvrtc` are opened at run time, after checking that they exist
//! (cudarc's loaders panic when a library is missing). The session side — one arena allocation,
//! weights uploaded once, the plan captured as a CUDA graph — is not built yet.

pub mod kernels;

use cudarc::driver::{result as driver, sys};
use ferrite_hal::ErrorKind;

/// Why the CUDA device is unavailable or a CUDA call failed.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum CudaError {
    /// `libcuda` (the NVIDIA driver) cannot be opened.
    #[error("the NVIDIA driver (libcuda) is not installed")]
    NoDriver,
    /// The driver reports no CUDA device.
    #[error("the NVIDIA driver reports no CUDA device")]
    NoDevice,
    /// `libnvrtc` (the CUDA runtime compiler) cannot be opened.
    #[error("the CUDA runtime compiler (libnvrtc) is not installed")]
    NoCompiler,
    /// A driver call failed.
    #[error("CUDA driver error in {call}: {message}")]
    Driver {
        /// The call.
        call: &'static str,
        /// The driver's message.
        message: String,
    },
    /// NVRTC rejected a kernel.
    #[error("kernel {module} does not compile for {arch}: {log}")]
    Compile {
        /// The kernel module.
        module: &'static str,
        /// The virtual architecture.
        arch: String,
        /// NVRTC's log.
        log: String,
    },
}

impl ferrite_hal::Error for CudaError {
    fn kind(&self) -> ErrorKind {
        match self {
            CudaError::NoDriver | CudaError::NoDevice | CudaError::NoCompiler => {
                ErrorKind::Unsupported
            }
            CudaError::Driver { .. } | CudaError::Compile { .. } => ErrorKind::Other,
        }
    }
}

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

/// Whether `libnvrtc` can be opened.
pub fn compiler_present() -> bool {
    // SAFETY: only tries to open the library by its usual names.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

fn driver_error(call: &'static str) -> impl Fn(driver::DriverError) -> CudaError {
    move |e| CudaError::Driver {
        call,
        message: format!("{e:?}"),
    }
}

/// Every CUDA GPU, or why there is none.
pub fn devices() -> Result<Vec<GpuInfo>, CudaError> {
    if !driver_present() {
        return Err(CudaError::NoDriver);
    }
    driver::init().map_err(driver_error("cuInit"))?;
    let count = driver::device::get_count().map_err(driver_error("cuDeviceGetCount"))?;
    if count <= 0 {
        return Err(CudaError::NoDevice);
    }
    (0..count)
        .map(|i| {
            let dev = driver::device::get(i).map_err(driver_error("cuDeviceGet"))?;
            let name = driver::device::get_name(dev).map_err(driver_error("cuDeviceGetName"))?;
            let attribute = |a| {
                // SAFETY: `dev` is a valid device handle from cuDeviceGet.
                unsafe { driver::device::get_attribute(dev, a) }
                    .map_err(driver_error("cuDeviceGetAttribute"))
            };
            use sys::CUdevice_attribute as A;
            let major = attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
            let minor = attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
            // SAFETY: as above.
            let memory_bytes = unsafe { driver::device::total_mem(dev) }
                .map_err(driver_error("cuDeviceTotalMem"))?;
            Ok(GpuInfo {
                index: i as usize,
                name,
                compute_capability: (major, minor),
                memory_bytes,
            })
        })
        .collect()
}
