//! # ferrite-cpu
//!
//! The portable CPU device: f32 kernels in plain Rust that run on any target, from a Cortex-M0
//! to a desktop. It executes a verified plan inline: one kernel call per step on slices carved
//! out of the caller's arena; no preparation and no allocation on a microcontroller (with `std`,
//! the plan's records are decoded once, at `prepare`).
//!
//! Kernels rely on the core's verification (see `ferrite_hal::device`): shapes agree, operands
//! lie inside the arena or weights, outputs never partially overlap inputs. They still check data
//! that only exists at run time, such as gather indices.
#![cfg_attr(not(feature = "std"), no_std)]
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod base;
pub mod isa;
pub mod micro;
pub mod ops;
pub mod program;
pub mod steps;

pub use base::context::StepContext;
#[cfg(feature = "std")]
pub use base::context::StepMemo;
pub use base::error::CpuError;
#[cfg(feature = "threads")]
pub use program::parallel::MAX_THREADS;
#[cfg(feature = "std")]
pub use program::prepared::Prepared;

use ferrite_hal::{Capabilities, DType, Device, OpKind, OpSet, Plan, Selection, ALL_OPS};

/// The portable CPU device. `OPS` selects the op kinds and element types whose kernels are
/// compiled in (a `ferrite_hal::Selection`): everything by default; a firmware for one model
/// passes the model's `OPS` (from `ferrite pack --emit rust`) and links only those kernels.
#[derive(Clone, Copy, Debug)]
pub struct CpuDevice<const OPS: Selection = ALL_OPS> {
    /// Threads the big kernels may use (feature `threads`); 0 and 1 both mean this thread only.
    #[cfg(feature = "threads")]
    threads: usize,
    /// Whether a program may keep tensors between convolutions channel-blocked
    /// ([`layout`]; on by default).
    #[cfg(feature = "std")]
    blocking: bool,
    /// Whether 3 × 3 convolutions between blocked tensors may take Winograd's transform
    /// (on by default).
    #[cfg(feature = "std")]
    winograd: bool,
    /// Whether a program runs a composed normalization as one step (on by default).
    #[cfg(feature = "std")]
    fusion: bool,
    _private: (),
}

impl<const OPS: Selection> CpuDevice<OPS> {
    /// A CPU device with the kernels `OPS` selects only.
    pub const fn selected() -> Self {
        CpuDevice {
            #[cfg(feature = "threads")]
            threads: 1,
            #[cfg(feature = "std")]
            blocking: true,
            #[cfg(feature = "std")]
            winograd: true,
            #[cfg(feature = "std")]
            fusion: true,
            _private: (),
        }
    }

    /// The same device, its programs keeping tensors between convolutions channel-blocked
    /// (`true`, the default, where this CPU has the blocked kernels) or every tensor in the
    /// model's planar layout (`false`). Results are bit-identical either way, but for the
    /// layers [`CpuDevice::with_winograd`] speaks of.
    #[cfg(feature = "std")]
    pub const fn with_channel_blocking(self, blocking: bool) -> Self {
        CpuDevice { blocking, ..self }
    }

    /// The same device, its programs running 3 × 3 stride-1 convolutions between
    /// channel-blocked tensors by Winograd's transform F(4 × 4, 3 × 3) (`true`, the default,
    /// unless `FERRITE_CPU_WINOGRAD=off`: four times fewer multiply-adds, outputs a few
    /// roundings from the direct sums) or by the direct kernels (`false`: results bit-identical
    /// to the planar layout's).
    #[cfg(feature = "std")]
    pub const fn with_winograd(self, winograd: bool) -> Self {
        CpuDevice { winograd, ..self }
    }

    /// The same device, its programs running the steps `ferrite pack` composes a
    /// LayerNormalization or InstanceNormalization of as one step (`true`, the default: one
    /// pass over the tensor where there were ten) or step by step (`false`). Results are
    /// bit-identical either way.
    #[cfg(feature = "std")]
    pub const fn with_fusion(self, fusion: bool) -> Self {
        CpuDevice { fusion, ..self }
    }

    /// `plan` decoded once, as [`Device::prepare`] does: for a caller that runs its steps one
    /// by one ([`CpuDevice::run_prepared_step`]).
    #[cfg(feature = "std")]
    pub fn program(&self, plan: &dyn Plan) -> Prepared {
        Prepared::build(plan, self.blocking, self.fusion).with_winograd(self.winograd)
    }

    /// The same device, running the big kernels (matrix products, convolutions) on `threads`
    /// threads of a shared pool (clamped to `1..=`[`MAX_THREADS`]; 1, the default, starts
    /// no thread). Results are bit-identical to one thread: threads split a kernel's output,
    /// never a sum.
    #[cfg(feature = "threads")]
    pub const fn with_threads(self, threads: usize) -> Self {
        CpuDevice {
            threads: if threads > program::parallel::MAX_THREADS {
                program::parallel::MAX_THREADS
            } else if threads == 0 {
                1
            } else {
                threads
            },
            ..self
        }
    }

    /// Threads the big kernels may use (1 without the `threads` feature).
    pub const fn threads(&self) -> usize {
        #[cfg(feature = "threads")]
        return self.threads;
        #[cfg(not(feature = "threads"))]
        1
    }
}

impl<const OPS: Selection> CpuDevice<OPS> {
    /// Runs one verified step on this device's kernels and threads: what
    /// [`Device::execute`] does per step, for a caller that times each step (a profiler).
    pub fn run_step(
        &self,
        step: &ferrite_hal::Step<'_>,
        arena: &mut [u8],
        weights: &[u8],
    ) -> Result<(), CpuError> {
        #[cfg(feature = "threads")]
        if self.threads > 1 {
            return program::parallel::run(self.threads, |team| {
                let ctx = StepContext::default().with_team(team);
                steps::run_step_selected_in::<OPS>(ctx, step, arena, weights)
            });
        }
        steps::run_step_selected::<OPS>(step, arena, weights)
    }

    /// [`CpuDevice::run_step`] for step `position` of the plan `program` was prepared from,
    /// as the program runs it (its layouts, a fused step's operands, nothing for a step fused
    /// into the one before), with the kernel state the program keeps for it (built at its
    /// first run): what a prepared run costs per step, for a profiler.
    #[cfg(feature = "std")]
    pub fn run_prepared_step(
        &self,
        program: &mut Prepared,
        position: usize,
        step: &ferrite_hal::Step<'_>,
        arena: &mut [u8],
        weights: &[u8],
    ) -> Result<(), CpuError> {
        // The program's own form of the step where it has one (a fused convolution's operands
        // differ from the plan's).
        let Some((own, memo, kept)) = program.kept(position) else {
            return self.run_step(step, arena, weights);
        };
        #[cfg(feature = "threads")]
        if self.threads > 1 && !kept.fused_away {
            return program::parallel::run(self.threads, |team| {
                let ctx = StepContext::default().with_team(team);
                run_kept_step::<OPS>(ctx, &own, memo, kept, arena, weights)
            });
        }
        run_kept_step::<OPS>(StepContext::default(), &own, memo, kept, arena, weights)
    }
}

impl<const OPS: Selection> Default for CpuDevice<OPS> {
    fn default() -> Self {
        Self::selected()
    }
}

impl CpuDevice {
    /// A CPU device with every kernel.
    pub const fn new() -> Self {
        Self::selected()
    }

    /// Which build of the kernels runs on this machine: `"avx512"`, `"avx2"` or `"portable"`
    /// (x86-64 with `std` chooses at run time; everything else is `"portable"`).
    pub fn simd() -> &'static str {
        #[cfg(all(feature = "std", target_arch = "x86_64"))]
        {
            use crate::isa::{level, Level};
            match level() {
                Level::Avx512 => return "avx512",
                Level::Avx2 => return "avx2",
                Level::Portable => {}
            }
        }
        "portable"
    }

    /// The (op, dtype) pairs the portable kernels implement.
    pub fn supported_ops() -> OpSet {
        use OpKind::*;
        let float = [DType::F32];
        let mut set = OpSet::empty();
        for kind in OpKind::F32_COMPUTE {
            set = set.with(kind, &float);
        }
        for kind in OpKind::MOVEMENT {
            set = set.with(kind, &DType::ALL);
        }
        let set = set
            .with(Copy, &DType::ALL)
            .with(Quantize, &float)
            .with(
                Dequantize,
                &[DType::I8, DType::U8, DType::I16, DType::U16, DType::I32],
            )
            .with(DynamicQuantize, &float)
            .with(ArgMax, &float)
            .with(ArgMin, &float)
            .with(Compare, &[DType::F32, DType::Bool])
            .with(Compare, &DType::INTEGERS)
            .with(Binary, &DType::INTEGERS)
            .with(Convert, &DType::ALL)
            .with(Resample, &float)
            .with(Expand, &DType::ALL)
            .with(GatherElements, &DType::ALL)
            .with(ScatterElements, &DType::ALL)
            .with(GatherNd, &DType::ALL)
            .with(ScatterNd, &DType::ALL)
            .with(TopK, &float)
            .with(TopK, &DType::INTEGERS)
            .with(CumSum, &[DType::F32, DType::I32, DType::I64])
            .with(Recurrent, &float)
            .with(Det, &float)
            .with(Dft, &float)
            .with(TreeEnsemble, &float)
            .with(Logical, &[DType::Bool])
            .with(Not, &[DType::Bool])
            .with(Classify, &float)
            .with(Trilu, &DType::ALL)
            .with(Where, &[DType::Bool])
            .with(MaxPool, &[DType::I8, DType::U8, DType::I16]);
        #[cfg(feature = "quantized")]
        let set = OpKind::INTEGER
            .iter()
            .fold(set, |set, &kind| set.with(kind, &[DType::I8, DType::U8]))
            // TFLite's 16 × 8 scheme: int16 activations, int8 weights.
            .with(QConv, &[DType::I16])
            .with(QGemm, &[DType::I16])
            .with(QGlobalAvgPool, &[DType::I16])
            .with(QAdd, &[DType::I16]);
        set
    }
}

impl<const OPS: Selection> Device for CpuDevice<OPS> {
    type Error = CpuError;
    /// On a host, the plan decoded once ([`Prepared`]); nothing on a microcontroller.
    #[cfg(feature = "std")]
    type Program = Prepared;
    /// On a host, the plan decoded once; nothing on a microcontroller.
    #[cfg(not(feature = "std"))]
    type Program = ();

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            ops: CpuDevice::supported_ops().only(OPS),
            max_arena_bytes: usize::MAX,
            host_arena: true,
        }
    }

    #[cfg(feature = "std")]
    fn prepare(&mut self, plan: &dyn Plan) -> Result<Prepared, CpuError> {
        Ok(self.program(plan))
    }

    #[cfg(not(feature = "std"))]
    fn prepare(&mut self, _plan: &dyn Plan) -> Result<(), CpuError> {
        Ok(())
    }

    #[cfg(feature = "std")]
    fn execute(
        &mut self,
        program: &mut Prepared,
        plan: &dyn Plan,
        arena: &mut [u8],
    ) -> Result<(), CpuError> {
        let mut run = |ctx: StepContext<'_>, arena: &mut [u8]| {
            let weights = plan.weights();
            let each = |step: &ferrite_hal::Step<'_>, memo: &mut StepMemo, kept| {
                run_kept_step::<OPS>(ctx, step, memo, kept, arena, weights)
            };
            match program.run_each(plan, each) {
                Some(result) => result,
                None => run_plan::<OPS>(ctx, plan, arena),
            }
        };
        #[cfg(feature = "threads")]
        if self.threads > 1 {
            return program::parallel::run(self.threads, |team| {
                run(StepContext::default().with_team(team), arena)
            });
        }
        run(StepContext::default(), arena)
    }

    #[cfg(not(feature = "std"))]
    fn execute(&mut self, _: &mut (), plan: &dyn Plan, arena: &mut [u8]) -> Result<(), CpuError> {
        run_plan::<OPS>(StepContext::default(), plan, arena)
    }
}

/// A step decoded beforehand ([`Prepared`]) in `ctx` (the run's threads), with the state its
/// kernels keep and what the program planned for it: nothing for a step fused into one before
/// it, one kernel for a chain it begins.
#[cfg(feature = "std")]
fn run_kept_step<const OPS: Selection>(
    ctx: StepContext<'_>,
    step: &ferrite_hal::Step<'_>,
    memo: &mut StepMemo,
    kept: program::prepared::Kept,
    arena: &mut [u8],
    weights: &[u8],
) -> Result<(), CpuError> {
    if kept.fused_away {
        return Ok(());
    }
    if let Some(normalization) = kept.normalization {
        return program::normalization::run(step, normalization, arena, weights);
    }
    let ctx = ctx
        .with_memo(memo)
        .with_layout(kept.layout, kept.residual, kept.winograd);
    steps::run_step_selected_in::<OPS>(ctx, step, arena, weights)
}

/// Every step of `plan`, in order, in `ctx` (inlined into `execute`, whose loop it is on a
/// microcontroller, where the context is zero-sized).
#[inline(always)]
fn run_plan<const OPS: Selection>(
    ctx: StepContext<'_>,
    plan: &dyn Plan,
    arena: &mut [u8],
) -> Result<(), CpuError> {
    let weights = plan.weights();
    for index in 0..plan.len() {
        let step = plan.step(index).ok_or(CpuError::CorruptPlan)?;
        steps::run_step_selected_in::<OPS>(ctx, &step, arena, weights)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The integer ops are listed exactly when their kernels are built (`quantized`), so a
    /// float-only firmware refuses an int8 model at load instead of failing mid-inference.
    #[test]
    fn integer_ops_follow_the_quantized_feature() {
        let ops = CpuDevice::supported_ops();
        for kind in OpKind::INTEGER {
            let listed = ops.contains(kind, DType::I8) && ops.contains(kind, DType::U8);
            assert_eq!(listed, cfg!(feature = "quantized"), "{}", kind.name());
        }
        assert!(ops.contains(OpKind::Quantize, DType::F32));
        assert!(ops.contains(OpKind::DynamicQuantize, DType::F32));
    }

    #[cfg(feature = "threads")]
    #[test]
    fn thread_counts_are_clamped() {
        let counts = [0, 1, 5, MAX_THREADS, 10_000].map(|n| CpuDevice::new().with_threads(n));
        assert_eq!(
            counts.map(|d| d.threads()),
            [1, 1, 5, MAX_THREADS, MAX_THREADS]
        );
        assert_eq!(<CpuDevice>::default().threads(), 1);
    }
}
