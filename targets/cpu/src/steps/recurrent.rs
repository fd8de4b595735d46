//! Recurrent steps (one direction of an RNN, GRU or LSTM over a sequence): Y, Y_h, Y_c and the
//! scratch carved as four disjoint spans, the kernel in [`crate::ops::recurrent::reference`].

use super::operands::*;
use crate::ops::recurrent::reference as recurrent;

/// Runs a step of this family with the kernels `OPS` selects (it carves its own operands:
/// several outputs and a scratch).
#[inline(always)]
pub(super) fn run<const OPS: Selection>(
    ctx: StepContext<'_>,
    step: &Step<'_>,
    arena: &mut [u8],
    weights: &[u8],
) -> Result<(), CpuError> {
    match step.op {
        Op::Recurrent(r) if selects(OPS, OpKind::Recurrent) => {
            recurrent::<OPS>(ctx, step, &r, arena, weights)
        }
        _ => Err(CpuError::Unsupported),
    }
}

/// A recurrent layer writes Y, Y_h (and Y_c) and uses a scratch: four disjoint spans.
#[inline(always)]
fn recurrent<const OPS: Selection>(
    ctx: StepContext<'_>,
    step: &Step<'_>,
    op: &ferrite_hal::op::Recurrent,
    arena: &mut [u8],
    weights: &[u8],
) -> Result<(), CpuError> {
    let bad = CpuError::CorruptPlan;
    let output = |i: usize| step.outputs.get(i).ok_or(bad);
    let span_of = |t: &TensorDesc| span(t).ok_or(bad);
    let scratch = step.scratch.as_ref().ok_or(bad)?;
    let (x, r) = (
        step.inputs.get(0).ok_or(bad)?,
        step.inputs.get(2).ok_or(bad)?,
    );
    let dims = recurrent::Dims {
        seq: x.shape.dim(0),
        batch: x.shape.dim(1),
        input: x.shape.dim(2),
        hidden: r.shape.dim(1),
    };
    let (y, h) = (span_of(&output(0)?)?, span_of(&output(1)?)?);
    let s = span_of(scratch)?;
    let lstm = matches!(op.cell, ferrite_hal::op::Cell::Lstm { .. });
    let (view, y, h, c, s) = if lstm {
        let c = span_of(&output(2)?)?;
        let (view, [y, h, c, s]) = carve_spans(arena, weights, [y, h, c, s])?;
        (view, y, h, Some(c), s)
    } else {
        let (view, [y, h, s]) = carve_spans(arena, weights, [y, h, s])?;
        (view, y, h, None, s)
    };
    let operand = |i: usize| -> Result<Option<&[f32]>, CpuError> {
        match step.inputs.get(i) {
            Some(t) => Ok(Some(f32s(view.bytes(&t)?)?)),
            None => Ok(None),
        }
    };
    let operands = recurrent::Operands {
        x: operand(0)?.ok_or(bad)?,
        w: operand(1)?.ok_or(bad)?,
        r: operand(2)?.ok_or(bad)?,
        b: operand(3)?,
        initial_h: operand(4)?,
        initial_c: operand(5)?,
        p: operand(6)?,
        constant_weights: [1, 2].iter().all(|&i| {
            let weights = step.inputs.get(i).map(|t| t.location);
            matches!(weights, Some(ferrite_hal::Location::Weights(_)))
        }),
    };
    let c = match c {
        Some(c) => Some(f32s_mut(c)?),
        None => None,
    };
    recurrent::recurrent::<OPS>(
        ctx,
        op,
        dims,
        &operands,
        f32s_mut(y)?,
        f32s_mut(h)?,
        c,
        f32s_mut(s)?,
    )
}
