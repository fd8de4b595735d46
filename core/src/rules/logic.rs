//! The rules of comparisons, boolean logic, Where and NaN/Inf tests.

use super::common::*;
use ferrite_hal::{selects, Op, OpKind};

/// Checks a step of this family (the kinds `OPS` selects; any other is refused).
pub(super) fn check<const OPS: Selection>(step: &Step<'_>, fetched: &Fetched) -> Rule {
    operands!(step, fetched => input, output, optional, n_in, n_out);
    match step.op {
        Op::Compare(_) | Op::Logical(_)
            if selects(OPS, OpKind::Compare) || selects(OPS, OpKind::Logical) =>
        {
            ensure(n_in == 2 && n_out == 1, "takes 2 inputs, 1 output")?;
            let (a, b, y) = (input(0)?, input(1)?, output(0)?);
            same_dtype(&[a.dtype, b.dtype])?;
            ensure(y.dtype == DType::Bool, "comparisons and logic write bool")?;
            if matches!(step.op, Op::Logical(_)) {
                ensure(a.dtype == DType::Bool, "logic reads bool")?;
            }
            ensure(
                broadcast(&a.shape, &b.shape) == Some(y.shape),
                "output is not the broadcast of the inputs",
            )
        }
        Op::Not if selects(OPS, OpKind::Not) => {
            ensure(n_in == 1 && n_out == 1, "Not takes 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            ensure(
                x.dtype == DType::Bool && y.dtype == DType::Bool,
                "Not is on bool",
            )?;
            ensure(x.shape == y.shape, "Not output shape")
        }
        Op::Classify(_) if selects(OPS, OpKind::Classify) => {
            ensure(n_in == 1 && n_out == 1, "IsNaN/IsInf take 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            ensure(
                x.dtype == DType::F32 && y.dtype == DType::Bool,
                "IsNaN/IsInf: float to bool",
            )?;
            ensure(x.shape == y.shape, "IsNaN/IsInf output shape")
        }
        Op::Where if selects(OPS, OpKind::Where) => {
            ensure(n_in == 3 && n_out == 1, "Where takes 3 inputs")?;
            let (c, x, z, y) = (input(0)?, input(1)?, input(2)?, output(0)?);
            ensure(c.dtype == DType::Bool, "Where's condition is bool")?;
            same_dtype(&[x.dtype, z.dtype, y.dtype])?;
            let xz = broadcast(&x.shape, &z.shape).ok_or(why("Where shapes"))?;
            ensure(
                broadcast(&c.shape, &xz) == Some(y.shape),
                "Where output is not the broadcast of its inputs",
            )
        }
        _ => Err(why(
            "this op kind is not linked into this build (its OPS selection)",
        )),
    }
}
