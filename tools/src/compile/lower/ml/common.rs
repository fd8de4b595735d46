//! What the `ai.onnx.ml` lowerings share: attribute lists as tensors, per-feature constants,
//! the feature count of an input, and the highest-scoring label.

pub(super) use super::super::attrs::Attrs;
pub(super) use super::super::lowerer::{Lowerer, Reason};
pub(super) use crate::compile::ir::TensorId;
pub(super) use crate::compile::onnx::Node;
pub(super) use crate::compile::tensor::HostTensor;
pub(super) use ferrite_hal::op::BinaryOp;
pub(super) use ferrite_hal::{Activation, DType, Op};

pub(super) fn plain(op: BinaryOp) -> Op {
    Op::Binary {
        op,
        activation: Activation::None,
    }
}

/// The f32 input 0 as a matrix `[N, features]` (a vector is one row).
pub(super) fn features(lw: &mut Lowerer, node: &Node) -> Result<(TensorId, usize, usize), Reason> {
    let x = lw.input(node, 0)?;
    lw.require_f32(&[x])?;
    match lw.shape(x)[..] {
        [n, f] => Ok((x, n, f)),
        [f] => Ok((lw.temp_alias(node, "rows", x, vec![1, f]), 1, f)),
        ref s => Err(format!("the input has shape {s:?}, not [N, features]")),
    }
}

/// A per-feature parameter of `f` values (or one for all) as a `[values]` f32 constant.
pub(super) fn per_feature(
    lw: &mut Lowerer,
    node: &Node,
    what: &str,
    v: Vec<f32>,
    f: usize,
) -> Result<TensorId, Reason> {
    if v.len() != 1 && v.len() != f {
        return Err(format!("{what} has {} values for {f} features", v.len()));
    }
    Ok(lw.constant(node, what, HostTensor::float(vec![v.len()], v)))
}

/// A row-major `[rows, cols]` matrix stored transposed, `[cols, rows]`, as a constant: the
/// right operand of a product with `[N, cols]` rows (coefficients, support vectors).
pub(super) fn transposed_constant(
    lw: &mut Lowerer,
    node: &Node,
    what: &str,
    m: &[f32],
    rows: usize,
    cols: usize,
) -> TensorId {
    let t = (0..rows * cols)
        .map(|i| m[(i % rows) * cols + i / rows])
        .collect();
    lw.constant(node, what, HostTensor::float(vec![cols, rows], t))
}

/// Output 0 of a classifier: the label of the highest of `scores` (`[N, k]`; the first of
/// equal ones), the arg-max itself when the labels are `0..k`, else looked up in them.
pub(super) fn label_of_highest(
    lw: &mut Lowerer,
    node: &Node,
    scores: TensorId,
    n: usize,
    labels: Vec<i64>,
) -> Result<(), Reason> {
    let best = Op::ArgMax(ferrite_hal::op::ArgIndex {
        axis: 1,
        last: false,
    });
    if labels.iter().enumerate().all(|(i, &l)| l == i as i64) {
        let y = lw.output(node, 0, DType::I64, vec![n])?;
        return lw.emit(node, best, vec![Some(scores)], vec![y]);
    }
    let index = lw.temp(node, "best", DType::I64, vec![n]);
    lw.emit(node, best, vec![Some(scores)], vec![index])?;
    let k = labels.len();
    let table = lw.constant(node, "labels", HostTensor::int(DType::I64, vec![k], labels));
    let y = lw.output(node, 0, DType::I64, vec![n])?;
    lw.emit(
        node,
        Op::Gather { axis: 0 },
        vec![Some(table), Some(index)],
        vec![y],
    )
}

/// Integer-list attribute `name`, which must be present.
pub(super) fn ints_of(node: &Node, name: &str) -> Result<Vec<i64>, Reason> {
    node.ints(name)?
        .ok_or_else(|| format!("{name} is required"))
}

/// A float-tensor attribute's values (opset 5's `nodes_splits`, `leaf_weights`, ...).
pub(super) fn float_tensor(node: &Node, name: &str) -> Result<Vec<f32>, Reason> {
    node.tensor(name)?
        .map(|t| t.to_f32s())
        .ok_or_else(|| format!("{name} is required"))
}
