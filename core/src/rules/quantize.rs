//! The rules of QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear.

use super::common::*;
use ferrite_hal::{selects, Op, OpKind};

/// Checks a step of this family (the kinds `OPS` selects; any other is refused).
pub(super) fn check<const OPS: Selection>(step: &Step<'_>, fetched: &Fetched) -> Rule {
    operands!(step, fetched => input, output, optional, n_in, n_out);
    match step.op {
        Op::DynamicQuantize if selects(OPS, OpKind::DynamicQuantize) => {
            ensure(
                n_in == 1 && n_out == 3,
                "DynamicQuantizeLinear takes 1 input, 3 outputs",
            )?;
            let (x, y, scale, zero) = (input(0)?, output(0)?, output(1)?, output(2)?);
            all_f32(&[x.dtype, scale.dtype])?;
            ensure(
                y.dtype == DType::U8 && zero.dtype == DType::U8,
                "DynamicQuantizeLinear writes uint8",
            )?;
            ensure(x.shape == y.shape, "DynamicQuantizeLinear output shape")?;
            ensure(
                scale.elements() == 1 && zero.elements() == 1,
                "DynamicQuantizeLinear scale and zero point are scalars",
            )
        }
        Op::Quantize { axis } if selects(OPS, OpKind::Quantize) => {
            ensure(n_in == 3 && n_out == 1, "QuantizeLinear takes 3 inputs")?;
            let (x, scale, zero, y) = (input(0)?, input(1)?, input(2)?, output(0)?);
            all_f32(&[x.dtype, scale.dtype])?;
            ensure(
                matches!(zero.dtype, DType::I8 | DType::U8 | DType::I16 | DType::U16),
                "QuantizeLinear zero point type",
            )?;
            same_dtype(&[zero.dtype, y.dtype])?;
            ensure(x.shape == y.shape, "QuantizeLinear output shape")?;
            check_quantization_parameters(x, axis, scale, Some(zero))
        }
        Op::Dequantize { axis } if selects(OPS, OpKind::Dequantize) => {
            ensure(
                (2..=3).contains(&n_in) && n_out == 1,
                "DequantizeLinear takes 2-3 inputs",
            )?;
            let (x, scale, y) = (input(0)?, input(1)?, output(0)?);
            ensure(
                matches!(
                    x.dtype,
                    DType::I8 | DType::U8 | DType::I16 | DType::U16 | DType::I32
                ),
                "DequantizeLinear input type",
            )?;
            all_f32(&[scale.dtype, y.dtype])?;
            ensure(x.shape == y.shape, "DequantizeLinear output shape")?;
            let zero = optional(2);
            if let Some(z) = zero {
                same_dtype(&[x.dtype, z.dtype])?;
            }
            check_quantization_parameters(x, axis, scale, zero)
        }
        _ => Err(why(
            "this op kind is not linked into this build (its OPS selection)",
        )),
    }
}

/// Scale (and zero point) are one value, or one per element of `x` along `axis`.
fn check_quantization_parameters(
    x: &TensorDesc,
    axis: usize,
    scale: &TensorDesc,
    zero: Option<&TensorDesc>,
) -> Rule {
    let n = scale.elements();
    ensure(
        scale.shape.rank() <= 1,
        "quantization scale is a scalar or a vector",
    )?;
    ensure(
        n == 1 || (axis < x.shape.rank() && n == x.shape.dim_checked(axis)),
        "quantization scale length",
    )?;
    if let Some(z) = zero {
        ensure(z.shape == scale.shape, "zero point and scale shapes differ")?;
    }
    Ok(())
}
