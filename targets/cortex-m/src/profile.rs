//! Per-step profiling hooks.

/// Called around every step of a run.
pub trait Profiler {
    /// Step `index` is about to run.
    fn start(&mut self, index: usize);
    /// Step `index` finished.
    fn end(&mut self, index: usize);
}

/// Profiles nothing (compiles away).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoProfiler;

impl Profiler for NoProfiler {
    #[inline(always)]
    fn start(&mut self, _: usize) {}
    #[inline(always)]
    fn end(&mut self, _: usize) {}
}

/// Cycles per step from the DWT cycle counter, into a caller-provided table (no heap). Steps
/// past the table's end are not recorded.
#[cfg(feature = "dwt")]
#[derive(Debug)]
pub struct DwtProfiler<'a> {
    cycles: &'a mut [u32],
    started: u32,
}

#[cfg(feature = "dwt")]
impl<'a> DwtProfiler<'a> {
    /// Records into `cycles[step]`. Enable the counter first (`DCB::enable_trace` and
    /// `DWT::enable_cycle_counter` from the `cortex-m` crate).
    pub fn new(cycles: &'a mut [u32]) -> Self {
        DwtProfiler { cycles, started: 0 }
    }

    /// Cycles of each step of the last run.
    pub fn cycles(&self) -> &[u32] {
        self.cycles
    }
}

#[cfg(feature = "dwt")]
impl Profiler for DwtProfiler<'_> {
    #[inline(always)]
    fn start(&mut self, _: usize) {
        self.started = cortex_m::peripheral::DWT::cycle_count();
    }

    #[inline(always)]
    fn end(&mut self, index: usize) {
        let now = cortex_m::peripheral::DWT::cycle_count();
        if let Some(slot) = self.cycles.get_mut(index) {
            *slot = now.wrapping_sub(self.started);
        }
    }
}
