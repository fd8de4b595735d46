//! What a running program hands the kernels of one step, passed down as an argument: the state
//! the step's kernels keep between runs, the layouts of its tensors, and the threads its kernels
//! may split work over. The program (`crate::program`) decides all three once and owns the
//! state; a kernel only reads its context. Without `std` the context is zero-sized: a
//! microcontroller's kernels take it and it costs nothing.

#[cfg(feature = "std")]
use crate::base::blocking::Blocking;
#[cfg(feature = "threads")]
use crate::base::parts::Fork;
#[cfg(feature = "std")]
use core::cell::Cell;
use core::marker::PhantomData;
#[cfg(feature = "std")]
use ferrite_hal::Activation;
#[cfg(feature = "std")]
use std::any::Any;
#[cfg(feature = "std")]
use std::boxed::Box;
#[cfg(feature = "std")]
use std::vec::Vec;

/// One step's kept kernel state (empty until the step's kernel keeps something): what a
/// kernel works out from a step's weights and geometry alone (packed weight words, per-channel
/// requantization lanes, padding shuffles, gather tables) is built at the step's first run and
/// kept with the [`crate::Prepared`] program, so later runs only compute. onnxruntime prepacks
/// weights at session creation in the same spirit; here the first inference pays instead.
#[cfg(feature = "std")]
#[derive(Default)]
pub struct StepMemo(Option<Box<dyn Any + Send + Sync>>);

#[cfg(feature = "std")]
impl core::fmt::Debug for StepMemo {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(if self.0.is_some() {
            "StepMemo(kept)"
        } else {
            "StepMemo(empty)"
        })
    }
}

/// The context of one step's run (see the module). [`StepContext::default`] is a lone step's:
/// nothing kept, every tensor planar, no Winograd transform, one thread.
#[derive(Clone, Copy, Default)]
pub struct StepContext<'a> {
    /// The step's kept state, while it runs (a prepared program's step; none for a lone step,
    /// whose kernels build what they need for the call).
    #[cfg(feature = "std")]
    memo: Option<&'a Cell<Option<Box<dyn Any + Send + Sync>>>>,
    /// Whether the step's first input and output are channel-blocked.
    #[cfg(feature = "std")]
    layout: Blocking,
    /// The activation of the residual Add fused into the step's convolution, if one is.
    #[cfg(feature = "std")]
    residual: Option<Activation>,
    /// Whether the step's 3 × 3 convolutions may take Winograd's transform.
    #[cfg(feature = "std")]
    winograd: bool,
    /// The threads the step's kernels may split work over (none: this thread alone).
    #[cfg(feature = "threads")]
    team: Option<&'a dyn Fork>,
    _life: PhantomData<&'a ()>,
}

#[cfg(feature = "std")]
impl<'a> StepContext<'a> {
    /// This context with `memo` as the step's kept state: a prepared program's run loop passes
    /// each step its own; benchmarks and tests of a lone kernel call pass one to run the kernel
    /// as a program does (its state built at the first call, then reused).
    pub fn with_memo(self, memo: &'a mut StepMemo) -> Self {
        StepContext {
            memo: Some(Cell::from_mut(&mut memo.0)),
            ..self
        }
    }

    /// This context with the step's layouts, its fused residual Add's activation and whether
    /// it may take Winograd's transform (a program's plan for the step).
    pub(crate) fn with_layout(
        self,
        layout: Blocking,
        residual: Option<Activation>,
        winograd: bool,
    ) -> Self {
        StepContext {
            layout,
            residual,
            winograd,
            ..self
        }
    }

    /// Whether the step's first input and output are channel-blocked.
    pub(crate) fn layout(&self) -> Blocking {
        self.layout
    }

    /// The activation of the residual Add fused into the step's convolution (its other operand
    /// is then the step's input 3), if one is.
    pub(crate) fn residual(&self) -> Option<Activation> {
        self.residual
    }

    /// Whether the step's 3 × 3 convolutions may take Winograd's transform (between blocked
    /// tensors, rounding differently from the direct kernels): a program's choice, off for a
    /// lone step.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(crate) fn winograd(&self) -> bool {
        self.winograd
    }

    /// The step's kept `T` for `key`, taken out of its slot: built by `build` at the step's
    /// first run or when the key differs from the kept one (for a lone step, built for this
    /// call). [`StepContext::keep`] puts it back.
    #[inline(always)]
    pub(crate) fn take<K, T>(&self, key: K, build: impl FnOnce() -> T) -> Kept<K, T>
    where
        K: PartialEq + Send + Sync + 'static,
        T: Send + Sync + 'static,
    {
        let kept = self
            .memo
            .and_then(Cell::take)
            .and_then(|state| state.downcast::<(K, T)>().ok());
        Kept(match kept {
            Some(entry) if entry.0 == key => entry,
            _ => Box::new((key, build())),
        })
    }

    /// Puts a taken state back for the step's next run (dropped for a lone step).
    #[inline(always)]
    pub(crate) fn keep<K, T>(&self, kept: Kept<K, T>)
    where
        K: PartialEq + Send + Sync + 'static,
        T: Send + Sync + 'static,
    {
        if let Some(slot) = self.memo {
            slot.set(Some(kept.0));
        }
    }

    /// Threads the step's kernels may use: 1 unless the program runs with more.
    pub(crate) fn threads(&self) -> usize {
        #[cfg(feature = "threads")]
        if let Some(team) = self.team {
            return team.threads();
        }
        1
    }

    /// Calls `f` on every part: shared with the program's threads when there are several
    /// parts and threads, else one after another on this thread. A part gets no context: the
    /// kernels it calls run as a lone step's, on one thread (a part is already a share).
    pub(crate) fn for_each<T: Send>(&self, parts: Vec<T>, f: impl Fn(T) + Sync) {
        #[cfg(feature = "threads")]
        if let Some(team) = self
            .team
            .filter(|team| team.threads() > 1 && parts.len() > 1)
        {
            return crate::base::parts::for_each(team, parts, f);
        }
        parts.into_iter().for_each(f);
    }
}

#[cfg(feature = "threads")]
impl<'a> StepContext<'a> {
    /// This context with `team` (none: this thread alone) as the threads its kernels may use.
    pub(crate) fn with_team(self, team: Option<&'a dyn Fork>) -> Self {
        StepContext { team, ..self }
    }
}

/// A step's state taken out of its slot ([`StepContext::take`]) while its kernel runs;
/// [`StepContext::keep`] puts it back. (Not a closure: the kernel's code stays in its caller,
/// compiled with the caller's instruction set.)
#[cfg(feature = "std")]
pub(crate) struct Kept<K, T>(Box<(K, T)>);

#[cfg(feature = "std")]
impl<K, T> Kept<K, T> {
    /// The state.
    #[inline(always)]
    pub(crate) fn state(&mut self) -> &mut T {
        &mut self.0 .1
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;

    /// A prepared step builds its state once and reuses it while the key holds; a new key
    /// rebuilds; a lone step builds at every call.
    #[test]
    fn state_is_built_once_per_key() {
        let builds = Cell::new(0);
        let build = || {
            builds.set(builds.get() + 1);
            std::vec![1u8, 2, 3]
        };
        let mut memo = StepMemo::default();
        let run = |ctx: StepContext<'_>, key: u32| {
            let mut kept = ctx.take(key, build);
            let sum = kept.state().iter().sum::<u8>();
            ctx.keep(kept);
            sum
        };
        for _ in 0..3 {
            assert_eq!(run(StepContext::default().with_memo(&mut memo), 7), 6);
        }
        assert_eq!(builds.get(), 1);
        run(StepContext::default().with_memo(&mut memo), 8);
        assert_eq!(builds.get(), 2);
        // Another state type under the same key is another state.
        let ctx = StepContext::default().with_memo(&mut memo);
        ctx.keep(ctx.take(8u32, || 5u64));
        run(StepContext::default().with_memo(&mut memo), 8);
        assert_eq!(builds.get(), 3);
        run(StepContext::default(), 8);
        run(StepContext::default(), 8);
        assert_eq!(builds.get(), 5);
    }
}
