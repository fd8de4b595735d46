//! Kernel selection per op and per core.
//!
//! [`run_step`] first offers the step to the kernels specific to the core this crate is compiled
//! for (chosen at compile time from the target triple by `build.rs`: `cfg(ferrite_dsp)` on
//! ARMv7E-M and ARMv8-M Mainline, so a build carries only its own); a core kernel that does not
//! cover the step's op or dtype returns `None` and the portable kernel of `ferrite-cpu` runs
//! (f32 uses the FPU on cores that have one). The int8 DSP kernels of the M4, M7 and M33
//! (`dsp::run_step`) run out of line, the portable ones inlined into the run loop.

use ferrite_cpu::CpuError;
use ferrite_hal::{Selection, Step};

/// The kernel family this build selects first.
#[cfg(ferrite_dsp)]
pub const KERNEL_SET: &str = "dsp+portable";
/// The kernel family this build selects first.
#[cfg(not(ferrite_dsp))]
pub const KERNEL_SET: &str = "portable";

/// Whether a build selecting `OPS` runs some steps with out-of-line kernels: its integer
/// convolutions and products, on a core with the DSP kernels.
pub const fn runs_out_of_line(ops: Selection) -> bool {
    cfg!(ferrite_dsp)
        && (ferrite_hal::selects(ops, ferrite_hal::OpKind::QConv)
            || ferrite_hal::selects(ops, ferrite_hal::OpKind::QGemm))
}

/// Runs one step with the best kernel this build has for it, among those `OPS` selects.
#[inline]
pub fn run_step<const OPS: Selection>(
    step: &Step<'_>,
    arena: &mut [u8],
    weights: &[u8],
) -> Result<(), CpuError> {
    #[cfg(ferrite_dsp)]
    if runs_out_of_line(OPS) {
        if let Some(result) = dsp::run_step::<OPS>(step, arena, weights) {
            return result;
        }
        return portable_after_dsp::<OPS>(step, arena, weights);
    }
    // A float model (or a core without DSP): the portable kernels, inlined.
    ferrite_cpu::steps::run_step_selected::<OPS>(step, arena, weights)
}

/// The portable kernels, for the steps the DSP kernels did not take: every int8 QConv and QGemm
/// ran there, so their portable int8 kernels are not linked. Out of line, so that the inference
/// loop's frame does not hold this dispatch's locals while a DSP kernel runs.
#[cfg(ferrite_dsp)]
#[inline(never)]
fn portable_after_dsp<const OPS: Selection>(
    step: &Step<'_>,
    arena: &mut [u8],
    weights: &[u8],
) -> Result<(), CpuError> {
    ferrite_cpu::steps::run_step_after::<OPS, { dsp::COVERED_INT8 }>(step, arena, weights)
}

/// Kernels for cores with the DSP extension (Cortex-M4, M7, M33).
#[cfg(ferrite_dsp)]
#[allow(unsafe_code)]
pub mod dsp;
