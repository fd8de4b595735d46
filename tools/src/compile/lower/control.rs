//! If: a branch chosen at pack time is inlined; otherwise both branches are inlined (both are
//! planned and both run; ONNX branches have no side effects) and a Where per output picks the
//! taken branch's value from the run-time condition. Branches whose outputs differ in shape or
//! type would need data-dependent shapes and are refused.

use super::lowerer::{Lowerer, Reason};
use crate::compile::ir::TensorId;
use crate::compile::onnx::proto::GraphProto;
use crate::compile::onnx::Node;
use crate::compile::tensor::HostTensor;
use ferrite_hal::{DType, Op};

/// Nesting deeper than this is refused (a hostile model cannot exhaust the stack).
const MAX_DEPTH: usize = 16;

/// The subgraph attribute `name` of `node`.
fn branch<'n>(node: &'n Node, name: &str) -> Result<&'n GraphProto, Reason> {
    node.attr(name)
        .and_then(|a| a.g.as_deref())
        .ok_or_else(|| format!("{name} is required"))
}

/// Lowers the nodes of `g` into the enclosing plan (outer-scope values stay visible) and
/// returns the tensors of its outputs.
fn inline(lw: &mut Lowerer, node: &Node, g: &GraphProto) -> Result<Vec<TensorId>, Reason> {
    inline_body(lw, node, g, "", &[])
}

/// Lowers the nodes of `g` into the enclosing plan with its graph inputs bound, in order, to
/// `inputs` (a Loop or Scan body; an If branch has none), and returns the tensors of its
/// outputs. `tag` is added to the node names (a Loop iteration's `[3]`), so each unrolled copy
/// of a body has names of its own in the plan.
pub(super) fn inline_body(
    lw: &mut Lowerer,
    node: &Node,
    g: &GraphProto,
    tag: &str,
    inputs: &[TensorId],
) -> Result<Vec<TensorId>, Reason> {
    if lw.depth >= MAX_DEPTH {
        return Err(format!("subgraphs nest deeper than {MAX_DEPTH}"));
    }
    if g.input.len() != inputs.len() {
        return Err(format!(
            "the body has {} inputs, the node gives it {}",
            g.input.len(),
            inputs.len()
        ));
    }
    for (declared, &value) in g.input.iter().zip(inputs) {
        lw.names.insert(declared.name.clone(), value);
    }
    for t in &g.initializer {
        let value = HostTensor::from_proto(t).map_err(|e| e.to_string())?;
        lw.add_initializer(&t.name, value);
    }
    let errors_before = lw.errors.len();
    lw.depth += 1;
    for n in &g.node {
        let inner = Node {
            name: if n.name.is_empty() {
                format!("{}{tag}/{}", node.label(), n.op_type)
            } else {
                format!("{}{tag}", n.name)
            },
            op_type: n.op_type.clone(),
            domain: n.domain.clone(),
            inputs: n.input.clone(),
            outputs: n.output.clone(),
            attrs: n.attribute.clone(),
        };
        lw.lower_node(&inner);
    }
    lw.depth -= 1;
    if lw.errors.len() > errors_before {
        return Err("a node of the branch cannot be lowered (listed separately)".into());
    }
    g.output
        .iter()
        .map(|o| {
            lw.lookup(&o.name)
                .ok_or_else(|| format!("branch output '{}' was not computed", o.name))
        })
        .collect()
}

/// If.
pub(super) fn if_node(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let cond = lw.input(node, 0)?;
    if lw.dtype(cond) != DType::Bool || lw.shape(cond).iter().product::<usize>() != 1 {
        return Err("the condition must be one bool".into());
    }
    let (then_g, else_g) = (branch(node, "then_branch")?, branch(node, "else_branch")?);
    if let Some(v) = lw.value(cond) {
        let taken = if v.to_i64s().first().is_some_and(|&c| c != 0) {
            then_g
        } else {
            else_g
        };
        let outs = inline(lw, node, taken)?;
        return bind(lw, node, &outs);
    }
    let then_outs = inline(lw, node, then_g)?;
    let else_outs = inline(lw, node, else_g)?;
    if then_outs.len() != else_outs.len() || then_outs.len() < node.outputs.len() {
        return Err("the branches have different output counts".into());
    }
    let mut picked = Vec::new();
    for (i, (&a, &b)) in then_outs.iter().zip(&else_outs).enumerate() {
        if lw.shape(a) != lw.shape(b) || lw.dtype(a) != lw.dtype(b) {
            return Err(format!(
                "output {i} is {:?} {} in one branch and {:?} {} in the other: a run-time condition needs equal shapes (data-dependent shape){}",
                lw.shape(a),
                lw.dtype(a),
                lw.shape(b),
                lw.dtype(b),
                lw.freeze_hint("the condition", &[cond])
            ));
        }
        let y = lw.temp(node, &format!("picked{i}"), lw.dtype(a), lw.shape(a));
        lw.emit(node, Op::Where, vec![Some(cond), Some(a), Some(b)], vec![y])?;
        picked.push(y);
    }
    bind(lw, node, &picked)
}

/// Node output `i` as a view of `values[i]`.
fn bind(lw: &mut Lowerer, node: &Node, values: &[TensorId]) -> Result<(), Reason> {
    for (i, &v) in values.iter().enumerate().take(node.outputs.len()) {
        let shape = lw.shape(v);
        lw.alias_output(node, i, v, shape)?;
    }
    Ok(())
}
