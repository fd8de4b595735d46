//! What every CUDA program (GPU or emulated) keeps of a plan: its commands and the arena
//! ranges that cross the host boundary.

use crate::launch::Command;
use crate::lower::lower;
use crate::CudaError;
use ferrite_hal::{Location, Plan, TensorList};

/// A plan lowered once, at session creation.
pub(crate) struct Lowered {
    /// The commands, in plan order.
    pub commands: Vec<Command>,
    /// `(arena offset, bytes)` of each graph input.
    pub inputs: Vec<(usize, usize)>,
    /// `(arena offset, bytes)` of each graph output.
    pub outputs: Vec<(usize, usize)>,
    /// Arena bytes.
    pub arena_bytes: usize,
}

impl Lowered {
    /// Lowers every step of `plan`.
    pub fn new(plan: &dyn Plan) -> Result<Lowered, CudaError> {
        let mut commands = Vec::new();
        for index in 0..plan.len() {
            let step = plan
                .step(index)
                .ok_or(CudaError::CorruptPlan("missing step"))?;
            let lowered = lower(&step).map_err(|why| CudaError::Unsupported {
                step: index,
                op: step.op.kind().name(),
                why,
            })?;
            commands.extend(lowered);
        }
        Ok(Lowered {
            commands,
            inputs: arena_ranges(plan.inputs(), plan.arena_bytes())?,
            outputs: arena_ranges(plan.outputs(), plan.arena_bytes())?,
            arena_bytes: plan.arena_bytes(),
        })
    }

    /// Bytes of all inputs (the pinned input buffer).
    pub fn input_bytes(&self) -> usize {
        self.inputs.iter().map(|r| r.1).sum()
    }

    /// Bytes of all outputs (the pinned output buffer).
    pub fn output_bytes(&self) -> usize {
        self.outputs.iter().map(|r| r.1).sum()
    }
}

/// The error a run's status word reports, if any (bit 0: an index out of range; bit 1: an
/// integer division by zero).
pub(crate) fn check_status(status: u32) -> Result<(), CudaError> {
    if status & 1 != 0 {
        return Err(CudaError::IndexOutOfRange);
    }
    if status != 0 {
        return Err(CudaError::DivisionByZero);
    }
    Ok(())
}

/// Checks the caller's host arena before a run.
pub(crate) fn check_host_arena(arena: &[u8], needed: usize) -> Result<(), CudaError> {
    if arena.len() < needed {
        return Err(CudaError::HostArena {
            got: arena.len(),
            needed,
        });
    }
    Ok(())
}

fn arena_ranges(
    list: TensorList<'_>,
    arena_bytes: usize,
) -> Result<Vec<(usize, usize)>, CudaError> {
    list.iter()
        .map(|t| {
            let t = t.ok_or(CudaError::CorruptPlan("a graph input or output is absent"))?;
            match t.location {
                Location::Arena(offset)
                    if offset
                        .checked_add(t.bytes)
                        .is_some_and(|e| e <= arena_bytes) =>
                {
                    Ok((offset, t.bytes))
                }
                _ => Err(CudaError::CorruptPlan(
                    "a graph input or output is outside the arena",
                )),
            }
        })
        .collect()
}
