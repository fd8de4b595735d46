//! Kernel selection per op and per core.
//!
//! [`run_step`] first offers the step to the kernels specific to the core this crate is compiled
//! for (chosen at compile time from the target triple by `build.rs`: `cfg(ferrite_dsp)` on
//! ARMv7E-M and ARMv8-M Mainline, so a build carries only its own); a core kernel that does not cover the step's op or dtype returns `None` and the portable
//! kernel of `ferrite-cpu` runs. Today every op runs the portable kernels (f32 uses the FPU on
//! cores that have one); the int8 DSP kernels for M4/M7/M33 plug in as `dsp::run_step`.

use ferrite_cpu::CpuError;
use ferrite_hal::Step;

/// The kernel family this build selects first.
#[cfg(ferrite_dsp)]
pub const KERNEL_SET: &str = "dsp+portable";
/// The kernel family this build selects first.
#[cfg(not(ferrite_dsp))]
pub const KERNEL_SET: &str = "portable";

/// Runs one step with the best kernel this build has for it, among the op kinds in mask `OPS`.
#[inline]
pub fn run_step<const OPS: u64>(
    step: &Step<'_>,
    arena: &mut [u8],
    weights: &[u8],
) -> Result<(), CpuError> {
    #[cfg(ferrite_dsp)]
    if let Some(result) = dsp::run_step::<OPS>(step, arena, weights) {
        return result;
    }
    ferrite_cpu::kernels::run_step_selected::<OPS>(step, arena, weights)
}

/// Kernels for cores with the DSP extension (Cortex-M4, M7, M33).
#[cfg(ferrite_dsp)]
#[allow(unsafe_code)]
pub mod dsp;
