//! Kernel state kept per prepared step, on a host (`std`): what a kernel works out from a
//! step's weights and geometry alone (packed weight words, per-channel requantization lanes,
//! padding shuffles, gather tables, scratch planes) is built at the step's first run and kept
//! with the [`crate::Prepared`] program, so later runs only compute. onnxruntime prepacks
//! weights at session creation in the same spirit; here the first inference pays instead.
//!
//! The state travels by a thread-local slot: the run loop moves the step's state in before
//! the step and back after it ([`with`]), and the kernel takes it by a key (`take`, then
//! `keep`) that names everything the state was built from (geometry, operand addresses and lengths): a
//! different key rebuilds it. Outside a prepared run (a lone `run_step`) nothing is kept.

use core::cell::{Cell, RefCell};
use std::any::Any;
use std::boxed::Box;

/// One step's kept kernel state (empty until the step's kernel keeps something).
#[derive(Default)]
pub struct StepMemo(Option<Box<dyn Any + Send + Sync>>);

impl core::fmt::Debug for StepMemo {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(if self.0.is_some() {
            "StepMemo(kept)"
        } else {
            "StepMemo(empty)"
        })
    }
}

std::thread_local! {
    /// The running step's state while [`with`] runs it.
    static CURRENT: RefCell<Option<Box<dyn Any + Send + Sync>>> = const { RefCell::new(None) };
    /// Whether a prepared step is running on this thread (so [`keep`] keeps).
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
}

/// Puts the step's state back and ends the step, also if its kernel unwinds.
struct Running<'m>(&'m mut StepMemo);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0 .0 = CURRENT.take();
        ACTIVE.set(false);
    }
}

/// Runs `step` (one step's kernels) with `memo` as its kept state: a prepared program's run
/// loop does this for every step; benchmarks and tests of a lone kernel call do it to run the
/// kernel as a program does (its state built at the first call, then reused).
pub fn with<R>(memo: &mut StepMemo, step: impl FnOnce() -> R) -> R {
    CURRENT.set(memo.0.take());
    ACTIVE.set(true);
    let _running = Running(memo);
    step()
}

/// A step's state taken out of its slot ([`take`]) while its kernel runs; [`keep`] puts it
/// back. (Not a closure: the kernel's code stays in its caller, compiled with the caller's
/// instruction set.)
pub(crate) struct Kept<K, T>(Box<(K, T)>);

impl<K, T> Kept<K, T> {
    /// The state.
    #[inline(always)]
    pub(crate) fn state(&mut self) -> &mut T {
        &mut self.0 .1
    }
}

/// The running step's kept `T` for `key`, taken out of its slot: built by `build` at the
/// step's first run or when the key differs from the kept one (outside a prepared step, built
/// for this call).
#[inline(always)]
pub(crate) fn take<K, T>(key: K, build: impl FnOnce() -> T) -> Kept<K, T>
where
    K: PartialEq + Send + Sync + 'static,
    T: Send + Sync + 'static,
{
    let kept = match ACTIVE.get() {
        true => CURRENT
            .take()
            .and_then(|state| state.downcast::<(K, T)>().ok()),
        false => None,
    };
    Kept(match kept {
        Some(entry) if entry.0 == key => entry,
        _ => Box::new((key, build())),
    })
}

/// Puts a taken state back for the step's next run (dropped outside a prepared step).
#[inline(always)]
pub(crate) fn keep<K, T>(kept: Kept<K, T>)
where
    K: PartialEq + Send + Sync + 'static,
    T: Send + Sync + 'static,
{
    if ACTIVE.get() {
        CURRENT.set(Some(kept.0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A prepared step builds its state once and reuses it while the key holds; a new key
    /// rebuilds; outside a prepared step every call builds.
    #[test]
    fn state_is_built_once_per_key() {
        let builds = Cell::new(0);
        let build = || {
            builds.set(builds.get() + 1);
            std::vec![1u8, 2, 3]
        };
        let mut memo = StepMemo::default();
        let run = |key: u32| {
            let mut kept = take(key, build);
            let sum = kept.state().iter().sum::<u8>();
            keep(kept);
            sum
        };
        for _ in 0..3 {
            assert_eq!(with(&mut memo, || run(7)), 6);
        }
        assert_eq!(builds.get(), 1);
        with(&mut memo, || run(8));
        assert_eq!(builds.get(), 2);
        // Another state type under the same key is another state.
        with(&mut memo, || keep(take(8u32, || 5u64)));
        with(&mut memo, || run(8));
        assert_eq!(builds.get(), 3);
        run(8);
        run(8);
        assert_eq!(builds.get(), 5);
        assert!(!ACTIVE.get());
    }
}
