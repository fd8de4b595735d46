//! The entry points: [`run_step`] carves a step's operands out of the arena and runs it with
//! the widest build this CPU has; [`run_step_selected`] and [`run_step_after`] are the builds a
//! firmware links; [`step_operands`] and [`step_operands_and_scratch`] carve a step for a device
//! crate that brings kernels of its own.

use super::dispatch::run_step_inline;
use crate::base::context::StepContext;
use crate::base::memory::{carve, span, Readable};
use crate::CpuError;
use ferrite_hal::{Selection, Step, ALL_OPS};

/// Runs one verified step on `arena` (tensors at their planned offsets) and `weights`, as a
/// lone step ([`StepContext::default`]: nothing kept, planar tensors, one thread).
///
/// With `std` on x86-64 the kernels are also compiled for AVX2+FMA (they are inlined into one
/// step function built both ways) and that build is chosen at run time (`isa::level`).
pub fn run_step(step: &Step<'_>, arena: &mut [u8], weights: &[u8]) -> Result<(), CpuError> {
    run_step_in(StepContext::default(), step, arena, weights)
}

/// [`run_step`] in `ctx`: a prepared program's step, with the state, layouts and threads the
/// program hands it.
pub fn run_step_in(
    ctx: StepContext<'_>,
    step: &Step<'_>,
    arena: &mut [u8],
    weights: &[u8],
) -> Result<(), CpuError> {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    if crate::isa::level() >= crate::isa::Level::Avx2 {
        // SAFETY: the AVX2 level runs only where the CPU has AVX2 and FMA.
        #[allow(unsafe_code)]
        return unsafe { run_step_avx2(ctx, step, arena, weights) };
    }
    run_step_inline::<ALL_OPS, 0>(ctx, step, arena, weights)
}

/// [`run_step`] with only the kernels of the op kinds in mask `OPS` compiled in
/// (`ferrite_hal::op_mask`; `ferrite pack --emit rust` writes a model's as `OPS`): a firmware
/// that runs one model links just its kernels. Other kinds return [`CpuError::Unsupported`]
/// (a device built so does not list them, so the core refuses such a model at load). The
/// portable build; x86-64 SIMD dispatch is for [`ALL_OPS`].
pub fn run_step_selected<const OPS: Selection>(
    step: &Step<'_>,
    arena: &mut [u8],
    weights: &[u8],
) -> Result<(), CpuError> {
    run_step_selected_in::<OPS>(StepContext::default(), step, arena, weights)
}

/// [`run_step_selected`] in `ctx` (see [`run_step_in`]).
pub fn run_step_selected_in<const OPS: Selection>(
    ctx: StepContext<'_>,
    step: &Step<'_>,
    arena: &mut [u8],
    weights: &[u8],
) -> Result<(), CpuError> {
    if OPS == ALL_OPS {
        return run_step_in(ctx, step, arena, weights);
    }
    run_step_inline::<OPS, 0>(ctx, step, arena, weights)
}

/// [`run_step_selected`] for a device that runs the int8 (int8 in, int8 out) steps of the
/// kinds in `COVERED_INT8` with kernels of its own: their portable int8 kernels are left out
/// (a step that reaches them is [`CpuError::Unsupported`]). On a host, [`ALL_OPS`] keeps the
/// one shared build of every kernel ([`run_step`], with its SIMD builds); a microcontroller's
/// every-kernel firmware has this one build, without the covered kernels.
#[inline(always)]
pub fn run_step_after<const OPS: Selection, const COVERED_INT8: Selection>(
    step: &Step<'_>,
    arena: &mut [u8],
    weights: &[u8],
) -> Result<(), CpuError> {
    if OPS == ALL_OPS && cfg!(feature = "std") {
        return run_step(step, arena, weights);
    }
    run_step_inline::<OPS, COVERED_INT8>(StepContext::default(), step, arena, weights)
}

/// [`run_step_inline`] with every kernel built for AVX2 and FMA (std, x86-64).
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[target_feature(enable = "avx2,fma")]
#[allow(unsafe_code)]
unsafe fn run_step_avx2(
    ctx: StepContext<'_>,
    step: &Step<'_>,
    arena: &mut [u8],
    weights: &[u8],
) -> Result<(), CpuError> {
    run_step_inline::<ALL_OPS, 0>(ctx, step, arena, weights)
}

/// The bytes of a step's first `N` inputs (none may be the output itself) and of its output,
/// carved out of the arena without `unsafe`: for device crates that bring kernels of their own
/// for some ops (the Cortex-M DSP kernels) and reuse this crate's checks.
pub fn step_operands<'x, const N: usize>(
    step: &Step<'_>,
    arena: &'x mut [u8],
    weights: &'x [u8],
) -> Result<([&'x [u8]; N], &'x mut [u8]), CpuError> {
    let out_desc = step.outputs.get(0).ok_or(CpuError::CorruptPlan)?;
    let out_span = span(&out_desc).ok_or(CpuError::CorruptPlan)?;
    let (view, out, _) = carve(arena, weights, out_span, None)?;
    let mut inputs: [&'x [u8]; N] = [&[]; N];
    for (i, slot) in inputs.iter_mut().enumerate() {
        let t = step.inputs.get(i).ok_or(CpuError::CorruptPlan)?;
        *slot = view.bytes(&t)?;
    }
    Ok((inputs, out))
}

/// [`step_operands`] plus the step's arena scratch (empty when it has none). Out of line: the
/// integer kernels that call it share one copy, and its frame is gone before theirs grows.
#[allow(clippy::type_complexity)]
#[inline(never)]
pub fn step_operands_and_scratch<'x, const N: usize>(
    step: &Step<'_>,
    arena: &'x mut [u8],
    weights: &'x [u8],
) -> Result<([&'x [u8]; N], &'x mut [u8], &'x mut [u8]), CpuError> {
    let out_desc = step.outputs.get(0).ok_or(CpuError::CorruptPlan)?;
    let out_span = span(&out_desc).ok_or(CpuError::CorruptPlan)?;
    let scratch_span = step.scratch.as_ref().and_then(span);
    let (view, out, scratch) = carve(arena, weights, out_span, scratch_span)?;
    let mut inputs: [&'x [u8]; N] = [&[]; N];
    for (i, slot) in inputs.iter_mut().enumerate() {
        *slot = input_bytes(step, &view, i)?;
    }
    Ok((inputs, out, scratch.unwrap_or(&mut [])))
}

/// The bytes of input `i` of `step`. Out of line, so that the callers' frames hold no tensor
/// descriptor (the deepest stack of an int8 firmware runs through them).
#[inline(never)]
fn input_bytes<'x>(step: &Step<'_>, view: &Readable<'x>, i: usize) -> Result<&'x [u8], CpuError> {
    let t = step.inputs.get(i).ok_or(CpuError::CorruptPlan)?;
    view.bytes(&t)
}
