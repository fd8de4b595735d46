//! The rules of elementwise ops, activations, softmax, normalisation and casts.

use super::common::*;
use ferrite_hal::{selects, Op, OpKind};

/// Checks a step of this family (the kinds `OPS` selects; any other is refused).
pub(super) fn check<const OPS: Selection>(step: &Step<'_>, fetched: &Fetched) -> Rule {
    operands!(step, fetched => input, output, optional, n_in, n_out);
    match step.op {
        Op::Binary { .. } if selects(OPS, OpKind::Binary) => {
            ensure(
                n_in == 2 && n_out == 1,
                "binary op takes 2 inputs, 1 output",
            )?;
            let (a, b, y) = (input(0)?, input(1)?, output(0)?);
            same_dtype(&[a.dtype, b.dtype, y.dtype])?;
            let Op::Binary { op, activation } = step.op else {
                return Err(why("binary op"));
            };
            if a.dtype == DType::F32 {
                ensure(op.takes_floats(), "shifts are on integers")?;
            } else {
                ensure(
                    a.dtype.is_integer(),
                    "binary op operands are float32 or integers",
                )?;
                ensure(
                    activation == ferrite_hal::Activation::None,
                    "integer binary ops fuse no activation",
                )?;
            }
            ensure(
                broadcast(&a.shape, &b.shape) == Some(y.shape),
                "binary output is not the broadcast of its inputs",
            )
        }
        Op::Convert if selects(OPS, OpKind::Convert) => {
            ensure(n_in == 1 && n_out == 1, "Cast takes 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            ensure(x.shape == y.shape, "Cast output shape")
        }
        Op::Unary(_) | Op::Softmax { .. } | Op::LogSoftmax { .. } | Op::Hardmax { .. }
            if selects(OPS, OpKind::Unary)
                || selects(OPS, OpKind::Softmax)
                || selects(OPS, OpKind::LogSoftmax)
                || selects(OPS, OpKind::Hardmax) =>
        {
            ensure(n_in == 1 && n_out == 1, "takes 1 input, 1 output")?;
            let (x, y) = (input(0)?, output(0)?);
            all_f32(&[x.dtype, y.dtype])?;
            ensure(x.shape == y.shape, "output shape differs from input")?;
            if let Op::Softmax { axis } | Op::LogSoftmax { axis } | Op::Hardmax { axis } = step.op {
                ensure(axis < x.shape.rank(), "softmax axis")?;
            }
            Ok(())
        }
        Op::BatchNorm { .. } if selects(OPS, OpKind::BatchNorm) => {
            ensure(n_in == 5 && n_out == 1, "BatchNormalization takes 5 inputs")?;
            let (x, y) = (input(0)?, output(0)?);
            all_f32(&[x.dtype, y.dtype])?;
            ensure(
                x.shape.rank() >= 2 && x.shape == y.shape,
                "BatchNormalization shapes",
            )?;
            for i in 1..5 {
                let p = input(i)?;
                all_f32(&[p.dtype])?;
                ensure(
                    p.shape.dims_checked() == [x.shape.dim_checked(1)],
                    "BatchNormalization parameter shape",
                )?;
            }
            Ok(())
        }
        Op::QAdd(q) if selects(OPS, OpKind::QAdd) => {
            ensure(n_in == 2 && n_out == 1, "QAdd takes 2 inputs")?;
            let (a, b, y) = (input(0)?, input(1)?, output(0)?);
            ensure(
                a.shape == y.shape && b.shape == y.shape,
                "QAdd shapes differ",
            )?;
            check_integer_binary(
                a,
                b,
                y,
                [q.a_zero, q.b_zero, q.output_zero, q.min, q.max],
                true,
            )?;
            let need = geometry::qadd_scratch_elements(y.elements(), y.dtype);
            require_scratch(step.scratch, need, "QAdd scratch is missing or too small")
        }
        Op::QMul(q) if selects(OPS, OpKind::QMul) => {
            ensure(n_in == 2 && n_out == 1, "QMul takes 2 inputs")?;
            let (a, b, y) = (input(0)?, input(1)?, output(0)?);
            ensure(
                broadcast(&a.shape, &b.shape) == Some(y.shape),
                "QMul output is not the broadcast of its inputs",
            )?;
            check_integer_binary(
                a,
                b,
                y,
                [q.a_zero, q.b_zero, q.output_zero, q.min, q.max],
                false,
            )
        }
        Op::QLookup if selects(OPS, OpKind::QLookup) => {
            ensure(n_in == 2 && n_out == 1, "QLookup takes 2 inputs")?;
            let (x, table, y) = (input(0)?, input(1)?, output(0)?);
            ensure(
                matches!(x.dtype, DType::I8 | DType::U8)
                    && x.dtype == y.dtype
                    && table.dtype == y.dtype,
                "QLookup operands are 8-bit, of one type",
            )?;
            ensure(x.shape == y.shape, "QLookup output shape")?;
            ensure(table.elements() == 256, "QLookup table has 256 entries")
        }
        Op::QSoftmax(q) if selects(OPS, OpKind::QSoftmax) => {
            ensure(n_in == 2 && n_out == 1, "QSoftmax takes 2 inputs")?;
            let (x, table, y) = (input(0)?, input(1)?, output(0)?);
            ensure(
                is_byte(x) && x.dtype == y.dtype,
                "QSoftmax operands are 8-bit, of one type",
            )?;
            ensure(x.shape == y.shape, "QSoftmax output shape")?;
            ensure(q.axis < x.shape.rank(), "QSoftmax axis")?;
            ensure(
                table.dtype == DType::I32 && table.elements() == 256,
                "QSoftmax table is 256 int32 values",
            )?;
            ensure(
                [q.output_zero, q.min, q.max]
                    .iter()
                    .all(|&v| in_range(y.dtype, v)),
                "QSoftmax zero point or clamp outside its type",
            )
        }
        _ => Err(why(
            "this op kind is not linked into this build (its OPS selection)",
        )),
    }
}

/// QAdd's and QMul's operands: one integer type, 8-bit (or int16 where `wide` allows: QAdd);
/// `[a zero, b zero, output zero, min, max]` values of it.
fn check_integer_binary(
    a: &TensorDesc,
    b: &TensorDesc,
    y: &TensorDesc,
    zeros: [i32; 5],
    wide: bool,
) -> Rule {
    let wide_type = wide && y.dtype == DType::I16;
    ensure(
        (is_byte(y) || wide_type) && a.dtype == y.dtype && b.dtype == y.dtype,
        "integer binary op operands are of one type, 8-bit (QAdd: or int16)",
    )?;
    ensure(
        zeros.iter().all(|&v| in_range(y.dtype, v)),
        "integer binary op zero point or clamp outside its type",
    )
}
