//! The `null` device: accepts every plan and computes nothing.
//!
//! It is the template for a new backend (every trait item, nothing else) and the core's test
//! double: it counts what the core asked of it.

use crate::{Capabilities, Device, OpSet, Plan};
use core::convert::Infallible;

/// A device that does nothing and counts calls.
#[derive(Clone, Debug, Default)]
pub struct NullDevice {
    /// Number of `prepare` calls.
    pub prepared: usize,
    /// Number of `execute` calls.
    pub executed: usize,
    /// Steps seen over all `execute` calls.
    pub steps_seen: usize,
}

impl Device for NullDevice {
    type Error = Infallible;
    type Program = ();

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            ops: OpSet::all(),
            max_arena_bytes: usize::MAX,
            host_arena: true,
        }
    }

    fn prepare(&mut self, _plan: &dyn Plan) -> Result<(), Infallible> {
        self.prepared += 1;
        Ok(())
    }

    fn execute(
        &mut self,
        _: &mut (),
        plan: &dyn Plan,
        _arena: &mut [u8],
    ) -> Result<(), Infallible> {
        self.executed += 1;
        self.steps_seen += (0..plan.len()).filter(|&i| plan.step(i).is_some()).count();
        Ok(())
    }
}
