//! Per-op rules checked at load: operand counts, dtypes, shapes and memory overlap.
//!
//! One module per op family (`ferrite_hal::op::Family`, a column of hal's op table): its
//! `check` holds the rule of each of the family's kinds, and [`check_step`] dispatches by
//! family. What the families share (dtype, window and operand helpers) is in `common.rs`; the
//! memory-overlap rule every step obeys is here.
//!
//! After these pass, a device may index its tensors without further checks: every shape a kernel
//! derives from the op's parameters agrees with the sizes the plan gave the tensors.

#[macro_use]
mod common;

mod conv;
mod elementwise;
mod indexing;
mod logic;
mod matmul;
mod movement;
mod pool;
mod quantize;
mod recurrent;
mod reduce;

use crate::error::why;
use common::{ensure, Fetched, Rule};
use ferrite_hal::op::Family;
use ferrite_hal::{Location, Selection, Step, TensorDesc, TensorList};

/// Checks one step against its op's rules.
// Out of line: run once per load or inference, so inlining only copies it (flash).
#[inline(never)]
pub(crate) fn check_step<const OPS: Selection>(step: &Step<'_>) -> Rule {
    check_overlap(step)?;
    if let Some(a) = step.op.activation() {
        ensure(
            a.is_fusable(),
            "a fused activation must be Relu, LeakyRelu, Clip, Sigmoid, Tanh, HardSigmoid or HardSwish",
        )?;
    }
    let fetched = &Fetched::of(step);
    match step.op.kind().family() {
        Family::Conv => conv::check::<OPS>(step, fetched),
        Family::MatMul => matmul::check::<OPS>(step, fetched),
        Family::Elementwise => elementwise::check::<OPS>(step, fetched),
        Family::Pool => pool::check::<OPS>(step, fetched),
        Family::Movement => movement::check::<OPS>(step, fetched),
        Family::Indexing => indexing::check::<OPS>(step, fetched),
        Family::Reduce => reduce::check::<OPS>(step, fetched),
        Family::Quantize => quantize::check::<OPS>(step, fetched),
        Family::Logic => logic::check::<OPS>(step, fetched),
        Family::Recurrent => recurrent::check::<OPS>(step, fetched),
    }
}

fn arena_range(t: &TensorDesc) -> Option<(usize, usize)> {
    match t.location {
        Location::Arena(o) => Some((o, o + t.bytes)),
        Location::Weights(_) => None,
    }
}

fn overlaps(a: (usize, usize), b: (usize, usize)) -> bool {
    a.0 < b.1 && b.0 < a.1 && a.0 < a.1 && b.0 < b.1
}

/// Outputs are disjoint from each other and from the scratch; an input either avoids an output
/// or, for in-place ops, is exactly it (same bytes, same shape).
fn check_overlap(step: &Step<'_>) -> Rule {
    let scratch = step.scratch.as_ref().and_then(arena_range);
    let (inputs, outputs) = (&step.inputs, &step.outputs);
    for i in 0..outputs.len() {
        let out = outputs.get(i).ok_or(why("missing output"))?;
        let o = arena_range(&out).ok_or(why("output not in arena"))?;
        if let Some(s) = scratch {
            ensure(!overlaps(o, s), "scratch overlaps an output")?;
        }
        for j in i + 1..outputs.len() {
            if let Some((r, _)) = operand_range(outputs, j) {
                ensure(!overlaps(o, r), "outputs overlap")?;
            }
        }
        for j in 0..inputs.len() {
            let Some((r, input)) = operand_range(inputs, j) else {
                continue;
            };
            if overlaps(o, r) {
                let exact = r == o && input.shape == out.shape && input.dtype == out.dtype;
                ensure(
                    step.op.allows_in_place() && exact,
                    "input partially overlaps output",
                )?;
            }
        }
    }
    if let Some(s) = scratch {
        for j in 0..inputs.len() {
            if let Some((r, _)) = operand_range(inputs, j) {
                ensure(!overlaps(s, r), "scratch overlaps an input")?;
            }
        }
    }
    Ok(())
}

/// The arena bytes of operand `i` of `list` and its descriptor, if present and in the arena.
/// Out of line: the verifier's overlap loops call it from four places.
#[inline(never)]
fn operand_range(list: &TensorList<'_>, i: usize) -> Option<((usize, usize), TensorDesc)> {
    let t = list.get(i)?;
    Some((arena_range(&t)?, t))
}
