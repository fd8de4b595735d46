//! Lowering of the reduction family's ops written here: ArgMax/ArgMin and Det.

use super::attrs::Attrs;
use super::lowerer::{normalize_axis, Lowerer, Reason};
use crate::compile::onnx::Node;
use ferrite_hal::op::ArgIndex;
use ferrite_hal::{DType, Op};

pub(super) fn arg_extreme(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    lw.require_f32(&[x])?;
    let shape = lw.shape(x);
    let axis = normalize_axis(node.int("axis", 0)?, shape.len())?;
    let index = ArgIndex {
        axis,
        last: node.int("select_last_index", 0)? != 0,
    };
    let mut out = shape.clone();
    if node.int("keepdims", 1)? != 0 {
        out[axis] = 1;
    } else {
        out.remove(axis);
    }
    if shape[axis] == 0 && out.iter().product::<usize>() > 0 {
        return Err(format!("axis {axis} is empty: there is no index to report"));
    }
    let y = lw.output(node, 0, DType::I64, out)?;
    let op = if node.op_type == "ArgMax" {
        Op::ArgMax(index)
    } else {
        Op::ArgMin(index)
    };
    lw.emit(node, op, vec![Some(x)], vec![y])
}

/// Det of float matrices `[..., n, n]`.
pub(super) fn det(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    lw.require_f32(&[x])?;
    let shape = lw.shape(x);
    let r = shape.len();
    if r < 2 || shape[r - 1] != shape[r - 2] {
        return Err(format!("Det needs square matrices, not {shape:?}"));
    }
    let y = lw.output(node, 0, DType::F32, shape[..r - 2].to_vec())?;
    lw.emit(node, Op::Det, vec![Some(x)], vec![y])
}
