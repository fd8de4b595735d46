//! The rules of recurrent layers (RNN, GRU, LSTM directions).

use super::common::*;
use ferrite_hal::{selects, Op, OpKind};

/// Checks a step of this family (the kinds `OPS` selects; any other is refused).
pub(super) fn check<const OPS: Selection>(step: &Step<'_>, _fetched: &Fetched) -> Rule {
    match step.op {
        Op::Recurrent(r) if selects(OPS, OpKind::Recurrent) => check_recurrent(&r, step),
        _ => Err(why(
            "this op kind is not linked into this build (its OPS selection)",
        )),
    }
}

/// One direction of an RNN/GRU/LSTM: every operand's shape follows from X's and R's.
fn check_recurrent(r: &ferrite_hal::op::Recurrent, step: &Step<'_>) -> Rule {
    let lstm = matches!(r.cell, ferrite_hal::op::Cell::Lstm { .. });
    let (n_in, n_out) = (step.inputs.len(), step.outputs.len());
    ensure(
        (3..=7).contains(&n_in) && n_out == if lstm { 3 } else { 2 },
        "Recurrent operand counts",
    )?;
    let input = |i: usize| step.inputs.get(i).ok_or(why("missing input"));
    let output = |i: usize| step.outputs.get(i).ok_or(why("missing output"));
    let (x, w, rec) = (input(0)?, input(1)?, input(2)?);
    ensure(
        x.shape.rank() == 3 && w.shape.rank() == 2 && rec.shape.rank() == 2,
        "Recurrent ranks",
    )?;
    let (seq, batch, features) = (
        x.shape.dim_checked(0),
        x.shape.dim_checked(1),
        x.shape.dim_checked(2),
    );
    let hidden = rec.shape.dim_checked(1);
    let gates = r.cell.gates();
    let rows = gates * hidden;
    ensure(
        hidden > 0
            && w.shape.dims_checked() == [rows, features]
            && rec.shape.dim_checked(0) == rows,
        "Recurrent weight shapes",
    )?;
    all_f32(&[x.dtype, w.dtype, rec.dtype])?;
    let vector = |t: &TensorDesc, n: usize| t.shape.rank() == 1 && t.shape.dim_checked(0) == n;
    let state = |t: &TensorDesc| t.shape.dims_checked() == [batch, hidden];
    if let Some(b) = step.inputs.get(3) {
        ensure(
            vector(&b, 2 * rows) && b.dtype == DType::F32,
            "Recurrent bias shape",
        )?;
    }
    if let Some(h) = step.inputs.get(4) {
        ensure(
            state(&h) && h.dtype == DType::F32,
            "Recurrent initial_h shape",
        )?;
    }
    if let Some(c) = step.inputs.get(5) {
        ensure(
            lstm && state(&c) && c.dtype == DType::F32,
            "Recurrent initial_c shape",
        )?;
    }
    if let Some(p) = step.inputs.get(6) {
        ensure(
            lstm && vector(&p, 3 * hidden) && p.dtype == DType::F32,
            "Recurrent peephole shape",
        )?;
    }
    let y = output(0)?;
    ensure(
        y.shape.dims_checked() == [seq, batch, hidden],
        "Recurrent Y shape",
    )?;
    for i in 1..n_out {
        let t = output(i)?;
        ensure(state(&t), "Recurrent state output shape")?;
        all_f32(&[t.dtype])?;
    }
    all_f32(&[y.dtype])?;
    require_scratch(
        step.scratch,
        2 * batch * rows,
        "Recurrent needs a scratch of 2·batch·gates·hidden",
    )
}
