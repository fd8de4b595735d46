//! ONNX's integer ops with run-time quantization parameters: MatMulInteger and ConvInteger
//! (8-bit operands, int32 results) and DynamicQuantizeLinear (uint8 with a scale and zero point
//! computed from the tensor) — what `onnxruntime.quantization.quantize_dynamic` writes.
//!
//! Zero points may be graph inputs, so they travel as op inputs; an absent one becomes a
//! constant 0 of its operand's type. Each lowers to one op of the same name; the integer
//! results usually go on through a Cast to float and a Mul by the product of the scales.

use super::lowerer::{Lowerer, Reason};
use super::window::{conv_geometry, hal_shape};
use crate::compile::ir::TensorId;
use crate::compile::onnx::Node;
use crate::compile::tensor::HostTensor;
use ferrite_hal::geometry::MatMulGeometry;
use ferrite_hal::op::ConvInteger;
use ferrite_hal::{DType, Op};

/// An 8-bit operand: int8 or uint8.
fn byte_operand(lw: &Lowerer, t: TensorId) -> Result<DType, Reason> {
    match lw.dtype(t) {
        d @ (DType::I8 | DType::U8) => Ok(d),
        d => Err(format!(
            "input '{}' is {d}: integer ops read int8 or uint8",
            lw.name(t)
        )),
    }
}

/// Zero point at input `i` for operand `of`: of its type with `allowed` element counts
/// (1 always), or a constant 0 when absent.
fn zero_point(
    lw: &mut Lowerer,
    node: &Node,
    i: usize,
    of: TensorId,
    allowed: usize,
    what: &str,
) -> Result<TensorId, Reason> {
    let dtype = lw.dtype(of);
    let Some(z) = lw.optional_input(node, i) else {
        let zero = HostTensor::int(dtype, vec![], vec![0]);
        return Ok(lw.constant(node, &format!("{what}_zero_point"), zero));
    };
    if lw.dtype(z) != dtype {
        return Err(format!(
            "zero point '{}' is {}, its operand {dtype}",
            lw.name(z),
            lw.dtype(z)
        ));
    }
    let count: usize = lw.shape(z).iter().product();
    if count != 1 && count != allowed {
        return Err(format!(
            "zero point '{}' has {count} values: one, or one per {what} ({allowed}), is supported",
            lw.name(z)
        ));
    }
    Ok(z)
}

pub(super) fn matmul_integer(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let a = lw.input(node, 0)?;
    let b = lw.input(node, 1)?;
    byte_operand(lw, a)?;
    byte_operand(lw, b)?;
    let (a_shape, b_shape) = (lw.shape(a), lw.shape(b));
    let g = MatMulGeometry::new(&hal_shape(&a_shape)?, &hal_shape(&b_shape)?)
        .ok_or("MatMulInteger shapes are incompatible")?;
    // Per-row / per-column zero points are defined here for matrices.
    let rows = if a_shape.len() == 2 { g.m } else { 1 };
    let columns = if b_shape.len() == 2 { g.n } else { 1 };
    let za = zero_point(lw, node, 2, a, rows, "row")?;
    let zb = zero_point(lw, node, 3, b, columns, "column")?;
    let y = lw.output(node, 0, DType::I32, g.output.dims().to_vec())?;
    lw.emit(
        node,
        Op::MatMulInteger,
        vec![Some(a), Some(b), Some(za), Some(zb)],
        vec![y],
    )
}

pub(super) fn conv_integer(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let w = lw.input(node, 1)?;
    byte_operand(lw, x)?;
    byte_operand(lw, w)?;
    let (window, group, out_shape) = conv_geometry(lw, node, x, w, "ConvInteger")?;
    let zx = zero_point(lw, node, 2, x, 1, "tensor")?;
    let zw = zero_point(lw, node, 3, w, out_shape[1], "output channel")?;
    let y = lw.output(node, 0, DType::I32, out_shape)?;
    lw.emit(
        node,
        Op::ConvInteger(ConvInteger { window, group }),
        vec![Some(x), Some(w), Some(zx), Some(zw)],
        vec![y],
    )
}

pub(super) fn dynamic_quantize(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    lw.require_f32(&[x])?;
    let y = lw.output(node, 0, DType::U8, lw.shape(x))?;
    let scale = lw.output(node, 1, DType::F32, vec![])?;
    let zero = lw.output(node, 2, DType::U8, vec![])?;
    lw.emit(
        node,
        Op::DynamicQuantize,
        vec![Some(x)],
        vec![y, scale, zero],
    )
}
