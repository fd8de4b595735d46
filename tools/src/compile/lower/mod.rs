//! Lowering: ONNX nodes → plan ops, with shape inference and constant folding on the way.
//!
//! Nodes are visited in topological order. Each node's lowering reads its inputs' static shapes,
//! resolves the opset-specific form of its attributes and inputs, and emits normalised ops (or
//! an alias, or a constant). When every input of an emitted op is constant, the op is executed
//! right away on the host with the CPU device's own kernels ([`crate::compile::fold`]) and its outputs
//! become constants — this is how `Shape → Gather → Concat → Reshape` chains from
//! PyTorch exports disappear. A node that cannot be lowered is recorded with its reason and its
//! outputs are marked unknown, so one pass reports every unsupported node.

mod attrs;
mod broadcast;
mod compose;
mod constant;
mod control;
mod conv;
mod conv3d;
mod einsum;
mod elementwise;
mod indexing;
mod integer;
mod logic;
mod lowerer;
mod matmul;
mod ml;
mod movement;
mod pool;
mod qoperator;
mod quant;
mod recurrent;
mod reduce;
mod repeat;
mod resize;
mod signal;
mod table;
mod window;

pub use qoperator::MICROSOFT_OPS;

use crate::compile::error::Unsupported;
use crate::compile::ir::TensorId;
use crate::compile::onnx::{is_default_domain, Node};

pub use lowerer::{
    bounded, computed_dtype, normalize_axis, Lowerer, Reason, DATA_DEPENDENT, DATA_DEPENDENT_OPS,
};

/// Whether `node` is one of onnxruntime's `com.microsoft` quantized ops that lowering
/// understands ([`MICROSOFT_OPS`]).
pub fn is_microsoft_op(node: &Node) -> bool {
    node.domain == "com.microsoft" && MICROSOFT_OPS.contains(&node.op_type.as_str())
}

/// The `ai.onnx.ml` op types lowering understands (skl2onnx's linear models and preprocessing).
pub const ML_OPS: &[&str] = ml::OPS;

/// Whether `node` is an op of the `ai.onnx.ml` domain that lowering understands.
pub fn is_ml_op(node: &Node) -> bool {
    node.domain == "ai.onnx.ml" && ml::OPS.contains(&node.op_type.as_str())
}

/// Whether lowering understands ONNX op type `op_type` (default domain): a row of its table.
pub fn is_supported(op_type: &str) -> bool {
    table::find(op_type).is_some()
}

/// The dispatch: a node to its lowering (the table of default-domain ops, the `com.microsoft`
/// quantized ops, the `ai.onnx.ml` ops), its failure recorded.
impl Lowerer {
    /// Lowers one node, recording (not returning) a failure.
    pub fn lower_node(&mut self, node: &Node) {
        if node.inputs.iter().any(|i| self.unknown.contains(i)) {
            self.mark_unknown(node);
            return;
        }
        let result = self.lower_checked(node);
        if let Err(mut reason) = result {
            // A value that must be known at pack time but is a graph input: say how to fix it.
            if reason.contains("must be a constant") && !reason.contains("--constant") {
                let secondary: Vec<TensorId> = (1..node.inputs.len())
                    .filter_map(|i| self.optional_input(node, i))
                    .collect();
                reason += &self.freeze_hint("it", &secondary);
            }
            self.errors.push(Unsupported {
                op_type: if is_default_domain(&node.domain) {
                    node.op_type.clone()
                } else {
                    format!("{}:{}", node.domain, node.op_type)
                },
                node: node.label(),
                reason,
            });
            self.mark_unknown(node);
        }
    }
    fn mark_unknown(&mut self, node: &Node) {
        for o in &node.outputs {
            self.unknown.insert(o.clone());
        }
    }
    fn lower_checked(&mut self, node: &Node) -> Result<(), Reason> {
        if is_microsoft_op(node) {
            qoperator::lower(self, node)?;
        } else if node.domain == "ai.onnx.ml" {
            ml::lower(self, node)?;
        } else if !is_default_domain(&node.domain) {
            return Err(format!("domain '{}' is not supported", node.domain));
        } else {
            if let Some(first) = crate::compile::onnx::since::first_opset(&node.op_type) {
                if first > self.opset() {
                    return Err(format!(
                        "{} was added in opset {first}; the model imports opset {} \
                         (onnxruntime refuses it too)",
                        node.op_type,
                        self.opset()
                    ));
                }
            }
            self.lower_op(node)?;
        }
        for o in node.outputs.iter().filter(|o| !o.is_empty()) {
            if !self.names.contains_key(o) {
                return Err(format!("output '{o}' was not produced (internal error)"));
            }
        }
        Ok(())
    }
    fn lower_op(&mut self, node: &Node) -> Result<(), Reason> {
        let Some(row) = table::find(&node.op_type) else {
            return Err(format!("op '{}' is not supported", node.op_type));
        };
        let limit = row.inputs.max(self.opset);
        if node.inputs.len() > limit {
            return Err(format!(
                "{} takes at most {limit} input(s) in opset {}, the node has {}",
                node.op_type,
                self.opset,
                node.inputs.len()
            ));
        }
        (row.lower)(self, node)
    }
}
