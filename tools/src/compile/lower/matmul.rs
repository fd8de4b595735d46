//! Lowering of the matrix-product family: Gemm (transposed operands made explicit) and MatMul.

use super::attrs::Attrs;
use super::lowerer::{Lowerer, Reason};
use super::window::hal_shape;
use crate::compile::onnx::Node;
use ferrite_hal::geometry::{broadcast, MatMulGeometry};
use ferrite_hal::op::Gemm;
use ferrite_hal::{Activation, DType, Op};

/// A transposed copy of a matrix: folded for constants, a Transpose op otherwise.
fn transposed(lw: &mut Lowerer, node: &Node, t: usize, what: &str) -> Result<usize, Reason> {
    let s = lw.shape(t);
    let out = lw.temp(node, what, lw.dtype(t), vec![s[1], s[0]]);
    let mut perm = [0usize; ferrite_hal::MAX_RANK];
    perm[0] = 1;
    lw.emit(node, Op::Transpose { perm }, vec![Some(t)], vec![out])?;
    Ok(out)
}

pub(super) fn gemm(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let mut a = lw.input(node, 0)?;
    let mut b = lw.input(node, 1)?;
    let c = lw.optional_input(node, 2);
    lw.require_f32(&[a, b])?;
    if lw.shape(a).len() != 2 || lw.shape(b).len() != 2 {
        return Err("Gemm operands must be matrices".into());
    }
    if node.int("transA", 0)? != 0 {
        a = transposed(lw, node, a, "A_t")?;
    }
    if node.int("transB", 0)? != 0 {
        b = transposed(lw, node, b, "B_t")?;
    }
    let (sa, sb) = (lw.shape(a), lw.shape(b));
    if sa[1] != sb[0] {
        return Err(format!("Gemm inner dimensions differ ({sa:?} x {sb:?})"));
    }
    let out = vec![sa[0], sb[1]];
    if let Some(c) = c {
        lw.require_f32(&[c])?;
        let cs = hal_shape(&lw.shape(c))?;
        if broadcast(&cs, &hal_shape(&out)?) != Some(hal_shape(&out)?) || cs.rank() > 2 {
            return Err("Gemm C does not broadcast to the output".into());
        }
    }
    let y = lw.output(node, 0, DType::F32, out)?;
    let op = Op::Gemm(Gemm {
        alpha: node.float("alpha", 1.0)?,
        beta: node.float("beta", 1.0)?,
        activation: Activation::None,
    });
    lw.emit(node, op, vec![Some(a), Some(b), c], vec![y])?;
    Ok(())
}

pub(super) fn matmul(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let a = lw.input(node, 0)?;
    let b = lw.input(node, 1)?;
    lw.require_f32(&[a, b])?;
    let g = MatMulGeometry::new(&hal_shape(&lw.shape(a))?, &hal_shape(&lw.shape(b))?)
        .ok_or("MatMul shapes are incompatible")?;
    let y = lw.output(node, 0, DType::F32, g.output.dims().to_vec())?;
    lw.emit(
        node,
        Op::MatMul {
            activation: Activation::None,
        },
        vec![Some(a), Some(b)],
        vec![y],
    )?;
    Ok(())
}
