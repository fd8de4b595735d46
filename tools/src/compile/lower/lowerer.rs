//! The lowering state ([`Lowerer`]: the plan built so far, the ONNX-name → tensor map, the
//! failures) and the helpers every op's lowering calls: inputs, constants, outputs, emitted ops.

use crate::compile::error::Unsupported;
use crate::compile::fold;
use crate::compile::ir::{PlanGraph, TensorId};
use crate::compile::onnx::Node;
use crate::compile::tensor::HostTensor;
use ferrite_hal::{DType, Op};
use std::collections::{HashMap, HashSet};

/// Ops whose output shape depends on the input values: Ferrite plans every shape at pack time,
/// so these run only when their inputs are constants (NonZero folds then) and are otherwise
/// refused with [`DATA_DEPENDENT`].
pub const DATA_DEPENDENT_OPS: &[&str] = &[
    "Compress",
    "NonMaxSuppression",
    "NonZero",
    "StringSplit",
    "Unique",
];

/// The reason given for a data-dependent op.
pub const DATA_DEPENDENT: &str =
    "its output shape depends on the data (data-dependent shape), and Ferrite plans every shape at pack time";

/// Why one node cannot be lowered (becomes an [`Unsupported`] entry).
pub type Reason = String;

/// Lowering state: the plan built so far and the ONNX-name → tensor map.
pub struct Lowerer {
    /// The plan under construction.
    pub graph: PlanGraph,
    pub(super) names: HashMap<String, TensorId>,
    pub(super) unknown: HashSet<String>,
    /// The interface float type (float64, float16, bfloat16) of values computed in f32.
    pub(super) interface: HashMap<TensorId, DType>,
    pub(super) opset: i64,
    /// Nodes that could not be lowered.
    pub errors: Vec<Unsupported>,
    /// How many subgraphs (If branches) enclose the node being lowered.
    pub(super) depth: usize,
    /// Body nodes lowered by unrolling Loops and Scans so far (bounded: see `repeat`).
    pub(super) unrolled_nodes: usize,
}

impl Lowerer {
    /// A lowerer for a graph of default-domain opset `opset`.
    pub fn new(opset: i64) -> Lowerer {
        Lowerer {
            graph: PlanGraph::default(),
            names: HashMap::new(),
            unknown: HashSet::new(),
            interface: HashMap::new(),
            opset,
            errors: Vec::new(),
            depth: 0,
            unrolled_nodes: 0,
        }
    }

    /// Declares a runtime graph input. An input of an interface float type (float64, float16,
    /// bfloat16) is converted to f32 on entry: Ferrite computes such models in f32.
    pub fn add_input(&mut self, name: &str, dtype: DType, shape: Vec<usize>) {
        let id = self.graph.add_tensor(name, dtype, shape.clone());
        self.graph.inputs.push(id);
        let value = if dtype.is_interface_float() {
            let f32_id = self
                .graph
                .add_tensor(format!("{name}:f32"), DType::F32, shape);
            self.graph.ops.push(crate::compile::ir::PlanOp {
                name: format!("{name}:to_f32"),
                op: Op::Convert,
                inputs: vec![Some(id)],
                outputs: vec![f32_id],
            });
            self.interface.insert(f32_id, dtype);
            f32_id
        } else {
            id
        };
        self.names.insert(name.to_string(), value);
    }

    /// Declares an initializer (interface float types become f32).
    pub fn add_initializer(&mut self, name: &str, value: HostTensor) {
        let id = self.graph.add_constant(name, computed(value));
        self.names.insert(name.to_string(), id);
    }

    /// The tensor for graph output `name`, converted to its declared type when that is an
    /// interface float type (the graph computed it in f32).
    pub fn graph_output(&mut self, name: &str, declared: i32) -> Option<TensorId> {
        let id = self.lookup(name)?;
        let dtype = crate::compile::tensor::dtype_from_onnx(declared)
            .or_else(|| self.interface.get(&id).copied());
        match dtype {
            Some(d) if d.is_interface_float() && self.dtype(id) == DType::F32 => {
                let shape = self.shape(id);
                self.graph.tensors[id].name = format!("{name}:f32");
                if let Some(v) = self.value(id) {
                    let v = v.cast(d);
                    return Some(self.graph.add_constant(name, v));
                }
                let out = self.graph.add_tensor(name, d, shape);
                self.graph.ops.push(crate::compile::ir::PlanOp {
                    name: format!("{name}:to_{d}"),
                    op: Op::Convert,
                    inputs: vec![Some(id)],
                    outputs: vec![out],
                });
                Some(out)
            }
            _ => Some(id),
        }
    }

    /// Declares a graph input whose type Ferrite cannot run; nodes reading it are skipped.
    pub fn add_unknown(&mut self, name: &str) {
        self.unknown.insert(name.to_string());
    }

    /// "; {subject} depends on graph input 'sr': freeze it with --constant sr=..." for each
    /// graph input the values `of` are computed from (empty when none is).
    pub fn freeze_hint(&self, subject: &str, of: &[TensorId]) -> String {
        let mut inputs: Vec<TensorId> = of
            .iter()
            .flat_map(|&t| self.graph.inputs_feeding(t))
            .collect();
        inputs.sort_unstable();
        inputs.dedup();
        inputs
            .into_iter()
            .map(|t| {
                let name = &self.graph.tensors[t].name;
                format!(
                    "; {subject} depends on graph input '{name}': freeze it with --constant {name}=NUMBER (one value) or {name}=FILE.npy"
                )
            })
            .collect()
    }

    // ---- helpers used by the per-op lowerings ----

    /// The default-domain opset.
    pub fn opset(&self) -> i64 {
        self.opset
    }

    /// Required input `i`.
    pub fn input(&self, node: &Node, i: usize) -> Result<TensorId, Reason> {
        self.optional_input(node, i)
            .ok_or_else(|| format!("input #{i} is required"))
    }

    /// Optional input `i` (`None` when absent).
    pub fn optional_input(&self, node: &Node, i: usize) -> Option<TensorId> {
        let name = node.inputs.get(i)?;
        if name.is_empty() {
            return None;
        }
        self.names.get(name).copied()
    }

    /// Shape of tensor `t`.
    pub fn shape(&self, t: TensorId) -> Vec<usize> {
        self.graph.tensors[t].shape.clone()
    }

    /// Name of tensor `t` (for messages).
    pub fn name(&self, t: TensorId) -> &str {
        &self.graph.tensors[t].name
    }

    /// Element type of tensor `t`.
    pub fn dtype(&self, t: TensorId) -> DType {
        self.graph.tensors[t].dtype
    }

    /// The value of `t`, if constant.
    pub fn value(&self, t: TensorId) -> Option<&HostTensor> {
        self.graph.tensors[t].value.as_ref()
    }

    /// Integer values of optional input `i`, which must be a constant when present.
    pub fn const_ints(
        &self,
        node: &Node,
        i: usize,
        what: &str,
    ) -> Result<Option<Vec<i64>>, Reason> {
        match self.optional_input(node, i) {
            None => Ok(None),
            Some(t) => match self.value(t) {
                Some(v) => Ok(Some(v.to_i64s())),
                None => Err(format!("{what} must be a constant (computed at pack time)")),
            },
        }
    }

    /// Float scalar of optional input `i`, which must be a constant when present.
    pub fn const_scalar(&self, node: &Node, i: usize, what: &str) -> Result<Option<f32>, Reason> {
        match self.optional_input(node, i) {
            None => Ok(None),
            Some(t) => match self.value(t) {
                Some(v) if v.len() == 1 => Ok(Some(v.to_f32s()[0])),
                Some(_) => Err(format!("{what} must be a scalar")),
                None => Err(format!("{what} must be a constant (computed at pack time)")),
            },
        }
    }

    /// Creates output `i` of `node` as a new runtime tensor (refusing absurd sizes).
    pub fn output(
        &mut self,
        node: &Node,
        i: usize,
        dtype: DType,
        shape: Vec<usize>,
    ) -> Result<TensorId, Reason> {
        bounded(&shape)?;
        let name = match node.outputs.get(i) {
            Some(n) if !n.is_empty() => n.clone(),
            _ => format!("{}:unused{i}", node.label()),
        };
        let id = self
            .graph
            .add_tensor(name.clone(), computed_dtype(dtype), shape);
        if dtype.is_interface_float() {
            self.interface.insert(id, dtype);
        }
        self.names.insert(name, id);
        Ok(id)
    }

    /// Records that output 0 of `node`, computed in f32, has interface float type `dtype`
    /// (no-op for other types).
    pub fn mark_interface(&mut self, node: &Node, dtype: DType) {
        let id = node.outputs.first().and_then(|n| self.lookup(n));
        if let (Some(id), true) = (id, dtype.is_interface_float()) {
            self.interface.insert(id, dtype);
        }
    }

    /// Defines output `i` of `node` as a constant.
    pub fn const_output(&mut self, node: &Node, i: usize, value: HostTensor) {
        if let Some(name) = node.outputs.get(i).filter(|n| !n.is_empty()) {
            let id = self.graph.add_constant(name.clone(), computed(value));
            self.names.insert(name.clone(), id);
        }
    }

    /// A constant made up by the lowering of `node` (e.g. a default zero point).
    pub fn constant(&mut self, node: &Node, what: &str, value: HostTensor) -> TensorId {
        self.graph
            .add_constant(format!("{}:{what}", node.label()), computed(value))
    }

    /// Defines output `i` of `node` as `src`'s bytes under `shape` (a free reshape).
    pub fn alias_output(
        &mut self,
        node: &Node,
        i: usize,
        src: TensorId,
        shape: Vec<usize>,
    ) -> Result<(), Reason> {
        let count = bounded(&shape)?;
        let src_count: usize = self.graph.tensors[src].shape.iter().product();
        if count != src_count {
            return Err(format!(
                "cannot view {src_count} elements as shape {shape:?}"
            ));
        }
        let Some(name) = node.outputs.get(i).filter(|n| !n.is_empty()).cloned() else {
            return Ok(());
        };
        if let Some(v) = self.value(src) {
            let mut v = v.clone();
            v.shape = shape;
            let id = self.graph.add_constant(name.clone(), v);
            self.names.insert(name, id);
            return Ok(());
        }
        let dtype = self.dtype(src);
        let id = self.graph.add_tensor(name.clone(), dtype, shape);
        self.graph.tensors[id].alias_of = Some(self.graph.root(src));
        self.names.insert(name, id);
        Ok(())
    }

    /// An internal tensor (not named in the ONNX graph).
    pub fn temp(&mut self, node: &Node, what: &str, dtype: DType, shape: Vec<usize>) -> TensorId {
        self.graph.add_tensor(
            format!("{}:{what}", node.label()),
            computed_dtype(dtype),
            shape,
        )
    }

    /// A view of `src` under another shape, as a new internal tensor.
    pub fn temp_alias(
        &mut self,
        node: &Node,
        what: &str,
        src: TensorId,
        shape: Vec<usize>,
    ) -> TensorId {
        if let Some(v) = self.value(src) {
            let mut v = v.clone();
            v.shape = shape;
            return self
                .graph
                .add_constant(format!("{}:{what}", node.label()), v);
        }
        let dtype = self.dtype(src);
        let id = self.temp(node, what, dtype, shape);
        self.graph.tensors[id].alias_of = Some(self.graph.root(src));
        id
    }

    /// Appends an op, or runs it right away on the host when all its inputs are constants.
    pub fn emit(
        &mut self,
        node: &Node,
        op: Op,
        inputs: Vec<Option<TensorId>>,
        outputs: Vec<TensorId>,
    ) -> Result<(), Reason> {
        let op = crate::compile::ir::PlanOp {
            name: node.label(),
            op,
            inputs,
            outputs,
        };
        let constant = op
            .inputs
            .iter()
            .flatten()
            .all(|&t| self.graph.tensors[t].value.is_some());
        if constant {
            fold::run_on_host(&mut self.graph.tensors, std::slice::from_ref(&op))?;
            self.keep_quantization(&op);
        } else {
            self.graph.ops.push(op);
        }
        Ok(())
    }

    /// Records how a folded dequantization made its output (and carries that through a folded
    /// transpose), so the quantization pass can recover the integers.
    fn keep_quantization(&mut self, op: &crate::compile::ir::PlanOp) {
        let t = &self.graph.tensors;
        let quantized = match op.op {
            Op::Dequantize { axis } => {
                let (Some(x), Some(scale)) = (op.inputs[0], op.inputs[1]) else {
                    return;
                };
                let scale = t[scale].value.as_ref().map(HostTensor::to_f32s);
                let zero = match op.inputs.get(2).copied().flatten() {
                    Some(z) => t[z].value.as_ref().map(HostTensor::to_i64s),
                    None => scale.as_ref().map(|s| vec![0; s.len()]),
                };
                match (scale, zero) {
                    (Some(scale), Some(zero)) => Some(crate::compile::ir::Quantized {
                        dtype: t[x].dtype,
                        scale,
                        zero,
                        axis,
                    }),
                    _ => None,
                }
            }
            Op::Transpose { perm } => op.inputs[0].and_then(|x| {
                let q = t[x].quantized.clone()?;
                let rank = t[x].shape.len();
                let axis = (0..rank).find(|&i| perm[i] == q.axis)?;
                Some(crate::compile::ir::Quantized { axis, ..q })
            }),
            _ => None,
        };
        if let (Some(q), Some(&out)) = (quantized, op.outputs.first()) {
            self.graph.tensors[out].quantized = Some(q);
        }
    }

    /// Requires every listed tensor to be `float32` (runtime compute is f32 in this version).
    pub fn require_f32(&self, tensors: &[TensorId]) -> Result<(), Reason> {
        for &t in tensors {
            let d = self.dtype(t);
            if d != DType::F32 {
                return Err(format!(
                    "type {d} is not supported for this op (float32 only)"
                ));
            }
        }
        Ok(())
    }

    /// The tensor for a graph output name.
    pub fn lookup(&self, name: &str) -> Option<TensorId> {
        self.names.get(name).copied()
    }

    /// Whether a value is unknown (its producer could not be lowered).
    pub fn is_unknown(&self, name: &str) -> bool {
        self.unknown.contains(name)
    }
}

/// The type a value of `dtype` is computed in: f32 for the interface float types.
pub fn computed_dtype(dtype: DType) -> DType {
    if dtype.is_interface_float() {
        DType::F32
    } else {
        dtype
    }
}

/// `value` in the type it is computed in ([`computed_dtype`]).
pub(super) fn computed(value: HostTensor) -> HostTensor {
    if value.dtype.is_interface_float() {
        value.cast(DType::F32)
    } else {
        value
    }
}

/// The element count of `shape`, or an error past [`crate::compile::tensor::MAX_CONSTANT_ELEMENTS`]
/// (every tensor Ferrite plans is bounded, so later shape arithmetic cannot overflow).
pub fn bounded(shape: &[usize]) -> Result<usize, Reason> {
    crate::compile::tensor::checked_elements(shape)
        .ok_or_else(|| format!("a tensor of shape {shape:?} is too large"))
}

/// Normalises a possibly negative axis against `rank`.
pub fn normalize_axis(axis: i64, rank: usize) -> Result<usize, Reason> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if (0..r).contains(&a) {
        Ok(a as usize)
    } else {
        Err(format!("axis {axis} is out of range for rank {rank}"))
    }
}
