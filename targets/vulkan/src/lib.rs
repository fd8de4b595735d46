//! # ferrite-vulkan
//!
//! A Vulkan compute device: the same verified `.frt` plan the CPU runs, on any GPU with a Vulkan
//! driver (and on Mesa's lavapipe, which CI uses). The Vulkan loader is loaded at run time, so
//! the crate builds and links everywhere; without a loader or a device, opening the device is a
//! typed error.
//!
//! [`Device::prepare`] does all the work once: one device-local buffer holds the whole arena at
//! the planned offsets, the weights and every step's parameter words are uploaded once, one
//! pipeline per kernel the plan uses is built, and the whole plan is recorded into one command
//! buffer with a barrier only where a step reads or overwrites an earlier step's output.
//! [`Device::execute`] copies the inputs into a host-visible staging buffer, submits the recorded
//! commands, waits on a fence (with a timeout) and copies the outputs back. No Vulkan object is
//! created per run.
//!
//! The kernels are WGSL compute shaders compiled to SPIR-V at build time by naga (pure Rust).
//! Shapes and addresses are data (a parameter buffer indexed by a push constant), never shader
//! source generated per model.
#![deny(missing_docs)]

mod buffer;
mod context;
pub mod encode;
mod error;
mod program;
pub mod shaders;

pub use context::{DeviceInfo, ValidationLog};
pub use error::VulkanError;
pub use program::{GpuTiming, Program, ProgramStats, Timing};

use context::{Context, Instance};
use ferrite_hal::{Capabilities, DType, Device, OpKind, OpSet, Plan};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How to open a Vulkan device.
#[derive(Clone, Debug)]
pub struct Options {
    /// Which physical device, in the loader's order (`vulkan:N`).
    pub index: usize,
    /// Enable the Khronos validation layer (when installed) and record its messages.
    pub validation: bool,
    /// Load this Vulkan loader library instead of the system's.
    pub loader: Option<PathBuf>,
    /// Longest wait for one inference before [`VulkanError::Timeout`].
    pub timeout: Duration,
    /// GPU timestamps recorded by programs prepared on this device.
    pub timing: Timing,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            index: 0,
            validation: false,
            loader: None,
            timeout: Duration::from_secs(10),
            timing: Timing::Off,
        }
    }
}

/// A Vulkan GPU (or lavapipe) as a Ferrite device.
pub struct VulkanDevice {
    ctx: Arc<Context>,
    timeout: Duration,
    timing: Timing,
}

impl VulkanDevice {
    /// Opens the first Vulkan device.
    pub fn new() -> Result<VulkanDevice, VulkanError> {
        Self::open(&Options::default())
    }

    /// Opens a device as `options` say.
    pub fn open(options: &Options) -> Result<VulkanDevice, VulkanError> {
        let instance = Instance::new(options.loader.as_deref(), options.validation)?;
        let ctx = Context::new(instance, options.index)?;
        Ok(VulkanDevice {
            ctx: Arc::new(ctx),
            timeout: options.timeout,
            timing: options.timing,
        })
    }

    /// Every Vulkan device the system's loader reports.
    pub fn list() -> Result<Vec<DeviceInfo>, VulkanError> {
        let instance = Instance::new(None, false)?;
        Ok(instance
            .physical_devices()?
            .into_iter()
            .enumerate()
            .map(|(i, pd)| instance.describe(i, pd))
            .collect())
    }

    /// The opened device.
    pub fn info(&self) -> &DeviceInfo {
        &self.ctx.info
    }

    /// Changes the longest wait per inference (for every program, from the next run on).
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// Whether the validation layer is active.
    pub fn validating(&self) -> bool {
        self.ctx.instance.validating()
    }

    /// Errors and warnings the validation layer reported so far.
    pub fn validation_messages(&self) -> Vec<String> {
        self.ctx.instance.log().messages()
    }

    /// The validation layer's log, readable after this device is dropped (which is when leaked
    /// Vulkan objects are reported).
    pub fn validation_log(&self) -> ValidationLog {
        self.ctx.instance.log()
    }

    /// The (op, dtype) pairs the kernels implement: every f32 op the CPU runs; data movement on
    /// 4- and 8-byte elements; byte copies of any type.
    pub fn supported_ops() -> OpSet {
        use OpKind::*;
        let float = [DType::F32];
        let mut set = OpSet::empty();
        for kind in OpKind::F32_COMPUTE {
            set = set.with(kind, &float);
        }
        for kind in OpKind::MOVEMENT {
            set = set.with(kind, &encode::WORD_DTYPES);
        }
        set.with(Copy, &DType::ALL)
            .with(ArgMax, &float)
            .with(ArgMin, &float)
            .with(Resample, &float)
            .with(Expand, &encode::WORD_DTYPES)
    }
}

impl Device for VulkanDevice {
    type Error = VulkanError;
    type Program = Program;

    fn capabilities(&self) -> Capabilities {
        let limits = &self.ctx.limits;
        let heap = self.ctx.info.memory_bytes.max(1);
        let max = (limits.max_storage_buffer_range as u64).min(heap);
        Capabilities {
            ops: Self::supported_ops(),
            max_arena_bytes: usize::try_from(max).unwrap_or(usize::MAX),
            host_arena: false,
        }
    }

    fn prepare(&mut self, plan: &dyn Plan) -> Result<Program, VulkanError> {
        Program::new(&self.ctx, plan, self.timing)
    }

    fn execute(
        &mut self,
        program: &mut Program,
        _plan: &dyn Plan,
        arena: &mut [u8],
    ) -> Result<(), VulkanError> {
        program.run(arena, self.timeout)
    }
}
