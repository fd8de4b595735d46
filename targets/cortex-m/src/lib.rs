//! # ferrite-cortex-m
//!
//! The Cortex-M device. It runs the portable kernels of `ferrite-cpu` (compiled for the core:
//! `thumbv7em-none-eabihf` uses the FPU for every f32 operation) through a per-op kernel table,
//! so that a core-specific kernel (the DSP extension's dual 16-bit MACs on M4/M7/M33, Helium on
//! M55) replaces the portable one for exactly the ops and dtypes it covers, chosen at compile
//! time from the target's features. A [`Profiler`] hook brackets every step; `DwtProfiler`
//! (feature `dwt`) reads the DWT cycle counter on silicon.
//!
//! No heap, no `std`, no panics on data: like every device, it relies on the core's verification
//! and checks run-time data (gather indices) itself.
#![no_std]
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod kernels;
mod profile;

pub use ferrite_cpu::CpuError;
#[cfg(feature = "dwt")]
pub use profile::DwtProfiler;
pub use profile::{NoProfiler, Profiler};

use ferrite_hal::{Capabilities, Device, Plan, Selection, ALL_OPS};

/// The Cortex-M device, with a per-step profiling hook. `OPS` selects the op kinds and element
/// types whose kernels are compiled in (a `ferrite_hal::Selection`; everything by default):
/// firmware that embeds one model passes the model's `OPS` from `ferrite pack --emit rust` and
/// links only those kernels.
#[derive(Debug, Default)]
pub struct CortexMDevice<P: Profiler = NoProfiler, const OPS: Selection = ALL_OPS> {
    profiler: P,
    max_arena_bytes: Option<usize>,
}

impl CortexMDevice<NoProfiler> {
    /// A device without profiling, with every kernel.
    pub const fn new() -> Self {
        CortexMDevice::selected()
    }
}

impl<const OPS: Selection> CortexMDevice<NoProfiler, OPS> {
    /// A device without profiling, with the kernels `OPS` selects only.
    pub const fn selected() -> Self {
        CortexMDevice {
            profiler: NoProfiler,
            max_arena_bytes: None,
        }
    }
}

impl<P: Profiler, const OPS: Selection> CortexMDevice<P, OPS> {
    /// A device that calls `profiler` around every step.
    pub fn with_profiler(profiler: P) -> Self {
        CortexMDevice {
            profiler,
            max_arena_bytes: None,
        }
    }

    /// Declares the most RAM the arena may take on this board, so a session on a model that
    /// needs more is refused with both sizes.
    pub fn with_max_arena(mut self, bytes: usize) -> Self {
        self.max_arena_bytes = Some(bytes);
        self
    }

    /// The profiler (e.g. to read its per-step cycle counts after a run).
    pub fn profiler(&self) -> &P {
        &self.profiler
    }

    /// Which kernel family this build uses per op, for reports (`"portable"` or a core's name).
    pub fn kernel_set() -> &'static str {
        kernels::KERNEL_SET
    }
}

impl<P: Profiler, const OPS: Selection> CortexMDevice<P, OPS> {
    /// Runs step `index` with its kernel, profiled.
    #[inline(always)]
    fn run_one(
        &mut self,
        index: usize,
        step: &ferrite_hal::Step<'_>,
        arena: &mut [u8],
        weights: &[u8],
    ) -> Result<(), CpuError> {
        #[cfg(feature = "defmt")]
        defmt::trace!("ferrite: step {=usize} {}", index, step.op.kind());
        self.profiler.start(index);
        let result = kernels::run_step::<OPS>(step, arena, weights);
        self.profiler.end(index);
        result
    }
}

impl<P: Profiler, const OPS: Selection> Device for CortexMDevice<P, OPS> {
    type Error = CpuError;
    type Program = ();

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            ops: ferrite_cpu::CpuDevice::supported_ops().only(OPS),
            max_arena_bytes: self.max_arena_bytes.unwrap_or(usize::MAX),
            host_arena: true,
        }
    }

    fn prepare(&mut self, _plan: &dyn Plan) -> Result<(), CpuError> {
        Ok(())
    }

    fn execute(&mut self, _: &mut (), plan: &dyn Plan, arena: &mut [u8]) -> Result<(), CpuError> {
        let weights = plan.weights();
        // Each step decoded in place into one slot of this frame (a returned one is copied
        // through a second on the way), then run.
        for index in 0..plan.len() {
            let mut slot = None;
            plan.step_into(index, &mut slot);
            let Some(step) = &slot else {
                return Err(CpuError::CorruptPlan);
            };
            self.run_one(index, step, arena, weights)?;
        }
        Ok(())
    }
}
