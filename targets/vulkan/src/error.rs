//! The Vulkan device's errors: each names the problem in one line and maps to an
//! [`ErrorKind`] the caller can act on.

use ash::vk;
use ferrite_hal::ErrorKind;

/// What went wrong on the Vulkan device.
#[derive(Debug, thiserror::Error)]
pub enum VulkanError {
    /// The Vulkan loader library could not be loaded.
    #[error("no Vulkan loader: {0}")]
    NoLoader(String),
    /// The loader found no Vulkan driver (ICD) at all.
    #[error(
        "no Vulkan driver found (for a CPU driver install Mesa's lavapipe: mesa-vulkan-drivers)"
    )]
    NoDriver,
    /// No physical device with the requested index.
    #[error("no Vulkan device #{requested} ({available} found)")]
    NoDevice {
        /// Index asked for.
        requested: usize,
        /// Devices present.
        available: usize,
    },
    /// The physical device has no queue family that supports compute.
    #[error("Vulkan device '{0}' has no compute queue")]
    NoComputeQueue(String),
    /// A buffer is larger than the device allows in one storage buffer or heap.
    #[error("the {what} needs {bytes} bytes, the Vulkan device allows at most {max}")]
    TooLarge {
        /// Which buffer.
        what: &'static str,
        /// Bytes needed.
        bytes: u64,
        /// Device limit.
        max: u64,
    },
    /// The device has no memory type with the properties a buffer needs.
    #[error("the Vulkan device has no memory type for the {0}")]
    NoMemoryType(&'static str),
    /// A step the device cannot encode (e.g. a work size beyond its 32-bit indexing).
    #[error("step {step} ({op}): {why}")]
    Unsupported {
        /// Step index.
        step: usize,
        /// Op name.
        op: &'static str,
        /// Why.
        why: &'static str,
    },
    /// The plan does not match what the core guarantees (a bug or a corrupt plan).
    #[error("corrupt plan: {0}")]
    CorruptPlan(&'static str),
    /// The host arena given to `execute` is smaller than the plan's arena.
    #[error("the host arena has {got} bytes, the plan needs {needed}")]
    HostArena {
        /// Bytes needed.
        needed: usize,
        /// Bytes given.
        got: usize,
    },
    /// A gather index was out of range at run time.
    #[error("a gather index is out of range")]
    IndexOutOfRange,
    /// The GPU did not finish within the timeout.
    #[error("the Vulkan device did not finish within {millis} ms")]
    Timeout {
        /// The timeout.
        millis: u64,
    },
    /// A Vulkan call failed.
    #[error("{call} failed: {result}")]
    Api {
        /// The call.
        call: &'static str,
        /// Its result code.
        result: vk::Result,
    },
}

impl VulkanError {
    /// Wraps a failed Vulkan call.
    pub(crate) fn api(call: &'static str) -> impl FnOnce(vk::Result) -> VulkanError {
        move |result| VulkanError::Api { call, result }
    }
}

impl ferrite_hal::Error for VulkanError {
    fn kind(&self) -> ErrorKind {
        match self {
            VulkanError::NoLoader(_)
            | VulkanError::NoDriver
            | VulkanError::NoDevice { .. }
            | VulkanError::NoComputeQueue(_)
            | VulkanError::NoMemoryType(_)
            | VulkanError::Unsupported { .. } => ErrorKind::Unsupported,
            VulkanError::TooLarge { .. } => ErrorKind::OutOfMemory,
            VulkanError::CorruptPlan(_) => ErrorKind::InvalidModel,
            VulkanError::HostArena { .. } | VulkanError::IndexOutOfRange => ErrorKind::InvalidInput,
            VulkanError::Timeout { .. } => ErrorKind::Timeout,
            VulkanError::Api { result, .. } => {
                match *result {
                    vk::Result::ERROR_OUT_OF_DEVICE_MEMORY
                    | vk::Result::ERROR_OUT_OF_HOST_MEMORY => ErrorKind::OutOfMemory,
                    vk::Result::ERROR_DEVICE_LOST => ErrorKind::DeviceLost,
                    vk::Result::TIMEOUT => ErrorKind::Timeout,
                    vk::Result::ERROR_INCOMPATIBLE_DRIVER
                    | vk::Result::ERROR_INITIALIZATION_FAILED => ErrorKind::Unsupported,
                    _ => ErrorKind::Other,
                }
            }
        }
    }
}
