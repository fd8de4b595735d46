//! The CUDA device's errors: each a one-line message with a [`ErrorKind`].

use cudarc::driver::{result::DriverError, sys::CUresult};
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
    /// `cuda:N` names a GPU that does not exist.
    #[error("no CUDA device #{requested} ({available} found)")]
    NoSuchDevice {
        /// The ordinal asked for.
        requested: usize,
        /// How many there are.
        available: usize,
    },
    /// `libnvrtc` (the CUDA runtime compiler) cannot be opened.
    #[error("the CUDA runtime compiler (libnvrtc) is not installed")]
    NoCompiler,
    /// A driver call failed.
    #[error("CUDA driver error in {call}: {message}")]
    Driver {
        /// The call.
        call: &'static str,
        /// The driver's name and description of the error.
        message: String,
        /// What it means for the caller.
        kind: ErrorKind,
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
    /// The session's device memory exceeds what the GPU has free.
    #[error("the session needs {needed} bytes of GPU memory, the GPU has {free} bytes free")]
    OutOfMemory {
        /// Arena + weights + status word.
        needed: usize,
        /// Free device memory when the session was prepared.
        free: usize,
    },
    /// A step the CUDA kernels cannot run (the capabilities leave its op out, so a session
    /// normally refuses the model before this).
    #[error("step {step} ({op}): {why}")]
    Unsupported {
        /// Step index.
        step: usize,
        /// Op name.
        op: &'static str,
        /// Why.
        why: &'static str,
    },
    /// The plan is inconsistent with itself (the core verifies plans, so this is a bug).
    #[error("corrupt plan: {0}")]
    CorruptPlan(&'static str),
    /// The host arena handed to a run is smaller than the plan's.
    #[error("the host arena has {got} bytes, the plan needs {needed}")]
    HostArena {
        /// Its length.
        got: usize,
        /// The plan's arena bytes.
        needed: usize,
    },
    /// A gather or resample index in the run's data is out of range.
    #[error("a gather index is out of range")]
    IndexOutOfRange,
    /// An integer division or remainder by zero in the run's data.
    #[error("integer division by zero")]
    DivisionByZero,
    /// A run did not finish in time; the program waits for it before the next run.
    #[error("the CUDA device did not finish within {millis} ms")]
    Timeout {
        /// The limit.
        millis: u128,
    },
    /// The host emulator refused a launch (a lowering that disagrees with a kernel signature).
    #[error("emulated launch of {kernel}: {why}")]
    Emulator {
        /// The kernel.
        kernel: &'static str,
        /// What was wrong.
        why: String,
    },
}

impl CudaError {
    /// A driver error from `call`, with the driver's own name for it.
    pub(crate) fn driver(call: &'static str, e: DriverError) -> CudaError {
        let name = e
            .error_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|_| format!("{:?}", e.0));
        let what = e
            .error_string()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let kind = match e.0 {
            CUresult::CUDA_ERROR_OUT_OF_MEMORY => ErrorKind::OutOfMemory,
            CUresult::CUDA_ERROR_LAUNCH_TIMEOUT => ErrorKind::Timeout,
            CUresult::CUDA_ERROR_ILLEGAL_ADDRESS
            | CUresult::CUDA_ERROR_LAUNCH_FAILED
            | CUresult::CUDA_ERROR_ECC_UNCORRECTABLE
            | CUresult::CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION => ErrorKind::DeviceLost,
            CUresult::CUDA_ERROR_NO_DEVICE | CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU => {
                ErrorKind::Unsupported
            }
            _ => ErrorKind::Other,
        };
        CudaError::Driver {
            call,
            message: if what.is_empty() {
                name
            } else {
                format!("{name} ({what})")
            },
            kind,
        }
    }

    /// `map_err` adapter for [`CudaError::driver`].
    pub(crate) fn during(call: &'static str) -> impl Fn(DriverError) -> CudaError {
        move |e| CudaError::driver(call, e)
    }
}

impl ferrite_hal::Error for CudaError {
    fn kind(&self) -> ErrorKind {
        match self {
            CudaError::NoDriver
            | CudaError::NoDevice
            | CudaError::NoSuchDevice { .. }
            | CudaError::NoCompiler
            | CudaError::Unsupported { .. } => ErrorKind::Unsupported,
            CudaError::Driver { kind, .. } => *kind,
            CudaError::OutOfMemory { .. } => ErrorKind::OutOfMemory,
            CudaError::CorruptPlan(_) => ErrorKind::InvalidModel,
            CudaError::HostArena { .. }
            | CudaError::IndexOutOfRange
            | CudaError::DivisionByZero => ErrorKind::InvalidInput,
            CudaError::Timeout { .. } => ErrorKind::Timeout,
            CudaError::Compile { .. } | CudaError::Emulator { .. } => ErrorKind::Other,
        }
    }
}
