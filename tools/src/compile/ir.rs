//! The planning IR: tensors with static shapes and ops already in Ferrite's normalised form.
//!
//! Lowering turns ONNX nodes into this; passes rewrite it; the planner assigns memory; the writer
//! encodes it. A tensor is a runtime value, a constant (`value`), or an alias (`alias_of`) that
//! shares another tensor's bytes under a different shape (Reshape, Flatten, Squeeze, ...).

use crate::compile::tensor::HostTensor;
use ferrite_hal::{DType, Op};

/// Index of a tensor in [`PlanGraph::tensors`].
pub type TensorId = usize;

/// A tensor of the plan.
#[derive(Clone, Debug)]
pub struct Tensor {
    /// Name (from ONNX, or made up for tensors the planner adds).
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Static shape.
    pub shape: Vec<usize>,
    /// Known value (constants and folded results): stored in the weights.
    pub value: Option<HostTensor>,
    /// Shares the bytes of this (root) tensor.
    pub alias_of: Option<TensorId>,
    /// For a constant dequantized from integers at pack time: how, so that a pass can run the
    /// op that reads it in integers (see `crate::compile::quantize`).
    pub quantized: Option<Quantized>,
}

/// How a float constant was made from integers: `value = (q - zero) * scale`, per tensor or per
/// element along `axis`.
#[derive(Clone, Debug, PartialEq)]
pub struct Quantized {
    /// The integers' type (int8, uint8 or int32).
    pub dtype: DType,
    /// One scale, or one per element along `axis`.
    pub scale: Vec<f32>,
    /// Zero points, like `scale`.
    pub zero: Vec<i64>,
    /// The per-channel axis (meaningless for one scale).
    pub axis: usize,
}

impl Quantized {
    /// The parameter index of element `i` of a tensor of `shape`.
    pub fn channel(&self, i: usize, shape: &[usize]) -> usize {
        if self.scale.len() == 1 {
            return 0;
        }
        let inner: usize = shape[self.axis + 1..].iter().product();
        (i / inner.max(1)) % self.scale.len()
    }

    /// The integers behind `values`: exact, because each value is `(q - zero) * scale` rounded
    /// once in f32 and `|q - zero|` is far below 2^22.
    pub fn integers(&self, values: &[f32], shape: &[usize]) -> Vec<i64> {
        values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let c = self.channel(i, shape);
                (v / self.scale[c]).round_ties_even() as i64 + self.zero[c]
            })
            .collect()
    }
}

impl Tensor {
    /// Size in bytes.
    pub fn bytes(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.size()
    }
}

/// An op of the plan.
#[derive(Clone, Debug)]
pub struct PlanOp {
    /// Name of the ONNX node it came from.
    pub name: String,
    /// What it computes.
    pub op: Op,
    /// Inputs (`None` = absent optional input).
    pub inputs: Vec<Option<TensorId>>,
    /// Outputs.
    pub outputs: Vec<TensorId>,
}

/// A whole plan before memory assignment.
#[derive(Clone, Debug, Default)]
pub struct PlanGraph {
    /// Every tensor.
    pub tensors: Vec<Tensor>,
    /// Ops in execution order.
    pub ops: Vec<PlanOp>,
    /// Graph inputs.
    pub inputs: Vec<TensorId>,
    /// Graph outputs.
    pub outputs: Vec<TensorId>,
    /// The scale and zero point of each quantized graph input and output (an integer input
    /// dequantized by its first consumer, an integer output quantized by its producer).
    pub io_quantization: std::collections::BTreeMap<TensorId, (f32, i64)>,
    /// What packing assumed and the report says (a symbolic batch dimension taken as 1).
    pub notes: Vec<String>,
}

impl PlanGraph {
    /// Records [`PlanGraph::io_quantization`] from the lowered graph, before passes fuse the
    /// Dequantize and Quantize ops at its borders into integer ops: per-tensor parameters only
    /// (a per-channel input or output has no one scale to report).
    pub fn record_io_quantization(&mut self) {
        let scalar_f32 = |g: &PlanGraph, t: Option<TensorId>| -> Option<f32> {
            let v = g.tensors.get(t?)?.value.as_ref()?.to_f32s();
            (v.len() == 1).then(|| v[0])
        };
        let scalar_i64 = |g: &PlanGraph, t: Option<TensorId>| -> Option<i64> {
            let Some(t) = t else { return Some(0) };
            let v = g.tensors.get(t)?.value.as_ref()?.to_i64s();
            (v.len() == 1).then(|| v[0])
        };
        // The tensors holding the same values as `t`: its aliases (Reshape, Flatten, ...) and
        // what Transpose and Copy make of them, transitively.
        let same_values = |g: &PlanGraph, t: TensorId| -> Vec<TensorId> {
            let mut set = vec![t];
            loop {
                let before = set.len();
                for (id, tensor) in g.tensors.iter().enumerate() {
                    if tensor.alias_of.is_some_and(|a| set.contains(&a)) && !set.contains(&id) {
                        set.push(id);
                    }
                }
                for op in &g.ops {
                    let moves = matches!(op.op, Op::Transpose { .. } | Op::Copy);
                    let from = op.inputs.first().copied().flatten();
                    if moves && from.is_some_and(|f| set.contains(&f)) {
                        for &o in &op.outputs {
                            if !set.contains(&o) {
                                set.push(o);
                            }
                        }
                    }
                }
                if set.len() == before {
                    return set;
                }
            }
        };
        let mut found = std::collections::BTreeMap::new();
        for &input in &self.inputs {
            let values = same_values(self, input);
            let dequantize = self.ops.iter().find(|op| {
                matches!(op.op, Op::Dequantize { .. })
                    && op
                        .inputs
                        .first()
                        .copied()
                        .flatten()
                        .is_some_and(|x| values.contains(&x))
            });
            if let Some(op) = dequantize {
                let scale = scalar_f32(self, op.inputs.get(1).copied().flatten());
                let zero = scalar_i64(self, op.inputs.get(2).copied().flatten());
                if let (Some(scale), Some(zero)) = (scale, zero) {
                    found.insert(input, (scale, zero));
                }
            }
        }
        // Each Quantize op with the tensors holding its output's values (worked out once).
        let quantized: Vec<(&PlanOp, Vec<TensorId>)> = self
            .ops
            .iter()
            .filter(|op| matches!(op.op, Op::Quantize { .. }))
            .filter_map(|op| Some((op, same_values(self, *op.outputs.first()?))))
            .collect();
        for &output in &self.outputs {
            // The output itself, or an alias or Transpose of a Quantize's output.
            let quantize = quantized
                .iter()
                .find(|(_, values)| values.contains(&output));
            if let Some((op, _)) = quantize {
                let scale = scalar_f32(self, op.inputs.get(1).copied().flatten());
                let zero = scalar_i64(self, op.inputs.get(2).copied().flatten());
                if let (Some(scale), Some(zero)) = (scale, zero) {
                    found.insert(output, (scale, zero));
                }
            }
        }
        let integer = |g: &PlanGraph, t: TensorId| {
            matches!(
                g.tensors[t].dtype,
                DType::I8 | DType::U8 | DType::I16 | DType::U16
            )
        };
        found.retain(|&t, &mut (scale, _)| integer(self, t) && scale.is_finite() && scale > 0.0);
        self.io_quantization = found;
    }

    /// Adds a tensor and returns its id.
    pub fn add_tensor(
        &mut self,
        name: impl Into<String>,
        dtype: DType,
        shape: Vec<usize>,
    ) -> TensorId {
        self.tensors.push(Tensor {
            name: name.into(),
            dtype,
            shape,
            value: None,
            alias_of: None,
            quantized: None,
        });
        self.tensors.len() - 1
    }

    /// Adds a constant tensor.
    pub fn add_constant(&mut self, name: impl Into<String>, value: HostTensor) -> TensorId {
        let id = self.add_tensor(name, value.dtype, value.shape.clone());
        self.tensors[id].value = Some(value);
        id
    }

    /// The tensor whose bytes `t` uses (itself unless it is an alias).
    pub fn root(&self, mut t: TensorId) -> TensorId {
        while let Some(r) = self.tensors[t].alias_of {
            t = r;
        }
        t
    }

    /// The graph inputs `t` is computed from (through ops and views), in input order: what a
    /// refusal of a run-time value names, so the user knows which input to freeze.
    pub fn inputs_feeding(&self, t: TensorId) -> Vec<TensorId> {
        let mut seen = vec![false; self.tensors.len()];
        let mut todo = vec![t];
        while let Some(t) = todo.pop() {
            if std::mem::replace(&mut seen[t], true) {
                continue;
            }
            if let Some(src) = self.tensors[t].alias_of {
                todo.push(src);
            }
            for op in self.ops.iter().filter(|op| op.outputs.contains(&t)) {
                todo.extend(op.inputs.iter().flatten());
            }
        }
        self.inputs.iter().copied().filter(|&i| seen[i]).collect()
    }

    /// Number of ops reading `t` (directly).
    pub fn readers(&self, t: TensorId) -> usize {
        self.ops
            .iter()
            .map(|op| op.inputs.iter().filter(|i| **i == Some(t)).count())
            .sum()
    }

    /// The op producing `t`, if any.
    pub fn producer(&self, t: TensorId) -> Option<usize> {
        self.ops.iter().position(|op| op.outputs.contains(&t))
    }

    /// Whether `t` is needed by anything besides ops: a graph output, or aliased by another tensor.
    pub fn is_pinned(&self, t: TensorId) -> bool {
        self.outputs.contains(&t) || self.tensors.iter().any(|x| x.alias_of == Some(t))
    }
}
